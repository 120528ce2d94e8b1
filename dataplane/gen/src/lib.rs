//! # barrier-gen: a line-rate load generator for barrier switches
//!
//! Each generator port plays one child of the switch under test in every group; each (port,
//! group) is one `barrier_protocol::leaf::Leaf`, so the generator speaks the protocol exactly as a
//! compute node does. The switch may be `barrier-switch` (in this process over `net_ring`, or
//! another process / machine over any DPDK port) or hardware.
//!
//! | module | role |
//! | --- | --- |
//! | [`engine`] | the loop: arrivals (open loop on a token bucket, or closed loop), releases, re-send timers, fault injection, latency histograms |
//! | [`bucket`] | the token bucket on the TSC that paces open-loop arrivals |
//! | [`flood`] | frames the switch's access lists must refuse, by class; the check of a barrier-switch's counters after a flood |
//! | [`fault`] | per-port, per-direction drop / duplicate / reorder / corrupt at set rates, seeded |
//! | [`multi`] | several generators side by side, one per lcore, each with its own ports and groups; merged reports |
//! | [`search`] | RFC 2544-style binary search for the highest rate with no lost barrier |
//! | [`window`] | how many barriers a closed loop keeps in flight: every group, or a window that halves when the leaves' timer says the path is congested |
//! | [`spread`] | a port's TX queues as one, each frame on the queue of its group (RX queue spreading on virtual devices) |
//! | [`report`] | trial report: counts, rates, latency percentiles; text and JSON |
//! | [`hdrlog`] | the hdrhistogram interval log, written on its own thread |
//! | [`lcores`] | the default lcores: the CPUs this process may use and how busy they are |
//! | [`wiring`] | DPDK: ports by name, or ring pairs to a `barrier-switch` instance in this process |
//!
//! `docs/gen.md` is the user's guide and defines the terms (lost barrier, latencies).
#![forbid(unsafe_code)]

pub mod bucket;
pub mod engine;
pub mod fault;
pub mod flood;
pub mod hdrlog;
pub mod lcores;
#[cfg(feature = "dpdk")]
pub mod multi;
pub mod report;
pub mod search;
pub mod spread;
pub mod window;
#[cfg(feature = "dpdk")]
pub mod wiring;
