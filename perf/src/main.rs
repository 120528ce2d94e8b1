//! barrier-perf: the measuring program of the performance suite (`perf/run.sh`, perf/README.md).
//! Every subcommand runs its baseline and its subject side by side in one process and writes
//! one JSON object (and hdrhistogram logs) into `--out`:
//!
//! - `alone`: the full switch path (parse, table, actions, scheduler, frame build, TX) against a
//!   bare `rx_burst` + free loop on the same input, on DPDK `net_ring` port pairs. The input is
//!   built before the clock starts: in chunks written into the ports' RX rings, each chunk then
//!   timed until the switch has nothing left to do. Two shapes: hot (small chunks, a small pool:
//!   the same mbufs come round again while in cache, as in testpmd's loop) and cold (chunks of
//!   many distinct mbufs, far larger than the last-level cache).
//! - `scale`: the same measurement at 32 .. 1,048,576 groups and fan-in 2 .. 64, on software RX
//!   rings of mbufs (a `net_ring` needs a port per child and DPDK allows 32 ports here), every
//!   group running barriers in a random order each round, one burst a port per chunk (the same
//!   hot input at every point, so only the state varies); bytes of state per group; the
//!   switch's own latency, frame in to frame out.
//! - `tree`: barrier round latency in in-process trees (the demo, `barrier-demo`'s tree:
//!   switches and emulated leaves on `net_ring` wires).
//!
//! Nothing here changes the switch: it is assembled with `barrier_switch::engine::build_switch`
//! as `barrier-switch run` assembles it, with the scheduler on the RX lcore (reduced mode).

use barrier_gen::hdrlog::HdrLog;
use barrier_protocol::switch::GroupConfig;
use barrier_protocol::table::GroupTable;
use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{Epoch, GroupId, PortSet, Seq};
use barrier_runtime::clock::Clock;
use barrier_runtime::dpdk_io::{DpdkRx, DpdkTx, MbufFrame, MbufTxBuffer};
use barrier_runtime::io::{RxQueue, TxBlocked, TxQueue, BURST};
use barrier_runtime::poll::Poller;
use barrier_switch::engine::{build_switch, PortIo};
use clap::{Parser, Subcommand};
use dpdk::{Eal, Mbuf, MbufBatch, Mempool, Port, QueueId};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod genmax;
mod probe;
mod xdp;

#[derive(Parser)]
#[command(
    name = "barrier-perf",
    about = "The performance suite's measurements (run by perf/run.sh)"
)]
struct Cli {
    /// Folder for the JSON result and hdrhistogram logs.
    #[arg(long, global = true, default_value = ".")]
    out: PathBuf,
    /// Seconds of timed work per measured case (split over the repetitions).
    #[arg(long, global = true, default_value_t = 1.0)]
    secs: f64,
    /// Repetitions of each case, baseline and subject alternating; the median is reported.
    #[arg(long, global = true, default_value_t = 3)]
    reps: usize,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Switch alone vs bare RX loop on net_ring ports, hot and cold shapes (alone.json).
    Alone {
        #[arg(long, default_value_t = 2)]
        fanin: usize,
        #[arg(long, default_value_t = 1024)]
        groups: u32,
    },
    /// Groups and fan-in sweeps, bytes per group, switch latency (scale.json).
    Scale {
        /// Group counts (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "32,1024,65536,1048576")]
        groups: Vec<u32>,
        /// Fan-ins at 1,024 groups (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "2,4,8,16,32,64")]
        fanin: Vec<usize>,
        /// Barriers sampled for the frame-in to frame-out histogram.
        #[arg(long, default_value_t = 100_000)]
        latency_samples: u64,
    },
    /// Barrier round latency in in-process trees (tree.json).
    Tree {
        /// Tree shapes, fan-outs root first, separated by ';' ("4;2,2;2,2,2").
        #[arg(long, default_value = "4;2,2;2,2,2")]
        shapes: String,
        /// Barriers per tree.
        #[arg(long, default_value_t = 100_000)]
        count: u64,
    },
    /// Frame-in to frame-out latency of a system in another process at half its own peak,
    /// over one port (net_memif in the suite; probe-LABEL.json). Needs hugepages.
    Probe {
        /// The system under test's name in the file (testpmd, switch).
        #[arg(long)]
        label: String,
        /// The port, created as a vdev (`net_memif0,role=client,socket=/run/x.sock`).
        #[arg(long)]
        port: String,
        /// Groups 0..N, one frame in flight each.
        #[arg(long, default_value_t = 1024)]
        groups: u32,
        /// The measured phase's rate as a fraction of the peak just measured.
        #[arg(long, default_value_t = 0.5)]
        load: f64,
        /// The frames' epoch.
        #[arg(long, default_value_t = barrier_protocol::Epoch::DEFAULT.0)]
        epoch: u32,
        /// EAL --lcores for the probe's one lcore (`0@0`: lcore 0 on CPU 0).
        #[arg(long, default_value = "0@0")]
        lcores: String,
        /// EAL --file-prefix (its hugepage files are /dev/hugepages/PREFIXmap_*).
        #[arg(long, default_value = "nb-probe")]
        file_prefix: String,
    },
    /// The XDP switch's frames/s on one CPU against an XDP reflector, both on one veth pair,
    /// loaded by BPF_PROG_RUN in live-frames mode; the group slot's size (xdp.json). Root.
    Xdp {
        /// Groups = 2^N (root groups with one child; the leaves cycle through them).
        #[arg(long, default_value_t = 10)]
        groups_shift: u32,
        /// Frames per BPF_PROG_RUN batch (1..=256; the kernel's default 64).
        #[arg(long, default_value_t = 64)]
        batch: u32,
        /// CPU to run on (default: the last one this process may use).
        #[arg(long)]
        cpu: Option<usize>,
    },
    /// barrier-gen's frames/s on one lcore against a reflector on another (genmax.json).
    Genmax {
        #[arg(long, default_value_t = 4)]
        ports: usize,
        #[arg(long, default_value_t = 4096)]
        groups: u32,
    },
}

