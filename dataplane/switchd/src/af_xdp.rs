//! AF_XDP ports (`[[ports]] af_xdp = "IFACE"`): a Linux interface shared with the kernel.
//! DPDK's `net_af_xdp` PMD takes the barrier frames through an AF_XDP socket per queue, the
//! steering program (`barrier_xdp::steer`) hands every other frame to the kernel, and the
//! switch holds the program's attachment so it goes with the switch. What `check` and `run`
//! refuse, and why, is here.

use std::path::{Path, PathBuf};

use barrier_switch::counters::RxCounters;
use barrier_switch::spec::{Device, SwitchSpec};
use barrier_xdp::steer::{self, Steering};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What `check` says about an AF_XDP port on `iface` with `rx_queues` queues, or why it cannot
/// work here (no such interface in this network namespace, too few queues, an XDP program
/// already attached). The switch is started in the namespace `check` runs in.
pub fn check_port(iface: &str, rx_queues: u16) -> Result<String, String> {
    let ifindex = barrier_bpf::ifindex(iface)
        .map_err(|_| format!("no interface {iface:?} in this network namespace (ip link show)"))?;
    let have = rx_queue_count(iface);
    if let Some(have) = have {
        if have < usize::from(rx_queues) {
            return Err(format!(
                "interface {iface} has {have} RX queue(s), the port asks for {rx_queues} \
                 (ethtool -L {iface} combined {rx_queues}, or lower rx_queues)"
            ));
        }
    }
    match barrier_bpf::attached_xdp(ifindex) {
        Ok(None) => {}
        Ok(Some(p)) => {
            return Err(format!(
                "interface {iface} already runs XDP program {:?} (id {}){}: one XDP program \
                 per interface; stop what attached it (bpftool net shows it)",
                p.name(),
                p.id(),
                if p.name() == steer::PROGRAM {
                    ", the steering program of a barrier-switch that is running"
                } else {
                    ""
                }
            ))
        }
        Err(e) => return Err(format!("interface {iface}: cannot query XDP: {e}")),
    }
    Ok(format!(
        "af_xdp on {iface} (ifindex {ifindex}, queues 0..{rx_queues} of {}), no XDP program \
         attached yet",
        have.map_or("?".to_string(), |h| h.to_string())
    ))
}

/// The interface's RX queues as sysfs lists them, if it can be read.
fn rx_queue_count(iface: &str) -> Option<usize> {
    let dir = Path::new("/sys/class/net").join(iface).join("queues");
    let n = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count();
    Some(n)
}

/// The steering program's file for the PMD's `xdp_prog=`: written when the first AF_XDP port
/// is opened, removed when this is dropped (the PMD has loaded it by then).
pub struct ObjectFile {
    dir: PathBuf,
    path: PathBuf,
}

impl ObjectFile {
    pub fn write() -> std::io::Result<ObjectFile> {
        let dir = std::env::temp_dir().join(format!("barrier-switch-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = steer::write_object(&dir)?;
        Ok(ObjectFile { dir, path })
    }

    /// The PMD's device argument for port `name` on `iface` with `queues` queues from 0.
    pub fn vdev(&self, name: &str, iface: &str, queues: u16) -> String {
        format!(
            "{name},iface={iface},start_queue=0,queue_count={queues},xdp_prog={}",
            self.path.display()
        )
    }
}

impl Drop for ObjectFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Fill-ring and TX-ring entries of one AF_XDP queue (`XSK_RING_*__DEFAULT_NUM_DESCS`): the
/// PMD puts 2,048 mbufs in a queue's fill ring when it sets the queue up, and as many can wait
/// in its TX ring for completion.
const RING: u32 = 2048;

/// The pool AF_XDP ports receive into, when the switch has any: DPDK 22.11's `net_af_xdp` maps
/// its RX pool as the socket's UMEM assuming the mbufs lie back to back from the first
/// (`populated_size` times the object size), which a plain pool on 4 KiB pages breaks: about
/// 40% of its mbufs lie past that range, and the kernel cannot take them as buffers. With the
/// switch's plain pool the ports wedged under sustained TCP (the fill ring dry, every barrier
/// frame `rx_dropped`, docs/operations.md); with this one they have not. So the pool is packed
/// (`Mempool::new_pktmbuf_packed`), and large enough for every queue's fill and TX rings
/// besides the frames in flight: `mempool.mbufs`, and at least 4,096 per AF_XDP queue plus
/// 2,047. Refused, with the reason, when EAL's memory cannot give it in one piece.
pub fn pool(eal: &dpdk::Eal, cfg: &SwitchSpec) -> Result<Option<dpdk::Mempool>, String> {
    let queues: u32 = cfg
        .ports
        .iter()
        .filter(|p| matches!(p.device, Device::AfXdp { .. }))
        .map(|p| u32::from(p.rx_queues))
        .sum();
    if queues == 0 {
        return Ok(None);
    }
    let mbufs = cfg.mempool.mbufs.max(queues * 2 * RING + RING - 1);
    let pool = dpdk::Mempool::new_pktmbuf_packed(
        eal,
        "switch-af-xdp",
        mbufs,
        cfg.mempool.cache,
        dpdk::MBUF_DEFAULT_BUF_SIZE,
    )
    .map_err(|e| {
        format!(
            "the AF_XDP ports' pool of {mbufs} mbufs ({queues} queues), in one piece: {e} \
             (give EAL more memory, -m, or hugepages)"
        )
    })?;
    tracing::info!("AF_XDP ports: {mbufs} mbufs of their own, packed for the UMEM");
    Ok(Some(pool))
}

/// Takes the steering program the PMD attached to `iface` over as this process's own
/// (`Steering::take_over`).
pub fn take_over(iface: &str) -> Result<Steering, String> {
    let ifindex = barrier_bpf::ifindex(iface).map_err(|e| format!("{iface}: {e}"))?;
    Steering::take_over(ifindex).map_err(|e| format!("{iface}: {e}"))
}

/// Copies each AF_XDP port's steering counters (frames and bytes the program handed to the
/// kernel) into the port's first RX counter set as `exception_to_kernel` and
/// `exception_to_kernel_bytes`, the names the TAP exception path counts under, so telemetry,
/// Prometheus and the report show both kinds of shared port alike. This is those cells' only
/// writer: an AF_XDP port has no TAP exception path (the file refuses both). Called by the
/// management loop (every 50 ms) and once before the final report; a read that fails leaves
/// the last values.
pub fn sample_steering(steering: &[(usize, String, Steering)], rx: &[(usize, Arc<RxCounters>)]) {
    for (port, _, s) in steering {
        let Ok(c) = s.counts() else { continue };
        if let Some((_, cells)) = rx.iter().find(|(p, _)| p == port) {
            cells
                .exception_to_kernel
                .store(c.pass_frames, Ordering::Relaxed);
            cells
                .exception_to_kernel_bytes
                .store(c.pass_bytes, Ordering::Relaxed);
        }
    }
}
