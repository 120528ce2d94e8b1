#!/usr/bin/env bash
# Issue 25's ratios, one sitting: two hosts (namespaces h0, h1) joined through a switch
# namespace s by veth pairs, three ways:
#   bridge  a plain Linux bridge over the two links (no switch): the baseline for TCP;
#   af_xdp  barrier-switch with AF_XDP ports on the two links, the links in a bridge;
#   tap     barrier-switch on net_af_packet with a TAP exception path per port, the TAP
#           interfaces in a bridge.
# Per mode: TCP throughput between the hosts (iperf3 -t SECS); with a switch, the barrier
# round (barrier-leaf in both hosts, group 7) quiet and while iperf3 runs. The hosts' offloads
# are off in every mode (TSO, GSO, checksum), as the TAP mode needs on veth
# (docs/operations.md), so the three compare like with like. Writes OUT/shared_link.json.
#
# usage: perf/shared_link.sh OUT [SECS] [BARRIERS] [REPS]   (needs root, built release binaries)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${1:?usage: perf/shared_link.sh OUT [SECS] [BARRIERS] [REPS]}
secs=${2:-4} barriers=${3:-5000} reps=${4:-1}
# shellcheck source=../scripts/lib/netns.sh
source "$root/scripts/lib/netns.sh"
for c in iperf3 ethtool; do command -v "$c" >/dev/null || nb_die "$c not found: run scripts/setup.sh"; done
bin=$root/target/release
for p in barrier-switch barrier-leaf; do [ -x "$bin/$p" ] || nb_die "$bin/$p not built"; done
mkdir -p "$out"
nb_init
res=$out/shared_link.txt
: > "$res"

bed() { # a fresh bed: namespaces h0, h1, s; links h<i>:up <-> s:p<i>
  nb_netns_add h0; nb_netns_add h1; nb_netns_add s
  local i
  for i in 0 1; do
    nb_veth "$(nb_ns h$i)" up "$(nb_ns s)" "p$i"
    ip -n "$(nb_ns h$i)" addr add "10.79.0.$((i + 1))/24" dev up
    ip netns exec "$(nb_ns h$i)" ethtool -K up tso off gso off tx off >/dev/null
  done
  ip -n "$(nb_ns s)" link add br0 type bridge
}

unbed() { # the bed's namespaces and processes gone, the run's state kept for the next bed
  NB_KEEP_STATE=1 nb_cleanup
  _NB_CLEANED=0
  trap 'nb_cleanup; exit 130' INT
  trap 'nb_cleanup; exit 143' TERM
}

bridge() { # bridge IF...: the interfaces into br0, up
  local i
  for i in "$@"; do ip -n "$(nb_ns s)" link set "$i" master br0; ip -n "$(nb_ns s)" link set "$i" up; done
  ip -n "$(nb_ns s)" link set br0 up
}

switch_config() { # switch_config MODE FILE
  local mode=$1 f=$2 i
  {
    echo "[eal]"
    echo "args = [\"--no-huge\", \"-m\", \"256\", \"--no-shconf\", \"--file-prefix\", \"$(nb_ns s)\", \"--no-pci\", \"--iova-mode=va\", \"--no-telemetry\", \"--lcores\", \"0@(0-$(($(nproc) - 1))),1@(0-$(($(nproc) - 1)))\"]"
    for i in 0 1; do
      echo; echo "[[ports]]"; echo "name = \"p$i\""
      if [ "$mode" = af_xdp ]; then
        echo "af_xdp = \"p$i\""
      else
        echo "vdev = \"net_af_packet$i,iface=p$i,qdisc_bypass=0,qpairs=2\""
        echo "rx_queues = 2"
        echo "exception = \"tap\""
        echo "exception_iface = \"tap$i\""
      fi
    done
    echo; echo "[lcores]"; echo "scheduler = 1"
    if [ "$mode" = af_xdp ]; then
      echo 'rx = [ { lcore = 0, poll = ["p0", "p1"] } ]'
    else
      echo 'rx = [ { lcore = 0, poll = ["p0:0", "p0:1", "p1:0", "p1:1"] } ]'
    fi
    echo "idle = \"sleep\""
    echo; echo "[[groups]]"; echo "number = 7"; echo "role = \"root\""; echo "children = [\"p0\", \"p1\"]"
  } > "$f"
}

