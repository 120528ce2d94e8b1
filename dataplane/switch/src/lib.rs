//! barrier-switch: the switch of the barrier method, as a library: the program is
//! `dataplane/switchd` (`barrier-switch run|check|demo`), the demo tree `barrier-testbed`.
//!
//! | module | role |
//! | --- | --- |
//! | `spec` | the switch in typed values: ports, lcores, groups as the protocol's `GroupConfig` |
//! | `config` | TOML file -> `SwitchSpec`, section by section, every refusal naming its key and line |
//! | `policer` | per-port token bucket for barrier frames, checked on the RX lcore before the table |
//! | `rx` | RX poller: parse, apply to the shared group table, hand actions to the scheduler |
//! | `scheduler` | the scheduler poller: rings in, timers, frames built and sent with backpressure; over pure logic in `scheduler::round_robin` (per-port round-robin across groups) and the runtime's timer wheel (`barrier_runtime::wheel`, the re-send timers) |
//! | `engine` | one switch assembled from ports, table, RX pollers and scheduler |
//! | `counters` | per-owner counter cells, summed and printed by the management thread |
//! | `mgmt` | the control socket on the management thread: groups created, reset, changed, deleted while the dataplane runs |
//! | `runtime` | `run`: one switch from its configuration on DPDK (feature `dpdk`) |
//! | `notify` | systemd readiness (`sd_notify`): `READY=1` with the ready line, `STOPPING=1` at the stop |
//! | `metrics` | optional Prometheus endpoint (`[metrics]`): text exposition on a plain thread |
//! | `straggler` | straggler reports of watched groups: last child, spread, latency histogram, waiting since |
//! | `telemetry` | DPDK telemetry commands (`/barrier/...`), the `--stats-json` dump, capture (`rte_pdump`); the commands and capture: feature `dpdk` |
//!
//! The poll-mode machinery (I/O traits, pollers and their loop, clock, port bring-up, lcore
//! placement) is the shared `barrier_runtime` crate; the modules here use it as `crate::io`,
//! `crate::poll` and `crate::dpdk_io`.
//!
//! Feature `dpdk` (default) is what runs on DPDK: `runtime`, the telemetry commands, the TSC
//! clock, prefetch and huge-page advice. Without it the pipeline on in-memory I/O, the
//! configuration and the management plane build and test with no libdpdk (docs/ffi.md).
#![forbid(unsafe_code)]

#[cfg(feature = "dpdk")]
use barrier_runtime::dpdk_io;
use barrier_runtime::{io, poll};

pub mod config;
pub mod counters;
pub mod engine;
pub mod metrics;
pub mod mgmt;
pub mod notify;
pub mod policer;
#[cfg(feature = "dpdk")]
pub mod runtime;
pub mod rx;
pub mod scheduler;
pub mod spec;
pub mod straggler;
pub mod telemetry;
