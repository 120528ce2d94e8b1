//! The safety hole of issue 10, case by case, through the group table a switch runs: a new
//! run of a group (a new job on a reused group number, a restarted leaf) meeting what an old
//! run left behind, in the switch's state or in the network. Each case released a barrier
//! early before groups had epochs and claim 6 was kept exactly in the known state; each test
//! here fails on that code (cases 3 and 4 were run against it; cases 1 and 2 need the epoch,
//! which that code did not have: there the new job's reduce met the old state as shown in the
//! first half of each test).

use barrier_protocol::leaf::{
    Leaf, LeafConfig, LeafState, Mismatch, ReleaseOutcome, MISMATCH_ANSWERS,
};
use barrier_protocol::switch::{Action, Event, GroupConfig, Outcome, Phase, Reject};
use barrier_protocol::table::GroupTable;
use barrier_protocol::{Epoch, GroupId, PortIdx, PortSet, Seq, Time};

const G: GroupId = GroupId(5);
const OLD: Epoch = Epoch(1);
const NEW: Epoch = Epoch(2);

fn p(i: u8) -> PortIdx {
    PortIdx::new(i).unwrap()
}

fn children() -> PortSet {
    [p(1), p(2), p(3)].into_iter().collect()
}

fn reduce(port: u8, epoch: Epoch, seq: u32) -> Event {
    Event::Reduce {
        port: p(port),
        epoch,
        seq: Seq(seq),
    }
}

fn releases(actions: &barrier_protocol::switch::Actions) -> Vec<(Seq, PortSet)> {
    actions
        .iter()
        .filter_map(|a| match *a {
            Action::SendRelease { seq, ports, .. } => Some((seq, ports)),
            _ => None,
        })
        .collect()
}

/// Case 1: the root was left at seq 1 by a previous one-barrier job. Without epochs, the new
/// job's first reduce (seq 0) is "behind", and claim 6 re-sends release 0 to that leaf, which
/// waits on 0: released before any other leaf of the new job arrived.
#[test]
fn case1_new_job_meets_a_root_left_at_seq_1() {
    let t = GroupTable::new(8);
    t.configure(G, GroupConfig::root(children()).with_epoch(OLD))
        .unwrap();
    for c in 1..=3 {
        t.apply(G, reduce(c, OLD, 0)).unwrap();
    }
    assert_eq!(t.state(G).unwrap().seq, Seq(1));
    // What the old code did with the new job's reduce, still visible in the same epoch: the
    // group's state is the old run's, and claim 6 answers with release 0.
    let (o, a) = t.apply(G, reduce(2, OLD, 0)).unwrap();
    assert_eq!(o, Outcome::StaleReduce);
    assert_eq!(releases(&a), vec![(Seq(0), PortSet::single(p(2)))]);

    // With epochs: the new job runs in a new epoch. Before management resets the group, its
    // frames are dropped (the job waits, it is not released)...
    let (o, a) = t.apply(G, reduce(2, NEW, 0)).unwrap();
    assert_eq!(o, Outcome::Rejected(Reject::OtherEpoch));
    assert!(a.is_empty());
    // ...after the reset, the group starts from Unknown in the new epoch.
    t.configure(G, GroupConfig::root(children()).with_epoch(NEW))
        .unwrap();
    let (o, a) = t.apply(G, reduce(2, NEW, 0)).unwrap();
    assert_eq!(o, Outcome::Recorded);
    assert!(a.is_empty(), "released early: {a:?}");
    // the old job's leaf still retrying changes nothing
    let (o, a) = t.apply(G, reduce(1, OLD, 1)).unwrap();
    assert_eq!(o, Outcome::Rejected(Reject::OtherEpoch));
    assert!(a.is_empty());
    // the barrier completes only when every new leaf arrived
    assert_eq!(t.apply(G, reduce(1, NEW, 0)).unwrap().0, Outcome::Recorded);
    let (o, a) = t.apply(G, reduce(3, NEW, 0)).unwrap();
    assert_eq!(o, Outcome::Completed);
    assert_eq!(releases(&a), vec![(Seq(0), children())]);
}

