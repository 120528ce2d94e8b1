#!/usr/bin/env bash
# TaskProlog: the task's netbarrier environment. Runs on the compute node before each task, as
# the job's user; Slurm adds each `export NAME=VALUE` line it prints to the task's environment.
#
#   NETBARRIER_GROUP, NETBARRIER_EPOCH  from the job's AdminComment (set by prolog.sh)
#   NETBARRIER_IFACE                    this node's leaf interface for SLURM_LOCALID (NB_NODES)
#
# A job without a group (no AdminComment from prolog.sh) gets nothing. A node or a local rank
# that NB_NODES does not list gets the group and epoch but no interface, and a warning on the
# task's stderr (the MPI library falls back).
set -uo pipefail
NB_WHO=task_prolog
# shellcheck source=common.sh
source "$(dirname "$(readlink -f "$0")")/common.sh"
: "${SLURM_JOB_ID:?TaskProlog without SLURM_JOB_ID}"
comment=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | grep -o 'AdminComment=netbarrier:group=[0-9]*:epoch=[0-9]*')
[ -n "$comment" ] || exit 0
group=$(sed 's/.*:group=\([0-9]*\):.*/\1/' <<< "$comment")
epoch=$(sed 's/.*:epoch=\([0-9]*\)$/\1/' <<< "$comment")
echo "export NETBARRIER_GROUP=$group"
echo "export NETBARRIER_EPOCH=$epoch"
nb_load NB_NODES 2>/dev/null || { echo "print netbarrier: no site configuration $NB_SLURM_CONF: NETBARRIER_IFACE not set"; exit 0; }
node=${SLURMD_NODENAME:-$(hostname -s)}
mapfile -t ranks < <(nb_node_ranks "$node") || true
local_id=${SLURM_LOCALID:-0}
entry=${ranks[$local_id]:-}
if [ -z "$entry" ]; then
  echo "print netbarrier: node $node has no leaf interface for local rank $local_id in $NB_SLURM_CONF"
  exit 0
fi
echo "export NETBARRIER_IFACE=${entry#*:}"
