$E build --config $SRC/schemas/skeleton.toml --vocab-size 10 --dry-run