tcp() { # tcp SECS: Mbit/s received from h0 to h1
  local s=$1 json
  nb_spawn "$(nb_ns h1)" "$NB_STATE_DIR/iperf3-s.log" iperf3 -s -1 -B 10.79.0.2
  sleep 0.3
  json=$(ip netns exec "$(nb_ns h0)" iperf3 -c 10.79.0.2 -t "$s" -J) || { echo "$json" >&2; nb_die "iperf3 failed"; }
  python3 -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e6))' <<< "$json"
}

leaves() { # leaves FIRST_SEQ: "p50_us p99_us" of the barrier round, the worse of the two leaves
  local first=$1 i pids=()
  for i in 0 1; do
    ip netns exec "$(nb_ns h$i)" "$bin/barrier-leaf" --iface up --group 7 --count "$barriers" --first-seq "$first" \
      > "$NB_STATE_DIR/leaf$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || { cat "$NB_STATE_DIR"/leaf*.log >&2; nb_die "a leaf failed"; }; done
  cat "$NB_STATE_DIR"/leaf0.log "$NB_STATE_DIR"/leaf1.log | python3 -c '
import re, sys
rows = [(float(a), float(b)) for a, b in re.findall(r"p50 ([\d.]+) µs\s+p99 ([\d.]+) µs", sys.stdin.read())]
assert len(rows) == 2, rows
print("%.1f %.1f" % (max(r[0] for r in rows), max(r[1] for r in rows)))'
}

for rep in $(seq 1 "$reps"); do
  for mode in bridge af_xdp tap; do
    bed
    if [ "$mode" = bridge ]; then
      bridge p0 p1
      echo "$rep $mode tcp $(tcp "$secs")" >> "$res"
      unbed
      continue
    fi
    [ "$mode" = af_xdp ] && bridge p0 p1
    switch_config "$mode" "$NB_STATE_DIR/s.toml"
    nb_spawn "$(nb_ns s)" "$NB_STATE_DIR/s.log" "$bin/barrier-switch" run --config "$NB_STATE_DIR/s.toml"
    for _ in $(seq 1 300); do grep -q "^barrier-switch: ready" "$NB_STATE_DIR/s.log" && break; sleep 0.1; done
    grep -q "^barrier-switch: ready" "$NB_STATE_DIR/s.log" || { cat "$NB_STATE_DIR/s.log" >&2; nb_die "switch ($mode) not ready"; }
    [ "$mode" = tap ] && bridge tap0 tap1
    echo "$rep $mode quiet $(leaves 0)" >> "$res"
    echo "$rep $mode tcp $(tcp "$secs")" >> "$res"
    # Barriers while TCP runs: iperf3 long enough to cover the leaves.
    nb_spawn "$(nb_ns h1)" "$NB_STATE_DIR/iperf3-s2.log" iperf3 -s -1 -B 10.79.0.2
    sleep 0.3
    nb_spawn "$(nb_ns h0)" "$NB_STATE_DIR/iperf3-c2.log" iperf3 -c 10.79.0.2 -t 60
    sleep 0.5
    echo "$rep $mode loaded $(leaves "$barriers")" >> "$res"
    cp "$NB_STATE_DIR/s.log" "$out/shared_link-$mode-$rep.log"
    unbed
  done
done

python3 - "$res" "$out/shared_link.json" <<'EOF'
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = lambda xs: statistics.median(xs) if xs else None
r = {}
for mode in ("bridge", "af_xdp", "tap"):
    tcp = [float(x[3]) for x in rows if x[1] == mode and x[2] == "tcp"]
    q = [(float(x[3]), float(x[4])) for x in rows if x[1] == mode and x[2] == "quiet"]
    l = [(float(x[3]), float(x[4])) for x in rows if x[1] == mode and x[2] == "loaded"]
    r[mode] = {"tcp_mbps": med(tcp),
               "quiet_p50_us": med([a for a, _ in q]), "quiet_p99_us": med([b for _, b in q]),
               "loaded_p50_us": med([a for a, _ in l]), "loaded_p99_us": med([b for _, b in l])}
json.dump({"modes": r, "rows": rows}, open(sys.argv[2], "w"), indent=1)
print(json.dumps(r))
EOF
