#!/usr/bin/env bash
# MPI programs on the in-network barrier without a code change (issue 26, items 1 and 2;
# docs/mpi.md): a plain MPI program (ffi/mpi/test/nb_mpi_test.c) runs thousands of barriers
# with its ranks arriving at random times, through Open MPI's coll/netbarrier component and the
# PMPI library under MPICH and Open MPI, against a real barrier-switch on net_af_packet ports in
# a network namespace, one veth per rank (the rank ends all in one host namespace, where mpirun
# runs). After each run scripts/tools/check_mpi_stamps.py checks the CLOCK_MONOTONIC stamps (no
# rank leaves barrier k before the last rank entered it) and the ranks' netbarrier summaries
# (every barrier in the network, or every rank fell back), and barrierctl the switch's count.
#
# Cases: (1) the checker passes a good stamp file and fails a broken one; (2) the fallback
# agreement against a stand-in libbarrier (ffi/mpi/test/fake_barrier.c; no root): no fault, no
# rank released, a lost release (ranks one barrier apart), an I/O error, the first and the last
# barrier, a leaf that does not open, under MPICH, Open MPI's component and Open MPI's PMPI; and
# the control: the naive fallback (-DNB_BROKEN_NAIVE_FALLBACK) must fail; (3) with root and a
# real switch: make install/uninstall into a DESTDIR (ompi_info lists the component), Open MPI
# coll -np 4 and -np 8, MPICH PMPI -np 4 and -np 8, Open MPI PMPI -np 4, each with every barrier
# in the network; a group the switch does not have (every rank falls back at the first barrier,
# one warning each, no hang); no NETBARRIER_GROUP (not served, silent); no CAP_NET_RAW (not
# served, one warning each); the switch SIGKILLed under two jobs at once (every rank falls back,
# both runs complete, one warning each).
#
# Needs mpicc.openmpi, mpicc.mpich, gcc; for (3) root and built barrier-switch, barrierctl and
# libbarrier (cargo build -p barrier-switchd -p barrier-ctl -p barrier-leaf-capi); what it
# cannot run is skipped (fails with NB_REQUIRE_BINARIES=1). Builds ffi/mpi (make) itself, into
# its own folder. Names: namespaces nbm-sw<pid>/nbm-h<pid>, veths nbmd*/nbmr*, DPDK file prefix
# nbm<pid>; all removed on exit. About 1.5-2 min on a loaded 2-core machine (1000 barriers).
#
# usage: mpi_barrier.sh [BARRIERS]    (per run; default 1000)
#   MPI_BARRIER_ONLY=fake|switch: only the stand-in cases (2), or only the switch cases (3)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scripts=$(dirname "$here")
repo=$(dirname "$scripts")
# shellcheck source=../lib/netns.sh
source "$scripts/lib/netns.sh"
barriers=${1:-1000}
name=mpi_barrier
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "$name: ok   $*"; }
bad() { failed=$((failed + 1)); echo "$name: FAIL $*"; }
finish() { echo "$name: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
skip() {
  if [ "${NB_REQUIRE_BINARIES:-0}" = 1 ]; then bad "$*"; finish; fi
  echo "$name: skipped the rest: $*"
  if [ $((passed + failed)) -gt 0 ]; then finish; fi
  exit 0
}
checker=$scripts/tools/check_mpi_stamps.py
work=$(mktemp -d /tmp/nbm-mpi.XXXXXX)
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)

# --- 1. the checker can fail: a good stamp file passes, broken ones do not (no root needed)
python3 - "$work/synth" <<'PY'
import sys
p = sys.argv[1]
for r in range(3):
    with open("%s.%d" % (p, r), "w") as f:
        for k in range(5):
            f.write("%d %d %d\n" % (k, 1000 * k + 10 * r, 1000 * k + 500 + r))
