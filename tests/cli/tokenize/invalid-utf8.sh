printf "ab\xffcd" | $E tokenize --tokenizer $ASSETS/deepseek_v3/tokenizer.json
