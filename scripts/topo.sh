#!/usr/bin/env bash
# A barrier tree as separate processes over real (virtual) Ethernet: one network namespace per
# switch and per leaf, veth pairs for the links, `barrier-switch run --config` in each switch
# namespace on DPDK net_af_packet ports (or `barrier-xdp run --config`, the XDP switch, on the
# switches of --xdp), `barrier-leaf` in each leaf namespace, link faults from the eBPF tc
# program (scripts/bpf) on every link or chosen ones. After the leaves finish, their
# records are checked: every barrier completed, and no leaf was released before the last leaf
# arrived. Everything is torn down on exit, failure or interruption. Needs root.
#
# usage: scripts/topo.sh [options]
#   --fanout LIST       children per level, root first (default 2,2: a root, 2 intermediate
#                       switches, 4 leaves; "4" is a root with 4 leaves)
#   --barriers N        barriers each leaf runs (default 1000)
#   --group G           barrier group number (default 1)
#   --loss P --dup P --corrupt P
#                       fault probabilities per frame, per link direction (default 0)
#   --corrupt-offset N  corrupt only header byte N (default: a random header byte; 14, the magic,
#                       is one every parser rejects; see docs/faults.md on the others)
#   --corrupt-xor 0xNN  what a corruption XORs into the byte (default 0xFF)
#   --links LIST        faults only on the links above these nodes (e.g. s1,l1.2); default all
#   --resend-us US      intermediate switches' re-send timeout (default 1000)
#   --switch CMD        the switch command (default: barrier-switch built in target/, or PATH)
#   --xdp LIST          these switches run barrier-xdp, the XDP switch, instead (e.g. s1,s2 for
#                       a mixed tree, or all); the veth end facing an XDP switch's port gets
#                       an XDP_PASS program (without an XDP receive path there, veth drops
#                       what the switch sends). Faults on a link with an XDP end are all on the
#                       other end, egress and ingress (tc does not see what the XDP program
#                       sends): that end must be a leaf, or the link needs --linkemu (faults
#                       then on the emulator's two ports); see docs/faults.md
#   --xdp-cmd CMD       the XDP switch command (default: barrier-xdp built in target/, or PATH)
#   --xdp-mode MODE     the XDP switches' xdp.mode: native (default) or generic
#                       (TOPO_NO_XDP_PASS=1 in the environment leaves the XDP_PASS programs
#                       out, to show what they are for: the XDP switches' frames are lost)
#   --leaf CMD          the leaf command (default: barrier-leaf built in target/, or PATH)
#   --leaf-args ARGS    extra arguments for every leaf
#   --switch-lcores 1|2 1: RX and scheduler share one lcore (default); 2: one lcore each
#   --switch-idle MODE  the switches' idle policy (lcores.idle): spin, yield, sleep or sleep:US;
#                       default auto: sleep when the switches' loops outnumber the CPUs (a
#                       spinning switch would hold a CPU the next hop needs), else spin
#   --restart LIST      while the leaves run, SIGKILL these switches (e.g. s,s1) and start each
#                       again at once, one after the other, waiting for its ready line each time
#                       (DPDK or XDP switches: a killed XDP switch's program goes with it)
#   --restarts N        kill and restart each switch of --restart N times (default 20); the
#                       leaves must still be running after the last one (raise --barriers)
#   --restart-gap-ms MS pause after a restarted switch is ready before the next kill (default 200)
#   --first-job N       before the main run, run a job of N barriers on the same group and the
#                       same switches (issue 10, case 5: a new job on a reused group number);
#                       then reset the group on every switch to a new epoch with barrierctl
#                       (root first) and run the main job in it
#   --same-epoch        with --first-job: no reset, the main job reuses the first job's epoch
#   --fail-after-ms N   every switch declares a child failed (aborts the group) when it has not
#                       reported a barrier N ms after its first sibling (docs/protocol.md)
#                       (outside the protocol's assumptions: shows what an epoch prevents)
#   --leaf-stagger-ms MS  start the main job's leaves MS apart (default 0: together)
#   --barrierctl CMD    the barrierctl command (default: built in target/, or PATH)
#   --supervise         keep the tree when a member dies: a switch or leaf that exits is
#                       reported (time, status, in events.log) and the run goes on; the records
#                       of every job are checked at the end, a leaf that did not finish its
#                       barriers counting as ended early (check_records.py --ended-early)
#   --event T:ACTION[:NODE]  (with --supervise; repeatable) at T seconds after the leaves start:
#                       kill:NODE     SIGKILL a switch or leaf, no restart
#                       restart:NODE  SIGKILL a switch and start it again at once (its state
#                                     is lost), wait for its ready line
#                       start:NODE    start a switch killed before
#                       down:NODE, up:NODE  set the link above NODE down/up (both veth ends)
#                       newjob        a new job on the group: stop every leaf still running
#                                     (SIGTERM), reset the group to the next epoch on every
#                                     switch (barrierctl, root first), start every leaf
#                                     again in it from sequence 0 (records/epoch<N>/)
#   --linkemu LIST      put the link emulator (barrier-linkemu, dataplane/testbed) in the middle
#                       of the links above these nodes (e.g. s1,s2): a namespace e<node> between
#                       the two ends, the emulator's two net_af_packet ports on its veths
#   --linkemu-args ARGS its options (e.g. "--delay-us 200 --jitter-us 150 --reorder 0.1");
#                       its counters at exit go to linkemu-<node>.log/.json
#   --linkemu-cmd CMD   the emulator command (default: built in target/, or PATH)
#   --telemetry         the switches serve DPDK telemetry (/var/run/dpdk/<namespace>/
#                       dpdk_telemetry.v2; scripts/soak.sh samples it)
#   --duration S        (with --supervise) stop the leaves (SIGTERM) S seconds after they
#                       start; the run's length, with --barriers set high
#   --timeout S         give the leaves this long to finish (default 300)
#   --out DIR           keep configs, logs and records in DIR
#   --verbose           print the leaves' summaries and the switches' final counters
#   --dry-run           build the namespaces, links, faults and configs, print them, stop
#   --cleanup-stale     remove namespaces and interfaces left by killed runs, then exit
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root_dir=$(dirname "$here")
# shellcheck source=lib/netns.sh
source "$here/lib/netns.sh"

