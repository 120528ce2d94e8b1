//! barrier-switch over net_af_packet on veth pairs in a network namespace this test creates
//! (and removes, also on failure: the namespace guard deletes it on drop). Plain Linux raw
//! sockets play two leaves: the release must come back to both, and not before both reduced.
//! The switch is the real binary with a configuration file, RX and scheduler on two lcores; it
//! prints its counters on SIGUSR1 and stops cleanly on SIGTERM.

mod common;

use barrier_protocol::wire::{Flags, Kind, ETHERTYPE};
use barrier_protocol::{GroupId, Seq};
use barrier_testbed::netns::{can_create, VethNetns};
use common::afp::{next_frame, reduce, root_config, SwitchProc};
use rawsock::RawSocket;
use std::time::Duration;

#[test]
fn raw_sockets_get_the_release_over_veth() {
    if !can_create() {
        eprintln!("SKIP: needs root and iproute2 to create a network namespace");
        return;
    }
    let bed = VethNetns::with_pairs(2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("afp.toml");
    let names = ["leaf0", "leaf1"];
    std::fs::write(&cfg, root_config(&bed, &names, 42, &names)).unwrap();

    let leaf0 = RawSocket::open_in_netns(&bed.netns, &bed.pairs[0].1, ETHERTYPE).unwrap();
    let leaf1 = RawSocket::open_in_netns(&bed.netns, &bed.pairs[1].1, ETHERTYPE).unwrap();

    let mut switch = SwitchProc::spawn(&bed, &cfg);
    let ready = switch.wait_ready();
    assert!(
        switch
            .log
            .iter()
            .any(|l| l.contains("barrier-switch: 2 ports")),
        "the start-up log line comes before {ready:?}: {:?}",
        switch.log
    );

    for seq in 0..3u32 {
        leaf0.send(&reduce(leaf0.mac(), 42, seq)).unwrap();
        // Only one of two children arrived: no release may come.
        assert!(
            next_frame(&leaf0, Duration::from_millis(200)).is_none(),
            "release before all leaves arrived"
        );
        leaf1.send(&reduce(leaf1.mac(), 42, seq)).unwrap();
        for (i, s) in [&leaf0, &leaf1].into_iter().enumerate() {
            let r = next_frame(s, Duration::from_secs(5))
                .unwrap_or_else(|| panic!("leaf{i} got no release for seq {seq}"));
            assert_eq!(
                (r.kind, r.group, r.seq),
                (Kind::Release, GroupId(42), Seq(seq)),
                "leaf{i}"
            );
        }
    }
    // A retry of an old barrier gets the old release again, to that leaf only.
    leaf1.send(&reduce(leaf1.mac(), 42, 1)).unwrap();
    let r = next_frame(&leaf1, Duration::from_secs(5)).expect("re-sent release");
    assert_eq!((r.kind, r.seq), (Kind::Release, Seq(2)));
    assert!(r.flags.contains(Flags::RETRANSMIT));
    assert!(next_frame(&leaf0, Duration::from_millis(200)).is_none());

    let dump = switch.counters();
    let (status, rest) = switch.stop();
    assert!(status.success(), "exit {status:?}\n{dump}\n{rest}");
    // Once for SIGUSR1, once at exit.
    assert!(dump.contains("completions=3"), "{dump}");
    assert!(dump.contains("stale_reduce=1"), "{dump}");
    assert!(rest.contains("== switch"), "{rest}");
    assert!(rest.contains("mbufs back"), "{rest}");
    drop(bed);
}
