# -o into a directory that does not exist fails at once (before any input is read), naming the
# directory and the command that creates it; nothing is written. Before, it failed only after the
# whole build, naming the writer's temp file.
source $SRC/tests/cli/lib.sh; tiny_tokens t.u32
$E build --tokens t.u32 --vocab-size 16 --layout engram-demo -o out/t.engram 2>err && exit 1
cat err >&2
[[ ! -e out ]]
! grep -q 'tmp\.' err
