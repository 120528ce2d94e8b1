//! Emulated leaves for the demo and the end-to-end tests: a poller over the shared
//! [`Fleet`](crate::fleet::Fleet) (one leaf state machine per (leaf, group), the release check,
//! the re-send timers), one link per leaf. A leaf arrives at the next barrier as soon as the
//! previous one releases it (closed loop, or after its group's think time); the poller records
//! barrier latency (first reduce sent to last release received) and what the fleet's checks
//! found.

use crate::fleet::{Fleet, FleetConfig, Received};
use barrier_protocol::backoff::Backoff;
use barrier_protocol::leaf::LeafSend;
use barrier_protocol::wire::MacAddr;
use barrier_protocol::{Epoch, Seq};
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
    fleet: Fleet,
    /// Barriers each group should complete (None: until stopped).
    target: Option<u64>,
    /// Leaves whose next arrival is due, in order: (leaf, group index).
    to_arrive: VecDeque<(u32, u32)>,
    /// Leaves waiting out their group's think time: (due, leaf, group).
    thinking: BinaryHeap<Reverse<(u64, u32, u32)>>,
    /// Per group: time between a release and the leaf's next arrival (u64::MAX: never).
    think_ns: Vec<u64>,
    /// Per group: copies of each reduce sent (more than 1 floods the switch with duplicates).
    copies: Vec<u32>,
    /// Groups that have completed `target` barriers (for the stop condition).
    groups_done: u32,
    frames: Vec<R::Frame>,
    /// Re-sends due, from the fleet's timers.
    resends: Vec<(u32, LeafSend)>,
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
        let fleet = Fleet::new(
            FleetConfig {
                members: n as u32,
                first_group,
                groups,
                first_seq: Seq(0),
                resend_timeout_ns,
                epoch: Epoch::DEFAULT,
                backoff: Backoff::FIXED,
            },
            0,
        );
        let to_arrive = (0..n as u32)
            .flat_map(|l| (0..groups).map(move |g| (l, g)))
            .collect();
        let g = groups as usize;
        LeafPoller {
            links,
            fleet,
            target,
            to_arrive,
            thinking: BinaryHeap::new(),
            think_ns: vec![0; g],
            copies: vec![1; g],
            groups_done: 0,
            frames: Vec::with_capacity(BURST),
            resends: Vec::new(),
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
        for (g, &t) in think_ns.iter().enumerate().take(self.think_ns.len()) {
            self.think_ns[g] = t;
        }
        for (g, &c) in copies.iter().enumerate().take(self.copies.len()) {
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
            let li = l as usize;
            let tx = &mut self.links[li].tx;
            if tx.buffered() >= BURST {
                tx.flush();
                if tx.buffered() >= BURST {
                    // The wire is full: arrive later, in the same order.
                    self.to_arrive.push_front((l, g));
                    break;
                }
            }
            if let Some(t) = self.target {
                if u64::from(self.fleet.leaf(l, g).seq().0) >= t {
                    continue; // this leaf is done with this group
                }
            }
            let Ok(arrival) = self.fleet.arrive(l, g, now) else {
                continue; // already waiting: nothing to start
            };
            let frame = self.fleet.reduce_frame(
                arrival.send,
                self.links[li].mac,
                MacAddr::BROADCAST.0,
                None,
            );
            // Room was checked above; a refusal here (no buffer) leaves the leaf waiting and its
            // timer re-sends the reduce. Extra copies (a flood) go while there is room.
            let _ = self.links[li].tx.offer(&frame);
            for _ in 1..self.copies[g as usize] {
                let tx = &mut self.links[li].tx;
                if tx.buffered() >= BURST {
                    tx.flush();
                }
                if tx.offer(&frame).is_err() {
                    break;
                }
            }
            busy = true;
        }
        busy
    }

    fn receive(&mut self, now: u64) -> bool {
        let mut busy = false;
        let mut frames = std::mem::take(&mut self.frames);
        for li in 0..self.links.len() {
            self.links[li].rx.rx_burst(&mut frames, BURST);
            busy |= !frames.is_empty();
            for f in &frames {
                let r = match self.fleet.receive(li as u32, f.as_ref(), now) {
                    Received::Released(r) => r,
                    Received::Other => {
                        self.report.junk += 1;
                        continue;
                    }
                    Received::Ignored => {
                        self.report.ignored_releases += 1;
                        continue;
                    }
                    Received::NotReached => {
                        self.report.early_releases += 1;
                        continue;
                    }
                };
                self.report.early_releases += u64::from(r.early);
                self.report.releases_per_leaf[li] += 1;
                let gi = r.group as usize;
                if let Some(c) = r.completed {
                    let lat = now.saturating_sub(c.first_arrive_ns).max(1);
                    let _ = self.report.latency.record(lat);
                    if let Some(h) = self.report.group_latency.get_mut(gi) {
                        let _ = h.record(lat);
                    }
                    self.report.completed[gi] += 1;
                    self.progress.fetch_add(1, Ordering::Relaxed);
                    if self.target == Some(self.report.completed[gi]) {
                        self.groups_done += 1;
                        if self.groups_done as usize == self.report.completed.len() {
                            self.done.store(true, Ordering::Relaxed);
                        }
                    }
                }
                self.schedule_arrival(li as u32, r.group, now);
            }
            self.links[li].rx.recycle(&mut frames);
        }
        self.frames = frames;
        busy
    }

    fn timers(&mut self, now: u64) {
        let mut resends = std::mem::take(&mut self.resends);
        self.fleet.expire(now, &mut resends);
        self.report.resends += resends.len() as u64;
        for &(l, send) in &resends {
            let link = &mut self.links[l as usize];
            let frame = self
                .fleet
                .reduce_frame(send, link.mac, MacAddr::BROADCAST.0, None);
            let _ = link.tx.offer(&frame);
        }
        resends.clear();
        self.resends = resends;
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
