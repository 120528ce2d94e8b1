//! One switch instance assembled from its parts: the shared group table, one RX poller per
//! receive queue, one link (`crate::link`) per RX poller, and the scheduler that owns every TX
//! queue. Where the
//! pollers run (which lcore, shared or not) is the caller's choice.

use crate::counters::{GroupCounters, RxCounters, SchedCounters, TxCounters};
use crate::exception::{ExceptionIo, KernelPoller, ToKernel};
use crate::io::{mem_wire, MemRx, MemTx, RxQueue, TxQueue};
use crate::link::Link;
use crate::policer::{PolicerRegister, PolicerSpec, QueuePolicer};
use crate::poll::Poller;
use crate::rx::RxPoller;
use crate::scheduler::{templates, SchedPoller, TxPort};
use crate::spec::GroupBlock;
use barrier_mgmt::snapshot::{report_counters, Names, Set, Snapshot};
use barrier_mgmt::Dataplane;
use barrier_protocol::table::{GroupTable, TableError};
use barrier_protocol::{GroupId, PortIdx};
use barrier_runtime::counters::LoopCounters;
use std::fmt::Write as _;
use std::sync::Arc;

/// The pipeline's counter names, as its snapshots carry them (`barrier_mgmt::snapshot`).
pub const NAMES: Names = Names {
    rx: RxCounters::NAMES,
    tx: TxCounters::NAMES,
    scheduler: SchedCounters::NAMES,
};

/// A group the table refused (a configuration that does not describe a tree).
#[derive(Debug, thiserror::Error)]
#[error("{group:?}: {source}")]
pub struct BuildTableError {
    pub group: GroupId,
    #[source]
    pub source: TableError,
}

/// An empty group table for groups `0..capacity`, its memory in transparent huge pages where
/// the kernel offers them (a million groups are 64 MiB: in 4 KiB pages every random-order
/// reduce would miss the TLB too; `perf/README.md`, "The hot path"). Without feature `dpdk` no
/// advice: the `madvise` call is FFI, which lives in ffi/ (`dpdk::advise_hugepages`).
pub fn new_table(capacity: u32) -> GroupTable {
    GroupTable::with_memory_advice(capacity, |_mem| {
        #[cfg(feature = "dpdk")]
        dpdk::advise_hugepages(_mem);
    })
}

/// A group table holding every group of `groups` (capacity: highest number + 1).
pub fn build_table(groups: &[GroupBlock]) -> Result<GroupTable, BuildTableError> {
    let cap = groups.iter().map(|g| g.numbers.end).max().unwrap_or(0);
    build_table_for(groups, cap)
}

/// A group table for groups `0..capacity` (at least the highest of `groups` + 1) holding every
/// group of `groups`: room for groups created at run time (`mgmt`).
pub fn build_table_for(
    groups: &[GroupBlock],
    capacity: u32,
) -> Result<GroupTable, BuildTableError> {
    let cap = groups
        .iter()
        .map(|g| g.numbers.end)
        .max()
        .unwrap_or(0)
        .max(capacity);
    let table = new_table(cap);
    for g in groups {
        for group in g.ids() {
            table
                .configure(group, g.config)
                .map_err(|source| BuildTableError { group, source })?;
        }
    }
    Ok(table)
}

/// Everything the management thread reads from one running switch.
#[derive(Clone)]
pub struct SwitchStats {
    pub name: String,
    pub port_names: Vec<String>,
    /// One entry per RX poller: (port index, its counters).
    pub rx: Vec<(usize, Arc<RxCounters>)>,
    /// Indexed by port.
    pub tx: Vec<Arc<TxCounters>>,
    pub sched: Arc<SchedCounters>,
    pub groups: Arc<GroupCounters>,
    pub table: Arc<GroupTable>,
    /// Straggler reports of the watched groups, if any are watched.
    pub watch: Option<Arc<barrier_mgmt::straggler::Watch>>,
    /// Each port's policer register (indexed by port): what management sets at run time,
    /// what the port's RX pollers follow.
    pub policers: Vec<Arc<PolicerRegister>>,
}

impl Dataplane for SwitchStats {
    fn name(&self) -> &str {
        &self.name
    }
    fn port_names(&self) -> &[String] {
        &self.port_names
    }
    fn table(&self) -> &dyn barrier_mgmt::Groups {
        &*self.table
    }
    fn snapshot(&self) -> Snapshot {
        SwitchStats::snapshot(self)
    }
    fn watch(&self) -> Option<&Arc<barrier_mgmt::straggler::Watch>> {
        self.watch.as_ref()
    }
    fn policer(&self, port: usize) -> Option<&PolicerRegister> {
        self.policers.get(port).map(|r| &**r)
    }
    fn rx_queues(&self, port: usize) -> usize {
        self.rx.iter().filter(|(p, _)| *p == port).count()
    }
}

