//! A 2,2 tree (root, two intermediates, four leaves) on lossless in-memory wires, every poller
//! driven from this one thread with a simulated clock: nothing is ever descheduled and no frame
//! is lost, so a release that reaches every intermediate without waiting for a re-send is the
//! only correct outcome. Any scheduler that holds a send across polls (a port not served, a TX
//! buffer not flushed, a coalesced send that never leaves) shows up here as a re-send timer
//! firing, a stale reduce at the root, or a barrier that takes many loop iterations.

use barrier_switch::demo::{build_demo, mem_wires, DemoOpts, Tree};
use barrier_switch::engine::SwitchStats;
use barrier_switch::poll::Poller;
use std::sync::atomic::Ordering::Relaxed;

/// Simulated time per pass over every poller: far below both re-send timeouts, so a barrier
/// that needs a handful of passes can never trip a timer.
const TICK_NS: u64 = 1_000;

struct Run {
    switches: Vec<SwitchStats>,
    report: barrier_switch::leafhost::LeafReport,
    passes: u64,
}

/// Run `barriers` barriers of one group on a `fanout` tree. `reverse`: poll the pollers in the
/// opposite order (scheduler before its RX queues, leaves first), so that no result depends on
/// the order the demo happens to place them in.
fn run(fanout: &[usize], barriers: u64, reverse: bool) -> Run {
    let opts = DemoOpts {
        fanout: fanout.to_vec(),
        groups: 1,
        count: Some(barriers),
        loops: 1,
        // topo.sh's intermediate timeout; the leaves' is longer, as on the real testbed.
        switch_timeout_ns: 1_000_000,
        leaf_timeout_ns: 5_000_000,
        ..DemoOpts::default()
    };
    let tree = Tree::new(fanout).unwrap();
    let demo = build_demo(&opts, &tree, mem_wires(&tree), 0).unwrap();
    let mut pollers: Vec<Box<dyn Poller>> = demo.loops.into_iter().flatten().collect();
    if reverse {
        pollers.reverse();
    }
    let mut now = 0u64;
    let mut passes = 0u64;
    while !demo.done.load(Relaxed) {
        now += TICK_NS;
        passes += 1;
        for p in pollers.iter_mut() {
            p.poll(now);
        }
        assert!(
            passes < barriers * 1_000,
            "stuck: {} barriers after {passes} passes",
            demo.progress.load(Relaxed)
        );
    }
    barrier_switch::poll::finish_all(&mut pollers);
    let report = demo.report.lock().unwrap().take().unwrap();
    Run {
        switches: demo.switches,
        report,
        passes,
    }
}

fn assert_no_recovery_work(r: &Run, barriers: u64) {
    assert_eq!(r.report.early_releases, 0);
    assert!(r.report.completed.iter().all(|&c| c == barriers));
    assert!(r.report.releases_per_leaf.iter().all(|&n| n == barriers));
    assert_eq!(r.report.resends, 0, "leaves re-sent a reduce");
    assert_eq!(
        r.report.ignored_releases, 0,
        "a leaf got a duplicate release"
    );
    for s in &r.switches {
        let name = &s.name;
        assert_eq!(
            s.sched.timer_resends.load(Relaxed),
            0,
            "{name}: timer re-sends"
        );
        assert_eq!(s.rx_sum(|c| &c.stale_reduce), 0, "{name}: stale reduces");
        assert_eq!(s.rx_sum(|c| &c.stale_release), 0, "{name}: stale releases");
        assert_eq!(s.rx_sum(|c| &c.duplicates), 0, "{name}: duplicates");
        assert_eq!(
            s.tx_sum(|c| &c.retransmits_out),
            0,
            "{name}: retransmissions"
        );
        assert_eq!(s.tx_sum(|c| &c.coalesced), 0, "{name}: coalesced sends");
        assert_eq!(s.tx_sum(|c| &c.tx_full_waits), 0, "{name}: TX waits");
    }
    // Every intermediate got exactly one release per barrier from the root, on time.
    let root = &r.switches[0];
    for (p, c) in root.tx.iter().enumerate() {
        assert_eq!(
            c.release_out.load(Relaxed),
            barriers,
            "root port {p}: one release per barrier"
        );
    }
    for s in &r.switches[1..] {
        assert_eq!(s.rx_sum(|c| &c.release_in), barriers, "{}", s.name);
        assert_eq!(s.tx_sum(|c| &c.reduce_out), barriers, "{}", s.name);
    }
}

#[test]
fn releases_reach_every_intermediate_without_a_resend() {
    let r = run(&[2, 2], 300, false);
    assert_no_recovery_work(&r, 300);
    // A barrier is 4 hops each way; one pass moves a frame at least one hop. A send held by
    // the scheduler until the next timer would cost 1,000 passes per barrier.
    let per_barrier = r.passes as f64 / 300.0;
    assert!(per_barrier <= 12.0, "{per_barrier} passes per barrier");
    let worst = r.report.latency.max();
    assert!(
        worst <= 12 * TICK_NS,
        "slowest barrier took {worst} ns of simulated time"
    );
}

#[test]
fn poll_order_does_not_hold_a_release() {
    let r = run(&[2, 2], 300, true);
    assert_no_recovery_work(&r, 300);
    assert!(r.report.latency.max() <= 12 * TICK_NS);
}

#[test]
fn deeper_and_wider_trees_need_no_resend_either() {
    for fanout in [&[3, 2][..], &[2, 2, 2][..], &[4, 3][..]] {
        let r = run(fanout, 100, false);
        assert_no_recovery_work(&r, 100);
    }
}
