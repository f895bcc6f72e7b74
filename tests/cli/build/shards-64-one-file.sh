# 64 shards of one 40M-token file each read their own 1/64 (625k tokens), not whole 4M-token
# blocks handed out round robin (which left 54 of them idle).
$PY - <<'PY'
import numpy as np
rng = np.random.default_rng(1)
ids = rng.integers(0, 1000, 40_000_000, dtype=np.uint32)
ids[rng.random(ids.size) < 1 / 5000] = 0xFFFFFFFF
ids.tofile("c.u32")
PY
shard() {
  $E build --tokens c.u32 --vocab-size 1000 --layers 1 --order 2 --heads 1 --buckets 256 --row-dim 8 \
    --no-stats -t 1 --shard $1/64 -o part.$1 2>log.$1
}
export -f shard
seq 0 63 | xargs -P 2 -I{} bash -c 'shard {}'
for i in $(seq 0 63); do
  sed -n 's/.*(\([0-9]*\) tokens from input tokens \[\([0-9]*\), \([0-9]*\)) of \([0-9]*\)).*/\1 \2 \3 \4/p' log.$i
done | awk '$1 < 600000 || $1 > 630000 { bad++; print "shard " NR-1 "/64: " $1 " tokens" }
  END { print NR " shards reported; " (bad ? bad : 0) " outside 600k-630k tokens" }'
$E -q merge part.* -o merged.engram
$E verify merged.engram | sed 's/ (.*//'