impl SwitchStats {
    /// Every RX, TX and scheduler counter, each cell read once (`counters::Snapshot`).
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot_with_loops(None)
    }

    /// `snapshot` with the polling loops' counters too (`telemetry::LoopsCell`, once placed).
    pub fn snapshot_with_loops(&self, loops: Option<&[(u32, Arc<LoopCounters>)]>) -> Snapshot {
        let mut snap = Snapshot::new(self.name.clone(), self.port_names.clone(), NAMES);
        let mut queues = vec![0usize; self.port_names.len()];
        for (p, c) in &self.rx {
            let q = queues.get(*p).copied().unwrap_or(0);
            if let Some(n) = queues.get_mut(*p) {
                *n += 1;
            }
            snap.push(Set::Rx, Some(*p), Some(q), None, c.values());
        }
        for (p, c) in self.tx.iter().enumerate() {
            snap.push(Set::Tx, Some(p), None, None, c.values());
        }
        snap.push(Set::Scheduler, None, None, None, self.sched.values());
        snap.add_loops(loops.unwrap_or(&[]));
        snap
    }

    /// Counters summed per port and for the whole switch, non-zero ones only.
    pub fn report(&self) -> String {
        let mut out = report_counters(&self.snapshot());
        for line in self.groups.report(5).lines() {
            let _ = writeln!(out, "  {line}");
        }
        out
    }

    /// Sum of one RX counter over all pollers.
    pub fn rx_sum(&self, f: impl Fn(&RxCounters) -> &std::sync::atomic::AtomicU64) -> u64 {
        self.rx
            .iter()
            .map(|(_, c)| f(c).load(std::sync::atomic::Ordering::Relaxed))
            .sum()
    }

    /// Sum of one TX counter over all ports.
    pub fn tx_sum(&self, f: impl Fn(&TxCounters) -> &std::sync::atomic::AtomicU64) -> u64 {
        self.tx
            .iter()
            .map(|c| f(c).load(std::sync::atomic::Ordering::Relaxed))
            .sum()
    }
}

/// One port of a switch being built: its receive queues and its transmit queue.
pub struct PortIo<R, T> {
    pub name: String,
    pub rx: Vec<R>,
    pub tx: T,
    pub peer_mac: [u8; 6],
    /// Source MAC of frames sent on this port; None: the switch's.
    pub mac: Option<[u8; 6]>,
}

impl<R, T> PortIo<R, T> {
    /// A port with one receive queue that sends to broadcast from the switch's MAC.
    pub fn new(name: impl Into<String>, rx: R, tx: T) -> Self {
        PortIo {
            name: name.into(),
            rx: vec![rx],
            tx,
            peer_mac: [0xff; 6],
            mac: None,
        }
    }
}

/// A port on in-memory wires of `capacity` frames each way (`barrier_runtime::io::mem_wire`):
/// the port, the sending end of its receive wire (frames the port will receive) and the
/// receiving end of its transmit wire (frames it sent).
pub fn mem_port(name: impl Into<String>, capacity: usize) -> (PortIo<MemRx, MemTx>, MemTx, MemRx) {
    let (in_tx, in_rx) = mem_wire(capacity);
    let (out_tx, out_rx) = mem_wire(capacity);
    (PortIo::new(name, in_rx, out_tx), in_tx, out_rx)
}

/// A switch's pollers, to be placed on lcores.
pub struct SwitchPollers {
    /// One per RX queue: (port index, queue index, poller).
    pub rx: Vec<(usize, usize, Box<dyn Poller>)>,
    pub sched: Box<dyn Poller>,
    /// One per port with an exception path (`crate::exception`): (port index, the poller that
    /// sends the kernel's frames out of the port). Its counters are in the port's first RX
    /// queue's set; placing it on that queue's lcore keeps them on one core's cache.
    pub kernel: Vec<(usize, Box<dyn Poller>)>,
    pub stats: SwitchStats,
}

/// Assembles a switch from its ports (index = switch-local port number) and a filled table:
/// `SwitchBuilder::new(name, mac).build(ports, table, now_ns)`, the common case.
pub fn build_switch<R, T>(
    name: &str,
    mac: [u8; 6],
    ports: Vec<PortIo<R, T>>,
    table: Arc<GroupTable>,
    now_ns: u64,
) -> SwitchPollers
where
    R: RxQueue + 'static,
    T: TxQueue<Frame = R::Frame> + 'static,
{
    SwitchBuilder::new(name, mac).build(ports, table, now_ns)
}

