# Sourced by serve cases: start `engramctl serve` on a free loopback port, stop it by PID on exit.
# start_serve LOG ARGS...: sets SERVE_PID and URL (http://127.0.0.1:PORT); the port is chosen by
# the kernel (--port 0) and read from the "listening on" line, so parallel tests never collide.
start_serve() {
  local log=$1
  shift
  $E serve --host 127.0.0.1 --port 0 "$@" 2>"$log" &
  SERVE_PID=$!
  trap stop_serve EXIT
  URL=
  for _ in $(seq 300); do
    URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$log" | head -n 1 || true)
    [[ -n $URL ]] && return 0
    kill -0 "$SERVE_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "serve did not start:" >&2
  cat "$log" >&2
  return 1
}
# wait_ready: polls /health (bounded: 30 s) until it answers 200.
wait_ready() {
  for _ in $(seq 300); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL/health") == 200 ]] && return 0
    sleep 0.1
  done
  echo "serve did not become ready" >&2
  return 1
}
# stop_serve: SIGTERM, then wait (bounded: 20 s) and record the exit status in SERVE_EXIT.
stop_serve() {
  SERVE_EXIT=
  if [[ -n ${SERVE_PID:-} ]] && kill -0 "$SERVE_PID" 2>/dev/null; then
    kill -TERM "$SERVE_PID"
    for _ in $(seq 200); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$SERVE_PID" 2>/dev/null && kill -9 "$SERVE_PID"
    SERVE_EXIT=0
    wait "$SERVE_PID" || SERVE_EXIT=$?
  fi
  SERVE_PID=
}
# post PATH JSON [curl args...]: POST with a 60 s bound; prints the body.
post() {
  local path=$1 body=$2
  shift 2
  curl -s --max-time 60 -H 'Content-Type: application/json' "$@" -d "$body" "$URL$path"
}
# field JSON_FILE_OR_- EXPR: evaluates a Python expression over the parsed JSON `j`.
field() {
  $PY -c "import json,sys; j=json.load(open(sys.argv[1]) if sys.argv[1]!='-' else sys.stdin); print(eval(sys.argv[2]))" "$@"
}
