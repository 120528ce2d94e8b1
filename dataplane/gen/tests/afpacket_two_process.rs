//! Two programs over real (virtual) Ethernet: `barrier-switch run` and `barrier-gen`, each in a
//! network namespace of its own that this test creates, joined by two veth pairs, each side on
//! DPDK `net_af_packet` ports. 1% loss injected by the generator in both directions; every
//! barrier completes, and the switch shuts down cleanly on SIGTERM. The namespaces (and with
//! them the veths) and both processes are removed on every exit path.
//!
//! Why two namespaces: DPDK 22.11's af_packet driver joins every queue's socket to the fanout
//! group `(getpid() ^ ifindex) & 0xffff` (`rte_pmd_init_internals`), and fanout groups are per
//! network namespace. Two DPDK processes in one namespace collide when `pid1 ^ ifindex1 ==
//! pid2 ^ ifindex2` for two different interfaces, and the second fails with "could not set
//! PACKET_FANOUT on AF_PACKET socket for gen0: Invalid argument" (about one run in eight, as
//! this test was before). In separate namespaces the ids cannot meet. docs/operations.md
//! ("Two af_packet DPDK processes on one host") says the same to operators.
//!
//! Needs the `barrier-switch` binary built in the same target directory (`cargo build
//! --workspace`, as scripts/test.sh does first).

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The switch's namespace and the generator's, `nbgen-<pid>-sw` and `nbgen-<pid>-gen` (the
/// prefix `nbgen-<pid>` is what `scripts/topo.sh --cleanup-stale` recognises), and the
/// processes started in them.
struct Bed {
    pid: u32,
    created: Vec<String>,
    children: Vec<Child>,
}

impl Bed {
    const SW: &'static str = "sw";
    const GEN: &'static str = "gen";

    fn ns(&self, side: &str) -> String {
        format!("nbgen-{}-{side}", self.pid)
    }

    /// Both namespaces; veth pairs `sw<i>` (switch side) <-> `gen<i>` (generator side).
    fn create() -> Bed {
        let mut bed = Bed {
            pid: std::process::id(),
            created: Vec::new(),
            children: Vec::new(),
        };
        for side in [Self::SW, Self::GEN] {
            let name = bed.ns(side);
            run(&["ip", "netns", "add", &name]);
            bed.created.push(name);
            bed.sh(
                side,
                &[
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ],
            );
            bed.sh(side, &["ip", "link", "set", "lo", "up"]);
        }
        let gen_ns = bed.ns(Self::GEN);
        for i in 0..2 {
            let (sw, gen) = (format!("sw{i}"), format!("gen{i}"));
            // created in the switch's namespace, its peer in the generator's
            bed.sh(
                Self::SW,
                &[
                    "ip", "link", "add", &sw, "type", "veth", "peer", "name", &gen, "netns",
                    &gen_ns,
                ],
            );
            bed.sh(Self::SW, &["ip", "link", "set", &sw, "up"]);
            bed.sh(Self::GEN, &["ip", "link", "set", &gen, "up"]);
        }
        bed
    }

    /// Runs `args` inside the namespace of `side`; panics unless it succeeds.
    fn sh(&self, side: &str, args: &[&str]) {
        let ns = self.ns(side);
        let mut all = vec!["ip", "netns", "exec", &ns];
        all.extend_from_slice(args);
        run(&all);
    }

    /// `program`, to be run inside the namespace of `side`.
    fn command(&self, side: &str, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(side)]).arg(program);
        c
    }
}

fn run(args: &[&str]) {
    let st = Command::new(args[0])
        .args(&args[1..])
        .status()
        .expect("run ip");
    assert!(st.success(), "{args:?} failed");
}

impl Drop for Bed {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        // a namespace's veth ends go with it, and their peers with them
        for ns in self.created.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        common::remove_runtime_dir(&format!("nbgen-sw-{}", self.pid));
        common::remove_runtime_dir(&format!("nb-gen-afp-{}", self.pid));
    }
}

