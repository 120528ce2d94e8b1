#!/usr/bin/env bash
# XDP switches in the multi-process tree (issue 24, item 5): scripts/topo.sh --xdp with the real
# programs, each case a 2,2 tree (a root, two intermediate switches, four leaves) whose records
# must show every barrier completed and no leaf released before the last arrival, with nothing
# left behind:
#   xdp_tree      every switch barrier-xdp; 5% loss, 1% duplication, 1% corruption on the leaf
#                 links, both directions (on the leaf's egress and ingress), 1,000 barriers
#   xdp_mixed     a DPDK root over XDP intermediates, then an XDP root over DPDK intermediates,
#                 the same faults on the leaf links
#   xdp_linkemu   every switch XDP and faults on every link: the switch-to-switch links (XDP at
#                 both ends) through the link emulator, which carries their faults
#   xdp_restarts  the XDP root and an intermediate SIGKILLed and started again RESTARTS times
#                 each (state and program gone with the process) while the leaves run, 5% loss
#                 on the leaf links
#   xdp_refused   faults on a link between two XDP switches without --linkemu: refused (exit 2)
#                 with a message that names --linkemu
# Needs root, clang, and built barrier-switch, barrier-xdp and barrier-leaf (barrier-linkemu
# for xdp_linkemu), like topo_tree.sh: skipped without them, failed with NB_REQUIRE_BINARIES=1.
#
# usage: topo_xdp.sh [RESTARTS]     (default 8)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scripts=$(dirname "$here")
restarts=${1:-8}

# shellcheck source=../lib/netns.sh
source "$scripts/lib/netns.sh"
faults=(--loss 0.05 --dup 0.01 --corrupt 0.01 --links l1.1,l1.2,l2.1,l2.2)
rc=0
nb_topo_case xdp_tree "1000 barriers through 3 XDP switches, 5% loss, 1% dup, 1% corruption on the leaf links" \
  --xdp all --barriers 1000 --timeout 120 "${faults[@]}" || rc=1
nb_topo_case xdp_mixed "DPDK root, XDP intermediates, faults on the leaf links" \
  --xdp s1,s2 --barriers 1000 --timeout 120 "${faults[@]}" || rc=1
nb_topo_case xdp_mixed "XDP root, DPDK intermediates, faults on the leaf links" \
  --xdp s --barriers 1000 --timeout 120 "${faults[@]}" || rc=1
if [ -n "${BARRIER_LINKEMU:-}" ] || nb_find_program barrier-linkemu >/dev/null; then
  nb_topo_case xdp_linkemu "3 XDP switches, faults on every link (XDP-XDP links on the emulator)" \
    --xdp all --linkemu s1,s2 ${BARRIER_LINKEMU:+--linkemu-cmd "$BARRIER_LINKEMU"} --barriers 1000 --timeout 120 \
    --loss 0.05 --dup 0.01 --corrupt 0.01 || rc=1
elif [ "${NB_REQUIRE_BINARIES:-0}" = 1 ]; then
  echo "xdp_linkemu: FAIL barrier-linkemu not built"; rc=1
else
  echo "xdp_linkemu: skipped: barrier-linkemu not built"
fi
nb_topo_case xdp_restarts "XDP root and intermediate restarted $restarts times each, 5% loss, no early release" \
  --xdp all --barriers $((restarts * 1500)) --restart s,s1 --restarts "$restarts" \
  --leaf-args "--gap-us 1000" --timeout 300 --loss 0.05 --links l1.1,l1.2,l2.1,l2.2 || rc=1

# A link between two XDP switches cannot take faults from tc: refused, naming the way out.
out=$(bash "$scripts/topo.sh" --dry-run --xdp all --loss 0.05 2>&1) && st=0 || st=$?
if [ "$st" = 2 ] && grep -q -- "--loss/--dup/--corrupt on the link s-s1: .*--linkemu s1" <<<"$out"; then
  echo "xdp_refused: ok   faults on an XDP-XDP link refused (exit 2, names --linkemu)"
else
  echo "xdp_refused: FAIL exit $st, output: $out"; rc=1
fi
[ "$rc" = 0 ] && echo "topo_xdp: all cases passed" || echo "topo_xdp: a case failed (above)"
exit "$rc"
