//! A run of a group is one unit: the timers a run arms die with it (issue 21, reproduced as the
//! operator met it). The real `barrier-switch` on net_af_packet over veth pairs in a throw-away
//! network namespace, one root group with three children and a failure deadline (the report's
//! 800 ms, here 1.5 s for margins on a loaded machine), raw sockets as the children, management
//! over the control socket.
//!
//! Each case: the three children complete barrier 0 (its first arrival armed the deadline, F =
//! 1.5 s); the run ends (reset into a new epoch, `set` in the same epoch, or delete and create);
//! D = 0.9 s after the release one child of the new run reports barrier 0. The previous run's
//! deadline fires while the new run gathers barrier 0 with one child recorded; before the fix it
//! aborted the new run (an abort frame to every child, naming a healthy port). The window the
//! test watches ends F - D/2 = 1.05 s after the new run's first arrival: the old deadline is
//! due in it (at most F - D = 0.6 s after that arrival), the new run's own is not (F), with
//! D/2 = 0.45 s of margin on each side for a loaded machine. Then the other children complete
//! the new run's barrier 0, and the new run's own deadline still declares a silent child of
//! barrier 1: the failure declaration works right after a reuse.

mod common;

use barrier_ctl::client::Client;
use barrier_ctl::proto::{Reply, Request};
use barrier_protocol::wire::{FrameRepr, Kind};
use barrier_protocol::{Epoch, GroupId, Seq};
use barrier_testbed::netns::{can_create, VethNetns};
use common::afp::{next_frame, reduce_in, root_config, SwitchProc};
use rawsock::RawSocket;
use std::time::{Duration, Instant};

const CHILDREN: [&str; 3] = ["leaf0", "leaf1", "leaf2"];
/// The failure deadline, ms.
const F_MS: u64 = 1500;
/// From the old run's release to the new run's first arrival, ms.
const D_MS: u64 = 900;

/// How a case ends the group's first run.
#[derive(Debug, Clone, Copy)]
enum End {
    Reset,
    Set,
    DeleteCreate,
}

/// Every frame each leaf receives within `window`.
fn frames_within(leaves: &[RawSocket], window: Duration) -> Vec<(usize, FrameRepr)> {
    let until = Instant::now() + window;
    let mut got = Vec::new();
    loop {
        let mut any = false;
        for (i, l) in leaves.iter().enumerate() {
            let left = until.saturating_duration_since(Instant::now());
            if let Some(f) = next_frame(l, left.min(Duration::from_millis(20))) {
                got.push((i, f));
                any = true;
            }
        }
        if !any && Instant::now() >= until {
            return got;
        }
    }
}

/// Every leaf gets the release of `seq` in `epoch` for `group`, and nothing else.
fn released(leaves: &[RawSocket], group: u32, epoch: u32, seq: u32) {
    for (i, l) in leaves.iter().enumerate() {
        let r = next_frame(l, Duration::from_secs(5))
            .unwrap_or_else(|| panic!("leaf{i}: no release of group {group} barrier {seq}"));
        assert_eq!(
            (r.kind, r.group, r.epoch, r.seq),
            (Kind::Release, GroupId(group), Epoch(epoch), Seq(seq)),
            "leaf{i}"
        );
    }
}

fn send(leaf: &RawSocket, group: u32, epoch: u32, seq: u32) {
    leaf.send(&reduce_in(leaf.mac(), group, epoch, seq))
        .unwrap();
}

/// Ends the first run of `group` (epoch 1) as `how` says; the new run's epoch.
fn end_run(c: &mut Client, group: u32, how: End) -> u32 {
    let reply = match how {
        End::Reset => c.request(&Request::GroupReset {
            group,
            epoch: Some(2),
            force: false,
        }),
        End::Set => c.request(&Request::GroupSet {
            group,
            children: None,
            parent: None,
            root: false,
            resend_timeout_ns: None,
            fail_after_ns: Some(F_MS * 1_000_000),
        }),
        End::DeleteCreate => {
            c.request(&Request::GroupDelete { group }).unwrap();
            c.request(&Request::GroupCreate {
                group,
                children: CHILDREN.iter().map(|s| s.to_string()).collect(),
                parent: None,
                resend_timeout_ns: None,
                epoch: Some(2),
                fail_after_ns: Some(F_MS * 1_000_000),
                force: false,
            })
        }
    };
    match reply.unwrap_or_else(|e| panic!("{how:?}: {e}")) {
        Reply::Changed { epoch, .. } => epoch,
        other => panic!("{how:?}: {other:?}"),
    }
}