PY
if python3 "$checker" --np 3 --barriers 5 "$work/synth" >/dev/null; then ok "checker: a good stamp file passes"; else bad "checker refuses a good stamp file"; fi
sed -i 's/^3 3000 3500$/3 3000 3015/' "$work/synth.0"   # rank 0 leaves barrier 3 before rank 2 enters it (3020)
if python3 "$checker" --np 3 --barriers 5 "$work/synth" > "$work/synth.out"; then
  bad "checker passes a rank that left barrier 3 before the last rank entered it"
else
  grep -q 'barrier 3: rank 0 left' "$work/synth.out" && ok "checker: an early exit fails ($(grep -m1 'barrier 3' "$work/synth.out" | cut -c1-90))" \
    || bad "checker failed without naming barrier 3: $(cat "$work/synth.out")"
fi
sed -i '/^3 /d' "$work/synth.2"
if python3 "$checker" --np 3 --barriers 5 "$work/synth" >/dev/null; then bad "checker passes a missing barrier"; else ok "checker: a missing barrier fails"; fi

for p in mpicc.openmpi mpirun.openmpi mpicc.mpich mpiexec.mpich ompi_info; do
  command -v $p >/dev/null || { rm -rf "$work"; skip "$p missing (scripts/setup.sh installs openmpi-bin libopenmpi-dev mpich libmpich-dev)"; }
