//! What the shared-link tests (`af_xdp.rs`, `exception.rs`) both need: `ip`, `barrier-switch
//! check`, a barrier whose leaves re-send as barrier-leaf does, and iperf3's received rate.

use super::afp::{next_frame, reduce};
use barrier_protocol::wire::Kind;
use barrier_protocol::Seq;
use barrier_testbed::netns::VethNetns;
use rawsock::RawSocket;
use std::process::Command;
use std::time::Duration;

/// Runs `ip ARGS`; panics with its stderr unless it succeeds.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `barrier-switch check --config CONFIG` in the bed's namespace: success, and stdout+stderr.
pub fn check(bed: &VethNetns, config: &std::path::Path) -> (bool, String) {
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

/// One barrier of group 7 for `seq`, the leaves re-sending a reduce whose release does not
/// come in 100 ms, as barrier-leaf does (a frame may be lost under load). With `alone_first`,
/// leaf 0 reduces alone first and must get nothing: no early release. Returns the re-sends.
pub fn barrier_resending(l0: &RawSocket, l1: &RawSocket, seq: u32, alone_first: bool) -> u32 {
    let mut resent = 0;
    l0.send(&reduce(l0.mac(), 7, seq)).unwrap();
    if alone_first {
        assert!(
            next_frame(l0, Duration::from_millis(50)).is_none(),
            "a release of {seq} before leaf 1 reduced"
        );
    }
    l1.send(&reduce(l1.mac(), 7, seq)).unwrap();
    for (i, sock) in [l0, l1].into_iter().enumerate() {
        let mut tries = 0;
        let r = loop {
            match next_frame(sock, Duration::from_millis(100)) {
                Some(r) if r.seq == Seq(seq) => break r,
                Some(_) => {} // the answer to an earlier re-send
                None => {
                    tries += 1;
                    assert!(tries < 50, "leaf{i}: no release of {seq} in 5 s");
                    sock.send(&reduce(sock.mac(), 7, seq)).unwrap();
                    resent += 1;
                }
            }
        };
        assert_eq!(r.kind, Kind::Release, "leaf{i}");
    }
    resent
}

/// The received rate in bit/s of an `iperf3 -c ... -J` report.
pub fn iperf3_received_bps(json: &str) -> f64 {
    json.split("\"sum_received\"")
        .nth(1)
        .and_then(|t| t.split("\"bits_per_second\":").nth(1))
        .and_then(|t| t.split([',', '}']).next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no received rate in {json}"))
}

/// A barrier flood: reduces of `group` (one no switch has) from `sock`, as fast as it sends,
/// until `stop`. Returns the frames sent (a full socket buffer is waited out, not counted).
pub fn flood_barriers(sock: &RawSocket, group: u32, stop: &std::sync::atomic::AtomicBool) -> u64 {
    let frame = reduce(sock.mac(), group, 0);
    let mut sent = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if sock.send(&frame).is_ok() {
            sent += 1;
        }
    }
    sent
}

/// `iperf3 -c SERVER -t SECS -J` from `client` against `iperf3 -s -1 -B SERVER` in `server`
/// (each a command prefix that runs its arguments in a host): the received rate in bit/s;
/// panics with the report unless the run succeeded.
pub fn iperf3_bps(
    client: impl Fn(&[&str]) -> Command,
    server: impl Fn(&[&str]) -> Command,
    addr: &str,
    secs: u32,
) -> f64 {
    let mut srv = server(&["iperf3", "-s", "-1", "-B", addr])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = client(&["iperf3", "-c", addr, "-t", &secs.to_string(), "-J"])
        .output()
        .unwrap();
    let _ = srv.wait();
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "iperf3: {json}");
    iperf3_received_bps(&json)
}

/// TCP from host 0 to host 1 (`iperf3_bps`, 2 s) while `flood` (host 0's raw socket) sends
/// reduces of group 4242, which no switch has, as fast as it can (`flood_barriers`): the
/// received rate in bit/s and the flood frames sent.
pub fn tcp_under_barrier_flood(
    flood: &RawSocket,
    client: impl Fn(&[&str]) -> Command,
    server: impl Fn(&[&str]) -> Command,
    addr: &str,
) -> (f64, u64) {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let sent = s.spawn(|| flood_barriers(flood, 4242, &stop));
        std::thread::sleep(Duration::from_millis(200));
        let bps = iperf3_bps(client, server, addr, 2);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (bps, sent.join().unwrap())
    })
}
