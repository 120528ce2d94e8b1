//! Issue 21 end to end: three `Session<DpdkPort>` leaves against the real switch (its RX
//! pollers, table and scheduler on DPDK ring ports). A first job runs ten barriers; a second
//! job opens the same group in the same epoch from seq 0. The switch, known at barrier 10,
//! answers every reduce 0 with release 9: each second-job `wait` must end in
//! `Error::EpochInUse` within a few re-send periods (not the wait timeout), and no leaf of it
//! is released. Then management resets the group into a new epoch, and the second job, opened
//! with it, completes its barriers. Own process, own EAL; needs root.
#![cfg(feature = "dpdk")]

mod dpdk_common;

use barrier_leaf::{Config, Error, Record, Session};
use barrier_protocol::leaf::MISMATCH_ANSWERS;
use barrier_protocol::switch::Outcome;
use barrier_protocol::{Epoch, GroupId, Seq};
use std::time::{Duration, Instant};

const GROUP: u32 = 7;
const BARRIERS: u32 = 10;
const RESEND: Duration = Duration::from_millis(20);

fn cfg(epoch: Epoch) -> Config {
    Config {
        resend_timeout: RESEND,
        // Far longer than the detection: a timeout here means the mismatch went unseen.
        wait_timeout: Duration::from_secs(20),
        epoch,
        ..Config::default()
    }
}

/// Runs `BARRIERS` barriers on every port; returns each leaf's records and its port back.
fn job<T: barrier_leaf::Transport + Send>(
    ports: Vec<T>,
    epoch: Epoch,
) -> (Vec<Vec<Record>>, Vec<T>) {
    std::thread::scope(|s| {
        let handles: Vec<_> = ports
            .into_iter()
            .map(|port| {
                s.spawn(move || {
                    let mut leaf = Session::new(port, cfg(epoch), &[GROUP]).unwrap();
                    let recs = (0..BARRIERS)
                        .map(|_| leaf.wait(GROUP).expect("released"))
                        .collect::<Vec<_>>();
                    (recs, leaf.into_transport())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).unzip()
    })
}

#[test]
fn a_second_job_in_the_same_epoch_fails_fast_and_a_new_epoch_runs_it() {
    let eal = dpdk_common::eal("leafepoch");
    let pool = dpdk_common::pool(&eal);
    let mut bed = dpdk_common::build(&eal, &pool, GROUP, vec![None, None, None]);
    let table = bed.stats.table.clone();
    let running = bed.start_switch();
    let ports = std::mem::take(&mut bed.leaves);
    let completed = |bed: &dpdk_common::Bed| bed.stats.rx_sum(|c| &c.outcomes[Outcome::Completed]);

    // Job 1: ten barriers, the group's epoch 1.
    let (recs, ports) = job(ports, Epoch::DEFAULT);
    dpdk_common::assert_each_released_once_and_none_early(&recs, BARRIERS);
    assert_eq!(table.state(GroupId(GROUP)).unwrap().seq, Seq(BARRIERS));
    assert_eq!(completed(&bed), u64::from(BARRIERS));

    // Job 2, same group, same epoch, from seq 0: every leaf is told, none is released.
    let outcomes: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = ports
            .into_iter()
            .map(|port| {
                s.spawn(move || {
                    let mut leaf = Session::new(port, cfg(Epoch::DEFAULT), &[GROUP]).unwrap();
                    let started = Instant::now();
                    let r = leaf.wait(GROUP);
                    let took = started.elapsed();
                    // final: a second try fails at once, the same way
                    let again = leaf.wait(GROUP);
                    (r, again, took, leaf.stats(), leaf.into_transport())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut ports = Vec::new();
    for (l, (r, again, took, stats, port)) in outcomes.into_iter().enumerate() {
        match &r {
            Err(Error::EpochInUse {
                group,
                epoch,
                seq,
                answered,
            }) => assert_eq!(
                (*group, *epoch, *seq, *answered),
                (GROUP, 1, 0, BARRIERS - 1),
                "leaf {l}"
            ),
            other => panic!("leaf {l}: expected EpochInUse, got {other:?}"),
        }
        let msg = r.unwrap_err().to_string();
        assert!(
            msg.starts_with(
                "group 7 epoch 1: the switch answers barrier 0 with the release of barrier 9: \
                 the group was used by an earlier run in this epoch; reset the group's run on \
                 every switch of its tree"
            ),
            "leaf {l}: {msg}"
        );
        assert!(matches!(again, Err(Error::EpochInUse { .. })), "leaf {l}");
        // MISMATCH_ANSWERS answers: the first reduce's and the re-sends', one period apart;
        // a few periods of slack for a busy 2-core machine.
        let bound = RESEND * (MISMATCH_ANSWERS + 10);
        assert!(took < bound, "leaf {l}: took {took:?}, bound {bound:?}");
        assert_eq!(stats.releases, 0, "leaf {l} was released: {stats:?}");
        assert!(
            stats.stale_releases >= u64::from(MISMATCH_ANSWERS),
            "leaf {l}: {stats:?}"
        );
        ports.push(port);
    }
    // The second job moved nothing at the switch.
    assert_eq!(table.state(GroupId(GROUP)).unwrap().seq, Seq(BARRIERS));
    assert_eq!(completed(&bed), u64::from(BARRIERS));

    // The fix the error names: a new epoch on the switch, the leaves opened with it.
    let new_epoch = Epoch::DEFAULT.next();
    let cfg2 = table.config(GroupId(GROUP)).unwrap().with_epoch(new_epoch);
    table.configure(GroupId(GROUP), cfg2).unwrap();
    let (recs, ports) = job(ports, new_epoch);
    dpdk_common::assert_each_released_once_and_none_early(&recs, BARRIERS);
    assert_eq!(completed(&bed), 2 * u64::from(BARRIERS));
    running.stop();
    drop(ports);
    assert_eq!(pool.in_use_count(), 0, "every mbuf back in the pool");
    drop(pool);
    eal.shutdown();
}
