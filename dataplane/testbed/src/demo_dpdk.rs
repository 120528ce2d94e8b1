//! The demo tree on DPDK: one process, a root, intermediates and emulated leaves wired by
//! `net_ring` ports (queue i of a device loops to queue i of its peer), placed on lcores by the
//! shared runtime. `barrier-demo` (src/bin/demo.rs) runs it; the switch's end-to-end tests and the fairness
//! benchmark too.

use crate::demo::{build_demo, wait_until_done, DemoOpts, DemoResult, Tree, Wires};
use crate::error::DemoError;
use barrier_runtime::clock::Clock;
use barrier_runtime::dpdk_io::{DpdkRx, DpdkTx};
use barrier_runtime::launch::{
    close_ports, loops_report, open_port, run_placement, start_ports, Placement, PortDevice,
    PortSetup,
};
use barrier_switch::engine::SwitchStats;
use dpdk::{Eal, Mempool, Port, QueueId};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Data room of demo mbufs: barrier frames are 60 bytes.
const SMALL_DATA_ROOM: u16 = 128 + 128;

fn stats_report(switches: &[SwitchStats]) -> String {
    switches.iter().map(|s| s.report()).collect()
}

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
) -> Result<(Wires<DpdkRx, DpdkTx>, Vec<Port>), DemoError> {
    let switches = tree.switches();
    if switches.len() * 2 > 32 {
        return Err(format!(
            "{} switches need {} net_ring ports; this DPDK has 32",
            switches.len(),
            switches.len() * 2
        )
        .into());
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
            )
            .into());
        }
        for name in [
            format!("net_ring_{run}_{}", 2 * k),
            format!("net_ring_{run}_{}", 2 * k + 1),
        ] {
            let setup = PortSetup {
                rx_queues: n as u16,
                tx_queues: n as u16,
                rx_descriptors: 1024,
                tx_descriptors: 1024,
            };
            ports.push(open_port(eal, PortDevice::Vdev(&name), setup, pool)?);
        }
    }
    start_ports(&mut ports)?;
    for (k, &s) in switches.iter().enumerate() {
        let (down, up) = (&ports[2 * k], &ports[2 * k + 1]);
        for (i, &c) in tree.nodes[s].children.iter().enumerate() {
            let q = QueueId(i as u16);
            let e = DemoError::Queue;
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
        "barrier-demo".to_string(),
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
) -> Result<DemoOutcome, DemoError> {
    let (eal, _) = Eal::init(demo_eal_args(opts.loops, eal_overrides)).map_err(DemoError::Eal)?;
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
) -> Result<DemoOutcome, DemoError> {
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let tree = Tree::new(&opts.fanout)?;
    let clock = Clock::from_counter(dpdk::tsc, dpdk::tsc_hz());
    let leaves = tree.leaves().len() as u64;
    let copies = u64::from(opts.copies.iter().copied().max().unwrap_or(1).max(1));
    let in_flight = u64::from(opts.groups) * (leaves * copies + tree.switches().len() as u64) * 2;
    let mbufs = (in_flight + 8192).next_power_of_two().min(1 << 20) as u32 - 1;
    let pool = Mempool::new_pktmbuf(eal, &format!("demo{run}"), mbufs, 256, SMALL_DATA_ROOM)
        .map_err(DemoError::Mempool)?;
    let (wires, ports) = net_ring_wires(eal, &tree, &pool, run)?;
    let demo = build_demo(opts, &tree, wires, clock.now_ns())?;
    let switches = demo.switches.clone();
    let report_slot = demo.report.clone();
    let done = demo.done.clone();
    let progress = demo.progress.clone();
    let mut placement: Placement = BTreeMap::new();
    let lcores: Vec<u32> = std::iter::once(eal.main_lcore().0)
        .chain(eal.worker_lcores().into_iter().map(|l| l.0))
        .collect();
    if lcores.len() < demo.loops.len() {
        return Err(format!("{} loops but only lcores {lcores:?}", demo.loops.len()).into());
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
    // The management thread on a CPU no loop polls (automatic control cores).
    let loops = run_placement(eal, placement, stop, clock, opts.idle, None, move |_| {
        wait_until_done(&done, &progress, &o, start, &[&q, &stopped]);
    })?;
    let elapsed = start.elapsed();
    let report = report_slot
        .lock()
        .map_err(|_| DemoError::NoReport)?
        .take()
        .ok_or(DemoError::NoReport)?;
    let mut text = stats_report(&switches);
    text += &loops_report(&loops);
    let closed = close_ports(ports, &[&pool]);
    drop(pool);
    match closed {
        Ok(line) => text += &format!("{line}\n"),
        Err(source) => {
            return Err(DemoError::Close {
                report: text,
                source,
            })
        }
    }
    Ok(DemoOutcome {
        result: DemoResult { elapsed, report },
        switches,
        report: text,
    })
}
