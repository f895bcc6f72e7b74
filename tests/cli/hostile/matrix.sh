# The bad-input matrix (issue 7): every file type x every kind of damage, bad paths, a read-only
# directory, a full disk during build and append. Each case must fail with exit 1..4 and one
# "engramctl <verb>: ..." line (never a crash or a hang), and the existing table must keep its
# checksums and pass verify.
source $SRC/tests/cli/lib.sh
T=$ASSETS/deepseek_v3/tokenizer.json
tiny_table good.engram
cp good.engram keep.engram
sum_before=$(sha256sum keep.engram | cut -d' ' -f1)
fails=0
check() {  # check NAME CMD...: must fail cleanly
  local name=$1; shift
  set +e
  timeout 60 "$@" > out.txt 2> err.txt
  local code=$?
  set -e
  local first; first=$(head -n 1 err.txt)
  if [[ $code -lt 1 || $code -gt 4 ]]; then echo "FAIL $name: exit $code"; cat err.txt; fails=$((fails + 1)); return; fi
  # verify reports problems on stdout (exit 3); everything else is one line on stderr.
  if [[ $code == 3 ]]; then
    grep -q '^problem: ' out.txt || { echo "FAIL $name: exit 3 without problems"; fails=$((fails + 1)); return; }
  elif [[ "$first" != engramctl\ *:\ * ]]; then echo "FAIL $name: message '$first'"; fails=$((fails + 1)); return; fi
  echo "ok $name (exit $code)"
}
mutate() {  # mutate KIND SRC DST
  $PY - "$@" <<'PY'
import os, random, struct, sys, json
kind, src, dst = sys.argv[1:4]
b = bytearray(open(src, "rb").read()) if os.path.exists(src) else bytearray()
r = random.Random(7)
if kind == "empty": b = bytearray()
elif kind == "truncated": b = b[: len(b) // 2]
elif kind == "zeros": b = bytearray(len(b) or 4096)
elif kind == "random": b = bytearray(r.randrange(256) for _ in range(max(len(b), 1000)))
elif kind == "magic": b[0:4] = b"XXXX"
open(dst, "wb").write(b)
PY
}
# --- tables
table_header() {  # table_header FIELD VALUE: rewrite a header field of keep.engram with a valid checksum
  $PY - "$@" <<'PY'
import struct, sys, xxhash
field, value = sys.argv[1], int(sys.argv[2])
b = bytearray(open("keep.engram", "rb").read())
h = b[:4096]
if field == "version": struct.pack_into("<H", h, 8, value)
if field == "file_size": struct.pack_into("<Q", h, 16, value)
if field == "overlap":  # section 2 starts where section 1 does
    off1 = struct.unpack_from("<Q", h, 256 + 32 + 8)[0]
    struct.pack_into("<Q", h, 256 + 64 + 8, off1)
if field == "huge_section": struct.pack_into("<Q", h, 256 + 32 + 16, value)
struct.pack_into("<Q", h, 40, 0)
struct.pack_into("<Q", h, 40, xxhash.xxh3_64_intdigest(bytes(h)))
b[:4096] = h
open("bad.engram", "wb").write(b)
PY
}
for kind in empty truncated zeros random magic; do
  mutate $kind keep.engram bad.engram
  entry "[1, 2]" 1.0 > e.jsonl
  check "table-$kind verify" $E verify bad.engram
  check "table-$kind inspect" $E inspect bad.engram
  check "table-$kind lookup" $E lookup bad.engram --canonical-ids 1,2,3
  check "table-$kind sort-buckets" $E sort-buckets bad.engram
  check "table-$kind export" $E export bad.engram -o x.safetensors
  check "table-$kind append" $E append bad.engram --entries e.jsonl
  check "table-$kind prefetch" $E prefetch bad.engram --status
done
table_header version 9; check "table-future-version" $E inspect bad.engram
table_header file_size 1152921504606846976; check "table-huge-file-size" $E inspect bad.engram
table_header overlap 0; check "table-overlapping-sections" $E inspect bad.engram
table_header huge_section 1152921504606846976; check "table-huge-section" $E verify bad.engram
# --- config.toml
# (an empty config sets no key, so verify has nothing to compare and passes)
for kind in zeros random truncated; do
  mutate $kind $SRC/schemas/engram.default.toml bad.toml
  check "config-$kind" $E verify keep.engram --config bad.toml
done
# --- tokenizer.json
for kind in empty zeros random truncated; do
  mutate $kind $SRC/tests/data/tiny_tokenizer.json bad.json
  check "tokenizer-$kind" $E tokenize --tokenizer bad.json hello
done
# --- safetensors (values for build, entries for append)
$PY - <<'PY'
import json, struct
h = json.dumps({"w": {"dtype": "F32", "shape": [64, 32], "data_offsets": [0, 8192]}}).encode()
open("good.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + bytes(8192))
open("huge.safetensors", "wb").write(struct.pack("<Q", 1 << 60) + b"{}")
h2 = json.dumps({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}).encode()
open("overlap.safetensors", "wb").write(struct.pack("<Q", len(h2)) + h2 + bytes(24))
PY
for kind in empty zeros random truncated magic; do
  mutate $kind good.safetensors bad.safetensors
  check "safetensors-$kind build" $E build --vocab-size 16 --layers 1 --order 2 --heads 1 --buckets 64 --row-dim 32 --values bad.safetensors --tensor w -o new.engram
  check "safetensors-$kind append" $E append keep.engram --entries bad.safetensors
done
check "safetensors-huge-header" $E build --vocab-size 16 --layers 1 --order 2 --heads 1 --buckets 64 --row-dim 32 --values huge.safetensors --tensor w -o new.engram
check "safetensors-overlap" $E build --vocab-size 16 --layers 1 --order 2 --heads 1 --buckets 64 --row-dim 32 --values overlap.safetensors --tensor a -o new.engram
# --- entries.jsonl
for kind in zeros random truncated; do
  printf '{"canonical_ids": [1, 2], "value": %s}\n' "$($PY -c 'print([0.5]*32)')" > e.jsonl
  mutate $kind e.jsonl bad.jsonl
  check "entries-$kind" $E append keep.engram --entries bad.jsonl
done
: > empty.jsonl; check "entries-empty" $E append keep.engram --entries empty.jsonl
# --- token files and partial summaries
printf 'abc' > bad.u32; check "tokens-not-u32" $E build --tokens bad.u32 --vocab-size 16 -o new.engram
for kind in empty zeros random; do
  mutate $kind /dev/null bad.part
  check "part-$kind" $E merge bad.part -o new.engram
done
# --- paths
check "missing-path" $E verify no/such/file.engram
mkdir -p adir; check "directory" $E inspect adir
check "directory-as-tokens" $E build --tokens adir --vocab-size 16 -o new.engram
# --- read-only target directory and full disks (tmpfs)
mkdir -p ro full
if mount -t tmpfs -o ro,size=1m tmpfs ro 2>/dev/null; then
  check "read-only-dir build" $E build --vocab-size 16 --layers 1 --order 2 --heads 1 --buckets 64 --row-dim 32 -o ro/t.engram
  umount ro
else echo "ok read-only-dir build (skipped: no mount permission)"; fi
if mount -t tmpfs -o size=1m tmpfs full 2>/dev/null; then
  check "full-disk build" $E build --vocab-size 16 --layers 1 --order 3 --heads 4 --buckets 4K --row-dim 64 -o full/t.engram
  [[ -z "$(ls full)" ]] && echo "ok full-disk build left nothing behind" || { echo "FAIL: full/ holds $(ls full)"; fails=$((fails+1)); }
  cp keep.engram full/t.engram
  base_sum=$(sha256sum full/t.engram | cut -d' ' -f1)
  head -c $((1024 * 1024 - $(stat -c %s full/t.engram) - 8192)) /dev/zero > full/filler 2>/dev/null || true
  $PY -c "
import json
for i in range(400): print(json.dumps({'canonical_ids': [i % 15 + 1, i % 13 + 1], 'value': [0.25] * 32}))" > big.jsonl
  check "full-disk append" $E append full/t.engram --entries big.jsonl
  $E -q verify full/t.engram > /dev/null && echo "ok full-disk append: table still verifies" || { echo "FAIL: table broken"; fails=$((fails+1)); }
  [[ $(head -c $(stat -c %s keep.engram) full/t.engram | sha256sum | cut -d' ' -f1) == "$base_sum" ]] && echo "ok full-disk append: base unchanged"
  [[ $(stat -c %s full/t.engram) == $(stat -c %s keep.engram) ]] && echo "ok full-disk append: its partial batch was truncated at once"
  umount full
else echo "ok full-disk (skipped: no mount permission)"; fi
# --- an interrupted build never replaces an existing table
$PY $SRC/scripts/gen_zipf.py z.u32 3000000 --vocab 50000
cp keep.engram target.engram
{ timeout -s KILL 0.3 $E build --tokens z.u32 --vocab-size 50000 --buckets 64K -o target.engram > /dev/null 2>&1; } 2>/dev/null || true
cmp -s target.engram keep.engram && echo "ok killed build left the existing table as it was"
# --- the existing table is untouched by all of the above
[[ $(sha256sum keep.engram | cut -d' ' -f1) == "$sum_before" ]] && $E -q verify keep.engram > /dev/null && echo "existing table untouched and verified"
echo "failures: $fails"
