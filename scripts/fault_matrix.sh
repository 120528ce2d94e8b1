#!/usr/bin/env bash
# The fault matrix (issue 12, item 3): one supervised scripts/topo.sh run per fault on a 2,2
# tree of real barrier-switch and barrier-leaf processes in network namespaces (leaves pace their
# barriers with --gap-us 1000), each row's figures from its records and events
# (scripts/tools/fault_report.py), printed as one Markdown table. Rows: no fault (reference); loss
# 1%, 10%, 30% on every link; duplication; corruption; delay, jitter and reordering (the link
# emulator, barrier-linkemu, in the middle of the root's links); a link taken down and up; an
# intermediate and the root SIGKILLed and restarted; a leaf SIGKILLed and the job restarted in a
# new epoch; and a leaf killed for good, declared failed by the switches (the abort). Needs root and built
# barrier-switch, barrier-leaf, barrierctl (and barrier-linkemu for its row). Not in CI (about
# 3-4 minutes at the default 8 s a row): scripts/tests/fault_matrix_short.sh is the short version.
#
# usage: scripts/fault_matrix.sh [--duration S] [--rows LIST] [--out DIR] [--short]
#   --duration S   seconds each row's leaves run (default 8)
#   --rows LIST    only these rows (comma-separated names: none,loss1,loss10,loss30,dup,corrupt,
#                  delay,linkdown,inter,root,leaf,abort)
#   --out DIR      keep every row's topo.sh output under DIR/<row> (default: a temporary folder)
#   --short        the CI selection: rows loss10,delay,linkdown,inter,leaf,abort at 5 s each, and exit 1
#                  unless every row completed barriers after its faults with no early release
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
duration=8 rows="" out="" short=0
while [ $# -gt 0 ]; do
  case $1 in
    --duration) duration=${2:?}; shift 2 ;;
    --rows) rows=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --short) short=1; shift ;;
    -h|--help) awk 'NR >= 13 && !/^#/ { exit } NR >= 13 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "fault_matrix.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
if [ "$short" = 1 ]; then duration=5; rows=${rows:-loss10,delay,linkdown,inter,leaf,abort}; fi
[[ $duration =~ ^[1-9][0-9]*$ ]] || { echo "fault_matrix.sh: --duration wants whole seconds" >&2; exit 2; }
[ -n "$out" ] || { out=$(mktemp -d /tmp/fault_matrix.XXXXXX); trap 'rm -rf "$out"' EXIT; }
mkdir -p "$out"
export NB_PREFIX=${NB_PREFIX:-fm$$}
NB_PREFIX=${NB_PREFIX:0:8}

# Event times scale with the row's duration: d(F) is F of the way through the run.
d() { awk -v f="$1" -v d="$duration" 'BEGIN { printf "%.2f", f * d }'; }
common=(--supervise --fanout 2,2 --barriers 100000000 --duration "$duration" --leaf-args "--gap-us 1000 --quiet" --timeout $((duration + 60)))

declare -A label args
order=(none loss1 loss10 loss30 dup corrupt delay linkdown inter root leaf abort)
label[none]="none (reference)";                 args[none]=""
label[loss1]="loss 1% per link and direction";   args[loss1]="--loss 0.01"
label[loss10]="loss 10%";                        args[loss10]="--loss 0.10"
label[loss30]="loss 30%";                        args[loss30]="--loss 0.30"
label[dup]="duplication 10%";                    args[dup]="--dup 0.10"
label[corrupt]="corruption 5% (a random header byte)"; args[corrupt]="--corrupt 0.05"
label[delay]="delay 200 µs, jitter ±150 µs, reordering (barrier-linkemu on the root's links)"
args[delay]="--linkemu s1,s2 --linkemu-args '--delay-us 200 --jitter-us 150 --reorder 0.1'"
label[linkdown]="link down 0.5 s and up (root-s1, then s2-leaf)"
label[inter]="intermediate s1 SIGKILL + restart (3 times)"
args[inter]="--event $(d 0.25):restart:s1 --event $(d 0.5):restart:s1 --event $(d 0.75):restart:s1"
label[root]="root SIGKILL + restart (3 times)"
args[root]="--event $(d 0.25):restart:s --event $(d 0.5):restart:s --event $(d 0.75):restart:s"
label[leaf]="leaf l1.1 SIGKILL, job restarted in a new epoch 1 s later"
args[leaf]="--event $(d 0.3):kill:l1.1 --event $(awk -v t="$(d 0.3)" 'BEGIN { printf "%.2f", t + 1 }'):newjob"
label[abort]="leaf l1.1 SIGKILL, never back: failure declared (fail_after 300 ms)"
# The switches declare a child silent 300 ms after its first sibling failed; every surviving
# leaf's wait must end with the abort (its error names the switch and port), none released.
args[abort]="--fail-after-ms 300 --event $(d 0.3):kill:l1.1"
args[linkdown]="--event $(d 0.3):down:s1 --event $(awk -v t="$(d 0.3)" 'BEGIN { printf "%.2f", t + 0.5 }'):up:s1 --event $(d 0.6):down:l2.1 --event $(awk -v t="$(d 0.6)" 'BEGIN { printf "%.2f", t + 0.5 }'):up:l2.1"

selected=("${order[@]}")
[ -n "$rows" ] && IFS=, read -ra selected <<<"$rows"
for r in "${selected[@]}"; do [ -n "${label[$r]:-}" ] || { echo "fault_matrix.sh: no row '$r' (${order[*]})" >&2; exit 2; }; done

