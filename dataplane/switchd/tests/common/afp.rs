//! The real `barrier-switch` binary over net_af_packet on veth pairs in a throw-away network
//! namespace, with raw sockets as leaves: spawn it, wait for its lines, read its counters.

use barrier_protocol::leaf::LeafSend;
use barrier_protocol::wire::{FrameRepr, MacAddr};
use barrier_protocol::{Epoch, GroupId, Seq};
use barrier_testbed::netns::VethNetns;
use rawsock::RawSocket;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A leaf's first reduce for `group`, barrier `seq`, to broadcast.
pub fn reduce(src: [u8; 6], group: u32, seq: u32) -> Vec<u8> {
    reduce_in(src, group, Epoch::DEFAULT.get(), seq)
}

/// A leaf's first reduce for `group`, barrier `seq` of `epoch`, to broadcast.
pub fn reduce_in(src: [u8; 6], group: u32, epoch: u32, seq: u32) -> Vec<u8> {
    LeafSend {
        group: GroupId(group),
        epoch: Epoch::new(epoch),
        seq: Seq(seq),
        retransmit: false,
    }
    .frame(MacAddr(src), MacAddr::BROADCAST, None)
    .to_bytes()
    .to_vec()
}

/// The next barrier frame on `sock` within `timeout`, parsed.
pub fn next_frame(sock: &RawSocket, timeout: Duration) -> Option<FrameRepr> {
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 2048];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        match sock.recv(&mut buf, Some(left)).unwrap() {
            Some(n) => {
                if let Ok(r) = FrameRepr::parse(&buf[..n]) {
                    return Some(r);
                }
            }
            None => return None,
        }
    }
}

/// A root switch config: one port per veth pair's `a` end (named `names[i]`), group `group`
/// with `children` as its children, RX and scheduler on lcores 0 and 1.
pub fn root_config(bed: &VethNetns, names: &[&str], group: u32, children: &[&str]) -> String {
    let mut s = format!(
        r#"
[eal]
args = ["--no-huge", "-m", "256", "--no-shconf", "--file-prefix", "nb-afp-{pid}-{ns}", "--no-pci",
        "--iova-mode=va", "--no-telemetry", "-l", "0,1"]
"#,
        pid = std::process::id(),
        ns = bed.netns,
    );
    for (i, name) in names.iter().enumerate() {
        s += &format!(
            "\n[[ports]]\nname = \"{name}\"\nvdev = \"net_af_packet{i},iface={}\"\n",
            bed.pairs[i].0
        );
    }
    let quoted = |v: &[&str]| {
        v.iter()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    s += &format!(
        "\n[lcores]\nscheduler = 1\nrx = [ {{ lcore = 0, poll = [{}] }} ]\n",
        quoted(names)
    );
    s += &format!(
        "\n[[groups]]\nnumber = {group}\nrole = \"root\"\nchildren = [{}]\n",
        quoted(children)
    );
    s
}

/// A running `barrier-switch run --config`, killed on drop if the test did not stop it.
pub struct SwitchProc {
    child: Option<Child>,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    /// Every stderr line seen so far.
    pub log: Vec<String>,
    /// EAL's runtime folder for the config's --file-prefix: removed on drop, as a switch
    /// killed there has no chance to (a clean stop removes it itself).
    runtime_dir: Option<std::path::PathBuf>,
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

impl SwitchProc {
    pub fn spawn(bed: &VethNetns, config: &Path) -> SwitchProc {
        let mut child = bed
            .command(env!("CARGO_BIN_EXE_barrier-switch"))
            .args(["run", "--config"])
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = lines(child.stdout.take().unwrap());
        let stderr = lines(child.stderr.take().unwrap());
        let text = std::fs::read_to_string(config).unwrap();
        let runtime_dir = text
            .split_once("\"--file-prefix\", \"")
            .and_then(|(_, rest)| rest.split('"').next())
            .map(|p| Path::new("/var/run/dpdk").join(p));
        SwitchProc {
            child: Some(child),
            stdout,
            stderr,
            log: Vec::new(),
            runtime_dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Waits for a stderr line starting with `prefix`; returns it.
    pub fn wait_stderr(&mut self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let line = self
                .stderr
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| {
                    panic!(
                        "no line {prefix:?} from the switch; log:\n{}",
                        self.log.join("\n")
                    )
                });
            self.log.push(line.clone());
            if line.starts_with(prefix) {
                return line;
            }
        }
    }

    /// Waits for the switch's ready line (ports bound, started and drained; loops polling).
    pub fn wait_ready(&mut self) -> String {
        self.wait_stderr("barrier-switch: ready", Duration::from_secs(60))
    }

    /// SIGUSR1, then the counters it printed (from `== switch` to the first empty line).
    pub fn counters(&mut self) -> String {
        signal(self.pid(), "-USR1");
        let until = Instant::now() + Duration::from_secs(30);
        let mut out = String::new();
        let mut started = false;
        loop {
            let l = self
                .stdout
                .recv_timeout(until.saturating_duration_since(Instant::now()))
                .expect("no counters after SIGUSR1");
            started |= l.starts_with("== switch");
            if started {
                if l.is_empty() {
                    return out;
                }
                out += &l;
                out.push('\n');
            }
        }
    }

    /// SIGTERM; the exit status and everything else it printed on stdout.
    pub fn stop(mut self) -> (ExitStatus, String) {
        signal(self.pid(), "-TERM");
        let status = self.child.take().unwrap().wait().unwrap();
        let out: Vec<String> = self.stdout.try_iter().collect();
        self.log.extend(self.stderr.try_iter());
        (status, out.join("\n"))
    }
}

impl Drop for SwitchProc {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(d) = &self.runtime_dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

pub fn signal(pid: u32, sig: &str) {
    assert!(Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success());
}

/// The `counter=value` pairs of the line `  port NAME rx: ...` in a counters dump (a counter
/// that is not listed is zero).
pub fn port_rx(counters: &str, port: &str) -> Vec<(String, u64)> {
    let head = format!("port {port} rx:");
    let line = counters
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no {head:?} in\n{counters}"));
    line[head.len()..]
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect()
}

/// One counter of `port_rx`.
pub fn port_rx_counter(counters: &str, port: &str, name: &str) -> u64 {
    port_rx(counters, port)
        .into_iter()
        .find(|(k, _)| k == name)
        .map_or(0, |(_, v)| v)
}
