#!/usr/bin/env bash
# barrier-gen in overload, with and without re-send backoff (issue 12, item 6), same run,
# interleaved. One process per run: barrier-gen with an in-process barrier-switch that is an
# intermediate (--inproc-parent) under a second in-process switch (the root), the root's frames
# to the intermediate held back --parent-delay-us (a long link to the parent), everything on
# one lcore. The leaves' timer (--leaf-us) is far below the latency the load causes and the
# switch's timer (--switch-us) below the link's delay, so with fixed periods nearly every
# barrier is re-sent many times, by the leaves and by the switch: a retry storm. Four
# configurations, each run --rounds times in the order R A B C R A B C ...:
#   R no storm   the same load with timers far above its latency (leaves 200 ms, switch 100 ms,
#                fixed): what the path does when nothing is re-sent, the reference
#   A fixed      every re-send after --leaf-us (leaves) and --switch-us (the switch)
#   B leaves     the leaves back off (--resend-max-us MAX --resend-jitter-pct J); switch fixed
#   C both       leaves and switch back off (also --switch-resend-max-us MAX
#                --switch-resend-jitter-pct J: the groups' resend_max_us / resend_jitter_pct)
# Prints per run and, per configuration, the median of barriers/s, re-sends per barrier (the
# leaves' re-sent reduces; the switch's timer re-sends to its parent), leaf latency p50/p99,
# and the ratios to A and to R of those medians. Every run must complete every barrier it started
# with no early release (exit 1 otherwise). Needs root (DPDK) and a built barrier-gen.
#
# usage: perf/gen_overload.sh [--groups N] [--ports P] [--duration S] [--rounds R]
#                             [--leaf-us U] [--switch-us U] [--parent-delay-us U]
#                             [--max-us U] [--jitter-pct J] [--out DIR]
#   defaults: 65536 groups, 4 ports, 3 s per run, 3 rounds, leaf and switch timers 200 µs,
#   link delay 2000 µs, backoff cap 64000 µs and jitter 25%; DIR (default a new
#   /tmp/gen_overload.XXXXXX) keeps each run's JSON report and summary.md
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../scripts/lib/netns.sh
source "$here/../scripts/lib/netns.sh"
groups=65536 ports=4 duration=3 rounds=3 leaf_us=200 switch_us=200 delay_us=2000 max_us=64000 jitter=25 out=""
while [ $# -gt 0 ]; do
  case $1 in
    --groups) groups=${2:?}; shift 2 ;;
    --ports) ports=${2:?}; shift 2 ;;
    --duration) duration=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --leaf-us) leaf_us=${2:?}; shift 2 ;;
    --switch-us) switch_us=${2:?}; shift 2 ;;
    --parent-delay-us) delay_us=${2:?}; shift 2 ;;
    --max-us) max_us=${2:?}; shift 2 ;;
    --jitter-pct) jitter=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    -h|--help) awk 'NR >= 21 && !/^#/ { exit } NR >= 21 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "gen_overload.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
