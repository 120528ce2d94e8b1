//! Shared by the end-to-end tests: run the barrier-gen binary (each test file is its own
//! process, and each run of the binary its own EAL) with the DESIGN.md test flags.
#![allow(dead_code)]

use std::process::{Command, Output};

/// EAL flags for a machine without NIC or hugepages, a unique file prefix, and `lcores` in
/// `--lcores` syntax ("0,1", or "0@(0-1)" for an lcore that may run on either CPU).
pub fn eal(tag: &str, lcores: &str) -> Vec<String> {
    let flags = [
        "--no-huge",
        "-m",
        "256",
        "--no-shconf",
        "--no-pci",
        "--iova-mode=va",
        "--no-telemetry",
        "--log-level=*:warning",
        "--lcores",
        lcores,
        "--file-prefix",
    ];
    flags
        .iter()
        .map(|s| s.to_string())
        .chain([format!("nb-gen-{tag}-{}", std::process::id())])
        .collect()
}

/// One lcore allowed on every CPU: two busy programs in one test then share the machine instead
/// of both spinning on CPU 0.
pub fn floating_lcore() -> String {
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    format!("0@(0-{})", n - 1)
}

/// Runs `barrier-gen [sub] <eal> -- <args>`; panics with its output if it could not run.
pub fn gen(sub: Option<&str>, eal: &[String], args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_barrier-gen"));
    if let Some(s) = sub {
        c.arg(s);
    }
    c.args(eal).arg("--").args(args);
    let out = c.output().expect("barrier-gen runs");
    eprintln!(
        "--- barrier-gen stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if let Some(i) = eal.iter().position(|a| a == "--file-prefix") {
        remove_runtime_dir(&eal[i + 1]);
    }
    out
}

/// EAL leaves its runtime directory behind even with --no-shconf; a test removes its own.
pub fn remove_runtime_dir(prefix: &str) {
    let _ = std::fs::remove_dir_all(std::path::Path::new("/var/run/dpdk").join(prefix));
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
