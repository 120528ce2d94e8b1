#!/usr/bin/env bash
# scripts/install.sh, tested where people use it: installed to the default prefix /usr/local
# and uninstalled again, inside a bed (scripts/lib/bed.sh) whose /usr/local and /etc are
# overlays, so the machine's folders and its loader cache are never touched and "uninstall
# leaves nothing" is exact: the overlay's upper layer of /usr/local must be empty at the end.
#
# - --help, usage errors (exit 2);
# - DESTDIR staging: the files under DESTDIR/PREFIX, pkg-config files saying PREFIX, no
#   ldconfig; --uninstall with the same DESTDIR leaves DESTDIR empty;
# - /usr/local: programs on PATH, libbarrier.so.VERSION with its SONAME link and the dev link,
#   ldconfig run (the loader cache lists libbarrier.so.MAJOR), the C example built with
#   `pkg-config --libs barrier` (depends on libbarrier.so.MAJOR, no rpath/runpath) and with
#   `pkg-config --static --libs barrier` (no libbarrier dependency at all), both run with
#   LD_LIBRARY_PATH unset; the MPI pieces (ffi/mpi): coll/netbarrier listed by `ompi_info`
#   (registered in Open MPI's component folder, itself an overlay in the bed), both PMPI
#   libraries finding libbarrier.so.MAJOR through the loader cache, and plain MPI programs
#   (MPICH with the PMPI library, Open MPI with the component) that fall back with the warning
#   on an interface that does not exist and finish; the Slurm scripts; the systemd unit in lib/systemd/system naming /usr/local/bin and
#   passing `systemd-analyze verify` (where installed); the example configurations in share/netbarrier/configs pass
#   `barrier-switch check`; then --uninstall: nothing left under /usr/local, nothing in the
#   loader cache, nothing in Open MPI's folder.
#
# Needs root and a build (nb_build_dir: target/release or target/debug with the programs and
# libbarrier); without one it says "skipped", and fails instead when NB_REQUIRE_BINARIES=1.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=../lib/bed.sh
source "$here/../lib/bed.sh"
ok=0 bad=0
pass() { ok=$((ok + 1)); echo "  ok: $1"; }
fail() { bad=$((bad + 1)); echo "  FAILED: $1"; }
finish() { echo "install: $ok passed, $bad failed"; [ "$bad" -eq 0 ]; exit $?; }

if [ "$(id -u)" -ne 0 ]; then echo "install: skipped: needs root"; exit 0; fi
build=$(nb_build_dir)
if [ -z "$build" ]; then
  if [ "${NB_REQUIRE_BINARIES:-0}" = 1 ]; then echo "install: FAILED: nothing built"; exit 1; fi
  echo "install: skipped: build the workspace first"; exit 0
