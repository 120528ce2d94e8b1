#!/usr/bin/env bash
# Every test of the namespace test bed and its link faults, in order from the cheapest: the
# record checker (no root), the cleanup guarantees, the fault rates, topo.sh with the stand-in
# programs, then the real tree (skipped when barrier-switch/barrier-leaf are not built), MPI
# programs on a real switch (mpi_barrier.sh), then
# scripts/install.sh (install to /usr/local and uninstall, in a throw-away bed), the systemd
# unit under a systemd booted in namespaces (systemd_unit.sh), the documentation's walkthroughs run as written (doc_walkthroughs.sh) and a job's own run of a group through a real Slurm (slurm_job.sh). Each test prints
# "<name>: N passed, M failed"; this prints one line over all of them.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ok=0 bad=0
for t in check_records netns_cleanup fault_rates topo_mock observe dumpcap topo_tree topo_restarts topo_xdp leaf_kill_records fault_matrix_short \
  topo_new_job mpi_barrier install systemd_unit doc_walkthroughs slurm_job; do
  echo "== $t"
  if bash "$here/$t.sh"; then ok=$((ok + 1)); else bad=$((bad + 1)); echo "== $t FAILED"; fi
done
echo "netns_suite: $ok passed, $bad failed"
[ "$bad" -eq 0 ]
