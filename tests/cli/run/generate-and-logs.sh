# run generates with the five [engram] load lines, a hit rate per request and llama.cpp-style timings;
# the same seed gives the same output.
source $SRC/tests/cli/lib.sh
random_model m v41
$E run --config m.toml "The jury said that the" -n 6 --temp 0.8 --seed 42 -t 1 > a.txt 2> a.log
$E run --config m.toml "The jury said that the" -n 6 --temp 0.8 --seed 42 -t 2 > b.txt 2> /dev/null
cmp a.txt b.txt && echo "same seed, same output"
grep -c '^\[engram\] loading ngram table from m.engram$' a.log
grep -E '^\[engram\] (mmap enabled, host memory reserved: .* GB|hash buckets: 1024, order: 3, embed_dim: 32|deterministic addressing: ON|table loaded in .*, gpu footprint: 0.0 GB)$' a.log | wc -l
grep -cE '^\[engram\] request 1: engram_hit_rate: [0-9.]+ \([0-9]+ hits / [0-9]+ lookups\), engram lookup miss: [0-9]+$' a.log
grep -cE '^timings: (       load time|prompt eval time|       eval time|      total time) = ' a.log
grep -c '^memory: host table mapped' a.log
$E run --config m.toml "Hi" -n 2 --temp 0 2>&1 >/dev/null | grep -o 'engram bypass: the prompt has 1 token(s), fewer than the n-gram order 3'
