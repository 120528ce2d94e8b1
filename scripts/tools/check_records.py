#!/usr/bin/env python3
"""Check barrier-leaf records from a tree run: every barrier completed at every leaf, and no leaf
was released before the last leaf arrived.

One records file per leaf (`barrier-leaf --records FILE`). Each row is one barrier: its sequence
number, the leaf's time of first reduce (when it reached the barrier) and its time of release, in
nanoseconds on CLOCK_MONOTONIC, which all network namespaces of one machine share. So for each
sequence number: min over leaves of release >= max over leaves of first reduce, or a release
came before some leaf had arrived: a safety violation.

Accepted formats (the leaf CLI's exact one was not fixed when this was written): CSV or
whitespace-separated with a header row, or JSON lines; the sequence column is the first whose
name contains "seq", the arrival column the first containing "reduce" or "arriv", the release
column the first containing "releas". Lines starting with '#' are comments.

A leaf killed mid-run (SIGKILL, a crash) leaves a file that ends early, and one whose writer was
cut off in the middle of a line ends in a partial line: no newline at the end. That last line is
dropped whatever it holds (a cut number still parses, as a smaller one) and the file counts as
ended early; so does a file named with --ended-early LEAF. What such a file still proves: a
barrier-leaf writes a record only once its barrier is released, so each whole record is a
completed barrier and takes part in every check like any other (its release is after every
leaf's arrival; no sequence is missing or doubled before it). What it cannot prove: anything
after its last whole record. The barriers the other leaves completed later are listed as
unchecked at that leaf, not as missing, and --expect does not apply to it. A bad line anywhere
but the end, a gap, a duplicate, an early release are still failures.

A record marked not released (barrier-leaf writes one for the barrier it waited at when it was
stopped by SIGINT/SIGTERM or its --duration ran out there: a `released` column 0 with
`release_ns` empty in CSV, `"released": false` with `"release_ns": null` in JSON lines) is an
arrival that never left. It constrains nothing on exits, but it is an arrival like any other: no
leaf may have been released from that barrier before it (an early release otherwise), and since
the leaf never arrived at a later barrier, no leaf may have been released from any later one.
It must be the last record of its file; the file counts as ended early at that barrier (the
barrier itself counts as recorded there). Files without a `released` column or key are all
released rows, as before.
"""
import argparse
import json
import os
import re
import sys


def pick(names, *needles):
    for i, n in enumerate(names):
        low = n.lower()
        if any(k in low for k in needles):
            return i
    return None


def flag(value, path, ln):
    """A `released` field: 1/0, true/false."""
    v = str(value).strip().lower()
    if v in ("1", "true"):
        return True
    if v in ("0", "false"):
        return False
    raise ValueError(f"{path}: released is {value!r}, not 0/1 or true/false: {ln}")


def parse_file(path):
    """Rows (seq, first_reduce_ns, release_ns, released) of one records file (release_ns None
    when not released), and the partial last line that was dropped (None when the file ends in a
    newline)."""
    rows = []
    header = None
    with open(path) as f:
        text = f.read()
    truncated = None
    if text and not text.endswith("\n"):
        text, _, truncated = text.rpartition("\n")
    lines = [ln.strip() for ln in text.split("\n") if ln.strip() and not ln.lstrip().startswith("#")]
    for ln in lines:
        if ln.startswith("{"):
            try:
                obj = json.loads(ln)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: bad JSON record line ({e}): {ln}") from None
            keys = [k for k in obj if k != "released"]
            s, a, r = pick(keys, "seq"), pick(keys, "reduce", "arriv"), pick(keys, "releas")
            if None in (s, a, r):
                raise ValueError(f"{path}: JSON record without seq/reduce/release keys: {ln}")
            released = flag(obj["released"], path, ln) if "released" in obj else True
            rel = obj[keys[r]]
            try:
                if released:
                    rows.append((int(obj[keys[s]]), int(obj[keys[a]]), int(rel), True))
                elif rel is None or rel == 0:
                    rows.append((int(obj[keys[s]]), int(obj[keys[a]]), None, False))
                else:
                    raise ValueError(f"{path}: not released but with a release time: {ln}")
            except TypeError:
                raise ValueError(f"{path}: bad record line: {ln}") from None
            continue
        if header is None or "," not in ln:
            fields = [x for x in re.split(r"[,\s]+", ln) if x]
        else:
            fields = [x.strip() for x in ln.split(",")]  # an empty release_ns keeps its place
        if header is None:
            if all(re.fullmatch(r"-?\d+", x) for x in fields):
                raise ValueError(f"{path}: no header row (want e.g. seq,first_reduce_ns,release_ns)")
            header = fields
            released_col = header.index("released") if "released" in header else None
            named = [h if i != released_col else "" for i, h in enumerate(header)]
            cols = pick(named, "seq"), pick(named, "reduce", "arriv"), pick(named, "releas")
            if None in cols:
                raise ValueError(f"{path}: header {header} lacks a seq, reduce/arrival or release column")
            continue
        try:
            released = True if released_col is None else flag(fields[released_col], path, ln)
            if released:
                rows.append(tuple(int(fields[c]) for c in cols) + (True,))
            elif fields[cols[2]] in ("", "0"):
                rows.append((int(fields[cols[0]]), int(fields[cols[1]]), None, False))
            else:
                raise ValueError(f"{path}: not released but with a release time: {ln}")
        except (ValueError, IndexError) as e:
            if str(e).startswith(path):
                raise
            raise ValueError(f"{path}: bad record line: {ln}") from None
    return rows, truncated