/// What one switch is assembled with beyond its ports and table: its name and MAC (the
/// source of frames on ports without their own), and the optional parts.
pub struct SwitchBuilder<'a> {
    name: &'a str,
    mac: [u8; 6],
    watch: Option<Arc<barrier_mgmt::straggler::Watch>>,
    policers: &'a [Option<PolicerSpec>],
}

impl<'a> SwitchBuilder<'a> {
    /// A switch named `name` with MAC `mac`, nothing watched, no policer.
    pub fn new(name: &'a str, mac: [u8; 6]) -> Self {
        SwitchBuilder {
            name,
            mac,
            watch: None,
            policers: &[],
        }
    }

    /// Its RX pollers report the arrivals of the groups `watch` watches (straggler reports,
    /// `barrier_mgmt::straggler`).
    pub fn watch(mut self, watch: Option<Arc<barrier_mgmt::straggler::Watch>>) -> Self {
        self.watch = watch;
        self
    }

    /// A policer on the ports of `policers` (by port index; a missing entry or `None`: none at
    /// the start). Each of a port's RX queues gets its share of the port's rate and burst
    /// (`PolicerSpec::per_queue`). Every port gets a policer register (`SwitchStats::policers`)
    /// either way, so management can set or clear one on any port at run time.
    pub fn policers(mut self, policers: &'a [Option<PolicerSpec>]) -> Self {
        self.policers = policers;
        self
    }

    /// The switch's pollers over `ports` and `table`, its clocks starting at `now_ns`.
    pub fn build<R, T>(
        self,
        ports: Vec<PortIo<R, T>>,
        table: Arc<GroupTable>,
        now_ns: u64,
    ) -> SwitchPollers
    where
        R: RxQueue + 'static,
        T: TxQueue<Frame = R::Frame> + 'static,
    {
        self.build_with(ports, Vec::new(), table, now_ns)
    }

    /// `build` with exception paths (`crate::exception`): `exceptions[i]` is port `i`'s (a
    /// missing entry or `None`: none), with one `to_kernel` queue per RX queue of the port.
    pub fn build_with<R, T>(
        self,
        ports: Vec<PortIo<R, T>>,
        exceptions: Vec<Option<ExceptionIo<R, T>>>,
        table: Arc<GroupTable>,
        now_ns: u64,
    ) -> SwitchPollers
    where
        R: RxQueue + 'static,
        T: TxQueue<Frame = R::Frame> + 'static,
    {
        let SwitchBuilder {
            name,
            mac,
            watch,
            policers,
        } = self;
        assemble(name, mac, ports, exceptions, table, now_ns, watch, policers)
    }
}

