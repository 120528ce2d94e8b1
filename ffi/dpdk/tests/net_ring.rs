//! End to end on `net_ring`: frames sent on a TX queue come back byte-exact on the same RX
//! queue, for bursts of 1, 32 and 10,000 frames, and every mbuf returns to the pool. Also covers
//! the mbuf operations and the batch's keep-what-was-not-sent rule on a real driver.

mod common;

use dpdk::{Mbuf, MbufBatch, Mempool, Port, QueueId};

const Q: QueueId = QueueId(0);

/// Sends `count` frames through `port` in batches and checks each comes back in order.
fn loop_frames(port: &mut Port, pool: &Mempool, count: u32) {
    let mut tx: MbufBatch<32> = MbufBatch::new();
    let mut rx: MbufBatch<64> = MbufBatch::new();
    let mut next_tx = 0u32;
    let mut next_rx = 0u32;
    let mut idle_polls = 0;
    while next_rx < count {
        while next_tx < count && !tx.is_full() {
            tx.push(common::mbuf(pool, &common::barrier_frame(next_tx)))
                .unwrap();
            next_tx += 1;
        }
        port.tx_burst(Q, &mut tx);
        let got = port.rx_burst(Q, &mut rx);
        idle_polls = if got == 0 { idle_polls + 1 } else { 0 };
        assert!(idle_polls < 1000, "stuck: {next_rx}/{count} frames back");
        for m in rx.drain() {
            assert_eq!(
                m.data(),
                &common::barrier_frame(next_rx)[..],
                "frame {next_rx} differs"
            );
            next_rx += 1;
        }
    }
    assert!(tx.is_empty());
}

#[test]
fn net_ring_end_to_end() {
    let eal = common::eal("net_ring", &["--vdev=net_ring0"]);
    let pool =
        Mempool::new_pktmbuf(&eal, "ring_pool", 4095, 32, dpdk::MBUF_DEFAULT_BUF_SIZE).unwrap();
    assert_eq!(pool.in_use_count(), 0);
    let start_avail = pool.avail_count();
    assert_eq!(start_avail, 4095);

    mbuf_operations(&pool);
    assert_eq!(pool.avail_count(), start_avail, "mbuf operations leaked");

    let names: Vec<_> = Port::list(&eal);
    assert_eq!(Port::count_avail(&eal), 1);
    let mut port = Port::open_by_name(&eal, "net_ring0").unwrap();
    assert_eq!(names, vec![port.id()]);
    port.configure(1, 1, 1024, 1024, &pool).unwrap();
    port.start().unwrap();
    assert!(port.link().unwrap().up);
    let mac = port.mac_address().unwrap();
    assert_eq!(mac[0] & 1, 0, "unicast MAC {mac:02x?}");
    port.set_promiscuous(true).unwrap();
    assert!(port.promiscuous().unwrap());

    for count in [1, 32, 10_000] {
        loop_frames(&mut port, &pool, count);
        assert_eq!(pool.avail_count(), start_avail, "after {count} frames");
    }

    unsent_frames_stay_in_batch(&mut port, &pool);
    assert_eq!(pool.avail_count(), start_avail, "after filling the ring");

    fan_out_with_clone_ref(&mut port, &pool);
    assert_eq!(pool.avail_count(), start_avail, "after clone_ref fan-out");

    port.close().unwrap();
    assert_eq!(pool.in_use_count(), 0);
    // Closing released the ethdev: the name no longer resolves.
    assert_eq!(Port::count_avail(&eal), 0);
    let err = Port::open_by_name(&eal, "net_ring0")
        .unwrap_err()
        .to_string();
    assert!(err.contains("no port named \"net_ring0\""), "{err}");

    // A vdev made at run time works the same and is removed on close, so its name is reusable.
    for round in 0..2 {
        let mut p = Port::attach_vdev(&eal, "net_ring7").unwrap();
        assert_eq!(p.name(), "net_ring7", "round {round}");
        p.configure(1, 1, 256, 256, &pool).unwrap();
        p.start().unwrap();
        loop_frames(&mut p, &pool, 100);
        p.close().unwrap();
        assert_eq!(Port::count_avail(&eal), 0);
    }
    assert_eq!(pool.in_use_count(), 0);

    ring_pair_is_a_cable(&eal, &pool);
    assert_eq!(
        pool.in_use_count(),
        0,
        "frames left in the rings went back to the pool"
    );
    drop(pool);
    eal.shutdown();
}

