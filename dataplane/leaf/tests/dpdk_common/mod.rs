//! Shared by the DPDK end-to-end tests (each test file is its own process with its own EAL):
//! leaves on `DpdkPort`s wired with `Port::ring_pair` to the real barrier-switch (the switch
//! crate's RX pollers, group table and scheduler, as a library), optionally through a lossy
//! "cable" that drops chosen frames in the network rather than in the transport.
#![allow(dead_code)]

use barrier_leaf::dpdk_transport::{DpdkOptions, DpdkPort, Idle};
use barrier_leaf::{Record, Transport as _};
use barrier_protocol::switch::GroupConfig;
use barrier_protocol::table::GroupTable;
use barrier_protocol::wire::FrameRepr;
use barrier_protocol::{GroupId, PortIdx, PortSet};
use barrier_runtime::clock::Clock;
use barrier_runtime::counters::LoopCounters;
use barrier_runtime::dpdk_io::{DpdkRx, DpdkTx};
use barrier_runtime::poll::{finish_all, run_loop, Idle as SwitchIdle, Poller};
use barrier_switch::engine::{build_switch, PortIo, SwitchStats};
use dpdk::{Eal, MbufBatch, Mempool, Port, QueueId};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Slots of each net_ring ring (a power of two); also the descriptor count asked for.
pub const RING: u32 = 1024;
/// MAC of the switch.
pub const SWITCH_MAC: [u8; 6] = [0x02, 0x5e, 0, 0, 0, 0xee];

/// This process's EAL, on the test flags of DESIGN.md (the file prefix is unique).
pub fn eal(tag: &str) -> Eal {
    let (eal, rest) = Eal::init(dpdk::test_args(tag, &["--log-level=*:warning"]))
        .expect("EAL init (run as root)");
    assert!(rest.is_empty());
    eal
}

/// One pool for every port and frame of a test: small mbufs (barrier frames are 60 bytes).
pub fn pool(eal: &Eal) -> Mempool {
    Mempool::new_pktmbuf(eal, "leaftest", 8191, 32, 512).unwrap()
}

/// Options for leaves that share two cores with a switch loop (and other tests): yield when idle.
pub fn leaf_opts() -> DpdkOptions {
    DpdkOptions {
        // Yield on every empty poll: the leaves share two cores with the switch's loops.
        idle: Idle::Yield { after: 0 },
        ..DpdkOptions::default()
    }
}

/// Configures (1 RX, 1 TX queue) and starts a port.
pub fn start(port: &mut Port, pool: &Mempool) {
    port.configure(1, 1, RING as u16, RING as u16, pool)
        .unwrap();
    port.start().unwrap();
}

/// Which way a frame crosses a cable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Leaf to switch (reduces).
    Up,
    /// Switch to leaf (releases).
    Down,
}

/// Decides per frame whether it crosses (`true`) or is lost (`false`).
pub type LossFn = Box<dyn FnMut(Dir, &FrameRepr) -> bool + Send>;

/// A cable with a loss model between a leaf's port and a switch port: two ring pairs and this
/// poller moving frames between their inner ends. Runs on the switch's loop.
pub struct LossyCable {
    to_leaf: Port,
    to_switch: Port,
    loss: LossFn,
    batch: MbufBatch<32>,
    out: MbufBatch<32>,
    /// Frames dropped by the loss model, per direction (up, down).
    pub dropped: Arc<[AtomicU64; 2]>,
}

impl LossyCable {
    fn carry(&mut self, dir: Dir) -> bool {
        let (from, to) = match dir {
            Dir::Up => (&mut self.to_leaf, &mut self.to_switch),
            Dir::Down => (&mut self.to_switch, &mut self.to_leaf),
        };
        if from.rx_burst(QueueId(0), &mut self.batch) == 0 {
            return false;
        }
        for m in self.batch.drain() {
            let keep = match FrameRepr::parse(m.data()) {
                Ok(r) => (self.loss)(dir, &r),
                Err(_) => true,
            };
            if keep {
                self.out.push(m).expect("out has room for a whole burst");
            } else {
                self.dropped[dir as usize].fetch_add(1, Ordering::Relaxed);
            }
        }
        // The rings hold 1023 frames and the tests keep far fewer in flight: a frame the ring
        // does not take would be a test bug, so insist.
        while !self.out.is_empty() {
            to.tx_burst(QueueId(0), &mut self.out);
        }
        true
    }
}

impl Poller for LossyCable {
    fn poll(&mut self, _now_ns: u64) -> bool {
        let up = self.carry(Dir::Up);
        self.carry(Dir::Down) || up
    }
}

/// A root switch for one group whose children are `n` leaves on DPDK ring ports.
pub struct Bed {
    /// The leaves' transports (port `i` of the switch is leaf `i`).
    pub leaves: Vec<DpdkPort>,
    pub stats: SwitchStats,
    /// Frames each cable dropped (up, down); `None` for a direct wire.
    pub cable_drops: Vec<Option<Arc<[AtomicU64; 2]>>>,
    pollers: Vec<Box<dyn Poller>>,
    switch_ports: Vec<Port>,
}

/// Builds the bed: leaf `i` gets a cable with `losses[i]` when that is `Some`, a direct ring
/// pair otherwise.
pub fn build(eal: &Eal, pool: &Mempool, group: u32, losses: Vec<Option<LossFn>>) -> Bed {
    build_with(eal, pool, group, losses, |c| c)
}

