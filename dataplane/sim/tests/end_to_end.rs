//! End-to-end runs of the simulator over the real protocol: fault-free and faulty runs are
//! safe and live, every deliberately broken switch rule is caught, runs are repeatable.

use barrier_sim::{
    run, BrokenSwitch, ComputeModel, FaultStop, Faults, LinkParams, SimConfig, TreeSpec,
    ViolationKind,
};

fn faulty(seed: u64) -> SimConfig {
    SimConfig {
        tree: TreeSpec::Random {
            seed,
            max_depth: 4,
            max_fanout: 6,
            max_leaves: 48,
        },
        barriers: 2_000,
        seed,
        faults: Faults {
            loss: 0.05,
            dup: 0.01,
            reorder: 0.01,
            reorder_ns: 3_000,
            delay: 0.0,
            delay_ns: 0,
        },
        restarts: 20,
        ..SimConfig::default()
    }
}

#[test]
fn clean_run_completes_every_barrier_with_minimal_frames() {
    let cfg = SimConfig {
        tree: TreeSpec::Fanouts(vec![4, 4, 4]),
        barriers: 500,
        compute: ComputeModel {
            min_ns: 0,
            max_ns: 1_000,
            late: 0.0,
            late_ns: 0,
        },
        ..SimConfig::default()
    };
    let r = run(&cfg).unwrap();
    assert!(r.ok, "{}", r.table());
    assert_eq!(r.barriers_completed, 500);
    // One reduce up and one release down every link, nothing else.
    assert_eq!(r.frames.sent - r.frames.past_last_barrier, 500 * 2 * 84);
    assert_eq!(r.frames_per_barrier, 168.0);
    assert_eq!(r.frames.leaf_retransmits + r.frames.switch_retransmits, 0);
    // 3 hops up and 3 down at 1 µs plus up to 100 ns jitter and 7 ns serialization each.
    assert!(
        r.latency.min_ns >= 6_000 && r.latency.max_ns <= 6 * 1_107,
        "{:?}",
        r.latency
    );
}

#[test]
fn faulty_runs_with_restarts_are_safe_and_live() {
    for seed in 1..=4 {
        let r = run(&faulty(seed)).unwrap();
        assert!(r.ok, "{}", r.table());
        assert_eq!(r.barriers_completed, 2_000);
        assert!(r.frames.lost > 0 && r.frames.duplicated > 0 && r.frames.reordered > 0);
        assert_eq!(r.restarts, 20, "every planned restart happened");
    }
}

#[test]
fn headline_in_small_many_groups_outages_delays_and_sequence_wrap() {
    let cfg = SimConfig {
        groups: 3,
        barriers: 3_000,
        first_seq: u32::MAX - 1_000,
        outages: 5,
        vary_faults_per_link: true,
        faults: Faults {
            loss: 0.05,
            dup: 0.01,
            reorder: 0.01,
            reorder_ns: 3_000,
            delay: 0.002,
            delay_ns: 60_000,
        },
        ..faulty(11)
    };
    let r = run(&cfg).unwrap();
    assert!(r.ok, "{}", r.table());
    assert_eq!(r.barriers_completed, 3 * 3_000);
    assert!(r.frames.delayed > 0 && r.outages == 5);
}

#[test]
fn faults_that_stop_leave_a_tree_that_completes() {
    let cfg = SimConfig {
        faults: Faults {
            loss: 0.3,
            dup: 0.1,
            reorder: 0.1,
            reorder_ns: 5_000,
            delay: 0.01,
            delay_ns: 80_000,
        },
        faults_stop: FaultStop::AtBarrier(300),
        restarts: 30,
        outages: 10,
        barriers: 600,
        ..faulty(5)
    };
    let r = run(&cfg).unwrap();
    assert!(r.ok, "{}", r.table());
    assert!(r.faults_stopped_at_ns.is_some());
}

