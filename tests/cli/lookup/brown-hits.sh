# A table built from Brown text gives hits for corpus n-grams and misses for unseen ones.
T=$ASSETS/deepseek_v3/tokenizer.json
head -n 20 $ASSETS/brown/brown.txt > corpus.txt
$E -q build --corpus corpus.txt --tokenizer $T --layers 1,2 --order 3 --heads 4 --buckets 256K --row-dim 8 \
  --dtype bf16 --pad-id 2 -o b.engram
seen=$(head -n 1 corpus.txt | cut -c1-300)
$E lookup b.engram --tokenizer $T "$seen" --json > seen.json
$E lookup b.engram --tokenizer $T "Purple quantum giraffes negotiate blockchain lasagna recipes" --json > unseen.json
$PY -c "
import json
s=json.load(open('seen.json')); u=json.load(open('unseen.json'))
assert s['engram_hit_rate'] > 0.9, s['engram_hit_rate']
assert u['engram_hit_rate'] < 0.05, u['engram_hit_rate']
assert any('below a quarter of the' in n and 'this table scores on its own build corpus' in n for n in u['notes']), u['notes']
print('seen', s['lookups'] > 100, 'unseen', u['misses'] == u['lookups'])"
