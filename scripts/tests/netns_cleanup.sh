#!/usr/bin/env bash
# scripts/lib/netns.sh must remove everything a run created (namespaces, veth pairs, a host-side
# veth, clsact qdiscs, background processes, its state directory) however the run ends: normal
# exit, a failing command under `set -e`, SIGTERM, SIGINT. Each case runs a child script that
# builds a small bed and then ends that way; this script checks that nothing with the child's
# prefix is left. Needs root.
set -euo pipefail
set -m # job control: background children get SIGINT as a terminal would deliver it
# The child whose interruption is tested starts with default dispositions for the signals it is
# sent, whatever this script inherited: started as a background job of a non-interactive shell
# (or with SIGINT/SIGHUP ignored by its caller: nohup, `trap '' INT`) it would inherit them
# ignored, bash cannot trap a signal ignored on entry, and `kill -INT` would do nothing.
defaults=(env --default-signal=INT,TERM,HUP) # coreutils >= 8.31 (Debian 12: 9.1)
"${defaults[@]}" true 2>/dev/null || { echo "netns_cleanup: needs env --default-signal (coreutils >= 8.31)"; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
scripts=$(dirname "$here")
passed=0 failed=0
work=$(mktemp -d /tmp/netns_cleanup.XXXXXX)
trap 'rm -rf "$work"' EXIT

cat >"$work/child.sh" <<CHILD
set -euo pipefail
source "$scripts/lib/netns.sh"
nb_init
echo "\$NB_STATE_DIR" >"$work/state.\$NB_PREFIX"
nb_netns_add a
nb_netns_add b
nb_veth "\$(nb_ns a)" x "\$(nb_ns b)" y 1400
nb_veth "" "\${NB_PREFIX}h" "\$(nb_ns a)" z
nb_fault_attach "\$(nb_ns a)" x 1000 1000 1000
nb_spawn "\$(nb_ns b)" /dev/null sleep 300
echo "\$NB_LAST_PID" >"$work/pid.\$NB_PREFIX"
touch "$work/ready.\$NB_PREFIX"
case "\$1" in
  exit) exit 0 ;;
  fail) false ;;
  die) nb_veth "" not-our-prefix "\$(nb_ns a)" w ;;
  wait) nb_spawn "" /dev/null sleep 300; wait ;;
esac
CHILD

# leftovers PREFIX: namespaces, host interfaces, processes, state directory with that prefix.
leftovers() {
  local p=$1 pid
  ip netns list | awk '{print $1}' | grep "^$p-" || true
  ip -o link show | awk -F': ' '{print $2}' | grep "^$p" || true
  pid=$(cat "$work/pid.$p" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "process $pid"; fi
  if [ -f "$work/state.$p" ] && [ -e "$(cat "$work/state.$p")" ]; then echo "state dir $(cat "$work/state.$p")"; fi
}

# run_case NAME HOW [SIGNAL] [WANT_RC]
run_case() {
  local name=$1 how=$2 sig=${3:-} want=${4:-} p="nbt$(($$ % 1000000))$1" rc i
  # env execs bash: $! is the child's own pid
  NB_PREFIX=$p "${defaults[@]}" bash "$work/child.sh" "$how" >"$work/log.$p" 2>&1 &
  local child=$!
  if [ -n "$sig" ]; then
    for ((i = 0; i < 100; i++)); do [ -f "$work/ready.$p" ] && break; sleep 0.1; done
    sleep 0.2
    kill -"$sig" "$child"
  fi
  rc=0; wait "$child" || rc=$?
  local left; left=$(leftovers "$p")
  if [ ! -f "$work/ready.$p" ]; then
    failed=$((failed + 1)); echo "netns_cleanup: FAIL $name: the child never built its bed: $(cat "$work/log.$p")"
  elif [ -n "$left" ]; then
    failed=$((failed + 1)); echo "netns_cleanup: FAIL $name (exit $rc): left behind: $(echo $left)"
  elif [ -n "$want" ] && [ "$rc" != "$want" ]; then
    failed=$((failed + 1)); echo "netns_cleanup: FAIL $name: exit status $rc, expected $want"
  else
    passed=$((passed + 1)); echo "netns_cleanup: ok   $name (exit $rc): nothing left"
  fi
}

run_case e exit "" 0
run_case f fail "" 1
run_case d die "" 1
run_case t wait TERM 143
run_case i wait INT 130

echo "netns_cleanup: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
