#!/usr/bin/env bash
# The performance suite (issue 13; perf/README.md): every comparison side by side in one run,
# printed as ratios. Writes perf/results/<UTC timestamp>/ (report.md, raw JSON, hdrhistogram
# logs, plots, a profile) and updates the summary table in docs/performance.md. Needs root
# (DPDK, network namespaces).
#
# usage: perf/run.sh [--quick] [--out DIR] [--no-docs] [--only LIST]
#   --quick      a few minutes: shorter measurements, the simulator up to 4,096 leaves
#                (default: the full run, under an hour: longer measurements, up to 65,536 leaves)
#   --out DIR    write the results here instead of perf/results/<timestamp>
#   --no-docs    do not touch docs/performance.md
#   --only LIST  run only these steps (comma-separated): alone,testpmd,latency,txonly,scale,tree,gen,
#                twoproc,xdp,xdptree,sharedlink,mpi,pmu,kernel,micro,sim,profile (the report is written from whatever is there)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
quick=0 out="" docs=1 only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --no-docs) docs=0; shift ;;
    --only) only=${2:?--only needs a list}; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "perf/run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "perf/run.sh: needs root (DPDK, network namespaces)" >&2; exit 1; }
for c in mpicc mpirun gnuplot dpdk-testpmd python3; do
  command -v "$c" >/dev/null || { echo "perf/run.sh: $c not found: run scripts/setup.sh" >&2; exit 1; }
done

stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=${out:-$root/perf/results/$stamp}
mkdir -p "$out"
out=$(cd "$out" && pwd)
log() { echo "[perf $(date -u +%H:%M:%S)] $*" >&2; }
want() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

if [ $quick = 1 ]; then
  SECS=1 REPS=3 SCALE_SECS=0.6 LAT_SAMPLES=50000 TREE_COUNT=50000 GEN_SECS=2
  MPI_ITERS=10000 KERNEL_BARRIERS=5000 SIM_LEAVES="8 64 512 4096" SIM_BARRIERS=10 TP_SECS=4
  MICRO_M=1 TOPO_BARRIERS=2000 SL_SECS=3 SL_BARRIERS=2000 SL_REPS=1
else
  SECS=4 REPS=5 SCALE_SECS=3 LAT_SAMPLES=300000 TREE_COUNT=300000 GEN_SECS=8
  MPI_ITERS=100000 KERNEL_BARRIERS=30000 SIM_LEAVES="8 64 512 4096 32768 65536" SIM_BARRIERS=10 TP_SECS=8
  MICRO_M=2 TOPO_BARRIERS=10000 SL_SECS=8 SL_BARRIERS=10000 SL_REPS=3
fi
NP=4   # participants in the MPI / kernel-socket / in-process comparison

cat /proc/loadavg > "$out/loadavg-start.txt"
log "results in $out (quick=$quick); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

export CARGO_INCREMENTAL=0
log "building (release)"
(cd "$root" && cargo build --release -q -p barrier-perf -p barrier-gen -p barrier-sim \
  -p barrier-switchd -p barrier-leaf -p barrier-xdp --bins)
bin=$root/target/release
eal_flags() { echo "--no-huge -m ${2:-512} --no-shconf --file-prefix perf-$1-$$ --no-pci --iova-mode=va --no-telemetry --log-level=*:warning"; }

python3 - "$out/meta.json" "$quick" <<'EOF'
import json, os, platform, subprocess, sys
def sh(c):
    try: return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception: return ""
json.dump({"quick": sys.argv[2] == "1", "host": platform.node(), "cpus": os.cpu_count(),
           "cpu": sh("lscpu | sed -n 's/^Model name: *//p' | head -1"),
           "kernel": platform.release(), "commit": sh("git -C '%s' rev-parse --short HEAD" % os.path.dirname(sys.argv[1]) ) or sh("git rev-parse --short HEAD"),
           "dpdk": sh("pkg-config --modversion libdpdk"),
           "openmpi": sh("ompi_info --version 2>/dev/null | head -1"),
           "date": sh("date -u +%Y-%m-%dT%H:%M:%SZ")}, open(sys.argv[1], "w"), indent=1)
EOF

# 1. The switch alone against the bare RX loop (net_ring), hot and cold shapes.
if want alone; then
  log "1. switch alone vs bare rx_burst+free (net_ring, fan-in 2, 1,024 groups)"
  "$bin/barrier-perf" alone --out "$out" --secs "$SECS" --reps "$REPS" 2>"$out/alone.log" \
    || { cat "$out/alone.log" >&2; exit 1; }
