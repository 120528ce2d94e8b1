//! The flood run inside the generator's loop (`--flood-*`, docs/gen.md "Flood"): frames the switch
//! must refuse, sent on extra non-member ports or on member ports beside the leaves' frames,
//! during the flood phases of a trial that alternates control and flood phases; and per phase
//! the member groups' barriers, re-sends and leaf latency, for the flood/control ratios.

use super::Engine;
use crate::bucket::TokenBucket;
use crate::flood::{ClassCounts, FloodClass, FloodGroups, FloodSource, Target};
use crate::report::{
    new_histogram, FloodPhase, FloodRatios, FloodReport, FloodTarget, Percentiles,
};
use barrier_protocol::counts::CountKey;
use barrier_protocol::wire::FRAME_LEN;
use barrier_runtime::io::{RxQueue, TxBlocked, TxQueue, BURST};
use hdrhistogram::Histogram;

/// Flood frames offered to one port's device queue in one pass of the loop, at most: a full
/// rate fills the queue as far as it takes them (8 device bursts); a set rate keeps up where a
/// pass takes longer than one burst's worth of its tokens.
const PER_PASS: u64 = 8 * BURST as u64;

/// An extra port that floods and carries no member's frame.
pub struct FloodPort<R, T> {
    pub name: String,
    pub mac: [u8; 6],
    pub rx: R,
    pub tx: T,
}

/// Where a flood goes: an extra port, or generator port `i`.
pub enum FloodOn<R, T> {
    Extra(FloodPort<R, T>),
    Member(usize),
}

/// A flood for an engine.
pub struct FloodPlan<R, T> {
    pub targets: Vec<FloodOn<R, T>>,
    /// Frames per second per flooded port; None: as many as the device queue takes on every
    /// pass of the loop (at most 256 a pass).
    pub rate: Option<u64>,
    /// Control and flood phases alternate, control first: `phases` of each.
    pub phases: u32,
    pub groups: FloodGroups,
    pub seed: u64,
}

enum Via<R: RxQueue, T> {
    Extra(FloodPort<R, T>, Vec<R::Frame>),
    Member(usize),
}

struct TargetRt<R: RxQueue, T> {
    name: String,
    via: Via<R, T>,
    source: FloodSource,
    /// A frame built but not yet taken by the device (its class), in `buf`.
    held: Option<FloodClass>,
    buf: [u8; FRAME_LEN],
    bucket: Option<TokenBucket>,
    sent: ClassCounts,
    /// Passes in which the port's device took no flood frame although one was ready.
    blocked: u64,
    /// Frames the device took from an extra port's queue (flood frames only).
    device_tx: u64,
}

#[derive(Clone)]
pub(super) struct PhaseStats {
    flood: bool,
    start_ns: u64,
    end_ns: u64,
    completed: u64,
    needed_resend: u64,
    resends: u64,
    flood_frames: u64,
    leaf: Histogram<u64>,
}

pub(super) struct FloodRt<R: RxQueue, T> {
    targets: Vec<TargetRt<R, T>>,
    rate: Option<u64>,
    phases: u32,
    /// The trial's phases, and where the load is now (None: before, after, or in the drain).
    pub(super) stats: Vec<PhaseStats>,
    pub(super) current: Option<usize>,
    start_ns: u64,
    phase_ns: u64,
}

