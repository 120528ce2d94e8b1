//! barrier-switch over net_af_packet on veth pairs in a network namespace this test creates
//! (and removes, also on failure: the namespace guard deletes it on drop). Plain Linux raw
//! sockets play two leaves: the release must come back to both, and not before both reduced.
//! The switch is the real binary with a configuration file, RX and scheduler on two lcores; it
//! prints its counters on SIGUSR1 and stops cleanly on SIGTERM.

use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, ETHERTYPE, FRAME_LEN};
use barrier_protocol::{GroupId, Seq};
use rawsock::testbed::{can_create, VethNetns};
use rawsock::RawSocket;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn reduce(src: [u8; 6], group: u32, seq: u32) -> Vec<u8> {
    let mut b = vec![0u8; FRAME_LEN];
    FrameRepr {
        dst: MacAddr::BROADCAST,
        src: MacAddr(src),
        kind: Kind::Reduce,
        flags: Flags::empty(),
        group: GroupId(group),
        seq: Seq(seq),
        tx_timestamp: None,
    }
    .emit(&mut b);
    b
}

/// The next barrier frame on `sock` within `timeout`, parsed.
fn next_frame(sock: &RawSocket, timeout: Duration) -> Option<FrameRepr> {
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 2048];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        match sock.recv(&mut buf, Some(left)).unwrap() {
            Some(n) => {
                if let Ok(r) = FrameRepr::parse(&buf[..n]) {
                    return Some(r);
                }
            }
            None => return None,
        }
    }
}

/// Kills the switch if the test fails before it stops it.
struct Switch(Option<Child>);

impl Drop for Switch {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn signal(pid: u32, sig: &str) {
    assert!(Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success());
}

#[test]
fn raw_sockets_get_the_release_over_veth() {
    if !can_create() {
        eprintln!("SKIP: needs root and iproute2 to create a network namespace");
        return;
    }
    let bed = VethNetns::with_pairs(2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("afp.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[eal]
args = ["--no-huge", "-m", "256", "--no-shconf", "--file-prefix", "nb-afp-{pid}", "--no-pci",
        "--iova-mode=va", "--no-telemetry", "-l", "0,1"]

[[ports]]
name = "leaf0"
vdev = "net_af_packet0,iface={a0}"

[[ports]]
name = "leaf1"
vdev = "net_af_packet1,iface={a1}"

[lcores]
scheduler = 1
rx = [ {{ lcore = 0, poll = ["leaf0", "leaf1"] }} ]

[[groups]]
number = 42
role = "root"
children = ["leaf0", "leaf1"]
"#,
            pid = std::process::id(),
            a0 = bed.pairs[0].0,
            a1 = bed.pairs[1].0,
        ),
    )
    .unwrap();

    let leaf0 = RawSocket::open_in_netns(&bed.netns, &bed.pairs[0].1, ETHERTYPE).unwrap();
    let leaf1 = RawSocket::open_in_netns(&bed.netns, &bed.pairs[1].1, ETHERTYPE).unwrap();

    let mut child = bed
        .command(env!("CARGO_BIN_EXE_barrier-switch"))
        .args(["run", "--config"])
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (out_tx, out_rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = out_tx.send(line);
        }
    });
    // Wait for the switch to say it runs (its first line on stderr after EAL and the ports).
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut switch = Switch(Some(child));
    let mut log = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("switch did not start");
        log.push(line.clone());
        if line.starts_with("barrier-switch: 2 ports") {
            break;
        }
    }

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

    signal(pid, "-USR1");
    let mut stdout = String::new();
    let until = Instant::now() + Duration::from_secs(30);
    while !stdout.contains("== switch") {
        let l = out_rx
            .recv_timeout(until.saturating_duration_since(Instant::now()))
            .expect("no counters after SIGUSR1");
        stdout += &l;
        stdout.push('\n');
    }
    signal(pid, "-TERM");
    let status = switch.0.take().unwrap().wait().unwrap();
    stdout.extend(out_rx.iter().map(|l| l + "\n"));
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(
        status.success(),
        "exit {status:?}\n{stdout}\n{}\n{}",
        log.join("\n"),
        rest.join("\n")
    );
    // Once for SIGUSR1, once at exit.
    assert_eq!(stdout.matches("== switch").count(), 2, "{stdout}");
    assert!(stdout.contains("completions=3"), "{stdout}");
    assert!(stdout.contains("stale_reduce=1"), "{stdout}");
    assert!(stdout.contains("mbufs back"), "{stdout}");
    drop(bed);
}
