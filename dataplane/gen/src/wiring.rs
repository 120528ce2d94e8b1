//! DPDK set-up around the engine: one mempool, the generator's ports (opened by name, or
//! created as `net_ring` pairs whose far ends belong to a system under test in this process: a
//! `barrier-switch` root built from the switch crate's library, or any other poller), where
//! that system's pollers run, and shutdown in the order that returns every mbuf.

use crate::engine::{FloodPort, GenPort};
use crate::fault::FaultRates;
use crate::spread::ByGroup;
use barrier_protocol::backoff::Backoff;
use barrier_protocol::switch::GroupConfig;
use barrier_protocol::{PortIdx, PortSet};
use barrier_runtime::clock::Clock;
use barrier_runtime::counters::LoopCounters;
use barrier_runtime::dpdk_io::{DpdkRx, DpdkTx};
use barrier_runtime::io::{TxBlocked, TxQueue};
use barrier_runtime::launch::{
    close_ports, open_port, start_ports, CloseError, LaunchError, PortDevice, PortSetup,
};
use barrier_runtime::poll::{finish_all, run_loop, Idle, Poller};
use barrier_switch::engine::{build_switch, build_table, BuildTableError, PortIo, SwitchStats};
use barrier_switch::spec::GroupBlock;
use dpdk::{DpdkError, Eal, LcoreId, LcoreJoin, Mempool, Port, QueueId};
use std::collections::VecDeque;
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
    /// Extra ports that flood (`InprocExtras::flood_nonmember`, [`Wiring::open_flood_port`]),
    /// each with its index at the in-process switch (None: a switch elsewhere). Taken by the
    /// generator.
    pub flood: Vec<(DpdkFloodPort, Option<usize>)>,
}

/// An extra flooding port on DPDK queues.
pub type DpdkFloodPort = FloodPort<DpdkRx, ByGroup<DpdkTx>>;

/// Where an in-process switch runs and what it has beside the generator's groups (by default:
/// inside the generator's loop, nothing more).
#[derive(Clone, Debug, Default)]
pub struct InprocExtras {
    /// The lcore its pollers run on; `None`: inside the generator's loop.
    pub lcore: Option<LcoreId>,
    /// More groups, as (numbers, children bitmask), that the generator does not run: for a
    /// flood's reduces of groups a port does not belong to.
    pub groups: Vec<(std::ops::Range<u32>, u64)>,
    /// One more ring pair to the switch, after every other port: a port no group names, for
    /// a flood (its generator side lands in [`Wiring::flood`]).
    pub flood_nonmember: bool,
}

/// The far end of one ring pair: what a system under test in this process uses as its port.
pub struct FarEnd {
    pub name: String,
    /// One per queue of the pair: the generator's TX queue *i* arrives on RX queue *i*.
    pub rx: Vec<DpdkRx>,
    pub tx: DpdkTx,
    /// The generator port's MAC, for addressing releases.
    pub peer_mac: [u8; 6],
}

impl FarEnd {
    /// This far end as a port of the reference reflector, which polls RX queue 0.
    pub fn into_reflector_port(self) -> barrier_testbed::reflector::ReflectorPort<DpdkRx, DpdkTx> {
        barrier_testbed::reflector::ReflectorPort {
            rx: self.rx.into_iter().next().expect("one RX queue"),
            tx: self.tx,
            peer_mac: self.peer_mac,
        }
    }
}

/// The generator's side of its ports, on DPDK queues: it receives on queue 0 and sends each
/// frame on the TX queue of its group ([`crate::spread`]).
pub type DpdkGenPort = GenPort<DpdkRx, ByGroup<DpdkTx>>;

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
    /// `n` ring pairs to an in-process barrier-switch that has every group.
    Inproc {
        ports: usize,
        /// The switch's re-send timer, ns, and how its re-sends back off (a root arms none).
        switch_resend_ns: u64,
        switch_backoff: Backoff,
        /// The switch is an intermediate, its parent port (index `ports`) joined by one more
        /// ring pair to a second in-process switch, the root, whose one child that is. Without
        /// it the switch is the root and re-sends nothing.
        parent: bool,
        /// With `parent`: the root's frames to the intermediate are held back this many ns (a
        /// long or slow link to the parent; [`DelayTx`]). 0: none.
        parent_delay_ns: u64,
    },
}