#[test]
fn a_timer_of_the_previous_run_never_aborts_the_next() {
    if !can_create() {
        eprintln!("SKIP: needs root and iproute2 to create a network namespace");
        return;
    }
    let bed = VethNetns::with_pairs(3).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("run.toml");
    let sock = dir.path().join("ctl.sock");
    let mut text =
        root_config(&bed, &CHILDREN, 42, &CHILDREN) + &format!("fail_after_ms = {F_MS}\n");
    for g in [43, 44] {
        text += &format!(
            "\n[[groups]]\nnumber = {g}\nrole = \"root\"\nchildren = [\"leaf0\", \"leaf1\", \"leaf2\"]\nfail_after_ms = {F_MS}\n"
        );
    }
    text += &format!(
        "\n[control]\nsocket = \"{}\"\ncapacity = 64\n",
        sock.display()
    );
    std::fs::write(&cfg, &text).unwrap();
    let leaves: Vec<RawSocket> = bed
        .pairs
        .iter()
        .map(|p| RawSocket::open_in_netns(&bed.netns, &p.1, barrier_protocol::wire::ETHERTYPE))
        .collect::<Result<_, _>>()
        .unwrap();
    let mut switch = SwitchProc::spawn(&bed, &cfg);
    switch.wait_ready();
    let mut c = Client::connect(&sock).unwrap();

    for (group, how) in [(42, End::Reset), (43, End::Set), (44, End::DeleteCreate)] {
        // The first run's barrier 0: its first arrival arms the deadline.
        for l in &leaves {
            send(l, group, 1, 0);
        }
        released(&leaves, group, 1, 0);
        let release_seen = Instant::now();
        let epoch = end_run(&mut c, group, how);

        // The new run's first arrival, D after the old run's barrier completed.
        std::thread::sleep(Duration::from_millis(D_MS));
        let first = Instant::now();
        send(&leaves[0], group, epoch, 0);
        let left = Duration::from_millis(F_MS - D_MS / 2).saturating_sub(first.elapsed());
        let seen = frames_within(&leaves, left);
        assert!(
            seen.is_empty(),
            "{how:?}: frames while the new run gathered barrier 0 ({:?} after the old release): {seen:?}",
            first - release_seen
        );
        // The new run completes barrier 0 ...
        send(&leaves[1], group, epoch, 0);
        send(&leaves[2], group, epoch, 0);
        released(&leaves, group, epoch, 0);
        // ... and its own deadline declares a child that stays silent at barrier 1.
        send(&leaves[0], group, epoch, 1);
        let r = next_frame(&leaves[0], Duration::from_secs(5))
            .unwrap_or_else(|| panic!("{how:?}: no abort for the silent children"));
        assert_eq!(
            (r.kind.to_u8(), r.group, r.epoch, r.seq),
            (3, GroupId(group), Epoch(epoch), Seq(1)),
            "{how:?}: {r:?}"
        );
        let Kind::Abort(f) = r.kind else {
            unreachable!()
        };
        assert_eq!(
            f.port, 1,
            "{how:?}: the lowest silent child port is declared"
        );
        for l in &leaves[1..] {
            let r = next_frame(l, Duration::from_secs(5)).expect("the abort to every child");
            assert_eq!((r.kind, r.seq), (Kind::Abort(f), Seq(1)));
        }
    }
    let dump = switch.counters();
    let (status, rest) = switch.stop();
    assert!(status.success(), "exit {status:?}\n{dump}\n{rest}");
    assert!(
        dump.contains("declared=3"),
        "one declaration per case:\n{dump}"
    );
    drop(bed);
}
