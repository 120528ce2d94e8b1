//! The parser and control parts on an RX lcore: receive a burst, parse each frame into a barrier
//! event, apply it to the shared group table (one CAS), count the outcome, and hand the actions
//! to the scheduler through this poller's ring. Frames are freed in bulk after the burst.
//! A port's policer (`crate::policer`), when configured, drops barrier frames over its rate
//! between the parse and the table; a port that no group names refuses every barrier frame
//! there too (`GroupTable::port_in_use`).

use crate::counters::{bump, RxCounters};
use crate::io::{RxQueue, BURST};
use crate::policer::QueuePolicer;
use crate::poll::Poller;
use barrier_protocol::switch::{Action, Actions, Event, Outcome, Reject, Run};
use barrier_protocol::table::GroupTable;
use barrier_protocol::wire::{FrameRepr, Kind};
use barrier_protocol::{GroupId, PortIdx};
use crossbeam_queue::ArrayQueue;
use std::collections::VecDeque;
use std::sync::Arc;

/// What an RX lcore tells the scheduler: one action of one group.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Msg {
    pub group: GroupId,
    /// The run of the group the action was decided in
    /// ([`barrier_protocol::switch::Actions::run`]): a frame carries its epoch, a timer the
    /// whole run (it fires only into that run).
    pub run: Run,
    pub action: Action,
}

/// A received frame that passed the parser and the policer: what the table will be asked.
#[derive(Copy, Clone, Debug)]
struct Parsed {
    group: GroupId,
    kind: Kind,
    seq: u32,
    ev: Event,
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
    /// The burst's frames that passed the parser and the policer, between the passes of `poll`.
    parsed: Vec<Parsed>,
    counters: Arc<RxCounters>,
    /// Straggler reports for watched groups (`barrier_mgmt::straggler`); `None`: nothing watched.
    watch: Option<Arc<barrier_mgmt::straggler::Watch>>,
    /// This queue's share of the port's policer (`crate::policer`), following the port's
    /// register; `None`: never policed (no register).
    policer: Option<QueuePolicer>,
}

impl<Q: RxQueue> RxPoller<Q> {
    pub fn new(
        port: PortIdx,
        queue: Q,
        table: Arc<GroupTable>,
        ring: Arc<MsgRing>,
        counters: Arc<RxCounters>,
    ) -> Self {
        RxPoller {
            port,
            queue,
            table,
            ring,
            backlog: VecDeque::new(),
            frames: Vec::with_capacity(BURST),
            parsed: Vec::with_capacity(BURST),
            counters,
            watch: None,
            policer: None,
        }
    }

    /// Police this queue's barrier frames as the port's register says (its share,
    /// `PolicerSpec::per_queue`): over the rate they are dropped before the table
    /// (`drop_policed`). Management may change the register at any time.
    pub fn with_policer(mut self, policer: Option<QueuePolicer>) -> Self {
        self.policer = policer;
        self
    }

    /// Report arrivals of the watched groups to `watch`.
    pub fn with_watch(mut self, watch: Option<Arc<barrier_mgmt::straggler::Watch>>) -> Self {
        self.watch = watch;
        self
    }

    fn push(&mut self, msg: Msg) {
        if !self.backlog.is_empty() {
            self.backlog.push_back(msg);
        } else if let Err(msg) = self.ring.push(msg) {
            bump(&self.counters.ring_full_waits, 1);
            self.backlog.push_back(msg);
        }
    }

