#!/usr/bin/env bash
# The README runs as written: in a scratch copy of the repository root (the sources linked, the
# binaries and assets of this build), run the demo's steps as ./scripts/demo.sh does, then every
# "$ engramctl" example block of README.md and then of docs/commands.md, in that order, comparing
# exit status and shown output (tests/readme/readme_check.py says how). engramctl is put on PATH
# only by the README's own set-up block, as a reader would type it. Nothing in the real build/demo
# is touched.
# Usage: readme_test.sh ENGRAMCTL SRC ASSETS
set -euo pipefail
E=$(realpath "$1"); SRC=$(realpath "$2"); ASSETS=$(realpath "$3")
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
for p in "$SRC"/*; do
  [[ $(basename "$p") == build ]] || ln -s "$p" "$root/$(basename "$p")"
done
mkdir -p "$root/build"
ln -s "$(dirname "$E")" "$root/build/bin"
ln -s "$ASSETS" "$root/build/assets"
cd "$root"
if ! ./scripts/demo_steps.sh >demo.log 2>&1; then
  echo "scripts/demo_steps.sh failed:"; tail -40 demo.log; exit 1
fi
/usr/bin/python3 "$SRC/tests/readme/readme_check.py" README.md docs/commands.md
