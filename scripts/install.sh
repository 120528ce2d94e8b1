#!/usr/bin/env bash
# Installs (or, with --uninstall, removes) netbarrier's programs, the C library and the example
# configurations. Run from anywhere; root for a system prefix.
usage() {
  cat <<'EOF'
Usage: scripts/install.sh [--prefix DIR] [--build-dir DIR] [--lib-only] [--no-mpi]
                          [--no-ompi-register] [--no-ldconfig]
       scripts/install.sh --uninstall [--prefix DIR] [--no-ldconfig]

Builds the release programs and libbarrier (cargo build --release), then installs under PREFIX
(default /usr/local):

  bin/barrier-switch, bin/barrier-xdp (the XDP switch), bin/barrier-leaf, bin/barrier-gen,
      bin/barrier-sim, bin/barrierctl, bin/barrier-demo (the demo tree in one process, from
      the test bed)
  lib/libbarrier.so.VERSION, with the links lib/libbarrier.so.MAJOR (its SONAME) and
      lib/libbarrier.so; lib/libbarrier.a
  include/barrier.h
  lib/pkgconfig/barrier.pc and barrier-libs.pc
      cc app.c $(pkg-config --cflags --libs barrier)            shared
      cc app.c $(pkg-config --cflags --static --libs barrier)   static (libbarrier.a)
  share/netbarrier/configs/   the example switch configurations (dataplane/switchd/configs)
  share/netbarrier/wireshark/barrier.lua   the Wireshark dissector (scripts/wireshark): copy
      it to ~/.local/lib/wireshark/plugins/, or tshark -X lua_script:PATH
  lib/systemd/system/barrier-xdp@.service   the same for the XDP switch: barrier-xdp@NAME
  lib/systemd/system/barrier-switch@.service   the systemd unit: barrier-switch@NAME runs
      /etc/netbarrier/NAME.toml (Type=notify, RuntimeDirectory=netbarrier, Restart=on-failure;
      docs/operations.md); systemd looks there for /usr/local and /usr, run
      `systemctl daemon-reload` after installing
  share/netbarrier/slurm/   prolog.sh, epilog.sh, task_prolog.sh (and common.sh, which they
      source), netbarrier-slurm.conf.example: a job's own run of a group through Slurm
      (docs/operations.md, "A job gets its own run")
  MPI programs on the in-network barrier (ffi/mpi, docs/mpi.md), built here with make from
  ffi/mpi against the libbarrier being installed, each where its MPI's compiler wrapper is
  found (mpicc.openmpi, mpicc.mpich), else skipped with a note:
  lib/libnbpmpi-openmpi.so, lib/libnbpmpi-mpich.so   the PMPI libraries (LD_PRELOAD)
  lib/netbarrier/openmpi/mca_coll_netbarrier.so      Open MPI's coll/netbarrier component,
      and a link to it in Open MPI's component folder (`ompi_info --path pkglibdir`, outside
      PREFIX) so that `ompi_info` lists it and every Open MPI job can select it; not with
      DESTDIR or --no-ompi-register (then give jobs the folder: docs/mpi.md)
  share/netbarrier/install-manifest   what was installed; --uninstall removes exactly that

--lib-only installs a compute node's part: libbarrier, barrier.h, the pkg-config files, the MPI
libraries and the Slurm scripts.

Options:
  --prefix DIR     where to install (default /usr/local); an absolute path
  --build-dir DIR  take the programs and libraries already built in DIR (for instance
                   target/release or target/debug) instead of running cargo
  --lib-only       a compute node's part only (below; builds barrier-leaf-capi alone)
  --no-mpi         do not build or install the MPI component and libraries
  --no-ompi-register  install coll/netbarrier under PREFIX only, no link in Open MPI's folder
  --uninstall      remove every file and link the manifest lists, then the folders this
                   script created that are empty again
  --no-ldconfig    do not run ldconfig
  -h, --help       this text

