# Tokens as a person reads them (issue 16): decoded text beside the raw byte-level vocabulary
# string, with the bytes of an incomplete UTF-8 sequence written as <0xNN>.
T=$ASSETS/deepseek_v3/tokenizer.json
$E tokenize --tokenizer $T --json "深度 x 😀"
$E lookup --tokenizer $T --layers 1 --order 2 --heads 1 --buckets 1K "深度 x😀" | grep '^#'
