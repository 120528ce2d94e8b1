//! `barrierctl reset PLAN` and `barrierctl delete PLAN` end to end: three switches in process
//! (a root and two intermediates, their ports wired to each other in memory, every switch's
//! pollers on one busy loop, their control sockets served on another thread), four leaves
//! played by this test. Group 7 is applied in epoch 3 and does a barrier; the tree reset puts
//! every switch in one new epoch, root first, after which the old run's reduces release nobody
//! and the new run's barriers complete. Then every refusal (nothing changed), a failure
//! midway (a fake switch that refuses; the report names who changed), and the delete.

use barrier_mgmt::{Control, ControlServer, PortDesc};
use barrier_protocol::leaf::LeafSend;
use barrier_protocol::table::GroupTable;
use barrier_protocol::wire::{FrameRepr, Kind, MacAddr};
use barrier_protocol::{Epoch, GroupId, Seq};
use barrier_runtime::clock::Clock;
use barrier_runtime::counters::LoopCounters;
use barrier_runtime::io::{mem_wire, MemRx, MemTx, RxQueue, TxQueue};
use barrier_runtime::poll::{run_loop, Idle, Poller};
use barrier_switch::engine::{build_switch, mem_port, PortIo};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

const GROUP: u32 = 7;
const HOSTS: [&str; 4] = ["h1", "h2", "h3", "h4"];

/// root d0 -- s1 up, root d1 -- s2 up; h1, h2 on s1 d0, d1; h3, h4 on s2 d0, d1.
const TOPOLOGY: &str = r#"
[[switches]]
name = "root"
[[switches]]
name = "s1"
[[switches]]
name = "s2"
[[hosts]]
name = "h1"
[[hosts]]
name = "h2"
[[hosts]]
name = "h3"
[[hosts]]
name = "h4"
[[links]]
a = "s1:up"
b = "root:d0"
[[links]]
a = "s2:up"
b = "root:d1"
[[links]]
a = "h1"
b = "s1:d0"
[[links]]
a = "h2"
b = "s1:d1"
[[links]]
a = "h3"
b = "s2:d0"
[[links]]
a = "h4"
b = "s2:d1"
"#;

