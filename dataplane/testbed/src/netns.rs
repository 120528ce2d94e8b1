//! Throw-away network namespaces with a veth pair inside, for tests that need real Ethernet
//! between two sockets without touching the host's interfaces. Built on `ip` (iproute2); the
//! namespace (and with it both veth ends) is deleted when the guard drops, also on panic.

use std::io;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A network namespace `nbrs<pid>-<n>` holding veth pairs `veth-a<i>` <-> `veth-b<i>`, all up.
#[derive(Debug)]
pub struct VethNetns {
    /// The namespace name (`ip netns exec <netns> ...`, `RawSocket::open_in_netns`).
    pub netns: String,
    /// One end of the first pair.
    pub a: String,
    /// The other end of the first pair.
    pub b: String,
    /// Every pair, (a end, b end), the first one included.
    pub pairs: Vec<(String, String)>,
}

impl VethNetns {
    /// Creates the namespace with one pair. Needs root and iproute2.
    pub fn create() -> io::Result<VethNetns> {
        VethNetns::with_pairs(1)
    }

    /// Creates the namespace with `n` (≥ 1) pairs. Whatever part was created is removed again
    /// if a later step fails.
    pub fn with_pairs(n: usize) -> io::Result<VethNetns> {
        assert!(n >= 1, "at least one veth pair");
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let netns = format!("nbrs{}-{}", std::process::id(), k);
        ip(&["netns", "add", &netns])?;
        let pairs: Vec<(String, String)> = (0..n)
            .map(|i| (format!("veth-a{i}"), format!("veth-b{i}")))
            .collect();
        // From here on Drop deletes the namespace, with everything created inside it.
        let bed = VethNetns {
            netns,
            a: pairs[0].0.clone(),
            b: pairs[0].1.clone(),
            pairs,
        };
        for (a, b) in &bed.pairs {
            bed.exec(&["ip", "link", "add", a, "type", "veth", "peer", "name", b])?;
            for dev in [a, b] {
                // No IPv6 on the test links: keeps router solicitations and MLD off the wire.
                let _ = bed.exec(&[
                    "sysctl",
                    "-q",
                    "-w",
                    &format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
                ]);
                bed.exec(&["ip", "link", "set", dev, "up"])?;
            }
        }
        Ok(bed)
    }

    /// Runs `cmd` inside the namespace and waits for it; an error unless it exits 0.
    pub fn exec(&self, cmd: &[&str]) -> io::Result<()> {
        let mut args = vec!["netns", "exec", self.netns.as_str()];
        args.extend_from_slice(cmd);
        ip(&args)
    }

    /// A `Command` that runs `program` inside the namespace (through `ip netns exec`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.netns, program]);
        c
    }
}

impl Drop for VethNetns {
    fn drop(&mut self) {
        // Deleting the namespace destroys the veth pair inside it.
        if let Err(e) = ip(&["netns", "del", &self.netns]) {
            tracing::warn!("could not delete netns {}: {e}", self.netns);
        }
    }
}

/// True when the test can create namespaces: running as root with `ip` on the PATH. A test
/// that cannot skips itself, except where the run requires root (`NB_REQUIRE_ROOT=1`, set by
/// `scripts/test.sh`, which CI runs): then this panics with the reason, so a CI run without
/// root fails instead of passing with skipped tests.
pub fn can_create() -> bool {
    let root = rawsock::effective_uid_is_root();
    let ip = Command::new("ip")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if (!root || !ip) && std::env::var_os("NB_REQUIRE_ROOT").is_some_and(|v| v == "1") {
        panic!(
            "NB_REQUIRE_ROOT=1 but this test cannot create network namespaces ({})",
            if root {
                "no `ip` (iproute2) on the PATH"
            } else {
                "not root"
            }
        );
    }
    root && ip
}

fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}
