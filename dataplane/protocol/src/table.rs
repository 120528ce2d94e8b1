//! The group table shared by a switch's RX threads: a flat array of one-cache-line slots
//! indexed by group number. A group's sequence number, phase and arrival set live in one
//! 128-bit word changed by compare-and-swap, so when two threads deliver the last two reduces
//! of a barrier at once exactly one of them sees [`Outcome::Completed`].
//!
//! Configuration lives in the same slot, in atomics, with a generation number that is also
//! stamped into the state word; `configure` works through `&self` and a reconfiguration racing
//! with `apply` is resolved by that generation (see [`GroupTable::configure`]).

use core::fmt;
use core::sync::atomic::Ordering::{Relaxed, SeqCst};

use crate::backoff::Backoff;
use crate::switch::{
    self, bits, Actions, ConfigError, Event, Fired, GroupConfig, GroupState, Outcome, Role, Run,
};
use crate::wire::MacAddr;
use crate::{Epoch, GroupId, PortIdx, PortSet};

#[cfg(not(loom))]
mod sync {
    pub use core::sync::atomic::{AtomicU32, AtomicU64};

    /// The state word: a real 128-bit atomic. On x86-64 portable-atomic uses `cmpxchg16b`:
    /// inlined when the target feature is enabled at compile time (the workspace's
    /// `.cargo/config.toml` does), else chosen at run time through a function pointer, with
    /// global seqlocks on a CPU without CX16.
    pub struct Cell128(portable_atomic::AtomicU128);

    impl Cell128 {
        pub fn new(v: u128) -> Self {
            Cell128(portable_atomic::AtomicU128::new(v))
        }
        pub fn load(&self) -> u128 {
            self.0.load(super::SeqCst)
        }
        pub fn compare_exchange(&self, current: u128, new: u128) -> Result<u128, u128> {
            self.0
                .compare_exchange(current, new, super::SeqCst, super::SeqCst)
        }
        pub fn is_lock_free() -> bool {
            portable_atomic::AtomicU128::is_lock_free()
        }
        pub const fn is_always_lock_free() -> bool {
            portable_atomic::AtomicU128::is_always_lock_free()
        }
    }

    pub fn spin() {
        core::hint::spin_loop();
    }
}

#[cfg(loom)]
mod sync {
    pub use loom::sync::atomic::{AtomicU32, AtomicU64};

    /// loom has no 128-bit atomic: a mutex-protected word with the same load /
    /// compare-exchange interface stands in, so loom explores every interleaving of the CAS
    /// algorithm (what is checked is the algorithm, not the instruction).
    pub struct Cell128(loom::sync::Mutex<u128>);

    impl Cell128 {
        pub fn new(v: u128) -> Self {
            Cell128(loom::sync::Mutex::new(v))
        }
        pub fn load(&self) -> u128 {
            *self.0.lock().unwrap()
        }
        pub fn compare_exchange(&self, current: u128, new: u128) -> Result<u128, u128> {
            let mut g = self.0.lock().unwrap();
            if *g == current {
                *g = new;
                Ok(current)
            } else {
                Err(*g)
            }
        }
        pub fn is_lock_free() -> bool {
            false
        }
        pub const fn is_always_lock_free() -> bool {
            false
        }
    }

    pub fn spin() {
        loom::thread::yield_now();
    }
}

use sync::{spin, AtomicU32, AtomicU64, Cell128};

// `meta` word of a slot: generation, flags, role.
const GEN_BITS: u32 = 30;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;
const CONFIGURED: u64 = 1 << 30;
const BUSY: u64 = 1 << 31;
const ROOT: u64 = 1 << 32;
const PARENT_SHIFT: u32 = 33;

/// Where the generation sits in the state word (the bits [`GroupState`] leaves free).
const STATE_GEN_MASK: u128 = !bits::STATE_MASK;

fn gen_of_meta(m: u64) -> u64 {
    m & GEN_MASK
}

fn gen_of_state(s: u128) -> u64 {
    ((s >> bits::FREE_SHIFT) as u64) & GEN_MASK
}

fn state_with_gen(st: GroupState, gen: u64) -> u128 {
    st.to_bits() | (u128::from(gen & GEN_MASK) << bits::FREE_SHIFT)
}

/// One group: exactly one cache line, so RX threads working on different groups never share
/// a line. Opaque outside this module: [`GroupTable::slot_line`] hands one out only as an
/// address to prefetch.
#[repr(align(64))]
pub struct Slot {
    /// seq | phase | generation | arrived (see [`switch::bits`]).
    state: Cell128,
    /// generation | CONFIGURED | BUSY | ROOT | parent port.
    meta: AtomicU64,
    /// The child-port register.
    children: AtomicU64,
    /// Intermediate re-send timeout, ns.
    timeout: AtomicU64,
    /// The group's epoch (bits 0..32) and failure declaration deadline in whole microseconds
    /// (bits 32..64; 0: never).
    epoch_fail: AtomicU64,
    /// The re-send backoff: cap in ns (bits 0..56), jitter percent (bits 56..64).
    backoff: AtomicU64,
    /// Barriers this switch completed for the group (every configuration of it), wrapping.
    completions: AtomicU32,
    /// Re-sends for the group: releases sent again for stale reduces, reduces sent again by
    /// the re-send timer. Wrapping.
    resends: AtomicU32,
}

fn epoch_fail_word(cfg: &GroupConfig) -> u64 {
    // validate() keeps the microseconds within 32 bits.
    let us = cfg.fail_after_ns.div_ceil(1_000).min(u64::from(u32::MAX));
    u64::from(cfg.epoch.0) | us << 32
}

const JITTER_SHIFT: u32 = 56;

fn backoff_word(b: Backoff) -> u64 {
    b.max_ns.min((1 << JITTER_SHIFT) - 1) | u64::from(b.jitter_pct) << JITTER_SHIFT
}

fn backoff_of_word(w: u64) -> Backoff {
    Backoff {
        max_ns: w & ((1 << JITTER_SHIFT) - 1),
        jitter_pct: (w >> JITTER_SHIFT) as u8,
    }
}

impl Slot {
    fn new() -> Self {
        Slot {
            state: Cell128::new(0),
            meta: AtomicU64::new(0),
            children: AtomicU64::new(0),
            timeout: AtomicU64::new(0),
            epoch_fail: AtomicU64::new(0),
            backoff: AtomicU64::new(0),
            completions: AtomicU32::new(0),
            resends: AtomicU32::new(0),
        }
    }

