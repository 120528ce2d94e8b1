//! `barrierctl reset PLAN` and `barrierctl delete PLAN` end to end: three switches in process
//! (a root and two intermediates, their ports wired to each other in memory, every switch's
//! pollers on one busy loop, their control sockets served on another thread), four leaves
//! played by this test. Group 7 is applied in epoch 3 and does a barrier; the tree reset puts
//! every switch in one new epoch, root first, after which the old run's reduces release nobody
//! and the new run's barriers complete. Then every refusal (nothing changed), a failure
//! midway (a fake switch that refuses; the report names who changed), and the delete.

mod common;

use common::*;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

const GROUP: u32 = 7;

/// A switch that answers `group_show` with group 7 as the plan has it at s2 (epoch `epoch`)
/// and refuses every change: a switch that fails after the checks passed.
fn fake_s2(path: &Path, epoch: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !stop.load(Relaxed) {
            let Ok((stream, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            };
            stream.set_nonblocking(false).unwrap();
            let mut w = stream.try_clone().unwrap();
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                let answer = if line.contains("group_show") {
                    format!(
                        r#"{{"ok":true,"result":{{"kind":"group","group":{{"group":7,"role":"intermediate","children":["d0","d1"],"parent":"up","resend_timeout_ns":1000000,"epoch":{epoch},"phase":"unknown","arrived":[],"completions":0,"resends":0}}}}}}"#
                    )
                } else {
                    r#"{"ok":false,"error":"the switch's table is read-only today (fake)"}"#.into()
                };
                if writeln!(w, "{answer}").is_err() {
                    break;
                }
            }
        }
    })
}