fanout=2,2 barriers=1000 group=1 loss=0 dup=0 corrupt=0 corrupt_offset=-1 corrupt_xor=0xFF links=all resend_us=1000
supervise=0 telemetry=0 linkemu_list="" linkemu_args="" linkemu_cmd="" events=() duration_s=0 restart_list="" restarts=20 restart_gap_ms=200 first_job=0 same_epoch=0 leaf_stagger_ms=0 ctl_cmd=""
xdp_list="" xdp_cmd="" xdp_mode=native
switch_cmd="" leaf_cmd="" leaf_args="" switch_lcores=1 switch_idle=auto timeout_s=300 out_dir="" dry_run=0 verbose=0

usage() { awk 'NR >= 9 && !/^#/ { exit } NR >= 9 { sub(/^# ?/, ""); print }' "$0"; }
while [ $# -gt 0 ]; do
  case $1 in
    --fanout) fanout=${2:?}; shift 2 ;;
    --barriers) barriers=${2:?}; shift 2 ;;
    --group) group=${2:?}; shift 2 ;;
    --loss) loss=${2:?}; shift 2 ;;
    --dup) dup=${2:?}; shift 2 ;;
    --corrupt) corrupt=${2:?}; shift 2 ;;
    --links) links=${2:?}; shift 2 ;;
    --corrupt-offset) corrupt_offset=${2:?}; shift 2 ;;
    --corrupt-xor) corrupt_xor=${2:?}; shift 2 ;;
    --resend-us) resend_us=${2:?}; shift 2 ;;
    --fail-after-ms) fail_after_ms=${2:?}; shift 2 ;;
    --switch) switch_cmd=${2:?}; shift 2 ;;
    --xdp) xdp_list=${2:?}; shift 2 ;;
    --xdp-cmd) xdp_cmd=${2:?}; shift 2 ;;
    --xdp-mode) xdp_mode=${2:?}; shift 2 ;;
    --leaf) leaf_cmd=${2:?}; shift 2 ;;
    --leaf-args) leaf_args=${2?}; shift 2 ;;
    --switch-lcores) switch_lcores=${2:?}; shift 2 ;;
    --switch-idle) switch_idle=${2:?}; shift 2 ;;
    --restart) restart_list=${2:?}; shift 2 ;;
    --restarts) restarts=${2:?}; shift 2 ;;
    --restart-gap-ms) restart_gap_ms=${2:?}; shift 2 ;;
    --first-job) first_job=${2:?}; shift 2 ;;
    --same-epoch) same_epoch=1; shift ;;
    --leaf-stagger-ms) leaf_stagger_ms=${2:?}; shift 2 ;;
    --barrierctl) ctl_cmd=${2:?}; shift 2 ;;
    --supervise) supervise=1; shift ;;
    --event) events+=("${2:?}"); shift 2 ;;
    --duration) duration_s=${2:?}; shift 2 ;;
    --telemetry) telemetry=1; shift ;;
    --linkemu) linkemu_list=${2:?}; shift 2 ;;
    --linkemu-args) linkemu_args=${2?}; shift 2 ;;
    --linkemu-cmd) linkemu_cmd=${2:?}; shift 2 ;;
    --timeout) timeout_s=${2:?}; shift 2 ;;
    --out) out_dir=${2:?}; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --verbose) verbose=1; shift ;;
    --cleanup-stale) cleanup_stale=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "topo.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done

if [ "${cleanup_stale:-0}" = 1 ]; then
  for name in $(nb_stale); do
    if ip netns list | awk '{print $1}' | grep -qx "$name"; then
      for pid in $(ip netns pids "$name"); do nb_stop "$pid" 2; done
      ip netns del "$name" && echo "removed namespace $name"
    else
      ip link del "$name" 2>/dev/null && echo "removed interface $name"
    fi
  done
  exit 0
fi

