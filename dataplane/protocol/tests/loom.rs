//! loom model checks of the group table's compare-and-swap algorithm: every interleaving of
//! two threads on one group. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p barrier-protocol --release --test loom`.
//! (Without `--cfg loom` this file is empty; the real-atomics stress tests live in `table.rs`.)
#![cfg(loom)]

use barrier_protocol::switch::{Action, Event, GroupConfig, Outcome, Phase};
use barrier_protocol::table::GroupTable;
use barrier_protocol::{Epoch, GroupId, PortIdx, PortSet, Seq};
use loom::sync::Arc;
use loom::thread;

const G: GroupId = GroupId(0);

fn p(i: u8) -> PortIdx {
    PortIdx::new(i).unwrap()
}

fn reduce(port: u8, seq: u32) -> Event {
    Event::Reduce {
        port: p(port),
        epoch: Epoch::DEFAULT,
        seq: Seq(seq),
    }
}

/// Runs `a` and `b` on two threads against `t`; returns their outcomes and actions.
fn race(
    t: &Arc<GroupTable>,
    a: Event,
    b: Event,
) -> [(Outcome, barrier_protocol::switch::Actions); 2] {
    let t1 = t.clone();
    let h = thread::spawn(move || t1.apply(G, a).unwrap());
    let rb = t.apply(G, b).unwrap();
    let ra = h.join().unwrap();
    [ra, rb]
}

fn completed(rs: &[(Outcome, barrier_protocol::switch::Actions)]) -> usize {
    rs.iter().filter(|(o, _)| *o == Outcome::Completed).count()
}

#[test]
fn loom_root_two_last_children_complete_once() {
    loom::model(|| {
        let t = Arc::new(GroupTable::new(1));
        t.configure(G, GroupConfig::root(PortSet(0b111))).unwrap();
        t.apply(G, reduce(2, 0)).unwrap();
        let rs = race(&t, reduce(0, 0), reduce(1, 0));
        assert_eq!(completed(&rs), 1, "{rs:?}");
        assert!(rs.iter().any(|(o, _)| *o == Outcome::Recorded));
        let st = t.state(G).unwrap();
        assert_eq!(
            (st.seq, st.arrived, st.phase),
            (Seq(1), PortSet::empty(), Phase::Collecting)
        );
    });
}

#[test]
fn loom_root_from_unknown_two_children() {
    // right after configuration (or a restart): both threads may try to adopt
    loom::model(|| {
        let t = Arc::new(GroupTable::new(1));
        t.configure(G, GroupConfig::root(PortSet(0b11))).unwrap();
        let rs = race(&t, reduce(0, 7), reduce(1, 7));
        assert_eq!(completed(&rs), 1, "{rs:?}");
        assert_eq!(t.state(G).unwrap().seq, Seq(8));
    });
}

#[test]
fn loom_root_duplicate_and_last() {
    loom::model(|| {
        let t = Arc::new(GroupTable::new(1));
        t.configure(G, GroupConfig::root(PortSet(0b11))).unwrap();
        t.apply(G, reduce(0, 3)).unwrap();
        let rs = race(&t, reduce(1, 3), reduce(1, 3));
        assert_eq!(completed(&rs), 1, "{rs:?}");
        // the loser saw either the recorded arrival or the advanced seq
        let other = rs.iter().find(|(o, _)| *o != Outcome::Completed).unwrap();
        match other.0 {
            Outcome::StaleReduce => assert_eq!(
                other.1.get(0),
                Some(&Action::SendRelease {
                    seq: Seq(3),
                    ports: PortSet::single(p(1)),
                    retransmit: true
                })
            ),
            o => panic!("unexpected {o:?}"),
        }
        assert_eq!(t.state(G).unwrap().seq, Seq(4));
    });
}

#[test]
fn loom_intermediate_two_last_children_reduce_up_once() {
    loom::model(|| {
        let t = Arc::new(GroupTable::new(1));
        t.configure(G, GroupConfig::intermediate(p(5), PortSet(0b11), 100))
            .unwrap();
        t.apply(
            G,
            Event::Release {
                port: p(5),
                epoch: Epoch::DEFAULT,
                seq: Seq(0),
            },
        )
        .unwrap(); // known state, seq 1
        let rs = race(&t, reduce(0, 1), reduce(1, 1));
        assert_eq!(completed(&rs), 1, "{rs:?}");
        let (_, acts) = rs.iter().find(|(o, _)| *o == Outcome::Completed).unwrap();
        assert_eq!(
            acts.get(0),
            Some(&Action::SendReduce {
                seq: Seq(1),
                port: p(5),
                retransmit: false
            })
        );
        let st = t.state(G).unwrap();
        assert_eq!((st.seq, st.phase), (Seq(1), Phase::AwaitingRelease));
    });
}

#[test]
fn loom_intermediate_duplicate_and_last() {
    loom::model(|| {
        let t = Arc::new(GroupTable::new(1));
        t.configure(G, GroupConfig::intermediate(p(5), PortSet(0b11), 100))
            .unwrap();
        t.apply(G, reduce(0, 4)).unwrap();
        let rs = race(&t, reduce(1, 4), reduce(1, 4));
        assert_eq!(completed(&rs), 1, "{rs:?}");
        assert!(rs.iter().any(|(o, _)| *o == Outcome::Duplicate));
    });
}

