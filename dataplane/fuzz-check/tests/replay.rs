//! CI's replay of the fuzz corpus: every file of `dataplane/fuzz-check/fuzz/corpus/<target>/`
//! (and of `seeds/<target>/` where there are seeds) through the same check the cargo-fuzz
//! target runs, on stable Rust, without cargo-fuzz. A missing or empty corpus directory fails.
//! The inputs that once failed a check are tests of their own in `findings.rs`.

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// Every file under `dir`, sorted; panics when the directory is missing or has none.
fn files(dir: &Path) -> Vec<PathBuf> {
    let rd = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("corpus directory {} unreadable: {e}", dir.display()));
    let mut v: Vec<PathBuf> = rd
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    assert!(!v.is_empty(), "corpus directory {} is empty", dir.display());
    v
}

fn replay(target: &str, check: fn(&[u8])) {
    let mut dirs = vec![fuzz_dir().join("corpus").join(target)];
    let seeds = fuzz_dir().join("seeds").join(target);
    if seeds.exists() {
        dirs.push(seeds);
    }
    let mut n = 0;
    for dir in dirs {
        for f in files(&dir) {
            let data = std::fs::read(&f).unwrap();
            let r = std::panic::catch_unwind(|| check(&data));
            assert!(r.is_ok(), "{target}: {} fails its check", f.display());
            n += 1;
        }
    }
    eprintln!("{target}: {n} inputs replayed");
}

#[test]
fn parse_frame_corpus() {
    replay("parse_frame", barrier_fuzz_check::frame::check);
}

#[test]
fn config_corpus() {
    replay("config", barrier_fuzz_check::config::check);
}

#[test]
fn control_corpus() {
    replay("control", barrier_fuzz_check::control::check);
}

#[test]
fn switch_events_corpus() {
    replay("switch_events", barrier_fuzz_check::events::check);
}

/// The replay is not vacuous: a missing or empty directory is refused.
#[test]
#[should_panic(expected = "unreadable")]
fn missing_corpus_fails() {
    files(&fuzz_dir().join("corpus/no_such_target"));
}

#[test]
#[should_panic(expected = "is empty")]
fn empty_corpus_fails() {
    let dir = std::env::temp_dir().join(format!("nb-empty-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = Cleanup(dir.clone());
    files(&dir);
}

struct Cleanup(PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
