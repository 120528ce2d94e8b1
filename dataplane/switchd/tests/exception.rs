//! Ports the switch owns with an exception path (`exception = "tap"`, issue 25): the switch's
//! ports are net_af_packet on veth ends (stand-ins for NICs the kernel no longer sees), each
//! with a TAP interface the switch creates in its namespace. The TAP interfaces are bridged by
//! Linux, so two hosts behind the switch's ports talk (ARP, IPv4, IPv6 neighbour discovery,
//! TCP) through the kernel as if it owned the ports, while their barriers complete through the
//! same ports; no barrier frame, well formed or not, ever reaches a TAP interface.

mod common;

use barrier_protocol::wire::ETHERTYPE;
use barrier_testbed::netns::{can_create, VethNetns};
use common::afp::{port_rx_counter, SwitchProc};
use common::hosts::{barrier_resending, check, ip, iperf3_received_bps, tcp_under_barrier_flood};
use rawsock::RawSocket;
use std::process::Command;
use std::time::{Duration, Instant};

/// The bed: namespace `bed.netns` with the switch's ends `veth-a0/1` (no address: the
/// switch's ports); `veth-b<i>` moved to namespace `<netns>-h<i>` as 10.78.0.<i+1>/24 and
/// fd78::<i+1>/64.
struct Hosts {
    bed: VethNetns,
    hosts: Vec<String>,
}

/// The TAP interface of port `leaf<i>`.
fn tap(i: usize) -> String {
    format!("nbx-leaf{i}")
}

impl Hosts {
    fn new() -> Hosts {
        let bed = VethNetns::with_pairs(2).unwrap();
        // The TAP interfaces and the bridge without IPv6 of their own: they only carry the
        // hosts' frames.
        bed.exec(&["sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"])
            .unwrap();
        let mut hosts = Vec::new();
        for (i, (_, b)) in bed.pairs.iter().enumerate() {
            let h = format!("{}-h{i}", bed.netns);
            ip(&["netns", "add", &h]);
            hosts.push(h.clone());
            ip(&["-n", &bed.netns, "link", "set", b, "netns", &h]);
            let v4 = format!("10.78.0.{}/24", i + 1);
            ip(&["-n", &h, "addr", "add", &v4, "dev", b]);
            ip(&["-n", &h, "link", "set", b, "up"]);
            let _ = Command::new("ip")
                .args(["netns", "exec", &h, "sysctl", "-q", "-w"])
                .arg(format!("net.ipv6.conf.{b}.disable_ipv6=0"))
                .status();
            // A NIC hands the switch frames as they were on the wire; a veth end hands
            // net_af_packet the host's TCP segments unsegmented and their checksums not yet
            // filled in unless the host's end is told not to offload.
            let off = ["tso", "off", "gso", "off", "tx", "off"];
            let mut e = Command::new("ip");
            e.args(["netns", "exec", &h, "ethtool", "-K", b]).args(off);
            assert!(e.status().unwrap().success(), "ethtool -K {b}");
            let v6 = format!("fd78::{}/64", i + 1);
            ip(&["-n", &h, "addr", "add", &v6, "dev", b, "nodad"]);
        }
        Hosts { bed, hosts }
    }

    fn leaf(&self, i: usize) -> RawSocket {
        RawSocket::open_in_netns(&self.hosts[i], &self.bed.pairs[i].1, ETHERTYPE).unwrap()
    }

