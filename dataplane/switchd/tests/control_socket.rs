//! The real `barrier-switch run` with `[control] socket`: over net_af_packet on veth pairs in a
//! throw-away network namespace, raw sockets as the leaves. Through the socket a group is
//! created while group 42 and groups 100..200 (on two other ports, driven by a thread the whole
//! time) keep completing barriers, used, changed, reset and deleted; the
//! deleted group's frames are counted as `drop_unknown_group`; the running groups are written
//! back to the file; the socket is mode 0600 and goes away with the switch.

mod common;

use barrier_ctl::client::{Client, RequestError};
use barrier_ctl::proto::{Reply, Request};
use barrier_protocol::wire::Kind;
use barrier_protocol::{GroupId, Seq};
use barrier_testbed::netns::{can_create, VethNetns};
use common::afp::{next_frame, port_rx_counter, reduce, reduce_in, root_config, SwitchProc};
use rawsock::RawSocket;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Groups 100..200 on leaf2 and leaf3, barrier after barrier until `stop`: every round both
/// leaves reduce every group, and each must get exactly the release of that round for every
/// group (a lost or early release fails the round; a stall fails on the 5 s timeout).
fn run_groups(
    leaves: [RawSocket; 2],
    stop: Arc<AtomicBool>,
    rounds: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut seq = 0u32;
        while !stop.load(Relaxed) {
            for l in &leaves {
                for g in 100..200 {
                    l.send(&reduce(l.mac(), g, seq)).unwrap();
                }
            }
            for (i, l) in leaves.iter().enumerate() {
                let mut got = [false; 100];
                for _ in 0..100 {
                    let r = next_frame(l, Duration::from_secs(5))
                        .unwrap_or_else(|| panic!("leaf{}: round {seq}: releases missing", i + 2));
                    assert_eq!((r.kind, r.seq), (Kind::Release, Seq(seq)), "leaf{}", i + 2);
                    let g = r.group.0 as usize - 100;
                    assert!(!got[g], "two releases of group {} in round {seq}", g + 100);
                    got[g] = true;
                }
            }
            seq += 1;
            rounds.store(u64::from(seq), Relaxed);
        }
    })
}

