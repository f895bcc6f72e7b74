echo "the cat sat on the mat" > c.txt
$E -q build --corpus c.txt --tokenizer $SRC/tests/data/tiny_tokenizer.json --layers 1 --order 2 --heads 1 --buckets 64 --row-dim 8 -o t.engram
$E lookup t.engram --tokenizer $ASSETS/deepseek_v3/tokenizer.json "the cat"
