#!/usr/bin/env bash
# Does a busy control socket take time from the RX lcore? (issue 22). A real barrier-switch,
# one lcore polling RX and scheduler (reduced mode) on --lcore-cpu, fed without end by a
# net_pcap port replaying barrier reduces (infinite_rx; its TX drops); a client hammers its
# control socket with `groups` requests (one JSON object per line, --depth in flight, each
# answer a scan of the whole table of --capacity slots), pinned to --client-cpus. The switch's
# frames/s (its `ports` rx_frames, read at the edges of each phase) is measured in phases
# without and with the client, alternating (without first), --phases of each, in one run of
# one switch; printed: each phase, the medians, and the ratio with/without (1.00: the control
# socket costs the RX lcore nothing). Also where the switch's management thread was allowed
# to run (its Cpus_allowed_list) and the CPU it last ran on.
#
# The management thread serves the socket. Before issue 22 it inherited the main lcore's CPU
# (here the RX lcore's) and every request's work was taken from the loop; now it runs on a
# control core, a CPU no lcore polls (barrier_runtime::affinity), or on the CPUs given with
# --management-cpus (written as `[management] cpus = [...]` in the switch's file).
# Needs root (DPDK) and a built barrier-switch (the release build when there is one; or
# --switch PATH, e.g. an older build to compare with).
#
# usage: perf/control_load.sh [--phases K] [--secs S] [--groups N] [--capacity C]
#                             [--lcore-cpu N] [--client-cpus LIST] [--management-cpus LIST]
#                             [--depth D] [--switch PATH] [--out DIR]
#   defaults: 4 phases of each kind, 3 s each, 1,024 groups replayed, a table of 65,536
#   groups, the lcore on the last CPU this shell may use, the client on all the others,
#   automatic management placement (no [management] key), 4 requests in flight; DIR (default
#   a new /tmp/control_load.XXXXXX) keeps the switch's file, its log, result.json and
#   summary.md
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../scripts/lib/netns.sh
source "$here/../scripts/lib/netns.sh"
phases=4 secs=3 groups=1024 capacity=65536 lcore_cpu="" client_cpus="" mgmt_cpus="" depth=4
switch="" out=""
while [ $# -gt 0 ]; do
  case $1 in
    --phases) phases=${2:?}; shift 2 ;;
    --secs) secs=${2:?}; shift 2 ;;
    --groups) groups=${2:?}; shift 2 ;;
    --capacity) capacity=${2:?}; shift 2 ;;
    --lcore-cpu) lcore_cpu=${2:?}; shift 2 ;;
    --client-cpus) client_cpus=${2:?}; shift 2 ;;
    --management-cpus) mgmt_cpus=${2:?}; shift 2 ;;
    --depth) depth=${2:?}; shift 2 ;;
    --switch) switch=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    -h|--help) awk 'NR >= 20 && !/^#/ { exit } NR >= 20 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "control_load.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
