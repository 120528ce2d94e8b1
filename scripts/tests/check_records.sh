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

# A leaf stopped while it waited (barrier-leaf's not-released record, as the CLI writes it: the
# full header, release_ns empty, released 0). Its arrival counts: b released barrier 2 at 1100,
# after a arrived at 950: good.
writev() {
  local d=$1 leaf=$2; shift 2
  mkdir -p "$d"
  { echo "group,seq,first_reduce_ns,release_ns,resends,released"; printf '%s\n' "$@"; } >"$d/$leaf.csv"
}
writev "$work/stopped" a "1,0,100,300,0,1" "1,1,400,700,0,1" "1,2,950,,0,0"
writev "$work/stopped" b "1,0,200,310,0,1" "1,1,650,690,0,1" "1,2,900,1100,0,1"
expect stopped_waiting pass "a: left sequence 2 unreleased (arrived at 950)" "$work/stopped" --expect 3
expect stopped_waiting_ended_early pass "a: ended early (stopped while waiting); 3 whole records" "$work/stopped" --expect 3
# b ran its 2 barriers and ended; a arrived at barrier 2 and left it unreleased when its time was
# up: nobody completed 2, so b needs no record of it.
writev "$work/stoppedalone" a "1,0,100,300,0,1" "1,1,400,700,0,1" "1,2,950,,0,0"
writev "$work/stoppedalone" b "1,0,200,310,0,1" "1,1,650,690,0,1"
expect stopped_where_no_one_completed pass "2 leaves, 3 barriers, 0 early releases" "$work/stoppedalone" --expect 2
# ... but b was released from barrier 2 at 1100 before a arrived there at 1200: an early release,
# which the not-released row alone shows (without it the check could not see a's arrival).
writev "$work/stoppedlate" a "1,0,100,300,0,1" "1,1,400,700,0,1" "1,2,1200,,0,0"
writev "$work/stoppedlate" b "1,0,200,310,0,1" "1,1,650,690,0,1" "1,2,900,1100,0,1"
expect stopped_arrival_after_release fail "sequence 2: a leaf was released 100 ns before the last leaf arrived" "$work/stoppedlate"
# a stopped waiting at 1 and never arrived at 2, so nobody may have been released from 2.
writev "$work/stoppedbeyond" a "1,0,100,300,0,1" "1,1,400,,0,0"
writev "$work/stoppedbeyond" b "1,0,200,310,0,1" "1,1,350,690,0,1" "1,2,900,1100,0,1"
expect released_past_a_stopped_leaf fail "sequence 2: released at b but a never arrived there (it left sequence 1 unreleased)" "$work/stoppedbeyond"
# A not-released row must be the leaf's last.
writev "$work/stoppedmid" a "1,0,100,,0,0" "1,1,400,700,0,1"
writev "$work/stoppedmid" b "1,0,200,310,0,1" "1,1,650,690,0,1"
expect not_released_in_the_middle fail "a: sequence 0 is marked not released but more records follow it" "$work/stoppedmid"
# ... and says so consistently.
writev "$work/stoppedbad" a "1,0,100,300,0,1" "1,1,400,700,0,0"
writev "$work/stoppedbad" b "1,0,200,310,0,1" "1,1,650,690,0,1"
expect not_released_with_a_release fail "not released but with a release time" "$work/stoppedbad"
# JSON lines, as barrier-leaf writes them: "release_ns": null, "released": false.
mkdir -p "$work/stoppedjson"
printf '%s\n' '{"group":1,"seq":5,"first_reduce_ns":10,"release_ns":20,"resends":0,"released":true}' \
  '{"group":1,"seq":6,"first_reduce_ns":30,"release_ns":null,"resends":0,"released":false}' >"$work/stoppedjson/a.jsonl"
printf '%s\n' '{"group":1,"seq":5,"first_reduce_ns":15,"release_ns":25,"resends":0,"released":true}' \
  '{"group":1,"seq":6,"first_reduce_ns":35,"release_ns":45,"resends":0,"released":true}' >"$work/stoppedjson/b.jsonl"
expect stopped_json pass "a: left sequence 6 unreleased (arrived at 30)" "$work/stoppedjson" --expect 2
sed -i 's/"first_reduce_ns":30,"release_ns":null/"first_reduce_ns":50,"release_ns":null/' "$work/stoppedjson/a.jsonl"
expect stopped_json_late fail "sequence 6: a leaf was released 5 ns before the last leaf arrived" "$work/stoppedjson"
# The previous CSV format (five columns, no released) still reads, all rows released.
mkdir -p "$work/v1"
printf 'group,seq,first_reduce_ns,release_ns,resends\n1,0,100,300,0\n1,1,400,700,0\n' >"$work/v1/a.csv"
printf 'group,seq,first_reduce_ns,release_ns,resends\n1,0,200,310,0\n1,1,650,690,1\n' >"$work/v1/b.csv"
expect previous_format pass "2 leaves, 2 barriers, 0 early releases" "$work/v1" --expect 2

echo "check_records: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
