#!/usr/bin/env bash
# MPI_Barrier through netbarrier against the MPI libraries' own barriers, same ranks, same
# machine, same run (docs/mpi.md): rank processes against rank processes. The offloaded side is
# the kernel-socket path (each rank's leaf on AF_PACKET over its own veth, a barrier-switch on
# net_af_packet ports in a namespace, its loop sleeping when idle); the others are Open MPI's
# tuned barrier over shared memory (btl vader) and over TCP loopback (btl tcp), and MPICH's own
# (ch4, shared memory). ffi/mpi/test/nb_mpi_bench.c times every call on every rank; p50/p99/max
# over all ranks' calls, and the ratios of p50 (theirs / ours: above 1, netbarrier is faster).
# Not part of perf/run.sh's report (yet).
#
# usage: perf/mpi.sh [NP...]     (default: 4 8)   ITERS=2000 by default
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
scripts=$repo/scripts
[ "$(id -u)" -eq 0 ] || { echo "perf/mpi.sh: needs root (namespaces, DPDK)" >&2; exit 1; }
# shellcheck source=../scripts/lib/netns.sh
source "$scripts/lib/netns.sh"
# shellcheck source=../scripts/lib/mpibed.sh
source "$scripts/lib/mpibed.sh"
nps=("$@"); [ ${#nps[@]} -gt 0 ] || nps=(4 8)
iters=${ITERS:-2000}
switch=${BARRIER_SWITCH:-$(nb_find_program barrier-switch || true)}
[ -n "$switch" ] || { echo "perf/mpi.sh: build barrier-switch first (cargo build -p barrier-switchd)" >&2; exit 1; }
libdir=${BARRIER_LIBDIR:-$(dirname "$switch")}
[ -f "$libdir/libbarrier.so" ] || { echo "perf/mpi.sh: no libbarrier.so in $libdir (cargo build -p barrier-leaf-capi, or BARRIER_LIBDIR)" >&2; exit 1; }
work=$(mktemp -d /tmp/nbm-perf.XXXXXX)
trap 'nbm_bed_down; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
B=$work/build
make -s -C "$repo/ffi/mpi" B="$B" BARRIER_LIBDIR="$libdir" RPATH=1 >"$work/make.log" 2>&1 || { cat "$work/make.log"; exit 1; }
ompi_dirs=""
for d in $(ompi_info --param mca base --level 9 --parsable | sed -n 's/^mca:mca:base:param:mca_base_component_path:value://p' | tr -d '"' | tr ':' ' '); do
  [ -d "$d" ] && ompi_dirs="$ompi_dirs${ompi_dirs:+:}$d"
done
groups=() g=21
for np in "${nps[@]}"; do
  [ "$np" -ge 2 ] && [ "$np" -le 8 ] || { echo "perf/mpi.sh: NP must be 2..8" >&2; exit 2; }
  groups+=("$g:0:$np:1" "$((g + 1)):0:$np:1"); g=$((g + 2))
done
nbm_bed_up "$work" "$switch" "${groups[@]}" || exit 1

ompi=(ip netns exec "$NBM_H_NS" timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none
  --mca oob_tcp_if_include lo --mca btl_tcp_if_include lo)
nbenv=(-x NETBARRIER_IFACE="$NBM_IFACES" -x NETBARRIER_EPOCH=1 -x NETBARRIER_TIMEOUT_MS=10000 -x NETBARRIER_VERBOSE=1)
p50() { sed -n 's/.* p50 \([0-9.]*\) us .*/\1/p' "$1"; }
line() { grep -m1 ': [0-9]* ranks' "$1" | sed 's/^[^:]*: //'; }
g=21
echo "perf/mpi.sh: $iters barriers per run after 200 warm-up; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
for np in "${nps[@]}"; do
  r=$work/np$np
  "${ompi[@]}" -np "$np" --mca btl self,vader -x OMPI_MCA_mca_base_component_path="$ompi_dirs:$B" -x NETBARRIER_GROUP=$g "${nbenv[@]}" \
    "$B/nb_mpi_bench-openmpi" "$iters" 200 > "$r.nb-ompi" 2>&1
  "${ompi[@]}" -np "$np" --mca btl self,vader "$B/nb_mpi_bench-openmpi" "$iters" 200 > "$r.ompi-sm" 2>&1
  "${ompi[@]}" -np "$np" --mca btl self,tcp "$B/nb_mpi_bench-openmpi" "$iters" 200 > "$r.ompi-tcp" 2>&1
  ip netns exec "$NBM_H_NS" timeout 300 mpiexec.mpich -n "$np" -genv NETBARRIER_GROUP $((g + 1)) -genv NETBARRIER_IFACE "$NBM_IFACES" \
    -genv NETBARRIER_VERBOSE 1 -genv LD_PRELOAD "$B/libnbpmpi-mpich.so" "$B/nb_mpi_bench-mpich" "$iters" 200 > "$r.nb-mpich" 2>&1
  ip netns exec "$NBM_H_NS" timeout 300 mpiexec.mpich -n "$np" "$B/nb_mpi_bench-mpich" "$iters" 200 > "$r.mpich" 2>&1
  g=$((g + 2))
  for f in nb-ompi nb-mpich; do
    n=$(grep -c 'summary: .* fallback none' "$r.$f")
    [ "$n" = "$np" ] || echo "perf/mpi.sh: WARNING: $f -np $np: $n of $np ranks stayed in the network (the figure is not all netbarrier)"
  done
  printf '%-52s %s\n' \
    "np $np netbarrier, Open MPI coll/netbarrier (AF_PACKET):" "$(line "$r.nb-ompi")" \
    "np $np Open MPI tuned, shared memory (vader):" "$(line "$r.ompi-sm")" \
    "np $np Open MPI tuned, TCP loopback:" "$(line "$r.ompi-tcp")" \
    "np $np netbarrier, MPICH + libnbpmpi (AF_PACKET):" "$(line "$r.nb-mpich")" \
    "np $np MPICH's own barrier (shared memory):" "$(line "$r.mpich")"
  a=$(p50 "$r.nb-ompi") b=$(p50 "$r.ompi-sm") c=$(p50 "$r.ompi-tcp") d=$(p50 "$r.nb-mpich") e=$(p50 "$r.mpich")
  if [ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] && [ -n "$d" ] && [ -n "$e" ]; then
    echo "np $np p50 ratios (theirs / netbarrier's): Open MPI shared memory $(echo "scale=2; $b / $a" | bc)x, Open MPI TCP $(echo "scale=2; $c / $a" | bc)x, MPICH $(echo "scale=2; $e / $d" | bc)x"
  else
    echo "perf/mpi.sh: a run failed; its output:"; tail -n 5 "$r".*
  fi
done
