//! `DpdkPort` on its own, over `Port::ring_pair` cables with the test playing the other end:
//! frames both ways byte for byte, the port MAC as source, a burst handed out one frame per
//! `recv` with none lost, timeouts, the EtherType filter, truncation, a full TX queue (bounded
//! retries, an error, no leaked mbuf), two leaves on two queues of one port, and every mbuf back
//! in its pool at the end. Own process, own EAL; needs root.
#![cfg(feature = "dpdk")]

mod dpdk_common;

use barrier_leaf::dpdk_transport::{DpdkOptions, DpdkPort, Idle};
use barrier_leaf::{Config, Session, Transport};
use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{GroupId, Seq};
use dpdk::{Eal, Mbuf, MbufBatch, Mempool, Port, QueueId};
use std::io;
use std::time::{Duration, Instant};

fn frame(kind: Kind, group: u32, seq: u32) -> [u8; FRAME_LEN] {
    let mut b = [0u8; FRAME_LEN];
    FrameRepr {
        dst: MacAddr::BROADCAST,
        src: MacAddr([2, 0, 0, 0, 0, 0x99]),
        kind,
        flags: Flags::empty(),
        group: GroupId(group),
        epoch: barrier_protocol::Epoch::DEFAULT,
        seq: Seq(seq),
        tx_timestamp: None,
    }
    .emit(&mut b);
    b
}

/// Sends `frames` from `port` (the switch's end) in one burst.
fn push(port: &mut Port, pool: &Mempool, frames: &[&[u8]]) {
    let mut batch: MbufBatch<32> = MbufBatch::new();
    for f in frames {
        batch.push(Mbuf::from_slice(pool, f).unwrap()).unwrap();
    }
    assert_eq!(port.tx_burst(QueueId(0), &mut batch), frames.len());
}

/// Everything waiting on `port`'s RX queue 0.
fn pull(port: &mut Port) -> Vec<Vec<u8>> {
    let mut batch: MbufBatch<32> = MbufBatch::new();
    port.rx_burst(QueueId(0), &mut batch);
    batch.drain().map(|m| m.data().to_vec()).collect()
}

#[test]
fn dpdk_port_transport() {
    let eal = dpdk_common::eal("leaftr");
    let pool = dpdk_common::pool(&eal);
    frames_both_ways_and_bursts_kept(&eal, &pool);
    assert_eq!(
        pool.in_use_count(),
        0,
        "after frames_both_ways_and_bursts_kept"
    );
    full_tx_queue_is_an_error_and_leaks_nothing(&eal, &pool);
    assert_eq!(
        pool.in_use_count(),
        0,
        "after full_tx_queue_is_an_error_and_leaks_nothing"
    );
    session_frames_carry_the_port_mac(&eal, &pool);
    assert_eq!(
        pool.in_use_count(),
        0,
        "after session_frames_carry_the_port_mac"
    );
    two_leaves_on_two_queues_of_one_port(&eal, &pool);
    assert_eq!(
        pool.in_use_count(),
        0,
        "after two_leaves_on_two_queues_of_one_port"
    );
    drop(pool);
    eal.shutdown();
}

