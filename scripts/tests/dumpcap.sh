#!/usr/bin/env bash
# dpdk-dumpcap captures a running switch's port (issue 11): barrier-switch with shared
# configuration and hugepages (what a DPDK secondary process needs to attach) on a net_pcap port
# over a veth pair in a namespace this test creates; dpdk-dumpcap (Debian's dpdk package) attaches
# by --file-prefix while three reduces of group 1 arrive and the switch answers each with a
# release; the capture must hold the three reduces and the three releases, read back by tshark
# with scripts/wireshark/barrier.lua.
# Needs root, 64 free 2 MiB hugepages, a built barrier-switch (or BARRIER_SWITCH), dpdk-dumpcap
# and tshark. Without hugepages it says "skipped" (every other test runs with --no-huge); without
# a program it is skipped too, or fails when NB_REQUIRE_BINARIES=1.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scripts=$(dirname "$here")
# shellcheck source=../lib/netns.sh
source "$scripts/lib/netns.sh"

name=dumpcap
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "$name: ok   $*"; }
bad() { failed=$((failed + 1)); echo "$name: FAIL $*"; }
finish() { echo "$name: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

switch=${BARRIER_SWITCH:-$(nb_find_program barrier-switch || true)}
missing=""
[ -n "$switch" ] || missing+=" barrier-switch"
command -v tshark >/dev/null || missing+=" tshark"
command -v dpdk-dumpcap >/dev/null || missing+=" dpdk-dumpcap"
if [ -n "$missing" ]; then
  if [ "${NB_REQUIRE_BINARIES:-0}" = 1 ]; then bad "not found:$missing"; finish; fi
  echo "$name: skipped: not found:$missing"; exit 0
fi
free=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
size=$(awk '/^Hugepagesize:/ {print $2}' /proc/meminfo)
if [ "${free:-0}" -lt 64 ] || [ "${size:-0}" != 2048 ]; then
  echo "$name: skipped: needs 64 free 2 MiB hugepages (HugePages_Free=${free:-?}, Hugepagesize=${size:-?} kB; scripts/setup.sh reserves them where it can)"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  if [ "${NB_REQUIRE_ROOT:-0}" = 1 ]; then bad "needs root (NB_REQUIRE_ROOT=1)"; finish; fi
  echo "$name: skipped: needs root"; exit 0
fi

nb_init
prefix="nb-dumpcap-$$"
nb_netns_add sw
ns=$(nb_ns sw)
nb_veth "$ns" p0 "$ns" h0
tmp=$NB_STATE_DIR
cleanup_dpdk() { rm -rf "/var/run/dpdk/$prefix"; rm -f /dev/hugepages/"$prefix"map_*; }
trap 'nb_cleanup; cleanup_dpdk' EXIT

cat >"$tmp/sw.toml" <<EOF
[eal]
args = ["-l", "0", "-m", "128", "--file-prefix", "$prefix", "--no-pci", "--no-telemetry",
        "--log-level=*:warning"]

[[ports]]
name = "a"
vdev = "net_pcap0,iface=p0"

[lcores]
scheduler = 0
shared = true
idle = "sleep"
rx = [ { lcore = 0, poll = ["a"] } ]

[[groups]]
number = 1
role = "root"
children = ["a"]
EOF

ip netns exec "$ns" "$switch" run --config "$tmp/sw.toml" >"$tmp/stdout" 2>"$tmp/stderr" &
pid=$!
_NB_PIDS+=("$pid")
for _ in $(seq 300); do
  grep -q "^barrier-switch: ready" "$tmp/stderr" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if grep -q "capture: rte_pdump initialised" "$tmp/stderr" && grep -q "^barrier-switch: ready" "$tmp/stderr"; then
  ok "the switch with shared configuration initialised rte_pdump"
else
  bad "switch start-up:"; cat "$tmp/stderr"; finish
fi

# A secondary process probes the vdevs again: in the namespace where p0 exists.
timeout 60 ip netns exec "$ns" dpdk-dumpcap --file-prefix "$prefix" -i net_pcap0 -w "$tmp/cap.pcapng" -c 6 -q \
  >"$tmp/dumpcap.out" 2>&1 &
dpid=$!
# dumpcap has attached once the primary counts it: wait for its capture file.
# dumpcap writes the file's header, then asks the primary to enable capture: give that a moment.
for _ in $(seq 300); do [ -s "$tmp/cap.pcapng" ] && break; sleep 0.1; done
sleep 1
ip netns exec "$ns" python3 - <<'PYEOF'
import socket, struct
def frame(group, seq):
    eth = bytes.fromhex("ffffffffffff02aa00000001") + b"\x88\xb5"
    h = bytearray(struct.pack(">BBBBIIIQH", 0xBA, 2, 1, 0, group, 1, seq, 0, 0))
    s = sum(struct.unpack(">13H", h))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    struct.pack_into(">H", h, 24, 0xFFFF - s)
    return eth + bytes(h) + bytes(20)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("h0", 0))
import time
for seq in range(3):
    s.send(frame(1, seq))
    time.sleep(0.2)
PYEOF
wait "$dpid"; drc=$?
got=$(tshark -X "lua_script:$scripts/wireshark/barrier.lua" -r "$tmp/cap.pcapng" -T fields \
  -E separator=, -e barrier.kind -e barrier.group -e barrier.seq -e barrier.checksum.status 2>/dev/null \
  | sort | tr '\n' ' ')
if [ "$drc" -eq 0 ] && [ "$got" = "1,1,0,1 1,1,1,1 1,1,2,1 2,1,0,1 2,1,1,1 2,1,2,1 " ]; then
  ok "dpdk-dumpcap captured the switch's port: 3 reduces in, 3 releases out ($got)"
else
  bad "dpdk-dumpcap exit $drc, capture: '$got'"; cat "$tmp/dumpcap.out"
fi
kill -TERM "$pid"; wait "$pid"; rc=$?
if [ "$rc" -eq 0 ]; then ok "switch exit 0 after the capture"; else bad "switch exit $rc"; cat "$tmp/stderr"; fi
finish