fn mbufs_for(ports: usize) -> u32 {
    // Rings or descriptors in both directions, burst buffers, slack.
    let n = ports as u32 * (2 * u32::from(QUEUE_DEPTH) + 256) + 4096;
    n.next_power_of_two() - 1
}

/// The most TX queues per port the generator spreads groups over (`net_ring` allows 16).
pub const MAX_QUEUES: u16 = 16;

/// A named port: one RX queue (the switch answers on its TX queue 0), `queues` TX queues.
fn setup(queues: u16) -> PortSetup {
    PortSetup {
        rx_queues: 1,
        tx_queues: queues,
        rx_descriptors: QUEUE_DEPTH,
        tx_descriptors: QUEUE_DEPTH,
    }
}

fn mac_of(port: &Port, i: usize) -> [u8; 6] {
    match port.mac_address() {
        Ok(m) if m != [0; 6] => m,
        _ => [0x02, 0, 0, 0, 0x9e, i as u8],
    }
}

/// Opens the ports of `plan`, each sending on `queues` TX queues (a frame on the queue of its
/// group, [`crate::spread`]); returns the wiring and the generator's side of each port. For
/// `Inproc`, a barrier-switch (the root, or with `parent` an intermediate under a second
/// in-process switch, the root) runs on the far ends with one group shape per entry of
/// `shards` (group numbers, children as a port bitmask), on `sut_lcore` or, without one, inside
/// the generator's loop. `tag` names the pool and the ring pairs (unique in the process while
/// they live).
pub fn open(
    eal: Eal,
    tag: &str,
    plan: &PortPlan,
    shards: &[(std::ops::Range<u32>, u64)],
    faults: &[(FaultRates, FaultRates)],
    queues: u16,
    sut_lcore: Option<LcoreId>,
) -> Result<(Wiring, Vec<DpdkGenPort>), WiringError> {
    open_with(
        eal,
        tag,
        plan,
        shards,
        faults,
        queues,
        &InprocExtras {
            lcore: sut_lcore,
            ..InprocExtras::default()
        },
    )
}

