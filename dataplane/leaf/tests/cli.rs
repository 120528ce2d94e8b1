//! The `barrier-leaf` CLI as a user runs it: inside a network namespace (`ip netns exec`) on
//! one end of a veth pair, with a root switch (the protocol's switch logic) on the other end.
//! Needs root for the namespace; those tests skip themselves, saying so, otherwise.

use barrier_protocol::wire::{MacAddr, ETHERTYPE};
use barrier_testbed::mini_root::{MiniRoot, StopOnDrop};
use barrier_testbed::netns::{can_create, VethNetns};
use rawsock::RawSocket;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};

const EXE: &str = env!("CARGO_BIN_EXE_barrier-leaf");

fn records_path(tag: &str, ext: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "barrier-leaf-cli-{}-{tag}.{ext}",
        std::process::id()
    ))
}

/// Runs the CLI in the namespace with a switch for group 7 on the other end of the pair.
fn run_with_switch(bed: &VethNetns, args: &[&str]) -> Output {
    let sock = RawSocket::open_in_netns(&bed.netns, &bed.b, ETHERTYPE).unwrap();
    let mut root = MiniRoot::new(MacAddr(sock.mac()));
    root.add_group(7, &[0]);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (root, sock, stop) = (&mut root, &sock, &stop);
        s.spawn(move || {
            root.serve_sockets(std::slice::from_ref(sock), stop)
                .unwrap()
        });
        let _stop_guard = StopOnDrop(stop);
        let out = bed
            .command(EXE)
            .args(["--iface", &bed.a])
            .args(args)
            .output()
            .unwrap();
        stop.store(true, Ordering::Relaxed);
        out
    })
}

