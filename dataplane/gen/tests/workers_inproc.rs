//! Two generators side by side (`--workers 2`), each on its own lcore with half of the ports and
//! half of the groups, against one in-process barrier-switch (whose groups' children are each
//! generator's own ports; it runs in the first generator's loop, which keeps turning until the
//! second has finished). With 1% loss every barrier of both halves completes, and the merged
//! JSON report adds both up.

mod common;

#[test]
fn two_generators_share_nothing_and_report_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let hlog = dir.path().join("w.hlog");
    let n = common::floating_lcore();
    let lcores = format!("{n},{}", n.replacen("0@", "1@", 1));
    let out = common::gen(
        None,
        &common::eal("workers", &lcores),
        &[
            "--inproc-switch",
            "--ports",
            "4",
            "--workers",
            "2",
            "--groups",
            "200",
            "--count",
            "30",
            "--duration",
            "120",
            "--drain",
            "30",
            "--loss",
            "0.01",
            "--resend-timeout-us",
            "20000",
            "--json",
            "-q",
            "--hdr-log",
            hlog.to_str().unwrap(),
        ],
    );
    let text = common::stdout(&out);
    assert!(out.status.success(), "exit {:?}\n{text}", out.status);
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(v["config"]["workers"].as_u64(), Some(2));
    let r = &v["report"];
    assert_eq!(r["ports"].as_u64(), Some(4));
    assert_eq!(r["groups"].as_u64(), Some(200));
    assert_eq!(r["per_port"].as_array().unwrap().len(), 4);
    let b = &r["barriers"];
    assert_eq!(b["started"].as_u64(), Some(200 * 30));
    assert_eq!(b["completed"].as_u64(), Some(200 * 30), "{text}");
    assert_eq!(b["incomplete"].as_u64(), Some(0));
    assert_eq!(b["early_releases"].as_u64(), Some(0));
    // Each generator's group has 2 children: 2 leaf samples per barrier.
    assert_eq!(r["latency_leaf"]["samples"].as_u64(), Some(2 * 200 * 30));
    assert_eq!(r["latency_barrier"]["samples"].as_u64(), Some(200 * 30));
    assert!(r["faults_tx"]["dropped"].as_u64().unwrap() > 0);
    // Both generators wrote interval histograms, tagged by generator.
    let log = std::fs::read_to_string(&hlog).unwrap();
    for tag in [
        "Tag=leaf-w0,",
        "Tag=leaf-w1,",
        "Tag=barrier-w0,",
        "Tag=barrier-w1,",
    ] {
        assert!(log.contains(tag), "{tag} missing");
    }
}

#[test]
fn more_generators_than_lcores_is_refused() {
    let out = common::gen(
        None,
        &common::eal("workers-refused", "0"),
        &["--inproc-switch", "--workers", "2", "-q"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("worker lcores"));
}
