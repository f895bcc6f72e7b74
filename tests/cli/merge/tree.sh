# Merges as a tree and in bounded memory give the one-process table: 7 exact shards merged as
# {0,1,2} + {3,4,5,6} with --partial and then the two merged; all 7 merged flat under a --memory
# that holds 2 parts open (rounds through temporary parts, none left behind). A partial part
# overlapping another, sketch parts with --partial, and a tree missing a shard are refused.
$PY $SRC/scripts/gen_zipf.py c.u32 200000 --vocab 3000
flags=(--tokens c.u32 --vocab-size 3000 --layers 1 --order 3 --heads 2 --buckets 2K --row-dim 8 --init normal --seed 5 --block-tokens 10000)
for i in 0 1 2 3 4 5 6; do $E -q build "${flags[@]}" --shard $i/7 -o part.$i; done
$E -q build "${flags[@]}" -o one.engram
$E -q merge --partial part.0 part.2 part.1 -o a.part
$E -q merge --partial part.3 part.4 -o b1.part
$E -q merge --partial b1.part part.5 part.6 -o b.part
$E merge a.part b.part -o tree.engram 2>&1 | grep -o 'merged 2 parts into tree.engram: [0-9]* rows, [0-9]* tokens'
mkdir tmp
$E merge part.{0..6} --memory 16M --temp-dir tmp -o flat.engram 2>&1 | grep -o 'merge round [0-9]: [0-9]* parts -> [0-9]*'
ls tmp | wc -l
$E inspect flat.engram --json | $PY -c "import json,sys; print('merged_parts:', json.load(sys.stdin)['provenance']['merged_parts'])"
for t in tree flat; do printf '%s.engram against the one-process build: ' $t; $PY $SRC/tests/cli/same_sections.py one.engram $t.engram; done
$E merge a.part part.1 b.part -o x.engram 2>&1 | sed 's/^.*: //'
$E merge a.part b1.part -o x.engram 2>&1 | sed 's/^engramctl merge: //'
$E -q build "${flags[@]}" --owners sketch --shard 0/2 -o s.0
$E -q build "${flags[@]}" --owners sketch --shard 1/2 -o s.1
$E merge --partial s.0 s.1 -o s.part 2>&1 | sed 's/^engramctl merge: //'
[[ ! -e x.engram && ! -e s.part ]] && echo "nothing written on refusal"
