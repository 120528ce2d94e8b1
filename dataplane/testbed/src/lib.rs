//! barrier-testbed: what the demo, the tests and the benchmarks run against. None of it is the
//! switch or a leaf a deployment runs; all of it drives the real ones.
//!
//! | module | role |
//! | --- | --- |
//! | `demo` | a whole tree (root, intermediates, emulated leaves) in one process, any I/O |
//! | `demo_dpdk` | the demo on DPDK `net_ring` wires, placed on lcores (the program `barrier-demo`, `src/bin/demo.rs`) |
//! | `fleet` | the emulated-leaf fleet the demo and `barrier-gen` share: leaf state machines and per-group state in flat arrays, the release check, re-send timers on the runtime's wheel |
//! | `leafhost` | the demo's emulated leaves: a poller over the fleet, one link per leaf, think time, latency |
//! | `error` | `DemoError`: why a demo tree could not run |
//! | `fairness` | a slow group next to a flood of others: the measurement behind `perf/fairness.rs` |
//! | `mini_root` | a one-switch tree on the protocol's real logic, for leaf tests and examples (loopback hub or raw sockets) |
//! | `reflector` | a minimal reference system under test for the generator and its benchmark |
//! | `netns` | throw-away network namespaces with veth pairs (root and iproute2) |
//! | `switch_process` | the real `barrier-switch` binary in such a namespace, root of one group over `net_af_packet` ports: for the leaf CLI's and the C example's end-to-end tests |
//! | `linkemu` | the queue of `barrier-linkemu`, the link emulator (delay, jitter, reordering, counted) |
//!
//! Programs (`src/bin/`): `barrier-demo`, the demo tree from the command line (what
//! `scripts/demo.sh` runs), and `barrier-linkemu`. Neither is linked into the switch daemon.
//!
//! Feature `dpdk` (default): `demo_dpdk`, `fairness`, `barrier-demo` and `barrier-linkemu`.
//! Without it the rest builds with no libdpdk (the in-memory demo, the fleet, the reflector, the
//! namespaces).
#![forbid(unsafe_code)]

pub mod demo;
#[cfg(feature = "dpdk")]
pub mod demo_dpdk;
pub mod error;
#[cfg(feature = "dpdk")]
pub mod fairness;
pub mod fleet;
pub mod leafhost;
pub mod linkemu;
pub mod mini_root;
pub mod netns;
pub mod reflector;
pub mod switch_process;
