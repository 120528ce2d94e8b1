#!/usr/bin/env bash
# Model-check scripts/model/barrier.pml with spin (docs/reliability.md, "Model checking").
#   check.sh             every configuration: broken variants, correct model (safety and
#                        progress), small and big tree; some runs take minutes (outside CI)
#   check.sh --bounded   the CI subset: two broken variants that must fail, the small tree's
#                        exhaustive safety run and its progress run (about 1 minute)
#   check.sh --only NAME one configuration of the full list (by name)
# Prints a table (configuration, property, expected, result, states stored and matched,
# depth, memory, time) and exits non-zero on any unexpected result: a violation in the
# correct model, a broken variant the check does not catch, or a run that was meant to be
# exhaustive and did not finish ("incomplete", "timeout").
#
# Environment: NB_SPIN_LIMIT (seconds per run, default 600), NB_SPIN_TRAILS (where the
# replayed trails of violations go, default /tmp/nb-spin-trails), NB_SPIN_MEM (MB pan may
# use, default 8192; big-progress needs 3.6 GB), NB_SPIN_KEEP=1 keeps the work folder.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
command -v spin >/dev/null || { echo "check.sh: spin not installed (scripts/setup.sh)" >&2; exit 1; }
command -v gcc >/dev/null || { echo "check.sh: gcc not installed (scripts/setup.sh)" >&2; exit 1; }
mode=full
only=""
case "${1:-}" in
  "") ;;
  --bounded) mode=bounded ;;
  --only) mode=only; only="${2:?--only needs a configuration name}" ;;
  *) echo "usage: check.sh [--bounded | --only NAME]" >&2; exit 2 ;;
esac
work="$(mktemp -d /tmp/nb-spin.XXXXXX)"
if [ "${NB_SPIN_KEEP:-0}" = 1 ]; then
  echo "check.sh: work folder $work"
else
  trap 'rm -rf "$work"' EXIT
fi
limit="${NB_SPIN_LIMIT:-600}"
mem="${NB_SPIN_MEM:-8192}"
trails="${NB_SPIN_TRAILS:-/tmp/nb-spin-trails}"

fail=0
ran=0
t_start=$SECONDS

