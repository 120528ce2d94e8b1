#!/usr/bin/env bash
# barrier-gen against a separate barrier-switch process over net_af_packet, once on a quiet
# machine and once with a competing load, same sitting (issue 23, "the generator as a user
# meets it"). The switch runs in namespace <prefix>-sw on the veth ends sw0, sw1 (the
# operations walkthrough's switch: one lcore for RX and scheduling, --switch-lcores), the
# generator in <prefix>-gen on their peers gen0, gen1, both on net_af_packet; both namespaces,
# the veths and every process started here are removed on every exit path
# (scripts/lib/netns.sh). The generator runs with its own defaults (closed loop, its default
# lcores and leaf timer) plus --gen-args. The competing load is one busy shell loop per CPU
# (`sh -c 'while :; do :; done'`, nice 0), started after the switch is ready and stopped
# after the generator ends. Each phase gets a fresh switch.
#
# Writes into --out DIR: result.json (per phase barriers/s, leaf p50/p99, lost and why,
# re-sends, the generator's pauses, the slowest and the last second of the progress lines,
# load averages; and the ratios loaded / quiet), summary.md, and each phase's switch config,
# logs and JSON report. Exit 1 when a phase had an early release or the generator failed to
# run (lost barriers are reported, not fatal: the loaded phase is expected to lose some).
# Needs root (namespaces, DPDK) and built barrier-gen and barrier-switch.
#
# usage: perf/gen_two_process.sh --out DIR [--duration S] [--groups N] [--switch-lcores L]
#                                [--load-procs N] [--gen BIN] [--switch BIN] [--gen-args "..."]
#                                [--switch-ports af_packet|af_xdp]
#   defaults: 10 s per phase, 1024 groups, switch lcores "0", one busy loop per CPU,
#   the switch's ports on net_af_packet (af_xdp: `af_xdp = "sw0"`, the interfaces shared
#   with the kernel through the steering program; docs/operations.md),
#   programs from the workspace's target directory (scripts/lib/netns.sh, nb_find_program)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../scripts/lib/netns.sh
source "$here/../scripts/lib/netns.sh"
out="" duration=10 groups=1024 sw_lcores=0 load_procs=$(nproc) gen="" switch="" gen_args="" sw_ports=af_packet
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=${2:?}; shift 2 ;;
    --duration) duration=${2:?}; shift 2 ;;
    --groups) groups=${2:?}; shift 2 ;;
    --switch-lcores) sw_lcores=${2:?}; shift 2 ;;
    --load-procs) load_procs=${2:?}; shift 2 ;;
    --gen) gen=${2:?}; shift 2 ;;
    --switch) switch=${2:?}; shift 2 ;;
    --gen-args) gen_args=${2?}; shift 2 ;;
    --switch-ports) sw_ports=${2:?}; shift 2 ;;
    -h|--help) awk 'NR >= 20 && !/^#/ { exit } NR >= 20 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "gen_two_process.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "gen_two_process.sh: --out DIR is required (--help)" >&2; exit 2; }
for v in groups load_procs; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "gen_two_process.sh: --${v//_/-} wants a whole number" >&2; exit 2; }
done
[[ $duration =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "gen_two_process.sh: --duration wants seconds" >&2; exit 2; }
case $sw_ports in af_packet|af_xdp) ;; *) echo "gen_two_process.sh: --switch-ports wants af_packet or af_xdp" >&2; exit 2 ;; esac
[ "$groups" -ge 1 ] || { echo "gen_two_process.sh: --groups wants 1 or more" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "gen_two_process.sh: needs root (namespaces, DPDK)" >&2; exit 1; }
[ -n "$gen" ] || gen=$(nb_find_program barrier-gen) || { echo "gen_two_process.sh: barrier-gen not built" >&2; exit 2; }
[ -n "$switch" ] || switch=$(nb_find_program barrier-switch) || { echo "gen_two_process.sh: barrier-switch not built" >&2; exit 2; }
for p in "$gen" "$switch"; do [ -x "$p" ] || { echo "gen_two_process.sh: $p is not a program" >&2; exit 2; }; done
mkdir -p "$out"
out=$(cd "$out" && pwd)

