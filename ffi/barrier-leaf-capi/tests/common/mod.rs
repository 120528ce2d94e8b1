//! Shared by the crate's end-to-end tests (each tests/*.rs file is its own binary): where cargo
//! put libbarrier, scratch folders next to it, running commands, and compiling the C example.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const CRATE: &str = env!("CARGO_MANIFEST_DIR");

/// target/<profile>: where cargo put libbarrier.so and libbarrier.a (a test binary lives in its
/// deps/ folder) and the workspace's binaries.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// target/<profile>, checked to hold libbarrier.so and libbarrier.a.
pub fn lib_dir() -> PathBuf {
    let dir = target_dir();
    for f in ["libbarrier.so", "libbarrier.a"] {
        assert!(
            dir.join(f).exists(),
            "{} missing: build barrier-leaf-capi first",
            dir.join(f).display()
        );
    }
    dir
}

/// A scratch folder for this test's build products.
pub fn scratch(name: &str) -> PathBuf {
    let d = lib_dir().join(format!("capi-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

/// Runs `cmd`; panics with its output unless it exits 0.
pub fn check(cmd: &mut Command) -> Output {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Compiles examples/c/barrier_example.c against the shared library (rpath set).
pub fn build_example_shared(dir: &Path) -> PathBuf {
    let exe = dir.join("barrier_example");
    let lib = lib_dir();
    check(
        Command::new("cc")
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1"])
            .arg(format!("-I{CRATE}/include"))
            .arg(format!("{CRATE}/examples/c/barrier_example.c"))
            .arg("-o")
            .arg(&exe)
            .arg(format!("-L{}", lib.display()))
            .arg("-lbarrier")
            .arg(format!("-Wl,-rpath,{}", lib.display())),
    );
    exe
}

/// The sequence numbers of the example's per-barrier lines for `group`, in output order.
pub fn example_seqs(stdout: &str, group: u32) -> Vec<u32> {
    let prefix = format!("barrier group={group} seq=");
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect()
}
