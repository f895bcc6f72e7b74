# --shard I/N gives every shard an even slice of the input, whatever its shape (many files, an
# @list, one document longer than a block, text), and merging N parts equals a one-process build
# (every section but PROVENANCE) for N in 1 2 3 7 64, also when N exceeds the corpus's blocks.
$PY $SRC/scripts/gen_zipf.py big.u32 2000000 --vocab 3000 --seed 3
small=(--vocab-size 3000 --layers 1 --order 2 --heads 2 --buckets 1K --row-dim 8 -t 1)
for i in 0 1 2 3 4 5 6; do
  $E build --tokens big.u32 "${small[@]}" --shard $i/7 -o big.$i 2>&1 |
    sed -n 's/.*(\([0-9]*\) tokens from input tokens \[\([0-9]*\), \([0-9]*\)) of \([0-9]*\)).*/\1 \2 \3 \4/p'
done | awk '{ ok = $1 >= 250000 && $1 <= 330000; print "shard " NR-1 "/7: ids [" $2 ", " $3 ") of " $4 (ok ? ", 250k-330k tokens" : ", UNEVEN: " $1 " tokens") }'
# A corpus of 3 files (one a single 60k-token document), named through an @list, in 20k blocks.
$PY $SRC/scripts/gen_zipf.py a.u32 90000 --vocab 3000 --seed 5 --doc 300
$PY $SRC/scripts/gen_zipf.py b.u32 60000 --vocab 3000 --seed 6 --doc 100000000
$PY $SRC/scripts/gen_zipf.py c.u32 50000 --vocab 3000 --seed 7 --doc 50
printf 'a.u32\n\nb.u32\nc.u32\n' > list.txt
flags=(--tokens @list.txt --vocab-size 3000 --layers 1,2 --order 3 --heads 4 --buckets 4K --row-dim 8 --init normal --seed 9 --block-tokens 20000 -t 1)
$E -q build "${flags[@]}" -o one.engram
$E -q build "${flags[@]}" --shard 0/1 -o merged.1.engram  # one shard writes the table itself
for n in 2 3 7 64; do
  parts=()
  for ((i = 0; i < n; i++)); do
    $E -q build "${flags[@]}" --shard $i/$n -o part.$n.$i
    parts+=(part.$n.$i)
  done
  $E -q merge "${parts[@]}" -o merged.$n.engram
done
for n in 1 2 3 7 64; do printf 'N=%d ' $n; $PY $SRC/tests/cli/same_sections.py one.engram merged.$n.engram; done
# Text: lines split at byte slices rounded to the next line start; 3 shards equal one build.
T=$ASSETS/deepseek_v3/tokenizer.json
head -n 300 $ASSETS/brown/brown.txt > t1.txt
sed -n 301,500p $ASSETS/brown/brown.txt > t2.txt
tflags=(--corpus t1.txt t2.txt --tokenizer $T --layers 1 --order 3 --heads 2 --buckets 4K --row-dim 8 -t 1)
$E -q build "${tflags[@]}" -o tone.engram
for i in 0 1 2; do $E build "${tflags[@]}" --shard $i/3 -o tpart.$i 2>&1 | grep -o 'from input bytes \[[0-9]*, [0-9]*) of [0-9]*' | sed 's/[0-9][0-9]*/#/g'; done
$E -q merge tpart.0 tpart.1 tpart.2 -o tmerged.engram
printf 'text '; $PY $SRC/tests/cli/same_sections.py tone.engram tmerged.engram
$E -q build --tokens @empty.txt "${small[@]}" -o x 2>&1 | sed 's/^[^:]*: //'
: > empty.txt
$E -q build --tokens @empty.txt "${small[@]}" -o x 2>&1 | sed 's/^[^:]*: //'