fi

# 1b. testpmd macswap on two net_ring ports, one forwarding core (the hot shape: tx_first
# sends one burst per port and the same mbufs circulate). Interactive, commands on stdin:
# "show port stats all" once a second gives each port's Rx-pps over the last interval.
if want testpmd; then
  log "1b. dpdk-testpmd --forward-mode=macswap on 2 net_ring ports ($TP_SECS s)"
  # shellcheck disable=SC2046
  { sleep 2; echo "start tx_first"; sleep 1; echo "show port stats all"
    for _ in $(seq "$TP_SECS"); do sleep 1; echo "show port stats all"; done
    echo "stop"; echo "quit"; } \
    | timeout $((TP_SECS + 60)) dpdk-testpmd $(eal_flags tp 1024) --vdev=net_ring0 \
      --vdev=net_ring1 -l 0,1 -- -i --forward-mode=macswap --total-num-mbufs=16384 \
      >"$out/testpmd.log" 2>&1 || true
  python3 - "$out/testpmd.log" "$out/testpmd.json" <<'EOF'
import json, re, sys
txt = open(sys.argv[1]).read()
# Per-second stats: "NIC statistics for port P" ... "Rx-pps: N"; sum the ports per second.
blocks = re.findall(r"NIC statistics for port (\d+).*?Rx-pps:\s+(\d+)", txt, re.S)
per_s, cur = [], {}
for p, pps in blocks:
    if p in cur:
        per_s.append(sum(cur.values())); cur = {}
    cur[p] = int(pps)
if len(cur) == 2: per_s.append(sum(cur.values()))
per_s = [x for x in per_s[1:] if x > 0]  # the first show is the zero point
ok = len(per_s) > 0
med = sorted(per_s)[len(per_s) // 2] if ok else 0
json.dump({"mode": "macswap", "ports": 2, "forwarding_cores": 1, "device": "net_ring",
           "shape": "hot (start tx_first: one burst per port circulates)",
           "pps_per_core_samples": per_s, "pps_per_core": med, "ok": ok},
          open(sys.argv[2], "w"), indent=1)
print("testpmd macswap: %.2f Mpps per forwarding core (median of %d s)" % (med / 1e6, len(per_s)), file=sys.stderr)
EOF
fi

# 1c. Frame-in to frame-out latency at half of each system's own peak, from another process
# (issue 23): barrier-perf probe on CPU 0 drives, over one net_memif port, first testpmd
# macswap and then a barrier-switch root (its 1,024 groups' one child is that port), each on
# CPU 1. memif needs hugepages (scripts/setup.sh reserves 256): without them latency.json says so.
if want latency; then
  free_hp=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages 2>/dev/null || echo 0)
  if [ "$free_hp" -lt 160 ] || ! mountpoint -q /dev/hugepages; then
    echo "{\"absent\": \"net_memif needs hugepages: $free_hp free 2 MB pages (160 wanted) or no hugetlbfs on /dev/hugepages\"}" >"$out/latency.json"
  else
    log "1c. latency at half of each system's peak: testpmd macswap, then barrier-switch, over net_memif"
    lat_sock=/tmp/nb-perf-lat-$$.sock
    lat_pfx=nb-perf-lat$$
    lat_run() { # $1 label (system-rep), then the system's command; it serves net_memif0 on $lat_sock
      local label=$1 pid; shift
      rm -f "$lat_sock" "$lat_sock.in"
      # stdin a FIFO held open here: testpmd -a runs until it reads a line or end of file
      mkfifo "$lat_sock.in"
      "$@" <"$lat_sock.in" >"$out/latency-$label.log" 2>&1 &
      pid=$!
      exec 9>"$lat_sock.in"
      sleep 2
      "$bin/barrier-perf" --out "$out" --secs "$SECS" probe --label "$label" \
        --port "net_memif0,role=client,socket=$lat_sock" --lcores 0@0 --file-prefix "${lat_pfx}p" \
        2>"$out/probe-$label.log" || cat "$out/probe-$label.log" >&2
      exec 9>&-   # end of file for testpmd
      [ "${label%-*}" = testpmd ] || kill -INT "$pid" 2>/dev/null || true
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      rm -rf /dev/hugepages/"$lat_pfx"* /var/run/dpdk/"$lat_pfx"* "$lat_sock" "$lat_sock.in"
    }
    lat_testpmd() {
      lat_run "testpmd-$1" timeout 120 dpdk-testpmd --lcores '0@1,1@1' -m 128 \
        --file-prefix "$lat_pfx" --no-pci --no-telemetry --log-level='*:warning' \
        --vdev="net_memif0,role=server,socket=$lat_sock" -- --forward-mode=macswap \
        --port-topology=loop --total-num-mbufs=8192 -a
    }
    cat >"$out/latency-switch.toml" <<END