# run NAME PROPERTY EXPECT SPIN_DEFS GCC_DEFS PAN_ARGS
#   PROPERTY  safety: assertions and invalid end states (-DSAFETY);
#             progress: non-progress cycles (-DNP, pan -l) and the model's assertions
#   EXPECT    pass: exhaustive, no error; pass-bitstate: bitstate search (not exhaustive), no
#             error; assert | cycle | endstate: that violation must be found
run() {
  local name=$1 prop=$2 expect=$3 sdefs=$4 gdefs=$5 pargs=$6
  if [ "$mode" = only ] && [ "$name" != "$only" ]; then return; fi
  ran=$((ran + 1))
  local d="$work/$name"
  mkdir -p "$d" && cp "$here/barrier.pml" "$d/"
  local t0=$SECONDS
  # -DBFS (shortest counterexamples): pan.h refuses BFS on models with hidden variables,
  # because BFS restores states from its queue and hidden ones are not in the state. This
  # model's hidden variables are the topology (written once, before the first stored state)
  # and temporaries that every d_step writes before it reads them, so the refusal is lifted.
  if ! ( cd "$d" && spin $sdefs -a barrier.pml >spin.log 2>&1 \
         && { [[ " $gdefs " != *" -DBFS "* ]] || sed -i '/cannot use BFS on models with variables declared hidden/d' pan.h; } \
         && gcc -O2 -w -DMEMLIM="$mem" $gdefs -o pan pan.c >gcc.log 2>&1 ); then
    echo "check.sh: building $name failed" >&2
    cat "$d"/spin.log "$d"/gcc.log >&2
    fail=1
    return
  fi
  local tb=$((SECONDS - t0))
  # SIGINT: pan prints what it explored so far before it stops
  ( cd "$d" && timeout -s INT "$limit" ./pan $pargs >pan.log 2>&1 )
  local rc=$?
  local secs=$((SECONDS - t0))
  local log="$d/pan.log"
  local errs stored matched depth memory kind hf result
  errs=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$log" | tail -1)
  stored=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$log" | tail -1)
  matched=$(sed -n 's/^ *\([0-9.e+]*\) states, matched.*/\1/p' "$log" | tail -1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$log" | tail -1)
  memory=$(sed -n 's/^ *\([0-9.]*\)[[:space:]]*total actual memory usage.*/\1/p' "$log" | tail -1)
  hf=$(sed -n 's/^hash factor: \([0-9.e+]*\).*/\1/p' "$log" | tail -1)
  kind=$(sed -n 's/^pan:1: \(.*\)/\1/p' "$log" | head -1)
  case "$kind" in
    assertion*) kind=assert ;;
    "invalid end state"*) kind=endstate ;;
    non-progress*) kind=cycle ;;
    "") ;;
    *) kind=other ;;
  esac
  if [ "$rc" = 124 ]; then
    result=timeout
  elif grep -q "out of memory\|pan: reached -DMEMLIM bound" "$log"; then
    result=out-of-memory
  elif [ -n "$errs" ] && [ "$errs" != 0 ]; then
    result="$kind"
    if [ -f "$d/barrier.pml.trail" ]; then
      mkdir -p "$trails"
      ( cd "$d" && spin $sdefs -t barrier.pml >"$trails/$name.txt" 2>&1 )
    fi
  elif [ "$errs" = 0 ] && grep -q "Search not completed\|max search depth too small" "$log"; then
    result=incomplete
  elif [ "$errs" = 0 ] && [[ " $gdefs " == *" -DBITSTATE "* ]]; then
    result=pass-bitstate
  elif [ "$errs" = 0 ]; then
    result=pass
  else
    result=error
  fi
  local ok=ok
  [ "$result" = "$expect" ] || { ok=UNEXPECTED; fail=1; }
  printf '%-30s %-8s %-13s %-13s %10s %11s %8s %8s %5ss %5ss %s\n' "$name" "$prop" "$expect" "$result" \
    "${stored:--}" "${matched:--}" "${depth:--}" "${memory:--}" "$tb" "$secs" "$ok"
  [ -z "$hf" ] || printf '%-30s   bitstate hash factor %s (not exhaustive; best if > 100)\n' "" "$hf"
  if [ "$ok" != ok ]; then grep -v "^Depth=" "$log" | tail -n 30 >&2; fi
}

# Sizes. small: root, one intermediate with two leaves, one leaf under the root (two levels,
# two children per switch); big: root, two intermediates, two leaves each.
# K barriers per leaf (a leaf arrives at K+1), sequence numbers modulo M from F (each run
# crosses the wrap), EPOCHS runs, CAP frames in flight per link and direction.
S1="-DK=1 -DM=6 -DF=5 -DEPOCHS=2 -DCAP=1"
SAFE="-DSAFETY"
BFS="-DSAFETY -DBFS"
PROG="-DNP"
printf '%-30s %-8s %-13s %-13s %10s %11s %8s %8s %6s %6s\n' configuration property expected result \
  stored matched depth "MB" build total

