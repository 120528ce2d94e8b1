//! What a run measured, as numbers (serialised to JSON with `--json`) and as text. Latencies come
//! out of hdrhistograms as fixed percentiles.

use crate::fault::FaultCounts;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::fmt::Write as _;

/// Latency histograms cover 1 ns .. 60 s at 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

/// A histogram's summary, in nanoseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub samples: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub p99_99_ns: u64,
    pub max_ns: u64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            samples: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            p50_ns: h.value_at_quantile(0.50),
            p90_ns: h.value_at_quantile(0.90),
            p99_ns: h.value_at_quantile(0.99),
            p99_9_ns: h.value_at_quantile(0.999),
            p99_99_ns: h.value_at_quantile(0.9999),
            max_ns: h.max(),
        }
    }

    fn line(&self) -> String {
        if self.samples == 0 {
            return "no samples".into();
        }
        format!(
            "p50 {}  p90 {}  p99 {}  p99.9 {}  p99.99 {}  max {}  (min {}, mean {}, {} samples)",
            ns(self.p50_ns),
            ns(self.p90_ns),
            ns(self.p99_ns),
            ns(self.p99_9_ns),
            ns(self.p99_99_ns),
            ns(self.max_ns),
            ns(self.min_ns),
            ns(self.mean_ns as u64),
            self.samples
        )
    }
}

/// Nanoseconds in a readable unit.
pub fn ns(v: u64) -> String {
    match v {
        0..=9_999 => format!("{v}ns"),
        10_000..=9_999_999 => format!("{:.1}µs", v as f64 / 1e3),
        10_000_000..=9_999_999_999 => format!("{:.2}ms", v as f64 / 1e6),
        _ => format!("{:.2}s", v as f64 / 1e9),
    }
}

/// A rate with a metric prefix: `1.000M` from 999,950 up (what `{:.1}k` would print as
/// `1000.0k`), `k` from 999.95 up, one prefix per magnitude.
pub fn rate(v: f64) -> String {
    if v >= 999_950.0 {
        format!("{:.3}M", v / 1e6)
    } else if v >= 999.95 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.1}")
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FrameCounts {
    /// Frames handed to the devices (first reduces, re-sends, injected duplicates).
    pub tx: u64,
    /// Frames received (before RX fault injection).
    pub rx: u64,
    pub tx_per_s: f64,
    pub rx_per_s: f64,
    /// First reduces (one per leaf per barrier).
    pub tx_reduce: u64,
    /// Reduces re-sent after the leaf's timer expired.
    pub tx_resend: u64,
    /// Releases parsed and accepted for a known group.
    pub rx_release: u64,
    /// Releases the leaf ignored (duplicate, or for a barrier already over).
    pub rx_release_ignored: u64,
    /// Frames that were not releases of our groups (parse error, reduce, foreign group).
    pub rx_other: u64,
    /// Loop passes in which a port's device took nothing although frames were waiting (TX ring
    /// full, or mempool empty): a sign the device or the switch behind it is the bottleneck.
    pub tx_blocked: u64,
}

/// Barrier counts. A barrier is *lost* when it did not complete by the end of the drain
/// (incomplete), took longer than the deadline, or needed a re-send; the rate search accepts a
/// rate only with no lost barrier. `lost_by` gives each lost barrier one reason.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BarrierCounts {
    pub started: u64,
    pub completed: u64,
    pub per_s: f64,
    pub incomplete: u64,
    pub needed_resend: u64,
    pub over_deadline: u64,
    pub lost: u64,
    /// Why each lost barrier was lost (they add up to `lost`).
    pub lost_by: LostReasons,
    /// Releases that reached a leaf before every leaf of the group had sent its reduce (a
    /// broken switch, or undetectable corruption): must be 0.
    pub early_releases: u64,
    /// Completions of barriers started in an earlier trial (search mode), not counted above.
    pub carried_over: u64,
}

