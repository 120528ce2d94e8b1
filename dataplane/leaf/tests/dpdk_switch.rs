//! Leaves on DPDK ports against the real switch: three `Session<DpdkPort>`s, each on one end of
//! a `Port::ring_pair`, the barrier-switch's RX pollers, group table and scheduler (the switch
//! crate as a library) on the other ends, its loop on a thread of its own. Own process, own EAL;
//! needs root.
#![cfg(feature = "dpdk")]

mod dpdk_common;

use barrier_leaf::dpdk_transport::DpdkPortStats;
use barrier_leaf::{Config, Record, Session, Stats};
use barrier_protocol::switch::{Outcome, Reject};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

const GROUP: u32 = 7;
const BARRIERS: u32 = 1000;

#[test]
fn three_dpdk_leaves_complete_1000_barriers_through_the_switch() {
    let eal = dpdk_common::eal("leafsw");
    let pool = dpdk_common::pool(&eal);
    let mut bed = dpdk_common::build(&eal, &pool, GROUP, vec![None, None, None]);
    let running = bed.start_switch();
    let leaves = std::mem::take(&mut bed.leaves);
    let cfg = Config {
        // Long enough that a leaf descheduled for a while on a busy 2-core machine does not
        // re-send; re-sends have their own test (dpdk_loss.rs).
        resend_timeout: Duration::from_millis(50),
        wait_timeout: Duration::from_secs(20),
        ..Config::default()
    };
    let results: Vec<(Vec<Record>, Stats, DpdkPortStats)> = std::thread::scope(|s| {
        let handles: Vec<_> = leaves
            .into_iter()
            .map(|port| {
                let cfg = cfg.clone();
                s.spawn(move || {
                    let mut leaf = Session::new(port, cfg, &[GROUP]).unwrap();
                    let recs = (0..BARRIERS)
                        .map(|_| leaf.wait(GROUP).expect("released"))
                        .collect();
                    let tstats = leaf.transport_mut().stats();
                    (recs, leaf.stats(), tstats)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    running.stop();

    let recs: Vec<Vec<Record>> = results.iter().map(|r| r.0.clone()).collect();
    dpdk_common::assert_each_released_once_and_none_early(&recs, BARRIERS);
    for (l, (_, stats, t)) in results.iter().enumerate() {
        let n = u64::from(BARRIERS);
        assert_eq!(
            (stats.reduces, stats.releases),
            (n, n),
            "leaf {l}: {stats:?}"
        );
        assert_eq!(
            stats.bad_frames + stats.foreign_frames,
            0,
            "leaf {l}: {stats:?}"
        );
        // Every reduce and re-send went out through the TX queue, every release came in.
        assert_eq!(
            t.tx_frames,
            stats.reduces + stats.resends,
            "leaf {l}: {t:?}"
        );
        assert_eq!(
            t.rx_frames,
            stats.releases + stats.stale_releases,
            "leaf {l}: {t:?}"
        );
        assert_eq!(
            (t.tx_dropped, t.tx_no_mbuf, t.rx_other),
            (0, 0, 0),
            "leaf {l}: {t:?}"
        );
    }
    // The switch completed each barrier once and sent each leaf at least one release per
    // barrier.
    assert_eq!(
        bed.stats.rx_sum(|c| &c.outcomes[Outcome::Completed]),
        u64::from(BARRIERS)
    );
    assert_eq!(
        bed.stats
            .rx_sum(|c| &c.outcomes[Outcome::Rejected(Reject::NotAChild)])
            + bed.stats.rx_sum(|c| &c.drop_unknown_group),
        0
    );
    for (l, tx) in bed.stats.tx.iter().enumerate() {
        assert!(
            tx.release_out.load(Relaxed) >= u64::from(BARRIERS),
            "port {l}"
        );
    }
    assert_eq!(pool.in_use_count(), 0, "every mbuf back in the pool");
    drop(pool);
    eal.shutdown();
}
