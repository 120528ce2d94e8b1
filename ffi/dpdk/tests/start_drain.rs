//! `Port::start_all` / `discard_received`: whatever a started port holds in its RX queues is
//! freed unread (a frame that waited there since before start-up may name the wrong ingress
//! port, see the method's docs), except on a `net_pcap` port that replays a file, whose frames
//! are its input. Every mbuf goes back to the pool.

mod common;

use dpdk::{MbufBatch, Mempool, Port, QueueId};

const Q: QueueId = QueueId(0);

#[test]
fn started_ports_are_drained_and_replayed_files_are_not() {
    // A pcap file to replay, through a port given to EAL (`--vdev`) and one attached later.
    let dir = tempfile_dir();
    let input = dir.join("in.pcap");
    let frames: Vec<Vec<u8>> = (0..50).map(|s| common::barrier_frame(s).to_vec()).collect();
    common::write_pcap(&input, &frames);
    let eal = common::eal(
        "start_drain",
        &[&format!(
            "--vdev=net_pcap1,rx_pcap={},tx_pcap={}",
            input.display(),
            dir.join("out1.pcap").display()
        )],
    );
    let by_name = Port::open_by_name(&eal, "net_pcap1").unwrap();
    assert!(by_name.replays_file(), "--vdev devargs are read back");
    by_name.close().unwrap();
    let pool =
        Mempool::new_pktmbuf(&eal, "drain_pool", 2047, 32, dpdk::MBUF_DEFAULT_BUF_SIZE).unwrap();
    let all = pool.avail_count();

    // net_ring loops TX queue 0 back to RX queue 0: frames sent before the drain wait there.
    let mut ring = Port::attach_vdev(&eal, "net_ring0").unwrap();
    ring.configure(1, 1, 1024, 1024, &pool).unwrap();
    assert!(
        ring.discard_received().is_err(),
        "draining a port that is not started is refused"
    );
    ring.start().unwrap();
    assert!(!ring.replays_file());
    for round in 0..10u32 {
        let mut tx: MbufBatch<32> = MbufBatch::new();
        for i in 0..32 {
            tx.push(common::mbuf(&pool, &common::barrier_frame(round * 32 + i)))
                .unwrap();
        }
        assert_eq!(ring.tx_burst(Q, &mut tx), 32);
    }
    assert_eq!(ring.discard_received().unwrap(), 320);
    let mut rx: MbufBatch<32> = MbufBatch::new();
    assert_eq!(ring.rx_burst(Q, &mut rx), 0, "the drain left frames");
    assert_eq!(
        pool.avail_count(),
        all,
        "drained mbufs went back to the pool"
    );
    // A queue handed out to a poller is its owner's: the drain leaves it alone.
    let mut tx: MbufBatch<32> = MbufBatch::new();
    tx.push(common::mbuf(&pool, &common::barrier_frame(1)))
        .unwrap();
    assert_eq!(ring.tx_burst(Q, &mut tx), 1);
    let mut handle = ring.rx_queue(Q).unwrap();
    assert_eq!(ring.discard_received().unwrap(), 0);
    assert_eq!(handle.rx_burst(&mut rx), 1);
    rx.clear();
    drop(handle);

    // A net_pcap port replaying a file: start_all starts it and drains nothing.
    let mut pcap = Port::attach_vdev(
        &eal,
        &format!(
            "net_pcap0,rx_pcap={},tx_pcap={}",
            input.display(),
            dir.join("out.pcap").display()
        ),
    )
    .unwrap();
    assert!(pcap.replays_file());
    pcap.configure(1, 1, 512, 512, &pool).unwrap();
    let mut ports = vec![pcap];
    assert_eq!(Port::start_all(&mut ports).unwrap(), vec![0]);
    let mut got = 0;
    let mut idle = 0;
    while idle < 100 {
        let n = ports[0].rx_burst(Q, &mut rx);
        idle = if n == 0 { idle + 1 } else { 0 };
        got += n;
        rx.clear();
    }
    assert_eq!(got, frames.len(), "the replayed file arrived whole");
    for p in ports {
        p.close().unwrap();
    }
    ring.close().unwrap();
    assert_eq!(pool.avail_count(), all);
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("nb-drain-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
