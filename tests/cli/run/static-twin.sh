# The statically linked engramctl (README, "Options") hands run, serve and an append of entries
# to fit to its dynamically linked twin, lib/engramctl-shared, with the command line as given;
# every other command runs without it; a missing twin is named, never a crash.
source $SRC/tests/cli/lib.sh
twin=$(cd "$(dirname "$E")/../lib" && pwd)/engramctl-shared
ldd "$E" > /dev/null 2>&1 && echo "engramctl: dynamic" || echo "engramctl: static"
ldd "$twin" | grep -q 'libc\.so' && echo "engramctl-shared: dynamic"
tiny_table t.engram
printf '[model]\npath = "m"\n[engram.table]\npath = "t.engram"\n' > c.toml
two_facts facts.jsonl
entry "[1, 2]" 1.0 > e.jsonl
printf '#!/bin/sh\nprintf "twin got:"; printf " [%%s]" "$@"; echo\n' > fake-twin; chmod +x fake-twin
export ENGRAM_SHARED_CLI=$PWD/fake-twin
$E run --config x.toml "two words" -n 2
$E -q serve --port 1
$E append --config c.toml --entries facts.jsonl --fit
$E append --config c.toml --entries facts.jsonl
$E -q append t.engram --entries e.jsonl --json | $PY -c "import json,sys; print('rows, not facts:', json.load(sys.stdin)['entries'], 'entry appended here')"
unset ENGRAM_SHARED_CLI
mkdir -p alone/bin; cp "$E" alone/bin/engramctl
alone/bin/engramctl -q sort-buckets t.engram && alone/bin/engramctl -q verify t.engram > /dev/null && echo "sort-buckets, verify: ok alone"
alone/bin/engramctl -q prefetch t.engram && echo "prefetch: ok alone"
for cmd in "run --model m hi" "serve --model m" "append --config c.toml --entries facts.jsonl"; do
  code=0; alone/bin/engramctl $cmd > /dev/null 2> err.txt || code=$?
  echo "${cmd%% *} alone: exit $code: $(grep -c 'none could be run' err.txt) message, $(grep -c "alone/bin/../lib/engramctl-shared: No such file" err.txt) path"
done
alone/bin/engramctl -q verify t.engram > /dev/null && echo "the table verifies after the refused append"
ENGRAM_SHARED_CLI=$twin alone/bin/engramctl run --help | head -n 1
cp "$E" static-copy
code=0; ENGRAM_SHARED_CLI=$PWD/static-copy alone/bin/engramctl run --model m hi > /dev/null 2> err.txt || code=$?
echo "a static twin: exit $code: $(grep -c 'statically linked too' err.txt) message"
