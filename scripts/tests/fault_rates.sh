#!/usr/bin/env bash
# The link-fault program (scripts/bpf/linkfault.bpf.c) measured on a real veth link between two
# network namespaces: raw barrier frames are sent one way with the program on the sender's
# egress, and the receiver's counts must match the configured drop, duplication and corruption
# rates within five standard deviations (binomial). Needs root. Leaves no namespace, interface
# or process behind, also when it fails or is interrupted.
#
# usage: fault_rates.sh [FRAMES]      (default 5000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scripts=$(dirname "$here")
# shellcheck source=../lib/netns.sh
source "$scripts/lib/netns.sh"

frames=${1:-5000}
rawframes="$scripts/tools/rawframes.py"
passed=0 failed=0

netns_before=$(ip netns list | awk '{print $1}' | sort)
nb_init
nb_netns_add tx
nb_netns_add rx
tx=$(nb_ns tx) rx=$(nb_ns rx)
nb_veth "$tx" ftx "$rx" frx

# measure NAME DROP DUP CORRUPT [build.sh options]: attach, send, count; the receiver's JSON is
# left in $NB_STATE_DIR/NAME.json. ETHERTYPE (default 0x88B5) and WAIT (seconds the receiver
# waits when no frame comes at all) from the environment; INGRESS=1: the program on the
# receiver's ingress instead (built with --ingress, as topo.sh puts it for an XDP link).
measure() {
  local name=$1 drop=$2 dup=$3 corrupt=$4; shift 4
  local ready="$NB_STATE_DIR/$name.ready" out="$NB_STATE_DIR/$name.json" pid i
  nb_fault_detach "$tx" ftx
  nb_fault_detach "$rx" frx
  if [ "$drop$dup$corrupt" != 000 ]; then
    if [ "${INGRESS:-0}" = 1 ]; then
      nb_fault_attach "$rx" frx "$drop" "$dup" "$corrupt" "$@" --ingress
    else
      nb_fault_attach "$tx" ftx "$drop" "$dup" "$corrupt" "$@"
    fi
  fi
  nb_spawn "$rx" "$out" python3 "$rawframes" count --iface frx --idle 1 \
    --timeout "${WAIT:-120}" --ethertype "${ETHERTYPE:-0x88B5}" --ready-file "$ready"
  pid=$NB_LAST_PID
  for ((i = 0; i < 100; i++)); do [ -f "$ready" ] && break; sleep 0.1; done
  [ -f "$ready" ] || { echo "fault_rates: receiver did not start: $(cat "$out")" >&2; return 1; }
  nb_in "$tx" python3 "$rawframes" send --iface ftx --count "$frames" --ethertype "${ETHERTYPE:-0x88B5}" >/dev/null
  wait "$pid" || { echo "fault_rates: receiver failed: $(cat "$out")" >&2; return 1; }
}

# check NAME EXPR...: evaluate python conditions over the receiver's JSON (as `r`) and the frame
# count `n`; prints PASS or the failing condition with the measured numbers.
check() {
  local name=$1; shift
  if python3 - "$NB_STATE_DIR/$name.json" "$frames" "$name" "$@" <<'PY'
import json, math, sys
path, n, name, conds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
r = json.loads(open(path).read().strip().splitlines()[-1])
def near(value, p):
    """value within 5 binomial standard deviations of n*p (at least 1 frame)."""
    want = n * p
    tol = max(1.0, 5 * math.sqrt(n * p * (1 - p)))
    return abs(value - want) <= tol
env = {"r": r, "n": n, "near": near}
# Losses in the receiving socket's buffer are not the link's: the numbers would mean nothing.
conds = ['r["socket_drops"] == 0'] + conds
bad = [c for c in conds if not eval(c, env)]
summary = (f"received {r['received']} of {n} sent (unique {r['unique']}, duplicates "
           f"{r['duplicates']}, corrupted {r['corrupted']})")
if bad:
    print(f"fault_rates: FAIL {name}: {summary}; failed: {'; '.join(bad)}")
    print(f"fault_rates:   receiver: {json.dumps(r)}")
    sys.exit(1)
print(f"fault_rates: ok   {name}: {summary}")
PY
  then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

# A clean link first: the numbers below measure the program only if the link itself (veth,
# backlog, socket buffers at this pacing) loses nothing.
measure baseline 0 0 0
check baseline 'r["received"] == n' 'r["unique"] == n' 'r["corrupted"] == 0'

measure drop20 200000 0 0
check drop20 'near(r["received"], 0.8)' 'r["duplicates"] == 0' 'r["corrupted"] == 0'

measure dup10 0 100000 0
check dup10 'r["unique"] == n' 'near(r["duplicates"], 0.1)' 'r["received"] == n + r["duplicates"]' 'r["corrupted"] == 0'

# Random header byte, XOR 0xff: every corrupted frame differs in exactly one header byte by 0xff,
# and the bytes hit spread over the whole header (14..33).
measure corrupt30 0 0 300000
check corrupt30 'r["unique"] == n' 'r["duplicates"] == 0' 'near(r["corrupted"], 0.3)' \
  'sum(r["corrupted_offsets"].values()) == r["corrupted"]' 'list(r["corrupted_xor"]) == ["0xff"]' \
  'set(r["corrupted_offsets"]) <= set(map(str, range(14, 38)))' 'len(r["corrupted_offsets"]) >= 15'

# A chosen byte (the low byte of the sequence number, offset 29 in wire format 2) on every frame, XOR 0x01.
measure corrupt_seq 0 0 1000000 --corrupt-offset 29 --corrupt-xor 0x01
check corrupt_seq 'r["corrupted"] == n' 'r["corrupted_offsets"] == {"29": n}' 'r["corrupted_xor"] == {"0x01": n}'

# All three at once, as topo.sh applies them.
measure mixed 100000 100000 100000
check mixed 'near(r["unique"], 0.9)' 'near(r["duplicates"], 0.09)' 'near(r["corrupted"], 0.09 + 0.009)'

# The ingress variant on the receiving end (scripts/topo.sh's faults for frames from an XDP
# switch): the same rates, a duplicate re-enters the receive path once.
INGRESS=1 measure ingress_mixed 100000 100000 100000
check ingress_mixed 'near(r["unique"], 0.9)' 'near(r["duplicates"], 0.09)' 'near(r["corrupted"], 0.09 + 0.009)'

# Only barrier frames are touched unless the object is built with --all-frames.
ETHERTYPE=0x88B6 measure other_ethertype 1000000 0 0
check other_ethertype 'r["received"] == n'
ETHERTYPE=0x88B6 WAIT=3 measure all_frames 1000000 0 0 --all-frames
check all_frames 'r["received"] == 0'

nb_cleanup
netns_after=$(ip netns list | awk '{print $1}' | sort)
if [ "$netns_before" = "$netns_after" ] && [ -z "$(ip -o link show | grep -o "${NB_PREFIX}[a-z0-9]*" || true)" ]; then
  passed=$((passed + 1)); echo "fault_rates: ok   cleanup: no namespace or interface left"
else
  failed=$((failed + 1)); echo "fault_rates: FAIL cleanup: namespaces before [$netns_before] after [$netns_after]"
fi

echo "fault_rates: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