impl<R: RxQueue, T: TxQueue> Engine<R, T> {
    /// Floods during the flood phases of every following trial (docs/gen.md, "Flood").
    pub fn set_flood(&mut self, plan: FloodPlan<R, T>) -> Result<(), String> {
        if plan.phases == 0 {
            return Err("--flood-phases: at least 1".into());
        }
        if plan.targets.is_empty() {
            return Err("a flood needs a port to flood".into());
        }
        let mut targets: Vec<TargetRt<R, T>> = Vec::new();
        for (i, t) in plan.targets.into_iter().enumerate() {
            let seed = plan.seed ^ (0xF1 + i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let (name, mac, target, via) = match t {
                FloodOn::Extra(p) => (
                    p.name.clone(),
                    p.mac,
                    Target::NonMember,
                    Via::Extra(p, Vec::with_capacity(BURST)),
                ),
                FloodOn::Member(m) => {
                    let Some(port) = self.ports.get(m) else {
                        return Err(format!(
                            "--flood-member {m}: the generator has {} ports",
                            self.ports.len()
                        ));
                    };
                    (port.name.clone(), port.mac, Target::Member, Via::Member(m))
                }
            };
            if targets.iter().any(|x| x.name == name) {
                return Err(format!("port {name} flooded twice"));
            }
            let source =
                FloodSource::new(target, plan.groups.clone(), seed, mac, self.cfg.dst_mac)?;
            targets.push(TargetRt {
                name,
                via,
                source,
                held: None,
                buf: [0; FRAME_LEN],
                bucket: None,
                sent: [0; 6],
                blocked: 0,
                device_tx: 0,
            });
        }
        self.flood = Some(FloodRt {
            targets,
            rate: plan.rate,
            phases: plan.phases,
            stats: Vec::new(),
            current: None,
            start_ns: 0,
            phase_ns: 1,
        });
        Ok(())
    }

    /// At the start of a trial: phases of `duration_ns / (2 x phases)` from `start_ns`.
    pub(super) fn flood_start(&mut self, start_ns: u64, start_tick: u64, duration_ns: u64) {
        let hz = self.clock.hz();
        let Some(f) = &mut self.flood else { return };
        let n = 2 * f.phases as u64;
        f.start_ns = start_ns;
        f.phase_ns = (duration_ns / n).max(1);
        f.current = None;
        f.stats = (0..n)
            .map(|i| PhaseStats {
                flood: i % 2 == 1,
                start_ns: start_ns + i * f.phase_ns,
                end_ns: start_ns + i * f.phase_ns,
                completed: 0,
                needed_resend: 0,
                resends: 0,
                flood_frames: 0,
                leaf: new_histogram(),
            })
            .collect();
        for t in &mut f.targets {
            t.sent = [0; 6];
            t.blocked = 0;
            t.device_tx = 0;
            // Depth: 1 ms of frames, at least what one pass may send.
            t.bucket = f
                .rate
                .map(|r| TokenBucket::new(r, (r / 1000).max(PER_PASS), hz, start_tick));
        }
    }

    /// Which phase the load is in at `now` (None once it stopped: the drain is no phase).
    pub(super) fn flood_phase(&mut self, now: u64, running: bool) {
        let Some(f) = &mut self.flood else { return };
        let was = f.current;
        f.current = if running {
            let i = (now.saturating_sub(f.start_ns) / f.phase_ns) as usize;
            Some(i.min(f.stats.len() - 1))
        } else {
            None
        };
        if let Some(i) = was {
            f.stats[i].end_ns = f.stats[i].end_ns.max(now);
        }
        if let (Some(i), true) = (f.current, was != f.current) {
            f.stats[i].start_ns = now;
            f.stats[i].end_ns = now;
        }
    }

    /// The phase's share of a completed barrier, a leaf's latency, a re-send.
    pub(super) fn flood_note_completed(&mut self, resent: bool) {
        if let Some(p) = self.flood_cur() {
            p.completed += 1;
            p.needed_resend += u64::from(resent);
        }
    }
    pub(super) fn flood_note_leaf(&mut self, waited_ns: u64) {
        if let Some(p) = self.flood_cur() {
            let _ = p.leaf.record(waited_ns.max(1));
        }
    }
    pub(super) fn flood_note_resend(&mut self) {
        if let Some(p) = self.flood_cur() {
            p.resends += 1;
        }
    }
    fn flood_cur(&mut self) -> Option<&mut PhaseStats> {
        let f = self.flood.as_mut()?;
        let i = f.current?;
        f.stats.get_mut(i)
    }

    /// One pass: in a flood phase, each target's frames (its bucket's tokens, or as many as
    /// its device queue takes; at most [`PER_PASS`]) to its device; extra ports' receive queues are emptied and their buffered frames pushed
    /// in every pass.
    pub(super) fn flood_pass(&mut self, tick: u64) {
        let Engine {
            flood,
            ports,
            t: totals,
            ..
        } = self;
        let Some(f) = flood else { return };
        let active = f.current.is_some_and(|i| f.stats[i].flood);
        let mut sent_now = 0u64;
        for t in &mut f.targets {
            if let Via::Extra(p, frames) = &mut t.via {
                p.rx.rx_burst(frames, BURST);
                p.rx.recycle(frames);
            }
            // The device queue of the flooded port, and where what it takes is counted.
            macro_rules! tx {
                () => {
                    match &mut t.via {
                        Via::Extra(p, _) => &mut p.tx,
                        Via::Member(i) => &mut ports[*i].tx,
                    }
                };
            }
            let mut want = if active {
                match &mut t.bucket {
                    Some(b) => {
                        b.refill(tick);
                        b.available().min(PER_PASS)
                    }
                    None => PER_PASS,
                }
            } else {
                0
            };
            let mut took = 0u64;
            let mut member_sent = 0u64;
            while want > 0 {
                // A class is counted once its frame is in the device's queue; a refused frame
                // is held and offered again first.
                let class = match t.held {
                    Some(c) => c,
                    None => t.source.build(&mut t.buf),
                };
                let offered = tx!().offer(&t.buf);
                match offered {
                    Ok(()) => {
                        t.held = None;
                        t.sent[class.index()] += 1;
                        took += 1;
                        want -= 1;
                    }
                    Err(e) => {
                        t.held = Some(class);
                        let sent = match e {
                            TxBlocked::Full => tx!().flush().0 as u64,
                            TxBlocked::NoBuffer => 0,
                        };
                        match t.via {
                            Via::Extra(..) => t.device_tx += sent,
                            Via::Member(_) => member_sent += sent,
                        }
                        if sent == 0 {
                            t.blocked += 1;
                            break;
                        }
                    }
                }
            }
            if let Some(b) = &mut t.bucket {
                b.take(took);
            }
            sent_now += took;
            if tx!().buffered() > 0 {
                let sent = tx!().flush().0 as u64;
                match t.via {
                    Via::Extra(..) => t.device_tx += sent,
                    Via::Member(_) => member_sent += sent,
                }
            }
            if let Via::Member(i) = t.via {
                ports[i].tx_count += member_sent;
                totals.tx += member_sent;
            }
        }
        if let Some(i) = f.current {
            f.stats[i].flood_frames += sent_now;
        }
    }

    /// Frames still queued in front of a flooded port's device (the trial waits for them): on
    /// a member port the leaves' frames waiting there too, which the flood's share.
    pub(super) fn flood_buffered(&self) -> usize {
        let Some(f) = &self.flood else { return 0 };
        f.targets
            .iter()
            .map(|t| match &t.via {
                Via::Extra(p, _) => p.tx.buffered(),
                Via::Member(i) => self.ports[*i].tx.buffered() + self.ports[*i].pending.len(),
            })
            .sum()
    }

    /// Frames each extra flood port's device took (for the switch-side check).
    pub fn flood_device_tx(&self) -> Vec<(String, u64)> {
        self.flood
            .as_ref()
            .map(|f| {
                f.targets
                    .iter()
                    .filter_map(|t| match &t.via {
                        Via::Extra(p, _) => Some((p.name.clone(), t.device_tx)),
                        Via::Member(_) => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Receives and frees what is queued towards the extra flood ports (shutdown).
    pub(super) fn flood_drain_rx(&mut self) -> usize {
        let Some(f) = &mut self.flood else { return 0 };
        f.targets
            .iter_mut()
            .map(|t| match &mut t.via {
                Via::Extra(p, frames) => p.rx.drain(frames),
                Via::Member(_) => 0,
            })
            .sum()
    }

    pub(super) fn flood_report(&self, unsent: u64) -> Option<FloodReport> {
        let f = self.flood.as_ref()?;
        let phase = |ps: &[&PhaseStats]| -> FloodPhase {
            let mut h = new_histogram();
            let (mut secs, mut completed, mut resends, mut nr, mut frames) = (0.0, 0, 0, 0, 0);
            for p in ps {
                h.add(&p.leaf).expect("same bounds");
                secs += p.end_ns.saturating_sub(p.start_ns) as f64 / 1e9;
                completed += p.completed;
                resends += p.resends;
                nr += p.needed_resend;
                frames += p.flood_frames;
            }
            let s = secs.max(1e-9);
            FloodPhase {
                flood: ps.first().is_some_and(|p| p.flood),
                secs,
                completed,
                barriers_per_s: completed as f64 / s,
                resends,
                resends_per_barrier: resends as f64 / completed.max(1) as f64,
                needed_resend: nr,
                flood_frames: frames,
                flood_fps: frames as f64 / s,
                leaf: Percentiles::of(&h),
            }
        };
        let control: Vec<&PhaseStats> = f.stats.iter().filter(|p| !p.flood).collect();
        let flooded: Vec<&PhaseStats> = f.stats.iter().filter(|p| p.flood).collect();
        let (c, fl) = (phase(&control), phase(&flooded));
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
        let ratios = FloodRatios {
            barriers_per_s: ratio(fl.barriers_per_s, c.barriers_per_s),
            leaf_p50: ratio(fl.leaf.p50_ns as f64, c.leaf.p50_ns as f64),
            leaf_p99: ratio(fl.leaf.p99_ns as f64, c.leaf.p99_ns as f64),
            resends_per_barrier: ratio(fl.resends_per_barrier, c.resends_per_barrier),
        };
        Some(FloodReport {
            rate_per_port: f.rate,
            phases: f.phases,
            targets: f
                .targets
                .iter()
                .map(|t| FloodTarget {
                    port: t.name.clone(),
                    nonmember: matches!(t.via, Via::Extra(..)),
                    sent: t.sent.iter().sum(),
                    by_class: FloodClass::ALL
                        .iter()
                        .filter(|c| t.source.classes().contains(c))
                        .map(|c| (c.name().to_string(), t.sent[c.index()]))
                        .collect(),
                    blocked: t.blocked,
                })
                .collect(),
            sent: f.targets.iter().map(|t| t.sent.iter().sum::<u64>()).sum(),
            unsent,
            per_phase: f.stats.iter().map(|p| phase(&[p])).collect(),
            control: c,
            flood: fl,
            ratios,
        })
    }

    /// Per flooded port: its index among the generator's ports (None: an extra port), name,
    /// and frames sent per class in the last trial.
    pub fn flood_sent(&self) -> Vec<(Option<usize>, String, ClassCounts)> {
        self.flood
            .as_ref()
            .map(|f| {
                f.targets
                    .iter()
                    .map(|t| {
                        (
                            match t.via {
                                Via::Member(i) => Some(i),
                                Via::Extra(..) => None,
                            },
                            t.name.clone(),
                            t.sent,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}
