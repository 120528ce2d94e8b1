//! The differential test of issue 24: random event sequences (duplicates, stale and ahead
//! numbers, other epochs, non-member ports, aborts, resets, restarts) fed both to
//! `barrier_protocol::switch::on_event` and to the XDP program through BPF_PROG_TEST_RUN;
//! they must agree on every outcome, every next state and every frame sent (bytes and ports),
//! and on every timer armed (the program's ring records against `on_event`'s `ArmTimer`s).
//! Timer firings are part of the sequences: `switch::on_timer` against the program's timer
//! entry point (`XdpSwitch::fire`), on next state, frame, ports, re-arm and counters.
//! A build of the program without the epoch check, and one whose timer entry point acts on a
//! stale timer, must be caught by the same check.
//! Needs root (CAP_BPF, a namespace for the ports): skipped otherwise, failed under
//! `NB_REQUIRE_ROOT=1`.

mod common;

use barrier_bpf::RingBuffer;
use barrier_protocol::backoff::Backoff;
use barrier_protocol::switch::{Event, Fired, GroupConfig, GroupState, Run, Timer};
use barrier_protocol::wire::{Failure, FrameRepr, MacAddr, ParseError};
use barrier_protocol::{Epoch, GroupId, PortIdx, PortSet, Seq};
use barrier_xdp::timers::TimerOutcome;
use barrier_xdp::{
    XdpSwitch, BROKEN_NO_EPOCH_CHECK_OBJECT, BROKEN_STALE_TIMER_OBJECT, COUNTERS, SWITCH_OBJECT,
};
use std::cell::RefCell;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

const GROUPS: [GroupId; 2] = [GroupId(3), GroupId(9)];

/// How far from the group's current `seq` an event's number lies.
#[derive(Debug, Clone, Copy)]
enum SeqPick {
    Near(i64),
    Absolute(u32),
}

#[derive(Debug, Clone)]
enum Op {
    Frame {
        group: usize,
        kind: u8,
        port: u8,
        other_epoch: bool,
        seq: SeqPick,
        failure: ([u8; 6], u8),
        unpadded: bool,
    },
    /// Management resets the group into the next epoch: fresh state, new epoch.
    Reset { group: usize },
    /// The switch loses the group's state (a restart): fresh state, same epoch.
    Restart { group: usize },
    /// A timer fires: a re-send (`attempt` before it) or the deadline, for a barrier near the
    /// group's, armed in the current run or (`stale_run`: 1 another epoch, 2 an earlier
    /// configuration of the same epoch) another one.
    Fire {
        group: usize,
        deadline: bool,
        attempt: u32,
        seq: SeqPick,
        stale_run: u8,
    },
}

fn config() -> impl Strategy<Value = GroupConfig> {
    (
        // Any child set, or one or two children: small sets complete (and an intermediate
        // then awaits the release, where its re-send timer acts) more often.
        prop_oneof![
            1u64..(1 << common::PORTS),
            (0..common::PORTS as u32, 0..common::PORTS as u32)
                .prop_map(|(a, b)| 1u64 << a | 1 << b),
        ],
        any::<bool>(),
        any::<u8>(),
        1u32..1000,
        prop_oneof![Just(0u64), Just(1_000_000u64), Just(2_500u64)],
        prop_oneof![
            Just(Backoff::FIXED),
            Just(Backoff {
                max_ns: 8_000_000,
                jitter_pct: 20
            })
        ],
    )
        .prop_map(
            |(children, intermediate, pick, epoch, fail_after, backoff)| {
                let children = PortSet(children);
                let free: Vec<u8> = (0..common::PORTS as u8)
                    .filter(|p| !children.contains(PortIdx::new(*p).expect("port")))
                    .collect();
                let cfg = if intermediate && !free.is_empty() {
                    let parent = PortIdx::new(free[pick as usize % free.len()]).expect("port");
                    GroupConfig::intermediate(parent, children, 1_000_000)
                } else {
                    GroupConfig::root(children)
                };
                cfg.with_epoch(Epoch(epoch))
                    .with_fail_after(fail_after)
                    .with_backoff(backoff)
            },
        )
}

