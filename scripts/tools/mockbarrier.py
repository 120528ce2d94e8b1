#!/usr/bin/env python3
"""Stand-ins for barrier-switch and barrier-leaf, for testing the namespace test bed itself.

`mockbarrier.py switch run --config FILE` (or `check --config FILE`) reads the switch's TOML configuration (the
`[[ports]]` vdev `net_af_packetN,iface=X` entries and the `[[groups]]`), opens an AF_PACKET
socket per port and runs a simplified claim-6 control loop: collect reduces from every child,
then release (root) or reduce up with re-sends (intermediate); a stale reduce gets the previous
release again. `mockbarrier.py leaf --iface IF --group G --count N --records FILE` runs N
barriers with re-sends and writes `seq,first_reduce_ns,release_ns` rows. These are NOT the
project's switch and leaf (no restart rules, no scheduler, one thread): they only let
scripts/topo.sh and its faults be exercised where the real programs are not built.
"""
import argparse
import random
import select
import signal
import socket
import struct
import sys
import time
import tomllib

ETHERTYPE = 0x88B5
REDUCE, RELEASE = 1, 2
RETRANSMIT = 1


# Wire format version 2 (docs/wire-format.md): magic at 14, version, kind, flags, group at
# 18..22, epoch at 22..26, seq at 26..30, timestamp 30..38, header checksum at 38..40.
VERSION = 2
HEADER_END = 40
CHECKSUM_AT = 38


def ones_complement_sum(b):
    """RFC 1071 sum of big-endian 16-bit words, carries folded back in."""
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def frame(src, kind, group, seq, flags=0, epoch=1):
    f = bytearray(60)
    f[0:6] = b"\xff" * 6
    f[6:12] = src
    struct.pack_into("!HBBBBIII", f, 12, ETHERTYPE, 0xBA, VERSION, kind, flags, group,
                     epoch & 0xFFFFFFFF, seq & 0xFFFFFFFF)
    struct.pack_into("!H", f, CHECKSUM_AT, ~ones_complement_sum(bytes(f[14:HEADER_END])) & 0xFFFF)
    return bytes(f)


def parse(data):
    """(kind, group, epoch, seq) of a barrier frame, None for anything else (corrupted
    included). Same checks as FrameRepr::parse, header checksum last."""
    if len(data) < HEADER_END:
        return None
    etype, magic, ver, kind, flags, group, epoch, seq = struct.unpack_from("!HBBBBIII", data, 12)
    if etype != ETHERTYPE or magic != 0xBA or ver != VERSION or kind not in (REDUCE, RELEASE) or flags & ~3:
        return None
    if group >= 1 << 20 or ones_complement_sum(bytes(data[14:HEADER_END])) != 0xFFFF:
        return None
    return kind, group, epoch, seq


def open_port(iface):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE))
    s.bind((iface, ETHERTYPE))
    s.setblocking(False)
    return s, s.getsockname()[4][:6]


def recv_all(s):
    out = []
    while True:
        try:
            data, addr = s.recvfrom(2048)
        except BlockingIOError:
            return out
        if addr[2] != 4:  # PACKET_OUTGOING: our own frames
            out.append(data)