    /// A consistent (meta, config) snapshot, or `None` when unconfigured. Waits out a
    /// configuration in progress (a handful of stores on the management thread).
    fn read_config(&self) -> Option<(u64, GroupConfig)> {
        loop {
            let m = self.meta.load(SeqCst);
            if m & BUSY != 0 {
                spin();
                continue;
            }
            if m & CONFIGURED == 0 {
                return None;
            }
            let children = self.children.load(SeqCst);
            let timeout = self.timeout.load(SeqCst);
            let epoch_fail = self.epoch_fail.load(SeqCst);
            let backoff = self.backoff.load(SeqCst);
            // seqlock-style validation: the fields belong to generation `m` only if no
            // configure started meanwhile
            if self.meta.load(SeqCst) != m {
                continue;
            }
            let role = if m & ROOT != 0 {
                Role::Root
            } else {
                let parent = PortIdx::new(((m >> PARENT_SHIFT) & 0x3f) as u8).expect("6-bit port");
                Role::Intermediate { parent }
            };
            return Some((
                m,
                GroupConfig {
                    role,
                    children: PortSet(children),
                    resend_timeout_ns: timeout,
                    epoch: Epoch(epoch_fail as u32),
                    backoff: backoff_of_word(backoff),
                    fail_after_ns: (epoch_fail >> 32) * 1_000,
                },
            ));
        }
    }

    /// A state word and the configuration of the same generation, or `None` if unconfigured.
    fn snapshot(&self) -> Option<(u128, GroupConfig)> {
        loop {
            let s = self.state.load();
            let (m, cfg) = self.read_config()?;
            if gen_of_meta(m) == gen_of_state(s) {
                return Some((s, cfg));
            }
            // the state was loaded before a reconfiguration finished: load it again
            spin();
        }
    }

    /// Takes the slot's writer lock (BUSY) and returns the meta word it replaced.
    fn lock_meta(&self) -> u64 {
        loop {
            let m = self.meta.load(SeqCst);
            if m & BUSY == 0
                && self
                    .meta
                    .compare_exchange(m, m | BUSY, SeqCst, SeqCst)
                    .is_ok()
            {
                return m;
            }
            spin();
        }
    }

    /// Installs a new generation: fresh state, then the config, then the meta word.
    /// The ports the configuration of meta word `m` names (children and parent), while the
    /// slot is locked (BUSY) so `children` belongs to `m`.
    fn members_locked(&self, m: u64) -> PortSet {
        if m & CONFIGURED == 0 {
            return PortSet(0);
        }
        let children = PortSet(self.children.load(SeqCst));
        if m & ROOT != 0 {
            return children;
        }
        let parent = PortIdx::new(((m >> PARENT_SHIFT) & 0x3f) as u8).expect("6-bit port");
        children.union(PortSet::single(parent))
    }

    /// Installs a new generation; returns the ports the replaced configuration named.
    fn install(&self, cfg: Option<&GroupConfig>) -> PortSet {
        let old = self.lock_meta();
        let old_members = self.members_locked(old);
        let gen = (gen_of_meta(old) + 1) & GEN_MASK;
        // The new state is stored first: from here every CAS prepared against the old
        // generation fails, and every reader waits for BUSY to clear.
        self.state_store_fresh(gen);
        let mut meta = gen;
        if let Some(cfg) = cfg {
            self.children.store(cfg.children.0, SeqCst);
            self.timeout.store(cfg.resend_timeout_ns, SeqCst);
            self.epoch_fail.store(epoch_fail_word(cfg), SeqCst);
            self.backoff.store(backoff_word(cfg.backoff), SeqCst);
            meta |= CONFIGURED;
            match cfg.role {
                Role::Root => meta |= ROOT,
                Role::Intermediate { parent } => meta |= u64::from(parent.get()) << PARENT_SHIFT,
            }
        } else {
            self.children.store(0, SeqCst);
            self.timeout.store(0, SeqCst);
            self.epoch_fail.store(0, SeqCst);
            self.backoff.store(0, SeqCst);
        }
        self.meta.store(meta, SeqCst);
        old_members
    }

    /// The group's state lost, its configuration kept: a new generation with the same
    /// registers (fresh state first, as in `install`). Nothing to do when unconfigured.
    fn restart(&self) {
        let old = self.lock_meta();
        if old & CONFIGURED == 0 {
            self.meta.store(old, SeqCst);
            return;
        }
        let gen = (gen_of_meta(old) + 1) & GEN_MASK;
        self.state_store_fresh(gen);
        self.meta.store((old & !GEN_MASK) | gen, SeqCst);
    }

    /// Count decisions that a successful CAS (or a no-change load) made this caller's: in the
    /// line the caller already holds, exactly once per decision.
    #[inline]
    fn count(&self, completed: u32, stale: u32) {
        if completed > 0 {
            self.completions.fetch_add(completed, Relaxed);
        }
        if stale > 0 {
            self.resends.fetch_add(stale, Relaxed);
        }
    }

    fn state_store_fresh(&self, gen: u64) {
        let fresh = state_with_gen(GroupState::fresh(), gen);
        loop {
            let s = self.state.load();
            if self.state.compare_exchange(s, fresh).is_ok() {
                return;
            }
        }
    }
}

/// One group's counters (wrapping 32-bit counts).
#[derive(Copy, Clone, Debug, Default, Eq, PartialEq)]
pub struct GroupCounts {
    /// Barriers this switch completed for the group: [`Outcome::Completed`] decisions.
    pub completions: u32,
    /// Re-sends: releases sent again for stale reduces ([`Outcome::StaleReduce`]) and reduces
    /// sent again by the re-send timer.
    pub resends: u32,
}

/// Errors of table operations.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash, thiserror::Error)]
pub enum TableError {
    /// The group number is not below the table's capacity.
    #[error("{0:?} is outside the table")]
    GroupOutOfRange(GroupId),
    /// The group has no configuration at this switch.
    #[error("{0:?} is not configured")]
    NotConfigured(GroupId),
    /// The configuration does not describe a tree.
    #[error("bad configuration: {0}")]
    BadConfig(#[from] ConfigError),
}

/// The lock-free per-group state table. Every method takes `&self`: share it with
/// `Arc<GroupTable>` between RX threads, the scheduler and the management thread.
pub struct GroupTable {
    slots: Box<[Slot]>,
    /// Per port, the configured groups that name it (child or parent): a port at zero carries
    /// no barrier frame of any group, and its frames are refused before the table is read
    /// ([`GroupTable::port_in_use`]).
    port_groups: Box<[AtomicU32]>,
}

impl fmt::Debug for GroupTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupTable")
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

impl GroupTable {
    /// Memory one group costs: one cache line (the table is `capacity * 64` bytes, so the full
    /// 1,048,576 groups take 64 MiB).
    pub const BYTES_PER_GROUP: usize = 64;