Environment:
  DESTDIR          stage the files under DESTDIR/PREFIX (for packaging); the pkg-config files
                   still say PREFIX, and ldconfig is not run
  CARGO_TARGET_DIR where cargo builds (default: the workspace's target/)

ldconfig runs (unless DESTDIR or --no-ldconfig) when PREFIX/lib is one of the dynamic loader's
folders (/etc/ld.so.conf, e.g. /usr/local/lib on Debian) so that programs find libbarrier.so
without LD_LIBRARY_PATH. For another prefix the script says so: add PREFIX/lib to a file in
/etc/ld.so.conf.d/ and run ldconfig, or link statically.

Exit status: 0 done, 1 a step failed (build, copy, a file missing), 2 usage error.
EOF
}
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
prefix=/usr/local
build_dir=
uninstall=0
ldconfig=1
lib_only=0
mpi=1
ompi_register=1
die() { echo "install.sh: $1" >&2; exit "${2:-1}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) [ $# -ge 2 ] || die "--prefix needs a folder" 2; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    --build-dir) [ $# -ge 2 ] || die "--build-dir needs a folder" 2; build_dir=$2; shift 2 ;;
    --build-dir=*) build_dir=${1#--build-dir=}; shift ;;
    --uninstall) uninstall=1; shift ;;
    --lib-only) lib_only=1; shift ;;
    --no-mpi) mpi=0; shift ;;
    --no-ompi-register) ompi_register=0; shift ;;
    --no-ldconfig) ldconfig=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
case "$prefix" in /*) ;; *) die "--prefix must be an absolute path (got $prefix)" 2 ;; esac
prefix=${prefix%/}
[ -n "$prefix" ] || die "--prefix / is not supported" 2
destdir=${DESTDIR:-}
root=$destdir$prefix
manifest_rel=share/netbarrier/install-manifest
manifest=$root/$manifest_rel

# Is PREFIX/lib a folder the dynamic loader searches (ld.so.conf, or the built-in ones)?
in_loader_path() {
  local lib=$1 f
  case "$lib" in /lib|/usr/lib|/lib64|/usr/lib64) return 0 ;; esac
  for f in /etc/ld.so.conf /etc/ld.so.conf.d/*.conf; do
    [ -f "$f" ] || continue
    if sed 's/#.*//' "$f" | tr -s ' \t' '\n' | grep -qx -- "$lib"; then return 0; fi
  done
  return 1
}
run_ldconfig() {
  [ "$ldconfig" = 1 ] && [ -z "$destdir" ] || return 0
  if in_loader_path "$prefix/lib"; then
    if command -v ldconfig >/dev/null 2>&1 || [ -x /sbin/ldconfig ]; then
      echo "install.sh: ldconfig"
      PATH=$PATH:/sbin:/usr/sbin ldconfig
    fi
  elif [ "$uninstall" = 0 ]; then
    echo "install.sh: note: $prefix/lib is not in the loader's path; programs linked to" \
      "libbarrier.so need it in /etc/ld.so.conf.d/ (then ldconfig), or LD_LIBRARY_PATH," \
      "or link statically (pkg-config --static)" >&2
  fi
}

if [ "$uninstall" = 1 ]; then
  [ -f "$manifest" ] || die "nothing to uninstall: $manifest not found"
  # Files and links ("f PATH") first, then the folders this script created ("d PATH"),
  # deepest first, each only if empty. PATHs are under PREFIX, without DESTDIR.
  dirs=$({ grep '^d ' "$manifest" || true; } | cut -c3- | sort -r)
  { grep '^f ' "$manifest" || true; } | cut -c3- | while IFS= read -r path; do
    rm -f -- "$destdir$path"
  done
  rm -f -- "$manifest"
  while IFS= read -r d; do
    [ -z "$d" ] || rmdir -- "$destdir$d" 2>/dev/null || true
  done <<< "$dirs"
  run_ldconfig
  echo "install.sh: removed netbarrier from $root"
  exit 0
fi

