$E tokenize --tokenizer $ASSETS/deepseek_v3/tokenizer.json --decode "19923 2058 3 223 30594"