/// Case 2: a previous job aborted during barrier 0 with port 1 recorded; the new job's leaf
/// on port 2 reduced 0 and completed the barrier with the old job's arrival.
#[test]
fn case2_an_old_arrival_does_not_count_for_the_new_job() {
    let t = GroupTable::new(8);
    let two = [p(1), p(2)].into_iter().collect();
    t.configure(G, GroupConfig::root(two).with_epoch(OLD))
        .unwrap();
    assert_eq!(t.apply(G, reduce(1, OLD, 0)).unwrap().0, Outcome::Recorded);
    // the old code: the new job's reduce on port 2 completes barrier 0
    let t_old = GroupTable::new(8);
    t_old
        .configure(G, GroupConfig::root(two).with_epoch(OLD))
        .unwrap();
    t_old.apply(G, reduce(1, OLD, 0)).unwrap();
    assert_eq!(
        t_old.apply(G, reduce(2, OLD, 0)).unwrap().0,
        Outcome::Completed
    );
    // with the reset to a new epoch, the old arrival is gone
    t.configure(G, GroupConfig::root(two).with_epoch(NEW))
        .unwrap();
    let st = t.state(G).unwrap();
    assert_eq!((st.phase, st.arrived), (Phase::Unknown, PortSet::empty()));
    let (o, a) = t.apply(G, reduce(2, NEW, 0)).unwrap();
    assert_eq!(o, Outcome::Recorded);
    assert!(a.is_empty(), "completed with the old job's arrival: {a:?}");
}

/// Case 3: a fresh switch adopted a stale reduce from an old job's leaf; and one reduce far
/// ahead turned into a release of t-1 to every child.
#[test]
fn case3_stale_and_far_ahead_reduces_release_no_one_else() {
    let t = GroupTable::new(8);
    t.configure(G, GroupConfig::root(children()).with_epoch(NEW))
        .unwrap();
    // the old job's leaf: dropped, nothing adopted
    assert_eq!(
        t.apply(G, reduce(1, OLD, 41)).unwrap().0,
        Outcome::Rejected(Reject::OtherEpoch)
    );
    assert_eq!(t.state(G).unwrap().arrived, PortSet::empty());
    // run barrier 0 so the group is known, then barrier 1 with port 1 recorded
    for c in 1..=3 {
        t.apply(G, reduce(c, NEW, 0)).unwrap();
    }
    t.apply(G, reduce(1, NEW, 1)).unwrap();
    // one frame far ahead from port 2 (a faulty member, or a leaf restarted in this epoch)
    let (o, a) = t.apply(G, reduce(2, NEW, 1_000)).unwrap();
    assert_eq!(o, Outcome::AheadReduce);
    assert_eq!(releases(&a), vec![(Seq(0), PortSet::single(p(2)))]);
    let st = t.state(G).unwrap();
    assert_eq!(
        (st.seq, st.arrived, st.phase),
        (Seq(1), PortSet::single(p(1)), Phase::Collecting)
    );
}

/// Case 4: an intermediate that knows its barrier (waiting for the release of 0) forwarded a
/// release for 7 from its parent to every child and jumped to 8.
#[test]
fn case4_a_known_intermediate_ignores_a_release_ahead() {
    let t = GroupTable::new(8);
    t.configure(
        G,
        GroupConfig::intermediate(p(0), children(), 1_000).with_epoch(NEW),
    )
    .unwrap();
    for c in 1..=3 {
        t.apply(G, reduce(c, NEW, 0)).unwrap();
    }
    assert_eq!(t.state(G).unwrap().phase, Phase::AwaitingRelease);
    let (o, a) = t
        .apply(
            G,
            Event::Release {
                port: p(0),
                epoch: NEW,
                seq: Seq(7),
            },
        )
        .unwrap();
    assert_eq!(o, Outcome::AheadRelease);
    assert!(a.is_empty(), "forwarded: {a:?}");
    assert_eq!(t.state(G).unwrap().seq, Seq(0));
}

/// A release still queued when management resets the group carries the epoch of the
/// decision, so the new run's leaves, waiting on the same number, ignore it.
#[test]
fn a_release_decided_before_a_reset_cannot_release_the_new_run() {
    let t = GroupTable::new(8);
    t.configure(G, GroupConfig::root(children()).with_epoch(OLD))
        .unwrap();
    let mut last = None;
    for c in 1..=3 {
        last = Some(t.apply(G, reduce(c, OLD, 0)).unwrap().1);
    }
    let queued = last.unwrap();
    assert_eq!(queued.epoch(), OLD);
    t.configure(G, GroupConfig::root(children()).with_epoch(NEW))
        .unwrap();
    let mut leaf = Leaf::new(LeafConfig {
        group: G,
        epoch: NEW,
        resend_timeout_ns: 1_000,
        first_seq: Seq(0),
    });
    leaf.arrive(Time(0)).unwrap();
    let (seq, _) = releases(&queued)[0];
    assert_eq!(leaf.on_release(Time(1), queued.epoch(), seq), None);
    assert_eq!(
        leaf.on_release(Time(2), NEW, seq).map(|r| r.seq),
        Some(Seq(0))
    );
}

