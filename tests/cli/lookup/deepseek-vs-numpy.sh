# lookup's addressing (no table) equals the numpy reference of DeepSeek's formula, bucket for bucket.
T=$ASSETS/deepseek_v3/tokenizer.json
$E lookup --layout engram-demo --tokenizer $T "The quick brown fox jumps over the lazy dog; 你好世界 🎉 12345" --json > l.json
$PY - <<'PY'
import json, subprocess, sys, array, os
d = json.load(open('l.json'))
a = d['addressing']
canon = [p['canonical'] for p in d['positions']]
array.array('I', canon).tofile(open('ids.u32', 'wb'))
subprocess.check_call([os.environ['PY'], os.environ['SRC'] + '/scripts/reference/engram_hash_ref.py', '--ids', 'ids.u32',
    '--layers', ','.join(map(str, a['layer_ids'])), '--max-order', str(a['max_order']), '--heads', str(a['n_heads']),
    '--base', '646400', '--vocab', str(a['canonical_vocab']), '--pad', str(a['pad_id']), '--out', 'ref.i64'])
ref = array.array('q'); ref.frombytes(open('ref.i64', 'rb').read())
ours = [b for li in range(len(a['layer_ids'])) for p in d['positions'] for o in p['layers'][li]['orders'] for b in o['buckets']]
assert list(ref) == ours, (len(ref), len(ours))
print(len(ours), 'buckets identical; canonical vocab', a['canonical_vocab'], 'multipliers', a['multipliers'][:2])
PY