/// [`open`] with the in-process switch's `extras`: the lcore it runs on, groups the generator
/// does not run, a port no group names.
pub fn open_with(
    eal: Eal,
    tag: &str,
    plan: &PortPlan,
    shards: &[(std::ops::Range<u32>, u64)],
    faults: &[(FaultRates, FaultRates)],
    queues: u16,
    extras: &InprocExtras,
) -> Result<(Wiring, Vec<DpdkGenPort>), WiringError> {
    if extras.flood_nonmember || !extras.groups.is_empty() {
        match plan {
            PortPlan::Inproc { ports, parent, .. }
                if ports + usize::from(*parent) + usize::from(extras.flood_nonmember) <= 64 => {}
            PortPlan::Inproc { .. } => {
                return Err(WiringError::Plan(
                    "a flood port needs one more switch port: at most 64 in all".into(),
                ))
            }
            PortPlan::Named(_) => {
                return Err(WiringError::Plan(
                    "extra groups and a non-member ring pair need the in-process switch".into(),
                ))
            }
        }
    }
    let (mut w, gen, far) = open_ports(eal, tag, plan, faults, queues)?;
    if let PortPlan::Inproc {
        ports,
        switch_resend_ns,
        switch_backoff,
        parent,
        parent_delay_ns,
    } = plan
    {
        // The intermediate's parent port comes after the generator's ports.
        let up = PortIdx::new(*ports as u8).filter(|_| *parent);
        let specs: Vec<GroupBlock> = shards
            .iter()
            .chain(&extras.groups)
            .map(|(numbers, children)| GroupBlock {
                numbers: numbers.clone(),
                config: GroupConfig {
                    backoff: *switch_backoff,
                    ..match up {
                        Some(up) => {
                            GroupConfig::intermediate(up, PortSet(*children), *switch_resend_ns)
                        }
                        None => GroupConfig {
                            resend_timeout_ns: *switch_resend_ns,
                            ..GroupConfig::root(PortSet(*children))
                        },
                    }
                },
            })
            .collect();
        let table = Arc::new(build_table(&specs)?);
        let mut io: Vec<_> = far
            .into_iter()
            .map(|f| PortIo {
                name: f.name,
                rx: f.rx,
                tx: f.tx,
                peer_mac: f.peer_mac,
                mac: None,
            })
            .collect();
        let clock = Clock::new();
        let mut root_pollers = Vec::new();
        if up.is_some() {
            // One more ring pair: the intermediate's parent port and the root's child port 0.
            let (a, b) = ring_pair(
                &w.eal,
                &w.pool,
                &format!("{tag}up"),
                &format!("{tag}root"),
                *ports,
                1,
            )?;
            let mut pair = vec![a, b];
            start_ports(&mut pair)?;
            let b = pair.pop().expect("two ports");
            let a = pair.pop().expect("two ports");
            let (intermediate_mac, root_mac) = ([0x02, 0, 0, 0, 0x5e, 0], [0x02, 0, 0, 0, 0x5e, 1]);
            let queues = |p: &Port| -> Result<(DpdkRx, DpdkTx), WiringError> {
                Ok((
                    DpdkRx::new(p.rx_queue(QueueId(0)).map_err(WiringError::Queue)?),
                    DpdkTx::new(
                        p.tx_queue(QueueId(0)).map_err(WiringError::Queue)?,
                        w.pool.clone(),
                    ),
                ))
            };
            let (arx, atx) = queues(&a)?;
            let (brx, btx) = queues(&b)?;
            io.push(PortIo {
                name: a.name().to_string(),
                rx: vec![arx],
                tx: atx,
                peer_mac: root_mac,
                mac: None,
            });
            let root_specs: Vec<GroupBlock> = shards
                .iter()
                .map(|(numbers, _)| GroupBlock {
                    numbers: numbers.clone(),
                    config: GroupConfig::root(PortSet(1)),
                })
                .collect();
            let root_io = vec![PortIo {
                name: b.name().to_string(),
                rx: vec![brx],
                tx: DelayTx::new(btx, *parent_delay_ns, clock),
                peer_mac: intermediate_mac,
                mac: None,
            }];
            let root = build_switch(
                "root",
                root_mac,
                root_io,
                Arc::new(build_table(&root_specs)?),
                clock.now_ns(),
            );
            root_pollers.extend(root.rx.into_iter().map(|(_, _, p)| p));
            root_pollers.push(root.sched);
            w.ports.push(a);
            w.ports.push(b);
        }
        if extras.flood_nonmember {
            // The flood's port: after every other port of the switch, named by no group.
            let (a, b) = ring_pair(
                &w.eal,
                &w.pool,
                &format!("{tag}x"),
                &format!("{tag}sutx"),
                io.len(),
                1,
            )?;
            let mut pair = vec![a, b];
            start_ports(&mut pair)?;
            let b = pair.pop().expect("two ports");
            let a = pair.pop().expect("two ports");
            let mac = [0x02, 0, 0, 0, 0x9f, 0];
            let flood = FloodPort {
                name: a.name().to_string(),
                mac,
                rx: DpdkRx::new(a.rx_queue(QueueId(0)).map_err(WiringError::Queue)?),
                tx: ByGroup::new(vec![DpdkTx::new(
                    a.tx_queue(QueueId(0)).map_err(WiringError::Queue)?,
                    w.pool.clone(),
                )]),
            };
            w.flood.push((flood, Some(io.len())));
            io.push(PortIo {
                name: b.name().to_string(),
                rx: vec![DpdkRx::new(
                    b.rx_queue(QueueId(0)).map_err(WiringError::Queue)?,
                )],
                tx: DpdkTx::new(
                    b.tx_queue(QueueId(0)).map_err(WiringError::Queue)?,
                    w.pool.clone(),
                ),
                peer_mac: mac,
                mac: None,
            });
            w.ports.push(a);
            w.ports.push(b);
        }
        let sw = build_switch("sut", [0x02, 0, 0, 0, 0x5e, 0], io, table, clock.now_ns());
        let mut pollers: Vec<Box<dyn Poller>> = sw.rx.into_iter().map(|(_, _, p)| p).collect();
        pollers.push(sw.sched);
        pollers.extend(root_pollers);
        w.attach(pollers, clock, Some(sw.stats), extras.lcore)?;
    }
    Ok((w, gen))
}

