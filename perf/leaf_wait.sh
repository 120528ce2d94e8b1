#!/usr/bin/env bash
# How a kernel-socket leaf waits (issue 26, item 4): the same 4-leaf barrier round through one
# barrier-switch process (DPDK net_af_packet ports, scripts/topo.sh --fanout 4: every node in its
# own network namespace, veth links), with the leaves waiting in each way in turn:
#
#   block       the default: each wait for a frame blocks in ppoll at once
#   spin:US     barrier-leaf --busy-poll-us US: poll the socket without blocking for up to US µs
#               before the blocking wait (what MPI libraries do)
#   yield:US    --busy-poll-us US --busy-poll-yield: the same, sched_yield between polls (what
#               MPI libraries do when ranks outnumber cores)
#   so:US       --so-busy-poll-us US: SO_BUSY_POLL on the socket (the kernel busy-polls the
#               device queue before sleeping; needs a NAPI driver)
#   spinso:US   both
#   control     the same as block, run as a mode of its own: how far two identical modes differ
#               in one sitting (the noise floor of the ratios)
#
# and Open MPI's MPI_Barrier over TCP loopback with the same 4 ranks (perf/mpi/mpi_barrier.c) as
# the reference (same number of ranks), all interleaved: mode by mode, repetition by repetition, so that a change of
# load hits every mode alike. Per mode: p50 and p99 of every leaf's first-reduce-to-release over
# all barriers but each leaf's first (which waits for the others to start), pooled over the
# repetitions, and per repetition the ratio of p50s to "block" of the same repetition (their
# median is printed). Needs root, built barrier-switch and barrier-leaf (release builds are
# looked for first; --build builds them), mpicc/mpirun for the reference (skipped without).
#
# usage: perf/leaf_wait.sh [--barriers N] [--reps R] [--modes "block spin:50 so:50"]
#                          [--switch-idle auto|spin|yield|sleep|sleep:US] [--mpi-iters N]
#                          [--leaves N] [--no-mpi] [--out DIR] [--build]
# --leaves N: N leaves under the one switch (default 4; the MPI reference then runs N ranks).
# --switch-idle is the switch's idle policy (topo.sh --switch-idle; default auto: sleep when its
# loops outnumber the CPUs, as on a 2-CPU machine).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
barriers=5000 reps=3 modes="block spin:20 spin:100 so:50 spinso:100" mpi_iters=20000 out="" build=0 switch_idle=auto leaves=4 nompi=0
while [ $# -gt 0 ]; do
  case "$1" in
    --barriers) barriers=${2:?}; shift 2 ;;
    --reps) reps=${2:?}; shift 2 ;;
    --modes) modes=${2:?}; shift 2 ;;
    --mpi-iters) mpi_iters=${2:?}; shift 2 ;;
    --switch-idle) switch_idle=${2:?}; shift 2 ;;
    --leaves) leaves=${2:?}; shift 2 ;;
    --no-mpi) nompi=1; shift ;;
    --out) out=${2:?}; shift 2 ;;
    --build) build=1; shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "perf/leaf_wait.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "perf/leaf_wait.sh: needs root (namespaces, DPDK)" >&2; exit 1; }
if [ "$build" = 1 ]; then
  (cd "$root" && cargo build --release -q -p barrier-switchd -p barrier-leaf --bins)
