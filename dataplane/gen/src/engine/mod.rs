//! The generator's loop: thousands of emulated leaves (the test bed's shared fleet: one
//! `barrier_protocol::leaf::Leaf` per port and group) on a few ports, paced open loop by a
//! token bucket or closed loop by the releases, with fault injection on each port in both
//! directions and latency into hdrhistograms. Generic over the switch crate's I/O seam, so it runs on DPDK queues and, in
//! tests, on in-memory wires.

mod flood_run;
mod leaves;
mod ports;
mod spec;
#[cfg(test)]
mod tests;
mod trial;

pub use flood_run::{FloodOn, FloodPlan, FloodPort};
use leaves::GroupRun;
use ports::PortRt;
pub use spec::{GenConfig, GenPort, Load, TrialSpec};
use trial::Totals;

use crate::fault::Injector;
use crate::hdrlog::HdrLog;
use crate::report::new_histogram;
use crate::window::Window;
use barrier_protocol::leaf::LeafSend;
use barrier_protocol::{Epoch, Seq};
pub use barrier_runtime::clock::Clock;
use barrier_runtime::io::{RxQueue, TxQueue, BURST};
use barrier_runtime::poll::Poller;
use barrier_testbed::fleet::{Fleet, FleetConfig};
use hdrhistogram::Histogram;
use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Frames waiting per port (after fault injection) before new arrivals pause: bounds memory and
/// keeps a leaf's "first reduce" time close to when the frame reaches the device.
const PENDING_CAP: usize = 4 * BURST;

/// The generator.
pub struct Engine<R: RxQueue, T: TxQueue> {
    cfg: GenConfig,
    ports: Vec<PortRt<R, T>>,
    /// One leaf per (port, group): member `port` of every group.
    fleet: Fleet,
    groups: Vec<GroupRun>,
    /// Re-sends due, from the fleet's timers.
    resends: Vec<(u32, LeafSend)>,
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
    /// A flood of frames the switch must refuse (`set_flood`), and its phases.
    flood: Option<flood_run::FloodRt<R, T>>,
    /// When the loop last came back from a pause (trial.rs, `note_pause`).
    paused_at: Option<u64>,
    /// Closed loop: how many groups may have a barrier in flight.
    window: Window,
}

impl<R: RxQueue, T: TxQueue> Engine<R, T> {
    pub fn new(cfg: GenConfig, ports: Vec<GenPort<R, T>>, clock: Clock) -> Engine<R, T> {
        assert!(!ports.is_empty(), "at least one port");
        assert!(cfg.groups > 0, "at least one group");
        let np = ports.len();
        let g = cfg.groups as usize;
        let fleet = Fleet::new(
            FleetConfig {
                members: np as u32,
                first_group: cfg.first_group,
                groups: cfg.groups,
                first_seq: Seq(cfg.first_seq),
                resend_timeout_ns: cfg.resend_timeout_ns,
                epoch: Epoch(cfg.epoch),
                backoff: cfg.backoff,
            },
            clock.now_ns(),
        );
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
            fleet,
            groups: vec![GroupRun::default(); g],
            resends: Vec::new(),
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
            flood: None,
            paused_at: None,
            window: if cfg.adaptive_window {
                Window::adaptive(u64::from(cfg.groups), cfg.resend_timeout_ns)
            } else {
                Window::fixed(u64::from(cfg.groups))
            },
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
}
