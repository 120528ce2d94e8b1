//! Issue 21 through the `barrier-leaf` CLI and the real switch: a `barrier-switch run` process
//! in a throw-away namespace, root of one group over three `net_af_packet` child ports, and
//! three CLI leaves on the other veth ends. A first job runs ten barriers; the same job again,
//! on the same group in the same epoch, must end in every leaf with the epoch-in-use message
//! and exit status 3 within a few re-send periods (not the wait timeout), releasing no one.
//!
//! Needs root, and the `barrier-switch` binary built in the same target directory as this test
//! (`cargo build -p barrier-switchd`, or the workspace as scripts/test.sh does first).

use barrier_leaf::records::parse_records;
use barrier_testbed::netns::{can_create, VethNetns};
use barrier_testbed::switch_process::{counter, root_config, switch_binary, SwitchProcess};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_barrier-leaf");
const GROUP: u32 = 7;
const BARRIERS: u32 = 10;
const WAIT_TIMEOUT_US: u64 = 5_000_000;

/// One CLI leaf per veth pair, all at once, `BARRIERS` barriers each with 2 ms re-sends;
/// leaf `i` writes its records to `records[i]`. Returns their outputs.
fn run_job(bed: &VethNetns, records: &[PathBuf]) -> Vec<Output> {
    let leaves: Vec<Child> = bed
        .pairs
        .iter()
        .zip(records)
        .map(|((a, _), rec)| {
            bed.command(EXE)
                .args(["--iface", a, "--group", &GROUP.to_string()])
                .args(["--count", &BARRIERS.to_string(), "--resend-us", "2000"])
                .args(["--timeout-us", &WAIT_TIMEOUT_US.to_string()])
                .args(["--json", "--quiet", "--records"])
                .arg(rec)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start barrier-leaf")
        })
        .collect();
    leaves
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

fn json(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {stdout:?} stderr {:?}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn records(path: &Path) -> Vec<barrier_leaf::Record> {
    parse_records(&std::fs::read_to_string(path).unwrap_or_default()).unwrap()
}

#[test]
fn a_second_job_in_the_same_epoch_exits_3_naming_the_fix() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    // Before anything is created: a missing binary fails here, with the build command to run.
    let _ = switch_binary();
    let dir = tempdir();
    let bed = VethNetns::with_pairs(3).expect("netns + veth pairs");
    let file_prefix = format!("nbleaf-ep-{}", std::process::id());
    let config = dir.join("switch.toml");
    std::fs::write(&config, root_config(&bed, GROUP, &file_prefix)).unwrap();
    let mut sw = SwitchProcess::start(&bed, &config, &file_prefix);
    let files = |job: u32| -> Vec<PathBuf> {
        (0..3)
            .map(|i| dir.join(format!("job{job}-{i}.csv")))
            .collect()
    };

    for (i, out) in run_job(&bed, &files(1)).iter().enumerate() {
        let j = json(out);
        assert!(out.status.success(), "job 1, leaf {i}: {j}");
        assert_eq!(j["completed"], BARRIERS, "job 1, leaf {i}: {j}");
    }

    let started = Instant::now();
    let outs = run_job(&bed, &files(2));
    let took = started.elapsed();
    for (i, out) in outs.iter().enumerate() {
        let j = json(out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "leaf {i}: {j} {stderr}");
        let want =
            "group 7 epoch 1: the switch answers barrier 0 with the release of barrier 9: the \
                    group was used by an earlier run in this epoch; reset the group's run on every \
                    switch of its tree (barrierctl reset PLAN, or barrierctl group reset 7 on each \
                    switch, root first) and open the leaves with the new epoch (Config::epoch, \
                    barrier_leaf_options.epoch, barrier-leaf --epoch E)";
        assert_eq!(j["error"], want, "leaf {i}");
        assert!(
            stderr.contains(&format!("barrier-leaf: {want}")),
            "leaf {i}: {stderr}"
        );
        assert_eq!(
            (j["completed"].as_u64(), j["stats"]["releases"].as_u64()),
            (Some(0), Some(0)),
            "leaf {i} was released: {j}"
        );
    }
    for path in files(2) {
        assert!(records(&path).is_empty(), "{}", path.display());
    }
    // A few 2 ms re-send periods and three program starts, not the 5 s wait timeout.
    assert!(took < Duration::from_millis(2_500), "{took:?}");

    let (status, report) = sw.stop();
    assert!(status.success(), "barrier-switch exit {status}:\n{report}");
    assert_eq!(
        counter(&report, "rx total", "completions"),
        Some(u64::from(BARRIERS)),
        "the second job completed nothing: {report}"
    );
    drop(sw);
    drop(bed);
    let _ = std::fs::remove_dir_all(dir);
}

/// A scratch folder of this test process.
fn tempdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("barrier-leaf-epoch-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
