//! A [`Session`]: one compute node's barriers on a set of groups over one [`Transport`]. The
//! decisions (when to send or re-send a reduce, which release ends which barrier) are
//! `barrier_protocol::leaf::Leaf`'s, one per group; this module adds the clock, the frames,
//! the blocking and non-blocking waits, the overall timeout and the per-barrier records.

use crate::records::{Record, RecordSink};
use crate::transport::Transport;
use barrier_protocol::backoff::Backoff;
use barrier_protocol::leaf::{Leaf, LeafConfig, LeafError, LeafSend, LeafState, ReleaseOutcome};
use barrier_protocol::wire::{FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{Epoch, GroupId, Seq, Time, MAX_GROUPS};
use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Settings of a session, the same for all its groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Re-send the reduce when no release came this long after sending it (claim 2's timer).
    pub resend_timeout: Duration,
    /// `wait` gives up after this long and returns [`Error::Timeout`].
    pub wait_timeout: Duration,
    /// Destination MAC of reduces. The switch takes barrier frames by EtherType and port, not
    /// by address, so broadcast (the default) always works; a unicast address to the switch
    /// port keeps the frames off other hosts of a shared segment.
    pub dst: MacAddr,
    /// Sequence number of the first barrier of every group (0 unless rejoining a running tree).
    pub first_seq: Seq,
    /// The epoch of every group this session opens: the one management gave the group on the
    /// switches (`barrierctl group show`; [`Epoch::DEFAULT`] for a group configured from a
    /// file without an `epoch` key). Reduces carry it; releases of another epoch are ignored.
    pub epoch: Epoch,
    /// Re-sends after the first: doubling waits up to a cap, with per-group jitter
    /// (`barrier_protocol::backoff`); the default re-sends every `resend_timeout`.
    pub backoff: Backoff,
    /// Put the CLOCK_MONOTONIC send time into each reduce (flag HAS_TIMESTAMP).
    pub timestamps: bool,
    /// Busy-poll this long before sleeping: a wait for frames first polls the transport
    /// without blocking (`recv` with a zero timeout, in a loop) for up to this long, and only
    /// then blocks in the transport for the rest of the wait. What MPI libraries do: a release
    /// that comes within it is taken without a sleep and a wake-up (a blocking AF_PACKET wait
    /// costs a scheduler round trip per frame), at the price of a busy CPU for that long per
    /// wait. Zero (the default) blocks at once. Transports that poll anyway (DPDK) gain nothing.
    pub busy_poll: Duration,
    /// During the busy poll, give the CPU to other runnable threads between polls
    /// (`sched_yield`), as MPI libraries do when ranks outnumber cores (Open MPI's
    /// `mpi_yield_when_idle`): the poll still finds a frame without a sleep and a wake-up, but a
    /// switch or another leaf on the same CPU runs meanwhile.
    pub busy_poll_yield: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            resend_timeout: Duration::from_millis(1),
            wait_timeout: Duration::from_secs(10),
            dst: MacAddr::BROADCAST,
            first_seq: Seq(0),
            epoch: Epoch::DEFAULT,
            backoff: Backoff::FIXED,
            timestamps: false,
            busy_poll: Duration::ZERO,
            busy_poll_yield: false,
        }
    }
}