fi
echo "install: programs and libbarrier from $build"
work=$(mktemp -d "$repo/target/nb-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

# --- usage ---
out=$(bash "$repo/scripts/install.sh" --help)
if [ $? -eq 0 ] && grep -q -- '--uninstall' <<< "$out" && grep -q DESTDIR <<< "$out" \
  && grep -q -- '--static' <<< "$out"; then pass "--help"; else fail "--help: $out"; fi
bash "$repo/scripts/install.sh" --no-such-option >/dev/null 2>&1
[ $? -eq 2 ] && pass "unknown option: exit 2" || fail "unknown option: not exit 2"
bash "$repo/scripts/install.sh" --prefix relative/dir --build-dir "$build" >/dev/null 2>&1
[ $? -eq 2 ] && pass "relative prefix: exit 2" || fail "relative prefix: not exit 2"

# --- DESTDIR staging ---
stage=$work/stage
if DESTDIR=$stage bash "$repo/scripts/install.sh" --prefix /opt/nbtest --build-dir "$build" \
  > "$work/stage.log" 2>&1; then
  missing=""
  for f in bin/barrier-switch bin/barrier-xdp bin/barrier-leaf bin/barrier-gen bin/barrier-sim bin/barrier-demo lib/libbarrier.a \
    lib/libbarrier.so include/barrier.h lib/pkgconfig/barrier.pc lib/pkgconfig/barrier-libs.pc \
    share/netbarrier/configs/root.toml share/netbarrier/install-manifest \
    lib/systemd/system/barrier-switch@.service lib/systemd/system/barrier-xdp@.service \
    lib/libnbpmpi-openmpi.so lib/libnbpmpi-mpich.so lib/netbarrier/openmpi/mca_coll_netbarrier.so \
    share/netbarrier/slurm/prolog.sh share/netbarrier/slurm/epilog.sh \
    share/netbarrier/slurm/task_prolog.sh share/netbarrier/slurm/common.sh; do
    [ -e "$stage/opt/nbtest/$f" ] || missing="$missing $f"
  done
  [ -z "$missing" ] && pass "DESTDIR: files staged" || fail "DESTDIR: missing:$missing"
  grep -qx 'prefix=/opt/nbtest' "$stage/opt/nbtest/lib/pkgconfig/barrier.pc" \
    && pass "DESTDIR: barrier.pc says the prefix, not DESTDIR" || fail "DESTDIR: barrier.pc prefix"
  grep -q ldconfig "$work/stage.log" && fail "DESTDIR: ran ldconfig" || pass "DESTDIR: no ldconfig"
  unit=$stage/opt/nbtest/lib/systemd/system/barrier-switch@.service
  grep -qx 'ExecStart=/opt/nbtest/bin/barrier-switch run --config /etc/netbarrier/%i.toml' "$unit" \
    && grep -qx 'Type=notify' "$unit" && grep -qx 'RuntimeDirectory=netbarrier' "$unit" \
    && ! grep -q '@BINDIR@' "$unit" \
    && pass "DESTDIR: the systemd unit runs PREFIX/bin/barrier-switch" || fail "DESTDIR: unit: $(cat "$unit")"
  grep -q "coll/netbarrier is in /opt/nbtest/lib/netbarrier/openmpi, not in Open" "$work/stage.log" \
    && pass "DESTDIR: the component is not registered outside the stage, and that is said" \
    || fail "DESTDIR: no note on the component"
  [ -x "$stage/opt/nbtest/share/netbarrier/slurm/prolog.sh" ] \
    && [ ! -x "$stage/opt/nbtest/share/netbarrier/slurm/common.sh" ] \
    && pass "DESTDIR: the Slurm hooks executable, what they source not" || fail "DESTDIR: Slurm modes"
  grep -q "systemd does not look in /opt/nbtest" "$work/stage.log" \
    && pass "DESTDIR: a prefix systemd does not search is said" || fail "DESTDIR: no note on the unit"
  DESTDIR=$stage bash "$repo/scripts/install.sh" --prefix /opt/nbtest --uninstall >/dev/null 2>&1
  left=$(find "$stage" -mindepth 1)
  [ -z "$left" ] && pass "DESTDIR: uninstall leaves nothing" || fail "DESTDIR: left: $left"
else
  fail "DESTDIR install: $(tail -5 "$work/stage.log")"
fi

# --- --lib-only ---
if DESTDIR=$work/lib bash "$repo/scripts/install.sh" --prefix /opt/nbtest --build-dir "$build" \
  --lib-only >/dev/null 2>&1 && [ -f "$work/lib/opt/nbtest/lib/libbarrier.a" ] \
  && [ -f "$work/lib/opt/nbtest/lib/pkgconfig/barrier.pc" ] && [ ! -e "$work/lib/opt/nbtest/bin" ] \
  && [ -f "$work/lib/opt/nbtest/lib/libnbpmpi-mpich.so" ] \
  && [ -f "$work/lib/opt/nbtest/share/netbarrier/slurm/task_prolog.sh" ] \
  && [ ! -e "$work/lib/opt/nbtest/share/netbarrier/configs" ]; then
  pass "--lib-only: the library, the MPI libraries and Slurm scripts, no programs"
else
  fail "--lib-only"
fi

# --- /usr/local, in a bed ---
cat > "$work/system.sh" <<'EOF'
set -uo pipefail
build=$1 out=$2
bad=0
t() { if (eval "$2"); then echo "  ok: $1"; else echo "  FAILED: $1"; bad=$((bad + 1)); fi; }
unset LD_LIBRARY_PATH
source scripts/lib/bed.sh
# Open MPI's component folder is outside /usr/local; the bed overlays it too (scripts/lib/bed.sh),
# so the link install.sh puts there never reaches the machine; what uninstall leaves is checked
# from outside, after the bed.
ompi_dir=$(nb_ompi_component_dir)
bash scripts/install.sh --build-dir "$build" > "$out/install.log" 2>&1
rc=$?
t "install to /usr/local" '[ $rc -eq 0 ] || { cat "$out/install.log"; false; }'
t "ldconfig ran" 'grep -q "ldconfig" "$out/install.log"'
t "programs on PATH" 'for p in barrier-switch barrier-xdp barrier-leaf barrier-gen barrier-sim barrierctl barrier-demo; do [ "$(command -v $p)" = /usr/local/bin/$p ] || exit 1; done'
t "every program answers --help" 'barrier-switch --help >/dev/null && barrier-xdp --help >/dev/null && barrier-leaf --help >/dev/null && barrier-gen --help >/dev/null && barrier-sim --help >/dev/null && barrier-demo --help >/dev/null'
ver=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n1)
major=${ver%%.*}
t "libbarrier.so.$ver, SONAME libbarrier.so.$major" '[ -f /usr/local/lib/libbarrier.so.$ver ] && readelf -d /usr/local/lib/libbarrier.so.$ver | grep "soname: \[libbarrier.so.$major\]" >/dev/null'
t "links libbarrier.so.$major and libbarrier.so" '[ "$(readlink /usr/local/lib/libbarrier.so.$major)" = libbarrier.so.$ver ] && [ "$(readlink /usr/local/lib/libbarrier.so)" = libbarrier.so.$major ]'
# grep without -q reads the whole listing: with -q it stops at the match and ldconfig dies of
# SIGPIPE on a long cache, which pipefail reports as a failure (seen once heaptrack's libraries
# made the cache longer).
t "loader cache lists libbarrier.so.$major" 'ldconfig -p | grep "libbarrier.so.$major .*/usr/local/lib/libbarrier.so.$major" >/dev/null'
t "pkg-config finds barrier on its default path" 'pkg-config --exists barrier && [ "$(pkg-config --modversion barrier)" = "$ver" ]'
ex=ffi/barrier-leaf-capi/examples/c/barrier_example.c
t "cc with pkg-config --libs barrier" 'cc -Wall -Werror $ex $(pkg-config --cflags --libs barrier) -o /tmp/ex_shared'
t "cc with pkg-config --static --libs barrier" 'cc -Wall -Werror $ex $(pkg-config --cflags --static --libs barrier) -o /tmp/ex_static'
t "shared: needs libbarrier.so.$major, no rpath/runpath" 'd=$(readelf -d /tmp/ex_shared); grep -q "NEEDED.*\[libbarrier.so.$major\]" <<< "$d" && ! grep -qi "rpath\|runpath" <<< "$d"'
t "static: no libbarrier dependency" '! readelf -d /tmp/ex_static | grep -q libbarrier'
for e in shared static; do
  # on an interface that does not exist the example reports the setup error (exit 2): the
  # library was found and loaded (a missing library is exit 127 from the loader)
  t "$e example runs without LD_LIBRARY_PATH" '/tmp/ex_$e nbnosuchif0 7 1 > /tmp/$e.out 2>&1; rc=$?; [ $rc -eq 2 ] && grep -q nbnosuchif0 /tmp/$e.out || { cat /tmp/$e.out; false; }'