[eal]
args = ["--lcores", "0@1", "-m", "128", "--file-prefix", "$lat_pfx", "--no-pci", "--no-telemetry", "--log-level=*:warning"]

[[ports]]
name = "p0"
vdev = "net_memif0,role=server,socket=$lat_sock"

[lcores]
scheduler = 0
shared = true
rx = [ { lcore = 0, poll = ["p0"] } ]

[[groups]]
numbers = "0..1024"
role = "root"
children = ["p0"]
END
    # Alternated REPS times: single runs on a shared machine differ by 5x in p99.
    for rep in $(seq "$REPS"); do
      lat_testpmd "$rep"
      lat_run "switch-$rep" timeout 120 "$bin/barrier-switch" run --config "$out/latency-switch.toml"
    done
    python3 - "$out" "$REPS" <<'EOF'
import json, os, sys
d, reps = sys.argv[1], int(sys.argv[2])
r = {"reps": []}
for i in range(1, reps + 1):
    one = {}
    for k in ("testpmd", "switch"):
        p = os.path.join(d, "probe-%s-%d.json" % (k, i))
        one[k] = json.load(open(p)) if os.path.exists(p) else \
            {"absent": "the probe did not finish: see probe-%s-%d.log" % (k, i)}
    r["reps"].append(one)
json.dump(r, open(os.path.join(d, "latency.json"), "w"), indent=1)
EOF
  fi
fi

# 1d. The generator's own ceiling (issue 23): testpmd txonly on one forwarding core into net_null
# (64 B frames, freed by the device), and barrier-gen on one lcore against a reflector on the other.
if want txonly; then
  log "1d. dpdk-testpmd --forward-mode=txonly (64 B, net_null) and barrier-gen on one lcore ($TP_SECS s)"
  # shellcheck disable=SC2046
  { sleep 2; echo "start"; sleep 1; echo "show port stats all"
    for _ in $(seq "$TP_SECS"); do sleep 1; echo "show port stats all"; done
    echo "stop"; echo "quit"; } \
    | timeout $((TP_SECS + 60)) dpdk-testpmd $(eal_flags txo 1024) --vdev=net_null0,no-rx=1 \
      -l 0,1 -- -i --forward-mode=txonly --txpkts=64 --total-num-mbufs=16384 \
      >"$out/txonly.log" 2>&1 || true
  python3 - "$out/txonly.log" "$out/txonly.json" <<'EOF'
