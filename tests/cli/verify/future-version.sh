source $SRC/tests/cli/lib.sh
tiny_table t.engram
printf '\x04' | dd of=t.engram bs=1 seek=8 conv=notrunc 2>/dev/null
$E verify t.engram
