# The low-hit-rate warning compares a request with what the table scores on its own build corpus
# (recorded in PROVENANCE as corpus_hit_rate): the table's own training text gets no warning
# (before, a fixed 0.3 threshold fired on it), text far from the corpus does, and a table whose
# PROVENANCE lacks the field gets the rate from its STATS.
source $SRC/tests/cli/lib.sh
demo_model m
$E inspect m.engram --json | $PY -c "import json,sys; r=json.load(sys.stdin)['provenance']['corpus_hit_rate']; print('corpus_hit_rate recorded:', 0.2 < r < 0.9)"
own=$(sed -n 2p m.corpus.txt | cut -c1-600)
$E run --config m.toml "$own" -n 1 --temp 0 2>&1 >/dev/null | grep -c 'warning' || true
$E run --config m.toml "Purple quantum giraffes negotiate blockchain lasagna recipes today" -n 1 --temp 0 2>&1 >/dev/null |
  grep -o 'warning: \[engram\] request 1: engram_hit_rate 0.00 is below a quarter of the 0.[0-9][0-9] this table scores on its own build corpus'
$E lookup m.engram --tokenizer m/tokenizer.json "Purple quantum giraffes negotiate blockchain lasagna recipes today" --json |
  $PY -c "import json,sys; print([n[:60] for n in json.load(sys.stdin)['notes']])"
# A table built before corpus_hit_rate was recorded (golden v3): the rate comes from its STATS.
$E lookup $SRC/tests/golden/v3/native_f32.engram --canonical-ids 63,61,59,57,55,53,51,49,47,45,43 --json |
  $PY -c "import json,sys; print([n[:70] for n in json.load(sys.stdin)['notes']])"
