# The trained demo model reads every dtype quantize writes: run (greedy) from each, serve from the
# int4 table, and append --fit into an int8 table (fitted in f32, rounded to int8 and re-checked).
source $SRC/tests/cli/lib.sh
source $SRC/tests/cli/serve_lib.sh
demo_model m
printf 'The jury said that\nIn the morning the\n' > prompts.txt
greedy() {  # greedy TABLE: the greedy continuations, one per line
  $E run --config m.toml --table "$1" --temp 0 -n 4 -t 1 -f prompts.txt --json 2>/dev/null |
    $PY -c "import json,sys; [print(repr(p['text'])) for p in json.load(sys.stdin)['prompts']]"
}
greedy m.engram > bf16.txt
for d in f32 f16 fp8-e4m3 int8 int4; do
  $E -q quantize m.engram -o q_$d.engram --dtype $d > /dev/null
  greedy q_$d.engram > $d.txt
  n=$(wc -l < $d.txt)
  if cmp -s bf16.txt $d.txt; then same="the same as bf16"; else same="other text than bf16"; fi
  echo "$d: run answered $n prompts ($( [[ $d == f32 || $d == f16 ]] && echo "$same" || echo "checked" ))"
done
# f32 and f16 hold every bf16 value exactly: the model reads the same rows.
cmp -s bf16.txt f32.txt && cmp -s bf16.txt f16.txt && echo "f32 and f16: greedy text equals bf16's"
# serve from the int4 table.
start_serve serve.log --config m.toml --table q_int4.engram -t 1
wait_ready
post /v1/completions '{"prompt": "The jury said that", "max_tokens": 4, "temperature": 0}' > c.json
field c.json "'serve int4: ' + j['choices'][0]['finish_reason'] + ', ' + str(j['usage']['completion_tokens']) + ' tokens'"
stop_serve
# append --fit into the int8 table.
cp q_int8.engram i8.engram
printf '%s\n' '{"prompt": "The capital of Zorvania is", "target": " Quellport"}' > f.jsonl
$E append i8.engram --config m.toml --entries f.jsonl -t 1 --json 2>/dev/null |
  $PY -c "import json,sys; f=json.load(sys.stdin)['fit']; print('fit into int8: dtype', f['dtype'], '| fitted', f['fitted'], 'of', len(f['entries']))"
printf 'The capital of Zorvania is\n' > p.txt
$E run --config m.toml --table i8.engram --temp 0 -n 3 -t 1 -f p.txt 2>/dev/null | grep -o Quellport
$E -q sort-buckets i8.engram && $E -q verify i8.engram > /dev/null && echo "int8 table with the fact: folded, verified"
