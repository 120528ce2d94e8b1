#!/usr/bin/env bash
# The fuzzing campaign (docs/reliability.md, "Fuzzing"): each cargo-fuzz target of
# dataplane/fuzz-check/fuzz, one after the other, nice'd, for NB_FUZZ_RUNS executions (default
# 10 million) or NB_FUZZ_SECONDS seconds (default: no time limit), from the committed corpus
# and seeds; then a minimized corpus per target (libFuzzer's set-cover merge, smaller than
# what `cargo fuzz cmin` keeps) and a summary table: executions, exec/s, coverage (edges),
# features, corpus size, findings. Installs cargo-fuzz (nightly) when missing.
#
#   scripts/fuzz.sh                      every target, 10 M executions each
#   scripts/fuzz.sh config control       those targets
#   NB_FUZZ_RUNS=100000 scripts/fuzz.sh  a short run
#   --update-corpus                      replace corpus/<target> by the minimized corpus
#   --no-trace-compares                  build without libFuzzer's comparison tracing: about
#                                        3.5x the executions a second for switch_events (its
#                                        time goes to __sanitizer_cov_trace_cmp*), with coarser
#                                        feedback on compared values; the summary says which
#
# Findings (a crash or a failed check) are left in dataplane/fuzz-check/fuzz/artifacts/<target>/;
# the script exits non-zero when there is one. Each becomes a test in
# dataplane/fuzz-check/tests/findings.rs. Logs and the working corpus: target/fuzz-campaign/
# under the fuzz crate (ignored by git). The build is `--sanitizer none` with debug assertions
# (`-a`): every target is safe Rust (forbid(unsafe_code)), so AddressSanitizer would find
# nothing that a panic does not, at half the speed; overflow checks and debug_assert! stay on.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
fuzz="$root/dataplane/fuzz-check/fuzz"
runs="${NB_FUZZ_RUNS:-10000000}"
secs="${NB_FUZZ_SECONDS:-0}"
update=0
compares=1
targets=()
for a in "$@"; do
  case "$a" in
    --update-corpus) update=1 ;;
    --no-trace-compares) compares=0 ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $a" >&2; exit 2 ;;
    *) targets+=("$a") ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(parse_frame config control switch_events)

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz.sh: the nightly toolchain is missing (rustup toolchain install nightly)" >&2
  exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz.sh: installing cargo-fuzz" >&2
  cargo +nightly install cargo-fuzz --locked || { echo "fuzz.sh: cannot install cargo-fuzz" >&2; exit 1; }
fi

cd "$fuzz" || exit 1
# the fuzz crate is its own workspace; start from the main lock file so it builds the versions
# the workspace is tested with
[ -f Cargo.lock ] || cp "$root/Cargo.lock" Cargo.lock
export CARGO_INCREMENTAL=0
flags=(--sanitizer none --debug-assertions)
[ "$compares" = 1 ] || flags+=(--no-trace-compares)
out="$fuzz/target/fuzz-campaign"
mkdir -p "$out"
summary="$out/summary.md"
{
  echo "| target | executions | exec/s | seconds | coverage (edges) | features | corpus (files / bytes) | minimized corpus (files / bytes) | findings | compares traced |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
} >"$summary"
status=0
for t in "${targets[@]}"; do
  echo "fuzz.sh: $t: building" >&2
  if ! nice -n 10 cargo +nightly fuzz build "${flags[@]}" "$t" >"$out/$t.build.log" 2>&1; then
    echo "fuzz.sh: $t: build failed ($out/$t.build.log)" >&2
    tail -20 "$out/$t.build.log" >&2
    status=1
    continue
  fi
  work="$out/corpus/$t"
  mkdir -p "$work" "artifacts/$t"
  seeds=()
  [ -d "corpus/$t" ] && seeds+=("corpus/$t")
  [ -d "seeds/$t" ] && seeds+=("seeds/$t")
  before=$(find "artifacts/$t" -type f | wc -l)
  args=(-runs="$runs" -print_final_stats=1 -artifact_prefix="artifacts/$t/")
  [ "$secs" != 0 ] && args+=(-max_total_time="$secs")
  echo "fuzz.sh: $t: running ($runs executions${secs:+, at most $secs s})" >&2
  t0=$(date +%s.%N)
  nice -n 10 cargo +nightly fuzz run "${flags[@]}" "$t" "$work" "${seeds[@]}" -- "${args[@]}" >"$out/$t.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  log="$out/$t.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  wfiles=$(find "$work" -type f | wc -l)
  wbytes=$(find "$work" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}')
  # minimize: libFuzzer's set-cover merge of everything seen into an empty directory (the
  # smallest set of inputs with every feature; plain -merge=1, what `cargo fuzz cmin` runs,
  # kept 861 files for switch_events where this keeps 249). When that is still over
  # NB_FUZZ_MAX_FILES (default 300), merge on edges alone (-use_counters=0: every edge kept,
  # hit-count features dropped; control: 870 files -> 222, same 2153 edges).
  merge() {
    rm -rf "$min" && mkdir -p "$min"
    nice -n 10 cargo +nightly fuzz run "${flags[@]}" "$t" "$min" "$work" "${seeds[@]}" -- -set_cover_merge=1 "$@" >"$out/$t.merge.log" 2>&1
  }
  min="$out/min/$t"
  merge
  if [ "$(find "$min" -type f | wc -l)" -gt "${NB_FUZZ_MAX_FILES:-300}" ]; then
    merge -use_counters=0
  fi
  mfiles=$(find "$min" -type f | wc -l)
  mbytes=$(find "$min" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}')
  after=$(find "artifacts/$t" -type f | wc -l)
  found=$((after - before))
  if [ "$rc" != 0 ] || [ "$found" != 0 ]; then
    echo "fuzz.sh: $t: FINDING (exit $rc, $found new artifact(s) in artifacts/$t/; $log)" >&2
    grep -m5 -E 'panicked|SUMMARY|ERROR' "$log" >&2
    status=1
  fi
  dur=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", b - a}')
  echo "| $t | ${execs:-?} | ${rate:-?} | $dur | ${cov:-?} | ${ft:-?} | $wfiles / $wbytes | $mfiles / $mbytes | $found | $([ "$compares" = 1 ] && echo yes || echo no) |" >>"$summary"
  if [ "$update" = 1 ] && [ "$mfiles" -gt 0 ]; then
    rm -rf "corpus/$t" && mkdir -p "corpus/$t" && cp "$min"/* "corpus/$t/"
    echo "fuzz.sh: $t: corpus/$t replaced by the minimized corpus ($mfiles files, $mbytes bytes)" >&2
  fi
done
cat "$summary"
echo "fuzz.sh: summary in $summary" >&2
exit $status
