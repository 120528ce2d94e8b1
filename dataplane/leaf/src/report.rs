//! The latency summary of a run of barriers (first reduce to release, per barrier) as the
//! `barrier-leaf` CLI prints it: percentiles from an hdrhistogram, counts, rates.

use crate::records::Record;
use crate::session::Stats;
use hdrhistogram::Histogram;
use std::fmt;
use std::time::Duration;

/// Latency percentiles in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Latency {
    /// Fastest barrier.
    pub min: u64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Slowest barrier.
    pub max: u64,
    /// Arithmetic mean.
    pub mean: f64,
}

/// Collects barrier latencies.
pub struct LatencyRecorder {
    hist: Histogram<u64>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        // 1 ns to 1 hour at 3 significant digits (longer waits are clamped to an hour): exact
        // enough for p99.9 of any run, and a fixed size (about 200 KB).
        let hist =
            Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds");
        LatencyRecorder { hist }
    }
}

impl LatencyRecorder {
    /// Adds one barrier.
    pub fn record(&mut self, r: &Record) {
        self.hist.saturating_record(r.latency_ns().max(1));
    }

    /// Number of barriers recorded.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// The percentiles (all zero when empty).
    pub fn latency(&self) -> Latency {
        if self.hist.is_empty() {
            return Latency::default();
        }
        Latency {
            min: self.hist.min(),
            p50: self.hist.value_at_quantile(0.5),
            p99: self.hist.value_at_quantile(0.99),
            p999: self.hist.value_at_quantile(0.999),
            max: self.hist.max(),
            mean: self.hist.mean(),
        }
    }
}

/// What one CLI run did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Summary {
    /// Interface the leaf ran on.
    pub iface: String,
    /// The group.
    pub group: u32,
    /// Barriers asked for.
    pub requested: u64,
    /// Barriers released.
    pub completed: u64,
    /// Sequence number of the first barrier.
    pub first_seq: u32,
    /// Wall time of the whole run, seconds.
    pub elapsed_s: f64,
    /// Completed barriers per second.
    pub barriers_per_s: f64,
    /// Latency from first reduce to release, nanoseconds.
    pub latency_ns: Latency,
    /// Session counters (reduces, re-sends, stale releases, ...).
    pub stats: Stats,
    /// The error that ended the run early, if any.
    pub error: Option<String>,
    /// `--duration`, seconds, when the run was timed (`requested` is then the `--count` given,
    /// or 0 for no limit).
    pub duration_s: Option<f64>,
    /// The barrier this leaf arrived at and left before its release (stopped by a signal, or
    /// its `--duration` ran out while it waited): its records file holds that arrival marked
    /// not released.
    pub left_waiting_seq: Option<u32>,
}

