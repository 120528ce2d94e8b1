#!/usr/bin/env bash
# scripts/tools/check_records.py must accept a correct set of leaf records and refuse each kind of
# wrong one: an early release, a missing barrier, a duplicate record, a short run, a file without
# a header. Pure file checks, no root needed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tool="$(dirname "$here")/tools/check_records.py"
work=$(mktemp -d /tmp/check_records.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0

# write DIR LEAF ROWS...: a CSV records file with rows "seq,reduce,release".
write() {
  local d=$1 leaf=$2; shift 2
  mkdir -p "$d"
  { echo "seq,first_reduce_ns,release_ns"; printf '%s\n' "$@"; } >"$d/$leaf.csv"
}

# expect NAME WANT(pass|fail) OUTPUT-PART DIR [--expect N]
expect() {
  local name=$1 want=$2 part=$3 dir=$4; shift 4
  local out rc=0
  out=$(python3 "$tool" "$dir"/* "$@" 2>&1) || rc=$?
  if { [ "$want" = pass ] && [ $rc -eq 0 ]; } || { [ "$want" = fail ] && [ $rc -ne 0 ]; } && [[ $out == *"$part"* ]]; then
    passed=$((passed + 1)); echo "check_records: ok   $name"
  else
    failed=$((failed + 1)); echo "check_records: FAIL $name (exit $rc, wanted $want with '$part'):"; echo "$out" | sed 's/^/    /'
  fi
}

# Two leaves, three barriers; leaf b arrives last each time, releases after it.
write "$work/good" a "0,100,300" "1,400,700" "2,800,1000"
write "$work/good" b "0,200,310" "1,650,690" "2,900,1100"
expect good pass "2 leaves, 3 barriers, 0 early releases" "$work/good" --expect 3

# JSON lines are read too.
mkdir -p "$work/json"
printf '%s\n' '{"seq": 5, "first_reduce_ns": 10, "release_ns": 20}' '{"seq": 6, "first_reduce_ns": 30, "release_ns": 40}' >"$work/json/a.jsonl"
printf '%s\n' '{"seq": 5, "first_reduce_ns": 15, "release_ns": 25}' '{"seq": 6, "first_reduce_ns": 35, "release_ns": 45}' >"$work/json/b.jsonl"
expect json pass "2 barriers" "$work/json" --expect 2

# Leaf a released at 640 in barrier 1, before leaf b arrived at 650.
write "$work/early" a "0,100,300" "1,400,640" "2,800,1000"
write "$work/early" b "0,200,310" "1,650,690" "2,900,1100"
expect early_release fail "sequence 1: a leaf was released 10 ns before" "$work/early"

write "$work/missing" a "0,100,300" "1,400,700" "2,800,1000"
write "$work/missing" b "0,200,310" "2,900,1100"
expect missing_barrier fail "b: no record of sequence(s) [1]" "$work/missing"

write "$work/dup" a "0,100,300" "0,100,300"
write "$work/dup" b "0,200,310"
expect duplicate fail "a: sequence 0 recorded twice" "$work/dup"

expect short_run fail "2 barriers recorded, expected 5" "$work/json" --expect 5

mkdir -p "$work/nohdr"; echo "0,1,2" >"$work/nohdr/a.csv"
expect no_header fail "no header row" "$work/nohdr"

# A leaf killed mid-write: its file ends in a partial line. The cut release "70" of barrier 2
# would read as an early release (70 < 900) if it were taken as a record; it is dropped, the
# whole records are checked, the later barrier is unchecked at that leaf, --expect spares it.
write "$work/cut" a "0,100,300" "1,400,700" "2,800,1000"
{ echo "seq,first_reduce_ns,release_ns"; printf '0,200,310\n1,650,690\n2,900,70'; } >"$work/cut/b.csv"
expect truncated_last_line pass "b: ended early (partial last line '2,900,70' dropped); 2 whole records, checked up to sequence 1" "$work/cut" --expect 3
expect truncated_tail_unchecked pass "b: 1 later barrier(s) of the others unchecked at this leaf (sequences 2..2)" "$work/cut" --expect 3

# ... but what it does hold is still checked: an early release before the cut is found.
write "$work/cutearly" a "0,100,300" "1,400,640" "2,800,1000"
{ echo "seq,first_reduce_ns,release_ns"; printf '0,200,310\n1,650,690\n2,9'; } >"$work/cutearly/b.csv"
expect truncated_still_checked fail "sequence 1: a leaf was released 10 ns before" "$work/cutearly"

# A JSON-lines file cut in the middle of an object.
mkdir -p "$work/cutjson"
printf '%s\n' '{"seq": 5, "first_reduce_ns": 10, "release_ns": 20}' '{"seq": 6, "first_reduce_ns": 30, "release_ns": 40}' >"$work/cutjson/a.jsonl"
printf '%s\n%s' '{"seq": 5, "first_reduce_ns": 15, "release_ns": 25}' '{"seq": 6, "first_re' >"$work/cutjson/b.jsonl"
expect truncated_json pass "b: ended early" "$work/cutjson" --expect 2

# A bad line in the middle is a real defect, cut end or not.
write "$work/corrupt" a "0,100,300" "1,400,700" "2,800,1000"
write "$work/corrupt" b "0,200,310" "1,6x0,690" "2,900,1100"
expect corrupt_middle fail "b.csv: bad record line: 1,6x0,690" "$work/corrupt"
{ echo "seq,first_reduce_ns,release_ns"; printf '0,200,310\n1,6x0,690\n2,9'; } >"$work/corrupt/b.csv"
expect corrupt_middle_and_cut fail "bad record line: 1,6x0,690" "$work/corrupt"
mkdir -p "$work/corruptjson"
printf '%s\n' '{"seq": 5, "first_reduce_ns": 15' '{"seq": 6, "first_reduce_ns": 35, "release_ns": 45}' >"$work/corruptjson/b.jsonl"
expect corrupt_middle_json fail "bad JSON record line" "$work/corruptjson"

# A gap before the cut is still a missing barrier.
write "$work/cutgap" a "0,100,300" "1,400,700" "2,800,1000"
{ echo "seq,first_reduce_ns,release_ns"; printf '0,200,310\n2,900,1100\n3,9'; } >"$work/cutgap/b.csv"
expect truncated_with_gap fail "b: no record of sequence(s) [1]" "$work/cutgap"

# A leaf stopped between two records (whole lines, as barrier-leaf writes them): short unless
# named with --ended-early.
write "$work/killed" a "0,100,300" "1,400,700" "2,800,1000"
write "$work/killed" b "0,200,310" "1,650,690"
expect killed_not_named fail "b: no record of sequence(s) [2]" "$work/killed" --expect 3
expect killed_named pass "b: ended early (--ended-early); 2 whole records" "$work/killed" --expect 3 --ended-early b

echo "check_records: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
