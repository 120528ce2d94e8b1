#!/usr/bin/env bash
# Switch restarts with leaves running (issue: "a child is its port from the first frame"):
# scripts/topo.sh builds a 2,2 tree (root, two intermediates, four leaves) with 5% loss on every
# link, and while the leaves run it kills the root and one intermediate with SIGKILL and starts
# each again at once, RESTARTS times each (default 20), waiting for each restart's ready line.
# Every barrier must complete and the records must show no early release. Leaves pause between
# barriers (--gap-us) so that they are still running after the last restart; topo.sh fails if
# one ended before. Needs root and built binaries, like topo_tree.sh.
#
# usage: topo_restarts.sh [RESTARTS] [BARRIERS]     (default 20, 40000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scripts=$(dirname "$here")
restarts=${1:-20}
barriers=${2:-40000}

# shellcheck source=../lib/netns.sh
source "$scripts/lib/netns.sh"
nb_topo_case topo_restarts "root and intermediate restarted $restarts times each, 5% loss, no early release" \
  --fanout 2,2 --barriers "$barriers" --loss 0.05 --restart s,s1 --restarts "$restarts" \
  --leaf-args "--gap-us 1000" --timeout 600
