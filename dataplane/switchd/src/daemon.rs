//! `run`: one switch from its configuration on DPDK: EAL, mempool, ports brought up and drained,
//! pollers placed on the configured lcores, the management thread (counters on SIGUSR1, the
//! ready line, the control socket of `mgmt` when the file names one), and shutdown in the l2fwd
//! order (`barrier_runtime::launch`).

use barrier_mgmt::{metrics, notify, straggler, telemetry};
use barrier_mgmt::{BindError, Control, ControlServer};
use barrier_protocol::table::GroupTable;
use barrier_runtime::affinity::ControlCores;
use barrier_runtime::clock::Clock;
use barrier_runtime::dpdk_io::{DpdkRx, DpdkTx};
use barrier_runtime::launch::{
    all_loops_polled, close_ports, loops_report, open_port, run_placement, start_ports, CloseError,
    LaunchError, Placement, PortDevice, PortSetup, Signals,
};
use barrier_runtime::poll::Poller;
use barrier_switch::config;
use barrier_switch::engine::{
    build_table_for, BuildTableError, PortIo, SwitchBuilder, SwitchStats,
};
use barrier_switch::exception::ExceptionIo;
use barrier_switch::spec::{Device, Exception, SwitchSpec};
use dpdk::{DpdkError, Eal, Mempool, QueueId};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The line a switch prints on stderr once it is ready: every port bound, started and drained,
/// and every RX loop polling. Scripts and tests wait for it (`scripts/topo.sh`).
pub const READY_LINE: &str = "barrier-switch: ready";

// ---------------------------------------------------------------------------------------------
// run: one switch from a configuration file.

/// What a `run` ended with, for the caller to print or check.
pub struct RunOutcome {
    pub report: String,
    pub stats: SwitchStats,
}

/// EAL arguments for a configuration: the file's, then a `-a` allow entry per PCI port, then
/// the command line's overrides.
pub fn eal_args(cfg: &SwitchSpec, overrides: &[String]) -> Vec<String> {
    let mut args = vec!["barrier-switch".to_string()];
    args.extend(cfg.eal_args.iter().cloned());
    for p in &cfg.ports {
        if let Device::Pci(addr) = &p.device {
            args.push("-a".into());
            args.push(addr.clone());
        }
    }
    args.extend(overrides.iter().cloned());
    args
}

