//! The scheduler: [`SchedPoller`], the scheduler lcore's loop, over two pieces of pure logic,
//! [`round_robin`] (per-port queues served round-robin across groups) and the runtime's
//! [`TimerWheel`] (the intermediate re-send timers, keyed by group and sequence number).
//!
//! The loop takes the RX pollers' batches (`crate::link`, one ring operation per burst), fires
//! due re-send timers, and transmits with backpressure. A send for a port with nothing waiting
//! goes straight into the port's TX buffer: the frame the RX poller built in the received
//! buffer when it has one (the action's first port), else one built here from the port's
//! [`FrameTemplate`] straight into a new mbuf. No round robin for such a send: it decides only
//! among frames that wait. While a port backs up (the device refuses a burst), its sends wait
//! in the per-port round-robin queues, holding no buffer, and leave them one group at a time.
//! The loop owns every TX queue of its switch, so no TX locks. A full TX queue delays a send
//! (it goes back first in line) and is counted; nothing is dropped.
//!
//! A waiting send holds no mbuf (a frame built by the RX poller for a backed-up port is freed
//! and built again when the send's turn comes): otherwise the mempool would have to cover the
//! deepest backlog (a million groups releasing at once) instead of the TX buffers. The other
//! ports of a release share the built mbuf (a reference count, no copy) where their frames are
//! the same bytes (`fan_out`), else get their own frame built from their template.

pub mod round_robin;

