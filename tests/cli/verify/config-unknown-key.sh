source $SRC/tests/cli/lib.sh
tiny_table t.engram
printf '[engram]\nngram_ordr = 3\n[api]\napi_key = "sk-SECRET-1234"\n' > c.toml
$E verify t.engram --config c.toml