fn switch_binary() -> PathBuf {
    // tests run from <target>/<profile>/deps/; the workspace's binaries sit in <target>/<profile>/
    let me = std::env::current_exe().unwrap();
    let p = me
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("barrier-switch");
    assert!(
        p.exists(),
        "{} not found: build the workspace first (cargo build --workspace)",
        p.display()
    );
    p
}

#[test]
fn gen_against_switch_process_over_af_packet() {
    let switch = switch_binary();
    let mut bed = Bed::create();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("switch.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"[eal]
args = ["--lcores", "{lcores}", "--no-huge", "-m", "256", "--no-shconf", "--file-prefix", "nbgen-sw-{pid}", "--no-pci", "--iova-mode=va", "--no-telemetry", "--log-level=*:warning"]

[[ports]]
name = "p0"
vdev = "net_af_packet0,iface=sw0,qdisc_bypass=0"

[[ports]]
name = "p1"
vdev = "net_af_packet1,iface=sw1,qdisc_bypass=0"

[lcores]
scheduler = 0
shared = true
rx = [ {{ lcore = 0, poll = ["p0", "p1"] }} ]

[[groups]]
numbers = "0..32"
role = "root"
children = ["p0", "p1"]
"#,
            pid = std::process::id(),
            lcores = common::floating_lcore()
        ),
    )
    .unwrap();
    let mut sw = bed
        .command(Bed::SW, &switch)
        .args(["run", "--config", cfg.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start barrier-switch");
    // Ready once it has said how to stop it.
    let mut err = BufReader::new(sw.stderr.take().unwrap());
    let t0 = Instant::now();
    let mut line = String::new();
    loop {
        line.clear();
        if err.read_line(&mut line).unwrap() == 0 || t0.elapsed() > Duration::from_secs(30) {
            let _ = sw.kill();
            panic!("barrier-switch did not start: {line}");
        }
        if line.contains("SIGINT") {
            break;
        }
    }
    let sw_pid = sw.id();
    bed.children.push(sw);

    let eal = common::eal("afp", &common::floating_lcore());
    let out = bed
        .command(
            Bed::GEN,
            std::path::Path::new(env!("CARGO_BIN_EXE_barrier-gen")),
        )
        .args(&eal)
        .args([
            "--",
            "--port",
            "net_af_packet0,iface=gen0,qdisc_bypass=0",
            "--port",
            "net_af_packet1,iface=gen1,qdisc_bypass=0",
        ])
        .args([
            "--groups",
            "32",
            "--count",
            "50",
            "--duration",
            "60",
            "--drain",
            "20",
            "--loss",
            "0.01",
        ])
        .args(["--resend-timeout-us", "20000", "--json", "-q"])
        .output()
        .expect("run barrier-gen");
    let text = common::stdout(&out);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "exit {:?}\n{text}", out.status);
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let b = &v["report"]["barriers"];
    assert_eq!(b["started"].as_u64(), Some(32 * 50), "{text}");
    assert_eq!(b["completed"].as_u64(), Some(32 * 50), "{text}");
    assert_eq!(b["incomplete"].as_u64(), Some(0));
    assert_eq!(b["early_releases"].as_u64(), Some(0));
    assert!(v["report"]["frames"]["tx_per_s"].as_f64().unwrap() > 0.0);
    assert!(v["report"]["latency_leaf"]["p99_ns"].as_u64().unwrap() > 0);
    assert!(v["switch"].is_null(), "no in-process switch here");

    // The switch stops cleanly on SIGTERM and reports its completions.
    let st = Command::new("kill")
        .args(["-TERM", &sw_pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let sw = bed.children.pop().unwrap();
    let so = sw.wait_with_output().unwrap();
    let sw_out = String::from_utf8_lossy(&so.stdout);
    assert!(so.status.success(), "switch exit {:?}: {sw_out}", so.status);
    assert!(sw_out.contains("completions=1600"), "{sw_out}");
    assert!(sw_out.contains("mbufs back"), "{sw_out}");
}