#[test]
fn loom_release_races_last_reduce_at_intermediate() {
    // the parent's release for 4 (after a restart of this switch, say) against the last child
    loom::model(|| {
        let t = Arc::new(GroupTable::new(1));
        t.configure(G, GroupConfig::intermediate(p(5), PortSet(0b11), 100))
            .unwrap();
        t.apply(G, reduce(0, 4)).unwrap();
        let rs = race(
            &t,
            reduce(1, 4),
            Event::Release {
                port: p(5),
                epoch: Epoch::DEFAULT,
                seq: Seq(4),
            },
        );
        assert_eq!(rs[1].0, Outcome::Released);
        // the reduce either completed first (then the release advanced past it) or came after
        // the release and was answered with the release it missed
        assert!(
            matches!(rs[0].0, Outcome::Completed | Outcome::StaleReduce),
            "{rs:?}"
        );
        let st = t.state(G).unwrap();
        assert_eq!((st.seq, st.phase), (Seq(5), Phase::Collecting));
    });
}

#[test]
fn loom_reconfigure_races_apply() {
    // apply runs entirely under one configuration or the other, never a mix
    loom::model(|| {
        let t = Arc::new(GroupTable::new(1));
        let old = GroupConfig::root(PortSet(0b01));
        let new = GroupConfig::intermediate(p(5), PortSet(0b11), 9);
        t.configure(G, old).unwrap();
        let t1 = t.clone();
        let h = thread::spawn(move || t1.configure(G, new).unwrap());
        let (o, acts) = t.apply(G, reduce(0, 2)).unwrap();
        h.join().unwrap();
        match o {
            // under `old`: a single-child root completes and releases port 0
            Outcome::Completed => assert_eq!(
                acts.get(0),
                Some(&Action::SendRelease {
                    seq: Seq(2),
                    ports: PortSet(0b01),
                    retransmit: false
                })
            ),
            // under `new`: one of two children recorded
            Outcome::Recorded => assert!(acts.is_empty()),
            o => panic!("{o:?}"),
        }
        // either way the configure reset the state: the group is fresh under `new`
        assert_eq!(t.config(G), Some(new));
        let st = t.state(G).unwrap();
        assert!(st.phase == Phase::Unknown || (st.phase == Phase::Collecting && st.seq == Seq(2)));
    });
}

#[test]
fn loom_reset_races_apply() {
    loom::model(|| {
        let t = Arc::new(GroupTable::new(1));
        t.configure(G, GroupConfig::root(PortSet(0b11))).unwrap();
        t.apply(G, reduce(0, 6)).unwrap();
        let t1 = t.clone();
        let h = thread::spawn(move || t1.reset_all());
        let (o, _) = t.apply(G, reduce(1, 6)).unwrap();
        h.join().unwrap();
        let st = t.state(G).unwrap();
        match o {
            // completed before the reset: the reset wiped the advanced state
            Outcome::Completed => assert_eq!(st.phase, Phase::Unknown),
            // after the reset: adopted 6 with only this child; never completed on stale arrivals
            Outcome::Recorded => {
                assert_eq!((st.seq, st.arrived), (Seq(6), PortSet(0b10)));
            }
            o => panic!("{o:?}"),
        }
    });
}

/// `apply_burst` (the RX path's one update for a burst's arrivals of one group) racing a
/// single `apply` on the same group: the burst's events are applied together, before or after
/// the other thread's event, never split by it; the barrier completes exactly once.
#[test]
fn loom_burst_races_apply() {
    loom::model(|| {
        let t = Arc::new(GroupTable::new(1));
        t.configure(G, GroupConfig::root(PortSet(0b111))).unwrap();
        // Barrier 3 completed: the group is known, collecting barrier 4.
        for c in 0..3 {
            t.apply(G, reduce(c, 3)).unwrap();
        }
        let t1 = t.clone();
        // Thread 1: child 2's reduce for barrier 4.
        let h = thread::spawn(move || t1.apply(G, reduce(2, 4)).unwrap());
        // This thread: children 0 and 1 for barrier 4, then child 0 again (a duplicate, or a
        // stale reduce if the barrier completed inside the burst).
        let mut out = [(Outcome::Duplicate, barrier_protocol::switch::Actions::new()); 3];
        t.apply_burst(G, &[reduce(0, 4), reduce(1, 4), reduce(0, 4)], &mut out)
            .unwrap();
        let single = h.join().unwrap();
        let outcomes: Vec<Outcome> = out.iter().map(|(o, _)| *o).collect();
        let mut all = out.to_vec();
        all.push(single);
        assert_eq!(completed(&all), 1, "{all:?}");
        match single.0 {
            // The single event first: the burst finds child 2 recorded and completes at its
            // second event; its third is then a stale reduce, answered with the release.
            Outcome::Recorded => assert_eq!(
                outcomes,
                [Outcome::Recorded, Outcome::Completed, Outcome::StaleReduce]
            ),
            // The burst first, whole: its third event is a duplicate; the single completes.
            Outcome::Completed => assert_eq!(
                outcomes,
                [Outcome::Recorded, Outcome::Recorded, Outcome::Duplicate]
            ),
            // Anything else would mean the burst was split (or counted twice).
            o => panic!("{o:?} beside {outcomes:?}"),
        }
        let st = t.state(G).unwrap();
        assert_eq!((st.seq, st.arrived), (Seq(5), PortSet::empty()));
        let counts = t.counts(G);
        assert_eq!(counts.completions, 2, "barrier 3 and barrier 4");
        assert_eq!(
            counts.resends,
            u32::from(single.0 == Outcome::Recorded),
            "the stale reduce's re-send counted once"
        );
    });
}
