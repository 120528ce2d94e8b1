//! Shared by the net_ring end-to-end tests: run a demo tree on DPDK in this process (each test
//! file is its own process, so one EAL each) and check the method's promises.
#![allow(dead_code)]

use barrier_protocol::switch::Outcome;
use barrier_switch::counters::RxCounters;
use barrier_testbed::demo::{DemoOpts, Tree};
use barrier_testbed::demo_dpdk::run_demo_dpdk;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

pub fn run_tree(fanout: &[usize], groups: u32, count: u64) {
    run_tree_on(fanout, groups, count, 2)
}

/// As `run_tree`, on `loops` busy lcores.
pub fn run_tree_on(fanout: &[usize], groups: u32, count: u64, loops: usize) {
    let opts = DemoOpts {
        fanout: fanout.to_vec(),
        groups,
        count: Some(count),
        duration: Duration::from_secs(600),
        loops,
        ..DemoOpts::default()
    };
    let tree = Tree::new(fanout).unwrap();
    let out = run_demo_dpdk(&opts, &[], Arc::new(AtomicBool::new(false)))
        .expect("demo ran and shut down cleanly");
    let r = &out.result.report;
    println!("{}", out.result.summary(&opts, &tree));
    println!("{}", out.report);
    // Never released before all leaves arrived.
    assert_eq!(r.early_releases, 0);
    // Every group completed exactly `count` barriers, and every leaf was released once per
    // barrier of every group.
    assert_eq!(r.completed.len(), groups as usize);
    for (g, &c) in r.completed.iter().enumerate() {
        assert_eq!(c, count, "group {g}");
    }
    assert_eq!(r.releases_per_leaf.len(), tree.leaves().len());
    for (l, &n) in r.releases_per_leaf.iter().enumerate() {
        assert_eq!(n, count * u64::from(groups), "leaf {l}");
    }
    assert_eq!(r.latency.len(), count * u64::from(groups));
    // The root completed each barrier once; nothing was dropped anywhere.
    let root = &out.switches[0];
    assert_eq!(root.name, "root");
    assert_eq!(
        root.rx_sum(|c| &c.outcomes[Outcome::Completed]),
        count * u64::from(groups)
    );
    for s in &out.switches {
        // Every drop reason, whatever is added later.
        let dropped: u64 =
            s.rx.iter()
                .flat_map(|(_, c)| RxCounters::NAMES.iter().zip(c.values()))
                .filter(|(name, _)| name.starts_with("drop_"))
                .map(|(_, v)| v)
                .sum();
        assert_eq!(dropped, 0, "switch {} dropped frames", s.name);
        // Each intermediate reduced up once per barrier (plus re-sends after a timeout).
        if s.name != "root" {
            assert!(s.rx_sum(|c| &c.outcomes[Outcome::Completed]) >= count * u64::from(groups));
        }
    }
    // (run_demo_dpdk already failed if any mbuf was not back in the pool after shutdown.)
    assert!(out.report.contains("mbufs back"), "{}", out.report);
}