    fn in_host(&self, i: usize, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.hosts[i]]).args(args);
        c
    }

    /// Ports `leaf0/1` on the switch's veth ends, with a TAP exception path each if
    /// `exception`; group 7 with both as children.
    fn config(&self, dir: &std::path::Path, exception: bool) -> std::path::PathBuf {
        let path = dir.join("exception.toml");
        let mut s = format!(
            "[eal]\nargs = [\"--no-huge\", \"-m\", \"256\", \"--no-shconf\", \"--file-prefix\", \
             \"nb-exc-{}-{}\", \"--no-pci\", \"--iova-mode=va\", \"--no-telemetry\", \"-l\", \"0,1\"]\n",
            std::process::id(),
            self.bed.netns
        );
        for (i, (a, _)) in self.bed.pairs.iter().enumerate() {
            // With an exception path the port needs a second TX queue: net_af_packet's qpairs,
            // whose sockets share the interface's frames, so both RX queues are polled (and the
            // exception path has two queue pairs on its TAP interface).
            let (qpairs, queues) = if exception {
                (",qpairs=2", "rx_queues = 2\n")
            } else {
                ("", "")
            };
            s += &format!(
                "\n[[ports]]\nname = \"leaf{i}\"\nvdev = \"net_af_packet{i},iface={a},qdisc_bypass=0{qpairs}\"\n{queues}"
            );
            if exception {
                s += &format!("exception = \"tap\"\nexception_iface = \"{}\"\n", tap(i));
            }
        }
        let poll = if exception {
            r#""leaf0:0", "leaf0:1", "leaf1:0", "leaf1:1""#
        } else {
            r#""leaf0", "leaf1""#
        };
        s += &format!("\n[lcores]\nscheduler = 1\nrx = [ {{ lcore = 0, poll = [{poll}] }} ]\n");
        s += "\n[[groups]]\nnumber = 7\nrole = \"root\"\nchildren = [\"leaf0\", \"leaf1\"]\n";
        std::fs::write(&path, s).unwrap();
        path
    }

    /// The switch's TAP interfaces in bridge `br0`, once the switch has created them.
    fn bridge_taps(&self) {
        let ns = &self.bed.netns;
        ip(&["-n", ns, "link", "add", "br0", "type", "bridge"]);
        for i in 0..2 {
            ip(&["-n", ns, "link", "set", &tap(i), "master", "br0"]);
            ip(&["-n", ns, "link", "set", &tap(i), "up"]);
        }
        ip(&["-n", ns, "link", "set", "br0", "up"]);
    }

    /// Pings `target` from host 0: true when it answered.
    fn ping(&self, target: &str) -> bool {
        let out = self
            .in_host(0, &["ping", "-c", "2", "-i", "0.2", "-W", "2", target])
            .output()
            .unwrap();
        out.status.success()
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for h in &self.hosts {
            let _ = Command::new("ip").args(["netns", "del", h]).status();
        }
    }
}

