#!/usr/bin/env python3
"""Samples running barrier processes for scripts/soak.sh, and judges the samples.

  soak_sample.py sample --out FILE --every S --until-gone PID [--proc NAME=PID]... [--telemetry NAME=PREFIX]...
                        [--progress NAME=LOG]
      every S seconds until process PID is gone, one JSON line to FILE: the time, each process's
      resident memory (VmRSS, kB), each telemetry-serving switch's mbuf allocation failures
      (rx_nombuf summed over its ports), barrier completions and group table state
      (/barrier/groups, /barrier/group,N for its first configured groups), and the last
      progress line's barrier count of each --progress log.
  soak_sample.py judge FILE...
      per series, leaving out the first minute (start-up): mean of the first and of the last
      quarter of the samples, their ratio, and whether the series is flat (memory: the last
      quarter's mean within 2% of the first's or within 1 MB, or growing by at most 64 kB a
      minute within the last quarter; mbuf allocation failures: no more in the last quarter
      than in the first; a counter of barriers: its rate in the last quarter at least 75% of
      the first's, since on a shared machine it also rises and falls with the others' load).
      Prints a Markdown table; exit 1 if a series is not flat.

DPDK telemetry: a SOCK_SEQPACKET socket /var/run/dpdk/<file prefix>/dpdk_telemetry.v2; the
server sends a JSON greeting, then answers each command with one JSON message.
"""
import argparse
import json
import os
import re
import socket
import sys
import time


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for ln in f:
                if ln.startswith("VmRSS:"):
                    return int(ln.split()[1])
    except OSError:
        return None
    return None


class Telemetry:
    def __init__(self, prefix):
        self.path = f"/var/run/dpdk/{prefix}/dpdk_telemetry.v2"
        self.sock = None

    def cmd(self, c):
        try:
            if self.sock is None:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.settimeout(2)
                s.connect(self.path)
                s.recv(16384)
                self.sock = s
            self.sock.send(c.encode())
            return json.loads(self.sock.recv(1 << 20).decode())
        except (OSError, ValueError):
            self.sock = None
            return None


def sample_switch(t):
    out = {}
    # DPDK 22.11's /mempool/info has no free count: mbufs are watched through the ports'
    # allocation failures (rx_nombuf, which a leak drives up once the pool runs dry) and, at
    # exit, the switch's own "all N mbufs back" line (soak.sh reads it from the log).
    ports = (t.cmd("/ethdev/list") or {}).get("/ethdev/list")
    if ports is None:
        out["rx_nombuf"] = None
    else:
        out["rx_nombuf"] = sum(
            ((t.cmd(f"/ethdev/stats,{p}") or {}).get("/ethdev/stats") or {}).get("rx_nombuf", 0) for p in ports
        )
    g = (t.cmd("/barrier/groups") or {}).get("/barrier/groups") or {}
    out["completions"] = g.get("completions")
    out["resends"] = g.get("resends")
    out["groups_configured"] = g.get("configured")
    one = (t.cmd("/barrier/group,1") or {}).get("/barrier/group") or {}
    out["group1"] = {k: one.get(k) for k in ("epoch", "phase", "seq", "arrived", "missing")} if one else None
    return out


def last_progress(log):
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.path.getsize(log) - 4096))
            tail = f.read().decode(errors="replace")
    except OSError:
        return None
    hits = re.findall(r"(\d+)(?: of \d+)? barriers", tail)
    return int(hits[-1]) if hits else None


def pairs(items):
    out = {}
    for it in items:
        k, _, v = it.partition("=")
        out[k] = v
    return out


def sample(args):
    procs = pairs(args.proc)
    tele = {k: Telemetry(v) for k, v in pairs(args.telemetry).items()}
    prog = pairs(args.progress)
    start = time.monotonic()
    with open(args.out, "a") as f:
        while os.path.exists(f"/proc/{args.until_gone}"):
            s = {"t": round(time.monotonic() - start, 1)}
            for k, pid in procs.items():
                s[f"rss_kb/{k}"] = rss_kb(pid)
            for k, t in tele.items():
                for kk, v in sample_switch(t).items():
                    s[f"{kk}/{k}"] = v
            for k, log in prog.items():
                s[f"barriers/{k}"] = last_progress(log)
            f.write(json.dumps(s) + "\n")
            f.flush()
            end = time.monotonic() + args.every
            while time.monotonic() < end and os.path.exists(f"/proc/{args.until_gone}"):
                time.sleep(0.2)


