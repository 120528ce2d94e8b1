//! The example configurations in dataplane/switchd/configs/ (installed by scripts/install.sh
//! under PREFIX/share/netbarrier/configs): `barrier-switch check` accepts every one, and every
//! one is named by the documentation, so no walkthrough needs a hand-written file.

use std::path::{Path, PathBuf};
use std::process::Command;

fn configs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("configs")
}

/// Every `*.toml` under `dir`, as paths relative to it, sorted.
fn tomls(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir.join(rel)).unwrap() {
        let e = e.unwrap();
        let r = rel.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            tomls(dir, &r, out);
        } else if r.extension().is_some_and(|x| x == "toml") {
            out.push(r);
        }
    }
    out.sort();
}

fn all_configs() -> Vec<PathBuf> {
    let mut v = Vec::new();
    tomls(&configs_dir(), Path::new(""), &mut v);
    v
}

#[test]
fn barrier_switch_check_accepts_every_example() {
    let all = all_configs();
    // root, intermediate, single-host root, the generator's switch, a 3-level tree (3 files)
    for want in [
        "root.toml",
        "intermediate.toml",
        "single-host.toml",
        "gen-root.toml",
        "tree/root.toml",
        "tree/mid0.toml",
        "tree/mid1.toml",
    ] {
        assert!(
            all.contains(&PathBuf::from(want)),
            "{want} missing: {all:?}"
        );
    }
    for rel in &all {
        let path = configs_dir().join(rel);
        let out = Command::new(env!("CARGO_BIN_EXE_barrier-switch"))
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(": ok: "),
            "{}: {}\n{stdout}{}",
            rel.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn every_example_is_named_by_the_docs() {
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let text: String = ["operations.md", "leaf.md", "configuration.md"]
        .iter()
        .map(|p| std::fs::read_to_string(docs.join(p)).unwrap())
        .collect();
    for rel in all_configs() {
        let name = format!("dataplane/switchd/configs/{}", rel.display());
        assert!(text.contains(&name), "{name} is not named in docs/");
    }
    // and every configs/ path the docs name exists
    for word in text.split(|c: char| c.is_whitespace() || "`()[],;:\"'".contains(c)) {
        if let Some(rel) = word.strip_prefix("dataplane/switchd/configs/") {
            // (a shell variable in a walkthrough, `tree/$s.toml`, names several)
            if rel.ends_with(".toml") && !rel.contains('$') {
                assert!(
                    configs_dir().join(rel).is_file(),
                    "docs name {word}, missing"
                );
            }
        }
    }
}

#[test]
fn the_operations_page_shows_root_toml_as_it_is() {
    let page = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md");
    let page = std::fs::read_to_string(page).unwrap();
    let shown: Vec<&str> = page
        .split("```toml\n")
        .nth(1)
        .expect("a toml block in docs/operations.md")
        .split("```")
        .next()
        .unwrap()
        .lines()
        .collect();
    let file = std::fs::read_to_string(configs_dir().join("root.toml")).unwrap();
    let file: Vec<&str> = file.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        shown, file,
        "docs/operations.md's first toml block differs from configs/root.toml (comments aside)"
    );
}
