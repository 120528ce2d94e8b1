#!/usr/bin/env bash
# The multi-process tree with the real programs: scripts/topo.sh builds a root switch, two
# intermediate switches and four leaves in network namespaces, 5% loss and 1% duplication on
# every link in both directions, and 1,000 barriers; every barrier must complete, no leaf may be
# released before the last arrival, and nothing (namespace, interface, process) may be left.
# Needs root and built barrier-switch and barrier-leaf (target/debug or target/release, or
# BARRIER_SWITCH / BARRIER_LEAF); without them it says "skipped", and fails instead when
# NB_REQUIRE_BINARIES=1.
#
# usage: topo_tree.sh [BARRIERS]     (default 1000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scripts=$(dirname "$here")
barriers=${1:-1000}

# shellcheck source=../lib/netns.sh
source "$scripts/lib/netns.sh"
nb_topo_case topo_tree "$barriers barriers, 5% loss, 1% duplication on every link" \
  --fanout 2,2 --barriers "$barriers" --loss 0.05 --dup 0.01
