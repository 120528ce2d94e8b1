# shellcheck shell=bash
# Network-namespace test bed helpers: namespaces, veth links, link faults (the eBPF tc program in
# scripts/bpf) and background processes, every one recorded so that nb_cleanup removes exactly
# what this run created, on exit, on error and on Ctrl-C. Source it, then call nb_init.
#
# Names: every namespace is "<prefix>-<name>" and every interface left in the host namespace
# starts with <prefix>; the prefix is "nbt<pid>" unless NB_PREFIX is set, so parallel runs do not
# collide and leftovers of a killed run are recognisable (nb_stale lists them).
#
#   nb_init                          prefix, state directory, traps
#   nb_ns NAME                       prints the full namespace name <prefix>-NAME
#   nb_netns_add NAME                create namespace <prefix>-NAME, loopback up
#   nb_veth NS_A IF_A NS_B IF_B [MTU] veth pair; NS "" is the host namespace; both ends up
#   nb_fault_attach NS IF DROP DUP CORRUPT [build.sh options]   rates per million, on IF egress
#                                    (on IF ingress with the build.sh option --ingress)
#   nb_fault_detach NS IF
#   nb_xdp_pass NS IF                an XDP_PASS program on IF (driver mode): the peer of an XDP
#                                    program's port, so that what the program sends arrives
#   nb_spawn NS LOG CMD...           run CMD in NS in the background; pid in NB_LAST_PID
#   nb_in NS CMD...                  run CMD in NS (or the host when NS is "")
#   nb_ppm FRACTION                  0.05 -> 50000
#   nb_find_program NAME             a built program (target/debug|release, newest) or from PATH
#   nb_cleanup                       kill, delete, remove everything recorded (idempotent)

NB_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NB_SCRIPTS_DIR=$(dirname "$NB_LIB_DIR")

_NB_NETNS=()      # full namespace names, in creation order
_NB_HOST_LINKS=() # interfaces created in the host namespace
_NB_PIDS=()       # background processes started by nb_spawn
_NB_FAULTS=()     # "ns|if" with a clsact qdisc we added (namespaces are deleted anyway)
_NB_CLEANED=0
NB_LAST_PID=

nb_log() { echo "[${NB_PREFIX:-nb}] $*" >&2; }
nb_die() { echo "[${NB_PREFIX:-nb}] error: $*" >&2; exit 1; }

