//! The `barrier-xdp` program: `check` refuses bad files with the line that is wrong, and
//! `run` on veth ports in a throw-away namespace serves the control socket as barrier-switch
//! does: a group created through it releases the leaves' barrier (raw sockets on the far
//! ends), `stats` shows the completion, the group is reset and deleted, features the XDP
//! switch has not are refused by name, and SIGTERM detaches the program; `ports`, `group show`,
//! `stats` and Prometheus count frames per port and completions per group; and a group planned
//! over a tree of two XDP switches is applied through their sockets and releases. The runs
//! need root: skipped otherwise, failed under `NB_REQUIRE_ROOT=1`.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use barrier_ctl::client::Client;
use barrier_ctl::proto::{PhaseName, Reply, Request};
use barrier_protocol::switch::Event;
use barrier_protocol::wire::{Flags, FrameRepr, Kind, ETHERTYPE};
use barrier_protocol::{Epoch, GroupId, PortIdx, Seq};
use barrier_xdp::XdpSwitch;
use rawsock::RawSocket;

const BIN: &str = env!("CARGO_BIN_EXE_barrier-xdp");

fn check(text: &str) -> Output {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.toml");
    std::fs::write(&path, text).expect("write");
    Command::new(BIN)
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .expect("run barrier-xdp check")
}

fn refused(text: &str, want: &str) {
    let out = check(text);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(want), "want {want:?} in: {err}");
}

const PORTS: &str =
    "[switch]\nmac = \"02:00:00:00:00:aa\"\n\n[[ports]]\nname = \"leaf0\"\niface = \"lo\"\n";

#[test]
fn check_refuses_bad_files_with_the_line() {
    let ok = check(&format!(
        "{PORTS}\n[[groups]]\nnumber = 1\nrole = \"root\"\nchildren = [\"leaf0\"]\n"
    ));
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let said = String::from_utf8_lossy(&ok.stdout);
    assert!(said.contains("ok: 1 ports (leaf0=lo), 1 groups"), "{said}");

    refused(
        &PORTS.replace("iface = \"lo\"", "vdev = \"net_ring0\""),
        "line 6: ports[0].vdev: a DPDK device",
    );
    refused(
        &PORTS.replace("\"lo\"", "\"nb-no-such-if\""),
        "line 6: ports[0].iface: no interface \"nb-no-such-if\"",
    );
    refused(
        &format!("{PORTS}\n[lcores]\nscheduler = 0\n"),
        "line 8: lcores: a DPDK switch's section",
    );
    refused(
        &format!("{PORTS}\n[[groups]]\nnumber = 1\nrole = \"root\"\nchildren = [\"leaf9\"]\n"),
        "line 11: groups[0].children",
    );
    let many: String = (0..63)
        .map(|i| format!("[[ports]]\nname = \"p{i}\"\niface = \"lo{i}\"\n"))
        .collect();
    refused(&many, "line 187: ports[62]: port index 62");
}

/// The daemon, its output lines as they come.
struct Daemon {
    child: Child,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

fn lines(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

impl Daemon {
    fn start(netns: &str, config: &Path, stats: &Path) -> Daemon {
        let mut child = Command::new("ip")
            .args(["netns", "exec", netns, BIN, "run", "--config"])
            .arg(config)
            .arg("--stats-json")
            .arg(stats)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start barrier-xdp run");
        let stdout = lines(child.stdout.take().expect("stdout"));
        let stderr = lines(child.stderr.take().expect("stderr"));
        Daemon {
            child,
            stdout,
            stderr,
        }
    }

    fn wait_ready(&self) -> String {
        let end = Instant::now() + Duration::from_secs(10);
        let mut log = Vec::new();
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(l) if l.starts_with("barrier-xdp: ready") => return l,
                Ok(l) => log.push(l),
                Err(_) => break,
            }
        }
        panic!(
            "no ready line from barrier-xdp; stderr:\n{}",
            log.join("\n")
        );
    }

