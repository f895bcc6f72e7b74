#!/usr/bin/env bash
# append --fit at scale (issue 31): invented facts (bench/facts/facts1000.jsonl, from
# bench/facts/gen_facts.py: 12 frames, each fact with a paraphrase that keeps the final words, a
# near-miss control in the same frame with an unfitted subject, an unrelated control, a rephrase,
# and two phrasings) fitted into a copy of the demo table with the defaults, then folded:
#   batch N      the first N facts in one append (N in SIZES)
#   seq KxM      K appends of M facts, each folded before the next (the ledger keeps the earlier;
#                an append refused for breaking ledger facts is run again without the entries it
#                names, as a user would, then with --force, and the facts broken counted)
#   phrasings    the first P facts with their two phrasings, then a held-out third (rephrase)
# Prints, per run: efficacy, paraphrase, rephrase, near-miss first token changed and leak (says
# the target), unrelated controls' first token changed, held-out Brown perplexity change, facts
# --check (holding, seconds), seconds per fact (whole append command), next to the numbers of
# the algorithm before issue 31 (main 5885d54). 1 thread, greedy, bf16 demo table.
#   [ENGRAM_BIN=copy/bin/engramctl] [FIT_FLAGS="--keep-near-misses 1"] [BUCKETS=262144] \
#     [MODEL=DIR] bench/bench_fit_scale.sh [WORKDIR] [SIZES] [SEQ] [PHRASINGS]
# BUCKETS: buckets per sub-table (default the demo config's 2^19); build --tile-values repeats the
# trained rows, so every n-gram reads the same values and the unedited model answers the same,
# but each fitted row is shared by fewer n-grams (one workdir per BUCKETS: base.engram is kept).
# MODEL: another model directory (default build/demo/model; e.g. one trained with
# scripts/model/train_demo.sh OUT --max-ngram 4): the table's ngram_order is read from its
# config.json (one workdir per MODEL).
#   defaults: build/bench/fit_scale "10 100 1000" "10x100" 100       (after ./scripts/demo.sh);
#   "" skips a part
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
E=${ENGRAM_BIN:-$root/build/bin/engramctl}  # ENGRAM_BIN: a copy, so that a rebuild cannot pull it away
PY=/usr/bin/python3
read -ra fit_flags <<< "${FIT_FLAGS:-}"  # extra append --fit flags, for comparisons
work=${1:-$root/build/bench/fit_scale}
sizes=${2-10 100 1000}
seq=${3-10x100}
phr=${4-100}
facts=$root/bench/facts/facts1000.jsonl
model=$(cd "${MODEL:-$root/build/demo/model}" && pwd)
heldout=$root/build/assets/brown/heldout.txt
[[ -f $model/model.safetensors ]] || { echo "bench_fit_scale: run ./scripts/demo.sh first" >&2; exit 1; }
order=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['engram']['max_ngram_size'])" "$model/config.json")
mkdir -p "$work"
work=$(cd "$work" && pwd)
cd "$work"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
sed -e "s|\.\./\.\./build/demo/model|$model|" -e "s|\.\./\.\./build/demo/engram_weights/ngram_table_v3.bin|$work/t.engram|" \
  -e 's|prefetch = true|prefetch = false|' -e 's|deterministic_addressing = true|deterministic_addressing = false|' \
  ${BUCKETS:+-e "s|^hash_buckets = [0-9]*|hash_buckets = $BUCKETS|"} -e "s|^ngram_order = [0-9]*|ngram_order = $order|" \
  -e "s|^host_memory_limit_gb = 1$|host_memory_limit_gb = 16|" \
  "$root/examples/demo/config.toml" > c.toml
[[ -f base.engram ]] || $E -q build --config c.toml --corpus "$root/build/assets/brown/train.txt" \
  --values "$model" --tensor engram.table.weight --tile-values -o base.engram
head -c 400000 "$heldout" > heldout.txt   # ~80k tokens: enough for a +-0.1% perplexity change

greedy() {  # greedy PROMPTS OUT: 8-token greedy continuations (JSON)
  $E -q run --config c.toml --temp 0 -n 8 -t 2 -f "$1" --json > "$2"
}
# The unedited model's answers to every prompt kind, once.
cp base.engram t.engram
$PY - "$facts" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for key in ("prompt", "paraphrase", "near_miss", "control", "rephrase"):
    with open(key + "s.txt", "w") as f:
        for r in rows: f.write(r[key] + "\n")
PY
for k in prompts paraphrases near_misss controls rephrases; do
  [[ -f before_$k.json ]] || greedy $k.txt before_$k.json
