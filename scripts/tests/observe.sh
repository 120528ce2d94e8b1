#!/usr/bin/env bash
# Observing a running switch with the operators' tools (issue 11): the real barrier-switch on
# DPDK net_pcap ports, with DPDK telemetry on, fed crafted frames (a completed root group on two
# ports, a root group over one port, an intermediate group in epoch 9 that reduces upward, a
# group whose child b never arrives, one frame damaged behind its checksum). Then:
#  - dpdk-telemetry.py (Debian's dpdk package) answers /barrier/stats, /ethdev/stats,N,
#    /barrier/ports, /barrier/lcores, /barrier/groups and /barrier/group,N, and the values equal
#    the switch's own counters (its SIGUSR1 report, and its --stats-json file at exit);
#  - the hung group's /barrier/group,N names the child that arrived and the one missing;
#  - tshark with scripts/wireshark/barrier.lua prints group, epoch, kind and sequence for every
#    frame the switch wrote, and flags the damaged input frame's checksum.
# Needs a built barrier-switch (target/debug or target/release, or BARRIER_SWITCH), tshark and
# dpdk-telemetry.py; without one of them it says "skipped", and fails instead when
# NB_REQUIRE_BINARIES=1. Runs as any user DPDK's --no-huge vdevs run as (root here).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scripts=$(dirname "$here")
# shellcheck source=../lib/netns.sh
source "$scripts/lib/netns.sh"

