//! End to end, in process: a switch on in-memory wires runs on its own busy loop (the
//! dataplane), 1,000 groups doing barriers the whole time with two emulated leaves on ports d0
//! and d1; its control socket is served on another thread (the management thread's part), and
//! the `barrierctl` program creates, changes, resets and deletes group 1050 (ports d2, d3,
//! played by this test) meanwhile. Then: no group of the 1,000 stalled or saw a release it did
//! not wait for, hostile requests changed nothing, and a non-root client is refused.

use barrier_ctl::client::Client;
use barrier_ctl::proto::{Reply, Request};
use barrier_mgmt::{Control, ControlServer, PortDesc};
use barrier_protocol::leaf::LeafSend;
use barrier_protocol::switch::GroupConfig;
use barrier_protocol::table::GroupTable;
use barrier_protocol::wire::{FrameRepr, Kind, MacAddr};
use barrier_protocol::{Epoch, GroupId, PortIdx, PortSet, Seq};
use barrier_runtime::clock::Clock;
use barrier_runtime::counters::LoopCounters;
use barrier_runtime::io::{MemRx, MemTx, RxQueue, TxQueue};
use barrier_runtime::poll::{run_loop, Idle, Poller};
use barrier_switch::engine::{build_switch, mem_port};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RUNNING: u32 = 1000;
const MANAGED: u32 = 1050;
const PORTS: [&str; 4] = ["d0", "d1", "d2", "d3"];

/// The test switch's two threads: its pollers on one busy loop, the control server on
/// another; both stop when the flag is set.
fn run_threads(
    pollers: Vec<Box<dyn Poller>>,
    clock: Clock,
    mut server: ControlServer,
) -> (
    Arc<AtomicBool>,
    std::thread::JoinHandle<()>,
    std::thread::JoinHandle<()>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let dataplane = std::thread::spawn(move || {
        let counters = LoopCounters::default();
        run_loop(pollers, &s, clock, &counters, Idle::Yield { after: 100 });
    });
    let s = stop.clone();
    let management = std::thread::spawn(move || {
        while !s.load(Relaxed) {
            server.serve(Duration::from_millis(20));
        }
    });
    (stop, dataplane, management)
}

/// How the control socket describes the test switch's ports (as `barrier-switch run` would
/// for `net_ring` vdevs).
fn port_descs() -> Vec<PortDesc> {
    PORTS
        .iter()
        .enumerate()
        .map(|(i, n)| PortDesc {
            name: n.to_string(),
            device: format!("vdev:net_ring{i}"),
            peer_mac: [0xff; 6],
        })
        .collect()
}

fn reduce(group: u32, seq: u32) -> Vec<u8> {
    reduce_in(Epoch::DEFAULT, group, seq)
}

fn reduce_in(epoch: Epoch, group: u32, seq: u32) -> Vec<u8> {
    LeafSend {
        group: GroupId(group),
        epoch,
        seq: Seq(seq),
        retransmit: false,
    }
    .frame(MacAddr([2, 0, 0, 0, 0, 9]), MacAddr::BROADCAST, None)
    .to_bytes()
    .to_vec()
}

/// The two leaves of every running group, on d0 and d1: each waits for the release of its
/// barrier, then reduces the next; d1 reduces one pass after d0, so the switch sees the
/// barriers half-arrived. A release for another barrier than the one awaited is counted.
struct Leaves {
    tx: [MemTx; 2],
    rx: [MemRx; 2],
    awaiting: Vec<u32>,
    released: Vec<[bool; 2]>,
    /// Reduces of d1 to send on the next pass.
    late: Vec<u32>,
    completed: Arc<Vec<AtomicU64>>,
    unexpected: Arc<AtomicU64>,
    started: bool,
}

impl Leaves {
    fn send(&mut self, port: usize, group: u32) {
        let f = reduce(group, self.awaiting[group as usize]);
        while self.tx[port].offer(&f).is_err() {
            self.tx[port].flush();
        }
    }
}