#[test]
fn json_summary_and_records_of_a_run() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let bed = VethNetns::create().unwrap();
    let records = records_path("ok", "jsonl");
    let out = run_with_switch(
        &bed,
        &[
            "--group",
            "7",
            "--count",
            "100",
            "--resend-us",
            "5000",
            "--json",
            "--records",
            records.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: {stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(v["completed"], 100);
    assert_eq!(v["requested"], 100);
    assert_eq!(v["group"], 7);
    assert!(v["error"].is_null());
    let lat = &v["latency_ns"];
    let (p50, p99, p999, max) = (
        lat["p50"].as_u64().unwrap(),
        lat["p99"].as_u64().unwrap(),
        lat["p999"].as_u64().unwrap(),
        lat["max"].as_u64().unwrap(),
    );
    assert!(0 < p50 && p50 <= p99 && p99 <= p999 && p999 <= max, "{lat}");
    assert_eq!(v["stats"]["releases"], 100);
    let recs =
        barrier_leaf::records::parse_records(&std::fs::read_to_string(&records).unwrap()).unwrap();
    let _ = std::fs::remove_file(&records);
    assert_eq!(
        recs.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (0..100).collect::<Vec<_>>()
    );
    // The summary's maximum is the slowest record (to hdrhistogram's precision).
    let slowest = recs.iter().map(|r| r.latency_ns()).max().unwrap();
    assert!(
        max.abs_diff(slowest) <= slowest / 500 + 1,
        "{max} vs {slowest}"
    );
}

#[test]
fn text_summary_with_first_seq_and_csv_records() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let bed = VethNetns::create().unwrap();
    let records = records_path("text", "csv");
    let out = run_with_switch(
        &bed,
        &[
            "-g",
            "7",
            "-n",
            "20",
            "--first-seq",
            "4294967290",
            "--records",
            records.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("20/20 barriers"), "{stdout}");
    assert!(stdout.contains("p99.9"), "{stdout}");
    let text = std::fs::read_to_string(&records).unwrap();
    let _ = std::fs::remove_file(&records);
    assert!(text.starts_with("group,seq,first_reduce_ns,release_ns,resends,released\n"));
    let seqs: Vec<u32> = barrier_leaf::records::parse_records(&text)
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect();
    // Sequence numbers wrap around.
    let want: Vec<u32> = (0..20u32).map(|i| 4294967290u32.wrapping_add(i)).collect();
    assert_eq!(seqs, want);
}

#[test]
fn timeout_names_group_and_seq_and_fails_the_run() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let bed = VethNetns::create().unwrap();
    // No switch on the other end.
    let out = bed
        .command(EXE)
        .args([
            "--iface",
            &bed.a,
            "--group",
            "7",
            "--count",
            "5",
            "--timeout-us",
            "50000",
            "--resend-us",
            "10000",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("group 7 barrier seq 0"), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["completed"], 0);
    assert!(v["error"].as_str().unwrap().contains("timeout"), "{v}");
    assert!(v["stats"]["resends"].as_u64().unwrap() >= 1, "{v}");
}

#[test]
fn setup_errors_exit_with_a_message() {
    // an interface that cannot be opened: a device error, 1; a refused command line: 2
    let out = Command::new(EXE)
        .args(["--iface", "nbnosuchif0", "--group", "7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("opening interface nbnosuchif0"), "{stderr}");
    let out = Command::new(EXE)
        .args(["--iface", "lo", "--group", "1048576"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a group out of range is refused by clap"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1048576 is not in"), "{stderr}");
    let out = Command::new(EXE).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--records"), "{help}");
    assert!(help.contains("Exit status: 0"), "{help}");
}

#[test]
fn sigint_ends_the_run_with_a_summary_and_flushed_records() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let bed = VethNetns::create().unwrap();
    let records = records_path("sigint", "csv");
    let sock = RawSocket::open_in_netns(&bed.netns, &bed.b, ETHERTYPE).unwrap();
    let mut root = MiniRoot::new(MacAddr(sock.mac()));
    root.add_group(7, &[0]);
    let stop = AtomicBool::new(false);
    let out = std::thread::scope(|s| {
        let (root, sock, stop) = (&mut root, &sock, &stop);
        s.spawn(move || {
            root.serve_sockets(std::slice::from_ref(sock), stop)
                .unwrap()
        });
        let _stop_guard = StopOnDrop(stop);
        // `ip netns exec` execs the program: the child's pid is barrier-leaf's.
        let child = bed
            .command(EXE)
            .args([
                "--iface",
                &bed.a,
                "--group",
                "7",
                "--count",
                "1000000000",
                "--gap-us",
                "200",
                "--json",
            ])
            .arg("--records")
            .arg(&records)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let kill = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        child.wait_with_output().unwrap()
    });
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["error"].as_str().unwrap().contains("interrupted"), "{v}");
    let completed = v["completed"].as_u64().unwrap();
    assert!(completed > 0, "{v}");
    let text = std::fs::read_to_string(&records).unwrap();
    let _ = std::fs::remove_file(&records);
    let recs = barrier_leaf::records::parse_records(&text).unwrap();
    let released = recs.iter().filter(|r| r.released).count() as u64;
    assert_eq!(
        released, completed,
        "every completed barrier is in the records"
    );
    // Stopped while waiting (not in the gap between barriers): that arrival is the last row.
    match v["left_waiting_seq"].as_u64() {
        Some(seq) => {
            let last = recs.last().unwrap();
            assert!(!last.released && u64::from(last.seq) == seq, "{last:?} {v}");
            assert_eq!(recs.len() as u64, completed + 1);
        }
        None => assert_eq!(recs.len() as u64, completed),
    }
}

#[test]
fn a_leaf_stopped_while_it_waits_records_that_arrival_not_released() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let bed = VethNetns::create().unwrap();
    let records = records_path("waiting", "csv");
    // No switch: the leaf arrives at barrier 3 and waits there until SIGTERM.
    let child = bed
        .command(EXE)
        .args(["--iface", &bed.a, "-g", "7", "--first-seq", "3", "--json"])
        .arg("--records")
        .arg(&records)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let before_kill = barrier_leaf::now().nanos();
    assert!(Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["left_waiting_seq"], 3, "{v}");
    assert!(v["error"].as_str().unwrap().contains("interrupted"), "{v}");
    let text = std::fs::read_to_string(&records).unwrap();
    let _ = std::fs::remove_file(&records);
    assert_eq!(text.lines().nth(1), text.lines().last());
    let line = text.lines().last().unwrap();
    assert!(line.starts_with("7,3,") && line.ends_with(",0"), "{text}");
    let recs = barrier_leaf::records::parse_records(&text).unwrap();
    assert_eq!(recs.len(), 1, "{text}");
    let r = recs[0];
    assert!(!r.released && r.release_ns == 0 && r.seq == 3, "{r:?}");
    assert!(
        r.first_reduce_ns > 0 && r.first_reduce_ns < before_kill,
        "{r:?}"
    );
    // It waited up to 500 ms at 1 ms re-sends (fewer on a loaded machine: the process start).
    assert!(r.resends >= 1, "{r:?}");
}

/// Two leaves of one group, one running 5 barriers, one timed: the timed leaf waits at barrier 5
/// (the other never comes), leaves it when its time and grace are up, records that arrival as not
/// released and succeeds; scripts/tools/check_records.py accepts both files, and refuses them
/// once that not-released arrival is made barrier 4's, after the other leaf's release of it.
#[test]
fn a_timed_run_ends_at_its_duration_and_the_records_check() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let bed = VethNetns::with_pairs(2).unwrap();
    let socks: Vec<RawSocket> = bed
        .pairs
        .iter()
        .map(|(_, b)| RawSocket::open_in_netns(&bed.netns, b, ETHERTYPE).unwrap())
        .collect();
    let mut root = MiniRoot::new(MacAddr(socks[0].mac()));
    root.add_group(7, &[0, 1]);
    let (ra, rb) = (records_path("count", "csv"), records_path("timed", "jsonl"));
    let stop = AtomicBool::new(false);
    let (a, b, elapsed) = std::thread::scope(|s| {
        let (root, socks, stop) = (&mut root, &socks, &stop);
        s.spawn(move || root.serve_sockets(socks, stop).unwrap());
        let _stop_guard = StopOnDrop(stop);
        let leaf = |iface: &str, extra: &[&str], rec: &std::path::Path| {
            bed.command(EXE)
                .args(["--iface", iface, "-g", "7", "--json", "--quiet"])
                .args(extra)
                .arg("--records")
                .arg(rec)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let started = std::time::Instant::now();
        let b = leaf(&bed.pairs[1].0, &["--duration", "1.5"], &rb);
        let a = leaf(&bed.pairs[0].0, &["--count", "5"], &ra);
        let a = a.wait_with_output().unwrap();
        let b = b.wait_with_output().unwrap();
        let elapsed = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        (a, b, elapsed)
    });
    assert!(a.status.success(), "{a:?}");
    assert!(b.status.success(), "{b:?}");
    let vb: serde_json::Value = serde_json::from_slice(&b.stdout).unwrap();
    assert_eq!(
        (vb["completed"].as_u64(), vb["requested"].as_u64()),
        (Some(5), Some(0)),
        "{vb}"
    );
    assert_eq!(vb["duration_s"], 1.5);
    assert_eq!(vb["left_waiting_seq"], 5, "{vb}");
    assert!(vb["error"].is_null(), "{vb}");
    // The duration (1.5 s) and the grace (100 ms), not the 10 s barrier timeout, ended it.
    assert!(
        elapsed >= std::time::Duration::from_millis(1500)
            && elapsed < std::time::Duration::from_secs(5),
        "{elapsed:?}"
    );
    let recs_b =
        barrier_leaf::records::parse_records(&std::fs::read_to_string(&rb).unwrap()).unwrap();
    assert_eq!(recs_b.len(), 6);
    assert!(recs_b[..5].iter().all(|r| r.released) && !recs_b[5].released);
    let check = |files: &[&std::path::Path]| {
        Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../scripts/tools/check_records.py"
            ))
            .args(files)
            .output()
            .unwrap()
    };
    let ok = check(&[&ra, &rb]);
    let said = String::from_utf8_lossy(&ok.stdout).into_owned();
    assert!(ok.status.success(), "{said}");
    assert!(said.contains("left sequence 5 unreleased"), "{said}");
    // The same files, the timed leaf's last arrival moved after leaf a's release of barrier 4
    // and relabelled 4: an early release the checker must find.
    let text = std::fs::read_to_string(&rb).unwrap();
    let recs_a =
        barrier_leaf::records::parse_records(&std::fs::read_to_string(&ra).unwrap()).unwrap();
    let late = recs_a[4].release_ns + 1_000;
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines.remove(4); // b's released record of barrier 4
    let last = lines.pop().unwrap();
    let mut moved: serde_json::Value = serde_json::from_str(&last).unwrap();
    moved["seq"] = 4.into();
    moved["first_reduce_ns"] = late.into();
    lines.push(moved.to_string());
    let bad = records_path("timed-bad", "jsonl");
    std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
    let fail = check(&[&ra, &bad]);
    let said = String::from_utf8_lossy(&fail.stdout).into_owned();
    assert!(!fail.status.success(), "{said}");
    assert!(said.contains("sequence 4: a leaf was released"), "{said}");
    for p in [&ra, &rb, &bad] {
        let _ = std::fs::remove_file(p);
    }
}

