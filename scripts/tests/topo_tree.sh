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
switch=${BARRIER_SWITCH:-$(nb_find_program barrier-switch || true)}
leaf=${BARRIER_LEAF:-$(nb_find_program barrier-leaf || true)}
if [ -z "$switch" ] || [ -z "$leaf" ]; then
  msg="barrier-switch or barrier-leaf not built (switch '${switch}', leaf '${leaf}')"
  if [ "${NB_REQUIRE_BINARIES:-0}" = 1 ]; then
    echo "topo_tree: FAIL $msg"; echo "topo_tree: 0 passed, 1 failed"; exit 1
  fi
  echo "topo_tree: skipped: $msg"; exit 0
fi

before=$(ip netns list | awk '{print $1}' | sort)
passed=0 failed=0
rc=0
bash "$scripts/topo.sh" --switch "$switch" --leaf "$leaf" --fanout 2,2 --barriers "$barriers" \
  --loss 0.05 --dup 0.01 || rc=$?
if [ $rc -eq 0 ]; then
  passed=$((passed + 1)); echo "topo_tree: ok   $barriers barriers, 5% loss, 1% duplication on every link"
else
  failed=$((failed + 1)); echo "topo_tree: FAIL the tree run (exit $rc, output above)"
fi
after=$(ip netns list | awk '{print $1}' | sort)
if [ "$before" = "$after" ]; then
  passed=$((passed + 1)); echo "topo_tree: ok   no namespace left"
else
  failed=$((failed + 1)); echo "topo_tree: FAIL namespaces left: $(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')"
fi
echo "topo_tree: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
