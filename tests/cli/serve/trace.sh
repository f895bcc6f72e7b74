# serve --trace FILE: every request's canonical ids (prompt, then the tokens generated), u32 with
# 0xFFFFFFFF after each, appended as requests finish; hotset --tokens and prefetch --hot read it.
source $SRC/tests/cli/lib.sh
source $SRC/tests/cli/serve_lib.sh
demo_model m
start_serve serve.log --config m.toml -t 1 --trace trace.u32
wait_ready
post /v1/completions '{"prompt": "The jury said that", "max_tokens": 3, "temperature": 0}' > a.json
post /v1/completions '{"prompt": "In the morning the", "max_tokens": 2, "temperature": 0}' > b.json
stop_serve
echo "serve exit: $SERVE_EXIT"
for p in "The jury said that" "In the morning the"; do
  $E tokenize --tokenizer m/tokenizer.json --canonical --json "$p" | $PY -c "import json,sys; print(json.dumps(json.load(sys.stdin)['ids']))"
done > prompts.jsonl
$PY - <<'PY'
import array, json
ids = array.array("I", open("trace.u32", "rb").read()).tolist()
reqs, cur = [], []
for i in ids:
    if i == 0xFFFFFFFF:
        reqs.append(cur); cur = []
    else:
        cur.append(i)
print("requests in the trace:", len(reqs), "| nothing after the last separator:", cur == [])
prompts = [json.loads(l) for l in open("prompts.jsonl")]
usage = [json.load(open(f))["usage"] for f in ("a.json", "b.json")]
for r, p, u in zip(reqs, prompts, usage):
    print("starts with the prompt's canonical ids:", r[:len(p)] == p, "| prompt + generated:",
          len(r) == u["prompt_tokens"] + u["completion_tokens"])
PY
$E hotset --config m.toml --tokens trace.u32 --json | $PY -c "import json,sys; j=json.load(sys.stdin); print('hotset reads it:', j['lookups'], 'lookups')"
$E prefetch m.engram --hot trace.u32 --budget 8M --json | $PY -c "import json,sys; j=json.load(sys.stdin); print('prefetch --hot reads it:', j['ranked_by'], j['row_pages'] > 0)"
