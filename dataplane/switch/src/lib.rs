//! barrier-switch: the switch of the barrier method as a pipeline library. The daemon that runs
//! it on DPDK is `dataplane/switchd` (`barrier-switch run|check`); the management plane it
//! answers to (control socket, telemetry, Prometheus, straggler reports) is `barrier_mgmt`,
//! through `barrier_mgmt::Dataplane`, which `engine::SwitchStats` implements.
//!
//! | module | role |
//! | --- | --- |
//! | `spec` | the switch in typed values: ports, lcores, groups as the protocol's `GroupConfig` |
//! | `config` | TOML file -> `SwitchSpec`, section by section (the management sections through `barrier_mgmt::config`), every refusal naming its key and line |
//! | `policer` | per-port token bucket for barrier frames, checked on the RX lcore before the table |
//! | `rx` | RX poller: parse, apply a burst to the shared group table (one update per group), build sends in the received buffers |
//! | `exception` | a port's exception path: frames that are not barrier frames to a kernel interface (TAP) and the kernel's frames out of the port |
//! | `burst` | a burst's frames grouped by group, one table update per group (pure logic) |
//! | `link` | RX poller to scheduler: one batch of actions per burst, built frames with them |
//! | `scheduler` | the scheduler poller: batches in, timers, frames sent with backpressure; over pure logic in `scheduler::round_robin` (per-port round-robin across groups) and the runtime's timer wheel (`barrier_runtime::wheel`, the re-send timers) |
//! | `engine` | one switch assembled from ports, table, RX pollers and scheduler; `SwitchStats`, its `Dataplane` |
//! | `counters` | per-owner counter cells, read into `barrier_mgmt::Snapshot`s |
//!
//! The poll-mode machinery (I/O traits, pollers and their loop, clock, port bring-up, lcore
//! placement) is the shared `barrier_runtime` crate; the modules here use it as `crate::io` and
//! `crate::poll`.
//!
//! Feature `dpdk` (default): the TSC clock, prefetch and huge-page advice on the hot path, and
//! the tests on DPDK virtual devices. Without it the pipeline on in-memory I/O and the
//! configuration build and test with no libdpdk (docs/ffi.md).
#![forbid(unsafe_code)]

use barrier_runtime::{io, poll};

pub mod burst;
pub mod config;
pub mod counters;
pub mod engine;
pub mod exception;
pub mod link;
pub mod policer;
pub mod rx;
pub mod scheduler;
pub mod spec;
