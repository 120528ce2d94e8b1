//! Golden test on net_pcap: crafted frames in (good, malformed, damaged, stale, wrong-port,
//! duplicate, unknown group) on two ports, the frames the switch writes out compared with the expected
//! ones byte for byte, and the counters checked. Runs the real binary with a configuration file
//! and stops it with SIGTERM, so it also checks the shutdown path and exit code.
//!
//! The run is in the reduced mode (one lcore polls port a, then port b, then schedules), and each
//! input fits in one burst, so the order of the output is determined.
mod common;
use common::pcap;

use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{Epoch, GroupId, Seq};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success(), "kill {sig} {pid}");
}

const LEAF: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 1];
const SWITCH: [u8; 6] = [0x02, 0x5e, 0, 0, 0, 0x01];

fn frame(src: [u8; 6], kind: Kind, group: u32, seq: u32, retransmit: bool) -> Vec<u8> {
    let mut b = vec![0u8; FRAME_LEN];
    FrameRepr {
        dst: MacAddr::BROADCAST,
        src: MacAddr(src),
        kind,
        flags: if retransmit {
            Flags::RETRANSMIT
        } else {
            Flags::empty()
        },
        group: GroupId(group),
        epoch: Epoch::DEFAULT,
        seq: Seq(seq),
        tx_timestamp: None,
    }
    .emit(&mut b);
    b
}

fn reduce(g: u32, s: u32) -> Vec<u8> {
    frame(LEAF, Kind::Reduce, g, s, false)
}
fn release(g: u32, s: u32) -> Vec<u8> {
    frame(LEAF, Kind::Release, g, s, false)
}
fn out_release(g: u32, s: u32, retransmit: bool) -> Vec<u8> {
    frame(SWITCH, Kind::Release, g, s, retransmit)
}
fn out_reduce(g: u32, s: u32) -> Vec<u8> {
    frame(SWITCH, Kind::Reduce, g, s, false)
}

/// The `name=value` counters on the report line that starts with `prefix`.
fn counters(report: &str, prefix: &str) -> Vec<(String, u64)> {
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in:\n{report}"));
    line.split_once(':')
        .unwrap()
        .1
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect()
}

