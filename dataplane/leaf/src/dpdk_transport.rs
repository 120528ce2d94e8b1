//! A leaf on a DPDK port: [`DpdkPort`] implements [`Transport`] over one RX and one TX queue of
//! an ethdev port (a PCI NIC, `net_ring`, `net_pcap`, `net_af_packet`, ...), through the safe
//! layer `ffi/dpdk` only. Poll mode: `recv` spins on `rx_burst` until a frame or its timeout.
//!
//! Built with the cargo feature `dpdk` (on by default); compute nodes without DPDK build the
//! crate with `--no-default-features` and keep AF_PACKET.

use crate::transport::Transport;
use barrier_protocol::wire::{MacAddr, ETHERTYPE};
use dpdk::{DpdkError, Eal, Mbuf, MbufBatch, Mempool, Port, PortStats, QueueId, RxQueue, TxQueue};
use std::io;
use std::time::{Duration, Instant};

/// Frames taken from the RX queue per `rx_burst`. Frames beyond the one `recv` returns stay in
/// the transport for the next calls, so a burst never loses frames.
pub const RX_BURST: usize = 32;

/// What the polling thread does when a poll found nothing (in `recv`, and between TX retries):
/// the idle policy every polling loop of the workspace uses (`barrier_runtime::poll::Idle`).
/// `Spin` (the default) busy-polls with a CPU spin hint: the lowest latency, and a whole core
/// while waiting. `Yield`/`Sleep` give the core to other threads after a run of empty polls
/// (another leaf, a switch loop in a test).
pub use barrier_runtime::poll::Idle;

/// Settings of a [`DpdkPort`] that configures its own port ([`DpdkPort::start`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpdkOptions {
    /// RX descriptors (adjusted to the device's limits).
    pub rx_desc: u16,
    /// TX descriptors (adjusted to the device's limits).
    pub tx_desc: u16,
    /// Further `tx_burst` tries when the TX queue is full, before `send` gives up with an error
    /// (the frame is freed, never leaked). The protocol re-sends a lost reduce anyway.
    pub tx_retries: u32,
    /// What to do between empty polls.
    pub idle: Idle,
    /// Receive frames for any destination MAC. Releases go to the address the switch has for
    /// this port (often broadcast, which NICs accept anyway); turn it on when the switch sends
    /// to a unicast address other than this port's.
    pub promiscuous: bool,
}

impl Default for DpdkOptions {
    fn default() -> Self {
        DpdkOptions {
            rx_desc: 512,
            tx_desc: 512,
            tx_retries: 1000,
            idle: Idle::Spin,
            promiscuous: false,
        }
    }
}

/// Counters of one [`DpdkPort`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DpdkPortStats {
    /// Frames handed to the session.
    pub rx_frames: u64,
    /// Frames dropped because their EtherType is not the barrier one (0x88B5). The AF_PACKET
    /// transport never sees those (its socket is bound to the EtherType); here the filter is ours.
    pub rx_other: u64,
    /// Frames handed over truncated (longer than the caller's buffer).
    pub rx_truncated: u64,
    /// Frames the TX queue took.
    pub tx_frames: u64,
    /// `tx_burst` calls that found the TX queue full and were tried again.
    pub tx_full_retries: u64,
    /// Frames given up after `tx_retries` (freed; `send` returned an error).
    pub tx_dropped: u64,
    /// `send` calls that found no mbuf in the pool.
    pub tx_no_mbuf: u64,
}

/// The queues a [`DpdkPort`] uses: its own port, or handles to queues of a port owned elsewhere.
enum Queues {
    Owned { port: Port, queue: QueueId },
    Handles { rx: RxQueue, tx: TxQueue },
}

impl Queues {
    fn rx_burst(&mut self, batch: &mut MbufBatch<RX_BURST>) -> usize {
        match self {
            Queues::Owned { port, queue } => port.rx_burst(*queue, batch),
            Queues::Handles { rx, .. } => rx.rx_burst(batch),
        }
    }
    fn tx_burst(&mut self, batch: &mut MbufBatch<1>) -> usize {
        match self {
            Queues::Owned { port, queue } => port.tx_burst(*queue, batch),
            Queues::Handles { tx, .. } => tx.tx_burst(batch),
        }
    }
}

