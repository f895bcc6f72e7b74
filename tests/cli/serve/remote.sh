# run --remote sends the prompt as a chat request with the key from [api] api_key_env and prints
# what run prints (greedy: the same text as a local run), plus the server's hit rates; a 401 names
# the variable and the config line; an unset variable is reported before anything is sent.
source $SRC/tests/cli/lib.sh
source $SRC/tests/cli/serve_lib.sh
random_model m v41
P="The jury said that the"
$E run --config m.toml "$P" -n 8 --temp 0 -t 1 > local.txt 2>/dev/null
cp m.toml client.toml
printf '[api]\napi_key_env = "ENGRAM_TEST_REMOTE_KEY"\n' >> m.toml
ENGRAM_TEST_REMOTE_KEY=sk-remote-0d9e start_serve serve.log --config m.toml -t 1
wait_ready
printf '[api]\nbase_url = "%s"\napi_key_env = "ENGRAM_TEST_REMOTE_KEY"\ntimeout = 30\n' "$URL" >> client.toml
rc=0; $E run --config client.toml --remote "$P" -n 8 --temp 0 > unset.txt 2> unset.log || rc=$?
echo "unset variable: exit $rc"
grep -o 'client.toml:[0-9]*: api.api_key_env names \$ENGRAM_TEST_REMOTE_KEY, which is not set; export ENGRAM_TEST_REMOTE_KEY=<key> (the exported name must match), or drop api_key_env for a server without a key; nothing was sent' unset.log
echo "requests the server saw: $(grep -c '^\[engram\] request' serve.log || true)"
export ENGRAM_TEST_REMOTE_KEY=sk-remote-0d9e
$E run --config client.toml --remote "$P" -n 8 --temp 0 > remote.txt 2> remote.log
cmp local.txt remote.txt && echo "remote greedy output equals local run"
grep -cE '^\[engram\] remote: engram_hit_rate: [0-9]\.[0-9]{2} \(prompt [0-9]\.[0-9]{2}, generated [0-9]\.[0-9]{2}; [0-9]+ hits / [0-9]+ lookups\), engram lookup miss: [0-9]+ \(table generation 1\)$' remote.log
# an explicit URL overrides [api] base_url
$E run --config client.toml --remote "$URL/v1" "$P" -n 8 --temp 0 2>/dev/null | cmp - local.txt && echo "explicit URL ending in /v1 works"
export ENGRAM_TEST_REMOTE_KEY=sk-not-the-servers
rc=0; $E run --config client.toml --remote "$P" -n 2 > /dev/null 2> wrong.log || rc=$?
echo "wrong key: exit $rc"
grep -o "answered 401 Unauthorized: the key sent was read from \$ENGRAM_TEST_REMOTE_KEY (named by client.toml:[0-9]*: api.api_key_env); .* the exported variable's name must match the one api_key_env names" wrong.log
grep -c 'sk-not-the-servers\|sk-remote-0d9e' wrong.log remote.log serve.log | paste -sd' '
stop_serve
rc=0; $E run --config client.toml --remote "$P" -n 2 > /dev/null 2> down.log || rc=$?
echo "server down: exit $rc: $(grep -o 'is the server running (engramctl serve)' down.log)"