/// What can go wrong; every variant that concerns one barrier names its group (and sequence).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The barrier was not released within the wait timeout. The leaf still waits for it (and
    /// keeps re-sending on later calls); the caller decides whether to go on waiting.
    #[error("timeout: group {group} barrier seq {seq} not released after {waited:?} ({resends} re-sends)")]
    Timeout {
        /// The group.
        group: u32,
        /// The sequence number of the barrier that did not complete.
        seq: u32,
        /// How long this leaf waited since its first reduce of that barrier.
        waited: Duration,
        /// How many times the reduce was re-sent.
        resends: u32,
    },
    /// The group was never added to this session.
    #[error("group {0} is not open in this session")]
    UnknownGroup(u32),
    /// The group is already open in this session.
    #[error("group {0} is already open in this session")]
    GroupAlreadyOpen(u32),
    /// Group numbers are below `barrier_protocol::MAX_GROUPS`.
    #[error("group {0} is out of range (groups are 0..{MAX_GROUPS})")]
    GroupOutOfRange(u32),
    /// `arrive` while the previous barrier of the group has not been released.
    #[error("group {group}: already waiting for barrier seq {seq}")]
    AlreadyWaiting {
        /// The group.
        group: u32,
        /// The barrier it waits for.
        seq: u32,
    },
    /// The interface could not be opened (no such interface, no CAP_NET_RAW, ...).
    #[error("opening interface {ifname}: {source}")]
    Open {
        /// The interface name.
        ifname: String,
        /// The OS error (its errno is kept).
        source: io::Error,
    },
    /// The interrupt flag ([`Session::set_interrupt_flag`]) was set while waiting; the leaf
    /// still waits at that barrier.
    #[error("interrupted: group {group} barrier seq {seq} not released yet")]
    Interrupted {
        /// The group.
        group: u32,
        /// The barrier it waits for.
        seq: u32,
    },
    /// A switch declared a member of the group failed and aborted the group's run: no
    /// barrier of this epoch will complete. Management resets the group (a new epoch) and the
    /// leaves join the new run.
    #[error(
        "aborted: group {group} barrier seq {seq} cannot complete: port {port} of switch \
         {switch} was declared failed (the group needs a reset, a new epoch)"
    )]
    Aborted {
        /// The group.
        group: u32,
        /// The barrier the abort named.
        seq: u32,
        /// The declaring switch's id (the MAC address of its first port).
        switch: MacAddr,
        /// The silent child's port at that switch.
        port: u8,
    },
    /// The switch answers this leaf's reduces with releases for another barrier of the same
    /// epoch (`barrier_protocol::leaf::MISMATCH_ANSWERS` reduces in a row): the group is
    /// further on, or behind, in this epoch, because an earlier run used it. Reported within a
    /// few re-send periods instead of after the wait timeout; no barrier of this epoch completes
    /// for this leaf any more. A new run of a group needs a new epoch, on every switch and leaf.
    #[error(
        "group {group} epoch {epoch}: the switch answers barrier {seq} with the release of \
         barrier {answered}: the group was used by an earlier run in this epoch; reset the \
         group's run on every switch of its tree (barrierctl reset PLAN, or barrierctl group \
         reset {group} on each switch, root first) and open the leaves with the new epoch \
         (Config::epoch, barrier_leaf_options.epoch, barrier-leaf --epoch E)"
    )]
    EpochInUse {
        /// The group.
        group: u32,
        /// The epoch this leaf was opened with.
        epoch: u32,
        /// The barrier this leaf waits on.
        seq: u32,
        /// The barrier of the release the switch answers with.
        answered: u32,
    },
    /// The transport failed (socket error, peer gone).
    #[error("transport: {0}")]
    Io(#[from] io::Error),
}

/// Counters of one session, over all its groups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Reduces sent for the first time (one per barrier).
    pub reduces: u64,
    /// Reduces re-sent after the timer expired.
    pub resends: u64,
    /// Releases that ended a barrier.
    pub releases: u64,
    /// Releases the leaf ignored: duplicates, for a barrier other than the current one (the
    /// one that ended a group with [`Error::EpochInUse`] included), or of another epoch; and
    /// aborts it ignored (repeated, or of another epoch).
    pub stale_releases: u64,
    /// Well-formed barrier frames not for this session (another group, or a reduce).
    pub foreign_frames: u64,
    /// Frames that failed to parse as barrier frames.
    pub bad_frames: u64,
    /// Aborts of an open group's run (at most one per group and epoch).
    pub aborts: u64,
    /// Errors of a link that was down or full (ENETDOWN, ENXIO, ENOBUFS, EAGAIN): a reduce
    /// the link refused counts as lost (the re-send timer sends it again), a receive that
    /// reported the link going down is passed over. On AF_PACKET, a frame the egress queue
    /// dropped (a full qdisc) comes back from `send` as ENOBUFS and is counted here.
    pub link_errors: u64,
    /// Waits whose first frame the busy poll ([`Config::busy_poll`]) found, before the thread
    /// would have blocked.
    pub busy_poll_hits: u64,
}

struct Slot {
    leaf: Leaf,
    /// CLOCK_MONOTONIC ns of the first reduce of the current barrier.
    first_reduce_ns: u64,
    resends: u32,
    /// A released barrier not yet handed to the caller.
    done: Option<Record>,
}

/// The most frames handled in one `poll` before timers are looked at again.
const RX_BATCH: usize = 256;