done
ppl0=$($E -q run --config c.toml --perplexity -f heldout.txt -t 2 | awk '{print $2}')

measure() {  # measure NAME N: the metrics over the first N facts, after the appends made
  local name=$1 n=$2
  for k in prompts paraphrases near_misss controls rephrases; do
    head -n "$n" $k.txt > cur_$k.txt
    greedy cur_$k.txt after_$k.json
  done
  local ppl1 t0 t1 holding
  ppl1=$($E -q run --config c.toml --perplexity -f heldout.txt -t 2 | awk '{print $2}')
  t0=$(date +%s.%N)
  holding=$($E facts --config c.toml --check -t 1 --json 2>/dev/null | $PY -c "import json,sys; d=json.load(sys.stdin); print(d['holding'], d['holding'] + d['failing'])" || true)
  t1=$(date +%s.%N)
  $PY - "$facts" "$n" "$name" "$ppl0" "$ppl1" "$holding" "$(echo "$t1 - $t0" | bc)" "$(cat fit_seconds)" <<'PY'
import json, sys
facts = [json.loads(l) for l in open(sys.argv[1])][: int(sys.argv[2])]
name, ppl0, ppl1, holding, check_s, fit_s = sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), sys.argv[6], sys.argv[7], float(sys.argv[8])
def texts(path):
    return [p["text"] for p in json.load(open(path))["prompts"]]
def first(ids): return ids[0] if ids else None
def firsts(path): return [first(p["output_ids"]) for p in json.load(open(path))["prompts"]]
n = len(facts)
a = {k: texts(f"after_{k}.json") for k in ("prompts", "paraphrases", "rephrases", "near_misss")}
said = lambda text, f: text.startswith(f["target"])
eff = sum(said(t, f) for t, f in zip(a["prompts"], facts)) / n
par = sum(said(t, f) for t, f in zip(a["paraphrases"], facts)) / n
reph = sum(said(t, f) for t, f in zip(a["rephrases"], facts)) / n
nm_b, nm_a = firsts("before_near_misss.json")[:n], firsts("after_near_misss.json")
nm_chg = sum(x != y for x, y in zip(nm_b, nm_a)) / n
nm_leak = sum(said(t, f) for t, f in zip(a["near_misss"], facts)) / n
c_b, c_a = firsts("before_controls.json")[:n], firsts("after_controls.json")
c_chg = sum(x != y for x, y in zip(c_b, c_a)) / n
print(f"{name:>12} | {eff:6.1%} | {par:6.1%} | {reph:6.1%} | {nm_chg:6.1%} | {nm_leak:5.1%} | {c_chg:5.1%} | "
      f"{100 * (ppl1 / ppl0 - 1):+.2f}% | {holding or '-':>9} in {float(check_s):.0f} s | {fit_s / n:.2f}")
PY
}

nm_line() {  # nm_line FIT_JSON...: the fit's own near misses (each entry's frame, another subject),
            # the rows written and the exposure
  $PY - "$@" <<'PY'
import json, sys
fits = [json.load(open(f))['fit'] for f in sys.argv[1:]]
n = [f['near_misses'] for f in fits]
a, c, s = (sum(x[k] for x in n) for k in ('asked', 'changed', 'say_target'))
print(f"    the fit's own near misses: {a} asked, {c} changed their first token ({c / max(a, 1):.1%}), "
      f"{s} now say a fitted target ({s / max(a, 1):.1%})")
# exposure: the share of positions reading a row a fit wrote; appends add up (1 - prod(1 - x))
left = 1.0
for f in fits: left *= 1 - f['exposure']['share']
print(f"    rows written: {sum(f['rows_written'] for f in fits)}, exposure {1 - left:.1%}"
      + (" (appends taken as independent: rows written twice count twice)" if len(fits) > 1 else ""))
PY
}

buckets=$(sed -n 's/^hash_buckets = \([0-9]*\).*/\1/p' c.toml)
echo "bench_fit_scale: model $model (orders 2..$order), bf16 table $buckets buckets a sub-table, 1 thread; metrics after folding"
echo "        run |    eff |   para | rephr | nm chg | leak | ctrl | ppl    | facts --check   | s/fact"
echo "  before issue 31 (main 5885d54, its own 1,000-fact set): batch 10: 100% 100% - 0% - - +0.09% 0.8 s/fact;"
echo "  batch 100: 89% 87% - 63% - - +0.53% 0.76; batch 1000: 47% 44% 0% 93% - - +5.7% 1.82; seq 10x100: 145/1000 hold"
for n in $sizes; do
  cp base.engram t.engram
  head -n "$n" "$facts" | $PY -c "import json,sys; [print(json.dumps({'prompt': json.loads(l)['prompt'], 'target': json.loads(l)['target']})) for l in sys.stdin]" > fit.jsonl
  s0=$(date +%s.%N)
  $E -q append --config c.toml --entries fit.jsonl -t 1 --json "${fit_flags[@]}" > fit_$n.json
  s1=$(date +%s.%N)
  echo "$s1 - $s0" | bc > fit_seconds
  $E -q sort-buckets t.engram
  measure "batch $n" "$n"
  nm_line fit_$n.json
