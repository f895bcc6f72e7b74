source $SRC/tests/cli/lib.sh; tiny_table t.engram; $E verify t.engram
