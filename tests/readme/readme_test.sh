#!/usr/bin/env bash
# The README runs as written: in a scratch copy of the repository root (the sources linked, the
# binaries and assets of this build), run the demo's steps as ./scripts/demo.sh does, then every
# "$ engramctl" example block of README.md in order, comparing exit status and shown output
# (tests/readme/readme_check.py says how). Nothing in the real build/demo is touched.
# Usage: readme_test.sh ENGRAMCTL SRC ASSETS
set -euo pipefail
E=$(realpath "$1"); SRC=$(realpath "$2"); ASSETS=$(realpath "$3")
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
for d in assets examples schemas scripts; do ln -s "$SRC/$d" "$root/$d"; done
cp "$SRC/README.md" "$root/"
mkdir -p "$root/build"
ln -s "$(dirname "$E")" "$root/build/bin"
ln -s "$ASSETS" "$root/build/assets"
cd "$root"
if ! ./scripts/demo_steps.sh >demo.log 2>&1; then
  echo "scripts/demo_steps.sh failed:"; tail -40 demo.log; exit 1
fi
/usr/bin/python3 "$SRC/tests/readme/readme_check.py" README.md
