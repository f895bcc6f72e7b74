source $SRC/tests/cli/lib.sh; $E
