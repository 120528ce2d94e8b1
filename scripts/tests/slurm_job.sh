#!/usr/bin/env bash
# A job gets its own run of a barrier group, through a real Slurm (Debian's slurm-wlm 22.05:
# slurmctld and slurmd started by this test) and through `barrierctl job` alone.
#
# Inside a bed (scripts/lib/bed.sh: private /tmp, /run/netbarrier, /run/dpdk, network and PID
# namespaces, /etc an overlay; every process dies with it) the bed's network namespace is the
# compute node: munged, slurmctld and slurmd (auth/munge, a key of its own) run there on lo, and it owns the leaves' interfaces nbsh0
# and nbsh1, veths to the ports p0 and p1 of a barrier-switch (DPDK net_af_packet) in the
# namespace nbs-sw. /etc/slurm/slurm.conf names scripts/slurm/prolog.sh as PrologSlurmctld,
# epilog.sh as EpilogSlurmctld and task_prolog.sh as TaskProlog; /etc/netbarrier/slurm.conf is
# the site configuration (topology, socket, groups 300-301, state file, node -> h0:nbsh0,h1:nbsh1).
#
#  (a) srun -n 2: each task's barrier-leaf runs on the group, epoch and interface TaskProlog
#      exported; 300 barriers complete, none released early (check_records.py); the group is
#      gone from the switch after the job;
#  (b) a second job on the same number gets another, later epoch, and leaves nothing either;
#  (c) sbatch, one leaf waiting at barrier 0 for a rank that never comes; scancel: the group is
#      gone, no leaf is left running, the state file has no open run;
#  (d) barrierctl job -- CMD without Slurm: two leaves complete; a failing command's status is
#      returned (7); a command ended by SIGTERM to barrierctl gives 143; each time the group is
#      gone; a barrierctl killed with SIGKILL leaves the group, and `--cleanup` removes it;
#  (e) a run left open by a job whose epilog never ran (a job id Slurm does not know) is deleted
#      by the next job's prolog, which then gets that number.
#
# Needs root, slurmctld/slurmd (scripts/setup.sh installs slurm-wlm), and built barrier-switch,
# barrier-leaf and barrierctl (target/, or BARRIER_SWITCH, BARRIER_LEAF, BARRIERCTL); without
# them it says "skipped", and fails instead when NB_REQUIRE_BINARIES=1.
# Prints "slurm_job: N passed, M failed"; exits non-zero on a failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

