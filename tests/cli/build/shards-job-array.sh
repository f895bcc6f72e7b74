# The README's cluster recipe run locally: N shard processes at once (a job array), then merge;
# the table equals a one-process build in every section but PROVENANCE.
$PY $SRC/scripts/gen_zipf.py c.u32 300000 --vocab 5000
flags=(--tokens c.u32 --vocab-size 5000 --layers 1,2 --order 3 --heads 4 --buckets 4K --row-dim 8 --init normal --seed 9 --block-tokens 20000)
for i in 0 1 2 3; do $E -q build "${flags[@]}" --shard $i/4 -o part.$i & done
wait
$E -q merge part.3 part.1 part.0 part.2 -o merged.engram
$E -q build "${flags[@]}" -o one.engram
$PY $SRC/tests/cli/same_sections.py one.engram merged.engram
$E -q merge part.0 part.1 part.2 -o x.engram 2>&1 | sed 's/^.*: shard/shard/'
