# Sourced by tests/slurm/*.sh: a private single-node Slurm cluster for one test, run as root.
# slurm_start DIR: writes DIR/slurm.conf (this host as the only node, free ports picked now, state,
# spool, logs and the munge socket under DIR), starts munged, slurmctld and slurmd, exports
# SLURM_CONF and waits (bounded) until sinfo shows the node idle. Returns 77 with a message when a
# daemon cannot start. slurm_stop stops only the daemons it started, by PID.
SLURM_PIDS=()

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

slurm_skip() {
  echo "SKIP: $1"
  for f in "$SLURM_DIR"/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -15 "$f"; }; done
  return 77
}

slurm_start() {
  SLURM_DIR=$1
  local d=$1 node cpus mem
  for tool in munged slurmctld slurmd sbatch sinfo; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (scripts/install_deps.sh installs slurm-wlm and munge)"; return 77; }
  done
  [[ $(id -u) == 0 ]] || { echo "SKIP: a private Slurm needs root here (slurmd runs jobs as their user)"; return 77; }
  mkdir -p "$d/state" "$d/spool" "$d/munge"
  chmod 700 "$d" "$d/munge"
  dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$d/munge/munge.key"
  munged -f --socket="$d/munge/munge.sock" --key-file="$d/munge/munge.key" \
    --pid-file="$d/munge/munged.pid" --log-file="$d/munged.log" --seed-file="$d/munge/seed" ||
    { slurm_skip "munged did not start"; return 77; }
  SLURM_PIDS+=("$(cat "$d/munge/munged.pid")")
  node=$(hostname -s)
  cpus=$(nproc)
  mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
  cat > "$d/slurm.conf" <<CONF
ClusterName=engramtest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/munge.sock
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MinJobAge=300
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$d/slurm.conf
  slurmctld -i -f "$SLURM_CONF" || { slurm_skip "slurmctld did not start"; return 77; }
  local i
  for i in $(seq 50); do [[ -s $d/slurmctld.pid ]] && break; sleep 0.1; done
  SLURM_PIDS+=("$(cat "$d/slurmctld.pid")")
  slurmd -f "$SLURM_CONF" -N "$node" || { slurm_skip "slurmd did not start"; return 77; }
  for i in $(seq 50); do [[ -s $d/slurmd.pid ]] && break; sleep 0.1; done
  SLURM_PIDS+=("$(cat "$d/slurmd.pid")")
  for i in $(seq 120); do
    [[ $(sinfo -h -N -o %t 2>/dev/null) == idle ]] && return 0
    sleep 0.5
  done
  slurm_skip "the node did not become idle in 60 s (sinfo: $(sinfo -h -N -o '%N %t %E' 2>&1))"
}

slurm_stop() {
  local p
  for p in "${SLURM_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${SLURM_PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  SLURM_PIDS=()
}

slurm_wait() {  # slurm_wait JOBID SECONDS: until the job (every array task) has left the queue
  local job=$1 limit=$2 t=0
  while [[ -n $(squeue -h -j "$job" 2>/dev/null) ]]; do
    (( t++ < limit * 2 )) || { echo "job $job still queued or running after $limit s"; squeue; return 1; }
    sleep 0.5
  done
}
