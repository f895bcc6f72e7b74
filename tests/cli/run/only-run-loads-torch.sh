# libtorch costs ~0.4 s and ~160 MB at start, cpp-httplib pulls in OpenSSL: only the commands that
# need the model or HTTP module (schemas/cli.md, "Commands") may load them (issue 6, 2b; issue 33).
# Watched with LD_DEBUG; a running verify's /proc/PID/maps is read too.
source $SRC/tests/cli/lib.sh
tiny_table t.engram
entry "[1, 2]" 1.0 > e.jsonl
for cmd in "inspect t.engram" "verify t.engram" "lookup t.engram --canonical-ids 1,2,3" "append t.engram --entries e.jsonl" \
           "prefetch t.engram" "sort-buckets t.engram" "tokenize --tokenizer $ASSETS/deepseek_v3/tokenizer.json hi"; do
  n=$(LD_DEBUG=files $E $cmd 2>&1 >/dev/null | grep -c 'file=.*\(libtorch\|libengram_model\|libengram_serve\|libcpp-httplib\)' || true)
  echo "${cmd%% *}: model or HTTP module loaded $n times"
done
for lib in torch httplib engram_model engram_serve; do
  echo "engramctl links $lib: $(ldd $E | grep -c $lib || true)"
done
# A table command that stays alive: its mapped files.
$E prefetch t.engram --lock 2> lock.txt &
pid=$!
for _ in $(seq 50); do grep -q 'locked in memory' lock.txt && break; sleep 0.1; done
echo "prefetch --lock maps a module: $(grep -c 'torch\|httplib\|libengram_model\|libengram_serve' /proc/$pid/maps || true)"
kill -INT $pid
wait $pid || true
