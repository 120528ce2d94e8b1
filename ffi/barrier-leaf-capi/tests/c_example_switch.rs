//! The C example against the real switch: a `barrier-switch run` process as the root of one
//! group with three child ports on DPDK `net_af_packet` devices, and three instances of the
//! compiled C example, one on each veth pair's other end, all in a throw-away network namespace.
//! Every barrier completes in every instance, no instance sees a release before the last
//! instance's first reduce of that barrier, and the switch stops on SIGTERM having counted one
//! completion per barrier. The namespace (with its veths) and the switch process go on every exit
//! path, a failed assertion included.
//!
//! A second job on the same group and epoch (issue 21) fails in every instance with
//! `BARRIER_EEPOCHINUSE` (the example's exit status 3) instead of waiting out its timeout, and
//! none of it is released.
//!
//! Needs root, and the `barrier-switch` binary built in the same target directory as this test
//! (`cargo build --workspace --all-targets`, as scripts/test.sh does first).

mod common;

use barrier_leaf::records::{parse_records, Record};
use barrier_testbed::netns::{can_create, VethNetns};
use barrier_testbed::switch_process::{counter, root_config, switch_binary, SwitchProcess};
use common::{build_example_shared, example_seqs, scratch};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

const GROUP: u32 = 7;
const LEAVES: usize = 3;
const BARRIERS: u32 = 200;

/// Runs one instance of the C example per veth pair at once (each barrier needs every one of
/// them) for `count` barriers of `GROUP`, instance `i` writing records to `records[i]`.
/// Returns their outputs; each gives up on a barrier after 2 s, so this ends.
fn run_examples(
    bed: &VethNetns,
    exe: &std::path::Path,
    count: u32,
    records: &[PathBuf],
) -> Vec<Output> {
    let leaves: Vec<Child> = bed
        .pairs
        .iter()
        .zip(records)
        .map(|((a, _), rec)| {
            bed.command(exe.to_str().unwrap())
                .arg(a)
                .arg(GROUP.to_string())
                .arg(count.to_string())
                .arg(rec)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start the C example")
        })
        .collect();
    leaves
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

#[test]
fn c_examples_complete_barriers_through_barrier_switch() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    // Before anything is created: a missing binary fails here, with the build command to run.
    let _ = switch_binary();
    let dir = scratch("switch");
    let exe = build_example_shared(&dir);
    let bed = VethNetns::with_pairs(LEAVES).expect("netns + veth pairs");
    let file_prefix = format!("nbcapi-sw-{}", std::process::id());
    let config = dir.join("switch.toml");
    std::fs::write(&config, root_config(&bed, GROUP, &file_prefix)).unwrap();
    let mut sw = SwitchProcess::start(&bed, &config, &file_prefix);

    let records: Vec<PathBuf> = (0..LEAVES)
        .map(|i| dir.join(format!("records{i}.csv")))
        .collect();
    let outs = run_examples(&bed, &exe, BARRIERS, &records);
    for (i, out) in outs.iter().enumerate() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "instance {i} on {}: {}\n{stdout}{}",
            bed.pairs[i].0,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            example_seqs(&stdout, GROUP),
            (0..BARRIERS).collect::<Vec<_>>(),
            "instance {i}"
        );
        assert!(
            stdout.contains(&format!("{BARRIERS} releases"))
                && stdout.contains(&format!("next seq {BARRIERS}")),
            "instance {i}: {stdout}"
        );
    }

    // Across the instances: for every barrier, no release came back before the last first
    // reduce went out (the clock is CLOCK_MONOTONIC, one for the whole machine).
    let mut by_seq: BTreeMap<u32, Vec<Record>> = BTreeMap::new();
    for (i, path) in records.iter().enumerate() {
        let recs = parse_records(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(recs.len(), BARRIERS as usize, "instance {i} records");
        for r in recs {
            assert_eq!(r.group, GROUP);
            by_seq.entry(r.seq).or_default().push(r);
        }
    }
    assert_eq!(by_seq.len(), BARRIERS as usize);
    for (seq, rs) in &by_seq {
        assert_eq!(rs.len(), LEAVES, "seq {seq}: {rs:?}");
        let last_arrival = rs.iter().map(|r| r.first_reduce_ns).max().unwrap();
        let first_release = rs.iter().map(|r| r.release_ns).min().unwrap();
        assert!(
            first_release > last_arrival,
            "seq {seq}: released at {first_release} before the last reduce at {last_arrival}: {rs:?}"
        );
    }

    // The switch stops cleanly and counted each barrier once.
    let (status, report) = sw.stop();
    eprintln!("--- barrier-switch counters:\n{report}");
    assert!(status.success(), "barrier-switch exit {status}:\n{report}");
    assert_eq!(
        counter(&report, "rx total", "completions"),
        Some(u64::from(BARRIERS)),
        "{report}"
    );
    assert!(report.contains("mbufs back"), "{report}");
    drop(sw);
    drop(bed);
    let _ = std::fs::remove_dir_all(dir);
}

