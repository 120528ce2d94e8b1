//! What a run is asked to do: the tree, groups, barriers, links and faults, restarts and
//! outages, compute times, timeouts, checks ([`SimConfig`]), and the timeouts and stall
//! window derived from it.

use crate::broken::BrokenSwitch;
use crate::link::{Faults, LinkParams};
use crate::rng::Rng;
use crate::topology::{Topology, TreeSpec};
use barrier_protocol::backoff::Backoff;
use serde::Serialize;

/// When faults (loss, duplication, reordering, delay, restarts, outages) end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum FaultStop {
    Never,
    /// When the first leaf of group 0 arrives at this barrier.
    AtBarrier(u64),
    AtTime(u64),
}

/// How long a leaf computes between two barriers: uniform in `min..=max`, and with
/// probability `late` a further uniform `0..=late_ns` (a straggler).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ComputeModel {
    pub min_ns: u64,
    pub max_ns: u64,
    pub late: f64,
    pub late_ns: u64,
}

impl Default for ComputeModel {
    fn default() -> Self {
        ComputeModel {
            min_ns: 0,
            max_ns: 2_000,
            late: 0.01,
            late_ns: 50_000,
        }
    }
}

impl ComputeModel {
    pub fn draw(&self, rng: &mut Rng) -> u64 {
        let mut d = rng.range_inclusive(self.min_ns, self.max_ns.max(self.min_ns));
        if rng.chance(self.late) {
            d += rng.range_inclusive(0, self.late_ns);
        }
        d
    }

    pub fn worst_ns(&self) -> u64 {
        self.max_ns.max(self.min_ns) + if self.late > 0.0 { self.late_ns } else { 0 }
    }
}

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub tree: TreeSpec,
    /// Barrier groups; group 0 spans every leaf, the others random subsets.
    pub groups: u32,
    /// Barriers every group runs.
    pub barriers: u64,
    pub seed: u64,
    pub link: LinkParams,
    pub faults: Faults,
    /// Give every link its own fault rates: the configured ones scaled by a random factor in
    /// 0..2 (a quarter of the links clean).
    pub vary_faults_per_link: bool,
    pub faults_stop: FaultStop,
    /// Switch restarts, at random switches and random barriers (while faults are on).
    pub restarts: u32,
    /// Restarts at given times: `(switch, ns)`. Switch 0 is the root; the others are numbered
    /// depth-first.
    pub scheduled_restarts: Vec<(u32, u64)>,
    /// How long a restarting switch drops every frame.
    pub restart_down_ns: u64,
    /// Link outages (both directions down), at random links and barriers.
    pub outages: u32,
    pub outage_ns: u64,
    pub compute: ComputeModel,
    /// Leaf re-send timeout; `None`: 4x the longest round trip of the tree.
    pub leaf_timeout_ns: Option<u64>,
    /// The leaves' re-send policy beyond the first wait: doubling up to a cap, per-group
    /// jitter (`barrier_protocol::backoff`). `Backoff::FIXED`: every wait is the timeout.
    pub leaf_backoff: Backoff,
    /// Intermediate re-send timeout; `None`: same as the leaf's.
    pub switch_timeout_ns: Option<u64>,
    /// The intermediates' re-send policy beyond the first wait (the group's `backoff`
    /// register). `Backoff::FIXED`: every wait is the timeout.
    pub switch_backoff: Backoff,
    /// Liveness: a barrier is stuck when nothing progresses for this long after the last
    /// fault. `None`: 100 re-send timeouts plus the longest compute time.
    pub stall_ns: Option<u64>,
    /// Sequence number of the first barrier (tests start near 2^32 to cross the wrap).
    pub first_seq: u32,
    pub broken: Option<BrokenSwitch>,
    /// Events kept in the trace ring.
    pub trace_len: usize,
    /// Keep running after a safety violation (count them all).
    pub keep_going: bool,
    /// Violations reported in full (with their trace); later ones are only counted.
    pub max_reported: usize,
    /// Print a progress line on stderr once a second of wall-clock time (`barrier-sim run`
    /// does, unless `--quiet`).
    pub progress: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            tree: TreeSpec::Fanouts(vec![4, 4, 4]),
            groups: 1,
            barriers: 100,
            seed: 1,
            link: LinkParams::default(),
            faults: Faults::none(),
            vary_faults_per_link: false,
            faults_stop: FaultStop::Never,
            restarts: 0,
            scheduled_restarts: Vec::new(),
            restart_down_ns: 5_000,
            outages: 0,
            outage_ns: 50_000,
            compute: ComputeModel::default(),
            leaf_timeout_ns: None,
            leaf_backoff: Backoff::FIXED,
            switch_timeout_ns: None,
            switch_backoff: Backoff::FIXED,
            stall_ns: None,
            first_seq: 0,
            broken: None,
            trace_len: 48,
            keep_going: false,
            max_reported: 5,
            progress: false,
        }
    }
}

/// Longest leaf-root-leaf round trip without queueing or faults.
pub(super) fn round_trip_ns(cfg: &SimConfig, topo: &Topology) -> u64 {
    let hop = cfg.link.latency_ns + cfg.link.jitter_ns + cfg.link.serialization_ns();
    2 * topo.max_leaf_depth() as u64 * hop.max(1)
}

pub(super) fn timeouts(cfg: &SimConfig, topo: &Topology) -> Result<(u64, u64), String> {
    let leaf = cfg
        .leaf_timeout_ns
        .unwrap_or((4 * round_trip_ns(cfg, topo)).max(1_000));
    let switch = cfg.switch_timeout_ns.unwrap_or(leaf);
    if leaf == 0 || switch == 0 {
        return Err("re-send timeouts must be positive".into());
    }
    Ok((leaf, switch))
}

/// The (leaf, switch) re-send timeouts a run with this configuration uses.
pub fn resolved_timeouts(cfg: &SimConfig) -> Result<(u64, u64), String> {
    timeouts(cfg, &Topology::build(&cfg.tree)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_times_stay_in_their_bounds() {
        let m = ComputeModel {
            min_ns: 100,
            max_ns: 200,
            late: 0.5,
            late_ns: 1_000,
        };
        let mut rng = Rng::new(1);
        let draws: Vec<u64> = (0..1_000).map(|_| m.draw(&mut rng)).collect();
        assert!(draws.iter().all(|&d| (100..=1_200).contains(&d)));
        assert!(draws.iter().any(|&d| d > 200), "stragglers happen");
        assert_eq!(m.worst_ns(), 1_200);
    }

    #[test]
    fn default_timeouts_follow_the_round_trip() {
        let cfg = SimConfig::default(); // 4,4,4: 3 links deep, 1,000 + 100 + 7 ns a hop
        let (leaf, switch) = resolved_timeouts(&cfg).unwrap();
        assert_eq!(leaf, 4 * 2 * 3 * 1_107);
        assert_eq!(switch, leaf);
    }
}