fn kv(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn golden_pcap() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);

    // Groups: 1 = root over {a, b}; 2 = root over {a}; 3 = intermediate, child a, parent b.
    let mut too_short = reduce(1, 0);
    too_short.truncate(20);
    let mut bad_magic = reduce(1, 0);
    bad_magic[14] = 0xbb;
    let mut not_barrier = reduce(1, 0);
    not_barrier[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let mut bad_version = reduce(1, 0);
    bad_version[15] = 9;
    let mut bad_kind = reduce(1, 0);
    bad_kind[16] = 4;
    let mut reserved_flags = reduce(1, 0);
    reserved_flags[17] = 0x80;
    let mut group_out_of_range = reduce(1, 0);
    group_out_of_range[18..22].copy_from_slice(&(1u32 << 20).to_be_bytes());
    // One flipped bit of the sequence (0 -> 1), as an FCS-less link may deliver it: taken at
    // face value it would be evidence that group 1's barrier 0 completed (an early release);
    // the header checksum makes it a counted drop.
    let mut bad_checksum = reduce(1, 0);
    bad_checksum[25] ^= 0x01;

    let a_in = vec![
        reduce(1, 0),       // recorded (group 1 adopts seq 0)
        reduce(1, 0),       // duplicate
        bad_checksum,       // dropped: bad_checksum (not a reduce for seq 1)
        too_short,          // dropped: too_short
        bad_magic,          // dropped: bad_magic
        not_barrier,        // dropped: not_barrier
        reduce(2, 0),       // completes group 2 -> release 2/0 to a
        reduce(2, 0), // stale (seq is 1 now) -> re-send release 2/0: coalesced with the waiting one
        reduce(0, 0), // group 0 is not configured
        release(1, 0), // a release at a root: not the parent
        reduce(3, 5), // completes group 3 at this intermediate -> reduce 3/5 up to b
        group_out_of_range, // dropped by the parser
        bad_kind,
        reserved_flags,
        bad_version,
    ];
    let b_in = vec![
        reduce(1, 0),  // completes group 1 -> release 1/0 to a and b
        reduce(2, 0),  // b is not a child of group 2
        release(3, 5), // from the parent: release 3/5 down to a
        release(3, 5), // the same again: duplicate
        release(3, 2), // further behind: stale, ignored
        reduce(3, 6),  // b is group 3's parent, not a child
    ];
    pcap::write(&p("a_in.pcap"), &a_in);
    pcap::write(&p("b_in.pcap"), &b_in);

    let cfg = format!(
        r#"
[eal]
args = ["--no-huge", "-m", "256", "--no-shconf", "--file-prefix", "nb-golden-{pid}", "--no-pci",
        "--iova-mode=va", "--no-telemetry", "-l", "0"]

[switch]
mac = "02:5e:00:00:00:01"

[[ports]]
name = "a"
vdev = "net_pcap0,rx_pcap={a_in},tx_pcap={a_out}"

[[ports]]
name = "b"
vdev = "net_pcap1,rx_pcap={b_in},tx_pcap={b_out}"

[lcores]
scheduler = 0
shared = true
rx = [ {{ lcore = 0, poll = ["a", "b"] }} ]

[[groups]]
number = 1
role = "root"
children = ["a", "b"]

[[groups]]
number = 2
role = "root"
children = ["a"]

[[groups]]
number = 3
role = "intermediate"
children = ["a"]
parent = "b"
resend_timeout_us = 60000000
"#,
        pid = std::process::id(),
        a_in = p("a_in.pcap").display(),
        a_out = p("a_out.pcap").display(),
        b_in = p("b_in.pcap").display(),
        b_out = p("b_out.pcap").display(),
    );
    std::fs::write(p("golden.toml"), cfg).unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_barrier-switch"))
        .args(["run", "--config"])
        .arg(p("golden.toml"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = |r: Box<dyn std::io::Read + Send>| {
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for l in BufReader::new(r).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        rx
    };
    let out_lines = lines(Box::new(child.stdout.take().unwrap()));
    let err_lines = lines(Box::new(child.stderr.take().unwrap()));
    let mut stdout = String::new();
    let mut stderr = String::new();
    // Wait until it is ready (its ports started and drained, its loops polling),
    // then ask for counters (SIGUSR1) until every input frame was received: no fixed sleeps, so
    // a slow machine only makes the test slower.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let l = err_lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("switch did not start:\n{stderr}"));
        stderr += &l;
        stderr.push('\n');
        if l.starts_with("barrier-switch: ready") {
            break;
        }
    }
    loop {
        assert!(
            Instant::now() < deadline,
            "the switch did not receive every frame:\n{stdout}"
        );
        signal(child.id(), "-USR1");
        let until = Instant::now() + Duration::from_millis(200);
        while let Ok(l) = out_lines.recv_timeout(until.saturating_duration_since(Instant::now())) {
            stdout += &l;
            stdout.push('\n');
        }
        if stdout.contains("rx total: frames=21 ") {
            break;
        }
    }
    signal(child.id(), "-TERM");
    let status = child.wait().unwrap();
    stdout.extend(out_lines.iter().map(|l| l + "\n"));
    stderr.extend(err_lines.iter().map(|l| l + "\n"));
    assert!(
        status.success(),
        "exit {status:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // The final report is the last one printed.
    let stdout = &stdout[stdout.rfind("== switch").expect("a final report")..];

    assert_eq!(
        pcap::read(&p("a_out.pcap")),
        vec![
            out_release(2, 0, false),
            out_release(1, 0, false),
            out_release(3, 5, false)
        ],
        "port a output\n{stdout}"
    );
    assert_eq!(
        pcap::read(&p("b_out.pcap")),
        vec![out_reduce(3, 5), out_release(1, 0, false)],
        "port b output"
    );

    assert_eq!(
        counters(stdout, "rx total:"),
        kv(&[
            ("frames", 21),
            ("reduce_in", 9),
            ("release_in", 4),
            ("recorded", 1),
            ("completions", 3),
            ("released_down", 1),
            ("duplicates", 2),
            ("stale_reduce", 1),
            ("stale_release", 1),
            ("drop_too_short", 1),
            ("drop_not_barrier", 1),
            ("drop_bad_magic", 1),
            ("drop_bad_version", 1),
            ("drop_bad_kind", 1),
            ("drop_reserved_flags", 1),
            ("drop_group_out_of_range", 1),
            ("drop_bad_checksum", 1),
            ("drop_unknown_group", 1),
            ("drop_not_a_child", 2),
            ("drop_not_the_parent", 1),
        ])
    );
    assert_eq!(
        counters(stdout, "tx total:"),
        kv(&[
            ("frames_out", 5),
            ("reduce_out", 1),
            ("release_out", 4),
            ("coalesced", 1),
            // Every frame in the mbuf of the reduce that caused it: the release to a second
            // child port shares it (both ports send the switch's MAC to broadcast).
            ("built_in_place", 5)
        ])
    );
    assert_eq!(
        counters(stdout, "port a rx:")[0],
        ("frames".to_string(), 15)
    );
    assert_eq!(counters(stdout, "port b rx:")[0], ("frames".to_string(), 6));
    assert!(stdout.contains("mbufs back"), "{stdout}");
}
