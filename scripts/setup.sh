#!/usr/bin/env bash
# Prepare a fresh Debian 12 machine (as root) to build, test and run netbarrier.
# Idempotent: packages already present are skipped; hugepages are set up when possible,
# but nothing in the project depends on them (tests run with --no-huge).
set -euo pipefail

PACKAGES=(
  # DPDK 22.11 runtime, PMDs (net_ring, net_pcap, net_af_packet, net_memif, ...) and headers
  dpdk dpdk-dev libdpdk-dev
  # bindgen needs libclang; pkg-config finds libdpdk; the C ABI example needs a C compiler
  pkg-config clang libclang-dev llvm gcc make
  # network namespaces, veth pairs, tc with clsact/BPF for link faults; eBPF programs
  iproute2 libbpf-dev
  # the XDP dataplane (dataplane/xdp, docs/offload.md): bpftool shows the loaded program and
  # its verifier figures, xdp-tools (xdp-loader, xdpdump) attaches and inspects by hand
  bpftool xdp-tools
  # kill and sysctl, used by tests and the namespace scripts (absent from minimal images)
  procps
  # ordinary traffic across a switch's AF_XDP ports (dataplane/switchd/tests/af_xdp.rs): ping
  # (ARP, ICMP, IPv6 neighbour discovery) and TCP with iperf3
  iputils-ping iperf3
  # the TAP exception path's tests turn off the veth hosts' offloads (tests/exception.rs)
  ethtool
  # the shipped unit (scripts/systemd) is tested under a systemd booted in namespaces
  # (scripts/tests/systemd_unit.sh: systemd, systemctl, journalctl; unshare and nsenter)
  systemd util-linux
  # pcap files for net_pcap golden tests; capture and dissection tools
  libpcap-dev tshark
  python3
  # the reference Prometheus text-format parser, for scripts/tests/observe.sh
  python3-prometheus-client
  # the Promela model of the protocol (scripts/model, docs/reliability.md); pan needs gcc
  spin
  # the performance suite (perf/run.sh, docs/performance.md): Open MPI for the MPI_Barrier
  # comparison (mpicc, mpirun), gnuplot for the plots
  openmpi-bin libopenmpi-dev gnuplot-nox mpich libmpich-dev
  # a job's own run of a group through a real Slurm, authenticated by MUNGE as a site runs it
  # (scripts/slurm, scripts/tests/slurm_job.sh)
  slurm-wlm munge
)

need=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: missing packages (${need[*]}); run as root to install them" >&2
    exit 1
  fi
  echo "setup.sh: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Rust: the toolchain is pinned in rust-toolchain.toml; rustup installs it on first use when
# it is reachable. cargo-nextest is optional (scripts/test.sh falls back to cargo test).
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup.sh: cargo not found; install Rust with rustup (see README)" >&2
  exit 1
fi

# Hugepages: a deployment wants them; tests and the demo do not need them.
if [ "$(id -u)" -eq 0 ] && [ -w /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages ]; then
  cur=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)
  if [ "$cur" -lt 256 ]; then
    echo 256 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages 2>/dev/null || true
  fi
  if ! mountpoint -q /dev/hugepages 2>/dev/null; then
    mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages 2>/dev/null || true
  fi
fi

pkg-config --exists 'libdpdk >= 22.11' || { echo "setup.sh: libdpdk >= 22.11 not found by pkg-config" >&2; exit 1; }
echo "setup.sh: ready (DPDK $(pkg-config --modversion libdpdk))"
