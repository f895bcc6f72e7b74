#!/usr/bin/env bash
# Regenerates tests/golden/v<N>/ for the current format version with engramctl itself. Golden
# files of released versions are never regenerated: every later engramctl must still open them and
# dump them exactly as recorded (tests/golden/check_golden.sh, ctest label "golden").
#   ./scripts/make_golden.sh [ENGRAMCTL]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
E=$(realpath "${1:-$root/build/bin/engramctl}")
out="$root/tests/golden/v3.4"  # the current format version (v3: 3.0 files, v3.1: 3.1 files, ...)
assets="${ENGRAM_ASSETS:-$root/build/assets}"
mkdir -p "$out"
cd "$out"
export SOURCE_DATE_EPOCH=1767225600   # 2026-01-01, so headers and provenance are reproducible
/usr/bin/python3 - <<'PY'
import array, random
r = random.Random(3)
toks = []
for d in range(30):
    for i in range(r.randint(1, 80)):
        toks.append(min(int(r.paretovariate(1.2)) - 1, 63))
    toks.append(0xFFFFFFFF)
open("corpus.u32", "wb").write(array.array("I", toks).tobytes())
PY
printf '%s\n' "the cat and the hat sat on the mat" "Hello world, the end" "a man and a plan and a canal" \
  "the the the of of and" > corpus.txt
$E -q build --tokens corpus.u32 --vocab-size 64 --layers 1,2 --order 3 --heads 2 --buckets 32 --row-dim 32 \
  --init normal --seed 1 -o native_f32.engram
$E -q build --tokens corpus.u32 --vocab-size 64 --addressing deepseek --layers 1,15 --order 3 --heads 2 \
  --buckets 31 --row-dim 32 --dtype fp8-e4m3 --init normal --seed 2 -o deepseek_fp8.engram
$E -q build --corpus corpus.txt --tokenizer ../../data/tiny_tokenizer.json --layers 3 --order 2 --heads 4 \
  --buckets 16 --row-dim 16 --dtype bf16 --pad-id 285 --init normal --seed 3 -o canon_bf16.engram
$E -q build --tokens corpus.u32 --vocab-size 64 --layers 0 --order 4 --heads 1 --buckets 8 --row-dim 8 \
  --dtype f16 --no-stats --init normal --seed 4 -o nostats_f16.engram
# A committed append, so the journal and the commit slots (§5.6) are covered too.
/usr/bin/python3 -c "
import json
for i in range(3): print(json.dumps({'canonical_ids': [5, 6 + i], 'value': [0.5 + i] * 32}))" > entries.jsonl
$E -q append native_f32.engram --entries entries.jsonl >/dev/null
rm entries.jsonl
# The fact ledger (§3.7, §5.7): a small random model, one fact fitted and folded (FACTS), a second
# fitted and left in the journal (a fact record).
T="$assets/deepseek_v3/tokenizer.json"
fp=$($E tokenize --tokenizer "$T" --info --json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['fingerprint'])")
model=$(mktemp -d)
trap 'rm -rf "$model"' EXIT
/usr/bin/python3 "$root/tests/model_parity/make_random_model.py" "$model" v41 "$fp" >/dev/null
cp "$T" "$model/tokenizer.json"
$E -q build --tokenizer "$T" --corpus corpus.txt --layers 0,2 --order 3 --heads 2 --buckets 1024 --row-dim 16 \
  --pad-id 2 --values "$model" --tensor engram.table.weight -o ledger_f32.engram
printf '[model]\npath = "%s"\n[engram]\nngram_order = 3\nhash_buckets = 1024\nn_heads = 2\nembed_dim = 32\nlayer_ids = [0, 2]\ndeterministic_addressing = false\n[engram.table]\npath = "%s"\n' \
  "$model" "$PWD/ledger_f32.engram" > "$model/c.toml"
printf '%s\n' '{"prompt": "The cat and the hat sat on the", "target": " mat"}' > "$model/a.jsonl"
printf '%s\n' '{"prompts": ["A man and a plan and a", "a man, a plan, a"], "target": " canal"}' > "$model/b.jsonl"
$E -q append --config "$model/c.toml" --entries "$model/a.jsonl" -t 1 >/dev/null
$E -q sort-buckets ledger_f32.engram
$E -q append --config "$model/c.toml" --entries "$model/b.jsonl" -t 1 >/dev/null
$E facts ledger_f32.engram --json > ledger_f32.facts.json
# 3.4: the row encodings it added (§4): int8, int4, and fp8 rows of 16 values (one short scale
# block); the int8 table takes native_f32's journal in. 3.4 changed nothing else, so the other
# tables stay as v3.3 recorded them.
$E -q quantize native_f32.engram -o native_int8.engram --dtype int8
$E -q quantize native_f32.engram -o native_int4.engram --dtype int4
$E -q quantize canon_bf16.engram -o canon_fp8.engram --dtype fp8-e4m3
rm -f native_f32.* deepseek_fp8.* canon_bf16.* nostats_f16.* ledger_f32.* corpus.u32 corpus.txt
for t in *.engram; do
  $E inspect "$t" --stats --json > "${t%.engram}.inspect.json"
done
echo "make_golden: wrote $(ls *.engram | wc -l) tables to $out" >&2
