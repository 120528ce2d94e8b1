//! DPDK set-up around the engine: one mempool, the generator's ports (opened by name, or
//! created as `net_ring` pairs whose far ends belong to a system under test in this process: a
//! `barrier-switch` root built from the switch crate's library, or any other poller), where
//! that system's pollers run, and shutdown in the order that returns every mbuf.

use crate::engine::GenPort;
use crate::fault::FaultRates;
use barrier_protocol::switch::GroupConfig;
use barrier_protocol::PortSet;
use barrier_runtime::clock::Clock;
use barrier_runtime::counters::LoopCounters;
use barrier_runtime::dpdk_io::{DpdkRx, DpdkTx};
use barrier_runtime::launch::{
    close_ports, open_port, start_ports, CloseError, LaunchError, PortDevice, PortSetup,
};
use barrier_runtime::poll::{finish_all, run_loop, Idle, Poller};
use barrier_switch::engine::{build_switch, build_table, BuildTableError, PortIo, SwitchStats};
use barrier_switch::spec::GroupBlock;
use dpdk::{DpdkError, Eal, LcoreId, LcoreJoin, Mempool, Port, QueueId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Descriptors per queue (and ring size of net_ring pairs).
pub const QUEUE_DEPTH: u16 = 1024;

/// A system under test in this process, on the far ends of the generator's ring pairs.
pub struct InprocSwitch {
    /// barrier-switch's counters (None for another system under test).
    pub stats: Option<SwitchStats>,
    /// Its pollers when they run inside the generator's loop (one lcore given)...
    pub inline: Option<(Vec<Box<dyn Poller>>, Clock)>,
    /// ...or the worker lcore running them.
    running: Option<LcoreJoin<Vec<Box<dyn Poller>>>>,
    quit: Arc<AtomicBool>,
}

/// Everything DPDK the generator holds.
pub struct Wiring {
    pub eal: Eal,
    pub pool: Mempool,
    ports: Vec<Port>,
    pub switch: Option<InprocSwitch>,
}

/// The far end of one ring pair: what a system under test in this process uses as its port.
pub struct FarEnd {
    pub name: String,
    pub rx: DpdkRx,
    pub tx: DpdkTx,
    /// The generator port's MAC, for addressing releases.
    pub peer_mac: [u8; 6],
}

/// The generator's side of its ports, on DPDK queues.
pub type DpdkGenPort = GenPort<DpdkRx, DpdkTx>;

/// Why the generator's ports, or its in-process switch, could not be set up or shut down.
#[derive(Debug, thiserror::Error)]
pub enum WiringError {
    /// A port count or plan the generator cannot serve.
    #[error("{0}")]
    Plan(String),
    #[error("mempool: {0}")]
    Mempool(#[source] DpdkError),
    #[error("ring pair {pair}: {source}")]
    RingPair {
        pair: usize,
        #[source]
        source: DpdkError,
    },
    #[error("queue: {0}")]
    Queue(#[source] DpdkError),
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error("in-process switch: {0}")]
    Table(#[from] BuildTableError),
    #[error("system-under-test lcore: {0}")]
    SutLcore(#[source] DpdkError),
    #[error("switch lcore: {0}")]
    SutPanicked(#[source] dpdk::LcoreError),
    #[error(transparent)]
    Close(#[from] CloseError),
}

/// How the ports are made.
pub enum PortPlan {
    /// Existing ports by device name (`0000:3b:00.0`, `net_memif0`), or a vdev spec with
    /// arguments (`net_af_packet0,iface=veth0`) created now.
    Named(Vec<String>),
    /// `n` ring pairs to an in-process barrier-switch root that has every group, resend timer
    /// in ns.
    Inproc { ports: usize, switch_resend_ns: u64 },
}

fn mbufs_for(ports: usize) -> u32 {
    // Rings or descriptors in both directions, burst buffers, slack.
    let n = ports as u32 * (2 * u32::from(QUEUE_DEPTH) + 256) + 4096;
    n.next_power_of_two() - 1
}

const SETUP: PortSetup = PortSetup {
    rx_queues: 1,
    tx_queues: 1,
    rx_descriptors: QUEUE_DEPTH,
    tx_descriptors: QUEUE_DEPTH,
};

fn mac_of(port: &Port, i: usize) -> [u8; 6] {
    match port.mac_address() {
        Ok(m) if m != [0; 6] => m,
        _ => [0x02, 0, 0, 0, 0x9e, i as u8],
    }
}

/// Opens the ports of `plan`; returns the wiring and the generator's side of each port. For
/// `Inproc`, a barrier-switch root runs on the far ends with one group shape per entry of
/// `shards` (group numbers, children as a port bitmask), on `sut_lcore` or, without one, inside
/// the generator's loop. `tag` names the pool and the ring pairs (unique in the process while
/// they live).
pub fn open(
    eal: Eal,
    tag: &str,
    plan: &PortPlan,
    shards: &[(std::ops::Range<u32>, u64)],
    faults: &[(FaultRates, FaultRates)],
    sut_lcore: Option<LcoreId>,
) -> Result<(Wiring, Vec<DpdkGenPort>), WiringError> {
    let (mut w, gen, far) = open_ports(eal, tag, plan, faults)?;
    if let PortPlan::Inproc {
        switch_resend_ns, ..
    } = plan
    {
        let specs: Vec<GroupBlock> = shards
            .iter()
            .map(|(numbers, children)| GroupBlock {
                numbers: numbers.clone(),
                config: GroupConfig {
                    resend_timeout_ns: *switch_resend_ns,
                    ..GroupConfig::root(PortSet(*children))
                },
            })
            .collect();
        let table = Arc::new(build_table(&specs)?);
        let io = far
            .into_iter()
            .map(|f| PortIo {
                name: f.name,
                rx: vec![f.rx],
                tx: f.tx,
                peer_mac: f.peer_mac,
                mac: None,
            })
            .collect();
        let clock = Clock::new();
        let sw = build_switch("sut", [0x02, 0, 0, 0, 0x5e, 0], io, table, clock.now_ns());
        let mut pollers: Vec<Box<dyn Poller>> = sw.rx.into_iter().map(|(_, _, p)| p).collect();
        pollers.push(sw.sched);
        w.attach(pollers, clock, Some(sw.stats), sut_lcore)?;
    }
    Ok((w, gen))
}

/// Opens the ports of `plan`; for `Inproc` also returns the far ends of the ring pairs, for the
/// caller's own system under test (run it with [`Wiring::attach`]).
pub fn open_ports(
    eal: Eal,
    tag: &str,
    plan: &PortPlan,
    faults: &[(FaultRates, FaultRates)],
) -> Result<(Wiring, Vec<DpdkGenPort>, Vec<FarEnd>), WiringError> {
    let n = match plan {
        PortPlan::Named(v) => v.len(),
        PortPlan::Inproc { ports, .. } => *ports,
    };
    if n == 0 || n > 64 {
        return Err(WiringError::Plan(format!(
            "{n} ports: the generator needs 1..=64 (a switch has at most 64 children per group)"
        )));
    }
    let pool = Mempool::new_pktmbuf(&eal, tag, mbufs_for(n), 256, dpdk::MBUF_DEFAULT_BUF_SIZE)
        .map_err(WiringError::Mempool)?;
    let mut w = Wiring {
        eal: eal.clone(),
        pool: pool.clone(),
        ports: Vec::new(),
        switch: None,
    };
    let mut gen_side = Vec::new();
    let mut far_side = Vec::new();
    match plan {
        PortPlan::Named(names) => {
            for name in names {
                let device = if name.contains(',') {
                    PortDevice::Vdev(name)
                } else {
                    PortDevice::Existing(name)
                };
                gen_side.push(open_port(&eal, device, SETUP, &pool)?);
            }
        }
        PortPlan::Inproc { ports, .. } => {
            for i in 0..*ports {
                let (mut a, mut b) = Port::ring_pair(
                    &eal,
                    &format!("{tag}{i}"),
                    &format!("{tag}sut{i}"),
                    1,
                    u32::from(QUEUE_DEPTH),
                )
                .map_err(|source| WiringError::RingPair { pair: i, source })?;
                for p in [&mut a, &mut b] {
                    p.configure(1, 1, QUEUE_DEPTH, QUEUE_DEPTH, &pool)
                        .map_err(|source| WiringError::RingPair { pair: i, source })?;
                }
                gen_side.push(a);
                far_side.push(b);
            }
        }
    }
    // Started and drained before any queue is polled: a release that reached a port before
    // its socket was bound may be another port's (another emulated leaf's) release.
    start_ports(&mut gen_side)?;
    start_ports(&mut far_side)?;
    for p in &mut gen_side {
        // Releases go to our MAC or broadcast; a device that cannot do promiscuous is fine too.
        let _ = p.set_promiscuous(true);
    }
    let mut gen = Vec::new();
    for (i, p) in gen_side.iter().enumerate() {
        let (ftx, frx) = faults.get(i).copied().unwrap_or_default();
        gen.push(GenPort {
            name: p.name().to_string(),
            mac: mac_of(p, i),
            rx: DpdkRx::new(p.rx_queue(QueueId(0)).map_err(WiringError::Queue)?),
            tx: DpdkTx::new(
                p.tx_queue(QueueId(0)).map_err(WiringError::Queue)?,
                pool.clone(),
            ),
            faults_tx: ftx,
            faults_rx: frx,
        });
    }
    let mut far = Vec::new();
    for (i, p) in far_side.iter().enumerate() {
        far.push(FarEnd {
            name: p.name().to_string(),
            rx: DpdkRx::new(p.rx_queue(QueueId(0)).map_err(WiringError::Queue)?),
            tx: DpdkTx::new(
                p.tx_queue(QueueId(0)).map_err(WiringError::Queue)?,
                pool.clone(),
            ),
            peer_mac: gen[i].mac,
        });
    }
    w.ports = gen_side.into_iter().chain(far_side).collect();
    Ok((w, gen, far))
}

impl Wiring {
    /// Runs the pollers of a system under test on `lcore`, or (None) leaves them in
    /// `switch.inline` for the generator's loop to run.
    pub fn attach(
        &mut self,
        pollers: Vec<Box<dyn Poller>>,
        clock: Clock,
        stats: Option<SwitchStats>,
        lcore: Option<LcoreId>,
    ) -> Result<(), WiringError> {
        let quit = Arc::new(AtomicBool::new(false));
        let (inline, running) = match lcore {
            Some(lcore) => {
                let q = quit.clone();
                // The system under test's own lcore: it spins (the lcore is its own).
                let j = dpdk::launch_on(&self.eal, lcore, move || {
                    run_loop(pollers, &q, clock, &LoopCounters::default(), Idle::Spin)
                })
                .map_err(WiringError::SutLcore)?;
                (None, Some(j))
            }
            None => (Some((pollers, clock)), None),
        };
        self.switch = Some(InprocSwitch {
            stats,
            inline,
            running,
            quit,
        });
        Ok(())
    }

    /// Stops the in-process switch (if any) and hands its pollers back flushed, so the caller
    /// can drain the generator's side next.
    pub fn stop_switch(
        &mut self,
        inline_back: Vec<Box<dyn Poller>>,
    ) -> Result<Vec<Box<dyn Poller>>, WiringError> {
        let Some(sw) = &mut self.switch else {
            return Ok(inline_back);
        };
        sw.quit.store(true, Ordering::Relaxed);
        let mut pollers = match sw.running.take() {
            Some(j) => j.join().map_err(WiringError::SutPanicked)?,
            None => inline_back,
        };
        finish_all(&mut pollers);
        Ok(pollers)
    }

    /// Stops and closes every port; then every mbuf must be back in the pool.
    pub fn close(self) -> Result<String, WiringError> {
        Ok(close_ports(self.ports, &self.pool)?)
    }
}
