#!/usr/bin/env bash
# barrier-gen floods an in-process barrier-switch with frames its access lists must refuse
# (issue 12, item 5), through DPDK (net_ring pairs), while its member groups run closed loop.
# Each run alternates control and flood phases (--flood-phases, control first) over its
# --duration, so the flood/control ratios come from the same run. Four configurations, each
# run --rounds times in the order N NF M MF N NF ...:
#   N   the flood on a port no group names (--flood-nonmember) at --rate frames/s
#   NF  the same at full rate (as many as the device queue takes on every pass of the
#       generator's loop, at most 256)
#   M   the flood on member port 0 (--flood-member 0, beside its leaves' frames) at --rate
#   MF  the same at full rate
# A member flood mixes releases on a child port, reduces of another epoch, of 16 groups the
# port is no child of, and of unconfigured groups; a non-member flood, reduces and releases of
# random groups of the table. Every run must complete every barrier, none early, and pass the
# generator's check of the switch's counters (each flood frame in its refusal class, the
# foreign groups unchanged, the switch's completions equal to the generator's): exit 1
# otherwise. Prints per run and per configuration (median) flood frames/s reached, and the
# flood/control ratios of barriers/s, leaf p50 and leaf p99, and the leaves' re-sends per
# barrier in control and flood phases (often 0 in the control, where a ratio says nothing).
# Needs root (DPDK) and a built barrier-gen (the release build when there is one).
#
# usage: perf/gen_flood.sh [--groups N] [--ports P] [--duration S] [--phases K] [--rounds R]
#                          [--rate FPS] [--lcores L] [--leaf-us U] [--foreign K]
#                          [--only CONFIGS] [--out DIR]
#   defaults: 64 groups, 4 ports, 4 s per run, 2 phases of each kind, 3 rounds, 500000
#   frames/s, EAL --lcores "0@(0-1)" (one lcore that may run on either CPU: the switch runs
#   inside the generator's loop; "0@0,1@1": the switch on its own lcore and CPU),
#   leaf timer 10000 µs, 16 foreign groups for M and MF (--foreign 1048000: a table of a
#   million groups, 64 MiB, whose random slots a quarter of the member flood reads), every
#   configuration (--only "N M" for some); DIR (default a new
#   /tmp/gen_flood.XXXXXX) keeps each run's JSON report and summary.md
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../scripts/lib/netns.sh
source "$here/../scripts/lib/netns.sh"
groups=64 ports=4 duration=4 phases=2 rounds=3 rate=500000 lcores='0@(0-1)' leaf_us=10000 foreign=16 only="N NF M MF" out=""
while [ $# -gt 0 ]; do
  case $1 in
    --groups) groups=${2:?}; shift 2 ;;
    --ports) ports=${2:?}; shift 2 ;;
    --duration) duration=${2:?}; shift 2 ;;
    --phases) phases=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --rate) rate=${2:?}; shift 2 ;;
    --lcores) lcores=${2:?}; shift 2 ;;
    --leaf-us) leaf_us=${2:?}; shift 2 ;;
    --foreign) foreign=${2:?}; shift 2 ;;
    --only) only=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    -h|--help) awk 'NR >= 22 && !/^#/ { exit } NR >= 22 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "gen_flood.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
for v in groups ports phases rounds rate leaf_us foreign; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "gen_flood.sh: $v wants a whole number" >&2; exit 2; }
done
[[ $duration =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "gen_flood.sh: --duration wants seconds" >&2; exit 2; }
for c in $only; do
  case $c in N|NF|M|MF) ;; *) echo "gen_flood.sh: --only: N, NF, M or MF, not '$c'" >&2; exit 2 ;; esac
done
[ "$(id -u)" -eq 0 ] || { echo "gen_flood.sh: needs root (DPDK)" >&2; exit 1; }
root=$(dirname "$here")
if [ -x "${CARGO_TARGET_DIR:-$root/target}/release/barrier-gen" ]; then
  gen=${CARGO_TARGET_DIR:-$root/target}/release/barrier-gen
else
  gen=$(nb_find_program barrier-gen) || { echo "gen_flood.sh: barrier-gen not built" >&2; exit 2; }
fi
[ -n "$out" ] || out=$(mktemp -d /tmp/gen_flood.XXXXXX)
mkdir -p "$out"

common=(--inproc-switch --ports "$ports" --groups "$groups" --duration "$duration" --drain 5
  --flood-phases "$phases" --resend-timeout-us "$leaf_us" --json -q
  # every group in flight and fixed re-send periods, as the figures in reliability.md were taken
  --window fixed --resend-max-us 0 --resend-jitter-pct 0)
