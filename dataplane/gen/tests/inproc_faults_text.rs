//! barrier-gen against an in-process barrier-switch whose pollers run on a worker lcore of their
//! own (`-l 0,1`), with every kind of fault the generator injects: drop, duplicate, reorder and
//! (detectable) corruption, both directions. Every barrier completes; the text report says so.

mod common;

#[test]
fn all_fault_kinds_switch_on_its_own_lcore() {
    let out = common::gen(
        Some("run"),
        &common::eal("faults", "0,1"),
        &[
            "--inproc-switch",
            "--ports",
            "3",
            "--groups",
            "100",
            "--count",
            "40",
            "--duration",
            "120",
            "--loss",
            "0.02",
            "--dup",
            "0.02",
            "--reorder",
            "0.02",
            "--corrupt",
            "0.01",
            // A generous leaf timer: the two lcores share a busy machine.
            "--resend-timeout-us",
            "20000",
            "--drain",
            "30",
            "--seed",
            "3",
        ],
    );
    let text = common::stdout(&out);
    assert!(out.status.success(), "exit {:?}\n{text}", out.status);
    assert!(text.contains("barriers: 4000 completed"), "{text}");
    assert!(text.contains("of 4000 started"), "{text}");
    assert!(!text.contains("in flight at end"), "{text}");
    assert!(text.contains("early releases 0"), "{text}");
    for key in [
        "frames:",
        "/s)",
        "latency (leaf",
        "p50",
        "p99",
        "p99.9",
        "max",
        "faults:",
        "duplicated",
        "reordered",
        "corrupted",
    ] {
        assert!(text.contains(key), "{key} missing:\n{text}");
    }
    // The switch refused the corrupted frames (bad magic/version/kind/flags) and saw duplicates.
    assert!(text.contains("== switch sut"), "{text}");
    assert!(text.contains("duplicates="), "{text}");
    assert!(
        [
            "drop_bad_magic",
            "drop_bad_version",
            "drop_bad_kind",
            "drop_reserved_flags"
        ]
        .iter()
        .any(|c| text.contains(c)),
        "{text}"
    );
    // Every mbuf came back after shutdown.
    assert!(text.contains("mbufs back"), "{text}");
}

#[test]
fn bad_arguments_fail_cleanly() {
    let out = common::gen(None, &common::eal("args", "0"), &["--groups", "10"]);
    assert_eq!(out.status.code(), Some(2), "no port and no --inproc-switch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--port NAME"), "{err}");
    // --help after `--` (DPDK's convention) answers, exit 0, and states the exit rule
    let out = common::gen(None, &[], &["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(common::stdout(&out).contains("Exit status"));
    let out = common::gen(None, &[], &["--no-such-option"]);
    assert_eq!(out.status.code(), Some(2));
}
