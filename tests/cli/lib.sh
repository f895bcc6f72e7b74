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
