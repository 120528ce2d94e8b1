//! Two programs over real (virtual) Ethernet: `barrier-switch run` and `barrier-gen` in a network
//! namespace this test creates, joined by two veth pairs, each side on DPDK `net_af_packet`
//! ports. 1% loss injected by the generator in both directions; every barrier completes, and
//! the switch shuts down cleanly on SIGTERM. The namespace (and with it the veths) and both
//! processes are removed on every exit path.
//!
//! Needs the `barrier-switch` binary built in the same target directory (`cargo build
//! --workspace`, as scripts/test.sh does first).

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Netns {
    name: String,
    children: Vec<Child>,
}

impl Netns {
    fn create() -> Netns {
        let name = format!("nbgen-{}", std::process::id());
        let ns = Netns {
            name,
            children: Vec::new(),
        };
        ns.sh(&["ip", "netns", "add", &ns.name], false);
        ns.sh(
            &[
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ],
            true,
        );
        ns.sh(&["ip", "link", "set", "lo", "up"], true);
        for i in 0..2 {
            ns.sh(
                &[
                    "ip",
                    "link",
                    "add",
                    &format!("sw{i}"),
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &format!("gen{i}"),
                ],
                true,
            );
            ns.sh(&["ip", "link", "set", &format!("sw{i}"), "up"], true);
            ns.sh(&["ip", "link", "set", &format!("gen{i}"), "up"], true);
        }
        ns
    }

    fn sh(&self, args: &[&str], inside: bool) {
        let mut c = if inside {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &self.name]).args(args);
            c
        } else {
            let mut c = Command::new(args[0]);
            c.args(&args[1..]);
            c
        };
        let st = c.status().expect("run ip");
        assert!(st.success(), "{args:?} failed");
    }

    fn command(&self, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        common::remove_runtime_dir(&format!("nbgen-sw-{}", std::process::id()));
        common::remove_runtime_dir(&format!("nb-gen-afp-{}", std::process::id()));
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
    let mut ns = Netns::create();
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
    let mut sw = ns
        .command(&switch)
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
    ns.children.push(sw);

    let eal = common::eal("afp", &common::floating_lcore());
    let out = ns
        .command(std::path::Path::new(env!("CARGO_BIN_EXE_barrier-gen")))
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
    let sw = ns.children.pop().unwrap();
    let so = sw.wait_with_output().unwrap();
    let sw_out = String::from_utf8_lossy(&so.stdout);
    assert!(so.status.success(), "switch exit {:?}: {sw_out}", so.status);
    assert!(sw_out.contains("completions=1600"), "{sw_out}");
    assert!(sw_out.contains("mbufs back"), "{sw_out}");
}