impl Poller for Leaves {
    fn poll(&mut self, _now: u64) -> bool {
        if !self.started {
            self.started = true;
            for g in 0..RUNNING {
                self.send(0, g);
                self.late.push(g);
            }
        }
        let late = std::mem::take(&mut self.late);
        let busy = !late.is_empty();
        for g in late {
            self.send(1, g);
        }
        let mut frames = Vec::new();
        for port in 0..2 {
            frames.clear();
            self.rx[port].rx_burst(&mut frames, 64);
            for f in &frames {
                let r = FrameRepr::parse(f).expect("the switch sends valid frames");
                let g = r.group.0 as usize;
                if r.kind != Kind::Release || g >= RUNNING as usize || r.seq.0 != self.awaiting[g] {
                    self.unexpected.fetch_add(1, Relaxed);
                    continue;
                }
                self.released[g][port] = true;
                if self.released[g] == [true, true] {
                    self.released[g] = [false, false];
                    self.awaiting[g] += 1;
                    self.completed[g].fetch_add(1, Relaxed);
                    self.send(0, g as u32);
                    self.late.push(g as u32);
                }
            }
        }
        for t in &mut self.tx {
            t.flush();
        }
        busy || !frames.is_empty()
    }
}

struct Bed {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    socket: PathBuf,
    completed: Arc<Vec<AtomicU64>>,
    unexpected: Arc<AtomicU64>,
    /// This test's ends of d2 and d3.
    to_switch: Vec<MemTx>,
    from_switch: Vec<MemRx>,
    /// The epoch this test's leaves on d2 and d3 are in.
    epoch: Epoch,
    _dir: tempfile::TempDir,
}

fn start() -> Bed {
    let table = Arc::new(GroupTable::new(1100));
    for g in 0..RUNNING {
        table
            .configure(GroupId(g), GroupConfig::root(PortSet(0b11)))
            .unwrap();
    }
    let mut ports = Vec::new();
    let (mut leaf_tx, mut leaf_rx) = (Vec::new(), Vec::new());
    for name in PORTS {
        let (port, in_tx, out_rx) = mem_port(name, 4096);
        leaf_tx.push(in_tx);
        leaf_rx.push(out_rx);
        ports.push(port);
    }
    let clock = Clock::new();
    let sw = build_switch("s0", [2, 0, 0, 0, 0, 1], ports, table, clock.now_ns());
    let descs = port_descs();
    let control = Control::new(sw.stats.clone(), descs, None);
    let dir = tempfile::tempdir().unwrap();
    // World-traversable, so that the non-root client below reaches the socket's own check.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = dir.path().join("s0.sock");
    let server = ControlServer::bind(&socket, control).unwrap();

    let completed: Arc<Vec<AtomicU64>> =
        Arc::new((0..RUNNING).map(|_| AtomicU64::new(0)).collect());
    let unexpected = Arc::new(AtomicU64::new(0));
    let from_switch = leaf_rx.split_off(2);
    let to_switch = leaf_tx.split_off(2);
    let mut rx = leaf_rx.into_iter();
    let mut tx = leaf_tx.into_iter();
    let leaves = Leaves {
        tx: [tx.next().unwrap(), tx.next().unwrap()],
        rx: [rx.next().unwrap(), rx.next().unwrap()],
        awaiting: vec![0; RUNNING as usize],
        released: vec![[false; 2]; RUNNING as usize],
        late: Vec::new(),
        completed: completed.clone(),
        unexpected: unexpected.clone(),
        started: false,
    };
    let mut pollers: Vec<Box<dyn Poller>> = sw.rx.into_iter().map(|(_, _, p)| p).collect();
    pollers.push(sw.sched);
    pollers.push(Box::new(leaves));
    let (stop, dataplane, management) = run_threads(pollers, clock, server);
    Bed {
        stop,
        threads: vec![dataplane, management],
        socket,
        completed,
        unexpected,
        to_switch,
        from_switch,
        epoch: Epoch::DEFAULT,
        _dir: dir,
    }
}