/// [`build`] with the root's group configuration changed by `config` (failure declaration,
/// epoch, ...). The switch's table is `bed.stats.table`, for management operations mid-test.
pub fn build_with(
    eal: &Eal,
    pool: &Mempool,
    group: u32,
    losses: Vec<Option<LossFn>>,
    config: impl FnOnce(GroupConfig) -> GroupConfig,
) -> Bed {
    let n = losses.len();
    let mut leaves = Vec::new();
    let mut ios = Vec::new();
    let mut switch_ports = Vec::new();
    let mut cables: Vec<Box<dyn Poller>> = Vec::new();
    let mut cable_drops = Vec::new();
    for (i, loss) in losses.into_iter().enumerate() {
        let (leaf_port, mut sw) = match loss {
            None => {
                cable_drops.push(None);
                Port::ring_pair(eal, &format!("l{i}"), &format!("s{i}"), 1, RING).unwrap()
            }
            Some(loss) => {
                let (leaf_port, mut to_leaf) =
                    Port::ring_pair(eal, &format!("l{i}"), &format!("cl{i}"), 1, RING).unwrap();
                let (mut to_switch, sw) =
                    Port::ring_pair(eal, &format!("cs{i}"), &format!("s{i}"), 1, RING).unwrap();
                start(&mut to_leaf, pool);
                start(&mut to_switch, pool);
                let dropped = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
                cable_drops.push(Some(dropped.clone()));
                cables.push(Box::new(LossyCable {
                    to_leaf,
                    to_switch,
                    loss,
                    batch: MbufBatch::new(),
                    out: MbufBatch::new(),
                    dropped,
                }));
                (leaf_port, sw)
            }
        };
        let leaf = DpdkPort::start(leaf_port, pool, &leaf_opts()).unwrap();
        start(&mut sw, pool);
        ios.push(PortIo {
            name: format!("leaf{i}"),
            rx: vec![DpdkRx::new(sw.rx_queue(QueueId(0)).unwrap())],
            tx: DpdkTx::new(sw.tx_queue(QueueId(0)).unwrap(), pool.clone()),
            peer_mac: leaf.mac().0,
            mac: None,
        });
        leaves.push(leaf);
        switch_ports.push(sw);
    }
    let table = GroupTable::new(group + 1);
    let children = (0..n as u8).fold(PortSet::empty(), |mut s, p| {
        s.insert(PortIdx::new(p).unwrap());
        s
    });
    table
        .configure(GroupId(group), config(GroupConfig::root(children)))
        .unwrap();
    let clock = Clock::new();
    let sw = build_switch("root", SWITCH_MAC, ios, Arc::new(table), clock.now_ns());
    let mut pollers: Vec<Box<dyn Poller>> = sw.rx.into_iter().map(|(_, _, p)| p).collect();
    pollers.push(sw.sched);
    pollers.extend(cables);
    Bed {
        leaves,
        stats: sw.stats,
        cable_drops,
        pollers,
        switch_ports,
    }
}

/// The switch's loop running on its own thread; `stop` ends it and shuts it down cleanly.
pub struct Running {
    quit: Arc<AtomicBool>,
    join: Option<JoinHandle<Vec<Box<dyn Poller>>>>,
    switch_ports: Vec<Port>,
}

impl Bed {
    /// Starts the switch loop on a thread of its own; the returned handle stops it. Take the
    /// leaves out of `self.leaves` to run them.
    pub fn start_switch(&mut self) -> Running {
        let quit = Arc::new(AtomicBool::new(false));
        let q = quit.clone();
        let pollers = std::mem::take(&mut self.pollers);
        let join = std::thread::spawn(move || {
            let counters = LoopCounters::default();
            run_loop(pollers, &q, Clock::new(), &counters, SwitchIdle::Spin)
        });
        Running {
            quit,
            join: Some(join),
            switch_ports: std::mem::take(&mut self.switch_ports),
        }
    }
}

impl Running {
    /// Stops the loop, flushes and drains the pollers (every frame back to the pool), drops
    /// them (releasing the queue handles and the cables' ports) and closes the switch's ports.
    pub fn stop(mut self) {
        self.shutdown();
        for p in self.switch_ports.drain(..) {
            p.close().expect("switch port closes");
        }
    }

    fn shutdown(&mut self) {
        self.quit.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let mut pollers = j.join().expect("switch loop");
            finish_all(&mut pollers);
        }
    }
}

impl Drop for Running {
    /// A panicking test still stops the switch thread (a scope would otherwise wait forever).
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// No leaf's release of a barrier comes before any leaf's first reduce of it; every leaf has
/// every sequence number `0..count` exactly once, in order.
pub fn assert_each_released_once_and_none_early(all: &[Vec<Record>], count: u32) {
    for (l, recs) in all.iter().enumerate() {
        let seqs: Vec<u32> = recs.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (0..count).collect::<Vec<_>>(), "leaf {l}");
    }
    for i in 0..count as usize {
        let last_arrival = all.iter().map(|r| r[i].first_reduce_ns).max().unwrap();
        for (l, r) in all.iter().enumerate() {
            assert!(
                r[i].release_ns >= last_arrival,
                "barrier {i}: leaf {l} released at {} before the last arrival at {last_arrival}",
                r[i].release_ns
            );
        }
    }
}
