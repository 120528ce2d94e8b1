//! Port counters: after sending and receiving known frames on `net_ring`, `stats()` and
//! `xstats()` read back exactly those counts, and `reset_stats()` zeroes them. The RX side runs
//! on a worker lcore through an `RxQueue` handle, as the switch's RX lcores will.

mod common;

use dpdk::{launch_on, LcoreId, MbufBatch, Mempool, Port, PortStats, QueueId};

fn xstat(x: &[(String, u64)], name: &str) -> u64 {
    x.iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no xstat {name} in {x:?}"))
        .1
}

#[test]
fn stats_and_xstats_count_what_was_sent() {
    let eal = common::eal("port_stats", &["-l", "0,1", "--vdev=net_ring0"]);
    let pool =
        Mempool::new_pktmbuf(&eal, "stats_pool", 2047, 32, dpdk::MBUF_DEFAULT_BUF_SIZE).unwrap();
    let mut port = Port::open(&eal, Port::id_by_name(&eal, "net_ring0").unwrap()).unwrap();
    assert_eq!(format!("{:?}", port.id()), "port0");
    port.configure(2, 2, 512, 512, &pool).unwrap();
    port.start().unwrap();
    port.reset_stats().unwrap();
    assert_eq!(port.stats().unwrap(), PortStats::default());

    // 100 frames of 60 bytes on queue 0 and 50 of 100 bytes on queue 1, received by lcore 1.
    let rx0 = port.rx_queue(QueueId(0)).unwrap();
    let rx1 = port.rx_queue(QueueId(1)).unwrap();
    assert!(port.rx_queue(QueueId(0)).is_err(), "one handle per queue");
    assert!(port.rx_queue(QueueId(2)).is_err(), "queue 2 not configured");
    let receiver = launch_on(&eal, LcoreId(1), move || {
        let (mut rx0, mut rx1) = (rx0, rx1);
        let mut got = [0u64; 2];
        let mut bytes = 0u64;
        let mut batch: MbufBatch = MbufBatch::new();
        let deadline = dpdk::tsc() + 10 * dpdk::tsc_hz();
        while got != [100, 50] && dpdk::tsc() < deadline {
            for (i, q) in [&mut rx0, &mut rx1].into_iter().enumerate() {
                got[i] += q.rx_burst(&mut batch) as u64;
                bytes += batch.iter().map(|m| m.len() as u64).sum::<u64>();
                batch.clear();
            }
        }
        (got, bytes)
    })
    .unwrap();

    let mut tx0 = port.tx_queue(QueueId(0)).unwrap();
    assert!(
        port.stop().is_err(),
        "stop refused while queue handles live"
    );
    let mut batch: MbufBatch<50> = MbufBatch::new();
    for round in 0..2 {
        for s in 0..50 {
            batch
                .push(common::mbuf(&pool, &common::barrier_frame(round * 50 + s)))
                .unwrap();
        }
        while !batch.is_empty() {
            tx0.tx_burst(&mut batch);
        }
    }
    drop(tx0);
    for _ in 0..50 {
        batch.push(common::mbuf(&pool, &[0xAB; 100])).unwrap();
    }
    while !batch.is_empty() {
        port.tx_burst(QueueId(1), &mut batch);
    }
    let (got, bytes) = receiver.join().unwrap();
    assert_eq!(got, [100, 50]);
    assert_eq!(bytes, 100 * 60 + 50 * 100);

    let s = port.stats().unwrap();
    assert_eq!(s.opackets, 150);
    assert_eq!(s.ipackets, 150);
    // net_ring counts packets only (its byte counters stay 0 in 22.11); byte counts are checked
    // on net_pcap in tests/net_pcap.rs.
    assert_eq!((s.imissed, s.ierrors, s.oerrors, s.rx_nombuf), (0, 0, 0, 0));

    let x = port.xstats().unwrap();
    assert_eq!(xstat(&x, "rx_good_packets"), 150);
    assert_eq!(xstat(&x, "tx_good_packets"), 150);
    assert_eq!(xstat(&x, "rx_q0_packets"), 100);
    assert_eq!(xstat(&x, "rx_q1_packets"), 50);
    assert_eq!(xstat(&x, "tx_q0_packets"), 100);
    assert_eq!(xstat(&x, "tx_q1_packets"), 50);

    port.reset_stats().unwrap();
    assert_eq!(port.stats().unwrap(), PortStats::default());
    assert!(port.xstats().unwrap().iter().all(|(_, v)| *v == 0));

    // The handles went with the closure, so the port can stop and close now.
    port.stop().unwrap();
    port.close().unwrap();
    assert_eq!(pool.in_use_count(), 0);
}
