#!/usr/bin/env bash
# EpilogSlurmctld: delete the job's barrier group from every switch of its tree.
#
# Runs on the controller once the job has ended, whatever the end: completed, failed, killed
# by a time limit, cancelled with scancel, its node lost. `barrierctl job --stop JOBID`
# deletes the group (root first) and forgets the run; a job without a run (not in
# NB_PARTITIONS, or its prolog failed) is nothing to do. A delete that fails (a switch
# unreachable) keeps the run in the state file and exits non-zero (logged by slurmctld); the
# next job's prolog tries it again, and so does `barrierctl job --stop JOBID` by hand.
set -uo pipefail
NB_WHO=epilog
# shellcheck source=common.sh
source "$(dirname "$(readlink -f "$0")")/common.sh"
nb_load NB_BARRIERCTL NB_STATE || exit 1
: "${SLURM_JOB_ID:?EpilogSlurmctld without SLURM_JOB_ID}"
if ! "$NB_BARRIERCTL" job --state "$NB_STATE" --list | grep -q "^$SLURM_JOB_ID "; then
  exit 0
fi
if out=$("$NB_BARRIERCTL" job --state "$NB_STATE" --stop "$SLURM_JOB_ID" 2>&1); then
  nb_say "$(tail -n 1 <<< "$out")"
else
  nb_say "barrierctl job --stop failed: $out"
  exit 1
fi
