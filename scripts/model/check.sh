#!/usr/bin/env bash
# Model-check scripts/model/barrier.pml with spin (docs/reliability.md, "Model checking").
#   check.sh            every configuration, correct model and broken variants
#   check.sh --bounded  the CI subset (small tree)
# Prints a table (configuration, property, expected, result, states, depth, time) and exits
# non-zero on any unexpected result: a violation in the correct model, or a broken variant
# the check does not catch.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
command -v spin >/dev/null || { echo "check.sh: spin not installed (scripts/setup.sh)" >&2; exit 1; }
bounded=0
[ "${1:-}" = "--bounded" ] && bounded=1
work="$(mktemp -d /tmp/nb-spin.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# seconds a single pan run may take; a run cut short is reported as such (not a pass)
limit="${NB_SPIN_LIMIT:-300}"

fail=0
rows=()

# run NAME PROPERTY EXPECT SPIN_DEFS GCC_DEFS PAN_ARGS
#   PROPERTY safety: assertions and end states; progress: non-progress cycles (-DNP, -l)
#   EXPECT pass | violation
run() {
  local name=$1 prop=$2 expect=$3 sdefs=$4 gdefs=$5 pargs=$6
  local d="$work/$name-$prop"
  mkdir -p "$d" && cp "$here/barrier.pml" "$d/"
  local t0=$SECONDS
  ( cd "$d" && spin $sdefs -a barrier.pml >spin.log 2>&1 && gcc -O1 -w $gdefs -o pan pan.c >gcc.log 2>&1 ) \
    || { echo "check.sh: building $name failed" >&2; cat "$d"/*.log >&2; fail=1; return; }
  ( cd "$d" && timeout "$limit" ./pan $pargs >pan.log 2>&1 )
  local rc=$? secs=$((SECONDS - t0))
  local log="$d/pan.log"
  local errs states depth result
  errs=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$log" | tail -1)
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$log" | tail -1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$log" | tail -1)
  if [ "$rc" = 124 ]; then
    result="timeout"
  elif [ -n "$errs" ] && [ "$errs" != 0 ]; then
    result="violation"
    # keep the trail readable next to the table
    if [ -f "$d/barrier.pml.trail" ]; then
      ( cd "$d" && spin $sdefs -t -p -g barrier.pml >trail.txt 2>&1 )
      mkdir -p "${NB_SPIN_TRAILS:-/tmp/nb-spin-trails}"
      cp "$d/trail.txt" "${NB_SPIN_TRAILS:-/tmp/nb-spin-trails}/$name-$prop.txt"
    fi
  elif [ "$errs" = 0 ]; then
    result="pass"
  else
    result="error"
  fi
  local ok="ok"
  [ "$result" = "$expect" ] || { ok="UNEXPECTED"; fail=1; }
  rows+=("$(printf '%-34s %-9s %-9s %-10s %-10s %-8s %-6s %s' "$name" "$prop" "$expect" "$result" "${states:--}" "${depth:--}" "${secs}s" "$ok")")
  printf '%s\n' "${rows[-1]}"
}

SAFE="-DSAFETY -DCOLLAPSE"
PROG="-DNP -DCOLLAPSE"
small="-DK=1 -DM=6 -DF=5 -DCAP=1"
printf '%-34s %-9s %-9s %-10s %-10s %-8s %-6s %s\n' configuration property expected result states depth time ""

# broken variants first: each must produce a counterexample
run broken-stale-answer-current safety violation "$small -DBROKEN_STALE_ANSWER_CURRENT" "$SAFE" "-m100000"
run broken-no-epoch              safety violation "$small -DBROKEN_NO_EPOCH" "$SAFE" "-m100000"
run broken-adopt-known-faulty    safety violation "$small -DEPOCHS=1 -DFAULTY -DM=8 -DF=6 -DBROKEN_ADOPT_KNOWN" "$SAFE" "-m100000"
run broken-no-intermediate-timer progress violation "$small -DPROGRESS -DFAULTS=1 -DBROKEN_NO_INTERMEDIATE_TIMER" "$PROG" "-l -m100000"

# the correct model
run small-faulty-member          safety pass "$small -DEPOCHS=1 -DFAULTY -DM=8 -DF=6" "$SAFE" "-m1000000"
run small-progress               progress pass "$small -DPROGRESS -DFAULTS=1" "$PROG" "-l -m1000000"
if [ "$bounded" = 0 ]; then
  run small                      safety pass "$small" "$SAFE -DBITSTATE" "-m2000000 -w30"
  run small-progress-2faults     progress pass "$small -DPROGRESS -DFAULTS=2" "$PROG" "-l -m2000000"
  run big                        safety pass "-DTREE_BIG $small" "$SAFE -DBITSTATE" "-m2000000 -w30"
  run big-progress               progress pass "-DTREE_BIG $small -DPROGRESS -DFAULTS=1" "$PROG" "-l -m2000000"
  run small-no-quiet-time        progress violation "$small -DPROGRESS -DFAULTS=2 -DNO_QUIET_TIME" "$PROG" "-l -m2000000"
fi

echo
if [ "$fail" = 0 ]; then echo "check.sh: every result as expected"; else echo "check.sh: UNEXPECTED results" >&2; fi
exit "$fail"
