$E tokenize --tokenizer $ASSETS/deepseek_v3/tokenizer.json "Hello world! 你好，世界 12345"
