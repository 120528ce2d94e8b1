//! The parser and control parts on an RX lcore. A burst is taken in passes: receive it, ask
//! for every frame's bytes, parse each frame into a barrier event (asking for its group's table
//! slot), then apply the burst to the shared group table with ONE update per group
//! (`GroupTable::apply_burst`: a group's arrivals in the burst, in order, one compare-and-swap),
//! count the outcomes, and hand the burst's actions to the scheduler as one batch
//! (`crate::link`). A send's frame is built here, in the buffer of the frame that caused it
//! (the release in the completing reduce's mbuf), for the action's first port; the scheduler
//! sends it as it is unless that port is backed up. The other frames of the burst are freed in
//! bulk.
//!
//! A frame that is not a barrier frame (by its EtherType) goes to the port's exception path
//! when it has one (`crate::exception`): it is queued, as it is, on the exception interface's
//! TX queue, flushed once per burst; otherwise it is freed as `drop_not_barrier`.
//!
//! A port's policer (`crate::policer`), when configured, drops barrier frames over its rate
//! between the parse and the table; a port that no group names refuses every barrier frame
//! there too (`GroupTable::port_in_use`).

use crate::burst::BurstApply;
use crate::counters::{bump, RxCounters};
use crate::exception::ToKernel;
use crate::io::{RxFrame, RxQueue, BURST};
use crate::link::{Batch, Link, Out};
use crate::policer::QueuePolicer;
use crate::poll::Poller;
use barrier_protocol::switch::{Action, Actions, Event, Outcome, Reject};
use barrier_protocol::table::{GroupTable, TableError};
use barrier_protocol::wire::{Flags, FrameRepr, FrameTemplate, Kind, ParseError, FRAME_LEN};
use barrier_protocol::{GroupId, PortIdx};
use std::sync::Arc;

/// A received frame that passed the parser and the policer: what the table will be asked.
#[derive(Copy, Clone, Debug)]
struct Parsed {
    /// Its place in the burst.
    frame: u8,
    group: GroupId,
    kind: Kind,
    seq: u32,
    ev: Event,
}

/// No frame: `RxPoller::reuse`'s mark for a frame that is freed, not sent on.
const FREED: u8 = u8::MAX;
/// `RxPoller::reuse`'s mark for a frame for the exception path.
const TO_KERNEL: u8 = u8::MAX - 1;

pub struct RxPoller<Q: RxQueue> {
    port: PortIdx,
    queue: Q,
    table: Arc<GroupTable>,
    link: Arc<Link<Q::Frame>>,
    /// A batch the link did not take. While it waits the poller stops receiving: the
    /// backpressure lands on the RX queue instead of being dropped here (the scheduler may run
    /// on this same lcore, reduced mode, so no spin).
    pending: Option<Batch<Q::Frame>>,
    /// The batch the next burst fills.
    batch: Batch<Q::Frame>,
    /// Every port's frame template (addresses filled in), for building sends in place; `None`:
    /// never (the scheduler builds every frame).
    templates: Option<Arc<[FrameTemplate]>>,
    frames: Vec<Q::Frame>,
    /// The burst's frames that go back to the pool.
    freed: Vec<Q::Frame>,
    /// Per frame of the burst: the index in the batch of the send built in it, or `FREED`.
    reuse: [u8; BURST],
    /// The burst's frames that passed the parser and the policer, between the passes of `poll`.
    parsed: Vec<Parsed>,
    /// The burst applied one group at a time (`crate::burst`).
    burst: BurstApply<Parsed>,
    counters: Arc<RxCounters>,
    /// Straggler reports for watched groups (`barrier_mgmt::straggler`); `None`: nothing watched.
    watch: Option<Arc<barrier_mgmt::straggler::Watch>>,
    /// This queue's share of the port's policer (`crate::policer`), following the port's
    /// register; `None`: never policed (no register).
    policer: Option<QueuePolicer>,
    /// The port's exception path for this queue (`crate::exception`); `None`: frames that are
    /// not barrier frames are dropped.
    exception: Option<Box<dyn ToKernel<Q::Frame>>>,
}

impl<Q: RxQueue> RxPoller<Q> {
    pub fn new(
        port: PortIdx,
        queue: Q,
        table: Arc<GroupTable>,
        link: Arc<Link<Q::Frame>>,
        counters: Arc<RxCounters>,
    ) -> Self {
        RxPoller {
            port,
            queue,
            table,
            link,
            pending: None,
            batch: Vec::new(),
            templates: None,
            frames: Vec::with_capacity(BURST),
            freed: Vec::with_capacity(BURST),
            reuse: [FREED; BURST],
            parsed: Vec::with_capacity(BURST),
            burst: BurstApply::default(),
            counters,
            watch: None,
            policer: None,
            exception: None,
        }
    }

