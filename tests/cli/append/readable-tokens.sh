# Append reports show each entry's n-gram as text beside the raw vocabulary strings (深度学习, not
# æ·±åº¦åŃ¦ä¹ł alone), for text, ids and canonical_ids entries, in the text report and in --json;
# a previous owner that came from the journal is shown decoded too.
T=$ASSETS/deepseek_v3/tokenizer.json
printf '深度学习 is deep\n' > corpus.txt
# 2 buckets per sub-table: every later n-gram of an order displaces the earlier one.
$E -q build --tokenizer "$T" --corpus corpus.txt --layers 0 --order 3 --heads 1 --buckets 2 --row-dim 4 -o t.engram
v='"value": [0.5, 0.5, 0.5, 0.5]'
printf '{"text": "深度学习 is", %s}\n' "$v" > a.jsonl
ids=$($E tokenize --tokenizer "$T" " deep learning")
printf '{"ids": [%s], %s}\n{"canonical_ids": [7, 9], %s}\n' "${ids// /, }" "$v" "$v" > b.jsonl
$E append t.engram --tokenizer "$T" --entries a.jsonl 2>/dev/null
$E append t.engram --tokenizer "$T" --entries b.jsonl 2>/dev/null | grep -v 'seen .* times in the build corpus' | sed -E 's/bucket [0-9]+/bucket B/; s/owner [0-9a-f]{8}/owner X/'
$E append t.engram --tokenizer "$T" --entries a.jsonl --dry-run --json 2>/dev/null |
  $PY -c "import json,sys; n=json.load(sys.stdin)['ngrams'][0]; print(n['line'], n['texts'], n['tokens'])"
# Without a tokenizer there is nothing to decode with: no n-gram lines, no "ngrams" in --json.
$E append t.engram --entries b.jsonl --dry-run --json 2>/dev/null | $PY -c "import json,sys; print(json.load(sys.stdin)['ngrams'])"
