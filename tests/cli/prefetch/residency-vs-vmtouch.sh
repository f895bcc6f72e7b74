# The residency tools tell the truth, checked against vmtouch's own page counts (issue 15 item 6):
# --status and inspect do not fault a cold table in, --evict leaves it non-resident.
source $SRC/tests/cli/lib.sh
tiny_tokens tiny.u32
$E -q build --tokens tiny.u32 --vocab-size 16 --layers 1,2 --order 3 --heads 2 --buckets 8K --row-dim 64 -o t.engram
pages() { vmtouch t.engram | awk '/Resident Pages/ { split($3, a, "/"); print a[1] }'; }
total=$(vmtouch t.engram | awk '/Resident Pages/ { split($3, a, "/"); print a[2] }')
echo "table pages: $((total > 1000))"
vmtouch -q -e t.engram
echo "after vmtouch -e: $(pages) resident"
$E prefetch t.engram --status --json | $PY -c "import json,sys; print('status says', json.load(sys.stdin)['resident_bytes'], 'bytes resident')"
echo "after --status: $(pages) resident"
$E inspect t.engram > /dev/null
n=$(pages); echo "after inspect: at most 8 pages resident: $((n <= 8))"
$E -q prefetch t.engram
echo "after prefetch: all resident: $(( $(pages) == total ))"
$E prefetch t.engram --evict > /dev/null
echo "after --evict: $(pages) resident"