    /// Hand the frames that are not barrier frames to `to_kernel` (the port's exception path,
    /// `crate::exception`) instead of dropping them.
    pub fn with_exception(mut self, to_kernel: Option<Box<dyn ToKernel<Q::Frame>>>) -> Self {
        self.exception = to_kernel;
        self
    }

    /// Build sends in the buffers of the frames that caused them, from `templates` (every
    /// port's, by port index: the scheduler's own, so the bytes are the ones it would build).
    pub fn with_templates(mut self, templates: Option<Arc<[FrameTemplate]>>) -> Self {
        self.templates = templates;
        self
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

    /// Parse frame `i` of the burst and count it; `None` when it goes no further (malformed,
    /// over the policer's rate, on a port that no group names, or not a barrier frame: marked
    /// for the exception path if the port has one). `port_in_use`: whether any group names
    /// this port, read once per burst.
    #[inline]
    fn parse(&mut self, i: usize, bytes: &[u8], now_ns: u64, port_in_use: bool) -> Option<Parsed> {
        let c = &*self.counters;
        bump(&c.frames, 1);
        let repr = match FrameRepr::parse(bytes) {
            Ok(r) => r,
            Err(ParseError::NotBarrier) if self.exception.is_some() => {
                self.reuse[i] = TO_KERNEL;
                return None;
            }
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
            frame: 0,
            group: repr.group,
            kind: repr.kind,
            seq: repr.seq.0,
            ev: Event::from_frame(&repr, self.port),
        })
    }
}

impl<Q: RxQueue> RxPoller<Q> {
    /// Queue a frame that is not a barrier frame on the exception path, counted; when the
    /// exception interface is backed up it goes to `freed`, counted `exception_drop_full`.
    fn hand_to_kernel(&mut self, f: Q::Frame, freed: &mut Vec<Q::Frame>) {
        let c = &*self.counters;
        let len = f.as_ref().len() as u64;
        let Some(x) = &mut self.exception else {
            c.parse_drops.bump(ParseError::NotBarrier);
            freed.push(f);
            return;
        };
        match x.offer_to_kernel(f) {
            Ok(()) => {
                bump(&c.exception_to_kernel, 1);
                bump(&c.exception_to_kernel_bytes, len);
            }
            Err(f) => {
                bump(&c.exception_drop_full, 1);
                freed.push(f);
            }
        }
    }
}

impl<Q: RxQueue> Poller for RxPoller<Q> {
    fn poll(&mut self, now_ns: u64) -> bool {
        if let Some(batch) = self.pending.take() {
            if let Err(batch) = self.link.send(batch) {
                self.pending = Some(batch);
                bump(&self.counters.ring_full_waits, 1);
                return true;
            }
        }
        let mut frames = std::mem::take(&mut self.frames);
        self.queue.rx_burst(&mut frames, BURST);
        if frames.is_empty() {
            self.frames = frames;
            // What the exception interface did not take last time, once more.
            if let Some(x) = self.exception.as_mut().filter(|x| x.waiting() > 0) {
                x.flush_to_kernel();
            }
            return false;
        }
        // Once per burst: a policer management changed (one load when nothing did).
        if let Some(p) = &mut self.policer {
            p.refresh(now_ns);
        }
        // The burst in passes, so that its cache misses overlap instead of being taken one
        // frame at a time: ask for every frame's header (an mbuf's: where its bytes are), then
        // for every frame's bytes; parse them, asking for each group's table slot; then apply
        // them group by group (perf/README.md, "The hot path").
        for f in &frames {
            f.prefetch_header();
        }
        for f in &frames {
            prefetch(f.as_ref());
        }
        let mut parsed = std::mem::take(&mut self.parsed);
        // The same for every frame of the burst: one read of the table's port count per burst.
        let port_in_use = self.table.port_in_use(self.port);
        for (i, f) in frames.iter().enumerate() {
            if let Some(mut p) = self.parse(i, f.as_ref(), now_ns, port_in_use) {
                if let Some(line) = self.table.slot_line(p.group) {
                    prefetch(line);
                }
                p.frame = i as u8;
                parsed.push(p);
            }
        }
        let mut batch = std::mem::take(&mut self.batch);
        let mut ctx = Decide {
            port: self.port,
            counters: &self.counters,
            watch: self.watch.as_deref(),
            templates: self.templates.as_deref(),
            reuse: &mut self.reuse,
        };
        self.burst.apply(
            &self.table,
            &parsed,
            |p| (p.group, p.ev),
            |p, decided| ctx.decided(p, decided, &mut frames, &mut batch, now_ns),
        );
        parsed.clear();
        self.parsed = parsed;
        // The frames a send was built in go with the batch; the others back to the pool.
        let mut freed = std::mem::take(&mut self.freed);
        let mut to_kernel = false;
        for (i, f) in frames.drain(..).enumerate() {
            match std::mem::replace(&mut self.reuse[i], FREED) {
                FREED => freed.push(f),
                TO_KERNEL => {
                    to_kernel = true;
                    self.hand_to_kernel(f, &mut freed);
                }
                k => batch[k as usize].frame = Some(f),
            }
        }
        if to_kernel {
            if let Some(x) = &mut self.exception {
                x.flush_to_kernel();
            }
        }
        self.queue.recycle(&mut freed);
        self.freed = freed;
        self.frames = frames;
        // A burst that decided nothing to do keeps its (empty) vector: no ring operation.
        if batch.is_empty() {
            self.batch = batch;
        } else {
            self.batch = self.link.take_empty();
            if let Err(batch) = self.link.send(batch) {
                bump(&self.counters.ring_full_waits, 1);
                self.pending = Some(batch);
            }
        }
        true
    }

