# [api] api_key_env: a set variable makes every endpoint but /health and /v1/models need the
# Bearer key (401 OpenAI-style otherwise); the key never appears in any output; an unset or empty
# variable refuses to start (naming it and the config line) unless --no-auth asks to serve open.
source $SRC/tests/cli/lib.sh
source $SRC/tests/cli/serve_lib.sh
random_model m v41
printf '[api]\napi_key_env = "ENGRAM_TEST_SERVE_KEY"\n' >> m.toml
export ENGRAM_TEST_SERVE_KEY=sk-test-8c1f0e6a92d4b7
KEY=$ENGRAM_TEST_SERVE_KEY
start_serve serve.log --config m.toml -t 1
wait_ready
code() { curl -s -o body.$1.json -w '%{http_code}' --max-time 60 "${@:2}"; }
echo "health without key: $(code h "$URL/health")"
echo "models without key: $(code m "$URL/v1/models")"
echo "completion without key: $(code a -d '{"prompt":"The jury","max_tokens":2}' "$URL/v1/completions")"
field body.a.json 'j["error"]["code"], j["error"]["type"], "ENGRAM_TEST_SERVE_KEY" in j["error"]["message"]'
echo "completion with a wrong key: $(code b -H 'Authorization: Bearer sk-wrong' -d '{"prompt":"The jury","max_tokens":2}' "$URL/v1/completions")"
field body.b.json 'j["error"]["code"], j["error"]["type"]'
echo "chat with a wrong key: $(code c -H 'Authorization: Bearer sk-wrong' -d '{"messages":[{"role":"user","content":"x"}]}' "$URL/v1/chat/completions")"
echo "metrics without key: $(code d "$URL/metrics")"
echo "completion with the key: $(code e -H "Authorization: Bearer $KEY" -d '{"prompt":"The jury","max_tokens":2}' "$URL/v1/completions")"
echo "metrics with the key: $(code f -H "Authorization: Bearer $KEY" "$URL/metrics")"
grep -E '^engram_requests_unauthorized_total 4$' body.f.json
stop_serve
echo "exit $SERVE_EXIT"
unset ENGRAM_TEST_SERVE_KEY
rc=0; $E serve --config m.toml --port 0 2> unset.log || rc=$?
echo "unset variable: exit $rc"
grep -o 'm.toml:[0-9]*: api.api_key_env names \$ENGRAM_TEST_SERVE_KEY, which is not set; export ENGRAM_TEST_SERVE_KEY=<key> (the exported name must match), or start serve with --no-auth to serve without authentication' unset.log
rc=0; ENGRAM_TEST_SERVE_KEY= $E serve --config m.toml --port 0 2> empty.log || rc=$?
echo "empty variable: exit $rc $(grep -c 'which is empty' empty.log)"
start_serve open.log --config m.toml -t 1 --no-auth
wait_ready
echo "--no-auth, completion without key: $(code g -d '{"prompt":"The jury","max_tokens":2}' "$URL/v1/completions")"
stop_serve
grep -o 'warning: \[serve\] --no-auth: serving WITHOUT authentication although m.toml:[0-9]*: api.api_key_env names \$ENGRAM_TEST_SERVE_KEY' open.log
# The key is never printed: not in the logs, nor in any response.
n=$(cat ./*.log ./body.*.json | grep -c -- "$KEY" || true)
echo "key occurrences in all output: $n"
