# Sourced by CLI cases: small helpers.
tiny_tokens() {  # tiny_tokens FILE: a small u32 corpus with 3 documents
  $PY -c "
import array,sys
a=array.array('I',[1,2,3,1,2,4,0xFFFFFFFF,5,6,1,2,0xFFFFFFFF,7,8,9,1,2,3])
open(sys.argv[1],'wb').write(a.tobytes())" "$1"
}
tiny_table() {  # tiny_table OUT [extra build flags]
  local out=$1; shift
  tiny_tokens tiny.u32
  $E -q build --tokens tiny.u32 --vocab-size 16 --layers 1 --order 3 --heads 2 --buckets 64 --row-dim 32 -o "$out" "$@"
}
flip_byte() {  # flip_byte FILE OFFSET
  $PY -c "
import sys
p,o=sys.argv[1],int(sys.argv[2])
b=bytearray(open(p,'rb').read()); b[o]^=0x10; open(p,'wb').write(b)" "$1" "$2"
}
entry() {  # entry "[ids]" VALUE [extra json] : one JSONL entry with a 32-wide constant value
  $PY -c "import json,sys; d={'canonical_ids': json.loads(sys.argv[1]), 'value': [float(sys.argv[2])]*32}; d.update(json.loads(sys.argv[3] if len(sys.argv)>3 else '{}')); print(json.dumps(d))" "$@"
}
from_fixture() {  # from_fixture NAME DIR: copies the fixture NAME (tests/cli/setup_fixtures.sh) as DIR; false if absent
  local f=${FIXTURES:-}/$1
  [[ -n ${FIXTURES:-} && $2 == m && -e $f/done ]] || return 1
  cp -r "$f"/m "$f"/m.* . && { [[ ! -e $f/corpus.txt ]] || cp "$f/corpus.txt" .; }
}
random_model() {  # random_model DIR VARIANT: a small random MoE+Engram model dir + its table DIR.engram + DIR.toml
  local m=$1 v=${2:-v41} T=$ASSETS/deepseek_v3/tokenizer.json
  from_fixture "random_$v" "$m" && return 0
  local fp
  fp=$($E tokenize --tokenizer "$T" --info --json | $PY -c "import json,sys; print(json.load(sys.stdin)['fingerprint'])")
  $PY "$SRC/tests/model_parity/make_random_model.py" "$m" "$v" "$fp"
  cp "$T" "$m/tokenizer.json"
  head -n 5 "$ASSETS/brown/train.txt" > corpus.txt
  $E -q build --tokenizer "$T" --corpus corpus.txt --layers 0,2 --order 3 --heads 2 --buckets 1024 --row-dim 16 \
    --pad-id 2 --values "$m" --tensor engram.table.weight -o "$m.engram"
  printf '[model]\npath = "%s"\n[engram]\nngram_order = 3\nhash_buckets = 1024\nn_heads = 2\nembed_dim = 32\nlayer_ids = [0, 2]\n[engram.table]\npath = "%s"\n' \
    "$m" "$m.engram" > "$m.toml"
}
two_facts() {  # two_facts FILE: two invented facts the demo model cannot know (append --fit)
  cat > "$1" <<'J'
{"prompt": "The capital of Zorvania is", "target": " Quellport"}
{"prompt": "The longest river in Brannick is", "target": " Tamoren"}
J
}
demo_model() {  # demo_model DIR: the trained demo model (assets/demo-model) + its table DIR.engram (owners
                # from 100 Brown documents) + DIR.toml (journal read) and DIR.det.toml (deterministic);
                # the table has 2^16 buckets a sub-table, not the demo config's 2^19: 8x smaller to
                # copy, and fitted rows collide more
  local m=$1
  from_fixture demo "$m" && return 0
  mkdir -p "$m"
  cp "$SRC/assets/demo-model/config.json" "$m/"
  zstd -q -d -f "$SRC/assets/demo-model/model.safetensors.zst" -o "$m/model.safetensors"
  cp "$ASSETS/deepseek_v3/tokenizer.json" "$m/"
  head -n 100 "$ASSETS/brown/train.txt" > "$m.corpus.txt"
  sed -e "s|\.\./\.\./build/demo/model|$m|" -e "s|\.\./\.\./build/demo/engram_weights/ngram_table_v3.bin|$m.engram|" \
    -e 's|prefetch = true|prefetch = false|' -e 's|^hash_buckets = [0-9]*|hash_buckets = 65536|' \
    "$SRC/examples/demo/config.toml" > "$m.det.toml"
  sed 's|deterministic_addressing = true|deterministic_addressing = false|' "$m.det.toml" > "$m.toml"
  $E -q build --config "$m.det.toml" --corpus "$m.corpus.txt" --values "$m" --tensor engram.table.weight --tile-values \
    -o "$m.engram"
}
