//! One trial: the loop that runs until the trial's end (and the drain after it), its running
//! totals, the progress line and interval histograms, and the report.

use super::{Engine, Load, TrialSpec};
use crate::bucket::TokenBucket;
use crate::fault::FaultCounts;
use crate::report::{
    BarrierCounts, FrameCounts, LostReasons, Pauses, Percentiles, PortCounts, TrialReport,
};
use barrier_runtime::io::{RxQueue, TxQueue};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Bursts per port the first pass after a pause may take in (at most), to empty the RX queues.
const RX_CATCH_UP: usize = 64;

#[derive(Clone, Debug, Default)]
pub(super) struct Totals {
    pub(super) tx: u64,
    pub(super) rx: u64,
    pub(super) tx_reduce: u64,
    pub(super) tx_resend: u64,
    pub(super) rx_release: u64,
    pub(super) rx_ignored: u64,
    pub(super) rx_other: u64,
    pub(super) tx_blocked: u64,
    pub(super) started: u64,
    pub(super) completed: u64,
    pub(super) needed_resend: u64,
    pub(super) over_deadline: u64,
    pub(super) lost: u64,
    /// The reasons of `lost` (completed barriers; those in flight at the end are counted in
    /// the report).
    pub(super) lost_by: LostReasons,
    pub(super) early: u64,
    pub(super) carried: u64,
    pub(super) pauses: Pauses,
}

impl<R: RxQueue, T: TxQueue> Engine<R, T> {
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
            if !gr.queued && !self.fleet.in_progress(g as u32) && spec.count != Some(0) {
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
        let mut running = true;
        let mut stop_ns = end_ns;
        let mut interrupted = false;
        let mut progress = Progress::new(start_ns);
        self.flood_start(start_ns, start_tick, spec.duration.as_nanos() as u64);
        let mut last_pass = start_ns;
        self.paused_at = None;
        self.window.start_trial();
        loop {
            let tick = self.clock.ticks();
            let now = self.clock.ns(tick);
            let paused = self.note_pause(now.saturating_sub(last_pass), now);
            last_pass = now;
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
            self.flood_phase(now, running);
            // After a pause, take in everything that arrived meanwhile before any re-send
            // timer is judged: a release waiting in the RX queue is an answer.
            self.receive(
                now,
                running,
                spec.count,
                if paused { RX_CATCH_UP } else { 1 },
            );
            self.expire_timers(now);
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
            self.flood_pass(tick);
            if !self.inline.is_empty() {
                let t = self.inline_clock.now_ns();
                for p in self.inline.iter_mut() {
                    p.poll(t);
                }
            }
            if now >= progress.next {
                self.tick_progress(&mut progress, now);
            }
            if !running && self.cursor == 0 && self.outstanding == 0 && self.flood_buffered() == 0 {
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
        self.flood_pass(self.clock.ticks());
        self.tick_progress(&mut progress, end);
        self.report(
            spec,
            end.saturating_sub(start_ns),
            end.saturating_sub(stop_ns),
            interrupted,
        )
    }

    pub(super) fn report(
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
            .enumerate()
            .filter(|&(g, gr)| gr.trial == self.trial && self.fleet.in_progress(g as u32))
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
                lost_by: LostReasons {
                    in_flight_at_end: incomplete,
                    ..t.lost_by
                },
                early_releases: t.early,
                carried_over: t.carried,
            },
            latency_leaf: Percentiles::of(&self.hist_leaf),
            latency_barrier: Percentiles::of(&self.hist_barrier),
            latency_echo: (!self.hist_echo.is_empty()).then(|| Percentiles::of(&self.hist_echo)),
            faults_tx,
            faults_rx,
            per_port,
            generator_pauses: t.pauses,
            window: self.window.report(),
            interrupted,
            flood: self.flood_report(self.flood_buffered() as u64),
        }
    }

    /// Notes a pass that came `gap` ns after the one before; returns whether that was a pause
    /// (longer than a quarter of the leaf timer).
    fn note_pause(&mut self, gap: u64, now: u64) -> bool {
        if gap <= self.cfg.resend_timeout_ns / 4 {
            return false;
        }
        self.t.pauses.note(gap);
        self.paused_at = Some(now);
        true
    }

    pub(super) fn tick_progress(&mut self, p: &mut Progress, now: u64) {
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
}

pub(super) struct Progress {
    pub(super) start_ns: u64,
    pub(super) last_ns: u64,
    pub(super) next: u64,
    pub(super) tx: u64,
    pub(super) rx: u64,
    pub(super) completed: u64,
}

impl Progress {
    pub(super) fn new(start_ns: u64) -> Progress {
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