/// A compute node's barrier session. See the crate documentation for the call patterns.
pub struct Session<T: Transport> {
    transport: T,
    cfg: Config,
    src: MacAddr,
    groups: BTreeMap<u32, Slot>,
    stats: Stats,
    sink: Option<RecordSink>,
    interrupt: Option<Arc<AtomicBool>>,
    rx: Box<[u8; 2048]>,
}

/// CLOCK_MONOTONIC now, as the protocol's [`Time`].
pub fn now() -> Time {
    Time::from_nanos(rawsock::monotonic_now().as_nanos() as u64)
}

impl Session<rawsock::RawSocket> {
    /// Opens a session on a Linux interface through an AF_PACKET socket bound to the barrier
    /// EtherType (needs CAP_NET_RAW). The source MAC is the interface's.
    pub fn open_af_packet(ifname: &str, cfg: Config, groups: &[u32]) -> Result<Self, Error> {
        Session::new(crate::transport::af_packet(ifname)?, cfg, groups)
    }
}

impl<T: Transport> Session<T> {
    /// A session over `transport` for `groups`, each starting at `cfg.first_seq`.
    pub fn new(transport: T, cfg: Config, groups: &[u32]) -> Result<Self, Error> {
        let src = transport.mac();
        let mut s = Session {
            transport,
            cfg,
            src,
            groups: BTreeMap::new(),
            stats: Stats::default(),
            sink: None,
            interrupt: None,
            rx: Box::new([0; 2048]),
        };
        for &g in groups {
            s.add_group(g)?;
        }
        Ok(s)
    }

    /// Adds a group, starting at `cfg.first_seq`.
    pub fn add_group(&mut self, group: u32) -> Result<(), Error> {
        self.add_group_at(group, self.cfg.first_seq)
    }

    /// Adds a group whose next barrier has sequence number `seq`.
    pub fn add_group_at(&mut self, group: u32, seq: Seq) -> Result<(), Error> {
        if group >= MAX_GROUPS {
            return Err(Error::GroupOutOfRange(group));
        }
        if self.groups.contains_key(&group) {
            return Err(Error::GroupAlreadyOpen(group));
        }
        let leaf = Leaf::new(LeafConfig {
            group: GroupId(group),
            epoch: self.cfg.epoch,
            resend_timeout_ns: self.cfg.resend_timeout.as_nanos().min(u64::MAX as u128) as u64,
            first_seq: seq,
        })
        .with_backoff(self.cfg.backoff);
        self.groups.insert(
            group,
            Slot {
                leaf,
                first_reduce_ns: 0,
                resends: 0,
                done: None,
            },
        );
        Ok(())
    }

