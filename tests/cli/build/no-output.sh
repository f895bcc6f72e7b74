source $SRC/tests/cli/lib.sh; tiny_tokens t.u32; $E build --tokens t.u32 --vocab-size 16