# --- build (or take a build) ---
if [ -z "$build_dir" ]; then
  if [ "$lib_only" = 1 ]; then pkgs="-p barrier-leaf-capi"; else
    pkgs="-p barrier-switchd -p barrier-xdp -p barrier-leaf -p barrier-gen -p barrier-sim -p barrier-ctl -p barrier-testbed -p barrier-leaf-capi"
  fi
  # shellcheck disable=SC2086
  (cd "$repo" && cargo build --release $pkgs) || die "cargo build failed"
  target=${CARGO_TARGET_DIR:-$repo/target}
  case "$target" in /*) ;; *) target=$repo/$target ;; esac
  build_dir=$target/release
fi
build_dir=$(cd "$build_dir" 2>/dev/null && pwd) || die "--build-dir $build_dir: no such folder"
programs="barrier-switch barrier-xdp barrier-leaf barrier-gen barrier-sim barrierctl barrier-demo"
[ "$lib_only" = 0 ] || programs=""
for f in $programs libbarrier.so libbarrier.a; do
  [ -f "$build_dir/$f" ] || die "$build_dir/$f not found (build it first, or drop --build-dir)"
done
version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n1)
soname=$(readelf -d "$build_dir/libbarrier.so" 2>/dev/null \
  | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[ -n "$soname" ] || die "$build_dir/libbarrier.so has no SONAME (built before ffi/barrier-leaf-capi/build.rs set one? rebuild it)"
# What a static Rust library needs from the system on Linux/glibc (rustc --print
# native-static-libs for barrier-leaf-capi); the static link in scripts/tests/install.sh proves it.
private_libs="-Wl,--gc-sections -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"

# --- install, recording every file and every folder created ---
if [ -f "$manifest" ]; then
  echo "install.sh: replacing the installation under $root"
  bash "$0" --uninstall --prefix "$prefix" --no-ldconfig >/dev/null
fi
[ -z "$destdir" ] || mkdir -p -- "$destdir"
entries=()
mkdirs() {
  local d=$1 todo=()
  while [ "$d" != / ] && [ ! -d "$destdir$d" ]; do todo=("$d" "${todo[@]}"); d=$(dirname "$d"); done
  for d in "${todo[@]}"; do mkdir -- "$destdir$d"; entries+=("d $d"); done
}
put() { # put MODE SRC DEST (DEST under PREFIX)
  mkdirs "$(dirname "$3")"
  install -m "$1" -- "$2" "$destdir$3"
  entries+=("f $3")
}
link() { # link TARGET DEST
  mkdirs "$(dirname "$2")"
  ln -sfn -- "$1" "$destdir$2"
  entries+=("f $2")
}
for p in $programs; do put 0755 "$build_dir/$p" "$prefix/bin/$p"; done
put 0755 "$build_dir/libbarrier.so" "$prefix/lib/libbarrier.so.$version"
[ "$soname" = "libbarrier.so.$version" ] || link "libbarrier.so.$version" "$prefix/lib/$soname"
link "$soname" "$prefix/lib/libbarrier.so"
put 0644 "$build_dir/libbarrier.a" "$prefix/lib/libbarrier.a"
put 0644 "$repo/ffi/barrier-leaf-capi/include/barrier.h" "$prefix/include/barrier.h"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for pc in barrier barrier-libs; do
  sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" -e "s|@PRIVATE_LIBS@|$private_libs|" \
    "$repo/ffi/barrier-leaf-capi/$pc.pc.in" > "$tmp/$pc.pc"
  put 0644 "$tmp/$pc.pc" "$prefix/lib/pkgconfig/$pc.pc"
done
(cd "$repo/dataplane/switchd/configs" && find . -type f -name '*.toml' | sort | cut -c3-) \
  > "$tmp/configs"
[ "$lib_only" = 0 ] || : > "$tmp/configs"
while IFS= read -r c; do
  put 0644 "$repo/dataplane/switchd/configs/$c" "$prefix/share/netbarrier/configs/$c"
done < "$tmp/configs"
if [ "$lib_only" = 0 ] && [ -f "$repo/scripts/wireshark/barrier.lua" ]; then
  put 0644 "$repo/scripts/wireshark/barrier.lua" "$prefix/share/netbarrier/wireshark/barrier.lua"
fi
if [ "$lib_only" = 0 ]; then
  for unit in barrier-switch@.service barrier-xdp@.service; do
    sed -e "s|@BINDIR@|$prefix/bin|g" "$repo/scripts/systemd/$unit" > "$tmp/$unit"
    put 0644 "$tmp/$unit" "$prefix/lib/systemd/system/$unit"
  done
  case "$prefix" in
    /usr|/usr/local) ;;
    *) echo "install.sh: note: systemd does not look in $prefix/lib/systemd/system; to use" \
      "barrier-switch@.service and barrier-xdp@.service, link them into /etc/systemd/system" \
      "(systemctl link PATH)" >&2 ;;
  esac
fi
# Slurm: the controller's prolog/epilog and the compute nodes' task prolog (scripts/slurm), side
# by side (they source common.sh from their own folder).
for f in prolog.sh epilog.sh task_prolog.sh common.sh netbarrier-slurm.conf.example; do
  mode=0644
  case "$f" in prolog.sh|epilog.sh|task_prolog.sh) mode=0755 ;; esac
  put "$mode" "$repo/scripts/slurm/$f" "$prefix/share/netbarrier/slurm/$f"
done
# MPI (ffi/mpi): built with make against the libbarrier installed above (the libraries need
# libbarrier.so.MAJOR, found as the C example finds it), for each MPI whose compiler wrapper is
# here.
mpi_build() { # mpi_build LABEL TARGET...: make the TARGETs (file names) in $tmp/mpi
  local label=$1
  shift
  local targets=() t
  for t in "$@"; do targets+=("$tmp/mpi/$t"); done
  make -C "$repo/ffi/mpi" B="$tmp/mpi" BARRIER_LIBDIR="$build_dir" "${targets[@]}" \
    > "$tmp/mpi-$label.log" 2>&1 \
    || die "building ffi/mpi for $label failed (--no-mpi skips it):$(printf '\n'; tail -n 8 "$tmp/mpi-$label.log")"
}
if [ "$mpi" = 1 ] && ! command -v make >/dev/null 2>&1; then
  echo "install.sh: note: make not found; the MPI component and libraries are not installed" >&2
  mpi=0
fi
if [ "$mpi" = 1 ]; then
  if command -v mpicc.openmpi >/dev/null 2>&1; then
    mpi_build "Open MPI" mca_coll_netbarrier.so libnbpmpi-openmpi.so
    put 0644 "$tmp/mpi/libnbpmpi-openmpi.so" "$prefix/lib/libnbpmpi-openmpi.so"
    component=$prefix/lib/netbarrier/openmpi/mca_coll_netbarrier.so
    put 0644 "$tmp/mpi/mca_coll_netbarrier.so" "$component"
    ompi_dir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
    if [ "$ompi_register" = 1 ] && [ -z "$destdir" ] && [ -d "$ompi_dir" ]; then
      if [ -e "$ompi_dir/mca_coll_netbarrier.so" ] && [ ! -L "$ompi_dir/mca_coll_netbarrier.so" ]; then
        echo "install.sh: replacing $ompi_dir/mca_coll_netbarrier.so (a copy from make -C ffi/mpi install?)" >&2
      fi
      link "$component" "$ompi_dir/mca_coll_netbarrier.so"
      echo "install.sh: coll/netbarrier registered with Open MPI ($ompi_dir)"
    else
      echo "install.sh: note: coll/netbarrier is in $prefix/lib/netbarrier/openmpi, not in Open" \
        "MPI's component folder; give jobs OMPI_MCA_mca_base_component_path (docs/mpi.md)" >&2
    fi
  else
    echo "install.sh: note: mpicc.openmpi not found (libopenmpi-dev); Open MPI's component and" \
      "PMPI library are not installed" >&2
  fi
  if command -v mpicc.mpich >/dev/null 2>&1; then
    mpi_build MPICH libnbpmpi-mpich.so
    put 0644 "$tmp/mpi/libnbpmpi-mpich.so" "$prefix/lib/libnbpmpi-mpich.so"
  else
    echo "install.sh: note: mpicc.mpich not found (libmpich-dev); MPICH's PMPI library is not" \
      "installed" >&2
  fi
fi
mkdirs "$(dirname "$prefix/$manifest_rel")"
{
  printf '%s\n' "${entries[@]}"
  echo "f $prefix/$manifest_rel"
} > "$manifest"
run_ldconfig
echo "install.sh: installed netbarrier $version under $root ($(grep -c '^f ' "$manifest") files)"
