#!/usr/bin/env bash
# Dependencies in lib/engram point downward only: each module may include the modules listed for
# it here and nothing else (builder/ and table/ sit side by side on format/; format/ includes
# neither), and each folder's code lives in the namespace of its name (engram::format in format/).
# Fails with every offending #include or namespace, file:line.  Usage: module_deps.sh SRC_ROOT
set -u
cd "$1/lib/engram" || exit 2
declare -A allowed=(
  [base]="base"
  [hash]="base hash"
  [config]="base config"
  [tokenizer]="base hash tokenizer"
  [format]="base hash config tokenizer format"
  [builder]="base hash config tokenizer format builder"
  [table]="base hash config tokenizer format table"
  [model]="base hash config tokenizer format table model"
  [serve]="base model serve"
)
fail=0
for dir in */; do
  mod=${dir%/}
  if [[ -z "${allowed[$mod]+x}" ]]; then
    echo "lib/engram/$mod: a module this check does not know; add it to tests/layout/module_deps.sh"
    fail=1
    continue
  fi
  while IFS= read -r hit; do
    dep=$(sed -E 's|.*#include "engram/([a-z_]+)/.*|\1|' <<<"$hit")
    if [[ " ${allowed[$mod]} " != *" $dep "* ]]; then
      echo "lib/engram/$hit: $mod/ may include only: ${allowed[$mod]}"
      fail=1
    fi
  done < <(grep -Hn '#include "engram/' "$mod"/*.h "$mod"/*.cc 2>/dev/null)
  while IFS= read -r hit; do
    echo "lib/engram/$mod/$hit: code in $mod/ belongs in namespace engram::$mod"
    fail=1
  done < <(grep -HnE '^namespace engram(::[a-z_]+)? \{' "$mod"/*.h "$mod"/*.cc 2>/dev/null | sed "s|^$mod/||" |
           grep -v "namespace engram::$mod {" |
           grep -v '^error\.\(h\|cc\):[0-9]*:namespace engram {')  # engram::Error, engram::Code (STYLE)
done
[[ $fail == 0 ]] && echo "module dependencies point downward, namespaces match folders: $(ls -d */ | tr -d / | tr '\n' ' ')"
exit $fail
