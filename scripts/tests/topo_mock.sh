#!/usr/bin/env bash
# scripts/topo.sh end to end with the stand-in switch and leaf of scripts/tools/mockbarrier.py,
# so the test bed itself (namespaces, links, faults, start-up, record checks, teardown) is tested
# where barrier-switch and barrier-leaf are not built: a faulty tree completes and passes; a
# broken root that releases early is caught; an interrupted run leaves nothing behind. Needs root.
set -euo pipefail
set -m # job control, so that SIGINT reaches a background topo.sh
# The interrupted topo.sh starts with default dispositions for the signals it traps, whatever
# this script inherited: started as a background job of a non-interactive shell (or under
# nohup, or `trap '' INT`) it would inherit SIGINT ignored, which bash cannot trap, and the
# interrupt case would wait for nothing.
defaults=(env --default-signal=INT,TERM,HUP) # coreutils >= 8.31 (Debian 12: 9.1)
"${defaults[@]}" true 2>/dev/null || { echo "topo_mock: needs env --default-signal (coreutils >= 8.31)"; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
scripts=$(dirname "$here")
mock="python3 $scripts/tools/mockbarrier.py"
passed=0 failed=0
log=$(mktemp /tmp/topo_mock.XXXXXX)
trap 'rm -f "$log"' EXIT

ok() { passed=$((passed + 1)); echo "topo_mock: ok   $*"; }
bad() { failed=$((failed + 1)); echo "topo_mock: FAIL $*"; sed 's/^/    /' "$log" | tail -n 30; }
ours() { ip netns list | awk '{print $1}' | grep -c "^nbt$1-" || true; }

rc=0; bash "$scripts/topo.sh" --switch "$mock switch" --leaf "$mock leaf" --barriers 300 \
  --loss 0.05 --dup 0.01 >"$log" 2>&1 || rc=$?
if [ $rc -eq 0 ] && grep -q "0 early releases" "$log"; then ok "faulty tree: all barriers complete"; else bad "faulty tree (exit $rc)"; fi

rc=0; bash "$scripts/topo.sh" --switch "$mock switch --early-release-every 10" --leaf "$mock leaf" --barriers 300 \
  --leaf-args "--work-us 2000" >"$log" 2>&1 || rc=$?
if [ $rc -ne 0 ] && grep -q "a leaf was released .* before the last leaf arrived" "$log"; then
  ok "early-releasing root is caught"; else bad "early-releasing root not caught (exit $rc)"; fi

# Interrupt a long run once its leaves are running; topo.sh must remove all it made.
: >"$log"  # empty the log first: the wait below must not see the previous case's text
"${defaults[@]}" bash "$scripts/topo.sh" --switch "$mock switch" --leaf "$mock leaf" --barriers 100000000 >"$log" 2>&1 &
topo=$! # env execs bash: this is topo.sh's pid, and so its prefix nbt<pid>
for ((i = 0; i < 300; i++)); do grep -q "leaves running" "$log" && break; sleep 0.1; done
made=$(ours "$topo")
kill -INT "$topo"
rc=0; wait "$topo" || rc=$?
left=$(ours "$topo")
if [ "$made" -eq 7 ] && [ "$left" -eq 0 ] && [ $rc -eq 130 ]; then
  ok "interrupted run: 7 namespaces made, none left, exit 130"
else
  bad "interrupted run: $made namespaces made, $left left, exit $rc"
fi

echo "topo_mock: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
