#!/usr/bin/env bash
# The short fault matrix (scripts/fault_matrix.sh --short): on a 2,2 tree of real processes,
# 5 s each, loss 10% on every link, delay/jitter/reordering through barrier-linkemu, a link
# down and up, an intermediate SIGKILLed and restarted three times, a leaf SIGKILLed and the job
# restarted in a new epoch. Every row must complete barriers after each of its faults, with no
# early release and a clean record check. Needs root and built barrier-switch, barrier-leaf,
# barrierctl, barrier-linkemu; skipped without them (fails with NB_REQUIRE_BINARIES=1).
# About 90-100 s on two cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scripts=$(dirname "$here")
# shellcheck source=../lib/netns.sh
source "$scripts/lib/netns.sh"
if [ "$(id -u)" -ne 0 ]; then
  if [ "${NB_REQUIRE_ROOT:-0}" = 1 ]; then echo "fault_matrix_short: FAIL needs root (NB_REQUIRE_ROOT=1)"; echo "fault_matrix_short: 0 passed, 1 failed"; exit 1; fi
  echo "fault_matrix_short: skipped: needs root"; exit 0
fi
for p in barrier-switch barrier-leaf barrierctl barrier-linkemu; do
  if ! nb_find_program "$p" >/dev/null; then
    if [ "${NB_REQUIRE_BINARIES:-0}" = 1 ]; then echo "fault_matrix_short: FAIL $p not built"; echo "fault_matrix_short: 0 passed, 1 failed"; exit 1; fi
    echo "fault_matrix_short: skipped: $p not built"; exit 0
  fi
done
rc=0
NB_PREFIX=${NB_PREFIX:-fms$$} bash "$scripts/fault_matrix.sh" --short || rc=$?
if [ $rc -eq 0 ]; then
  echo "fault_matrix_short: ok   every row recovered from its faults, 0 early releases"
  echo "fault_matrix_short: 1 passed, 0 failed"
else
  echo "fault_matrix_short: FAIL a row did not recover or its records failed the check (table above)"
  echo "fault_matrix_short: 0 passed, 1 failed"
fi
[ $rc -eq 0 ]