/// An egress drop: with a qdisc that holds nothing (`pfifo limit 0`) on the leaf's interface,
/// every reduce the leaf sends is dropped on the way out and `send` returns ENOBUFS. The leaf
/// counts each as a link error and goes on re-sending, as for a frame lost on the wire, until the
/// barrier's timeout ends the run (not an I/O error on the first send).
#[test]
fn an_egress_drop_is_counted_as_a_link_error() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let bed = VethNetns::create().unwrap();
    bed.exec(&[
        "tc", "qdisc", "add", "dev", &bed.a, "root", "pfifo", "limit", "0",
    ])
    .expect("tc qdisc add ... pfifo limit 0");
    let out = bed
        .command(EXE)
        .args(["--iface", &bed.a, "-g", "7", "-n", "1", "--json"])
        .args(["--timeout-us", "100000", "--resend-us", "2000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with("timeout: group 7 barrier seq 0"),
        "{v}"
    );
    let st = &v["stats"];
    let sent = st["reduces"].as_u64().unwrap() + st["resends"].as_u64().unwrap();
    assert!(sent >= 3, "{v}");
    assert_eq!(
        st["link_errors"].as_u64(),
        Some(sent),
        "every send was refused: {v}"
    );
    // The control: the same run without the qdisc sends its frames, no link errors.
    bed.exec(&["tc", "qdisc", "del", "dev", &bed.a, "root"])
        .unwrap();
    let out = bed
        .command(EXE)
        .args(["--iface", &bed.a, "-g", "7", "-n", "1", "--json"])
        .args(["--timeout-us", "50000", "--resend-us", "2000"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stats"]["link_errors"], 0, "{v}");
}