/// One reason per lost barrier, the first that holds in this order.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LostReasons {
    /// Still in flight when the run ended (the drain ran out, or the run was interrupted).
    pub in_flight_at_end: u64,
    /// Completed after a re-send that fired within one leaf timer of a pause of the
    /// generator's own loop longer than a quarter of that timer: the generator fell behind its
    /// own schedule (its core was taken away), so the timer does not tell whether the switch
    /// answered in time.
    pub generator_behind: u64,
    /// Completed after a re-send while the generator kept up: no release within the leaf
    /// timer (`--resend-timeout-us`): a frame was lost or sat too long outside the generator.
    pub unanswered: u64,
    /// Completed with no re-send, but later than `--deadline-ms` after its first reduce.
    pub over_deadline: u64,
}

impl LostReasons {
    pub fn total(&self) -> u64 {
        self.in_flight_at_end + self.generator_behind + self.unanswered + self.over_deadline
    }

    pub fn add(&mut self, o: &LostReasons) {
        self.in_flight_at_end += o.in_flight_at_end;
        self.generator_behind += o.generator_behind;
        self.unanswered += o.unanswered;
        self.over_deadline += o.over_deadline;
    }

    /// `in flight at end 2, unanswered 10`: the reasons that occurred, or `none`.
    pub fn text(&self) -> String {
        let parts: Vec<String> = [
            ("in flight at end", self.in_flight_at_end),
            ("generator behind", self.generator_behind),
            ("unanswered", self.unanswered),
            ("over deadline", self.over_deadline),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

/// Pauses of the generator's own loop: passes that came later than a quarter of the leaf timer
/// after the one before (its core was taken away, or one pass did that much work).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Pauses {
    pub count: u64,
    pub total_ns: u64,
    pub longest_ns: u64,
}

impl Pauses {
    pub fn note(&mut self, ns: u64) {
        self.count += 1;
        self.total_ns += ns;
        self.longest_ns = self.longest_ns.max(ns);
    }

    pub fn add(&mut self, o: &Pauses) {
        self.count += o.count;
        self.total_ns += o.total_ns;
        self.longest_ns = self.longest_ns.max(o.longest_ns);
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PortCounts {
    pub name: String,
    pub tx: u64,
    pub rx: u64,
    pub faults_tx: FaultCounts,
    pub faults_rx: FaultCounts,
}

/// One trial (a plain run is one trial).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TrialReport {
    /// "closed" or "open".
    pub mode: String,
    /// Open loop: the rate offered, first reduces per second.
    pub offered_fps: Option<u64>,
    /// Open loop: first reduces sent per second / offered.
    pub achieved_ratio: Option<f64>,
    pub ports: usize,
    pub groups: u32,
    /// Seconds from the first arrival to the end of the trial (drain included): the rates'
    /// denominator.
    pub elapsed_s: f64,
    /// Seconds spent waiting for outstanding barriers after arrivals stopped.
    pub drain_s: f64,
    pub frames: FrameCounts,
    pub barriers: BarrierCounts,
    /// Per leaf: its first reduce to its release (`Released::waited_ns` of the leaf state machine).
    pub latency_leaf: Percentiles,
    /// Per barrier: the last leaf's first reduce to the last leaf's release.
    pub latency_barrier: Percentiles,
    /// Release's echoed tx timestamp to its arrival, when the switch echoes timestamps.
    pub latency_echo: Option<Percentiles>,
    pub faults_tx: FaultCounts,
    pub faults_rx: FaultCounts,
    pub per_port: Vec<PortCounts>,
    /// The generator's own loop pausing (a core shared with other work).
    pub generator_pauses: Pauses,
    /// Closed loop: barriers allowed in flight (`crate::window`).
    pub window: crate::window::WindowReport,
    pub interrupted: bool,
    /// With a flood (`--flood-*`): what was sent, and control against flood phases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flood: Option<FloodReport>,
}

/// The member groups in one phase, or in all phases of one kind together.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FloodPhase {
    /// A flood phase (else control).
    pub flood: bool,
    pub secs: f64,
    /// Barriers completed in the phase (by the time of their last release).
    pub completed: u64,
    pub barriers_per_s: f64,
    /// The leaves' re-sent reduces in the phase.
    pub resends: u64,
    pub resends_per_barrier: f64,
    /// Barriers completed in the phase that needed a re-send.
    pub needed_resend: u64,
    /// Flood frames the devices took in the phase, all flooded ports.
    pub flood_frames: u64,
    pub flood_fps: f64,
    /// Leaf latency of the releases received in the phase.
    pub leaf: Percentiles,
}

/// Flood over control, of the phases' totals (NaN, `null` in JSON, when the control has 0).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FloodRatios {
    pub barriers_per_s: f64,
    pub leaf_p50: f64,
    pub leaf_p99: f64,
    pub resends_per_barrier: f64,
}

/// One flooded port.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FloodTarget {
    pub port: String,
    /// An extra port that no group names (else a member port, shared with its leaves).
    pub nonmember: bool,
    /// Flood frames its device queue took, all classes.
    pub sent: u64,
    /// Per class (`crate::flood::FloodClass::name`).
    pub by_class: Vec<(String, u64)>,
    /// Passes in which the device took no flood frame although one was ready.
    pub blocked: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FloodReport {
    /// Frames per second per flooded port (None: full rate, what the device queue takes).
    pub rate_per_port: Option<u64>,
    /// Control and flood phases, `phases` of each, alternating, control first.
    pub phases: u32,
    pub targets: Vec<FloodTarget>,
    pub sent: u64,
    /// Frames still queued in front of a flooded port's device at the end, the flood's and (on
    /// a member port) the leaves' (must be 0: the trial waits for them within its drain).
    pub unsent: u64,
    pub per_phase: Vec<FloodPhase>,
    pub control: FloodPhase,
    pub flood: FloodPhase,
    pub ratios: FloodRatios,
}

impl FloodReport {
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "flood:    {} frames ({} per port), {} control + {} flood phases; {} left unsent",
            self.sent,
            self.rate_per_port
                .map(|r| format!("{}/s", rate(r as f64)))
                .unwrap_or_else(|| "full rate".into()),
            self.phases,
            self.phases,
            self.unsent
        );
        for t in &self.targets {
            let _ = writeln!(
                s,
                "  flood port {} ({}): {} frames: {} (device refused {} passes)",
                t.port,
                if t.nonmember {
                    "no group names it"
                } else {
                    "member"
                },
                t.sent,
                t.by_class
                    .iter()
                    .map(|(c, n)| format!("{c}={n}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                t.blocked
            );
        }
        let line = |name: &str, p: &FloodPhase| {
            format!(
                "  {name:<8} {:.2} s: barriers {} ({}/s), re-sends/barrier {:.4}, flood {}/s, leaf p50 {} p99 {}",
                p.secs,
                p.completed,
                rate(p.barriers_per_s),
                p.resends_per_barrier,
                rate(p.flood_fps),
                ns(p.leaf.p50_ns),
                ns(p.leaf.p99_ns)
            )
        };
        let _ = writeln!(s, "{}", line("control", &self.control));
        let _ = writeln!(s, "{}", line("flood", &self.flood));
        let r = &self.ratios;
        let _ = writeln!(
            s,
            "  flood/control: barriers/s {:.3}  leaf p50 {:.3}  leaf p99 {:.3}  re-sends/barrier {:.3}",
            r.barriers_per_s, r.leaf_p50, r.leaf_p99, r.resends_per_barrier
        );
        s
    }
}

/// What the search requires of a trial.
#[derive(Copy, Clone, Debug, PartialEq, Serialize)]
pub struct PassRule {
    /// Open loop must reach at least this fraction of the offered rate.
    pub min_achieved_ratio: f64,
}

impl TrialReport {
    /// No lost barrier, no early release, and (open loop) the offered rate really offered.
    pub fn passes(&self, rule: &PassRule) -> bool {
        self.failures(rule).is_empty()
    }

