#!/usr/bin/env bash
# Issue 10, case 5, with the real programs: a 2,2 tree of barrier-switch processes in network
# namespaces runs a first job on group 1, the switches keep running, and a new job starts on the
# same group number from sequence 0 with its leaves started a second apart. Before groups had
# epochs, every new leaf passed barrier 0 within about a millisecond of its own arrival (after
# a one-barrier first job), or the new job hung until its timeout (after a three-barrier one).
# Now management resets the group to a new epoch on every switch (barrierctl) between the jobs:
# the new job must complete every barrier with no leaf released before the last arrived.
# Needs root and built barrier-switch, barrier-leaf and barrierctl; without them it says
# "skipped", and fails instead when NB_REQUIRE_BINARIES=1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scripts=$(dirname "$here")

# shellcheck source=../lib/netns.sh
source "$scripts/lib/netns.sh"
nb_topo_case topo_new_job "after a 1-barrier job, a new job in a new epoch, leaves 1 s apart" \
  --fanout 2,2 --first-job 1 --barriers 20 --leaf-stagger-ms 1000
nb_topo_case topo_new_job "after a 3-barrier job, a new job in a new epoch, leaves 1 s apart" \
  --fanout 2,2 --first-job 3 --barriers 20 --leaf-stagger-ms 1000
# The new job's run survives a restart: a switch killed and started again while the new job runs
# comes back in the job's epoch (topo.sh writes each switch's file back after the reset), not
# its file's first epoch, in which it would drop every frame of the job until its leaves time
# out. Leaves pause between barriers so they still run after the last restart.
nb_topo_case topo_new_job "after a 3-barrier job and a reset, an intermediate restarted 3 times during the new job" \
  --fanout 2,2 --first-job 3 --barriers 3000 --restart s1 --restarts 3 \
  --leaf-args "--gap-us 1000" --timeout 300
