# llama.cpp's conventions (issue 16): -p/--prompt, -n -1 (until end of text or the context limit,
# said when reached), --repeat-penalty; usage errors never echo the prompt.
source $SRC/tests/cli/lib.sh
random_model m v41
$PY - m/config.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["max_position_embeddings"] = 48; c["eos_token_id"] = 99999
json.dump(c, open(sys.argv[1], "w"))
PY
g() { $E -q run --config m.toml --temp 0 "$@" 2> err.txt; }
a=$(g "The jury said" -n 12); b=$(g -p "The jury said" -n 12)
[[ -n $a && $a == "$b" ]] && echo "-p gives the positional prompt's output"
c=$(g -p "The jury said" -n 12 --repeat-penalty 5 --repeat-last-n -1)
[[ $c != "$a" ]] && echo "--repeat-penalty changes the greedy output"
d=$(g -p "The jury said" -n 12 --repeat-penalty 1)
[[ $d == "$a" ]] && echo "--repeat-penalty 1 is off"
$E run --config m.toml --temp 0 -p "The jury said" -n -1 --json 2> err.txt | $PY -c "
import json, sys
d = json.load(sys.stdin); r = d['prompts'][0] if 'prompts' in d else d['results'][0]
print('-n -1 generated', len(r['prompt_ids']) + len(r['output_ids']), 'tokens in all')" || cat err.txt
grep -o 'stopped at the context limit of 48 tokens' err.txt
set +e
$E run --config m.toml --repeat-penalty 1.1 "secret prompt words" extra 2> err.txt; echo "exit $?"
grep -c "secret prompt words\|extra" err.txt
head -n1 err.txt