name=observe
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "$name: ok   $*"; }
bad() { failed=$((failed + 1)); echo "$name: FAIL $*"; }
finish() { echo "$name: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

switch=${BARRIER_SWITCH:-$(nb_find_program barrier-switch || true)}
missing=""
[ -n "$switch" ] || missing+=" barrier-switch"
command -v tshark >/dev/null || missing+=" tshark"
command -v dpdk-telemetry.py >/dev/null || missing+=" dpdk-telemetry.py"
if [ -n "$missing" ]; then
  if [ "${NB_REQUIRE_BINARIES:-0}" = 1 ]; then
    bad "not found:$missing"; finish
  fi
  echo "$name: skipped: not found:$missing"; exit 0
fi

tmp=$(mktemp -d)
prefix="nb-observe-$$"
pid=""
cleanup() {
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  rm -rf "$tmp" "/var/run/dpdk/$prefix"
}
trap cleanup EXIT

# Input captures: a_in (port a) and b_in (port b), written with the wire format by hand (the
# dissector is checked against frames not written by the Rust code under test).
python3 - "$tmp" <<'EOF'
import struct, sys
d = sys.argv[1]
def frame(kind, group, seq, epoch=1, damage=False):
    eth = bytes.fromhex("ffffffffffff02aa00000001") + b"\x88\xb5"
    h = bytearray(struct.pack(">BBBBIIIQH", 0xBA, 2, kind, 0, group, epoch, seq, 0, 0))
    s = sum(struct.unpack(">13H", h))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    struct.pack_into(">H", h, 24, 0xFFFF - s)
    if damage:
        h[15] ^= 0x01  # one bit of the sequence number
    return eth + bytes(h) + bytes(20)
def pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, x in enumerate(frames):
            f.write(struct.pack("<IIII", i, 0, len(x), len(x)) + x)
R = 1
pcap(f"{d}/a_in.pcap", [
    frame(R, 1, 0),               # group 1 (children a, b): a arrives
    frame(R, 2, 0),               # group 2 (child a): completes -> release 2/0 on a
    frame(R, 2, 1),               # -> release 2/1 on a
    frame(R, 1, 4, damage=True),  # damaged: bad checksum, dropped
    frame(R, 3, 7, epoch=9),      # group 3 (intermediate, child a, parent b, epoch 9) -> reduce 3/7 on b
    frame(R, 4, 0),               # group 4 (children a, b): b never arrives: hung
])
pcap(f"{d}/b_in.pcap", [
    frame(R, 1, 0),               # completes group 1 -> release 1/0 on a and b
])
EOF

cat >"$tmp/observe.toml" <<EOF
[eal]
args = ["--no-huge", "-m", "256", "--no-shconf", "--file-prefix", "$prefix", "--no-pci",
        "--iova-mode=va", "-l", "0", "--log-level=*:warning"]

[switch]
mac = "02:5e:00:00:00:01"

[[ports]]
name = "a"
vdev = "net_pcap0,rx_pcap=$tmp/a_in.pcap,tx_pcap=$tmp/a_out.pcap"

[[ports]]
name = "b"
vdev = "net_pcap1,rx_pcap=$tmp/b_in.pcap,tx_pcap=$tmp/b_out.pcap"

[lcores]
scheduler = 0
shared = true
rx = [ { lcore = 0, poll = ["a", "b"] } ]

[[groups]]
number = 1
role = "root"
children = ["a", "b"]

[[groups]]
number = 2
role = "root"
children = ["a"]

[[groups]]
number = 3
role = "intermediate"
children = ["a"]
parent = "b"
epoch = 9
resend_timeout_us = 60000000

[[groups]]
number = 4
role = "root"
children = ["a", "b"]

[metrics]
listen = "127.0.0.1:0"
groups = [1, 4]

[stragglers]
groups = [1, 3, 4]
EOF

"$switch" run --config "$tmp/observe.toml" --stats-json "$tmp/stats.json" \
  >"$tmp/stdout" 2>"$tmp/stderr" &
pid=$!
for _ in $(seq 600); do
  grep -q "^barrier-switch: ready" "$tmp/stderr" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q "^barrier-switch: ready" "$tmp/stderr"; then
  bad "the switch did not start:"; cat "$tmp/stderr"; finish
fi
if grep -q "capture: off (--no-shconf" "$tmp/stderr"; then
  ok "without shared configuration the switch says capture is off (dumpcap.sh tests capture)"
else
  bad "no 'capture: off (--no-shconf' line:"; cat "$tmp/stderr"
fi

# telem CMD...: one dpdk-telemetry.py session, every reply as one JSON line in $tmp/telem.
telem() {
  printf '%s\n' "$@" | dpdk-telemetry.py -f "$prefix" >"$tmp/telem.raw" 2>&1
  python3 - "$tmp/telem.raw" >"$tmp/telem" <<'EOF'
import json, sys
text = open(sys.argv[1]).read()
dec = json.JSONDecoder()
i = 0
while (i := text.find("{", i)) >= 0:
    try:
        obj, end = dec.raw_decode(text, i)
    except ValueError:
        i += 1
        continue
    print(json.dumps(obj))
    i = end
EOF
}

# Wait until the switch received every input frame (7), as telemetry says.
for _ in $(seq 300); do
  telem /barrier/stats
  grep -q '"rx/frames": 7[,}]' "$tmp/telem" && break
  sleep 0.1
done
if grep -q '"rx/frames": 7[,}]' "$tmp/telem"; then
  ok "dpdk-telemetry.py -f $prefix answers /barrier/stats (7 frames received)"
else
  bad "/barrier/stats never showed 7 frames; dpdk-telemetry.py said:"; cat "$tmp/telem.raw"
fi

# The switch's own counters (SIGUSR1 report) and telemetry, read while it idles.
kill -USR1 "$pid"
for _ in $(seq 50); do grep -q "rx total:" "$tmp/stdout" && break; sleep 0.1; done
cp "$tmp/stdout" "$tmp/report"
telem /barrier/stats /ethdev/stats,0 /ethdev/stats,1 /barrier/ports /barrier/lcores \
  /barrier/groups /barrier/group,4 /barrier/group,3 /barrier/group,1
cp "$tmp/telem" "$tmp/telem.all"
cp "$tmp/telem.raw" "$tmp/telem.all.raw"

if python3 - "$tmp/report" "$tmp/telem.all" <<'EOF'; then
import json, sys
report = open(sys.argv[1]).read()
replies = [json.loads(l) for l in open(sys.argv[2])]
def reply(cmd):
    for r in replies:
        if cmd in r:
            return r[cmd]
    raise SystemExit(f"no reply to {cmd}: {replies}")
def line(prefix):
    for l in report.splitlines():
        if l.strip().startswith(prefix):
            return dict(kv.split("=") for kv in l.split(":", 1)[1].split())
    raise SystemExit(f"no {prefix!r} line in the report:\n{report}")
errors = []
stats = reply("/barrier/stats")
for side, prefix in (("rx", "rx total:"), ("tx", "tx total:"), ("scheduler", "scheduler:")):
    printed = line(prefix)
    for k, v in stats.items():
        if not k.startswith(side + "/"):
            continue
        want = int(printed.get(k.split("/", 1)[1], 0))  # the report prints non-zero ones only
        if v != want:
            errors.append(f"{k}: telemetry {v}, report {want}")
    for k in printed:
        if f"{side}/{k}" not in stats:
            errors.append(f"{side}/{k} printed but not in telemetry")
ports = reply("/barrier/ports")
for idx, name in ((0, "a"), (1, "b")):
    eth = [r["/ethdev/stats"] for r in replies if "/ethdev/stats" in r][idx]
    rx = int(line(f"port {name} rx:")["frames"])
    tx = int(line(f"port {name} tx:").get("frames_out", 0))
    if eth["ipackets"] != rx or eth["opackets"] != tx:
        errors.append(f"/ethdev/stats,{idx}: ipackets {eth['ipackets']} opackets {eth['opackets']}, report rx {rx} tx {tx}")
    if ports[f"{name}/port_id"] != idx or ports[f"{name}/rx_frames"] != rx or ports[f"{name}/tx_frames_out"] != tx:
        errors.append(f"/barrier/ports {name}: {ports}")
    if ports.get(f"{name}/rx_good_packets") != rx:
        errors.append(f"/barrier/ports {name}/rx_good_packets (DPDK's xstat name) != {rx}: {ports}")
lcores = reply("/barrier/lcores")
if not lcores.get("0/busy_polls", 0) > 0 or not lcores.get("0/idle_polls", 0) > 0:
    errors.append(f"/barrier/lcores: {lcores}")
groups = reply("/barrier/groups")
if (groups["configured"], groups["completions"], groups["1/completions"], groups["2/completions"]) != (4, 4, 1, 2):
    errors.append(f"/barrier/groups: {groups}")
for e in errors:
    print("  " + e)
sys.exit(1 if errors else 0)
EOF
  ok "/barrier/stats, /ethdev/stats,0|1, /barrier/ports (DPDK xstat names), /barrier/lcores, /barrier/groups match the switch's report"
else
  bad "telemetry and the switch's report differ (above); raw replies:"; cat "$tmp/telem.all.raw"
fi

if python3 - "$tmp/telem.all" <<'EOF'; then
import json, sys
replies = [json.loads(l) for l in open(sys.argv[1])]
groups = [r["/barrier/group"] for r in replies if "/barrier/group" in r]
want = [
    {"group": 4, "epoch": 1, "role": "root", "phase": "unknown", "seq": 0, "arrived": "a", "missing": "b", "completions": 0},
    {"group": 3, "epoch": 9, "role": "intermediate", "parent": "b", "phase": "awaiting_release", "seq": 7, "arrived": "a", "missing": ""},
    {"group": 1, "epoch": 1, "phase": "collecting", "seq": 1, "arrived": "", "missing": "a,b", "completions": 1},
]
errors = [f"{g} does not have {w}" for g, w in zip(groups, want) if any(g.get(k) != v for k, v in w.items())]
# Straggler reports (groups 1, 3 and 4 are watched): group 1's barrier 0 was completed by port b,
# the last to arrive (b's capture is polled after a's); group 4's barrier 0 waits for b since a's
# reduce; group 3 (intermediate) completed barrier 7 (last child a) and awaits the parent's
# release, so its latency is not measured yet.
g4, g3, g1 = groups + [{}] * (3 - len(groups))
if not (g4.get("waiting_seq") == 0 and g4.get("waiting_since_us", 0) > 0 and g4.get("barriers_measured") == 0):
    errors.append(f"group 4 straggler report: {g4}")
if not (g1.get("last_straggler") == "b" and g1.get("recent/0/last") == "b" and g1.get("last_arrivals/b") == 1
        and g1.get("barriers_measured") == 1 and g1.get("latency_max_ns", 0) >= g1.get("last_spread_ns", -1) >= 0
        and "waiting_seq" not in g1):
    errors.append(f"group 1 straggler report: {g1}")
if not (g3.get("awaiting_release_seq") == 7 and g3.get("awaiting_release_last") == "a"
        and g3.get("barriers_measured") == 0 and "recent/7/last" not in g3):
    errors.append(f"group 3 straggler report: {g3}")
if len(groups) != len(want):
    errors.append(f"{len(groups)} /barrier/group replies")
if errors:
    print("\n".join(errors))
sys.exit(1 if errors else 0)
EOF
  ok "/barrier/group,N: hung group 4 names arrived child a, missing child b and since when; group 1's straggler was b; group 3 in epoch 9 awaits its release"
else
  bad "/barrier/group replies (above)"
fi

# Prometheus: scrape the endpoint the switch logged, parse with the reference parser
# (python3-prometheus-client, Debian's; /usr/bin/python3, not a virtualenv's), compare.
url=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$tmp/stderr" | head -n1)
if [ -z "$url" ]; then
  bad "no metrics endpoint in the switch's log"; cat "$tmp/stderr"
elif ! /usr/bin/python3 -c 'import prometheus_client' 2>/dev/null; then
  if [ "${NB_REQUIRE_BINARIES:-0}" = 1 ]; then bad "python3-prometheus-client not installed (scripts/setup.sh)"
  else echo "$name: skipped: the Prometheus check (python3-prometheus-client not installed)"; fi
elif /usr/bin/python3 - "$url" "$tmp/report" "$tmp/telem.all" <<'EOF'; then
import json, sys, urllib.request
from prometheus_client.parser import text_string_to_metric_families
url, report_path, telem_path = sys.argv[1:]
with urllib.request.urlopen(url, timeout=10) as r:
    ctype = r.headers["Content-Type"]
    text = r.read().decode()
samples = {}
for fam in text_string_to_metric_families(text):
    for s in fam.samples:
        samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
def get(name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))
report = open(report_path).read()
def line(prefix):
    for l in report.splitlines():
        if l.strip().startswith(prefix):
            return {k: int(v) for k, v in (kv.split("=") for kv in l.split(":", 1)[1].split())}
    return {}
