//! Failure declaration end to end: three `Session<DpdkPort>` leaves against the real switch
//! (its RX pollers, table and scheduler on DPDK ring ports), the group configured to declare a
//! child failed after 100 ms. Leaf 2 never arrives: the two waiting leaves' `wait` must end in
//! `Error::Aborted` naming the switch and port 2, not in a timeout, and no leaf is released.
//! Then management resets the group into a new epoch and all three complete barriers again.
//! Own process, own EAL; needs root.
#![cfg(feature = "dpdk")]

mod dpdk_common;

use barrier_leaf::{Config, Error, Session};
use barrier_protocol::switch::Phase;
use barrier_protocol::wire::MacAddr;
use barrier_protocol::{Epoch, GroupId};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

const GROUP: u32 = 3;
const FAIL_AFTER_NS: u64 = 100_000_000;

fn cfg(epoch: Epoch) -> Config {
    Config {
        resend_timeout: Duration::from_millis(20),
        // Far longer than the failure deadline: a timeout here means no abort arrived.
        wait_timeout: Duration::from_secs(20),
        epoch,
        ..Config::default()
    }
}

#[test]
fn a_silent_leaf_is_declared_failed_and_a_reset_recovers_the_group() {
    let eal = dpdk_common::eal("leafabort");
    let pool = dpdk_common::pool(&eal);
    let mut bed = dpdk_common::build_with(&eal, &pool, GROUP, vec![None, None, None], |c| {
        c.with_fail_after(FAIL_AFTER_NS)
    });
    let table = bed.stats.table.clone();
    let running = bed.start_switch();
    let mut leaves = std::mem::take(&mut bed.leaves);
    let silent = leaves.pop().unwrap();

    // Run 1: leaves 0 and 1 wait, leaf 2 stays silent.
    let outcomes: Vec<(Result<_, Error>, Session<_>)> = std::thread::scope(|s| {
        let handles: Vec<_> = leaves
            .into_iter()
            .map(|port| {
                s.spawn(move || {
                    let mut leaf = Session::new(port, cfg(Epoch::DEFAULT), &[GROUP]).unwrap();
                    let r = leaf.wait(GROUP);
                    (r, leaf)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut ports = Vec::new();
    for (l, (r, session)) in outcomes.into_iter().enumerate() {
        match r {
            Err(Error::Aborted {
                group,
                seq,
                switch,
                port,
            }) => {
                assert_eq!((group, seq), (GROUP, 0), "leaf {l}");
                assert_eq!(switch, MacAddr(dpdk_common::SWITCH_MAC), "leaf {l}");
                assert_eq!(port, 2, "leaf {l}: the silent leaf's port is named");
            }
            other => panic!("leaf {l}: expected an abort, got {other:?}"),
        }
        assert_eq!(session.stats().releases, 0, "leaf {l} was released");
        assert_eq!(session.stats().aborts, 1, "leaf {l}");
        // a later barrier of the aborted run fails at once, with the same error
        let mut session = session;
        assert!(matches!(session.arrive(GROUP), Err(Error::Aborted { .. })));
        ports.push(session.into_transport());
    }
    let st = table.state(GroupId(GROUP)).unwrap();
    assert_eq!(st.phase, Phase::Aborted);
    assert_eq!(st.failure().unwrap().port, 2);
    assert_eq!(running_declared(&bed), 1);

    // The silent leaf finally arrives in the old epoch: it is told about the abort too.
    let mut late = Session::new(silent, cfg(Epoch::DEFAULT), &[GROUP]).unwrap();
    assert!(matches!(
        late.wait(GROUP),
        Err(Error::Aborted { port: 2, .. })
    ));
    ports.push(late.into_transport());

    // Management resets the group: a new epoch, state fresh. All three complete 20 barriers.
    let new_epoch = Epoch::DEFAULT.next();
    let cfg2 = table.config(GroupId(GROUP)).unwrap().with_epoch(new_epoch);
    table.configure(GroupId(GROUP), cfg2).unwrap();
    let done: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = ports
            .into_iter()
            .map(|port| {
                s.spawn(move || {
                    let mut leaf = Session::new(port, cfg(new_epoch), &[GROUP]).unwrap();
                    for _ in 0..20 {
                        leaf.wait(GROUP).expect("released in the new epoch");
                    }
                    leaf.stats().releases
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(done, vec![20, 20, 20]);
    // the declaration went to every member, the silent leaf's port included
    for p in 0..3 {
        assert!(bed.stats.tx[p].abort_out.load(Relaxed) >= 1, "port {p}");
    }
    running.stop();
}

fn running_declared(bed: &dpdk_common::Bed) -> u64 {
    bed.stats.sched.declared.load(Relaxed)
}
