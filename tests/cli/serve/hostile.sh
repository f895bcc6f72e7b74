# serve under hostile clients, driven with raw loopback sockets (every loop and socket bounded):
# oversized bodies, headers and targets without a key are refused from the request head, before
# they are read, while the server's RSS stays flat; 64 slow-header connections do not delay a
# legitimate request; --queue 4 turns 16 concurrent requests into 503s with Retry-After;
# pipelined requests are answered in order; non-integer or out-of-range max_tokens is 400 and a
# tiny temperature is greedy; a table truncated mid-traffic gives 503s and no crash, and serving
# resumes when the file is restored; a second server on the same port fails; SIGTERM with slow
# connections open exits within the grace period.
source $SRC/tests/cli/lib.sh
source $SRC/tests/cli/serve_lib.sh
random_model m v41
cp m.engram m.good
printf '[api]\napi_key_env = "ENGRAM_TEST_SERVE_KEY"\n' >> m.toml
export ENGRAM_TEST_SERVE_KEY=sk-hostile-5d1c
start_serve serve.log --config m.toml -t 1 --batch 1 --queue 4 --grace 5
wait_ready
PORT=${URL##*:}

# A second server on the same port: refused at once, naming host:port (exit 1).
rc=0
timeout 60 $E serve --config m.toml --host 127.0.0.1 --port "$PORT" 2> second.log || rc=$?
echo "second server on the same port: exit $rc"
grep -o "cannot listen on 127.0.0.1:$PORT: the address is already in use" second.log | sed "s/$PORT/PORT/"

cat > drive.py <<'PY'
import json, os, socket, sys, threading, time

PORT, PID, KEY = int(sys.argv[1]), int(sys.argv[2]), os.environ["ENGRAM_TEST_SERVE_KEY"]
say = lambda *a: print(*a, flush=True)

def rss_kib():
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

def conn(timeout=10):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=timeout)
    s.settimeout(timeout)
    return s

def read_response(s, deadline=10):
    """One response: (status, headers dict, body); status 0 if the connection closed first."""
    buf, end = b"", time.time() + deadline
    while b"\r\n\r\n" not in buf and time.time() < end:
        try:
            d = s.recv(65536)
        except (socket.timeout, ConnectionError):
            break
        if not d:
            break
        buf += d
    if b"\r\n\r\n" not in buf:
        return 0, {}, b""
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdr = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:]}
    n = int(hdr.get("content-length", "0"))
    while len(rest) < n and time.time() < end:
        try:
            d = s.recv(65536)
        except (socket.timeout, ConnectionError):
            break
        if not d:
            break
        rest += d
    return status, hdr, rest[:n]

def request(method, path, body=None, key=True, timeout=30):
    s = conn(timeout)
    data = json.dumps(body).encode() if body is not None else b""
    h = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\nConnection: close\r\n"
    if key:
        h += f"Authorization: Bearer {KEY}\r\n"
    s.sendall(h.encode() + b"\r\n" + data)
    r = read_response(s, timeout)
    s.close()
    return r

# --- RSS while oversized requests without a key arrive -----------------------------------------
request("GET", "/health")
base = rss_kib()
peak = [base]
stop_sampling = threading.Event()
def sample():
    while not stop_sampling.is_set():
        peak[0] = max(peak[0], rss_kib())
        time.sleep(0.02)
sampler = threading.Thread(target=sample)
sampler.start()

def flood(head, chunk, total, results):
    """Sends head, then up to `total` bytes of `chunk` (stopping when the server answers or
    closes), and records the status it answered and the bytes that got out."""
    s = conn(10)
    sent = 0
    try:
        s.sendall(head)
        s.setblocking(False)
        while sent < total:
            try:
                if s.recv(1, socket.MSG_PEEK):
                    break  # the answer is there
            except BlockingIOError:
                pass
            try:
                sent += s.send(chunk)
            except BlockingIOError:
                time.sleep(0.002)
        s.setblocking(True)
    except (BrokenPipeError, ConnectionResetError):
        pass
    s.settimeout(10)
    status, hdr, body = read_response(s)
    results.append((status, sent, body))
    s.close()

big = 512 << 20
results = {"body": [], "head": [], "target": []}
threads = []
for i in range(4):  # 4 x 512 MB bodies without a key
    h = f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {big}\r\n\r\n".encode()
    threads.append(threading.Thread(target=flood, args=(h, b"x" * 65536, big, results["body"])))