stats = [json.loads(l) for l in open(telem_path)][0]["/barrier/stats"]
errors = []
if not ctype.startswith("text/plain; version=0.0.4"):
    errors.append(f"Content-Type {ctype}")
for port in ("a", "b"):
    rx, tx = line(f"port {port} rx:"), line(f"port {port} tx:")
    for kind in ("reduce", "release"):
        if get("barrier_frames_received_total", port=port, kind=kind) != rx.get(f"{kind}_in", 0):
            errors.append(f"received {port} {kind}")
        if get("barrier_frames_sent_total", port=port, kind=kind) != tx.get(f"{kind}_out", 0):
            errors.append(f"sent {port} {kind}")
for k, v in stats.items():
    if k.startswith("rx/drop_"):
        if get("barrier_frames_dropped_total", reason=k[len("rx/drop_"):]) != v:
            errors.append(f"dropped {k}: {v}")
if get("barrier_frames_dropped_total", reason="bad_checksum") != 1:
    errors.append("bad_checksum drop not 1")
if get("barrier_rx_events_total", event="completions") != stats["rx/completions"]:
    errors.append("completions")
want = {("barrier_group_completions_total", "1"): 1, ("barrier_group_children_missing", "4"): 1,
        ("barrier_group_children_missing", "1"): 2, ("barrier_group_epoch", "1"): 1,
        ("barrier_group_seq", "4"): 0, ("barrier_group_seq", "1"): 1}
