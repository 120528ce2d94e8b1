//! barrier-gen against an in-process barrier-switch that is an intermediate (`--inproc-parent`):
//! its parent port leads over one more `net_ring` pair to a second in-process switch, the
//! root. With loss on the generator's ports and the switch's backoff registers set, every
//! barrier completes, none early, and every barrier went up to the root and came back (one
//! reduce up and one release down per barrier at least). `--inproc-parent` without
//! `--inproc-switch` is refused.

mod common;

#[test]
fn an_intermediate_under_an_in_process_root_completes_every_barrier() {
    let out = common::gen(
        Some("run"),
        &common::eal("parent", "0"),
        &[
            "--inproc-switch",
            "--inproc-parent",
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
            "--resend-timeout-us",
            "20000",
            "--resend-max-us",
            "80000",
            "--resend-jitter-pct",
            "25",
            "--switch-resend-us",
            "2000",
            "--switch-resend-max-us",
            "16000",
            "--switch-resend-jitter-pct",
            "25",
            "--drain",
            "30",
            "--seed",
            "5",
        ],
    );
    let text = common::stdout(&out);
    assert!(out.status.success(), "exit {:?}\n{text}", out.status);
    assert!(text.contains("barriers: 4000 completed"), "{text}");
    assert!(!text.contains("in flight at end"), "{text}");
    assert!(text.contains("early releases 0"), "{text}");
    // The intermediate's parent port: every barrier's reduce went up, its release came down.
    let count = |line_start: &str, key: &str| -> u64 {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(line_start))
            .unwrap_or_else(|| panic!("no '{line_start}' line:\n{text}"));
        let v = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in '{line}'"));
        v.parse().unwrap()
    };
    assert!(
        count("port net_ring_genup tx:", "reduce_out=") >= 4000,
        "{text}"
    );
    assert!(
        count("port net_ring_genup rx:", "release_in=") >= 4000,
        "{text}"
    );
    assert!(text.contains("mbufs back"), "{text}");
}

#[test]
fn a_parent_needs_the_in_process_switch() {
    let out = common::gen(
        None,
        &common::eal("noparent", "0"),
        &["--inproc-parent", "--groups", "10"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", common::stdout(&out));
}