for v in phases groups capacity depth; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "control_load.sh: --$v wants a whole number > 0" >&2; exit 2; }
done
[[ $secs =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "control_load.sh: --secs wants seconds" >&2; exit 2; }
[ "$groups" -le "$capacity" ] || { echo "control_load.sh: --groups $groups exceeds --capacity $capacity" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "control_load.sh: needs root (DPDK)" >&2; exit 1; }

# CPUs: the ones this shell may use; the lcore on the last unless told, the client on the rest.
mine=$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
[ -n "$lcore_cpu" ] || lcore_cpu=${mine##*,}
[[ $lcore_cpu =~ ^[0-9]+$ ]] || { echo "control_load.sh: --lcore-cpu wants one CPU number" >&2; exit 2; }
if [ -z "$client_cpus" ]; then
  client_cpus=$(python3 -c "import sys; c=[x for x in sys.argv[1].split(',') if x != sys.argv[2]]; print(','.join(c))" "$mine" "$lcore_cpu")
  [ -n "$client_cpus" ] || { echo "control_load.sh: one CPU only ($mine): no CPU left for the client" >&2; exit 1; }
fi
mgmt_toml=""
if [ -n "$mgmt_cpus" ]; then
  mgmt_toml=$(python3 -c "
import sys
out = []
for item in sys.argv[1].split(','):
    a, _, b = item.partition('-')
    out += range(int(a), int(b or a) + 1)
print('[management]\ncpus = [%s]' % ', '.join(map(str, out)))" "$mgmt_cpus") \
    || { echo "control_load.sh: --management-cpus wants a CPU list like 0 or 0-1,3" >&2; exit 2; }
fi

root=$(dirname "$here")
if [ -z "$switch" ]; then
  if [ -x "${CARGO_TARGET_DIR:-$root/target}/release/barrier-switch" ]; then
    switch=${CARGO_TARGET_DIR:-$root/target}/release/barrier-switch
  else
    switch=$(nb_find_program barrier-switch) || { echo "control_load.sh: barrier-switch not built" >&2; exit 2; }
  fi
fi
[ -n "$out" ] || out=$(mktemp -d /tmp/control_load.XXXXXX)
mkdir -p "$out"
out=$(cd "$out" && pwd)
prefix="nb-ctlload-$$"
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "/var/run/dpdk/$prefix"
}
trap cleanup EXIT

# The input: one reduce (sequence 0, epoch 1) for each group 0..groups, written by hand in the
# wire format (as scripts/tests/observe.sh does). Replayed without end, the first pass completes
# every barrier; every later frame is a stale reduce the switch answers with a re-sent release.
python3 - "$out/in.pcap" "$groups" <<'EOF'
import struct, sys
path, groups = sys.argv[1], int(sys.argv[2])
def frame(group, seq, kind=1, epoch=1):
    eth = bytes.fromhex("ffffffffffff02aa00000001") + b"\x88\xb5"
    h = bytearray(struct.pack(">BBBBIIIQH", 0xBA, 2, kind, 0, group, epoch, seq, 0, 0))
    s = sum(struct.unpack(">13H", h))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    struct.pack_into(">H", h, 24, 0xFFFF - s)
    return eth + bytes(h) + bytes(20)
with open(path, "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for g in range(groups):
        x = frame(g, 0)
        f.write(struct.pack("<IIII", g, 0, len(x), len(x)) + x)
EOF

cat >"$out/switch.toml" <<EOF
[eal]
args = ["--no-huge", "-m", "512", "--no-shconf", "--file-prefix", "$prefix", "--no-pci",
        "--iova-mode=va", "--no-telemetry", "-l", "$lcore_cpu", "--log-level=*:warning"]

[switch]
mac = "02:5e:00:00:00:01"

[mempool]
mbufs = 16383

[[ports]]
name = "a"
vdev = "net_pcap0,rx_pcap=$out/in.pcap,infinite_rx=1"

[lcores]
scheduler = $lcore_cpu
shared = true
rx = [ { lcore = $lcore_cpu, poll = ["a"] } ]

[control]
socket = "$out/switch.sock"
capacity = $capacity

[[groups]]
numbers = "0..$groups"
role = "root"
children = ["a"]

$mgmt_toml
EOF

echo "control_load: $switch; lcore on CPU $lcore_cpu, client on CPUs $client_cpus, management ${mgmt_cpus:-automatic}; $groups groups replayed, table of $capacity; $phases x ${secs} s without and with; results in $out" >&2
RUST_LOG=${RUST_LOG:-info} "$switch" run --config "$out/switch.toml" >"$out/switch.out" 2>"$out/switch.log" &
pid=$!
for _ in $(seq 600); do
  grep -q "^barrier-switch: ready" "$out/switch.log" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
grep -q "^barrier-switch: ready" "$out/switch.log" || { echo "control_load.sh: the switch did not start:" >&2; cat "$out/switch.log" >&2; exit 1; }

rc=0
python3 - "$out" "$pid" "$phases" "$secs" "$client_cpus" "$depth" "$lcore_cpu" "${mgmt_cpus:-automatic}" <<'PY' || rc=$?
import json, os, signal, socket, statistics, subprocess, sys, time
out, pid, phases, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
client_cpus = {int(c) for c in sys.argv[5].split(",")}
depth, lcore_cpu, mgmt = int(sys.argv[6]), int(sys.argv[7]), sys.argv[8]
sock_path = f"{out}/switch.sock"
os.sched_setaffinity(0, client_cpus)  # this driver and its client stay off the lcore's CPU

# The client: `groups` requests in a tight loop, `depth` in flight; prints how many it got.
HAMMER = r'''
import os, signal, socket, sys
stop = False
def on_term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
f = s.makefile("rb")
req, depth, n = b'{"op":"groups"}\n', int(sys.argv[2]), 0
s.sendall(req * depth)
while not stop:
    if not f.readline():
        break
    n += 1
    s.sendall(req)
print(n, flush=True)
'''

def request(line):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(sock_path)
        s.sendall(line.encode() + b"\n")
        return json.loads(s.makefile("rb").readline())

def rx_frames():
    r = request('{"op":"ports"}')
    return sum(p["rx_frames"] for p in r["result"]["ports"]), time.monotonic()

def management_thread():
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            if comm != "management":
                continue
            status = open(f"/proc/{pid}/task/{tid}/status").read()
            allowed = [l.split(":", 1)[1].strip() for l in status.splitlines() if l.startswith("Cpus_allowed_list")][0]
            last = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()[36]
            return {"allowed": allowed, "last_cpu": int(last)}
        except (OSError, IndexError):
            pass
    return None

# A first look at the groups answer (its size says what one request costs the switch).
first = request('{"op":"groups"}')
assert first["ok"], first
answer_bytes = len(json.dumps(first))
time.sleep(0.5)  # past the start-up
rows = []
for i in range(2 * phases):
    loaded = i % 2 == 1
    client = None
    if loaded:
        client = subprocess.Popen([sys.executable, "-c", HAMMER, sock_path, str(depth)],
                                  stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)  # the client connected and running
    a, ta = rx_frames()
    time.sleep(secs)
    b, tb = rx_frames()
    requests = 0
    if client:
        client.send_signal(signal.SIGTERM)
        requests = int(client.communicate(timeout=10)[0].strip() or 0)
        time.sleep(0.3)
    rows.append({"phase": i + 1, "client": loaded, "fps": (b - a) / (tb - ta),
                 "requests_per_s": requests / (secs + 0.5) if loaded else 0.0})

without = [r["fps"] for r in rows if not r["client"]]
with_ = [r["fps"] for r in rows if r["client"]]
pairs = [w / o for o, w in zip(without, with_) if o > 0]
med = statistics.median
mt = management_thread()
res = {"lcore_cpu": lcore_cpu, "client_cpus": sorted(client_cpus), "management_cpus": mgmt,
       "management_thread": mt, "secs": secs, "groups_answer_bytes": answer_bytes,
       "phases": rows, "fps_without": med(without), "fps_with": med(with_),
       "ratio_of_medians": med(with_) / med(without) if med(without) else None,
       "ratio_pairs_median": med(pairs) if pairs else None,
       "requests_per_s": med([r["requests_per_s"] for r in rows if r["client"]]),
       "loadavg": open("/proc/loadavg").read().split()[:3]}
json.dump(res, open(f"{out}/result.json", "w"), indent=1)
lines = ["| phase | client | switch frames/s | groups requests/s |", "| --- | --- | --- | --- |"]
for r in rows:
    lines.append(f"| {r['phase']} | {'hammering' if r['client'] else 'none'} | {r['fps']:,.0f} | "
                 f"{r['requests_per_s']:,.0f} |")
lines.append("")
lines.append(f"management thread: allowed on CPUs {mt['allowed'] if mt else '?'}, last ran on "
             f"{mt['last_cpu'] if mt else '?'} (lcore on CPU {lcore_cpu}, management {mgmt})")
lines.append(f"median frames/s without {res['fps_without']:,.0f}, with {res['fps_with']:,.0f}; "
             f"`groups` answers of {answer_bytes} bytes at {res['requests_per_s']:,.0f}/s")
lines.append(f"ratio with/without: {res['ratio_of_medians']:.3f} (medians), "
             f"{res['ratio_pairs_median']:.3f} (median of the {len(pairs)} adjacent pairs)")
text = "\n".join(lines)
open(f"{out}/summary.md", "w").write(text + "\n")
print(text)
PY
exit $rc