for (n, g), v in want.items():
    if get(n, group=g) != v:
        errors.append(f"{n}{{group={g}}} = {get(n, group=g)}, want {v}")
if get("barrier_group_last_arrivals_total", group="1", port="b") != 1 or get("barrier_group_last_arrivals_total", group="1", port="a") != 0:
    errors.append("barrier_group_last_arrivals_total for group 1")
if get("barrier_group_latency_seconds_count", group="1") != 1 or get("barrier_group_latency_seconds_bucket", group="1", le="+Inf") != 1:
    errors.append("barrier_group_latency_seconds for group 1")
if not get("barrier_group_waiting_seconds", group="4") > 0 or get("barrier_group_waiting_seconds", group="1") != 0:
    errors.append("barrier_group_waiting_seconds")
# Per-group series: metrics.groups (1, 4) and the watched groups ([stragglers] groups: 1, 3, 4)
# only; group 2 is neither.
if any(dict(l).get("group") == "2" for (_, l) in samples):
    errors.append("series for group 2, neither in metrics.groups nor watched")
if get("barrier_group_epoch", group="3") != 9:
    errors.append("no series for the watched group 3 (epoch 9)")
if errors:
    print("\n".join(errors))
sys.exit(1 if errors else 0)
EOF
  ok "Prometheus scrape ($url) parses with prometheus_client and matches the report and telemetry"
