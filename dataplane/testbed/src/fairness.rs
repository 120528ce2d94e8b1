//! The fairness measurement behind `perf/fairness.rs`: the latency of a group doing barriers
//! slowly, alone and then next to a group that floods the same switches (barriers back to back,
//! every reduce sent several times). Both phases run the same tree on fresh net_ring devices in
//! one EAL; the ratio of the slow group's latency with and without the flood says how well the
//! scheduler's round-robin and the RX path keep groups apart.

use crate::demo::DemoOpts;
use crate::demo_dpdk::run_demo_on;
use crate::error::DemoError;
use dpdk::Eal;
use hdrhistogram::Histogram;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct FairnessOpts {
    pub fanout: Vec<usize>,
    /// Length of each phase.
    pub duration: Duration,
    /// The slow group's pause between barriers.
    pub slow_think_ns: u64,
    /// Copies of each of the flooding group's reduces.
    pub flood_copies: u32,
    pub loops: usize,
}

impl Default for FairnessOpts {
    fn default() -> Self {
        FairnessOpts {
            fanout: vec![2, 4],
            duration: Duration::from_secs(3),
            slow_think_ns: 200_000,
            flood_copies: 4,
            loops: 2,
        }
    }
}

pub struct Phase {
    pub slow: Histogram<u64>,
    pub flood_barriers: u64,
    pub elapsed: Duration,
}

pub struct FairnessResult {
    pub alone: Phase,
    pub flooded: Phase,
}

const SLOW: usize = 0;
const FLOOD: usize = 1;

fn phase(eal: &Eal, o: &FairnessOpts, flood: bool) -> Result<Phase, DemoError> {
    let opts = DemoOpts {
        fanout: o.fanout.clone(),
        groups: 2,
        count: None,
        duration: o.duration,
        loops: o.loops,
        think_ns: vec![o.slow_think_ns, if flood { 0 } else { u64::MAX }],
        copies: vec![1, if flood { o.flood_copies } else { 1 }],
        ..DemoOpts::default()
    };
    let out = run_demo_on(eal, &opts, Arc::new(AtomicBool::new(false)))?;
    let r = out.result.report;
    if r.early_releases != 0 {
        return Err(format!("{} releases before all leaves arrived", r.early_releases).into());
    }
    Ok(Phase {
        slow: r.group_latency[SLOW].clone(),
        flood_barriers: r.completed[FLOOD],
        elapsed: out.result.elapsed,
    })
}

/// Run both phases on `eal`.
pub fn run_fairness(eal: &Eal, o: &FairnessOpts) -> Result<FairnessResult, DemoError> {
    let alone = phase(eal, o, false)?;
    let flooded = phase(eal, o, true)?;
    Ok(FairnessResult { alone, flooded })
}

impl FairnessResult {
    /// flooded / alone at quantile `q` of the slow group's latency.
    pub fn ratio(&self, q: f64) -> f64 {
        self.flooded.slow.value_at_quantile(q) as f64
            / self.alone.slow.value_at_quantile(q).max(1) as f64
    }

    pub fn summary(&self) -> String {
        let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        let line = |name: &str, p: &Phase| {
            format!(
                "{name:>8}: slow group {} barriers, p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs; flooding group {} barriers ({:.0}/s)\n",
                p.slow.len(),
                us(&p.slow, 0.5),
                us(&p.slow, 0.99),
                p.slow.max() as f64 / 1000.0,
                p.flood_barriers,
                p.flood_barriers as f64 / p.elapsed.as_secs_f64().max(1e-9),
            )
        };
        let mut s = line("alone", &self.alone);
        s += &line("flooded", &self.flooded);
        s += &format!(
            "ratio (flooded / alone): p50 {:.2}  p99 {:.2}\n",
            self.ratio(0.5),
            self.ratio(0.99)
        );
        s
    }
}