impl Summary {
    /// Builds the summary of a run.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        iface: &str,
        group: u32,
        requested: u64,
        first_seq: u32,
        elapsed: Duration,
        lat: &LatencyRecorder,
        stats: Stats,
        error: Option<String>,
    ) -> Summary {
        let secs = elapsed.as_secs_f64();
        Summary {
            iface: iface.to_owned(),
            group,
            requested,
            completed: lat.len(),
            first_seq,
            elapsed_s: secs,
            barriers_per_s: if secs > 0.0 {
                lat.len() as f64 / secs
            } else {
                0.0
            },
            latency_ns: lat.latency(),
            stats,
            error,
            duration_s: None,
            left_waiting_seq: None,
        }
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.latency_ns;
        writeln!(
            f,
            "barrier-leaf: {} group {}: {}{} barriers in {:.3} s ({:.0} barriers/s), first seq {}{}",
            self.iface,
            self.group,
            self.completed,
            match (self.duration_s, self.requested) {
                (Some(_), 0) => String::new(),
                (_, n) => format!("/{n}"),
            },
            self.elapsed_s,
            self.barriers_per_s,
            self.first_seq,
            match self.duration_s {
                Some(d) => format!(", timed run of {d} s"),
                None => String::new(),
            }
        )?;
        writeln!(
            f,
            "latency (first reduce -> release): min {:.1} µs  p50 {:.1} µs  p99 {:.1} µs  p99.9 {:.1} µs  max {:.1} µs  mean {:.1} µs",
            us(l.min),
            us(l.p50),
            us(l.p99),
            us(l.p999),
            us(l.max),
            l.mean / 1e3
        )?;
        write!(
            f,
            "frames: {} reduces, {} re-sends, {} releases, {} stale releases, {} foreign, {} bad, {} link errors",
            self.stats.reduces,
            self.stats.resends,
            self.stats.releases,
            self.stats.stale_releases,
            self.stats.foreign_frames,
            self.stats.bad_frames,
            self.stats.link_errors
        )?;
        if let Some(seq) = self.left_waiting_seq {
            write!(
                f,
                "\nleft barrier seq {seq} before its release (recorded as not released)"
            )?;
        }
        if let Some(e) = &self.error {
            write!(f, "\nerror: {e}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_run_and_a_barrier_left_waiting_are_in_the_text() {
        let mut lat = LatencyRecorder::default();
        lat.record(&rec(1_000));
        let mut sum = Summary::new(
            "a0",
            7,
            0,
            0,
            Duration::from_millis(1500),
            &lat,
            Stats::default(),
            None,
        );
        sum.duration_s = Some(1.5);
        sum.left_waiting_seq = Some(1);
        let text = sum.to_string();
        assert!(
            text.starts_with("barrier-leaf: a0 group 7: 1 barriers in 1.500 s"),
            "{text}"
        );
        assert!(text.contains(", timed run of 1.5 s\n"), "{text}");
        assert!(text.ends_with("left barrier seq 1 before its release (recorded as not released)"));
        sum.requested = 5;
        assert!(sum.to_string().contains(": 1/5 barriers in"));
    }

    fn rec(lat: u64) -> Record {
        Record {
            group: 1,
            seq: 0,
            first_reduce_ns: 1_000,
            release_ns: 1_000 + lat,
            resends: 0,
            released: true,
        }
    }

    #[test]
    fn percentiles_follow_the_data() {
        let mut l = LatencyRecorder::default();
        assert_eq!(l.latency(), Latency::default());
        for i in 1..=1000u64 {
            l.record(&rec(i * 1000));
        }
        let lat = l.latency();
        assert_eq!(l.len(), 1000);
        // hdrhistogram with 3 significant digits: within 0.1 %.
        let close = |a: u64, b: u64| (a as f64 - b as f64).abs() <= b as f64 * 0.001 + 1.0;
        assert!(close(lat.min, 1_000), "{lat:?}");
        assert!(close(lat.p50, 500_000), "{lat:?}");
        assert!(close(lat.p99, 990_000), "{lat:?}");
        assert!(close(lat.p999, 999_000), "{lat:?}");
        assert!(close(lat.max, 1_000_000), "{lat:?}");
    }

    #[test]
    fn summary_prints_and_serialises() {
        let mut l = LatencyRecorder::default();
        l.record(&rec(2_000));
        l.record(&rec(4_000));
        let s = Summary::new(
            "veth0",
            7,
            3,
            0,
            Duration::from_secs(2),
            &l,
            Stats::default(),
            Some("timeout".into()),
        );
        assert_eq!(s.completed, 2);
        assert_eq!(s.barriers_per_s, 1.0);
        let text = s.to_string();
        assert!(text.contains("2/3 barriers"), "{text}");
        assert!(text.contains("error: timeout"), "{text}");
        let v: serde_json::Value = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v["latency_ns"]["max"]
                .as_u64()
                .map(|m| m.abs_diff(4_000) <= 4),
            Some(true),
            "{v}"
        );
        assert_eq!(v["group"], 7);
    }
}