    /// SIGTERM; the exit status and stdout (and, when the exit status is not 0, stderr after
    /// it, so that an assertion on the status shows why).
    fn stop(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let status = self.child.wait().expect("wait");
        // Everything the process wrote: the reader threads end (and their channels close) at
        // EOF, which may come a while after the exit on a loaded machine.
        let drain = |rx: &std::sync::mpsc::Receiver<String>| {
            let mut lines = Vec::new();
            while let Ok(l) = rx.recv_timeout(Duration::from_secs(10)) {
                lines.push(l);
            }
            lines
        };
        let mut out = drain(&self.stdout);
        if !status.success() {
            out.push("---- stderr".into());
            out.extend(drain(&self.stderr));
        }
        (status, out.join("\n"))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn reduce(sock: &RawSocket, group: u32, epoch: u32, seq: u32) {
    let ev = Event::Reduce {
        port: PortIdx::new(0).expect("port"),
        epoch: Epoch(epoch),
        seq: Seq(seq),
    };
    sock.send(&common::frame_for(GroupId(group), ev, false))
        .expect("send a reduce");
}

/// A barrier of `group`: leaf 0 reduces and gets nothing; leaf 1 reduces; both get the release.
fn barrier(leaves: [&RawSocket; 2], group: u32, epoch: u32, seq: u32) {
    reduce(leaves[0], group, epoch, seq);
    assert!(
        common::next_from_switch(leaves[0], Duration::from_millis(100)).is_none(),
        "a release before leaf 1 reduced"
    );
    reduce(leaves[1], group, epoch, seq);
    for (i, s) in leaves.iter().enumerate() {
        let f = common::next_from_switch(s, Duration::from_secs(2))
            .unwrap_or_else(|| panic!("leaf {i}: no release of group {group} seq {seq}"));
        assert_eq!(
            (f.kind, f.group, f.epoch, f.seq),
            (Kind::Release, GroupId(group), Epoch(epoch), Seq(seq)),
            "leaf {i}"
        );
    }
}

fn rx_total(c: &mut Client, name: &str) -> u64 {
    let Reply::Stats { sets } = c.request(&Request::Stats {}).expect("stats") else {
        panic!("stats: another reply")
    };
    let rx = sets
        .iter()
        .find(|s| s.scope == "rx total")
        .expect("rx total");
    rx.counters.get(name).copied().unwrap_or(0)
}

const METRICS: &str = "127.0.0.1:19464";

/// One Prometheus scrape of the daemon (from a thread in its namespace).
fn scrape() -> String {
    scrape_at(METRICS)
}

/// One Prometheus scrape of the endpoint at `addr`.
fn scrape_at(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the metrics endpoint");
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
        .expect("send the scrape");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read the scrape");
    out
}

#[test]
fn run_serves_the_control_socket_on_veth_ports() {
    let Some(bed) = common::bed("run_serves_the_control_socket_on_veth_ports") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("xdp.toml");
    let stats = dir.path().join("stats.json");
    let sock = dir.path().join("xdp.sock");
    let a0 = bed.pairs[0].0.clone();
    let a1 = bed.pairs[1].0.clone();
    std::fs::write(
        &config,
        format!(
            "[switch]\nmac = \"02:00:00:00:00:aa\"\n\n[[ports]]\nname = \"leaf0\"\niface = \"{a0}\"\n\n\
             [[ports]]\nname = \"leaf1\"\niface = \"{a1}\"\n\n[control]\nsocket = \"{}\"\ncapacity = 16\n\n\
             [metrics]\nlisten = \"{METRICS}\"\n\n[management]\ncpus = [0]\n",
            sock.display()
        ),
    )
    .expect("write the config");
    let (leaf0, leaf1) = two_leaves(&bed);
    let leaves = [&leaf0, &leaf1];
    // The metrics endpoint listens on the namespace's loopback.
    bed.exec(&["ip", "link", "set", "lo", "up"])
        .expect("loopback up");

    barrier_bpf::in_netns(&bed.netns, || {
        // A veth delivers a redirected frame only to a peer with an XDP receive path: the leaves'
        // ends run the pass program (tests/veth.rs); detached here, inside the namespace.
        let pass = XdpSwitch::load(1).expect("load the pass program");
        let _peers = pass_on_peers(&pass, &bed, 2);

        let daemon = Daemon::start(&bed.netns, &config, &stats);
        let ready = daemon.wait_ready();
        assert!(ready.contains("leaf0=veth-a0"), "{ready}");
        let mut c = Client::connect(&sock).expect("connect to the control socket");

        let r = c
            .request(&Request::GroupCreate {
                group: 3,
                children: vec!["leaf0".into(), "leaf1".into()],
                parent: None,
                resend_timeout_ns: None,
                epoch: Some(2),
                fail_after_ns: None,
                force: false,
            })
            .expect("create group 3");
        assert!(
            matches!(
                r,
                Reply::Changed {
                    group: 3,
                    epoch: 2,
                    ..
                }
            ),
            "{r:?}"
        );
        let Reply::Groups { blocks, .. } = c.request(&Request::Groups {}).expect("groups") else {
            panic!("groups: another reply")
        };
        assert_eq!((blocks.len(), blocks[0].first), (1, 3));

        barrier(leaves, 3, 2, 0);
        barrier(leaves, 3, 2, 1);
        let Reply::Group { group: g } = c
            .request(&Request::GroupShow { group: 3 })
            .expect("show group 3")
        else {
            panic!("show: another reply")
        };
        assert_eq!(
            (g.phase, g.seq, g.completions, g.uncounted),
            (PhaseName::Collecting, Some(2), 2, false)
        );
        assert_eq!(rx_total(&mut c, "completions"), 2);
        let scraped = scrape();
        assert!(
            scraped.contains("barrier_rx_events_total{event=\"completions\"} 2"),
            "{scraped}"
        );
        // The running groups written back into the file, which `check` accepts.
        let r = c.request(&Request::WriteBack {}).expect("write-back");
        assert!(matches!(r, Reply::WrittenBack { groups: 1, .. }), "{r:?}");
        let text = std::fs::read_to_string(&config).expect("the file");
        assert!(text.contains("[[groups]]"), "{text}");
        barrier_xdp::config::parse(&text).expect("the written-back file parses");

        // A second switch on the same ports is refused at attach, with what to do.
        let other = config.with_file_name("other.toml");
        std::fs::write(
            &other,
            text.replace("xdp.sock", "other.sock")
                .replace(METRICS, "127.0.0.1:19465"),
        )
        .expect("write the second config");
        let out = Command::new("ip")
            .args(["netns", "exec", &bed.netns, BIN, "run", "--config"])
            .arg(&other)
            .output()
            .expect("run a second barrier-xdp");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("another XDP program is attached"), "{err}");
        let Reply::Ports { ports } = c.request(&Request::Ports {}).expect("ports") else {
            panic!("ports: another reply")
        };
        assert_eq!(ports[1].device, format!("iface:{a1}"));

        // What the XDP switch has not is refused by name.
        let e = c
            .request(&Request::PortSet {
                port: "leaf0".into(),
                policer_rate: Some(1000),
                policer_burst: None,
            })
            .expect_err("no policer");
        assert!(
            e.to_string().contains("the XDP switch has no policer"),
            "{e}"
        );
        let e = c
            .request(&Request::GroupWatch { group: 3 })
            .expect_err("no straggler watch");
        assert!(e.to_string().contains("straggler watch"), "{e}");

        // Reset: a new epoch, the state fresh; the barrier starts again at 0.
        let r = c
            .request(&Request::GroupReset {
                group: 3,
                epoch: None,
                force: false,
            })
            .expect("reset group 3");
        assert!(matches!(r, Reply::Changed { epoch: 3, .. }), "{r:?}");
        barrier(leaves, 3, 3, 0);
        assert_eq!(rx_total(&mut c, "completions"), 3);

        // Delete: the group's frames are the program's unknown group.
        c.request(&Request::GroupDelete { group: 3 })
            .expect("delete group 3");
        reduce(&leaf0, 3, 3, 1);
        let end = Instant::now() + Duration::from_secs(2);
        while rx_total(&mut c, "drop_unknown_group") == 0 {
            assert!(
                Instant::now() < end,
                "the deleted group's reduce was not refused"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(c);

        let (status, out) = daemon.stop();
        assert!(status.success(), "{status}: {out}");
        assert!(out.contains("detached from 2 of 2 ports"), "{out}");
        let json = std::fs::read_to_string(&stats).expect("--stats-json written");
        assert!(json.contains("\"completions\": 3"), "{json}");
        assert!(!sock.exists(), "the control socket outlived the switch");
    })
    .expect("enter the namespace");
}

/// The next barrier frame on `sock` from one of the switches `from`, within `timeout`.
fn next_from(sock: &RawSocket, from: &[[u8; 6]], timeout: Duration) -> Option<FrameRepr> {
    let end = Instant::now() + timeout;
    let mut buf = [0u8; 2048];
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        if let Ok(Some(n)) = sock.recv(&mut buf, Some(left)) {
            if let Ok(f) = FrameRepr::parse(&buf[..n]) {
                if from.contains(&f.src.0) {
                    return Some(f);
                }
            }
        }
    }
    None
}

/// Two XDP switches in a tree (`mid` with hosts h0 and h1, `root` with h2, linked mid:up to
/// root:mid), the group planned over the topology by `barrierctl plan`'s planner and created
/// on both through their control sockets by `apply`: the three hosts' barrier releases only
/// once all three reduced, on every host.
#[test]
fn a_planned_group_is_applied_to_a_tree_of_xdp_switches() {
    use barrier_ctl::plan::{plan, PlanRequest, Topology};
    use barrier_testbed::netns::{can_create, VethNetns};
    if !can_create() {
        eprintln!("a_planned_group_is_applied_to_a_tree_of_xdp_switches: skipped: needs root");
        return;
    }
    let bed = VethNetns::with_pairs(4).expect("a namespace with veth pairs");
    let end = |i: usize, a: bool| {
        if a {
            bed.pairs[i].0.clone()
        } else {
            bed.pairs[i].1.clone()
        }
    };
    let dir = tempfile::tempdir().expect("tempdir");
    const MID: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];
    const ROOT: [u8; 6] = [2, 0, 0, 0, 0, 0x0c];
    let write = |name: &str, mac: &str, ports: &[(&str, String)]| {
        let mut text = format!("[switch]\nmac = \"{mac}\"\n\n");
        for (p, iface) in ports {
            text += &format!("[[ports]]\nname = \"{p}\"\niface = \"{iface}\"\n\n");
        }
        text += &format!(
            "[control]\nsocket = \"{}\"\ncapacity = 16\n",
            dir.path().join(format!("{name}.sock")).display()
        );
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).expect("write a config");
        path
    };
    let mid = write(
        "mid",
        "02:00:00:00:00:0b",
        &[
            ("h0", end(0, true)),
            ("h1", end(1, true)),
            ("up", end(2, true)),
        ],
    );
    let root = write(
        "root",
        "02:00:00:00:00:0c",
        &[("mid", end(2, false)), ("h2", end(3, true))],
    );
    let topo = Topology::parse(
        "[[switches]]\nname = \"mid\"\n[[switches]]\nname = \"root\"\n\
         [[hosts]]\nname = \"h0\"\n[[hosts]]\nname = \"h1\"\n[[hosts]]\nname = \"h2\"\n\
         [[links]]\na = \"h0\"\nb = \"mid:h0\"\n[[links]]\na = \"h1\"\nb = \"mid:h1\"\n\
         [[links]]\na = \"h2\"\nb = \"root:h2\"\n[[links]]\na = \"mid:up\"\nb = \"root:mid\"\n",
    )
    .expect("the topology");
    let planned = plan(
        &topo,
        &PlanRequest {
            group: 5,
            epoch: Some(4),
            members: vec!["h0".into(), "h1".into(), "h2".into()],
            resend_timeout_us: 1000,
        },
    )
    .expect("a plan");
    let hosts: Vec<RawSocket> = [0, 1, 3]
        .iter()
        .map(|&i| RawSocket::open_in_netns(&bed.netns, &end(i, false), ETHERTYPE).expect("host"))
        .collect();