for i in range(4):  # 4 x 100 MB of header lines without a key
    threads.append(threading.Thread(target=flood, args=(
        b"GET /metrics HTTP/1.1\r\n", b"X-Pad: " + b"p" * 1000 + b"\r\n", 100 << 20, results["head"])))
for i in range(2):  # a 64 MB request target
    threads.append(threading.Thread(target=flood, args=(
        b"GET /v1/models?q=", b"a" * 65536, 64 << 20, results["target"])))
for t in threads: t.start()
for t in threads: t.join(60)
# A body within the limit but without a key: 401 from the head, the body never sent.
s = conn()
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 900000\r\n\r\n")
st401 = read_response(s)[0]
s.close()
stop_sampling.set()
sampler.join()
def summary(rs, code):
    ok = all(st == code for st, _, _ in rs) and all(json.loads(b)["error"]["code"] == code for _, _, b in rs)
    return ok, max(sent for _, sent, _ in rs) < (8 << 20)
say("4 bodies of 512 MB without a key: 413 JSON, stopped before 8 MB sent:", *summary(results["body"], 413))
say("4 x 100 MB of headers without a key: 431 JSON, stopped before 8 MB sent:", *summary(results["head"], 431))
say("64 MB request targets: 414 JSON, stopped before 8 MB sent:", *summary(results["target"], 414))
say("900 kB body without a key: answered from the head with", st401)
growth_mib = (peak[0] - base) / 1024
say("server RSS growth under 32 MiB:", growth_mib < 32)
print(f"rss: base {base // 1024} MiB, peak {peak[0] // 1024} MiB, growth {growth_mib:.1f} MiB",
      file=sys.stderr)

# --- 64 slow-header connections, then a legitimate request ------------------------------------
slow_stop = threading.Event()
def slowloris(n):
    socks = []
    for i in range(n):
        s = conn()
        s.sendall(b"GET /v1/models HTTP/1.1\r\nX-Slow: ")
        socks.append(s)
    while not slow_stop.is_set():
        for s in socks:
            try:
                s.send(b"a")
            except OSError:
                pass
        slow_stop.wait(0.5)
    for s in socks:
        s.close()
slow = threading.Thread(target=slowloris, args=(64,))
slow.start()
time.sleep(1.5)
t0 = time.time()
st_h = request("GET", "/health")[0]
st_c, _, body = request("POST", "/v1/completions", {"prompt": "The jury said that the", "max_tokens": 2, "temperature": 0})
dt = time.time() - t0
say("with 64 slow-header connections open: health", st_h, "completion", st_c, "within 2 s:", dt < 2)
print(f"slow clients: legitimate requests answered in {dt:.2f} s", file=sys.stderr)
slow_stop.set()
slow.join()

# --- pipelining --------------------------------------------------------------------------------
s = conn(30)
reqs = b""
for i in range(3):
    d = json.dumps({"prompt": "The jury said that the", "max_tokens": 2 + i, "temperature": 0}).encode()
    reqs += (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
             f"Content-Length: {len(d)}\r\n\r\n").encode() + d
s.sendall(reqs)
got, end = b"", time.time() + 30
while (got.count(b"HTTP/1.1 ") < 3 or not got.endswith(b"}")) and time.time() < end:
    try:
        d = s.recv(65536)
    except OSError:
        break
    if not d: break
    got += d
s.close()
parts = [p for p in got.split(b"HTTP/1.1 ")[1:]]
tokens = [json.loads(p.split(b"\r\n\r\n", 1)[1])["usage"]["completion_tokens"] for p in parts]
say("3 pipelined requests:", len(parts), "answers, in order:", tokens == [2, 3, 4])

# --- --queue 4 with 16 concurrent requests ------------------------------------------------------
out = []
def one():
    out.append(request("POST", "/v1/completions",
                       {"prompt": "The jury said that the", "max_tokens": 100, "temperature": 0}, timeout=60))
ts = [threading.Thread(target=one) for _ in range(16)]
for t in ts: t.start()
for t in ts: t.join(90)
n503 = [r for r in out if r[0] == 503]
n200 = [r for r in out if r[0] == 200]
say("16 concurrent with --queue 4: all answered", len(out) == 16, "some 503:", len(n503) >= 1,
    "all 503 with Retry-After:", all(r[1].get("retry-after") == "1" for r in n503),
    "at least 4 served:", len(n200) >= 4, "only 200/503:", len(n503) + len(n200) == 16)

