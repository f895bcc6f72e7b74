# The quality gate: the demo model scores held-out text with the source table and the quantised
# rows; --max-kl refuses a table that costs more (exit 3, nothing written, no staged file left)
# and passes one within the bound; --json reports the measures.
source $SRC/tests/cli/lib.sh
source $SRC/tests/cli/serve_lib.sh  # field
demo_model m
tail -n 2 "$ASSETS/brown/heldout.txt" | cut -c1-1500 > check.txt
$E -q quantize m.engram -o f32.engram --dtype f32 > /dev/null
# bf16 from its f32 copy is exact: KL 0, the same perplexity.
$E quantize f32.engram -o bf16.engram --dtype bf16 --config m.toml --check-corpus check.txt -t 1 --json 2>/dev/null > bf16.json
field bf16.json "'bf16: written %s, KL mean %g, top-1 %.2f, ppl change %+.4f%%, row error %g' % (j['written'], j['check']['kl_mean'], j['check']['top1_agreement'], j['check']['perplexity_increase_pct'], j['check']['row_rel_l2_read'])"
# int4 with a bound it cannot meet: refused.
rc=0; $E quantize f32.engram -o int4.engram --dtype int4 --config m.toml --check-corpus check.txt -t 1 --max-kl 1e-7 \
  > int4.txt 2>/dev/null || rc=$?
echo "int4 --max-kl 1e-7: exit $rc"
grep -o 'refused: mean KL [0-9.e-]* exceeds --max-kl 1e-07; nothing written' int4.txt | sed 's/KL [0-9.e-]*/KL X/'
ls int4.engram 2>/dev/null || echo "int4.engram not written"
ls | grep -c '\.check\.\|\.tmp\.' || true
# fp8 within a loose bound: written; its KL is small and the measures are consistent.
$E quantize f32.engram -o fp8.engram --dtype fp8 --config m.toml --check-corpus check.txt -t 1 --max-kl 0.01 \
  --max-ppl-increase 5 --json 2>/dev/null > fp8.json
field fp8.json "'fp8: written %s, KL mean < 1e-3: %s, p99 >= mean: %s, top-1 > 90%%: %s, read rows > 0: %s' % (j['written'], j['check']['kl_mean'] < 1e-3, j['check']['kl_p99'] >= j['check']['kl_mean'], j['check']['top1_agreement'] > 0.9, j['check']['read_rows'] > 0)"
$E -q verify fp8.engram > /dev/null && echo "fp8.engram verifies"
# verify against the reference it came from: a note with the measures, a problem past --max-kl.
sed 's/^lookup_dtype = .*/lookup_dtype = "fp8-e4m3"/' m.toml > fp8.toml
$E verify fp8.engram --config fp8.toml --reference f32.engram --check-corpus check.txt -t 1 2>/dev/null |
  grep -o 'note: against f32.engram: check: [0-9]* tokens in 2 documents' || echo "no reference note"
rc=0; $E verify fp8.engram --config fp8.toml --reference f32.engram --check-corpus check.txt -t 1 --max-kl 1e-9 \
  > v.txt 2>/dev/null || rc=$?
echo "verify --max-kl 1e-9: exit $rc"; grep -o 'against f32.engram: mean KL [0-9.e-]* exceeds --max-kl 1e-09' v.txt | sed 's/KL [0-9.e-]*/KL X/'
