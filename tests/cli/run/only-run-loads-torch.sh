# libtorch costs ~0.4 s and ~160 MB at start: only `run` may load it (issue 6, 2b).
source $SRC/tests/cli/lib.sh
tiny_table t.engram
entry "[1, 2]" 1.0 > e.jsonl
for cmd in "inspect t.engram" "verify t.engram" "lookup t.engram --canonical-ids 1,2,3" "append t.engram --entries e.jsonl" \
           "prefetch t.engram" "sort-buckets t.engram" "tokenize --tokenizer $ASSETS/deepseek_v3/tokenizer.json hi"; do
  n=$(LD_DEBUG=files $E $cmd 2>&1 >/dev/null | grep -c 'file=libtorch' || true)
  echo "${cmd%% *}: libtorch loaded $n times"
done
n=$(ldd $E | grep -c torch || true)
echo "engramctl links libtorch: $n"