import json, re, sys
pps = [int(x) for x in re.findall(r"Tx-pps:\s+(\d+)", open(sys.argv[1]).read())][1:]
pps = [x for x in pps if x > 0]
med = sorted(pps)[len(pps) // 2] if pps else 0
json.dump({"mode": "txonly", "device": "net_null0,no-rx=1", "frame_bytes": 64, "forwarding_cores": 1,
           "pps_samples": pps, "pps": med, "ok": bool(pps)}, open(sys.argv[2], "w"), indent=1)
print("testpmd txonly: %.2f Mpps on one core (median of %d s)" % (med / 1e6, len(pps)), file=sys.stderr)
EOF
  "$bin/barrier-perf" genmax --out "$out" --secs "$SECS" 2>"$out/genmax.log" \
    || { cat "$out/genmax.log" >&2; exit 1; }
fi

# 2. Scale (groups, fan-in), bytes per group, the switch's own latency.
if want scale; then
  log "2. scale: groups 32..1,048,576, fan-in 2..64, switch latency ($SCALE_SECS s a case)"
  "$bin/barrier-perf" scale --out "$out" --secs "$SCALE_SECS" --reps "$REPS" \
    --latency-samples "$LAT_SAMPLES" 2>"$out/scale.log" || { cat "$out/scale.log" >&2; exit 1; }
fi

# 3. Barrier round latency in in-process trees of 1, 2 and 3 levels; barrier-gen closed loop.
if want tree; then
  log "3. in-process trees: fan-out 4; 2,2; 2,2,2 ($TREE_COUNT barriers each)"
  "$bin/barrier-perf" tree --out "$out" --count "$TREE_COUNT" 2>"$out/tree.log" \
    || { cat "$out/tree.log" >&2; exit 1; }
fi
if want gen; then
  for g in 1 1024; do
    log "3b. barrier-gen closed loop, in-process switch, $NP ports, $g group(s), $GEN_SECS s"
    # shellcheck disable=SC2046
    "$bin/barrier-gen" $(eal_flags gen) -l 0 -- --inproc-switch --ports "$NP" --groups "$g" \
      --duration "$GEN_SECS" --json --hdr-log "$out/gen-$g.hlog" >"$out/gen-$g.json" \
      2>"$out/gen-$g.log" || { cat "$out/gen-$g.log" >&2; exit 1; }
  done
fi

# 3c. barrier-gen against a barrier-switch process (net_af_packet on veth, namespaces), once
# quiet and once beside a busy loop per CPU (perf/gen_two_process.sh, perf/gen.md).
if want twoproc; then
  log "3c. barrier-gen against a barrier-switch process, quiet and loaded ($GEN_SECS s each)"
  bash "$here/gen_two_process.sh" --out "$out/twoproc" --duration "$GEN_SECS" \
    --gen "$bin/barrier-gen" --switch "$bin/barrier-switch" >"$out/twoproc.log" 2>&1 \
    || { cat "$out/twoproc.log" >&2; exit 1; }
fi

# 3d. The XDP switch against an XDP reflector on one veth pair, one CPU (issue 24; BPF_PROG_RUN
# live frames, perf/README.md); then barrier-switch on net_af_packet on the same pair and CPU
# (the binary built above, beside barrier-perf; a closed loop); the group slot's size.
if want xdp; then
  log "3d. XDP switch vs XDP reflector (BPF_PROG_RUN live frames, veth), $REPS x $SECS s each; then barrier-switch on net_af_packet"
  "$bin/barrier-perf" xdp --out "$out" --secs "$SECS" --reps "$REPS" 2>"$out/xdp.log" \
    || { cat "$out/xdp.log" >&2; exit 1; }
fi

# 3e. Barrier round latency through a 2,2 tree of XDP switches against the same tree of DPDK
# switches (barrier-switch on net_af_packet), the real leaves in network namespaces on veth
# (scripts/topo.sh), the two trees alternated REPS times (issue 24).
if want xdptree; then
  log "3e. 2,2 tree: XDP switches vs DPDK switches on veth (topo.sh), $REPS x $TOPO_BARRIERS barriers each"
  : > "$out/xdptree.txt"
  for r in $(seq 1 "$REPS"); do
    for kind in dpdk xdp; do
      extra=(); [ $kind = xdp ] && extra=(--xdp all)
      line=$(bash "$root/scripts/topo.sh" --fanout 2,2 --barriers "$TOPO_BARRIERS" \
        --switch "$bin/barrier-switch" --leaf "$bin/barrier-leaf" --xdp-cmd "$bin/barrier-xdp" \
        "${extra[@]}" 2>&1 | tee -a "$out/xdptree.log" | grep '^check_records: .*early releases' || true)
      [ -n "$line" ] || { tail -20 "$out/xdptree.log" >&2; exit 1; }
      echo "$kind $r $line" >> "$out/xdptree.txt"
    done
  done
  python3 - "$out" <<'EOF2'
import json, re, statistics, sys
d = sys.argv[1]
rows = {"dpdk": [], "xdp": []}
for l in open(d + "/xdptree.txt"):
    kind, rep, rest = l.split(" ", 2)
    g = re.search(r"(\d+) early releases; last arrival to last release: p50 ([\d.]+) us, p99 ([\d.]+) us", rest)
    rows[kind].append({"rep": int(rep), "early": int(g.group(1)), "p50_us": float(g.group(2)), "p99_us": float(g.group(3))})
med = lambda k, f: statistics.median(r[f] for r in rows[k])
json.dump({"reps": rows,
           "dpdk_p50_us": med("dpdk", "p50_us"), "dpdk_p99_us": med("dpdk", "p99_us"),
           "xdp_p50_us": med("xdp", "p50_us"), "xdp_p99_us": med("xdp", "p99_us"),
           "early_releases": sum(r["early"] for k in rows for r in rows[k])},
          open(d + "/xdptree.json", "w"), indent=1)
EOF2
fi

# 3f. Links shared with ordinary traffic (issue 25, perf/shared_link.sh): TCP (iperf3) between
# two host namespaces through a plain Linux bridge, through barrier-switch's AF_XDP ports and
# through its TAP exception path; the barrier round quiet and under that TCP, per mode.
if want sharedlink; then
  log "3f. shared links: bridge / AF_XDP ports / TAP exception path, $SL_REPS x (iperf3 $SL_SECS s, $SL_BARRIERS barriers quiet and loaded)"
  bash "$here/shared_link.sh" "$out" "$SL_SECS" "$SL_BARRIERS" "$SL_REPS" >"$out/shared_link.log" 2>&1 \
    || { tail -30 "$out/shared_link.log" >&2; exit 1; }
  # barrier-switch's barriers/s and latency on its two kinds of kernel-interface port, the same
  # veth bed and generator (barrier-gen on net_af_packet), quiet and loaded each.
  for kind in af_packet af_xdp; do
    log "3f. barrier-gen against barrier-switch on $kind ports ($GEN_SECS s per phase)"
    bash "$here/gen_two_process.sh" --out "$out/ports-$kind" --duration "$GEN_SECS" --switch-ports "$kind" \
      --gen "$bin/barrier-gen" --switch "$bin/barrier-switch" >"$out/ports-$kind.log" 2>&1 \
      || { tail -20 "$out/ports-$kind.log" >&2; exit 1; }
  done
fi

# 4. What a user would pick instead: Open MPI (shared memory, TCP loopback), MPICH if present,
# the same protocol over kernel sockets; NP participants each.
if want mpi; then
  mpicc -O2 -o "$out/mpi_barrier" "$here/mpi/mpi_barrier.c"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  log "4. Open MPI MPI_Barrier, $NP ranks, shared memory (btl vader), $MPI_ITERS iterations"
  timeout 600 mpirun -np "$NP" --oversubscribe --mca btl self,vader "$out/mpi_barrier" \
    "$MPI_ITERS" 1000 >"$out/mpi-shm.json" 2>"$out/mpi-shm.log"
  log "4. Open MPI MPI_Barrier, $NP ranks, TCP loopback (btl tcp on lo)"
  timeout 600 mpirun -np "$NP" --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo \
    "$out/mpi_barrier" "$MPI_ITERS" 1000 >"$out/mpi-tcp.json" 2>"$out/mpi-tcp.log"
  if command -v mpicc.mpich >/dev/null && command -v mpirun.mpich >/dev/null; then
    log "4. MPICH MPI_Barrier, $NP ranks"
    mpicc.mpich -O2 -o "$out/mpi_barrier_mpich" "$here/mpi/mpi_barrier.c"
    timeout 600 mpirun.mpich -np "$NP" "$out/mpi_barrier_mpich" "$MPI_ITERS" 1000 \
      >"$out/mpich.json" 2>"$out/mpich.log" || true
  else
    echo '{"absent": "MPICH is not installed (Debian openmpi only; not both)"}' >"$out/mpich.json"
  fi
fi
if want kernel; then
  log "4b. the same protocol over kernel sockets: barrier-leaf (AF_PACKET) x $NP, barrier-switch (net_af_packet) in namespaces"
  rm -rf "$out/kernel"
  NB_PREFIX=perf$$ bash "$root/scripts/topo.sh" --fanout "$NP" --barriers "$KERNEL_BARRIERS" \
    --out "$out/kernel" --timeout 300 >"$out/kernel.log" 2>&1 \
    || { tail -20 "$out/kernel.log" >&2; exit 1; }
  python3 - "$out/kernel" "$out/kernel.json" <<'EOF'
import csv, glob, json, sys
lat = []
for f in sorted(glob.glob(sys.argv[1] + "/records/*.csv")):
    # Released barriers only (a leaf stopped while waiting writes its arrival, released 0).
    rows = [r for r in csv.DictReader(open(f)) if r.get("released", "1") == "1"]
    # The first barrier waits for every leaf to start: left out.
    lat += [(int(r["release_ns"]) - int(r["first_reduce_ns"])) / 1e3 for r in rows[1:]]
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * (len(lat) - 1) + 0.5))]
json.dump({"leaves": len(glob.glob(sys.argv[1] + "/records/*.csv")), "samples": len(lat),
           "p50_us": q(0.5), "p99_us": q(0.99), "p999_us": q(0.999), "max_us": lat[-1],
           "min_us": lat[0], "avg_us": sum(lat) / len(lat),
           "what": "per leaf per barrier: first reduce sent to release received (CLOCK_MONOTONIC), barrier-leaf over AF_PACKET, one barrier-switch (DPDK net_af_packet) in network namespaces on veths"},
          open(sys.argv[2], "w"), indent=1)
