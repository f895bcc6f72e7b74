# A hostile entries line is refused before it is held or parsed whole: one 100 MB line of 50 M
# numbers (which used to build a 6.5 GB JSON tree) and a short line with far more values than a
# row holds both fail with the line number under a 1 GiB address-space limit, in a few MB.
source $SRC/tests/cli/lib.sh
tiny_table t.engram
cp t.engram before.engram
$PY - <<'PY'
with open('huge.jsonl', 'w') as f:
    f.write('{"canonical_ids": [1, 2], "value": [')
    f.write('0,' * 50_000_000)
    f.write('0]}\n')
with open('wide.jsonl', 'w') as f:
    f.write('{"canonical_ids": [1, 2], "value": [0.25]}\n')
    f.write('{"canonical_ids": [1, 2], "value": [' + ','.join(['0'] * 5000) + ']}\n')
PY
# Under ASan (its shadow memory needs a huge address space) no ulimit, and the bound allows for
# its shadow and quarantine; the old 6.5 GB tree exceeds either bound.
limit_kb=65536 vlimit=1048576
if ldd "$E" 2>/dev/null | grep -q libasan; then limit_kb=524288 vlimit=unlimited; fi
for file in huge.jsonl wide.jsonl; do
  code=0
  ( ulimit -v $vlimit; /usr/bin/time -f '%M' -o rss.txt $E append t.engram --entries $file ) > out.txt 2> err.txt || code=$?
  echo "$file: exit $code, peak RSS within bound: $(( $(tail -n 1 rss.txt) < limit_kb ))"
  grep -v '^[0-9]*$' err.txt | sed 's/^engramctl append: //'
done
cmp -s t.engram before.engram && echo "table unchanged"
