//! Issue 12, item 5, through DPDK: barrier-gen floods an in-process barrier-switch (net_ring
//! pairs) with frames its access lists must refuse, on a port no group names and on a member
//! port beside its leaves, in flood phases alternating with control phases. Every barrier
//! completes, none early; every flood frame is counted by the switch in its refusal class; the
//! foreign groups are untouched; the report's phases and ratios add up. Bad flood arguments
//! exit 2.

mod common;

use serde_json::Value;

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn a_flood_on_a_nonmember_and_a_member_port_changes_no_group_and_every_barrier_completes() {
    let out = common::gen(
        None,
        &common::eal("flood", "0"),
        &[
            "--inproc-switch",
            "--ports",
            "3",
            "--groups",
            "64",
            "--duration",
            "1.2",
            "--drain",
            "10",
            "--resend-timeout-us",
            "20000",
            "--flood-nonmember",
            "--flood-member",
            "0",
            "--flood-rate",
            "50000",
            "--flood-phases",
            "2",
            "--json",
            "-q",
        ],
    );
    let text = common::stdout(&out);
    assert!(out.status.success(), "exit {:?}\n{text}", out.status);
    let d: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let r = &d["report"];
    let b = &r["barriers"];
    assert!(u(&b["completed"]) > 0, "{text}");
    assert_eq!(u(&b["completed"]), u(&b["started"]));
    assert_eq!((u(&b["incomplete"]), u(&b["early_releases"])), (0, 0));
    assert_eq!(d["config"]["flood"]["rate_per_port"], 50000);

    let f = &r["flood"];
    let targets = f["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 2);
    let mut total = 0;
    for (t, classes) in targets.iter().zip([
        &["nonmember_reduce", "nonmember_release"][..],
        &[
            "child_release",
            "other_epoch",
            "foreign_group",
            "unknown_group",
        ][..],
    ]) {
        let by: Vec<(String, u64)> = serde_json::from_value(t["by_class"].clone()).unwrap();
        let names: Vec<&str> = by.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, classes, "{t}");
        assert!(by.iter().all(|(_, n)| *n > 0), "every class sent: {t}");
        assert_eq!(by.iter().map(|(_, n)| n).sum::<u64>(), u(&t["sent"]));
        total += u(&t["sent"]);
    }
    assert_eq!(t_nonmember(targets), (true, false));
    assert_eq!(u(&f["sent"]), total);
    assert_eq!(u(&f["unsent"]), 0);
    // 0.6 s of flood at 50,000 frames/s on each of two ports: about 60,000 frames (the bucket
    // may be behind on a loaded machine, never ahead by more than its depth, 256, per phase).
    assert!(total <= 2 * (30_000 + 2 * 256), "{total}");
    let phases = f["per_phase"].as_array().unwrap();
    assert_eq!(phases.len(), 4);
    let mut in_flood = 0;
    for (i, p) in phases.iter().enumerate() {
        assert_eq!(p["flood"], i % 2 == 1, "{p}");
        if i % 2 == 0 {
            assert_eq!(u(&p["flood_frames"]), 0, "no flood in a control phase: {p}");
        }
        in_flood += u(&p["flood_frames"]);
    }
    assert_eq!(in_flood, total);
    // A ratio is null only when the control phases had nothing to divide by (a machine that
    // took the CPU away for all of them).
    for k in ["barriers_per_s", "leaf_p50", "leaf_p99"] {
        match f["ratios"][k].as_f64() {
            Some(v) => assert!(v > 0.0 || u(&f["flood"]["completed"]) == 0, "{k} {v}"),
            None => assert_eq!(u(&f["control"]["completed"]), 0, "{k}: {f}"),
        }
    }

    // The switch's side: each class in its counter, exactly; nothing else changed.
    let c = &d["flood_check"];
    assert_eq!(c["ok"], true, "{c}");
    assert_eq!(c["problems"].as_array().unwrap().len(), 0);
    assert_eq!(u(&c["foreign_changed"]), 0);
    assert_eq!(u(&c["switch_completions"]), u(&b["completed"]));
    let counters = c["counters"].as_array().unwrap();
    for x in counters {
        assert_eq!(x["expected"], x["got"], "{x}");
    }
    let got = |port: &str, counter: &str| -> u64 {
        counters
            .iter()
            .find(|x| x["port"] == port && x["counter"] == counter)
            .map(|x| u(&x["got"]))
            .unwrap_or_else(|| panic!("no {port} {counter}: {c}"))
    };
    assert_eq!(got("net_ring_genx", "frames"), u(&targets[0]["sent"]));
    assert_eq!(
        got("net_ring_gen0", "drop_other_epoch"),
        class(&targets[1], "other_epoch")
    );
    // The same in the switch's own counters.
    let sw = d["switch"].as_str().unwrap();
    let line = sw
        .lines()
        .find(|l| l.trim_start().starts_with("port net_ring_gensutx rx:"))
        .unwrap_or_else(|| panic!("{sw}"));
    assert!(
        line.contains(&format!(
            "drop_not_a_child={}",
            class(&targets[0], "nonmember_reduce")
        )),
        "{line}"
    );
    assert!(!line.contains("recorded"), "{line}");
}