    /// A table for groups `0..capacity`, all unconfigured.
    #[cold]
    pub fn new(capacity: u32) -> Self {
        Self::with_memory_advice(capacity, |_| {})
    }

    /// Like [`new`](Self::new), but `advise` sees the slots' memory before anything is written
    /// to it, so the caller can ask the kernel how to back it: the switch asks for transparent
    /// huge pages (`dpdk::advise_hugepages`), since at a million groups (64 MiB) a random-order
    /// reduce otherwise misses the TLB as well as the cache (docs/performance.md).
    #[cold]
    pub fn with_memory_advice(
        capacity: u32,
        advise: impl FnOnce(&mut [core::mem::MaybeUninit<Slot>]),
    ) -> Self {
        let mut slots: Vec<Slot> = Vec::with_capacity(capacity as usize);
        advise(&mut slots.spare_capacity_mut()[..capacity as usize]);
        slots.extend((0..capacity).map(|_| Slot::new()));
        GroupTable {
            slots: slots.into_boxed_slice(),
            port_groups: (0..64).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Number of group slots.
    pub fn capacity(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Bytes of slot memory.
    pub fn bytes(&self) -> usize {
        core::mem::size_of_val(&*self.slots)
    }

    /// True when the group state's 128-bit compare-and-swap is lock-free on this CPU
    /// (`lock cmpxchg16b` on x86-64), whether chosen at compile time or at run time; false
    /// means portable-atomic's fallback: every table operation takes one of a set of global
    /// seqlocks, so RX lcores working on different groups contend, and a thread preempted
    /// while holding one stalls the others. A switch should refuse to start, or warn loudly,
    /// when this is false. Always false under `cfg(loom)` (a mutex stands in there).
    pub fn is_lock_free() -> bool {
        Cell128::is_lock_free()
    }

    /// True when the 128-bit compare-and-swap was chosen at compile time: this build inlines
    /// `lock cmpxchg16b` (x86-64 with the `cmpxchg16b` target feature, which the workspace's
    /// `.cargo/config.toml` enables) and has no run-time dispatch or lock fallback. False for a
    /// build whose `RUSTFLAGS` replaced the workspace's flags: it still works (see
    /// [`is_lock_free`](Self::is_lock_free)), but pays an indirect call per table operation.
    /// Such a build is worth a warning at start-up. (A build with the feature does not run at
    /// all on a CPU without CX16: it stops with SIGILL.)
    pub const fn is_always_lock_free() -> bool {
        Cell128::is_always_lock_free()
    }

    /// The cache line that [`apply`](Self::apply) for `group` will read and write, for a
    /// prefetch hint while earlier frames are handled (an RX burst asks for the slots of all
    /// its frames before applying the first, so their misses overlap); `None` beyond the
    /// table.
    #[inline]
    pub fn slot_line(&self, group: GroupId) -> Option<&Slot> {
        self.slots.get(group.0 as usize)
    }

    fn slot(&self, group: GroupId) -> Result<&Slot, TableError> {
        self.slots
            .get(group.0 as usize)
            .ok_or(TableError::GroupOutOfRange(group))
    }

    /// Sets (or replaces) a group's configuration and resets its state to
    /// [`GroupState::fresh`].
    ///
    /// Racing with `apply` on the same group: each configuration is a new generation, stamped
    /// into the state word. An `apply` either completes entirely under the old configuration
    /// (its CAS lands before the reset) or entirely under the new one (its CAS fails against
    /// the reset state and it retries with the new configuration); it never mixes a child set
    /// of one with a state of the other. Concurrent `configure` calls on one group serialize.
    #[cold]
    pub fn configure(&self, group: GroupId, cfg: GroupConfig) -> Result<(), TableError> {
        cfg.validate()?;
        let slot = self.slot(group)?;
        // The new members are counted before the old ones are let go, so a port that stays a
        // member never reads as unused in between.
        self.count_ports(cfg.members(), true);
        let old = slot.install(Some(&cfg));
        self.count_ports(old, false);
        Ok(())
    }

    fn count_ports(&self, ports: PortSet, add: bool) {
        for p in ports.iter() {
            let n = &self.port_groups[p.get() as usize];
            if add {
                n.fetch_add(1, SeqCst);
            } else {
                n.fetch_sub(1, SeqCst);
            }
        }
    }

    /// Whether any configured group names `port` as a child or its parent. False means no
    /// frame received on `port` can be a member's: the RX path refuses it for its port without
    /// reading the group's slot (a flood on a port that belongs to no tree costs a parse, not a
    /// cache miss per frame). A frame that races a `configure` naming the port for the first
    /// time may be refused as if it came just before: a lost frame, which the re-send timers
    /// recover. True says nothing about a given group; `apply` decides.
    #[inline]
    pub fn port_in_use(&self, port: PortIdx) -> bool {
        self.port_groups[port.get() as usize].load(Relaxed) != 0
    }

    /// Unconfigures a group; frames for it then fail with [`TableError::NotConfigured`].
    #[cold]
    pub fn remove(&self, group: GroupId) -> Result<(), TableError> {
        let old = self.slot(group)?.install(None);
        self.count_ports(old, false);
        Ok(())
    }

    /// The group's configuration, if configured.
    pub fn config(&self, group: GroupId) -> Option<GroupConfig> {
        self.slot(group).ok()?.read_config().map(|(_, c)| c)
    }

    /// The group's current run (its epoch and configuration generation), if configured: what
    /// the timers its decisions arm now carry.
    pub fn run(&self, group: GroupId) -> Option<Run> {
        let (s, cfg) = self.slot(group).ok()?.snapshot()?;
        Some(Run {
            epoch: cfg.epoch,
            generation: gen_of_state(s) as u32,
        })
    }

    /// The group's current state, if configured.
    pub fn state(&self, group: GroupId) -> Option<GroupState> {
        self.slot(group)
            .ok()?
            .snapshot()
            .map(|(s, _)| GroupState::from_bits(s))
    }

    /// Applies one event (see [`switch::on_event`]) in a compare-and-swap loop.
    ///
    /// Linearizable: the result is what `on_event` gives on the state the successful CAS
    /// replaced (or, when the event changes nothing, on the state last loaded). So each
    /// barrier completes in exactly one call, which alone gets [`Outcome::Completed`] and the
    /// actions to send.
    pub fn apply(&self, group: GroupId, ev: Event) -> Result<(Outcome, Actions), TableError> {
        let mut actions = Actions::new();
        self.apply_into(group, ev, &mut actions)
            .map(|outcome| (outcome, actions))
    }

    /// [`apply`](Self::apply) writing the actions into `out` (replaced, not appended to) and
    /// returning only the outcome. Returned by value, the outcome and the actions were
    /// assembled and copied through the `Result` on every frame, and the reads of that copy
    /// stalled on store forwarding (perf/README.md, "The hot path"). `out` is left as it was on
    /// an error.
    #[inline]
    pub fn apply_into(
        &self,
        group: GroupId,
        ev: Event,
        out: &mut Actions,
    ) -> Result<Outcome, TableError> {
        let slot = self.slot(group)?;
        loop {
            let (s, cfg) = slot.snapshot().ok_or(TableError::NotConfigured(group))?;
            let (next, outcome, actions) = switch::on_event(&cfg, GroupState::from_bits(s), ev);
            let new = next.to_bits() | (s & STATE_GEN_MASK);
            // An event that changes nothing needs no write: the decision holds for the state
            // as loaded, and skipping the CAS keeps duplicates from bouncing the cache line.
            if new == s || slot.state.compare_exchange(s, new).is_ok() {
                slot.count(
                    u32::from(outcome == Outcome::Completed),
                    u32::from(outcome == Outcome::StaleReduce),
                );
                *out = actions.with_generation(gen_of_state(s) as u32);
                return Ok(outcome);
            }
        }
    }

    /// Applies one group's `events`, in order, as ONE update of its slot: the RX path's form,
    /// for the arrivals of one burst that name the same group (one load, one compare-and-swap,
    /// however many frames). `out[i]` receives event `i`'s outcome and actions (`out` is at
    /// least as long as `events`; the rest of it is not touched, nor any of it on an error).
    ///
    /// Exactly [`apply`](Self::apply) for each event in order with no other operation on the
    /// group between them (for one event `apply_into` is the same and copies less): the events
    /// are run through `on_event` one after the other on a private copy of the loaded state,
    /// and the last state is installed by the CAS only if the slot still holds the loaded one,
    /// else all of them are decided again on the new state. When the last state equals the
    /// loaded one there is nothing to write: the decisions hold at the moment of the load. The
    /// property test `burst_at_once_equals_frame_by_frame` (barrier-switch, `burst.rs`) checks
    /// the RX path's grouping and this call against `on_event` frame by frame.
    #[inline]
    pub fn apply_burst(
        &self,
        group: GroupId,
        events: &[Event],
        out: &mut [(Outcome, Actions)],
    ) -> Result<(), TableError> {
        let slot = self.slot(group)?;
        let out = &mut out[..events.len()];
        loop {
            let (s, cfg) = slot.snapshot().ok_or(TableError::NotConfigured(group))?;
            let generation = gen_of_state(s) as u32;
            let mut st = GroupState::from_bits(s);
            let (mut completed, mut stale) = (0u32, 0u32);
            for (ev, o) in events.iter().zip(out.iter_mut()) {
                let (next, outcome, actions) = switch::on_event(&cfg, st, *ev);
                st = next;
                completed += u32::from(outcome == Outcome::Completed);
                stale += u32::from(outcome == Outcome::StaleReduce);
                *o = (outcome, actions.with_generation(generation));
            }
            let new = st.to_bits() | (s & STATE_GEN_MASK);
            // Events that change nothing need no write, and skipping the CAS keeps duplicates
            // from bouncing the cache line.
            if new == s || slot.state.compare_exchange(s, new).is_ok() {
                slot.count(completed, stale);
                return Ok(());
            }
        }
    }

    /// A timer armed for the group fired (see [`switch::on_timer`]); `me` is this switch's
    /// id, named in the aborts it declares. Empty when the group is unconfigured or the timer
    /// is stale: the group moved on from its barrier, or the timer belongs to another run of
    /// the group (`fired.run.generation` is not the group's configuration generation: it was
    /// created, reset, changed, deleted or restarted since the timer was armed). So a timer
    /// never needs cancelling, and none acts on a run it was not armed in.
    pub fn on_timer(&self, fired: Fired, me: MacAddr) -> Actions {
        let Ok(slot) = self.slot(fired.group) else {
            return Actions::new();
        };
        loop {
            let Some((s, cfg)) = slot.snapshot() else {
                return Actions::new();
            };
            let generation = gen_of_state(s) as u32;
            if u64::from(fired.run.generation) & GEN_MASK != u64::from(generation) {
                return Actions::new();
            }
            let (next, actions) = switch::on_timer(&cfg, GroupState::from_bits(s), fired, me);
            let actions = actions.with_generation(generation);
            let new = next.to_bits() | (s & STATE_GEN_MASK);
            if new == s || slot.state.compare_exchange(s, new).is_ok() {
                if actions.reduces_up() {
                    slot.resends.fetch_add(1, Relaxed);
                }
                return actions;
            }
        }
    }

    /// The group's counters: barriers completed here and re-sends (see [`GroupCounts`]);
    /// zero beyond the table. They live in the group's slot, counted by `apply` and
    /// `on_timer`, and survive reconfiguration, resets and removal.
    pub fn counts(&self, group: GroupId) -> GroupCounts {
        self.slot(group)
            .map_or(GroupCounts::default(), |s| GroupCounts {
                completions: s.completions.load(Relaxed),
                resends: s.resends.load(Relaxed),
            })
    }

    /// Models a restart that loses all barrier state but keeps configuration: every group
    /// goes back to [`GroupState::fresh`] (phase `Unknown`) in a new generation, so the
    /// timers armed before it are stale, as a restarted process has none.
    #[cold]
    pub fn reset_all(&self) {
        for slot in self.slots.iter() {
            slot.restart();
        }
    }

    /// Like [`GroupTable::reset_all`] for one group.
    pub fn reset(&self, group: GroupId) -> Result<(), TableError> {
        self.slot(group)?.restart();
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::switch::Timer;
    use crate::Seq;

    const ME: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xaa]);
    /// A re-send timer for `seq` of the group's current run (read off the table).
    fn resend(t: &GroupTable, group: GroupId, seq: Seq) -> Fired {
        Fired {
            group,
            seq,
            timer: Timer::Resend { attempt: 0 },
            run: t.run(group).expect("configured"),
        }
    }
    use crate::switch::{Action, Phase, Reject};
    use crate::MAX_GROUPS;
    use std::sync::atomic::{AtomicU64 as StdAtomicU64, AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    fn p(i: u8) -> PortIdx {
        PortIdx::new(i).unwrap()
    }

    #[test]
    fn slot_is_one_cache_line() {
        assert_eq!(core::mem::size_of::<Slot>(), 64);
        assert_eq!(core::mem::align_of::<Slot>(), 64);
        assert_eq!(GroupTable::BYTES_PER_GROUP, core::mem::size_of::<Slot>());
    }

    #[test]
    fn cas_is_lock_free_where_the_cpu_has_cmpxchg16b() {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("cmpxchg16b") {
            assert!(
                GroupTable::is_lock_free(),
                "portable-atomic fell back to a lock"
            );
        }
        // chosen at compile time implies lock-free at run time
        if GroupTable::is_always_lock_free() {
            assert!(GroupTable::is_lock_free());
        }
    }

    /// The workspace's `.cargo/config.toml` enables `cmpxchg16b` for x86-64, so the CAS is
    /// chosen at compile time. This fails when `RUSTFLAGS` (or `CARGO_ENCODED_RUSTFLAGS`) from
    /// the environment replaced those flags without `-C target-feature=+cmpxchg16b`.
    #[test]
    #[cfg(target_arch = "x86_64")]
    #[allow(clippy::assertions_on_constants)] // the constant is what the test checks
    fn built_with_cmpxchg16b() {
        assert!(
            cfg!(target_feature = "cmpxchg16b"),
            "built without the cmpxchg16b target feature: RUSTFLAGS from the environment \
             replaces .cargo/config.toml's rustflags; add -C target-feature=+cmpxchg16b to it"
        );
        assert!(GroupTable::is_always_lock_free());
        assert!(GroupTable::is_lock_free());
    }

    #[test]
    fn full_table_is_64_mib() {
        let t = GroupTable::new(MAX_GROUPS);
        assert_eq!(t.capacity(), MAX_GROUPS);
        assert_eq!(t.bytes(), 64 << 20);
        let last = GroupId(MAX_GROUPS - 1);
        t.configure(last, GroupConfig::root(PortSet::single(p(0))))
            .unwrap();
        assert_eq!(
            t.apply(
                last,
                Event::Reduce {
                    port: p(0),
                    epoch: Epoch::DEFAULT,
                    seq: Seq(0)
                }
            )
            .unwrap()
            .0,
            Outcome::Completed
        );
        assert_eq!(
            t.apply(
                GroupId(MAX_GROUPS),
                Event::Reduce {
                    port: p(0),
                    epoch: Epoch::DEFAULT,
                    seq: Seq(0)
                }
            ),
            Err(TableError::GroupOutOfRange(GroupId(MAX_GROUPS)))
        );
    }

    #[test]
    fn configure_apply_remove() {
        let t = GroupTable::new(8);
        let g = GroupId(3);
        let ev = Event::Reduce {
            port: p(1),
            epoch: Epoch::DEFAULT,
            seq: Seq(0),
        };
        assert_eq!(t.apply(g, ev), Err(TableError::NotConfigured(g)));
        assert_eq!(t.config(g), None);
        assert_eq!(t.state(g), None);
        assert_eq!(
            t.configure(g, GroupConfig::root(PortSet::empty())),
            Err(TableError::BadConfig(ConfigError::NoChildren))
        );
        let cfg = GroupConfig::intermediate(p(5), PortSet(0b110), 777);
        t.configure(g, cfg).unwrap();
        assert_eq!(t.config(g), Some(cfg));
        assert_eq!(t.state(g), Some(GroupState::fresh()));
        assert_eq!(t.apply(g, ev).unwrap().0, Outcome::Recorded);
        let (o, a) = t
            .apply(
                g,
                Event::Reduce {
                    port: p(2),
                    epoch: Epoch::DEFAULT,
                    seq: Seq(0),
                },
            )
            .unwrap();
        assert_eq!(o, Outcome::Completed);
        assert_eq!(
            a.get(0),
            Some(&Action::SendReduce {
                seq: Seq(0),
                port: p(5),
                retransmit: false
            })
        );
        assert_eq!(
            a.get(1),
            Some(&Action::ArmTimer {
                seq: Seq(0),
                after_ns: 777,
                timer: Timer::Resend { attempt: 0 },
            })
        );
        assert_eq!(t.state(g).unwrap().phase, Phase::AwaitingRelease);
        assert_eq!(t.on_timer(resend(&t, g, Seq(0)), ME).len(), 2);
        assert!(t.on_timer(resend(&t, g, Seq(1)), ME).is_empty());
        assert_eq!(
            t.apply(
                g,
                Event::Release {
                    port: p(1),
                    epoch: Epoch::DEFAULT,
                    seq: Seq(0)
                }
            )
            .unwrap()
            .0,
            Outcome::Rejected(Reject::NotTheParent)
        );
        assert_eq!(
            t.apply(
                g,
                Event::Release {
                    port: p(5),
                    epoch: Epoch::DEFAULT,
                    seq: Seq(0)
                }
            )
            .unwrap()
            .0,
            Outcome::Released
        );
        assert_eq!(t.state(g).unwrap().seq, Seq(1));
        // reconfigure resets the state
        let root = GroupConfig::root(PortSet(0b1));
        t.configure(g, root).unwrap();
        assert_eq!(t.config(g), Some(root));
        assert_eq!(t.state(g), Some(GroupState::fresh()));
        t.remove(g).unwrap();
        assert_eq!(t.apply(g, ev), Err(TableError::NotConfigured(g)));
        let gone = |group| Fired {
            group,
            seq: Seq(0),
            timer: Timer::Resend { attempt: 0 },
            run: Run::default(),
        };
        assert!(t.on_timer(gone(g), ME).is_empty());
        assert!(t.on_timer(gone(GroupId(99)), ME).is_empty());
        // other groups untouched
        assert_eq!(t.config(GroupId(2)), None);
    }

    /// A port is in use while some configured group names it; reconfiguring and removing
    /// groups keeps the count right, and a refused configuration changes nothing.
    #[test]
    fn ports_in_use_follow_configure_and_remove() {
        let t = GroupTable::new(4);
        let p = |i: u8| PortIdx::new(i).unwrap();
        let used =
            |t: &GroupTable| -> Vec<u8> { (0..64).filter(|&i| t.port_in_use(p(i))).collect() };
        assert_eq!(used(&t), Vec::<u8>::new());
        let mid = GroupConfig::intermediate(p(0), PortSet(0b0110), 1_000); // parent 0, children 1, 2
        t.configure(GroupId(1), mid).unwrap();
        assert_eq!(used(&t), [0, 1, 2]);
        t.configure(GroupId(2), GroupConfig::root(PortSet(0b1100)))
            .unwrap(); // children 2, 3
        assert_eq!(used(&t), [0, 1, 2, 3]);
        // Group 1 again, now a root over 1 and 63: port 0 is no longer named.
        let mut wide = PortSet(0b10);
        wide.insert(p(63));
        t.configure(GroupId(1), GroupConfig::root(wide)).unwrap();
        assert_eq!(used(&t), [1, 2, 3, 63]);
        assert!(t
            .configure(GroupId(3), GroupConfig::root(PortSet(0)))
            .is_err());
        assert!(
            t.configure(GroupId(9), GroupConfig::root(PortSet(0b1)))
                .is_err(),
            "outside"
        );
        assert_eq!(used(&t), [1, 2, 3, 63], "refusals count nothing");
        t.remove(GroupId(2)).unwrap();
        assert_eq!(used(&t), [1, 63]);
        t.remove(GroupId(2)).unwrap(); // already gone: nothing to let go
        t.reset_all();
        assert_eq!(used(&t), [1, 63], "a reset keeps configuration");
        t.remove(GroupId(1)).unwrap();
        assert_eq!(used(&t), Vec::<u8>::new());
    }

    #[test]
    fn reset_keeps_config_and_forgets_state() {
        let t = GroupTable::new(4);
        for g in 0..4 {
            t.configure(GroupId(g), GroupConfig::root(PortSet(0b11)))
                .unwrap();
            t.apply(
                GroupId(g),
                Event::Reduce {
                    port: p(0),
                    epoch: Epoch::DEFAULT,
                    seq: Seq(9),
                },
            )
            .unwrap();
        }
        assert_eq!(t.state(GroupId(2)).unwrap().seq, Seq(9));
        t.reset_all();
        for g in 0..4 {
            assert_eq!(t.state(GroupId(g)), Some(GroupState::fresh()));
            assert!(t.config(GroupId(g)).is_some());
        }
        t.apply(
            GroupId(1),
            Event::Reduce {
                port: p(0),
                epoch: Epoch::DEFAULT,
                seq: Seq(3),
            },
        )
        .unwrap();
        t.reset(GroupId(1)).unwrap();
        assert_eq!(t.state(GroupId(1)), Some(GroupState::fresh()));
    }

    #[test]
    fn all_parent_ports_and_64_children_survive_the_meta_encoding() {
        let t = GroupTable::new(1);
        for parent in 0..64u8 {
            let children = PortSet(!(1u64 << parent));
            let cfg = GroupConfig::intermediate(p(parent), children, u64::MAX - u64::from(parent));
            t.configure(GroupId(0), cfg).unwrap();
            assert_eq!(t.config(GroupId(0)), Some(cfg));
        }
        let root = GroupConfig::root(PortSet(u64::MAX));
        t.configure(GroupId(0), root).unwrap();
        assert_eq!(t.config(GroupId(0)), Some(root));
    }

    /// Threads own disjoint child ports of every group and run barriers in lockstep at the
    /// root role. Each completion must be seen exactly once, and the final sequence numbers
    /// must equal the completions.
    #[test]
    fn stress_every_completion_counted_once() {
        const THREADS: usize = 4;
        const GROUPS: u32 = 64;
        const PORTS_PER_THREAD: u8 = 4;
        const BARRIERS: u32 = 300;
        let t = Arc::new(GroupTable::new(GROUPS));
        let children = PortSet((1u64 << (THREADS as u8 * PORTS_PER_THREAD)) - 1);
        for g in 0..GROUPS {
            t.configure(GroupId(g), GroupConfig::root(children))
                .unwrap();
        }
        let completions = Arc::new(StdAtomicU64::new(0));
        let per_group: Arc<Vec<StdAtomicU64>> =
            Arc::new((0..GROUPS).map(|_| StdAtomicU64::new(0)).collect());
        let start = Arc::new(Barrier::new(THREADS));
        let delivered: Arc<Vec<AtomicUsize>> =
            Arc::new((0..BARRIERS).map(|_| AtomicUsize::new(0)).collect());
        let handles: Vec<_> = (0..THREADS)
            .map(|ti| {
                let delivered = delivered.clone();
                let (t, completions, per_group, start) = (
                    t.clone(),
                    completions.clone(),
                    per_group.clone(),
                    start.clone(),
                );
                std::thread::spawn(move || {
                    let my_ports: Vec<PortIdx> = (0..PORTS_PER_THREAD)
                        .map(|k| p(ti as u8 * PORTS_PER_THREAD + k))
                        .collect();
                    start.wait();
                    for b in 0..BARRIERS {
                        for g in 0..GROUPS {
                            // each thread walks the groups in a different order
                            let g = GroupId((g + ti as u32 * 17) % GROUPS);
                            for (k, &port) in my_ports.iter().enumerate() {
                                let (o, a) = t
                                    .apply(
                                        g,
                                        Event::Reduce {
                                            port,
                                            epoch: Epoch::DEFAULT,
                                            seq: Seq(b),
                                        },
                                    )
                                    .unwrap();
                                if o == Outcome::Completed {
                                    completions.fetch_add(1, Ordering::Relaxed);
                                    per_group[g.0 as usize].fetch_add(1, Ordering::Relaxed);
                                    assert_eq!(
                                        a.get(0),
                                        Some(&Action::SendRelease {
                                            seq: Seq(b),
                                            ports: children,
                                            retransmit: false
                                        })
                                    );
                                }
                                // a duplicate now and then: it must never complete anything
                                if k == 0 && b % 7 == 0 {
                                    let (o, _) = t
                                        .apply(
                                            g,
                                            Event::Reduce {
                                                port,
                                                epoch: Epoch::DEFAULT,
                                                seq: Seq(b),
                                            },
                                        )
                                        .unwrap();
                                    assert!(
                                        matches!(o, Outcome::Duplicate | Outcome::StaleReduce),
                                        "{o:?}"
                                    );
                                }
                            }
                        }
                        // Lockstep: a reduce for b+1 before b completed would be "ahead" and
                        // resync instead of counting. Once every thread has delivered all its
                        // reduces for b, a group still at b lost a completion: fail instead of
                        // waiting forever.
                        delivered[b as usize].fetch_add(1, Ordering::SeqCst);
                        for g in 0..GROUPS {
                            while t.state(GroupId(g)).unwrap().seq == Seq(b) {
                                if delivered[b as usize].load(Ordering::SeqCst) == THREADS {
                                    let st = t.state(GroupId(g)).unwrap();
                                    assert_ne!(st.seq, Seq(b), "group{g} lost barrier {b}: {st:?}");
                                }
                                std::thread::yield_now();
                            }
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(
            completions.load(Ordering::Relaxed),
            u64::from(GROUPS) * u64::from(BARRIERS)
        );
        for g in 0..GROUPS {
            let st = t.state(GroupId(g)).unwrap();
            assert_eq!(st.seq, Seq(BARRIERS));
            assert_eq!(
                u64::from(st.seq.0),
                per_group[g as usize].load(Ordering::Relaxed)
            );
            assert_eq!(
                t.counts(GroupId(g)).completions,
                BARRIERS,
                "the slot's own count agrees"
            );
            assert!(st.arrived.is_empty());
        }
    }

    /// The failure deadline is kept in whole microseconds, rounded up, within 32 bits beside
    /// the epoch; longer is refused rather than cut.
    #[test]
    fn fail_after_is_kept_in_whole_microseconds_and_bounded() {
        let t = GroupTable::new(2);
        let root = GroupConfig::root(PortSet(0b11)).with_epoch(Epoch(0xdead_beef));
        for (ns, kept) in [(0, 0), (1, 1_000), (1_000, 1_000), (1_500_001, 1_501_000)] {
            t.configure(GroupId(1), root.with_fail_after(ns)).unwrap();
            let c = t.config(GroupId(1)).unwrap();
            assert_eq!(
                (c.fail_after_ns, c.epoch),
                (kept, Epoch(0xdead_beef)),
                "{ns} ns"
            );
        }
        let max = GroupConfig::MAX_FAIL_AFTER_NS;
        t.configure(GroupId(1), root.with_fail_after(max)).unwrap();
        assert_eq!(t.config(GroupId(1)).unwrap().fail_after_ns, max);
        assert_eq!(
            t.configure(GroupId(1), root.with_fail_after(max + 1)),
            Err(TableError::BadConfig(ConfigError::FailAfterTooLong(
                max + 1
            )))
        );
        assert_eq!(
            t.config(GroupId(1)).unwrap().fail_after_ns,
            max,
            "the old one stays"
        );
    }

    /// Reconfiguring while other threads apply: every apply returns a well-formed result and
    /// afterwards the group runs cleanly under the final configuration.
    #[test]
    fn reconfigure_races_with_apply() {
        let t = Arc::new(GroupTable::new(1));
        let g = GroupId(0);
        let a = GroupConfig::root(PortSet(0b11));
        let b = GroupConfig::intermediate(p(9), PortSet(0b1100), 5);
        t.configure(g, a).unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let workers: Vec<_> = (0..2u8)
            .map(|w| {
                let (t, stop) = (t.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut n = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        let port = p((n % 4) as u8 + w % 2);
                        let r = t.apply(
                            g,
                            Event::Reduce {
                                port,
                                epoch: Epoch::DEFAULT,
                                seq: Seq(n / 8),
                            },
                        );
                        let (_, acts) = r.unwrap();
                        for act in &acts {
                            // actions always name ports of one consistent configuration
                            match *act {
                                // a completion releases exactly the root's children: a
                                // root role mixed with b's child set would show up here
                                Action::SendRelease {
                                    ports,
                                    retransmit: false,
                                    ..
                                } => {
                                    assert_eq!(ports, a.children)
                                }
                                Action::SendRelease {
                                    ports,
                                    retransmit: true,
                                    ..
                                } => {
                                    assert!(
                                        ports.is_subset_of(a.children)
                                            || ports.is_subset_of(b.children)
                                    )
                                }
                                Action::SendReduce { port, .. } => assert_eq!(port, p(9)),
                                Action::ArmTimer { after_ns, .. } => assert_eq!(after_ns, 5),
                                Action::SendAbort { .. } => panic!("no abort configured"),
                            }
                        }
                        n = n.wrapping_add(1);
                    }
                })
            })
            .collect();
        for i in 0..2000 {
            t.configure(g, if i % 2 == 0 { b } else { a }).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.join().unwrap();
        }
        t.configure(g, a).unwrap();
        assert_eq!(
            t.apply(
                g,
                Event::Reduce {
                    port: p(0),
                    epoch: Epoch::DEFAULT,
                    seq: Seq(4)
                }
            )
            .unwrap()
            .0,
            Outcome::Recorded
        );
        assert_eq!(
            t.apply(
                g,
                Event::Reduce {
                    port: p(1),
                    epoch: Epoch::DEFAULT,
                    seq: Seq(4)
                }
            )
            .unwrap()
            .0,
            Outcome::Completed
        );
    }
}

/// A timer belongs to the run of its group it was armed in (issue 21): a deadline or a re-send
/// armed before a reset, a `set`, a delete and create, or a restart of the group's state must
/// not act on the next run, even at the same sequence number.
#[cfg(all(test, not(loom)))]
mod run_tests {
    use super::*;
    use crate::switch::Phase;
    use crate::Seq;

    const ME: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xaa]);
    const G: GroupId = GroupId(3);

    fn p(i: u8) -> PortIdx {
        PortIdx::new(i).unwrap()
    }

    fn reduce(port: u8, epoch: Epoch, seq: u32) -> Event {
        Event::Reduce {
            port: p(port),
            epoch,
            seq: Seq(seq),
        }
    }

    /// The timers `acts` asks for, as the scheduler would arm them.
    fn armed(acts: &Actions) -> Vec<Fired> {
        acts.iter()
            .filter_map(|a| acts.timer(G, a).map(|(f, _)| f))
            .collect()
    }

    /// Root over ports 1, 2, 3 declaring after 800 ms.
    fn root(epoch: Epoch) -> GroupConfig {
        GroupConfig::root(PortSet(0b1110))
            .with_fail_after(800_000_000)
            .with_epoch(epoch)
    }

    /// The ways a run of a group ends while the group stays configured at this switch.
    #[derive(Debug, Clone, Copy)]
    enum End {
        /// `barrierctl group reset` into a new epoch.
        Reset,
        /// `barrierctl group set`: new registers, same epoch, fresh state.
        Set,
        /// delete, then create with the same number and epoch.
        DeleteCreate,
        /// the group's state lost as in a restart (`GroupTable::reset`).
        Restart,
    }
    const ENDS: [End; 4] = [End::Reset, End::Set, End::DeleteCreate, End::Restart];

    fn end(t: &GroupTable, how: End, cfg: GroupConfig) -> GroupConfig {
        let next = match how {
            End::Reset => cfg.with_epoch(cfg.epoch.next()),
            End::Set => cfg.with_fail_after(cfg.fail_after_ns + 1_000),
            End::DeleteCreate | End::Restart => cfg,
        };
        match how {
            End::Reset | End::Set => t.configure(G, next).unwrap(),
            End::DeleteCreate => {
                t.remove(G).unwrap();
                t.configure(G, next).unwrap();
            }
            End::Restart => t.reset(G).unwrap(),
        }
        next
    }

    /// The reproduction: barrier 0 of run 1 arms a deadline at its first arrival and
    /// completes; the run ends; the new run's first child reports barrier 0. The old deadline
    /// fires while the new run gathers barrier 0 with one child recorded: it must not abort.
    #[test]
    fn a_deadline_of_the_previous_run_does_not_abort_the_next() {
        for how in ENDS {
            let t = GroupTable::new(8);
            let cfg = root(Epoch(1));
            t.configure(G, cfg).unwrap();
            let (o, a) = t.apply(G, reduce(1, cfg.epoch, 0)).unwrap();
            assert_eq!(o, Outcome::Recorded);
            let old = armed(&a);
            assert_eq!(old.len(), 1, "the first arrival arms the deadline");
            t.apply(G, reduce(2, cfg.epoch, 0)).unwrap();
            assert_eq!(
                t.apply(G, reduce(3, cfg.epoch, 0)).unwrap().0,
                Outcome::Completed
            );
            let cfg = end(&t, how, cfg);
            let (o, a) = t.apply(G, reduce(1, cfg.epoch, 0)).unwrap();
            assert_eq!(o, Outcome::Recorded, "{how:?}");
            let new = armed(&a);
            let before = t.state(G).unwrap();
            assert_eq!(before.phase, Phase::Unknown);
            let acts = t.on_timer(old[0], ME);
            assert!(
                acts.is_empty(),
                "{how:?}: the previous run's deadline acted on the next: {acts:?}"
            );
            assert_eq!(t.state(G), Some(before), "{how:?}");
            // the new run's own deadline still declares
            assert!(!t.on_timer(new[0], ME).is_empty(), "{how:?}");
            assert_eq!(t.state(G).unwrap().phase, Phase::Aborted, "{how:?}");
        }
    }

    /// An intermediate's re-send timer armed for barrier 0 of one run, fired while the next
    /// run awaits the release of its own barrier 0: no re-send (the new run's timer does that,
    /// with its own attempt count).
    #[test]
    fn a_resend_of_the_previous_run_does_not_resend_in_the_next() {
        for how in ENDS {
            let t = GroupTable::new(8);
            let cfg = GroupConfig::intermediate(p(5), PortSet(0b110), 1_000).with_epoch(Epoch(4));
            t.configure(G, cfg).unwrap();
            t.apply(G, reduce(1, cfg.epoch, 0)).unwrap();
            let (o, a) = t.apply(G, reduce(2, cfg.epoch, 0)).unwrap();
            assert_eq!(o, Outcome::Completed);
            let old = armed(&a);
            assert_eq!(old.len(), 1);
            let cfg = end(&t, how, cfg);
            t.apply(G, reduce(1, cfg.epoch, 0)).unwrap();
            let (o, a) = t.apply(G, reduce(2, cfg.epoch, 0)).unwrap();
            assert_eq!(o, Outcome::Completed, "{how:?}");
            let new = armed(&a);
            assert_eq!(t.state(G).unwrap().phase, Phase::AwaitingRelease);
            let acts = t.on_timer(old[0], ME);
            assert!(
                acts.is_empty(),
                "{how:?}: the previous run's re-send timer acted on the next: {acts:?}"
            );
            assert_eq!(t.on_timer(new[0], ME).len(), 2, "{how:?}: re-send, re-arm");
            let before = t.counts(G);
            assert_eq!(
                before.resends, 1,
                "{how:?}: only the new run's re-send counts"
            );
        }
    }

    /// The per-group counters belong to the group number, not to a run: they keep counting
    /// across every way a run ends (Prometheus counters must never go back).
    #[test]
    fn counters_count_the_group_number_across_runs() {
        for how in ENDS {
            let t = GroupTable::new(8);
            let cfg = root(Epoch(1));
            t.configure(G, cfg).unwrap();
            for c in 1..=3 {
                t.apply(G, reduce(c, cfg.epoch, 0)).unwrap();
            }
            assert_eq!(t.counts(G).completions, 1);
            let cfg = end(&t, how, cfg);
            assert_eq!(t.counts(G).completions, 1, "{how:?}: kept");
            for c in 1..=3 {
                t.apply(G, reduce(c, cfg.epoch, 0)).unwrap();
            }
            assert_eq!(t.counts(G).completions, 2, "{how:?}: counted on");
        }
    }

    /// A timer of a group that was deleted does nothing, and one armed before a removal does
    /// nothing once the number is configured again with other registers.
    #[test]
    fn a_timer_of_a_deleted_group_does_nothing() {
        let t = GroupTable::new(8);
        let cfg = root(Epoch(1));
        t.configure(G, cfg).unwrap();
        let old = armed(&t.apply(G, reduce(1, cfg.epoch, 0)).unwrap().1);
        t.remove(G).unwrap();
        assert!(t.on_timer(old[0], ME).is_empty());
        assert_eq!(t.state(G), None);
    }
}
