#!/usr/bin/env python3
"""Check the stamp files of ffi/mpi/test/nb_mpi_test.c (one per rank, "barrier enter_ns exit_ns"
lines, CLOCK_MONOTONIC of one machine) and, optionally, the ranks' netbarrier summaries.

usage: check_mpi_stamps.py --np N --barriers B PREFIX
           [--log FILE --expect in-network|fallback|some-fallback|software [--fallback-warnings]]

Stamps: every rank has every barrier 0..B-1 exactly once, enter <= exit on each line, and for
every barrier k: max over ranks of enter_k <= min over ranks of exit_k (no rank left a barrier
before the last one entered it).

--log FILE: the run's stderr, with NETBARRIER_VERBOSE=1. Each of the N ranks must have printed
one "summary:" line (netbarrier's own report at MPI_Finalize):
  in-network  every barrier in the network: "barriers B in-network B software 0 fallback
              none", leaf releases >= B;
  fallback    every rank fell back ("fallback at barrier K"), some barriers in software, and
              (with --fallback-warnings) exactly one "warning:" line per rank;
  some-fallback  at least one rank fell back, each printed at most one warning (a rank
              released from the program's last barrier while another timed out at it meets
              that rank's agreement in MPI_Finalize without falling back itself);
  software    no rank served: no summary line at all, no warning;
  not-served  no rank served, and each rank printed exactly one warning (a leaf that did not
              open, here or on another rank).
Exits 0 when every check passes, 1 with the failures listed otherwise, 2 on bad usage.
"""
import argparse
import re
import sys


def fail(msgs):
    for m in msgs[:20]:
        print("check_mpi_stamps: FAIL: " + m)
    if len(msgs) > 20:
        print("check_mpi_stamps: ... and %d more" % (len(msgs) - 20))
    sys.exit(1)


def read_rank(path, barriers, errs):
    stamps = {}
    try:
        with open(path) as f:
            for no, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                parts = line.split()
                if len(parts) != 3:
                    errs.append("%s:%d: not 'barrier enter exit': %r" % (path, no, line))
                    continue
                try:
                    k, e, x = (int(p) for p in parts)
                except ValueError:
                    errs.append("%s:%d: not numbers: %r" % (path, no, line))
                    continue
                if k in stamps:
                    errs.append("%s:%d: barrier %d twice" % (path, no, k))
                if x < e:
                    errs.append("%s:%d: barrier %d exit %d before enter %d" % (path, no, k, x, e))
                stamps[k] = (e, x)
    except OSError as ex:
        errs.append("%s: %s" % (path, ex))
        return stamps
    missing = [k for k in range(barriers) if k not in stamps]
    extra = [k for k in stamps if k < 0 or k >= barriers]
    if missing:
        errs.append("%s: %d barriers missing (first %d)" % (path, len(missing), missing[0]))
    if extra:
        errs.append("%s: barriers outside 0..%d: %s" % (path, barriers - 1, extra[:5]))
    return stamps


SUMMARY = re.compile(
    r"netbarrier: \S+: rank (\d+): summary: group \d+ iface \S+ barriers (\d+) in-network (\d+) "
    r"software (\d+) fallback (none|at barrier \d+); leaf reduces (\d+) resends (\d+) "
    r"releases (\d+) stale (\d+)")
WARNING = re.compile(r"netbarrier: \S+: rank (\d+): warning: ")


