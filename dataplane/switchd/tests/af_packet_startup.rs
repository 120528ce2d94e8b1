//! A child is its port from the first frame (docs/protocol.md, assumption 1): frames that reach
//! a starting barrier-switch are never counted for another port, and no release goes out before
//! every child reduced after start-up. `net_af_packet` opens each port's socket for every
//! interface and binds it to its own only later; the switch discards what its ports hold once
//! all are started (`dpdk::Port::discard_received`). Real switch processes on veth pairs; raw
//! sockets keep sending while the switch starts.

mod common;

use barrier_protocol::wire::{Kind, ETHERTYPE};
use barrier_protocol::{GroupId, Seq};
use barrier_testbed::netns::{can_create, VethNetns};
use common::afp::{next_frame, port_rx_counter, reduce, root_config, SwitchProc};
use rawsock::RawSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Sends the frames round-robin on a new socket on `iface`, one every `every`, until `stop`.
fn keep_sending(
    bed: &VethNetns,
    iface: &str,
    frames: Vec<Vec<u8>>,
    every: Duration,
    stop: Arc<AtomicBool>,
) -> JoinHandle<u64> {
    let sock = RawSocket::open_in_netns(&bed.netns, iface, ETHERTYPE).unwrap();
    std::thread::spawn(move || {
        let mut sent = 0u64;
        while !stop.load(Ordering::Relaxed) {
            sock.send(&frames[sent as usize % frames.len()]).unwrap();
            sent += 1;
            std::thread::sleep(every);
        }
        sent
    })
}

/// Fails on any release in `sock`'s queue (within `wait`).
fn assert_no_release(sock: &RawSocket, who: &str, wait: Duration) {
    if let Some(f) = next_frame(sock, wait) {
        assert_ne!(f.kind, Kind::Release, "{who} was released early: {f:?}");
    }
}

fn skip() -> bool {
    if can_create() {
        return false;
    }
    eprintln!("SKIP: needs root and iproute2 to create a network namespace");
    true
}

#[test]
fn frames_sent_before_and_during_start_stay_with_their_port() {
    if skip() {
        return;
    }
    let bed = VethNetns::with_pairs(2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("startup.toml");
    let names = ["leaf0", "leaf1"];
    std::fs::write(&cfg, root_config(&bed, &names, 5, &names)).unwrap();
    let leaf0 = RawSocket::open_in_netns(&bed.netns, &bed.pairs[0].1, ETHERTYPE).unwrap();
    let leaf1 = RawSocket::open_in_netns(&bed.netns, &bed.pairs[1].1, ETHERTYPE).unwrap();

    // Leaf 0 waits at barrier 10 and keeps re-sending its reduce, before and while the switch
    // starts: only leaf 0's link ever carries it.
    let stop = Arc::new(AtomicBool::new(false));
    let sender = keep_sending(
        &bed,
        &bed.pairs[0].1,
        vec![reduce(leaf0.mac(), 5, 10)],
        Duration::from_micros(50),
        stop.clone(),
    );
    std::thread::sleep(Duration::from_millis(100));
    let mut switch = SwitchProc::spawn(&bed, &cfg);
    let ready = switch.wait_ready();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let sent = sender.join().unwrap();

    let dump = switch.counters();
    eprintln!("{ready}\nleaf 0 sent {sent} reduces\n{dump}");
    assert_eq!(
        port_rx_counter(&dump, "leaf1", "frames"),
        0,
        "frames sent only on leaf0's link were counted on leaf1\n{dump}"
    );
    assert!(port_rx_counter(&dump, "leaf0", "reduce_in") > 0, "{dump}");
    assert_eq!(port_rx_counter(&dump, "leaf0", "completions"), 0, "{dump}");
    assert_no_release(&leaf0, "leaf0", Duration::from_millis(100));
    assert_no_release(&leaf1, "leaf1", Duration::from_millis(10));

    // Leaf 1 arrives: barrier 10 completes, both are released.
    leaf1.send(&reduce(leaf1.mac(), 5, 10)).unwrap();
    for (i, s) in [&leaf0, &leaf1].into_iter().enumerate() {
        let r = loop {
            let r = next_frame(s, Duration::from_secs(5))
                .unwrap_or_else(|| panic!("leaf{i} got no release"));
            if r.kind == Kind::Release {
                break r;
            }
        };
        assert_eq!((r.group, r.seq), (GroupId(5), Seq(10)), "leaf{i}");
    }
    let (status, rest) = switch.stop();
    assert!(status.success(), "exit {status:?}\n{rest}");
    assert!(rest.contains("mbufs back"), "{rest}");
}

#[test]
fn a_forged_flood_on_a_non_member_port_during_start_releases_nothing() {
    if skip() {
        return;
    }
    let bed = VethNetns::with_pairs(3).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("flood.toml");
    std::fs::write(
        &cfg,
        root_config(&bed, &["leaf0", "leaf1", "other"], 5, &["leaf0", "leaf1"]),
    )
    .unwrap();
    let leaf0 = RawSocket::open_in_netns(&bed.netns, &bed.pairs[0].1, ETHERTYPE).unwrap();
    let leaf1 = RawSocket::open_in_netns(&bed.netns, &bed.pairs[1].1, ETHERTYPE).unwrap();

    // A non-member floods forged reduces for group 5 at sequence numbers near and far from the
    // leaves' (a frame credited to a member port would be adopted, or complete a barrier).
    let forged: Vec<Vec<u8>> = [0u32, 1, 2, 7, 1000, u32::MAX - 1, 3, 0x8000_0000]
        .iter()
        .map(|&s| reduce([0x02, 0xee, 0, 0, 0, 1], 5, s))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let flood = keep_sending(
        &bed,
        &bed.pairs[2].1,
        forged,
        Duration::from_micros(20),
        stop.clone(),
    );
    std::thread::sleep(Duration::from_millis(100));
    let mut switch = SwitchProc::spawn(&bed, &cfg);
    switch.wait_ready();
    std::thread::sleep(Duration::from_millis(200));

    // The leaves run barriers 0, 1, 2 while the flood goes on: never released before both
    // arrived, never wedged.
    for seq in 0..3u32 {
        leaf0.send(&reduce(leaf0.mac(), 5, seq)).unwrap();
        assert_no_release(&leaf0, "leaf0", Duration::from_millis(200));
        assert_no_release(&leaf1, "leaf1", Duration::from_millis(1));
        leaf1.send(&reduce(leaf1.mac(), 5, seq)).unwrap();
        for (i, s) in [&leaf0, &leaf1].into_iter().enumerate() {
            let r = next_frame(s, Duration::from_secs(5))
                .unwrap_or_else(|| panic!("leaf{i} got no release for {seq} (wedged?)"));
            assert_eq!(
                (r.kind, r.group, r.seq),
                (Kind::Release, GroupId(5), Seq(seq)),
                "leaf{i}"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    let sent = flood.join().unwrap();
    let dump = switch.counters();
    eprintln!("flood sent {sent}\n{dump}");
    for leaf in ["leaf0", "leaf1"] {
        assert_eq!(
            port_rx_counter(&dump, leaf, "reduce_in"),
            3,
            "{leaf}\n{dump}"
        );
    }
    assert!(
        port_rx_counter(&dump, "other", "drop_not_a_child") > 0,
        "{dump}"
    );
    let (status, rest) = switch.stop();
    assert!(status.success(), "exit {status:?}\n{rest}");
}
