//! What a run reports: [`RunReport`] (serialized as is for `--json`) with its frame and
//! outcome statistics, built from the finished run, and its human-readable table.

use super::{FaultStop, Sim, Violation, ViolationKind};
use crate::broken::BrokenSwitch;
use crate::link::{Faults, LinkParams};
use crate::report::LatencyStats;
use crate::topology::TreeSummary;
use barrier_protocol::counts::OutcomeCounts;
use barrier_protocol::switch::{Outcome, Reject};
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct FrameStats {
    /// Frames put on links by leaves and switches (one frame per hop), retransmits included.
    pub sent: u64,
    pub reduces_sent: u64,
    pub releases_sent: u64,
    pub leaf_retransmits: u64,
    pub switch_retransmits: u64,
    /// Copies the network added.
    pub duplicated: u64,
    pub lost: u64,
    pub reordered: u64,
    pub delayed: u64,
    pub dropped_link_down: u64,
    pub dropped_switch_restarting: u64,
    /// Dropped because the link's transmit queue was full.
    pub dropped_queue_full: u64,
    pub delivered: u64,
    /// Frames of a group the receiving switch or leaf has no configuration for.
    pub unknown_group: u64,
    pub leaf_ignored_releases: u64,
    /// Of `sent`: frames for the barrier after the last counted one (leaves go on past the
    /// end of the run); left out of `frames_per_barrier`.
    pub past_last_barrier: u64,
    /// Longest time a frame took over one link (queueing, serialization, latency, delays),
    /// from the tx timestamp it carried.
    pub max_hop_ns: u64,
}

/// What the switches' control steps decided, over the whole run.
#[derive(Clone, Debug, Default)]
pub struct OutcomeStats {
    /// One count per `Outcome` of `switch::on_event`.
    pub by_outcome: OutcomeCounts,
    pub switch_timer_fired: u64,
}

impl OutcomeStats {
    /// `o`'s count.
    pub fn get(&self, o: Outcome) -> u64 {
        self.by_outcome.get(o)
    }
}

/// The JSON report's field for an outcome: `Outcome::name`, rejections prefixed `rejected_`.
fn json_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Rejected(Reject::NotAChild) => "rejected_not_a_child",
        Outcome::Rejected(Reject::NotTheParent) => "rejected_not_the_parent",
        Outcome::Rejected(Reject::OtherEpoch) => "rejected_other_epoch",
        other => other.name(),
    }
}