/// Why `run_config` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("EAL: {0}")]
    Eal(#[source] DpdkError),
    /// The group table's 128-bit CAS is not lock-free on this CPU (no `cmpxchg16b`): RX lcores
    /// would serialise on global locks, and one preempted would stall the others.
    #[error("the group table is not lock-free on this CPU (no 128-bit compare-and-swap): refusing to run a switch whose RX lcores would share global locks")]
    TableNotLockFree,
    #[error("mempool: {0}")]
    Mempool(#[source] DpdkError),
    #[error("lcore {lcore} is in the configuration but not enabled in EAL (enabled: {enabled:?})")]
    LcoreNotEnabled { lcore: u32, enabled: Vec<u32> },
    #[error("port {port}: {source}")]
    Port {
        port: String,
        #[source]
        source: LaunchError,
    },
    #[error("port {port}: {reason}")]
    AfXdp { port: String, reason: String },
    #[error("port {port}: {reason}")]
    Tap { port: String, reason: String },
    #[error("port {port}: {source}")]
    Queue {
        port: String,
        #[source]
        source: DpdkError,
    },
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error(transparent)]
    Table(#[from] BuildTableError),
    #[error("control socket: {0}")]
    Control(#[from] BindError),
    #[error("stragglers.groups: {0}")]
    Watch(#[source] straggler::WatchError),
    #[error(transparent)]
    Telemetry(#[from] telemetry::RegisterError),
    #[error(transparent)]
    Metrics(#[from] metrics::ServeError),
    /// The run ended, but shutdown found a problem; the report of the run comes with it.
    #[error("{report}{source}")]
    Close {
        report: String,
        #[source]
        source: CloseError,
    },
}

/// Run the switch of `cfg` (called `name` in reports) until `signals.quit`. Counters are
/// printed on SIGUSR1.
pub fn run_config(
    name: &str,
    cfg: &SwitchSpec,
    eal_overrides: &[String],
    signals: Signals,
) -> Result<RunOutcome, RunError> {
    if !GroupTable::is_lock_free() {
        return Err(RunError::TableNotLockFree);
    }
    if !GroupTable::is_always_lock_free() {
        tracing::warn!(
            "built without cmpxchg16b: every group-table operation picks its compare-and-swap at run time (see .cargo/config.toml)"
        );
    }
    // What can be refused from the configuration and the interfaces alone is refused before
    // DPDK starts: nothing to undo (an AF_XDP port opened before a later one was refused kept
    // mbufs of its pool, and the pool and EAL's runtime folder outlived the process).
    for pc in &cfg.ports {
        if let Some(x) = &pc.exception {
            crate::tap::check_tap(x.iface()).map_err(|reason| RunError::Tap {
                port: pc.name.clone(),
                reason,
            })?;
        }
        if let Device::AfXdp { iface, .. } = &pc.device {
            crate::af_xdp::check_port(iface, pc.rx_queues).map_err(|reason| RunError::AfXdp {
                port: pc.name.clone(),
                reason,
            })?;
        }
    }
    let (eal, _app) = Eal::init(eal_args(cfg, eal_overrides)).map_err(RunError::Eal)?;
    let clock = Clock::from_counter(dpdk::tsc, dpdk::tsc_hz());
    let pool = Mempool::new_pktmbuf(
        &eal,
        "switch",
        cfg.mempool.mbufs,
        cfg.mempool.cache,
        dpdk::MBUF_DEFAULT_BUF_SIZE,
    )
    .map_err(RunError::Mempool)?;
    // AF_XDP ports receive into a pool of their own, packed (crate::af_xdp::pool).
    let xdp_pool = crate::af_xdp::pool(&eal, cfg).map_err(|reason| RunError::AfXdp {
        port: cfg
            .ports
            .iter()
            .find(|p| matches!(p.device, Device::AfXdp { .. }))
            .map_or_else(String::new, |p| p.name.clone()),
        reason,
    })?;
    let lcores: Vec<u32> = std::iter::once(eal.main_lcore().0)
        .chain(eal.worker_lcores().into_iter().map(|l| l.0))
        .collect();
    let mut needed: Vec<u32> = cfg.lcores.rx.iter().map(|r| r.lcore).collect();
    needed.push(cfg.lcores.scheduler);
    if let Some(&lcore) = needed.iter().find(|l| !lcores.contains(l)) {
        return Err(RunError::LcoreNotEnabled {
            lcore,
            enabled: lcores,
        });
    }

    // Every port is created, started and drained before any queue is polled: a frame that
    // arrived before then may name the wrong ingress port (`start_ports`).
    let mut ports = Vec::new();
    let af_xdp_err = |port: &str, reason: String| RunError::AfXdp {
        port: port.to_owned(),
        reason,
    };
    let mut steer_file = None;
    for pc in &cfg.ports {
        let af_xdp_spec;
        let device = match &pc.device {
            Device::Vdev(spec) => PortDevice::Vdev(spec),
            Device::Pci(addr) => PortDevice::Existing(addr),
            Device::AfXdp { iface, name } => {
                if steer_file.is_none() {
                    steer_file = Some(crate::af_xdp::ObjectFile::write().map_err(|e| {
                        af_xdp_err(&pc.name, format!("writing the steering program: {e}"))
                    })?);
                }
                let file = steer_file.as_ref().expect("written above");
                af_xdp_spec = file.vdev(name, iface, pc.rx_queues);
                PortDevice::Vdev(&af_xdp_spec)
            }
        };
        // A port with an exception path has one TX queue more, the last: the kernel's frames
        // go out on it (`KernelPoller`), beside the scheduler's queue 0.
        let setup = PortSetup {
            rx_queues: pc.rx_queues,
            tx_queues: pc.tx_queues + u16::from(pc.exception.is_some()),
            rx_descriptors: pc.rx_descriptors,
            tx_descriptors: pc.tx_descriptors,
        };
        let rx_pool = match (&pc.device, &xdp_pool) {
            (Device::AfXdp { .. }, Some(p)) => p,
            _ => &pool,
        };
        let opened =
            open_port(&eal, device, setup, rx_pool).map_err(|source| match &pc.exception {
                Some(x) => RunError::Tap {
                    port: pc.name.clone(),
                    reason: format!(
                        "{source} (with exception path {} the port has {} TX queues, one more \
                         than tx_queues for the kernel's frames: the device must offer them; \
                         net_af_packet: qpairs={}, and as many rx_queues, as its queues share \
                         the interface's frames)",
                        x.iface(),
                        setup.tx_queues,
                        setup.tx_queues.max(setup.rx_queues)
                    ),
                },
                None => RunError::Port {
                    port: pc.name.clone(),
                    source,
                },
            });
        match opened {
            Ok(port) => ports.push(port),
            Err(e) => {
                // The ports opened so far close as at shutdown (an AF_XDP port's PMD keeps
                // mbufs), so that the pools and EAL end and its runtime folder goes.
                let pools: Vec<&Mempool> = std::iter::once(&pool).chain(&xdp_pool).collect();
                if let Err(c) = close_ports(ports, &pools) {
                    tracing::warn!("closing the ports opened before the refusal: {c}");
                }
                return Err(e);
            }
        }
    }
    // The exception paths' TAP ports, after the switch's own (whose indices are the group
    // registers' port numbers): one queue pair per RX queue of the port, the TAP interface
    // with the port's MAC.
    let mut taps = Vec::new();
    for (pc, port) in cfg.ports.iter().zip(&ports) {
        let Some(Exception::Tap { iface, name }) = &pc.exception else {
            continue;
        };
        let tap_err = |reason: String| RunError::Tap {
            port: pc.name.clone(),
            reason,
        };
        let mac = port
            .mac_address()
            .map_err(|e| tap_err(format!("reading the port's MAC: {e}")))?;
        let spec = crate::tap::vdev(name, iface, mac);
        let setup = PortSetup {
            rx_queues: pc.rx_queues,
            tx_queues: pc.rx_queues,
            rx_descriptors: pc.rx_descriptors,
            tx_descriptors: pc.tx_descriptors,
        };
        let tap = open_port(&eal, PortDevice::Vdev(&spec), setup, &pool)
            .map_err(|e| tap_err(format!("exception path {iface}: {e}")))?;
        tracing::info!(
            "port {}: exception path on TAP interface {iface} ({spec})",
            pc.name
        );
        taps.push(tap);
    }
    let switch_ports = ports.len();
    ports.extend(taps);
    let discarded = start_ports(&mut ports)?;
    // The TAP interfaces up, as the NIC's interface would be: the kernel takes frames on them.
    for (pc, tap) in cfg
        .ports
        .iter()
        .filter(|p| p.exception.is_some())
        .zip(&mut ports[switch_ports..])
    {
        tap.set_link_up().map_err(|e| RunError::Tap {
            port: pc.name.clone(),
            reason: format!("setting the exception interface up: {e}"),
        })?;
    }
    // The PMD attached the steering program through netlink, which would outlive a killed
    // switch: hold it as this process's link instead (crate::af_xdp), until just before the
    // ports close.
    let mut steering = Vec::new();
    for (i, pc) in cfg.ports.iter().enumerate() {
        if let Device::AfXdp { iface, .. } = &pc.device {
            let s = crate::af_xdp::take_over(iface).map_err(|e| af_xdp_err(&pc.name, e))?;
            tracing::info!(
                "port {}: steering program on {iface}, {:?} mode, held by this process",
                pc.name,
                s.mode()
            );
            steering.push((i, pc.name.clone(), s));
        }
    }
    let steering = Arc::new(steering);
    drop(steer_file);
    let mut io = Vec::new();
    let mut exceptions = Vec::new();
    let (own, taps) = ports.split_at_mut(switch_ports);
    let mut taps = taps.iter();
    for (pc, port) in cfg.ports.iter().zip(own.iter_mut()) {
        // Barrier frames go to the peer's MAC or broadcast: take everything and let the
        // parser decide. Virtual devices may not support it; that is fine for them.
        let _ = port.set_promiscuous(true);
        let queue_err = |source| RunError::Queue {
            port: pc.name.clone(),
            source,
        };
        let mut rx = Vec::new();
        for q in 0..pc.rx_queues {
            rx.push(DpdkRx::new(port.rx_queue(QueueId(q)).map_err(queue_err)?));
        }
        let tx = DpdkTx::new(port.tx_queue(QueueId(0)).map_err(queue_err)?, pool.clone());
        exceptions.push(match &pc.exception {
            Some(_) => {
                let tap = taps.next().expect("a TAP port per exception path");
                let tap_err = |e: DpdkError| RunError::Tap {
                    port: pc.name.clone(),
                    reason: format!("exception path queue: {e}"),
                };
                let mut to_kernel = Vec::new();
                let mut from_kernel = Vec::new();
                for q in 0..pc.rx_queues {
                    let t = tap.tx_queue(QueueId(q)).map_err(tap_err)?;
                    to_kernel.push(DpdkTx::new(t, pool.clone()));
                    from_kernel.push(DpdkRx::new(tap.rx_queue(QueueId(q)).map_err(tap_err)?));
                }
                let out = port.tx_queue(QueueId(pc.tx_queues)).map_err(queue_err)?;
                Some(ExceptionIo {
                    to_kernel,
                    from_kernel,
                    out: DpdkTx::new(out, pool.clone()),
                })
            }
            None => None,
        });
        io.push(PortIo {
            name: pc.name.clone(),
            rx,
            tx,
            peer_mac: pc.peer_mac,
            mac: Some(pc.mac),
        });
    }
    let table = Arc::new(build_table_for(&cfg.groups, cfg.group_capacity())?);
    let watch = match cfg.straggler_limit {
        0 => None,
        limit => Some(Arc::new(
            straggler::Watch::with_limit(&cfg.stragglers, table.capacity(), limit, clock)
                .map_err(RunError::Watch)?,
        )),
    };
    let policers: Vec<_> = cfg.ports.iter().map(|p| p.policer).collect();
    let sw = SwitchBuilder::new(name, cfg.mac)
        .watch(watch)
        .policers(&policers)
        .build_with(io, exceptions, table, clock.now_ns());
    let stats = sw.stats.clone();
    // Observability (barrier_mgmt::telemetry): /barrier/... telemetry commands and rte_pdump.
    let loops_cell = telemetry::LoopsCell::default();
    telemetry::register(
        &eal,
        Arc::new(stats.clone()),
        ports[..switch_ports].iter().map(|p| p.id()).collect(),
        loops_cell.clone(),
    )?;
    match telemetry::offer_capture(&eal, &eal_args(cfg, eal_overrides)) {
        Ok(line) => tracing::info!("{line}"),
        Err(e) => tracing::warn!("capture: rte_pdump_init failed, dpdk-dumpcap cannot attach: {e}"),
    }
    for (port, n) in discarded.iter().enumerate() {
        if let Some((_, c)) = stats.rx.iter().find(|(p, _)| *p == port) {
            c.discarded_at_start.store(*n, Ordering::Relaxed);
        }
    }

    // Place the pollers: each RX queue on the lcore the file names, the scheduler on its own.
    let mut placement: Placement = BTreeMap::new();
    let mut rx_by_queue: BTreeMap<(usize, usize), Box<dyn Poller>> = sw
        .rx
        .into_iter()
        .map(|(p, q, poller)| ((p, q), poller))
        .collect();
    for r in &cfg.lcores.rx {
        for &(p, q) in &r.polls {
            // The spec places each queue once (config::validate_lcores).
            if let Some(poller) = rx_by_queue.remove(&(p.get() as usize, q as usize)) {
                placement.entry(r.lcore).or_default().push(poller);
            }
        }
    }
    // A port's kernel poller beside its first RX queue: it writes cells of that queue's
    // counter set.
    for (p, poller) in sw.kernel {
        let lcore = cfg
            .lcores
            .rx
            .iter()
            .find(|r| {
                r.polls
                    .iter()
                    .any(|&(port, q)| port.get() as usize == p && q == 0)
            })
            .map_or(cfg.lcores.scheduler, |r| r.lcore);
        placement.entry(lcore).or_default().push(poller);
    }
    placement
        .entry(cfg.lcores.scheduler)
        .or_default()
        .push(sw.sched);

    // The control socket is bound before the loops start: a switch that cannot serve the
    // socket its file names does not start.
    let mut control = match &cfg.control {
        Some(c) => Some(ControlServer::bind(
            &c.socket,
            Control::new(
                stats.clone(),
                cfg.port_descs(),
                c.file.clone().map(config::write_back),
            ),
        )?),
        None => None,
    };
    // The threads that are not lcores (this management thread, the metrics endpoint) go on the
    // control cores: `[management] cpus`, else the CPUs no polling lcore uses.
    let polling: Vec<u32> = placement.keys().copied().collect();
    let control_cores = ControlCores::resolve(&eal, &polling, cfg.management_cpus.clone());
    let metrics = match &cfg.metrics {
        Some(m) => {
            let server = metrics::MetricsServer::start(
                m.listen,
                Arc::new(stats.clone()),
                loops_cell.clone(),
                m.groups.clone(),
                signals.quit.clone(),
                control_cores.clone(),
            )?;
            tracing::info!(
                "metrics: Prometheus endpoint on http://{}/metrics",
                server.addr
            );
            Some(server)
        }
        None => None,
    };
    let loop_lcores: Vec<u32> = placement.keys().copied().collect();
    let quit = signals.quit.clone();
    let dump = signals.dump.clone();
    let mgmt_stats = stats.clone();
    let mgmt_steering = steering.clone();
    let started = Instant::now();
    tracing::info!(
        "barrier-switch: {} ports, {} groups, lcores {:?}, idle: {}; SIGUSR1 prints counters, SIGINT/SIGTERM stops",
        cfg.ports.len(),
        cfg.group_count(),
        placement.keys().collect::<Vec<_>>(),
        cfg.lcores.idle
    );
    let loops = run_placement(
        &eal,
        placement,
        quit.clone(),
        clock,
        cfg.lcores.idle,
        control_cores,
        move |loops| {
            // run_placement hands the loops over in placement (lcore) order.
            let _ = loops_cell.set(loop_lcores.into_iter().zip(loops.iter().cloned()).collect());
            let mut ready = false;
            while !quit.load(Ordering::Relaxed) {
                if !ready && all_loops_polled(&loops) {
                    ready = true;
                    let discarded: Vec<String> = mgmt_stats
                        .port_names
                        .iter()
                        .zip(&discarded)
                        .map(|(n, d)| format!("{n}={d}"))
                        .collect();
                    eprintln!(
                        "{READY_LINE} (frames discarded at start: {})",
                        discarded.join(" ")
                    );
                    notify::notify_logged("READY=1");
                }
                crate::af_xdp::sample_steering(&mgmt_steering, &mgmt_stats.rx);
                if dump.swap(false, Ordering::Relaxed) {
                    println!("{}", mgmt_stats.report());
                }
                // The control socket's wait is the loop's sleep.
                match &mut control {
                    Some(server) => server.serve(Duration::from_millis(50)),
                    None => std::thread::sleep(Duration::from_millis(50)),
                }
            }
            notify::notify_logged("STOPPING=1");
            drop(control);
            // A SIGUSR1 that came with the stop still gets its answer.
            if dump.swap(false, Ordering::Relaxed) {
                println!("{}", mgmt_stats.report());
            }
        },
    )?;
    drop(metrics);
    crate::af_xdp::sample_steering(&steering, &stats.rx);
    let mut report = stats.report();
    report += &loops_report(&loops);
    let _ = writeln!(report, "ran {:.3} s", started.elapsed().as_secs_f64());
    for (_, name, s) in steering.iter() {
        match s.counts() {
            Ok(c) => {
                let _ = writeln!(
                    report,
                    "port {name} steering: {} barrier frames ({} bytes) to the switch, {} other \
                     frames ({} bytes) to the kernel, {} barrier frames on a queue without a socket",
                    c.steered_frames, c.steered_bytes, c.pass_frames, c.pass_bytes, c.no_socket
                );
            }
            Err(e) => {
                let _ = writeln!(report, "port {name} steering: counters not read: {e}");
            }
        }
    }
    // Detach the steering programs before the PMD closes the ports (it would try to detach
    // them through netlink and fail on a link).
    drop(steering);
    let pools: Vec<&Mempool> = std::iter::once(&pool).chain(&xdp_pool).collect();
    let closed = close_ports(ports, &pools);
    drop(xdp_pool);
    drop(pool);
    drop(eal);
    match closed {
        Ok(line) => report += &format!("{line}\n"),
        Err(source) => return Err(RunError::Close { report, source }),
    }
    Ok(RunOutcome { report, stats })
}