# broken variants: each must produce a counterexample (BFS: the shortest)
run broken-no-epoch              safety assert "$S1 -DBROKEN_NO_EPOCH" "$BFS" ""
run broken-stale-answer-current  safety assert "$S1 -DBROKEN_STALE_ANSWER_CURRENT" "$BFS" ""
if [ "$mode" != bounded ]; then
  run broken-adopt-known-faulty  safety assert "-DK=1 -DM=7 -DF=5 -DEPOCHS=1 -DCAP=1 -DFAULTY -DBROKEN_ADOPT_KNOWN" "$BFS" ""
  run broken-no-intermediate-timer progress cycle "$S1 -DPROGRESS -DFAULTS=1 -DBROKEN_NO_INTERMEDIATE_TIMER" "$PROG" "-l -m1000000"
  # the stall needs a switch two barriers behind the root: K=2, and old reduces still in
  # flight behind newer ones on the leaves' links (CAP=2 up); one fault, the restart
  # the guard of fuzz finding 2 removed: a restarted intermediate that heard a leaf at s takes
  # a delayed copy of an older release and moves its seq back (the assertion in
  # forward_release); it needs two barriers and two releases in flight on S1's link
  run no-stale-release-guard     safety assert "-DK=2 -DM=7 -DF=5 -DEPOCHS=1 -DCAP=1 -DCAPDN=2 -DNO_STALE_RELEASE_GUARD" "$BFS" ""
  run no-quiet-time              progress cycle "-DK=2 -DM=7 -DF=5 -DEPOCHS=1 -DCAP=2 -DCAPDN=1 -DPROGRESS -DFAULTS=1 -DNO_QUIET_TIME" "$PROG" "-l -m2000000 -w26"
fi

# the correct model
run small-safety                 safety pass "$S1" "$SAFE" "-m1000000 -w24"
run small-progress               progress pass "$S1 -DPROGRESS -DFAULTS=1" "$PROG" "-l -m1000000 -w22"
if [ "$mode" != bounded ]; then
  run small-faulty-member        safety pass "-DK=1 -DM=7 -DF=5 -DEPOCHS=1 -DCAP=1 -DFAULTY" "$SAFE" "-m1000000 -w24"
  run small-progress-2faults     progress pass "$S1 -DPROGRESS -DFAULTS=2" "$PROG" "-l -m2000000 -w24"
  run small-k2-safety            safety pass "-DK=2 -DM=7 -DF=5 -DEPOCHS=2 -DCAP=1" "$SAFE" "-m2000000 -w26"
  # two frames in flight per link and direction (reordering on one link): more than 14 M
  # states, not finished in 15 minutes here; bitstate
  run small-cap2-bitstate        safety pass-bitstate "-DK=1 -DM=6 -DF=5 -DEPOCHS=2 -DCAP=2" "$SAFE -DBITSTATE" "-m4000000 -w31"
  # the case of the stale-release guard (see no-stale-release-guard), with the guard
  run small-k2-capdn2-safety     safety pass "-DK=2 -DM=7 -DF=5 -DEPOCHS=1 -DCAP=1 -DCAPDN=2" "$SAFE" "-m4000000 -w27"
  run small-cap2-1epoch-safety   safety pass "-DK=1 -DM=6 -DF=5 -DEPOCHS=1 -DCAP=2" "$SAFE" "-m4000000 -w26"
  run big-safety-bitstate        safety pass-bitstate "-DTREE_BIG $S1" "$SAFE -DBITSTATE" "-m4000000 -w32"
  # the big tree's safety exhaustively, in one epoch (restarts, loss, duplicates, timers; no
  # new run), as big-progress is
  run big-1epoch-safety          safety pass "-DTREE_BIG -DK=1 -DM=6 -DF=5 -DEPOCHS=1 -DCAP=1" "$SAFE" "-m4000000 -w27"
  run big-progress               progress pass "-DTREE_BIG -DK=1 -DM=6 -DF=5 -DEPOCHS=1 -DCAP=1 -DPROGRESS -DFAULTS=1" "$PROG" "-l -m2000000 -w26"
fi

echo
if [ "$ran" = 0 ]; then echo "check.sh: no configuration named '$only'" >&2; exit 2; fi
echo "check.sh: $((SECONDS - t_start)) s in all"
if [ "$fail" = 0 ]; then echo "check.sh: every result as expected"; else echo "check.sh: UNEXPECTED results" >&2; fi
exit "$fail"
