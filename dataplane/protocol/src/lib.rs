//! # barrier-protocol: barrier synchronization done by the network
//!
//! The protocol core of netbarrier: everything the barrier method
//! (`shared/spec/barrier-method.md`) decides, as pure Rust. No I/O, no clock (time is an
//! argument), no allocation on the per-frame path, `forbid(unsafe_code)`. The switch, the leaf library,
//! the simulator and the benchmarks all run this same code, so a simulated run and a real run
//! make the same decisions.
//!
//! ## Layers, bottom up
//!
//! | module | role |
//! | --- | --- |
//! | crate root | small value types: [`Time`], [`GroupId`], [`Epoch`], [`Seq`] (wrapping), [`PortIdx`], [`PortSet`] |
//! | [`wire`] | the barrier frame: a [`wire::Frame`] view over bytes with its fields as byte ranges, and a checked, typed [`wire::FrameRepr`] with `parse`/`emit` |
//! | [`switch`] | the per-group control logic of claim 6 for root and intermediate switches, including the restart rule: `(config, state, event) -> (state, outcome, actions)` |
//! | [`leaf`] | a compute node's side (claim 2): send reduce, re-send on timeout, advance on release |
//! | [`backoff`] | re-send waits: capped exponential backoff with per-group jitter, a pure function of the barrier and attempt |
//! | [`table`] | the lock-free table shared by several RX threads: one cache line per group, state in one 128-bit word changed by compare-and-swap, so exactly one thread sees each completion |
//! | [`counts`] | counter arrays indexed by [`switch::Outcome`] and [`wire::ParseError`] and named after them, for the switch's RX counters and the simulator's |
//!
//! A switch's data path is: bytes → [`wire::FrameRepr::parse`] → [`switch::Event::from_frame`] →
//! [`table::GroupTable::apply`] → [`switch::Actions`] → the scheduler builds frames with
//! [`wire::FrameRepr::emit`]. Timers are the caller's: an [`switch::Action::ArmTimer`] asks it to
//! call [`table::GroupTable::on_timer`] later.
//!
//! `docs/wire-format.md` and `docs/protocol.md` are the reference for the frame and the rules.
//!
//! ## Example: a root switch with two children
//!
//! ```
//! use barrier_protocol::switch::{Action, Event, GroupConfig, Outcome};
//! use barrier_protocol::table::GroupTable;
//! use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr};
//! use barrier_protocol::{Epoch, GroupId, PortIdx, PortSet, Seq};
//!
//! let (p1, p2) = (PortIdx::new(1).unwrap(), PortIdx::new(2).unwrap());
//! let table = GroupTable::new(16);
//! table.configure(GroupId(7), GroupConfig::root(PortSet::single(p1).union(PortSet::single(p2)))).unwrap();
//!
//! // a leaf's reduce for barrier 0 arrives on port 1, the other on port 2
//! let reduce = FrameRepr {
//!     dst: MacAddr::BROADCAST, src: MacAddr([2, 0, 0, 0, 0, 1]), kind: Kind::Reduce,
//!     flags: Flags::empty(), group: GroupId(7), epoch: Epoch::DEFAULT, seq: Seq(0),
//!     tx_timestamp: None,
//! };
//! let bytes = reduce.to_bytes();
//! let f = FrameRepr::parse(&bytes).unwrap();
//! let (out, _) = table.apply(f.group, Event::from_frame(&f, p1)).unwrap();
//! assert_eq!(out, Outcome::Recorded);
//! let (out, actions) = table.apply(f.group, Event::from_frame(&f, p2)).unwrap();
//! assert_eq!(out, Outcome::Completed);
//! let release = actions.iter().next().unwrap();
//! assert!(matches!(release, Action::SendRelease { seq: Seq(0), ports, .. } if ports.len() == 2));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod types;

pub mod backoff;
pub mod counts;
pub mod leaf;
pub mod rng;
pub mod switch;
pub mod table;
pub mod wire;

pub use types::{Epoch, GroupId, PortIdx, PortSet, PortSetIter, Seq, Time, MAX_GROUPS, MAX_PORTS};
