# libtorch costs ~0.4 s and ~160 MB at start: only `run` may load it (issue 6, 2b). The dynamic
# engramctl is watched with LD_DEBUG; the static one cannot load it, and must not hand a table
# command to engramctl-shared (a stand-in twin here leaves a mark when called).
source $SRC/tests/cli/lib.sh
tiny_table t.engram
entry "[1, 2]" 1.0 > e.jsonl
printf '#!/bin/sh\ntouch %s/twin-called\n' "$PWD" > fake-twin; chmod +x fake-twin
for cmd in "inspect t.engram" "verify t.engram" "lookup t.engram --canonical-ids 1,2,3" "append t.engram --entries e.jsonl" \
           "prefetch t.engram" "sort-buckets t.engram" "tokenize --tokenizer $ASSETS/deepseek_v3/tokenizer.json hi"; do
  n=$(ENGRAM_SHARED_CLI=$PWD/fake-twin LD_DEBUG=files $E $cmd 2>&1 >/dev/null | grep -c 'file=libtorch' || true)
  [[ -e twin-called ]] && n="$n (handed to engramctl-shared)" && rm twin-called
  echo "${cmd%% *}: libtorch loaded $n times"
done
n=$(ldd $E | grep -c torch || true)
echo "engramctl links libtorch: $n"
