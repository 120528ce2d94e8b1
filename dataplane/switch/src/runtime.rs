//! Running on DPDK: EAL, mempool, ports, pollers placed on lcores, the management thread, and
//! shutdown in the l2fwd order (quit flag, wait for lcores, flush and drain, stop and close
//! ports, EAL cleanup). Used by `run` (a configuration file) and `demo` (net_ring wires).

use crate::config::{Config, Device};
use crate::counters::LoopCounters;
use crate::demo::{build_demo, wait_until_done, DemoOpts, DemoResult, Tree, Wires};
use crate::dpdk_io::{DpdkRx, DpdkTx};
use crate::engine::{build_switch, build_table, PortIo, SwitchStats};
use crate::poll::{finish_all, run_loop, Clock, Idle, Poller, StopOnDrop};
use dpdk::{Eal, LcoreId, Mempool, Port, QueueId};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Data room of demo mbufs: barrier frames are 60 bytes.
const SMALL_DATA_ROOM: u16 = 128 + 128;

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

/// Loops to run: lcore -> pollers.
pub type Placement = BTreeMap<u32, Vec<Box<dyn Poller>>>;

/// Run every loop on its lcore (the main lcore's on this thread) until `quit`, each doing what
/// `idle` says on empty passes, then shut the pollers down (`finish_all`). `manage` runs on a
/// plain thread that sleeps between looks, given every loop's counters (a loop has polled once
/// its pass count is non-zero: `all_loops_polled`); it returns when it is time to stop (it may
/// also just wait for `quit`).
pub fn run_placement<F>(
    eal: &Eal,
    placement: Placement,
    quit: Arc<AtomicBool>,
    clock: Clock,
    idle: Idle,
    manage: F,
) -> Result<Vec<(u32, Arc<LoopCounters>)>, String>
where
    F: FnOnce(Vec<Arc<LoopCounters>>) + Send + 'static,
{
    let main = eal.main_lcore().0;
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
        let j = dpdk::launch_on(eal, LcoreId(lcore), move || {
            // A loop that ends for any reason, a panic included, stops the others too.
            let _stop_all = StopOnDrop(q.clone());
            run_loop(pollers, &q, clock, &counters, idle)
        })
        .map_err(|e| {
            quit.store(true, Ordering::Relaxed);
            format!("lcore {lcore}: {e}")
        })?;
        joins.push(j);
    }
    let q = quit.clone();
    let watched: Vec<Arc<LoopCounters>> = loop_counters.iter().map(|(_, c)| c.clone()).collect();
    let manager = std::thread::Builder::new()
        .name("management".into())
        .spawn(move || {
            manage(watched);
            q.store(true, Ordering::Relaxed);
        })
        .map_err(|e| e.to_string())?;
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
        Err(errors.join("; "))
    }
}

/// Whether every loop has made at least one pass over its pollers.
pub fn all_loops_polled(loops: &[Arc<LoopCounters>]) -> bool {
    loops
        .iter()
        .all(|c| c.busy_polls.load(Ordering::Relaxed) + c.idle_polls.load(Ordering::Relaxed) > 0)
}

/// The line a switch prints on stderr once it is ready: every port bound, started and drained,
/// and every RX loop polling. Scripts and tests wait for it (`scripts/topo.sh`).
pub const READY_LINE: &str = "barrier-switch: ready";