done
t "coll/netbarrier registered: ompi_info lists it" 'ompi_info | grep "MCA coll: netbarrier" >/dev/null && [ "$(readlink "$ompi_dir/mca_coll_netbarrier.so")" = /usr/local/lib/netbarrier/openmpi/mca_coll_netbarrier.so ]'
t "coll/netbarrier loads: its parameters" 'ompi_info --param coll netbarrier --level 9 | grep coll_netbarrier_priority >/dev/null'
t "PMPI libraries find libbarrier.so.$major without LD_LIBRARY_PATH" 'for l in openmpi mpich; do ldd /usr/local/lib/libnbpmpi-$l.so | grep "libbarrier.so.$major => /usr/local/lib/libbarrier.so.$major" >/dev/null || exit 1; done'
t "Slurm scripts in share/netbarrier/slurm" '[ -x /usr/local/share/netbarrier/slurm/prolog.sh ] && [ -x /usr/local/share/netbarrier/slurm/epilog.sh ] && [ -x /usr/local/share/netbarrier/slurm/task_prolog.sh ] && [ -f /usr/local/share/netbarrier/slurm/netbarrier-slurm.conf.example ]'
# Plain MPI programs (they know nothing of netbarrier) on the installed pieces, told to use an
# interface that does not exist: each rank warns once and the barriers complete in software.
make -s -C ffi/mpi B="$out/mpitest" "$out/mpitest/nb_mpi_test-mpich" "$out/mpitest/nb_mpi_test-openmpi" > "$out/mpitest.log" 2>&1
nbenv=(NETBARRIER_GROUP=5 NETBARRIER_IFACE=nbnosuchif0 NETBARRIER_TIMEOUT_MS=300)
gx=() ox=()
for e in "${nbenv[@]}"; do gx+=(-genv "${e%%=*}" "${e#*=}"); ox+=(-x "$e"); done
t "MPICH program with the installed PMPI library: falls back, finishes" 'timeout -k 5 60 mpiexec.mpich -n 2 -iface lo "${gx[@]}" -genv LD_PRELOAD /usr/local/lib/libnbpmpi-mpich.so "$out/mpitest/nb_mpi_test-mpich" 50 "$out/mpich" 1 > "$out/mpich.log" 2>&1 && grep "netbarrier: .*warning: cannot open a leaf on nbnosuchif0" "$out/mpich.log" >/dev/null || { cat "$out/mpitest.log" "$out/mpich.log"; false; }'
t "Open MPI program with the installed component: falls back, finishes" 'timeout -k 5 60 mpirun.openmpi --allow-run-as-root --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo -np 2 "${ox[@]}" "$out/mpitest/nb_mpi_test-openmpi" 50 "$out/ompi" 1 > "$out/ompi.log" 2>&1 && grep "netbarrier: .*warning: cannot open a leaf on nbnosuchif0" "$out/ompi.log" >/dev/null || { cat "$out/ompi.log"; false; }'
t "installed configurations pass barrier-switch check" 'n=0; for c in $(find /usr/local/share/netbarrier/configs -name "*.toml"); do barrier-switch check --config $c >/dev/null || exit 1; n=$((n+1)); done; [ $n -ge 5 ]'
t "the systemd unit in /usr/local/lib/systemd/system" 'grep -qx "ExecStart=/usr/local/bin/barrier-switch run --config /etc/netbarrier/%i.toml" /usr/local/lib/systemd/system/barrier-switch@.service'
t "the XDP switch's unit beside it" 'grep -qx "ExecStart=/usr/local/bin/barrier-xdp run --config /etc/netbarrier/%i.toml" /usr/local/lib/systemd/system/barrier-xdp@.service'
if command -v systemd-analyze >/dev/null 2>&1; then
  # systemd-analyze verify loads the unit as systemd would (without a running systemd): an
  # unknown key or a bad value is a line on its output
  # (it leaves a marker file in /run/systemd: a tmpfs there, in the bed's mount namespace)
  mount -t tmpfs nbsystemd /run/systemd 2>/dev/null || true
  t "systemd-analyze verify: the unit has no error" 'v=$(systemd-analyze verify --man=no /usr/local/lib/systemd/system/barrier-switch@test.service 2>&1); [ -z "$v" ] || { echo "$v"; false; }'
  t "systemd-analyze verify: the XDP switch's unit has no error" 'v=$(systemd-analyze verify --man=no /usr/local/lib/systemd/system/barrier-xdp@test.service 2>&1); [ -z "$v" ] || { echo "$v"; false; }'