    barrier_bpf::in_netns(&bed.netns, || {
        let pass = XdpSwitch::load(1).expect("load the pass program");
        let _hosts_xdp: Vec<_> = [0, 1, 3]
            .iter()
            .map(|&i| {
                let ifindex = barrier_bpf::ifindex(&end(i, false)).expect("ifindex");
                pass.attach_pass(ifindex).expect("attach the pass program")
            })
            .collect();
        let daemons = [
            Daemon::start(&bed.netns, &mid, &dir.path().join("mid.json")),
            Daemon::start(&bed.netns, &root, &dir.path().join("root.json")),
        ];
        for d in &daemons {
            d.wait_ready();
        }
        let sockets = ["mid", "root"]
            .iter()
            .map(|n| (n.to_string(), dir.path().join(format!("{n}.sock"))))
            .collect();
        let order = barrier_ctl::apply::apply(&planned, &sockets, None).expect("apply");
        assert_eq!(order.len(), 2, "{order:?}");

        for seq in 0..3 {
            for h in &hosts[..2] {
                reduce(h, 5, 4, seq);
            }
            assert!(
                next_from(&hosts[0], &[MID, ROOT], Duration::from_millis(100)).is_none(),
                "a release before h2 reduced"
            );
            reduce(&hosts[2], 5, 4, seq);
            for (i, h) in hosts.iter().enumerate() {
                let f = next_from(h, &[MID, ROOT], Duration::from_secs(2))
                    .unwrap_or_else(|| panic!("h{i}: no release of barrier {seq}"));
                assert_eq!(
                    (f.kind, f.group, f.epoch, f.seq),
                    (Kind::Release, GroupId(5), Epoch(4), Seq(seq)),
                    "h{i}"
                );
            }
        }
        for d in daemons {
            let (status, out) = d.stop();
            assert!(status.success(), "{status}: {out}");
        }
    })
    .expect("enter the namespace");
}

