#!/usr/bin/env bash
# Installs libbarrier (shared and static), barrier.h and barrier.pc under a prefix.
#
#   ffi/barrier-leaf-capi/install.sh --prefix /usr/local            # builds --release first
#   ffi/barrier-leaf-capi/install.sh --prefix DIR --lib-dir target/debug   # already built libs
#
# Then: cc app.c $(PKG_CONFIG_PATH=DIR/lib/pkgconfig pkg-config --cflags --libs barrier)
# (add --static to link libbarrier.a; its Libs.private lists what Rust's std needs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=
libdir=
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --lib-dir) libdir=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$prefix" ] || { echo "install.sh: --prefix is required" >&2; exit 2; }

if [ -z "$libdir" ]; then
  (cd "$here" && cargo build --release -p barrier-leaf-capi)
  target=$(cd "$here" && cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
  libdir=$target/release
fi
for f in libbarrier.so libbarrier.a; do
  [ -f "$libdir/$f" ] || { echo "install.sh: $libdir/$f not found (build barrier-leaf-capi first)" >&2; exit 1; }
done

version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$here/../../Cargo.toml" | head -n1)
# What a static Rust library needs from the system on Linux/glibc (rustc --print
# native-static-libs for this crate).
private_libs="-Wl,--gc-sections -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"

mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
install -m 0755 "$libdir/libbarrier.so" "$prefix/lib/libbarrier.so"
install -m 0644 "$libdir/libbarrier.a" "$prefix/lib/libbarrier.a"
install -m 0644 "$here/include/barrier.h" "$prefix/include/barrier.h"
abs_prefix=$(cd "$prefix" && pwd)
sed -e "s|@PREFIX@|$abs_prefix|" -e "s|@VERSION@|$version|" -e "s|@PRIVATE_LIBS@|$private_libs|" \
  "$here/barrier.pc.in" > "$prefix/lib/pkgconfig/barrier.pc"
echo "installed libbarrier $version under $abs_prefix"
