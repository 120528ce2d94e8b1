//! The `barrier-leaf` CLI on a DPDK port (`EAL ARGS -- --dpdk-port NAME ...`). `net_pcap`
//! replays the switch's side from a pcap file and records what the leaf sent, so those runs are
//! byte-exact and need no switch (a pcap replays all its frames at once, so each does one
//! barrier); `net_af_packet` on a veth pair in a throw-away namespace runs many barriers against
//! a root switch (the protocol's switch logic on a raw socket) on the other end. Each CLI run is
//! its own process with its own EAL; needs root.
#![cfg(feature = "dpdk")]

use barrier_leaf::records::parse_records;
use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, ETHERTYPE, FRAME_LEN};
use barrier_protocol::{GroupId, Seq};
use barrier_testbed::mini_root::{MiniRoot, StopOnDrop};
use barrier_testbed::netns::{can_create, VethNetns};
use rawsock::RawSocket;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};

const EXE: &str = env!("CARGO_BIN_EXE_barrier-leaf");

fn tmp(tag: &str, ext: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "barrier-leaf-dpdk-cli-{}-{tag}.{ext}",
        std::process::id()
    ))
}

fn release(group: u32, seq: u32) -> Vec<u8> {
    let mut b = vec![0u8; FRAME_LEN];
    FrameRepr {
        dst: MacAddr::BROADCAST,
        src: MacAddr([2, 0x5e, 0, 0, 0, 0xee]),
        kind: Kind::Release,
        flags: Flags::empty(),
        group: GroupId(group),
        epoch: barrier_protocol::Epoch::DEFAULT,
        seq: Seq(seq),
        tx_timestamp: None,
    }
    .emit(&mut b);
    b
}

/// Writes a classic pcap file (microseconds, Ethernet) holding `frames`.
fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut out = Vec::new();
    out.extend(0xa1b2_c3d4u32.to_le_bytes());
    out.extend(2u16.to_le_bytes());
    out.extend(4u16.to_le_bytes());
    out.extend([0u8; 8]); // thiszone, sigfigs
    out.extend(65535u32.to_le_bytes());
    out.extend(1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    for (i, f) in frames.iter().enumerate() {
        out.extend(1u32.to_le_bytes());
        out.extend((i as u32).to_le_bytes());
        out.extend((f.len() as u32).to_le_bytes());
        out.extend((f.len() as u32).to_le_bytes());
        out.extend(f);
    }
    std::fs::write(path, out).unwrap();
}

/// The frames of a pcap file (either timestamp precision; little-endian, as written here).
fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap();
    let magic = u32::from_le_bytes(b[0..4].try_into().unwrap());
    assert!(
        magic == 0xa1b2_c3d4 || magic == 0xa1b2_3c4d,
        "pcap magic {magic:#x}"
    );
    let mut frames = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let len = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        frames.push(b[at + 16..at + 16 + len].to_vec());
        at += 16 + len;
    }
    frames
}

