#!/usr/bin/env bash
# The README's cluster recipe under a real Slurm: a private single-node cluster (slurm_lib.sh) runs
# examples/slurm/submit.sh as written, 4 array tasks build the shards and the afterok merge job
# merges and verifies. The merged table must equal a one-process build in every section but
# PROVENANCE (and CHUNK_SUMS, which covers it). Skips (77) only when the daemons cannot start.
# Usage: job_array.sh ENGRAMCTL SRC
set -uo pipefail
E=$(realpath "$1"); SRC=$(realpath "$2")
source "$SRC/tests/slurm/slurm_lib.sh"
work=$(mktemp -d /tmp/engram-slurm.XXXXXX)
cleanup() { slurm_stop; rm -rf "$work"; }
trap cleanup EXIT
slurm_start "$work/slurm" || exit $?
export PATH=$(dirname "$E"):$PATH
cd "$work"
/usr/bin/python3 "$SRC/scripts/gen_zipf.py" c.u32 300000 --vocab 5000
printf '%s\n' "$work/c.u32" > inputs.txt
flags=(--tokens @inputs.txt --vocab-size 5000 --layers 1,2 --order 3 --heads 4 --buckets 4K --row-dim 8
       --init normal --seed 9 --block-tokens 20000)
out=$work/out
{
merge=$("$SRC/examples/slurm/submit.sh" 4 table.engram -- "${flags[@]}") || { echo "submit.sh failed"; exit 1; }
slurm_wait "$merge" 150
state=$(scontrol show job "$merge" | grep -o 'JobState=[A-Z_]*')
echo "merge job: $state"
for i in 0 1 2 3; do
  grep -o 'wrote shard [0-9/]* summary parts/part.[0-9]* ([0-9]* tokens from input tokens \[[0-9]*, [0-9]*) of 300000)' logs/shard-$i.log ||
    { echo "--- logs/shard-$i.log"; cat logs/shard-$i.log; }
done
grep -o 'table.engram: OK, safe to deploy' logs/merge.log || { echo "--- logs/merge.log"; cat logs/merge.log; }
engramctl -q build "${flags[@]}" -o one.engram
E=$E /usr/bin/python3 "$SRC/tests/cli/same_sections.py" one.engram table.engram
} > "$out" 2>&1
if ! diff "$SRC/tests/slurm/job_array.expected" "$out"; then
  echo "--- differs from tests/slurm/job_array.expected (< expected, > got)"
  exit 1
fi
cat "$out"