[[ $fanout =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "topo.sh: --fanout wants e.g. 2,2" >&2; exit 2; }
[[ $barriers =~ ^[1-9][0-9]*$ ]] || { echo "topo.sh: --barriers wants a positive number" >&2; exit 2; }
[[ $restarts =~ ^[1-9][0-9]*$ ]] || { echo "topo.sh: --restarts wants a positive number" >&2; exit 2; }
[[ $restart_gap_ms =~ ^[0-9]+$ ]] || { echo "topo.sh: --restart-gap-ms wants a number" >&2; exit 2; }
[[ $first_job =~ ^[0-9]+$ ]] || { echo "topo.sh: --first-job wants a number of barriers" >&2; exit 2; }
[[ $leaf_stagger_ms =~ ^[0-9]+$ ]] || { echo "topo.sh: --leaf-stagger-ms wants a number" >&2; exit 2; }
[[ $duration_s =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "topo.sh: --duration wants seconds" >&2; exit 2; }
if [ "$supervise" = 0 ] && { [ ${#events[@]} -gt 0 ] || [ "$duration_s" != 0 ]; }; then
  echo "topo.sh: --event and --duration need --supervise" >&2; exit 2
fi
[ "$supervise" = 1 ] && [ -n "$restart_list" ] && { echo "topo.sh: --restart is for unsupervised runs; use --event T:restart:NODE" >&2; exit 2; }
need_ctl=0
[ "$first_job" -gt 0 ] && [ "$same_epoch" = 0 ] && need_ctl=1
for e in "${events[@]}"; do
  [[ $e =~ ^[0-9]+(\.[0-9]+)?:(kill|restart|start|down|up):[a-z0-9.]+$|^[0-9]+(\.[0-9]+)?:newjob$ ]] \
    || { echo "topo.sh: --event '$e': want T:kill|restart|start|down|up:NODE or T:newjob" >&2; exit 2; }
  [[ $e == *:newjob ]] && need_ctl=1
done
[[ $xdp_mode =~ ^(native|generic)$ ]] || { echo "topo.sh: --xdp-mode is native or generic" >&2; exit 2; }
[[ $switch_lcores =~ ^[12]$ ]] || { echo "topo.sh: --switch-lcores is 1 or 2" >&2; exit 2; }
[[ $switch_idle =~ ^(auto|spin|yield|sleep(:[1-9][0-9]*)?)$ ]] || { echo "topo.sh: --switch-idle is auto, spin, yield, sleep or sleep:US" >&2; exit 2; }

if [ "$dry_run" = 0 ]; then
  [ -n "$switch_cmd" ] || switch_cmd=$(nb_find_program barrier-switch) \
    || { echo "topo.sh: barrier-switch not found (build it, or pass --switch CMD)" >&2; exit 2; }
  if [ -n "$xdp_list" ]; then
    [ -n "$xdp_cmd" ] || xdp_cmd=$(nb_find_program barrier-xdp) \
      || { echo "topo.sh: barrier-xdp not found (build it: cargo build -p barrier-xdp, or pass --xdp-cmd CMD)" >&2; exit 2; }
  fi
  [ -n "$leaf_cmd" ] || leaf_cmd=$(nb_find_program barrier-leaf) \
    || { echo "topo.sh: barrier-leaf not found (build it, or pass --leaf CMD)" >&2; exit 2; }
  if [ -n "$linkemu_list" ]; then
    [ -n "$linkemu_cmd" ] || linkemu_cmd=$(nb_find_program barrier-linkemu) \
      || { echo "topo.sh: barrier-linkemu not found (build it: cargo build -p barrier-testbed, or pass --linkemu-cmd CMD)" >&2; exit 2; }
  fi
  if [ "$need_ctl" = 1 ]; then
    [ -n "$ctl_cmd" ] || ctl_cmd=$(nb_find_program barrierctl) \
      || { echo "topo.sh: barrierctl not found (build it, or pass --barrierctl CMD)" >&2; exit 2; }
  fi
fi
read -ra ctl_argv <<<"$ctl_cmd"
read -ra switch_argv <<<"$switch_cmd"
read -ra xdp_argv <<<"$xdp_cmd"
read -ra leaf_argv <<<"$leaf_cmd"
read -ra leaf_extra <<<"$leaf_args"
read -ra linkemu_argv <<<"$linkemu_cmd"
read -ra linkemu_extra <<<"$linkemu_args"

nb_init
if [ "$telemetry" = 1 ]; then
  # DPDK's telemetry removes its socket at exit after the switch has tried to remove its empty
  # runtime folder (/var/run/dpdk/<file prefix>): the empty folders are removed here.
  rm_telemetry_dirs() { local n; for n in "${switches[@]}"; do rmdir "/var/run/dpdk/$(nb_ns "$n")" 2>/dev/null || true; done; }
  trap 'nb_cleanup; rm_telemetry_dirs' EXIT
fi
loss_ppm=$(nb_ppm "$loss")
dup_ppm=$(nb_ppm "$dup")
corrupt_ppm=$(nb_ppm "$corrupt")

# ---- the tree ----------------------------------------------------------------------------------
# Nodes are named by their path from the root: the root switch "s", its children "s1", "s2" (or
# "l1", "l2" when they are leaves), their children "s1.1", "l1.2", ... A parent reaches child k
# (1-based) through its port "d<k-1>"; every non-root node reaches its parent through "up".
IFS=, read -ra levels <<<"$fanout"
switches=() leaves=()
declare -A parent_of port_in_parent children_of
build_tree() { # NAME PATH DEPTH
  local name=$1 path=$2 depth=$3 k child cpath kind
  switches+=("$name")
  children_of[$name]=""
  for ((k = 1; k <= levels[depth]; k++)); do
    cpath=${path:+$path.}$k
    if ((depth + 1 == ${#levels[@]})); then kind=l; else kind=s; fi
    child=$kind$cpath
    parent_of[$child]=$name
    port_in_parent[$child]=d$((k - 1))
    children_of[$name]+="${children_of[$name]:+ }d$((k - 1))"
    if [ $kind = l ]; then leaves+=("$child"); else build_tree "$child" "$cpath" $((depth + 1)); fi
  done
}
build_tree s "" 0
nodes=("${switches[@]}" "${leaves[@]}")
IFS=, read -ra restart_nodes <<<"$restart_list"
for n in "${restart_nodes[@]}"; do
  [[ " ${switches[*]} " == *" $n "* ]] || { echo "topo.sh: --restart: no switch '$n' (switches: ${switches[*]})" >&2; exit 2; }
done
for e in "${events[@]}"; do
  IFS=: read -r _ act n <<<"$e"
  case $act in
    kill) [[ " ${nodes[*]} " == *" $n "* ]] || { echo "topo.sh: --event $e: no node '$n' (${nodes[*]})" >&2; exit 2; } ;;
    restart|start) [[ " ${switches[*]} " == *" $n "* ]] || { echo "topo.sh: --event $e: no switch '$n' (${switches[*]})" >&2; exit 2; } ;;
    down|up) [[ " ${nodes[*]} " == *" $n "* ]] && [ "$n" != s ] || { echo "topo.sh: --event $e: no link above '$n' (nodes ${nodes[*]}; the root has none)" >&2; exit 2; } ;;
  esac
done
declare -A is_xdp=()
if [ "$xdp_list" = all ]; then
  for n in "${switches[@]}"; do is_xdp[$n]=1; done
elif [ -n "$xdp_list" ]; then
  IFS=, read -ra xdp_nodes <<<"$xdp_list"
  for n in "${xdp_nodes[@]}"; do
    [[ " ${switches[*]} " == *" $n "* ]] || { echo "topo.sh: --xdp: no switch '$n' (switches: ${switches[*]}; or all)" >&2; exit 2; }
    is_xdp[$n]=1
  done
fi
# xdp NODE: true when NODE is a switch of --xdp (a barrier-xdp process); leaves are not.
xdp() { [ "${is_xdp[$1]:-0}" = 1 ]; }
dpdk_switches=()
for n in "${switches[@]}"; do xdp "$n" || dpdk_switches+=("$n"); done
nb_log "tree ${fanout}: switches ${switches[*]}; leaves ${leaves[*]}${xdp_list:+; XDP switches: ${!is_xdp[*]}}"
if [ "$switch_idle" = auto ]; then
  # Only the DPDK switches poll: an XDP switch runs in the kernel's receive path.
  if (( ${#dpdk_switches[@]} * switch_lcores > $(nproc) )); then switch_idle=sleep; else switch_idle=spin; fi
  nb_log "switch idle policy: $switch_idle ($((${#dpdk_switches[@]} * switch_lcores)) switch loops on $(nproc) CPUs)"
fi

IFS=, read -ra emu_nodes <<<"$linkemu_list"
for n in "${emu_nodes[@]}"; do
  [[ " ${nodes[*]} " == *" $n "* ]] && [ "$n" != s ] || { echo "topo.sh: --linkemu: no link above '$n' (nodes ${nodes[*]}; the root has none)" >&2; exit 2; }
done
for n in "${nodes[@]}"; do nb_netns_add "$n"; done
for n in "${nodes[@]}"; do
  [ "$n" = s ] && continue
  if [[ ",$linkemu_list," == *",$n,"* ]]; then
    # parent's port <-> a [emulator namespace e<n>] b <-> the node's up
    nb_netns_add "e$n"
    nb_veth "$(nb_ns "${parent_of[$n]}")" "${port_in_parent[$n]}" "$(nb_ns "e$n")" a
    nb_veth "$(nb_ns "e$n")" b "$(nb_ns "$n")" up
  else
    nb_veth "$(nb_ns "${parent_of[$n]}")" "${port_in_parent[$n]}" "$(nb_ns "$n")" up
  fi
done

# ---- XDP ports' peers ----------------------------------------------------------------------------
# A frame an XDP program sends (XDP_REDIRECT, XDP_TX) out of a veth end is queued for the peer's
# XDP receive path; veth takes it only when the peer has one: an XDP switch's port has its
# program; every other peer (a leaf's up, a DPDK switch's port, an emulator's port) gets an
# XDP_PASS program (scripts/bpf/xdp_pass.bpf.c), and the frame goes on to its stack. Without it
# every frame the XDP switch sends there is lost. (GRO on the peer is not enough: veth then
# delivers redirected frames but leaves XDP_TX ones, the answers to a stale reduce, on the ring.)
pass_ends=()
if [ ${#is_xdp[@]} -gt 0 ] && [ "${TOPO_NO_XDP_PASS:-0}" != 1 ]; then
  for n in "${nodes[@]}"; do
    [ "$n" = s ] && continue
    p=${parent_of[$n]}
    if [[ ",$linkemu_list," == *",$n,"* ]]; then
      if xdp "$p"; then nb_xdp_pass "$(nb_ns "e$n")" a; pass_ends+=("e$n/a"); fi
      if xdp "$n"; then nb_xdp_pass "$(nb_ns "e$n")" b; pass_ends+=("e$n/b"); fi
    else
      if xdp "$p" && ! xdp "$n"; then nb_xdp_pass "$(nb_ns "$n")" up; pass_ends+=("$n/up"); fi
      if xdp "$n" && ! xdp "$p"; then nb_xdp_pass "$(nb_ns "$p")" "${port_in_parent[$n]}"; pass_ends+=("$p/${port_in_parent[$n]}"); fi
    fi
  done
  nb_log "XDP_PASS on the peers of XDP switch ports: ${pass_ends[*]:-none}"
fi

# ---- faults ------------------------------------------------------------------------------------
# A link's faults apply in both directions: the program sits on the egress of both veth ends.
# An XDP switch's own frames skip its port's qdisc layer (no egress hook sees them), and its
# port's tc ingress runs after its program, so a link with an XDP end gets both directions on
# the other end: egress (towards the XDP switch) and ingress (from it; its XDP_PASS program,
# above, hands the frame to the stack, tc ingress first). That other end must read after tc ingress: a leaf does (its socket is
# bound to the barrier EtherType); a DPDK switch's net_af_packet socket (ETH_P_ALL, a tap) and
# an XDP switch's program read before it. Such a link takes faults through --linkemu: on the
# emulator's two ports' egress (it sends through the qdisc layer).
faulty_links=()
if [ "$loss_ppm$dup_ppm$corrupt_ppm" != 000 ]; then
  fault_opts=(--corrupt-offset "$corrupt_offset" --corrupt-xor "$corrupt_xor")
  for n in "${nodes[@]}"; do
    [ "$n" = s ] && continue
    if [ "$links" != all ] && [[ ",$links," != *",$n,"* ]]; then continue; fi
    p=${parent_of[$n]}
    if ! xdp "$p" && ! xdp "$n"; then
      nb_fault_attach "$(nb_ns "$p")" "${port_in_parent[$n]}" "$loss_ppm" "$dup_ppm" "$corrupt_ppm" "${fault_opts[@]}"
      nb_fault_attach "$(nb_ns "$n")" up "$loss_ppm" "$dup_ppm" "$corrupt_ppm" "${fault_opts[@]}"
      faulty_links+=("$p-$n")
    elif [[ ",$linkemu_list," == *",$n,"* ]]; then
      nb_fault_attach "$(nb_ns "e$n")" a "$loss_ppm" "$dup_ppm" "$corrupt_ppm" "${fault_opts[@]}"
      nb_fault_attach "$(nb_ns "e$n")" b "$loss_ppm" "$dup_ppm" "$corrupt_ppm" "${fault_opts[@]}"
      faulty_links+=("$p-$n(on the emulator)")
    elif [[ $n == l* ]]; then
      nb_fault_attach "$(nb_ns "$n")" up "$loss_ppm" "$dup_ppm" "$corrupt_ppm" "${fault_opts[@]}"
      nb_fault_attach "$(nb_ns "$n")" up "$loss_ppm" "$dup_ppm" "$corrupt_ppm" "${fault_opts[@]}" --ingress
      faulty_links+=("$p-$n(both on $n)")
    else
      other="DPDK switch $p (its net_af_packet socket taps frames before tc ingress)"
      { xdp "$p" && xdp "$n"; } && other="XDP switch $p (its program runs before tc ingress)"
      echo "topo.sh: --loss/--dup/--corrupt on the link $p-$n: XDP switch $n's frames skip tc egress," \
        "so their faults would be on the other end's tc ingress, and the other end is the $other." \
        "Add --linkemu $n (faults then go on the emulator's ports), or leave the link out with --links." >&2
      exit 2
    fi
  done
  nb_log "faults (loss ${loss_ppm}, dup ${dup_ppm}, corrupt ${corrupt_ppm} per million, each direction) on ${faulty_links[*]}"
fi

# ---- switch configuration ----------------------------------------------------------------------
# write_switch_config NAME FILE: the barrier-switch TOML (docs/configuration.md,
# dataplane/switch/src/config.rs) for switch NAME. Ports are DPDK net_af_packet devices over the
# namespace's veth ends; qdisc_bypass=0 because the PMD's default (1) sends through
# dev_direct_xmit, past the clsact egress hook, so the fault program would never see the
# switch's frames. EAL runs without hugepages, and each switch has its own file prefix.
write_switch_config() {
  local name=$1 file=$2 ports=() p i=0 ncpu
  ncpu=$(nproc)
  [ "$name" != s ] && ports+=(up)
  for p in ${children_of[$name]}; do ports+=("$p"); done
  # Lcores float over all CPUs: several switches poll on a machine with few cores.
  local lcores="0@(0-$((ncpu - 1)))" sched=0 shared=true
  if [ "$switch_lcores" = 2 ]; then lcores="0@(0-$((ncpu - 1))),1@(0-$((ncpu - 1)))" sched=1 shared=false; fi
  {
    echo "# barrier-switch $name, generated by scripts/topo.sh (namespace $(nb_ns "$name"))"
    echo "[eal]"
    echo "args = [\"--lcores\", \"$lcores\", \"--no-huge\", \"-m\", \"256\", \"--no-shconf\", \"--file-prefix\", \"$(nb_ns "$name")\", \"--no-pci\", \"--iova-mode=va\"$([ "$telemetry" = 1 ] || echo ', "--no-telemetry"')]"
    echo
    echo "[switch]"
    echo "mac = \"$(switch_mac "$name")\""
    for p in "${ports[@]}"; do
      echo
      echo "[[ports]]"
      echo "name = \"$p\""
      echo "vdev = \"net_af_packet$i,iface=$p,qdisc_bypass=0\""
      i=$((i + 1))
    done
    echo
    echo "[lcores]"
    echo "scheduler = $sched"
    echo "shared = $shared"
    echo "idle = \"${switch_idle%%:*}\""
    if [[ $switch_idle == sleep:* ]]; then echo "idle_sleep_us = ${switch_idle#sleep:}"; fi
    printf 'rx = [ { lcore = 0, poll = [%s] } ]\n' "$(printf '"%s", ' "${ports[@]}" | sed 's/, $//')"
    echo
    group_section "$name"
  } >"$file"
}

# group_section NAME: switch NAME's [[groups]] (and [control]) sections, the same for both
# switches.
group_section() {
  local name=$1
  {
    echo "[[groups]]"
    echo "number = $group"
    if [ "$name" = s ]; then
      echo 'role = "root"'
    else
      echo 'role = "intermediate"'
      echo 'parent = "up"'
      echo "resend_timeout_us = $resend_us"
    fi
    printf 'children = [%s]\n' "$(printf '"%s", ' ${children_of[$name]} | sed 's/, $//')"
    [ -z "${fail_after_ms:-}" ] || echo "fail_after_ms = $fail_after_ms"
    if [ "$need_ctl" = 1 ]; then
      echo
      echo "[control]"
      echo "socket = \"$NB_STATE_DIR/$name.sock\""
    fi
  }
}

# switch_mac NAME: the switch's MAC, from its place in the tree.
switch_mac() {
  printf '02:00:00:%02x:%02x:01\n' $(( $(printf '%s\n' "${switches[@]}" | grep -nxF -- "$1" | cut -d: -f1) )) 0
}

# write_xdp_config NAME FILE: the barrier-xdp TOML (docs/configuration.md, "The XDP switch's
# file") for switch NAME: the same ports, group and control socket as write_switch_config, the
# ports as interfaces; no [eal] or [lcores] (the XDP switch refuses them by name).
write_xdp_config() {
  local name=$1 file=$2 ports=() p
  [ "$name" != s ] && ports+=(up)
  for p in ${children_of[$name]}; do ports+=("$p"); done
  {
    echo "# barrier-xdp $name, generated by scripts/topo.sh (namespace $(nb_ns "$name"))"
    echo "[switch]"
    echo "mac = \"$(switch_mac "$name")\""
    echo
    echo "[xdp]"
    echo "mode = \"$xdp_mode\""
    for p in "${ports[@]}"; do
      echo
      echo "[[ports]]"
      echo "name = \"$p\""
      echo "iface = \"$p\""
    done
    echo
    group_section "$name"
  } >"$file"
}

for n in "${switches[@]}"; do
  if xdp "$n"; then write_xdp_config "$n" "$NB_STATE_DIR/$n.toml"; else write_switch_config "$n" "$NB_STATE_DIR/$n.toml"; fi
done

save_out() {
  [ -n "$out_dir" ] || return 0
  mkdir -p "$out_dir"
  cp -r "$NB_STATE_DIR"/*.toml "$NB_STATE_DIR"/*.log "$NB_STATE_DIR"/records "$out_dir"/ 2>/dev/null || true
  cp "$NB_STATE_DIR"/linkemu-*.json "$out_dir"/ 2>/dev/null || true
  nb_log "configs, logs and records kept in $out_dir"
}

if [ "$dry_run" = 1 ]; then
  for n in "${switches[@]}"; do echo "==== $n.toml"; cat "$NB_STATE_DIR/$n.toml"; done
  echo "==== namespaces"; ip netns list | grep "^$NB_PREFIX-" || true
  for n in "${nodes[@]}"; do
    echo "==== $n"; ip -n "$(nb_ns "$n")" -br link | grep -v '^lo '
    for ifn in $(ip -n "$(nb_ns "$n")" -br link | awk '$1 != "lo" {print $1}' | cut -d@ -f1); do
      for hook in egress ingress; do
        tc -n "$(nb_ns "$n")" filter show dev "$ifn" "$hook" | sed -n 's/.*\(linkfault[^ ]*\).*/  '"$ifn $hook"': \1/p'
      done
    done
  done
  save_out
  exit 0
fi

# ---- run ---------------------------------------------------------------------------------------
# The switch's own validation first: a config this script got wrong is refused with the key and
# the reason, before any process starts.
# (barrier-xdp's check looks the interfaces up: in the switch's namespace.)
for n in "${switches[@]}"; do
  if xdp "$n"; then
    nb_in "$(nb_ns "$n")" "${xdp_argv[@]}" check --config "$NB_STATE_DIR/$n.toml" >"$NB_STATE_DIR/$n.check" 2>&1 \
      || { cat "$NB_STATE_DIR/$n.check" >&2; echo "topo: FAIL barrier-xdp refused the generated $n.toml" >&2; exit 1; }
  else
    "${switch_argv[@]}" check --config "$NB_STATE_DIR/$n.toml" >"$NB_STATE_DIR/$n.check" 2>&1 \
      || { cat "$NB_STATE_DIR/$n.check" >&2; echo "topo: FAIL barrier-switch refused the generated $n.toml" >&2; exit 1; }
  fi
done

declare -A pid_of alive=()
# The link emulators first: a link is whole once its emulator forwards.
for n in "${emu_nodes[@]}"; do
  nb_spawn "$(nb_ns "e$n")" "$NB_STATE_DIR/linkemu-$n.log" "${linkemu_argv[@]}" --a a --b b \
    --stats-json "$NB_STATE_DIR/linkemu-$n.json" "${linkemu_extra[@]}" -- --no-huge -m 128 --no-shconf \
    --no-pci --iova-mode=va --no-telemetry --log-level='*:warning' -l 0 --file-prefix "$(nb_ns "e$n")"
  pid_of[e$n]=$NB_LAST_PID
  for ((i = 0; i < 300; i++)); do
    grep -q "^barrier-linkemu: ready" "$NB_STATE_DIR/linkemu-$n.log" && break
    kill -0 "${pid_of[e$n]}" 2>/dev/null || { cat "$NB_STATE_DIR/linkemu-$n.log" >&2; echo "topo: FAIL the link emulator above $n exited" >&2; exit 1; }
    sleep 0.1
  done
  grep -q "^barrier-linkemu: ready" "$NB_STATE_DIR/linkemu-$n.log" || { echo "topo: FAIL the link emulator above $n not ready in 30 s" >&2; exit 1; }
done
[ ${#emu_nodes[@]} -gt 0 ] && nb_log "link emulators on the links above ${emu_nodes[*]}: ${linkemu_args:-no shaping}"
# stop_linkemus: SIGTERM each emulator; it writes its counters (log and JSON) and exits.
stop_linkemus() {
  local n
  for n in "${emu_nodes[@]}"; do
    nb_stop "${pid_of[e$n]}" 5
    [ "$verbose" = 1 ] && { echo "---- linkemu $n"; grep -v "^barrier-linkemu: ready" "$NB_STATE_DIR/linkemu-$n.log"; }
  done
  return 0
}
# spawn_switch NAME: start switch NAME (barrier-switch or barrier-xdp) in its namespace.
spawn_switch() {
  local n=$1
  if xdp "$n"; then
    nb_spawn "$(nb_ns "$n")" "$NB_STATE_DIR/$n.log" "${xdp_argv[@]}" run --config "$NB_STATE_DIR/$n.toml"
  else
    nb_spawn "$(nb_ns "$n")" "$NB_STATE_DIR/$n.log" "${switch_argv[@]}" run --config "$NB_STATE_DIR/$n.toml"
  fi
  pid_of[$n]=$NB_LAST_PID
}
for n in "${switches[@]}"; do spawn_switch "$n"; done

fail() {
  echo "topo: FAIL $*" >&2
  local n recs=()
  # What the leaves recorded before the failure may show an early release too.
  for n in "${leaves[@]}"; do [ -s "$NB_STATE_DIR/records/$n.csv" ] && recs+=("$NB_STATE_DIR/records/$n.csv"); done
  if [ ${#recs[@]} -gt 0 ] && [ "${records_checked:-0}" = 0 ]; then
    python3 "$here/tools/check_records.py" "${recs[@]}" >&2 || true
  fi
  for n in "${switches[@]}" "${leaves[@]}"; do
    [ -s "$NB_STATE_DIR/$n.log" ] && { echo "---- $n.log (last lines)" >&2; tail -n 15 "$NB_STATE_DIR/$n.log" >&2; }
  done
  save_out
  exit 1
}
# A switch is up once it says so: "barrier-switch: ready" on stderr comes after every port is
# bound, started and drained and every RX loop polls (docs/operations.md). A socket listed in
# /proc/net/packet is not enough: net_af_packet lists it before binding it to its interface.
# barrier-xdp says "barrier-xdp: ready" once its program is attached to every port.
wait_ready() { # NAME: wait for the ready line of switch NAME's current log
  local n=$1 i line="^barrier-switch: ready"
  xdp "$n" && line="^barrier-xdp: ready"
  for ((i = 0; i < 600; i++)); do
    kill -0 "${pid_of[$n]}" 2>/dev/null || fail "switch $n exited during start-up"
    grep -q "$line" "$NB_STATE_DIR/$n.log" && return 0
    sleep 0.1
  done
  fail "switch $n was not ready within 60 s"
}
for n in "${switches[@]}"; do wait_ready "$n"; done
nb_log "switches ready: ${switches[*]}"

# start_leaves COUNT EPOCH RECORDS_DIR STAGGER_MS: every leaf runs COUNT barriers on the group
# in EPOCH, STAGGER_MS apart, writing RECORDS_DIR/<leaf>.csv.
start_leaves() {
  local count=$1 epoch=$2 dir=$3 stagger=$4 n first=1
  mkdir -p "$dir"
  for n in "${leaves[@]}"; do
    [ "$first" = 1 ] || sleep "$(awk -v ms="$stagger" 'BEGIN { printf "%.3f", ms / 1000 }')"
    first=0
    nb_spawn "$(nb_ns "$n")" "$NB_STATE_DIR/$n.log" "${leaf_argv[@]}" --iface up --group "$group" \
      --epoch "$epoch" --count "$count" --records "$dir/$n.csv" "${leaf_extra[@]}"
    pid_of[$n]=$NB_LAST_PID
  done
}

# wait_leaves: until every leaf has ended; a leaf that fails does not end the wait (the others'
# records complete the picture), a switch that dies does.
wait_leaves() {
  local running=("${leaves[@]}") still n rc
  failed_leaves=()
  while [ ${#running[@]} -gt 0 ]; do
    still=()
    for n in "${running[@]}"; do
      if kill -0 "${pid_of[$n]}" 2>/dev/null; then still+=("$n"); continue; fi
      rc=0; wait "${pid_of[$n]}" || rc=$?
      [ "$rc" -eq 0 ] || failed_leaves+=("$n (status $rc)")
    done
    running=("${still[@]}")
    for n in "${switches[@]}"; do
      kill -0 "${pid_of[$n]}" 2>/dev/null || fail "switch $n died while the leaves ran"
    done
    [ $(( $(date +%s) - start )) -le "$timeout_s" ] || fail "leaves ${running[*]} not done after ${timeout_s} s"
    [ ${#running[@]} -gt 0 ] && sleep 0.2
  done
  return 0
}

# reset_run EPOCH: a new run of the group in EPOCH on every running switch, root first (the
# order of `barrierctl reset PLAN`), each switch's file written back at once, so that a switch
# restarted later comes back in the run's epoch rather than the file's first one (and rejoins
# the run through the restart rules, docs/protocol.md) instead of dropping every frame of it.
reset_run() {
  local e=$1 n
  for n in "${switches[@]}"; do
    [ "${alive[$n]:-1}" = 1 ] || continue
    { "${ctl_argv[@]}" --socket "$NB_STATE_DIR/$n.sock" group reset "$group" --epoch "$e" \
        && "${ctl_argv[@]}" --socket "$NB_STATE_DIR/$n.sock" write-back; } >>"$NB_STATE_DIR/reset.log" 2>&1 \
      || { cat "$NB_STATE_DIR/reset.log" >&2; fail "barrierctl group reset or write-back on $n"; }
  done
}

epoch=1
if [ "$first_job" -gt 0 ]; then
  # Issue 10, case 5: a first job on the group, then the main job on the same group number with
  # the switches kept running. Between them, management gives the group a new epoch on every
  # switch, root first, the order of `barrierctl reset PLAN` (docs/operations.md, "A second run
  # of a job on the same group, done right"): a switch takes the new run's frames only once its
  # parent is in the new run. `switches` lists every parent before its children. Each switch
  # gets the same epoch, ahead of every epoch it had, so the switch's epoch rules take it.
  start=$(date +%s)
  start_leaves "$first_job" "$epoch" "$NB_STATE_DIR/records/first-job" 0
  nb_log "first job: ${leaves[*]} ($first_job barriers on group $group, epoch $epoch)"
  wait_leaves
  [ ${#failed_leaves[@]} -eq 0 ] || fail "first job: leaves failed: ${failed_leaves[*]}"
  first_records=()
  for n in "${leaves[@]}"; do first_records+=("$NB_STATE_DIR/records/first-job/$n.csv"); done
  python3 "$here/tools/check_records.py" --expect "$first_job" "${first_records[@]}" >"$NB_STATE_DIR/first-job.check" 2>&1 \
    || { cat "$NB_STATE_DIR/first-job.check" >&2; fail "first job's records"; }
  if [ "$same_epoch" = 0 ]; then
    epoch=2
    reset_run "$epoch"
    nb_log "first job done; group $group reset to epoch $epoch on ${switches[*]}"
  else
    nb_log "first job done; the main job reuses epoch $epoch (--same-epoch)"
  fi
fi

start=$(date +%s)
start_leaves "$barriers" "$epoch" "$NB_STATE_DIR/records" "$leaf_stagger_ms"
stagger_note=""
[ "$leaf_stagger_ms" -gt 0 ] && stagger_note=", started $leaf_stagger_ms ms apart"
nb_log "leaves running: ${leaves[*]} ($barriers barriers on group $group, epoch $epoch$stagger_note)"

# ---- supervised run ------------------------------------------------------------------------------
# now_ns: CLOCK_MONOTONIC nanoseconds (the clock of the leaves' records), from bash's
# EPOCHREALTIME and the offset between the two clocks measured once.
mono_offset_ns=$(python3 -c 'import time; print(time.monotonic_ns() - time.time_ns())')
now_ns() { local r=${EPOCHREALTIME/./}; echo $(( r * 1000 + mono_offset_ns )); }
# event WHAT...: one line "<monotonic ns> WHAT..." in events.log, and on stderr.
event() {
  local t; t=$(now_ns)
  echo "$t $*" >>"$NB_STATE_DIR/events.log"
  nb_log "event +$(( (t - run_start_ns) / 1000000 )) ms: $*"
}

# supervise: the leaves of job 1 run; events are applied on time; every member's exit is
# reported once; the run ends when no leaf runs and no event is left, or at --duration.
supervise() {
  local -a ev_t=() ev_act=() ev_node=() order
  local e i t act n rc now_ms stopped=0 job_dir=$NB_STATE_DIR/records
  declare -gA alive=() ended_early=()
  jobs_dirs=("$job_dir") job_epochs=("$epoch")
  for n in "${nodes[@]}"; do alive[$n]=1; done
  # Events in time order (stable for equal times).
  mapfile -t order < <(for i in "${!events[@]}"; do echo "${events[$i]%%:*} $i"; done | sort -s -n -k1,1 | awk '{print $2}')
  for i in "${order[@]}"; do
    IFS=: read -r t act n <<<"${events[$i]}"
    ev_t+=("$(awk -v t="$t" 'BEGIN { printf "%d", t * 1000 }')") ev_act+=("$act") ev_node+=("${n:-}")
  done
  local next=0
  while true; do
    now_ms=$(( ($(now_ns) - run_start_ns) / 1000000 ))
    while [ "$next" -lt ${#ev_t[@]} ] && [ "${ev_t[$next]}" -le "$now_ms" ]; do
      apply_event "${ev_act[$next]}" "${ev_node[$next]}"
      next=$((next + 1))
    done
    for n in "${nodes[@]}"; do
      [ "${alive[$n]}" = 1 ] || continue
      kill -0 "${pid_of[$n]}" 2>/dev/null && continue
      rc=0; wait "${pid_of[$n]}" 2>/dev/null || rc=$?
      alive[$n]=0
      if [[ $n == l* ]]; then
        if [ "$rc" = 0 ]; then event "done $n"; else event "exit $n status $rc"; ended_early[$job_dir/$n]=1; fi
      else
        event "exit $n status $rc (the tree goes on without it)"
      fi
    done
    local running=0
    for n in "${leaves[@]}"; do [ "${alive[$n]}" = 1 ] && running=$((running + 1)); done
    if [ "$running" = 0 ]; then
      if [ "$next" -lt ${#ev_t[@]} ]; then
        fail "the leaves ended before event $((next + 1)) of ${#ev_t[@]} (${ev_act[$next]} at $((ev_t[next])) ms): raise --barriers or --duration"
      fi
      break
    fi
    if [ "$duration_s" != 0 ] && [ "$stopped" = 0 ] && [ "$now_ms" -ge "$(awk -v t="$duration_s" 'BEGIN { printf "%d", t * 1000 }')" ]; then
      event "stop leaves (--duration $duration_s s)"
      stop_leaves
      stopped=1
      continue
    fi
    [ "$now_ms" -le $((timeout_s * 1000)) ] || { stop_leaves; fail "leaves not done after ${timeout_s} s"; }
    sleep 0.05
  done
}

# stop_leaves: SIGTERM every running leaf (it writes its records and summary, then exits);
# each counts as ended early.
stop_leaves() {
  local n rc
  for n in "${leaves[@]}"; do [ "${alive[$n]}" = 1 ] && kill -TERM "${pid_of[$n]}" 2>/dev/null; done
  for n in "${leaves[@]}"; do
    [ "${alive[$n]}" = 1 ] || continue
    nb_stop "${pid_of[$n]}" 5
    rc=0; wait "${pid_of[$n]}" 2>/dev/null || rc=$?
    alive[$n]=0
    ended_early[${jobs_dirs[-1]}/$n]=1
    event "stopped $n"
  done
}

apply_event() { # ACTION NODE
  local act=$1 n=$2 ns peer i
  case $act in
    kill)
      kill -KILL "${pid_of[$n]}" 2>/dev/null || true
      wait "${pid_of[$n]}" 2>/dev/null || true
      alive[$n]=0
      [[ $n == l* ]] && ended_early[${jobs_dirs[-1]}/$n]=1
      event "kill $n"
      ;;
    restart|start)
      if [ "$act" = restart ]; then
        kill -KILL "${pid_of[$n]}" 2>/dev/null || true
        wait "${pid_of[$n]}" 2>/dev/null || true
        event "kill $n"
      fi
      restarts_done=$((restarts_done + 1))
      mv "$NB_STATE_DIR/$n.log" "$NB_STATE_DIR/$n.run$restarts_done.log"
      spawn_switch "$n"
      alive[$n]=1
      wait_ready "$n"
      event "ready $n"
      ;;
    down|up)
      ip -n "$(nb_ns "${parent_of[$n]}")" link set dev "${port_in_parent[$n]}" "$act" \
        && ip -n "$(nb_ns "$n")" link set dev up "$act" || fail "cannot set the link above $n $act"
      event "link $act ${parent_of[$n]}-$n"
      ;;
    newjob)
      event "newjob: stopping the leaves of epoch $epoch"
      stop_leaves
      # Root first, as above; a switch restarted since is back at its file's epoch (the last
      # reset's, written back), behind the new one, so the same --epoch suits it too.
      epoch=$((epoch + 1))
      reset_run "$epoch"
      event "reset group $group to epoch $epoch"
      for n in "${leaves[@]}"; do mv "$NB_STATE_DIR/$n.log" "$NB_STATE_DIR/$n.epoch$((epoch - 1)).log"; done
      jobs_dirs+=("$NB_STATE_DIR/records/epoch$epoch") job_epochs+=("$epoch")
      start_leaves "$barriers" "$epoch" "${jobs_dirs[-1]}" 0
      for n in "${leaves[@]}"; do alive[$n]=1; done
      event "newjob: leaves started in epoch $epoch"
      ;;
  esac
}

if [ "$supervise" = 1 ]; then
  run_start_ns=$(now_ns)
  : >"$NB_STATE_DIR/events.log"
  event "leaves started in epoch $epoch"
  restarts_done=0
  supervise
  elapsed=$(( $(date +%s) - start ))
  for n in "${switches[@]}"; do [ "${alive[$n]}" = 1 ] && nb_stop "${pid_of[$n]}" 5; done
  stop_linkemus
  # Every job's records: no early release, no gap, --expect for the leaves that finished.
  check_ok=1
  : >"$NB_STATE_DIR/check.log"
  for j in "${!jobs_dirs[@]}"; do
    dir=${jobs_dirs[$j]} records=() early_args=()
    for n in "${leaves[@]}"; do
      records+=("$dir/$n.csv")
      [ "${ended_early[$dir/$n]:-0}" = 1 ] && early_args+=(--ended-early "$n")
      [ -e "$dir/$n.csv" ] || : >"$dir/$n.csv" # killed before its first write
    done
    echo "== job $((j + 1)) (epoch ${job_epochs[$j]}, ${dir#"$NB_STATE_DIR"/})" >>"$NB_STATE_DIR/check.log"
    python3 "$here/tools/check_records.py" --expect "$barriers" "${early_args[@]}" "${records[@]}" >>"$NB_STATE_DIR/check.log" 2>&1 || check_ok=0
  done
  cat "$NB_STATE_DIR/check.log"
  records_checked=1
  [ "$check_ok" = 1 ] || fail "leaf records show an early release, a gap or a bad line (above)"
  save_out
  echo "topo: ok (supervised): ${#jobs_dirs[@]} job(s), ${#events[@]} event(s), ${#leaves[@]} leaves, ${#switches[@]} switches (fanout $fanout, loss $loss, dup $dup, corrupt $corrupt on ${#faulty_links[@]} links) in ${elapsed} s; events.log and check.log in ${out_dir:-the state directory}"
  exit 0
fi

# Switch restarts while the leaves run: SIGKILL (no shutdown, state lost), start again at once.
if [ ${#restart_nodes[@]} -gt 0 ]; then
  leaves_alive() { local n; for n in "${leaves[@]}"; do kill -0 "${pid_of[$n]}" 2>/dev/null || return 1; done; }
  restarted=0 restart_start=$(date +%s)
  for ((r = 1; r <= restarts; r++)); do
    for n in "${restart_nodes[@]}"; do
      leaves_alive || fail "a leaf ended after $restarted of $((restarts * ${#restart_nodes[@]})) restarts (failed, or done: raise --barriers)"
      kill -KILL "${pid_of[$n]}" 2>/dev/null || fail "switch $n died before restart $r"
      wait "${pid_of[$n]}" 2>/dev/null || true
      mv "$NB_STATE_DIR/$n.log" "$NB_STATE_DIR/$n.run$r.log"
      spawn_switch "$n"
      wait_ready "$n"
      restarted=$((restarted + 1))
      sleep "$(awk -v ms="$restart_gap_ms" 'BEGIN { printf "%.3f", ms / 1000 }')"
    done
  done
  leaves_alive || fail "a leaf ended before the last restart was ready (failed, or done: raise --barriers)"
  nb_log "restarted ${restart_nodes[*]} $restarts times each (SIGKILL, immediate restart) in $(( $(date +%s) - restart_start )) s while the leaves ran"
fi

# A leaf that fails (a barrier not released within its timeout) does not end the run at once:
# the others finish or fail too, so that every leaf's records are complete for the check.
wait_leaves
elapsed=$(( $(date +%s) - start ))
[ ${#failed_leaves[@]} -eq 0 ] || fail "leaves failed: ${failed_leaves[*]}"
nb_log "leaves done in ${elapsed} s"

# Stop the switches before reading anything, so their logs hold their final counters.
for n in "${switches[@]}"; do nb_stop "${pid_of[$n]}" 5; done
stop_linkemus

if [ "$verbose" = 1 ]; then
  for n in "${leaves[@]}"; do echo "---- leaf $n"; cat "$NB_STATE_DIR/$n.log"; done
  # barrier-switch and barrier-xdp print their counters from "== switch" on when they stop.
  for n in "${switches[@]}"; do echo "---- switch $n"; sed -n '/^== /,$p' "$NB_STATE_DIR/$n.log"; done
fi

records=()
for n in "${leaves[@]}"; do records+=("$NB_STATE_DIR/records/$n.csv"); done
if python3 "$here/tools/check_records.py" --expect "$barriers" "${records[@]}"; then
  save_out
  echo "topo: ok: ${#leaves[@]} leaves x $barriers barriers through ${#switches[@]} switches (${#is_xdp[@]} XDP; fanout $fanout, loss $loss, dup $dup, corrupt $corrupt on ${#faulty_links[@]} links${restart_list:+, $restarts restarts of each of $restart_list}) in ${elapsed} s"
else
  records_checked=1
  fail "leaf records show incomplete barriers or an early release"
fi