table=$out/table.md
{
  echo "| fault | barriers completed | could not complete (why) | early releases | time to recover |"
  echo "| --- | --- | --- | --- | --- |"
} >"$table"
bad=0
for r in "${selected[@]}"; do
  if [ "$r" = delay ] && ! grep -q -- "--linkemu" "$here/topo.sh"; then
    echo "| ${label[$r]} | *not run: topo.sh has no --linkemu* | | | |" >>"$table"
    continue
  fi
  echo "== fault_matrix: $r: ${label[$r]}" >&2
  eval "extra=(${args[$r]})"
  rc=0
  bash "$here/topo.sh" "${common[@]}" "${extra[@]}" --out "$out/$r" >"$out/$r.log" 2>&1 || rc=$?
  if [ ! -f "$out/$r/events.log" ]; then
    tail -n 20 "$out/$r.log" >&2
    echo "| ${label[$r]} | **run failed (exit $rc)** | | | |" >>"$table"
    bad=$((bad + 1)); continue
  fi
  python3 "$here/tools/fault_report.py" "$out/$r" >"$out/$r.json"
  if [ "$r" = abort ]; then
    python3 - "$out/$r" "$out/$r.json" "${label[$r]}" "$rc" >>"$table" <<'PY' || bad=$((bad + 1))
import json, os, re, sys
d, j, label, rc = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3], int(sys.argv[4])
events = [(int(t), w) for t, _, w in (ln.strip().partition(" ") for ln in open(os.path.join(d, "events.log")))]
kill = next(t for t, w in events if w.startswith("kill "))
exits = [(t, w.split()[1]) for t, w in events if t > kill and re.fullmatch(r"exit l\S+ status [1-9]\d*", w)]
named = set()
for _, leaf in exits:
    last = open(os.path.join(d, f"{leaf}.log")).read().strip().splitlines()[-1]
    m = re.search(r"aborted: .*?: (port \d+ of switch \S+) was declared failed", last)
    named.add(m.group(1) if m else "NO ABORT: " + last)
ok = (len(exits) == 3 and not any(n.startswith("NO ABORT") for n in named)
      and j["early_releases"] == 0 and j["check_ok"] and rc == 0)
t = (max(t for t, _ in exits) - kill) / 1e9 if exits else None
print(f"| {label} | {j['completed']} | 1: in flight when l1.1 was killed; declared failed: "
      f"{', '.join(sorted(named))}; {len(exits)} of 3 surviving leaves' waits ended with the abort | "
      f"{j['early_releases']} | "
      + (f"{t:.2f} s from the kill to the last leaf's abort" if t is not None else "**no abort**")
      + ("" if ok else " **FAILED**") + " |")
sys.exit(0 if ok else 1)
PY
    continue
  fi
  python3 - "$out/$r.json" "${label[$r]}" "$rc" >>"$table" <<'EOF' || bad=$((bad + 1))
import json, statistics, sys
j = json.load(open(sys.argv[1])); label = sys.argv[2]; rc = int(sys.argv[3])
why = []
kills = [x for x in j["recover"] if x["fault"].startswith("leaf")]
for x in kills:
    why.append(f"1: in flight when {x['fault'].split()[1]} was killed (job stopped, run again in a new epoch)")
if j["partial"]:
    why.append(f"{j['partial']} released at some leaves only when the run was stopped")
if not why:
    why.append("0")
rec = [x for x in j["recover"] if x["recover_s"] is not None]
missing = [x for x in j["recover"] if x["recover_s"] is None]
if rec:
    parts = []
    for kind in sorted({x["fault"] for x in rec}):
        xs = [x for x in rec if x["fault"] == kind]
        r = statistics.median(x["recover_s"] for x in xs)
        rep = statistics.median(x["repair_s"] for x in xs)
        aft = statistics.median(x["after_repair_s"] for x in xs)
        n = f" (median of {len(xs)}, max {max(x['recover_s'] for x in xs):.2f} s)" if len(xs) > 1 else ""
        parts.append(f"{kind}: {r:.2f} s = repair {rep:.2f} s + {aft * 1000:.0f} ms to the next barrier{n}")
    recover = "; ".join(parts)
else:
    recover = f"no fault event; longest stall {j['gap_max_ms']:.0f} ms"
if j.get("linkemu"):
    e = j["linkemu"]
    d = max(e["departed"], 1)
    recover += (f" (emulators: {e['reordered']} of {e['departed']} frames reordered, {e['held_back']} held back, "
                f"delay mean {e['sum_delay_ns'] / d / 1000:.0f} µs, sent late by {e['sum_late_ns'] / d / 1000:.0f} µs mean)")
if missing:
    recover += f"; **{len(missing)} fault(s) never recovered**"
ok = j["check_ok"] and j["early_releases"] == 0 and rc == 0 and not missing and j["completed"] > 0
if j.get("linkemu"):
    # The emulators must really have delayed and reordered frames (200 µs asked, on average
    # more with the held-back ones).
    e = j["linkemu"]
    if not (e["departed"] > 0 and e["reordered"] > 0 and e["sum_delay_ns"] / max(e["departed"], 1) >= 180_000):
        ok = False
        recover += " **the emulators did not delay and reorder**"
done = f"{j['completed']} (every {j['gap_p50_ms']:.1f} ms, median)"
if len(j["jobs"]) > 1:
    done += " in " + " + ".join(str(x["completed"]) for x in j["jobs"]) + " (jobs)"
if not ok:
    done += f" **FAILED** (exit {rc}, check {'ok' if j['check_ok'] else 'failed'})"
print(f"| {label} | {done} | {'; '.join(why)} | {j['early_releases']} | {recover} |")
sys.exit(0 if ok else 1)
EOF
done
cat "$table"
[ "$bad" -eq 0 ] || { echo "fault_matrix: $bad row(s) failed (logs in $out)" >&2; [ "$short" = 1 ] && trap - EXIT; exit 1; }