/// Seeds whose random tree has at least `n` leaves (a broken rule cannot bite a 1-leaf tree).
fn seeds_with_leaves(n: usize, count: usize) -> Vec<u64> {
    (1..)
        .filter(|&s| {
            let spec = faulty(s).tree;
            barrier_sim::Topology::build(&spec).unwrap().leaves.len() >= n
        })
        .take(count)
        .collect()
}

fn spread_arrivals(broken: BrokenSwitch, seed: u64) -> SimConfig {
    SimConfig {
        broken: Some(broken),
        // Leaves arrive over 50 µs, so an early completion cannot hide behind a late release.
        compute: ComputeModel {
            min_ns: 0,
            max_ns: 50_000,
            late: 0.05,
            late_ns: 200_000,
        },
        barriers: 500,
        restarts: 50,
        ..faulty(seed)
    }
}

#[test]
fn broken_switch_first_reduce_is_caught() {
    for seed in seeds_with_leaves(3, 5) {
        let r = run(&spread_arrivals(BrokenSwitch::FirstReduce, seed)).unwrap();
        assert!(
            !r.ok && r.safety_violations > 0,
            "seed {seed}: {}",
            r.table()
        );
        let v = &r.violations[0];
        assert_eq!(v.kind, ViolationKind::ReleaseBeforeAllArrived);
        assert!(!v.trace.is_empty() && !v.details.is_empty());
        // The completion the rule fabricated is the last decisive event.
        assert!(
            v.decisions
                .iter()
                .any(|d| d.contains("BROKEN RULE FirstReduce")),
            "{:#?}",
            v.decisions
        );
    }
}

#[test]
fn broken_switch_stale_reduce_completes_is_caught() {
    for seed in seeds_with_leaves(3, 5) {
        let r = run(&spread_arrivals(BrokenSwitch::StaleReduceCompletes, seed)).unwrap();
        assert!(r.safety_violations > 0, "seed {seed}: {}", r.table());
    }
}

#[test]
fn broken_switch_restart_trusts_first_is_caught() {
    for seed in seeds_with_leaves(3, 5) {
        let r = run(&spread_arrivals(BrokenSwitch::RestartTrustsFirst, seed)).unwrap();
        assert!(r.safety_violations > 0, "seed {seed}: {}", r.table());
    }
}

#[test]
fn broken_switch_ignore_stale_reduce_is_caught_as_stuck() {
    for seed in seeds_with_leaves(3, 5) {
        let r = run(&spread_arrivals(BrokenSwitch::IgnoreStaleReduce, seed)).unwrap();
        assert_eq!(
            r.safety_violations,
            0,
            "seed {seed}: ignoring is safe: {}",
            r.table()
        );
        assert!(r.stuck_barriers > 0, "seed {seed}: {}", r.table());
        assert_eq!(r.violations[0].kind, ViolationKind::Stuck);
        assert!(r.violations[0].details.iter().any(|d| d.contains("stuck")));
    }
}

#[test]
fn keep_going_counts_every_violation() {
    let mut cfg = spread_arrivals(BrokenSwitch::FirstReduce, 1);
    cfg.keep_going = true;
    cfg.max_reported = 2;
    let r = run(&cfg).unwrap();
    assert!(r.safety_violations > 2, "{}", r.safety_violations);
    assert_eq!(r.violations.len(), 2);
}

#[test]
fn same_seed_same_report_other_seed_other_run() {
    let a = serde_json::to_string(&run(&faulty(3)).unwrap()).unwrap();
    let b = serde_json::to_string(&run(&faulty(3)).unwrap()).unwrap();
    assert_eq!(a, b);
    let mut other = faulty(3);
    other.seed = 4;
    let c = serde_json::to_string(&run(&other).unwrap()).unwrap();
    assert_ne!(a, c);
}