    /// Why the trial does not pass `rule`, one phrase per unmet condition (empty: it passes).
    pub fn failures(&self, rule: &PassRule) -> Vec<String> {
        let b = &self.barriers;
        let mut why = Vec::new();
        if self.interrupted {
            why.push("interrupted".to_string());
        }
        if b.completed == 0 {
            why.push("no barrier completed".into());
        }
        if b.lost > 0 {
            why.push(format!("lost {} ({})", b.lost, b.lost_by.text()));
        }
        if b.early_releases > 0 {
            why.push(format!("{} early releases", b.early_releases));
        }
        if let Some(r) = self.achieved_ratio.filter(|&r| r < rule.min_achieved_ratio) {
            why.push(format!(
                "generator reached {:.1}% of the offered rate (needs {:.1}%)",
                r * 100.0,
                rule.min_achieved_ratio * 100.0
            ));
        }
        why
    }

    /// The report for people.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let b = &self.barriers;
        let f = &self.frames;
        let _ = writeln!(
            s,
            "barrier-gen: {} loop{}, {} ports x {} groups, {:.3} s ({:.3} s drain){}",
            self.mode,
            self.offered_fps
                .map(|r| format!(" at {} frames/s", rate(r as f64)))
                .unwrap_or_default(),
            self.ports,
            self.groups,
            self.elapsed_s,
            self.drain_s,
            if self.interrupted {
                ", interrupted"
            } else {
                ""
            }
        );
        let _ = writeln!(
            s,
            "frames:   tx {} ({}/s)  rx {} ({}/s)  reduces {}  re-sends {}  releases {} (+{} ignored)  other rx {}  tx waits {}",
            f.tx,
            rate(f.tx_per_s),
            f.rx,
            rate(f.rx_per_s),
            f.tx_reduce,
            f.tx_resend,
            f.rx_release,
            f.rx_release_ignored,
            f.rx_other,
            f.tx_blocked
        );
        if let Some(r) = self.achieved_ratio {
            let _ = writeln!(s, "offered:  {:.1}% of the set rate reached", r * 100.0);
        }
        let _ = writeln!(
            s,
            "barriers: {} completed ({}/s) of {} started; lost {} ({}); early releases {}{}",
            b.completed,
            rate(b.per_s),
            b.started,
            b.lost,
            b.lost_by.text(),
            b.early_releases,
            if b.carried_over > 0 {
                format!("; {} carried over from the previous trial", b.carried_over)
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            s,
            "latency (leaf: first reduce -> release):           {}",
            self.latency_leaf.line()
        );
        let _ = writeln!(
            s,
            "latency (barrier: last first reduce -> last release): {}",
            self.latency_barrier.line()
        );
        if let Some(e) = &self.latency_echo {
            let _ = writeln!(
                s,
                "latency (echoed tx timestamp -> release):          {}",
                e.line()
            );
        }
        let fault = |c: &FaultCounts| {
            format!(
                "dropped {} duplicated {} reordered {} corrupted {}",
                c.dropped, c.duplicated, c.reordered, c.corrupted
            )
        };
        if self.faults_tx != FaultCounts::default() || self.faults_rx != FaultCounts::default() {
            let _ = writeln!(
                s,
                "faults:   tx {}; rx {}",
                fault(&self.faults_tx),
                fault(&self.faults_rx)
            );
        }
        let w = &self.window;
        if w.adaptive && self.mode == "closed" {
            let _ = writeln!(
                s,
                "window:   adaptive, at most {} barriers in flight: halved {} times, smallest {}, {} at the end",
                self.groups, w.cuts, w.min, w.end
            );
        }
        let g = &self.generator_pauses;
        if g.count > 0 {
            let _ = writeln!(
                s,
                "generator: its loop paused {} times, {} in all, longest {} (its core was taken away)",
                g.count,
                ns(g.total_ns),
                ns(g.longest_ns)
            );
        }
        for p in &self.per_port {
            let _ = writeln!(s, "  port {}: tx {} rx {}", p.name, p.tx, p.rx);
        }
        if let Some(f) = &self.flood {
            s += &f.text();
        }
        s
    }
}

/// One report for generators that ran the same trial side by side (one per lcore, each on its
/// own ports and groups): counts add up, rates are over the longest elapsed time, percentiles
/// come from the merged histograms `[leaf, barrier, echo]`.
pub fn merge(parts: &[TrialReport], hists: &[[&Histogram<u64>; 3]]) -> TrialReport {
    assert!(!parts.is_empty() && parts.len() == hists.len());
    let mut m = parts[0].clone();
    if parts.len() == 1 {
        return m;
    }
    let mut h: [Histogram<u64>; 3] = [new_histogram(), new_histogram(), new_histogram()];
    for part in hists {
        for (acc, x) in h.iter_mut().zip(part.iter()) {
            acc.add(*x).expect("same histogram bounds");
        }
    }
    m.elapsed_s = parts.iter().map(|p| p.elapsed_s).fold(0.0, f64::max);
    m.drain_s = parts.iter().map(|p| p.drain_s).fold(0.0, f64::max);
    m.ports = parts.iter().map(|p| p.ports).sum();
    m.groups = parts.iter().map(|p| p.groups).sum();
    m.offered_fps = parts.iter().map(|p| p.offered_fps).sum();
    m.interrupted = parts.iter().any(|p| p.interrupted);
    let (f, b) = (&mut m.frames, &mut m.barriers);
    *f = FrameCounts::default();
    *b = BarrierCounts::default();
    m.faults_tx = FaultCounts::default();
    m.faults_rx = FaultCounts::default();
    m.per_port.clear();
    m.generator_pauses = Pauses::default();
    for (i, p) in parts.iter().enumerate() {
        let (pf, pb) = (&p.frames, &p.barriers);
        f.tx += pf.tx;
        f.rx += pf.rx;
        f.tx_reduce += pf.tx_reduce;
        f.tx_resend += pf.tx_resend;
        f.rx_release += pf.rx_release;
        f.rx_release_ignored += pf.rx_release_ignored;
        f.rx_other += pf.rx_other;
        f.tx_blocked += pf.tx_blocked;
        b.started += pb.started;
        b.completed += pb.completed;
        b.incomplete += pb.incomplete;
        b.needed_resend += pb.needed_resend;
        b.over_deadline += pb.over_deadline;
        b.lost += pb.lost;
        b.lost_by.add(&pb.lost_by);
        b.early_releases += pb.early_releases;
        b.carried_over += pb.carried_over;
        m.faults_tx.add(&p.faults_tx);
        m.faults_rx.add(&p.faults_rx);
        m.per_port.extend(p.per_port.iter().cloned());
        m.generator_pauses.add(&p.generator_pauses);
        if i == 0 {
            m.window = p.window;
        } else {
            m.window.end += p.window.end;
            m.window.min += p.window.min;
            m.window.cuts += p.window.cuts;
        }
    }
    let secs = m.elapsed_s.max(1e-9);
    f.tx_per_s = f.tx as f64 / secs;
    f.rx_per_s = f.rx as f64 / secs;
    b.per_s = b.completed as f64 / secs;
    // Each part offered its share over its own arrival window; their mean weighted by share.
    m.achieved_ratio = m.offered_fps.map(|total| {
        parts
            .iter()
            .map(|p| p.achieved_ratio.unwrap_or(0.0) * p.offered_fps.unwrap_or(0) as f64)
            .sum::<f64>()
            / total.max(1) as f64
    });
    m.latency_leaf = Percentiles::of(&h[0]);
    m.latency_barrier = Percentiles::of(&h[1]);
    m.latency_echo = (!h[2].is_empty()).then(|| Percentiles::of(&h[2]));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_known_values() {
        let mut h = new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let p = Percentiles::of(&h);
        assert_eq!(p.samples, 1000);
        assert!((499_000..=501_000).contains(&p.p50_ns), "{}", p.p50_ns);
        assert!((989_000..=991_000).contains(&p.p99_ns), "{}", p.p99_ns);
        assert!(p.max_ns >= 999_000);
        assert_eq!(Percentiles::of(&new_histogram()).samples, 0);
    }

    #[test]
    fn pass_rule() {
        let rule = PassRule {
            min_achieved_ratio: 0.98,
        };
        let mut r = TrialReport {
            achieved_ratio: Some(0.99),
            ..Default::default()
        };
        r.barriers.completed = 10;
        assert!(r.passes(&rule));
        r.achieved_ratio = Some(0.9);
        assert!(
            !r.passes(&rule),
            "a rate the generator could not offer is not a pass"
        );
        r.achieved_ratio = None;
        r.barriers.lost = 1;
        assert!(!r.passes(&rule));
        r.barriers.lost = 0;
        r.barriers.early_releases = 1;
        assert!(!r.passes(&rule));
    }

    #[test]
    fn units() {
        assert_eq!(ns(950), "950ns");
        assert_eq!(ns(12_345), "12.3µs");
        assert_eq!(ns(12_345_678), "12.35ms");
        assert_eq!(rate(2_500_000.0), "2.500M");
        // one prefix per magnitude, even where rounding reaches the next
        assert_eq!(rate(999_949.0), "999.9k");
        assert_eq!(rate(999_950.0), "1.000M");
        assert_eq!(rate(999.96), "1.0k");
        assert_eq!(rate(999.9), "999.9");
    }

    #[test]
    fn a_failure_says_why() {
        let rule = PassRule {
            min_achieved_ratio: 0.98,
        };
        let mut r = TrialReport {
            achieved_ratio: Some(0.487),
            ..Default::default()
        };
        r.barriers.completed = 10;
        assert_eq!(
            r.failures(&rule),
            vec!["generator reached 48.7% of the offered rate (needs 98.0%)".to_string()]
        );
        r.achieved_ratio = Some(1.0);
        r.barriers.lost = 3;
        r.barriers.lost_by = LostReasons {
            in_flight_at_end: 1,
            unanswered: 2,
            ..Default::default()
        };
        assert_eq!(
            r.failures(&rule),
            vec!["lost 3 (in flight at end 1, unanswered 2)".to_string()]
        );
        assert!(r
            .text()
            .contains("lost 3 (in flight at end 1, unanswered 2)"));
        r.barriers = BarrierCounts::default();
        assert_eq!(r.failures(&rule), vec!["no barrier completed".to_string()]);
    }

    #[test]
    fn merge_adds_counts_and_merges_histograms() {
        let mut a = TrialReport {
            mode: "open".into(),
            offered_fps: Some(1000),
            achieved_ratio: Some(1.0),
            ports: 2,
            groups: 10,
            elapsed_s: 2.0,
            ..Default::default()
        };
        a.frames.tx = 2000;
        a.barriers.completed = 100;
        a.barriers.lost = 1;
        let mut b = a.clone();
        b.achieved_ratio = Some(0.5);
        b.elapsed_s = 4.0;
        b.barriers.early_releases = 2;
        let (mut h1, mut h2, e) = (new_histogram(), new_histogram(), new_histogram());
        h1.record(1000).unwrap();
        h2.record(3000).unwrap();
        let m = merge(&[a, b], &[[&h1, &h1, &e], [&h2, &h2, &e]]);
        assert_eq!((m.ports, m.groups, m.offered_fps), (4, 20, Some(2000)));
        assert_eq!(
            (
                m.frames.tx,
                m.barriers.completed,
                m.barriers.lost,
                m.barriers.early_releases
            ),
            (4000, 200, 2, 2)
        );
        assert_eq!(m.elapsed_s, 4.0);
        assert_eq!(m.barriers.per_s, 50.0);
        assert_eq!(m.achieved_ratio, Some(0.75));
        assert_eq!(m.latency_leaf.samples, 2);
        assert!(m.latency_leaf.max_ns >= 3000 && m.latency_leaf.min_ns <= 1000);
        assert!(m.latency_echo.is_none());
    }
}
