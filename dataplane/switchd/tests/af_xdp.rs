//! barrier-switch on AF_XDP ports (`af_xdp = "IFACE"`, issue 25): veth pairs in a namespace
//! this test creates; each leaf end is moved to a namespace of its own with an address, so
//! ordinary traffic (ARP, ICMP) really crosses the link to the switch's interface. Barrier
//! frames must reach the switch and everything else the kernel; the steering program must
//! go with the switch however it stops, a SIGKILL included, so that a new switch can start
//! on the same interfaces; `check` refuses a port that cannot work, with the reason.

mod common;

use barrier_protocol::wire::{Kind, ETHERTYPE};
use barrier_protocol::{GroupId, Seq};
use barrier_testbed::netns::{can_create, VethNetns};
use common::afp::{next_frame, reduce, SwitchProc};
use rawsock::RawSocket;
use std::process::Command;
use std::time::Duration;

/// The bed: namespace `bed.netns` with the switch ends `veth-a0/1`; `veth-b<i>` moved to
/// namespace `<netns>-h<i>` as 10.77.<i>.2/24, `veth-a<i>` 10.77.<i>.1/24.
struct Hosts {
    bed: VethNetns,
    hosts: Vec<String>,
}

impl Hosts {
    fn new() -> Hosts {
        let bed = VethNetns::with_pairs(2).unwrap();
        let mut hosts = Vec::new();
        for (i, (a, b)) in bed.pairs.iter().enumerate() {
            let h = format!("{}-h{i}", bed.netns);
            ip(&["netns", "add", &h]);
            hosts.push(h.clone());
            ip(&["-n", &bed.netns, "link", "set", b, "netns", &h]);
            ip(&[
                "-n",
                &h,
                "addr",
                "add",
                &format!("10.77.{i}.2/24"),
                "dev",
                b,
            ]);
            ip(&["-n", &h, "link", "set", b, "up"]);
            ip(&[
                "-n",
                &bed.netns,
                "addr",
                "add",
                &format!("10.77.{i}.1/24"),
                "dev",
                a,
            ]);
        }
        Hosts { bed, hosts }
    }

    fn leaf(&self, i: usize) -> RawSocket {
        RawSocket::open_in_netns(&self.hosts[i], &self.bed.pairs[i].1, ETHERTYPE).unwrap()
    }