fn more_rounds(rounds: &AtomicU64, n: u64) {
    let base = rounds.load(Relaxed);
    let deadline = Instant::now() + Duration::from_secs(60);
    while rounds.load(Relaxed) < base + n {
        assert!(
            Instant::now() < deadline,
            "groups 100..200 stalled at round {base}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One barrier of `group` in `epoch` for both leaves: leaf0 reduces, nothing comes; leaf1
/// reduces, both get the release.
fn barrier(leaves: &[&RawSocket; 2], group: u32, epoch: u32, seq: u32) {
    leaves[0]
        .send(&reduce_in(leaves[0].mac(), group, epoch, seq))
        .unwrap();
    assert!(
        next_frame(leaves[0], Duration::from_millis(100)).is_none(),
        "group {group}: release before leaf1 arrived"
    );
    leaves[1]
        .send(&reduce_in(leaves[1].mac(), group, epoch, seq))
        .unwrap();
    for (i, s) in leaves.iter().enumerate() {
        let r = next_frame(s, Duration::from_secs(5))
            .unwrap_or_else(|| panic!("leaf{i}: no release of group {group} barrier {seq}"));
        assert_eq!(
            (r.kind, r.group, r.seq),
            (Kind::Release, GroupId(group), Seq(seq)),
            "leaf{i}"
        );
    }
}

#[test]
fn groups_are_managed_on_a_running_switch() {
    if !can_create() {
        eprintln!("SKIP: needs root and iproute2 to create a network namespace");
        return;
    }
    let bed = VethNetns::with_pairs(4).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("ctl.toml");
    let sock = dir.path().join("ctl.sock");
    let names = ["leaf0", "leaf1", "leaf2", "leaf3"];
    let text = format!(
        "{}\n[[groups]]\nnumbers = \"100..200\"\nrole = \"root\"\nchildren = [\"leaf2\", \"leaf3\"]\n\n[control]\nsocket = \"{}\"\ncapacity = 256\n",
        root_config(&bed, &names, 42, &names[..2]),
        sock.display()
    );
    std::fs::write(&cfg, &text).unwrap();
    let leaf0 = RawSocket::open_in_netns(
        &bed.netns,
        &bed.pairs[0].1,
        barrier_protocol::wire::ETHERTYPE,
    )
    .unwrap();
    let leaf1 = RawSocket::open_in_netns(
        &bed.netns,
        &bed.pairs[1].1,
        barrier_protocol::wire::ETHERTYPE,
    )
    .unwrap();
    let leaves = [&leaf0, &leaf1];
    let others = [2, 3].map(|i| {
        RawSocket::open_in_netns(
            &bed.netns,
            &bed.pairs[i].1,
            barrier_protocol::wire::ETHERTYPE,
        )
        .unwrap()
    });

    let mut switch = SwitchProc::spawn(&bed, &cfg);
    switch.wait_ready();
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let mut c = Client::connect(&sock).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let running = run_groups(others, stop.clone(), rounds.clone());
    more_rounds(&rounds, 2);

    barrier(&leaves, 42, 1, 0);
    let r = c
        .request(&Request::GroupCreate {
            group: 9,
            children: vec!["leaf0".into(), "leaf1".into()],
            parent: None,
            resend_timeout_ns: None,
            epoch: Some(3),
            fail_after_ns: None,
            force: false,
        })
        .unwrap();
    assert!(
        matches!(
            r,
            Reply::Changed {
                group: 9,
                epoch: 3,
                ..
            }
        ),
        "{r:?}"
    );
    for seq in 0..3 {
        barrier(&leaves, 9, 3, seq);
        barrier(&leaves, 42, 1, seq + 1);
    }
    let Reply::Group { group: g } = c.request(&Request::GroupShow { group: 9 }).unwrap() else {
        panic!()
    };
    assert_eq!(
        (g.seq, g.completions, g.phase.as_str()),
        (Some(3), 3, "collecting")
    );
    // Change: leaf0 alone is the group now.
    c.request(&Request::GroupSet {
        group: 9,
        children: Some(vec!["leaf0".into()]),
        parent: None,
        root: false,
        resend_timeout_ns: None,
        fail_after_ns: None,
    })
    .unwrap();
    leaf0.send(&reduce_in(leaf0.mac(), 9, 3, 3)).unwrap();
    let r = next_frame(&leaf0, Duration::from_secs(5)).expect("leaf0 alone completes");
    assert_eq!(
        (r.kind, r.group, r.seq),
        (Kind::Release, GroupId(9), Seq(3))
    );
    // Reset: the next epoch; the group starts over, from both leaves again.
    c.request(&Request::GroupSet {
        group: 9,
        children: Some(vec!["leaf0".into(), "leaf1".into()]),
        parent: None,
        root: false,
        resend_timeout_ns: None,
        fail_after_ns: None,
    })
    .unwrap();
    let r = c
        .request(&Request::GroupReset {
            group: 9,
            epoch: None,
            force: false,
        })
        .unwrap();
    assert!(matches!(r, Reply::Changed { epoch: 4, .. }), "{r:?}");
    // The old run's leaves (epoch 3) are refused: no release, counted as drop_other_epoch.
    leaf0.send(&reduce_in(leaf0.mac(), 9, 3, 4)).unwrap();
    leaf1.send(&reduce_in(leaf1.mac(), 9, 3, 4)).unwrap();
    assert!(next_frame(&leaf0, Duration::from_millis(200)).is_none());
    assert!(next_frame(&leaf1, Duration::from_millis(1)).is_none());
    barrier(&leaves, 9, 4, 0);
    barrier(&leaves, 9, 4, 1);
    // Refusals change nothing; a group specification's comes with its code.
    for (req, code, why) in [
        (
            Request::GroupCreate {
                group: 256,
                children: vec!["leaf0".into()],
                parent: None,
                resend_timeout_ns: None,
                epoch: None,
                fail_after_ns: None,
                force: false,
            },
            None,
            "outside the table",
        ),
        (
            Request::GroupCreate {
                group: 10,
                children: vec!["leaf0".into(), "leaf7".into()],
                parent: None,
                resend_timeout_ns: None,
                epoch: None,
                fail_after_ns: None,
                force: false,
            },
            Some("unknown_port"),
            "unknown port \"leaf7\"",
        ),
    ] {
        match (c.request(&req), code) {
            (Err(RequestError::Refused { code: got, error }), want) => {
                assert_eq!(got.as_deref(), want);
                assert!(error.contains(why), "{error}");
            }
            (other, _) => panic!("{other:?}"),
        }
    }
    // Delete: the group's frames are dropped and counted.
    c.request(&Request::GroupDelete { group: 9 }).unwrap();
    leaf0.send(&reduce(leaf0.mac(), 9, 1)).unwrap();
    leaf1.send(&reduce(leaf1.mac(), 9, 1)).unwrap();
    assert!(next_frame(&leaf0, Duration::from_millis(200)).is_none());
    barrier(&leaves, 42, 1, 4);
    more_rounds(&rounds, 3);
    stop.store(true, Relaxed);
    running
        .join()
        .expect("groups 100..200 kept completing barriers");
    let counters = switch.counters();
    assert_eq!(
        port_rx_counter(&counters, "leaf0", "drop_unknown_group"),
        1,
        "{counters}"
    );
    assert_eq!(
        port_rx_counter(&counters, "leaf1", "drop_unknown_group"),
        1,
        "{counters}"
    );
    for leaf in ["leaf0", "leaf1"] {
        assert_eq!(
            port_rx_counter(&counters, leaf, "drop_other_epoch"),
            1,
            "{counters}"
        );
    }
    // Write-back: group 42 only (9 is gone), the rest of the file as it was.
    c.request(&Request::GroupCreate {
        group: 11,
        children: vec!["leaf1".into()],
        parent: None,
        resend_timeout_ns: None,
        epoch: None,
        fail_after_ns: None,
        force: false,
    })
    .unwrap();
    let r = c.request(&Request::WriteBack {}).unwrap();
    assert!(matches!(r, Reply::WrittenBack { groups: 102, .. }), "{r:?}");
    let written = std::fs::read_to_string(&cfg).unwrap();
    let spec = barrier_switch::config::parse(&written).unwrap();
    let numbers: Vec<_> = spec.groups.iter().map(|g| g.numbers.clone()).collect();
    assert_eq!(numbers, [11..12, 42..43, 100..200], "{written}");
    assert!(
        written.starts_with(text.split("[[groups]]").next().unwrap()),
        "{written}"
    );
    drop(c);
    let (status, _) = switch.stop();
    assert!(status.success(), "{status:?}");
    assert!(!sock.exists(), "the socket outlived the switch");
}
