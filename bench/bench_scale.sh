#!/usr/bin/env bash
# Tables at the field's size (issue 30): a DeepSeek-V4.1-layout table (deepseek addressing,
# layers 1 and 14, orders 2-4, 8 heads, row_dim 256, fp8-e4m3 with e8m0 scales) at a fraction of
# V4.1's rows, imported from a synthetic sharded safetensors checkpoint in the V4.1 tensor layout.
# Prints each cost as a ratio to its anchor in the same run, cold page cache (vmtouch -e) unless
# said, best of several runs, and each command's peak RSS:
#   import (build --values)  vs  cat of the checkpoint files
#   verify                   vs  xxhsum -H3 of the table
#   sort-buckets of 1,000 appended entries (in place)  vs  the same on a 64 MiB table
#   sort-buckets --rewrite of the same                  (what a fold cost before: a whole copy)
#   the least an in-place fold can do here: as many scattered pages as the fold's rows, read and
#     written back (one page a row), vs the same 64 MiB table's fold
#   prefetch --budget 4G, prefetch, export, inspect --stats, lookup, append, merge of a 2-shard
#     build: time and peak RSS, each against its bound (1 GiB plus any --memory or --budget)
#   bench/bench_scale.sh [FRACTION] [WORKDIR]   FRACTION: 1/8 (default, ~24 GiB of rows), 1/64, ...
# Disk: checkpoint + table, about 2.2x the table (53 GB at 1/8), and later table + merged table;
# everything is removed at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
E=${ENGRAM_BIN:-$root/build/bin/engramctl}
PY=/usr/bin/python3
frac=${1:-1/8}
work=${2:-$root/build/bench_scale}
den=${frac#1/}
buckets=$((16000000 / den))
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
layout=(--layout deepseek-v4.1)
evict() { vmtouch -q -e "$@" > /dev/null 2>&1 || true; }
# wall seconds and peak RSS (KiB) of a command: "secs rss"
timed() { /usr/bin/time -f '%e %M' -o "$work/time.txt" "$@" > /dev/null 2> "$work/cmd.err" || { cat "$work/cmd.err"; exit 1; }; cat "$work/time.txt"; }
best() { sort -n | head -1; }

# Row counts per layer from the addressing (deepseek sizes are primes above the base size).
read -r rows1 rows14 < <($E lookup "${layout[@]}" --buckets "$buckets" --canonical-ids 1 --json |
  $PY -c "import json,sys; s=json.load(sys.stdin)['addressing']['sizes']; h=len(s)//2; print(sum(s[:h]), sum(s[h:]))")
echo "V4.1 layout at $frac of its rows: $buckets buckets per sub-table, $((rows1 + rows14)) rows"

# 1. The synthetic checkpoint: one shard per layer's fp8 rows, one for the e8m0 scales, an index.
ckpt=$work/ckpt
mkdir -p "$ckpt"
$PY - "$ckpt" "$rows1" "$rows14" <<'PY'
import json, os, sys
import numpy as np
out, rows = sys.argv[1], {1: int(sys.argv[2]), 14: int(sys.argv[3])}
rng = np.random.default_rng(41)
def write(path, tensors):  # tensors: [(name, dtype, shape, fill(n) -> bytes chunks)]
    meta, off = {}, 0
    for name, dt, shape, _ in tensors:
        n = int(np.prod(shape))
        meta[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(meta).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little")); f.write(h)
        for name, dt, shape, fill in tensors:
            left = int(np.prod(shape))
            while left:
                n = min(left, 1 << 28)
                f.write(fill(n)); left -= n
def random_bytes(n):
    w = rng.integers(0, np.iinfo(np.uint64).max, size=(n + 7) // 8, dtype=np.uint64, endpoint=True)
    return w.view(np.uint8)[:n]
def fp8(n):  # random e4m3 codes with an even mantissa: never the NaNs 0x7F, 0xFF
    b = random_bytes(n)
    np.bitwise_and(b, 0xFE, out=b)
    return b.data
def e8m0(n):  # scales 2^-9 .. 2^-2
    b = random_bytes(n)
    np.bitwise_and(b, 7, out=b)
    b += 118
    return b.data
index = {"metadata": {}, "weight_map": {}}
for i, layer in enumerate((1, 14)):
    name = f"model.layers.{layer}.engram.table.weight"
    fn = f"model-{i + 1:05d}-of-00003.safetensors"
    write(os.path.join(out, fn), [(name, "F8_E4M3", (rows[layer], 256), fp8)])
    index["weight_map"][name] = fn
fn = "model-00003-of-00003.safetensors"
write(os.path.join(out, fn), [(f"model.layers.{l}.engram.table.scale", "F8_E8M0", (rows[l], 8), e8m0) for l in (1, 14)])
for l in (1, 14): index["weight_map"][f"model.layers.{l}.engram.table.scale"] = fn
json.dump(index, open(os.path.join(out, "model.safetensors.index.json"), "w"))
PY
# A corpus for the owners and STATS (what prefetch --budget ranks by): 2M Zipf-distributed
# canonical ids, in documents of 1,000.
$PY - "$work/corpus.u32" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(7)
ids = np.minimum(rng.zipf(1.1, 2_000_000), 99091).astype(np.uint32)
ids[999::1000] = 0xFFFFFFFF
ids.tofile(sys.argv[1])
PY
sync
ckpt_bytes=$(du -cb "$ckpt"/*.safetensors | tail -1 | cut -f1)

# 2. Import vs cat.
T=$work/big.engram
evict "$ckpt"/*.safetensors
read -r cat_s cat_rss < <(timed cat "$ckpt"/*.safetensors)
evict "$ckpt"/*.safetensors
read -r imp_s imp_rss < <(timed $E -q build "${layout[@]}" --buckets "$buckets" --tokens "$work/corpus.u32" --memory 1G \
  --values "$ckpt/model.safetensors.index.json" --tensor 'model.layers.{layer}.engram.table.weight' \
  --scale-tensor 'model.layers.{layer}.engram.table.scale' -o "$T")
rm -rf "$ckpt"
table_bytes=$(stat -c %s "$T")

# 3. verify vs xxhsum -H3 (cold, best of 2 each, interleaved).
v=() x=() vr=0
for _ in 1 2; do
  evict "$T"; read -r s r < <(timed xxhsum -H3 "$T"); x+=("$s")
  evict "$T"; read -r s r < <(timed $E -q verify "$T"); v+=("$s"); vr=$r
done
ver_s=$(printf '%s\n' "${v[@]}" | best) xxh_s=$(printf '%s\n' "${x[@]}" | best)

# 4. The other commands on a table larger than the page cache can hold with the rest: peak RSS.
evict "$T"; read -r ins_s ins_rss < <(timed $E -q inspect "$T" --stats)
evict "$T"; read -r exp_s exp_rss < <(timed $E -q export "$T" -o "$work/export.safetensors")
rm -f "$work/export.safetensors"
evict "$T"; read -r pre_s pre_rss < <(timed $E -q prefetch "$T")
evict "$T"; read -r bud_s bud_rss < <(timed $E -q prefetch "$T" --budget 4G)
bud_json=$($E -q prefetch "$T" --budget 4G --json)
evict "$T"; read -r look_s look_rss < <(timed $E -q lookup "$T" --canonical-ids 5,6,7,8,9,10,11,12)

# 4b. merge: a 2-shard build of the same corpus merged into a table of the same layout (then removed).
for i in 0 1; do
  $E -q build "${layout[@]}" --buckets "$buckets" --tokens "$work/corpus.u32" --memory 1G --shard "$i/2" -o "$work/p$i.part"
done
read -r mer_s mer_rss < <(timed $E -q merge "$work/p0.part" "$work/p1.part" --memory 1G -o "$work/merged.engram")
rm -f "$work/merged.engram" "$work"/p*.part

# 5. Fold of 1,000 appended entries: the big table vs a 64 MiB table of the same layout.
small_buckets=$((64 * 1024 * 1024 / (48 * 284)))
S=$work/small.engram
$E -q build "${layout[@]}" --buckets "$small_buckets" --init normal -o "$S"
entries() {  # entries FILE SEED: 1,000 random bigrams and trigrams with 256 values each
  $PY - "$1" "$2" <<'PY'
import json, random, sys
r = random.Random(int(sys.argv[2]))
with open(sys.argv[1], "w") as f:
    for i in range(1000):
        n = r.choice([2, 3])
        f.write(json.dumps({"canonical_ids": [r.randrange(99092) for _ in range(n)],
                            "value": [round(r.uniform(-1, 1), 3) for _ in range(256)]}) + "\n")
PY
}
fold_times() {  # fold_times TABLE: "cold warm rss" best of 3 each, 1,000 fresh entries per fold
  local t=$1 cold=() warm=() rss=0 s r
  for k in 1 2 3 4 5 6; do
    entries "$work/e.jsonl" "$k"
    $E -q append "$t" --entries "$work/e.jsonl" > /dev/null
    if ((k % 2)); then evict "$t"; else cat "$t" > /dev/null 2>&1 || true; fi
    read -r s r < <(timed $E -q sort-buckets "$t")
    if ((k % 2)); then cold+=("$s"); else warm+=("$s"); fi
    ((r > rss)) && rss=$r
  done
  echo "$(printf '%s\n' "${cold[@]}" | best) $(printf '%s\n' "${warm[@]}" | best) $rss"
}
# The big table is never read whole for the warm runs (it does not fit the page cache): "warm"
# there is whatever the previous fold left.
read -r small_cold small_warm small_rss < <(fold_times "$S")
read -r big_cold big_warm big_rss < <(fold_times "$T")
# The floor of any in-place layout: each row the journal names lies on its own page of a table this
# large, and a page is read before a part of it is written. Here: as many random pages of the
# table as the fold wrote rows, each read (read-ahead asked for 256 at a time, as the fold does)
# and written back, then fsync; cold, best of 3, against the small table's fold.
floor_io() {  # floor_io TABLE PAGES SEED: seconds
  $PY - "$@" <<'PY'
import os, random, sys, time
path, npages, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_RDWR)
r = random.Random(seed)
pages = sorted(set(r.randrange(os.fstat(fd).st_size // 4096 - 1) for _ in range(npages)))
t0 = time.time()
for k in range(0, len(pages), 256):
    part = pages[k:k + 256]
    for p in part: os.posix_fadvise(fd, p * 4096, 4096, os.POSIX_FADV_WILLNEED)
    for p in part: os.pwrite(fd, os.pread(fd, 4096, p * 4096), p * 4096)
os.fsync(fd)
print("%.3f" % (time.time() - t0))
PY
}
fl=()
for k in 1 2 3; do evict "$T"; fl+=("$(floor_io "$T" 16000 "$k")"); done
floor_s=$(printf '%s\n' "${fl[@]}" | best)
entries "$work/e.jsonl" 7
read -r app_s app_rss < <(timed $E -q append "$T" --entries "$work/e.jsonl")
evict "$T"
read -r rw_s rw_rss < <(timed $E -q sort-buckets --rewrite "$T")

gib() { awk -v b="$1" 'BEGIN { printf "%.2f GiB", b / 2^30 }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.0f MiB", k / 1024 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "table $(gib "$table_bytes"); checkpoint $(gib "$ckpt_bytes"); small table $(gib "$(stat -c %s "$S")")"
printf '%-44s %8ss  vs %-22s %8ss  ratio %s  (peak RSS %s)\n' \
  "import (build --values), cold" "$imp_s" "cat of the checkpoint" "$cat_s" "$(ratio "$imp_s" "$cat_s")" "$(mib "$imp_rss")"
printf '%-44s %8ss  vs %-22s %8ss  ratio %s  (peak RSS %s)\n' \
  "verify, cold" "$ver_s" "xxhsum -H3" "$xxh_s" "$(ratio "$ver_s" "$xxh_s")" "$(mib "$vr")"
printf '%-44s %8ss  vs %-22s %8ss  ratio %s  (target <= 2; peak RSS %s)\n' \
  "fold 1,000 entries in place, cold" "$big_cold" "the same, 64 MiB table" "$small_cold" "$(ratio "$big_cold" "$small_cold")" "$(mib "$big_rss")"
printf '%-44s %8ss  vs %-22s %8ss  ratio %s  (no in-place layout does less)\n' \
  "16,000 scattered pages read+written, cold" "$floor_s" "the 64 MiB table's fold" "$small_cold" "$(ratio "$floor_s" "$small_cold")"
printf '%-44s %8ss  vs %-22s %8ss  ratio %s\n' \
  "fold 1,000 entries in place, after a fold" "$big_warm" "the same, 64 MiB table" "$small_warm" "$(ratio "$big_warm" "$small_warm")"
printf '%-44s %8ss  vs %-22s %8ss  ratio %s  (peak RSS %s)\n' \
  "fold 1,000 entries, --rewrite (a new file)" "$rw_s" "in place, cold" "$big_cold" "$(ratio "$rw_s" "$big_cold")" "$(mib "$rw_rss")"
share=$(echo "$bud_json" | $PY -c "import json,sys; j=json.load(sys.stdin); print('%.1f%% of the row pages, %.1f%% of the build corpus lookups' % (100*j['row_pages']/j['row_pages_total'], 100*j['lookup_share']))")
printf '%-44s %8ss  (peak RSS %s): %s\n' "prefetch --budget 4G, cold" "$bud_s" "$(mib "$bud_rss")" "$share"
printf '%-44s %8ss  (peak RSS %s)\n' "prefetch (whole; cannot stay resident), cold" "$pre_s" "$(mib "$pre_rss")"
printf '%-44s %8ss  (peak RSS %s)\n' "export, cold" "$exp_s" "$(mib "$exp_rss")"
printf '%-44s %8ss  (peak RSS %s)\n' "inspect --stats, cold" "$ins_s" "$(mib "$ins_rss")"
printf '%-44s %8ss  (peak RSS %s)\n' "lookup, cold" "$look_s" "$(mib "$look_rss")"
printf '%-44s %8ss  (peak RSS %s)\n' "append 1,000 entries" "$app_s" "$(mib "$app_rss")"
printf '%-44s %8ss  (peak RSS %s)\n' "merge of 2 shards, --memory 1G" "$mer_s" "$(mib "$mer_rss")"
# Each command's bound (item 2 of issue 30): 1 GiB plus the --memory or --budget it was given.
over=0
check() {  # check NAME RSS_KIB EXTRA_GIB
  local bound=$(((1 + $3) * 1024 * 1024))
  if (($2 > bound)); then echo "OVER: $1 peak RSS $(mib "$2") > $((1 + $3)) GiB"; over=1; fi
}
check import "$imp_rss" 1; check verify "$vr" 0; check export "$exp_rss" 0; check inspect "$ins_rss" 0
check prefetch "$pre_rss" 0; check "prefetch --budget 4G" "$bud_rss" 4; check lookup "$look_rss" 0
check append "$app_rss" 0; check merge "$mer_rss" 1; check "sort-buckets" "$big_rss" 0
((over)) || echo "peak RSS: every command within 1 GiB plus its --memory or --budget"