else
  bad "Prometheus scrape"; curl -s "$url" 2>/dev/null | head -50
fi

kill -TERM "$pid"
wait "$pid"; rc=$?
pid=""
if [ "$rc" -eq 0 ] && python3 - "$tmp/stats.json" "$tmp/telem.all" <<'EOF'; then
import json, sys
final = json.load(open(sys.argv[1]))
stats = [json.loads(l) for l in open(sys.argv[2])][0]["/barrier/stats"]
errors = [f"{k}: json {final[k.split('/')[0]][k.split('/')[1]]} telemetry {v}"
          for k, v in stats.items() if final[k.split("/")[0]][k.split("/")[1]] != v]
if final["ports"]["a"]["rx"]["frames"] != 6 or final["ports"]["b"]["rx"]["frames"] != 1:
    errors.append(f"ports: {final['ports']}")
if errors:
    print("\n".join(errors))
sys.exit(1 if errors else 0)
EOF
  ok "exit 0; --stats-json holds the same counters as telemetry"
else
  bad "exit $rc or --stats-json differs; stderr:"; cat "$tmp/stderr"
fi

# The dissector on the captures the switch wrote, and on the damaged input.
lua=(-X "lua_script:$scripts/wireshark/barrier.lua")
fields=(-T fields -E separator=, -e barrier.kind -e barrier.group -e barrier.epoch -e barrier.seq
  -e barrier.checksum.status)
got_a=$(tshark "${lua[@]}" -r "$tmp/a_out.pcap" "${fields[@]}" 2>/dev/null | sort | tr '\n' ' ')
got_b=$(tshark "${lua[@]}" -r "$tmp/b_out.pcap" "${fields[@]}" 2>/dev/null | sort | tr '\n' ' ')
# kind,group,epoch,seq,checksum-good
if [ "$got_a" = "2,1,1,0,1 2,2,1,0,1 2,2,1,1,1 " ] && [ "$got_b" = "1,3,9,7,1 2,1,1,0,1 " ]; then
  ok "tshark + barrier.lua: kind/group/epoch/seq of every frame the switch wrote (a: $got_a; b: $got_b)"
else
  bad "tshark + barrier.lua on the switch's captures: a '$got_a', b '$got_b'"
fi
summary=$(tshark "${lua[@]}" -r "$tmp/a_in.pcap" 2>/dev/null)
expert=$(tshark "${lua[@]}" -r "$tmp/a_in.pcap" -T fields -e frame.number \
  -e barrier.checksum.status -e _ws.expert.message 2>/dev/null)
if [ "$(grep -c "BAD CHECKSUM" <<<"$summary")" = 1 ] \
  && grep -qP '^4\t0\tBad header checksum$' <<<"$expert" \
  && [ "$(grep -cP '^\d+\t1\t$' <<<"$expert")" = 5 ]; then
  ok "tshark + barrier.lua flags the damaged frame (4 of a_in) with a bad-checksum warning, and only it"
else
  bad "bad checksum not flagged as expected:"; echo "$summary"; echo "$expert"
fi
# An abort frame (kind 3, docs/wire-format.md): the dissector shows the declaring switch and the
# failed port where other kinds carry a timestamp.
python3 - "$tmp/abort.pcap" <<'PY'
import struct, sys
hdr = bytes([0xBA, 2, 3, 0]) + struct.pack(">III", 7, 4, 12) + bytes([2, 0, 0, 0, 0x0A, 1, 5, 0])
words = sum(struct.unpack(">12H", hdr))
while words > 0xFFFF:
    words = (words & 0xFFFF) + (words >> 16)
frame = bytes([0xFF] * 6 + [2, 0, 0, 0, 0x0A, 1]) + b"\x88\xb5" + hdr
frame += struct.pack(">H", ~words & 0xFFFF) + bytes(20)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    f.write(struct.pack("<IIII", 0, 0, len(frame), len(frame)) + frame)
PY
got=$(tshark "${lua[@]}" -r "$tmp/abort.pcap" -T fields -E separator=, -e barrier.kind \
  -e barrier.abort.switch -e barrier.abort.port -e barrier.checksum.status 2>/dev/null)
if [ "$got" = "3,02:00:00:00:0a:01,5,1" ]; then
  ok "tshark + barrier.lua: an abort names the declaring switch and the failed port ($got)"
else
  bad "abort frame dissected as '$got'"
fi
finish
