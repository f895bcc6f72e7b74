#!/usr/bin/env bash
# Builds, once per ctest run, the models and tables many CLI cases start from (random_model m v41,
# demo_model m: tests/cli/lib.sh), in FIXTURES; those cases then copy them instead of building
# their own. Usage: setup_fixtures.sh ENGRAMCTL SRC ASSETS FIXTURES
set -euo pipefail
export E=$1 SRC=$2 ASSETS=$3 PY=/usr/bin/python3
FIXTURES=$4
source "$SRC/tests/cli/lib.sh"
rm -rf "$FIXTURES"
for f in random_v41 demo; do
  mkdir -p "$FIXTURES/$f"
  (
    cd "$FIXTURES/$f"
    FIXTURES= # build in place, not from a fixture
    case $f in
      random_v41) random_model m v41 ;;
      demo) demo_model m ;;
    esac
    touch done
  )
done
echo "fixtures ready in $FIXTURES"