done
if [[ -n $seq ]]; then
  k=${seq%x*} m=${seq#*x}
  cp base.engram t.engram
  total=0
  for ((i = 0; i < k; i++)); do
    sed -n "$((i * m + 1)),$(((i + 1) * m))p" "$facts" | $PY -c "import json,sys; [print(json.dumps({'prompt': json.loads(l)['prompt'], 'target': json.loads(l)['target']})) for l in sys.stdin]" > fit.jsonl
    # An append that would break ledger facts is refused (exit 2, nothing written), naming the
    # entries whose rows they share. As a user would, the bench drops those lines and appends the
    # rest; a second refusal is written with --force and its broken facts counted.
    # SEQ_FORCE=1: --force at once (the numbers of stop 39).
    tries=() dropped=0 forced=
    [[ ${SEQ_FORCE:-0} == 1 ]] && forced=--force
    while :; do
      s0=$(date +%s.%N)
      rc=0
      $E -q append --config c.toml --entries fit.jsonl -t 1 --json $forced "${fit_flags[@]}" > seq_$i.json 2> seq_$i.err || rc=$?
      s1=$(date +%s.%N)
      tries+=("$(printf %.0f "$(echo "$s1 - $s0" | bc)")")
      total=$(echo "$total + $s1 - $s0" | bc)
      [[ $rc == 0 ]] && break
      [[ $rc == 2 && -s seq_$i.json ]] || { cat seq_$i.err >&2; exit 1; }
      if [[ ${#tries[@]} -ge 2 ]]; then forced=--force; continue; fi
      n=$($PY - seq_$i.json fit.jsonl <<'PY'
import json, sys
fit = json.load(open(sys.argv[1]))['fit']
drop = {l for k in fit['ledger_kept'] if k['held_before'] and not k['holds_after'] for l in k['lines']}
lines = open(sys.argv[2]).read().splitlines()
open(sys.argv[2], 'w').write(''.join(l + '\n' for n, l in enumerate(lines, 1) if n not in drop))
print(len(drop))
PY
)
      dropped=$((dropped + n))
    done
    $E -q sort-buckets t.engram
    echo "  seq append $((i + 1)) of $k: ${tries[*]} s, $($PY -c "import json; print(json.load(open('seq_$i.json'))['fit']['fitted'])") of $m of its own facts fitted ($dropped dropped after a refusal), $($PY -c "import json; print(len(json.load(open('seq_$i.json'))['fit']['ledger_kept']))") ledger facts fitted jointly, $($PY -c "import json; print(sum(k['held_before'] and not k['holds_after'] for k in json.load(open('seq_$i.json'))['fit']['ledger_kept']))") of them broken${forced:+ (--force)}"
  done
  echo "$total" > fit_seconds
  measure "seq $seq" "$((k * m))"
  nm_line seq_*.json
  # the first M facts, at the end
  # (facts --check exits 3 when any fact fails; its JSON is what is read here)
  { $E facts --config c.toml --check -t 1 --json 2>/dev/null || true; } | $PY -c "
import json,sys
d = json.load(sys.stdin)['facts']
first = sorted(d, key=lambda f: f['id'])[:$m]
print('  first $m facts of the sequential run still holding at the end:', sum(f['holds'] for f in first), 'of', len(first))"
fi
if [[ -n $phr ]]; then
  cp base.engram t.engram
  head -n "$phr" "$facts" | $PY -c "import json,sys; [print(json.dumps({'prompts': json.loads(l)['prompts'], 'target': json.loads(l)['target']})) for l in sys.stdin]" > fit.jsonl
  s0=$(date +%s.%N)
  $E -q append --config c.toml --entries fit.jsonl -t 1 --json "${fit_flags[@]}" > phr.json
  s1=$(date +%s.%N)
  echo "$s1 - $s0" | bc > fit_seconds
  $E -q sort-buckets t.engram
  measure "2 phrasings $phr" "$phr"
  nm_line phr.json
fi