EOF
fi

# 5. The microbenchmarks (perf/micro.rs, perf/micro.md), MICRO_M million operations a repetition.
if want micro; then
  log "5. microbenchmarks (cargo bench -p barrier-switch --bench micro -- $MICRO_M)"
  (cd "$root" && cargo bench -q -p barrier-switch --bench micro -- "$MICRO_M") >"$out/micro.txt" \
    2>"$out/micro.log" || { tail -20 "$out/micro.log" >&2; exit 1; }
fi

# 6. The simulator past this machine, per-hop time = the switch latency measured in step 2.
if want sim; then
  hop=$(python3 -c "import json;print(json.load(open('$out/scale.json'))['switch_latency']['p50_ns'])" 2>/dev/null || echo 1000)
  log "6. barrier-sim compare, leaves: $SIM_LEAVES; per-hop latency ${hop} ns (measured switch p50)"
  : >"$out/sim.jsonl"
  for n in $SIM_LEAVES; do
    "$bin/barrier-sim" compare --leaves "$n" --latency-ns "$hop" --barriers "$SIM_BARRIERS" --json \
      >>"$out/sim.jsonl" 2>>"$out/sim.log"
    echo >>"$out/sim.jsonl"
  done
fi

# Where the time goes: a profile of the switch's timed loops only (barrier-perf enables and
# disables perf through its control FIFOs around them: not the input being written, not the
# bare loop), both shapes.
if want profile && command -v perf >/dev/null; then
  log "profile: perf record of the switch alone (its timed loops only)"
  fifo=$(mktemp -d)
  mkfifo "$fifo/ctl" "$fifo/ack"
  PERF_CTL_FIFO=$fifo/ctl PERF_ACK_FIFO=$fifo/ack perf record -q -D -1 \
    --control "fifo:$fifo/ctl,$fifo/ack" -F 4999 -g -o "$out/perf.data" -- \
    "$bin/barrier-perf" alone --out "$out/profile" --secs 1 --reps 1 >/dev/null 2>&1 || true
  perf report -i "$out/perf.data" --stdio --no-children --sort symbol --percent-limit 0.7 \
    -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | sed 's/ *- *- *$//' | head -40 \
    >"$out/profile.txt" || true
  rm -rf "$fifo" "$out/perf.data" "$out/perf.data.old" "$out/profile"
