# The API key is read only from the variable api.api_key_env names and never printed, logged or
# written to a file; a literal key in the config is refused without echoing it.
source $SRC/tests/cli/lib.sh
export TAOTOKEN_API_KEY="sk-live-TOPSECRET-0123456789abcdef"
tiny_table t.engram
cp $SRC/schemas/skeleton.toml c.toml
sed -i 's/hash_buckets = 2000000/hash_buckets = 64/; s/ngram_order = 5/ngram_order = 3/' c.toml
{
  $E verify t.engram --config c.toml || true
  $E build --config c.toml --vocab-size 16 --dry-run || true
  $E lookup --config c.toml t.engram --canonical-ids 1,2,3 || true
  $E run --config c.toml "hi" || true
  printf '[api]\napi_key = "%s"\n' "$TAOTOKEN_API_KEY" > literal.toml
  $E verify t.engram --config literal.toml || true
  printf '[api]\napi_key_env = "%s"\n' "$TAOTOKEN_API_KEY" > inenv.toml
  $E verify t.engram --config inenv.toml || true
} > all.out 2>&1
grep -c "TOPSECRET" all.out || true
grep -rl --exclude='*.toml' "TOPSECRET" . || echo "no file holds the key"
grep -o 'a literal API key in the config file is refused (the value is not shown)' all.out
grep -o 'the value given is not a variable name and is not shown' all.out