# --- strict request fields ----------------------------------------------------------------------
for v in ["4294967297", "1.9", "true", "-1", "\"8\""]:
    s = conn()
    d = ('{"prompt":"The jury said that the","max_tokens":%s}' % v).encode()
    s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
               f"Content-Length: {len(d)}\r\n\r\n").encode() + d)
    st, _, b = read_response(s)
    s.close()
    say("max_tokens", v, "->", st, json.loads(b)["error"]["message"])
greedy = request("POST", "/v1/completions", {"prompt": "The jury said that the", "max_tokens": 8, "temperature": 0})
tiny = request("POST", "/v1/completions", {"prompt": "The jury said that the", "max_tokens": 8, "temperature": 1e-39, "seed": 3})
say("temperature 1e-39:", tiny[0], "same text as greedy:",
    json.loads(tiny[2])["choices"][0]["text"] == json.loads(greedy[2])["choices"][0]["text"])
PY
$PY drive.py "$PORT" "$SERVE_PID" 2> drive.log || { cat drive.log >&2; exit 1; }

# --- the table truncated mid-traffic ------------------------------------------------------------
cat > traffic.py <<'PY'
import json, os, socket, sys, threading, time
PORT, KEY = int(sys.argv[1]), os.environ["ENGRAM_TEST_SERVE_KEY"]
codes, stop = [], threading.Event()
def loop():
    d = json.dumps({"prompt": "The jury said that the", "max_tokens": 20, "temperature": 0}).encode()
    while not stop.is_set() and len(codes) < 20000:
        try:
            s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
            s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                       f"Content-Length: {len(d)}\r\nConnection: close\r\n\r\n").encode() + d)
            r = b""
            while True:
                x = s.recv(65536)
                if not x: break
                r += x
            s.close()
            codes.append(int(r.split(b" ")[1]) if r else 0)
        except OSError:
            codes.append(-1)
        time.sleep(0.01)  # 503s come back at once
ts = [threading.Thread(target=loop) for _ in range(2)]
for t in ts: t.start()
time.sleep(1.0)
os.truncate("m.engram", 4096)  # under the running server, in place
time.sleep(2.0)
os.rename("m.restore", "m.engram")  # restored by rename, as build writes tables
time.sleep(2.0)
stop.set()
for t in ts: t.join(60)
after = codes[-3:]
print("truncated mid-traffic: some 503:", 503 in codes, "only 200/503:", set(codes) <= {200, 503},
      "served again after the restore:", after == [200] * len(after))
PY
cp m.good m.restore
$PY traffic.py "$PORT" 2> traffic.log || { cat traffic.log >&2; exit 1; }
echo "server alive after the truncation: $(kill -0 $SERVE_PID 2>/dev/null && echo yes)"
grep -c 'read past the end of its file (truncated under the server?)' serve.log
curl -s --max-time 10 -H "Authorization: Bearer $ENGRAM_TEST_SERVE_KEY" "$URL/metrics" |
  $PY -c "import sys; m=dict(l.split() for l in sys.stdin if l[0] != '#'); print('metrics: table unavailable > 0:', float(m['engram_requests_table_unavailable_total']) > 0, 'http refused >= 10:', float(m['engram_http_refused_total']) >= 10)"

# --- SIGTERM with 64 slow connections open: exit within the grace period (5 s) -------------------
cat > slow.py <<'PY'
import socket, sys, time
socks = []
for i in range(64):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    s.sendall(b"GET /health HTTP/1.1\r\nX-Slow: ")
    socks.append(s)
end = time.time() + 30
while time.time() < end:
    for s in socks:
        try:
            s.send(b"a")
        except OSError:
            sys.exit(0)  # the server closed them
    time.sleep(0.5)
PY
$PY slow.py "$PORT" &
SLOW=$!
sleep 1.5
t0=$(date +%s.%N)
kill -TERM "$SERVE_PID"
for _ in $(seq 200); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.05; done
t1=$(date +%s.%N)
rc=0
wait "$SERVE_PID" || rc=$?
SERVE_PID=
kill "$SLOW" 2>/dev/null || true
wait "$SLOW" 2>/dev/null || true
echo "SIGTERM with 64 slow connections: exit $rc within the 5 s grace: $($PY -c "print($t1 - $t0 < 5)")"
echo "sigterm exit: $($PY -c "print(round($t1 - $t0, 2))") s" >&2
grep -c '^\[serve\] stopped$' serve.log
cat drive.log >&2