#[test]
fn a_tree_is_reset_root_first_to_one_new_epoch_and_deleted() {
    let mut t = start();
    let dir = t.dir.path().to_path_buf();
    let topo = dir.join("topo.toml");
    std::fs::write(&topo, TOPOLOGY).unwrap();
    let out = ctl_ok(&[
        "--json",
        "plan",
        topo.to_str().unwrap(),
        "--group",
        "7",
        "--members",
        "h1,h2,h3,h4",
    ]);
    let plan = dir.join("plan.json");
    std::fs::write(&plan, out).unwrap();
    let plan = plan.to_str().unwrap().to_string();
    let s2 = t.sockets["s2"].clone();
    let sockets = t.sockets_arg(&s2);

    // Created in epoch 3; a barrier.
    ctl_ok(&["apply", &plan, "--sockets", &sockets, "--epoch", "3"]);
    assert_eq!(t.epochs(GROUP), [Some(3); 3]);
    t.barrier(GROUP, 3, 0);

    // The tree reset: one new epoch, root first.
    let out = ctl_ok(&["reset", &plan, "--sockets", &sockets]);
    assert_eq!(
        out,
        "root: reset (epoch 3 -> 4)\ns1: reset (epoch 3 -> 4)\ns2: reset (epoch 3 -> 4)\n\
         group 7: reset to epoch 4 on 3 switch(es), root first\n"
    );
    assert_eq!(t.epochs(GROUP), [Some(4); 3]);
    // The old run's leaves, at barrier 1 in epoch 3: refused everywhere, nobody released.
    for h in 0..4 {
        t.send(h, GROUP, 3, 1);
    }
    for h in 0..4 {
        assert_eq!(t.release(h, 1, Duration::from_millis(50)), None);
    }
    // The new run from barrier 0.
    t.barrier(GROUP, 4, 0);
    t.barrier(GROUP, 4, 1);

    // Refused, with nothing changed: the epoch the group is in (always, forced or not) ...
    for force in [&[][..], &["--force"]] {
        let mut args = vec!["reset", &plan, "--sockets", &sockets, "--epoch", "4"];
        args.extend_from_slice(force);
        let (stdout, e) = ctl_fails(&args);
        assert_eq!(stdout, "");
        assert!(
            e.contains(
                "switch \"root\": group 7 is in epoch 4 already: a new run needs a new epoch"
            ),
            "{e}"
        );
        assert!(e.ends_with("; nothing was changed\n"), "{e}");
        assert_eq!(t.epochs(GROUP), [Some(4); 3]);
    }
    // ... and one behind the highest, unless forced.
    let (_, e) = ctl_fails(&["reset", &plan, "--sockets", &sockets, "--epoch", "2"]);
    assert!(
        e.contains("switch \"root\": group 7: epoch 2 is not ahead of epoch 4, the highest this switch has had for the group")
            && e.contains("leave the epoch out for the next one (5), give one ahead of 4, or --force to reuse 2 (only when no frame of its earlier run can still arrive); nothing was changed"),
        "{e}"
    );
    assert_eq!(t.epochs(GROUP), [Some(4); 3]);
    let out = ctl_ok(&[
        "reset",
        &plan,
        "--sockets",
        &sockets,
        "--epoch",
        "2",
        "--force",
    ]);
    assert!(out.contains("root: reset (epoch 4 -> 2)"), "{out}");
    assert_eq!(t.epochs(GROUP), [Some(2); 3]);
    let show = ctl_ok(&["--socket", t.socket("root"), "group", "show", "7"]);
    assert!(
        show.contains("  epoch:       2 (the highest this switch has had: 4)\n"),
        "{show}"
    );
    // One switch moved on by hand: the tree's next epoch is past the highest of all.
    ctl_ok(&[
        "--socket",
        t.socket("s2"),
        "group",
        "reset",
        "7",
        "--epoch",
        "9",
    ]);
    let (_, e) = ctl_fails(&["reset", &plan, "--sockets", &sockets, "--epoch", "3"]);
    assert!(
        e.contains("switch \"root\": group 7: epoch 3 is not ahead of epoch 4, the highest this switch has had for the group (it is in 2 now)")
            && e.contains("(without --epoch this reset takes epoch 10 on every switch); nothing was changed"),
        "{e}"
    );
    let out = ctl_ok(&["--json", "reset", &plan, "--sockets", &sockets]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["epoch"], 10, "{v}");
    assert_eq!(v["error"], serde_json::Value::Null);
    assert_eq!(
        v["switches"],
        serde_json::json!([
            {"switch": "root", "action": "reset", "from": 2, "epoch": 10},
            {"switch": "s1", "action": "reset", "from": 2, "epoch": 10},
            {"switch": "s2", "action": "reset", "from": 9, "epoch": 10},
        ])
    );
    t.barrier(GROUP, 10, 0);

    // A switch whose group is not the plan's, or where it is missing: refused up front.
    ctl_ok(&[
        "--socket",
        t.socket("s2"),
        "group",
        "set",
        "7",
        "--children",
        "d0",
    ]);
    let (_, e) = ctl_fails(&["reset", &plan, "--sockets", &sockets]);
    assert!(e.contains("switch \"s2\": group 7 is intermediate (parent up, children d0) there, the plan says intermediate (parent up, children d0,d1): the plan is not this tree's"), "{e}");
    assert!(e.ends_with("nothing was changed\n"), "{e}");
    ctl_ok(&[
        "--socket",
        t.socket("s2"),
        "group",
        "set",
        "7",
        "--children",
        "d0,d1",
    ]);
    assert_eq!(t.epochs(GROUP), [Some(10); 3]);
    // A switch without a socket, or not running: nothing changed.
    let partial = format!("root={},s1={}", t.socket("root"), t.socket("s1"));
    let (_, e) = ctl_fails(&["reset", &plan, "--sockets", &partial]);
    assert!(e.contains("no socket given for switch \"s2\""), "{e}");
    let gone = dir.join("gone.sock");
    let (_, e) = ctl_fails(&["reset", &plan, "--sockets", &t.sockets_arg(&gone)]);
    assert!(
        e.contains("switch \"s2\": ") && e.contains("no switch is running there"),
        "{e}"
    );
    assert!(e.ends_with("nothing was changed\n"), "{e}");
    assert_eq!(t.epochs(GROUP), [Some(10); 3]);

    // A failure midway: s2 (a fake) passes the checks, then refuses; root and s1 stay reset
    // and the report says so.
    let fake = dir.join("fake-s2.sock");
    let fake_stop = Arc::new(AtomicBool::new(false));
    let faker = fake_s2(&fake, 10, fake_stop.clone());
    let (stdout, e) = ctl_fails(&["reset", &plan, "--sockets", &t.sockets_arg(&fake)]);
    assert_eq!(
        stdout,
        "root: reset (epoch 10 -> 11)\ns1: reset (epoch 10 -> 11)\n"
    );
    assert!(
        e.contains("switch \"s2\": refused: the switch's table is read-only today (fake); reset on root, s1, NOT on s2: the tree is split between two epochs; once that is fixed, run the reset again (without --epoch it puts every switch in a newer epoch)"),
        "{e}"
    );
    assert_eq!(t.epochs(GROUP), [Some(11), Some(11), Some(10)]);
    let (stdout, e) = ctl_fails(&["delete", &plan, "--sockets", &t.sockets_arg(&fake)]);
    assert_eq!(stdout, "root: deleted (epoch 11)\ns1: deleted (epoch 11)\n");
    assert!(
        e.contains("deleted on root, s1, NOT on s2: run the delete again to finish"),
        "{e}"
    );
    fake_stop.store(true, Relaxed);
    faker.join().unwrap();
    // The run again: the delete finishes, passing over the switches without the group.
    let out = ctl_ok(&["delete", &plan, "--sockets", &sockets]);
    assert_eq!(
        out,
        "root: absent (the group was not there; nothing to delete)\n\
         s1: absent (the group was not there; nothing to delete)\n\
         s2: deleted (epoch 10)\n\
         group 7: deleted on 1 of 3 switch(es), absent on the others, root first\n"
    );
    assert_eq!(t.epochs(GROUP), [None; 3]);
    // The group reset needs it everywhere.
    let (_, e) = ctl_fails(&["reset", &plan, "--sockets", &sockets]);
    assert!(
        e.contains("switch \"root\": group 7 is not configured there"),
        "{e}"
    );

    // Created again: the switches remember the epochs they had, so the old one is refused
    // (apply undoes what it created) and a new one is taken.
    let (_, e) = ctl_fails(&["apply", &plan, "--sockets", &sockets, "--epoch", "10"]);
    assert!(
        e.contains("switch \"s1\": refused: group 7: epoch 10 is not ahead of epoch 11, the highest this switch has had for the group (deleted since)"),
        "{e}"
    );
    assert_eq!(t.epochs(GROUP), [None; 3]);
    ctl_ok(&["apply", &plan, "--sockets", &sockets, "--epoch", "12"]);
    assert_eq!(t.epochs(GROUP), [Some(12); 3]);
    t.barrier(GROUP, 12, 0);
    let out = ctl_ok(&["delete", &plan, "--sockets", &sockets]);
    assert!(
        out.ends_with("group 7: deleted on 3 switch(es), root first\n"),
        "{out}"
    );
}

#[test]
fn a_group_number_is_not_a_plan() {
    let out = ctl(&["reset", "7", "--sockets", "root=/nonexistent"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("one switch's group is `barrierctl group reset 7`"),
        "{e}"
    );
    let out = ctl(&["delete", "/nonexistent.json", "--sockets", "a=b"]);
    assert_eq!(out.status.code(), Some(2));
    let out = ctl(&["reset", "/nonexistent.json"]);
    assert_eq!(out.status.code(), Some(2), "--sockets is required");
}
