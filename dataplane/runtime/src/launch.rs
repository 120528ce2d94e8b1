//! Running pollers on DPDK lcores: ports brought up and closed in the order that loses nothing,
//! loops placed on lcores with a management thread beside them (on a control core:
//! `crate::affinity`), signals, and shutdown in the
//! l2fwd order (quit flag, wait for lcores, flush and drain, stop and close ports, EAL cleanup
//! by the caller). Every program that runs loops on DPDK uses this: the switch, the demo tree,
//! the generator.

#[cfg(feature = "dpdk")]
use crate::affinity::ControlCores;
#[cfg(feature = "dpdk")]
use crate::clock::Clock;
use crate::counters::LoopCounters;
use crate::poll::Poller;
#[cfg(feature = "dpdk")]
use crate::poll::{finish_all, run_loop, Idle, StopOnDrop};
#[cfg(feature = "dpdk")]
use dpdk::{DpdkError, Eal, LcoreId, Mempool, Port};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
#[cfg(feature = "dpdk")]
use std::time::Duration;

/// SIGINT/SIGTERM set `quit`; SIGUSR1 sets `dump`. Both polled by the management thread.
pub struct Signals {
    pub quit: Arc<AtomicBool>,
    pub dump: Arc<AtomicBool>,
}

impl Signals {
    pub fn install() -> std::io::Result<Signals> {
        let quit = Arc::new(AtomicBool::new(false));
        let dump = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGINT, quit.clone())?;
        signal_hook::flag::register(signal_hook::consts::SIGTERM, quit.clone())?;
        signal_hook::flag::register(signal_hook::consts::SIGUSR1, dump.clone())?;
        Ok(Signals { quit, dump })
    }
}

#[cfg(feature = "dpdk")]
/// Why ports could not be brought up or loops could not run.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// Opening, configuring or starting a port (the device as the caller named it).
    #[error("{device}: {source}")]
    Port {
        device: String,
        #[source]
        source: DpdkError,
    },
    /// Launching a loop on an lcore.
    #[error("lcore {lcore}: {source}")]
    Lcore {
        lcore: u32,
        #[source]
        source: DpdkError,
    },
    /// Starting the management thread.
    #[error("management thread: {0}")]
    Management(#[source] std::io::Error),
    /// Loops that ended in a panic (each named by its lcore); the others were stopped.
    #[error("{}", .0.join("; "))]
    LoopsPanicked(Vec<String>),
}

/// What a clean shutdown found wrong.
#[derive(Debug, thiserror::Error)]
pub enum CloseError {
    /// Stopping or closing ports (every failure, one per line).
    #[error("{}", .0.join("; "))]
    Ports(Vec<String>),
    /// Mbufs still out of the pool after every port closed: a leak.
    #[error("mempool {pool}: {in_use} mbufs not returned")]
    MbufsNotReturned { pool: String, in_use: u32 },
}

/// Loops to run: lcore -> pollers.
pub type Placement = BTreeMap<u32, Vec<Box<dyn Poller>>>;

