//! A 2,2 tree (root, two intermediates, four leaves) on lossless in-memory wires, every poller
//! driven from this one thread with a simulated clock: nothing is ever descheduled and no frame
//! is lost, so a release that reaches every intermediate without waiting for a re-send is the
//! only correct outcome. Any scheduler that holds a send across polls (a port not served, a TX
//! buffer not flushed, a coalesced send that never leaves) shows up here as a re-send timer
//! firing, a stale reduce at the root, or a barrier that takes many loop iterations.

use barrier_protocol::switch::Outcome;
use barrier_runtime::poll::Poller;
use barrier_switch::engine::SwitchStats;
use barrier_testbed::demo::{build_demo, mem_wires, DemoOpts, Tree};
use std::sync::atomic::Ordering::Relaxed;

/// Simulated time per pass over every poller: far below both re-send timeouts, so a barrier
/// that needs a handful of passes can never trip a timer.
const TICK_NS: u64 = 1_000;

struct Run {
    switches: Vec<SwitchStats>,
    report: barrier_testbed::leafhost::LeafReport,
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
    barrier_runtime::poll::finish_all(&mut pollers);
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
        assert_eq!(
            s.rx_sum(|c| &c.outcomes[Outcome::StaleReduce]),
            0,
            "{name}: stale reduces"
        );
        assert_eq!(
            s.rx_sum(|c| &c.outcomes[Outcome::StaleRelease]),
            0,
            "{name}: stale releases"
        );
        assert_eq!(
            s.rx_sum(|c| &c.outcomes[Outcome::Duplicate]),
            0,
            "{name}: duplicates"
        );
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

/// What the root's counters look like when a switch below it was not scheduled for a while
/// (the 2,2 topo run on two cores): the child's first reduce and its timer's re-sends of the
/// same reduce arrive in one RX burst. The first completes the barrier, the others are stale
/// and ask for the release again while the release is still queued, so they coalesce into it:
/// `stale_reduce` and `coalesced` grow together, `retransmits_out` does not, and exactly one
/// release per child goes out. A release held by the scheduler would look the same in the
/// counters, which is why the tree tests above check the timers instead.
#[test]
fn a_backlog_of_resent_reduces_coalesces_into_the_one_release() {
    use barrier_protocol::switch::GroupConfig;
    use barrier_protocol::table::GroupTable;
    use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, FRAME_LEN};
    use barrier_protocol::{GroupId, PortSet, Seq};
    use barrier_runtime::io::{mem_wire, RxQueue, TxQueue};
    use barrier_switch::engine::{build_switch, PortIo};
    use std::sync::Arc;

    let table = GroupTable::new(2);
    let children = PortSet(0b11);
    table
        .configure(GroupId(1), GroupConfig::root(children))
        .unwrap();
    let mut to_root = Vec::new();
    let mut from_root = Vec::new();
    let mut ports = Vec::new();
    for p in 0..2 {
        let (up_tx, up_rx) = mem_wire(64);
        let (down_tx, down_rx) = mem_wire(64);
        to_root.push(up_tx);
        from_root.push(down_rx);
        ports.push(PortIo {
            name: format!("d{p}"),
            rx: vec![up_rx],
            tx: down_tx,
            peer_mac: [0xff; 6],
            mac: None,
        });
    }
    let sw = build_switch("root", [2, 0, 0, 0, 0, 1], ports, Arc::new(table), 0);
    let reduce = |retransmit: bool| {
        let mut b = [0u8; FRAME_LEN];
        FrameRepr {
            dst: MacAddr::BROADCAST,
            src: MacAddr([2, 0, 0, 0, 9, 9]),
            kind: Kind::Reduce,
            flags: if retransmit {
                Flags::RETRANSMIT
            } else {
                Flags::empty()
            },
            group: GroupId(1),
            epoch: barrier_protocol::Epoch::DEFAULT,
            seq: Seq(0),
            tx_timestamp: None,
        }
        .emit(&mut b);
        b
    };
    // Child 0 reported long ago; child 1's reduce and two re-sends of it wait in one burst.
    to_root[0].offer(&reduce(false)).unwrap();
    to_root[0].flush();
    to_root[1].offer(&reduce(false)).unwrap();
    to_root[1].offer(&reduce(true)).unwrap();
    to_root[1].offer(&reduce(true)).unwrap();
    to_root[1].flush();
    let mut pollers: Vec<_> = sw.rx.into_iter().map(|(_, _, p)| p).collect();
    pollers.push(sw.sched);
    for p in pollers.iter_mut() {
        p.poll(1_000);
    }
    let s = &sw.stats;
    assert_eq!(s.rx_sum(|c| &c.outcomes[Outcome::Completed]), 1);
    assert_eq!(s.rx_sum(|c| &c.outcomes[Outcome::StaleReduce]), 2);
    assert_eq!(s.tx[1].coalesced.load(Relaxed), 2);
    assert_eq!(s.tx_sum(|c| &c.retransmits_out), 0);
    for (p, rx) in from_root.iter_mut().enumerate() {
        let mut frames = Vec::new();
        rx.rx_burst(&mut frames, 10);
        assert_eq!(
            frames.len(),
            1,
            "port {p}: one release, sent in the same pass"
        );
        let f = FrameRepr::parse(&frames[0]).unwrap();
        assert_eq!((f.kind, f.seq), (Kind::Release, Seq(0)));
    }
    assert_eq!(s.tx_sum(|c| &c.release_out), 2);
}