/// A leaf's link to its parent switch over a DPDK port: `send` copies the frame into an mbuf and
/// hands it to the TX queue at once (no batching: a reduce is one frame and latency is the
/// point), `recv` polls the RX queue. The source MAC is the port's.
///
/// Receive waits are busy polls: a `Session::wait` on this transport keeps its thread on the
/// CPU for the whole barrier (with [`Idle::Yield`] it lets other threads of that core run). Pin
/// the thread to a core of its own for steady latency. SIGINT does not interrupt a poll; the
/// session's interrupt flag is seen within one re-send timeout.
pub struct DpdkPort {
    queues: Queues,
    pool: Mempool,
    mac: MacAddr,
    name: String,
    tx_retries: u32,
    idle: Idle,
    /// Empty polls in a row, for the idle policy.
    idle_run: u32,
    /// Received mbufs; `rx_batch[rx_next..]` are not handed out yet.
    rx_batch: MbufBatch<RX_BURST>,
    rx_next: usize,
    tx_batch: MbufBatch<1>,
    stats: DpdkPortStats,
}

impl std::fmt::Debug for DpdkPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpdkPort")
            .field("name", &self.name)
            .field("mac", &self.mac)
            .field("stats", &self.stats)
            .finish()
    }
}

impl DpdkPort {
    /// Opens the port called `name` (`0000:01:00.0`, `net_ring0`, ... as EAL knows it), sets up
    /// one RX queue filled from `pool` and one TX queue, and starts it.
    #[cold]
    pub fn open(
        eal: &Eal,
        name: &str,
        pool: &Mempool,
        opts: &DpdkOptions,
    ) -> Result<DpdkPort, DpdkError> {
        Self::start(Port::open_by_name(eal, name)?, pool, opts)
    }

    /// Takes `port` (stopped, not configured), sets up one RX queue filled from `pool` and one
    /// TX queue, and starts it. The port is stopped and closed with [`DpdkPort::close`] or when
    /// the transport is dropped.
    #[cold]
    pub fn start(
        mut port: Port,
        pool: &Mempool,
        opts: &DpdkOptions,
    ) -> Result<DpdkPort, DpdkError> {
        port.configure(1, 1, opts.rx_desc, opts.tx_desc, pool)?;
        if opts.promiscuous {
            port.set_promiscuous(true)?;
        }
        // Started and drained: a release that reached the port before its socket was bound to
        // its interface (net_af_packet) may have been sent on another link.
        Port::start_all(std::slice::from_mut(&mut port)).map_err(|(_, e)| e)?;
        let mac = MacAddr(port.mac_address()?);
        let name = port.name().to_owned();
        Ok(DpdkPort::with_queues(
            Queues::Owned {
                port,
                queue: QueueId(0),
            },
            pool.clone(),
            mac,
            name,
            opts,
        ))
    }

    /// A transport on queues of a port configured and started elsewhere, e.g. several leaves on
    /// one port, one queue pair each. Frames are built in mbufs from `pool`; `mac` is the
    /// source address (normally the port's).
    pub fn from_queues(
        rx: RxQueue,
        tx: TxQueue,
        pool: Mempool,
        mac: MacAddr,
        opts: &DpdkOptions,
    ) -> DpdkPort {
        let name = format!("{:?}/{:?}", rx.port(), rx.queue());
        DpdkPort::with_queues(Queues::Handles { rx, tx }, pool, mac, name, opts)
    }

    fn with_queues(
        queues: Queues,
        pool: Mempool,
        mac: MacAddr,
        name: String,
        opts: &DpdkOptions,
    ) -> DpdkPort {
        DpdkPort {
            queues,
            pool,
            mac,
            name,
            tx_retries: opts.tx_retries,
            idle: opts.idle,
            idle_run: 0,
            rx_batch: MbufBatch::new(),
            rx_next: 0,
            tx_batch: MbufBatch::new(),
            stats: DpdkPortStats::default(),
        }
    }

