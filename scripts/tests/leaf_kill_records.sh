#!/usr/bin/env bash
# A leaf killed with SIGKILL in a real run keeps its records up to its last completed barrier
# (issue 12, item 3). scripts/topo.sh --supervise runs a 2,2 tree of barrier-switch and
# barrier-leaf processes, kills leaf l1.1 with SIGKILL 2 s into the run and stops the others a
# second later. l1.1's records file must end in a whole line, pass check_records.py, and reach
# the last barrier the others completed, or the one before it (l1.1 may die between sending its
# reduce and recording the release). The same run with --records-buffered (the old 8 KiB
# buffer) must lose records: the control that shows the check can fail.
# Needs root and built barrier-switch, barrier-leaf; skipped without them (fails with
# NB_REQUIRE_BINARIES=1). About 25 s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scripts=$(dirname "$here")
# shellcheck source=../lib/netns.sh
source "$scripts/lib/netns.sh"
if [ "$(id -u)" -ne 0 ]; then
  if [ "${NB_REQUIRE_ROOT:-0}" = 1 ]; then echo "leaf_kill_records: FAIL needs root (NB_REQUIRE_ROOT=1)"; echo "leaf_kill_records: 0 passed, 1 failed"; exit 1; fi
  echo "leaf_kill_records: skipped: needs root"; exit 0
fi
switch=${BARRIER_SWITCH:-$(nb_find_program barrier-switch || true)}
leaf=${BARRIER_LEAF:-$(nb_find_program barrier-leaf || true)}
if [ -z "$switch" ] || [ -z "$leaf" ]; then
  if [ "${NB_REQUIRE_BINARIES:-0}" = 1 ]; then echo "leaf_kill_records: FAIL binaries not built"; exit 1; fi
  echo "leaf_kill_records: skipped: barrier-switch or barrier-leaf not built"; exit 0
fi
work=$(mktemp -d /tmp/leaf_kill_records.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "leaf_kill_records: ok   $*"; }
bad() { failed=$((failed + 1)); echo "leaf_kill_records: FAIL $*"; }

# run NAME EXTRA_LEAF_ARGS: the supervised run; its records in $work/NAME/records.
run() {
  local name=$1 extra=$2 rc=0
  NB_PREFIX=${NB_PREFIX:-lkr$$} bash "$scripts/topo.sh" --supervise --switch "$switch" --leaf "$leaf" \
    --fanout 2,2 --barriers 100000000 --duration 3 --leaf-args "--gap-us 500 --quiet $extra" \
    --event 2:kill:l1.1 --out "$work/$name" >"$work/$name.log" 2>&1 || rc=$?
  return $rc
}
# last_seq FILE: the sequence of the last whole record of a released barrier, or -1 (the leaves
# stopped at the end write the barrier they waited at as not released: not a completed one).
last_seq() { python3 -c 'import sys; sys.path.insert(0, sys.argv[2]); import check_records as c; rows, _ = c.parse_file(sys.argv[1]); rows = [r for r in rows if r[3]]; print(rows[-1][0] if rows else -1)' "$1" "$scripts/tools"; }
others_max() {
  local d=$1 m=-1 n s
  for n in l1.2 l2.1 l2.2; do s=$(last_seq "$d/$n.csv"); [ "$s" -gt "$m" ] && m=$s; done
  echo "$m"
}

if run perrecord ""; then ok "run with a leaf SIGKILLed passes the record check"; else bad "the run failed:"; tail -n 20 "$work/perrecord.log"; fi
f=$work/perrecord/records/l1.1.csv
if [ -s "$f" ] && [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" = '\n' ]; then
  ok "the killed leaf's file ends in a whole line"
else
  bad "the killed leaf's file is empty or ends in a partial line: $(tail -c 60 "$f" 2>/dev/null | od -c | tail -n 3)"
fi
k=$(last_seq "$f") o=$(others_max "$work/perrecord/records")
if [ "$k" -ge 10 ] && [ $((o - k)) -le 1 ] && [ $((o - k)) -ge 0 ]; then
  ok "the killed leaf recorded up to sequence $k, the others up to $o"
else
  bad "the killed leaf recorded up to sequence $k, the others up to $o (want at most 1 apart, at least 10 barriers)"
fi

# Control: the old buffered records lose what the buffer held. A kill that lands just after the
# buffer was flushed loses next to nothing (seen once in CI: 1914 of 1915), so the control shows
# the loss as a file more than one barrier short or cut in the middle of a line, and gets three
# tries (each an independent kill time relative to the buffer's flushes).
shown=0
for try in 1 2 3; do
  rm -rf "$work/buffered" "$work/buffered.log"
  run buffered "--records-buffered" || true
  f=$work/buffered/records/l1.1.csv
  k=$(last_seq "$f" 2>/dev/null || echo -1) o=$(others_max "$work/buffered/records")
  cut=0
  [ -s "$f" ] && [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" != '\n' ] && cut=1
  if [ $((o - k)) -gt 1 ] || [ "$cut" = 1 ]; then shown=1; break; fi
done
if [ "$shown" = 1 ]; then
  ok "control (try $try): with --records-buffered the killed leaf's file stops at $k, $((o - k)) barriers short of the others' $o$([ "$cut" = 1 ] && echo ', in the middle of a line')"
else
  bad "control: with --records-buffered the killed leaf's file reached $k of $o in three tries: the kill did not show the loss"
fi
echo "leaf_kill_records: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
