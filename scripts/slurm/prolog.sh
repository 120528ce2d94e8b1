#!/usr/bin/env bash
# PrologSlurmctld: give the job its own run of a barrier group before any of its tasks starts.
#
# Runs on the controller (slurmctld, as SlurmUser), once per job, before the job's nodes
# launch anything; a non-zero exit keeps the job from running (Slurm requeues or cancels it).
# It takes the job's nodes and tasks per node, maps each node-local rank to a topology host
# (NB_NODES), and calls `barrierctl job --start JOBID`: a group number of NB_GROUPS free on
# every switch of the job's tree, created there in a fresh epoch, recorded in NB_STATE. The
# group and epoch go into the job's AdminComment (`netbarrier:group=G:epoch=E`: only an
# administrator can set it, so a user cannot point a job at someone else's group), where
# task_prolog.sh reads them. epilog.sh (EpilogSlurmctld) deletes the group.
#
# Before that it stops the runs of jobs Slurm no longer knows (an epilog that never ran:
# slurmctld killed meanwhile), so a job that died leaves no group behind for long.
#
# Tasks per node: --ntasks-per-node when the job gives it; else all tasks on a one-node job;
# else the tasks divided evenly over the nodes (refused when they do not divide).
set -uo pipefail
NB_WHO=prolog
# shellcheck source=common.sh
source "$(dirname "$(readlink -f "$0")")/common.sh"
nb_load NB_BARRIERCTL NB_TOPOLOGY NB_SOCKETS NB_GROUPS NB_STATE NB_NODES || exit 1
nb_wanted || exit 0
: "${SLURM_JOB_ID:?PrologSlurmctld without SLURM_JOB_ID}"

# Leftovers: open runs of Slurm jobs (numeric ids; `barrierctl job -- CMD` runs are job-PID and
# its --cleanup's) that are not pending or running any more.
while read -r id _; do
  [[ $id =~ ^[0-9]+$ ]] && [ "$id" != "$SLURM_JOB_ID" ] || continue
  # Ended: unknown to slurmctld (purged), or in a final state whose epilog did not delete it.
  # Anything else (pending, running, completing: its epilog is under way; squeue failing for
  # another reason) is left alone.
  state=$(squeue -h -j "$id" -o %T 2>&1)
  case "$state" in
    *'Invalid job id'* | COMPLETED | CANCELLED | FAILED | TIMEOUT | NODE_FAIL | PREEMPTED | BOOT_FAIL | DEADLINE | OUT_OF_MEMORY)
      nb_say "job $id has ended (${state}) but its group is open: deleting it"
      nb_say "$("$NB_BARRIERCTL" job --state "$NB_STATE" --stop "$id" 2>&1 | tail -n 1)"
      ;;
  esac
done < <("$NB_BARRIERCTL" job --state "$NB_STATE" --list | sed '$d')

# A run of this job id open already: a requeued job whose epilog did not delete its group.
# The new run gets a new group run (a new epoch), so the old one goes first.
if "$NB_BARRIERCTL" job --state "$NB_STATE" --list | grep -q "^$SLURM_JOB_ID "; then
  nb_say "an earlier run of this job (requeued) is open: deleting it"
  nb_say "$("$NB_BARRIERCTL" job --state "$NB_STATE" --stop "$SLURM_JOB_ID" 2>&1 | tail -n 1)"
fi

info=$(scontrol show job -o "$SLURM_JOB_ID") || { nb_say "scontrol show job failed"; exit 1; }
field() { grep -o "\b$1=[^ ]*" <<< "$info" | head -n1 | cut -d= -f2; }
ntasks=$(field NumTasks)
per_node=$(grep -o 'NtasksPerN:B:S:C=[^ ]*' <<< "$info" | cut -d= -f2 | cut -d: -f1)
nodelist=${SLURM_JOB_NODELIST:-$(field NodeList)}
mapfile -t nodes < <(scontrol show hostnames "$nodelist")
[ "${#nodes[@]}" -gt 0 ] || { nb_say "no nodes in \"$nodelist\""; exit 1; }
case "$per_node" in '' | 0 | '*' | N/A) per_node="" ;; esac
case "$ntasks" in '' | N/A | '*') ntasks=${#nodes[@]} ;; esac
if [ -z "$per_node" ]; then
  if [ $((ntasks % ${#nodes[@]})) -ne 0 ]; then
    nb_say "$ntasks tasks do not divide over ${#nodes[@]} nodes: give --ntasks-per-node"
    exit 1
  fi
  per_node=$((ntasks / ${#nodes[@]}))
fi

members=()
for n in "${nodes[@]}"; do
  mapfile -t ranks < <(nb_node_ranks "$n") || true
  if [ "${#ranks[@]}" -lt "$per_node" ]; then
    nb_say "node $n: $per_node tasks, but NB_NODES gives it ${#ranks[@]} leaf interface(s) in $NB_SLURM_CONF"
    exit 1
  fi
  for ((i = 0; i < per_node; i++)); do members+=("${ranks[$i]%%:*}"); done
done
memlist=$(IFS=,; echo "${members[*]}")

if ! out=$("$NB_BARRIERCTL" job --start "$SLURM_JOB_ID" --state "$NB_STATE" --topology "$NB_TOPOLOGY" \
  --members "$memlist" --sockets "$NB_SOCKETS" --groups "$NB_GROUPS" 2>&1); then
  nb_say "barrierctl job --start failed (members $memlist): $out"
  exit 1
fi
group=$(sed -n 's/^NETBARRIER_GROUP=//p' <<< "$out")
epoch=$(sed -n 's/^NETBARRIER_EPOCH=//p' <<< "$out")
if ! scontrol update JobId="$SLURM_JOB_ID" AdminComment="netbarrier:group=$group:epoch=$epoch"; then
  nb_say "cannot set the job's AdminComment: deleting group $group again"
  nb_say "$("$NB_BARRIERCTL" job --state "$NB_STATE" --stop "$SLURM_JOB_ID" 2>&1 | tail -n 1)"
  exit 1
fi
nb_say "group $group epoch $epoch for members $memlist"
exit 0
