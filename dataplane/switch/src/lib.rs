//! barrier-switch: the switch of the barrier method on DPDK.
//!
//! Layers, each in its own module: `config` (TOML -> validated `Config`, before DPDK starts),
//! `scheduler` (per-port round-robin across groups, timer wheel; pure), `counters` (per-lcore
//! cells summed by the management thread), and the DPDK-facing poll loops.
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
pub mod sched;
pub mod scheduler;
pub mod wheel;
