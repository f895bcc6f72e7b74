# With deterministic_addressing = true, an append while serve runs leaves the last folded state
# serving (said once, with the sort-buckets fix); the `sort-buckets` fold (in place: the same file,
# while serve has it mapped) is picked up by the next request, which then equals a fresh `run` on
# the folded table.
source $SRC/tests/cli/lib.sh
source $SRC/tests/cli/serve_lib.sh
random_model m v41
T=$ASSETS/deepseek_v3/tokenizer.json
P="The purple quokka"
REQ="{\"prompt\":\"$P\",\"max_tokens\":6,\"temperature\":0}"
start_serve serve.log --config m.toml -t 1
wait_ready
post /v1/completions "$REQ" > before.json
$PY -c "import json; print(json.dumps({'text': ' purple quokka', 'value': [0.5] * 16}))" > e.jsonl
$E -q append m.engram --entries e.jsonl --tokenizer $T
post /v1/completions "$REQ" > stale1.json
post /v1/completions "$REQ" > stale2.json
$PY -c "
import json
b, s1, s2 = (json.load(open(f)) for f in ('before.json', 'stale1.json', 'stale2.json'))
print('unfolded journal: generation', s2['engram']['table_generation'], 'stale', s2['engram']['table_stale'],
      'same reply as before:', s1['choices'][0]['text'] == b['choices'][0]['text'] == s2['choices'][0]['text'])"
grep -c "has appended entries that are not folded; with deterministic addressing the server keeps serving table generation 1 (the last folded state): run 'engramctl sort-buckets m.engram'" serve.log
ino_before=$(stat -c %i m.engram)
$E -q sort-buckets m.engram
[[ $(stat -c %i m.engram) == "$ino_before" ]] && echo "folded in place"
post /v1/completions "$REQ" > folded.json
field folded.json '"after fold:", j["engram"]["table_generation"], j["engram"]["table_stale"], j["engram"]["prompt"]["hits"]'
stop_serve
$E run --config m.toml "$P" -n 6 --temp 0 -t 1 > run_folded.txt 2>/dev/null
$PY -c "import json; a=json.load(open('folded.json'))['choices'][0]['text']; print('equals run on the folded table:', '$P' + a + '\n' == open('run_folded.txt').read())"
