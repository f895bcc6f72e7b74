#!/usr/bin/env bash
# Regenerates the seed corpora in tests/fuzz/corpus/ from real files made by engramctl itself.
# (Golden tables, configs and the tiny tokenizer are used in place by the replay tests.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
E=$root/build/bin/engramctl
C=$root/tests/fuzz/corpus
mkdir -p "$C"/{journal,safetensors,entries,units,config}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# journal: records appended to the journal target's own base
: > "$tmp/empty"
ENGRAM_FUZZ_WRITE_BASE=$tmp/base.engram "$root/build/bin/fuzz_journal_replay" "$tmp/empty" > /dev/null
base=$(stat -c %s "$tmp/base.engram")
printf '{"canonical_ids": [1, 2], "value": %s}\n{"canonical_ids": [3, 4, 5], "value": %s, "layer": 2}\n' \
  "$(/usr/bin/python3 -c 'print([0.5]*32)')" "$(/usr/bin/python3 -c 'print([-1.0]*32)')" > "$tmp/e.jsonl"
$E -q append "$tmp/base.engram" --entries "$tmp/e.jsonl" > /dev/null
tail -c +$((base + 1)) "$tmp/base.engram" > "$C/journal/two-commits"
$E -q append "$tmp/base.engram" --entries "$tmp/e.jsonl" > /dev/null
tail -c +$((base + 1)) "$tmp/base.engram" > "$C/journal/four-commits"
head -c 700 "$C/journal/four-commits" > "$C/journal/torn-tail"
# safetensors
/usr/bin/python3 - "$C/safetensors" <<'PY'
import json, struct, sys
d = sys.argv[1]
def st(name, hdr, body):
    h = json.dumps(hdr).encode(); h += b" " * ((8 - len(h) % 8) % 8)
    open(f"{d}/{name}", "wb").write(struct.pack("<Q", len(h)) + h + body)
st("two-tensors", {"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                   "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]}}, bytes(22))
st("fp8-scales", {"w": {"dtype": "F8_E4M3", "shape": [4, 32], "data_offsets": [0, 128]},
                  "s": {"dtype": "F8_E8M0", "shape": [4, 1], "data_offsets": [128, 132]}}, bytes(132))
st("empty", {}, b"")
PY
# entries
printf '{"canonical_ids": [1, 2], "value": [1, 2, 3, 4]}\n{"ids": [3, 4, 5], "value": [0, 0, 0, 0], "layer": 3, "head": 1}\n' > "$C/entries/valid"
printf '{"canonical_ids": [1], "value": [1]}\nnot json\n{"text": "x", "value": [1,2,3,4]}\n' > "$C/entries/invalid"
printf '{"canonical_ids": [1, 2], "value_ref": {"file": "x.safetensors", "tensor": "w", "row": 0}}\n' > "$C/entries/value-ref"
# units
for s in 4G 512MiB 1.5K 50% 1/4 3/3 0 99999999999999999999 12.5T 1e3 -1 7EiB; do printf '%s' "$s" > "$C/units/$(echo "$s" | tr '/%.' '_pd')"; done
# config: broken variants of the skeleton (valid ones are replayed from schemas/ and examples/)
sed 's/hash_buckets = 2000000/hash_buckets = "many"/' "$root/schemas/skeleton.toml" > "$C/config/bad-type"
printf '[engram]\nngram_order = 99\n[api]\napi_key = "sk-x"\n[[weird]]\n' > "$C/config/bad-values"
echo "make_fuzz_seeds: seeds in $C" >&2
