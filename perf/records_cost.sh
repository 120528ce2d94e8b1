#!/usr/bin/env bash
# What writing each leaf record through to the kernel at its release costs (issue 12, item 3),
# from the leaf's own figures: scripts/topo.sh runs a one-level tree (a root and 4 leaves,
# --fanout 4) ROUNDS times each way, alternating, barrier-leaf --records with the default
# per-record write, then with --records-buffered (the old 8 KiB buffer). For each way: the
# leaves' barriers per second and p50 latency (their summary lines), median over rounds and
# leaves; printed as the ratio per-record / buffered (same machine, same run). Needs root and
# built barrier-switch, barrier-leaf.
#
# usage: perf/records_cost.sh [ROUNDS] [BARRIERS]    (default 5, 5000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
rounds=${1:-5} barriers=${2:-5000}
work=$(mktemp -d /tmp/records_cost.XXXXXX)
trap 'rm -rf "$work"' EXIT
for ((r = 1; r <= rounds; r++)); do
  for way in perrecord buffered; do
    extra="--quiet"; [ "$way" = buffered ] && extra="--quiet --records-buffered"
    NB_PREFIX=${NB_PREFIX:-rc$$} bash "$root/scripts/topo.sh" --fanout 4 --barriers "$barriers" \
      --leaf-args "$extra" --out "$work/$way.$r" >"$work/$way.$r.log" 2>&1 \
      || { tail -n 20 "$work/$way.$r.log" >&2; echo "records_cost: the $way run $r failed" >&2; exit 1; }
  done
done
python3 - "$work" "$rounds" <<'PY'
import glob, re, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
fig = {}
for way in ("perrecord", "buffered"):
    rates, p50s = [], []
    for log in glob.glob(f"{work}/{way}.*/l*.log"):
        t = open(log).read()
        m = re.search(r"\((\d+) barriers/s\)", t)
        p = re.search(r"p50 ([\d.]+) µs", t)
        if m and p:
            rates.append(float(m.group(1))); p50s.append(float(p.group(1)))
    fig[way] = (statistics.median(rates), statistics.median(p50s), len(rates))
a, b = fig["perrecord"], fig["buffered"]
print(f"records_cost: {rounds} rounds each, alternating; median over rounds and leaves")
print(f"  per-record write: {a[0]:.0f} barriers/s, p50 {a[1]:.1f} µs ({a[2]} leaf runs)")
print(f"  buffered (old):   {b[0]:.0f} barriers/s, p50 {b[1]:.1f} µs ({b[2]} leaf runs)")
print(f"  ratio per-record / buffered: rate {a[0] / b[0]:.3f}, p50 latency {a[1] / b[1]:.3f}")
PY
