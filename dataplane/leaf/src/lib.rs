//! # barrier-leaf: a compute node's side of in-network barriers
//!
//! A leaf reaches its barrier point, sends a reduce frame to its parent switch and waits for
//! the release; if none comes in time it re-sends the reduce (claim 2 of the method). The
//! decisions are `barrier_protocol::leaf::Leaf`'s, one per group; this crate adds a clock
//! (CLOCK_MONOTONIC), frames, a [`Transport`] and the ways to wait:
//!
//! | call | blocks | use |
//! | --- | --- | --- |
//! | [`Session::wait`] | until released or the wait timeout | the plain barrier |
//! | [`Session::try_wait`] | never | call repeatedly from a loop until it returns the record |
//! | [`Session::arrive`] + [`Session::poll`] | never | event loops with many groups |
//!
//! Every released barrier yields a [`Record`] (sequence number, time of the first reduce, time
//! of the release), optionally written to a CSV or JSON-lines file ([`RecordSink`]).
//!
//! ```
//! use barrier_leaf::{transport::loopback, Config, Session};
//! // The one-switch root of the test bed (a dev-dependency): the protocol's switch logic.
//! use barrier_testbed::mini_root::MiniRoot;
//! use std::sync::atomic::AtomicBool;
//!
//! // Two leaves under one root switch, all in memory.
//! let (ports, hub) = loopback::star(2);
//! let mut root = MiniRoot::new(Default::default());
//! root.add_group(7, &[0, 1]);
//! let stop = AtomicBool::new(false);
//! std::thread::scope(|s| {
//!     let (root, stop) = (&mut root, &stop);
//!     s.spawn(move || root.serve_hub(&hub, stop));
//!     let leaves: Vec<_> = ports
//!         .into_iter()
//!         .map(|p| s.spawn(move || {
//!             let mut leaf = Session::new(p, Config::default(), &[7]).unwrap();
//!             (0..3).map(|_| leaf.wait(7).unwrap().seq).collect::<Vec<_>>()
//!         }))
//!         .collect();
//!     for l in leaves {
//!         assert_eq!(l.join().unwrap(), vec![0, 1, 2]);
//!     }
//!     stop.store(true, std::sync::atomic::Ordering::Relaxed);
//! });
//! ```
//!
//! Transports: [`rawsock::RawSocket`] (AF_PACKET on any Linux interface, EtherType 0x88B5:
//! [`Session::open_af_packet`]), `dpdk_transport::DpdkPort` (a DPDK port, cargo feature `dpdk`,
//! on by default) and [`transport::loopback`] for tests. The C ABI over this
//! crate is the `barrier-leaf-capi` crate (`libbarrier`, `barrier.h`); `docs/leaf.md` has both.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "dpdk")]
pub mod dpdk_transport;
pub mod records;
pub mod report;
mod session;
pub mod transport;

pub use records::{Durability, Record, RecordFormat, RecordSink};
pub use session::{now, Config, Error, Session, Stats};
pub use transport::Transport;

#[cfg(feature = "dpdk")]
pub use dpdk_transport::DpdkPort;