#[cfg(feature = "dpdk")]
/// Run every loop on its lcore (the main lcore's on this thread) until `quit`, each doing what
/// `idle` says on empty passes, then shut the pollers down (`finish_all`). `manage` runs on a
/// plain thread that sleeps between looks, given every loop's counters (a loop has polled once
/// its pass count is non-zero: `all_loops_polled`); it returns when it is time to stop (it may
/// also just wait for `quit`).
///
/// The management thread runs on a control core (`crate::affinity`): one of `control` when
/// given (a caller that places other threads, such as a metrics endpoint, passes the same
/// `ControlCores` so they are spread over them), else one of the CPUs no lcore of `placement`
/// polls (`ControlCores::resolve` with nothing configured), never the main lcore's CPU that
/// it would otherwise inherit while a CPU is free.
pub fn run_placement<F>(
    eal: &Eal,
    placement: Placement,
    quit: Arc<AtomicBool>,
    clock: Clock,
    idle: Idle,
    control: Option<ControlCores>,
    manage: F,
) -> Result<Vec<(u32, Arc<LoopCounters>)>, LaunchError>
where
    F: FnOnce(Vec<Arc<LoopCounters>>) + Send + 'static,
{
    let main = eal.main_lcore().0;
    let control = control.or_else(|| {
        let polling: Vec<u32> = placement.keys().copied().collect();
        ControlCores::resolve(eal, &polling, None)
    });
    let mut joins = Vec::new();
    let mut main_loop = None;
    let mut loop_counters = Vec::new();
    for (lcore, pollers) in placement {
        let counters = Arc::new(LoopCounters::default());
        loop_counters.push((lcore, counters.clone()));
        if lcore == main {
            main_loop = Some((pollers, counters));
            continue;
        }
        let q = quit.clone();
        let launched = dpdk::launch_on(eal, LcoreId(lcore), move || {
            // A loop that ends for any reason, a panic included, stops the others too.
            let _stop_all = StopOnDrop(q.clone());
            run_loop(pollers, &q, clock, &counters, idle)
        });
        match launched {
            Ok(j) => joins.push(j),
            Err(source) => {
                stop_and_join(&quit, joins);
                return Err(LaunchError::Lcore { lcore, source });
            }
        }
    }
    let q = quit.clone();
    let watched: Vec<Arc<LoopCounters>> = loop_counters.iter().map(|(_, c)| c.clone()).collect();
    let manager = match std::thread::Builder::new()
        .name("management".into())
        .spawn(move || {
            ControlCores::pin_opt(control.as_ref(), "management");
            manage(watched);
            q.store(true, Ordering::Relaxed);
        }) {
        Ok(m) => m,
        Err(e) => {
            stop_and_join(&quit, joins);
            return Err(LaunchError::Management(e));
        }
    };
    let mut all: Vec<Box<dyn Poller>> = Vec::new();
    let mut errors = Vec::new();
    if let Some((pollers, counters)) = main_loop {
        let _stop_all = StopOnDrop(quit.clone());
        let q = quit.clone();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            run_loop(pollers, &q, clock, &counters, idle)
        })) {
            Ok(p) => all.extend(p),
            Err(_) => errors.push(format!("lcore{main} (main): a poller panicked")),
        }
    } else {
        while !quit.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    for j in joins {
        let lcore = j.lcore();
        match j.join() {
            Ok(p) => all.extend(p),
            Err(e) => errors.push(format!("{lcore:?}: {e}")),
        }
    }
    let _ = manager.join();
    finish_all(&mut all);
    drop(all); // queue handles go back to their ports here
    if errors.is_empty() {
        Ok(loop_counters)
    } else {
        Err(LaunchError::LoopsPanicked(errors))
    }
}

#[cfg(feature = "dpdk")]
/// On a failed launch: stop the loops already running, take their pollers back and shut them
/// down, so no lcore is left polling a port the caller is about to close.
fn stop_and_join(quit: &AtomicBool, joins: Vec<dpdk::LcoreJoin<Vec<Box<dyn Poller>>>>) {
    quit.store(true, Ordering::Relaxed);
    for j in joins {
        if let Ok(mut p) = j.join() {
            finish_all(&mut p);
        }
    }
}

/// Whether every loop has made at least one pass over its pollers.
pub fn all_loops_polled(loops: &[Arc<LoopCounters>]) -> bool {
    loops
        .iter()
        .all(|c| c.busy_polls.load(Ordering::Relaxed) + c.idle_polls.load(Ordering::Relaxed) > 0)
}

pub fn loops_report(loops: &[(u32, Arc<LoopCounters>)]) -> String {
    let mut s = String::new();
    for (l, c) in loops {
        let busy = c.busy_polls.load(Ordering::Relaxed);
        let idle = c.idle_polls.load(Ordering::Relaxed);
        let backoffs = c.backoffs.load(Ordering::Relaxed);
        let _ = writeln!(
            s,
            "lcore {l}: busy_polls={busy} idle_polls={idle} ({:.1}% busy) backoffs={backoffs}",
            100.0 * busy as f64 / (busy + idle).max(1) as f64
        );
    }
    s
}

