//! `barrier-sim`: a deterministic discrete-event simulator that drives the real
//! `barrier_protocol` switch and leaf state machines over a modelled network.
//!
//! Layers, bottom up: [`rng`] (seeded xoshiro256**), [`queue`] (events by modelled time, ties
//! first-in first-out), [`topology`] (tree, links, per-group port registers), [`link`]
//! (latency, jitter, serialization, loss, duplication, reordering, delay, outages), [`simulation`]
//! (the run, split by concern: configuration, leaf side, switch side with restarts, frames on
//! links, safety and liveness checks, report; [`trace`] of the events before a violation),
//! [`broken`] (deliberately wrong switch rules the checks must catch),
//! [`dissemination`] and [`compare`] (the MPI-style barrier on the same model, side by side).
//! Nothing reads a clock: the same configuration and seed always give the same report.
#![forbid(unsafe_code)]

pub mod broken;
pub mod compare;
pub mod dissemination;
pub mod link;
pub mod queue;
pub mod report;
/// The seeded generator, shared with barrier-gen through the protocol crate.
pub use barrier_protocol::rng;
pub mod simulation;
pub mod topology;
pub mod trace;

pub use broken::BrokenSwitch;
pub use link::{Faults, LinkParams};
pub use simulation::{run, ComputeModel, FaultStop, RunReport, SimConfig, ViolationKind};
pub use topology::{Topology, TreeSpec};
