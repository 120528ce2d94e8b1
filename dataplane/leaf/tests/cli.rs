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
    assert!(text.starts_with("group,seq,first_reduce_ns,release_ns,resends\n"));
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
    assert_eq!(
        recs.len() as u64,
        completed,
        "every completed barrier is in the records"
    );
}
