//! Every TOML example in docs/configuration.md and docs/operations.md is a valid configuration,
//! and `barrier-switch check` accepts one and refuses a broken one with the key in the message
//! (no DPDK involved).

use barrier_switch::config;
use std::path::PathBuf;
use std::process::Command;

fn examples() -> Vec<String> {
    examples_in("configuration.md")
}

fn examples_in(page: &str) -> Vec<String> {
    let doc = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(page);
    let text = std::fs::read_to_string(&doc).unwrap();
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        match (&mut cur, line.trim_end()) {
            (None, "```toml") => cur = Some(String::new()),
            (Some(_), "```") => out.push(cur.take().unwrap()),
            (Some(s), l) => {
                s.push_str(l);
                s.push('\n');
            }
            _ => {}
        }
    }
    out
}

#[test]
fn every_example_is_valid() {
    let ex = examples();
    assert!(
        ex.len() >= 4,
        "expected an example per use, found {}",
        ex.len()
    );
    for (i, e) in ex.iter().enumerate() {
        if let Err(err) = config::parse(e) {
            panic!("example {i} in docs/configuration.md is refused: {err}\n{e}");
        }
    }
}

#[test]
fn the_operations_page_examples_are_valid() {
    let ex = examples_in("operations.md");
    assert!(!ex.is_empty(), "docs/operations.md has no toml example");
    for (i, e) in ex.iter().enumerate() {
        let c = config::parse(e).unwrap_or_else(|err| {
            panic!("example {i} in docs/operations.md is refused: {err}\n{e}")
        });
        assert!(!c.groups.is_empty());
    }
}

#[test]
fn check_command_accepts_and_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, &examples()[0]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_barrier-switch"))
        .args(["check", "--config"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok: 4 ports, 1000 groups"));

    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        examples()[0].replace(
            r#"children = ["leaf0", "leaf1""#,
            r#"children = ["leaf0", "p9""#,
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_barrier-switch"))
        .args(["check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"groups[0].children[1]: unknown port "p9" (the switch's ports: ["leaf0", "leaf1", "leaf2", "leaf3"])"#),
        "{err}"
    );
    assert!(
        err.contains(": line "),
        "the line of the refused key: {err}"
    );

    // A file that is not there: its path once, and the reason.
    let missing = dir.path().join("missing.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_barrier-switch"))
        .args(["check", "--config"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches(missing.to_str().unwrap()).count(),
        1,
        "the path once: {err}"
    );
    assert!(err.contains("cannot read the file: No such file"), "{err}");
}

#[test]
fn documented_messages_are_the_real_ones() {
    let ex = &examples()[0];
    let e = config::parse(&ex.replace("scheduler = 1", "scheduler = 0")).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "line {}: lcores.rx[0].lcore: lcore 0 is already the scheduler: one lcore, one role (or set lcores.shared = true for the reduced mode)",
            e.line.expect("the file has the key")
        )
    );
    let e = config::parse(&ex.replace("role = \"root\"", "role = \"root\"\nresend_timeout = 5"))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("groups[0].resend_timeout: unknown field `resend_timeout`, expected one of"),
        "{e}"
    );
    assert!(e.line.is_some());
}
