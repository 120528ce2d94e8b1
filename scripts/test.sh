#!/usr/bin/env bash
# Set up the machine, build everything, run every test. This is the README's test command and
# what CI runs. DPDK tests need root (they open virtual devices) and one EAL per process:
# cargo-nextest runs every test in its own process; plain `cargo test` runs each tests/*.rs file
# as its own process, and the crates keep one EAL per file.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

# What the tests leave on the machine: every install a test makes goes to a bed, a DESTDIR or a
# scratch prefix, and none may leave a file outside it (a link in Open MPI's component folder,
# say, which made a later test depend on the order the tests ran in); every DPDK process a test
# starts, and does not kill, removes its runtime folder in /run/dpdk (a switch refusing its
# configuration once left one). Compared at the end.
# shellcheck source=lib/bed.sh
source scripts/lib/bed.sh
machine_state() {
  local ompi_dir
  ompi_dir=$(nb_ompi_component_dir)
  # (find exits 1 on a folder that is not there: /etc/netbarrier on a fresh machine)
  { find /usr/local /etc/netbarrier ${ompi_dir:+"$ompi_dir"} -maxdepth 4 \
      \( -name '*barrier*' -o -name '*nbpmpi*' \) 2>/dev/null || true
    find /run/dpdk -mindepth 1 -maxdepth 1 2>/dev/null || true; } | sort
}
state_before=$(machine_state)

echo "== format"
cargo fmt --all --check

echo "== build"
cargo build --workspace --all-targets

echo "== clippy"
cargo clippy --workspace --all-targets -- -D warnings

echo "== tests"
# Tests that need root fail instead of skipping (dataplane/testbed/src/netns.rs, can_create).
export NB_REQUIRE_ROOT=1
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast --profile ci
else
  cargo test --workspace --no-fail-fast
fi

echo "== without DPDK (libdpdk hidden from pkg-config)"
# What a machine without libdpdk builds and tests: the protocol, the simulator, barrierctl, the
# runtime, the switch's pipeline on in-memory I/O with its configuration, management plane and
# control socket, the generator's engine on in-memory wires, the fuzz checks (each crate's
# feature `dpdk` off; docs/ffi.md, "Building without DPDK"). pkg-config is given an empty search
# path, so dpdk-sys's build script fails if any of them pulls it in: this stage passing proves
# none does. Its own target directory (other features than the build above); a few minutes.
nodpdk=(env PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=/nonexistent CARGO_TARGET_DIR=target/nodpdk)
if "${nodpdk[@]}" pkg-config --exists libdpdk; then
  echo "libdpdk is still visible to pkg-config: the stage would prove nothing" >&2
  exit 1
fi
"${nodpdk[@]}" cargo clippy --no-default-features --all-targets -p barrier-protocol \
  -p barrier-sim -p barrier-ctl -p barrier-runtime -p barrier-mgmt -p barrier-switch -p barrier-gen \
  -p barrier-fuzz-check -- -D warnings
"${nodpdk[@]}" cargo test --no-default-features -p barrier-protocol -p barrier-sim \
  -p barrier-ctl -p barrier-runtime -p barrier-mgmt -p barrier-switch -p barrier-gen -p barrier-fuzz-check

echo "== loom (model-checked interleavings of the group table)"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p barrier-protocol --release --lib --tests loom -- --test-threads=1

echo "== model check"
# spin on scripts/model/barrier.pml: two broken variants that must fail, the small tree's
# exhaustive safety and progress runs (docs/reliability.md, "Model checking"); about 1 minute
bash scripts/model/check.sh --bounded

echo "== doc tests"
# dpdk-sys has doctest = false (its doc comments are DPDK's C documentation), but an explicit
# --doc run ignores that, so leave it out here.
cargo test --workspace --doc --exclude dpdk-sys

echo "== multi-process trees in network namespaces, eBPF link faults, install, doc walkthroughs"
# the real-programs tree must not be skipped in CI: the binaries were built above
NB_REQUIRE_BINARIES=1 bash scripts/tests/netns_suite.sh

echo "== libbarrier with DPDK (barrier_leaf_open_dpdk from C)"
# The cargo feature `dpdk` of barrier-leaf-capi is off by default (libbarrier without DPDK, the
# library the stages above tested and installed); this builds it on, runs the C program on a
# DPDK port (ffi/barrier-leaf-capi/tests/c_dpdk.rs), then builds the default library back into
# target/debug. Only the capi crate recompiles; about a minute.
cargo build -p barrier-leaf-capi --features dpdk
cargo test -p barrier-leaf-capi --features dpdk --test c_dpdk
cargo build -p barrier-leaf-capi

echo "== what the tests left on the machine"
state_after=$(machine_state)
if [ "$state_before" != "$state_after" ]; then
  echo "the tests changed the machine outside their beds and scratch folders (< before, > after):" >&2
  diff <(echo "$state_before") <(echo "$state_after") >&2 || true
  exit 1
fi
echo "nothing: the same netbarrier files and DPDK runtime folders as before the tests"