inside() {
  local sw=$1 leaf=$2 ctl=$3
  local T=/tmp/nbs S=/run/netbarrier/nbs-root.sock node ok=0 bad=0
  node=$(hostname -s)
  pass() { ok=$((ok + 1)); echo "  ok: $1"; }
  fail() { bad=$((bad + 1)); echo "  FAILED: $1"; }
  # (global: the EXIT trap runs after this function has returned)
  pids=()
  cleanup() {
    local p
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    ip netns del nbs-sw 2>/dev/null
  }
  trap cleanup EXIT
  mkdir -p "$T/slurm/state" "$T/slurm/spool" "$T/rec" /etc/netbarrier /etc/slurm

  # --- the switch and the node's interfaces ---
  ip netns add nbs-sw
  for i in 0 1; do
    ip link add "nbsh$i" type veth peer name "p$i" netns nbs-sw
    sysctl -qw "net.ipv6.conf.nbsh$i.disable_ipv6=1"
    ip link set "nbsh$i" up
    ip -n nbs-sw link set "p$i" up
  done
  ip netns exec nbs-sw sysctl -qw net.ipv6.conf.all.disable_ipv6=1
  cat > "$T/sw.toml" <<EOF
[eal]
args = ["--lcores", "0@(0-$(($(nproc) - 1)))", "--no-huge", "-m", "256", "--no-shconf", "--file-prefix", "nbs", "--no-pci", "--iova-mode=va", "--no-telemetry"]

[[ports]]
name = "p0"
vdev = "net_af_packet0,iface=p0"

[[ports]]
name = "p1"
vdev = "net_af_packet1,iface=p1"

[lcores]
scheduler = 0
shared = true
idle = "sleep"
rx = [ { lcore = 0, poll = ["p0", "p1"] } ]

[control]
socket = "$S"
capacity = 512
EOF
  ip netns exec nbs-sw "$sw" run --config "$T/sw.toml" > "$T/sw.log" 2>&1 &
  pids+=($!)
  local i
  for ((i = 0; i < 300; i++)); do
    grep -q '^barrier-switch: ready' "$T/sw.log" && break
    sleep 0.1
  done
  if ! grep -q '^barrier-switch: ready' "$T/sw.log"; then
    fail "barrier-switch did not start"; tail -n 20 "$T/sw.log"
    echo "slurm_job: $ok passed, $((bad)) failed"; return 1
  fi
  cat > "$T/topo.toml" <<'EOF'
[[switches]]
name = "root"
[[hosts]]
name = "h0"
[[hosts]]
name = "h1"
[[links]]
a = "h0:nbsh0"
b = "root:p0"
[[links]]
a = "h1:nbsh1"
b = "root:p1"
EOF

  # --- Slurm: the site configuration, slurm.conf, the daemons ---
  # The daemons bind with getaddrinfo(AI_ADDRCONFIG), which finds nothing in a namespace with
  # only lo: a management link with an address (the node's Ethernet), here a veth pair.
  ip link add nbsm0 type veth peer name nbsm1
  ip addr add 10.251.0.1/24 dev nbsm0
  ip link set nbsm0 up
  ip link set nbsm1 up
  cat > /etc/netbarrier/slurm.conf <<EOF
NB_BARRIERCTL=$ctl
NB_TOPOLOGY=$T/topo.toml
NB_SOCKETS=root=$S
NB_GROUPS=300-301
NB_STATE=$T/slurm-jobs.json
NB_PARTITIONS=""
NB_LOG=$T/netbarrier-slurm.log
NB_NODES="$node=h0:nbsh0,h1:nbsh1"
EOF
  # MUNGE, as a site runs Slurm: its own key and daemon here (the socket in a folder every user
  # can reach, the key and the log in one only root can).
  mkdir -p "$T/munge" && chmod 0755 "$T/munge" && mkdir -m 0700 "$T/munge/etc"
  mungekey --create --keyfile="$T/munge/etc/munge.key" > "$T/munge/mungekey.out" 2>&1
  munged --foreground --key-file="$T/munge/etc/munge.key" --socket="$T/munge/munge.sock" \
    --pid-file="$T/munge/munged.pid" --seed-file="$T/munge/etc/seed" \
    --log-file="$T/munge/etc/munged.log" > "$T/munge/munged.out" 2>&1 &
  pids+=($!)
  for ((i = 0; i < 100; i++)); do [ -S "$T/munge/munge.sock" ] && break; sleep 0.05; done
  if munge -S "$T/munge/munge.sock" -n 2>/dev/null | unmunge -S "$T/munge/munge.sock" >/dev/null 2>&1; then
    pass "munged up: a credential made and checked"
  else
    fail "munged not up"; cat "$T/munge/"*.out "$T/munge/etc/munged.log" 2>/dev/null | tail -n 10
  fi
  cat > /etc/slurm/slurm.conf <<EOF
ClusterName=nbs
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$T/slurm/state
SlurmdSpoolDir=$T/slurm/spool
SlurmctldPidFile=$T/slurm/slurmctld.pid
SlurmdPidFile=$T/slurm/slurmd.pid
SlurmctldLogFile=$T/slurm/slurmctld.log
SlurmdLogFile=$T/slurm/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=2
InactiveLimit=0
PrologSlurmctld=$repo/scripts/slurm/prolog.sh
EpilogSlurmctld=$repo/scripts/slurm/epilog.sh
TaskProlog=$repo/scripts/slurm/task_prolog.sh
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=nbs Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  slurmctld -D -i > "$T/slurm/slurmctld.out" 2>&1 &
  pids+=($!)
  slurmd -D -N "$node" > "$T/slurm/slurmd.out" 2>&1 &
  pids+=($!)
  local st=""
  for ((i = 0; i < 300; i++)); do
    st=$(sinfo -h -N -o %t 2>/dev/null | head -n1)
    [ "$st" = idle ] && break
    sleep 0.1
  done
  if [ "$st" = idle ]; then pass "slurmctld and slurmd up, node $node idle"; else
    fail "Slurm not up (node state \"$st\")"
    tail -n 20 "$T/slurm/slurmctld.log" "$T/slurm/slurmd.log" "$T/slurm/"*.out
    echo "slurm_job: $ok passed, $bad failed"; return 1
  fi

  # gone G: wait (10 s) until the switch has no group G; true when gone.
  gone() {
    local j
    for ((j = 0; j < 100; j++)); do
      if ! "$ctl" --socket "$S" group show "$1" > /dev/null 2>&1; then return 0; fi
      sleep 0.1
    done
    return 1
  }
  # no_groups: the switch has no group at all.
  no_groups() { "$ctl" --socket "$S" groups | tail -n1 | grep -q '^0 group(s) configured'; }
  open_runs() { "$ctl" job --state "$1" --list | tail -n1; }

  # --- (a) a job's tasks run their leaves on the group TaskProlog gave them ---
  local leafcmd
  # shellcheck disable=SC2016
  leafcmd='echo "env $SLURM_PROCID $SLURM_LOCALID ${NETBARRIER_GROUP:-none} ${NETBARRIER_EPOCH:-none} ${NETBARRIER_IFACE:-none}"; exec "$0" --iface "$NETBARRIER_IFACE" --group "$NETBARRIER_GROUP" --epoch "$NETBARRIER_EPOCH" --count "$1" --quiet --records "$2-$SLURM_PROCID.csv" > /dev/null'
  run_job() { # NAME COUNT: srun -n 2 of the leaf; sets out, rc, group, epoch
    out=$(timeout 60 srun -N1 -n2 --ntasks-per-node=2 -J "nbs-$1" bash -c "$leafcmd" "$leaf" "$2" "$T/rec/$1" 2>&1)
    rc=$?
    group=$(awk '$1 == "env" { print $4; exit }' <<< "$out")
    epoch=$(awk '$1 == "env" { print $5; exit }' <<< "$out")
  }
  local out rc group epoch g1 e1
  run_job a 300
  if [ "$rc" -eq 0 ]; then pass "(a) srun -n 2: both leaves ran 300 barriers"; else fail "(a) srun exit $rc: $out"; fi
  local envs
  envs=$(grep '^env ' <<< "$out" | sort)
  if [ "$(wc -l <<< "$envs")" -eq 2 ] && [ "$(awk '{print $4, $5}' <<< "$envs" | sort -u | wc -l)" -eq 1 ] \
    && grep -qx "env 0 0 $group $epoch nbsh0" <<< "$envs" && grep -qx "env 1 1 $group $epoch nbsh1" <<< "$envs" \
    && [ "$group" -ge 300 ] && [ "$group" -le 301 ] && [ "$epoch" -gt 1 ]; then
    pass "(a) TaskProlog: group $group epoch $epoch, nbsh0 for local rank 0, nbsh1 for 1"
  else fail "(a) task environments: $envs"; fi
  if python3 "$repo/scripts/tools/check_records.py" --expect 300 "$T/rec/a-0.csv" "$T/rec/a-1.csv" > "$T/check-a.txt" 2>&1; then
    pass "(a) records: 300 barriers, no early release"
  else fail "(a) records: $(tail -n 5 "$T/check-a.txt")"; fi
  if gone "$group" && no_groups; then pass "(a) group $group gone after the job"; else fail "(a) group $group left on the switch"; fi
  if grep -q "prolog (job 1): group $group epoch $epoch for members h0,h1" "$T/netbarrier-slurm.log" \
    && grep -q "epilog (job 1): job 1: group $group (epoch $epoch) deleted on every switch of its tree" "$T/netbarrier-slurm.log"; then
    pass "(a) NB_LOG has the prolog's and the epilog's lines"
  else fail "(a) NB_LOG: $(cat "$T/netbarrier-slurm.log")"; fi
  g1=$group e1=$epoch

  # --- (b) the next job: a new, later epoch ---
  run_job b 50
  if [ "$rc" -eq 0 ] && [ "$group" = "$g1" ] && [ "$epoch" -gt "$e1" ]; then
    pass "(b) second job: group $group again, epoch $epoch after $e1"
  else fail "(b) second job: exit $rc group $group epoch $epoch (first: $g1 $e1): $out"; fi
  if gone "$group" && no_groups; then pass "(b) group $group gone after the job"; else fail "(b) group $group left"; fi
  if [ "$(open_runs "$T/slurm-jobs.json")" = "0 open run(s)" ]; then pass "(a, b) no open run in the state file"; else fail "(a, b) $(open_runs "$T/slurm-jobs.json")"; fi

  # --- (c) scancel while a leaf waits ---
  cat > "$T/wait.sh" <<EOF
#!/bin/bash
#SBATCH -N1 -n2 --ntasks-per-node=2 -o $T/c-%j.out -J nbs-c
srun bash -c 'if [ "\$SLURM_PROCID" = 0 ]; then exec $leaf --iface "\$NETBARRIER_IFACE" --group "\$NETBARRIER_GROUP" --epoch "\$NETBARRIER_EPOCH" --count 5 --timeout-us 300000000 --quiet; else exec sleep 300; fi'
EOF
  local jid comment waiting=""
  jid=$(sbatch --parsable "$T/wait.sh")
  for ((i = 0; i < 300; i++)); do
    comment=$(scontrol show job -o "$jid" 2>/dev/null | grep -o 'AdminComment=netbarrier:group=[0-9]*:epoch=[0-9]*')
    if [ -n "$comment" ]; then
      group=$(sed 's/.*group=\([0-9]*\):.*/\1/' <<< "$comment")
      if "$ctl" --socket "$S" group show "$group" 2>/dev/null | grep -q 'arrived: *1 of 2'; then waiting=1; break; fi
    fi
    sleep 0.1
  done
  if [ -n "$waiting" ]; then pass "(c) job $jid: its leaf waits at barrier 0 of group $group"; else
    fail "(c) job $jid never had a waiting leaf ($comment)"; scontrol show job "$jid"; fi
  scancel "$jid"
  local left=1
  for ((i = 0; i < 150; i++)); do
    if [ -z "$(squeue -h -j "$jid" 2>/dev/null)" ] && ! pgrep -x barrier-leaf > /dev/null && ! pgrep -x sleep > /dev/null; then left=""; break; fi
    sleep 0.1
  done
  if [ -z "$left" ]; then pass "(c) scancel: the job and its tasks are gone"; else fail "(c) after scancel: $(squeue -h -j "$jid") $(pgrep -a -x barrier-leaf)"; fi
  if gone "$group" && no_groups && [ "$(open_runs "$T/slurm-jobs.json")" = "0 open run(s)" ]; then
    pass "(c) scancel: group $group gone, no open run"
  else fail "(c) after scancel: group $group or a run left: $(open_runs "$T/slurm-jobs.json")"; tail -n 20 "$T/slurm/slurmctld.log"; fi

  # --- (e) a group whose epilog never ran (a job Slurm no longer knows): the next prolog deletes it ---
  "$ctl" job --start 99999 --state "$T/slurm-jobs.json" --topology "$T/topo.toml" --members h0,h1 \
    --sockets "root=$S" --groups 300-301 > /dev/null
  if "$ctl" --socket "$S" group show 300 > /dev/null 2>&1; then
    run_job e 20
    if [ "$rc" -eq 0 ] && [ "$group" = 300 ] && gone 300 && no_groups \
      && [ "$(open_runs "$T/slurm-jobs.json")" = "0 open run(s)" ]; then
      pass "(e) the prolog deleted ended job 99999's group 300; the new job got 300 and left nothing"
    else fail "(e) leftover of job 99999: exit $rc group $group; $(open_runs "$T/slurm-jobs.json")"; fi
  else fail "(e) barrierctl job --start 99999 did not create group 300"; fi

  # --- (d) barrierctl job -- CMD, without Slurm ---
  local W=$T/wrap.json
  # (an array, not a function: `job ... &` would put a subshell between $! and barrierctl)
  local job=("$ctl" job --topology "$T/topo.toml" --members h0,h1 --sockets "root=$S" --groups 310-311
    --iface nbsh0,nbsh1 --state "$W" --)
  # shellcheck disable=SC2016
  "${job[@]}" bash -c 'IFS=, read -r a b <<< "$NETBARRIER_IFACE"; echo "$NETBARRIER_GROUP $NETBARRIER_EPOCH" > '"$T"'/d.env
    "$0" --iface "$a" --group "$NETBARRIER_GROUP" --epoch "$NETBARRIER_EPOCH" --count 200 --quiet > /dev/null & p=$!
    "$0" --iface "$b" --group "$NETBARRIER_GROUP" --epoch "$NETBARRIER_EPOCH" --count 200 --quiet > /dev/null; r=$?
    wait $p && exit $r' "$leaf" > "$T/d1.out" 2>&1
  rc=$?
  read -r group epoch < "$T/d.env"
  if [ "$rc" -eq 0 ] && gone "$group" && no_groups; then pass "(d) barrierctl job: two leaves, 200 barriers in group $group epoch $epoch; group gone"; else
    fail "(d) barrierctl job: exit $rc: $(cat "$T/d1.out")"; fi
  "${job[@]}" bash -c 'echo "$NETBARRIER_GROUP $NETBARRIER_EPOCH" > '"$T"'/d.env; exit 7' > "$T/d2.out" 2>&1
  rc=$?
  local e_prev=$epoch
  read -r group epoch < "$T/d.env"
  if [ "$rc" -eq 7 ] && [ "$epoch" -gt "$e_prev" ] && gone "$group" && no_groups; then
    pass "(d) a failing command: its status 7, a new epoch ($epoch), group gone"
  else fail "(d) failing command: exit $rc epoch $epoch: $(cat "$T/d2.out")"; fi
  rm -f "$T/d.env"
  "${job[@]}" bash -c 'echo "$NETBARRIER_GROUP $NETBARRIER_EPOCH" > '"$T"'/d.env; exec sleep 300' > "$T/d3.out" 2>&1 &
  local jp=$!
  for ((i = 0; i < 100; i++)); do [ -s "$T/d.env" ] && break; sleep 0.1; done
  read -r group epoch < "$T/d.env"
  kill -TERM "$jp"
  wait "$jp"
  rc=$?
  if [ "$rc" -eq 143 ] && gone "$group" && no_groups && ! pgrep -x sleep > /dev/null; then
    pass "(d) SIGTERM to barrierctl: forwarded (the command's 143), group gone"
  else fail "(d) SIGTERM: exit $rc: $(cat "$T/d3.out")"; fi
  rm -f "$T/d.env"
  "${job[@]}" bash -c 'echo "$NETBARRIER_GROUP $NETBARRIER_EPOCH" > '"$T"'/d.env; exec sleep 300' > "$T/d4.out" 2>&1 &
  jp=$!
  for ((i = 0; i < 100; i++)); do [ -s "$T/d.env" ] && break; sleep 0.1; done
  read -r group epoch < "$T/d.env"
  local orphan
  orphan=$(pgrep -P "$jp" -x sleep)
  kill -KILL "$jp"
  wait "$jp" 2>/dev/null
  if "$ctl" --socket "$S" group show "$group" > /dev/null 2>&1 && open_runs "$W" | grep -q '^1 open run'; then
    pass "(d) barrierctl killed with SIGKILL: group $group stays, its run is open"
  else fail "(d) SIGKILL: group $group not there, or no open run"; fi
  [ -n "$orphan" ] && kill -TERM "$orphan"
  if "$ctl" job --state "$W" --cleanup | grep -q '^1 leftover run(s) cleaned up, 0 failed' && gone "$group" && no_groups; then
    pass "(d) barrierctl job --cleanup: group $group deleted"
  else fail "(d) --cleanup left group $group"; fi

  echo "slurm_job: $ok passed, $bad failed"
  [ "$bad" -eq 0 ]
}