/// Waits for the switch's TAP interfaces to exist in its namespace.
fn wait_taps(bed: &VethNetns) {
    let until = Instant::now() + Duration::from_secs(10);
    for i in 0..2 {
        while bed.exec(&["ip", "link", "show", &tap(i)]).is_err() {
            assert!(Instant::now() < until, "no TAP interface {}", tap(i));
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn hosts_talk_through_the_kernel_on_the_switchs_ports_while_barriers_run() {
    if !can_create() {
        eprintln!("SKIP: needs root and iproute2 to create network namespaces");
        return;
    }
    for tool in ["iperf3", "ping"] {
        let found = Command::new(tool).arg("--version").output().is_ok()
            || Command::new(tool).arg("-V").output().is_ok();
        assert!(found, "{tool} not installed: run scripts/setup.sh");
    }
    let hosts = Hosts::new();
    let dir = tempfile::tempdir().unwrap();
    let cfg = hosts.config(dir.path(), true);
    let (ok, text) = check(&hosts.bed, &cfg);
    assert!(ok, "{text}");
    assert!(
        text.contains("port leaf0: exception path: frames that are not barrier frames to TAP interface nbx-leaf0"),
        "{text}"
    );
    let (l0, l1) = (hosts.leaf(0), hosts.leaf(1));
    let mut switch = SwitchProc::spawn(&hosts.bed, &cfg);
    switch.wait_ready();
    wait_taps(&hosts.bed);
    // A second switch on the same interfaces is refused before DPDK: the TAP names are taken.
    let (ok, text) = check(&hosts.bed, &cfg);
    assert!(!ok, "{text}");
    assert!(
        text.contains("an interface \"nbx-leaf0\" already exists"),
        "{text}"
    );
    hosts.bridge_taps();

    // ARP and IPv4, IPv6 neighbour discovery: through port leaf0, the kernel's bridge, and
    // out of port leaf1, and back.
    for target in ["10.78.0.2", "fd78::2"] {
        assert!(hosts.ping(target), "no ping to {target} through the switch");
    }
    let mut server = hosts
        .in_host(1, &["iperf3", "-s", "-1", "-B", "10.78.0.2"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let client = std::thread::scope(|s| {
        let client = s.spawn(|| {
            hosts
                .in_host(0, &["iperf3", "-c", "10.78.0.2", "-t", "2", "-J"])
                .output()
                .unwrap()
        });
        let (mut seq, mut resent) = (0u32, 0u32);
        while !client.is_finished() {
            resent += barrier_resending(&l0, &l1, seq, seq % 50 == 0);
            seq += 1;
        }
        assert!(seq > 10, "only {seq} barriers during the TCP run");
        eprintln!("{seq} barriers during the TCP run, {resent} reduces re-sent");
        client.join().unwrap()
    });
    let _ = server.wait();
    let json = String::from_utf8_lossy(&client.stdout);
    assert!(client.status.success(), "iperf3: {json}");
    let bps = iperf3_received_bps(&json);
    assert!(bps > 1e6, "iperf3 received {bps} bit/s");
    eprintln!(
        "TCP across the switch's ports through their TAP exception paths: {:.0} Mbit/s",
        bps / 1e6
    );
    let counters = switch.counters();
    eprintln!("{counters}");
    for port in ["leaf0", "leaf1"] {
        let n = |name: &str| port_rx_counter(&counters, port, name);
        // Each port carried TCP both ways: the data one way, the acknowledgements the other.
        assert!(n("exception_to_kernel") > 100, "{port}\n{counters}");
        assert!(
            n("exception_to_kernel_bytes") > 100 * 60,
            "{port}\n{counters}"
        );
        assert!(n("exception_from_kernel") > 100, "{port}\n{counters}");
        assert!(
            n("exception_from_kernel_bytes") > 100 * 60,
            "{port}\n{counters}"
        );
        assert_eq!(n("drop_not_barrier"), 0, "{port}\n{counters}");
    }
    let (status, out) = switch.stop();
    assert!(status.success(), "{status:?}\n{out}");
    assert!(
        out.contains("mbufs back") && !out.contains("still out"),
        "{out}"
    );
    // The TAP interfaces go with the switch.
    assert!(
        hosts.bed.exec(&["ip", "link", "show", &tap(0)]).is_err(),
        "TAP interface left after the switch stopped"
    );
}

/// A frame of EtherType `ethertype` to broadcast from `src`, 60 bytes.
fn frame(src: [u8; 6], ethertype: u16, fill: u8) -> Vec<u8> {
    let mut f = vec![fill; 60];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&ethertype.to_be_bytes());
    f
}

/// No barrier frame, well formed or not, reaches a TAP interface, while the frames of any
/// other EtherType do: a raw socket on each TAP interface for EtherType 0x88B5 sees nothing
/// while barriers run and malformed barrier frames arrive; one for 0x88B6 sees those frames.
#[test]
fn barrier_frames_never_reach_the_tap_interface() {
    if !can_create() {
        eprintln!("SKIP: needs root and iproute2 to create network namespaces");
        return;
    }
    let hosts = Hosts::new();
    let dir = tempfile::tempdir().unwrap();
    let cfg = hosts.config(dir.path(), true);
    let (l0, l1) = (hosts.leaf(0), hosts.leaf(1));
    let other0 = RawSocket::open_in_netns(&hosts.hosts[0], &hosts.bed.pairs[0].1, 0x88B6).unwrap();
    let mut switch = SwitchProc::spawn(&hosts.bed, &cfg);
    switch.wait_ready();
    wait_taps(&hosts.bed);
    let ns = &hosts.bed.netns;
    let on_tap = |i: usize, ethertype: u16| RawSocket::open_in_netns(ns, &tap(i), ethertype);
    let barrier_on_tap = [on_tap(0, ETHERTYPE).unwrap(), on_tap(1, ETHERTYPE).unwrap()];
    let other_on_tap = on_tap(0, 0x88B6).unwrap();
    for seq in 0..20 {
        barrier_resending(&l0, &l1, seq, seq % 5 == 0);
        // A malformed barrier frame (bad magic) and a frame of the next EtherType.
        let mut bad = frame(l0.mac(), ETHERTYPE, 0);
        bad[14] = 0x55;
        l0.send(&bad).unwrap();
        other0
            .send(&frame(other0.mac(), 0x88B6, seq as u8))
            .unwrap();
    }
    let mut buf = [0u8; 2048];
    let mut others = 0;
    while let Some(n) = other_on_tap
        .recv(&mut buf, Some(Duration::from_secs(1)))
        .unwrap()
    {
        assert_eq!(buf[12..14], [0x88, 0xB6], "{:?}", &buf[..n]);
        others += 1;
    }
    assert_eq!(
        others, 20,
        "the frames of EtherType 0x88B6 on the TAP interface"
    );
    for (i, s) in barrier_on_tap.iter().enumerate() {
        let got = s.recv(&mut buf, Some(Duration::from_millis(200))).unwrap();
        assert_eq!(
            got.map(|n| buf[..n].to_vec()),
            None,
            "a barrier frame on TAP interface {}",
            tap(i)
        );
    }
    let counters = switch.counters();
    assert_eq!(
        port_rx_counter(&counters, "leaf0", "drop_bad_magic"),
        20,
        "{counters}"
    );
    let completions: u64 = ["leaf0", "leaf1"]
        .iter()
        .map(|p| port_rx_counter(&counters, p, "completions"))
        .sum();
    assert_eq!(completions, 20, "{counters}");
    assert!(
        port_rx_counter(&counters, "leaf0", "exception_to_kernel") >= 20,
        "{counters}"
    );
    let (status, out) = switch.stop();
    assert!(status.success(), "{status:?}\n{out}");
}

/// Without an exception path the same port drops what is not a barrier frame, as before.
#[test]
fn without_an_exception_path_ordinary_frames_are_dropped_and_counted() {
    if !can_create() {
        eprintln!("SKIP: needs root and iproute2 to create network namespaces");
        return;
    }
    let hosts = Hosts::new();
    let dir = tempfile::tempdir().unwrap();
    let cfg = hosts.config(dir.path(), false);
    let other0 = RawSocket::open_in_netns(&hosts.hosts[0], &hosts.bed.pairs[0].1, 0x88B6).unwrap();
    let mut switch = SwitchProc::spawn(&hosts.bed, &cfg);
    switch.wait_ready();
    for i in 0..10u8 {
        other0.send(&frame(other0.mac(), 0x88B6, i)).unwrap();
    }
    let until = Instant::now() + Duration::from_secs(5);
    let counters = loop {
        let c = switch.counters();
        if port_rx_counter(&c, "leaf0", "drop_not_barrier") >= 10 || Instant::now() > until {
            break c;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        port_rx_counter(&counters, "leaf0", "drop_not_barrier") >= 10,
        "{counters}"
    );
    assert_eq!(
        port_rx_counter(&counters, "leaf0", "exception_to_kernel"),
        0,
        "{counters}"
    );
    assert!(hosts.bed.exec(&["ip", "link", "show", &tap(0)]).is_err());
    let (status, _) = switch.stop();
    assert!(status.success());
}

/// A barrier flood does not starve ordinary traffic on a port with a TAP exception path: host 0
/// sends reduces of a group the switch does not have as fast as its socket takes them, on the
/// same port as its TCP to host 1, whose frames the same RX lcore hands to the kernel; the TCP
/// run completes, and the switch dropped the flood as it should.
#[test]
fn a_barrier_flood_does_not_starve_the_hosts_tcp() {
    if !can_create() {
        eprintln!("SKIP: needs root and iproute2 to create network namespaces");
        return;
    }
    let hosts = Hosts::new();
    let dir = tempfile::tempdir().unwrap();
    let cfg = hosts.config(dir.path(), true);
    let l0 = hosts.leaf(0);
    let mut switch = SwitchProc::spawn(&hosts.bed, &cfg);
    switch.wait_ready();
    wait_taps(&hosts.bed);
    hosts.bridge_taps();
    assert!(hosts.ping("10.78.0.2"), "no ping through the switch");
    let (bps, flood) = tcp_under_barrier_flood(
        &l0,
        |a| hosts.in_host(0, a),
        |a| hosts.in_host(1, a),
        "10.78.0.2",
    );
    assert!(
        bps > 1e6,
        "iperf3 received {bps} bit/s under the barrier flood"
    );
    let counters = switch.counters();
    let dropped = port_rx_counter(&counters, "leaf0", "drop_unknown_group");
    assert!(
        flood > 1000 && dropped > 1000,
        "the flood: {flood} frames sent, {dropped} dropped as an unknown group's\n{counters}"
    );
    let (status, out) = switch.stop();
    assert!(status.success(), "{status:?}\n{out}");
    eprintln!(
        "TCP under a barrier flood through the TAP exception path: {:.0} Mbit/s; {flood} flood frames sent, {dropped} dropped by the switch",
        bps / 1e6
    );
}