done
# Open MPI finds out-of-tree components on mca_base_component_path (its folders that exist;
# given to the ranks only: mpirun itself needs its own components).
ompi_path=$(ompi_info --param mca base --level 9 --parsable | sed -n 's/^mca:mca:base:param:mca_base_component_path:value://p' | tr -d '"')
ompi_dirs=""
for d in ${ompi_path//:/ }; do [ -d "$d" ] && ompi_dirs="$ompi_dirs${ompi_dirs:+:}$d"; done
ompi=(mpirun.openmpi --allow-run-as-root --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo
  --mca btl_tcp_if_include lo --bind-to none)

# --- 2. the agreement with a stand-in libbarrier (ffi/mpi/test/fake_barrier.c): faults at
# chosen barriers of chosen ranks, both branches of the agreement, deterministic; no root.
F=$work/fake
mkdir -p "$F"
if gcc -Wall -Wextra -Werror -O2 -fPIC -shared -Wl,-soname,libbarrier.so.0 -I"$repo/ffi/barrier-leaf-capi/include" \
     "$repo/ffi/mpi/test/fake_barrier.c" -o "$F/libbarrier.so" && ln -sf libbarrier.so "$F/libbarrier.so.0" \
   && make -s -C "$repo/ffi/mpi" B="$F/b" BARRIER_LIBDIR="$F" RPATH=1 >"$work/make-fake.log" 2>&1; then
  fake_ok=1
else
  fake_ok=0; bad "ffi/mpi against the stand-in libbarrier does not build:"; tail -n 20 "$work/make-fake.log"
fi
# fake LABEL KIND FAULT EXPECT [IFACES]: 4 ranks, 300 barriers, 300 ms timeout.
fake() {
  local label=$1 kind=$2 fault=$3 expect=$4 out=$F/$1 rc=0 fw=
  rm -f "$F/shm"
  local envs=(NETBARRIER_GROUP=5 NETBARRIER_IFACE="${5:-fake0,fake1,fake2,fake3}" NETBARRIER_TIMEOUT_MS=300
    NETBARRIER_VERBOSE=1 NBM_FAKE_FILE="$F/shm" NBM_FAKE_NP=4 NBM_FAKE_FAULT="$fault")
  local e x=()
  case $kind in
    mpich-pmpi)
      for e in "${envs[@]}"; do x+=(-genv "${e%%=*}" "${e#*=}"); done
      timeout -k 5 60 mpiexec.mpich -n 4 "${x[@]}" -genv LD_PRELOAD "$F/b/libnbpmpi-mpich.so" \
        "$F/b/nb_mpi_test-mpich" 300 "$out" 1 > "$out.log" 2>&1 || rc=$? ;;
    ompi-coll|ompi-pmpi)
      for e in "${envs[@]}"; do x+=(-x "$e"); done
      if [ "$kind" = ompi-coll ]; then x+=(-x OMPI_MCA_mca_base_component_path="$ompi_dirs:$F/b")
      else x+=(-x LD_PRELOAD="$F/b/libnbpmpi-openmpi.so"); fi
      timeout -k 5 60 "${ompi[@]}" -np 4 "${x[@]}" "$F/b/nb_mpi_test-openmpi" 300 "$out" 1 > "$out.log" 2>&1 || rc=$? ;;
  esac
  if [ "$rc" -ne 0 ]; then bad "fake $label ($kind, fault $fault): exited $rc:"; tail -n 10 "$out.log"; return; fi
  [ "$expect" = fallback ] && fw=--fallback-warnings
  if python3 "$checker" --np 4 --barriers 300 --log "$out.log" --expect "$expect" $fw "$out" > "$out.check" 2>&1; then
    ok "fake $label ($kind, fault $fault): $(sed 's/^check_mpi_stamps: OK: //; s/ (smallest margin [^)]*)//' "$out.check")"
  else
    bad "fake $label ($kind, fault $fault):"; cat "$out.check"; grep -m8 'netbarrier' "$out.log"
  fi
}
if [ "$fake_ok" = 1 ] && [ "${MPI_BARRIER_ONLY:-}" != switch ]; then
  fake no-fault ompi-coll none in-network
  fake none-arrive mpich-pmpi 1:100:noarrive fallback       # every rank at 100: v == m
  fake lost-release mpich-pmpi 2:100:lost fallback          # rank 2 at 100, the others at 101: v < m
  fake lost-release ompi-coll 2:100:lost fallback
  fake lost-release ompi-pmpi 0:100:lost fallback
  fake eio mpich-pmpi 3:200:eio fallback
  fake first-barrier ompi-coll 1:0:noarrive fallback
  fake last-barrier mpich-pmpi 0:299:lost some-fallback     # the others meet it in MPI_Finalize
  fake last-barrier ompi-coll 0:299:lost some-fallback
  # One rank's leaf does not open (no such interface): no rank is served, one warning each.
  fake no-such-iface mpich-pmpi none not-served fake0,fake1,nosuch,fake3
  fake no-such-iface ompi-coll none not-served fake0,fake1,nosuch,fake3
  # The control: the naive fallback (software barrier on the spot, no agreement) built in
  # (-DNB_BROKEN_NAIVE_FALLBACK) must fail the same lost-release case: ranks one barrier apart
  # (a hang, here stopped after 12 s, or early exits in the stamps).
  if make -s -C "$repo/ffi/mpi" B="$F/broken" BARRIER_LIBDIR="$F" RPATH=1 CFLAGS="-O2 -DNB_BROKEN_NAIVE_FALLBACK" \
       "$F/broken/libnbpmpi-mpich.so" >"$work/make-broken.log" 2>&1; then
    rm -f "$F/shm"
    rc=0
    NBM_FAKE_FILE="$F/shm" NBM_FAKE_NP=4 NBM_FAKE_FAULT=2:100:lost timeout -k 2 12 mpiexec.mpich -n 4 \
      -genv NETBARRIER_GROUP 5 -genv NETBARRIER_IFACE fake0,fake1,fake2,fake3 -genv NETBARRIER_TIMEOUT_MS 300 \
      -genv LD_PRELOAD "$F/broken/libnbpmpi-mpich.so" "$F/b/nb_mpi_test-mpich" 300 "$F/broken-run" 1 \
      > "$F/broken-run.log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then ok "control: the naive fallback fails the lost-release case (exit $rc: hung or aborted)"
    elif ! python3 "$checker" --np 4 --barriers 300 "$F/broken-run" > "$F/broken-run.check" 2>&1; then
      ok "control: the naive fallback fails the lost-release case ($(head -c 100 "$F/broken-run.check"))"
    else bad "control: the naive fallback passed the lost-release case: the fake cases cannot fail"; fi
  else
    bad "control: the naive-fallback build failed:"; tail -n 10 "$work/make-broken.log"
  fi