NB_PREFIX=nbt2p$$
nb_init
nb_netns_add sw
nb_netns_add gen
for i in 0 1; do nb_veth "$(nb_ns sw)" "sw$i" "$(nb_ns gen)" "gen$i"; done

# phase NAME LOADED: one fresh switch, the generator, optionally the load; files $out/NAME.*
phase() {
  local name=$1 loaded=$2 sw_pid i load_pids=() rc=0
  cat >"$out/$name.switch.toml" <<END
[eal]
args = ["--lcores", "$sw_lcores", "--no-huge", "-m", "256", "--no-shconf", "--file-prefix", "${NB_PREFIX}sw", "--no-pci", "--iova-mode=va", "--no-telemetry", "--log-level=*:warning"]

$(for i in 0 1; do
  printf '[[ports]]\nname = "p%d"\n' "$i"
  if [ "$sw_ports" = af_xdp ]; then printf 'af_xdp = "sw%d"\n\n' "$i"
  else printf 'vdev = "net_af_packet%d,iface=sw%d,qdisc_bypass=0"\n\n' "$i" "$i"; fi
done)
[lcores]
scheduler = 0
shared = true
rx = [ { lcore = 0, poll = ["p0", "p1"] } ]

[[groups]]
numbers = "0..$groups"
role = "root"
children = ["p0", "p1"]
END
  nb_spawn "$(nb_ns sw)" "$out/$name.switch.log" "$switch" run --config "$out/$name.switch.toml"
  sw_pid=$NB_LAST_PID
  for i in $(seq 300); do
    grep -q '^barrier-switch: ready' "$out/$name.switch.log" && break
    kill -0 "$sw_pid" 2>/dev/null || break
    sleep 0.1
  done
  grep -q '^barrier-switch: ready' "$out/$name.switch.log" \
    || { cat "$out/$name.switch.log" >&2; nb_die "$name: barrier-switch did not start"; }
  if [ "$loaded" = 1 ]; then
    for ((i = 0; i < load_procs; i++)); do
      nb_spawn "" /dev/null nice -n 0 sh -c 'while :; do :; done'
      load_pids+=("$NB_LAST_PID")
    done
    sleep 1 # the load is running before the generator samples the CPUs
  fi
  cut -d' ' -f1-3 /proc/loadavg >"$out/$name.loadavg"
  # shellcheck disable=SC2086 # --gen-args is a word list
  ip netns exec "$(nb_ns gen)" "$gen" -- \
    --port net_af_packet0,iface=gen0,qdisc_bypass=0 --port net_af_packet1,iface=gen1,qdisc_bypass=0 \
    --groups "$groups" --duration "$duration" --json $gen_args \
    >"$out/$name.json" 2>"$out/$name.gen.log" || rc=$?
  cut -d' ' -f1-3 /proc/loadavg >>"$out/$name.loadavg"
  for i in "${load_pids[@]}"; do nb_stop "$i" 1; done
  nb_stop "$sw_pid" 5
  rm -rf "/var/run/dpdk/${NB_PREFIX}sw"
  # 0 passed, 1 lost barriers (reported): anything else, or no report, is a failure to run
  if [ "$rc" -gt 1 ] || ! [ -s "$out/$name.json" ]; then
    cat "$out/$name.gen.log" >&2
    nb_die "$name: barrier-gen exited $rc without a report"
  fi
  nb_log "$name: barrier-gen exit $rc, load average $(tr '\n' ' ' <"$out/$name.loadavg")"
}

phase quiet 0
phase loaded 1

python3 - "$out" "$duration" "$groups" "$load_procs" "$sw_ports" <<'PY'
import json, re, sys
out, duration, groups, load_procs, sw_ports = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