fn frames_both_ways_and_bursts_kept(eal: &Eal, pool: &Mempool) {
    let (leaf_port, mut sw) = Port::ring_pair(eal, "ta", "tb", 1, 256).unwrap();
    let mac = leaf_port.mac_address().unwrap();
    dpdk_common::start(&mut sw, pool);
    let mut leaf = DpdkPort::start(leaf_port, pool, &DpdkOptions::default()).unwrap();
    assert_eq!(leaf.mac(), MacAddr(mac), "the source MAC is the port's");
    assert_eq!(leaf.name(), "net_ring_ta");

    // Leaf to switch, byte for byte.
    let up = frame(Kind::Reduce, 3, 41);
    leaf.send(&up).unwrap();
    assert_eq!(pull(&mut sw), vec![up.to_vec()]);

    // Nothing there: ZERO returns at once, a timeout waits at least that long.
    let mut buf = [0u8; 2048];
    assert_eq!(leaf.recv(&mut buf, Duration::ZERO).unwrap(), None);
    let t = Instant::now();
    assert_eq!(
        leaf.recv(&mut buf, Duration::from_millis(20)).unwrap(),
        None
    );
    assert!(t.elapsed() >= Duration::from_millis(20));

    // A burst of five (with a non-barrier frame in the middle) arrives in one rx_burst; each
    // recv hands out one barrier frame, in order, and none is lost between calls.
    let mut ipv4 = frame(Kind::Release, 3, 0);
    ipv4[12..14].copy_from_slice(&[0x08, 0x00]);
    let burst: Vec<[u8; FRAME_LEN]> = (0..4).map(|s| frame(Kind::Release, 3, s)).collect();
    push(
        &mut sw,
        pool,
        &[&burst[0], &burst[1], &ipv4, &burst[2], &burst[3]],
    );
    for (i, want) in burst.iter().enumerate() {
        let n = leaf.recv(&mut buf, Duration::ZERO).unwrap();
        assert_eq!(n, Some(FRAME_LEN), "frame {i}");
        assert_eq!(&buf[..FRAME_LEN], &want[..], "frame {i}");
        if i == 0 {
            assert_eq!(leaf.pending(), 4, "the rest of the burst is held");
        }
    }
    assert_eq!(leaf.recv(&mut buf, Duration::ZERO).unwrap(), None);
    let st = leaf.stats();
    assert_eq!(
        (st.rx_frames, st.rx_other, st.tx_frames),
        (4, 1, 1),
        "{st:?}"
    );

    // A frame sent while the leaf waits is picked up by that wait.
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut buf = [0u8; 2048];
            let n = leaf.recv(&mut buf, Duration::from_secs(10)).unwrap();
            (n, buf[..FRAME_LEN].to_vec())
        });
        std::thread::sleep(Duration::from_millis(10));
        push(&mut sw, pool, &[&frame(Kind::Release, 3, 9)]);
        let (n, got) = waiter.join().unwrap();
        assert_eq!(n, Some(FRAME_LEN));
        assert_eq!(got, frame(Kind::Release, 3, 9).to_vec());
    });

    // A buffer shorter than the frame gets its start; the rest is cut and counted.
    push(&mut sw, pool, &[&frame(Kind::Release, 3, 10)]);
    let mut short = [0u8; 20];
    assert_eq!(
        leaf.recv(&mut short, Duration::from_secs(1)).unwrap(),
        Some(20)
    );
    assert_eq!(short[..], frame(Kind::Release, 3, 10)[..20]);
    assert_eq!(leaf.stats().rx_truncated, 1);

    // Frames held when the transport closes go back to the pool.
    push(
        &mut sw,
        pool,
        &[&frame(Kind::Release, 3, 11), &frame(Kind::Release, 3, 12)],
    );
    assert!(leaf
        .recv(&mut buf, Duration::from_secs(1))
        .unwrap()
        .is_some());
    assert_eq!(leaf.pending(), 1);
    // A frame too long for one mbuf of the pool is refused before it reaches the queue.
    let huge = vec![0u8; usize::from(pool.data_room())];
    let err = leaf.send(&huge).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
    assert!(pull(&mut sw).is_empty());
    leaf.close().unwrap();
    sw.close().unwrap();
}

fn full_tx_queue_is_an_error_and_leaks_nothing(eal: &Eal, pool: &Mempool) {
    // A ring of 64 slots holds 63 frames; nobody reads the switch's end.
    let (leaf_port, mut sw) = Port::ring_pair(eal, "fa", "fb", 1, 64).unwrap();
    dpdk_common::start(&mut sw, pool);
    let opts = DpdkOptions {
        tx_retries: 5,
        // Yield on every empty poll: the leaves share two cores with the switch's loops.
        idle: Idle::Yield { after: 0 },
        ..DpdkOptions::default()
    };
    let mut leaf = DpdkPort::start(leaf_port, pool, &opts).unwrap();
    let f = frame(Kind::Reduce, 1, 0);
    for _ in 0..63 {
        leaf.send(&f).unwrap();
    }
    let before = pool.in_use_count();
    let err = leaf.send(&f).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock, "{err}");
    assert!(err.to_string().contains("after 6 tries"), "{err}");
    assert_eq!(
        pool.in_use_count(),
        before,
        "the refused frame's mbuf went back"
    );
    let st = leaf.stats();
    assert_eq!(
        (st.tx_frames, st.tx_full_retries, st.tx_dropped),
        (63, 5, 1),
        "{st:?}"
    );
    // Once the other end reads, sending works again.
    assert_eq!(pull(&mut sw).len(), 32);
    leaf.send(&f).unwrap();
    // The port is the transport's: its device counters are there too.
    let ps = leaf.port_stats().expect("owned port").unwrap();
    assert_eq!(ps.opackets, 64);
    leaf.close().unwrap();
    sw.close().unwrap();
}

