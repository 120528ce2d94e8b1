//! Lost frames on DPDK wires, recovered by re-sends (claim 2): three leaves on `DpdkPort`s and
//! the real switch, leaf 0's cable loses the first copy of every fourth reduce, leaf 1's cable
//! the first copy of every fourth release; leaf 2 is wired directly. Every barrier still
//! completes, exactly once per leaf, none early. Own process, own EAL; needs root.
#![cfg(feature = "dpdk")]

mod dpdk_common;

use barrier_leaf::{Config, Record, Session, Stats};
use barrier_protocol::switch::Outcome;
use barrier_protocol::wire::{Flags, FrameRepr, Kind};
use dpdk_common::{Dir, LossFn};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

const GROUP: u32 = 3;
const BARRIERS: u32 = 200;

/// Loses the first copy (no RETRANSMIT flag) of `kind` frames going `dir` whose seq % 4 == `at`.
fn lose_first(dir: Dir, kind: Kind, at: u32) -> LossFn {
    Box::new(move |d, r: &FrameRepr| {
        !(d == dir && r.kind == kind && r.seq.0 % 4 == at && !r.flags.contains(Flags::RETRANSMIT))
    })
}

#[test]
fn lost_reduces_and_releases_on_dpdk_wires_are_recovered_by_re_sends() {
    let eal = dpdk_common::eal("leafloss");
    let pool = dpdk_common::pool(&eal);
    let mut bed = dpdk_common::build(
        &eal,
        &pool,
        GROUP,
        vec![
            Some(lose_first(Dir::Up, Kind::Reduce, 0)),
            Some(lose_first(Dir::Down, Kind::Release, 2)),
            None,
        ],
    );
    let running = bed.start_switch();
    let leaves = std::mem::take(&mut bed.leaves);
    let cfg = Config {
        resend_timeout: Duration::from_millis(3),
        wait_timeout: Duration::from_secs(20),
        ..Config::default()
    };
    let results: Vec<(Vec<Record>, Stats)> = std::thread::scope(|s| {
        let handles: Vec<_> = leaves
            .into_iter()
            .map(|port| {
                let cfg = cfg.clone();
                s.spawn(move || {
                    let mut leaf = Session::new(port, cfg, &[GROUP]).unwrap();
                    let recs = (0..BARRIERS)
                        .map(|_| leaf.wait(GROUP).expect("released"))
                        .collect();
                    (recs, leaf.stats())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    running.stop();

    let recs: Vec<Vec<Record>> = results.iter().map(|r| r.0.clone()).collect();
    dpdk_common::assert_each_released_once_and_none_early(&recs, BARRIERS);
    let quarter = u64::from(BARRIERS / 4);
    // Exactly the chosen frames were lost, once each.
    let lost = |i: usize| {
        let d = bed.cable_drops[i].as_ref().expect("a cable");
        (d[0].load(Relaxed), d[1].load(Relaxed))
    };
    assert_eq!(lost(0), (quarter, 0));
    assert_eq!(lost(1), (0, quarter));
    // Each barrier that lost a frame was completed by a re-sent reduce: the leaf re-sent it.
    for (leaf, at) in [(0, 0), (1, 2)] {
        for r in recs[leaf].iter().filter(|r| r.seq % 4 == at) {
            assert!(r.resends >= 1, "leaf {leaf} barrier {}: {r:?}", r.seq);
        }
        assert!(
            results[leaf].1.resends >= quarter,
            "leaf {leaf}: {:?}",
            results[leaf].1
        );
    }
    for (l, (_, stats)) in results.iter().enumerate() {
        assert_eq!(stats.releases, u64::from(BARRIERS), "leaf {l}");
    }
    // A lost release is recovered by the switch answering the stale re-sent reduce with the
    // release again (RETRANSMIT) on that port.
    assert!(bed.stats.tx[1].retransmits_out.load(Relaxed) >= quarter);
    assert_eq!(
        bed.stats.rx_sum(|c| &c.outcomes[Outcome::Completed]),
        u64::from(BARRIERS)
    );
    assert_eq!(pool.in_use_count(), 0, "every mbuf back in the pool");
    drop(pool);
    eal.shutdown();
}