#[allow(clippy::too_many_arguments)]
fn assemble<R, T>(
    name: &str,
    mac: [u8; 6],
    ports: Vec<PortIo<R, T>>,
    mut exceptions: Vec<Option<ExceptionIo<R, T>>>,
    table: Arc<GroupTable>,
    now_ns: u64,
    watch: Option<Arc<barrier_mgmt::straggler::Watch>>,
    policers: &[Option<PolicerSpec>],
) -> SwitchPollers
where
    R: RxQueue + 'static,
    T: TxQueue<Frame = R::Frame> + 'static,
{
    let groups = Arc::new(GroupCounters::new(table.clone()));
    let sched_counters = Arc::new(SchedCounters::default());
    let mut links = Vec::new();
    let mut rx_queues = Vec::new();
    let mut rx_stats = Vec::new();
    let mut tx_ports = Vec::new();
    let mut tx_stats = Vec::new();
    let mut port_names = Vec::new();
    let mut registers = Vec::new();
    for (i, port) in ports.into_iter().enumerate() {
        let register = Arc::new(PolicerRegister::new(policers.get(i).copied().flatten()));
        registers.push(register.clone());
        rx_queues.push((i, port.rx, register));
        let c = Arc::new(TxCounters::default());
        tx_stats.push(c.clone());
        tx_ports.push(TxPort {
            queue: port.tx,
            peer_mac: port.peer_mac,
            src_mac: port.mac.unwrap_or(mac),
            counters: c,
        });
        port_names.push(port.name);
    }
    // The RX pollers build sends from the scheduler's templates: the same bytes either way.
    let templates = templates(&tx_ports);
    let mut rx = Vec::new();
    let mut kernel = Vec::new();
    exceptions.resize_with(rx_queues.len().max(exceptions.len()), || None);
    for ((i, queues, register), exception) in rx_queues.into_iter().zip(exceptions) {
        let idx = PortIdx::new(i as u8).expect("at most 64 ports");
        let nq = u16::try_from(queues.len()).unwrap_or(u16::MAX);
        let (mut to_kernel, from_kernel) = match exception {
            Some(x) => {
                assert_eq!(
                    x.to_kernel.len(),
                    queues.len(),
                    "port {i}: one exception TX queue per RX queue"
                );
                (x.to_kernel.into_iter(), Some((x.from_kernel, x.out)))
            }
            None => (Vec::new().into_iter(), None),
        };
        let mut first = None;
        for (qi, q) in queues.into_iter().enumerate() {
            let link = Arc::new(Link::default());
            let c = Arc::new(RxCounters::default());
            links.push(link.clone());
            rx_stats.push((i, c.clone()));
            first.get_or_insert_with(|| c.clone());
            let poller = RxPoller::new(idx, q, table.clone(), link, c)
                .with_templates(Some(templates.clone()))
                .with_watch(watch.clone())
                .with_policer(Some(QueuePolicer::new(register.clone(), nq, now_ns)))
                .with_exception(
                    to_kernel
                        .next()
                        .map(|t| Box::new(t) as Box<dyn ToKernel<R::Frame>>),
                );
            rx.push((i, qi, Box::new(poller) as Box<dyn Poller>));
        }
        if let (Some((from, out)), Some(c)) = (from_kernel, first) {
            let poller = KernelPoller::new(from, out, c);
            kernel.push((i, Box::new(poller) as Box<dyn Poller>));
        }
    }
    let sched = SchedPoller::new(
        links,
        table.clone(),
        tx_ports,
        sched_counters.clone(),
        now_ns,
    );
    SwitchPollers {
        rx,
        sched: Box::new(sched),
        kernel,
        stats: SwitchStats {
            name: name.to_string(),
            port_names,
            rx: rx_stats,
            tx: tx_stats,
            sched: sched_counters,
            groups,
            table,
            watch,
            policers: registers,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{RxQueue, TxQueue};
    use barrier_protocol::switch::GroupConfig;
    use barrier_protocol::wire::{Flags, FrameRepr, FrameTemplate, Kind, MacAddr, FRAME_LEN};
    use barrier_protocol::{Epoch, PortSet, Seq};

    /// A release decided in one run and still in the link to the scheduler (built in the
    /// reduce's buffer) when management resets the group into a new epoch: it goes out in the
    /// epoch it was decided in, so the new run's members drop it as `other_epoch`
    /// (docs/protocol.md, "The rest of a run's state"), and the new run starts fresh.
    #[test]
    fn a_decision_in_the_link_across_a_reset_keeps_its_epoch() {
        let (port, mut to_switch, mut from_switch) = mem_port("a", 8);
        let table = Arc::new(GroupTable::new(1));
        let p0 = PortIdx::new(0).unwrap();
        let old = GroupConfig::root(PortSet::single(p0)).with_epoch(Epoch(1));
        table.configure(GroupId(0), old).unwrap();
        let mut sw = build_switch("s", [2, 0, 0, 0, 0, 1], vec![port], table.clone(), 0);
        let mut reduce = [0u8; FRAME_LEN];
        FrameTemplate::new(MacAddr::BROADCAST, MacAddr([2, 0, 0, 0, 0, 9])).write(
            &mut reduce,
            Kind::Reduce,
            Flags::empty(),
            GroupId(0),
            Epoch(1),
            Seq(5),
        );
        to_switch.offer(&reduce).unwrap();
        to_switch.flush();
        sw.rx[0].2.poll(0);
        table
            .configure(GroupId(0), old.with_epoch(Epoch(2)))
            .unwrap();
        sw.sched.poll(0);
        let mut out = Vec::new();
        from_switch.rx_burst(&mut out, 8);
        let sent: Vec<_> = out
            .iter()
            .map(|f| {
                let r = FrameRepr::parse(f).unwrap();
                (r.kind, r.epoch, r.seq)
            })
            .collect();
        assert_eq!(sent, [(Kind::Release, Epoch(1), Seq(5))]);
        assert_eq!(sw.stats.tx_sum(|c| &c.built_in_place), 1);
        assert_eq!(
            table.state(GroupId(0)),
            Some(barrier_protocol::switch::GroupState::fresh())
        );
    }
}
