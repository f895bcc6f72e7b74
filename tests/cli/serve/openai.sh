# serve answers /health with 503 while loading then 200, speaks the OpenAI completions and chat
# APIs (stream and not), reproduces run's greedy output, logs run's five load lines and one line
# per request, and exits 0 on SIGTERM.
source $SRC/tests/cli/lib.sh
source $SRC/tests/cli/serve_lib.sh
random_model m v41
P="The jury said that the"
$E run --config m.toml "$P" -n 8 --temp 0 -t 1 > run.txt 2>/dev/null
ENGRAM_SERVE_LOAD_DELAY_MS=1500 start_serve serve.log --config m.toml -t 1
curl -s --max-time 10 -w ' %{http_code}\n' "$URL/health"
wait_ready
curl -s --max-time 10 -w ' %{http_code}\n' "$URL/health"
curl -s --max-time 10 "$URL/v1/models" | field - 'j["data"][0]["id"], j["object"]'
post /v1/completions "{\"prompt\":\"$P\",\"max_tokens\":8,\"temperature\":0,\"seed\":1}" > c.json
field c.json '"completion:", j["object"], j["choices"][0]["finish_reason"], j["usage"]'
field c.json '"engram keys:", sorted(j["engram"]), sorted(j["engram"]["prompt"])'
field c.json '"hit_rate consistent:", abs(j["engram"]["hit_rate"] - j["engram"]["hits"] / j["engram"]["lookups"]) < 1e-9, j["engram"]["prompt"]["lookups"] + j["engram"]["generated"]["lookups"] == j["engram"]["lookups"]'
field c.json '"base model said:", "base model" in j["system_fingerprint"]'
$PY -c "import json,sys; print('completion equals run:', '$P' + json.load(open('c.json'))['choices'][0]['text'] + '\n' == open('run.txt').read())"
post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$P\"}],\"max_tokens\":8,\"temperature\":0}" > chat.json
$PY -c "import json; a=json.load(open('chat.json')); c=json.load(open('c.json')); print('chat:', a['object'], a['choices'][0]['message']['role'], 'same text:', a['choices'][0]['message']['content']==c['choices'][0]['text'])"
post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$P\"}],\"max_tokens\":8,\"temperature\":0,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" -N -D chat_stream.h > chat_stream.txt
grep -i -o '^content-type: text/event-stream' chat_stream.h
$PY - <<'PY'
import json
lines = [l for l in open('chat_stream.txt').read().split('\n') if l]
print('stream ends with [DONE]:', lines[-1] == 'data: [DONE]', 'all data lines:', all(l.startswith('data: ') for l in lines))
chunks = [json.loads(l[6:]) for l in lines[:-1]]
text = ''.join(c['choices'][0]['delta'].get('content', '') for c in chunks if c['choices'])
c = json.load(open('c.json'))
print('stream text equals non-stream:', text == c['choices'][0]['text'], 'chunks:', len(chunks) > 3)
print('usage chunk:', chunks[-1]['choices'] == [] and chunks[-1]['usage'] == c['usage'] and 'engram' in chunks[-1])
print('finish chunk:', [x['choices'][0]['finish_reason'] for x in chunks if x['choices']][-1])
PY
post /v1/completions "{\"prompt\":\"$P\",\"max_tokens\":8,\"temperature\":0,\"stream\":true}" -N > c_stream.txt
$PY -c "
import json
ls=[l for l in open('c_stream.txt').read().split('\n') if l]
t=''.join(json.loads(l[6:])['choices'][0]['text'] for l in ls[:-1])
print('completion stream equals:', t==json.load(open('c.json'))['choices'][0]['text'], ls[-1])"
# stop: cut before the first occurrence of a stop string taken from the greedy text.
$PY -c "import json; t=json.load(open('c.json'))['choices'][0]['text']; print(json.dumps({'prompt':'$P','max_tokens':8,'temperature':0,'stop':[t[3:6]]}))" > stop_req.json
post /v1/completions "$(cat stop_req.json)" > stop.json
$PY -c "import json; t=json.load(open('c.json'))['choices'][0]['text']; s=json.load(open('stop.json'))['choices'][0]; print('stop:', s['finish_reason'], s['text']==t[:t.find(t[3:6])])"
post /v1/completions '{"prompt":"Hi","max_tokens":2,"temperature":0}' | field - '"short prompt bypass:", j["engram"]["bypass"]'
post /v1/completions '{"prompt":"Hi","n":2}' -w ' %{http_code}\n' | tail -c 4
post /v1/completions 'not json' -w ' %{http_code}\n' | tail -c 4
# sampling with a seed is reproducible
a=$(post /v1/completions "{\"prompt\":\"$P\",\"max_tokens\":6,\"temperature\":0.8,\"seed\":7}" | field - 'j["choices"][0]["text"]')
b=$(post /v1/completions "{\"prompt\":\"$P\",\"max_tokens\":6,\"temperature\":0.8,\"seed\":7}" | field - 'j["choices"][0]["text"]')
[[ "$a" == "$b" ]] && echo "same seed, same sample"
stop_serve
echo "serve exit after SIGTERM: $SERVE_EXIT"
grep -c '^\[engram\] loading ngram table from m.engram$' serve.log
grep -E '^\[engram\] (mmap enabled, host memory reserved: .* GB|hash buckets: 1024, order: 3, embed_dim: 32|deterministic addressing: ON|table loaded in [0-9]+\.[0-9]s, gpu footprint: 0.0 GB)$' serve.log | wc -l
grep -cE '^\[engram\] request [0-9]+: engram_hit_rate: [0-9]\.[0-9]{2} \(prompt [0-9]\.[0-9]{2}, generated [0-9]\.[0-9]{2}; [0-9]+ hits / [0-9]+ lookups\), engram lookup miss: [0-9]+ \(table generation 1\)$' serve.log
grep -o 'engram bypass: the prompt has 1 token(s), fewer than the n-gram order 3' serve.log