for v in groups ports rounds leaf_us switch_us delay_us max_us jitter; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "gen_overload.sh: $v wants a whole number" >&2; exit 2; }
done
[[ $duration =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "gen_overload.sh: --duration wants seconds" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "gen_overload.sh: needs root (DPDK)" >&2; exit 1; }
gen=$(nb_find_program barrier-gen) || { echo "gen_overload.sh: barrier-gen not built" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d /tmp/gen_overload.XXXXXX)
mkdir -p "$out"

common=(--inproc-switch --inproc-parent --ports "$ports" --groups "$groups" --duration "$duration"
  --drain 5 --deadline-ms 60000 --inproc-parent-delay-us "$delay_us" --window fixed --json -q)
timers=(--resend-timeout-us "$leaf_us" --switch-resend-us "$switch_us")
leaf_bo=(--resend-max-us "$max_us" --resend-jitter-pct "$jitter")
# barrier-gen's leaves back off by default; R and A are the fixed periods
leaf_fixed=(--resend-max-us 0 --resend-jitter-pct 0)
switch_bo=(--switch-resend-max-us "$max_us" --switch-resend-jitter-pct "$jitter")
echo "gen_overload: $groups groups x $ports ports, closed loop, one lcore, ${duration} s per run, $rounds rounds; leaf timer $leaf_us µs, switch timer $switch_us µs, parent link delay $delay_us µs; backoff cap $max_us µs, jitter $jitter%; reports in $out" >&2
for ((r = 1; r <= rounds; r++)); do
  for c in R A B C; do
    case $c in
      R) extra=(--resend-timeout-us 200000 --switch-resend-us 100000 "${leaf_fixed[@]}") ;;
      A) extra=("${timers[@]}" "${leaf_fixed[@]}") ;;
      B) extra=("${timers[@]}" "${leaf_bo[@]}") ;;
      C) extra=("${timers[@]}" "${leaf_bo[@]}" "${switch_bo[@]}") ;;
    esac
    f="$out/$c$r.json"
    rc=0
    "$gen" -l 0 --log-level='*:warning' -- "${common[@]}" "${extra[@]}" >"$f" 2>"$out/$c$r.err" || rc=$?
    echo "gen_overload: round $r $c exit $rc" >&2
  done
done

python3 - "$out" "$rounds" <<'PY' | tee "$out/summary.md"
import json, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
names = {"R": "no storm (long timers)", "A": "fixed periods", "B": "leaves back off", "C": "leaves and switch back off"}
rows, bad = {c: [] for c in "RABC"}, 0
print("| run | barriers/s | leaf re-sends per barrier | switch re-sends per barrier | leaf p50 ms | leaf p99 ms | incomplete | early |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for r in range(1, rounds + 1):
    for c in "RABC":
        try:
            d = json.load(open(f"{out}/{c}{r}.json"))
        except (OSError, ValueError) as e:
            print(f"| {c}{r} | (no report: {e}) | | | | | | |")
            bad += 1
            continue
        rep, sw = d["report"], d.get("switch") or ""
        b = rep["barriers"]
        done = max(b["completed"], 1)
        m = re.search(r"timer_resends=(\d+)", sw)
        sres = int(m.group(1)) if m else 0
        v = {
            "bps": b["per_s"],
            "leaf": rep["frames"]["tx_resend"] / done,
            "switch": sres / done,
            "p50": rep["latency_leaf"]["p50_ns"] / 1e6,
            "p99": rep["latency_leaf"]["p99_ns"] / 1e6,
        }
        rows[c].append(v)
        if b["incomplete"] or b["early_releases"] or not b["completed"]:
            bad += 1
        print(f"| {c}{r} | {v['bps']:,.0f} | {v['leaf']:.2f} | {v['switch']:.2f} | {v['p50']:.2f} | {v['p99']:.2f} | {b['incomplete']} | {b['early_releases']} |")
print()
print("| configuration | barriers/s (median) | re-sends per barrier: leaves + switch | leaf p50 / p99 ms | barriers/s vs A | re-sends vs A | barriers/s vs R |")
print("| --- | --- | --- | --- | --- | --- | --- |")
med = {}
for c in "RABC":
    if not rows[c]:
        continue
    med[c] = {k: statistics.median(v[k] for v in rows[c]) for k in rows[c][0]}
for c, m in med.items():
    a = med.get("A")
    tot = m["leaf"] + m["switch"]
    ratio = f"{m['bps'] / a['bps']:.2f}" if a else "-"
    rr = f"{tot / (a['leaf'] + a['switch']):.2f}" if a and (a['leaf'] + a['switch']) else "-"
    vr = f"{m['bps'] / med['R']['bps']:.2f}" if "R" in med else "-"
    print(f"| {c} {names[c]} | {m['bps']:,.0f} | {m['leaf']:.2f} + {m['switch']:.2f} = {tot:.2f} | {m['p50']:.2f} / {m['p99']:.2f} | {ratio} | {rr} | {vr} |")
sys.exit(1 if bad else 0)
PY
