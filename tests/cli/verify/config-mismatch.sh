source $SRC/tests/cli/lib.sh
tiny_table t.engram
cat > c.toml <<'TOML'
[engram]
ngram_order = 4
hash_buckets = 64
n_heads = 2
embed_dim = 64
layer_ids = [1]
offload_to_host = true
deterministic_addressing = false
TOML
$E verify t.engram --config c.toml
