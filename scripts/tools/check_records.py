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


def parse_file(path):
    """Rows (seq, first_reduce_ns, release_ns) of one records file, and the partial last line
    that was dropped (None when the file ends in a newline)."""
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
            keys = list(obj)
            s, a, r = pick(keys, "seq"), pick(keys, "reduce", "arriv"), pick(keys, "releas")
            if None in (s, a, r):
                raise ValueError(f"{path}: JSON record without seq/reduce/release keys: {ln}")
            rows.append((int(obj[keys[s]]), int(obj[keys[a]]), int(obj[keys[r]])))
            continue
        fields = [x for x in re.split(r"[,\s]+", ln) if x]
        if header is None:
            if all(re.fullmatch(r"-?\d+", x) for x in fields):
                raise ValueError(f"{path}: no header row (want e.g. seq,first_reduce_ns,release_ns)")
            header = fields
            cols = pick(header, "seq"), pick(header, "reduce", "arriv"), pick(header, "releas")
            if None in cols:
                raise ValueError(f"{path}: header {header} lacks a seq, reduce/arrival or release column")
            continue
        try:
            rows.append(tuple(int(fields[c]) for c in cols))
        except (ValueError, IndexError):
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
    for path in files:
        name = os.path.splitext(os.path.basename(path))[0]
        try:
            rows, truncated = parse_file(path)
        except (OSError, ValueError) as e:
            problems.append(str(e))
            continue
        if truncated is not None or name in ended_early:
            early[name] = rows[-1][0] if rows else None
            why = f"partial last line {truncated[:40]!r} dropped" if truncated is not None else "--ended-early"
            print(
                f"check_records: {name}: ended early ({why}); {len(rows)} whole records, "
                f"checked up to sequence {early[name] if rows else '(none)'}",
                file=out,
            )
        by_seq = {}
        for seq, arrive, release in rows:
            if seq in by_seq:
                problems.append(f"{name}: sequence {seq} recorded twice")
            if release < arrive:
                problems.append(f"{name}: sequence {seq} released at {release} before its own reduce at {arrive}")
            by_seq[seq] = (arrive, release)
        if expect is not None and len(by_seq) != expect and name not in early:
            problems.append(f"{name}: {len(by_seq)} barriers recorded, expected {expect}")
        leaves[name] = by_seq
    if not leaves:
        problems.append("no records")
        return problems
    all_seqs = set().union(*(set(v) for v in leaves.values()))
    for name, by_seq in sorted(leaves.items()):
        missing = sorted(all_seqs - set(by_seq))
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
    for seq in sorted(all_seqs):
        recs = [by_seq[seq] for by_seq in leaves.values() if seq in by_seq]
        last_arrival = max(a for a, _ in recs)
        first_release = min(r for _, r in recs)
        if first_release < last_arrival:
            violations.append((seq, last_arrival - first_release))
        spans.append(max(r for _, r in recs) - last_arrival)
    for seq, early in violations[:10]:
        problems.append(f"sequence {seq}: a leaf was released {early} ns before the last leaf arrived")
    if len(violations) > 10:
        problems.append(f"... {len(violations) - 10} more early releases")
    spans.sort()
    print(
        f"check_records: {len(leaves)} leaves, {len(all_seqs)} barriers, "
        f"{len(violations)} early releases; last arrival to last release: "
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