def run_switch(args):
    with open(args.config, "rb") as f:
        cfg = tomllib.load(f)
    if args.action == "check":
        print(f"{args.config}: ok: {len(cfg['ports'])} ports, {len(cfg['groups'])} groups (mock)")
        return 0
    ports, names = [], {}
    for i, p in enumerate(cfg["ports"]):
        opts = dict(kv.split("=", 1) for kv in p["vdev"].split(",")[1:])
        ports.append(open_port(opts["iface"]))
        names[p["name"]] = i
    groups = {}
    for g in cfg["groups"]:
        groups[g["number"]] = {
            "children": {names[c] for c in g["children"]},
            "parent": names[g["parent"]] if g["role"] == "intermediate" else None,
            "timeout": g.get("resend_timeout_us", 1000) / 1e6,
            "epoch": g.get("epoch", 1),
            "seq": None, "arrived": set(), "awaiting": None, "deadline": 0.0,
        }
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    stats = {"reduce": 0, "release": 0, "bad": 0, "sent": 0}

    def send(port, kind, group, seq, flags=0):
        s, src = ports[port]
        try:
            s.send(frame(src, kind, group, seq, flags, groups[group]["epoch"]))
            stats["sent"] += 1
        except OSError:
            pass

    def release_down(g, num, seq, flags=0):
        for c in g["children"]:
            send(c, RELEASE, num, seq, flags)
        g["seq"], g["arrived"], g["awaiting"] = seq + 1, set(), None

    print(f"mockbarrier switch: {len(ports)} ports, groups {sorted(groups)}", flush=True)
    # The line scripts/topo.sh waits for (barrier-switch prints it once its ports are bound,
    # started and drained; these sockets were bound before they could receive).
    print("barrier-switch: ready (mock)", file=sys.stderr, flush=True)
    while not stop:
        now = time.monotonic()
        for num, g in groups.items():
            if g["awaiting"] is not None and now >= g["deadline"]:
                send(g["parent"], REDUCE, num, g["awaiting"], RETRANSMIT)
                g["deadline"] = now + g["timeout"]
        try:
            ready, _, _ = select.select([s for s, _ in ports], [], [], 0.0005)
        except InterruptedError:
            continue
        for s in ready:
            port = next(i for i, (ps, _) in enumerate(ports) if ps is s)
            for data in recv_all(s):
                ev = parse(data)
                if ev is None or ev[1] not in groups or ev[2] != groups[ev[1]]["epoch"]:
                    stats["bad"] += 1
                    continue
                kind, num, _, seq = ev
                g = groups[num]
                if kind == REDUCE and port in g["children"]:
                    stats["reduce"] += 1
                    if g["seq"] is None:
                        g["seq"] = seq
                    if seq == g["seq"] and g["awaiting"] is None:
                        g["arrived"].add(port)
                        k = args.early_release_every
                        if k and seq % k == k // 2 and g["parent"] is None and len(g["arrived"]) == 1:
                            # The broken root: on the first reduce of every k-th barrier, every
                            # child hears the release before the others arrive. (Not on every
                            # barrier: leaves released early run one barrier ahead, and the
                            # protocol recovers from one, not from many in a row.)
                            for c in g["children"]:
                                send(c, RELEASE, num, seq)
                        if g["arrived"] == g["children"]:
                            if g["parent"] is None:
                                release_down(g, num, seq)
                            else:
                                g["awaiting"] = seq
                                g["deadline"] = time.monotonic() + g["timeout"]
                                send(g["parent"], REDUCE, num, seq)
                    elif seq == g["seq"] - 1:
                        send(port, RELEASE, num, seq, RETRANSMIT)
                    elif seq > g["seq"]:
                        # A child at seq proves seq-1 completed (the contract's evidence rule).
                        release_down(g, num, seq - 1, RETRANSMIT)
                        g["arrived"] = {port}
                elif kind == RELEASE and port == g["parent"]:
                    stats["release"] += 1
                    if g["seq"] is None or seq >= g["seq"]:
                        release_down(g, num, seq)
                else:
                    stats["bad"] += 1
    print(f"mockbarrier switch: stopped; {stats}", flush=True)
    return 0


def run_leaf(args):
    s, src = open_port(args.iface)
    rows = []
    # Rows are written as barriers complete, so a run that stalls still shows what happened.
    out = open(args.records, "w", buffering=1)
    out.write("seq,first_reduce_ns,release_ns\n")
    timeout = args.resend_us / 1e6
    for seq in range(args.first, args.first + args.count):
        if args.work_us:
            time.sleep(random.uniform(0, args.work_us) / 1e6)
        t0 = time.monotonic_ns()
        s.send(frame(src, REDUCE, args.group, seq, epoch=args.epoch))
        deadline = time.monotonic() + timeout
        give_up = time.monotonic() + args.timeout
        done = None
        while done is None:
            wait = max(0.0, deadline - time.monotonic())
            if select.select([s], [], [], wait)[0]:
                for data in recv_all(s):
                    ev = parse(data)
                    if ev and ev[0] == RELEASE and ev[1:] == (args.group, args.epoch, seq):
                        done = time.monotonic_ns()
                        break
            elif time.monotonic() >= give_up:
                print(f"mockbarrier leaf: group {args.group} sequence {seq}: no release in {args.timeout}s", file=sys.stderr)
                return 1
            else:
                s.send(frame(src, REDUCE, args.group, seq, RETRANSMIT, args.epoch))
                deadline = time.monotonic() + timeout
        rows.append((seq, t0, done))
        out.write("%d,%d,%d\n" % rows[-1])
    out.close()
    print(f"mockbarrier leaf: {len(rows)} barriers on group {args.group}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    ps = sub.add_parser("switch")
    ps.add_argument("action", choices=["run", "check"])
    ps.add_argument("--config", required=True)
    ps.add_argument("--early-release-every", type=int, default=0, metavar="K",
                    help="a broken root: release every K-th barrier on its first reduce (to test the checks)")
    ps.set_defaults(fn=run_switch)
    pl = sub.add_parser("leaf")
    pl.add_argument("--iface", required=True)
    pl.add_argument("--group", type=int, required=True)
    pl.add_argument("--count", type=int, required=True)
    pl.add_argument("--records", required=True)
    pl.add_argument("--first", type=int, default=0)
    pl.add_argument("--epoch", type=int, default=1)
    pl.add_argument("--resend-us", type=int, default=5000)
    pl.add_argument("--timeout", type=float, default=10.0)
    pl.add_argument("--work-us", type=int, default=0,
                    help="compute for a random 0..N microseconds before each barrier")
    pl.set_defaults(fn=run_leaf)
    args = p.parse_args()
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
