//! The generator's loop: thousands of emulated leaves (one `barrier_protocol::leaf::Leaf` per
//! port and group) on a few ports, paced open loop by a token bucket or closed loop by the
//! releases, with fault injection on each port in both directions and latency into
//! hdrhistograms. Generic over the switch crate's I/O seam, so it runs on DPDK queues and, in
//! tests, on in-memory wires.

use crate::bucket::TokenBucket;
use crate::fault::{FaultCounts, FaultRates, Injector, Pkt};
use crate::hdrlog::HdrLog;
use crate::report::{
    new_histogram, BarrierCounts, FrameCounts, Percentiles, PortCounts, TrialReport,
};
use barrier_protocol::leaf::{Leaf, LeafConfig, LeafSend, LeafState};
use barrier_protocol::wire::{FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{GroupId, Seq, Time};
pub use barrier_runtime::clock::Clock;
use barrier_runtime::io::{RxQueue, TxBlocked, TxQueue, BURST};
use barrier_runtime::poll::Poller;
use hdrhistogram::Histogram;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Frames waiting per port (after fault injection) before new arrivals pause: bounds memory and
/// keeps a leaf's "first reduce" time close to when the frame reaches the device.
const PENDING_CAP: usize = 4 * BURST;

/// How arrivals are paced.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Load {
    /// A group's leaves arrive at the next barrier as soon as its release is back.
    Closed,
    /// First reduces leave at `rate` frames/s (token bucket, `burst` tokens deep), as long as
    /// some group is ready; re-sends are not paced.
    Open { rate: u64, burst: u64 },
}

/// One trial: how to load, for how long, and how long to wait for stragglers.
#[derive(Copy, Clone, Debug)]
pub struct TrialSpec {
    pub load: Load,
    pub duration: Duration,
    /// Stop after this many barriers per group (then `duration` is only an upper bound).
    pub count: Option<u64>,
    /// After arrivals stop, wait at most this long for outstanding barriers.
    pub drain: Duration,
}

/// Fixed for the generator's life.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// Groups `first_group .. first_group + groups`; every port is a child in every group.
    pub first_group: u32,
    pub groups: u32,
    pub first_seq: u32,
    /// The leaf's re-send timer.
    pub resend_timeout_ns: u64,
    /// A barrier that takes longer than this from its first reduce counts as lost.
    pub barrier_deadline_ns: u64,
    /// Destination MAC of reduces (the switch's port, or broadcast).
    pub dst_mac: [u8; 6],
    /// Put a tx timestamp (HAS_TIMESTAMP) in every reduce.
    pub timestamps: bool,
    /// Seed of the fault injectors; each port and direction gets its own stream.
    pub seed: u64,
    /// A reordered frame waits at most this long for a frame to overtake it.
    pub reorder_hold_ns: u64,
    /// Print a progress line every second to stderr.
    pub progress: bool,
    /// Names this generator in progress lines and interval-log tags when several run at once
    /// (empty: alone).
    pub label: String,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            first_group: 0,
            groups: 1,
            first_seq: 0,
            resend_timeout_ns: 10_000_000,
            barrier_deadline_ns: 1_000_000_000,
            dst_mac: [0xff; 6],
            timestamps: true,
            seed: 1,
            reorder_hold_ns: 50_000,
            progress: false,
            label: String::new(),
        }
    }
}

/// One generator port: a child link of the switch under test.
pub struct GenPort<R, T> {
    pub name: String,
    pub mac: [u8; 6],
    pub rx: R,
    pub tx: T,
    pub faults_tx: FaultRates,
    pub faults_rx: FaultRates,
}

struct PortRt<R: RxQueue, T> {
    name: String,
    mac: [u8; 6],
    rx: R,
    tx: T,
    inj_tx: Injector,
    inj_rx: Injector,
    /// Frames past the TX injector, not yet taken by the device.
    pending: VecDeque<Pkt>,
    /// Frames past the RX injector, not yet processed.
    rx_pkts: VecDeque<Pkt>,
    frames: Vec<R::Frame>,
    tx_count: u64,
    rx_count: u64,
}

/// A group's barrier in progress.
#[derive(Clone, Debug, Default)]
struct GroupRun {
    /// Leaves that sent their first reduce for the current barrier.
    arrived: u32,
    /// Leaves released from the current barrier.
    released: u32,
    first_ns: u64,
    last_arrive_ns: u64,
    resent: bool,
    late: bool,
    /// The trial the current barrier started in.
    trial: u32,
    /// Barriers completed in this trial (for `count`).
    done: u64,
    /// In the ready queue.
    queued: bool,
}