/// `[xdp] mode = "generic"`: the program attached in SKB mode releases a barrier as well.
#[test]
fn generic_mode_runs_when_the_file_asks() {
    let Some(bed) = common::bed("generic_mode_runs_when_the_file_asks") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("generic.sock");
    let config = root_of_two(
        &bed,
        &dir.path().join("generic.toml"),
        "[xdp]\nmode = \"generic\"\n\n",
        &format!("\n[control]\nsocket = \"{}\"\n", sock.display()),
    );
    let (leaf0, leaf1) = two_leaves(&bed);
    barrier_bpf::in_netns(&bed.netns, || {
        let pass = XdpSwitch::load(1).expect("load the pass program");
        let _peers = pass_on_peers(&pass, &bed, 2);
        let daemon = Daemon::start(&bed.netns, &config, &dir.path().join("s.json"));
        let ready = daemon.wait_ready();
        assert!(ready.contains("attached Generic"), "{ready}");
        barrier([&leaf0, &leaf1], 1, 1, 0);
        let (status, out) = daemon.stop();
        assert!(status.success(), "{status}: {out}");
    })
    .expect("enter the namespace");
}

/// The daemon runs the timer side: an intermediate whose parent does not answer re-sends its
/// reduce (RETRANSMIT) after `resend_timeout_us`, and stops once the parent's release came.
#[test]
fn the_daemon_re_sends_an_intermediates_reduce_until_the_parent_answers() {
    let Some(bed) =
        common::bed("the_daemon_re_sends_an_intermediates_reduce_until_the_parent_answers")
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("mid.toml");
    let [(a0, _), (a1, _), (a2, b2)] = [0, 1, 2].map(|i| bed.pairs[i].clone());
    std::fs::write(
        &config,
        format!(
            "[switch]\nmac = \"02:00:00:00:00:aa\"\n\n\
             [[ports]]\nname = \"leaf0\"\niface = \"{a0}\"\n\n\
             [[ports]]\nname = \"leaf1\"\niface = \"{a1}\"\n\n\
             [[ports]]\nname = \"up\"\niface = \"{a2}\"\n\n\
             [[groups]]\nnumber = 3\nrole = \"intermediate\"\nparent = \"up\"\n\
             children = [\"leaf0\", \"leaf1\"]\nresend_timeout_us = 20000\n"
        ),
    )
    .expect("write the config");
    let (leaf0, leaf1) = two_leaves(&bed);
    let parent = RawSocket::open_in_netns(&bed.netns, &b2, ETHERTYPE).expect("parent socket");
    barrier_bpf::in_netns(&bed.netns, || {
        let pass = XdpSwitch::load(1).expect("load the pass program");
        let _peers = pass_on_peers(&pass, &bed, 3);
        let daemon = Daemon::start(&bed.netns, &config, &dir.path().join("s.json"));
        daemon.wait_ready();
        reduce(&leaf0, 3, 1, 0);
        // The switch cannot send its reduce before the last child's arrives, so the time
        // from here bounds the re-send's delay from below however late this thread reads.
        let sent = Instant::now();
        reduce(&leaf1, 3, 1, 0);
        let first =
            common::next_from_switch(&parent, Duration::from_secs(2)).expect("the reduce up");
        assert_eq!((first.kind, first.seq), (Kind::Reduce, Seq(0)));
        assert!(!first.flags.contains(Flags::RETRANSMIT), "{first:?}");
        let again = common::next_from_switch(&parent, Duration::from_secs(2)).expect("a re-send");
        let after = sent.elapsed();
        assert_eq!((again.kind, again.seq), (Kind::Reduce, Seq(0)));
        assert!(again.flags.contains(Flags::RETRANSMIT), "{again:?}");
        assert!(
            after >= Duration::from_millis(15),
            "re-sent after {after:?}, timeout 20 ms"
        );
        // The parent's release: forwarded to both leaves, and the re-sends stop.
        let release = Event::Release {
            port: PortIdx::new(0).expect("port"),
            epoch: Epoch(1),
            seq: Seq(0),
        };
        parent
            .send(&common::frame_for(GroupId(3), release, false))
            .expect("send the release");
        for (i, l) in [&leaf0, &leaf1].iter().enumerate() {
            let f = common::next_from_switch(l, Duration::from_secs(2))
                .unwrap_or_else(|| panic!("leaf {i}: no release"));
            assert_eq!((f.kind, f.seq), (Kind::Release, Seq(0)), "leaf {i}");
        }
        // Re-sends already on their way may arrive; none after 100 ms (five timeouts).
        std::thread::sleep(Duration::from_millis(30));
        while common::next_from_switch(&parent, Duration::from_millis(1)).is_some() {}
        assert!(
            common::next_from_switch(&parent, Duration::from_millis(100)).is_none(),
            "a re-send after the release"
        );
        let (status, out) = daemon.stop();
        assert!(status.success(), "{status}: {out}");
        assert!(out.contains("timer_resends"), "{out}");
        // The report per port: the timer side's re-sends are the up port's retransmits_out,
        // and with the first reduce its frames out.
        let value = |line: &str, key: &str| -> u64 {
            out.lines()
                .find(|l| l.starts_with(line))
                .and_then(|l| {
                    l.split_whitespace()
                        .find_map(|kv| kv.strip_prefix(&format!("{key}=")).map(str::to_owned))
                })
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {key} in {line:?} of:\n{out}"))
        };
        let resends = value("  rx total:", "timer_resends");
        assert_eq!(value("  port up tx:", "retransmits_out"), resends, "{out}");
        assert_eq!(value("  port up tx:", "frames_out"), resends + 1, "{out}");
    })
    .expect("enter the namespace");
}

