//! Emulated leaves for the demo and the end-to-end tests: the leaf state machine of
//! barrier-protocol, one per (leaf, group), all driven by one poller. It arrives at the next
//! barrier as soon as the previous one releases (closed loop), checks the method's promise on
//! every release (no leaf released before all leaves arrived, each leaf released once per
//! barrier) and records barrier latency: first reduce sent to last release received.

use barrier_protocol::leaf::{Leaf, LeafConfig, LeafSend};
use barrier_protocol::wire::{FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{Epoch, GroupId, Seq, Time};
use barrier_runtime::io::{RxQueue, TxQueue, BURST};
use barrier_runtime::poll::Poller;
use hdrhistogram::Histogram;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One emulated leaf: its link to its parent switch and one state machine per group.
pub struct LeafLink<R, T> {
    pub rx: R,
    pub tx: T,
    pub mac: [u8; 6],
}

/// What the leaves saw, read after the run.
#[derive(Clone)]
pub struct LeafReport {
    /// Barrier latency in ns, first reduce sent to last release received, one sample per
    /// completed barrier of each group.
    pub latency: Histogram<u64>,
    /// The same per group, when there are at most 64 groups (else empty).
    pub group_latency: Vec<Histogram<u64>>,
    /// Barriers completed per group.
    pub completed: Vec<u64>,
    /// Releases received per leaf (all groups).
    pub releases_per_leaf: Vec<u64>,
    /// Releases that came before every leaf had arrived: must stay 0.
    pub early_releases: u64,
    /// Releases a leaf ignored (duplicate or stale).
    pub ignored_releases: u64,
    /// Reduces re-sent after a leaf timeout.
    pub resends: u64,
    /// Frames that were not barrier frames or not releases.
    pub junk: u64,
}

pub struct LeafPoller<R: RxQueue, T: TxQueue> {
    links: Vec<LeafLink<R, T>>,
    /// machines[leaf * groups + group]
    machines: Vec<Leaf>,
    groups: u32,
    first_group: u32,
    /// Barriers each group should complete (None: until stopped).
    target: Option<u64>,
    /// Per group, by barrier parity: leaves arrived, start time of the barrier.
    arrived: Vec<[u32; 2]>,
    started: Vec<[u64; 2]>,
    released: Vec<u32>,
    /// Leaves whose next arrival is due, in order.
    to_arrive: VecDeque<(u32, u32)>,
    /// Leaves waiting out their group's think time: (due, leaf, group).
    thinking: BinaryHeap<Reverse<(u64, u32, u32)>>,
    /// Per group: time between a release and the leaf's next arrival (u64::MAX: never).
    think_ns: Vec<u64>,
    /// Per group: copies of each reduce sent (more than 1 floods the switch with duplicates).
    copies: Vec<u32>,
    frames: Vec<R::Frame>,
    next_timer_scan: u64,
    /// Time between two scans of every leaf's timer.
    timer_scan_ns: u64,
    report: LeafReport,
    /// Barriers completed over all groups, for progress and the stop condition.
    pub progress: Arc<AtomicU64>,
    /// Set when every group has completed `target` barriers.
    pub done: Arc<AtomicBool>,
    out: Arc<Mutex<Option<LeafReport>>>,
}

impl<R: RxQueue, T: TxQueue> LeafPoller<R, T> {
    /// Leaves on `links`, each a member of groups `first_group..first_group+groups`.
    pub fn new(
        links: Vec<LeafLink<R, T>>,
        first_group: u32,
        groups: u32,
        resend_timeout_ns: u64,
        target: Option<u64>,
        out: Arc<Mutex<Option<LeafReport>>>,
    ) -> Self {
        let n = links.len();
        let mut machines = Vec::with_capacity(n * groups as usize);
        let mut to_arrive = VecDeque::new();
        for l in 0..n {
            for g in 0..groups {
                machines.push(Leaf::new(LeafConfig {
                    group: GroupId(first_group + g),
                    epoch: Epoch::DEFAULT,
                    resend_timeout_ns,
                    first_seq: Seq(0),
                }));
                to_arrive.push_back((l as u32, g));
            }
        }
        let g = groups as usize;
        LeafPoller {
            links,
            machines,
            groups,
            first_group,
            target,
            arrived: vec![[0; 2]; g],
            started: vec![[0; 2]; g],
            released: vec![0; g],
            to_arrive,
            thinking: BinaryHeap::new(),
            think_ns: vec![0; g],
            copies: vec![1; g],
            frames: Vec::with_capacity(BURST),
            next_timer_scan: 0,
            // A scan visits every (leaf, group) machine: do it often enough that a re-send is
            // at most 1/16 of the timeout late, and no more often than every 100 µs.
            timer_scan_ns: (resend_timeout_ns / 16).clamp(100_000, 1_000_000),
            report: LeafReport {
                latency: Histogram::new_with_bounds(1, 60_000_000_000, 3)
                    .expect("histogram bounds"),
                group_latency: if g <= 64 {
                    (0..g)
                        .map(|_| Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("bounds"))
                        .collect()
                } else {
                    Vec::new()
                },
                completed: vec![0; g],
                releases_per_leaf: vec![0; n],
                early_releases: 0,
                ignored_releases: 0,
                resends: 0,
                junk: 0,
            },
            progress: Arc::new(AtomicU64::new(0)),
            done: Arc::new(AtomicBool::new(target == Some(0))),
            out,
        }
    }

    /// Pace each group: `think_ns[g]` between a release and the next arrival (`u64::MAX`: the
    /// group never starts), `copies[g]` transmissions of each reduce. Missing entries: 0 and 1.
    pub fn with_pacing(mut self, think_ns: &[u64], copies: &[u32]) -> Self {
        for (g, &t) in think_ns.iter().enumerate().take(self.groups as usize) {
            self.think_ns[g] = t;
        }
        for (g, &c) in copies.iter().enumerate().take(self.groups as usize) {
            self.copies[g] = c.max(1);
        }
        // Initial arrivals of paced groups wait like later ones.
        let start: Vec<(u32, u32)> = self.to_arrive.drain(..).collect();
        for (l, g) in start {
            self.schedule_arrival(l, g, 0);
        }
        self
    }

    fn schedule_arrival(&mut self, l: u32, g: u32, now: u64) {
        match self.think_ns[g as usize] {
            0 => self.to_arrive.push_back((l, g)),
            u64::MAX => {}
            t => self.thinking.push(Reverse((now.saturating_add(t), l, g))),
        }
    }

    fn frame(&self, leaf: usize, send: LeafSend) -> [u8; FRAME_LEN] {
        let mut buf = [0u8; FRAME_LEN];
        send.frame(MacAddr(self.links[leaf].mac), MacAddr::BROADCAST, None)
            .emit(&mut buf);
        buf
    }

    fn arrivals(&mut self, now: u64) -> bool {
        let mut busy = false;
        while let Some(Reverse((due, l, g))) = self.thinking.peek().copied() {
            if due > now {
                break;
            }
            self.thinking.pop();
            self.to_arrive.push_back((l, g));
        }
        while let Some((l, g)) = self.to_arrive.pop_front() {
            let (li, gi) = (l as usize, g as usize);
            let tx = &mut self.links[li].tx;
            if tx.buffered() >= BURST {
                tx.flush();
                if tx.buffered() >= BURST {
                    // The wire is full: arrive later, in the same order.
                    self.to_arrive.push_front((l, g));
                    break;
                }
            }
            let m = &mut self.machines[li * self.groups as usize + gi];
            if let Some(t) = self.target {
                if u64::from(m.seq().0) >= t {
                    continue; // this leaf is done with this group
                }
            }
            let send = match m.arrive(Time::from_nanos(now)) {
                Ok(s) => s,
                Err(_) => continue, // already waiting: nothing to start
            };
            let frame = self.frame(li, send);
            // Room was checked above; a refusal here (no buffer) leaves the leaf waiting and its
            // timer re-sends the reduce. Extra copies (a flood) go while there is room.
            let _ = self.links[li].tx.offer(&frame);
            for _ in 1..self.copies[gi] {
                let tx = &mut self.links[li].tx;
                if tx.buffered() >= BURST {
                    tx.flush();
                }
                if tx.offer(&frame).is_err() {
                    break;
                }
            }
            let parity = (send.seq.0 & 1) as usize;
            let a = &mut self.arrived[gi][parity];
            if *a == 0 {
                self.started[gi][parity] = now;
            }
            *a += 1;
            busy = true;
        }
        busy
    }

    fn receive(&mut self, now: u64) -> bool {
        let mut busy = false;
        let n = self.links.len() as u32;
        let mut frames = std::mem::take(&mut self.frames);
        for li in 0..self.links.len() {
            self.links[li].rx.rx_burst(&mut frames, BURST);
            busy |= !frames.is_empty();
            for f in &frames {
                let repr = match FrameRepr::parse(f.as_ref()) {
                    Ok(r) if r.kind == Kind::Release => r,
                    _ => {
                        self.report.junk += 1;
                        continue;
                    }
                };
                let g = repr.group.0.wrapping_sub(self.first_group);
                if g >= self.groups {
                    self.report.junk += 1;
                    continue;
                }
                let gi = g as usize;
                let m = &mut self.machines[li * self.groups as usize + gi];
                match m.on_release(Time::from_nanos(now), repr.epoch, repr.seq) {
                    None => self.report.ignored_releases += 1,
                    Some(r) => {
                        let parity = (r.seq.0 & 1) as usize;
                        if self.arrived[gi][parity] != n {
                            self.report.early_releases += 1;
                        }
                        self.report.releases_per_leaf[li] += 1;
                        self.released[gi] += 1;
                        if self.released[gi] == n {
                            let lat = now.saturating_sub(self.started[gi][parity]).max(1);
                            let _ = self.report.latency.record(lat);
                            if let Some(h) = self.report.group_latency.get_mut(gi) {
                                let _ = h.record(lat);
                            }
                            self.report.completed[gi] += 1;
                            self.released[gi] = 0;
                            self.arrived[gi][parity] = 0;
                            self.progress.fetch_add(1, Ordering::Relaxed);
                            if let Some(t) = self.target {
                                if self.report.completed.iter().all(|&c| c >= t) {
                                    self.done.store(true, Ordering::Relaxed);
                                }
                            }
                        }
                        self.schedule_arrival(li as u32, g, now);
                    }
                }
            }
            self.links[li].rx.recycle(&mut frames);
        }
        self.frames = frames;
        busy
    }

    fn timers(&mut self, now: u64) {
        if now < self.next_timer_scan {
            return;
        }
        self.next_timer_scan = now + self.timer_scan_ns;
        let groups = self.groups as usize;
        for i in 0..self.machines.len() {
            if let Some(send) = self.machines[i].poll(Time::from_nanos(now)) {
                self.report.resends += 1;
                let frame = self.frame(i / groups, send);
                let _ = self.links[i / groups].tx.offer(&frame);
            }
        }
    }
}

impl<R: RxQueue, T: TxQueue> Poller for LeafPoller<R, T> {
    fn poll(&mut self, now_ns: u64) -> bool {
        let mut busy = self.arrivals(now_ns);
        busy |= self.receive(now_ns);
        busy |= self.arrivals(now_ns);
        self.timers(now_ns);
        for l in &mut self.links {
            if l.tx.buffered() > 0 {
                l.tx.flush();
            }
        }
        busy
    }

    fn finish(&mut self) {
        for l in &mut self.links {
            l.tx.flush();
        }
        *self.out.lock().expect("report lock") = Some(self.report.clone());
    }

    fn drain(&mut self) -> usize {
        let frames = &mut self.frames;
        self.links.iter_mut().map(|l| l.rx.drain(frames)).sum()
    }
}