fn session_frames_carry_the_port_mac(eal: &Eal, pool: &Mempool) {
    let (leaf_port, mut sw) = Port::ring_pair(eal, "ma", "mb", 1, 256).unwrap();
    let mac = MacAddr(leaf_port.mac_address().unwrap());
    dpdk_common::start(&mut sw, pool);
    let leaf = DpdkPort::start(leaf_port, pool, &dpdk_common::leaf_opts()).unwrap();
    let cfg = Config {
        resend_timeout: Duration::from_millis(5),
        wait_timeout: Duration::from_millis(300),
        ..Config::default()
    };
    let mut s = Session::new(leaf, cfg, &[5]).unwrap();
    // No switch answers: the wait times out (naming group and seq) after re-sending.
    let err = s.wait(5).unwrap_err().to_string();
    assert!(err.contains("group 5") && err.contains("seq 0"), "{err}");
    let sent = pull(&mut sw);
    assert!(sent.len() >= 2, "first reduce and re-sends: {}", sent.len());
    for (i, f) in sent.iter().enumerate() {
        let r = FrameRepr::parse(f).unwrap();
        assert_eq!((r.kind, r.group, r.seq), (Kind::Reduce, GroupId(5), Seq(0)));
        assert_eq!(r.src, mac, "source MAC is the port's");
        assert_eq!(r.flags.contains(Flags::RETRANSMIT), i > 0);
    }
    // The switch answers late; the same barrier completes.
    push(&mut sw, pool, &[&frame(Kind::Release, 5, 0)]);
    let rec = s.wait(5).unwrap();
    assert_eq!((rec.group, rec.seq), (5, 0));
    drop(s);
    sw.close().unwrap();
}

fn two_leaves_on_two_queues_of_one_port(eal: &Eal, pool: &Mempool) {
    // One port, two queue pairs, one leaf on each (what a host with several ranks on one NIC
    // would do): the net_ring cable keeps queue i on queue i.
    let (mut host, mut sw) = Port::ring_pair(eal, "qa", "qb", 2, 256).unwrap();
    for p in [&mut host, &mut sw] {
        p.configure(2, 2, 256, 256, pool).unwrap();
        p.start().unwrap();
    }
    let mac = MacAddr(host.mac_address().unwrap());
    let opts = dpdk_common::leaf_opts();
    let mut leaves: Vec<DpdkPort> = (0..2)
        .map(|q| {
            DpdkPort::from_queues(
                host.rx_queue(QueueId(q)).unwrap(),
                host.tx_queue(QueueId(q)).unwrap(),
                pool.clone(),
                mac,
                &opts,
            )
        })
        .collect();
    assert!(
        leaves[0].port_stats().is_none(),
        "the port is not the leaf's"
    );
    leaves[0].send(&frame(Kind::Reduce, 1, 0)).unwrap();
    leaves[1].send(&frame(Kind::Reduce, 2, 0)).unwrap();
    let mut batch: MbufBatch<8> = MbufBatch::new();
    for (q, group) in [(0u16, 1u32), (1, 2)] {
        assert_eq!(sw.rx_burst(QueueId(q), &mut batch), 1);
        let r = FrameRepr::parse(batch.pop().unwrap().data()).unwrap();
        assert_eq!(r.group, GroupId(group), "queue {q}");
        batch
            .push(Mbuf::from_slice(pool, &frame(Kind::Release, group, 0)).unwrap())
            .unwrap();
        assert_eq!(sw.tx_burst(QueueId(q), &mut batch), 1);
    }
    let mut buf = [0u8; 64];
    for (q, group) in [(0usize, 1u32), (1, 2)] {
        assert_eq!(
            leaves[q].recv(&mut buf, Duration::from_secs(1)).unwrap(),
            Some(60)
        );
        assert_eq!(FrameRepr::parse(&buf).unwrap().group, GroupId(group));
        assert_eq!(leaves[q].recv(&mut buf, Duration::ZERO).unwrap(), None);
    }
    // The port closes once the leaves let go of its queues.
    assert!(host.stop().is_err(), "queues are in use");
    for l in leaves {
        l.close().unwrap();
    }
    host.close().unwrap();
    sw.close().unwrap();
}
