#!/usr/bin/env bash
# Starts a one-node SLURM cluster on this machine (slurmctld and slurmd on
# localhost, munge for authentication) for the launcher tests, with its
# configuration and state under DIR, and prints the configuration's path:
#
#   SLURM_CONF="$(.ci/slurm.sh DIR)"
#
# srun, sbatch and sinfo find the cluster through SLURM_CONF. Needs root
# (or sudo) and Debian's slurm-wlm and munge.
set -euo pipefail
dir="$(mkdir -p "$1" && cd "$1" && pwd)"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
mkdir -p "$dir/state" "$dir/spool"
cpus="$(nproc)"
conf="$dir/slurm.conf"
cat >"$conf" <<CONF
ClusterName=flock-ci
SlurmctldHost=localhost
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmUser=root
SlurmdUser=root
MpiDefault=none
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
NodeName=localhost NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=ci Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF

if ! munge -n >/dev/null 2>&1; then
  $sudo mkdir -p /run/munge
  $sudo chown munge:munge /run/munge
  if [ -n "$sudo" ]; then sudo -u munge munged; else runuser -u munge -- munged; fi
  for _ in $(seq 20); do munge -n >/dev/null 2>&1 && break; sleep 0.5; done
fi
$sudo slurmctld -c -f "$conf"
$sudo slurmd -f "$conf" -N localhost
for _ in $(seq 60); do
  if SLURM_CONF="$conf" sinfo -h -o %T 2>/dev/null | grep -q idle; then
    echo "$conf"
    exit 0
  fi
  sleep 0.5
done
echo "slurm: the node did not come up" >&2
cat "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
exit 1