fi

# --- 3. the real runs
[ "${MPI_BARRIER_ONLY:-}" != fake ] || finish
if [ "$(id -u)" -ne 0 ]; then rm -rf "$work"; skip "needs root"; fi
switch=${BARRIER_SWITCH:-$(nb_find_program barrier-switch || true)}
ctl=${BARRIERCTL:-$(nb_find_program barrierctl || true)}
libdir=${BARRIER_LIBDIR:-}
[ -n "$libdir" ] || { [ -n "$switch" ] && [ -f "$(dirname "$switch")/libbarrier.so" ] && libdir=$(dirname "$switch"); }
for d in "$repo/target/debug" "$repo/target/release"; do
  [ -n "$libdir" ] || { [ -f "$d/libbarrier.so" ] && libdir=$d; }
done
if [ -z "$switch" ] || [ -z "$ctl" ] || [ -z "$libdir" ]; then rm -rf "$work"; skip "barrier-switch, barrierctl or libbarrier.so not built"; fi

B=$work/build
if make -s -C "$repo/ffi/mpi" B="$B" BARRIER_LIBDIR="$libdir" RPATH=1 >"$work/make.log" 2>&1; then
  if grep -q 'warning' "$work/make.log"; then bad "ffi/mpi builds with warnings:"; grep warning "$work/make.log" | head -5
  else ok "ffi/mpi built warning-free (-Wall -Wextra) against $libdir"; fi
else
  bad "ffi/mpi does not build:"; tail -n 20 "$work/make.log"; rm -rf "$work"; finish
fi

# make install / uninstall into a DESTDIR: the three files where they belong, and ompi_info lists
# the component from the installed folder.
dest=$work/dest
if make -s -C "$repo/ffi/mpi" B="$B" BARRIER_LIBDIR="$libdir" RPATH=1 DESTDIR="$dest" install >"$work/install.log" 2>&1; then
  cdir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
  got=$(cd "$dest" && find . -type f | sort | tr '\n' ' ')
  want="./usr/local/lib/libnbpmpi-mpich.so ./usr/local/lib/libnbpmpi-openmpi.so .$cdir/mca_coll_netbarrier.so "
  want=$(echo "$want" | tr ' ' '\n' | sed '/^$/d' | sort | tr '\n' ' ')
  if [ "$got" = "$want" ] && OMPI_MCA_mca_base_component_path="$ompi_dirs:$dest$cdir" ompi_info | grep -q 'MCA coll: netbarrier'; then
    ok "make install: $got; ompi_info lists 'MCA coll: netbarrier' from $cdir"
  else
    bad "make install put '$got' (want '$want'), or ompi_info does not list the component"
  fi
  make -s -C "$repo/ffi/mpi" B="$B" DESTDIR="$dest" uninstall >>"$work/install.log" 2>&1
  left=$(find "$dest" -type f | wc -l)
  if [ "$left" = 0 ]; then ok "make uninstall removed them"; else bad "make uninstall left $left files"; fi
else
  bad "make install failed:"; tail -n 10 "$work/install.log"
fi