    /// The device name (`net_ring_a`), or `portN/queueM` for a transport on queue handles.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This transport's counters.
    pub fn stats(&self) -> DpdkPortStats {
        self.stats
    }

    /// The device's counters, when this transport owns its port.
    pub fn port_stats(&self) -> Option<Result<PortStats, DpdkError>> {
        match &self.queues {
            Queues::Owned { port, .. } => Some(port.stats()),
            Queues::Handles { .. } => None,
        }
    }

    /// Frames received and not handed out yet.
    pub fn pending(&self) -> usize {
        self.rx_batch.len() - self.rx_next
    }

    /// Frees the frames not handed out, then stops and closes the port (when owned; queue
    /// handles are just released), reporting DPDK's errors, which a drop would only log.
    #[cold]
    pub fn close(self) -> Result<(), DpdkError> {
        let DpdkPort {
            queues,
            rx_batch,
            tx_batch,
            ..
        } = self;
        drop((rx_batch, tx_batch));
        match queues {
            Queues::Owned { port, .. } => port.close(),
            Queues::Handles { rx, tx } => {
                drop((rx, tx));
                Ok(())
            }
        }
    }

    #[inline]
    fn idle_once(&mut self) {
        self.idle.pause(false, &mut self.idle_run);
    }

    /// Copies the next held barrier frame into `buf`, skipping (and counting) other frames.
    fn take_held(&mut self, buf: &mut [u8]) -> Option<usize> {
        while self.rx_next < self.rx_batch.len() {
            let m = &self.rx_batch.as_slice()[self.rx_next];
            self.rx_next += 1;
            let data = m.data();
            if data.get(12..14) != Some(&ETHERTYPE.to_be_bytes()[..]) {
                self.stats.rx_other += 1;
                continue;
            }
            let n = data.len().min(buf.len());
            buf[..n].copy_from_slice(&data[..n]);
            if n < data.len() {
                self.stats.rx_truncated += 1;
            }
            self.stats.rx_frames += 1;
            return Some(n);
        }
        None
    }
}

impl Transport for DpdkPort {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        let mut m = Mbuf::alloc(&self.pool).map_err(|e| {
            self.stats.tx_no_mbuf += 1;
            io::Error::new(io::ErrorKind::OutOfMemory, format!("{}: {e}", self.name))
        })?;
        match m.append(frame.len()) {
            Ok(bytes) => bytes.copy_from_slice(frame),
            // Too long for one mbuf of this pool (`m` goes back to the pool).
            Err(e) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{}: {e}", self.name),
                ))
            }
        }
        // The batch is empty here: a previous send either sent its mbuf or freed it.
        debug_assert!(self.tx_batch.is_empty());
        self.tx_batch
            .push(m)
            .expect("the one-slot TX batch is empty between sends");
        for attempt in 0..=self.tx_retries {
            if self.queues.tx_burst(&mut self.tx_batch) == 1 {
                self.stats.tx_frames += 1;
                return Ok(());
            }
            if attempt < self.tx_retries {
                self.stats.tx_full_retries += 1;
                self.idle_once();
            }
        }
        // Give up: free the mbuf (the batch would keep it for the next send otherwise).
        self.tx_batch.clear();
        self.stats.tx_dropped += 1;
        Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!(
                "{}: TX queue full after {} tries; frame dropped",
                self.name,
                u64::from(self.tx_retries) + 1
            ),
        ))
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        // Read the clock only once the first poll came back empty: the common case with frames
        // already waiting costs no clock read.
        let mut deadline: Option<Instant> = None;
        loop {
            if let Some(n) = self.take_held(buf) {
                return Ok(Some(n));
            }
            // Everything held was handed out (or skipped): free it in one bulk call and poll.
            self.rx_batch.clear();
            self.rx_next = 0;
            if self.queues.rx_burst(&mut self.rx_batch) > 0 {
                self.idle_run = 0;
                continue;
            }
            if timeout.is_zero() {
                return Ok(None);
            }
            let now = Instant::now();
            let d = *deadline.get_or_insert(now + timeout);
            if now >= d {
                return Ok(None);
            }
            self.idle_once();
        }
    }

    fn mac(&self) -> MacAddr {
        self.mac
    }
}
