//! The `barrier-sim` command line: exit codes, the violation report with its trace, JSON.

use std::process::Command;

fn sim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_barrier-sim"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

const FAULTY: &[&str] = &[
    "run",
    "--random-tree",
    "7",
    "--barriers",
    "3000",
    "--loss",
    "0.05",
    "--dup",
    "0.01",
    "--reorder",
    "0.01",
    "--restarts",
    "10",
    "--seed",
    "2",
];

#[test]
fn faulty_run_is_ok_and_exits_zero() {
    let (code, out, err) = sim(FAULTY);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("3,000 of 3,000 barriers completed"), "{out}");
    assert!(
        out.contains("safety violations 0 | stuck barriers 0"),
        "{out}"
    );
    assert!(err.contains("wall clock"));
}

#[test]
fn broken_switch_is_reported_with_its_trace_and_exit_1() {
    let mut args = FAULTY.to_vec();
    args.extend(["--broken-switch", "stale-reduce-completes", "--trace", "10"]);
    let (code, out, _) = sim(&args);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("ReleaseBeforeAllArrived"), "{out}");
    assert!(out.contains("last 10 events:"), "{out}");
    assert!(out.contains("has not sent its reduce"), "{out}");
    assert!(
        out.contains("BROKEN RULE StaleReduceCompletes applies to the reduce"),
        "{out}"
    );
}

#[test]
fn json_output_parses_and_matches_the_run() {
    let (code, out, _) = sim(&["run", "--tree", "3,3", "--barriers", "50", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["barriers_completed"], 50);
    assert_eq!(v["tree"]["leaves"], 9);
    assert_eq!(v["ok"], true);
}

#[test]
fn compare_prints_both_barriers() {
    let (code, out, err) = sim(&[
        "compare",
        "--leaves",
        "256",
        "--levels",
        "2",
        "--barriers",
        "3",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("fanouts 16,16") && out.contains("dissemination"),
        "{out}"
    );
    assert!(
        out.contains("2,048"),
        "256 leaves x 8 rounds of messages: {out}"
    );
    let (code, out, _) = sim(&[
        "compare",
        "--leaves",
        "256",
        "--levels",
        "2",
        "--barriers",
        "3",
        "--json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["dissemination"]["rounds"], 8);
    assert_eq!(v["in_network"]["link_frames_per_barrier"], 2.0 * 272.0);
}

#[test]
fn bad_arguments_exit_2() {
    assert_eq!(sim(&["run", "--tree", "2,64"]).0, 2);
    assert_eq!(sim(&["run", "--loss", "1.5"]).0, 2);
    assert_eq!(sim(&["compare", "--leaves", "67", "--levels", "1"]).0, 2);
}