# shellcheck source=../lib/mpibed.sh
source "$scripts/lib/mpibed.sh"
cleanup() { nbm_bed_down; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
# One switch, the root of one group per case (a fresh run each; epochs as a job would get them).
if nbm_bed_up "$work" "$switch" 11:0:4:3 12:0:8:4 13:0:4:5 14:0:8:6 15:0:4:7 16:0:4:8 17:4:4:9; then
  ok "switch ready: 8 ports, groups 11-17"
else
  bad "the bed did not come up"; finish
fi
sw_ns=$NBM_SW_NS h_ns=$NBM_H_NS ifaces=$NBM_IFACES sock=$NBM_SOCK

# launch KIND NP GROUP EPOCH TIMEOUT_MS OUT [MARK_AT MARK_FILE]: one mpirun in the host namespace.
launch() {
  local kind=$1 np=$2 group=$3 epoch=$4 tmo=$5 out=$6
  shift 6
  local envs=(NETBARRIER_EPOCH="$epoch" NETBARRIER_IFACE="${IFACES:-$ifaces}" NETBARRIER_TIMEOUT_MS="$tmo" NETBARRIER_VERBOSE=1)
  [ "$group" = - ] || envs+=(NETBARRIER_GROUP="$group")
  local e x=()
  for e in "${envs[@]}"; do x+=(-x "$e"); done
  case $kind in
    ompi-coll)
      ip netns exec "$h_ns" timeout -k 5 120 ${NOCAP:+setpriv --bounding-set -net_raw --inh-caps -net_raw} \
        "${ompi[@]}" -np "$np" -x OMPI_MCA_mca_base_component_path="$ompi_dirs:$B" \
        "${x[@]}" "$B/nb_mpi_test-openmpi" "$barriers" "$out" "$RANDOM" "$@" ;;
    ompi-pmpi)
      ip netns exec "$h_ns" timeout -k 5 120 "${ompi[@]}" -np "$np" "${x[@]}" -x LD_PRELOAD="$B/libnbpmpi-openmpi.so" \
        "$B/nb_mpi_test-openmpi" "$barriers" "$out" "$RANDOM" "$@" ;;
    mpich-pmpi)
      x=()
      for e in "${envs[@]}"; do x+=(-genv "${e%%=*}" "${e#*=}"); done
      ip netns exec "$h_ns" timeout -k 5 120 mpiexec.mpich -n "$np" -iface lo "${x[@]}" \
        -genv LD_PRELOAD "$B/libnbpmpi-mpich.so" "$B/nb_mpi_test-mpich" "$barriers" "$out" "$RANDOM" "$@" ;;
  esac
}
completions() { ip netns exec "$sw_ns" "$ctl" --socket "$sock" group show "$1" 2>/dev/null | awk '$1 == "completions:" {print $2}'; }

# run_case LABEL KIND NP GROUP EPOCH EXPECT [WHO]: a run with the switch up, checked.
run_case() {
  local label=$1 kind=$2 np=$3 group=$4 epoch=$5 expect=$6 who=${7:-}
  local out=$work/$label s e rc=0
  s=$(date +%s.%N)
  launch "$kind" "$np" "$group" "$epoch" "${8:-5000}" "$out" > "$out.log" 2>&1 || rc=$?
  e=$(date +%s.%N)
  local secs
  secs=$(printf '%.1f' "$(echo "$e - $s" | bc)")
  if [ "$rc" -ne 0 ]; then bad "$label: mpirun exited $rc after ${secs}s:"; tail -n 15 "$out.log"; return; fi
  local fw=
  [ "$expect" = fallback ] && fw=--fallback-warnings
  if python3 "$checker" --np "$np" --barriers "$barriers" --log "$out.log" --expect "$expect" $fw "$out" > "$out.check" 2>&1; then
    ok "$label: ${secs}s: $(sed 's/^check_mpi_stamps: OK: //' "$out.check")"
  else
    bad "$label ($kind -np $np group $group): ${secs}s:"; cat "$out.check"; grep -m5 'netbarrier' "$out.log"
  fi
  if [ -n "$who" ]; then
    local n
    n=$(grep -c "netbarrier: $who: rank [0-9]*: summary:" "$out.log")
    if [ "$n" = "$np" ]; then ok "$label: served by $who on all $np ranks"; else bad "$label: $n of $np summaries from $who"; fi
  fi
  if [ "$expect" = in-network ]; then
    local c
    c=$(completions "$group")
    if [ "$c" = "$barriers" ]; then ok "$label: the switch completed group $group's $c barriers"; else bad "$label: switch completions of group $group: '$c', expected $barriers"; fi
  fi
}