    /// Parse one frame and count it; `None` when it goes no further (malformed, over the
    /// policer's rate, or on a port that no group names).
    #[inline]
    /// `port_in_use`: whether any group names this port, read once per burst.
    fn parse(&mut self, bytes: &[u8], now_ns: u64, port_in_use: bool) -> Option<Parsed> {
        let c = &*self.counters;
        bump(&c.frames, 1);
        let repr = match FrameRepr::parse(bytes) {
            Ok(r) => r,
            Err(e) => {
                c.parse_drops.bump(e);
                return None;
            }
        };
        // The policer: after the parse (only barrier frames spend credit), before the table.
        if let Some(b) = self.policer.as_mut().and_then(|p| p.bucket.as_mut()) {
            if !b.allow(now_ns) {
                bump(&c.drop_policed, 1);
                return None;
            }
        }
        let kind_in = match repr.kind {
            Kind::Reduce => &c.reduce_in,
            Kind::Release => &c.release_in,
            Kind::Abort(_) => &c.abort_in,
        };
        bump(kind_in, 1);
        // The port's access list as a whole: a port that no configured group names (as a child
        // or its parent) carries no member's frame, so it is refused for its port, whatever its
        // group, before the group's slot is read (a cache miss per frame at a million groups).
        // Counted as the table would count a member's frame on a wrong port.
        if !port_in_use {
            let reason = match repr.kind {
                Kind::Release => Reject::NotTheParent,
                Kind::Reduce | Kind::Abort(_) => Reject::NotAChild,
            };
            c.outcomes.bump(Outcome::Rejected(reason));
            return None;
        }
        Some(Parsed {
            group: repr.group,
            kind: repr.kind,
            seq: repr.seq.0,
            ev: Event::from_frame(&repr, self.port),
        })
    }

    /// Apply one parsed frame to the table, count the outcome, queue its actions.
    #[inline]
    fn apply(&mut self, p: Parsed, now_ns: u64) {
        let c = &*self.counters;
        let mut actions = Actions::new();
        let outcome = match self.table.apply_into(p.group, p.ev, &mut actions) {
            Ok(o) => o,
            // apply fails only for a group number the table does not hold or has no
            // configuration for: either way the frame belongs to no tree here.
            Err(_) => {
                bump(&c.drop_unknown_group, 1);
                return;
            }
        };
        c.outcomes.bump(outcome);
        // `watches` is inline (one bit test); the report itself is `barrier_mgmt`'s call.
        if let Some(w) = self.watch.as_ref().filter(|w| w.watches(p.group.0)) {
            // An intermediate's completion reduces up, a root's does not: the actions say
            // which, so the table is not read a second time for the role.
            let root = outcome == Outcome::Completed && !actions.reduces_up();
            w.on_frame(
                p.group,
                p.kind,
                self.port,
                p.seq,
                actions.run(),
                outcome,
                root,
                now_ns,
            );
        }
        for action in actions.iter() {
            self.push(Msg {
                group: p.group,
                run: actions.run(),
                action: *action,
            });
        }
    }
}

impl<Q: RxQueue> Poller for RxPoller<Q> {
    fn poll(&mut self, now_ns: u64) -> bool {
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
        if busy {
            // Once per burst: a policer management changed (one load when nothing did).
            if let Some(p) = &mut self.policer {
                p.refresh(now_ns);
            }
        }
        // The burst in three passes, so that its cache misses overlap instead of being taken
        // one frame at a time: ask for every frame's bytes; parse them, asking for each
        // group's table slot; then apply them in order (perf/README.md, "The hot path").
        for f in &frames {
            prefetch(f.as_ref());
        }
        let mut parsed = std::mem::take(&mut self.parsed);
        // The same for every frame of the burst: one read of the table's port count per burst.
        let port_in_use = busy && self.table.port_in_use(self.port);
        for f in &frames {
            if let Some(p) = self.parse(f.as_ref(), now_ns, port_in_use) {
                if let Some(line) = self.table.slot_line(p.group) {
                    prefetch(line);
                }
                parsed.push(p);
            }
        }
        for p in parsed.drain(..) {
            self.apply(p, now_ns);
        }
        self.parsed = parsed;
        self.queue.recycle(&mut frames);
        self.frames = frames;
        busy
    }

    fn drain(&mut self) -> usize {
        self.queue.drain(&mut self.frames)
    }
}

