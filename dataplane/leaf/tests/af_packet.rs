//! Leaves on real (virtual) Ethernet: three sessions on AF_PACKET sockets, each on one end of a
//! veth pair in a throw-away network namespace, and a root switch (the protocol's switch logic)
//! on the other ends. Needs root; skipped, saying so, otherwise.

use barrier_leaf::{Config, Error, Record, Session};
use barrier_protocol::wire::{MacAddr, ETHERTYPE};
use barrier_testbed::mini_root::{MiniRoot, StopOnDrop};
use barrier_testbed::netns::{can_create, VethNetns};
use rawsock::RawSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const LEAVES: usize = 3;
const BARRIERS: usize = 200;

#[test]
fn three_leaves_over_veth_complete_every_barrier_and_none_early() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let bed = VethNetns::with_pairs(LEAVES).expect("netns + veth pairs");
    let switch_socks: Vec<RawSocket> = bed
        .pairs
        .iter()
        .map(|(_, b)| RawSocket::open_in_netns(&bed.netns, b, ETHERTYPE).unwrap())
        .collect();
    let mut root = MiniRoot::new(MacAddr(switch_socks[0].mac()));
    root.add_group(42, &[0, 1, 2]);
    let cfg = Config {
        resend_timeout: Duration::from_millis(5),
        wait_timeout: Duration::from_secs(5),
        ..Config::default()
    };

    let stop = AtomicBool::new(false);
    let results: Vec<Vec<Record>> = std::thread::scope(|s| {
        let (root, socks, stop) = (&mut root, &switch_socks, &stop);
        s.spawn(move || root.serve_sockets(socks, stop).expect("switch loop"));
        let _stop_guard = StopOnDrop(stop);
        let leaves: Vec<_> = bed
            .pairs
            .iter()
            .map(|(a, _)| {
                let sock = RawSocket::open_in_netns(&bed.netns, a, ETHERTYPE).unwrap();
                let cfg = cfg.clone();
                s.spawn(move || {
                    let mac = MacAddr(sock.mac());
                    let mut leaf = Session::new(sock, cfg, &[42]).unwrap();
                    assert_eq!(leaf.seq(42).unwrap().0, 0);
                    let recs: Vec<Record> = (0..BARRIERS).map(|_| leaf.wait(42).unwrap()).collect();
                    assert_ne!(mac, MacAddr::default());
                    recs
                })
            })
            .collect();
        let out = leaves.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        out
    });

    for recs in &results {
        assert_eq!(
            recs.iter().map(|r| r.seq).collect::<Vec<_>>(),
            (0..BARRIERS as u32).collect::<Vec<_>>()
        );
    }
    for i in 0..BARRIERS {
        let last_arrival = results.iter().map(|r| r[i].first_reduce_ns).max().unwrap();
        for r in &results {
            assert!(
                r[i].release_ns >= last_arrival,
                "barrier {i} released before the last leaf arrived"
            );
        }
    }
    assert_eq!(root.completed, BARRIERS as u64);
}

#[test]
fn a_leaf_without_a_switch_times_out_naming_group_and_seq() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let bed = VethNetns::create().expect("netns + veth");
    let sock = RawSocket::open_in_netns(&bed.netns, &bed.a, ETHERTYPE).unwrap();
    // Something listens on the far end, but it is not a switch: it only counts reduces.
    let peer = RawSocket::open_in_netns(&bed.netns, &bed.b, ETHERTYPE).unwrap();
    let cfg = Config {
        resend_timeout: Duration::from_millis(10),
        wait_timeout: Duration::from_millis(100),
        first_seq: barrier_protocol::Seq(17),
        ..Config::default()
    };
    let mut leaf = Session::new(sock, cfg, &[3]).unwrap();
    let err = leaf.wait(3).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Timeout {
                group: 3,
                seq: 17,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("group 3 barrier seq 17"), "{err}");
    let mut buf = [0u8; 128];
    let mut reduces = 0;
    while let Some(n) = peer.recv(&mut buf, Some(Duration::ZERO)).unwrap() {
        let f = barrier_protocol::wire::FrameRepr::parse(&buf[..n]).unwrap();
        assert_eq!((f.group.0, f.seq.0), (3, 17));
        reduces += 1;
    }
    // The first reduce and at least a few re-sends (10 ms timer, 100 ms wait) crossed the link.
    assert!(reduces >= 3, "{reduces} reduces");
    assert_eq!(leaf.stats().reduces + leaf.stats().resends, reduces);
}
