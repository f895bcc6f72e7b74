# With deterministic_addressing = false, a fact appended while serve runs is answered by the very
# next request (journal overlay, no restart): generation and journal commits go up, the appended
# n-gram now hits, and the reply equals what a fresh `run` gives on the appended table.
source $SRC/tests/cli/lib.sh
source $SRC/tests/cli/serve_lib.sh
random_model m v41
sed -i 's/^ngram_order = 3$/ngram_order = 3\ndeterministic_addressing = false/' m.toml
T=$ASSETS/deepseek_v3/tokenizer.json
P="The purple quokka"
REQ="{\"prompt\":\"$P\",\"max_tokens\":6,\"temperature\":0}"
start_serve serve.log --config m.toml -t 1
wait_ready
post /v1/completions "$REQ" > before.json
field before.json '"before:", j["engram"]["table_generation"], j["engram"]["journal_commits"], j["engram"]["prompt"]["hits"]'
$PY -c "import json; print(json.dumps({'text': ' purple quokka', 'value': [0.5] * 16}))" > e.jsonl
$E -q append --config m.toml --entries e.jsonl --tokenizer $T
post /v1/completions "$REQ" > after.json
field after.json '"after:", j["engram"]["table_generation"], j["engram"]["journal_commits"], j["engram"]["journal_entries"], j["engram"]["prompt"]["hits"]'
curl -s --max-time 10 "$URL/metrics" | grep -E '^engram_(table_generation|journal_commits|journal_entries) '
stop_serve
$E run --config m.toml "$P" -n 6 --temp 0 -t 1 > run_after.txt 2>/dev/null
$PY -c "import json; a=json.load(open('after.json'))['choices'][0]['text']; b=json.load(open('before.json'))['choices'][0]['text']; print('reply changed:', a != b, 'equals run on the appended table:', '$P' + a + '\n' == open('run_after.txt').read())"
grep -o '^\[engram\] table generation 2: m.engram (1 journal commits, 4 entries overlaid)$' serve.log
grep -cE '^\[engram\] request 2: .*\(table generation 2\)$' serve.log
