//! The in-network tree barrier next to the dissemination barrier on the same leaves, tree and
//! link model, without faults: per-barrier latency in modelled time and frames per barrier.

use crate::dissemination::{self, DisseminationReport};
use crate::link::{Faults, LinkParams};
use crate::report::{thousands, us, LatencyStats};
use crate::simulation::{self, ComputeModel, FaultStop, SimConfig};
use crate::topology::{Topology, TreeSpec, TreeSummary};
use serde::Serialize;

#[derive(Clone, Debug)]
pub struct CompareConfig {
    pub tree: TreeSpec,
    pub barriers: u64,
    pub seed: u64,
    pub link: LinkParams,
    pub compute: ComputeModel,
}

#[derive(Clone, Debug, Serialize)]
pub struct TreeSide {
    /// Per barrier: last leaf's release minus last leaf's arrival, in modelled ns.
    pub latency: LatencyStats,
    /// Frames on links (one per hop; here every frame is one hop).
    pub link_frames_per_barrier: f64,
    /// One reduce up and one release down each link: 2 x links, with no loss.
    pub expected_frames_per_barrier: u64,
    pub leaf_retransmits: u64,
    pub switch_retransmits: u64,
    pub safety_violations: u64,
    pub stuck_barriers: u64,
    pub events: u64,
    /// Every barrier completed with no violation.
    pub ok: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct CompareReport {
    pub tree: TreeSummary,
    pub link: LinkParams,
    pub compute: ComputeModel,
    pub barriers: u64,
    pub seed: u64,
    pub in_network: TreeSide,
    pub dissemination: DisseminationReport,
    /// dissemination mean latency / tree mean latency.
    pub latency_ratio: f64,
    /// dissemination link frames / tree link frames.
    pub frames_ratio: f64,
}

pub fn run(cfg: &CompareConfig) -> Result<CompareReport, String> {
    let topo = Topology::build(&cfg.tree)?;
    let sim_cfg = SimConfig {
        tree: cfg.tree.clone(),
        groups: 1,
        barriers: cfg.barriers,
        seed: cfg.seed,
        link: cfg.link,
        faults: Faults::none(),
        faults_stop: FaultStop::Never,
        compute: cfg.compute,
        ..SimConfig::default()
    };
    let t = simulation::run(&sim_cfg)?;
    let d = dissemination::run(&topo, cfg.link, cfg.compute, cfg.barriers, cfg.seed);
    let in_network = TreeSide {
        latency: t.latency.clone(),
        link_frames_per_barrier: t.frames_per_barrier,
        expected_frames_per_barrier: 2 * topo.links.len() as u64,
        leaf_retransmits: t.frames.leaf_retransmits,
        switch_retransmits: t.frames.switch_retransmits,
        safety_violations: t.safety_violations,
        stuck_barriers: t.stuck_barriers,
        events: t.events,
        ok: t.ok,
    };
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    Ok(CompareReport {
        tree: t.tree,
        link: cfg.link,
        compute: cfg.compute,
        barriers: cfg.barriers,
        seed: cfg.seed,
        latency_ratio: ratio(d.latency.mean_ns, in_network.latency.mean_ns),
        frames_ratio: ratio(
            d.link_frames_per_barrier,
            in_network.link_frames_per_barrier,
        ),
        in_network,
        dissemination: d,
    })
}

impl CompareReport {
    pub fn table(&self) -> String {
        let t = &self.in_network;
        let d = &self.dissemination;
        let mut s = String::new();
        s += &format!(
            "{} leaves, tree {} ({} switches, {} switch levels, {} links)\n",
            thousands(self.tree.leaves as u64),
            self.tree.spec,
            thousands(self.tree.switches as u64),
            self.tree.switch_levels,
            thousands(self.tree.links as u64)
        );
        s += &format!(
            "link: {} ns + 0..{} ns jitter per hop, {} Gb/s; compute between barriers {}..{} ns; {} barriers, seed {}\n\n",
            self.link.latency_ns, self.link.jitter_ns, self.link.gbps, self.compute.min_ns, self.compute.max_ns, self.barriers, self.seed
        );
        let row = |name: &str, a: String, b: String| format!("{name:<30} {a:>18} {b:>18}\n");
        s += &row("", "in-network tree".into(), "dissemination".into());
        s += &row(
            "rounds",
            format!(
                "{} up + {} down",
                self.tree.max_leaf_depth, self.tree.max_leaf_depth
            ),
            d.rounds.to_string(),
        );
        s += &row("latency mean", us(t.latency.mean_ns), us(d.latency.mean_ns));
        s += &row(
            "latency p50",
            us(t.latency.p50_ns as f64),
            us(d.latency.p50_ns as f64),
        );
        s += &row(
            "latency p99",
            us(t.latency.p99_ns as f64),
            us(d.latency.p99_ns as f64),
        );
        s += &row(
            "latency max",
            us(t.latency.max_ns as f64),
            us(d.latency.max_ns as f64),
        );
        s += &row(
            "messages per barrier",
            thousands(t.link_frames_per_barrier.round() as u64),
            thousands(d.messages_per_barrier.round() as u64),
        );
        s += &row(
            "link frames per barrier",
            thousands(t.link_frames_per_barrier.round() as u64),
            thousands(d.link_frames_per_barrier.round() as u64),
        );
        s += &row(
            "mean hops per message",
            "1".into(),
            format!("{:.2}", d.mean_hops_per_message),
        );
        s += &row(
            "safety violations",
            t.safety_violations.to_string(),
            d.safety_violations.to_string(),
        );
        s += &format!(
            "\ndissemination / tree: latency x{:.2}, link frames x{:.2}\n",
            self.latency_ratio, self.frames_ratio
        );
        s += "latency = last leaf released minus last leaf arrived, modelled time; a tree \"message\" is one\n\
              frame on one link, a dissemination message is leaf to leaf and crosses every link of\n\
              the tree path between the two leaves (link frames counts each crossing).\n";
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_tree_sends_exactly_two_frames_per_link() {
        let cfg = CompareConfig {
            tree: TreeSpec::Fanouts(vec![4, 4, 4]),
            barriers: 20,
            seed: 1,
            link: LinkParams::default(),
            compute: ComputeModel {
                min_ns: 0,
                max_ns: 1_000,
                late: 0.0,
                late_ns: 0,
            },
        };
        let r = run(&cfg).unwrap();
        assert_eq!(r.in_network.expected_frames_per_barrier, 2 * 84);
        assert_eq!(r.in_network.link_frames_per_barrier, 168.0);
        assert_eq!(
            r.in_network.leaf_retransmits + r.in_network.switch_retransmits,
            0
        );
        assert_eq!(r.dissemination.messages_per_barrier, 64.0 * 6.0);
        assert_eq!(
            r.in_network.safety_violations + r.dissemination.safety_violations,
            0
        );
        // 3 hops up and 3 down against 6 rounds of 2..6 hops.
        assert!(r.latency_ratio > 1.5, "{}", r.latency_ratio);
        assert!(r.table().contains("dissemination"));
    }
}
