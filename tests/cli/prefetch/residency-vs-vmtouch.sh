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
# A cold table is read whole (no page-by-page scan: only the header is cached); a half-resident
# one is scanned and only its missing part read. Either way every page ends resident, and the
# report's counts agree with vmtouch's (up to the few pages that opening the table reads).
check() {  # check LABEL: prefetch --json, then the counts against the file and vmtouch
  $E prefetch t.engram --json | $PY -c "
import json, sys
d = json.load(sys.stdin); pre = int(sys.argv[2]); page = 4096
print(sys.argv[1] + ': resident', d['resident_bytes'] == d['bytes'],
      '| already matches vmtouch', abs(d['already_resident'] - pre * page) <= 4 * page,
      '| read the rest', d['read_bytes'] + d['already_resident'] == d['bytes'])" "$1" "$2"
  echo "$1: vmtouch says all resident: $(( $(pages) == total ))"
}
vmtouch -q -e t.engram
$E inspect t.engram > /dev/null
check cold "$(pages)"
cat t.engram > /dev/null
vmtouch -q -e -p $(( total * 4096 / 2 ))- t.engram  # (touching half would read ahead the rest)
half=$(pages)
echo "half resident before: $(( half * 10 > total * 4 && half * 10 < total * 6 ))"
check half "$half"