fi

# Instructions and cycles per frame of the switch's timed loops (issue 23), where the machine's
# PMU gives them: the same control FIFOs as the profile, `perf stat` instead of `perf record`.
# These development VMs have no PMU (perf stat: <not supported>): pmu.json says so.
if want pmu; then
  if command -v perf >/dev/null && perf stat -x, -e instructions true 2>&1 | grep -q '^[0-9]'; then
    log "pmu: perf stat of the switch alone (its timed loops only)"
    fifo=$(mktemp -d)
    mkfifo "$fifo/ctl" "$fifo/ack"
    PERF_CTL_FIFO=$fifo/ctl PERF_ACK_FIFO=$fifo/ack perf stat -x, -D -1 \
      --control "fifo:$fifo/ctl,$fifo/ack" -e instructions,cycles -o "$out/pmu.csv" -- \
      "$bin/barrier-perf" alone --out "$out/pmu" --secs 1 --reps 1 >/dev/null 2>&1 || true
    python3 - "$out/pmu.csv" "$out/pmu/alone.json" "$out/pmu.json" <<'PY'
import json, sys
counts = {}
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].isdigit():
        counts[f[2].split(":")[0]] = int(f[0])
a = json.load(open(sys.argv[2]))
frames = sum(s["switch_frames_in"] for s in a["shapes"])
out = {"frames": frames, **counts}
if frames and "instructions" in counts and "cycles" in counts:
    out["instructions_per_frame"] = counts["instructions"] / frames
    out["cycles_per_frame"] = counts["cycles"] / frames
json.dump(out, open(sys.argv[3], "w"), indent=1)
PY
    rm -rf "$fifo" "$out/pmu"
  else
    echo '{"absent": "perf stat reports the instructions event <not supported> (no PMU in this machine)"}' >"$out/pmu.json"
  fi
fi

cat /proc/loadavg > "$out/loadavg-end.txt"
log "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
docs_arg=()
[ $docs = 1 ] && docs_arg=(--docs "$root/docs/performance.md")
python3 "$here/report.py" "$out" "${docs_arg[@]}"
log "report: $out/report.md"
