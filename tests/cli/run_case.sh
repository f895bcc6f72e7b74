#!/usr/bin/env bash
# Runs one CLI case: tests/cli/<verb>/<case>.sh executed in a fresh temp dir with
#   E=<engramctl>  SRC=<source root>  ASSETS=<assets dir>  PY=/usr/bin/python3
# and compares its exit status with <case>.exit (default 0), its stderr with the bash glob in
# <case>.stderr.glob and its stdout with <case>.stdout.exact / the glob in <case>.stdout.glob.
set -u
case_sh=$1
export E=$2 SRC=$3 ASSETS=$4 PY=/usr/bin/python3
base=${case_sh%.sh}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
bash -eu "$case_sh" >"$work/.stdout" 2>"$work/.stderr"
code=$?
want=0
[[ -f "$base.exit" ]] && want=$(cat "$base.exit")
fail=0
if [[ "$code" != "$want" ]]; then echo "exit status $code, want $want"; fail=1; fi
if [[ -f "$base.stderr.glob" ]]; then
  pat=$(cat "$base.stderr.glob")
  # shellcheck disable=SC2053
  [[ "$(cat "$work/.stderr")" == $pat ]] || { echo "stderr does not match $base.stderr.glob"; fail=1; }
fi
if [[ -f "$base.stdout.exact" ]]; then
  cmp -s "$base.stdout.exact" "$work/.stdout" || { echo "stdout differs from $base.stdout.exact"; diff "$base.stdout.exact" "$work/.stdout" | head -20; fail=1; }
fi
if [[ -f "$base.stdout.glob" ]]; then
  pat=$(cat "$base.stdout.glob")
  # shellcheck disable=SC2053
  [[ "$(cat "$work/.stdout")" == $pat ]] || { echo "stdout does not match $base.stdout.glob"; fail=1; }
fi
if [[ $fail != 0 ]]; then
  echo "--- stdout"; head -c 3000 "$work/.stdout"; echo "--- stderr"; head -c 3000 "$work/.stderr"
fi
exit $fail