fn loops_report(loops: &[(u32, Arc<LoopCounters>)]) -> String {
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

fn stats_report(switches: &[SwitchStats]) -> String {
    switches.iter().map(|s| s.report()).collect()
}

/// `dpdk::Port::start_all` with the port's name in the error.
pub fn start_ports(ports: &mut [Port]) -> Result<Vec<u64>, String> {
    Port::start_all(ports).map_err(|(name, e)| format!("port {name}: {e}"))
}

/// Stop and close every port, then check that every mbuf came back to `pool` (also used by
/// barrier-gen's wirings).
pub fn close_ports(ports: Vec<Port>, pool: &Mempool) -> Result<String, String> {
    let mut errs = Vec::new();
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
        return Err(errs.join("; "));
    }
    let in_use = pool.in_use_count();
    if in_use == 0 {
        Ok(format!(
            "mempool {}: all {} mbufs back",
            pool.name(),
            pool.avail_count()
        ))
    } else {
        Err(format!(
            "mempool {}: {in_use} mbufs not returned",
            pool.name()
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// run: one switch from a configuration file.

/// What a `run` ended with, for the caller to print or check.
pub struct RunOutcome {
    pub report: String,
    pub stats: SwitchStats,
}

/// EAL arguments for a configuration: the file's, then a `-a` allow entry per PCI port, then
/// the command line's overrides.
pub fn eal_args(cfg: &Config, overrides: &[String]) -> Vec<String> {
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

/// Run the switch of `cfg` (called `name` in reports) until `signals.quit`. Counters are
/// printed on SIGUSR1.
pub fn run_config(
    name: &str,
    cfg: &Config,
    eal_overrides: &[String],
    signals: Signals,
) -> Result<RunOutcome, String> {
    let (eal, _app) = Eal::init(eal_args(cfg, eal_overrides)).map_err(|e| format!("EAL: {e}"))?;
    let clock = Clock::from_counter(dpdk::tsc, dpdk::tsc_hz());
    let pool = Mempool::new_pktmbuf(
        &eal,
        "switch",
        cfg.mempool.mbufs,
        cfg.mempool.cache,
        dpdk::MBUF_DEFAULT_BUF_SIZE,
    )
    .map_err(|e| format!("mempool: {e}"))?;
    let lcores: Vec<u32> = std::iter::once(eal.main_lcore().0)
        .chain(eal.worker_lcores().into_iter().map(|l| l.0))
        .collect();
    let mut needed: Vec<u32> = cfg.lcores.rx.iter().map(|r| r.lcore).collect();
    needed.push(cfg.lcores.scheduler);
    if let Some(l) = needed.iter().find(|l| !lcores.contains(l)) {
        return Err(format!(
            "lcore {l} is in the configuration but not enabled in EAL (enabled: {lcores:?})"
        ));
    }

    // Every port is created, started and drained before any queue is polled: a frame that
    // arrived before then may name the wrong ingress port (`start_ports`).
    let mut ports = Vec::new();
    for pc in &cfg.ports {
        let mut port = match &pc.device {
            Device::Vdev(spec) => Port::attach_vdev(&eal, spec),
            Device::Pci(addr) => Port::open_by_name(&eal, addr),
        }
        .map_err(|e| format!("port {}: {e}", pc.name))?;
        port.configure(
            pc.rx_queues,
            pc.tx_queues,
            pc.rx_descriptors,
            pc.tx_descriptors,
            &pool,
        )
        .map_err(|e| format!("port {}: {e}", pc.name))?;
        ports.push(port);
    }
    let discarded = start_ports(&mut ports)?;
    let mut io = Vec::new();
    for (pc, port) in cfg.ports.iter().zip(&mut ports) {
        // Barrier frames go to the peer's MAC or broadcast: take everything and let the
        // parser decide. Virtual devices may not support it; that is fine for them.
        let _ = port.set_promiscuous(true);
        let mut rx = Vec::new();
        for q in 0..pc.rx_queues {
            rx.push(DpdkRx::new(
                port.rx_queue(QueueId(q)).map_err(|e| e.to_string())?,
            ));
        }
        let tx = DpdkTx::new(
            port.tx_queue(QueueId(0)).map_err(|e| e.to_string())?,
            pool.clone(),
        );
        io.push(PortIo {
            name: pc.name.clone(),
            rx,
            tx,
            peer_mac: pc.peer_mac,
            mac: Some(pc.mac),
        });
    }
    let table = Arc::new(build_table(&cfg.groups)?);
    let sw = build_switch(name, cfg.mac, io, table, clock.now_ns());
    let stats = sw.stats.clone();
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
            let poller = rx_by_queue
                .remove(&(p as usize, q as usize))
                .ok_or("queue placed twice")?;
            placement.entry(r.lcore).or_default().push(poller);
        }
    }
    placement
        .entry(cfg.lcores.scheduler)
        .or_default()
        .push(sw.sched);

    let quit = signals.quit.clone();
    let dump = signals.dump.clone();
    let mgmt_stats = stats.clone();
    let started = Instant::now();
    eprintln!(
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
        move |loops| {
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
                }
                if dump.swap(false, Ordering::Relaxed) {
                    println!("{}", mgmt_stats.report());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            // A SIGUSR1 that came with the stop still gets its answer.
            if dump.swap(false, Ordering::Relaxed) {
                println!("{}", mgmt_stats.report());
            }
        },
    )?;
    let mut report = stats.report();
    report += &loops_report(&loops);
    let _ = writeln!(report, "ran {:.3} s", started.elapsed().as_secs_f64());
    let closed = close_ports(ports, &pool);
    drop(pool);
    drop(eal);
    match closed {
        Ok(line) => report += &format!("{line}\n"),
        Err(e) => return Err(format!("{report}{e}")),
    }
    Ok(RunOutcome { report, stats })
}

// ---------------------------------------------------------------------------------------------
// demo: a whole tree on net_ring wires.

/// net_ring has 16 queues per device and this DPDK build 32 ports: a switch's children share
/// two devices (one per direction), so each switch has at most 16 children and the tree at most
/// 16 switches.
pub const NET_RING_QUEUES: usize = 16;

/// Create the net_ring devices for `tree` and hand out their queues as wires. For a switch with
/// k children: device "down" carries switch -> child i on queue i, device "up" child i -> switch.
/// Device names carry the run number: net_ring leaves its rings behind when a device closes, and
/// a second run under the same names would attach to them instead of getting fresh ones.
fn net_ring_wires(
    eal: &Eal,
    tree: &Tree,
    pool: &Mempool,
    run: u32,
) -> Result<(Wires<DpdkRx, DpdkTx>, Vec<Port>), String> {
    let switches = tree.switches();
    if switches.len() * 2 > 32 {
        return Err(format!(
            "{} switches need {} net_ring ports; this DPDK has 32",
            switches.len(),
            switches.len() * 2
        ));
    }
    let mut at_child: Vec<Option<(DpdkRx, DpdkTx)>> = (0..tree.nodes.len()).map(|_| None).collect();
    let mut at_parent: Vec<Option<(DpdkRx, DpdkTx)>> =
        (0..tree.nodes.len()).map(|_| None).collect();
    let mut ports = Vec::new();
    for (k, &s) in switches.iter().enumerate() {
        let n = tree.nodes[s].children.len();
        if n > NET_RING_QUEUES {
            return Err(format!(
                "a switch with {n} children: net_ring wires allow {NET_RING_QUEUES} (use --io mem)"
            ));
        }
        for name in [
            format!("net_ring_{run}_{}", 2 * k),
            format!("net_ring_{run}_{}", 2 * k + 1),
        ] {
            let mut p = Port::attach_vdev(eal, &name).map_err(|e| format!("{name}: {e}"))?;
            p.configure(n as u16, n as u16, 1024, 1024, pool)
                .map_err(|e| format!("{name}: {e}"))?;
            ports.push(p);
        }
    }
    start_ports(&mut ports)?;
    for (k, &s) in switches.iter().enumerate() {
        let (down, up) = (&ports[2 * k], &ports[2 * k + 1]);
        for (i, &c) in tree.nodes[s].children.iter().enumerate() {
            let q = QueueId(i as u16);
            let e = |e: dpdk::DpdkError| e.to_string();
            at_parent[c] = Some((
                DpdkRx::new(up.rx_queue(q).map_err(e)?),
                DpdkTx::new(down.tx_queue(q).map_err(e)?, pool.clone()),
            ));
            at_child[c] = Some((
                DpdkRx::new(down.rx_queue(q).map_err(e)?),
                DpdkTx::new(up.tx_queue(q).map_err(e)?, pool.clone()),
            ));
        }
    }
    Ok((
        Wires {
            at_child,
            at_parent,
        },
        ports,
    ))
}

/// EAL arguments for the demo on a machine without NIC or hugepages, `loops` lcores.
pub fn demo_eal_args(loops: usize, overrides: &[String]) -> Vec<String> {
    let list = (0..loops)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut a = vec![
        "barrier-switch".to_string(),
        "--no-huge".into(),
        "-m".into(),
        "512".into(),
        "--no-shconf".into(),
        "--file-prefix".into(),
        format!("barrier-demo-{}", std::process::id()),
        "--no-pci".into(),
        "--iova-mode=va".into(),
        "--no-telemetry".into(),
        "--log-level=*:warning".into(),
        "-l".into(),
        list,
    ];
    a.extend(overrides.iter().cloned());
    a
}

/// What a DPDK demo run measured, plus the switches' counters and the shutdown check.
pub struct DemoOutcome {
    pub result: DemoResult,
    pub switches: Vec<SwitchStats>,
    pub report: String,
}

/// Run the demo on DPDK net_ring wires. `quit` stops it early (SIGINT).
pub fn run_demo_dpdk(
    opts: &DemoOpts,
    eal_overrides: &[String],
    quit: Arc<AtomicBool>,
) -> Result<DemoOutcome, String> {
    let (eal, _) =
        Eal::init(demo_eal_args(opts.loops, eal_overrides)).map_err(|e| format!("EAL: {e}"))?;
    let out = run_demo_on(&eal, opts, quit);
    drop(eal);
    out
}

/// Run one demo on an initialised EAL (several may run one after the other: each creates its
/// net_ring devices and pool and removes them again).
pub fn run_demo_on(
    eal: &Eal,
    opts: &DemoOpts,
    quit: Arc<AtomicBool>,
) -> Result<DemoOutcome, String> {
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let tree = Tree::new(&opts.fanout)?;
    let clock = Clock::from_counter(dpdk::tsc, dpdk::tsc_hz());
    let leaves = tree.leaves().len() as u64;
    let copies = u64::from(opts.copies.iter().copied().max().unwrap_or(1).max(1));
    let in_flight = u64::from(opts.groups) * (leaves * copies + tree.switches().len() as u64) * 2;
    let mbufs = (in_flight + 8192).next_power_of_two().min(1 << 20) as u32 - 1;
    let pool = Mempool::new_pktmbuf(eal, &format!("demo{run}"), mbufs, 256, SMALL_DATA_ROOM)
        .map_err(|e| format!("mempool: {e}"))?;
    let (wires, ports) = net_ring_wires(eal, &tree, &pool, run)?;
    let demo = build_demo(opts, &tree, wires, clock.now_ns())?;
    let switches = demo.switches.clone();
    let report_slot = demo.report.clone();
    let done = demo.done.clone();
    let mut placement: Placement = BTreeMap::new();
    let lcores: Vec<u32> = std::iter::once(eal.main_lcore().0)
        .chain(eal.worker_lcores().into_iter().map(|l| l.0))
        .collect();
    if lcores.len() < demo.loops.len() {
        return Err(format!(
            "{} loops but only lcores {lcores:?}",
            demo.loops.len()
        ));
    }
    for (i, pollers) in demo.loops.into_iter().enumerate() {
        placement.insert(lcores[i], pollers);
    }
    let start = Instant::now();
    let o = opts.clone();
    let q = quit.clone();
    // The loops stop on this run's own flag; `quit` (a signal) only ends the wait early.
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let loops = run_placement(eal, placement, stop, clock, opts.idle, move |_| {
        wait_until_done(&done, &o, start, &[&q, &stopped]);
    })?;
    let elapsed = start.elapsed();
    let report = report_slot
        .lock()
        .map_err(|_| "report lock")?
        .take()
        .ok_or("leaf poller did not report")?;
    let mut text = stats_report(&switches);
    text += &loops_report(&loops);
    let closed = close_ports(ports, &pool);
    drop(pool);
    match closed {
        Ok(line) => text += &format!("{line}\n"),
        Err(e) => return Err(format!("{text}{e}")),
    }
    Ok(DemoOutcome {
        result: DemoResult { elapsed, report },
        switches,
        report: text,
    })
}