/// The program belongs to the process that attached it: a switch killed with SIGKILL (no
/// chance to detach) must not leave its program on the ports, taking frames with state no
/// one manages, and a switch started again on the same ports must attach and serve.
#[test]
fn a_killed_switch_leaves_nothing_attached_and_starts_again() {
    let Some(bed) = common::bed("a_killed_switch_leaves_nothing_attached_and_starts_again") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = root_of_two(&bed, &dir.path().join("killed.toml"), "", "");
    let (a0, a1) = (bed.pairs[0].0.clone(), bed.pairs[1].0.clone());
    let (leaf0, leaf1) = two_leaves(&bed);
    barrier_bpf::in_netns(&bed.netns, || {
        let pass = XdpSwitch::load(1).expect("load the pass program");
        let _peers = pass_on_peers(&pass, &bed, 2);
        let mut daemon = Daemon::start(&bed.netns, &config, &dir.path().join("s.json"));
        daemon.wait_ready();
        barrier([&leaf0, &leaf1], 1, 1, 0);
        // `ip netns exec` execs the switch, so the child is the switch itself.
        daemon.child.kill().expect("SIGKILL the switch");
        daemon.child.wait().expect("wait");
        for a in [&a0, &a1] {
            let link = Command::new("ip")
                .args(["-d", "link", "show", "dev", a])
                .output()
                .expect("ip link show");
            let text = String::from_utf8_lossy(&link.stdout);
            assert!(!text.contains("prog/xdp"), "{a} after SIGKILL:\n{text}");
        }
        // Nothing answers the leaves now.
        reduce(&leaf0, 1, 1, 1);
        reduce(&leaf1, 1, 1, 1);
        assert!(
            common::next_from_switch(&leaf0, Duration::from_millis(200)).is_none(),
            "a release from a switch that was killed"
        );
        let daemon = Daemon::start(&bed.netns, &config, &dir.path().join("s2.json"));
        daemon.wait_ready();
        barrier([&leaf0, &leaf1], 1, 1, 2);
        let (status, out) = daemon.stop();
        assert!(status.success(), "{status}: {out}");
    })
    .expect("enter the namespace");
}