fi
t "reinstall over an installation" 'bash scripts/install.sh --build-dir "$build" >/dev/null 2>&1'
bash scripts/install.sh --uninstall > "$out/uninstall.log" 2>&1
rc=$?
t "uninstall" '[ $rc -eq 0 ] || { cat "$out/uninstall.log"; false; }'
t "loader cache without libbarrier" '! ldconfig -p | grep libbarrier >/dev/null'
t "uninstall twice: an error" '! bash scripts/install.sh --uninstall >/dev/null 2>&1'
exit $bad
EOF
nb_bed_run "$work/bed" "" 300 "$work/system.sh" "$build" "$work"
rc=$?
if [ "$rc" -eq 0 ]; then pass "install to /usr/local and back (bed)"; else fail "/usr/local (bed): $rc failed"; fi
# The upper layer holds what the bed changed under /usr/local: no file, link or whiteout may be
# left, and a folder only where /usr/local has it (the overlay copies a folder up when a file is
# written into it).
left=$(cd "$work/bed/usr-local" && find . -mindepth 1 \( ! -type d -o -type d ! -exec test -d "/usr/local/{}" \; \) -print)
[ -z "$left" ] && pass "/usr/local: uninstall leaves nothing" || fail "/usr/local: left: $left"
# The same for Open MPI's folder: nothing, except a whiteout (a character device) where the
# machine's folder already held a name, which install.sh replaced and uninstall removed (a
# component another install left there: the test does not depend on the machine being clean).
ompi_dir=$(nb_ompi_component_dir)
if [ -d "$work/bed/ompi" ]; then
  left=$(cd "$work/bed/ompi" && find . -mindepth 1 ! \( -type c -exec sh -c 'test -e "$1" || test -L "$1"' - "$ompi_dir/{}" \; \) -print)
  [ -z "$left" ] && pass "Open MPI's folder: uninstall leaves nothing" || fail "Open MPI's folder: left: $left"
else
  fail "Open MPI's folder '$ompi_dir' was not overlaid in the bed"
fi
finish
