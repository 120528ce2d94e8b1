//! Golden test on `net_pcap`: a pcap file of barrier-like frames is replayed into a port,
//! every received frame is forwarded to TX, and the recorded file holds the same frames
//! byte-exact once the port is closed.

mod common;

use dpdk::{MbufBatch, Mempool, Port, QueueId};

const FRAMES: u32 = 300;

/// Reads the packets of a pcap file (either timestamp precision, little-endian as written on
/// this machine).
fn read_pcap(path: &std::path::Path) -> Vec<Vec<u8>> {
    let data = std::fs::read(path).unwrap();
    assert!(
        data.len() >= 24,
        "{} is too short for a pcap header",
        path.display()
    );
    let magic = u32::from_le_bytes(data[0..4].try_into().unwrap());
    assert!(
        magic == 0xa1b2_c3d4 || magic == 0xa1b2_3c4d,
        "magic {magic:#x}"
    );
    assert_eq!(
        u32::from_le_bytes(data[20..24].try_into().unwrap()),
        1,
        "link type"
    );
    let mut frames = Vec::new();
    let mut at = 24;
    while at < data.len() {
        let incl = u32::from_le_bytes(data[at + 8..at + 12].try_into().unwrap()) as usize;
        let orig = u32::from_le_bytes(data[at + 12..at + 16].try_into().unwrap()) as usize;
        assert_eq!(incl, orig, "truncated capture");
        frames.push(data[at + 16..at + 16 + incl].to_vec());
        at += 16 + incl;
    }
    assert_eq!(at, data.len());
    frames
}

#[test]
fn pcap_replay_is_byte_exact() {
    let dir = std::env::temp_dir().join(format!("nb-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.pcap");
    let output = dir.join("out.pcap");
    let frames: Vec<Vec<u8>> = (0..FRAMES)
        .map(|s| common::barrier_frame(s).to_vec())
        .collect();
    common::write_pcap(&input, &frames);
    assert_eq!(
        read_pcap(&input),
        frames,
        "the pcap writer and reader agree"
    );

    let vdev = format!(
        "--vdev=net_pcap0,rx_pcap={},tx_pcap={}",
        input.display(),
        output.display()
    );
    let eal = common::eal("net_pcap", &[&vdev]);
    let pool =
        Mempool::new_pktmbuf(&eal, "pcap_pool", 1023, 32, dpdk::MBUF_DEFAULT_BUF_SIZE).unwrap();
    let mut port = Port::open_by_name(&eal, "net_pcap0").unwrap();
    port.configure(1, 1, 512, 512, &pool).unwrap();
    port.start().unwrap();

    let q = QueueId(0);
    let mut batch: MbufBatch<32> = MbufBatch::new();
    let mut forwarded = 0u64;
    let mut idle = 0;
    // The pcap PMD reads the file once, then returns nothing.
    while idle < 100 {
        let n = port.rx_burst(q, &mut batch);
        idle = if n == 0 { idle + 1 } else { 0 };
        while !batch.is_empty() {
            forwarded += port.tx_burst(q, &mut batch) as u64;
        }
    }
    assert_eq!(forwarded, FRAMES as u64);
    let stats = port.stats().unwrap();
    assert_eq!(
        (stats.ipackets, stats.opackets),
        (FRAMES as u64, FRAMES as u64)
    );
    assert_eq!(
        (stats.ibytes, stats.obytes),
        (60 * FRAMES as u64, 60 * FRAMES as u64)
    );
    let x = port.xstats().unwrap();
    let get = |n: &str| x.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
    assert_eq!(get("rx_good_bytes"), Some(60 * FRAMES as u64), "{x:?}");
    assert_eq!(get("tx_good_packets"), Some(FRAMES as u64), "{x:?}");
    port.close().unwrap(); // closes the pcap dumper, flushing out.pcap

    assert_eq!(pool.in_use_count(), 0, "every mbuf back in the pool");
    let written = read_pcap(&output);
    assert_eq!(written.len(), frames.len());
    for (i, (w, f)) in written.iter().zip(&frames).enumerate() {
        assert_eq!(w, f, "frame {i} differs");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