fn t_nonmember(t: &[Value]) -> (bool, bool) {
    (
        t[0]["nonmember"].as_bool().unwrap(),
        t[1]["nonmember"].as_bool().unwrap(),
    )
}

fn class(t: &Value, name: &str) -> u64 {
    let by: Vec<(String, u64)> = serde_json::from_value(t["by_class"].clone()).unwrap();
    by.into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, n)| n)
        .unwrap()
}

#[test]
fn a_full_rate_member_flood_with_the_switch_on_its_own_lcore() {
    let out = common::gen(
        None,
        &common::eal("floodfull", "0,1"),
        &[
            "--inproc-switch",
            "--ports",
            "2",
            "--groups",
            "32",
            "--duration",
            "0.6",
            "--drain",
            "10",
            "--resend-timeout-us",
            "20000",
            "--flood-member",
            "1",
            "--flood-rate",
            "full",
            "--flood-phases",
            "1",
            "-q",
        ],
    );
    let text = common::stdout(&out);
    assert!(out.status.success(), "exit {:?}\n{text}", out.status);
    assert!(text.contains("flood check: ok"), "{text}");
    assert!(text.contains("(full rate per port)"), "{text}");
    assert!(text.contains("flood/control: barriers/s"), "{text}");
    assert!(!text.contains("in flight at end"), "{text}");
    assert!(text.contains("early releases 0"), "{text}");
    assert!(text.contains("mbufs back"), "{text}");
}

#[test]
fn bad_flood_arguments_are_refused() {
    for (i, args) in [
        // a non-member ring pair needs the in-process switch
        &["--port", "net_null0", "--flood-nonmember"][..],
        &["--inproc-switch", "--ports", "3", "--flood-member", "3"][..],
        &["--inproc-switch", "--flood-nonmember", "--flood-rate", "0"][..],
        &[
            "--inproc-switch",
            "--flood-nonmember",
            "--flood-rate",
            "fast",
        ][..],
        &["--inproc-switch", "--flood-nonmember", "--count", "5"][..],
        &[
            "--inproc-switch",
            "--flood-nonmember",
            "--flood-phases",
            "0",
        ][..],
        // every port flooded: the foreign groups would have no child
        &[
            "--inproc-switch",
            "--ports",
            "2",
            "--flood-member",
            "0",
            "--flood-member",
            "1",
        ][..],
    ]
    .iter()
    .enumerate()
    {
        let out = common::gen(None, &common::eal(&format!("floodbad{i}"), "0"), args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            common::stdout(&out)
        );
    }
    let out = common::gen(
        Some("search"),
        &common::eal("floodsearch", "0"),
        &["--inproc-switch", "--flood-nonmember"],
    );
    assert_eq!(out.status.code(), Some(2));
}
