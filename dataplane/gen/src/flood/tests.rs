//! The flood's frames against a real barrier-switch (the library's RX pollers, table and
//! scheduler, on in-memory wires): every class parses, and is refused for the reason intended,
//! on the port kind it is meant for; the check finds what it must.

use super::*;
use barrier_protocol::switch::GroupConfig;
use barrier_protocol::wire::ParseError;
use barrier_protocol::PortSet;
use barrier_runtime::io::{mem_wire, MemRx, MemTx, RxQueue, TxQueue};
use barrier_runtime::poll::Poller;
use barrier_switch::engine::{build_switch, build_table, PortIo};
use barrier_switch::spec::GroupBlock;
use std::sync::Arc;

/// Switch ports: c0 and c1 are children of the member groups 0..8; c1 alone of the foreign
/// groups 8..12; x (port 2) is named by no group. The table holds 0..12; 12.. is unknown.
const MEMBERS: Range<u32> = 0..8;
const FOREIGN: Range<u32> = 8..12;

fn groups() -> FloodGroups {
    FloodGroups {
        members: MEMBERS,
        foreign: FOREIGN,
        table: FOREIGN.end,
        unknown: FOREIGN.end..FOREIGN.end + 100,
        epoch: 1,
    }
}

struct Sw {
    pollers: Vec<Box<dyn Poller>>,
    stats: SwitchStats,
    /// The sending end of each switch port, and the receiving end of what it sends.
    into: Vec<MemTx>,
    out: Vec<MemRx>,
}

/// The switch above; `foreign_children` are the foreign groups' children (a broken variant
/// puts c0 among them).
fn switch(foreign_children: u64) -> Sw {
    let mut io = Vec::new();
    let (mut into, mut out) = (Vec::new(), Vec::new());
    for (i, name) in ["c0", "c1", "x"].iter().enumerate() {
        let (tx_in, rx_in) = mem_wire(4096);
        let (tx_out, rx_out) = mem_wire(4096);
        io.push(PortIo {
            name: name.to_string(),
            rx: vec![rx_in],
            tx: tx_out,
            peer_mac: [2, 0, 0, 0, 1, i as u8],
            mac: None,
        });
        into.push(tx_in);
        out.push(rx_out);
    }
    let table = Arc::new(
        build_table(&[
            GroupBlock {
                numbers: MEMBERS,
                config: GroupConfig::root(PortSet(0b11)),
            },
            GroupBlock {
                numbers: FOREIGN,
                config: GroupConfig::root(PortSet(foreign_children)),
            },
        ])
        .unwrap(),
    );
    let sw = build_switch("sut", [2, 0, 0, 0, 0, 1], io, table, 0);
    let mut pollers: Vec<Box<dyn Poller>> = sw.rx.into_iter().map(|(_, _, p)| p).collect();
    pollers.push(sw.sched);
    Sw {
        pollers,
        stats: sw.stats,
        into,
        out,
    }
}

impl Sw {
    fn send(&mut self, port: usize, frame: &[u8]) {
        self.into[port].offer(frame).unwrap();
        self.into[port].flush();
    }
    fn settle(&mut self) {
        for _ in 0..100 {
            for p in &mut self.pollers {
                p.poll(1_000);
            }
        }
    }
    fn all_states(&self) -> Vec<Option<GroupState>> {
        states(&self.stats, 0..FOREIGN.end + 100)
    }
    fn sent_anything(&mut self) -> usize {
        let mut n = 0;
        for rx in &mut self.out {
            let mut v = Vec::new();
            rx.rx_burst(&mut v, 4096);
            n += v.len();
        }
        n
    }
}

#[test]
fn classes_by_target_and_what_counts_them() {
    assert_eq!(
        classes_for(Target::NonMember, &groups()),
        [FloodClass::NonMemberReduce, FloodClass::NonMemberRelease]
    );
    assert_eq!(
        classes_for(Target::Member, &groups()),
        [
            FloodClass::ChildRelease,
            FloodClass::OtherEpoch,
            FloodClass::ForeignGroup,
            FloodClass::UnknownGroup
        ]
    );
    let none = FloodGroups {
        foreign: 0..0,
        unknown: 0..0,
        ..groups()
    };
    assert_eq!(
        classes_for(Target::Member, &none),
        [FloodClass::ChildRelease, FloodClass::OtherEpoch]
    );
    for &c in FloodClass::ALL {
        assert!(c.counter().name().starts_with("drop_"), "{c:?}");
        assert_eq!(FloodClass::ALL[c.index()], c);
    }
    assert!(FloodSource::new(
        Target::Member,
        FloodGroups {
            members: 0..0,
            ..groups()
        },
        1,
        [2; 6],
        [0xff; 6]
    )
    .is_err());
}

