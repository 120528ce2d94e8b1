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
switch=${BARRIER_SWITCH:-$(nb_find_program barrier-switch || true)}
leaf=${BARRIER_LEAF:-$(nb_find_program barrier-leaf || true)}
if [ -z "$switch" ] || [ -z "$leaf" ]; then
  msg="barrier-switch or barrier-leaf not built (switch '${switch}', leaf '${leaf}')"
  if [ "${NB_REQUIRE_BINARIES:-0}" = 1 ]; then
    echo "topo_restarts: FAIL $msg"; echo "topo_restarts: 0 passed, 1 failed"; exit 1
  fi
  echo "topo_restarts: skipped: $msg"; exit 0
fi

before=$(ip netns list | awk '{print $1}' | sort)
passed=0 failed=0 rc=0
bash "$scripts/topo.sh" --switch "$switch" --leaf "$leaf" --fanout 2,2 --barriers "$barriers" \
  --loss 0.05 --restart s,s1 --restarts "$restarts" --leaf-args "--gap-us 1000" --timeout 600 || rc=$?
if [ $rc -eq 0 ]; then
  passed=$((passed + 1)); echo "topo_restarts: ok   root and intermediate restarted $restarts times each, 5% loss, no early release"
else
  failed=$((failed + 1)); echo "topo_restarts: FAIL the restart run (exit $rc, output above)"
fi
after=$(ip netns list | awk '{print $1}' | sort)
if [ "$before" = "$after" ]; then
  passed=$((passed + 1)); echo "topo_restarts: ok   no namespace left"
else
  failed=$((failed + 1)); echo "topo_restarts: FAIL namespaces left: $(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')"
fi
echo "topo_restarts: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
