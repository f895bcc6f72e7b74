# Config notes with judgment (issue 16): verify compares only keys the user set, suggests the
# table's real embed_dim and only fixes that exist; notes about keys engramctl does not use print
# in verify --config (or with -v), not on every command; trust_remote_code = false gets none.
source $SRC/tests/cli/lib.sh
tiny_table t.engram   # order 3, 2 heads, 64 buckets, rows of 32 values, layer 1
cat > c.toml <<'TOML'
[model]
trust_remote_code = true
[moe]
router_jitter = 0.01
[engram]
ngram_order = 3
hash_buckets = 64
embed_dim = 512
TOML
set +e
$E verify t.engram --config c.toml > out.txt 2> err.txt; echo "verify exit $?"
set -e
cat out.txt | grep '^problem' || true
grep -c 'n_heads\|layer_ids\|convert' out.txt || true
echo "verify notes: $(grep -c '^note: c.toml' err.txt)"
$E -q lookup t.engram --config c.toml --canonical-ids 1,2 > /dev/null 2> err.txt || true
$E lookup --config c.toml --layers 1 --order 3 --heads 2 --buckets 64 --vocab-size 16 --canonical-ids 1,2 > /dev/null 2> err.txt
echo "lookup notes: $(grep -c '^note: c.toml' err.txt)"
$E -v lookup --config c.toml --layers 1 --order 3 --heads 2 --buckets 64 --vocab-size 16 --canonical-ids 1,2 > /dev/null 2> err.txt
echo "lookup -v notes: $(grep -c '^note: c.toml' err.txt)"
sed -i 's/trust_remote_code = true/trust_remote_code = false/' c.toml
$E verify t.engram --config c.toml > /dev/null 2> err.txt || true
echo "trust_remote_code = false notes: $(grep -c 'trust_remote_code' err.txt)"
