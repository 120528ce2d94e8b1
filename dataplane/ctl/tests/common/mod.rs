//! Shared by the tests of `barrierctl reset`/`delete` (`tree.rs`) and `barrierctl job`
//! (`job.rs`): three switches in process (a root and two intermediates, their ports wired to
//! each other in memory, every switch's pollers on one busy loop, their control sockets served
//! on another thread), the four hosts' ends of their ports played by the test, the topology
//! that describes them, and the `barrierctl` program.
#![allow(dead_code)]

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
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const HOSTS: [&str; 4] = ["h1", "h2", "h3", "h4"];

/// root d0 -- s1 up, root d1 -- s2 up; h1, h2 on s1 d0, d1; h3, h4 on s2 d0, d1.
pub const TOPOLOGY: &str = r#"
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

pub fn ctl(args: &[&str]) -> Output {
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

pub fn ctl_ok(args: &[&str]) -> String {
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
pub fn ctl_fails(args: &[&str]) -> (String, String) {
    let out = ctl(args);
    assert_eq!(out.status.code(), Some(1), "barrierctl {args:?}");
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

pub fn reduce(group: u32, epoch: u32, seq: u32) -> Vec<u8> {
    LeafSend {
        group: GroupId(group),
        epoch: Epoch::new(epoch),
        seq: Seq(seq),
        retransmit: false,
    }
    .frame(MacAddr([2, 0, 0, 0, 0, 9]), MacAddr::BROADCAST, None)
    .to_bytes()
    .to_vec()
}

/// The three switches, running, and the leaves' ends of the host ports.
pub struct Tree {
    pub stop: Arc<AtomicBool>,
    pub threads: Vec<std::thread::JoinHandle<()>>,
    pub tables: HashMap<&'static str, Arc<GroupTable>>,
    pub sockets: HashMap<&'static str, PathBuf>,
    pub to_switch: Vec<MemTx>,
    pub from_switch: Vec<MemRx>,
    /// The sockets' folder, removed with the switches.
    pub dir: tempfile::TempDir,
}

impl Drop for Tree {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

pub type Port = PortIo<MemRx, MemTx>;

pub fn start() -> Tree {
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
        let table = Arc::new(GroupTable::new(512));
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
    pub fn socket(&self, name: &str) -> &str {
        self.sockets[name].to_str().unwrap()
    }
    /// `--sockets` for the plan's switches, `s2` at `s2` (a real or a fake one).
    pub fn sockets_arg(&self, s2: &Path) -> String {
        format!(
            "root={},s1={},s2={}",
            self.socket("root"),
            self.socket("s1"),
            s2.display()
        )
    }
    /// `--sockets` for the three switches.
    pub fn all_sockets(&self) -> String {
        self.sockets_arg(&self.sockets["s2"])
    }
    pub fn epochs(&self, group: u32) -> Vec<Option<u32>> {
        ["root", "s1", "s2"]
            .iter()
            .map(|n| self.tables[n].config(GroupId(group)).map(|c| c.epoch.get()))
            .collect()
    }
    pub fn send(&mut self, host: usize, group: u32, epoch: u32, seq: u32) {
        self.to_switch[host]
            .offer(&reduce(group, epoch, seq))
            .unwrap();
        self.to_switch[host].flush();
    }
    /// The epoch of a release for `seq` to `host` within `wait` (releases of other barriers,
    /// sent again for a re-sent reduce, are passed over).
    pub fn release(&mut self, host: usize, seq: u32, wait: Duration) -> Option<u32> {
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
    pub fn barrier(&mut self, group: u32, epoch: u32, seq: u32) {
        let mut v = Vec::new();
        for rx in &mut self.from_switch {
            rx.rx_burst(&mut v, 1024);
        }
        for h in 0..3 {
            self.send(h, group, epoch, seq);
        }
        for (h, name) in HOSTS.iter().enumerate().take(3) {
            assert_eq!(
                self.release(h, seq, Duration::from_millis(30)),
                None,
                "{name} released before h4 arrived"
            );
        }
        self.send(3, group, epoch, seq);
        for (h, name) in HOSTS.iter().enumerate() {
            assert_eq!(
                self.release(h, seq, Duration::from_secs(10)),
                Some(epoch),
                "{name}: barrier {seq} of epoch {epoch}"
            );
        }
    }
}
