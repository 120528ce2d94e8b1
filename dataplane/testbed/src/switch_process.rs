//! The real `barrier-switch` binary as a child process in a throw-away network namespace: the
//! root of one group whose children are `net_af_packet` ports on the `b` ends of a
//! [`VethNetns`]'s pairs, for end-to-end tests of programs that need a kernel interface (the
//! leaf CLI, the C example) on the `a` ends. The process is killed, and EAL's runtime folder
//! removed, when the guard drops, also when the test fails.
//!
//! Needs the binary built in the same target directory as the test (`cargo build -p
//! barrier-switchd`, or the whole workspace as scripts/test.sh does first).

use crate::netns::VethNetns;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `barrier-switch` of the calling test's build: `<target>/<profile>/`, the folder above the
/// test binary's `deps/`. Panics, naming the build command, when it is not there.
pub fn switch_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test binary lives in <target>/<profile>/deps");
    let p = dir.join("barrier-switch");
    assert!(
        p.exists(),
        "{} not found: build the workspace first (cargo build --workspace --all-targets, or \
         cargo build -p barrier-switchd with the same CARGO_TARGET_DIR)",
        p.display()
    );
    p
}

/// A configuration for a root of `group` with one child port per veth pair of `bed` (its `b`
/// end, port `c<i>`). Reduced mode (one lcore that polls and schedules) floating over all
/// CPUs, sleeping when idle: the programs under test need CPU time too on a 2-core machine.
/// `file_prefix` is EAL's, unique per test process.
pub fn root_config(bed: &VethNetns, group: u32, file_prefix: &str) -> String {
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
number = {group}
role = "root"
children = [{quoted}]
"#
    );
    cfg
}

/// A running `barrier-switch run --config FILE` in a namespace.
pub struct SwitchProcess {
    child: Option<Child>,
    file_prefix: String,
    /// The switch's stderr lines after its ready line, drained by a thread so that a chatty
    /// switch never blocks on a full pipe.
    pub stderr: mpsc::Receiver<String>,
}

impl SwitchProcess {
    /// Starts the switch in `bed`'s namespace on `config` (whose EAL `--file-prefix` is
    /// `file_prefix`) and waits up to 30 s for its ready line, printed once its ports are
    /// bound, started and drained and its loops poll. Panics with its stderr otherwise.
    pub fn start(bed: &VethNetns, config: &Path, file_prefix: &str) -> SwitchProcess {
        let mut child = bed
            .command(switch_binary().to_str().expect("a UTF-8 path"))
            .args(["run", "--config"])
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start barrier-switch");
        let err = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                // Once the test stops listening the lines are dropped, but still read.
                let _ = tx.send(line);
            }
        });
        // From here on Drop kills the process.
        let sw = SwitchProcess {
            child: Some(child),
            file_prefix: file_prefix.to_string(),
            stderr: rx,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match sw.stderr.recv_timeout(left) {
                Ok(line) => {
                    let ready = line.starts_with("barrier-switch: ready");
                    seen.push(line);
                    if ready {
                        return sw;
                    }
                }
                Err(_) => panic!(
                    "barrier-switch not ready within 30 s (or it exited); its stderr:\n{}",
                    seen.join("\n")
                ),
            }
        }
    }

    /// Sends SIGTERM and waits up to 20 s for the switch to exit; returns its status and
    /// stdout (where it prints its counters on the way out).
    pub fn stop(&mut self) -> (ExitStatus, String) {
        let child = self.child.as_mut().expect("switch running");
        let pid = child.id().to_string();
        let st = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(st.success(), "kill -TERM {pid}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().expect("wait for the switch").is_none() {
            assert!(
                Instant::now() < deadline,
                "barrier-switch still running 20 s after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = self
            .child
            .take()
            .expect("switch running")
            .wait_with_output()
            .expect("the switch's output");
        (
            out.status,
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }
}

impl Drop for SwitchProcess {
    /// Kills the switch unless the test stopped it, and removes EAL's runtime folder (EAL
    /// leaves it behind even with --no-shconf). Declare the guard after the namespace's, so
    /// that it drops first: no process is left holding the veths being deleted.
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(Path::new("/var/run/dpdk").join(&self.file_prefix));
    }
}

/// The number after `name=` in the first of the switch's counter lines that starts with
/// `line_prefix` (`rx total:`, `port c0 rx:`, ...); `None` when that line or name is absent.
pub fn counter(report: &str, line_prefix: &str, name: &str) -> Option<u64> {
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with(line_prefix))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