/// Two ports joined by rings: A's TX queue i arrives on B's RX queue i and back; frames still
/// in flight when both close are freed with the rings.
fn ring_pair_is_a_cable(eal: &dpdk::Eal, pool: &Mempool) {
    let err = Port::ring_pair(eal, "x", "y", 1, 100)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("rte_ring_create failed"),
        "size not a power of two: {err}"
    );
    let (mut a, mut b) = Port::ring_pair(eal, "a", "b", 2, 256).unwrap();
    assert_eq!((a.name(), b.name()), ("net_ring_a", "net_ring_b"));
    assert_eq!(Port::count_avail(eal), 2);
    for p in [&mut a, &mut b] {
        p.configure(2, 2, 256, 256, pool).unwrap();
        p.start().unwrap();
    }
    let mut batch: MbufBatch<8> = MbufBatch::new();
    for (from, q, seq) in [(0, 0u16, 10u32), (0, 1, 11), (1, 1, 12), (1, 0, 13)] {
        let (src, dst) = if from == 0 {
            (&mut a, &mut b)
        } else {
            (&mut b, &mut a)
        };
        batch
            .push(common::mbuf(pool, &common::barrier_frame(seq)))
            .unwrap();
        assert_eq!(src.tx_burst(QueueId(q), &mut batch), 1);
        // Nothing loops back to the sender, and nothing lands on the other queue.
        assert_eq!(src.rx_burst(QueueId(q), &mut batch), 0);
        assert_eq!(dst.rx_burst(QueueId(1 - q), &mut batch), 0);
        assert_eq!(dst.rx_burst(QueueId(q), &mut batch), 1);
        assert_eq!(batch.pop().unwrap().data(), &common::barrier_frame(seq)[..]);
    }
    // Leave three frames in flight, then close both ends.
    for s in 0..3 {
        batch
            .push(common::mbuf(pool, &common::barrier_frame(s)))
            .unwrap();
    }
    assert_eq!(a.tx_burst(QueueId(0), &mut batch), 3);
    assert_eq!(
        pool.in_use_count(),
        3,
        "net_ring RX keeps no mbufs of its own"
    );
    a.close().unwrap();
    assert_eq!(pool.in_use_count(), 3, "rings live until both ports close");
    b.close().unwrap();
    assert_eq!(Port::count_avail(eal), 0);
    // Names are free again.
    let (a, b) = Port::ring_pair(eal, "a", "b", 1, 64).unwrap();
    drop((a, b));
}

fn mbuf_operations(pool: &Mempool) {
    let mut m = Mbuf::alloc(pool).unwrap();
    assert_eq!(m.len(), 0);
    assert!(m.is_empty());
    let head = m.headroom();
    assert_eq!(head, 128);
    m.append(4).unwrap().copy_from_slice(&[1, 2, 3, 4]);
    m.prepend(2).unwrap().copy_from_slice(&[9, 8]);
    assert_eq!(m.data(), &[9, 8, 1, 2, 3, 4]);
    assert_eq!(m.pkt_len(), 6);
    assert_eq!(m.headroom(), head - 2);
    m.trim(1).unwrap();
    assert_eq!(m.data(), &[9, 8, 1, 2, 3]);
    m.adj(2).unwrap();
    assert_eq!(m.data(), &[1, 2, 3]);
    m.data_mut()[0] = 7;
    assert_eq!(m.data(), &[7, 2, 3]);
    assert!(m.trim(10).is_err());
    assert!(m.prepend(1000).is_err());
    let err = m.append(100_000).unwrap_err().to_string();
    assert!(err.contains("rte_pktmbuf_append"), "{err}");
    assert!(m.append(m.tailroom() + 1).is_err());
    assert_eq!(m.segments(), 1);

    // clone_ref shares the buffer and counts references.
    assert_eq!(m.refcnt(), 1);
    let c = m.clone_ref();
    assert_eq!(m.refcnt(), 2);
    assert!(c.is_shared());
    assert_eq!(c.data(), m.data());
    assert_eq!(c.as_ptr(), m.as_ptr());
    let before = pool.avail_count();
    drop(c);
    assert_eq!(m.refcnt(), 1);
    assert_eq!(
        pool.avail_count(),
        before,
        "dropping one of two refs must not free"
    );
    let copy = m.copy(pool).unwrap();
    assert_eq!(copy.data(), m.data());
    assert_ne!(copy.as_ptr(), m.as_ptr());
    drop(copy);
    let before = pool.avail_count();
    drop(m);
    assert_eq!(pool.avail_count(), before + 1);

    // rewrite: the packet cut to N bytes and handed out writable (a reply built in the buffer
    // of the frame it answers); refused, nothing changed, when too short or shared.
    let mut m = common::mbuf(pool, &[1, 2, 3, 4, 5, 6]);
    assert!(m.rewrite::<7>().is_none());
    assert_eq!(m.data(), &[1, 2, 3, 4, 5, 6]);
    let buf: &mut [u8; 4] = m.rewrite::<4>().unwrap();
    assert_eq!(buf, &[1, 2, 3, 4]);
    buf[0] = 9;
    assert_eq!((m.data(), m.len(), m.pkt_len()), (&[9, 2, 3, 4][..], 4, 4));
    let c = m.clone_ref();
    assert!(m.rewrite::<2>().is_none(), "a shared mbuf is not rewritten");
    assert_eq!(c.data(), &[9, 2, 3, 4]);
    drop(c);
    assert_eq!(m.rewrite::<4>().map(|b| b[0]), Some(9));
    drop(m);

    // A shared mbuf refuses mutation.
    let m = common::mbuf(pool, &[1, 2, 3]);
    let c = m.clone_ref();
    let r = common::expect_panic(move || {
        let mut m = m;
        m.data_mut()[0] = 0;
    });
    assert!(r.is_err(), "data_mut on a shared mbuf must panic");
    assert_eq!(
        c.refcnt(),
        1,
        "the panicking handle was dropped while unwinding"
    );
    drop(c);

    // Bulk allocation fills the batch; drop frees it.
    let before = pool.avail_count();
    let mut b: MbufBatch<16> = MbufBatch::new();
    b.push(common::mbuf(pool, &[5])).unwrap();
    assert_eq!(Mbuf::alloc_bulk(pool, &mut b).unwrap(), 15);
    assert!(b.is_full());
    assert_eq!(b.as_slice()[0].data(), &[5]);
    assert!(b.as_slice()[1..].iter().all(|m| m.is_empty()));
    let extra = common::mbuf(pool, &[6]);
    let extra = b.push(extra).unwrap_err();
    assert_eq!(extra.data(), &[6]);
    drop(extra);
    assert_eq!(pool.avail_count(), before - 16);
    let last = b.pop().unwrap();
    assert_eq!(b.len(), 15);
    drop(last);
    b.as_mut_slice()[0].data_mut()[0] = 9;
    assert_eq!(b.iter().next().unwrap().data(), &[9]);
    let mut drained = b.drain();
    let first = drained.next().unwrap();
    drop(drained); // the rest are freed
    assert!(b.is_empty());
    drop(first);
    drop(b);
    assert_eq!(pool.avail_count(), before);

    // Allocation failure from an exhausted pool is an error, not a panic or a null mbuf.
    let mut small = Vec::new();
    while let Ok(m) = Mbuf::alloc(pool) {
        small.push(m);
    }
    assert_eq!(pool.avail_count(), 0);
    let mut bb: MbufBatch<4> = MbufBatch::new();
    assert!(Mbuf::alloc_bulk(pool, &mut bb).is_err());
    assert!(bb.is_empty());
    drop(small);
    assert_eq!(pool.in_use_count(), 0);
}