#[test]
fn bad_configurations_are_refused() {
    assert!(run(&SimConfig {
        groups: 0,
        ..SimConfig::default()
    })
    .is_err());
    assert!(run(&SimConfig {
        groups: 5_000,
        ..SimConfig::default()
    })
    .is_err());
    assert!(run(&SimConfig {
        tree: TreeSpec::Fanouts(vec![2, 64]),
        ..SimConfig::default()
    })
    .is_err());
    assert!(run(&SimConfig {
        barriers: 0,
        ..SimConfig::default()
    })
    .is_err());
    assert!(run(&SimConfig {
        leaf_timeout_ns: Some(0),
        ..SimConfig::default()
    })
    .is_err());
}

#[test]
fn link_rate_and_latency_shape_the_latency() {
    let base = SimConfig {
        tree: TreeSpec::Fanouts(vec![8, 8]),
        barriers: 200,
        compute: ComputeModel {
            min_ns: 0,
            max_ns: 0,
            late: 0.0,
            late_ns: 0,
        },
        link: LinkParams {
            latency_ns: 500,
            jitter_ns: 0,
            gbps: 0.0,
            queue_frames: 1024,
        },
        ..SimConfig::default()
    };
    let r = run(&base).unwrap();
    assert!(r.ok);
    // 2 hops up, 2 down, 500 ns each, nothing else: exactly 2 µs.
    assert_eq!((r.latency.min_ns, r.latency.max_ns), (2_000, 2_000));
    let slow = run(&SimConfig {
        link: LinkParams {
            latency_ns: 500,
            jitter_ns: 0,
            gbps: 1.0,
            queue_frames: 1024,
        },
        ..base
    })
    .unwrap();
    // At 1 Gb/s a minimum frame holds each link 672 ns (84 bytes on the wire); every port is
    // its own link, so nothing queues: 4 hops of 500 + 672 ns.
    assert_eq!(
        (slow.latency.min_ns, slow.latency.max_ns),
        (4 * 1_172, 4 * 1_172)
    );
}

#[test]
fn scheduled_restarts_of_the_root_and_an_intermediate_mid_run() {
    // Restarts every 7 µs for a while, at the root and at an intermediate switch, with no other
    // fault: every phase of the barrier cycle gets hit at least once.
    let scheduled: Vec<(u32, u64)> = (0..200u64)
        .map(|i| ((i % 2) as u32, 3_000 + i * 7_013))
        .collect();
    let cfg = SimConfig {
        tree: TreeSpec::Fanouts(vec![3, 3, 3]),
        barriers: 400,
        scheduled_restarts: scheduled,
        ..SimConfig::default()
    };
    let r = run(&cfg).unwrap();
    assert!(r.ok, "{}", r.table());
    assert_eq!(r.restarts, 200);
    assert!(r.frames.dropped_switch_restarting > 0);
}

#[test]
fn resends_faster_than_the_link_drains_need_a_bounded_queue() {
    // Found by the proptest: one leaf in two groups re-sends every 300 ns over a 1 Gb/s link
    // (672 ns a frame). With an unbounded queue the newest reduce sits behind an ever longer
    // backlog of old ones and the barrier never completes; with a bounded queue (tail drop)
    // the backlog is capped and every barrier completes.
    let cfg = |queue_frames| SimConfig {
        tree: TreeSpec::Fanouts(vec![1]),
        groups: 2,
        barriers: 18,
        link: LinkParams {
            latency_ns: 50,
            jitter_ns: 347,
            gbps: 1.0,
            queue_frames,
        },
        compute: ComputeModel {
            min_ns: 0,
            max_ns: 0,
            late: 0.0,
            late_ns: 0,
        },
        leaf_timeout_ns: Some(300),
        ..SimConfig::default()
    };
    let bounded = run(&cfg(16)).unwrap();
    assert!(bounded.ok, "{}", bounded.table());
    assert!(bounded.frames.dropped_queue_full > 0);
    let unbounded = run(&cfg(0)).unwrap();
    assert!(unbounded.stuck_barriers > 0, "{}", unbounded.table());
}
