//! Every input the fuzzing campaign found failing a check (`docs/reliability.md`, "Fuzzing",
//! "Findings"), as a regular test: the input itself (`findings/`) through the target's check,
//! and the behaviour it showed pinned down directly.

use barrier_fuzz_check::{config, events, frame};
use barrier_protocol::switch::{on_event, Action, Event, GroupState, Outcome, Phase};
use barrier_protocol::wire::{FrameRepr, ParseError};
use barrier_protocol::{Epoch, PortIdx, PortSet, Seq};

/// Finding 1 (parse_frame): a header whose ones' complement sum is 0xFFFF verifies with either
/// zero in the checksum field, 0x0000 or 0xFFFF; `emit` writes 0x0000. The check's round trip
/// demanded the very bytes back; the parser is right (RFC 1071 arithmetic has two zeros) and
/// the check now accepts the other zero. The wire format does not change.
#[test]
fn finding_1_checksum_has_two_zeros() {
    let data = include_bytes!("findings/parse_frame-checksum-ffff.bin");
    frame::check(data);
    let repr = FrameRepr::parse(data).expect("0xFFFF verifies");
    assert_eq!(&data[38..40], &[0xff, 0xff]);
    let bytes = repr.to_bytes();
    assert_eq!(&bytes[38..40], &[0, 0], "emit writes the other zero");
    assert_eq!(FrameRepr::parse(&bytes), Ok(repr));
    // any other checksum value is still refused
    let mut bad = data.to_vec();
    bad[39] = 0xfe;
    assert_eq!(FrameRepr::parse(&bad), Err(ParseError::BadChecksum));
}

fn p(i: u8) -> PortIdx {
    PortIdx::new(i).unwrap()
}

/// Finding 2 (switch_events): an intermediate that is `Unknown` and has gathered a child's
/// reduce for `s` took its parent's release for an older barrier `t` (here `s - 2`) at its
/// word (restart rule 4): it forwarded release `t` to every child and became known at `t + 1`,
/// behind the barrier its children are at, then answered their reduces for `s` with release
/// `t` (claim 6) and waited for `t + 1`, which they had passed, until a management reset. Safe,
/// not live; it needed a frame older than the restart (liveness assumption 7 of
/// `docs/protocol.md`). The guard (`switch::on_event`, row "release t from the parent, t+1
/// behind s" of `Unknown`): while `Unknown` with arrivals at `s`, a parent release for `t` with
/// `t + 1` behind `s` is stale, counted `StaleRelease` and ignored, as a lost frame would be.
/// The child at `s` is recorded as before and the barrier completes from its children. The
/// fuzzer's seq-monotonicity check (`events`, invariant 8) has no exception for it any more.
#[test]
fn finding_2_stale_parent_release_in_unknown_is_ignored() {
    // The campaign's input (its bytes decode differently since the harness learned aborts)
    // and the case written for the current decoder: a reduce for 0 from child 4 of group 1,
    // then the parent's release for 0 - 2. Without the guard the second fails invariant 8.
    events::check(include_bytes!(
        "findings/switch_events-stale-parent-release.bin"
    ));
    events::check(include_bytes!(
        "findings/switch_events-stale-parent-release-2.bin"
    ));
    let cfg = events::PRESETS[1]; // intermediate, parent 0, children 2 and 4
    let e = Epoch::DEFAULT;
    let s = Seq(u32::MAX - 1);
    let (st, o, _) = on_event(
        &cfg,
        GroupState::fresh(),
        Event::Reduce {
            port: p(4),
            epoch: e,
            seq: s,
        },
    );
    assert_eq!(
        (st.phase, st.seq, o),
        (Phase::Unknown, s, Outcome::Recorded)
    );
    let t = s.prev().prev();
    let (st2, o, acts) = on_event(
        &cfg,
        st,
        Event::Release {
            port: p(0),
            epoch: e,
            seq: t,
        },
    );
    assert_eq!(
        (st2, o),
        (st, Outcome::StaleRelease),
        "the stale release moved the state"
    );
    assert!(acts.is_empty(), "the stale release was forwarded: {acts:?}");
    // the other child's reduce for s completes the barrier: the reduce goes up
    let (st3, o, acts) = on_event(
        &cfg,
        st2,
        Event::Reduce {
            port: p(2),
            epoch: e,
            seq: s,
        },
    );
    assert_eq!(o, Outcome::Completed);
    assert_eq!((st3.phase, st3.seq), (Phase::AwaitingRelease, s));
    assert_eq!(
        acts.iter().next().copied(),
        Some(Action::SendReduce {
            seq: s,
            port: p(0),
            retransmit: false
        })
    );
    // and the parent's release for s - 1 (t + 1 = s) is still taken while Unknown: it
    // proves s - 1 and reaches any child still waiting on it
    let (st4, o, acts) = on_event(
        &cfg,
        st,
        Event::Release {
            port: p(0),
            epoch: e,
            seq: s.prev(),
        },
    );
    assert_eq!(o, Outcome::Released);
    assert_eq!(
        (st4.phase, st4.seq, st4.arrived),
        (Phase::Collecting, s, PortSet::empty())
    );
    assert_eq!(
        acts.iter().copied().collect::<Vec<_>>(),
        vec![Action::SendRelease {
            seq: s.prev(),
            ports: cfg.children,
            retransmit: false
        }]
    );
}