    /// The groups of this session, ascending.
    pub fn groups(&self) -> impl Iterator<Item = u32> + '_ {
        self.groups.keys().copied()
    }

    /// The sequence number of the group's current (or next) barrier.
    pub fn seq(&self, group: u32) -> Result<Seq, Error> {
        Ok(self.slot(group)?.leaf.seq())
    }

    /// True while the group has arrived and its barrier is not released yet.
    pub fn is_waiting(&self, group: u32) -> Result<bool, Error> {
        Ok(matches!(
            self.slot(group)?.leaf.state(),
            LeafState::Waiting { .. }
        ))
    }

    /// The session's counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The session's settings.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Ends the session and hands its transport back, e.g. to open a session in a group's
    /// new epoch after an abort ([`Error::Aborted`]). Records buffered for a sink are flushed
    /// first as far as possible.
    pub fn into_transport(mut self) -> T {
        let _ = self.flush_records();
        self.transport
    }

    /// The transport, e.g. to install a loss filter in a test.
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }

    /// Writes a [`Record`] of every released barrier to `sink` from now on.
    pub fn set_record_sink(&mut self, sink: RecordSink) {
        self.sink = Some(sink);
    }

    /// `wait` returns [`Error::Interrupted`] once `flag` is set, e.g. by a SIGINT handler
    /// (`signal_hook::flag::register`): a signal wakes the socket wait (`ppoll` returns EINTR),
    /// so the flag is seen at once on AF_PACKET; on other transports within one receive timeout.
    pub fn set_interrupt_flag(&mut self, flag: Arc<AtomicBool>) {
        self.interrupt = Some(flag);
    }

    /// The record of the barrier `group` waits at (arrived, not released yet), marked not
    /// released ([`Record::released`] false, `release_ns` 0); `None` when the group is not
    /// waiting.
    pub fn waiting_record(&self, group: u32) -> Result<Option<Record>, Error> {
        let slot = self.slot(group)?;
        Ok(match slot.leaf.state() {
            LeafState::Waiting { .. } => Some(Record {
                group,
                seq: slot.leaf.seq().0,
                first_reduce_ns: slot.first_reduce_ns,
                release_ns: 0,
                resends: slot.resends,
                released: false,
            }),
            _ => None,
        })
    }

    /// Writes the arrival of every group that waits at a barrier to the record sink as a
    /// record not released, for a leaf that stops waiting (SIGINT, the end of a timed run): a
    /// checker then knows this leaf reached that barrier and never left it. Returns how many
    /// were written (0 without a sink). The session still waits at those barriers.
    pub fn record_waiting(&mut self) -> usize {
        let waiting: Vec<Record> = self
            .groups
            .keys()
            .filter_map(|&g| self.waiting_record(g).ok().flatten())
            .collect();
        let Some(sink) = self.sink.as_mut() else {
            return 0;
        };
        for r in &waiting {
            sink.write(r);
        }
        waiting.len()
    }

    /// Changes the busy-poll time ([`Config::busy_poll`]) of the waits from now on.
    pub fn set_busy_poll(&mut self, busy_poll: Duration) {
        self.cfg.busy_poll = busy_poll;
    }

    /// Yield the CPU between the busy poll's polls, or spin ([`Config::busy_poll_yield`]).
    pub fn set_busy_poll_yield(&mut self, yield_cpu: bool) {
        self.cfg.busy_poll_yield = yield_cpu;
    }

    /// Flushes the record sink, if any.
    pub fn flush_records(&mut self) -> io::Result<()> {
        match self.sink.as_mut() {
            Some(s) => s.flush(),
            None => Ok(()),
        }
    }

    /// Reaches the barrier point of `group` without blocking: sends the reduce. The release is
    /// picked up by later `poll`/`try_wait`/`wait` calls, which also re-send on time.
    pub fn arrive(&mut self, group: u32) -> Result<(), Error> {
        let t = now();
        let slot = self
            .groups
            .get_mut(&group)
            .ok_or(Error::UnknownGroup(group))?;
        let epoch = self.cfg.epoch;
        let send = slot.leaf.arrive(t).map_err(|e| match e {
            LeafError::AlreadyWaiting(seq) => Error::AlreadyWaiting { group, seq: seq.0 },
            LeafError::Aborted { seq, failure } => Error::Aborted {
                group,
                seq: seq.0,
                switch: failure.switch,
                port: failure.port,
            },
            LeafError::Mismatched { seq, answered } => Error::EpochInUse {
                group,
                epoch: epoch.get(),
                seq: seq.0,
                answered: answered.0,
            },
        })?;
        slot.first_reduce_ns = t.nanos();
        slot.resends = 0;
        slot.done = None;
        self.stats.reduces += 1;
        self.send_reduce(t, send)
    }

    /// Handles what has arrived and what timers have expired, without blocking. Returns the
    /// barriers released and not yet handed out, in group order.
    pub fn poll(&mut self) -> Result<Vec<Record>, Error> {
        self.poll_for(Duration::ZERO)
    }

    /// Like [`Session::poll`], but waits up to `max_wait` for a first frame if none is there
    /// (re-sending on time meanwhile). For an event loop that has nothing else to do.
    pub fn poll_for(&mut self, max_wait: Duration) -> Result<Vec<Record>, Error> {
        self.pump(max_wait)?;
        Ok(self
            .groups
            .values_mut()
            .filter_map(|s| s.done.take())
            .collect())
    }

    /// The non-blocking barrier: the first call for a barrier arrives (sends the reduce), every
    /// call handles frames and timers, and the call that finds the barrier released returns its
    /// record. Returns [`Error::Timeout`] once the barrier has waited longer than the wait
    /// timeout; calling again keeps waiting (and re-sending).
    pub fn try_wait(&mut self, group: u32) -> Result<Option<Record>, Error> {
        if let Some(r) = self.take_done(group)? {
            return Ok(Some(r));
        }
        if !self.is_waiting(group)? {
            self.arrive(group)?;
        }
        self.pump(Duration::ZERO)?;
        if let Some(r) = self.take_done(group)? {
            return Ok(Some(r));
        }
        self.check_ended(group)?;
        let t = now();
        let slot = self.slot(group)?;
        let waited = Duration::from_nanos(t.nanos().saturating_sub(slot.first_reduce_ns));
        if waited > self.cfg.wait_timeout {
            return Err(self.timeout_error(group, waited));
        }
        Ok(None)
    }

    /// The barrier: arrives at `group`'s barrier (unless already arrived with
    /// [`Session::arrive`]) and blocks until the release, re-sending the reduce on the
    /// protocol's timer. After the wait timeout returns [`Error::Timeout`] naming the group and
    /// sequence; the leaf stays at that barrier, so a second `wait` goes on waiting for it.
    pub fn wait(&mut self, group: u32) -> Result<Record, Error> {
        self.wait_timeout(group, self.cfg.wait_timeout)
    }

    /// [`Session::wait`] with its own timeout, counted from this call.
    pub fn wait_timeout(&mut self, group: u32, timeout: Duration) -> Result<Record, Error> {
        if let Some(r) = self.take_done(group)? {
            return Ok(r);
        }
        if !self.is_waiting(group)? {
            self.arrive(group)?;
        }
        let deadline = now()
            .nanos()
            .saturating_add(timeout.as_nanos().min(u64::MAX as u128) as u64);
        loop {
            if self
                .interrupt
                .as_ref()
                .is_some_and(|f| f.load(Ordering::Relaxed))
            {
                return Err(Error::Interrupted {
                    group,
                    seq: self.slot(group)?.leaf.seq().0,
                });
            }
            let t = now().nanos();
            if t >= deadline {
                let first = self.slot(group)?.first_reduce_ns;
                return Err(
                    self.timeout_error(group, Duration::from_nanos(t.saturating_sub(first)))
                );
            }
            self.pump(Duration::from_nanos(deadline - t))?;
            if let Some(r) = self.take_done(group)? {
                return Ok(r);
            }
            self.check_ended(group)?;
        }
    }

    /// [`Error::Aborted`] when the group's run was aborted, [`Error::EpochInUse`] when the
    /// switch is at another barrier of the epoch: both final for the epoch.
    fn check_ended(&self, group: u32) -> Result<(), Error> {
        match self.slot(group)?.leaf.state() {
            LeafState::Aborted { seq, failure } => Err(Error::Aborted {
                group,
                seq: seq.0,
                switch: failure.switch,
                port: failure.port,
            }),
            LeafState::Mismatched { seq, answered } => Err(Error::EpochInUse {
                group,
                epoch: self.cfg.epoch.get(),
                seq: seq.0,
                answered: answered.0,
            }),
            LeafState::Working | LeafState::Waiting { .. } => Ok(()),
        }
    }

    fn slot(&self, group: u32) -> Result<&Slot, Error> {
        self.groups.get(&group).ok_or(Error::UnknownGroup(group))
    }

    fn take_done(&mut self, group: u32) -> Result<Option<Record>, Error> {
        Ok(self
            .groups
            .get_mut(&group)
            .ok_or(Error::UnknownGroup(group))?
            .done
            .take())
    }

    fn timeout_error(&self, group: u32, waited: Duration) -> Error {
        let slot = &self.groups[&group];
        Error::Timeout {
            group,
            seq: slot.leaf.seq().0,
            waited,
            resends: slot.resends,
        }
    }

    /// One round: expired timers, then frames (waiting up to `max_wait`, but never past the
    /// next re-send deadline, for the first), then timers again.
    fn pump(&mut self, max_wait: Duration) -> Result<(), Error> {
        let t = now();
        self.fire_timers(t)?;
        let mut wait = max_wait;
        if let Some(next) = self
            .groups
            .values()
            .filter_map(|s| s.leaf.next_deadline())
            .min()
        {
            wait = wait.min(Duration::from_nanos(next.saturating_sub(t)));
        }
        let mut handled = 0;
        while handled < RX_BATCH {
            let got = if handled == 0 {
                self.recv_first(wait)
            } else {
                self.transport.recv(&mut self.rx[..], Duration::ZERO)
            };
            let n = match got {
                Ok(Some(n)) => n,
                Ok(None) => break,
                // The socket reports a link that went down once; frames resume when it is up.
                Err(e) if is_transient_link_error(&e) => {
                    self.stats.link_errors += 1;
                    break;
                }
                Err(e) => return Err(e.into()),
            };
            handled += 1;
            let t = now();
            self.on_frame(t, n);
        }
        self.fire_timers(now())
    }

    /// The first receive of a round: up to `wait`, busy-polling up to [`Config::busy_poll`] of
    /// it before blocking in the transport for the rest.
    fn recv_first(&mut self, wait: Duration) -> io::Result<Option<usize>> {
        let spin = self.cfg.busy_poll.min(wait);
        if spin.is_zero() {
            return self.transport.recv(&mut self.rx[..], wait);
        }
        let started = std::time::Instant::now();
        loop {
            if let Some(n) = self.transport.recv(&mut self.rx[..], Duration::ZERO)? {
                self.stats.busy_poll_hits += 1;
                return Ok(Some(n));
            }
            if started.elapsed() >= spin {
                break;
            }
            if self.cfg.busy_poll_yield {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        match wait.checked_sub(started.elapsed()) {
            Some(left) if !left.is_zero() => self.transport.recv(&mut self.rx[..], left),
            _ => Ok(None),
        }
    }

    fn fire_timers(&mut self, t: Time) -> Result<(), Error> {
        let mut sends: Vec<LeafSend> = Vec::new();
        for slot in self.groups.values_mut() {
            if let Some(send) = slot.leaf.poll(t) {
                slot.resends += 1;
                sends.push(send);
            }
        }
        for send in sends {
            self.stats.resends += 1;
            self.send_reduce(t, send)?;
        }
        Ok(())
    }

    fn on_frame(&mut self, t: Time, len: usize) {
        let repr = match FrameRepr::parse(&self.rx[..len]) {
            Ok(r) => r,
            Err(_) => {
                self.stats.bad_frames += 1;
                return;
            }
        };
        if repr.kind == Kind::Reduce {
            self.stats.foreign_frames += 1;
            return;
        }
        let Some(slot) = self.groups.get_mut(&repr.group.0) else {
            self.stats.foreign_frames += 1;
            return;
        };
        if let Kind::Abort(failure) = repr.kind {
            match slot.leaf.on_abort(repr.epoch, repr.seq, failure) {
                Some(_) => self.stats.aborts += 1,
                None => self.stats.stale_releases += 1,
            }
            return;
        }
        match slot.leaf.on_release_checked(t, repr.epoch, repr.seq) {
            ReleaseOutcome::Released(released) => {
                self.stats.releases += 1;
                let rec = Record {
                    group: repr.group.0,
                    seq: released.seq.0,
                    first_reduce_ns: slot.first_reduce_ns,
                    release_ns: t.nanos(),
                    resends: slot.resends,
                    released: true,
                };
                if let Some(sink) = self.sink.as_mut() {
                    // A full disk must not stop the barriers; the caller sees it at flush.
                    sink.write(&rec);
                }
                slot.done = Some(rec);
            }
            // A mismatch ends the group's wait: `wait`/`try_wait` report it from the state.
            ReleaseOutcome::Ignored | ReleaseOutcome::Mismatched(_) => {
                self.stats.stale_releases += 1
            }
        }
    }

    fn send_reduce(&mut self, t: Time, send: LeafSend) -> Result<(), Error> {
        let tx_timestamp = self.cfg.timestamps.then(|| t.nanos());
        let repr = send.frame(self.src, self.cfg.dst, tx_timestamp);
        let mut buf = [0u8; FRAME_LEN];
        let n = repr.emit(&mut buf);
        match self.transport.send(&buf[..n]) {
            Ok(()) => Ok(()),
            // A link taken down (or a queue full) loses this frame like a lossy link would:
            // the re-send timer tries again, and the barrier's timeout bounds the wait.
            Err(e) if is_transient_link_error(&e) => {
                self.stats.link_errors += 1;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Errors of a link that recovers: down (ENETDOWN, ENXIO while its device is gone) or full
/// (ENOBUFS, EAGAIN).
fn is_transient_link_error(e: &io::Error) -> bool {
    const ENXIO: i32 = 6;
    const EAGAIN: i32 = 11;
    const ENETDOWN: i32 = 100;
    const ENOBUFS: i32 = 105;
    matches!(e.raw_os_error(), Some(ENXIO | EAGAIN | ENETDOWN | ENOBUFS))
        || e.kind() == io::ErrorKind::WouldBlock
}
