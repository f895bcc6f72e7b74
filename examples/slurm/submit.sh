#!/usr/bin/env bash
# A sharded table build on Slurm: one array task per shard (shards.sbatch), then a merge job that
# runs only when every shard succeeded (afterok), merges the parts and verifies the table.
# Run it in a directory every node sees; engramctl must be on the nodes' PATH.
#   examples/slurm/submit.sh SHARDS OUT -- BUILD FLAGS...
#   examples/slurm/submit.sh 64 table.engram -- --config cfg.toml --tokens @inputs.txt
# Prints the merge job's id; the shards log to logs/shard-I.log, the merge to logs/merge.log.
set -euo pipefail
if [[ $# -lt 3 || $3 != -- ]]; then
  echo "usage: $0 SHARDS OUT -- BUILD FLAGS..." >&2
  exit 2
fi
shards=$1 out=$2
shift 3
mkdir -p parts logs
jobid=$(sbatch --parsable --array=0-$((shards - 1)) "$(dirname "$0")/shards.sbatch" "$@")
sbatch --parsable --dependency=afterok:"$jobid" --job-name=engram-merge --output=logs/merge.log \
  --wrap "engramctl merge parts/part.* -o $out && engramctl verify $out"
