# The bed of the MPI tests and benchmark (scripts/tests/mpi_barrier.sh, perf/mpi.sh): one
# barrier-switch on net_af_packet ports in namespace nbm-sw<pid>, 8 veths into namespace
# nbm-h<pid> where all ranks of an mpirun live (rank ends nbmr0..nbmr7, switch ends nbmd0..7
# as ports d0..d7). Sourced; needs root.
#
#   nbm_bed_up WORK SWITCH GROUP...   GROUP = number:first port:ports:epoch; the switch is the
#                                      root of each. Sets NBM_SW_NS, NBM_H_NS, NBM_IFACES
#                                      (nbmr0,...,nbmr7), NBM_SOCK, NBM_PREFIX, NBM_SWPID.
#                                      Returns 1 (and says why on stderr) when the bed or the
#                                      switch does not come up.
#   nbm_bed_kill_switch               SIGKILL the switch and remove its DPDK runtime folder
#   nbm_bed_down                      stop the switch, delete the namespaces (idempotent)

NBM_SW_NS=nbm-sw$$ NBM_H_NS=nbm-h$$ NBM_PREFIX=nbm$$ NBM_SOCK=/run/netbarrier/nbm$$.sock
NBM_SWPID= NBM_IFACES=

nbm_bed_up() {
  local work=$1 switch=$2 i n g num first cnt ep ch
  shift 2
  ip netns add "$NBM_SW_NS" && ip netns add "$NBM_H_NS" || { echo "mpibed: cannot create namespaces" >&2; return 1; }
  for n in "$NBM_SW_NS" "$NBM_H_NS"; do
    ip -n "$n" link set lo up
    ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  done
  NBM_IFACES=""
  for i in 0 1 2 3 4 5 6 7; do
    ip link add "nbmd$i" netns "$NBM_SW_NS" type veth peer name "nbmr$i" netns "$NBM_H_NS" \
      || { echo "mpibed: cannot create veth $i" >&2; return 1; }
    ip -n "$NBM_SW_NS" link set "nbmd$i" up; ip -n "$NBM_H_NS" link set "nbmr$i" up
    NBM_IFACES="$NBM_IFACES${NBM_IFACES:+,}nbmr$i"
  done
  {
    echo '[eal]'
    echo "args = [\"-l\", \"0\", \"--no-huge\", \"-m\", \"512\", \"--no-shconf\", \"--file-prefix\", \"$NBM_PREFIX\", \"--no-pci\", \"--iova-mode=va\", \"--no-telemetry\"]"
    for i in 0 1 2 3 4 5 6 7; do
      printf '[[ports]]\nname = "d%d"\nvdev = "net_af_packet%d,iface=nbmd%d"\n' "$i" "$i" "$i"
    done
    # The loop sleeps when idle: it shares two cores with up to 8 ranks.
    printf '[lcores]\nscheduler = 0\nshared = true\nidle = "sleep"\nrx = [ { lcore = 0, poll = ["d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7"] } ]\n'
    for g in "$@"; do
      IFS=: read -r num first cnt ep <<<"$g"
      ch=$(seq -s, "$first" $((first + cnt - 1)) | sed 's/\([0-9]\)/"d\1"/g')
      printf '[[groups]]\nnumber = %d\nrole = "root"\nepoch = %d\nchildren = [%s]\n' "$num" "$ep" "$ch"
    done
    printf '[control]\nsocket = "%s"\n' "$NBM_SOCK"
  } > "$work/switch.toml"
  ip netns exec "$NBM_SW_NS" "$switch" run --config "$work/switch.toml" > "$work/switch.log" 2>&1 &
  NBM_SWPID=$!
  for _ in $(seq 150); do
    grep -q '^barrier-switch: ready' "$work/switch.log" && return 0
    kill -0 "$NBM_SWPID" 2>/dev/null || break
    sleep 0.1
  done
  echo "mpibed: the switch did not start:" >&2
  tail -n 20 "$work/switch.log" >&2
  return 1
}

nbm_bed_kill_switch() {
  [ -n "$NBM_SWPID" ] || return 0
  kill -KILL "$NBM_SWPID" 2>/dev/null; wait "$NBM_SWPID" 2>/dev/null
  NBM_SWPID=
  rm -rf "/run/dpdk/$NBM_PREFIX" "/var/run/dpdk/$NBM_PREFIX" "$NBM_SOCK"
}

nbm_bed_down() {
  if [ -n "$NBM_SWPID" ]; then
    kill -TERM "$NBM_SWPID" 2>/dev/null
    for _ in $(seq 30); do kill -0 "$NBM_SWPID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$NBM_SWPID" 2>/dev/null
    wait "$NBM_SWPID" 2>/dev/null
    NBM_SWPID=
  fi
  ip netns del "$NBM_SW_NS" 2>/dev/null
  ip netns del "$NBM_H_NS" 2>/dev/null
  rm -rf "/run/dpdk/$NBM_PREFIX" "/var/run/dpdk/$NBM_PREFIX" "$NBM_SOCK"
  return 0
}
