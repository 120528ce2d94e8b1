//! The parser and control parts on an RX lcore: receive a burst, parse each frame into a barrier
//! event, apply it to the shared group table (one CAS), count the outcome, and hand the actions
//! to the scheduler through this poller's ring. Frames are freed when the burst is dropped.

use crate::counters::{bump, GroupCounters, RxCounters};
use crate::io::{RxQueue, BURST};
use crate::poll::Poller;
use barrier_protocol::switch::{Action, Event, Outcome, Reject};
use barrier_protocol::table::{GroupTable, TableError};
use barrier_protocol::wire::{FrameRepr, Kind, ParseError};
use barrier_protocol::{GroupId, PortIdx};
use crossbeam_queue::ArrayQueue;
use std::collections::VecDeque;
use std::sync::Arc;

/// What an RX lcore tells the scheduler: one action of one group.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Msg {
    pub group: GroupId,
    pub action: Action,
}

/// The ring from one RX poller to the scheduler. Single producer, single consumer in use.
pub type MsgRing = ArrayQueue<Msg>;

pub struct RxPoller<Q: RxQueue> {
    port: PortIdx,
    queue: Q,
    table: Arc<GroupTable>,
    ring: Arc<MsgRing>,
    /// Actions that did not fit in the ring. While non-empty the poller stops receiving: the
    /// backpressure lands on the RX queue instead of being dropped here. A local queue rather
    /// than a spin, because the scheduler may run on this same lcore (reduced mode).
    backlog: VecDeque<Msg>,
    frames: Vec<Q::Frame>,
    counters: Arc<RxCounters>,
    groups: Arc<GroupCounters>,
}

impl<Q: RxQueue> RxPoller<Q> {
    pub fn new(
        port: PortIdx,
        queue: Q,
        table: Arc<GroupTable>,
        ring: Arc<MsgRing>,
        counters: Arc<RxCounters>,
        groups: Arc<GroupCounters>,
    ) -> Self {
        RxPoller {
            port,
            queue,
            table,
            ring,
            backlog: VecDeque::new(),
            frames: Vec::with_capacity(BURST),
            counters,
            groups,
        }
    }

    fn push(&mut self, msg: Msg) {
        if !self.backlog.is_empty() {
            self.backlog.push_back(msg);
        } else if let Err(msg) = self.ring.push(msg) {
            bump(&self.counters.ring_full_waits, 1);
            self.backlog.push_back(msg);
        }
    }

    /// Parse one frame, apply it, queue its actions.
    fn handle(&mut self, bytes: &[u8]) {
        let c = &*self.counters;
        bump(&c.frames, 1);
        let repr = match FrameRepr::parse(bytes) {
            Ok(r) => r,
            Err(e) => {
                bump(parse_drop_counter(c, e), 1);
                return;
            }
        };
        let ev = match repr.kind {
            Kind::Reduce => {
                bump(&c.reduce_in, 1);
                Event::Reduce {
                    port: self.port,
                    seq: repr.seq,
                }
            }
            Kind::Release => {
                bump(&c.release_in, 1);
                Event::Release {
                    port: self.port,
                    seq: repr.seq,
                }
            }
        };
        let (outcome, actions) = match self.table.apply(repr.group, ev) {
            Ok(r) => r,
            Err(TableError::NotConfigured(_)) | Err(TableError::GroupOutOfRange(_)) => {
                bump(&c.drop_unknown_group, 1);
                return;
            }
            Err(_) => {
                bump(&c.drop_unknown_group, 1);
                return;
            }
        };
        match outcome {
            Outcome::Recorded => bump(&c.recorded, 1),
            Outcome::Duplicate => bump(&c.duplicates, 1),
            Outcome::Completed => {
                bump(&c.completions, 1);
                self.groups.completed(repr.group.0);
            }
            Outcome::Released => bump(&c.released_down, 1),
            Outcome::StaleReduce => {
                bump(&c.stale_reduce, 1);
                self.groups.resent(repr.group.0);
            }
            Outcome::StaleRelease => bump(&c.stale_release, 1),
            Outcome::Rejected(Reject::NotAChild) => bump(&c.drop_not_a_child, 1),
            Outcome::Rejected(Reject::NotTheParent) => bump(&c.drop_not_the_parent, 1),
        }
        for action in actions.iter() {
            self.push(Msg {
                group: repr.group,
                action: *action,
            });
        }
    }
}

fn parse_drop_counter(c: &RxCounters, e: ParseError) -> &std::sync::atomic::AtomicU64 {
    match e {
        ParseError::TooShort => &c.drop_too_short,
        ParseError::NotBarrier => &c.drop_not_barrier,
        ParseError::BadMagic => &c.drop_bad_magic,
        ParseError::BadVersion => &c.drop_bad_version,
        ParseError::BadKind => &c.drop_bad_kind,
        ParseError::ReservedFlags => &c.drop_reserved_flags,
        ParseError::GroupOutOfRange => &c.drop_group_out_of_range,
    }
}

impl<Q: RxQueue> Poller for RxPoller<Q> {
    fn poll(&mut self, _now_ns: u64) -> bool {
        if !self.backlog.is_empty() {
            while let Some(m) = self.backlog.pop_front() {
                if let Err(m) = self.ring.push(m) {
                    self.backlog.push_front(m);
                    bump(&self.counters.ring_full_waits, 1);
                    return true;
                }
            }
        }
        let mut frames = std::mem::take(&mut self.frames);
        self.queue.rx_burst(&mut frames, BURST);
        let busy = !frames.is_empty();
        for f in frames.drain(..) {
            self.handle(f.as_ref());
        }
        self.frames = frames;
        busy
    }

    fn drain(&mut self) -> usize {
        let mut n = 0;
        loop {
            self.frames.clear();
            self.queue.rx_burst(&mut self.frames, BURST);
            if self.frames.is_empty() {
                return n;
            }
            n += self.frames.len();
        }
    }
}
