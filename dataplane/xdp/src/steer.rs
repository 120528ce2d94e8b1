//! The steering program of barrier-switch's AF_XDP ports (`bpf/steer.bpf.c`, issue 25): barrier
//! frames to the switch's AF_XDP socket, every other frame to the kernel.
//!
//! DPDK's `net_af_xdp` PMD loads the program from a file (its `xdp_prog=` devarg, which
//! [`write_object`] provides) and attaches it through netlink, an attachment that outlives the
//! process: after a SIGKILL the program would stay on the interface and the next switch on it
//! would be refused. So once the port is up, the switch takes the attachment over
//! ([`Steering::take_over`]) as a BPF link of its own: the program then goes with the process
//! however it ends, and the interface is left as it was found.

use std::path::{Path, PathBuf};

use barrier_bpf::{attached_xdp, BpfError, OwnedMap, XdpAttachment, XdpMode};

/// The compiled steering program (`bpf/steer.bpf.o`).
pub const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/steer.bpf.o"));

/// The program's name in [`OBJECT`] (and as the kernel lists it).
pub const PROGRAM: &str = "nb_steer";

/// The map the PMD puts its sockets in, by queue index (the name the PMD looks for).
pub const XSKS_MAP: &str = "xsks_map";

/// Queues the steering program can serve (`xsks_map`'s size).
pub const MAX_QUEUES: u16 = 64;

/// Writes [`OBJECT`] to `dir/steer.bpf.o` for the PMD's `xdp_prog=` and returns the path.
pub fn write_object(dir: &Path) -> std::io::Result<PathBuf> {
    let path = dir.join("steer.bpf.o");
    std::fs::write(&path, OBJECT)?;
    Ok(path)
}

/// What the steering program counted on one interface, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SteerCounts {
    /// Frames handed to the kernel: not barrier frames.
    pub pass_frames: u64,
    /// Their bytes.
    pub pass_bytes: u64,
    /// Barrier frames redirected to the switch's socket.
    pub steered_frames: u64,
    /// Their bytes.
    pub steered_bytes: u64,
    /// Barrier frames on a queue without a switch socket, handed to the kernel.
    pub no_socket: u64,
}

/// Why the steering program could not be taken over.
#[derive(Debug, thiserror::Error)]
pub enum SteerError {
    #[error(
        "no XDP program on the interface after the port started (the PMD did not attach {PROGRAM})"
    )]
    NotAttached,
    #[error("the interface runs XDP program {0:?}, not {PROGRAM}")]
    Foreign(String),
    #[error(transparent)]
    Bpf(#[from] BpfError),
}

/// The steering program on one interface, held by this process.
#[derive(Debug)]
pub struct Steering {
    stats: OwnedMap,
    mode: XdpMode,
    _link: XdpAttachment,
}

impl Steering {
    /// Takes over the steering program the PMD attached to `ifindex` (in this thread's
    /// network namespace): see the module's documentation.
    pub fn take_over(ifindex: u32) -> Result<Steering, SteerError> {
        let prog = attached_xdp(ifindex)?.ok_or(SteerError::NotAttached)?;
        if prog.name() != PROGRAM {
            return Err(SteerError::Foreign(prog.name().to_owned()));
        }
        let stats = prog.map("nb_steer_stats")?;
        let mode = prog.mode();
        let link = prog.relink()?;
        Ok(Steering {
            stats,
            mode,
            _link: link,
        })
    }

    /// Where the program runs (the driver's choice when the PMD attached it).
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// The program's counters, summed over CPUs.
    pub fn counts(&self) -> Result<SteerCounts, BpfError> {
        let m = self.stats.as_map();
        let mut sum = [0u64; 5];
        for (i, s) in sum.iter_mut().enumerate() {
            if let Some(per_cpu) = m.lookup_percpu(&(i as u32).to_ne_bytes())? {
                *s = per_cpu
                    .iter()
                    .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("8-byte counter")))
                    .sum();
            }
        }
        Ok(SteerCounts {
            pass_frames: sum[0],
            pass_bytes: sum[1],
            steered_frames: sum[2],
            steered_bytes: sum[3],
            no_socket: sum[4],
        })
    }
}