echo "gen_flood: $groups groups x $ports ports, closed loop, lcores $lcores, ${duration} s per run ($phases control + $phases flood phases), $rounds rounds, flood $rate frames/s or full; $gen; reports in $out" >&2
for ((r = 1; r <= rounds; r++)); do
  for c in $only; do
    case $c in
      N) extra=(--flood-nonmember --flood-rate "$rate") ;;
      NF) extra=(--flood-nonmember --flood-rate full) ;;
      M) extra=(--flood-member 0 --flood-rate "$rate" --flood-foreign-groups "$foreign") ;;
      MF) extra=(--flood-member 0 --flood-rate full --flood-foreign-groups "$foreign") ;;
    esac
    f="$out/$c$r.json"
    rc=0
    "$gen" --no-huge -m 1024 --no-shconf --no-pci --iova-mode=va --no-telemetry \
      --log-level='*:warning' --lcores "$lcores" --file-prefix "gen-flood-$$" \
      -- "${common[@]}" "${extra[@]}" >"$f" 2>"$out/$c$r.err" || rc=$?
    rm -rf "/var/run/dpdk/gen-flood-$$"
    echo "gen_flood: round $r $c exit $rc" >&2
  done
done

python3 - "$out" "$rounds" "$only" <<'PY' | tee "$out/summary.md"
import json, math, statistics, sys
out, rounds, only = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
names = {"N": "non-member port, set rate", "NF": "non-member port, full rate",
         "M": "member port 0, set rate", "MF": "member port 0, full rate"}
keys = ["fps", "bps", "p50", "p99", "res", "cres", "fres", "cbps", "cp50", "cp99"]
rows, bad = {c: [] for c in only}, 0
print("| run | flood frames/s | control barriers/s | control p50 / p99 µs | re-sends/barrier control / flood | barriers/s ratio | p50 ratio | p99 ratio | re-sends ratio | check |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in range(1, rounds + 1):
    for c in only:
        try:
            d = json.load(open(f"{out}/{c}{r}.json"))
        except (OSError, ValueError) as e:
            print(f"| {c}{r} | (no report: {e}) | | | | | | | | |")
            bad += 1
            continue
        rep, chk = d["report"], d.get("flood_check") or {}
        b, f = rep["barriers"], rep["flood"]
        ctl, fl, ra = f["control"], f["flood"], f["ratios"]
        num = lambda x: float("nan") if x is None else x
        v = {"fps": fl["flood_fps"], "bps": num(ra["barriers_per_s"]), "p50": num(ra["leaf_p50"]),
             "p99": num(ra["leaf_p99"]), "res": num(ra["resends_per_barrier"]),
             "cres": ctl["resends_per_barrier"], "fres": fl["resends_per_barrier"],
             "cbps": ctl["barriers_per_s"], "cp50": ctl["leaf"]["p50_ns"] / 1e3, "cp99": ctl["leaf"]["p99_ns"] / 1e3}
        rows[c].append(v)
        ok = chk.get("ok", False) and not b["incomplete"] and not b["early_releases"] and b["completed"] > 0
        bad += 0 if ok else 1
        print(f"| {c}{r} | {v['fps']:,.0f} | {ctl['barriers_per_s']:,.0f} | {ctl['leaf']['p50_ns'] / 1e3:,.0f} / {ctl['leaf']['p99_ns'] / 1e3:,.0f} "
              f"| {v['cres']:.4f} / {v['fres']:.4f} | {v['bps']:.2f} | {v['p50']:.2f} | {v['p99']:.2f} | {v['res']:.2f} "
              f"| {'ok' if ok else 'FAILED: ' + '; '.join(chk.get('problems', ['no check']))} |")
print()
print("| configuration (medians) | flood frames/s | control barriers/s, p50 / p99 µs | barriers/s flood/control | leaf p50 ratio | leaf p99 ratio | re-sends per barrier control / flood |")
print("| --- | --- | --- | --- | --- | --- | --- |")
def med(xs):
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.median(xs) if xs else float("nan")
for c in only:
    if not rows[c]:
        continue
    m = {k: med(v[k] for v in rows[c]) for k in keys}
    print(f"| {c} {names[c]} | {m['fps']:,.0f} | {m['cbps']:,.0f}, {m['cp50']:,.0f} / {m['cp99']:,.0f} | {m['bps']:.2f} | {m['p50']:.2f} | {m['p99']:.2f} | {m['cres']:.4f} / {m['fres']:.4f} |")
sys.exit(1 if bad else 0)
PY
