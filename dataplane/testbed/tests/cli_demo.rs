//! `barrier-demo` as a user runs it (the README's first command, `scripts/demo.sh`, without the
//! setup): it prints barriers per second and latency percentiles and exits 0; with --count it
//! runs exactly that many barriers. Both the DPDK (net_ring) and the in-memory wiring.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_barrier-demo");

fn demo(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "demo {args:?} failed\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn check(stdout: &str, barriers: u64) {
    assert!(
        stdout.contains(&format!("barriers: {barriers} in ")),
        "{stdout}"
    );
    assert!(stdout.contains("barriers/s"), "{stdout}");
    for p in ["p50 ", "p99 ", "p99.9 ", "max "] {
        assert!(stdout.contains(p), "no {p} in {stdout}");
    }
    assert!(stdout.contains("early releases 0,"), "{stdout}");
}

#[test]
fn demo_on_net_ring() {
    let out = demo(&[
        "--fanout",
        "2,3",
        "--groups",
        "4",
        "--count",
        "250",
        "--counters",
    ]);
    check(&out, 1000);
    assert!(
        out.contains("tree: fanout [2, 3] = 3 switches, 6 leaves; 4 group(s)"),
        "{out}"
    );
    assert!(out.contains("== switch root"), "{out}");
    assert!(out.contains("mbufs back"), "{out}");
}

#[test]
fn demo_in_memory() {
    let out = demo(&["--io", "mem", "--fanout", "3", "--count", "300"]);
    check(&out, 300);
}

#[test]
fn demo_for_a_duration() {
    let out = demo(&["--io", "mem", "--duration", "0.3"]);
    assert!(out.contains("barriers: "), "{out}");
}

#[test]
fn demo_refuses_a_bad_tree() {
    let out = Command::new(BIN).args(["--fanout", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fanout 0"));
}

/// EAL arguments without `--` are refused (exit 2) with the demo's form of the command line;
/// the demo's own options before `--` too, with the right order.
#[test]
fn eal_arguments_without_dashes_are_shown_their_place() {
    let out = Command::new(BIN).arg("--no-huge").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("barrier-demo [EAL args] -- [OPTIONS]"),
        "{err}"
    );
    let out = Command::new(BIN)
        .args(["--groups", "3", "--", "-l", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("EAL arguments come first, `barrier-demo [EAL args] -- --groups"),
        "{err}"
    );
    // --help shows the EAL form in its usage
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("Usage: barrier-demo [EAL args] -- [OPTIONS]"),
        "{help}"
    );
}