fi
pick() { # the release build when there is one, else the debug build
  local p
  for p in "${CARGO_TARGET_DIR:-$root/target}"/{release,debug}/"$1"; do [ -x "$p" ] && { echo "$p"; return; }; done
  echo "perf/leaf_wait.sh: $1 not built (cargo build --release -p barrier-switchd -p barrier-leaf, or --build)" >&2
  exit 1
}
switch=${BARRIER_SWITCH:-$(pick barrier-switch)} leaf=${BARRIER_LEAF:-$(pick barrier-leaf)}
out=${out:-$root/perf/results/leaf_wait-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
log() { echo "[leaf_wait $(date -u +%H:%M:%S)] $*" >&2; }
args_of() {
  case "$1" in
    block|control) echo "" ;;
    spin:*) echo "--busy-poll-us ${1#spin:}" ;;
    yield:*) echo "--busy-poll-us ${1#yield:} --busy-poll-yield" ;;
    so:*) echo "--so-busy-poll-us ${1#so:}" ;;
    spinso:*) echo "--busy-poll-us ${1#spinso:} --so-busy-poll-us ${1#spinso:}" ;;
    *) echo "perf/leaf_wait.sh: unknown mode $1" >&2; exit 2 ;;
  esac
}
for m in $modes; do args_of "$m" >/dev/null; done
mpi=0
if [ "$nompi" = 0 ] && command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
  mpicc -O2 -o "$out/mpi_barrier" "$here/mpi/mpi_barrier.c" && mpi=1
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
{ echo "switch $switch"; echo "leaf $leaf"; echo "switch idle policy: $switch_idle"; echo "load at start: $(cat /proc/loadavg)"; echo "cpus: $(nproc)"; } >"$out/setup.txt"
log "results in $out; $reps repetitions of: $modes$([ $mpi = 1 ] && echo ' mpi-tcp'); load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$reps"); do
  for m in $modes; do
    log "rep $r: $m"
    NB_PREFIX=nbl$$ bash "$root/scripts/topo.sh" --switch "$switch" --leaf "$leaf" --fanout "$leaves" \
      --barriers "$barriers" --switch-idle "$switch_idle" --leaf-args "--quiet $(args_of "$m")" --out "$out/$m-$r" --timeout 300 \
      >"$out/$m-$r.log" 2>&1 || { tail -20 "$out/$m-$r.log" >&2; exit 1; }
  done
  if [ $mpi = 1 ]; then
    log "rep $r: Open MPI MPI_Barrier, $leaves ranks, TCP loopback"
    timeout 600 mpirun -np "$leaves" --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo \
      "$out/mpi_barrier" "$mpi_iters" 1000 >"$out/mpi-tcp-$r.json" 2>"$out/mpi-tcp-$r.log"
  fi
done
echo "load at end: $(cat /proc/loadavg)" >>"$out/setup.txt"
python3 - "$out" "$reps" "$modes" "$mpi" "$leaves" <<'PY' | tee "$out/summary.md"
import csv, glob, json, statistics, sys
out, reps, modes, mpi = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4] == "1"
n = sys.argv[5]
def q(v, p):
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]
def leaf_lat(d):
    lat = []
    for f in sorted(glob.glob(d + "/records/*.csv")):
        rows = [r for r in csv.DictReader(open(f)) if r.get("released", "1") == "1"]
        lat += [(int(r["release_ns"]) - int(r["first_reduce_ns"])) / 1e3 for r in rows[1:]]
    return sorted(lat)
per = {m: [leaf_lat(f"{out}/{m}-{r}") for r in range(1, reps + 1)] for m in modes}
mpi_runs = [json.load(open(f"{out}/mpi-tcp-{r}.json")) for r in range(1, reps + 1)] if mpi else []
setup = open(out + "/setup.txt").read().splitlines()
print(f"{n} AF_PACKET barrier-leaf processes, one barrier-switch (net_af_packet), each in its own")
print(f"namespace on veth (scripts/topo.sh --fanout {n}); first reduce to release per leaf per barrier,")
print(f"{reps} repetitions interleaved; {setup[2]}; {setup[4]}; {setup[3]}; {setup[-1]}.")
print()
print("| leaves wait by | p50 µs | p99 µs | p50 / block p50, median of the repetitions | samples |")
print("| --- | --- | --- | --- | --- |")
block = per.get("block")
for m in modes:
    pooled = sorted(x for run in per[m] for x in run)
    ratio = "-"
    if block and m != "block":
        ratio = "%.3f" % statistics.median(q(a, .5) / q(b, .5) for a, b in zip(per[m], block))
    print(f"| {m} | {q(pooled, .5):.1f} | {q(pooled, .99):.1f} | {ratio} | {len(pooled)} |")
if mpi_runs:
    p50 = statistics.median(j["p50_us"] for j in mpi_runs)
    p99 = statistics.median(j["p99_us"] for j in mpi_runs)
    print(f"| Open MPI MPI_Barrier, {n} ranks, TCP loopback (median of runs) | {p50:.1f} | {p99:.1f} | - | {sum(j['iterations'] for j in mpi_runs)}x{n} |")
    print()
    for m in modes:
        r = [j["p50_us"] / q(a, .5) for j, a in zip(mpi_runs, per[m])]
        print(f"- MPI TCP p50 / {m} p50 (same repetition), median: **{statistics.median(r):.2f}** ({', '.join('%.2f' % x for x in r)})")
PY