/// Finding 3 (config): a control character in a comment (here NUL bytes in the first comment
/// of an example configuration) was refused with an empty reason: toml's error has no message
/// for it, and the operator read only "line 2: ". `config::parse_raw` now names the character
/// and its column when toml says nothing (`dataplane/switch/src/config.rs`).
#[test]
fn finding_3_control_character_in_a_comment_is_named() {
    let data = include_bytes!("findings/config-nul-in-comment.toml");
    config::check(data);
    let e = barrier_switch::config::parse(std::str::from_utf8(data).unwrap()).unwrap_err();
    assert_eq!(e.line, Some(2));
    assert!(e.reason.contains("U+0000 at column 43"), "{e}");
    for (text, line, what) in [
        ("#\0\n", 1, "U+0000 at column 2"),
        ("a = 1\n# x\u{7}y\n", 2, "U+0007 at column 4"),
    ] {
        let e = barrier_switch::config::parse(text).unwrap_err();
        assert_eq!(e.line, Some(line), "{text:?}");
        assert!(e.reason.contains(what), "{text:?}: {e}");
    }
}

/// Finding 4 (config, 8.8 M executions): an EAL lcore list with a huge range
/// (`-l 99949-0491414532`) was expanded into a vector of every number in it: 45 s, then out of
/// memory (9 GB resident when replayed), for a file that EAL would refuse at once. The list is
/// kept as ranges now (`config::eal_lcore_list`); the file is refused quickly, naming the
/// scheduler lcore that is not in the list, as the list was written.
#[test]
fn finding_4_a_huge_eal_lcore_range_is_not_expanded() {
    let data = include_bytes!("findings/config-huge-lcore-range.toml");
    config::check(data);
    // The input is not UTF-8 (a byte 0xF3 in a vdev name); the target reads it lossily.
    let e = barrier_switch::config::parse(&String::from_utf8_lossy(data)).unwrap_err();
    assert_eq!(e.key, "lcores.scheduler", "{e}");
    assert!(e.reason.contains("\"99949-0491414532\""), "{e}");
}

/// Issue 21 (found by an operator, written for this harness): a timer outlived the run of its
/// group. Root group 0 (children 1, 2, 3, `fail_after` 4 µs) records child 1's reduce for
/// barrier 0, which arms a deadline; then the group is configured anew (into the next epoch,
/// the same epoch as `group set` does, or its state is lost as in a restart); the new run's
/// child 1 reports barrier 0; time passes both deadlines. The first run's deadline found the new
/// run gathering barrier 0 with one child and declared child 2 failed: the new run aborted
/// before it began. Timers now carry their run (`switch::Run`: epoch and the table's
/// configuration generation) and fire only into it; invariant 9 of `events` checks it for every
/// timer of every input.
#[test]
fn finding_5_a_deadline_of_the_previous_run_does_not_abort_the_next() {
    events::check(include_bytes!(
        "findings/switch_events-deadline-of-previous-run.bin"
    ));
    events::check(include_bytes!(
        "findings/switch_events-deadline-before-set.bin"
    ));
    events::check(include_bytes!(
        "findings/switch_events-deadline-before-restart.bin"
    ));
}