/// Issue 21 through the C API and the real switch: a first job of ten barriers, then the same
/// job again on the same group in the same epoch. The switch, at barrier 10, answers every
/// reduce 0 with release 9: each instance of the second job ends with BARRIER_EEPOCHINUSE and
/// exit status 3 well within its 2 s wait timeout, and prints no barrier.
#[test]
fn a_second_job_in_the_same_epoch_ends_with_eepochinuse() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let _ = switch_binary();
    const FIRST: u32 = 10;
    let dir = scratch("epoch");
    let exe = build_example_shared(&dir);
    let bed = VethNetns::with_pairs(LEAVES).expect("netns + veth pairs");
    let file_prefix = format!("nbcapi-ep-{}", std::process::id());
    let config = dir.join("switch.toml");
    std::fs::write(&config, root_config(&bed, GROUP, &file_prefix)).unwrap();
    let mut sw = SwitchProcess::start(&bed, &config, &file_prefix);

    let records = |job: u32| -> Vec<PathBuf> {
        (0..LEAVES)
            .map(|i| dir.join(format!("job{job}-{i}.csv")))
            .collect()
    };
    for (i, out) in run_examples(&bed, &exe, FIRST, &records(1))
        .iter()
        .enumerate()
    {
        assert!(
            out.status.success(),
            "job 1, instance {i}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let started = Instant::now();
    let outs = run_examples(&bed, &exe, FIRST, &records(2));
    let took = started.elapsed();
    for (i, out) in outs.iter().enumerate() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "instance {i}: {stdout}{stderr}");
        assert!(
            stderr.starts_with(
                "barrier 0: the switch is at another barrier of this epoch: an earlier run used \
                 the group's epoch; reset the group to a new epoch and open the leaf with it: \
                 group 7 epoch 1: the switch answers barrier 0 with the release of barrier 9: "
            ),
            "instance {i}: {stderr}"
        );
        assert!(
            stderr.contains("barrierctl group reset 7 on each switch, root first"),
            "{stderr}"
        );
        assert_eq!(example_seqs(&stdout, GROUP), Vec::<u32>::new(), "released");
        assert!(
            stdout.contains("0 releases") && stdout.contains("next seq 0"),
            "instance {i}: {stdout}"
        );
    }
    for path in records(2) {
        let recs = parse_records(&std::fs::read_to_string(&path).unwrap_or_default()).unwrap();
        assert!(recs.is_empty(), "{}: {recs:?}", path.display());
    }
    // Not the 2 s wait timeout: a few 2 ms re-send periods, plus starting three programs.
    assert!(took < Duration::from_millis(1500), "{took:?}");

    let (status, report) = sw.stop();
    assert!(status.success(), "barrier-switch exit {status}:\n{report}");
    assert_eq!(
        counter(&report, "rx total", "completions"),
        Some(u64::from(FIRST)),
        "the second job completed nothing: {report}"
    );
    drop(sw);
    drop(bed);
    let _ = std::fs::remove_dir_all(dir);
}