run_case ompi-coll-4 ompi-coll 4 11 3 in-network coll/netbarrier
run_case ompi-coll-8 ompi-coll 8 12 4 in-network coll/netbarrier
run_case mpich-pmpi-4 mpich-pmpi 4 13 5 in-network libnbpmpi
run_case mpich-pmpi-8 mpich-pmpi 8 14 6 in-network libnbpmpi
run_case ompi-pmpi-4 ompi-pmpi 4 15 7 in-network libnbpmpi
# A group the switch does not have: nothing is ever released; every rank times out at barrier 0.
run_case missing-group ompi-coll 4 99 1 fallback coll/netbarrier 1500
# Not a netbarrier job: no NETBARRIER_GROUP, the component and the library stay silent.
barriers_saved=$barriers; barriers=300
run_case no-group-coll ompi-coll 4 - 1 software
run_case no-group-mpich mpich-pmpi 4 - 1 software
# No CAP_NET_RAW (mpirun and its ranks without it): no leaf opens, one warning each.
NOCAP=1 run_case no-cap-net-raw ompi-coll 4 11 3 not-served
barriers=$barriers_saved

# The switch SIGKILLed mid-run (last: the switch is gone afterwards), under two jobs at once:
# Open MPI's component on ports 0-3 (group 16) and MPICH's PMPI library on ports 4-7 (group 17).
s=$(date +%s.%N)
launch ompi-coll 4 16 8 3000 "$work/killed-coll" $((barriers / 3)) "$work/killed-coll.mark" > "$work/killed-coll.log" 2>&1 &
mp1=$!
IFACES=nbmr4,nbmr5,nbmr6,nbmr7 launch mpich-pmpi 4 17 9 3000 "$work/killed-mpich" $((barriers / 3)) "$work/killed-mpich.mark" \
  > "$work/killed-mpich.log" 2>&1 &
mp2=$!
for _ in $(seq 1200); do
  [ -e "$work/killed-coll.mark" ] && [ -e "$work/killed-mpich.mark" ] && break
  kill -0 $mp1 2>/dev/null || kill -0 $mp2 2>/dev/null || break
  sleep 0.05
done
if [ -e "$work/killed-coll.mark" ] && [ -e "$work/killed-mpich.mark" ]; then
  nbm_bed_kill_switch
  for c in coll:$mp1 mpich:$mp2; do
    label=switch-killed-${c%%:*} out=$work/killed-${c%%:*}
    rc=0; wait "${c#*:}" || rc=$?
    secs=$(printf '%.1f' "$(echo "$(date +%s.%N) - $s" | bc)")
    if [ "$rc" -ne 0 ]; then bad "$label: mpirun exited $rc after ${secs}s:"; tail -n 15 "$out.log"
    elif python3 "$checker" --np 4 --barriers "$barriers" --log "$out.log" --expect fallback --fallback-warnings \
         --fallback-from $((barriers / 3)) "$out" > "$out.check" 2>&1; then
      ok "$label: ${secs}s: switch killed once both runs passed barrier $((barriers / 3)); $(sed 's/^check_mpi_stamps: OK: //' "$out.check")"
      grep -m1 'warning' "$out.log" | cut -c1-220
    else
      bad "$label: ${secs}s:"; cat "$out.check"; grep -m8 'netbarrier' "$out.log"
    fi
  done
else
  bad "switch-killed: the runs never reached barrier $((barriers / 3)):"; tail -n 5 "$work/killed-coll.log" "$work/killed-mpich.log"
  kill $mp1 $mp2 2>/dev/null; wait $mp1 $mp2
fi
echo "$name: $(( $(date +%s) - t0 )) s"
finish