fn seq_pick() -> impl Strategy<Value = SeqPick> {
    prop_oneof![
        8 => (-3i64..=3).prop_map(SeqPick::Near),
        1 => prop_oneof![
            Just(1i64 << 31),
            Just((1i64 << 31) - 1),
            Just((1i64 << 31) + 1),
            Just(-(1i64 << 31)),
        ]
        .prop_map(SeqPick::Near),
        1 => any::<u32>().prop_map(SeqPick::Absolute),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let frame = (
        0..GROUPS.len(),
        prop_oneof![12 => Just(1u8), 5 => Just(2u8), 1 => Just(3u8)],
        0..common::PORTS as u8,
        prop::bool::weighted(0.1),
        seq_pick(),
        (any::<[u8; 6]>(), any::<u8>()),
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(group, kind, port, other_epoch, seq, failure, unpadded)| Op::Frame {
                group,
                kind,
                port,
                other_epoch,
                seq,
                failure,
                unpadded,
            },
        );
    let fire = (
        0..GROUPS.len(),
        any::<bool>(),
        prop_oneof![4 => Just(0u32), 2 => 1u32..5, 1 => Just(u32::MAX)],
        prop_oneof![6 => Just(SeqPick::Near(0)), 1 => (-2i64..=2).prop_map(SeqPick::Near)],
        prop_oneof![8 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
    )
        .prop_map(|(group, deadline, attempt, seq, stale_run)| Op::Fire {
            group,
            deadline,
            attempt,
            seq,
            stale_run,
        });
    prop_oneof![
        40 => frame,
        8 => fire,
        1 => (0..GROUPS.len()).prop_map(|group| Op::Reset { group }),
        1 => (0..GROUPS.len()).prop_map(|group| Op::Restart { group }),
    ]
}

/// The groups' configurations and the operations on them.
type Case = (Vec<GroupConfig>, Vec<Op>);

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(config(), GROUPS.len()),
        prop::collection::vec(op(), 1..80),
    )
}

