//! barrier-runtime: the poll-mode runtime every netbarrier program shares.
//!
//! | module | role |
//! | --- | --- |
//! | `affinity` | where threads that are not lcores run: CPU lists, the control cores (the CPUs no polling lcore uses), pinning through `core_affinity` |
//! | `args` | the command line every DPDK program takes: `PROGRAM [SUBCOMMAND] [EAL args] -- [program args]` |
//! | `io` | the I/O seam: an RX queue and a TX queue behind two traits; in-memory wires |
//! | `dpdk_io` | the same traits on DPDK queue handles and mbufs (feature `dpdk`) |
//! | `poll` | pollers, the loop that runs several on one lcore, the idle policy |
//! | `clock` | the monotonic clock every loop shares (TSC on DPDK) |
//! | `counters` | single-writer counter cells, summed and printed by a management thread |
//! | `launch` | port bring-up and close, loops placed on lcores, signals, shutdown order (all but signals and loop reports: feature `dpdk`) |
//! | `logging` | the `tracing` subscriber every program installs (`RUST_LOG`) |
//! | `wheel` | a hashed timer wheel, generic over what a timer carries (switch re-sends, emulated leaves) |
//!
//! It knows nothing of barriers: the switch, the demo tree, the generator and the tests build
//! their pipelines out of these parts.
//!
//! Feature `dpdk` (default): the DPDK parts. Without it (`--no-default-features`) the crate
//! builds with no libdpdk, and `Clock::tsc` is the OS clock.
#![forbid(unsafe_code)]

pub mod affinity;
pub mod args;
pub mod clock;
pub mod counters;
#[cfg(feature = "dpdk")]
pub mod dpdk_io;
pub mod io;
pub mod launch;
pub mod logging;
pub mod poll;
pub mod wheel;