def per_second(log):
    """barriers/s of each whole second in the progress lines ('barriers 53.7k/s')."""
    unit = {"": 1, "k": 1e3, "M": 1e6}
    vals = []
    for line in open(log, errors="replace"):
        m = re.search(r"barriers ([0-9.]+)([kM]?)/s", line)
        if m:
            vals.append(float(m.group(1)) * unit[m.group(2)])
    return vals[:-1] if len(vals) > 1 else vals  # the last line covers the drain's tail

phases = {}
for name in ("quiet", "loaded"):
    rep = json.load(open(f"{out}/{name}.json"))["report"]
    b, f = rep["barriers"], rep["frames"]
    secs = per_second(f"{out}/{name}.gen.log")
    phases[name] = {
        "barriers_per_s": b["per_s"],
        "completed": b["completed"],
        "started": b["started"],
        "lost": b["lost"],
        "lost_by": b.get("lost_by"),
        "early_releases": b["early_releases"],
        "resends": f["tx_resend"],
        "leaf_p50_ns": rep["latency_leaf"]["p50_ns"],
        "leaf_p99_ns": rep["latency_leaf"]["p99_ns"],
        "generator_pauses": rep.get("generator_pauses"),
        "slowest_second_barriers_per_s": min(secs) if secs else None,
        "last_second_barriers_per_s": secs[-1] if secs else None,
        "loadavg": open(f"{out}/{name}.loadavg").read().split("\n")[:2],
    }

def ratio(k):
    q, l = phases["quiet"][k], phases["loaded"][k]
    return l / q if q else None

result = {
    "duration_s": duration, "groups": groups, "load_procs": load_procs, "switch_ports": sw_ports,
    "phases": phases,
    "ratio_loaded_over_quiet": {k: ratio(k) for k in
        ("barriers_per_s", "leaf_p50_ns", "leaf_p99_ns", "slowest_second_barriers_per_s")},
}
json.dump(result, open(f"{out}/result.json", "w"), indent=2)

def fmt_ns(v):
    return f"{v/1e6:.2f} ms" if v >= 1e6 else f"{v/1e3:.1f} µs"
def fmt_r(v):
    return "-" if v is None else f"{v:.3f}"
rows = ["| phase | barriers/s | slowest second | last second | leaf p50 | leaf p99 | lost (why) | re-sends | generator pauses | load average (before, after) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
for name, p in phases.items():
    why = ", ".join(f"{k} {v}" for k, v in (p["lost_by"] or {}).items() if v) or "-"
    gp = p["generator_pauses"] or {}
    rows.append(f"| {name} | {p['barriers_per_s']:.0f} | {p['slowest_second_barriers_per_s'] or 0:.0f} | "
                f"{p['last_second_barriers_per_s'] or 0:.0f} | {fmt_ns(p['leaf_p50_ns'])} | {fmt_ns(p['leaf_p99_ns'])} | "
                f"{p['lost']} ({why}) | {p['resends']} | {gp.get('count', '-')} ({fmt_ns(gp.get('longest_ns', 0))} longest) | "
                f"{' / '.join(p['loadavg'])} |")
r = result["ratio_loaded_over_quiet"]
text = (f"# barrier-gen against a barrier-switch process, quiet and loaded\n\n"
        f"{groups} groups x 2 ports on veth (generator net_af_packet, switch {sw_ports}), closed loop, {duration:g} s per phase; "
        f"loaded: {load_procs} busy shell loops.\n\n" + "\n".join(rows) +
        f"\n\nloaded / quiet: barriers/s {fmt_r(r['barriers_per_s'])}, slowest second "
        f"{fmt_r(r['slowest_second_barriers_per_s'])}, leaf p50 {fmt_r(r['leaf_p50_ns'])}, "
        f"leaf p99 {fmt_r(r['leaf_p99_ns'])}\n")
open(f"{out}/summary.md", "w").write(text)
print(text)
early = sum(p["early_releases"] for p in phases.values())
sys.exit(1 if early else 0)
PY