impl Bed {
    fn total(&self) -> u64 {
        self.completed.iter().map(|c| c.load(Relaxed)).sum()
    }
    fn counts(&self) -> Vec<u64> {
        self.completed.iter().map(|c| c.load(Relaxed)).collect()
    }
    /// Every running group completes at least `n` more barriers within 60 s.
    fn all_progress(&self, n: u64) {
        let base = self.counts();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let now = self.counts();
            let behind: Vec<usize> = (0..base.len()).filter(|&g| now[g] < base[g] + n).collect();
            if behind.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} group(s) stalled, e.g. group {} at {} barriers",
                behind.len(),
                behind[0],
                now[behind[0]]
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    fn ctl(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_barrierctl"))
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }
    /// Runs barrierctl, expects success, returns stdout (printed, for the docs' examples).
    fn ctl_ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        let stdout = String::from_utf8(out.stdout).unwrap();
        println!("$ barrierctl {}\n{stdout}", args.join(" "));
        assert!(
            out.status.success(),
            "barrierctl {args:?}: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
    /// Runs barrierctl, expects exit code 1, returns stderr.
    fn ctl_refused(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        let stderr = String::from_utf8(out.stderr).unwrap();
        println!("$ barrierctl {}\n{stderr}", args.join(" "));
        assert_eq!(out.status.code(), Some(1), "barrierctl {args:?}: {stderr}");
        stderr
    }
    /// A reduce of the managed group's leaf on `port`, in the leaves' epoch `self.epoch`.
    fn send(&mut self, port: usize, group: u32, seq: u32) {
        let f = reduce_in(self.epoch, group, seq);
        self.to_switch[port - 2].offer(&f).unwrap();
        self.to_switch[port - 2].flush();
    }
    /// The next frame the switch sends on `port` within `wait`.
    fn recv(&mut self, port: usize, wait: Duration) -> Option<(Kind, u32, u32)> {
        let deadline = Instant::now() + wait;
        let mut v = Vec::new();
        loop {
            self.from_switch[port - 2].rx_burst(&mut v, 1);
            if let Some(f) = v.pop() {
                let r = FrameRepr::parse(&f).unwrap();
                return Some((r.kind, r.group.0, r.seq.0));
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    /// One barrier of the managed group over `ports`: all but the last reduce, nothing comes
    /// back; the last reduces, every port gets the release.
    fn barrier(&mut self, ports: &[usize], seq: u32) {
        let (last, first) = ports.split_last().unwrap();
        for &p in first {
            self.send(p, MANAGED, seq);
        }
        for &p in first {
            assert_eq!(
                self.recv(p, Duration::from_millis(30)),
                None,
                "released before port {last} arrived"
            );
        }
        self.send(*last, MANAGED, seq);
        for &p in ports {
            assert_eq!(
                self.recv(p, Duration::from_secs(10)),
                Some((Kind::Release, MANAGED, seq)),
                "port {p}, barrier {seq}"
            );
        }
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A line of `group show`: the label padded to 13 columns.
fn row(k: &str, v: &str) -> String {
    format!("  {:<13}{v}\n", format!("{k}:"))
}

#[test]
fn groups_managed_while_1000_others_run() {
    let mut bed = start();
    bed.all_progress(3);
    let listing = bed.ctl_ok(&["groups"]);
    assert!(listing.contains("0..=999"), "{listing}");
    assert!(
        listing.contains("1000 group(s) configured; table capacity 1100"),
        "{listing}"
    );

    // Create: a root of d2 and d3, epoch 5.
    let out = bed.ctl_ok(&[
        "group",
        "create",
        "1050",
        "--children",
        "d2,d3",
        "--epoch",
        "5",
    ]);
    assert_eq!(out, "group 1050: created (epoch 5)\n");
    bed.epoch = Epoch::new(5);
    bed.barrier(&[2, 3], 0);
    bed.barrier(&[3, 2], 1);
    bed.send(2, MANAGED, 2);
    std::thread::sleep(Duration::from_millis(20));
    let show = bed.ctl_ok(&["group", "show", "1050"]);
    for (k, v) in [
        ("role", "root"),
        ("epoch", "5"),
        ("children", "d2, d3"),
        ("phase", "collecting"),
        ("seq", "2"),
        ("arrived", "1 of 2: [d2] (waiting for d3)"),
        ("completions", "2"),
    ] {
        let want = row(k, v);
        assert!(show.contains(&want), "{want:?} not in\n{show}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&bed.ctl_ok(&["--json", "group", "show", "1050"])).unwrap();
    assert_eq!(json["kind"], "group");
    assert_eq!(json["group"]["arrived"], serde_json::json!(["d2"]));
    assert_eq!(json["group"]["seq"], 2);

    // Change: d2 alone. The change starts the group's state afresh: d2's reduce is adopted
    // and completes at once.
    let out = bed.ctl_ok(&["group", "set", "1050", "--children", "d2"]);
    assert_eq!(out, "group 1050: changed (epoch 5)\n");
    bed.send(2, MANAGED, 2);
    assert_eq!(
        bed.recv(2, Duration::from_secs(10)),
        Some((Kind::Release, MANAGED, 2))
    );
    assert_eq!(
        bed.recv(3, Duration::from_millis(30)),
        None,
        "d3 is no child now"
    );
    bed.ctl_ok(&["group", "set", "1050", "--children", "d2,d3"]);

    // Reset: a new epoch, nothing known.
    let out = bed.ctl_ok(&["group", "reset", "1050"]);
    assert_eq!(out, "group 1050: reset (epoch 6)\n");
    let show = bed.ctl_ok(&["group", "show", "1050"]);
    assert!(
        show.contains(&row("phase", "unknown")) && show.contains(&row("seq", "-")),
        "{show}"
    );
    // The old run's leaves (epoch 5, still at barrier 3) are refused; the new run's complete.
    bed.send(2, MANAGED, 3);
    bed.send(3, MANAGED, 3);
    assert_eq!(bed.recv(2, Duration::from_millis(50)), None);
    assert_eq!(bed.recv(3, Duration::from_millis(1)), None);
    bed.epoch = Epoch::new(6);
    bed.barrier(&[2, 3], 0);
    bed.barrier(&[3, 2], 1);

    // Refusals: exit code 1, the reason (with its code where the switch gives one: a group
    // specification's), nothing changed.
    let before = bed.ctl_ok(&["--json", "groups"]);
    let e = bed.ctl_refused(&["group", "create", "1050", "--children", "d2"]);
    assert!(
        e.starts_with("barrierctl: refused: group 1050 exists already (epoch 6)"),
        "{e}"
    );
    let e = bed.ctl_refused(&["group", "create", "1051", "--children", "d2,d9"]);
    assert!(
        e.starts_with("barrierctl: refused (unknown_port): children[1]: unknown port \"d9\""),
        "{e}"
    );
    let e = bed.ctl_refused(&["group", "create", "5000", "--children", "d2"]);
    assert!(e.contains("outside the table"), "{e}");
    let e = bed.ctl_refused(&[
        "group",
        "create",
        "1051",
        "--children",
        "d2",
        "--parent",
        "d2",
    ]);
    assert!(
        e.starts_with("barrierctl: refused (parent_is_child): "),
        "{e}"
    );
    assert!(e.contains("both a child and the parent"), "{e}");
    let mut c = Client::connect(&bed.socket).unwrap();
    for line in [
        &b"{\"op\":\"group_delete\",\"group\":1050,\"force\":true}\n"[..],
        b"{\"op\":\"group_delete\",\"group\":\"1050\"}\n",
        b"]]]\n",
    ] {
        let r = c.raw(line).unwrap();
        assert!(!r.ok, "{r:?}");
    }
    let mut huge = br#"{"op":"group_delete","group":1050,"pad":""#.to_vec();
    huge.resize(1 << 20, b'x');
    huge.extend_from_slice(b"\"}\n");
    let r = c.raw(&huge).unwrap();
    assert!(r.error.unwrap().contains("longer than"));
    assert_eq!(bed.ctl_ok(&["--json", "groups"]), before);

    // Delete: the group's frames are dropped and counted.
    let out = bed.ctl_ok(&["group", "delete", "1050"]);
    assert_eq!(out, "group 1050: deleted (epoch 6)\n");
    bed.send(2, MANAGED, 1);
    assert_eq!(bed.recv(2, Duration::from_millis(50)), None);
    let Reply::Stats { sets } = c.request(&Request::Stats {}).unwrap() else {
        panic!()
    };
    let d2 = sets.iter().find(|s| s.scope == "port d2 rx").unwrap();
    // 1050 was the only group on d2: the port is no group's now, so its frame is refused for
    // the port before the table (`drop_not_a_child`), not as an unknown group's.
    assert_eq!(d2.counters["drop_not_a_child"], 1, "{d2:?}");
    assert_eq!(d2.counters["drop_unknown_group"], 0, "{d2:?}");
    assert_eq!(d2.counters["drop_other_epoch"], 1, "{d2:?}");
    let d3 = sets.iter().find(|s| s.scope == "port d3 rx").unwrap();
    assert_eq!(d3.counters["drop_other_epoch"], 1, "{d3:?}");
    let e = bed.ctl_refused(&["group", "show", "1050"]);
    assert!(e.contains("group 1050 is not configured"), "{e}");
    bed.ctl_ok(&["stats"]);
    bed.ctl_ok(&["ports"]);

    // The 1,000 groups never stopped and never saw a release they did not wait for.
    bed.all_progress(3);
    assert_eq!(bed.unexpected.load(Relaxed), 0);
    println!("running groups: {} barriers in all", bed.total());
    let listing = bed.ctl_ok(&["groups"]);
    assert!(listing.contains("1000 group(s) configured"), "{listing}");
}

/// Whether `setpriv` can drop to uid 65534 here (root, util-linux).
fn can_setpriv() -> bool {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

fn as_nobody(socket: &Path, args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_barrierctl"))
        .arg("--socket")
        .arg(socket)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_non_root_client_is_refused_and_changes_nothing() {
    if !can_setpriv() {
        eprintln!("SKIP: needs root and setpriv to run a client as uid 65534");
        return;
    }
    let bed = start();
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_barrierctl"));
    // The binary must be reachable for uid 65534: it is under the target directory.
    let out = as_nobody(&bed.socket, &["groups"]);
    if out.status.code() == Some(126) || out.status.code() == Some(127) {
        eprintln!("SKIP: uid 65534 cannot execute {}", exe.display());
        return;
    }
    // Mode 0600: the kernel refuses the connect.
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("permission denied"), "{e}");
    // With the mode opened up, the switch's own check (SO_PEERCRED) refuses.
    std::fs::set_permissions(&bed.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let before = bed.ctl_ok(&["--json", "groups"]);
    let out = as_nobody(&bed.socket, &["group", "delete", "0"]);
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("uid 65534 may not manage this switch"), "{e}");
    assert_eq!(bed.ctl_ok(&["--json", "groups"]), before);
    // Root still can.
    bed.ctl_ok(&["group", "show", "0"]);
}

#[test]
fn exit_codes_when_no_switch_runs_and_on_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.sock");
    let out = Command::new(env!("CARGO_BIN_EXE_barrierctl"))
        .arg("--socket")
        .arg(&missing)
        .arg("groups")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("no switch is running there"), "{e}");
    // A socket nobody listens on: connection refused, the same message.
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let out = Command::new(env!("CARGO_BIN_EXE_barrierctl"))
        .arg("--socket")
        .arg(&stale)
        .arg("stats")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no switch is running there"));
    for args in [
        &["group", "frobnicate", "1"][..],
        &["group", "create", "1"],
        &["group", "show", "x"],
        &["group", "set", "1", "--root", "--parent", "p"],
        &[],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_barrierctl"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn plan_and_apply_through_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let topo = dir.path().join("topo.toml");
    std::fs::write(
        &topo,
        "[[switches]]\nname = \"root\"\n[[switches]]\nname = \"s1\"\n\
         [[hosts]]\nname = \"h1\"\n[[hosts]]\nname = \"h2\"\n[[hosts]]\nname = \"h3\"\n\
         [[links]]\na = \"s1:up\"\nb = \"root:d0\"\n\
         [[links]]\na = \"h1\"\nb = \"s1:d0\"\n[[links]]\na = \"h2\"\nb = \"s1:d1\"\n\
         [[links]]\na = \"h3\"\nb = \"root:d1\"\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_barrierctl"))
            .args(args)
            .output()
            .unwrap()
    };
    let t = topo.to_str().unwrap();
    let out = run(&["plan", t, "--group", "7", "--members", "h1,h2,h3"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    println!("{text}");
    assert!(text.contains("# switch s1 (depth 1)\n[[groups]]\nnumber = 7\nrole = \"intermediate\"\nchildren = [\"d0\", \"d1\"]\nparent = \"up\"\nresend_timeout_us = 1000\n"), "{text}");
    let out = run(&["plan", t, "--group", "7", "--members", "h1,h9"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown member \"h9\""));
    let out = run(&[
        "plan",
        "/nonexistent.toml",
        "--group",
        "7",
        "--members",
        "h1",
    ]);
    assert_eq!(out.status.code(), Some(2));

    // Apply to two running switches (in process, each with its own socket).
    let out = run(&["--json", "plan", t, "--group", "7", "--members", "h1,h2,h3"]);
    let plan_path = dir.path().join("plan.json");
    std::fs::write(&plan_path, &out.stdout).unwrap();
    let mut switches = Vec::new();
    let mut sockets = Vec::new();
    for (name, ports) in [("root", ["d0", "d1"]), ("s1", ["up", "d0"])] {
        let ports: Vec<&str> = if name == "s1" {
            vec!["up", "d0", "d1"]
        } else {
            ports.to_vec()
        };
        let (server, table, path) = small_switch(dir.path(), name, &ports);
        sockets.push(format!("{name}={}", path.display()));
        switches.push((server, table));
    }
    // Serve both from one thread while barrierctl runs.
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let servers: Vec<ControlServer> = switches
        .iter_mut()
        .map(|(sv, _)| sv.take().unwrap())
        .collect();
    let serving = std::thread::spawn(move || {
        let mut servers = servers;
        while !s.load(Relaxed) {
            for sv in &mut servers {
                sv.serve(Duration::from_millis(5));
            }
        }
    });
    let out = run(&[
        "apply",
        plan_path.to_str().unwrap(),
        "--sockets",
        &sockets.join(","),
        "--epoch",
        "12",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout,
        "group 7: created on s1, root (in this order; root root)\n"
    );
    let (_, root_table) = &switches[0];
    let (_, s1_table) = &switches[1];
    let p = |i| PortIdx::new(i).unwrap();
    assert_eq!(
        root_table.config(GroupId(7)),
        Some(GroupConfig::root(PortSet(0b11)).with_epoch(Epoch::new(12)))
    );
    assert_eq!(
        s1_table.config(GroupId(7)),
        Some(GroupConfig::intermediate(p(0), PortSet(0b110), 1_000_000).with_epoch(Epoch::new(12)))
    );
    // Again: refused up front (the group exists), nothing changed.
    let out = run(&[
        "apply",
        plan_path.to_str().unwrap(),
        "--sockets",
        &sockets.join(","),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("exists already"));
    // A switch without a socket: refused before anything is created.
    let out = run(&[
        "apply",
        plan_path.to_str().unwrap(),
        "--sockets",
        &sockets[0],
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no socket given for switch \"s1\""));
    stop.store(true, Relaxed);
    serving.join().unwrap();
}

type SmallSwitch = (Option<ControlServer>, Arc<GroupTable>, PathBuf);

/// A switch's table and control socket with `ports` (no dataplane: apply only configures).
fn small_switch(dir: &Path, name: &str, ports: &[&str]) -> SmallSwitch {
    let table = Arc::new(GroupTable::new(16));
    let mut io = Vec::new();
    for n in ports {
        io.push(mem_port(*n, 8).0);
    }
    let sw = build_switch(name, [2, 0, 0, 0, 0, 1], io, table.clone(), 0);
    let descs = ports
        .iter()
        .map(|n| PortDesc {
            name: n.to_string(),
            device: "vdev:net_ring0".into(),
            peer_mac: [0xff; 6],
        })
        .collect();
    let path = dir.join(format!("{name}.sock"));
    let server = ControlServer::bind(&path, Control::new(sw.stats, descs, None)).unwrap();
    (Some(server), table, path)
}

/// A switch on its own busy loop (real clock) with ports d0..d3 and no group, its control
/// socket served on another thread; the test plays d2's neighbour.
struct Policed {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    socket: PathBuf,
    to_d2: MemTx,
    _dir: tempfile::TempDir,
}

impl Drop for Policed {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Policed {
    fn start() -> Policed {
        let table = Arc::new(GroupTable::new(16));
        let mut ports = Vec::new();
        let mut to_switch = Vec::new();
        for name in PORTS {
            let (port, in_tx, _out_rx) = mem_port(name, 4096);
            to_switch.push(in_tx);
            ports.push(port);
        }
        let clock = Clock::new();
        let sw = build_switch("s0", [2, 0, 0, 0, 0, 1], ports, table, clock.now_ns());
        let descs = port_descs();
        let control = Control::new(sw.stats.clone(), descs, None);
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s0.sock");
        let server = ControlServer::bind(&socket, control).unwrap();
        let mut pollers: Vec<Box<dyn Poller>> = sw.rx.into_iter().map(|(_, _, p)| p).collect();
        pollers.push(sw.sched);
        let (stop, dataplane, management) = run_threads(pollers, clock, server);
        Policed {
            stop,
            threads: vec![dataplane, management],
            socket,
            to_d2: to_switch.swap_remove(2),
            _dir: dir,
        }
    }
    fn ctl(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_barrierctl"))
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }
    fn ctl_ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        let stdout = String::from_utf8(out.stdout).unwrap();
        println!("$ barrierctl {}\n{stdout}", args.join(" "));
        assert!(
            out.status.success(),
            "barrierctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
    /// d2's (rx frames, drop_policed), as `barrierctl --json port show d2` reports them.
    fn d2(&self) -> (u64, u64) {
        let v: serde_json::Value =
            serde_json::from_str(&self.ctl_ok(&["--json", "port", "show", "d2"])).unwrap();
        let port = &v["port"];
        (
            port["rx_frames"].as_u64().unwrap(),
            port["drop_policed"].as_u64().unwrap(),
        )
    }
    /// Sends `n` reduces into d2 and waits (up to 60 s) until the switch counted all of them.
    fn flood(&mut self, n: u64) -> (u64, u64) {
        let (frames0, _) = self.d2();
        let f = reduce(9, 0);
        for _ in 0..n {
            while self.to_d2.offer(&f).is_err() {
                self.to_d2.flush();
            }
        }
        self.to_d2.flush();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (frames, policed) = self.d2();
            if frames >= frames0 + n {
                assert_eq!(frames, frames0 + n);
                return (frames, policed);
            }
            assert!(Instant::now() < deadline, "the switch took {frames} of {n}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// `barrierctl port set` end to end: a rate makes frames over it count as `drop_policed`,
/// rate 0 stops that, and a bad value is refused naming what is wrong. The switch runs on a
/// real clock, so the bucket refills while the test runs: the check allows one frame per
/// second elapsed beyond the burst, whatever the machine's load.
#[test]
fn a_policer_set_with_barrierctl_polices_the_port_and_0_turns_it_off() {
    let mut bed = Policed::start();
    let show = bed.ctl_ok(&["port", "show", "d2"]);
    assert!(show.contains(&row("policer", "off")), "{show}");
    let (_, policed) = bed.flood(100);
    assert_eq!(policed, 0, "policed with no policer");

    // refused, naming the value and the range; nothing changes
    for (args, why) in [
        (
            &["port", "set", "d2", "--policer-rate", "2000000000"][..],
            "port \"d2\": policer_rate 2000000000: give 0 (off) or 1..=1000000000 frames/s",
        ),
        (
            &[
                "port",
                "set",
                "d2",
                "--policer-rate",
                "0",
                "--policer-burst",
                "5",
            ],
            "a burst needs a rate",
        ),
        (
            &["port", "set", "d2", "--policer-burst", "5"],
            "port \"d2\" has no policer",
        ),
        (
            &["port", "set", "d7", "--policer-rate", "5"],
            "unknown port \"d7\"",
        ),
    ] {
        let out = bed.ctl(args);
        let err = String::from_utf8_lossy(&out.stderr);
        println!("$ barrierctl {}\n{err}", args.join(" "));
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err} lacks {why:?}");
    }
    let out = bed.ctl(&["port", "set", "d2", "--policer-rate", "fast"]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(bed
        .ctl_ok(&["port", "show", "d2"])
        .contains(&row("policer", "off")));

    // 1 frame/s, burst 2: of 200 frames, 2 pass plus one per second elapsed
    let t0 = Instant::now();
    let set = bed.ctl_ok(&[
        "port",
        "set",
        "d2",
        "--policer-rate",
        "1",
        "--policer-burst",
        "2",
    ]);
    assert!(set.contains(&row("policer", "1/s burst 2")), "{set}");
    let (_, policed) = bed.flood(200);
    let passed = 200 - policed;
    let allowed = 2 + t0.elapsed().as_secs() + 1;
    assert!(
        (2..=allowed).contains(&passed),
        "{passed} of 200 passed a 1/s policer with burst 2 in {:?}",
        t0.elapsed()
    );
    let ports = bed.ctl_ok(&["ports"]);
    assert!(ports.contains("1/s burst 2"), "{ports}");

    // 0: off, nothing more is policed
    let off = bed.ctl_ok(&["port", "set", "d2", "--policer-rate", "0"]);
    assert!(off.contains(&row("policer", "off")), "{off}");
    let (_, after) = bed.flood(200);
    assert_eq!(after, policed, "policed after rate 0");
}