    fn finish(&mut self) {
        if let Some(x) = &mut self.exception {
            x.flush_to_kernel();
        }
    }

    fn drain(&mut self) -> usize {
        // A batch the scheduler never took: its actions are dropped with the switch, its
        // frames freed here, before the ports close.
        let held = self
            .pending
            .take()
            .map_or(0, |b| b.iter().filter(|o| o.frame.is_some()).count());
        held + self.queue.drain(&mut self.frames)
    }
}

/// What `RxPoller::poll` needs of the poller to count and forward one decision, borrowed
/// beside the table.
struct Decide<'a> {
    port: PortIdx,
    counters: &'a RxCounters,
    watch: Option<&'a barrier_mgmt::straggler::Watch>,
    templates: Option<&'a [FrameTemplate]>,
    reuse: &'a mut [u8; BURST],
}

impl Decide<'_> {
    /// Count one frame's decision and add its actions to `batch`, building its first send in
    /// the frame's own buffer.
    #[inline]
    fn decided<F: RxFrame>(
        &mut self,
        p: &Parsed,
        decided: Result<(Outcome, &Actions), TableError>,
        frames: &mut [F],
        batch: &mut Batch<F>,
        now_ns: u64,
    ) {
        let c = self.counters;
        let Ok((outcome, actions)) = decided else {
            // The table refuses only a group number it does not hold or has no configuration
            // for: either way the frame belongs to no tree here.
            bump(&c.drop_unknown_group, 1);
            return;
        };
        c.outcomes.bump(outcome);
        // `watches` is inline (one bit test); the report itself is `barrier_mgmt`'s call.
        if let Some(w) = self.watch.filter(|w| w.watches(p.group.0)) {
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
        let mut built = false;
        for action in actions.iter() {
            if !built
                && self.build_in_place(&mut frames[p.frame as usize], p.group, actions, action)
            {
                built = true;
                self.reuse[p.frame as usize] = batch.len() as u8;
            }
            batch.push(Out::new(p.group, actions.run(), *action));
        }
    }

    /// Write `action`'s frame for its first port over `frame`; false when the action sends
    /// nothing, no templates are set, or the buffer cannot be rewritten in place.
    #[inline]
    fn build_in_place<F: RxFrame>(
        &self,
        frame: &mut F,
        group: GroupId,
        actions: &Actions,
        action: &Action,
    ) -> bool {
        let Some(templates) = self.templates else {
            return false;
        };
        let Some((ports, kind, seq, retransmit)) = action.frame() else {
            return false;
        };
        let port = ports.iter().next();
        let Some(template) = port.and_then(|p| templates.get(p.get() as usize)) else {
            return false;
        };
        let Some(buf) = frame.rewrite::<FRAME_LEN>() else {
            return false;
        };
        template.write(
            buf,
            kind,
            Flags::retransmit(retransmit),
            group,
            actions.epoch(),
            seq,
        );
        true
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

    /// A table whose group 0 is a root with children on ports 0 and 1.
    fn root_of_two() -> (Arc<GroupTable>, PortSet) {
        let table = Arc::new(GroupTable::new(1));
        let children = PortSet(0b11);
        table
            .configure(GroupId(0), GroupConfig::root(children))
            .unwrap();
        (table, children)
    }

    #[test]
    fn completions_and_stale_reduces_are_counted_once_in_the_table() {
        let (p0, p1) = (PortIdx::new(0).unwrap(), PortIdx::new(1).unwrap());
        let (table, _) = root_of_two();
        let link = Arc::new(Link::new(4));
        let c = Arc::new(RxCounters::default());
        let mut seen = Vec::new();
        for (port, seq) in [(p0, 0), (p1, 0), (p0, 0)] {
            let (mut wire_tx, wire_rx) = mem_wire(8);
            wire_tx.offer(&reduce(0, seq)).unwrap();
            wire_tx.flush();
            let mut rx = RxPoller::new(port, wire_rx, table.clone(), link.clone(), c.clone());
            rx.poll(0);
            let msgs = link.drain_actions().len();
            let n = table.counts(GroupId(0));
            seen.push((msgs, n.completions, n.resends));
        }
        // Recorded: no action. Completed: the release (one action for both children), one
        // completion. A reduce for the released barrier: the release again, one re-send.
        assert_eq!(seen, [(0, 0, 0), (1, 1, 0), (1, 1, 1)]);
    }

    /// With templates, the completing reduce's buffer carries the release for the first child
    /// port, byte for byte the template's frame. Without templates nothing is built.
    #[test]
    fn the_release_is_built_in_the_completing_reduces_buffer() {
        let (p0, p1) = (PortIdx::new(0).unwrap(), PortIdx::new(1).unwrap());
        let templates: Arc<[FrameTemplate]> = [1, 2]
            .iter()
            .map(|&i| FrameTemplate::new(MacAddr([2, 0, 0, 0, 9, i]), MacAddr([2, 0, 0, 0, 0, i])))
            .collect();
        for with in [true, false] {
            let (table, children) = root_of_two();
            let link = Arc::new(Link::new(4));
            let c = Arc::new(RxCounters::default());
            let (mut wire_tx, wire_rx) = mem_wire(8);
            let mut rx = RxPoller::new(p1, wire_rx, table.clone(), link.clone(), c.clone())
                .with_templates(with.then(|| templates.clone()));
            wire_tx.offer(&reduce(0, 4)).unwrap();
            wire_tx.flush();
            table
                .apply(
                    GroupId(0),
                    Event::Reduce {
                        port: p0,
                        epoch: Epoch::DEFAULT,
                        seq: Seq(4),
                    },
                )
                .unwrap();
            rx.poll(0);
            let outs = link.drain_actions();
            assert_eq!(outs.len(), 1);
            assert_eq!(
                outs[0].action,
                Action::SendRelease {
                    seq: Seq(4),
                    ports: children,
                    retransmit: false
                }
            );
            if with {
                let mut want = [0u8; FRAME_LEN];
                templates[0].write(
                    &mut want,
                    Kind::Release,
                    Flags::empty(),
                    GroupId(0),
                    Epoch::DEFAULT,
                    Seq(4),
                );
                assert_eq!(outs[0].frame.as_deref(), Some(&want[..]));
            } else {
                assert!(outs[0].frame.is_none());
            }
        }
    }

    #[test]
    fn a_full_link_backs_up_into_the_rx_queue_and_loses_nothing() {
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
        let link = Arc::new(Link::new(1));
        let c = Arc::new(RxCounters::default());
        let mut rx = RxPoller::new(port, wire_rx, table, link.clone(), c.clone());
        let mut got = Vec::new();
        for round in 0..1000 {
            rx.poll(0);
            rx.poll(0);
            if round == 0 {
                // The first poll's batch filled the link, the second's waits in the poller; so
                // a third poll must not receive (backpressure goes to the RX queue).
                rx.poll(0);
                assert_eq!(c.frames.load(Relaxed), 2 * BURST as u64);
            }
            // The scheduler takes one batch per round.
            if let Some(b) = link.recv() {
                got.extend(b.iter().map(|o| o.group.0));
                link.give_back(b);
            }
            if got.len() == 100 {
                break;
            }
        }
        assert_eq!(
            got,
            (0..100).collect::<Vec<_>>(),
            "every release once, in order"
        );
        assert!(c.ring_full_waits.load(Relaxed) > 0);
        assert_eq!(c.outcomes.get(Outcome::Completed), 100);
        // While the batch waited the poller stopped receiving: frames waited in the queue.
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
        let link = Arc::new(Link::new(4));
        let c = Arc::new(RxCounters::default());
        let mut rx = RxPoller::new(port, wire_rx, table, link.clone(), c.clone());
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
        assert!(link.is_empty());
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
        let link = Arc::new(Link::new(4));
        let c = Arc::new(RxCounters::default());
        let mut rx = RxPoller::new(p3, wire_rx, table.clone(), link.clone(), c.clone());
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
        assert!(link.is_empty());
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

    /// An IPv4 frame to broadcast, `len` bytes.
    fn ordinary(len: usize, tag: u8) -> Vec<u8> {
        let mut b = vec![tag; len];
        b[..6].copy_from_slice(&[0xff; 6]);
        b[12..14].copy_from_slice(&[0x08, 0x00]);
        b
    }

    /// With an exception path, frames that are not barrier frames go to it as they are, and
    /// barrier frames, malformed ones included, never do; a backed-up exception interface
    /// costs counted drops, not the barrier path. Without one they are `drop_not_barrier`.
    #[test]
    fn ordinary_frames_take_the_exception_path_and_barrier_frames_never_do() {
        let port = PortIdx::new(0).unwrap();
        let mut bad_sum = reduce(0, 1);
        bad_sum[28] ^= 0xff;
        let burst: Vec<Vec<u8>> = vec![
            ordinary(60, 1),
            reduce(0, 0),
            ordinary(1514, 2),
            bad_sum,
            ordinary(98, 3),
        ];
        for with in [true, false] {
            let (table, _) = root_of_two();
            let (mut wire_tx, wire_rx) = mem_wire(64);
            let (tap_tx, mut tap_rx) = mem_wire(64);
            let link = Arc::new(Link::new(4));
            let c = Arc::new(RxCounters::default());
            let mut rx = RxPoller::new(port, wire_rx, table.clone(), link.clone(), c.clone())
                .with_exception(with.then(|| Box::new(tap_tx) as Box<dyn ToKernel<Vec<u8>>>));
            for f in &burst {
                wire_tx.offer(f).unwrap();
            }
            wire_tx.flush();
            rx.poll(0);
            let mut got = Vec::new();
            tap_rx.rx_burst(&mut got, 64);
            assert_eq!(c.frames.load(Relaxed), 5);
            assert_eq!(
                c.outcomes.get(Outcome::Recorded),
                1,
                "the barrier path as before"
            );
            assert_eq!(c.parse_drops.get(ParseError::BadChecksum), 1);
            if with {
                assert_eq!(got, [ordinary(60, 1), ordinary(1514, 2), ordinary(98, 3)]);
                assert_eq!(c.exception_to_kernel.load(Relaxed), 3);
                assert_eq!(c.exception_to_kernel_bytes.load(Relaxed), 60 + 1514 + 98);
                assert_eq!(c.parse_drops.get(ParseError::NotBarrier), 0);
            } else {
                assert!(got.is_empty());
                assert_eq!(c.exception_to_kernel.load(Relaxed), 0);
                assert_eq!(c.parse_drops.get(ParseError::NotBarrier), 3);
            }
        }
        // An exception interface that takes one frame at a time: the first burst waits in
        // its buffer, the second finds no room and is dropped, counted; once the interface
        // takes frames again (idle polls flush) they flow.
        let (mut wire_tx, wire_rx) = mem_wire(256);
        let (tap_tx, mut tap_rx) = mem_wire(1);
        let c = Arc::new(RxCounters::default());
        let link = Arc::new(Link::new(4));
        let (table, _) = root_of_two();
        let mut rx = RxPoller::new(port, wire_rx, table, link, c.clone())
            .with_exception(Some(Box::new(tap_tx)));
        for round in 0..2u8 {
            for i in 0..BURST as u8 {
                wire_tx.offer(&ordinary(64, round * 100 + i)).unwrap();
            }
            wire_tx.flush();
            rx.poll(0);
        }
        assert_eq!(c.exception_to_kernel.load(Relaxed), BURST as u64 + 1);
        assert_eq!(c.exception_drop_full.load(Relaxed), BURST as u64 - 1);
        let mut got = Vec::new();
        for _ in 0..2 * BURST {
            tap_rx.rx_burst(&mut got, 1);
            rx.poll(0);
        }
        assert_eq!(got.len(), BURST + 1, "every frame taken went to the kernel");
        assert_eq!(got[0], ordinary(64, 0));
        assert_eq!(got[BURST], ordinary(64, 100));
    }
}