    /// Pings the switch's interface from host `i`: ARP and ICMP through the steering program.
    fn ping(&self, i: usize) -> bool {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.hosts[i],
                "ping",
                "-c",
                "2",
                "-i",
                "0.2",
                "-W",
                "2",
            ])
            .arg(format!("10.77.{i}.1"))
            .output()
            .unwrap()
            .status
            .success()
    }

    /// The XDP program on the switch's end of pair `i`, as `ip -d link` shows it.
    fn xdp_on(&self, i: usize) -> Option<String> {
        let out = Command::new("ip")
            .args([
                "-n",
                &self.bed.netns,
                "-d",
                "link",
                "show",
                &self.bed.pairs[i].0,
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .find(|l| l.trim_start().starts_with("prog/xdp"))
            .map(str::to_owned)
    }

    fn config(&self, dir: &std::path::Path, queues: u16) -> std::path::PathBuf {
        let path = dir.join("afxdp.toml");
        let mut s = format!(
            "[eal]\nargs = [\"--no-huge\", \"-m\", \"256\", \"--no-shconf\", \"--file-prefix\", \
             \"nb-afxdp-{}-{}\", \"--no-pci\", \"--iova-mode=va\", \"--no-telemetry\", \"-l\", \"0,1\"]\n",
            std::process::id(),
            self.bed.netns
        );
        for (i, (a, _)) in self.bed.pairs.iter().enumerate() {
            s += &format!(
                "\n[[ports]]\nname = \"leaf{i}\"\naf_xdp = \"{a}\"\nrx_queues = {queues}\n"
            );
        }
        let poll: Vec<String> = (0..2)
            .flat_map(|i| (0..queues).map(move |q| format!("\"leaf{i}:{q}\"")))
            .collect();
        s += &format!(
            "\n[lcores]\nscheduler = 1\nrx = [ {{ lcore = 0, poll = [{}] }} ]\n",
            poll.join(", ")
        );
        s += "\n[[groups]]\nnumber = 7\nrole = \"root\"\nchildren = [\"leaf0\", \"leaf1\"]\n";
        std::fs::write(&path, s).unwrap();
        path
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for h in &self.hosts {
            let _ = Command::new("ip").args(["netns", "del", h]).status();
        }
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Barriers `seqs` of group 7: no release before both leaves reduced, then both get it.
fn barriers(l0: &RawSocket, l1: &RawSocket, seqs: std::ops::Range<u32>) {
    for seq in seqs {
        l0.send(&reduce(l0.mac(), 7, seq)).unwrap();
        assert!(
            next_frame(l0, Duration::from_millis(100)).is_none(),
            "release before all leaves arrived"
        );
        l1.send(&reduce(l1.mac(), 7, seq)).unwrap();
        for (i, s) in [l0, l1].into_iter().enumerate() {
            let r = next_frame(s, Duration::from_secs(5))
                .unwrap_or_else(|| panic!("leaf{i} got no release for seq {seq}"));
            assert_eq!(
                (r.kind, r.group, r.seq),
                (Kind::Release, GroupId(7), Seq(seq)),
                "leaf{i}"
            );
        }
    }
}

fn check(bed: &VethNetns, config: &std::path::Path) -> (bool, String) {
    let out = bed
        .command(env!("CARGO_BIN_EXE_barrier-switch"))
        .args(["check", "--config"])
        .arg(config)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn barrier_frames_reach_the_switch_and_the_rest_the_kernel() {
    if !can_create() {
        eprintln!("SKIP: needs root and iproute2 to create network namespaces");
        return;
    }
    let hosts = Hosts::new();
    let dir = tempfile::tempdir().unwrap();
    let cfg = hosts.config(dir.path(), 1);
    let (ok, text) = check(&hosts.bed, &cfg);
    assert!(ok, "{text}");
    assert!(text.contains("port leaf0: af_xdp on veth-a0"), "{text}");
    let (l0, l1) = (hosts.leaf(0), hosts.leaf(1));

    let mut switch = SwitchProc::spawn(&hosts.bed, &cfg);
    switch.wait_ready();
    let prog = hosts.xdp_on(0).expect("a steering program on veth-a0");
    assert!(prog.contains("name nb_steer"), "{prog}");
    // One program per interface: a second switch's check says who holds it.
    let (ok, text) = check(&hosts.bed, &cfg);
    assert!(!ok, "{text}");
    assert!(
        text.contains("already runs XDP program \"nb_steer\""),
        "{text}"
    );

    // The interface keeps its address: ARP and ICMP answered by the kernel, both ports.
    assert!(hosts.ping(0), "no ping across leaf0's link");
    assert!(hosts.ping(1), "no ping across leaf1's link");
    barriers(&l0, &l1, 0..3);
    let (status, out) = switch.stop();
    assert!(status.success(), "{status:?}\n{out}");
    assert!(out.contains("completions=3"), "{out}");
    let steer = out
        .lines()
        .find(|l| l.starts_with("port leaf0 steering:"))
        .unwrap_or_else(|| panic!("no steering counters in\n{out}"));
    // leaf0 sent 3 reduces; ping's ARP and 2 echo requests (at least) went to the kernel.
    let n = |word: &str| -> u64 {
        let head = steer.split(word).next().unwrap();
        head.split_whitespace().last().unwrap().parse().unwrap()
    };
    assert!(n(" barrier frames (") >= 3, "{steer}");
    assert!(n(" other") >= 3, "{steer}");
    assert_eq!(hosts.xdp_on(0), None, "the program stayed after SIGTERM");
    assert!(hosts.ping(0), "no ping after the switch stopped");
}

#[test]
fn a_killed_switch_leaves_the_interfaces_to_the_kernel_and_a_new_one_starts() {
    if !can_create() {
        eprintln!("SKIP: needs root and iproute2 to create network namespaces");
        return;
    }
    let hosts = Hosts::new();
    let dir = tempfile::tempdir().unwrap();
    let cfg = hosts.config(dir.path(), 1);
    let (l0, l1) = (hosts.leaf(0), hosts.leaf(1));
    let mut switch = SwitchProc::spawn(&hosts.bed, &cfg);
    switch.wait_ready();
    barriers(&l0, &l1, 0..1);
    drop(switch); // SIGKILL: no chance to detach anything
    for i in 0..2 {
        assert_eq!(
            hosts.xdp_on(i),
            None,
            "a program left on port {i} after SIGKILL"
        );
    }
    assert!(hosts.ping(0), "no ping after the switch was killed");
    let mut again = SwitchProc::spawn(&hosts.bed, &cfg);
    again.wait_ready();
    // The restarted switch knows nothing of barrier 0: its group starts again (restart rules).
    barriers(&l0, &l1, 1..3);
    let (status, out) = again.stop();
    assert!(status.success(), "{status:?}\n{out}");
}

#[test]
fn check_refuses_af_xdp_ports_that_cannot_work() {
    if !can_create() {
        eprintln!("SKIP: needs root and iproute2 to create network namespaces");
        return;
    }
    let hosts = Hosts::new();
    let dir = tempfile::tempdir().unwrap();
    let cfg = hosts.config(dir.path(), 2);
    let (ok, text) = check(&hosts.bed, &cfg);
    assert!(!ok, "{text}");
    assert!(
        text.contains("port leaf0: interface veth-a0 has 1 RX queue(s), the port asks for 2"),
        "{text}"
    );
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("rx_queues = 2", "rx_queues = 1")
        .replace("\"leaf0:1\", ", "")
        .replace(", \"leaf1:1\"", "")
        .replace("veth-a1", "nosuch0");
    std::fs::write(&cfg, text).unwrap();
    let (ok, text) = check(&hosts.bed, &cfg);
    assert!(!ok, "{text}");
    assert!(
        text.contains("port leaf1: no interface \"nosuch0\" in this network namespace"),
        "{text}"
    );
    // run refuses it the same way, before DPDK starts.
    let out = hosts
        .bed
        .command(env!("CARGO_BIN_EXE_barrier-switch"))
        .args(["run", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("no interface \"nosuch0\""), "{err}");
}