/// Writes a root switch's file at `path`: ports `leaf0`/`leaf1` on the first two pairs' `a`
/// ends, group 1 over both; `head` goes before the ports, `tail` after the group.
fn root_of_two(
    bed: &barrier_testbed::netns::VethNetns,
    path: &Path,
    head: &str,
    tail: &str,
) -> std::path::PathBuf {
    let (a0, a1) = (&bed.pairs[0].0, &bed.pairs[1].0);
    std::fs::write(
        path,
        format!(
            "[switch]\nmac = \"02:00:00:00:00:aa\"\n\n{head}\
             [[ports]]\nname = \"leaf0\"\niface = \"{a0}\"\n\n\
             [[ports]]\nname = \"leaf1\"\niface = \"{a1}\"\n\n\
             [[groups]]\nnumber = 1\nrole = \"root\"\nchildren = [\"leaf0\", \"leaf1\"]\n{tail}"
        ),
    )
    .expect("write the config");
    path.to_path_buf()
}

/// Raw sockets on the first two pairs' `b` ends: the two leaves.
fn two_leaves(bed: &barrier_testbed::netns::VethNetns) -> (RawSocket, RawSocket) {
    let open = |i: usize| {
        RawSocket::open_in_netns(&bed.netns, &bed.pairs[i].1, ETHERTYPE).expect("leaf socket")
    };
    (open(0), open(1))
}