def check_log(path, np, barriers, expect, fallback_warnings, errs, fallback_from=0):
    try:
        text = open(path, errors="replace").read()
    except OSError as ex:
        errs.append("%s: %s" % (path, ex))
        return ""
    summ = {}
    for m in SUMMARY.finditer(text):
        r = int(m.group(1))
        if r in summ:
            errs.append("log: rank %d printed two summaries" % r)
        summ[r] = m
    warns = {}
    for m in WARNING.finditer(text):
        warns[int(m.group(1))] = warns.get(int(m.group(1)), 0) + 1
    total = barriers
    net = sw = 0
    if expect in ("software", "not-served"):
        if summ:
            errs.append("log: %d ranks say they were served; expected none" % len(summ))
        if expect == "software":
            if warns:
                errs.append("log: warnings from ranks %s; expected none" % sorted(warns))
            return "no rank served, no warning"
        for r in range(np):
            if warns.get(r, 0) != 1:
                errs.append("log: rank %d printed %d warnings, expected exactly 1"
                            % (r, warns.get(r, 0)))
        return "no rank served, one warning each"
    for r in range(np):
        m = summ.get(r)
        if m is None:
            errs.append("log: no netbarrier summary from rank %d (was it served? "
                        "NETBARRIER_VERBOSE=1?)" % r)
            continue
        b, n_net, n_sw, fb, releases = (int(m.group(2)), int(m.group(3)), int(m.group(4)),
                                        m.group(5), int(m.group(8)))
        net += n_net
        sw += n_sw
        if b != total:
            errs.append("log: rank %d counted %d barriers, expected %d" % (r, b, total))
        if expect == "in-network":
            if n_net != total or n_sw != 0 or fb != "none":
                errs.append("log: rank %d: in-network %d software %d fallback %s; expected all "
                            "%d in the network" % (r, n_net, n_sw, fb, total))
            if releases < total:
                errs.append("log: rank %d: leaf saw %d releases for %d barriers"
                            % (r, releases, total))
            if warns.get(r):
                errs.append("log: rank %d printed %d warnings" % (r, warns[r]))
        elif expect == "fallback":
            if fb == "none":
                errs.append("log: rank %d did not fall back" % r)
            elif int(fb.split()[-1]) < fallback_from:
                errs.append("log: rank %d fell back at %s, before the fault came (after barrier "
                            "%d): a timeout with another cause" % (r, fb, fallback_from))
            if n_sw == 0:
                errs.append("log: rank %d did no software barrier after falling back" % r)
            if fallback_warnings and warns.get(r, 0) != 1:
                errs.append("log: rank %d printed %d warnings, expected exactly 1"
                            % (r, warns.get(r, 0)))
        elif expect == "some-fallback" and warns.get(r, 0) > 1:
            errs.append("log: rank %d printed %d warnings, expected at most 1" % (r, warns[r]))
    fell = [r for r, m in summ.items() if m.group(5) != "none"]
    if expect == "some-fallback" and not fell:
        errs.append("log: no rank fell back")
    return "%d ranks: %d barriers in the network, %d in software, %d fell back" % (
        np, net, sw, len(fell))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--barriers", type=int, required=True)
    ap.add_argument("--log")
    ap.add_argument("--expect", choices=["in-network", "fallback", "some-fallback", "software", "not-served"])
    ap.add_argument("--fallback-warnings", action="store_true")
    ap.add_argument("--fallback-from", type=int, default=0,
                    help="with --expect fallback: no rank fell back before this barrier (the "
                         "fault came then; an earlier fallback had another cause)")
    ap.add_argument("prefix")
    a = ap.parse_args()
    if a.np < 1 or a.barriers < 1 or (a.log is None) != (a.expect is None):
        ap.error("--np and --barriers must be positive; --log and --expect go together")
    errs = []
    ranks = [read_rank("%s.%d" % (a.prefix, r), a.barriers, errs) for r in range(a.np)]
    worst = None
    early = 0
    for k in range(a.barriers):
        if not all(k in s for s in ranks):
            continue
        last_in = max(s[k][0] for s in ranks)
        first_out = min(s[k][1] for s in ranks)
        if first_out < last_in:
            early += 1
            if len(errs) < 20:
                r_out = min(range(a.np), key=lambda r: ranks[r][k][1])
                r_in = max(range(a.np), key=lambda r: ranks[r][k][0])
                errs.append("barrier %d: rank %d left at %d, %.3f us before rank %d entered"
                            % (k, r_out, first_out, (last_in - first_out) / 1e3, r_in))
        margin = first_out - last_in
        worst = margin if worst is None else min(worst, margin)
    if early:
        errs.append("%d of %d barriers released a rank before the last one entered"
                    % (early, a.barriers))
    logmsg = ""
    if a.log:
        logmsg = "; " + check_log(a.log, a.np, a.barriers, a.expect, a.fallback_warnings, errs,
                                  a.fallback_from)
    if errs:
        fail(errs)
    print("check_mpi_stamps: OK: %d ranks x %d barriers, none left early (smallest margin "
          "%.1f us)%s" % (a.np, a.barriers, (worst or 0) / 1e3, logmsg))


if __name__ == "__main__":
    main()