if [ "${1:-}" = --inside ]; then
  shift
  inside "$@"
  exit $?
fi

if [ "$(id -u)" -ne 0 ]; then
  if [ "${NB_REQUIRE_ROOT:-0}" = 1 ]; then echo "slurm_job: 0 passed, 1 failed (needs root)"; exit 1; fi
  echo "slurm_job: skipped: needs root"; exit 0
fi
skip() {
  if [ "${NB_REQUIRE_BINARIES:-0}" = 1 ]; then echo "slurm_job: 0 passed, 1 failed ($1)"; exit 1; fi
  echo "slurm_job: skipped: $1"; exit 0
}
command -v slurmctld > /dev/null && command -v slurmd > /dev/null || skip "no slurmctld/slurmd (scripts/setup.sh installs slurm-wlm)"
# shellcheck source=../lib/netns.sh
source "$here/../lib/netns.sh"
# shellcheck source=../lib/bed.sh
source "$here/../lib/bed.sh"
sw=${BARRIER_SWITCH:-$(nb_find_program barrier-switch)} || skip "barrier-switch not built"
leaf=${BARRIER_LEAF:-$(nb_find_program barrier-leaf)} || skip "barrier-leaf not built"
ctl=${BARRIERCTL:-$(nb_find_program barrierctl)} || skip "barrierctl not built"
mkdir -p "$repo/target"
work=$(mktemp -d "$repo/target/nbs-slurm-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "slurm_job: $sw, $leaf, $ctl"
nb_bed_run "$work/bed" "" 170 "$here/slurm_job.sh" --inside "$sw" "$leaf" "$ctl"
rc=$?
case $rc in
  0) ;;
  124 | 137) echo "slurm_job: 0 passed, 1 failed (timed out after 170 s)" ;;
esac
exit "$rc"