/// Runs the CLI on a net_pcap port replaying `rx` and recording to `tx`.
fn run_pcap(tag: &str, rx: &Path, tx: &Path, args: &[&str]) -> Output {
    let vdev = format!(
        "--vdev=net_pcap0,rx_pcap={},tx_pcap={}",
        rx.display(),
        tx.display()
    );
    let eal = dpdk::test_args(tag, &["--log-level=*:warning", &vdev]);
    Command::new(EXE)
        .args(&eal[1..])
        .arg("--")
        .args(["--dpdk-port", "net_pcap0"])
        .args(args)
        .output()
        .unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {stdout:?} stderr {:?}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn one_barrier_over_net_pcap_with_json_and_records() {
    let (rx, tx, records) = (tmp("ok-rx", "pcap"), tmp("ok-tx", "pcap"), tmp("ok", "csv"));
    // An ARP frame first: the transport drops it by EtherType, the session never sees it.
    let mut arp = release(7, 41);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    write_pcap(&rx, &[arp, release(7, 41)]);
    let out = run_pcap(
        "leafcli-ok",
        &rx,
        &tx,
        &[
            "-g",
            "7",
            "-n",
            "1",
            "--first-seq",
            "41",
            "--dpdk-idle",
            "yield",
            "--json",
            "--records",
            records.to_str().unwrap(),
        ],
    );
    let j = json(&out);
    assert!(out.status.success(), "{j}");
    assert_eq!(j["iface"], "net_pcap0");
    assert_eq!(
        (j["completed"].as_u64(), j["first_seq"].as_u64()),
        (Some(1), Some(41))
    );
    assert_eq!(j["stats"]["releases"], 1);
    assert_eq!(
        j["stats"]["bad_frames"], 0,
        "the ARP frame was filtered: {j}"
    );
    assert!(j["error"].is_null());
    let recs = parse_records(&std::fs::read_to_string(&records).unwrap()).unwrap();
    assert_eq!(
        recs.iter().map(|r| (r.group, r.seq)).collect::<Vec<_>>(),
        vec![(7, 41)]
    );
    // What the leaf sent, as recorded by net_pcap (closed, so flushed, when the CLI exits).
    let sent = read_pcap(&tx);
    assert!(!sent.is_empty());
    let src = FrameRepr::parse(&sent[0]).unwrap().src;
    assert_ne!(src, MacAddr::BROADCAST);
    for (i, f) in sent.iter().enumerate() {
        let r = FrameRepr::parse(f).unwrap();
        assert_eq!(
            (r.kind, r.group, r.seq),
            (Kind::Reduce, GroupId(7), Seq(41))
        );
        assert_eq!(r.src, src, "every frame carries the port's MAC");
        assert_eq!(r.flags.contains(Flags::RETRANSMIT), i > 0);
    }
    for p in [rx, tx, records] {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn no_release_times_out_naming_group_and_seq_after_re_sends() {
    let (rx, tx) = (tmp("to-rx", "pcap"), tmp("to-tx", "pcap"));
    // Only another group's release comes.
    write_pcap(&rx, &[release(8, 0)]);
    let out = run_pcap(
        "leafcli-to",
        &rx,
        &tx,
        &[
            "-g",
            "7",
            "-n",
            "3",
            "--resend-us",
            "10000",
            "--timeout-us",
            "100000",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let j = json(&out);
    assert_eq!(j["completed"], 0);
    assert_eq!(j["stats"]["foreign_frames"], 1);
    let err = j["error"].as_str().unwrap();
    assert!(err.contains("group 7 barrier seq 0"), "{err}");
    let sent = read_pcap(&tx);
    assert!(sent.len() >= 3, "first reduce and re-sends: {}", sent.len());
    assert!(sent[1..].iter().all(|f| FrameRepr::parse(f)
        .unwrap()
        .flags
        .contains(Flags::RETRANSMIT)));
    for p in [rx, tx] {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn setup_errors_exit_with_the_reason() {
    // EAL and the port failing are device errors (status 1); a refused command line is 2.
    let stderr = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let eal = dpdk::test_args("leafcli-err", &["--log-level=*:warning"]);
    let out = Command::new(EXE)
        .args(&eal[1..])
        .args(["--", "--dpdk-port", "nosuch0", "-g", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no port named \"nosuch0\""),
        "{}",
        stderr(&out)
    );

    // a vdev on an interface that does not exist: the OS error, not only "no port named"
    let eal = dpdk::test_args(
        "leafcli-noif",
        &[
            "--log-level=*:warning",
            "--vdev=net_af_packet0,iface=nbnosuchif0",
        ],
    );
    let out = Command::new(EXE)
        .args(&eal[1..])
        .args(["--", "--dpdk-port", "net_af_packet0", "-g", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("interface \"nbnosuchif0\": No such device"),
        "{}",
        stderr(&out)
    );

    let out = Command::new(EXE)
        .args(["--no-such-eal-flag", "--", "--dpdk-port", "p", "-g", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("barrier-leaf: EAL:"),
        "{}",
        stderr(&out)
    );

    // the order used before DPDK's convention: refused, naming the right one
    let out = Command::new(EXE)
        .args(["--dpdk-port", "p", "-g", "1", "--", "--no-huge"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("barrier-leaf [EAL ARGS] -- --dpdk-port NAME"),
        "{}",
        stderr(&out)
    );

    let out = Command::new(EXE)
        .args(["--no-huge", "--", "-i", "lo", "-g", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("only with --dpdk-port"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn many_barriers_over_net_af_packet_against_a_root() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let bed = VethNetns::create().unwrap();
    let records = tmp("afp", "jsonl");
    let sock = RawSocket::open_in_netns(&bed.netns, &bed.b, ETHERTYPE).unwrap();
    let mut root = MiniRoot::new(MacAddr(sock.mac()));
    root.add_group(7, &[0]);
    let vdev = format!("--vdev=net_af_packet0,iface={}", bed.a);
    let eal = dpdk::test_args("leafcli-afp", &["--log-level=*:warning", &vdev]);
    let stop = AtomicBool::new(false);
    let out = std::thread::scope(|s| {
        let (root, sock, stop) = (&mut root, &sock, &stop);
        s.spawn(move || {
            root.serve_sockets(std::slice::from_ref(sock), stop)
                .unwrap()
        });
        let _stop_guard = StopOnDrop(stop);
        let out = bed
            .command(EXE)
            .args(&eal[1..])
            .args([
                "--",
                "--dpdk-port",
                "net_af_packet0",
                "--dpdk-idle",
                "yield",
            ])
            .args(["-g", "7", "-n", "500", "--resend-us", "20000", "--json"])
            .args(["--records", records.to_str().unwrap()])
            .output()
            .unwrap();
        stop.store(true, Ordering::Relaxed);
        out
    });
    let j = json(&out);
    assert!(out.status.success(), "{j}");
    assert_eq!(j["completed"], 500);
    assert_eq!(j["stats"]["releases"], 500);
    let recs = parse_records(&std::fs::read_to_string(&records).unwrap()).unwrap();
    assert_eq!(
        recs.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (0..500).collect::<Vec<_>>()
    );
    assert!(recs.iter().all(|r| r.release_ns >= r.first_reduce_ns));
    assert_eq!(root.completed, 500);
    let _ = std::fs::remove_file(records);
}
