source $SRC/tests/cli/lib.sh
tiny_table t.engram
$E lookup t.engram --canonical-ids 5