#[test]
fn every_frame_parses_and_names_what_its_class_says() {
    for target in [Target::NonMember, Target::Member] {
        let mut s = FloodSource::new(target, groups(), 7, [2, 0, 0, 0, 0, 9], [0xff; 6]).unwrap();
        let mut seen = [0u64; 6];
        let mut buf = [0u8; FRAME_LEN];
        for i in 0..4000 {
            assert_eq!(s.peek(), s.classes()[i % s.classes().len()], "in turn");
            let c = s.build(&mut buf);
            seen[c.index()] += 1;
            let r = FrameRepr::parse(&buf).unwrap_or_else(|e| panic!("{c:?}: {e:?}"));
            assert_eq!(r.kind, c.kind(), "{c:?}");
            assert_eq!(r.src, MacAddr([2, 0, 0, 0, 0, 9]));
            let g = r.group.0;
            match c {
                FloodClass::NonMemberReduce | FloodClass::NonMemberRelease => {
                    assert!(g < FOREIGN.end);
                    assert_eq!(r.epoch, Epoch(1));
                }
                FloodClass::ChildRelease => {
                    assert!(MEMBERS.contains(&g));
                    assert_eq!(r.epoch, Epoch(1));
                }
                FloodClass::OtherEpoch => {
                    assert!(MEMBERS.contains(&g));
                    assert_ne!(r.epoch, Epoch(1));
                }
                FloodClass::ForeignGroup => {
                    assert!(FOREIGN.contains(&g));
                    assert_eq!(r.epoch, Epoch(1));
                }
                FloodClass::UnknownGroup => assert!(groups().unknown.contains(&g)),
            }
        }
        let n = s.classes().len() as u64;
        for c in s.classes() {
            assert_eq!(seen[c.index()], 4000 / n, "{c:?}: an even share");
        }
    }
}

/// Sends `n` frames of a source to `port`; returns what was sent per class.
fn flood(sw: &mut Sw, target: Target, port: usize, n: usize) -> ClassCounts {
    let mut s = FloodSource::new(target, groups(), port as u64, [2; 6], [0xff; 6]).unwrap();
    let mut sent = [0u64; 6];
    let mut buf = [0u8; FRAME_LEN];
    for _ in 0..n {
        let c = s.build(&mut buf);
        sent[c.index()] += 1;
        sw.send(port, &buf);
    }
    sw.settle();
    sent
}

#[test]
fn each_class_is_refused_by_barrier_switch_for_its_reason_and_changes_nothing() {
    let mut sw = switch(0b10);
    let before = sw.all_states();
    let foreign_before = states(&sw.stats, FOREIGN);
    // The member port c0, then the non-member port x, each class on its own first.
    let mut expect = Vec::new();
    for (target, port, name) in [(Target::Member, 0, "c0"), (Target::NonMember, 2, "x")] {
        let sent = flood(&mut sw, target, port, 1000);
        for c in classes_for(target, &groups()) {
            assert!(sent[c.index()] > 0, "{c:?}");
        }
        expect.push(PortExpect {
            switch_port: port,
            name: name.into(),
            nonmember: target == Target::NonMember,
            sent,
        });
    }
    let check = check_switch(&sw.stats, &expect, &foreign_before, FOREIGN, 0, 0);
    assert!(check.ok, "{}", check.text());
    // Every class landed in its own counter, nothing else was counted on c0 but the classes.
    let not_a_child = RxCount::Outcome(Outcome::Rejected(Reject::NotAChild));
    let not_the_parent = RxCount::Outcome(Outcome::Rejected(Reject::NotTheParent));
    for (port, counter, n) in [
        (0, not_the_parent, 250),
        (
            0,
            RxCount::Outcome(Outcome::Rejected(Reject::OtherEpoch)),
            250,
        ),
        (0, not_a_child, 250),
        (0, RxCount::UnknownGroup, 250),
        (0, RxCount::Frames, 1000),
        (2, not_a_child, 500),
        (2, not_the_parent, 500),
        (2, RxCount::Frames, 1000),
    ] {
        assert_eq!(
            rx_counter(&sw.stats, port, counter),
            n,
            "{port} {counter:?}"
        );
    }
    for o in [
        Outcome::Recorded,
        Outcome::Completed,
        Outcome::Duplicate,
        Outcome::StaleReduce,
    ] {
        assert_eq!(rx_counter(&sw.stats, 0, RxCount::Outcome(o)), 0, "{o:?}");
    }
    assert_eq!(rx_counter(&sw.stats, 1, RxCount::Frames), 0);
    for e in ParseError::ALL {
        assert_eq!(rx_counter(&sw.stats, 0, RxCount::Parse(e)), 0, "{e:?}");
    }
    assert_eq!(sw.all_states(), before, "no group changed");
    assert_eq!(sw.sent_anything(), 0, "the switch sent nothing");
}