use crate::counters::{bump, SchedCounters, TxCounters};
use crate::io::{RxFrame, TxBlocked, TxQueue, BURST};
use crate::link::{Link, Out, LINK_BATCHES};
use crate::poll::Poller;
use barrier_protocol::switch::{Action, Fired, Timer};
use barrier_protocol::table::GroupTable;
use barrier_protocol::wire::{Flags, FrameTemplate, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{GroupId, PortSet};
use barrier_runtime::wheel::TimerWheel;
use round_robin::{PendingFrame, Pushed, RoundRobin};
use std::sync::Arc;

/// Batches taken from one link per poll: bounds the time before the TX side runs again.
const LINK_BUDGET: usize = LINK_BATCHES / 2;

/// One egress port as the scheduler sees it.
pub struct TxPort<T: TxQueue> {
    pub queue: T,
    /// Destination MAC of frames sent here.
    pub peer_mac: [u8; 6],
    /// Source MAC of frames sent here.
    pub src_mac: [u8; 6],
    pub counters: Arc<TxCounters>,
}

/// The scheduler's side of one egress port.
struct Egress {
    /// The port's frames, addresses filled in (`FrameTemplate`).
    template: FrameTemplate,
    /// The first port with the same template: ports with the same one send the same bytes.
    same_as: usize,
    /// The sends in the port's TX buffer, oldest first, in step with it: a re-sent frame equal
    /// to one of these is coalesced, as one waiting in the round-robin queue is.
    buffered: Vec<(GroupId, PendingFrame)>,
}

pub struct SchedPoller<T: TxQueue> {
    links: Vec<Arc<Link<T::Frame>>>,
    table: Arc<GroupTable>,
    ports: Vec<TxPort<T>>,
    /// Per port, in step with `ports`: its frame template and what its TX buffer holds.
    egress: Vec<Egress>,
    sched: RoundRobin,
    wheel: TimerWheel<Fired>,
    fired: Vec<Fired>,
    /// This switch's id in the aborts it declares: its first port's MAC address.
    me: MacAddr,
    counters: Arc<SchedCounters>,
}

impl<T: TxQueue> SchedPoller<T> {
    pub fn new(
        links: Vec<Arc<Link<T::Frame>>>,
        table: Arc<GroupTable>,
        ports: Vec<TxPort<T>>,
        counters: Arc<SchedCounters>,
        now_ns: u64,
    ) -> Self {
        let n = ports.len();
        let me = MacAddr(ports.first().map_or([0; 6], |p| p.src_mac));
        let templates = templates(&ports);
        let egress = templates
            .iter()
            .map(|t| Egress {
                template: t.clone(),
                same_as: templates.iter().position(|u| u == t).unwrap_or(0),
                buffered: Vec::with_capacity(BURST),
            })
            .collect();
        SchedPoller {
            me,
            egress,
            links,
            table,
            ports,
            sched: RoundRobin::new(n),
            // 4096 slots of 1.024 µs: one turn is 4.2 ms; longer timeouts take more turns.
            wheel: TimerWheel::new(4096, 10, now_ns),
            fired: Vec::new(),
            counters,
        }
    }

    /// Sends still queued (not yet handed to a TX buffer).
    pub fn pending(&self) -> usize {
        self.sched.total_pending()
    }

    /// Timers armed and not yet fired (including ones a release already made stale).
    pub fn timers(&self) -> usize {
        self.wheel.len()
    }

    fn dispatch(&mut self, out: Out<T::Frame>, now_ns: u64) {
        let Out {
            group,
            run,
            action,
            frame,
        } = out;
        if let Some((ports, kind, seq, retransmit)) = action.frame() {
            let send = PendingFrame {
                kind,
                epoch: run.epoch,
                seq,
                retransmit,
            };
            self.fan_out(ports, group, send, frame);
        } else if let Action::ArmTimer {
            seq,
            after_ns,
            timer,
        } = action
        {
            bump(&self.counters.timers_armed, 1);
            let fired = Fired {
                group,
                seq,
                timer,
                run,
            };
            self.wheel.arm(fired, now_ns.saturating_add(after_ns));
        }
    }

    /// Send `send` on every port of `ports`. `built`, the frame the RX poller built for the
    /// first port, goes to that port, and a shared handle to it (`RxFrame::share`: a reference
    /// count, no copy) to every other port whose frames are the same bytes (the same template:
    /// same addresses, as when the ports use the switch's MAC); other ports get frames built
    /// here.
    fn fan_out(
        &mut self,
        ports: PortSet,
        group: GroupId,
        send: PendingFrame,
        built: Option<T::Frame>,
    ) {
        let mut all = ports.iter();
        let Some(first) = all.next() else {
            return;
        };
        let first = first.get() as usize;
        for p in all {
            let p = p.get() as usize;
            let same =
                self.egress.get(p).map(|e| e.same_as) == self.egress.get(first).map(|e| e.same_as);
            let shared = built.as_ref().filter(|_| same).and_then(RxFrame::share);
            self.enqueue(p, group, send, shared);
        }
        self.enqueue(first, group, send, built);
    }

    /// Send `send` on `port`: straight into the port's TX buffer when nothing waits in its
    /// round-robin queue (the round robin decides only among frames that wait; with none
    /// waiting, taking this one now is the order it would pick), as `built` when the RX poller
    /// built it, otherwise, or when the device will not take it, into the queue behind the
    /// others (a built frame is then freed: a waiting send holds no buffer).
    fn enqueue(
        &mut self,
        port: usize,
        group: GroupId,
        send: PendingFrame,
        built: Option<T::Frame>,
    ) {
        if port >= self.ports.len() {
            // Config validation keeps port indices in range; a bad one is a bug, not traffic.
            debug_assert!(false, "send to port {port} of {}", self.ports.len());
            return;
        }
        if self.sched.pending(port) == 0 {
            // Only an answer to a repeated request (a re-send, an abort) can equal a frame
            // already buffered: a first send of a barrier's frame happens once.
            let repeat = send.retransmit || matches!(send.kind, Kind::Abort(_));
            if repeat
                && self.egress[port]
                    .buffered
                    .iter()
                    .any(|(g, b)| *g == group && b.says_the_same(&send))
            {
                bump(&self.ports[port].counters.coalesced, 1);
                return;
            }
            if self.send_now(port, group, send, built) {
                return;
            }
        }
        if self.sched.push(port, group, send) == Pushed::Coalesced {
            bump(&self.ports[port].counters.coalesced, 1);
        }
    }

    /// Put `send` in `port`'s TX buffer (flushing a full buffer first): `built`, the frame the
    /// RX poller built for it, as it is, else a frame built here from the port's template
    /// straight into a new mbuf. False when the device or the mempool cannot take it now (a
    /// built frame is then freed: a waiting send holds no buffer).
    fn send_now(
        &mut self,
        port: usize,
        group: GroupId,
        send: PendingFrame,
        mut built: Option<T::Frame>,
    ) -> bool {
        let in_place = built.is_some();
        for first in [true, false] {
            let (p, e) = (&mut self.ports[port], &mut self.egress[port]);
            let offered = match built.take() {
                Some(frame) => p.queue.offer_frame(frame).map_err(|(blocked, back)| {
                    built = Some(back);
                    blocked
                }),
                None => p.queue.offer_with(|buf: &mut [u8; FRAME_LEN]| {
                    e.template.write(
                        buf,
                        send.kind,
                        Flags::retransmit(send.retransmit),
                        group,
                        send.epoch,
                        send.seq,
                    )
                }),
            };
            match offered {
                Ok(()) => {
                    e.buffered.push((group, send));
                    count_out(&p.counters, &send);
                    if in_place {
                        bump(&p.counters.built_in_place, 1);
                    }
                    return true;
                }
                Err(TxBlocked::Full) if first => {
                    self.flush_port(port);
                }
                Err(blocked) => {
                    // A full buffer is the device refusing earlier frames: the flush counts
                    // that once as a tx-full wait.
                    if blocked == TxBlocked::NoBuffer {
                        bump(&p.counters.alloc_fail_waits, 1);
                    }
                    return false;
                }
            }
        }
        false
    }

    /// Hand `port`'s buffer to the device; returns whether any frame went.
    fn flush_port(&mut self, port: usize) -> bool {
        let p = &mut self.ports[port];
        let (sent, left) = p.queue.flush();
        self.egress[port].buffered.drain(..sent);
        if left > 0 {
            bump(&p.counters.tx_full_waits, 1);
        }
        sent > 0
    }

    fn transmit(&mut self) -> bool {
        let mut busy = false;
        for p in 0..self.ports.len() {
            // Round-robin picks, one frame each, up to one burst per port per poll.
            for _ in 0..BURST {
                let Some((group, send)) = self.sched.pop(p) else {
                    break;
                };
                if self.send_now(p, group, send, None) {
                    busy = true;
                } else {
                    self.sched.unpop(p, group, send);
                    break;
                }
            }
            if self.ports[p].queue.buffered() > 0 {
                // Flush every poll rather than on a timer: the scheduler already batches up to
                // one burst per port, and a barrier frame should not wait for company.
                busy |= self.flush_port(p);
            }
        }
        busy
    }
}

impl<T: TxQueue> SchedPoller<T> {
    /// Dispatch up to `budget` batches from each link; true when there was one.
    fn take_batches(&mut self, budget: usize, now_ns: u64) -> bool {
        let mut busy = false;
        for l in 0..self.links.len() {
            for _ in 0..budget {
                let Some(mut batch) = self.links[l].recv() else {
                    break;
                };
                bump(&self.counters.messages, batch.len() as u64);
                bump(&self.counters.batches, 1);
                for out in batch.drain(..) {
                    self.dispatch(out, now_ns);
                }
                self.links[l].give_back(batch);
                busy = true;
            }
        }
        busy
    }
}

/// Every port's frame template, by port index: the bytes the scheduler builds a send from, and
/// the RX pollers a send built in place (`RxPoller::with_templates`).
pub fn templates<T: TxQueue>(ports: &[TxPort<T>]) -> Arc<[FrameTemplate]> {
    ports
        .iter()
        .map(|p| FrameTemplate::new(MacAddr(p.peer_mac), MacAddr(p.src_mac)))
        .collect()
}

/// Count one frame built for `port`.
#[inline]
fn count_out(c: &TxCounters, send: &PendingFrame) {
    bump(&c.frames_out, 1);
    match send.kind {
        Kind::Reduce => bump(&c.reduce_out, 1),
        Kind::Release => bump(&c.release_out, 1),
        Kind::Abort(_) => bump(&c.abort_out, 1),
    }
    if send.retransmit {
        bump(&c.retransmits_out, 1);
    }
}

impl<T: TxQueue> Poller for SchedPoller<T> {
    fn poll(&mut self, now_ns: u64) -> bool {
        let mut busy = self.take_batches(LINK_BUDGET, now_ns);
        if !self.wheel.is_empty() {
            let mut fired = std::mem::take(&mut self.fired);
            self.wheel.advance(now_ns, &mut fired);
            for &f in &fired {
                let group = f.group;
                bump(&self.counters.timers_fired, 1);
                let actions = self.table.on_timer(f, self.me);
                if f.timer == Timer::Deadline && !actions.is_empty() {
                    bump(&self.counters.declared, 1);
                    tracing::warn!(
                        group = group.0,
                        seq = f.seq.0,
                        "failure declared: a child stayed silent; the group is aborted until reset"
                    );
                }
                if actions.reduces_up() {
                    bump(&self.counters.timer_resends, 1);
                }
                for action in actions.iter() {
                    self.dispatch(Out::new(group, actions.run(), *action), now_ns);
                }
            }
            busy |= !fired.is_empty();
            fired.clear();
            self.fired = fired;
        }
        busy |= self.transmit();
        busy
    }

    fn finish(&mut self) {
        // Every batch still in a link: its sends go to the TX buffers or wait (and are lost
        // with the switch), its built frames are sent or freed, before the ports close.
        self.take_batches(usize::MAX, 0);
        for p in 0..self.ports.len() {
            self.flush_port(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{mem_wire, MemRx, RxQueue};
    use barrier_protocol::switch::{GroupConfig, Run};
    use barrier_protocol::wire::FrameRepr;
    use barrier_protocol::Seq;
    use barrier_protocol::{Epoch, PortIdx, PortSet};

    /// A scheduler on one in-memory port, its link from an RX poller, the port's far end and
    /// its counters.
    type Bed = (
        SchedPoller<crate::io::MemTx>,
        Arc<Link<Vec<u8>>>,
        MemRx,
        Arc<TxCounters>,
    );

    fn setup(wire_cap: usize, table: GroupTable) -> Bed {
        let (tx, rx) = mem_wire(wire_cap);
        let ring = Arc::new(Link::new(1024));
        let c = Arc::new(TxCounters::default());
        let table = Arc::new(table);
        let s = SchedPoller::new(
            vec![ring.clone()],
            table,
            vec![TxPort {
                queue: tx,
                peer_mac: [0xff; 6],
                src_mac: [2, 0, 0, 0, 0, 1],
                counters: c.clone(),
            }],
            Arc::new(SchedCounters::default()),
            0,
        );
        (s, ring, rx, c)
    }

    /// The sequence numbers of `frames`, in order.
    fn seqs(frames: &[Vec<u8>]) -> Vec<u32> {
        frames
            .iter()
            .map(|f| FrameRepr::parse(f).unwrap().seq.0)
            .collect()
    }

    fn port0() -> PortIdx {
        PortIdx::new(0).unwrap()
    }

    #[test]
    fn a_full_tx_queue_delays_and_never_loses() {
        let (mut s, ring, mut rx, c) = setup(4, GroupTable::new(1));
        for g in 0..300u32 {
            let out = Out::new(
                GroupId(g),
                Run::of_epoch(Epoch::DEFAULT),
                Action::SendRelease {
                    seq: Seq(g),
                    ports: PortSet::single(port0()),
                    retransmit: false,
                },
            );
            if ring.send(vec![out]).is_err() {
                panic!("link full");
            }
        }
        let mut got = Vec::new();
        let mut now = 0;
        while got.len() < 300 {
            s.poll(now);
            now += 1000;
            // The device drains slowly: at most 3 frames per poll.
            let mut f = Vec::new();
            rx.rx_burst(&mut f, 3);
            got.extend(f);
            assert!(now < 10_000_000, "stuck after {} frames", got.len());
        }
        let seqs = seqs(&got);
        assert_eq!(
            seqs,
            (0..300).collect::<Vec<_>>(),
            "every send once, in order"
        );
        assert!(c.tx_full_waits.load(std::sync::atomic::Ordering::Relaxed) > 0);
        assert_eq!(c.frames_out.load(std::sync::atomic::Ordering::Relaxed), 300);
        assert_eq!(s.pending(), 0);
    }

    /// A release to port 0 with its frame built by the RX poller (marked here by a source
    /// address the scheduler's template does not have).
    fn built_release(seq: u32) -> Out<Vec<u8>> {
        let mut frame = vec![0u8; FRAME_LEN];
        FrameTemplate::new(MacAddr::BROADCAST, MacAddr([2, 0, 0, 0, 0, 0x77])).write(
            (&mut frame[..]).try_into().unwrap(),
            Kind::Release,
            Flags::empty(),
            GroupId(seq),
            Epoch::DEFAULT,
            Seq(seq),
        );
        let mut out = Out::new(
            GroupId(seq),
            Run::of_epoch(Epoch::DEFAULT),
            Action::SendRelease {
                seq: Seq(seq),
                ports: PortSet::single(port0()),
                retransmit: false,
            },
        );
        out.frame = Some(frame);
        out
    }

    /// A frame the RX poller built goes out as it is when the port is free; while the port is
    /// backed up the send waits in the round robin without it, and is built here when its turn
    /// comes. Every send goes out once, in order.
    #[test]
    fn a_built_frame_goes_out_as_it_is_unless_the_port_is_backed_up() {
        let (mut s, link, mut rx, c) = setup(2, GroupTable::new(1));
        let src = |f: &Vec<u8>| FrameRepr::parse(f).unwrap().src.0[5];
        link.send(vec![built_release(0)]).unwrap();
        s.poll(0);
        let mut got = Vec::new();
        rx.rx_burst(&mut got, 8);
        assert_eq!(got.iter().map(src).collect::<Vec<_>>(), [0x77]);
        assert_eq!(
            c.built_in_place.load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        // The wire holds 2 frames and the TX buffer a burst: sends past those wait for room.
        link.send((1..50).map(built_release).collect()).unwrap();
        s.poll(1);
        assert!(s.pending() > 0, "the port backed up");
        got.clear();
        let mut now = 2;
        while got.len() < 49 {
            s.poll(now);
            now += 1;
            rx.rx_burst(&mut got, 1);
            assert!(now < 10_000, "stuck after {} frames", got.len());
        }
        let seqs = seqs(&got);
        assert_eq!(
            seqs,
            (1..50).collect::<Vec<_>>(),
            "every send once, in order"
        );
        // Sent as built while the port took them; built here after it backed up.
        let built = c.built_in_place.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            got.iter().filter(|f| src(f) == 0x77).count() as u64,
            built - 1
        );
        assert!(
            got.iter().any(|f| src(f) == 1),
            "a waiting send was built here"
        );
        assert_eq!(s.pending(), 0);
    }

    /// A release to two ports with the frame built for the first: a port with the same
    /// template gets the same buffer (shared, not copied), a port with other addresses a frame
    /// built from its own template.
    #[test]
    fn a_release_shares_its_built_frame_with_ports_that_send_the_same_bytes() {
        for same in [true, false] {
            let (tx0, mut rx0) = mem_wire(8);
            let (tx1, mut rx1) = mem_wire(8);
            let c: Vec<Arc<TxCounters>> = (0..2).map(|_| Arc::new(TxCounters::default())).collect();
            let link = Arc::new(Link::new(4));
            let port = |queue, i: usize, src: u8| TxPort {
                queue,
                peer_mac: [0xff; 6],
                src_mac: [2, 0, 0, 0, 0, src],
                counters: c[i].clone(),
            };
            let mut s = SchedPoller::new(
                vec![link.clone()],
                Arc::new(GroupTable::new(1)),
                vec![port(tx0, 0, 1), port(tx1, 1, if same { 1 } else { 2 })],
                Arc::new(SchedCounters::default()),
                0,
            );
            let mut out = built_release(3);
            out.action = Action::SendRelease {
                seq: Seq(3),
                ports: PortSet(0b11),
                retransmit: false,
            };
            let built = out.frame.clone().unwrap();
            link.send(vec![out]).unwrap();
            s.poll(0);
            let (mut f0, mut f1) = (Vec::new(), Vec::new());
            rx0.rx_burst(&mut f0, 8);
            rx1.rx_burst(&mut f1, 8);
            assert_eq!(
                f0,
                std::slice::from_ref(&built),
                "port 0 sends the built frame"
            );
            let in_place = |i: usize| {
                c[i].built_in_place
                    .load(std::sync::atomic::Ordering::Relaxed)
            };
            if same {
                assert_eq!(f1, [built], "port 1 sends the same bytes");
                assert_eq!((in_place(0), in_place(1)), (1, 1));
            } else {
                let got = FrameRepr::parse(&f1[0]).unwrap();
                assert_eq!(
                    (got.src.0[5], got.seq, got.kind),
                    (2, Seq(3), Kind::Release)
                );
                assert_eq!((in_place(0), in_place(1)), (1, 0), "built here for port 1");
            }
        }
    }

    #[test]
    fn the_timer_wheel_resends_a_reduce_the_parent_did_not_answer() {
        // Group 0: intermediate, parent on port 0 (the scheduler's only port here), child on
        // port 1. Its child reported: it completed here and reduced up.
        let table = GroupTable::new(1);
        let parent = port0();
        let child = PortIdx::new(1).unwrap();
        table
            .configure(
                GroupId(0),
                GroupConfig::intermediate(parent, PortSet::single(child), 50_000),
            )
            .unwrap();
        let (outcome, actions) = table
            .apply(
                GroupId(0),
                barrier_protocol::switch::Event::Reduce {
                    port: child,
                    epoch: Epoch::DEFAULT,
                    seq: Seq(7),
                },
            )
            .unwrap();
        assert_eq!(outcome, barrier_protocol::switch::Outcome::Completed);
        let (mut s, ring, mut rx, _c) = setup(64, table);
        ring.send(
            actions
                .iter()
                .map(|a| Out::new(GroupId(0), actions.run(), *a))
                .collect(),
        )
        .unwrap();
        let mut frames = Vec::new();
        s.poll(1_000);
        rx.rx_burst(&mut frames, 10);
        assert_eq!(frames.len(), 1, "the reduce goes up once");
        let first = FrameRepr::parse(&frames[0]).unwrap();
        assert_eq!(
            (
                first.kind,
                first.seq,
                first.flags.contains(Flags::RETRANSMIT)
            ),
            (Kind::Reduce, Seq(7), false)
        );
        // Before the timeout: nothing more.
        s.poll(40_000);
        frames.clear();
        rx.rx_burst(&mut frames, 10);
        assert!(frames.is_empty());
        // After it: the reduce again, marked as a retransmission; and again a timeout later.
        s.poll(60_000);
        s.poll(60_500);
        frames.clear();
        rx.rx_burst(&mut frames, 10);
        assert_eq!(frames.len(), 1);
        let again = FrameRepr::parse(&frames[0]).unwrap();
        assert_eq!(
            (
                again.kind,
                again.seq,
                again.flags.contains(Flags::RETRANSMIT)
            ),
            (Kind::Reduce, Seq(7), true)
        );
        s.poll(125_000);
        s.poll(125_500);
        frames.clear();
        rx.rx_burst(&mut frames, 10);
        assert_eq!(frames.len(), 1, "re-armed after the re-send");
        assert_eq!(
            s.table.counts(GroupId(0)).resends,
            2,
            "each timer re-send counted in the group's slot"
        );
        // The release arrives: the pending timer becomes stale and fires into nothing.
        s.table
            .apply(
                GroupId(0),
                barrier_protocol::switch::Event::Release {
                    port: parent,
                    epoch: Epoch::DEFAULT,
                    seq: Seq(7),
                },
            )
            .unwrap();
        s.poll(400_000);
        s.poll(400_500);
        frames.clear();
        rx.rx_burst(&mut frames, 10);
        assert!(frames.is_empty(), "no re-send after the release");
    }
}
