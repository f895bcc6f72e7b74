# append --fit refuses entries it cannot fit with a message naming the line, and writes nothing:
# a value beside a prompt, an empty target, a target beyond the context, a token the model can
# never emit, a one-token prompt, a file mixing values and facts, and a config without a model.
source $SRC/tests/cli/lib.sh
demo_model m
cp m.engram before.engram
long=$($PY -c "print(' Quellport' * 200)")
cat > bad.jsonl <<J
{"prompt": "The capital of Zorvania is", "target": " Quellport", "value": [0.5]}
{"prompt": "The capital of Zorvania is", "target": ""}
{"prompt": "The capital of Zorvania is"}
{"prompt": "The capital", "target": " x", "text": "y"}
{"prompt": "The capital of Zorvania is", "target": " Quellport", "layer": 1}
J
fail() { code=0; "$@" > out.txt 2> err.txt || code=$?; echo "exit $code"; grep -v '^\[engram\]' err.txt | sed 's/^engramctl append: //'; }
fail $E append --config m.toml --entries bad.jsonl
printf '{"prompt": "The capital of Zorvania is", "target": "%s"}\n' "$long" > long.jsonl
printf '{"prompt": "The capital of Zorvania is", "target": " Ostwick"}\n{"prompt": "Hello", "target": " Quellport"}\n{"text": "Hello world"}\n' > model.jsonl
fail $E append --config m.toml --entries long.jsonl
fail $E append --config m.toml --entries model.jsonl
printf '{"text": " quantum chromodynamics", "value": %s}\n{"prompt": "The capital of Zorvania is", "target": " Quellport"}\n' \
  "$($PY -c 'print([0.25] * 16)')" > mixed.jsonl
fail $E append --config m.toml --entries mixed.jsonl
printf '{"text": " quantum chromodynamics", "value": %s}\n' "$($PY -c 'print([0.25] * 16)')" > values.jsonl
fail $E append --config m.toml --entries values.jsonl --fit
printf '{"prompt": "The capital of Zorvania is", "target": " Quellport"}\n' > one.jsonl
fail $E append m.engram --entries one.jsonl
fail $E append --config m.toml --entries one.jsonl --max-ppl-increase 1
cmp -s m.engram before.engram && echo "table unchanged"