/// A cache hint for the lines under `r` (`dpdk::prefetch`). Without feature `dpdk` nothing: the
/// intrinsic needs an unchecked block, and those live in ffi/ only (a build without DPDK is
/// for tests, not for line rate).
#[inline(always)]
fn prefetch<T: ?Sized>(r: &T) {
    #[cfg(feature = "dpdk")]
    dpdk::prefetch(r);
    #[cfg(not(feature = "dpdk"))]
    let _ = r;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{mem_wire, TxQueue};
    use barrier_protocol::switch::{GroupConfig, GroupState, Reject};
    use barrier_protocol::wire::{Flags, MacAddr, ParseError, FRAME_LEN};
    use barrier_protocol::{Epoch, PortSet, Seq};
    use std::sync::atomic::Ordering::Relaxed;

    fn reduce(group: u32, seq: u32) -> Vec<u8> {
        let mut b = vec![0u8; FRAME_LEN];
        FrameRepr {
            dst: MacAddr::BROADCAST,
            src: MacAddr([2, 0, 0, 0, 0, 9]),
            kind: Kind::Reduce,
            flags: Flags::empty(),
            group: GroupId(group),
            epoch: Epoch::DEFAULT,
            seq: Seq(seq),
            tx_timestamp: None,
        }
        .emit(&mut b);
        b
    }

    #[test]
    fn completions_and_stale_reduces_are_counted_once_in_the_table() {
        let (p0, p1) = (PortIdx::new(0).unwrap(), PortIdx::new(1).unwrap());
        let table = Arc::new(GroupTable::new(1));
        let children = PortSet(0b11);
        table
            .configure(GroupId(0), GroupConfig::root(children))
            .unwrap();
        let ring = Arc::new(MsgRing::new(64));
        let c = Arc::new(RxCounters::default());
        let mut seen = Vec::new();
        for (port, seq) in [(p0, 0), (p1, 0), (p0, 0)] {
            let (mut wire_tx, wire_rx) = mem_wire(8);
            wire_tx.offer(&reduce(0, seq)).unwrap();
            wire_tx.flush();
            let mut rx = RxPoller::new(port, wire_rx, table.clone(), ring.clone(), c.clone());
            rx.poll(0);
            let mut msgs = 0;
            while ring.pop().is_some() {
                msgs += 1;
            }
            let n = table.counts(GroupId(0));
            seen.push((msgs, n.completions, n.resends));
        }
        // Recorded: no action. Completed: the release (one action for both children), one
        // completion. A reduce for the released barrier: the release again, one re-send.
        assert_eq!(seen, [(0, 0, 0), (1, 1, 0), (1, 1, 1)]);
    }

    #[test]
    fn a_full_ring_backs_up_into_the_rx_queue_and_loses_nothing() {
        let port = PortIdx::new(0).unwrap();
        let table = Arc::new(GroupTable::new(100));
        for g in 0..100 {
            table
                .configure(GroupId(g), GroupConfig::root(PortSet::single(port)))
                .unwrap();
        }
        let (mut wire_tx, wire_rx) = mem_wire(1024);
        for g in 0..100 {
            wire_tx.offer(&reduce(g, 0)).unwrap();
            if wire_tx.buffered() == BURST {
                wire_tx.flush();
            }
        }
        wire_tx.flush();
        let ring = Arc::new(MsgRing::new(4));
        let c = Arc::new(RxCounters::default());
        let mut rx = RxPoller::new(port, wire_rx, table, ring.clone(), c.clone());
        let mut got = Vec::new();
        for round in 0..1000 {
            rx.poll(0);
            if round == 1 {
                // The first poll took one burst and filled the ring; with a backlog left the
                // second poll must not receive (backpressure goes to the RX queue).
                assert_eq!(c.frames.load(Relaxed), BURST as u64);
            }
            // The scheduler takes two messages per round.
            got.extend(ring.pop());
            got.extend(ring.pop());
            if got.len() == 100 {
                break;
            }
        }
        let groups: Vec<u32> = got.iter().map(|m| m.group.0).collect();
        assert_eq!(
            groups,
            (0..100).collect::<Vec<_>>(),
            "every release once, in order"
        );
        assert!(c.ring_full_waits.load(Relaxed) > 0);
        assert_eq!(c.outcomes.get(Outcome::Completed), 100);
        // While the backlog was full the poller stopped receiving: frames waited in the queue.
        assert_eq!(rx.drain(), 0);
    }

    #[test]
    fn drops_are_counted_by_reason() {
        let port = PortIdx::new(1).unwrap();
        let table = Arc::new(GroupTable::new(4));
        table
            .configure(
                GroupId(2),
                GroupConfig::root(PortSet::single(PortIdx::new(0).unwrap())),
            )
            .unwrap();
        // Port 1 belongs to group 1, so its frames reach the table.
        table
            .configure(GroupId(1), GroupConfig::root(PortSet::single(port)))
            .unwrap();
        let (mut wire_tx, wire_rx) = mem_wire(64);
        let mut short = reduce(2, 0);
        short.truncate(10);
        for f in [short, reduce(2, 0), reduce(3, 0), reduce(99, 0)] {
            wire_tx.offer(&f).unwrap();
        }
        wire_tx.flush();
        let ring = Arc::new(MsgRing::new(4));
        let c = Arc::new(RxCounters::default());
        let mut rx = RxPoller::new(port, wire_rx, table, ring.clone(), c.clone());
        assert!(rx.poll(0));
        assert_eq!(c.frames.load(Relaxed), 4);
        assert_eq!(c.parse_drops.get(ParseError::TooShort), 1);
        assert_eq!(
            c.outcomes.get(Outcome::Rejected(Reject::NotAChild)),
            1,
            "port 1 is not a child of group 2"
        );
        assert_eq!(
            c.drop_unknown_group.load(Relaxed),
            2,
            "group 3 unconfigured, group 99 beyond the table"
        );
        assert!(ring.is_empty());
        assert!(!rx.poll(0));
    }

    /// A port that no group names: every barrier frame on it is refused for its port, before
    /// the table (even one for a group the table does not hold), and the table is untouched;
    /// once a group names the port its frames are the table's again.
    #[test]
    fn a_port_no_group_names_is_refused_before_the_table() {
        let (p0, p3) = (PortIdx::new(0).unwrap(), PortIdx::new(3).unwrap());
        let table = Arc::new(GroupTable::new(4));
        let children = PortSet::single(p0).union(PortSet::single(PortIdx::new(1).unwrap()));
        table
            .configure(GroupId(2), GroupConfig::root(children))
            .unwrap();
        let release = |g: u32| {
            let mut b = reduce(g, 0);
            b[16] = 2; // kind: release
            let mut f = barrier_protocol::wire::Frame::new_unchecked(&mut b[..]);
            f.fill_checksum();
            b
        };
        let (mut wire_tx, wire_rx) = mem_wire(64);
        for f in [reduce(2, 0), reduce(3, 0), reduce(99, 0), release(2)] {
            wire_tx.offer(&f).unwrap();
        }
        wire_tx.flush();
        let ring = Arc::new(MsgRing::new(4));
        let c = Arc::new(RxCounters::default());
        let mut rx = RxPoller::new(p3, wire_rx, table.clone(), ring.clone(), c.clone());
        rx.poll(0);
        assert_eq!(c.outcomes.get(Outcome::Rejected(Reject::NotAChild)), 3);
        assert_eq!(c.outcomes.get(Outcome::Rejected(Reject::NotTheParent)), 1);
        assert_eq!(
            c.drop_unknown_group.load(Relaxed),
            0,
            "refused for the port first"
        );
        assert_eq!(
            (c.reduce_in.load(Relaxed), c.release_in.load(Relaxed)),
            (3, 1)
        );
        assert_eq!(table.state(GroupId(2)), Some(GroupState::fresh()));
        assert!(ring.is_empty());
        // Group 2 gains port 3 as a child: its reduce there is recorded.
        let wider = children.union(PortSet::single(p3));
        table
            .configure(GroupId(2), GroupConfig::root(wider))
            .unwrap();
        wire_tx.offer(&reduce(2, 0)).unwrap();
        wire_tx.flush();
        rx.poll(0);
        assert_eq!(c.outcomes.get(Outcome::Recorded), 1);
        assert_eq!(
            table.state(GroupId(2)).unwrap().arrived,
            PortSet::single(p3)
        );
    }
}