/// One field per outcome (in `Outcome::ALL` order), then `switch_timer_fired`.
impl Serialize for OutcomeStats {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = ser.serialize_struct("OutcomeStats", Outcome::ALL.len() + 1)?;
        for (o, n) in self.by_outcome.iter() {
            st.serialize_field(json_name(o), &n)?;
        }
        st.serialize_field("switch_timer_fired", &self.switch_timer_fired)?;
        st.end()
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct GroupSummary {
    pub group: u32,
    pub members: u32,
    pub barriers_completed: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub tree: TreeSummary,
    pub seed: u64,
    pub barriers_per_group: u64,
    pub groups: Vec<GroupSummary>,
    pub link: LinkParams,
    pub faults: Faults,
    pub vary_faults_per_link: bool,
    pub faults_stop: FaultStop,
    pub faults_stopped_at_ns: Option<u64>,
    pub restarts: u64,
    pub outages: u64,
    pub leaf_timeout_ns: u64,
    pub switch_timeout_ns: u64,
    pub stall_ns: u64,
    pub first_seq: u32,
    pub broken_switch: Option<BrokenSwitch>,
    pub modelled_time_ns: u64,
    pub events: u64,
    pub barriers_completed: u64,
    /// Per barrier: last leaf's release minus last leaf's arrival, in modelled ns.
    pub latency: LatencyStats,
    pub frames: FrameStats,
    pub frames_per_barrier: f64,
    pub outcomes: OutcomeStats,
    pub safety_violations: u64,
    /// Barriers (over all groups) left incomplete by a stall (the liveness check fired).
    pub stuck_barriers: u64,
    /// The run stopped at a violation before every barrier ran (see `violations`).
    pub halted_early: bool,
    pub violations: Vec<Violation>,
    pub ok: bool,
}

impl Sim<'_> {
    pub(super) fn report(mut self) -> RunReport {
        let mut lat: Vec<u64> = Vec::new();
        let mut completed = 0;
        for g in &self.groups {
            completed += g.completed;
            for t in g.tracks[..self.cfg.barriers as usize]
                .iter()
                .filter(|t| t.releases == g.members)
            {
                lat.push(t.last_release.saturating_sub(t.last_arrive));
            }
        }
        let incomplete: u64 = self
            .groups
            .iter()
            .map(|g| self.cfg.barriers.saturating_sub(g.completed))
            .sum();
        let stalled = self
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::Stuck);
        let stuck_barriers = if stalled { incomplete } else { 0 };
        let halted_early = incomplete > 0 && !stalled;
        let ok = self.violations.is_empty() && incomplete == 0 && self.safety_violations == 0;
        RunReport {
            tree: self.topo.summary(&self.cfg.tree),
            seed: self.cfg.seed,
            barriers_per_group: self.cfg.barriers,
            groups: self
                .groups
                .iter()
                .map(|g| GroupSummary {
                    group: g.id.0,
                    members: g.members,
                    barriers_completed: g.completed,
                })
                .collect(),
            link: self.cfg.link,
            faults: self.cfg.faults,
            vary_faults_per_link: self.cfg.vary_faults_per_link,
            faults_stop: self.cfg.faults_stop,
            faults_stopped_at_ns: self.faults_stopped_at.map(|t| t.nanos()),
            restarts: self.restarts,
            outages: self.outages,
            leaf_timeout_ns: self.leaf_timeout_ns,
            switch_timeout_ns: self.switch_timeout_ns,
            stall_ns: self.stall_ns,
            first_seq: self.cfg.first_seq,
            broken_switch: self.cfg.broken,
            modelled_time_ns: self.now.nanos(),
            events: self.queue.pushed(),
            barriers_completed: completed,
            latency: LatencyStats::from_samples(&mut lat),
            frames_per_barrier: if completed > 0 {
                (self.frames.sent - self.frames.past_last_barrier) as f64 / completed as f64
            } else {
                0.0
            },
            frames: std::mem::take(&mut self.frames),
            outcomes: std::mem::take(&mut self.outcomes),
            safety_violations: self.safety_violations,
            stuck_barriers,
            halted_early,
            violations: std::mem::take(&mut self.violations),
            ok,
        }
    }
}