#[derive(Clone, Debug, Default)]
struct Totals {
    tx: u64,
    rx: u64,
    tx_reduce: u64,
    tx_resend: u64,
    rx_release: u64,
    rx_ignored: u64,
    rx_other: u64,
    tx_blocked: u64,
    started: u64,
    completed: u64,
    needed_resend: u64,
    over_deadline: u64,
    lost: u64,
    early: u64,
    carried: u64,
}

/// The generator.
pub struct Engine<R: RxQueue, T: TxQueue> {
    cfg: GenConfig,
    ports: Vec<PortRt<R, T>>,
    /// leaves[port * groups + group]
    leaves: Vec<Leaf>,
    groups: Vec<GroupRun>,
    /// Groups whose leaves arrive next, front first; `cursor` leaves of the front one have.
    ready: VecDeque<u32>,
    cursor: usize,
    /// Groups with a barrier in progress.
    outstanding: u64,
    clock: Clock,
    trial: u32,
    t: Totals,
    hist_leaf: Histogram<u64>,
    hist_barrier: Histogram<u64>,
    hist_echo: Histogram<u64>,
    iv_leaf: Histogram<u64>,
    iv_barrier: Histogram<u64>,
    inline: Vec<Box<dyn Poller>>,
    inline_clock: Clock,
    hdr: Option<HdrLog>,
    quit: Arc<AtomicBool>,
}

