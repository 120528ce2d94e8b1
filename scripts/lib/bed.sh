# A throw-away bed for scripts that change the machine (installs, ldconfig, namespaces, DPDK):
# sourced by scripts/tests/install.sh and scripts/tests/doc_walkthroughs.sh. Needs root and
# util-linux's unshare.
#
#   nb_bed_run STATE BASE TIMEOUT SCRIPT [ARGS...]
#
# runs `bash SCRIPT ARGS` from the repository root in new PID, mount and network namespaces:
#
# - the network namespace has only `lo` (up); named namespaces (`ip netns add`) live on a private
#   /run/netns, so their names meet no one else's;
# - /tmp, /run/dpdk (= /var/run/dpdk, DPDK's runtime folders) and /run/netbarrier (the control
#   sockets of the shipped switch files) are empty private tmpfs;
# - /usr/local and /etc are overlays: what the script writes there (an install, ldconfig's
#   cache) lands in STATE/usr-local and STATE/etc, never in the machine's folders; so is Open
#   MPI's component folder (`ompi_info --path pkglibdir`, where scripts/install.sh links
#   coll/netbarrier), in STATE/ompi, where Open MPI is installed. BASE, when not empty, is the
#   STATE of an earlier bed, stacked below (its install is visible, read-only);
# - when SCRIPT ends, or after TIMEOUT seconds, every process it started dies with the PID
#   namespace (unshare --kill-child), and the namespaces, veths and mounts go with it.
#
# Returns SCRIPT's exit status (124 or 137 on timeout). A DPDK runtime folder left in
# /run/dpdk when SCRIPT ends is listed on stderr and makes the status 3 when it was 0
# (DPDK programs must remove their own; see ffi/dpdk/src/eal.rs).

nb_bed_run() {
  local state=$1 base=$2 timeout=$3 script=$4
  shift 4
  local repo
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  local dirs="usr-local:/usr/local etc:/etc" ompi_dir
  ompi_dir=$(nb_ompi_component_dir)
  [ -z "$ompi_dir" ] || [ ! -d "$ompi_dir" ] || dirs="$dirs ompi:$ompi_dir"
  local d
  for d in $dirs; do mkdir -p "$state/${d%%:*}" "$state/${d%%:*}.work"; done
  mkdir -p /run/netns
  # The tmpfs mounts below need their mount points on the machine's /run; one the bed made is
  # removed after it (a machine without netbarrier keeps no /run/netbarrier).
  local made=""
  [ -d /run/netbarrier ] || made=/run/netbarrier
  timeout -k 5 "$timeout" unshare --pid --fork --kill-child --mount --net --propagation private \
    --mount-proc bash -c '
      set -e
      state=$1 base=$2 repo=$3 script=$4 dirs=$5
      shift 5
      for d in $dirs; do
        up=${d%%:*} dir=${d#*:}
        lower=$dir
        [ -z "$base" ] || [ ! -d "$base/$up" ] || lower=$base/$up:$dir
        mount -t overlay nbbed -o "lowerdir=$lower,upperdir=$state/$up,workdir=$state/$up.work" "$dir"
      done
      mkdir -p /run/dpdk /run/netbarrier
      for d in /run/netns /run/dpdk /run/netbarrier; do mount -t tmpfs nbbed "$d"; done
      # A private, empty /tmp, except for what the bed needs that lives under /tmp (a checkout
      # in /tmp, say): the new tmpfs is filled first, with those folders bound in at their own
      # paths, and only then moved over /tmp.
      fresh=$(mktemp -d /dev/shm/nbbed-tmp.XXXXXX)
      mount -t tmpfs nbbed "$fresh"
      for p in "$repo" "$state" "$base" "$(dirname "$script")"; do
        case "$p" in
          /tmp/*) mkdir -p "$fresh${p#/tmp}"; mount --bind "$p" "$fresh${p#/tmp}" ;;
        esac
      done
      mount --move "$fresh" /tmp
      rmdir "$fresh" 2>/dev/null || true
      ip link set lo up
      cd "$repo"
      set +e
      bash "$script" "$@"
      rc=$?
      left=$(find /run/dpdk -mindepth 1 -maxdepth 1)
      if [ -n "$left" ]; then
        echo "bed: DPDK runtime folders left behind:" $left >&2
        [ "$rc" -ne 0 ] || rc=3
      fi
      exit "$rc"
    ' nbbed "$state" "$base" "$repo" "$script" "$dirs" "$@"
  local rc=$?
  [ -z "$made" ] || rmdir "$made" 2>/dev/null || true
  return "$rc"
}

# The folder of built programs and libbarrier for a test: $NB_BUILD_DIR, else the newest of
# $CARGO_TARGET_DIR (or target/) /release and /debug that holds all of them; empty if none.
nb_build_dir() {
  local repo t best="" d
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  if [ -n "${NB_BUILD_DIR:-}" ]; then echo "$NB_BUILD_DIR"; return; fi
  t=${CARGO_TARGET_DIR:-$repo/target}
  case "$t" in /*) ;; *) t=$repo/$t ;; esac
  for d in "$t/release" "$t/debug"; do
    local f ok=1
    for f in barrier-switch barrier-xdp barrier-leaf barrier-gen barrier-sim barrier-demo libbarrier.so libbarrier.a; do
      [ -f "$d/$f" ] || ok=0
    done
    [ "$ok" = 1 ] || continue
    if [ -z "$best" ] || [ "$d/barrier-switch" -nt "$best/barrier-switch" ]; then best=$d; fi
  done
  echo "$best"
}

# Open MPI's component folder (`ompi_info --path pkglibdir`), where scripts/install.sh links
# coll/netbarrier; empty when Open MPI is not installed.
nb_ompi_component_dir() {
  ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p'
}