// ---------------------------------------------------------------------------------------------
// Input: reduce frames of every group, in rounds.

const SRC: MacAddr = MacAddr([2, 0, 0, 0, 0, 9]);

fn reduce(group: u32, seq: u32) -> [u8; FRAME_LEN] {
    let mut b = [0u8; FRAME_LEN];
    FrameRepr {
        dst: MacAddr::BROADCAST,
        src: SRC,
        kind: Kind::Reduce,
        flags: Flags::empty(),
        group: GroupId(group),
        epoch: Epoch::DEFAULT,
        seq: Seq(seq),
        tx_timestamp: None,
    }
    .emit(&mut b);
    b
}

/// Every group once per round (seq = round), in a new random order each round. A chunk is a
/// slice of one round: within it every group appears at most once, so the order in which the
/// switch takes the ports' bursts cannot put a reduce ahead of its barrier.
struct Stream {
    perm: Vec<u32>,
    round: u32,
    pos: usize,
    rng: u64,
}

impl Stream {
    fn new(groups: u32, seed: u64) -> Self {
        let mut s = Stream {
            perm: (0..groups).collect(),
            round: 0,
            pos: 0,
            rng: seed | 1,
        };
        s.shuffle();
        s
    }
    fn next_u64(&mut self) -> u64 {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn shuffle(&mut self) {
        for i in (1..self.perm.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            self.perm.swap(i, j);
        }
    }
    fn groups(&self) -> u32 {
        self.perm.len() as u32
    }
    /// Up to `n` groups of the current round, and the round's seq.
    fn chunk(&mut self, n: usize) -> (Vec<u32>, u32) {
        if self.pos == self.perm.len() {
            self.round += 1;
            self.pos = 0;
            self.shuffle();
        }
        let end = (self.pos + n).min(self.perm.len());
        let g = self.perm[self.pos..end].to_vec();
        self.pos = end;
        (g, self.round)
    }
}

// ---------------------------------------------------------------------------------------------
// Software RX/TX queues of mbufs (no port limit): a shared deque per port.

type Shared = Arc<Mutex<VecDeque<Mbuf>>>;

struct SoftRx {
    q: Shared,
    batch: MbufBatch<BURST>,
}

impl RxQueue for SoftRx {
    type Frame = MbufFrame;
    #[inline]
    fn rx_burst(&mut self, out: &mut Vec<MbufFrame>, max: usize) {
        let mut q = self.q.lock().unwrap();
        let n = max.min(q.len());
        out.extend(q.drain(..n).map(MbufFrame));
    }
    #[inline]
    fn recycle(&mut self, frames: &mut Vec<MbufFrame>) {
        // As DpdkRx: one rte_pktmbuf_free_bulk per burst.
        for f in frames.drain(..) {
            if let Err(m) = self.batch.push(f.0) {
                self.batch.clear();
                let _ = self.batch.push(m);
            }
        }
        self.batch.clear();
    }
}

struct SoftTx {
    /// The same buffer as the switch's DPDK TX queues: only the device behind it differs.
    buf: MbufTxBuffer,
    sink: Shared,
    /// TSC of the last flush that sent something.
    stamp: Arc<AtomicU64>,
}

impl TxQueue for SoftTx {
    type Frame = MbufFrame;
    #[inline]
    fn offer_frame(&mut self, frame: MbufFrame) -> Result<(), (TxBlocked, MbufFrame)> {
        self.buf.offer_frame(frame)
    }
    #[inline]
    fn offer(&mut self, frame: &[u8]) -> Result<(), TxBlocked> {
        self.buf.offer(frame)
    }
    #[inline]
    fn offer_with<const N: usize>(
        &mut self,
        fill: impl FnOnce(&mut [u8; N]),
    ) -> Result<(), TxBlocked> {
        self.buf.offer_with(fill)
    }
    #[inline]
    fn flush(&mut self) -> (usize, usize) {
        let n = self.buf.batch.len();
        if n > 0 {
            self.sink.lock().unwrap().extend(self.buf.batch.drain());
            self.stamp.store(dpdk::tsc(), Relaxed);
        }
        (n, 0)
    }
    fn buffered(&self) -> usize {
        self.buf.batch.len()
    }
}

// ---------------------------------------------------------------------------------------------
// Rigs: where the input is written and the output taken away, outside the clock.

trait Rig {
    type R: RxQueue + 'static;
    type T: TxQueue<Frame = <Self::R as RxQueue>::Frame> + 'static;
    fn ports(&self) -> usize;
    /// Fresh RX handles for a bare loop.
    fn rx(&mut self) -> Vec<Self::R>;
    /// Fresh ports for a switch (RX and TX handles).
    fn switch_ports(&mut self) -> Vec<PortIo<Self::R, Self::T>>;
    /// Write one reduce per group of `groups` at `seq` into port `p`'s RX.
    fn fill(&mut self, p: usize, groups: &[u32], seq: u32);
    /// Take away (free) everything the switch sent; returns the count.
    fn drain_out(&mut self) -> u64;
}

struct SoftRig {
    pool: Mempool,
    rx: Vec<Shared>,
    tx: Vec<Shared>,
    stamp: Arc<AtomicU64>,
}

impl SoftRig {
    fn new(eal: &Eal, name: &str, ports: usize, mbufs: u32) -> SoftRig {
        let pool = Mempool::new_pktmbuf(eal, name, mbufs, 256, 256).expect("mempool");
        SoftRig {
            pool,
            rx: (0..ports).map(|_| Shared::default()).collect(),
            tx: (0..ports).map(|_| Shared::default()).collect(),
            stamp: Arc::new(AtomicU64::new(0)),
        }
    }
}

fn alloc_frame(pool: &Mempool, bytes: &[u8]) -> Mbuf {
    Mbuf::from_slice(pool, bytes).expect("mempool sized for the chunk")
}

impl Rig for SoftRig {
    type R = SoftRx;
    type T = SoftTx;
    fn ports(&self) -> usize {
        self.rx.len()
    }
    fn rx(&mut self) -> Vec<SoftRx> {
        self.rx
            .iter()
            .map(|q| SoftRx {
                q: q.clone(),
                batch: MbufBatch::default(),
            })
            .collect()
    }
    fn switch_ports(&mut self) -> Vec<PortIo<SoftRx, SoftTx>> {
        let rx = self.rx();
        rx.into_iter()
            .enumerate()
            .map(|(i, r)| {
                PortIo::new(
                    format!("p{i}"),
                    r,
                    SoftTx {
                        buf: MbufTxBuffer::new(self.pool.clone()),
                        sink: self.tx[i].clone(),
                        stamp: self.stamp.clone(),
                    },
                )
            })
            .collect()
    }
    fn fill(&mut self, p: usize, groups: &[u32], seq: u32) {
        let mut q = self.rx[p].lock().unwrap();
        for &g in groups {
            q.push_back(alloc_frame(&self.pool, &reduce(g, seq)));
        }
    }
    fn drain_out(&mut self) -> u64 {
        let mut n = 0;
        for q in &self.tx {
            let mut q = q.lock().unwrap();
            n += q.len() as u64;
            q.clear();
        }
        n
    }
}

/// net_ring port pairs: the switch's side and our side (which writes the input into the
/// switch's RX ring with tx_burst and takes the output from the other ring).
struct RingRig {
    pool: Mempool,
    sw: Vec<Port>,
    ours_tx: Vec<dpdk::TxQueue>,
    ours_rx: Vec<dpdk::RxQueue>,
    _ours: Vec<Port>,
}

impl RingRig {
    fn new(eal: &Eal, tag: &str, ports: usize, ring: u32, mbufs: u32) -> RingRig {
        let pool =
            Mempool::new_pktmbuf(eal, &format!("{tag}pool"), mbufs, 256, 256).expect("mempool");
        let mut sw = Vec::new();
        let mut ours = Vec::new();
        let mut ours_tx = Vec::new();
        let mut ours_rx = Vec::new();
        for i in 0..ports {
            let (mut a, mut b) =
                Port::ring_pair(eal, &format!("{tag}s{i}"), &format!("{tag}o{i}"), 1, ring)
                    .expect("ring pair");
            for p in [&mut a, &mut b] {
                p.configure(1, 1, 1024, 1024, &pool).expect("configure");
                p.start().expect("start");
            }
            ours_tx.push(b.tx_queue(QueueId(0)).expect("tx queue"));
            ours_rx.push(b.rx_queue(QueueId(0)).expect("rx queue"));
            sw.push(a);
            ours.push(b);
        }
        RingRig {
            pool,
            sw,
            ours_tx,
            ours_rx,
            _ours: ours,
        }
    }
}

impl Rig for RingRig {
    type R = DpdkRx;
    type T = DpdkTx;
    fn ports(&self) -> usize {
        self.sw.len()
    }
    fn rx(&mut self) -> Vec<DpdkRx> {
        self.sw
            .iter()
            .map(|p| DpdkRx::new(p.rx_queue(QueueId(0)).expect("rx queue free")))
            .collect()
    }
    fn switch_ports(&mut self) -> Vec<PortIo<DpdkRx, DpdkTx>> {
        self.sw
            .iter()
            .enumerate()
            .map(|(i, p)| {
                PortIo::new(
                    format!("ring{i}"),
                    DpdkRx::new(p.rx_queue(QueueId(0)).expect("rx queue free")),
                    DpdkTx::new(
                        p.tx_queue(QueueId(0)).expect("tx queue free"),
                        self.pool.clone(),
                    ),
                )
            })
            .collect()
    }
    fn fill(&mut self, p: usize, groups: &[u32], seq: u32) {
        let mut batch: MbufBatch<BURST> = MbufBatch::default();
        for &g in groups {
            if batch.is_full() {
                self.push(p, &mut batch);
            }
            let _ = batch.push(alloc_frame(&self.pool, &reduce(g, seq)));
        }
        self.push(p, &mut batch);
    }
    fn drain_out(&mut self) -> u64 {
        let mut n = 0;
        let mut batch: MbufBatch<BURST> = MbufBatch::default();
        for q in &mut self.ours_rx {
            loop {
                let got = q.rx_burst(&mut batch);
                batch.clear();
                if got == 0 {
                    break;
                }
                n += got as u64;
            }
        }
        n
    }
}

impl RingRig {
    fn push(&mut self, p: usize, batch: &mut MbufBatch<BURST>) {
        while !batch.is_empty() {
            if self.ours_tx[p].tx_burst(batch) == 0 {
                panic!("input ring full: ring size below the chunk");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The timed loops.

/// Runs the switch's pollers (RX pollers, then the scheduler, as one lcore does) until a pass
/// finds no work. Returns TSC ticks.
fn run_switch(rx: &mut [Box<dyn Poller>], sched: &mut dyn Poller, clock: &Clock) -> u64 {
    let t0 = dpdk::tsc();
    loop {
        let now = clock.now_ns();
        let mut busy = false;
        for p in rx.iter_mut() {
            busy |= p.poll(now);
        }
        busy |= sched.poll(now);
        if !busy {
            break;
        }
    }
    dpdk::tsc() - t0
}

/// rx_burst + free on every queue until all are empty. Returns (frames, TSC ticks).
fn run_bare<Q: RxQueue>(qs: &mut [Q], v: &mut Vec<Q::Frame>) -> (u64, u64) {
    let t0 = dpdk::tsc();
    let mut total = 0u64;
    loop {
        let mut n = 0;
        for q in qs.iter_mut() {
            q.rx_burst(v, BURST);
            n += v.len();
            q.recycle(v);
        }
        total += n as u64;
        if n == 0 {
            break;
        }
    }
    (total, dpdk::tsc() - t0)
}

#[derive(Clone, Copy, Debug, Default)]
struct Rate {
    frames: u64,
    ticks: u64,
}

impl Rate {
    fn fps(&self) -> f64 {
        if self.ticks == 0 {
            return 0.0;
        }
        self.frames as f64 * dpdk::tsc_hz() as f64 / self.ticks as f64
    }
}

/// A table with every group a root over ports 0..fanin.
fn root_table(groups: u32, fanin: usize) -> Arc<GroupTable> {
    let children = if fanin >= 64 {
        PortSet(u64::MAX)
    } else {
        PortSet((1u64 << fanin) - 1)
    };
    let t = barrier_switch::engine::new_table(groups);
    for g in 0..groups {
        t.configure(GroupId(g), GroupConfig::root(children))
            .expect("configure");
    }
    Arc::new(t)
}

struct Case<G: Rig> {
    rig: G,
    table: Arc<GroupTable>,
    clock: Clock,
    /// Frames per port per chunk.
    chunk: usize,
    profiler: Profiler,
}

/// `perf record --control fifo:CTL,ACK -D -1` started with PERF_CTL_FIFO and PERF_ACK_FIFO
/// set: the profile then covers the switch's timed loops only (not the input being written,
/// not the bare loop). Unset: nothing.
struct Profiler {
    fifos: Option<(std::fs::File, std::fs::File)>,
}

impl Profiler {
    fn from_env() -> Profiler {
        let open = || -> Option<(std::fs::File, std::fs::File)> {
            let ctl = std::env::var_os("PERF_CTL_FIFO")?;
            let ack = std::env::var_os("PERF_ACK_FIFO")?;
            let c = std::fs::OpenOptions::new().write(true).open(ctl).ok()?;
            let a = std::fs::File::open(ack).ok()?;
            Some((c, a))
        };
        Profiler { fifos: open() }
    }
    fn set(&mut self, on: bool) {
        use std::io::{Read, Write};
        if let Some((c, a)) = &mut self.fifos {
            let _ = c.write_all(if on { b"enable\n" } else { b"disable\n" });
            let mut buf = [0u8; 5];
            let _ = a.read_exact(&mut buf);
        }
    }
}

impl<G: Rig> Case<G> {
    fn fill_chunk(&mut self, s: &mut Stream) -> u64 {
        let (groups, seq) = s.chunk(self.chunk);
        for p in 0..self.rig.ports() {
            self.rig.fill(p, &groups, seq);
        }
        (groups.len() * self.rig.ports()) as u64
    }

    fn bare(&mut self, s: &mut Stream, budget_ticks: u64) -> Rate {
        let mut qs = self.rig.rx();
        let mut v = Vec::with_capacity(BURST);
        let mut r = Rate::default();
        let round = u64::from(s.groups()) * self.rig.ports() as u64;
        while r.ticks < budget_ticks || (budget_ticks > 1 && r.frames < round) {
            let want = self.fill_chunk(s);
            let (n, t) = run_bare(&mut qs, &mut v);
            assert_eq!(n, want, "bare loop lost frames");
            r.frames += n;
            r.ticks += t;
        }
        r
    }

    /// Returns the rate and the frames sent (releases).
    fn switch(&mut self, s: &mut Stream, budget_ticks: u64) -> (Rate, u64) {
        let ports = self.rig.switch_ports();
        let sw = build_switch(
            "perf",
            [2, 0, 0, 0, 0, 1],
            ports,
            self.table.clone(),
            self.clock.now_ns(),
        );
        let mut rx: Vec<Box<dyn Poller>> = sw.rx.into_iter().map(|(_, _, p)| p).collect();
        let mut sched = sw.sched;
        let mut r = Rate::default();
        let mut out = 0;
        // At least one full round (every group one barrier) per measurement.
        let round = u64::from(s.groups()) * self.rig.ports() as u64;
        while r.ticks < budget_ticks || (budget_ticks > 1 && r.frames < round) {
            r.frames += self.fill_chunk(s);
            self.profiler.set(true);
            r.ticks += run_switch(&mut rx, &mut *sched, &self.clock);
            self.profiler.set(false);
            out += self.rig.drain_out();
        }
        let parse_drops = sw.stats.rx_sum(|c| &c.drop_unknown_group);
        assert_eq!(parse_drops, 0, "frames for unknown groups");
        drop(rx);
        drop(sched);
        (r, out)
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

/// Bare and switch alternately, `reps` times; medians of frames/s.
/// One case measured side by side: bare and switch alternately, one repetition at a time, so
/// that several cases can be interleaved repetition by repetition (a change of the machine's
/// load then touches every case alike).
struct Sweep<G: Rig> {
    case: Case<G>,
    groups: u32,
    with_bare: bool,
    sw_stream: Stream,
    bare_stream: Stream,
    bare: Vec<f64>,
    sw: Vec<f64>,
    frames_in: u64,
    frames_out: u64,
}

impl<G: Rig> Sweep<G> {
    fn new(rig: G, table: Arc<GroupTable>, groups: u32, chunk: usize, with_bare: bool) -> Self {
        Sweep {
            case: Case {
                rig,
                table,
                clock: Clock::from_counter(dpdk::tsc, dpdk::tsc_hz()),
                chunk,
                profiler: Profiler::from_env(),
            },
            groups,
            with_bare,
            sw_stream: Stream::new(groups, 7),
            bare_stream: Stream::new(groups, 11),
            bare: Vec::new(),
            sw: Vec::new(),
            frames_in: 0,
            frames_out: 0,
        }
    }

    /// One chunk each, not counted (page faults, first touch of the table).
    fn warm(&mut self) {
        if self.with_bare {
            self.case.bare(&mut self.bare_stream, 1);
        }
        self.case.switch(&mut self.sw_stream, 1);
    }

    fn rep(&mut self, budget: u64) {
        if self.with_bare {
            let r = self.case.bare(&mut self.bare_stream, budget);
            self.bare.push(r.fps());
        }
        let (r, out) = self.case.switch(&mut self.sw_stream, budget);
        self.frames_in += r.frames;
        self.frames_out += out;
        self.sw.push(r.fps());
    }

    /// Medians of frames/s.
    fn result(&self) -> Value {
        let (mut bare, mut sw) = (self.bare.clone(), self.sw.clone());
        let (b, s) = (median(&mut bare), median(&mut sw));
        json!({
            "groups": self.groups,
            "chunk_frames_per_port": self.case.chunk,
            "bare_fps": if self.with_bare { Value::from(b) } else { Value::Null },
            "switch_fps": s,
            "switch_fps_reps": self.sw,
            "bare_fps_reps": self.bare,
            "ratio_switch_bare": if self.with_bare && b > 0.0 { Value::from(s / b) } else { Value::Null },
            "switch_frames_in": self.frames_in,
            "switch_frames_out": self.frames_out,
            "rounds": self.sw_stream.round,
        })
    }
}

fn budget_ticks(secs: f64, reps: usize) -> u64 {
    (secs / reps as f64 * dpdk::tsc_hz() as f64) as u64
}

/// Bare and switch alternately, `reps` times; medians of frames/s.
fn side_by_side<G: Rig>(
    rig: G,
    table: Arc<GroupTable>,
    groups: u32,
    chunk: usize,
    secs: f64,
    reps: usize,
) -> Value {
    let mut s = Sweep::new(rig, table, groups, chunk, true);
    s.warm();
    for _ in 0..reps {
        s.rep(budget_ticks(secs, reps));
    }
    s.result()
}

/// Several cases, interleaved: every repetition runs each case once, in turn.
fn interleaved<G: Rig>(cases: &mut [Sweep<G>], secs: f64, reps: usize) {
    for c in cases.iter_mut() {
        c.warm();
    }
    for _ in 0..reps {
        for c in cases.iter_mut() {
            c.rep(budget_ticks(secs, reps));
        }
    }
}

fn now_utc() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn eal(prog: &str, mem_mb: u32) -> Eal {
    let mem = mem_mb.to_string();
    let mut args = dpdk::test_args(prog, &["-l", "0", "-m", &mem, "--log-level=*:warning"]);
    // NB_PERF_HUGEPAGES=1: the mempools in 2 MB pages, as a deployed switch has them (the
    // machine must have them reserved and hugetlbfs mounted); default 4 KB pages, as tests run.
    if std::env::var_os("NB_PERF_HUGEPAGES").is_some_and(|v| v == "1") {
        args.retain(|a| a != "--no-huge");
    }
    match Eal::init(args) {
        Ok((e, _)) => e,
        Err(e) => {
            eprintln!("barrier-perf: EAL: {e} (DPDK needs root)");
            std::process::exit(1);
        }
    }
}

fn write_json(out: &Path, name: &str, v: &Value) {
    std::fs::create_dir_all(out).expect("create --out");
    let p = out.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(v).unwrap() + "\n").expect("write JSON");
    eprintln!("barrier-perf: wrote {}", p.display());
}

fn alone(cli: &Cli, fanin: usize, groups: u32) {
    let started = now_utc();
    let eal = eal("perf-alone", 1024);
    let mut shapes = Vec::new();
    // hot: 256 frames a port per chunk, a pool of 8K mbufs that keeps coming round in cache;
    // cold: 64K a port per chunk (with the releases, about 50 MB of mbufs per chunk, over the
    // 32 MB last-level cache), from a pool four times that.
    for (shape, chunk, ring, mbufs) in [
        ("hot", 256usize, 1024u32, 8191u32),
        ("cold", 65536, 131072, 4 * 65536 * fanin as u32 - 1),
    ] {
        let rig = RingRig::new(&eal, &shape[..1], fanin, ring, mbufs);
        let table = root_table(groups, fanin);
        eprintln!("barrier-perf alone: {shape}, fan-in {fanin}, {groups} groups");
        let mut v = side_by_side(rig, table, groups, chunk, cli.secs, cli.reps);
        v["shape"] = json!(shape);
        v["mbufs"] = json!(mbufs);
        eprintln!(
            "  bare {:.2} Mfps, switch {:.2} Mfps, ratio {:.3}",
            v["bare_fps"].as_f64().unwrap_or(0.0) / 1e6,
            v["switch_fps"].as_f64().unwrap_or(0.0) / 1e6,
            v["ratio_switch_bare"].as_f64().unwrap_or(0.0)
        );
        shapes.push(v);
    }
    write_json(
        &cli.out,
        "alone.json",
        &json!({
            "started_utc": started,
            "device": "net_ring port pairs (rte_eth_from_rings), one queue each",
            "fanin": fanin,
            "groups": groups,
            "lcore": "one thread: the switch's RX pollers and scheduler in one loop (reduced mode)",
            "shapes": shapes,
        }),
    );
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn scale(cli: &Cli, groups: &[u32], fanins: &[usize], latency_samples: u64) {
    let started = now_utc();
    let eal = eal("perf-scale", 1536);
    // The groups sweep: every case built first (the largest last, for its RSS growth), then
    // measured interleaved, repetition by repetition. One burst a port per chunk at every group
    // count: the same hot input shape (the mbufs come round again from the pool's cache), so
    // only the group count varies.
    let fanin = 2;
    let mut order: Vec<u32> = groups.to_vec();
    order.sort_unstable();
    let largest = *order.last().expect("at least one group count");
    let mut cases = Vec::new();
    let mut before = 0;
    for &g in &order {
        if g == largest {
            before = rss_bytes();
        }
        let rig = SoftRig::new(&eal, &format!("g{g}"), fanin, 8191);
        let table = root_table(g, fanin);
        cases.push(Sweep::new(rig, table, g, (g as usize).min(BURST), true));
    }
    eprintln!("barrier-perf scale: groups {order:?}, fan-in {fanin}, interleaved");
    interleaved(&mut cases, cli.secs, cli.reps);
    let after = rss_bytes();
    // The harness's own per-group memory: two streams' permutations, 4 bytes each.
    let harness = 2 * 4 * u64::from(largest);
    let grown = after.saturating_sub(before);
    let per_group_rss = json!({
        "groups": largest,
        "rss_growth_bytes": grown,
        "harness_bytes": harness,
        "rss_growth_per_group": grown.saturating_sub(harness) as f64 / f64::from(largest),
        "note": "process RSS before the largest case was built and after every case ran, less the harness's two 4-byte-a-group permutations (table with its per-group counters, scheduler state; its mempool included)",
    });
    let mut by_groups = Vec::new();
    for c in &cases {
        let mut v = c.result();
        v["fanin"] = json!(fanin);
        v["table_bytes"] = json!(c.case.table.bytes());
        eprintln!(
            "  {} groups: switch {:.2} Mfps, bare {:.2} Mfps, rounds {}",
            c.groups,
            v["switch_fps"].as_f64().unwrap_or(0.0) / 1e6,
            v["bare_fps"].as_f64().unwrap_or(0.0) / 1e6,
            v["rounds"]
        );
        by_groups.push(v);
    }
    drop(cases);

    // The fan-in sweep, 1,024 groups, interleaved the same way.
    let mut cases = Vec::new();
    for &k in fanins {
        let rig = SoftRig::new(&eal, &format!("f{k}"), k, 16383);
        cases.push(Sweep::new(rig, root_table(1024, k), 1024, BURST, true));
    }
    eprintln!("barrier-perf scale: fan-in {fanins:?}, 1024 groups, interleaved");
    interleaved(&mut cases, cli.secs, cli.reps);
    let mut by_fanin = Vec::new();
    for (c, &k) in cases.iter().zip(fanins) {
        let mut v = c.result();
        v["fanin"] = json!(k);
        eprintln!(
            "  fan-in {k}: switch {:.2} Mfps, bare {:.2} Mfps",
            v["switch_fps"].as_f64().unwrap_or(0.0) / 1e6,
            v["bare_fps"].as_f64().unwrap_or(0.0) / 1e6
        );
        by_fanin.push(v);
    }
    drop(cases);

    // The switch's own latency: one barrier at a time (fan-in 2, 1,024 groups), its reduces
    // already in the RX queues when the clock starts; out = the flush that sent the release.
    let fanin = 2;
    let mut rig = SoftRig::new(&eal, "lat", fanin, 8191);
    let table = root_table(1024, fanin);
    let clock = Clock::from_counter(dpdk::tsc, dpdk::tsc_hz());
    let sw = build_switch(
        "lat",
        [2, 0, 0, 0, 0, 1],
        rig.switch_ports(),
        table,
        clock.now_ns(),
    );
    let mut rx: Vec<Box<dyn Poller>> = sw.rx.into_iter().map(|(_, _, p)| p).collect();
    let mut sched = sw.sched;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).unwrap();
    let mut s = Stream::new(1024, 5);
    let hz = dpdk::tsc_hz() as f64;
    let start = std::time::Instant::now();
    for _ in 0..latency_samples {
        let (gs, seq) = s.chunk(1);
        for p in 0..fanin {
            rig.fill(p, &gs, seq);
        }
        let t0 = dpdk::tsc();
        run_switch(&mut rx, &mut *sched, &clock);
        let t1 = rig.stamp.load(Relaxed);
        let out = rig.drain_out();
        assert_eq!(out, fanin as u64, "one release per child");
        let ns = ((t1.saturating_sub(t0)) as f64 * 1e9 / hz) as u64;
        hist.record(ns.max(1)).unwrap();
    }
    let log = HdrLog::create(
        &cli.out.join("switch-latency.hlog"),
        "barrier-switch frame in to frame out, ns, one barrier at a time",
        None, // written after the measurement: nothing polls then
    )
    .expect("hlog");
    log.record(
        Duration::ZERO,
        start.elapsed(),
        "switch_in_out",
        hist.clone(),
    );
    log.finish().expect("hlog write");
    let latency = hist_json(&hist);
    eprintln!(
        "barrier-perf scale: switch latency p50 {} ns p99 {} ns",
        latency["p50_ns"], latency["p99_ns"]
    );

    // Bytes of state per group, from the structures.
    let slot = GroupTable::BYTES_PER_GROUP;
    // The per-group counters live inside the slot (GroupTable::counts): nothing on top.
    let counters = 0;
    // A timer-wheel entry (key (GroupId, Seq) and a u64 tick) for a barrier in flight at an
    // intermediate; a queued send (PendingFrame) while a release or reduce waits for its port.
    let timer = std::mem::size_of::<(GroupId, Seq)>() + std::mem::size_of::<u64>();
    let pending = std::mem::size_of::<barrier_switch::scheduler::round_robin::PendingFrame>();
    write_json(
        &cli.out,
        "scale.json",
        &json!({
            "started_utc": started,
            "io": "software RX/TX queues of mbufs (a mutex-guarded deque per port; one lock per burst)",
            "interleaved": "each sweep's cases measured in turn, repetition by repetition",
            "lcore": "one thread: RX pollers and scheduler in one loop",
            "by_groups": by_groups,
            "by_fanin": by_fanin,
            "switch_latency": latency,
            "bytes_per_group": {
                "table_slot": slot,
                "counters": counters,
                "static_total": slot + counters,
                "timer_entry_in_flight": timer,
                "pending_send_in_flight": pending,
                "rss": per_group_rss,
            },
        }),
    );
}

fn hist_json(h: &Histogram<u64>) -> Value {
    let cdf: Vec<Value> = [
        0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1.0,
    ]
    .iter()
    .map(|&q| json!([q, h.value_at_quantile(q)]))
    .collect();
    json!({
        "count": h.len(),
        "min_ns": h.min(),
        "p50_ns": h.value_at_quantile(0.5),
        "p90_ns": h.value_at_quantile(0.9),
        "p99_ns": h.value_at_quantile(0.99),
        "p999_ns": h.value_at_quantile(0.999),
        "max_ns": h.max(),
        "mean_ns": h.mean(),
        "cdf": cdf,
    })
}

fn tree(cli: &Cli, shapes: &str, count: u64) {
    use barrier_testbed::demo::DemoOpts;
    use barrier_testbed::demo_dpdk::{demo_eal_args, run_demo_on};
    let args = demo_eal_args(1, &[]);
    let (eal, _) = match Eal::init(args) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("barrier-perf: EAL: {e} (DPDK needs root)");
            std::process::exit(1);
        }
    };
    let log = HdrLog::create(
        &cli.out.join("tree-latency.hlog"),
        "barrier round latency in in-process trees, ns (first reduce sent to last release received)",
        barrier_runtime::affinity::ControlCores::for_eal(&eal).as_ref(),
    )
    .expect("hlog");
    let t_start = std::time::Instant::now();
    let mut out = Vec::new();
    for shape in shapes.split(';') {
        let fanout: Vec<usize> = shape
            .split(',')
            .map(|x| x.trim().parse().expect("fan-out"))
            .collect();
        let opts = DemoOpts {
            fanout: fanout.clone(),
            groups: 1,
            count: Some(count),
            duration: Duration::from_secs(600),
            // One busy loop for switches and leaves: on a shared 2-core machine a second
            // spinning thread turns every hand-over into a scheduler time slice.
            loops: 1,
            ..DemoOpts::default()
        };
        let t0 = t_start.elapsed();
        let r = run_demo_on(&eal, &opts, Arc::new(AtomicBool::new(false))).expect("demo run");
        let rep = &r.result.report;
        let leaves: usize = fanout.iter().product();
        let tag = format!("tree_{}", shape.replace(',', "x"));
        log.record(t0, t_start.elapsed() - t0, &tag, rep.latency.clone());
        let mut v = hist_json(&rep.latency);
        v["fanout"] = json!(fanout);
        v["levels"] = json!(fanout.len());
        v["leaves"] = json!(leaves);
        v["barriers_per_s"] = json!(r.result.barriers() as f64 / r.result.elapsed.as_secs_f64());
        v["early_releases"] = json!(rep.early_releases);
        v["resends"] = json!(rep.resends);
        eprintln!(
            "barrier-perf tree {shape}: {} barriers, p50 {} ns p99 {} ns p99.9 {} ns",
            rep.latency.len(),
            v["p50_ns"],
            v["p99_ns"],
            v["p999_ns"]
        );
        out.push(v);
    }
    log.finish().expect("hlog");
    write_json(
        &cli.out,
        "tree.json",
        &json!({
            "what": "barrier-demo trees: switches and emulated leaves on net_ring wires, one busy loop",
            "trees": out,
        }),
    );
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = std::fs::create_dir_all(&cli.out) {
        eprintln!("barrier-perf: --out {}: {e}", cli.out.display());
        std::process::exit(1);
    }
    match &cli.cmd {
        Cmd::Alone { fanin, groups } => alone(&cli, *fanin, *groups),
        Cmd::Scale {
            groups,
            fanin,
            latency_samples,
        } => scale(&cli, groups, fanin, *latency_samples),
        Cmd::Tree { shapes, count } => tree(&cli, shapes, *count),
        Cmd::Probe {
            label,
            port,
            groups,
            load,
            epoch,
            lcores,
            file_prefix,
        } => {
            // memif needs hugepages and a shared configuration (no --no-huge, --no-shconf).
            let args: Vec<String> = [
                "barrier-perf",
                "--lcores",
                lcores,
                "-m",
                "128",
                "--file-prefix",
                file_prefix,
                "--no-pci",
                "--no-telemetry",
                "--log-level=*:warning",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let eal = match Eal::init(args) {
                Ok((e, _)) => e,
                Err(e) => {
                    eprintln!("barrier-perf probe: EAL: {e} (needs root and hugepages)");
                    std::process::exit(1);
                }
            };
            let a = probe::ProbeArgs {
                label: label.clone(),
                port: port.clone(),
                groups: *groups,
                secs: cli.secs,
                load: *load,
                epoch: *epoch,
            };
            match probe::probe(&eal, &a) {
                Ok(v) => {
                    eprintln!(
                        "barrier-perf probe {label}: peak {:.2} Mfps; at {:.2} Mfps p50 {} ns p99 {} ns",
                        v["peak_fps"].as_f64().unwrap_or(0.0) / 1e6,
                        v["rate_fps"].as_f64().unwrap_or(0.0) / 1e6,
                        v["latency"]["p50_ns"],
                        v["latency"]["p99_ns"]
                    );
                    write_json(&cli.out, &format!("probe-{label}.json"), &v);
                }
                Err(e) => {
                    eprintln!("barrier-perf probe {label}: {e}");
                    std::process::exit(1);
                }
            }
        }
        Cmd::Xdp {
            groups_shift,
            batch,
            cpu,
        } => {
            let cpu = cpu.unwrap_or_else(|| {
                barrier_runtime::affinity::current_cpus()
                    .last()
                    .copied()
                    .unwrap_or(0)
            });
            let a = xdp::XdpArgs {
                secs: cli.secs,
                reps: cli.reps,
                groups_shift: (*groups_shift).min(20),
                batch: *batch,
                cpu,
            };
            match xdp::xdp(&a) {
                Ok(mut v) => {
                    v["started_utc"] = json!(now_utc());
                    eprintln!(
                        "barrier-perf xdp: switch {:.2} Mfps, reflector {:.2} Mfps, ratio {:.3} (median of {})",
                        v["switch_fps"].as_f64().unwrap_or(0.0) / 1e6,
                        v["reflector_fps"].as_f64().unwrap_or(0.0) / 1e6,
                        v["ratio"].as_f64().unwrap_or(0.0),
                        cli.reps
                    );
                    write_json(&cli.out, "xdp.json", &v);
                }
                Err(e) => {
                    eprintln!("barrier-perf xdp: {e} ({})", xdp_refusal_hint());
                    std::process::exit(1);
                }
            }
        }
        Cmd::Genmax { ports, groups } => {
            let args = dpdk::test_args(
                "perf-genmax",
                &["--lcores", "0@0,1@1", "-m", "1024", "--log-level=*:warning"],
            );
            let eal = match Eal::init(args) {
                Ok((e, _)) => e,
                Err(e) => {
                    eprintln!("barrier-perf genmax: EAL: {e} (DPDK needs root)");
                    std::process::exit(1);
                }
            };
            match genmax::genmax(&eal, *ports, *groups, cli.secs, dpdk::LcoreId(1)) {
                Ok(v) => {
                    eprintln!(
                        "barrier-perf genmax: {:.2} Mfps sent on one lcore ({:.0} barriers/s)",
                        v["tx_fps"].as_f64().unwrap_or(0.0) / 1e6,
                        v["barriers_per_s"].as_f64().unwrap_or(0.0)
                    );
                    write_json(&cli.out, "genmax.json", &v);
                }
                Err(e) => {
                    eprintln!("barrier-perf genmax: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
}

/// What to say after a failed `barrier-perf xdp`: it needs root, and a root whose capability
/// set is cut (a sandbox: seen on a machine whose bounding set lacked CAP_SYS_RESOURCE) gets
/// EPERM from BPF_PROG_RUN's live-frames mode while the rest of the bed works; the process's
/// own figures (/proc/self/status) say which case this is.
fn xdp_refusal_hint() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
            .unwrap_or_default()
    };
    if field("Uid:") != "0" {
        return "needs root".into();
    }
    let eff = field("CapEff:");
    // every capability this kernel knows: bits 0..=cap_last_cap
    let full = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|l| l.trim().parse::<u32>().ok())
        .map(|last| (1u128 << (last + 1)) - 1);
    let have = u128::from_str_radix(&eff, 16).ok();
    if full.is_some() && have == full {
        "root with every capability: not a permission problem".into()
    } else {
        format!(
            "running as root, but with a reduced capability set (CapEff {eff}, `capsh --print` \
             names what is missing): the kernel may refuse live frames to such a process"
        )
    }
}