nb_init() {
  [ "$(id -u)" -eq 0 ] || nb_die "needs root (network namespaces, veth, tc)"
  command -v ip >/dev/null && command -v tc >/dev/null || nb_die "needs iproute2 (ip, tc)"
  NB_PREFIX=${NB_PREFIX:-nbt$$}
  # Host interface names are at most 15 bytes: the prefix plus a short suffix must fit.
  [ ${#NB_PREFIX} -le 10 ] || nb_die "NB_PREFIX '$NB_PREFIX' longer than 10 characters"
  NB_STATE_DIR=$(mktemp -d "/tmp/${NB_PREFIX}.XXXXXX")
  trap nb_cleanup EXIT
  # On a signal: clean up, then exit with the conventional status (EXIT trap runs once more,
  # which nb_cleanup tolerates).
  trap 'nb_cleanup; exit 130' INT
  trap 'nb_cleanup; exit 143' TERM
  trap 'nb_cleanup; exit 129' HUP
}

nb_in() {
  local ns=$1; shift
  if [ -z "$ns" ]; then "$@"; else ip netns exec "$ns" "$@"; fi
}

nb_ns() { echo "${NB_PREFIX:?nb_init first}-$1"; }

# Not to be called in $(...): the record of what to clean up must live in this shell.
nb_netns_add() {
  local ns="${NB_PREFIX:?nb_init first}-$1"
  ip netns add "$ns" || nb_die "cannot create namespace $ns"
  _NB_NETNS+=("$ns")
  ip -n "$ns" link set lo up
  # No IPv6 on test links: router solicitations and MLD reports would be the only non-barrier
  # traffic, and a switch counts every such frame as a parse error.
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1 || true
}

nb_veth() {
  local nsa=$1 ifa=$2 nsb=$3 ifb=$4 mtu=${5:-}
  local -a a=(name "$ifa") b=(name "$ifb")
  [ -n "$nsa" ] && a+=(netns "$nsa")
  [ -n "$nsb" ] && b+=(netns "$nsb")
  if [ -z "$nsa" ]; then [[ $ifa == "$NB_PREFIX"* ]] || nb_die "host interface $ifa must start with $NB_PREFIX"; fi
  if [ -z "$nsb" ]; then [[ $ifb == "$NB_PREFIX"* ]] || nb_die "host interface $ifb must start with $NB_PREFIX"; fi
  ip link add "${a[@]}" type veth peer "${b[@]}" || nb_die "cannot create veth $nsa/$ifa <-> $nsb/$ifb"
  [ -z "$nsa" ] && _NB_HOST_LINKS+=("$ifa")
  [ -z "$nsb" ] && _NB_HOST_LINKS+=("$ifb")
  local side
  for side in "$nsa|$ifa" "$nsb|$ifb"; do
    local ns=${side%%|*} ifn=${side#*|}
    [ -n "$mtu" ] && nb_in "$ns" ip link set dev "$ifn" mtu "$mtu"
    # best effort: a kernel booted without IPv6 has no such key
    [ -z "$ns" ] && { sysctl -qw "net.ipv6.conf.$ifn.disable_ipv6=1" >/dev/null 2>&1 || true; }
    nb_in "$ns" ip link set dev "$ifn" up || nb_die "cannot bring up $ns/$ifn"
  done
}

# nb_ppm FRACTION: a probability (0.05, 1e-3, 0) as an integer per million.
nb_ppm() {
  awk -v f="$1" 'BEGIN {
    if (f !~ /^([0-9]+\.?[0-9]*|\.[0-9]+)([eE]-?[0-9]+)?$/ || f + 0 > 1) { exit 1 }
    printf "%d\n", f * 1000000 + 0.5 }' || nb_die "not a probability in [0,1]: '$1'"
}

# nb_fault_object DROP DUP CORRUPT [build.sh options]: path of a compiled object for this rate
# set, built once per run.
nb_fault_object() {
  local drop=$1 dup=$2 corrupt=$3; shift 3
  local extra="" key obj
  [ $# -gt 0 ] && extra=$(printf '%s_' "$@" | tr -c 'A-Za-z0-9_' '_')
  key="d${drop}-u${dup}-c${corrupt}-${extra}"
  obj="$NB_STATE_DIR/bpf/linkfault-$key.o"
  if [ ! -f "$obj" ]; then
    mkdir -p "$NB_STATE_DIR/bpf"
    bash "$NB_SCRIPTS_DIR/bpf/build.sh" -o "$obj" --drop "$drop" --dup "$dup" --corrupt "$corrupt" "$@" \
      || nb_die "building the fault program failed"
  fi
  echo "$obj"
}

# nb_fault_attach NS IF DROP DUP CORRUPT [build.sh options]: faults on frames leaving IF
# (egress), or, with the option --ingress, on frames IF receives (clsact ingress: the variant of
# the program built for it). A link gets faults in both directions by attaching to both of its
# ends; an end whose peer is an XDP program's port gets both directions on itself (ingress sees
# the frames the program sends, which skip the qdisc layer on the program's side).
nb_fault_attach() {
  local ns=$1 ifn=$2 drop=$3 dup=$4 corrupt=$5; shift 5
  local obj hook=egress a
  for a in "$@"; do [ "$a" = --ingress ] && hook=ingress; done
  obj=$(nb_fault_object "$drop" "$dup" "$corrupt" "$@") || exit 1
  nb_in "$ns" tc qdisc replace dev "$ifn" clsact || nb_die "clsact on $ns/$ifn failed"
  _NB_FAULTS+=("$ns|$ifn")
  nb_in "$ns" tc filter replace dev "$ifn" "$hook" pref 1 handle 1 bpf da obj "$obj" sec tc \
    || nb_die "attaching $obj to $ns/$ifn $hook failed"
}

# nb_xdp_pass NS IF: attach scripts/bpf/xdp_pass.bpf.c (built once per run) to IF in driver
# mode. A veth end whose peer runs an XDP program that sends frames (XDP_REDIRECT, XDP_TX) needs
# an XDP receive path, and GRO alone is not enough for XDP_TX (the comment in xdp_pass.bpf.c).
nb_xdp_pass() {
  local ns=$1 ifn=$2 obj=$NB_STATE_DIR/bpf/xdp_pass.o multiarch
  if [ ! -f "$obj" ]; then
    mkdir -p "$NB_STATE_DIR/bpf"
    command -v clang >/dev/null || nb_die "clang not found (Debian package clang)"
    multiarch=$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
    clang -O2 -g -target bpf -I"/usr/include/$multiarch" -c "$NB_SCRIPTS_DIR/bpf/xdp_pass.bpf.c" -o "$obj" \
      || nb_die "building scripts/bpf/xdp_pass.bpf.c failed"
  fi
  nb_in "$ns" ip link set dev "$ifn" xdpdrv obj "$obj" sec xdp || nb_die "attaching XDP_PASS to $ns/$ifn failed"
}

nb_fault_detach() {
  local ns=$1 ifn=$2
  nb_in "$ns" tc qdisc del dev "$ifn" clsact 2>/dev/null || true
}

# nb_spawn NS LOG CMD...: CMD runs in NS with output to LOG; `ip netns exec` execs CMD, so the
# recorded pid is CMD's own.
nb_spawn() {
  local ns=$1 log=$2; shift 2
  if [ -z "$ns" ]; then
    "$@" >"$log" 2>&1 </dev/null &
  else
    ip netns exec "$ns" "$@" >"$log" 2>&1 </dev/null &
  fi
  NB_LAST_PID=$!
  _NB_PIDS+=("$NB_LAST_PID")
}

# nb_stop PID [SECONDS]: SIGTERM, then SIGKILL after SECONDS (default 3).
nb_stop() {
  local pid=$1 wait_s=${2:-3} i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < wait_s * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

nb_cleanup() {
  local rc=$?
  [ "$_NB_CLEANED" = 1 ] && return "$rc"
  _NB_CLEANED=1
  trap - INT TERM HUP
  local pid ns ifn i
  for pid in "${_NB_PIDS[@]}"; do nb_stop "$pid"; done
  # Anything still running inside our namespaces was started by what we spawned: a namespace
  # with a live process would outlive `ip netns del`.
  for ns in "${_NB_NETNS[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do nb_stop "$pid" 1; done
  done
  for ((i = ${#_NB_NETNS[@]} - 1; i >= 0; i--)); do
    ip netns del "${_NB_NETNS[i]}" 2>/dev/null || true
  done
  # Deleting a namespace deletes its veth ends and so their peers; host pairs are deleted here.
  for ifn in "${_NB_HOST_LINKS[@]}"; do
    ip link del "$ifn" 2>/dev/null || true
  done
  if [ -n "${NB_STATE_DIR:-}" ] && [ -d "$NB_STATE_DIR" ] && [ "${NB_KEEP_STATE:-0}" != 1 ]; then
    rm -rf "$NB_STATE_DIR"
  fi
  _NB_NETNS=() _NB_HOST_LINKS=() _NB_PIDS=() _NB_FAULTS=()
  return "$rc"
}

# nb_find_program NAME: NAME from the workspace's build output (the newest of debug and release
# under $CARGO_TARGET_DIR and target/, so a stale build is not picked over a fresh one), else
# from PATH. Prints the path; fails when there is none.
nb_find_program() {
  local name=$1 best="" p root
  root=$(dirname "$NB_SCRIPTS_DIR")
  for p in "${CARGO_TARGET_DIR:-$root/target}"/{debug,release}/"$name" "$root"/target/{debug,release}/"$name"; do
    [ -x "$p" ] || continue
    if [ -z "$best" ] || [ "$p" -nt "$best" ]; then best=$p; fi
  done
  [ -n "$best" ] || best=$(command -v "$name" 2>/dev/null) || return 1
  echo "$best"
}

# nb_stale: namespaces and host interfaces left by runs whose process is gone: "nbt<pid>" (these
# scripts), "nbrs<pid>-<k>" (rawsock's Rust test bed), "nbgen-<pid>" (barrier-gen's tests). A test
# killed by the runner's timeout never reaches its cleanup; `topo.sh --cleanup-stale` removes them.
nb_stale() {
  local name pid
  for name in $(ip netns list 2>/dev/null | awk '{print $1}'; ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    [[ $name =~ ^nb(t|rs|gen-)([0-9]+) ]] || continue
    pid=${BASH_REMATCH[2]}
    kill -0 "$pid" 2>/dev/null || echo "$name"
  done
}

# nb_topo_case NAME OK_TEXT [topo.sh args...]: one run of scripts/topo.sh with the real programs
# as a test case named NAME: the run must pass, and it must leave no topo.sh namespace (nbt*)
# behind. Prints "NAME: ok|FAIL ..." lines and "NAME: P passed, F failed"; returns non-zero on
# a failure. Without built barrier-switch/barrier-leaf (or BARRIER_SWITCH/BARRIER_LEAF), and
# barrier-xdp (or BARRIER_XDP) when the arguments have --xdp, the case is skipped, or fails
# when NB_REQUIRE_BINARIES=1.
nb_topo_case() {
  local name=$1 ok_text=$2 switch leaf xdp="" a msg before after rc=0 passed=0 failed=0 xdp_args=()
  shift 2
  switch=${BARRIER_SWITCH:-$(nb_find_program barrier-switch || true)}
  leaf=${BARRIER_LEAF:-$(nb_find_program barrier-leaf || true)}
  for a in "$@"; do
    if [ "$a" = --xdp ]; then
      xdp=${BARRIER_XDP:-$(nb_find_program barrier-xdp || true)}
      [ -n "$xdp" ] || xdp=missing
    fi
  done
  if [ -z "$switch" ] || [ -z "$leaf" ] || [ "$xdp" = missing ]; then
    msg="barrier-switch, barrier-leaf or barrier-xdp not built (switch '${switch}', leaf '${leaf}'${xdp:+, xdp '$xdp'})"
    if [ "${NB_REQUIRE_BINARIES:-0}" = 1 ]; then
      echo "$name: FAIL $msg"; echo "$name: 0 passed, 1 failed"; return 1
    fi
    echo "$name: skipped: $msg"; return 0
  fi
  [ -n "$xdp" ] && xdp_args=(--xdp-cmd "$xdp")
  # Only topo.sh's own namespaces: other tests may create theirs meanwhile.
  before=$(ip netns list | awk '$1 ~ /^nbt/ {print $1}' | sort)
  bash "$NB_SCRIPTS_DIR/topo.sh" --switch "$switch" --leaf "$leaf" "${xdp_args[@]}" "$@" || rc=$?
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1)); echo "$name: ok   $ok_text"
  else
    failed=$((failed + 1)); echo "$name: FAIL the run (exit $rc, output above)"
  fi
  after=$(ip netns list | awk '$1 ~ /^nbt/ {print $1}' | sort)
  if [ "$before" = "$after" ]; then
    passed=$((passed + 1)); echo "$name: ok   no namespace left"
  else
    failed=$((failed + 1)); echo "$name: FAIL namespaces left: $(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')"
  fi
  echo "$name: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