impl RunReport {
    /// The human-readable summary (the JSON form is the struct itself).
    pub fn table(&self) -> String {
        use crate::report::{thousands, us};
        let mut s = String::new();
        let t = &self.tree;
        s += &format!(
            "tree {}: {} leaves, {} switches, {} switch levels, leaves up to {} links deep\n",
            t.spec,
            thousands(t.leaves as u64),
            thousands(t.switches as u64),
            t.switch_levels,
            t.max_leaf_depth
        );
        for g in &self.groups {
            s += &format!(
                "  group{}: {} members, {} of {} barriers completed\n",
                g.group,
                thousands(g.members as u64),
                thousands(g.barriers_completed),
                thousands(self.barriers_per_group)
            );
        }
        let f = &self.faults;
        s += &format!(
            "link {} ns + 0..{} ns jitter, {} Gb/s, queue {} frames; faults: loss {} dup {} reorder {} (<= {} ns) delay {} ({} ns){}; stop {:?}{}\n",
            self.link.latency_ns, self.link.jitter_ns, self.link.gbps, self.link.queue_frames, f.loss, f.dup, f.reorder, f.reorder_ns, f.delay, f.delay_ns,
            if self.vary_faults_per_link { ", varied per link" } else { "" },
            self.faults_stop,
            match self.faults_stopped_at_ns { Some(n) => format!(" (stopped at {})", us(n as f64)), None => String::new() },
        );
        s += &format!(
            "restarts {}, outages {}; timeouts: leaf {} ns, switch {} ns; stall window {} ns; first seq {}{}\n",
            self.restarts, self.outages, self.leaf_timeout_ns, self.switch_timeout_ns, self.stall_ns, self.first_seq,
            match self.broken_switch { Some(b) => format!("; BROKEN SWITCH: {b:?}"), None => String::new() }
        );
        s += &format!(
            "modelled time {}, {} events, seed {}\n",
            us(self.modelled_time_ns as f64),
            thousands(self.events),
            self.seed
        );
        let l = &self.latency;
        s += &format!(
            "barrier latency (last arrival -> last release): mean {}  p50 {}  p99 {}  max {}\n",
            us(l.mean_ns),
            us(l.p50_ns as f64),
            us(l.p99_ns as f64),
            us(l.max_ns as f64)
        );
        let fr = &self.frames;
        s += &format!(
            "frames: {} sent ({:.1} per barrier), {} lost, {} duplicated, {} reordered, {} delayed, {} on down links, {} at restarting switches, {} at full queues; retransmits: leaf {}, switch {}\n",
            thousands(fr.sent), self.frames_per_barrier, thousands(fr.lost), thousands(fr.duplicated), thousands(fr.reordered),
            thousands(fr.delayed), thousands(fr.dropped_link_down), thousands(fr.dropped_switch_restarting),
            thousands(fr.dropped_queue_full), thousands(fr.leaf_retransmits), thousands(fr.switch_retransmits)
        );
        let o = &self.outcomes;
        s += &format!(
            "switch outcomes: recorded {}, completed {}, released {}, duplicate {}, stale reduce {}, stale release {}, rejected {}/{}, timer fired {}\n",
            thousands(o.get(Outcome::Recorded)), thousands(o.get(Outcome::Completed)), thousands(o.get(Outcome::Released)),
            thousands(o.get(Outcome::Duplicate)), thousands(o.get(Outcome::StaleReduce)), thousands(o.get(Outcome::StaleRelease)),
            o.get(Outcome::Rejected(Reject::NotAChild)), o.get(Outcome::Rejected(Reject::NotTheParent)), thousands(o.switch_timer_fired)
        );
        s += &format!(
            "barriers completed {} | safety violations {} | stuck barriers {} |{} {}\n",
            thousands(self.barriers_completed),
            self.safety_violations,
            self.stuck_barriers,
            if self.halted_early {
                " halted at the first violation |"
            } else {
                ""
            },
            if self.ok { "OK" } else { "FAILED" }
        );
        for v in &self.violations {
            s += &format!("\n{:?} at {}: {}\n", v.kind, us(v.at_ns as f64), v.message);
            for d in &v.details {
                s += &format!("    {d}\n");
            }
            s += &format!("  last {} decisive events:\n", v.decisions.len());
            for line in &v.decisions {
                s += &format!("  {line}\n");
            }
            s += &format!("  last {} events:\n", v.trace.len());
            for line in &v.trace {
                s += &format!("  {line}\n");
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_stats_serialize_as_before() {
        let o = OutcomeStats::default();
        o.by_outcome.bump(Outcome::Completed);
        o.by_outcome.bump(Outcome::Rejected(Reject::NotTheParent));
        assert_eq!(
            serde_json::to_string(&o).unwrap(),
            "{\"recorded\":0,\"duplicate\":0,\"completed\":1,\"released\":0,\"stale_reduce\":0,\
             \"stale_release\":0,\"rejected_not_a_child\":0,\"rejected_not_the_parent\":1,\
             \"ahead_reduce\":0,\"ahead_release\":0,\"rejected_other_epoch\":0,\
             \"aborted\":0,\"after_abort\":0,\"switch_timer_fired\":0}"
        );
    }
}
