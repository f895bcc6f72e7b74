# Numbers and inputs every command takes the same way (issue 32): a floating-point flag must be
# finite (nan, inf, 1e999 refused with exit 2 and the flag named), --threads is bounded by the
# machine, append --fit's rates are range-checked, a table can be named by --config on the
# commands that read one, export and merge print --json, and a pipe works as --entries.
source $SRC/tests/cli/lib.sh
tiny_table real.engram
entry "[1,4]" 0.5 > a.jsonl
try() {  # try CMD...: exit status and the message's tail after the flag
  set +e; "$@" > out.txt 2> err.txt; local rc=$?; set -e
  echo "exit $rc: $(head -n 1 err.txt | sed 's/^engramctl [a-z-]*: //; s/this machine.s [0-9]* hardware threads; give at most [0-9]*/this machine'"'"'s N hardware threads; give at most 8N/')"
}
try $E run x --temp nan
try $E run x --top-p inf
try $E run x --repeat-penalty 1e999
try $E verify real.engram -t 100000
try $E verify real.engram -t -1
try $E append real.engram --entries a.jsonl --fit --lr 0
try $E append real.engram --entries a.jsonl --fit --lr 1000
try $E append real.engram --entries a.jsonl --fit --margin -1
try $E append real.engram --entries a.jsonl --fit --l2 nan
printf '[engram.table]\npath = "real.engram"\n' > c.toml
$E inspect --config c.toml | head -n 1
$E prefetch --config c.toml --status | head -n 1 | sed 's/ [0-9.]* KiB of [0-9.]* KiB.*//'
$E export --config c.toml -o x.safetensors --json | $PY -c "import json,sys; d=json.load(sys.stdin); print('export json:', d['output'], d['tensors'], d['journal_rows'])"
try $E sort-buckets
# A pipe as --entries (bash process substitution): read once into a temporary file.
$E -q append real.engram --entries <(cat a.jsonl) --json | $PY -c "import json,sys; d=json.load(sys.stdin); print('piped entries appended:', d['entries'])"
$E verify real.engram --json | $PY -c "import json,sys; d=json.load(sys.stdin); print('journal entries:', d['journal_entries'])"
