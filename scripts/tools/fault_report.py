#!/usr/bin/env python3
"""Figures of one supervised scripts/topo.sh run (its --out directory): barriers completed,
barriers that could not complete, early releases, and the time the tree took to recover from
each fault event. Used by scripts/fault_matrix.sh; prints one JSON object.

Inputs, all written by topo.sh --supervise:
  events.log        "<CLOCK_MONOTONIC ns> <event>" lines (kill X, ready X, link down A-B, ...)
  records/*.csv     job 1's leaf records; records/epoch<N>/*.csv the later jobs' (newjob)
  check.log         check_records.py's verdict on every job ("N early releases", ok/FAIL)

A barrier is completed when every leaf of its job recorded its release; its completion time is
the last of those releases. Every barrier crosses every switch (one group over the whole tree),
so while a switch is down or a link is cut no barrier completes. Recovery from a fault is
measured from the fault (the SIGKILL, the link going down) to the first barrier completed after
the repair (the restarted switch's ready line, the link up, the new job's start): it contains
the repair itself, which is also given on its own.
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_records  # noqa: E402


def load_job(dir_):
    """{leaf: {seq: (arrive, release)}} of one job directory."""
    leaves = {}
    for path in sorted(glob.glob(os.path.join(dir_, "*.csv"))):
        name = os.path.splitext(os.path.basename(path))[0]
        try:
            rows, _ = check_records.parse_file(path)
        except ValueError:
            rows = []
        # Released barriers only: a leaf stopped while waiting records that arrival as not
        # released (release None), which completed nothing.
        leaves[name] = {s: (a, r) for s, a, r, released in rows if released}
    return leaves


def completions(leaves):
    """Sorted completion times of the barriers every leaf recorded, and how many barriers some
    but not all leaves recorded."""
    if not leaves:
        return [], 0
    seqs = [set(v) for v in leaves.values()]
    full = set.intersection(*seqs)
    partial = len(set.union(*seqs) - full)
    return sorted(max(v[s][1] for v in leaves.values()) for s in full), partial


def first_after(times, t):
    for c in times:
        if c > t:
            return c
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="topo.sh --out directory of a --supervise run")
    args = p.parse_args()
    events = []
    with open(os.path.join(args.out, "events.log")) as f:
        for ln in f:
            t, _, what = ln.strip().partition(" ")
            events.append((int(t), what))
    start = events[0][0]
    job_dirs = [os.path.join(args.out, "records")] + sorted(
        glob.glob(os.path.join(args.out, "records", "epoch*")), key=lambda d: int(re.sub(r"\D", "", os.path.basename(d)))
    )
    all_c, jobs = [], []
    for d in job_dirs:
        c, partial = completions(load_job(d))
        jobs.append({"dir": os.path.relpath(d, args.out), "completed": len(c), "partial": partial})
        all_c.extend(c)
    all_c.sort()
    gaps = [b - a for a, b in zip(all_c, all_c[1:])]
    check = open(os.path.join(args.out, "check.log")).read() if os.path.exists(os.path.join(args.out, "check.log")) else ""
    early = sum(int(x) for x in re.findall(r"(\d+) early releases", check))
    check_ok = "check_records: FAIL" not in check and check.count("check_records: ok") == len(job_dirs)

    # Faults and their repairs, in order.
    recover = []
    for i, (t, what) in enumerate(events):
        m = re.fullmatch(r"kill (\S+)", what)
        fault = None
        if m and m.group(1).startswith("s"):
            node = m.group(1)
            rep = next(((u, w) for u, w in events[i + 1 :] if w == f"ready {node}"), None)
            fault = (f"restart {node}", rep[0] if rep else None)
        elif m:
            rep = next(((u, w) for u, w in events[i + 1 :] if w.startswith("newjob: leaves started")), None)
            fault = (f"leaf {m.group(1)} killed, new job", rep[0] if rep else None)
        m = re.fullmatch(r"link down (\S+)", what)
        if m:
            rep = next(((u, w) for u, w in events[i + 1 :] if w == f"link up {m.group(1)}"), None)
            fault = (f"link {m.group(1)} down", rep[0] if rep else None)
        if fault is None:
            continue
        name, repaired = fault
        resumed = first_after(all_c, repaired) if repaired is not None else None
        recover.append(
            {
                "fault": name,
                "at_s": round((t - start) / 1e9, 3),
                "repair_s": None if repaired is None else round((repaired - t) / 1e9, 3),
                "recover_s": None if resumed is None else round((resumed - t) / 1e9, 3),
                "after_repair_s": None if resumed is None else round((resumed - repaired) / 1e9, 3),
            }
        )
    emu = {"departed": 0, "reordered": 0, "held_back": 0, "dropped_full": 0, "sum_delay_ns": 0, "sum_late_ns": 0}
    emu_files = sorted(glob.glob(os.path.join(args.out, "linkemu-*.json")))
    for path in emu_files:
        for direction in json.load(open(path)).values():
            for k in emu:
                emu[k] += direction.get(k, 0)
    stopped = sum(1 for _, w in events if w.startswith("stopped "))
    exits = [w for _, w in events if w.startswith("exit ")]
    out = {
        "jobs": jobs,
        "completed": sum(j["completed"] for j in jobs),
        "partial": sum(j["partial"] for j in jobs),
        "early_releases": early,
        "check_ok": check_ok,
        "gap_p50_ms": round(statistics.median(gaps) / 1e6, 3) if gaps else None,
        "gap_max_ms": round(max(gaps) / 1e6, 1) if gaps else None,
        "recover": recover,
        "leaves_stopped": stopped,
        "exits": exits,
        "linkemu": emu if emu_files else None,
    }
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