/// Where a port comes from.
#[derive(Copy, Clone, Debug)]
pub enum PortDevice<'a> {
    /// A virtual device created now, written as for `--vdev`: `net_af_packet0,iface=veth0`.
    Vdev(&'a str),
    /// A device EAL already probed, by name: a PCI address given with `-a`, or a `--vdev`.
    Existing(&'a str),
}

/// Queues and descriptors of a port.
#[derive(Copy, Clone, Debug)]
pub struct PortSetup {
    pub rx_queues: u16,
    pub tx_queues: u16,
    pub rx_descriptors: u16,
    pub tx_descriptors: u16,
}

#[cfg(feature = "dpdk")]
/// Opens (or creates) a port and configures its queues with RX buffers from `pool`; it is
/// started later, with all the others, by `start_ports`. Errors name the device.
#[cold]
pub fn open_port(
    eal: &Eal,
    device: PortDevice<'_>,
    setup: PortSetup,
    pool: &Mempool,
) -> Result<Port, LaunchError> {
    let (port, name) = match device {
        PortDevice::Vdev(spec) => (Port::attach_vdev(eal, spec), spec),
        PortDevice::Existing(name) => (Port::open_by_name(eal, name), name),
    };
    let err = |source| LaunchError::Port {
        device: name.to_string(),
        source,
    };
    let mut port = port.map_err(err)?;
    port.configure(
        setup.rx_queues,
        setup.tx_queues,
        setup.rx_descriptors,
        setup.tx_descriptors,
        pool,
    )
    .map_err(err)?;
    Ok(port)
}

#[cfg(feature = "dpdk")]
/// `dpdk::Port::start_all`: every port started, then drained; the count discarded per port.
pub fn start_ports(ports: &mut [Port]) -> Result<Vec<u64>, LaunchError> {
    Port::start_all(ports).map_err(|(device, source)| LaunchError::Port { device, source })
}

/// Mbufs a port's PMD keeps from the pool after it is closed. DPDK 22.11's `net_af_xdp` builds
/// its UMEM from the mempool and does not return what sits in a queue's fill ring (at most
/// `XSK_RING_CONS__DEFAULT_NUM_DESCS`, 2048) or in its TX ring awaiting completion (2048) when
/// it destroys the UMEM (`xdp_umem_destroy`); every other PMD returns everything.
#[cfg(feature = "dpdk")]
fn pmd_held_after_close(p: &Port) -> u32 {
    const AF_XDP_RING: u32 = 2048;
    if p.name().starts_with("net_af_xdp") {
        u32::from(p.rx_queues()) * AF_XDP_RING + u32::from(p.tx_queues()) * AF_XDP_RING
    } else {
        0
    }
}

#[cfg(feature = "dpdk")]
/// Stop and close every port, then check that every mbuf came back to `pools` (the ports' RX
/// pools and the one frames were built from; also used by barrier-gen's wirings), less what a
/// PMD is known to keep (`pmd_held_after_close`). One line per pool.
pub fn close_ports(ports: Vec<Port>, pools: &[&Mempool]) -> Result<String, CloseError> {
    let mut errs = Vec::new();
    let held: u32 = ports.iter().map(pmd_held_after_close).sum();
    for mut p in ports {
        let name = p.name().to_string();
        if let Err(e) = p.stop() {
            errs.push(format!("stop {name}: {e}"));
        }
        if let Err(e) = p.close() {
            errs.push(format!("close {name}: {e}"));
        }
    }
    if !errs.is_empty() {
        return Err(CloseError::Ports(errs));
    }
    let out: u32 = pools.iter().map(|p| p.in_use_count()).sum();
    if out > held {
        let pool = pools
            .iter()
            .find(|p| p.in_use_count() > 0)
            .expect("some pool has mbufs out");
        return Err(CloseError::MbufsNotReturned {
            pool: pool.name().to_string(),
            in_use: pool.in_use_count(),
        });
    }
    // What is still out is what the closed ports' PMDs kept (net_af_xdp's rings): it never
    // comes back and nothing touches it, so the pools may be freed with it out.
    for pool in pools {
        pool.abandon_held(pool.in_use_count());
    }
    let lines: Vec<String> = pools
        .iter()
        .map(|pool| match pool.in_use_count() {
            0 => format!(
                "mempool {}: all {} mbufs back",
                pool.name(),
                pool.avail_count()
            ),
            in_use => format!(
                "mempool {}: {} mbufs back, {in_use} still out: within the {held} that \
                 net_af_xdp keeps after close (DPDK 22.11 does not empty its fill and TX rings)",
                pool.name(),
                pool.avail_count()
            ),
        })
        .collect();
    Ok(lines.join("\n"))
}
