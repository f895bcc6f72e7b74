source $SRC/tests/cli/lib.sh
tiny_tokens t.u32
echo good > t.engram
$E build --tokens t.u32 --vocab-size 5 -o t.engram || { code=$?; [[ $(cat t.engram) == good ]] && exit $code; }