/// The pass program on the first `n` pairs' `b` ends (a veth peer needs an XDP program to take
/// frames the switch redirects), attached while the result lives.
fn pass_on_peers(
    pass: &XdpSwitch,
    bed: &barrier_testbed::netns::VethNetns,
    n: usize,
) -> Vec<barrier_bpf::XdpAttachment> {
    bed.pairs[..n]
        .iter()
        .map(|(_, b)| {
            pass.attach_pass(barrier_bpf::ifindex(b).expect("ifindex"))
                .expect("attach the pass program")
        })
        .collect()
}

/// The XDP switch's per-port and per-group figures, black-box: the daemon on veth ports, three
/// barriers of group 3 between leaf0 and leaf1 and then a stale reduce from leaf0, read back
/// through `ports`, `group show`, `stats` and a Prometheus scrape under barrier-switch's
/// names: frames in and out per port, the re-sent release on leaf0 only, the group's
/// completions and re-sends; a third port that carried nothing shows zeroes.
#[test]
fn ports_group_show_and_prometheus_count_per_port_and_per_group() {
    let Some(bed) = common::bed("ports_group_show_and_prometheus_count_per_port_and_per_group")
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("xdp.toml");
    let stats = dir.path().join("stats.json");
    let sock = dir.path().join("xdp.sock");
    let a0 = bed.pairs[0].0.clone();
    let a1 = bed.pairs[1].0.clone();
    let (a2, _) = bed.pairs[2].clone();
    let metrics = "127.0.0.1:19466";
    std::fs::write(
        &config,
        format!(
            "[switch]\nmac = \"02:00:00:00:00:aa\"\n\n[[ports]]\nname = \"leaf0\"\niface = \"{a0}\"\n\n\
             [[ports]]\nname = \"leaf1\"\niface = \"{a1}\"\n\n[[ports]]\nname = \"idle\"\niface = \"{a2}\"\n\n\
             [control]\nsocket = \"{}\"\ncapacity = 16\n\n[metrics]\nlisten = \"{metrics}\"\ngroups = [3]\n\n\
             [[groups]]\nnumber = 3\nrole = \"root\"\nchildren = [\"leaf0\", \"leaf1\"]\nepoch = 2\n",
            sock.display()
        ),
    )
    .expect("write the config");
    let (leaf0, leaf1) = two_leaves(&bed);
    let leaves = [&leaf0, &leaf1];
    bed.exec(&["ip", "link", "set", "lo", "up"])
        .expect("loopback up");

    barrier_bpf::in_netns(&bed.netns, || {
        let pass = XdpSwitch::load(1).expect("load the pass program");
        let _peers = pass_on_peers(&pass, &bed, 2);
        let daemon = Daemon::start(&bed.netns, &config, &stats);
        daemon.wait_ready();
        let mut c = Client::connect(&sock).expect("connect to the control socket");

        for seq in 0..3 {
            barrier(leaves, 3, 2, seq);
        }
        // A stale reduce (barrier 0, now at 3): the release of 2 again, to leaf0 only.
        reduce(&leaf0, 3, 2, 0);
        let f = common::next_from_switch(&leaf0, Duration::from_secs(2))
            .expect("leaf 0: the release again");
        assert_eq!(
            (f.kind, f.seq, f.flags),
            (Kind::Release, Seq(2), Flags::RETRANSMIT)
        );

        // `ports`: frames in and out per port.
        let Reply::Ports { ports } = c.request(&Request::Ports {}).expect("ports") else {
            panic!("ports: another reply")
        };
        let by_name = |n: &str| {
            ports
                .iter()
                .find(|p| p.name == n)
                .unwrap_or_else(|| panic!("no port {n} in {ports:?}"))
                .clone()
        };
        let (p0, p1, p2) = (by_name("leaf0"), by_name("leaf1"), by_name("idle"));
        assert_eq!((p0.rx_frames, p0.tx_frames), (4, 4), "{p0:?}");
        assert_eq!((p1.rx_frames, p1.tx_frames), (3, 3), "{p1:?}");
        assert_eq!((p2.rx_frames, p2.tx_frames), (0, 0), "{p2:?}");

        // `group show`: completions and re-sends, counted.
        let Reply::Group { group: g } = c
            .request(&Request::GroupShow { group: 3 })
            .expect("show group 3")
        else {
            panic!("show: another reply")
        };
        assert_eq!(
            (g.completions, g.resends, g.uncounted),
            (3, 1, false),
            "{g:?}"
        );
        // `stats`: the per-port sets and the groups' sums.
        let Reply::Stats { sets } = c.request(&Request::Stats {}).expect("stats") else {
            panic!("stats: another reply")
        };
        let set = |scope: &str, name: &str| {
            sets.iter()
                .find(|s| s.scope == scope)
                .unwrap_or_else(|| panic!("no {scope:?} in {sets:?}"))
                .counters
                .get(name)
                .copied()
                .unwrap_or(0)
        };
        assert_eq!(set("groups", "completions"), 3);
        assert_eq!(set("groups", "resends"), 1);
        assert_eq!(set("rx total", "completions"), 3);

        // Prometheus: the per-port and per-group series barrier-switch exports.
        let scraped = scrape_at(metrics);
        for line in [
            "barrier_frames_received_total{port=\"leaf0\",kind=\"reduce\"} 4",
            "barrier_frames_received_total{port=\"leaf1\",kind=\"reduce\"} 3",
            "barrier_frames_received_total{port=\"idle\",kind=\"reduce\"} 0",
            "barrier_frames_sent_total{port=\"leaf0\",kind=\"release\"} 4",
            "barrier_frames_sent_total{port=\"leaf1\",kind=\"release\"} 3",
            "barrier_frames_sent_total{port=\"idle\",kind=\"release\"} 0",
            "barrier_tx_events_total{port=\"leaf0\",event=\"retransmits_out\"} 1",
            "barrier_tx_events_total{port=\"leaf1\",event=\"retransmits_out\"} 0",
            "barrier_group_completions_total{group=\"3\"} 3",
            "barrier_group_resends_total{group=\"3\"} 1",
        ] {
            assert!(scraped.contains(line), "want {line:?} in:\n{scraped}");
        }
        let (status, _) = daemon.stop();
        assert!(status.success(), "{status:?}");
    })
    .expect("enter the namespace");
}