/// Opens the ports of `plan` with `queues` TX queues each (ring pairs: `queues` queues each
/// way); for `Inproc` also returns the far ends of the ring pairs, for the caller's own system
/// under test (run it with [`Wiring::attach`]).
pub fn open_ports(
    eal: Eal,
    tag: &str,
    plan: &PortPlan,
    faults: &[(FaultRates, FaultRates)],
    queues: u16,
) -> Result<(Wiring, Vec<DpdkGenPort>, Vec<FarEnd>), WiringError> {
    if queues == 0 || queues > MAX_QUEUES {
        return Err(WiringError::Plan(format!(
            "{queues} queues: the generator spreads groups over 1..={MAX_QUEUES} TX queues a port"
        )));
    }
    let (n, max) = match plan {
        PortPlan::Named(v) => (v.len(), 64),
        // With a parent the in-process switch's last port leads up.
        PortPlan::Inproc { ports, parent, .. } => (*ports, if *parent { 63 } else { 64 }),
    };
    if n == 0 || n > max {
        return Err(WiringError::Plan(format!(
            "{n} ports: the generator needs 1..={max} (a switch has at most 64 ports, children \
             and parent, per group)"
        )));
    }
    // Room for every queue, and for the parent's and a flood port's ring pairs too.
    let pool = Mempool::new_pktmbuf(
        &eal,
        tag,
        mbufs_for((n + 2) * usize::from(queues)),
        256,
        dpdk::MBUF_DEFAULT_BUF_SIZE,
    )
    .map_err(WiringError::Mempool)?;
    let mut w = Wiring {
        eal: eal.clone(),
        pool: pool.clone(),
        ports: Vec::new(),
        switch: None,
        flood: Vec::new(),
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
                gen_side.push(open_port(&eal, device, setup(queues), &pool)?);
            }
        }
        PortPlan::Inproc { ports, .. } => {
            for i in 0..*ports {
                let (a, b) = ring_pair(
                    &eal,
                    &pool,
                    &format!("{tag}{i}"),
                    &format!("{tag}sut{i}"),
                    i,
                    queues,
                )?;
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
            tx: ByGroup::new(
                (0..queues)
                    .map(|q| {
                        Ok(DpdkTx::new(
                            p.tx_queue(QueueId(q)).map_err(WiringError::Queue)?,
                            pool.clone(),
                        ))
                    })
                    .collect::<Result<_, WiringError>>()?,
            ),
            faults_tx: ftx,
            faults_rx: frx,
        });
    }
    let mut far = Vec::new();
    for (i, p) in far_side.iter().enumerate() {
        far.push(FarEnd {
            name: p.name().to_string(),
            rx: (0..queues)
                .map(|q| {
                    Ok(DpdkRx::new(
                        p.rx_queue(QueueId(q)).map_err(WiringError::Queue)?,
                    ))
                })
                .collect::<Result<_, WiringError>>()?,
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

/// Frames held back `delay_ns` before they reach the queue underneath (a long link). At most
/// [`DelayTx::MAX_HELD`] frames are held; beyond that `offer` refuses (`TxBlocked::Full`), as a
/// full device would. With a delay of 0 frames pass straight through.
pub struct DelayTx<T: TxQueue> {
    inner: T,
    delay_ns: u64,
    clock: Clock,
    held: VecDeque<(u64, Vec<u8>)>,
}

impl<T: TxQueue> DelayTx<T> {
    pub const MAX_HELD: usize = 1 << 16;

    pub fn new(inner: T, delay_ns: u64, clock: Clock) -> Self {
        DelayTx {
            inner,
            delay_ns,
            clock,
            held: VecDeque::new(),
        }
    }
}

impl<T: TxQueue> TxQueue for DelayTx<T> {
    type Frame = T::Frame;

    /// Straight through without a delay; with one, the frame's bytes are held like an
    /// `offer`'s and its buffer is freed.
    fn offer_frame(&mut self, frame: T::Frame) -> Result<(), (TxBlocked, T::Frame)> {
        if self.delay_ns == 0 {
            return self.inner.offer_frame(frame);
        }
        self.offer(frame.as_ref()).map_err(|e| (e, frame))
    }

    fn offer(&mut self, frame: &[u8]) -> Result<(), TxBlocked> {
        if self.delay_ns == 0 {
            return self.inner.offer(frame);
        }
        if self.held.len() >= Self::MAX_HELD {
            return Err(TxBlocked::Full);
        }
        let due = self.clock.now_ns() + self.delay_ns;
        self.held.push_back((due, frame.to_vec()));
        Ok(())
    }

    fn flush(&mut self) -> (usize, usize) {
        if !self.held.is_empty() {
            let now = self.clock.now_ns();
            while let Some((due, frame)) = self.held.front() {
                if *due > now || self.inner.offer(frame).is_err() {
                    break;
                }
                self.held.pop_front();
            }
        }
        let (sent, left) = self.inner.flush();
        (sent, left + self.held.len())
    }

    fn buffered(&self) -> usize {
        self.inner.buffered() + self.held.len()
    }
}

/// A configured (not started) `net_ring` pair named `a` and `b` with `queues` queues each way;
/// `i` numbers it in errors.
fn ring_pair(
    eal: &Eal,
    pool: &Mempool,
    a: &str,
    b: &str,
    i: usize,
    queues: u16,
) -> Result<(Port, Port), WiringError> {
    let (mut a, mut b) = Port::ring_pair(eal, a, b, queues, u32::from(QUEUE_DEPTH))
        .map_err(|source| WiringError::RingPair { pair: i, source })?;
    for p in [&mut a, &mut b] {
        p.configure(queues, queues, QUEUE_DEPTH, QUEUE_DEPTH, pool)
            .map_err(|source| WiringError::RingPair { pair: i, source })?;
    }
    Ok((a, b))
}

impl Wiring {
    /// Opens one more port by name (as `PortPlan::Named` does) for a flood on a switch
    /// elsewhere: a port that no group of that switch names. It lands in [`Wiring::flood`].
    pub fn open_flood_port(&mut self, name: &str) -> Result<(), WiringError> {
        let device = if name.contains(',') {
            PortDevice::Vdev(name)
        } else {
            PortDevice::Existing(name)
        };
        let mut v = vec![open_port(&self.eal, device, setup(1), &self.pool)?];
        start_ports(&mut v)?;
        let p = v.pop().expect("one port");
        let i = self.ports.len();
        let flood = FloodPort {
            name: p.name().to_string(),
            mac: mac_of(&p, i),
            rx: DpdkRx::new(p.rx_queue(QueueId(0)).map_err(WiringError::Queue)?),
            tx: ByGroup::new(vec![DpdkTx::new(
                p.tx_queue(QueueId(0)).map_err(WiringError::Queue)?,
                self.pool.clone(),
            )]),
        };
        self.flood.push((flood, None));
        self.ports.push(p);
        Ok(())
    }

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
        Ok(close_ports(self.ports, &[&self.pool])?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use barrier_runtime::io::{mem_wire, RxQueue};

    fn received(rx: &mut impl RxQueue<Frame = Vec<u8>>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        rx.rx_burst(&mut out, 64);
        out
    }

    #[test]
    fn without_a_delay_frames_pass_straight_through() {
        let (tx, mut rx) = mem_wire(16);
        let mut d = DelayTx::new(tx, 0, Clock::new());
        d.offer(&[1, 2, 3]).unwrap();
        assert_eq!(d.flush(), (1, 0));
        assert_eq!(received(&mut rx), vec![vec![1, 2, 3]]);
    }

    #[test]
    fn delayed_frames_are_held_then_sent_in_order() {
        // A delay no run of this test reaches: held, counted as buffered, never sent.
        let (tx, mut rx) = mem_wire(16);
        let mut d = DelayTx::new(tx, 3_600_000_000_000, Clock::new());
        d.offer(&[1]).unwrap();
        d.offer(&[2]).unwrap();
        assert_eq!(d.buffered(), 2);
        assert_eq!(d.flush(), (0, 2));
        assert!(received(&mut rx).is_empty());
        // A short delay: both frames come out, in order, once it has passed (polled; the
        // bound is generous for a loaded machine).
        let (tx, mut rx) = mem_wire(16);
        let mut d = DelayTx::new(tx, 1_000_000, Clock::new());
        d.offer(&[1]).unwrap();
        d.offer(&[2]).unwrap();
        let mut got = Vec::new();
        for _ in 0..5000 {
            d.flush();
            got.extend(received(&mut rx));
            if got.len() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(got, vec![vec![1], vec![2]]);
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn a_full_delay_line_refuses() {
        let (tx, _rx) = mem_wire(16);
        let mut d = DelayTx::new(tx, 3_600_000_000_000, Clock::new());
        for _ in 0..DelayTx::<barrier_runtime::io::MemTx>::MAX_HELD {
            d.offer(&[0]).unwrap();
        }
        assert_eq!(d.offer(&[0]), Err(TxBlocked::Full));
    }
}
