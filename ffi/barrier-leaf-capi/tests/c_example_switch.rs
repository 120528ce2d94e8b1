//! The C example against the real switch: a `barrier-switch run` process as the root of one
//! group with three child ports on DPDK `net_af_packet` devices, and three instances of the
//! compiled C example, one on each veth pair's other end, all in a throw-away network namespace.
//! Every barrier completes in every instance, no instance sees a release before the last
//! instance's first reduce of that barrier, and the switch stops on SIGTERM having counted one
//! completion per barrier. The namespace (with its veths) and the switch process go on every exit
//! path, a failed assertion included.
//!
//! Needs root, and the `barrier-switch` binary built in the same target directory as this test
//! (`cargo build --workspace --all-targets`, as scripts/test.sh does first).

mod common;

use barrier_leaf::records::{parse_records, Record};
use barrier_testbed::netns::{can_create, VethNetns};
use common::{build_example_shared, example_seqs, scratch, target_dir};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const GROUP: u32 = 7;
const LEAVES: usize = 3;
const BARRIERS: u32 = 200;

/// `barrier-switch` from the workspace build (`<target>/<profile>/`, next to this test's deps/).
fn switch_binary() -> PathBuf {
    let p = target_dir().join("barrier-switch");
    assert!(
        p.exists(),
        "{} not found: build the workspace first (cargo build --workspace --all-targets, or \
         cargo build -p barrier-switchd with the same CARGO_TARGET_DIR)",
        p.display()
    );
    p
}

/// The switch process: killed on drop unless the test already reaped it, and its EAL runtime
/// folder removed (EAL leaves it behind even with --no-shconf). Declared after the namespace
/// guard, so it drops first: no process is left holding the veths being deleted.
struct SwitchProcess {
    child: Option<Child>,
    file_prefix: String,
}

impl Drop for SwitchProcess {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(Path::new("/var/run/dpdk").join(&self.file_prefix));
    }
}

/// A root switch for `GROUP` with one child port per veth pair's `b` end. Reduced mode (one
/// lcore that polls and schedules) floating over all CPUs, sleeping when idle: the C examples
/// need CPU time too on a 2-core machine.
fn switch_config(bed: &VethNetns, file_prefix: &str) -> String {
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut cfg = format!(
        r#"[eal]
args = ["--lcores", "0@(0-{last})", "--no-huge", "-m", "256", "--no-shconf", "--file-prefix", "{file_prefix}", "--no-pci", "--iova-mode=va", "--no-telemetry", "--log-level=*:warning"]
"#,
        last = ncpu - 1
    );
    let names: Vec<String> = (0..bed.pairs.len()).map(|i| format!("c{i}")).collect();
    for (i, (_, b)) in bed.pairs.iter().enumerate() {
        cfg += &format!(
            "\n[[ports]]\nname = \"c{i}\"\nvdev = \"net_af_packet{i},iface={b},qdisc_bypass=0\"\n"
        );
    }
    let quoted = names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ");
    cfg += &format!(
        r#"
[lcores]
scheduler = 0
shared = true
idle = "sleep"
rx = [ {{ lcore = 0, poll = [{quoted}] }} ]

[[groups]]
number = {GROUP}
role = "root"
children = [{quoted}]
"#
    );
    cfg
}

/// Starts the switch in the namespace and waits for its ready line (printed once its ports are
/// bound, started and drained and its loops poll). Its stderr keeps being drained by a thread, so that a
/// chatty switch never blocks on a full pipe; the lines come back through the receiver.
fn start_switch(
    bed: &VethNetns,
    config: &Path,
    guard: &mut SwitchProcess,
) -> mpsc::Receiver<String> {
    let mut child = bed
        .command(switch_binary().to_str().unwrap())
        .args(["run", "--config", config.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start barrier-switch");
    let err = child.stderr.take().unwrap();
    guard.child = Some(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            // Once the test stops listening the lines are dropped, but still read.
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let ready = line.starts_with("barrier-switch: ready");
                seen.push(line);
                if ready {
                    return rx;
                }
            }
            Err(_) => panic!(
                "barrier-switch not ready within 30 s (or it exited); its stderr:\n{}",
                seen.join("\n")
            ),
        }
    }
}

/// Sends SIGTERM and waits up to 20 s for the switch to exit; returns its status and stdout
/// (where it prints its counters on the way out).
fn stop_switch(guard: &mut SwitchProcess) -> (std::process::ExitStatus, String) {
    let child = guard.child.as_mut().expect("switch running");
    let pid = child.id().to_string();
    let st = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(st.success(), "kill -TERM {pid}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "barrier-switch still running 20 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let child = guard.child.take().unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The number after `name=` in the first of the switch's counter lines that starts with
/// `line_prefix` (`rx total:`, `port c0 rx:`, ...); None when that line or name is absent.
fn counter(report: &str, line_prefix: &str, name: &str) -> Option<u64> {
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with(line_prefix))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
        .map(|v| v.parse().unwrap())
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
    let mut sw = SwitchProcess {
        child: None,
        file_prefix: format!("nbcapi-sw-{}", std::process::id()),
    };
    let config = dir.join("switch.toml");
    std::fs::write(&config, switch_config(&bed, &sw.file_prefix)).unwrap();
    let _switch_stderr = start_switch(&bed, &config, &mut sw);

    // All instances at once: each barrier needs every one of them.
    let records: Vec<PathBuf> = (0..LEAVES)
        .map(|i| dir.join(format!("records{i}.csv")))
        .collect();
    let leaves: Vec<Child> = bed
        .pairs
        .iter()
        .zip(&records)
        .map(|((a, _), rec)| {
            bed.command(exe.to_str().unwrap())
                .arg(a)
                .arg(GROUP.to_string())
                .arg(BARRIERS.to_string())
                .arg(rec)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start the C example")
        })
        .collect();
    // Each instance gives up on a barrier after 2 s, so these waits end.
    let outs: Vec<_> = leaves
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
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
    let (status, report) = stop_switch(&mut sw);
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

#[test]
fn counter_reads_a_named_value_from_a_report_line() {
    let report =
        "== switch root\n  rx total: frames=600 completions=200\n  port c0 rx: completions=7\n";
    assert_eq!(counter(report, "rx total", "completions"), Some(200));
    assert_eq!(counter(report, "rx total", "frames"), Some(600));
    assert_eq!(counter(report, "port c0 rx", "completions"), Some(7));
    assert_eq!(counter(report, "rx total", "duplicates"), None);
    assert_eq!(counter(report, "scheduler", "completions"), None);
}