/// net_ring's rings hold a bounded number of mbufs: once full, tx_burst takes fewer than
/// offered and the rest must stay in the batch, in order, to be sent after RX drains the ring.
fn unsent_frames_stay_in_batch(port: &mut Port, pool: &Mempool) {
    let mut tx: MbufBatch<64> = MbufBatch::new();
    let mut seq = 0u32;
    let mut sent_total = 0u32;
    loop {
        while !tx.is_full() {
            tx.push(common::mbuf(pool, &common::barrier_frame(seq)))
                .unwrap();
            seq += 1;
        }
        let offered = tx.len();
        let sent = port.tx_burst(Q, &mut tx);
        sent_total += sent as u32;
        if sent < offered {
            assert_eq!(tx.len(), offered - sent);
            // The first unsent frame is the next in sequence.
            assert_eq!(
                tx.as_slice()[0].data(),
                &common::barrier_frame(sent_total)[..]
            );
            break;
        }
        assert!(sent_total < 100_000, "ring never filled");
    }
    // Drain the ring, then send what was left; all come back in order.
    let mut rx: MbufBatch<64> = MbufBatch::new();
    let mut next = 0u32;
    fn expect(rx: &mut MbufBatch<64>, next: &mut u32) {
        for m in rx.drain() {
            assert_eq!(m.data(), &common::barrier_frame(*next)[..]);
            *next += 1;
        }
    }
    while port.rx_burst(Q, &mut rx) > 0 {
        expect(&mut rx, &mut next);
    }
    assert_eq!(next, sent_total);
    while !tx.is_empty() {
        port.tx_burst(Q, &mut tx);
        port.rx_burst(Q, &mut rx);
        expect(&mut rx, &mut next);
    }
    while port.rx_burst(Q, &mut rx) > 0 {
        expect(&mut rx, &mut next);
    }
    assert_eq!(next, seq);
}

/// One frame sent three times with clone_ref: each copy comes back, and the buffer returns to
/// the pool once, after the last reference is freed.
fn fan_out_with_clone_ref(port: &mut Port, pool: &Mempool) {
    let frame = common::barrier_frame(4242);
    let original = common::mbuf(pool, &frame);
    let mut tx: MbufBatch<4> = MbufBatch::new();
    tx.push(original.clone_ref()).unwrap();
    tx.push(original.clone_ref()).unwrap();
    tx.push(original).unwrap();
    assert_eq!(tx.as_slice()[0].refcnt(), 3);
    assert_eq!(port.tx_burst(Q, &mut tx), 3);
    let mut rx: MbufBatch<8> = MbufBatch::new();
    assert_eq!(port.rx_burst(Q, &mut rx), 3);
    assert!(rx.iter().all(|m| m.data() == frame));
    let in_use = pool.in_use_count();
    rx.clear();
    assert_eq!(
        pool.in_use_count(),
        in_use - 1,
        "three references, one buffer"
    );
}