def judge(args):
    bad = 0
    print("| run | series | first quarter: mean (growth) | last quarter: mean (growth) | last / first | flat |")
    print("| --- | --- | --- | --- | --- | --- |")
    for path in args.files:
        rows = [json.loads(ln) for ln in open(path) if ln.strip()]
        run = os.path.splitext(os.path.basename(path))[0]
        if len(rows) < 8:
            print(f"| {run} | (only {len(rows)} samples: too short to judge) | | | | |")
            bad += 1
            continue
        # The first minute is start-up (pools filled, pages touched, loops warming): left out.
        rows = [r for r in rows if r["t"] >= 60] or rows
        q = len(rows) // 4
        first, last = rows[:q], rows[-q:]
        keys = sorted({k for r in rows for k, v in r.items() if k != "t" and isinstance(v, (int, float))})
        for k in sorted(keys):
            def vals(rs, k=k):
                return [r[k] for r in rs if isinstance(r.get(k), (int, float))]

            a, b = vals(first), vals(last)
            if not a or not b:
                continue
            if k.startswith(("barriers/", "completions/", "resends/")):
                # A counter: compare its rate over the first and the last quarter.
                ta = [r["t"] for r in first if isinstance(r.get(k), (int, float))]
                tb = [r["t"] for r in last if isinstance(r.get(k), (int, float))]
                ra = (a[-1] - a[0]) / max(ta[-1] - ta[0], 1e-9)
                rb = (b[-1] - b[0]) / max(tb[-1] - tb[0], 1e-9)
                ratio = rb / ra if ra else float("inf") if rb else 1.0
                # Not slowing down (a shared machine speeds up as others finish).
                flat = k.startswith("resends/") or ratio >= 0.75
                name, fa, fb = f"{k} (per s)", f"{ra:.0f}", f"{rb:.0f}"
            else:
                ma, mb = sum(a) / len(a), sum(b) / len(b)
                ratio = mb / ma if ma else (1.0 if mb == 0 else float("inf"))
                if k.startswith("rx_nombuf/"):
                    flat = max(b) == max(a)
                elif k.startswith("rss_kb/"):
                    # Flat: the last quarter's mean within 2% (or 1 MB) of the first's, or no
                    # longer growing (at most 64 kB a minute within the last quarter).
                    pl = [(r["t"], r[k]) for r in last if isinstance(r.get(k), (int, float))]
                    growth = (pl[-1][1] - pl[0][1]) / max(pl[-1][0] - pl[0][0], 1e-9) * 60
                    flat = mb <= ma * 1.02 or mb - ma <= 1024 or growth <= 64
                else:
                    flat = mb <= ma * 1.10 or mb - ma <= 1024
                name, fa, fb = k, f"{ma:.0f}", f"{mb:.0f}"
                if k.startswith("rss_kb/"):
                    # Growth within each quarter, kB per minute: a leak keeps growing, memory
                    # touched once for good (a pool's pages) slows down.
                    def slope(rs, k=k):
                        p = [(r["t"], r[k]) for r in rs if isinstance(r.get(k), (int, float))]
                        return (p[-1][1] - p[0][1]) / max(p[-1][0] - p[0][0], 1e-9) * 60
                    fa += f" (+{slope(first):.0f} kB/min)"
                    fb += f" (+{slope(last):.0f} kB/min)"
            bad += 0 if flat else 1
            print(f"| {run} | {name} | {fa} | {fb} | {ratio:.3f} | {'yes' if flat else '**no**'} |")
        g = [r for r in rows if any(isinstance(v, dict) for v in r.values())]
        if g:
            states = {json.dumps(v, sort_keys=True) for r in g[-q:] for kk, v in r.items() if isinstance(v, dict)}
            print(f"| {run} | group 1 table state, last quarter | | {len(states)} distinct samples | | (moves on) |")
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--out", required=True)
    s.add_argument("--every", type=float, default=10.0)
    s.add_argument("--until-gone", required=True)
    s.add_argument("--proc", action="append", default=[])
    s.add_argument("--telemetry", action="append", default=[])
    s.add_argument("--progress", action="append", default=[])
    j = sub.add_parser("judge")
    j.add_argument("files", nargs="+")
    args = p.parse_args()
    if args.cmd == "sample":
        sample(args)
        return 0
    return judge(args)


if __name__ == "__main__":
    sys.exit(main())
