#!/usr/bin/env bash
# Compile scripts/bpf/linkfault.bpf.c into one tc object for one set of fault rates.
# Rates are build-time constants (see docs/faults.md for why), so each link that needs a
# different rate set gets its own object; scripts/lib/netns.sh calls this and caches objects by
# their parameters.
#
# usage: build.sh -o OUT.o [--drop PPM] [--dup PPM] [--corrupt PPM]
#                 [--corrupt-offset N|-1] [--corrupt-xor 0xNN] [--all-frames] [--drop-shot]
#                 [--ingress]
#   rates are per million frames (0..1000000); --all-frames touches every frame, not only
#   barrier frames (EtherType 0x88B5); --drop-shot drops with TC_ACT_SHOT, which the sender
#   sees as ENOBUFS, instead of the silent TC_ACT_STOLEN; --ingress builds the variant for
#   clsact ingress (a duplicate re-enters the receive path instead of going out again).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out="" drop=0 dup=0 corrupt=0 offset=-1 xor=0xFF barrier_only=1 drop_action=TC_ACT_STOLEN ingress=0

die() { echo "build.sh: $*" >&2; exit 2; }
ppm() { [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -le 1000000 ] || die "$1 wants an integer per-million rate 0..1000000, got '$2'"; }

while [ $# -gt 0 ]; do
  case $1 in
    -o) out=${2:?}; shift 2 ;;
    --drop) ppm "$1" "${2:-}"; drop=$2; shift 2 ;;
    --dup) ppm "$1" "${2:-}"; dup=$2; shift 2 ;;
    --corrupt) ppm "$1" "${2:-}"; corrupt=$2; shift 2 ;;
    --corrupt-offset) [[ ${2:-} =~ ^(-1|[0-9]+)$ ]] || die "--corrupt-offset wants -1 or a byte offset"; offset=$2; shift 2 ;;
    --corrupt-xor) [[ ${2:-} =~ ^0x[0-9a-fA-F]{1,2}$ ]] || die "--corrupt-xor wants 0xNN"; xor=$2; shift 2 ;;
    --all-frames) barrier_only=0; shift ;;
    --drop-shot) drop_action=TC_ACT_SHOT; shift ;;
    --ingress) ingress=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) die "unknown argument '$1'" ;;
  esac
done
[ -n "$out" ] || die "missing -o OUT.o"
command -v clang >/dev/null || die "clang not found (Debian package clang)"
[ -f /usr/include/bpf/bpf_helpers.h ] || die "bpf/bpf_helpers.h not found (Debian package libbpf-dev)"

# <linux/bpf.h> includes <asm/types.h>, which Debian keeps under the multiarch directory.
multiarch=$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)

clang -O2 -g -target bpf -I"/usr/include/$multiarch" \
  -DDROP_PPM="$drop" -DDUP_PPM="$dup" -DCORRUPT_PPM="$corrupt" \
  -DCORRUPT_OFFSET="$offset" -DCORRUPT_XOR="$xor" -DBARRIER_ONLY="$barrier_only" -DDROP_ACTION="$drop_action" -DINGRESS="$ingress" \
  -c "$here/linkfault.bpf.c" -o "$out.tmp.$$"
mv -f "$out.tmp.$$" "$out"
