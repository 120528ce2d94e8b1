//! barrier-switch: the switch of the barrier method on DPDK.
//!
//! | module | role |
//! | --- | --- |
//! | `config` | TOML file -> validated `Config`, every refusal naming its key, before DPDK starts |
//! | `io` | the I/O seam: an RX queue and a TX queue behind two traits; in-memory wires |
//! | `dpdk_io` | the same traits on DPDK queue handles and mbufs |
//! | `rx` | RX poller: parse, apply to the shared group table, hand actions to the scheduler |
//! | `scheduler` | the scheduler poller: rings in, timers, frames built and sent with backpressure; over pure logic in `scheduler::round_robin` (per-port round-robin across groups) and `scheduler::wheel` (the re-send timer wheel) |
//! | `engine` | one switch assembled from ports, table, RX pollers and scheduler |
//! | `poll` | pollers and the busy loop that runs several on one lcore |
//! | `counters` | per-owner counter cells, summed and printed by the management thread |
//! | `runtime` | EAL, ports, lcore placement, signals, shutdown; `run` and the DPDK demo |
//! | `demo`, `leafhost` | a whole tree in one process; emulated leaves that check every release |
//! | `fairness` | the slow-group-next-to-a-flood measurement behind `perf/fairness.rs` |
#![forbid(unsafe_code)]

pub mod config;
pub mod counters;
pub mod demo;
pub mod dpdk_io;
pub mod engine;
pub mod fairness;
pub mod io;
pub mod leafhost;
pub mod poll;
pub mod runtime;
pub mod rx;
pub mod scheduler;