def percentile(sorted_values, q):
    if not sorted_values:
        return 0
    i = min(len(sorted_values) - 1, int(q * (len(sorted_values) - 1) + 0.5))
    return sorted_values[i]


def check(files, expect, out=sys.stdout, ended_early=()):
    """Returns the list of problems (empty: pass) and prints a summary. Leaves named in
    ended_early, and files cut in a partial last line, may end before the others."""
    problems = []
    leaves = {}
    early = {}  # leaf -> last sequence it recorded (None: no record), for files that ended early
    stopped = {}  # leaf -> the barrier it arrived at and left unreleased (its last record)
    for path in files:
        name = os.path.splitext(os.path.basename(path))[0]
        try:
            rows, truncated = parse_file(path)
        except (OSError, ValueError) as e:
            problems.append(str(e))
            continue
        unreleased = [i for i, row in enumerate(rows) if not row[3]]
        if unreleased and unreleased[0] != len(rows) - 1:
            problems.append(
                f"{name}: sequence {rows[unreleased[0]][0]} is marked not released but more records follow it"
            )
        elif unreleased:
            stopped[name] = rows[-1][0]
            print(
                f"check_records: {name}: left sequence {stopped[name]} unreleased (arrived at "
                f"{rows[-1][1]}); checked as an arrival",
                file=out,
            )
        if truncated is not None or name in ended_early or name in stopped:
            early[name] = rows[-1][0] if rows else None
            why = (
                f"partial last line {truncated[:40]!r} dropped"
                if truncated is not None
                else "--ended-early" if name in ended_early else "stopped while waiting"
            )
            print(
                f"check_records: {name}: ended early ({why}); {len(rows)} whole records, "
                f"checked up to sequence {early[name] if rows else '(none)'}",
                file=out,
            )
        by_seq = {}
        for seq, arrive, release, _ in rows:
            if seq in by_seq:
                problems.append(f"{name}: sequence {seq} recorded twice")
            if release is not None and release < arrive:
                problems.append(f"{name}: sequence {seq} released at {release} before its own reduce at {arrive}")
            by_seq[seq] = (arrive, release)
        if expect is not None and len(by_seq) != expect and name not in early:
            problems.append(f"{name}: {len(by_seq)} barriers recorded, expected {expect}")
        leaves[name] = by_seq
    if not leaves:
        problems.append("no records")
        return problems
    all_seqs = set().union(*(set(v) for v in leaves.values()))
    # A barrier that only arrivals which never left name (leaves stopped while waiting) completed
    # nowhere: the others need no record of it (one that had stopped before it never came).
    released_seqs = {s for v in leaves.values() for s, (_, r) in v.items() if r is not None}
    for name, by_seq in sorted(leaves.items()):
        missing = sorted(released_seqs - set(by_seq))
        if name in early:
            last = early[name]
            tail = [s for s in missing if last is None or s > last]
            missing = [s for s in missing if last is not None and s <= last]
            if tail:
                print(
                    f"check_records: {name}: {len(tail)} later barrier(s) of the others unchecked "
                    f"at this leaf (sequences {tail[0]}..{tail[-1]})",
                    file=out,
                )
        if missing:
            problems.append(f"{name}: no record of sequence(s) {missing[:10]}{' ...' if len(missing) > 10 else ''}")
    violations = []
    spans = []
    beyond = []  # (seq, leaf released, leaf that never arrived)
    for seq in sorted(all_seqs):
        recs = [by_seq[seq] for by_seq in leaves.values() if seq in by_seq]
        releases = [r for _, r in recs if r is not None]
        if not releases:
            continue  # only arrivals that never left: nothing was released to check
        last_arrival = max(a for a, _ in recs)
        first_release = min(releases)
        if first_release < last_arrival:
            violations.append((seq, last_arrival - first_release))
        spans.append(max(releases) - last_arrival)
        for name, at in sorted(stopped.items()):
            if seq > at:
                who = sorted(n for n, b in leaves.items() if seq in b and b[seq][1] is not None)
                beyond.append((seq, who, name, at))
    for seq, early in violations[:10]:
        problems.append(f"sequence {seq}: a leaf was released {early} ns before the last leaf arrived")
    if len(violations) > 10:
        problems.append(f"... {len(violations) - 10} more early releases")
    for seq, who, name, at in beyond[:10]:
        problems.append(
            f"sequence {seq}: released at {', '.join(who)} but {name} never arrived there "
            f"(it left sequence {at} unreleased)"
        )
    if len(beyond) > 10:
        problems.append(f"... {len(beyond) - 10} more releases past a leaf that stopped")
    spans.sort()
    print(
        f"check_records: {len(leaves)} leaves, {len(all_seqs)} barriers, "
        f"{len(violations) + len(beyond)} early releases; last arrival to last release: "
        f"p50 {percentile(spans, 0.5) / 1000:.1f} us, p99 {percentile(spans, 0.99) / 1000:.1f} us, "
        f"max {(spans[-1] if spans else 0) / 1000:.1f} us",
        file=out,
    )
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", help="one records file per leaf")
    p.add_argument("--expect", type=int, help="barriers every leaf must have recorded")
    p.add_argument(
        "--ended-early",
        action="append",
        default=[],
        metavar="LEAF",
        help="this leaf (file name without extension) was stopped mid-run: its records may end "
        "before the others' (repeatable)",
    )
    args = p.parse_args()
    problems = check(args.files, args.expect, ended_early=set(args.ended_early))
    for pr in problems:
        print(f"check_records: FAIL {pr}")
    if problems:
        return 1
    print("check_records: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
