# A full queue answers 503 with Retry-After; a streaming client that disconnects stops its
# generation; SIGTERM lets the running request finish and be delivered, then serve exits 0.
source $SRC/tests/cli/lib.sh
source $SRC/tests/cli/serve_lib.sh
random_model m v41
LONG='{"prompt":"The jury said that the","max_tokens":600,"temperature":0}'
start_serve serve.log --config m.toml -t 1 --batch 1 --queue 1
wait_ready
# 1 running + 1 queued fit; of 6 simultaneous long requests at least one is refused.
pids=()
for i in 1 2 3 4 5 6; do
  post /v1/completions "$LONG" -D h$i.txt -o /dev/null &
  pids+=($!)
done
wait "${pids[@]}"
n503=$(grep -l '^HTTP/1.1 503' h?.txt | wc -l)
n200=$(grep -l '^HTTP/1.1 200' h?.txt | wc -l)
echo "queue full: some 503: $([[ $n503 -ge 1 ]] && echo yes), some 200: $([[ $n200 -ge 2 ]] && echo yes), all answered: $((n503 + n200))"
f=$(grep -l '^HTTP/1.1 503' h?.txt | head -n 1)
grep -i -o '^Retry-After: 1' "$f"
# A streaming client that goes away after ~0.3 s: its generation stops early.
curl -s -N --max-time 0.3 -H 'Content-Type: application/json' \
  -d '{"prompt":"The jury said that the","max_tokens":1000,"temperature":0,"stream":true}' "$URL/v1/completions" > /dev/null 2>&1 || true
for _ in $(seq 100); do grep -q 'cancelled: the client went away' serve.log && break; sleep 0.1; done
$PY - serve.log <<'PY'
import re, sys
m = re.search(r'request \d+: cancelled: the client went away after (\d+) generated token\(s\)', open(sys.argv[1]).read())
print('disconnect stopped generation early:', m is not None and int(m.group(1)) < 1000)
PY
# SIGTERM while a request runs: it completes and is delivered, then exit 0.
post /v1/completions '{"prompt":"The jury said that the","max_tokens":300,"temperature":0}' > drained.json &
CURL=$!
for _ in $(seq 100); do
  curl -s --max-time 5 "$URL/metrics" | grep -q '^engram_requests_in_flight 1$' && break
  sleep 0.05
done
stop_serve
wait $CURL
field drained.json '"in-flight request drained:", j["choices"][0]["finish_reason"], j["usage"]["completion_tokens"]'
echo "serve exit after SIGTERM: $SERVE_EXIT"
grep -c '^\[serve\] SIGTERM: finishing in-flight requests, then exiting$' serve.log
