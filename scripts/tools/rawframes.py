#!/usr/bin/env python3
"""Send and count raw barrier frames (EtherType 0x88B5) on a Linux interface with AF_PACKET.

A test tool for the link-fault program (scripts/bpf) and the namespace test bed: `send` writes
numbered reduce frames, `count` receives them and reports how many arrived, how many were
duplicates and which header bytes were corrupted, as one JSON line. Needs root (raw sockets).
"""
import argparse
import json
import os
import socket
import struct
import sys
import time

ETHERTYPE = 0x88B5
FRAME_LEN = 60
# The bytes the fault program may corrupt (magic through timestamp); the header checksum
# follows at 38..40 (docs/wire-format.md, version 2).
HDR_START, HDR_END = 14, 38
CHECKSUM_AT = 38
# Bytes 40..50 of the padding carry a tag and the frame index, outside the header and its
# checksum, so the receiver can rebuild the frame it should have got.
TAG = b"NBRF"
TAG_AT, INDEX_AT = 40, 46
PACKET_OUTGOING = 4
SOL_PACKET, PACKET_STATISTICS = 263, 6


def header_checksum(frame):
    """The Internet checksum (RFC 1071) of bytes 14..40 with the checksum field as zero."""
    words = struct.unpack("!13H", bytes(frame[14:38]) + b"\0\0")
    s = sum(words)
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def build_frame(index, group, src, dst, ethertype=ETHERTYPE):
    """A reduce frame as in the wire format: magic, version 2, kind 1, flags 0, group, epoch 1,
    seq, checksum."""
    f = bytearray(FRAME_LEN)
    f[0:6] = dst
    f[6:12] = src
    struct.pack_into("!H", f, 12, ethertype)
    struct.pack_into("!BBBBIII", f, 14, 0xBA, 2, 1, 0, group, 1, index & 0xFFFFFFFF)
    struct.pack_into("!H", f, CHECKSUM_AT, header_checksum(f))
    f[TAG_AT:TAG_AT + 4] = TAG
    struct.pack_into("!I", f, INDEX_AT, index)
    return bytes(f)


def mac(text):
    parts = text.split(":")
    if len(parts) != 6:
        raise argparse.ArgumentTypeError(f"not a MAC address: {text}")
    return bytes(int(p, 16) for p in parts)


def cmd_send(args):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(args.ethertype))
    s.bind((args.iface, args.ethertype))
    src = s.getsockname()[4][:6]
    sent = 0
    for i in range(args.count):
        s.send(build_frame(args.first + i, args.group, src, args.dst, args.ethertype))
        sent += 1
        # Pace in small bursts: a veth hands frames to the peer's per-CPU backlog, which drops
        # beyond netdev_max_backlog (1000); the fault test must measure the program, not that.
        if args.burst and sent % args.burst == 0:
            time.sleep(args.pause)
    s.close()
    print(json.dumps({"sent": sent, "iface": args.iface}))


def cmd_count(args):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(args.ethertype))
    try:
        s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE (root)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((args.iface, args.ethertype))
    if args.ready_file:
        with open(args.ready_file, "w") as f:
            f.write("ready\n")
    received = foreign = corrupted = 0
    seen = {}
    offsets, xors = {}, {}
    start = time.monotonic()
    last = None
    while True:
        now = time.monotonic()
        if now - start > args.timeout:
            break
        if last is not None and now - last > args.idle:
            break
        s.settimeout(0.05)
        try:
            data, addr = s.recvfrom(2048)
        except socket.timeout:
            continue
        if addr[2] == PACKET_OUTGOING:
            continue
        if len(data) < FRAME_LEN or data[TAG_AT:TAG_AT + 4] != TAG:
            foreign += 1
            continue
        last = time.monotonic()
        received += 1
        (index,) = struct.unpack_from("!I", data, INDEX_AT)
        seen[index] = seen.get(index, 0) + 1
        # Rebuild the header the sender wrote; the group is taken from the command line so a
        # corrupted group byte is seen too.
        want = build_frame(index, args.group, data[6:12], data[0:6], args.ethertype)
        diff = [o for o in range(HDR_START, HDR_END) if data[o] != want[o]]
        if diff:
            corrupted += 1
            for o in diff:
                offsets[o] = offsets.get(o, 0) + 1
                x = data[o] ^ want[o]
                xors[x] = xors.get(x, 0) + 1
    # Frames the kernel dropped because this socket's buffer was full: a non-zero count means
    # the measurement includes losses that are not the link's.
    tp_packets, tp_drops = struct.unpack("II", s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
    s.close()
    out = {
        "received": received,
        "unique": len(seen),
        "duplicates": received - len(seen),
        "corrupted": corrupted,
        "corrupted_offsets": {str(k): v for k, v in sorted(offsets.items())},
        "corrupted_xor": {f"0x{k:02x}": v for k, v in sorted(xors.items())},
        "foreign": foreign,
        "socket_drops": tp_drops,
    }
    print(json.dumps(out))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    ps = sub.add_parser("send", help="send numbered barrier frames")
    ps.add_argument("--iface", required=True)
    ps.add_argument("--count", type=int, required=True)
    ps.add_argument("--group", type=int, default=7)
    ps.add_argument("--ethertype", type=lambda t: int(t, 0), default=ETHERTYPE)
    ps.add_argument("--first", type=int, default=0, help="index of the first frame")
    ps.add_argument("--dst", type=mac, default=mac("ff:ff:ff:ff:ff:ff"))
    ps.add_argument("--burst", type=int, default=50, help="frames between pauses (0: no pause)")
    ps.add_argument("--pause", type=float, default=0.002, help="seconds to pause after a burst")
    ps.set_defaults(fn=cmd_send)
    pc = sub.add_parser("count", help="count barrier frames until idle; print JSON")
    pc.add_argument("--iface", required=True)
    pc.add_argument("--group", type=int, default=7)
    pc.add_argument("--ethertype", type=lambda t: int(t, 0), default=ETHERTYPE)
    pc.add_argument("--timeout", type=float, default=60.0, help="give up after this many seconds")
    pc.add_argument("--idle", type=float, default=1.0,
                    help="stop this many seconds after the last frame")
    pc.add_argument("--ready-file", help="written once the socket is bound")
    pc.set_defaults(fn=cmd_count)
    args = p.parse_args()
    if os.geteuid() != 0:
        print("rawframes.py: needs root for AF_PACKET sockets", file=sys.stderr)
        return 2
    args.fn(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