fn ctl(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_barrierctl"))
        .args(args)
        .output()
        .unwrap();
    println!(
        "$ barrierctl {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn ctl_ok(args: &[&str]) -> String {
    let out = ctl(args);
    assert!(
        out.status.success(),
        "barrierctl {args:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs barrierctl, expects exit code 1; returns (stdout, stderr).
fn ctl_fails(args: &[&str]) -> (String, String) {
    let out = ctl(args);
    assert_eq!(out.status.code(), Some(1), "barrierctl {args:?}");
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn reduce(epoch: u32, seq: u32) -> Vec<u8> {
    LeafSend {
        group: GroupId(GROUP),
        epoch: Epoch::new(epoch),
        seq: Seq(seq),
        retransmit: false,
    }
    .frame(MacAddr([2, 0, 0, 0, 0, 9]), MacAddr::BROADCAST, None)
    .to_bytes()
    .to_vec()
}

/// The three switches, running, and the leaves' ends of the host ports.
struct Tree {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    tables: HashMap<&'static str, Arc<GroupTable>>,
    sockets: HashMap<&'static str, PathBuf>,
    to_switch: Vec<MemTx>,
    from_switch: Vec<MemRx>,
    dir: tempfile::TempDir,
}

impl Drop for Tree {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

type Port = PortIo<MemRx, MemTx>;

fn start() -> Tree {
    // The switch-to-switch links: two one-way wires each.
    let link = || {
        let (down_tx, down_rx) = mem_wire(1024);
        let (up_tx, up_rx) = mem_wire(1024);
        // (the upper switch's port, the lower switch's "up")
        (
            PortIo::new("d", up_rx, down_tx),
            PortIo::new("up", down_rx, up_tx),
        )
    };
    let rename = |mut p: Port, name: &str| {
        p.name = name.to_string();
        p
    };
    let (root_d0, s1_up) = link();
    let (root_d1, s2_up) = link();
    let mut to_switch = Vec::new();
    let mut from_switch = Vec::new();
    let mut host_port = |name: &str| {
        let (port, tx, rx) = mem_port(name, 1024);
        to_switch.push(tx);
        from_switch.push(rx);
        port
    };
    let h1 = host_port("d0");
    let h2 = host_port("d1");
    let h3 = host_port("d0");
    let h4 = host_port("d1");
    let switches: Vec<(&'static str, Vec<Port>)> = vec![
        ("root", vec![rename(root_d0, "d0"), rename(root_d1, "d1")]),
        ("s1", vec![s1_up, h1, h2]),
        ("s2", vec![s2_up, h3, h4]),
    ];
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new();
    let mut pollers: Vec<Box<dyn Poller>> = Vec::new();
    let mut servers = Vec::new();
    let mut tables = HashMap::new();
    let mut sockets = HashMap::new();
    for (i, (name, ports)) in switches.into_iter().enumerate() {
        let descs: Vec<PortDesc> = ports
            .iter()
            .map(|p| PortDesc {
                name: p.name.clone(),
                device: "vdev:net_ring0".into(),
                peer_mac: [0xff; 6],
            })
            .collect();
        let table = Arc::new(GroupTable::new(16));
        let sw = build_switch(
            name,
            [2, 0, 0, 0, 0, i as u8 + 1],
            ports,
            table.clone(),
            clock.now_ns(),
        );
        let path = dir.path().join(format!("{name}.sock"));
        servers
            .push(ControlServer::bind(&path, Control::new(sw.stats.clone(), descs, None)).unwrap());
        pollers.extend(sw.rx.into_iter().map(|(_, _, p)| p));
        pollers.push(sw.sched);
        tables.insert(name, table);
        sockets.insert(name, path);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let dataplane = std::thread::spawn(move || {
        let counters = LoopCounters::default();
        run_loop(pollers, &s, clock, &counters, Idle::Yield { after: 100 });
    });
    let s = stop.clone();
    let management = std::thread::spawn(move || {
        while !s.load(Relaxed) {
            for sv in &mut servers {
                sv.serve(Duration::from_millis(2));
            }
        }
    });
    Tree {
        stop,
        threads: vec![dataplane, management],
        tables,
        sockets,
        to_switch,
        from_switch,
        dir,
    }
}

impl Tree {
    fn socket(&self, name: &str) -> &str {
        self.sockets[name].to_str().unwrap()
    }
    /// `--sockets` for the plan's switches, `s2` at `s2` (a real or a fake one).
    fn sockets_arg(&self, s2: &Path) -> String {
        format!(
            "root={},s1={},s2={}",
            self.socket("root"),
            self.socket("s1"),
            s2.display()
        )
    }
    fn epochs(&self) -> Vec<Option<u32>> {
        ["root", "s1", "s2"]
            .iter()
            .map(|n| self.tables[n].config(GroupId(GROUP)).map(|c| c.epoch.get()))
            .collect()
    }
    fn send(&mut self, host: usize, epoch: u32, seq: u32) {
        self.to_switch[host].offer(&reduce(epoch, seq)).unwrap();
        self.to_switch[host].flush();
    }
    /// The epoch of a release for `seq` to `host` within `wait` (releases of other barriers,
    /// sent again for a re-sent reduce, are passed over).
    fn release(&mut self, host: usize, seq: u32, wait: Duration) -> Option<u32> {
        let deadline = Instant::now() + wait;
        let mut v = Vec::new();
        loop {
            self.from_switch[host].rx_burst(&mut v, 16);
            for f in v.drain(..) {
                let r = FrameRepr::parse(&f).unwrap();
                assert_eq!(r.kind, Kind::Release);
                if r.seq == Seq(seq) {
                    return Some(r.epoch.get());
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    /// One barrier of the group in `epoch`: h1..h3 reduce, nobody is released; h4 reduces,
    /// all four are, in that epoch.
    fn barrier(&mut self, epoch: u32, seq: u32) {
        let mut v = Vec::new();
        for rx in &mut self.from_switch {
            rx.rx_burst(&mut v, 1024);
        }
        for h in 0..3 {
            self.send(h, epoch, seq);
        }
        for (h, name) in HOSTS.iter().enumerate().take(3) {
            assert_eq!(
                self.release(h, seq, Duration::from_millis(30)),
                None,
                "{name} released before h4 arrived"
            );
        }
        self.send(3, epoch, seq);
        for (h, name) in HOSTS.iter().enumerate() {
            assert_eq!(
                self.release(h, seq, Duration::from_secs(10)),
                Some(epoch),
                "{name}: barrier {seq} of epoch {epoch}"
            );
        }
    }
}

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
    assert_eq!(t.epochs(), [Some(3); 3]);
    t.barrier(3, 0);

    // The tree reset: one new epoch, root first.
    let out = ctl_ok(&["reset", &plan, "--sockets", &sockets]);
    assert_eq!(
        out,
        "root: reset (epoch 3 -> 4)\ns1: reset (epoch 3 -> 4)\ns2: reset (epoch 3 -> 4)\n\
         group 7: reset to epoch 4 on 3 switch(es), root first\n"
    );
    assert_eq!(t.epochs(), [Some(4); 3]);
    // The old run's leaves, at barrier 1 in epoch 3: refused everywhere, nobody released.
    for h in 0..4 {
        t.send(h, 3, 1);
    }
    for h in 0..4 {
        assert_eq!(t.release(h, 1, Duration::from_millis(50)), None);
    }
    // The new run from barrier 0.
    t.barrier(4, 0);
    t.barrier(4, 1);

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
        assert_eq!(t.epochs(), [Some(4); 3]);
    }
    // ... and one behind the highest, unless forced.
    let (_, e) = ctl_fails(&["reset", &plan, "--sockets", &sockets, "--epoch", "2"]);
    assert!(
        e.contains("switch \"root\": group 7: epoch 2 is not ahead of epoch 4, the highest this switch has had for the group")
            && e.contains("leave the epoch out for the next one (5), give one ahead of 4, or --force to reuse 2 (only when no frame of its earlier run can still arrive); nothing was changed"),
        "{e}"
    );
    assert_eq!(t.epochs(), [Some(4); 3]);
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
    assert_eq!(t.epochs(), [Some(2); 3]);
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
    t.barrier(10, 0);

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
    assert_eq!(t.epochs(), [Some(10); 3]);
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
    assert_eq!(t.epochs(), [Some(10); 3]);

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
    assert_eq!(t.epochs(), [Some(11), Some(11), Some(10)]);
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
    assert_eq!(t.epochs(), [None; 3]);
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
    assert_eq!(t.epochs(), [None; 3]);
    ctl_ok(&["apply", &plan, "--sockets", &sockets, "--epoch", "12"]);
    assert_eq!(t.epochs(), [Some(12); 3]);
    t.barrier(12, 0);
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