/// Issue 21: a second run on the same group and epoch. The first run left the root known at
/// barrier 10; claim 6 answers each of the new run's reduces for 0 with release 9, to that
/// leaf alone. Every new leaf ends its wait with a mismatch after `MISMATCH_ANSWERS` reduces
/// (the first and the re-sends), never released; the root stays where it was.
#[test]
fn a_second_run_in_the_same_epoch_ends_in_a_mismatch_not_a_hang() {
    let t = GroupTable::new(8);
    t.configure(G, GroupConfig::root(children()).with_epoch(OLD))
        .unwrap();
    for seq in 0..10 {
        for c in 1..=3 {
            t.apply(G, reduce(c, OLD, seq)).unwrap();
        }
    }
    assert_eq!(t.state(G).unwrap().seq, Seq(10));
    let mut leaves: Vec<Leaf> = (0..3)
        .map(|_| {
            Leaf::new(LeafConfig {
                group: G,
                epoch: OLD,
                resend_timeout_ns: 1_000,
                first_seq: Seq(0),
            })
        })
        .collect();
    let mut sends: Vec<_> = leaves
        .iter_mut()
        .map(|l| Some(l.arrive(Time(0)).unwrap()))
        .collect();
    let mut now = 0;
    let mut reduces = 0;
    while leaves
        .iter()
        .any(|l| matches!(l.state(), LeafState::Waiting { .. }))
    {
        for (i, leaf) in leaves.iter_mut().enumerate() {
            let Some(send) = sends[i].take() else {
                continue;
            };
            reduces += 1;
            assert!(reduces <= 3 * MISMATCH_ANSWERS, "still waiting");
            let port = i as u8 + 1;
            let (o, a) = t.apply(G, reduce(port, send.epoch, send.seq.0)).unwrap();
            assert_eq!(o, Outcome::StaleReduce);
            assert_eq!(releases(&a), vec![(Seq(9), PortSet::single(p(port)))]);
            match leaf.on_release_checked(Time(now + 1), a.epoch(), Seq(9)) {
                ReleaseOutcome::Ignored => {}
                ReleaseOutcome::Mismatched(m) => assert_eq!(
                    m,
                    Mismatch {
                        seq: Seq(0),
                        answered: Seq(9)
                    }
                ),
                ReleaseOutcome::Released(r) => panic!("leaf {i} released: {r:?}"),
            }
        }
        now += 1_000;
        for (i, leaf) in leaves.iter_mut().enumerate() {
            sends[i] = leaf.poll(Time(now));
        }
    }
    assert_eq!(
        reduces,
        3 * MISMATCH_ANSWERS,
        "each leaf: the first reduce and re-sends"
    );
    assert!(leaves.iter().all(|l| l.seq() == Seq(0)));
    assert_eq!(t.state(G).unwrap().seq, Seq(10), "the root did not move");
}

/// The case the leaf cannot tell from a lost release: the first run left the root exactly one
/// barrier ahead (at 1, as in case 1), so it answers reduce 0 with release 0, the release
/// the new leaf waits for. Only an epoch of its own per run prevents it.
#[test]
fn a_second_run_one_barrier_behind_the_root_is_not_detected() {
    let t = GroupTable::new(8);
    t.configure(G, GroupConfig::root(children()).with_epoch(OLD))
        .unwrap();
    for c in 1..=3 {
        t.apply(G, reduce(c, OLD, 0)).unwrap();
    }
    let mut leaf = Leaf::new(LeafConfig {
        group: G,
        epoch: OLD,
        resend_timeout_ns: 1_000,
        first_seq: Seq(0),
    });
    let send = leaf.arrive(Time(0)).unwrap();
    let (_, a) = t.apply(G, reduce(2, send.epoch, send.seq.0)).unwrap();
    assert_eq!(releases(&a), vec![(Seq(0), PortSet::single(p(2)))]);
    assert!(matches!(
        leaf.on_release_checked(Time(1), a.epoch(), Seq(0)),
        ReleaseOutcome::Released(_)
    ));
}