/// Runs one case against the loaded program; the first disagreement fails it.
fn run_case(
    sw: &mut XdpSwitch,
    ring: &mut RingBuffer,
    ifindexes: &[u32],
    cfgs: &[GroupConfig],
    ops: &[Op],
    rows: &mut Vec<TimerOutcome>,
) -> Result<(), TestCaseError> {
    let mut cfgs = cfgs.to_vec();
    let mut states = vec![GroupState::fresh(); cfgs.len()];
    for (g, cfg) in cfgs.iter().enumerate() {
        sw.configure(GROUPS[g], cfg)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
    // Records of an earlier case are not this one's.
    ring.consume(|_| {})
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    for op in ops {
        match *op {
            Op::Fire {
                group,
                deadline,
                attempt,
                seq,
                stale_run,
            } => {
                let cfg = cfgs[group];
                let st = states[group];
                let (_, generation) = sw.config(GROUPS[group]).expect("configured");
                let run = match stale_run {
                    0 => Run {
                        epoch: cfg.epoch,
                        generation,
                    },
                    1 => Run {
                        epoch: Epoch(cfg.epoch.0.wrapping_add(1)),
                        generation,
                    },
                    _ => Run {
                        epoch: cfg.epoch,
                        generation: generation.wrapping_sub(1),
                    },
                };
                let seq = match seq {
                    SeqPick::Near(d) => Seq(st.seq.0.wrapping_add(d as u32)),
                    SeqPick::Absolute(s) => Seq(s),
                };
                let fired = Fired {
                    group: GROUPS[group],
                    seq,
                    timer: if deadline {
                        Timer::Deadline
                    } else {
                        Timer::Resend { attempt }
                    },
                    run,
                };
                let (next, row) = common::fire_step(sw, GROUPS[group], &cfg, st, fired)
                    .map_err(TestCaseError::fail)?;
                states[group] = next;
                rows.push(row);
            }
            Op::Reset { group } => {
                let c = &mut cfgs[group];
                *c = c.with_epoch(Epoch(c.epoch.0.wrapping_add(1)));
                sw.configure(GROUPS[group], c)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                states[group] = GroupState::fresh();
            }
            Op::Restart { group } => {
                sw.configure(GROUPS[group], &cfgs[group])
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                states[group] = GroupState::fresh();
            }
            Op::Frame {
                group,
                kind,
                port,
                other_epoch,
                seq,
                failure,
                unpadded,
            } => {
                let cfg = cfgs[group];
                let st = states[group];
                let port = PortIdx::new(port).expect("port");
                let epoch = if other_epoch {
                    Epoch(cfg.epoch.0.wrapping_add(1 + u32::from(failure.1 % 3)))
                } else {
                    cfg.epoch
                };
                let seq = match seq {
                    SeqPick::Near(d) => Seq(st.seq.0.wrapping_add(d as u32)),
                    SeqPick::Absolute(s) => Seq(s),
                };
                let ev = match kind {
                    1 => Event::Reduce { port, epoch, seq },
                    2 => Event::Release { port, epoch, seq },
                    _ => Event::Abort {
                        port,
                        epoch,
                        seq,
                        failure: Failure {
                            switch: MacAddr(failure.0),
                            port: failure.1,
                        },
                    },
                };
                let len = if unpadded { 40 } else { 60 };
                states[group] = common::step(sw, ring, ifindexes, GROUPS[group], &cfg, st, ev, len)
                    .map_err(TestCaseError::fail)?;
            }
        }
    }
    Ok(())
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

#[test]
fn the_program_agrees_with_on_event() {
    let Some(bed) = common::bed("the_program_agrees_with_on_event") else {
        return;
    };
    let result = barrier_bpf::in_netns(&bed.netns, || {
        let (sw, ifindexes) = common::switch_on(&bed, SWITCH_OBJECT);
        let ring = RefCell::new(sw.arm_ring().expect("timer ring"));
        let sw = RefCell::new(sw);
        let rows = RefCell::new(Vec::new());
        let r = runner(256).run(&case(), |(cfgs, ops)| {
            run_case(
                &mut sw.borrow_mut(),
                &mut ring.borrow_mut(),
                &ifindexes,
                &cfgs,
                &ops,
                &mut rows.borrow_mut(),
            )
        });
        let counters = sw.borrow().counters().expect("counters");
        (r, counters, rows.into_inner())
    })
    .expect("enter the namespace");
    let (result, counters, rows) = result;
    if let Err(e) = result {
        panic!("the XDP program and on_event disagree: {e}");
    }
    // Every row was exercised, not only the easy ones.
    eprintln!(
        "counters after the run: {:?}",
        counters.iter().collect::<Vec<_>>()
    );
    for name in [
        "recorded",
        "completions",
        "released_down",
        "duplicates",
        "stale_reduce",
        "stale_release",
        "ahead_reduce",
        "ahead_release",
        "aborted",
        "after_abort",
        "drop_not_a_child",
        "drop_not_the_parent",
        "drop_other_epoch",
        "timer_resends",
        "declared",
    ] {
        assert!(
            counters.get(name).unwrap_or(0) > 0,
            "no event reached {name}"
        );
    }
    assert_eq!(counters.get("tx_failed"), Some(0));
    assert_eq!(counters.get("timers_lost"), Some(0));
    // Every row of on_timer was reached too.
    let count = |o: TimerOutcome| rows.iter().filter(|r| **r == o).count();
    eprintln!(
        "timers fired: {}; nothing {}, reduce re-sent {}, abort re-sent {}, declared {}",
        rows.len(),
        count(TimerOutcome::Nothing),
        count(TimerOutcome::ResentReduce),
        count(TimerOutcome::ResentAbort),
        count(TimerOutcome::Declared)
    );
    for o in [
        TimerOutcome::Nothing,
        TimerOutcome::ResentReduce,
        TimerOutcome::ResentAbort,
        TimerOutcome::Declared,
    ] {
        assert!(count(o) > 0, "no timer reached {o:?}");
    }
}

#[test]
fn the_check_catches_a_program_without_the_epoch_check() {
    let Some(bed) = common::bed("the_check_catches_a_program_without_the_epoch_check") else {
        return;
    };
    let result = barrier_bpf::in_netns(&bed.netns, || {
        run_broken(&bed, BROKEN_NO_EPOCH_CHECK_OBJECT)
    })
    .expect("enter the namespace");
    match result {
        Err(TestError::Fail(why, ops)) => {
            eprintln!("caught, as it must be: {why}\n minimal case: {ops:?}");
            assert!(
                why.message().contains("other_epoch") || why.message().contains("OtherEpoch"),
                "the disagreement should be about the epoch: {why}"
            );
        }
        other => panic!("the differential check did not catch the broken program: {other:?}"),
    }
}

/// The differential check, on the current namespace, against a broken build.
fn run_broken(
    bed: &barrier_testbed::netns::VethNetns,
    object: &[u8],
) -> Result<(), TestError<Case>> {
    let (sw, ifindexes) = common::switch_on(bed, object);
    let ring = RefCell::new(sw.arm_ring().expect("timer ring"));
    let sw = RefCell::new(sw);
    runner(256).run(&case(), |(cfgs, ops)| {
        run_case(
            &mut sw.borrow_mut(),
            &mut ring.borrow_mut(),
            &ifindexes,
            &cfgs,
            &ops,
            &mut Vec::new(),
        )
    })
}

#[test]
fn the_check_catches_a_timer_entry_point_that_acts_on_stale_timers() {
    let Some(bed) = common::bed("the_check_catches_a_timer_entry_point_that_acts_on_stale_timers")
    else {
        return;
    };
    let result = barrier_bpf::in_netns(&bed.netns, || run_broken(&bed, BROKEN_STALE_TIMER_OBJECT))
        .expect("enter the namespace");
    match result {
        Err(TestError::Fail(why, ops)) => {
            eprintln!("caught, as it must be: {why}\n minimal case: {ops:?}");
            assert!(
                why.message().starts_with("timer "),
                "the disagreement should be about a fired timer: {why}"
            );
        }
        other => panic!("the differential check did not catch the broken program: {other:?}"),
    }
}

/// A frame damaged in one byte, cut short, or of another EtherType: the program must drop it
/// under the counter of `FrameRepr::parse`'s reason (and pass other EtherTypes to the kernel).
#[test]
fn the_program_parses_as_frame_repr_does() {
    let Some(bed) = common::bed("the_program_parses_as_frame_repr_does") else {
        return;
    };
    let result = barrier_bpf::in_netns(&bed.netns, || {
        let (mut sw0, ifindexes) = common::switch_on(&bed, SWITCH_OBJECT);
        let cfg = GroupConfig::root(PortSet(0b11));
        sw0.configure(GROUPS[0], &cfg).expect("configure");
        let sw = RefCell::new(sw0);
        let strategy = (
            0u8..4,
            any::<u32>(),
            0usize..60,
            any::<u8>(),
            14usize..=60,
            any::<u8>(),
        );
        runner(2048).run(&strategy, |(kind, seq, at, value, len, flags)| {
            let ev = match kind {
                0 | 1 => Event::Reduce {
                    port: PortIdx::new(0).expect("port"),
                    epoch: cfg.epoch,
                    seq: Seq(seq),
                },
                2 => Event::Release {
                    port: PortIdx::new(0).expect("port"),
                    epoch: cfg.epoch,
                    seq: Seq(seq),
                },
                _ => Event::Abort {
                    port: PortIdx::new(0).expect("port"),
                    epoch: cfg.epoch,
                    seq: Seq(seq),
                    failure: Failure {
                        switch: MacAddr([2, 0, 0, 0, 0, 7]),
                        port: 1,
                    },
                },
            };
            let mut frame = common::frame_for(GROUPS[0], ev, false).to_vec();
            frame[at] = value;
            if flags & 1 == 1 {
                frame[17] = flags >> 1; // flag bits, reserved ones included
            }
            frame.truncate(len);
            let parsed = FrameRepr::parse(&frame);
            let mut sw = sw.borrow_mut();
            let before = sw.counters().expect("counters");
            let run = sw.run_frame(&frame, ifindexes[0]).expect("test run");
            let after = sw.counters().expect("counters");
            let moved = |name: &str| {
                let i = COUNTERS.iter().position(|n| *n == name).expect("counter");
                after.0[i] - before.0[i]
            };
            match parsed {
                Err(ParseError::NotBarrier) => {
                    prop_assert_eq!(run.retval, barrier_bpf::xdp::PASS);
                    prop_assert_eq!(moved("pass_not_barrier"), 1);
                }
                Err(e) => {
                    prop_assert_eq!(run.retval, barrier_bpf::xdp::DROP, "{:?}", e);
                    let name = format!("drop_{}", e.reason());
                    prop_assert_eq!(moved(&name), 1, "{} for {:02x?}", name, frame);
                }
                Ok(_) => {
                    for reason in ParseError::ALL {
                        if reason == ParseError::NotBarrier {
                            continue;
                        }
                        prop_assert_eq!(moved(&format!("drop_{}", reason.reason())), 0);
                    }
                    prop_assert_eq!(moved("pass_not_barrier"), 0);
                }
            }
            // Reset the group so the next frame meets a known state.
            sw.configure(GROUPS[0], &cfg).expect("configure");
            Ok(())
        })
    })
    .expect("enter the namespace");
    if let Err(e) = result {
        panic!("the XDP program's parser and FrameRepr::parse disagree: {e}");
    }
}

#[test]
fn the_state_word_round_trips() {
    // The loader's encoding of every phase in the program's (seq, word), and back.
    for st in [
        GroupState::fresh(),
        GroupState {
            seq: Seq(7),
            arrived: PortSet(0b101),
            phase: barrier_protocol::switch::Phase::Collecting,
        },
        GroupState::aborted(
            Seq(u32::MAX),
            Failure {
                switch: MacAddr([0xfe, 1, 2, 3, 4, 5]),
                port: 0xff,
            },
            true,
        ),
    ] {
        let (seq, word) = barrier_xdp::state_to_word(st);
        assert_eq!(barrier_xdp::state_from_word(seq, word), st);
    }
}
