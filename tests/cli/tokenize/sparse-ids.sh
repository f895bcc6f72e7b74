# A tokenizer.json whose ids leave a huge gap must be refused before anything is sized by them
# (a fuzzed file made one vocab id 2e9 and asked for 64 GB).
$PY - "$SRC/tests/data/tiny_tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
a = json.loads(json.dumps(t)); k = next(iter(a["model"]["vocab"])); a["model"]["vocab"][k] = 2000000000
json.dump(a, open("vocab.json", "w"))
b = json.loads(json.dumps(t)); b.setdefault("added_tokens", []).append({"id": 1500000000, "content": "<x>", "special": True})
json.dump(b, open("added.json", "w"))
PY
for f in vocab.json added.json; do
  $E tokenize --tokenizer $f "hello" 2>&1 | sed 's/^.*: //' || true
  $E tokenize --tokenizer $f "hello" > /dev/null 2>&1 || echo "exit $?"
done