#[test]
fn the_check_fails_when_a_class_is_not_refused_or_a_count_is_off() {
    // Broken variant: c0 is a child of the foreign groups, so their reduces are recorded.
    let mut sw = switch(0b11);
    let foreign_before = states(&sw.stats, FOREIGN);
    let sent = flood(&mut sw, Target::Member, 0, 400);
    let expect = [PortExpect {
        switch_port: 0,
        name: "c0".into(),
        nonmember: false,
        sent,
    }];
    let check = check_switch(&sw.stats, &expect, &foreign_before, FOREIGN, 0, 0);
    assert!(!check.ok, "{}", check.text());
    assert!(check.foreign_changed > 0, "{}", check.text());
    assert!(
        check
            .problems
            .iter()
            .any(|p| p.contains("drop_not_a_child")),
        "{}",
        check.text()
    );
    // A sound switch, but counts that do not add up: one frame more claimed than sent.
    let mut sw = switch(0b10);
    let foreign_before = states(&sw.stats, FOREIGN);
    let mut sent = flood(&mut sw, Target::NonMember, 2, 100);
    sent[FloodClass::NonMemberRelease.index()] += 1;
    let expect = [PortExpect {
        switch_port: 2,
        name: "x".into(),
        nonmember: true,
        sent,
    }];
    let check = check_switch(&sw.stats, &expect, &foreign_before, FOREIGN, 0, 0);
    assert!(!check.ok);
    assert_eq!(check.problems.len(), 3, "{}", check.text()); // frames, release_in, the class
                                                             // Completions that differ, and frames left unsent, fail it too.
    let check = check_switch(&sw.stats, &[], &foreign_before, FOREIGN, 1, 0);
    assert!(!check.ok && check.problems[0].contains("completed"));
    let check = check_switch(&sw.stats, &[], &foreign_before, FOREIGN, 0, 3);
    assert!(!check.ok && check.problems[0].contains("queued"));
}

#[test]
fn typed_rx_counters_carry_the_switch_names() {
    let n = |c: RxCount| c.name();
    assert_eq!(n(RxCount::Frames), "frames");
    assert_eq!(n(RxCount::ReduceIn), "reduce_in");
    assert_eq!(n(RxCount::ReleaseIn), "release_in");
    assert_eq!(n(RxCount::Outcome(Outcome::Completed)), "completions");
    assert_eq!(n(RxCount::Outcome(Outcome::Recorded)), "recorded");
    assert_eq!(
        n(RxCount::Outcome(Outcome::Rejected(Reject::NotAChild))),
        "drop_not_a_child"
    );
    assert_eq!(
        n(RxCount::Parse(ParseError::BadChecksum)),
        "drop_bad_checksum"
    );
    assert_eq!(n(RxCount::UnknownGroup), "drop_unknown_group");
    assert_eq!(n(RxCount::Policed), "drop_policed");
    // The non-member sweep covers what the name-based one did: every `drop_` counter the
    // switch prints, `recorded` and `completions`, each once.
    let swept: Vec<&str> = RxCount::refusals_and_progress()
        .into_iter()
        .map(RxCount::name)
        .collect();
    let mut want: Vec<&str> = RxCounters::NAMES
        .iter()
        .copied()
        .filter(|n| n.starts_with("drop_") || *n == "recorded" || *n == "completions")
        .collect();
    let mut got = swept.clone();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
}