impl<R: RxQueue, T: TxQueue> Engine<R, T> {
    pub fn new(cfg: GenConfig, ports: Vec<GenPort<R, T>>, clock: Clock) -> Engine<R, T> {
        assert!(!ports.is_empty(), "at least one port");
        assert!(cfg.groups > 0, "at least one group");
        let np = ports.len();
        let g = cfg.groups as usize;
        let mut leaves = Vec::with_capacity(np * g);
        for _ in 0..np {
            for gi in 0..cfg.groups {
                leaves.push(Leaf::new(LeafConfig {
                    group: GroupId(cfg.first_group + gi),
                    resend_timeout_ns: cfg.resend_timeout_ns,
                    first_seq: Seq(cfg.first_seq),
                }));
            }
        }
        let ports = ports
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let seed = |dir: u64| cfg.seed ^ (0x9E37_79B9 * (2 * i as u64 + dir + 1));
                PortRt {
                    name: p.name,
                    mac: p.mac,
                    rx: p.rx,
                    tx: p.tx,
                    inj_tx: Injector::new(&p.faults_tx, seed(0), cfg.reorder_hold_ns),
                    inj_rx: Injector::new(&p.faults_rx, seed(1), cfg.reorder_hold_ns),
                    pending: VecDeque::with_capacity(PENDING_CAP * 2),
                    rx_pkts: VecDeque::new(),
                    frames: Vec::with_capacity(BURST),
                    tx_count: 0,
                    rx_count: 0,
                }
            })
            .collect();
        Engine {
            ports,
            leaves,
            groups: vec![GroupRun::default(); g],
            ready: VecDeque::with_capacity(g),
            cursor: 0,
            outstanding: 0,
            clock,
            trial: 0,
            t: Totals::default(),
            hist_leaf: new_histogram(),
            hist_barrier: new_histogram(),
            hist_echo: new_histogram(),
            iv_leaf: new_histogram(),
            iv_barrier: new_histogram(),
            inline: Vec::new(),
            inline_clock: Clock::new(),
            hdr: None,
            quit: Arc::new(AtomicBool::new(false)),
            cfg,
        }
    }

    /// Pollers run in the generator's own loop after its own work (e.g. an in-process switch
    /// when only one lcore is given), with their own clock.
    pub fn set_inline_pollers(&mut self, pollers: Vec<Box<dyn Poller>>, clock: Clock) {
        self.inline = pollers;
        self.inline_clock = clock;
    }

    pub fn take_inline_pollers(&mut self) -> Vec<Box<dyn Poller>> {
        std::mem::take(&mut self.inline)
    }

    /// Where interval histograms go, once a second.
    pub fn set_hdr_log(&mut self, log: HdrLog) {
        self.hdr = Some(log);
    }

    pub fn take_hdr_log(&mut self) -> Option<HdrLog> {
        self.hdr.take()
    }

    /// Set to stop the current trial (SIGINT).
    pub fn set_quit(&mut self, quit: Arc<AtomicBool>) {
        self.quit = quit;
    }

    pub fn ports(&self) -> usize {
        self.ports.len()
    }

    /// Groups this generator runs.
    pub fn groups(&self) -> u32 {
        self.cfg.groups
    }

    fn np(&self) -> u32 {
        self.ports.len() as u32
    }

    /// Runs one trial to its end (duration or count reached, then the drain) and reports it.
    pub fn run_trial(&mut self, spec: &TrialSpec) -> TrialReport {
        self.trial += 1;
        self.t = Totals::default();
        for h in [
            &mut self.hist_leaf,
            &mut self.hist_barrier,
            &mut self.hist_echo,
            &mut self.iv_leaf,
            &mut self.iv_barrier,
        ] {
            h.reset();
        }
        for p in &mut self.ports {
            p.inj_tx.counts = FaultCounts::default();
            p.inj_rx.counts = FaultCounts::default();
            p.tx_count = 0;
            p.rx_count = 0;
        }
        for (g, gr) in self.groups.iter_mut().enumerate() {
            gr.done = 0;
            if !gr.queued && gr.arrived == 0 && spec.count != Some(0) {
                gr.queued = true;
                self.ready.push_back(g as u32);
            }
        }
        let start_tick = self.clock.ticks();
        let start_ns = self.clock.ns(start_tick);
        let end_ns = start_ns + spec.duration.as_nanos() as u64;
        let drain_ns = spec.drain.as_nanos() as u64;
        let mut bucket = match spec.load {
            Load::Open { rate, burst } => {
                Some(TokenBucket::new(rate, burst, self.clock.hz(), start_tick))
            }
            Load::Closed => None,
        };
        let scan_every = (self.cfg.resend_timeout_ns / 8).clamp(20_000, 1_000_000);
        let mut next_scan = start_ns + scan_every;
        let mut running = true;
        let mut stop_ns = end_ns;
        let mut interrupted = false;
        let mut progress = Progress::new(start_ns);
        loop {
            let tick = self.clock.ticks();
            let now = self.clock.ns(tick);
            if running {
                let quit = self.quit.load(Ordering::Relaxed);
                let counted_out =
                    spec.count.is_some() && self.ready.is_empty() && self.outstanding == 0;
                if now >= end_ns || quit || counted_out {
                    running = false;
                    stop_ns = now;
                    interrupted = quit;
                }
            }
            self.receive(now, running, spec.count);
            if now >= next_scan {
                self.scan_timers(now);
                next_scan = now + scan_every;
            }
            if running || self.cursor > 0 {
                match &mut bucket {
                    Some(b) => {
                        b.refill(tick);
                        self.arrivals(now, Some(b));
                    }
                    None => self.arrivals(now, None),
                }
            }
            self.transmit(now);
            if !self.inline.is_empty() {
                let t = self.inline_clock.now_ns();
                for p in self.inline.iter_mut() {
                    p.poll(t);
                }
            }
            if now >= progress.next {
                self.tick_progress(&mut progress, now);
            }
            if !running && self.cursor == 0 && self.outstanding == 0 {
                break;
            }
            if !running
                && (now >= stop_ns + drain_ns
                    || (interrupted
                        && self.quit.load(Ordering::Relaxed)
                        && now >= stop_ns + drain_ns.min(200_000_000)))
            {
                break;
            }
        }
        let end = self.clock.ns(self.clock.ticks());
        // What is left: flush held frames so the next trial starts clean.
        for p in &mut self.ports {
            p.inj_tx.flush(&mut p.pending);
        }
        self.transmit(end);
        self.tick_progress(&mut progress, end);
        self.report(
            spec,
            end.saturating_sub(start_ns),
            end.saturating_sub(stop_ns),
            interrupted,
        )
    }

    fn report(
        &self,
        spec: &TrialSpec,
        elapsed_ns: u64,
        drain_ns: u64,
        interrupted: bool,
    ) -> TrialReport {
        let secs = (elapsed_ns as f64 / 1e9).max(1e-9);
        let t = &self.t;
        // Barriers still open now never completed in this trial.
        let incomplete = self
            .groups
            .iter()
            .filter(|g| g.arrived > 0 && g.trial == self.trial)
            .count() as u64;
        let mut faults_tx = FaultCounts::default();
        let mut faults_rx = FaultCounts::default();
        let per_port = self
            .ports
            .iter()
            .map(|p| {
                faults_tx.add(&p.inj_tx.counts);
                faults_rx.add(&p.inj_rx.counts);
                PortCounts {
                    name: p.name.clone(),
                    tx: p.tx_count,
                    rx: p.rx_count,
                    faults_tx: p.inj_tx.counts,
                    faults_rx: p.inj_rx.counts,
                }
            })
            .collect();
        let (mode, offered) = match spec.load {
            Load::Closed => ("closed", None),
            Load::Open { rate, .. } => ("open", Some(rate)),
        };
        // The offered rate is judged over the time arrivals were allowed, not the drain.
        let arrival_secs = ((elapsed_ns - drain_ns) as f64 / 1e9).max(1e-9);
        TrialReport {
            mode: mode.into(),
            offered_fps: offered,
            achieved_ratio: offered.map(|r| t.tx_reduce as f64 / arrival_secs / r.max(1) as f64),
            ports: self.ports.len(),
            groups: self.cfg.groups,
            elapsed_s: secs,
            drain_s: drain_ns as f64 / 1e9,
            frames: FrameCounts {
                tx: t.tx,
                rx: t.rx,
                tx_per_s: t.tx as f64 / secs,
                rx_per_s: t.rx as f64 / secs,
                tx_reduce: t.tx_reduce,
                tx_resend: t.tx_resend,
                rx_release: t.rx_release,
                rx_release_ignored: t.rx_ignored,
                rx_other: t.rx_other,
                tx_blocked: t.tx_blocked,
            },
            barriers: BarrierCounts {
                started: t.started,
                completed: t.completed,
                per_s: t.completed as f64 / secs,
                incomplete,
                needed_resend: t.needed_resend,
                over_deadline: t.over_deadline,
                lost: t.lost + incomplete,
                early_releases: t.early,
                carried_over: t.carried,
            },
            latency_leaf: Percentiles::of(&self.hist_leaf),
            latency_barrier: Percentiles::of(&self.hist_barrier),
            latency_echo: (!self.hist_echo.is_empty()).then(|| Percentiles::of(&self.hist_echo)),
            faults_tx,
            faults_rx,
            per_port,
            interrupted,
        }
    }

    fn tick_progress(&mut self, p: &mut Progress, now: u64) {
        let dt = now.saturating_sub(p.last_ns);
        if dt == 0 {
            return;
        }
        let secs = dt as f64 / 1e9;
        if self.cfg.progress {
            let lost = self.t.lost;
            eprintln!(
                "{}[{:7.1}s] tx {}/s rx {}/s barriers {}/s (total {}) lost {} re-sends {} faults tx/rx {}/{} leaf p50 {} p99 {}",
                if self.cfg.label.is_empty() { String::new() } else { format!("{} ", self.cfg.label) },
                (now - p.start_ns) as f64 / 1e9,
                crate::report::rate((self.t.tx - p.tx) as f64 / secs),
                crate::report::rate((self.t.rx - p.rx) as f64 / secs),
                crate::report::rate((self.t.completed - p.completed) as f64 / secs),
                self.t.completed,
                lost,
                self.t.tx_resend,
                self.ports.iter().map(|p| p.inj_tx.counts.dropped + p.inj_tx.counts.duplicated + p.inj_tx.counts.reordered + p.inj_tx.counts.corrupted).sum::<u64>(),
                self.ports.iter().map(|p| p.inj_rx.counts.dropped + p.inj_rx.counts.duplicated + p.inj_rx.counts.reordered + p.inj_rx.counts.corrupted).sum::<u64>(),
                if self.iv_leaf.is_empty() { "-".into() } else { crate::report::ns(self.iv_leaf.value_at_quantile(0.5)) },
                if self.iv_leaf.is_empty() { "-".into() } else { crate::report::ns(self.iv_leaf.value_at_quantile(0.99)) },
            );
        }
        if let Some(log) = &self.hdr {
            let start = Duration::from_nanos(p.last_ns);
            let len = Duration::from_nanos(dt);
            let (tl, tb) = if self.cfg.label.is_empty() {
                ("leaf".to_string(), "barrier".to_string())
            } else {
                (
                    format!("leaf-{}", self.cfg.label),
                    format!("barrier-{}", self.cfg.label),
                )
            };
            log.record(start, len, &tl, self.iv_leaf.clone());
            log.record(start, len, &tb, self.iv_barrier.clone());
        }
        self.iv_leaf.reset();
        self.iv_barrier.reset();
        p.last_ns = now;
        p.next = now + 1_000_000_000;
        p.tx = self.t.tx;
        p.rx = self.t.rx;
        p.completed = self.t.completed;
    }

    fn reduce_pkt(&self, port: usize, send: LeafSend, now: u64) -> Pkt {
        let mut pkt = Pkt {
            len: FRAME_LEN as u8,
            bytes: [0; crate::fault::PKT_MAX],
        };
        send.frame(
            MacAddr(self.ports[port].mac),
            MacAddr(self.cfg.dst_mac),
            self.cfg.timestamps.then_some(now),
        )
        .emit(&mut pkt.bytes[..FRAME_LEN]);
        pkt
    }

    /// A reduce enters the port's TX fault injector.
    fn send(&mut self, port: usize, send: LeafSend, now: u64) {
        let pkt = self.reduce_pkt(port, send, now);
        let p = &mut self.ports[port];
        if p.inj_tx.is_active() {
            p.inj_tx.push(pkt, now, &mut p.pending);
        } else {
            p.pending.push_back(pkt);
        }
    }

    fn arrivals(&mut self, now: u64, mut bucket: Option<&mut TokenBucket>) {
        let np = self.ports.len();
        let ng = self.cfg.groups as usize;
        while let Some(&g) = self.ready.front() {
            let port = self.cursor;
            if self.ports[port].pending.len() >= PENDING_CAP {
                break;
            }
            if let Some(b) = bucket.as_deref_mut() {
                if !b.try_take_one() {
                    break;
                }
            }
            let gi = g as usize;
            let send = match self.leaves[port * ng + gi].arrive(Time(now)) {
                Ok(s) => s,
                Err(e) => unreachable!("a queued leaf is working: {e}"),
            };
            let gr = &mut self.groups[gi];
            if gr.arrived == 0 {
                gr.first_ns = now;
                gr.trial = self.trial;
                self.outstanding += 1;
                self.t.started += 1;
            }
            gr.arrived += 1;
            gr.last_arrive_ns = now;
            self.t.tx_reduce += 1;
            self.send(port, send, now);
            self.cursor += 1;
            if self.cursor == np {
                self.cursor = 0;
                self.ready.pop_front();
                self.groups[gi].queued = false;
            }
        }
    }

    fn receive(&mut self, now: u64, running: bool, count: Option<u64>) {
        for port in 0..self.ports.len() {
            let mut frames = std::mem::take(&mut self.ports[port].frames);
            self.ports[port].rx.rx_burst(&mut frames, BURST);
            let n = frames.len() as u64;
            self.t.rx += n;
            self.ports[port].rx_count += n;
            if self.ports[port].inj_rx.is_active() {
                let p = &mut self.ports[port];
                for f in &frames {
                    p.inj_rx
                        .push(Pkt::from_slice(f.as_ref()), now, &mut p.rx_pkts);
                }
                p.inj_rx.tick(now, &mut p.rx_pkts);
                while let Some(pkt) = self.ports[port].rx_pkts.pop_front() {
                    self.on_frame(port, pkt.as_slice(), now, running, count);
                }
            } else {
                for f in &frames {
                    self.on_frame(port, f.as_ref(), now, running, count);
                }
            }
            self.ports[port].rx.recycle(&mut frames);
            self.ports[port].frames = frames;
        }
    }

    fn on_frame(&mut self, port: usize, bytes: &[u8], now: u64, running: bool, count: Option<u64>) {
        let Ok(r) = FrameRepr::parse(bytes) else {
            self.t.rx_other += 1;
            return;
        };
        let gi = r.group.0.wrapping_sub(self.cfg.first_group);
        if r.kind != Kind::Release || gi >= self.cfg.groups {
            self.t.rx_other += 1;
            return;
        }
        self.t.rx_release += 1;
        let gi = gi as usize;
        let li = port * self.cfg.groups as usize + gi;
        let leaf = &mut self.leaves[li];
        match leaf.on_release(Time(now), r.seq) {
            Some(rel) => {
                let np = self.np();
                let gr = &mut self.groups[gi];
                if gr.arrived < np {
                    self.t.early += 1;
                }
                gr.released += 1;
                if gr.trial == self.trial {
                    // A switch that echoes a reduce's tx timestamp in its release measures
                    // itself; only releases that end a wait count, like the leaf latency.
                    if let Some(ts) = r.tx_timestamp.filter(|&ts| ts <= now) {
                        let _ = self.hist_echo.record((now - ts).max(1));
                    }
                    let _ = self.hist_leaf.record(rel.waited_ns.max(1));
                    let _ = self.iv_leaf.record(rel.waited_ns.max(1));
                }
                if gr.released == np {
                    self.complete(gi, now, running, count);
                }
            }
            None => {
                if leaf.seq() == r.seq && leaf.state() == LeafState::Working {
                    // A release for a barrier this leaf has not reached: the switch released
                    // without its reduce.
                    self.t.early += 1;
                } else {
                    self.t.rx_ignored += 1;
                }
            }
        }
    }

    fn complete(&mut self, gi: usize, now: u64, running: bool, count: Option<u64>) {
        let trial = self.trial;
        let deadline = self.cfg.barrier_deadline_ns;
        let gr = &mut self.groups[gi];
        self.outstanding -= 1;
        if gr.trial == trial {
            self.t.completed += 1;
            let lat = now.saturating_sub(gr.last_arrive_ns).max(1);
            let _ = self.hist_barrier.record(lat);
            let _ = self.iv_barrier.record(lat);
            let late = gr.late || now.saturating_sub(gr.first_ns) > deadline;
            self.t.over_deadline += u64::from(late);
            self.t.needed_resend += u64::from(gr.resent);
            self.t.lost += u64::from(late || gr.resent);
            gr.done += 1;
        } else {
            self.t.carried += 1;
        }
        gr.arrived = 0;
        gr.released = 0;
        gr.resent = false;
        gr.late = false;
        if running && count.is_none_or(|c| gr.done < c) {
            gr.queued = true;
            self.ready.push_back(gi as u32);
        }
    }

    fn scan_timers(&mut self, now: u64) {
        let ng = self.cfg.groups as usize;
        let np = self.ports.len();
        for gi in 0..ng {
            if self.groups[gi].arrived == 0 {
                continue;
            }
            let gr = &mut self.groups[gi];
            if now.saturating_sub(gr.first_ns) > self.cfg.barrier_deadline_ns {
                gr.late = true;
            }
            for port in 0..np {
                if let Some(send) = self.leaves[port * ng + gi].poll(Time(now)) {
                    self.groups[gi].resent = true;
                    self.t.tx_resend += 1;
                    self.send(port, send, now);
                }
            }
        }
    }

    fn transmit(&mut self, now: u64) {
        for p in &mut self.ports {
            if p.inj_tx.is_active() {
                p.inj_tx.tick(now, &mut p.pending);
            }
            while let Some(pkt) = p.pending.front() {
                match p.tx.offer(pkt.as_slice()) {
                    Ok(()) => {
                        p.pending.pop_front();
                    }
                    Err(TxBlocked::Full) => {
                        let (sent, _) = p.tx.flush();
                        p.tx_count += sent as u64;
                        self.t.tx += sent as u64;
                        if sent == 0 {
                            self.t.tx_blocked += 1;
                            break;
                        }
                    }
                    Err(TxBlocked::NoBuffer) => {
                        self.t.tx_blocked += 1;
                        break;
                    }
                }
            }
            if p.tx.buffered() > 0 {
                let (sent, _) = p.tx.flush();
                p.tx_count += sent as u64;
                self.t.tx += sent as u64;
            }
        }
    }

    /// Runs the inline pollers once (an in-process switch that other generators still need
    /// after this one's trial ended). Returns whether any did work.
    pub fn poll_inline(&mut self) -> bool {
        let t = self.inline_clock.now_ns();
        let mut busy = false;
        for p in self.inline.iter_mut() {
            busy |= p.poll(t);
        }
        busy
    }

    /// The last trial's histograms (leaf, barrier, echo), for merging several generators.
    pub fn histograms(&self) -> [&Histogram<u64>; 3] {
        [&self.hist_leaf, &self.hist_barrier, &self.hist_echo]
    }

    /// Receives and frees whatever is still queued towards the generator (shutdown).
    pub fn drain_rx(&mut self) -> usize {
        let mut n = 0;
        for p in &mut self.ports {
            n += p.rx.drain(&mut p.frames);
        }
        n
    }
}

