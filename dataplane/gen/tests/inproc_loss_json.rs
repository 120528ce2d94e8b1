//! What issue 5 asks to be shown: barrier-gen against barrier-switch (an in-process root on
//! net_ring pairs) with 1% injected loss in both directions: every barrier completes, and the
//! JSON report carries frames/s, barriers/s and latency percentiles; the interval log reads back.

mod common;

use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

#[test]
fn one_percent_loss_every_barrier_completes() {
    let dir = tempfile::tempdir().unwrap();
    let hlog = dir.path().join("lat.hlog");
    let hlog_s = hlog.to_str().unwrap();
    let (groups, count, ports) = (256u64, 60u64, 4u64);
    let out = common::gen(
        None,
        &common::eal("loss", "0"),
        &[
            "--inproc-switch",
            "--ports",
            "4",
            "--groups",
            "256",
            "--count",
            "60",
            "--duration",
            "120",
            "--loss",
            "0.01",
            "--resend-timeout-us",
            "5000",
            "--drain",
            "30",
            "--seed",
            "7",
            "--json",
            "--hdr-log",
            hlog_s,
        ],
    );
    let text = common::stdout(&out);
    assert!(out.status.success(), "exit {:?}\n{text}", out.status);
    let v: serde_json::Value = serde_json::from_str(&text).expect("stdout is one JSON document");
    assert_eq!(
        v["config"]["faults"]["drop"].as_f64(),
        Some(0.01),
        "the run's settings are echoed"
    );
    assert_eq!(v["config"]["seed"].as_u64(), Some(7));
    let r = &v["report"];
    let b = &r["barriers"];
    let n = |x: &serde_json::Value| x.as_u64().unwrap_or_else(|| panic!("not a number: {x}"));
    let f = |x: &serde_json::Value| x.as_f64().unwrap_or_else(|| panic!("not a number: {x}"));
    // Every barrier of every group completed, none early, none left open.
    assert_eq!(n(&b["started"]), groups * count);
    assert_eq!(n(&b["completed"]), groups * count, "{text}");
    assert_eq!(n(&b["incomplete"]), 0);
    assert_eq!(n(&b["early_releases"]), 0);
    // The loss was real and was made good by re-sends.
    let drops = n(&r["faults_tx"]["dropped"]) + n(&r["faults_rx"]["dropped"]);
    let frames_in = n(&r["faults_tx"]["frames_in"]) + n(&r["faults_rx"]["frames_in"]);
    let rate = drops as f64 / frames_in as f64;
    assert!((0.005..0.02).contains(&rate), "injected loss {rate}");
    assert!(n(&b["needed_resend"]) > 0 && n(&r["frames"]["tx_resend"]) > 0);
    assert!(n(&b["lost"]) >= n(&b["needed_resend"]));
    // Rates and percentiles are there and make sense.
    assert!(f(&r["frames"]["tx_per_s"]) > 0.0 && f(&r["frames"]["rx_per_s"]) > 0.0);
    assert!(f(&b["per_s"]) > 0.0);
    assert_eq!(n(&r["frames"]["tx_reduce"]), ports * groups * count);
    let lat = &r["latency_leaf"];
    assert_eq!(n(&lat["samples"]), ports * groups * count);
    let p: Vec<u64> = [
        "min_ns",
        "p50_ns",
        "p90_ns",
        "p99_ns",
        "p99_9_ns",
        "p99_99_ns",
        "max_ns",
    ]
    .iter()
    .map(|k| n(&lat[k]))
    .collect();
    assert!(p[0] > 0 && p.windows(2).all(|w| w[0] <= w[1]), "{p:?}");
    // A lost frame costs at least one leaf timer: the tail shows it.
    assert!(n(&lat["max_ns"]) >= 5_000_000);
    assert_eq!(n(&r["latency_barrier"]["samples"]), groups * count);
    // The in-process switch completed each barrier exactly once.
    let sw = v["switch"].as_str().unwrap();
    assert!(
        sw.contains(&format!("completions={}", groups * count)),
        "{sw}"
    );

    let log = std::fs::read(&hlog).unwrap();
    let tags: Vec<String> = IntervalLogIterator::new(&log)
        .filter_map(|e| match e.unwrap() {
            LogEntry::Interval(iv) => {
                Some(iv.tag().map(|t| t.as_str().to_string()).unwrap_or_default())
            }
            _ => None,
        })
        .collect();
    assert!(
        tags.iter().any(|t| t == "leaf") && tags.iter().any(|t| t == "barrier"),
        "{tags:?}"
    );
}
