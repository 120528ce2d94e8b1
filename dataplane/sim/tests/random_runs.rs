//! Property tests: random trees, random link faults and fault schedules, random restarts and
//! outages, random timeouts and sequence starts, several groups. Every run must be safe, and,
//! since every fault schedule here stops, every barrier must complete.
//!
//! Transmit queues are always bounded here: with unbounded queues and re-send timeouts shorter
//! than the time a link takes to send one frame per group, the backlog grows without end and
//! the newest reduce never gets through (congestion collapse; docs/simulator.md).
//!
//! The default run has 10,000 cases (about ten seconds in a debug build); set BARRIER_SIM_CASES for more (or fewer).

use barrier_protocol::backoff::Backoff;
use barrier_sim::{run, ComputeModel, FaultStop, Faults, LinkParams, SimConfig, TreeSpec};
use proptest::prelude::*;

fn cases(default: u32) -> u32 {
    std::env::var("BARRIER_SIM_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

prop_compose! {
    fn tree()(seed in any::<u64>(), max_depth in 1u32..=4, max_fanout in 1usize..=8, max_leaves in 1usize..=40)
        -> TreeSpec {
        TreeSpec::Random { seed, max_depth, max_fanout, max_leaves }
    }
}

prop_compose! {
    fn link()(latency_ns in 50u64..5_000, jitter_ns in 0u64..2_000, gbps in prop_oneof![Just(0.0), 1.0f64..400.0],
              queue_frames in prop_oneof![1u64..64, Just(1024u64)])
        -> LinkParams {
        LinkParams { latency_ns, jitter_ns, gbps, queue_frames }
    }
}

prop_compose! {
    fn faults()(loss in 0.0f64..0.4, dup in 0.0f64..0.2, reorder in 0.0f64..0.3, reorder_ns in 1u64..20_000,
                delay in 0.0f64..0.05, delay_ns in 1u64..200_000) -> Faults {
        Faults { loss, dup, reorder, reorder_ns, delay, delay_ns }
    }
}

prop_compose! {
    fn compute()(max_ns in 0u64..20_000, late in 0.0f64..0.2, late_ns in 0u64..100_000) -> ComputeModel {
        ComputeModel { min_ns: 0, max_ns, late, late_ns }
    }
}

fn backoff() -> impl Strategy<Value = Backoff> {
    prop_oneof![
        Just(Backoff::FIXED),
        (0u64..500_000, 0u8..=50).prop_map(|(max_ns, jitter_pct)| Backoff { max_ns, jitter_pct }),
    ]
}

/// `b`, with at least `jitter` percent of jitter when the link's queue holds fewer frames than
/// there are groups.
fn shallow(link: &LinkParams, groups: u32, b: Backoff, jitter: u8) -> Backoff {
    if link.queue_frames < u64::from(groups) {
        Backoff {
            jitter_pct: b.jitter_pct.max(jitter),
            ..b
        }
    } else {
        b
    }
}

prop_compose! {
    fn config()(
        tree in tree(), link in link(), faults in faults(), compute in compute(),
        groups in 1u32..=3, barriers in 2u64..=60, stop_frac in 0.0f64..=1.0,
        vary in any::<bool>(), restarts in 0u32..=6, restart_down_ns in 0u64..20_000,
        outages in 0u32..=3, outage_ns in 1u64..100_000,
        leaf_timeout in prop::option::of(300u64..60_000), switch_timeout in prop::option::of(300u64..60_000),
        leaf_backoff in backoff(), switch_backoff in backoff(),
        jitter in (5u8..=50, 5u8..=50),
        first_seq in prop_oneof![any::<u32>(), (u32::MAX - 40)..=u32::MAX, Just(0u32)],
        seed in any::<u64>(),
    ) -> SimConfig {
        SimConfig {
            tree, groups, barriers, seed, faults, compute,
            // Any queue depth, 1 frame included. A link queue shallower than the number of groups
            // sharing it needs per-group jitter on every re-send timer: with fixed periods the
            // groups' re-sends can keep displacing each other at the queue for good
            // (docs/simulator.md, "Known limits"), so such runs re-send with jitter at leaves
            // and switches. Otherwise half the runs' leaves and switches back off and jitter:
            // safety and liveness must not depend on the re-send timing.
            link,
            leaf_backoff: shallow(&link, groups, leaf_backoff, jitter.0),
            switch_backoff: shallow(&link, groups, switch_backoff, jitter.1),
            vary_faults_per_link: vary,
            // By time, not by barrier: heavy faults can stall progress, and faults that stop
            // at a barrier never reached would never stop.
            faults_stop: FaultStop::AtTime((barriers as f64 * stop_frac * 60_000.0) as u64),
            restarts, restart_down_ns, outages, outage_ns,
            leaf_timeout_ns: leaf_timeout, switch_timeout_ns: switch_timeout,
            first_seq,
            trace_len: 64,
            ..SimConfig::default()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(10_000), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_run_is_safe_and_every_barrier_completes(cfg in config()) {
        let r = run(&cfg).unwrap();
        prop_assert!(r.ok, "{:?}\n{}", cfg, r.table());
        prop_assert_eq!(r.barriers_completed, cfg.groups as u64 * cfg.barriers);
        prop_assert_eq!(r.safety_violations, 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(10_000) / 10, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn runs_are_repeatable(cfg in config()) {
        let a = serde_json::to_string(&run(&cfg).unwrap()).unwrap();
        let b = serde_json::to_string(&run(&cfg).unwrap()).unwrap();
        prop_assert_eq!(a, b);
    }
}

prop_compose! {
    /// Wide trees: switches with up to 64 children (the root) and 63 (intermediates), the
    /// protocol's limits, with fewer barriers so each case stays short.
    fn wide_config()(
        seed in any::<u64>(), max_depth in 1u32..=3, max_fanout in 40usize..=64, max_leaves in 64usize..=300,
        faults in faults(), restarts in 0u32..=4, barriers in 2u64..=12, stop_frac in 0.0f64..=1.0,
        first_seq in any::<u32>(),
    ) -> SimConfig {
        SimConfig {
            tree: TreeSpec::Random { seed, max_depth, max_fanout, max_leaves },
            barriers, seed, faults, restarts, first_seq,
            faults_stop: FaultStop::AtTime((barriers as f64 * stop_frac * 60_000.0) as u64),
            ..SimConfig::default()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(10_000) / 50, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn wide_trees_are_safe_and_live(cfg in wide_config()) {
        let r = run(&cfg).unwrap();
        prop_assert!(r.ok, "{:?}\n{}", cfg, r.table());
        prop_assert_eq!(r.barriers_completed, cfg.barriers);
    }
}