struct Progress {
    start_ns: u64,
    last_ns: u64,
    next: u64,
    tx: u64,
    rx: u64,
    completed: u64,
}

impl Progress {
    fn new(start_ns: u64) -> Progress {
        Progress {
            start_ns,
            last_ns: start_ns,
            next: start_ns + 1_000_000_000,
            tx: 0,
            rx: 0,
            completed: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use barrier_protocol::switch::GroupConfig;
    use barrier_protocol::wire::Flags;
    use barrier_protocol::PortSet;
    use barrier_runtime::io::{mem_wire, MemRx, MemTx};
    use barrier_switch::engine::{build_switch, build_table, PortIo};
    use barrier_switch::spec::GroupBlock;

    const MS: u64 = 1_000_000;

    /// The loops spin; run them one at a time so they do not starve each other of the CPU.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cfg(groups: u32) -> GenConfig {
        GenConfig {
            groups,
            resend_timeout_ns: 2 * MS,
            barrier_deadline_ns: 500 * MS,
            ..GenConfig::default()
        }
    }

    /// The generator's `n` ports wired to a barrier-switch root (in-memory wires), whose pollers
    /// run inside the generator's loop.
    fn with_switch(n: usize, gcfg: GenConfig, faults: FaultRates) -> Engine<MemRx, MemTx> {
        let mut gen_ports = Vec::new();
        let mut sw_ports = Vec::new();
        for i in 0..n {
            let (up_tx, up_rx) = mem_wire(1024);
            let (down_tx, down_rx) = mem_wire(1024);
            let mac = [2, 0, 0, 0, 1, i as u8];
            gen_ports.push(GenPort {
                name: format!("g{i}"),
                mac,
                rx: down_rx,
                tx: up_tx,
                faults_tx: faults,
                faults_rx: faults,
            });
            sw_ports.push(PortIo {
                name: format!("s{i}"),
                rx: vec![up_rx],
                tx: down_tx,
                peer_mac: mac,
                mac: None,
            });
        }
        let spec = GroupBlock {
            numbers: gcfg.first_group..gcfg.first_group + gcfg.groups,
            config: GroupConfig {
                resend_timeout_ns: 5 * MS,
                ..GroupConfig::root(PortSet((1u64 << n) - 1))
            },
        };
        let table = Arc::new(build_table(&[spec]).unwrap());
        let clock = Clock::new();
        let sw = build_switch("sut", [2, 0, 0, 0, 0, 1], sw_ports, table, clock.now_ns());
        let mut pollers: Vec<Box<dyn Poller>> = sw.rx.into_iter().map(|(_, _, p)| p).collect();
        pollers.push(sw.sched);
        let mut e = Engine::new(gcfg, gen_ports, Clock::new());
        e.set_inline_pollers(pollers, clock);
        e
    }

    fn closed(count: u64) -> TrialSpec {
        TrialSpec {
            load: Load::Closed,
            duration: Duration::from_secs(60),
            count: Some(count),
            drain: Duration::from_secs(5),
        }
    }

    #[test]
    fn closed_loop_every_barrier_completes_once() {
        let _serial = serial();
        let mut e = with_switch(3, cfg(16), FaultRates::default());
        let r = e.run_trial(&closed(50));
        let b = &r.barriers;
        assert_eq!(b.started, 16 * 50);
        assert_eq!(b.completed, 16 * 50);
        assert_eq!(
            (b.lost, b.incomplete, b.early_releases, b.needed_resend),
            (0, 0, 0, 0),
            "{}",
            r.text()
        );
        assert_eq!(r.frames.tx_reduce, 3 * 16 * 50);
        assert_eq!(r.frames.rx_release, 3 * 16 * 50);
        assert_eq!(r.latency_leaf.samples, 3 * 16 * 50);
        assert_eq!(r.latency_barrier.samples, 16 * 50);
        assert!(r.latency_leaf.p50_ns > 0 && r.latency_leaf.p50_ns <= r.latency_leaf.max_ns);
        assert!(
            r.latency_echo.is_none(),
            "barrier-switch does not echo timestamps"
        );
        // A second trial goes on from where the first stopped.
        let r2 = e.run_trial(&closed(10));
        assert_eq!(r2.barriers.completed, 160);
        assert_eq!(r2.barriers.lost, 0);
    }

    #[test]
    fn faults_both_ways_still_complete_every_barrier() {
        let _serial = serial();
        let faults = FaultRates {
            drop: 0.05,
            duplicate: 0.02,
            reorder: 0.02,
            corrupt: 0.01,
            ..Default::default()
        };
        let mut e = with_switch(4, cfg(32), faults);
        let r = e.run_trial(&closed(40));
        let b = &r.barriers;
        assert_eq!(b.completed, 32 * 40, "{}", r.text());
        assert_eq!((b.incomplete, b.early_releases), (0, 0), "{}", r.text());
        assert!(r.faults_tx.dropped > 0 && r.faults_rx.dropped > 0);
        assert!(
            r.faults_tx.duplicated > 0 && r.faults_tx.reordered > 0 && r.faults_tx.corrupted > 0
        );
        // Losses were made good by re-sends, and such barriers count as lost for the search.
        assert!(b.needed_resend > 0 && r.frames.tx_resend > 0);
        assert!(b.lost >= b.needed_resend);
        assert!(
            r.frames.rx_release_ignored > 0,
            "duplicated releases are ignored"
        );
    }

    #[test]
    fn open_loop_offers_the_set_rate() {
        let _serial = serial();
        // A generous leaf timer: a test machine may deschedule the loop for milliseconds.
        let mut e = with_switch(
            2,
            GenConfig {
                resend_timeout_ns: 200 * MS,
                ..cfg(64)
            },
            FaultRates::default(),
        );
        // A bucket one second deep: however the test is scheduled, no credit is lost, so the
        // count checks the bucket's accounting rather than the machine.
        let spec = TrialSpec {
            load: Load::Open {
                rate: 20_000,
                burst: 20_000,
            },
            duration: Duration::from_secs(1),
            count: None,
            drain: Duration::from_secs(2),
        };
        let r = e.run_trial(&spec);
        let ratio = r.achieved_ratio.unwrap();
        assert!(
            (0.9..=1.05).contains(&ratio),
            "achieved {ratio}: {}",
            r.text()
        );
        assert_eq!(r.barriers.lost, 0, "{}", r.text());
        assert_eq!(r.barriers.completed, r.barriers.started);
        // The reduces sent are what the bucket allowed: rate x time, give or take a burst.
        let expect = 20_000.0 * (r.elapsed_s - r.drain_s);
        assert!(
            (r.frames.tx_reduce as f64 - expect).abs() <= 0.1 * expect + 64.0,
            "{} vs {expect}",
            r.frames.tx_reduce
        );
    }

    /// A "switch" that releases a group as soon as the first port's reduce arrives: the
    /// generator must see the releases as early.
    struct EagerSwitch {
        rx: Vec<MemRx>,
        tx: Vec<MemTx>,
    }
    impl Poller for EagerSwitch {
        fn poll(&mut self, _now: u64) -> bool {
            let mut frames = Vec::new();
            self.rx[0].rx_burst(&mut frames, BURST);
            for rx in &mut self.rx[1..] {
                let mut junk = Vec::new();
                rx.rx_burst(&mut junk, BURST);
            }
            for f in &frames {
                let r = FrameRepr::parse(f).unwrap();
                let rel = FrameRepr {
                    kind: Kind::Release,
                    flags: Flags::empty(),
                    tx_timestamp: None,
                    ..r
                }
                .to_bytes();
                for tx in &mut self.tx {
                    let _ = tx.offer(&rel);
                    tx.flush();
                }
            }
            !frames.is_empty()
        }
    }

    fn with_poller(
        n: usize,
        gcfg: GenConfig,
        make: impl FnOnce(Vec<MemRx>, Vec<MemTx>) -> Box<dyn Poller>,
    ) -> Engine<MemRx, MemTx> {
        let (mut gp, mut srx, mut stx) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..n {
            let (up_tx, up_rx) = mem_wire(1024);
            let (down_tx, down_rx) = mem_wire(1024);
            gp.push(GenPort {
                name: format!("g{i}"),
                mac: [2, 0, 0, 0, 1, i as u8],
                rx: down_rx,
                tx: up_tx,
                faults_tx: FaultRates::default(),
                faults_rx: FaultRates::default(),
            });
            srx.push(up_rx);
            stx.push(down_tx);
        }
        let mut e = Engine::new(gcfg, gp, Clock::new());
        e.set_inline_pollers(vec![make(srx, stx)], Clock::new());
        e
    }

    #[test]
    fn early_releases_are_caught() {
        let _serial = serial();
        let mut e = with_poller(3, cfg(4), |rx, tx| Box::new(EagerSwitch { rx, tx }));
        // One reduce per millisecond: the eager release overtakes the next leaf's arrival.
        let spec = TrialSpec {
            load: Load::Open {
                rate: 1000,
                burst: 1,
            },
            duration: Duration::from_millis(100),
            ..closed(20)
        };
        let r = e.run_trial(&spec);
        assert!(r.barriers.early_releases > 0, "{}", r.text());
    }

    /// A switch that never answers: every barrier started is lost, and the drain ends the
    /// trial instead of waiting forever.
    struct BlackHole(Vec<MemRx>);
    impl Poller for BlackHole {
        fn poll(&mut self, _now: u64) -> bool {
            let mut junk = Vec::new();
            for rx in &mut self.0 {
                rx.rx_burst(&mut junk, BURST);
            }
            !junk.is_empty()
        }
    }

    #[test]
    fn silent_switch_loses_every_barrier_and_drain_bounds_the_trial() {
        let _serial = serial();
        let mut e = with_poller(2, cfg(8), |rx, _tx| Box::new(BlackHole(rx)));
        let spec = TrialSpec {
            duration: Duration::from_millis(50),
            drain: Duration::from_millis(100),
            ..closed(5)
        };
        let t0 = std::time::Instant::now();
        let r = e.run_trial(&spec);
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert_eq!(r.barriers.started, 8);
        assert_eq!(r.barriers.completed, 0);
        assert_eq!(r.barriers.incomplete, 8);
        assert_eq!(r.barriers.lost, 8);
        assert!(r.frames.tx_resend > 0, "leaves re-send while waiting");
        assert!(!r.passes(&crate::report::PassRule {
            min_achieved_ratio: 0.9
        }));
    }

    #[test]
    fn reduce_frames_carry_timestamp_and_flags() {
        let _serial = serial();
        let mut e = with_poller(1, cfg(1), |rx, _tx| Box::new(BlackHole(rx)));
        let now = 123_456_789;
        let pkt = e.reduce_pkt(
            0,
            LeafSend {
                group: GroupId(0),
                seq: Seq(7),
                retransmit: true,
            },
            now,
        );
        let r = FrameRepr::parse(pkt.as_slice()).unwrap();
        assert_eq!(r.kind, Kind::Reduce);
        assert_eq!(r.seq, Seq(7));
        assert_eq!(r.tx_timestamp, Some(now));
        assert!(r.flags.contains(Flags::RETRANSMIT) && r.flags.contains(Flags::HAS_TIMESTAMP));
        assert_eq!(r.src, MacAddr([2, 0, 0, 0, 1, 0]));
        e.cfg.timestamps = false;
        let r = FrameRepr::parse(
            e.reduce_pkt(
                0,
                LeafSend {
                    group: GroupId(0),
                    seq: Seq(7),
                    retransmit: false,
                },
                now,
            )
            .as_slice(),
        )
        .unwrap();
        assert_eq!(r.tx_timestamp, None);
    }
}
