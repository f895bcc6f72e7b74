# Relative paths inside a config are the config's own (issue 32): resolved against its folder,
# whatever the current directory (a service started from / still finds its table), and messages
# show the resolved path; ENGRAM_TABLE_PATH stays relative to the current directory; a NUL in a
# config string is refused with its line instead of cutting the path there.
source $SRC/tests/cli/lib.sh
mkdir -p deploy
tiny_table deploy/t.engram
printf '[engram.table]\npath = "t.engram"\n' > deploy/c.toml
$E verify --config deploy/c.toml | sed 's/ (.*//'
here=$PWD
(cd / && $E verify --config "$here/deploy/c.toml" | sed "s|$here|HERE|; s/ (.*//")
(cd deploy && $E verify --config c.toml | sed 's/ (.*//')
cp deploy/t.engram other.engram
ENGRAM_TABLE_PATH=other.engram $E verify --config deploy/c.toml | sed 's/ (.*//'
printf '[engram.table]\npath = "missing.engram"\n' > deploy/m.toml
set +e; $E verify --config deploy/m.toml; echo "exit $?"; set -e
printf '[engram.table]\npath = "t\\u0000.engram"\n' > deploy/nul.toml
set +e; $E verify --config deploy/nul.toml 2> err.txt; echo "exit $?"; set -e
sed 's/^engramctl verify: //' err.txt
