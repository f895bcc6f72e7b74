# serve --json (issue 32): one JSON line on stdout when ready (the URL with the port the kernel
# chose, the model, the batch size, whether a key is required, the PID) that a supervisor parses
# instead of the [serve] log on stderr, and one when it stops.
source $SRC/tests/cli/lib.sh
random_model m v41
$E serve --config m.toml --host 127.0.0.1 --port 0 -t 1 --no-auth --json > events.jsonl 2> serve.log &
pid=$!
trap 'kill $pid 2> /dev/null || true' EXIT
for _ in $(seq 600); do [[ -s events.jsonl ]] && break; kill -0 $pid 2> /dev/null || break; sleep 0.1; done
$PY - "$pid" <<'PY'
import json, sys
e = json.loads(open("events.jsonl").readline())
print("ready:", e["event"], e["url"] == "http://127.0.0.1:%d" % e["port"], e["port"] > 0,
      e["model"] != "", e["max_batch"] >= 1, e["auth"], e["pid"] == int(sys.argv[1]))
PY
url=$($PY -c "import json; print(json.loads(open('events.jsonl').readline())['url'])")
echo "health: $(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$url/health")"
kill -TERM $pid
for _ in $(seq 200); do kill -0 $pid 2> /dev/null || break; sleep 0.1; done
wait $pid && echo "exit 0"
sed -n 2p events.jsonl
echo "log on stderr: $(grep -c '^\[serve\] ready' serve.log)"
