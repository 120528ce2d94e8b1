#!/usr/bin/env bash
# Soak (issue 12, item 7): a bounded long run, outside CI, of
#   (a) the in-process demo tree (barrier-demo, fanout 2,4, 1,000 groups, one loop), and
#   (b) the namespace tree of real processes (scripts/topo.sh --supervise, fanout 2,2, 5% loss on
#       every link and direction, leaves pacing with --gap-us 1000, switches serving telemetry),
# each for half of --minutes (or one of them for all of it, --part), sampled every --every seconds (scripts/tools/soak_sample.py):
# resident memory of every process, barriers completed (the demo's progress line; the switches'
# /barrier/groups), mbuf allocation failures (rx_nombuf of every switch port) and group 1's table
# state. At the end: first against last quarter per series (flat or not), the demo's early
# releases and re-sends, every switch's "all N mbufs back" line, the tree's record check.
# Needs root and built barrier-demo (for the demo) and barrier-switch and barrier-leaf (for the
# tree).
#
# usage: scripts/soak.sh [--minutes N] [--part demo|tree|both] [--every S] [--out DIR]
#   --minutes N   total length, both parts (default 30)
#   --part P      run only the demo or only the tree, for all of --minutes (default both, half each)
#   --every S     seconds between samples (default 10)
#   --out DIR     keep samples, logs, records and the summary (summary.md) in DIR
#                 (default: a new /tmp/soak.XXXXXX, kept)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/netns.sh
source "$here/lib/netns.sh"
minutes=30 every=10 out="" part=both
while [ $# -gt 0 ]; do
  case $1 in
    --minutes) minutes=${2:?}; shift 2 ;;
    --every) every=${2:?}; shift 2 ;;
    --part) part=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    -h|--help) awk 'NR >= 13 && !/^#/ { exit } NR >= 13 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
[[ $minutes =~ ^[1-9][0-9]*$ ]] || { echo "soak.sh: --minutes wants a whole number" >&2; exit 2; }
[[ $every =~ ^[1-9][0-9]*$ ]] || { echo "soak.sh: --every wants whole seconds" >&2; exit 2; }
case $part in demo|tree|both) ;; *) echo "soak.sh: --part wants demo, tree or both" >&2; exit 2 ;; esac
[ "$(id -u)" -eq 0 ] || { echo "soak.sh: needs root (network namespaces)" >&2; exit 1; }
switch="" leaf="" demo_bin=""
if [ "$part" != tree ]; then
  demo_bin=$(nb_find_program barrier-demo) || { echo "soak.sh: barrier-demo not built (cargo build -p barrier-testbed)" >&2; exit 2; }
fi
if [ "$part" != demo ]; then
  switch=$(nb_find_program barrier-switch) || { echo "soak.sh: barrier-switch not built" >&2; exit 2; }
  leaf=$(nb_find_program barrier-leaf) || { echo "soak.sh: barrier-leaf not built" >&2; exit 2; }
fi
[ -n "$out" ] || out=$(mktemp -d /tmp/soak.XXXXXX)
mkdir -p "$out"
# Seconds for each part run.
if [ "$part" = both ]; then half=$((minutes * 30)); else half=$((minutes * 60)); fi
sampler="$here/tools/soak_sample.py"
pids=()
stop_all() { local p; for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap stop_all EXIT
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM

demo_rc=0 tree_rc=0 judged=()
# ---- (a) the demo tree, 1,000 groups -------------------------------------------------------------
if [ "$part" != tree ]; then
echo "soak: (a) demo, 1000 groups, ${half} s; samples every ${every} s in $out/demo.jsonl" >&2
"$demo_bin" --fanout 2,4 --groups 1000 --duration "$half" --lcores 1 --counters >"$out/demo.log" 2>&1 &
demo=$!
pids+=("$demo")
python3 "$sampler" sample --out "$out/demo.jsonl" --every "$every" --until-gone "$demo" \
  --proc "demo=$demo" --progress "demo=$out/demo.log"
wait "$demo" || demo_rc=$?
judged+=("$out/demo.jsonl")
fi

# ---- (b) the namespace tree, 5% loss ------------------------------------------------------------
if [ "$part" != demo ]; then
prefix=${NB_PREFIX:-soak$$}
prefix=${prefix:0:8}
echo "soak: (b) namespace tree 2,2, 5% loss, ${half} s; samples in $out/tree.jsonl" >&2
NB_PREFIX=$prefix bash "$here/topo.sh" --supervise --telemetry --fanout 2,2 --loss 0.05 \
  --barriers 1000000000 --duration "$half" --timeout $((half + 120)) --switch "$switch" --leaf "$leaf" \
  --leaf-args "--gap-us 1000 --quiet" --out "$out/tree" >"$out/tree.log" 2>&1 &
topo=$!
pids+=("$topo")
# Wait for the leaves (they start once every switch is ready).
for ((i = 0; i < 600; i++)); do
  [ -n "$(ip netns pids "$prefix-l2.2" 2>/dev/null)" ] && break
  kill -0 "$topo" 2>/dev/null || break
  sleep 0.1
done
args=()
for n in s s1 s2 l1.1 l1.2 l2.1 l2.2; do
  p=$(ip netns pids "$prefix-$n" 2>/dev/null | head -n 1)
  [ -n "$p" ] && args+=(--proc "$n=$p")
done
for n in s s1 s2; do args+=(--telemetry "$n=$prefix-$n"); done
python3 "$sampler" sample --out "$out/tree.jsonl" --every "$every" --until-gone "$topo" "${args[@]}"
wait "$topo" || tree_rc=$?
pids=()
judged+=("$out/tree.jsonl")
fi

# ---- summary ------------------------------------------------------------------------------------
judge_rc=0
python3 "$sampler" judge "${judged[@]}" >"$out/judge.md" || judge_rc=$?
{
  echo "### Soak: $minutes minutes ($half s each part run: $part), samples every $every s ($(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  cat "$out/judge.md"
  echo
  if [ "$part" != tree ]; then
    echo "(a) demo (exit $demo_rc):"
    echo
    echo '```'
    grep -E "^(tree|barriers|checks):|^latency|mbufs back|mempool" "$out/demo.log" || true
    echo '```'
    echo
  fi
  if [ "$part" != demo ]; then
    echo "(b) namespace tree (topo.sh exit $tree_rc):"
    echo
    echo '```'
    grep -hE "mbufs back|mempool" "$out"/tree/s*.log | sort | uniq -c || true
    grep -E "^check_records: [0-9]+ leaves|^check_records: (ok|FAIL)" "$out/tree/check.log" || true
    grep -E "^topo: " "$out/tree.log" || true
    echo '```'
    echo
  fi
  [ "$judge_rc$demo_rc$tree_rc" = 000 ] && echo "verdict: flat, no early release" || echo "verdict: NOT flat or a run failed (see above)"
} | tee "$out/summary.md"
echo "soak: samples, logs and summary in $out" >&2
[ "$judge_rc$demo_rc$tree_rc" = 000 ]
