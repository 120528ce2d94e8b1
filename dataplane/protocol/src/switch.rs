//! The per-group control logic of a root or intermediate switch (claim 6), including what a
//! switch does after it lost its state (the restart rule of `docs/protocol.md`).
//!
//! Pure functions `(config, state, event) -> (state, outcome, actions)`: no I/O, no clock, no
//! allocation. [`crate::table::GroupTable`] runs them inside a compare-and-swap loop; the
//! simulator and tests call them directly.

use core::fmt;

use crate::backoff::Backoff;
pub use crate::wire::Failure;
use crate::wire::{FrameRepr, Kind, MacAddr};
use crate::{Epoch, GroupId, PortIdx, PortSet, Seq};

/// Where this switch sits in the group's tree.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub enum Role {
    /// The root: completes barriers and originates releases.
    Root,
    /// An intermediate switch with the given parent port (the parent-port register).
    Intermediate {
        /// The port leading to the parent.
        parent: PortIdx,
    },
}

/// One group's configuration registers at one switch.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub struct GroupConfig {
    /// Root or intermediate (with its parent port).
    pub role: Role,
    /// The child-port register: ports leading to children, up to 64.
    pub children: PortSet,
    /// Intermediate: re-send the reduce to the parent if no release arrived within this many
    /// nanoseconds (claim 3). Ignored at the root.
    pub resend_timeout_ns: u64,
    /// The group's current run, assigned by management: frames of any other epoch are
    /// rejected ([`Reject::OtherEpoch`]).
    pub epoch: Epoch,
    /// Intermediate: how the re-sends after the first wait back off (doubling up to a cap,
    /// per-group jitter). [`Backoff::FIXED`]: every `resend_timeout_ns`.
    pub backoff: Backoff,
    /// Failure declaration: a child that has not reported the current barrier this many
    /// nanoseconds after the first of its siblings did is declared failed, and the group is
    /// aborted ([`Phase::Aborted`]). 0: never.
    pub fail_after_ns: u64,
}

/// A configuration that cannot describe a barrier tree.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash, thiserror::Error)]
pub enum ConfigError {
    /// No child port: the group could never complete.
    #[error("group has no child ports")]
    NoChildren,
    /// The parent port is also a child port: a frame's direction would be ambiguous.
    #[error("parent port {0:?} is also a child port")]
    ParentIsChild(PortIdx),
    /// The failure deadline is beyond what the table keeps (whole microseconds in 32 bits).
    #[error("fail-after of {0} ns is longer than the most a group can have, {max} ns (about 71 minutes)", max = GroupConfig::MAX_FAIL_AFTER_NS)]
    FailAfterTooLong(u64),
}

impl GroupConfig {
    /// The longest failure deadline: the group table keeps it in whole microseconds
    /// (rounded up) in 32 bits, so that a group's slot stays one cache line.
    pub const MAX_FAIL_AFTER_NS: u64 = u32::MAX as u64 * 1_000;

    /// A root with the given children, in [`Epoch::DEFAULT`].
    pub const fn root(children: PortSet) -> Self {
        GroupConfig {
            role: Role::Root,
            children,
            resend_timeout_ns: 0,
            epoch: Epoch::DEFAULT,
            backoff: Backoff::FIXED,
            fail_after_ns: 0,
        }
    }

    /// An intermediate switch with the given parent, children and re-send timeout, in
    /// [`Epoch::DEFAULT`].
    pub const fn intermediate(parent: PortIdx, children: PortSet, resend_timeout_ns: u64) -> Self {
        GroupConfig {
            role: Role::Intermediate { parent },
            children,
            resend_timeout_ns,
            epoch: Epoch::DEFAULT,
            backoff: Backoff::FIXED,
            fail_after_ns: 0,
        }
    }

    /// The same registers in another epoch.
    #[must_use]
    pub const fn with_epoch(self, epoch: Epoch) -> Self {
        GroupConfig { epoch, ..self }
    }

    /// The same registers with re-sends backing off by `backoff`.
    #[must_use]
    pub const fn with_backoff(self, backoff: Backoff) -> Self {
        GroupConfig { backoff, ..self }
    }

    /// The same registers declaring a child failed after `fail_after_ns` (0: never).
    #[must_use]
    pub const fn with_fail_after(self, fail_after_ns: u64) -> Self {
        GroupConfig {
            fail_after_ns,
            ..self
        }
    }

    /// Every member port: the children and, at an intermediate, the parent.
    pub const fn members(&self) -> PortSet {
        match self.role {
            Role::Root => self.children,
            Role::Intermediate { parent } => self.children.union(PortSet::single(parent)),
        }
    }

    /// Children non-empty, parent not a child.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.children.is_empty() {
            return Err(ConfigError::NoChildren);
        }
        if self.fail_after_ns > Self::MAX_FAIL_AFTER_NS {
            return Err(ConfigError::FailAfterTooLong(self.fail_after_ns));
        }
        if let Role::Intermediate { parent } = self.role {
            if self.children.contains(parent) {
                return Err(ConfigError::ParentIsChild(parent));
            }
        }
        Ok(())
    }

    /// The parent port, `None` at the root.
    pub const fn parent(&self) -> Option<PortIdx> {
        match self.role {
            Role::Root => None,
            Role::Intermediate { parent } => Some(parent),
        }
    }
}

/// Where a group's current barrier stands at this switch.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub enum Phase {
    /// After configuration, a reset (new epoch) or a restart: the switch does not know the
    /// group's barrier. It gathers its children's reduces: `seq` is the highest sequence
    /// number reported so far and `arrived` the children that reported it (empty: nothing
    /// heard yet, `seq` meaningless). It becomes known when every child reported the same
    /// number (the barrier completes) or the parent's release arrives. Only here do the
    /// restart rules read frames as evidence (`docs/protocol.md`).
    Unknown,
    /// Recording which children reduced `seq`.
    Collecting,
    /// Intermediate only: every child reduced `seq`, the reduce went to the parent, waiting
    /// for the release (the re-send timer runs).
    AwaitingRelease,
    /// Barrier `seq` cannot complete in this epoch: a switch declared a child failed
    /// ([`GroupState::failure`] says which). Every member frame is answered with the abort
    /// until management resets the group (a new epoch).
    Aborted,
}

impl Phase {
    const fn to_bits(self) -> u128 {
        match self {
            Phase::Unknown => 0,
            Phase::Collecting => 1,
            Phase::AwaitingRelease => 2,
            Phase::Aborted => 3,
        }
    }

    const fn from_bits(b: u128) -> Phase {
        match b & 0b11 {
            0 => Phase::Unknown,
            1 => Phase::Collecting,
            2 => Phase::AwaitingRelease,
            _ => Phase::Aborted,
        }
    }

    /// A stable snake_case name.
    pub const fn name(&self) -> &'static str {
        match self {
            Phase::Unknown => "unknown",
            Phase::Collecting => "collecting",
            Phase::AwaitingRelease => "awaiting_release",
            Phase::Aborted => "aborted",
        }
    }
}

/// The whole mutable state of one group at one switch. Fits one 128-bit word
/// ([`GroupState::to_bits`]), so the table changes it with one compare-and-swap.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub struct GroupState {
    /// The current barrier's sequence number (meaningless in [`Phase::Unknown`]).
    pub seq: Seq,
    /// Children whose reduce for `seq` was recorded since `seq` became current. In
    /// [`Phase::Aborted`] these bits hold the failure instead ([`GroupState::aborted`]).
    pub arrived: PortSet,
    /// Where the barrier stands.
    pub phase: Phase,
}

/// Bit layout of [`GroupState::to_bits`]: seq in bits 0..32, phase in 32..34, arrived in
/// 64..128. Bits 34..64 are zero here; the table keeps its configuration generation there.
pub mod bits {
    /// Sequence number.
    pub const SEQ_SHIFT: u32 = 0;
    /// Phase (2 bits).
    pub const PHASE_SHIFT: u32 = 32;
    /// First free bit; bits `FREE_SHIFT..64` are free for the caller.
    pub const FREE_SHIFT: u32 = 34;
    /// Arrival set.
    pub const ARRIVED_SHIFT: u32 = 64;
    /// Mask of the bits [`super::GroupState`] uses.
    pub const STATE_MASK: u128 = !(((1u128 << 30) - 1) << FREE_SHIFT);
}

impl GroupState {
    /// The state after configuration or restart: nothing known.
    pub const fn fresh() -> Self {
        GroupState {
            seq: Seq(0),
            arrived: PortSet(0),
            phase: Phase::Unknown,
        }
    }

    /// Packs into one word (layout in [`bits`]). `fresh()` is 0.
    pub const fn to_bits(self) -> u128 {
        (self.seq.0 as u128) << bits::SEQ_SHIFT
            | self.phase.to_bits() << bits::PHASE_SHIFT
            | (self.arrived.0 as u128) << bits::ARRIVED_SHIFT
    }

    /// Unpacks; bits 34..64 are ignored.
    pub const fn from_bits(b: u128) -> Self {
        GroupState {
            seq: Seq((b >> bits::SEQ_SHIFT) as u32),
            arrived: PortSet((b >> bits::ARRIVED_SHIFT) as u64),
            phase: Phase::from_bits(b >> bits::PHASE_SHIFT),
        }
    }
}

/// Where [`GroupState::aborted`] keeps its failure in the `arrived` word: the switch id in
/// bits 0..48, the port in 48..56, "the parent knows" in bit 56.
const ABORT_PORT_SHIFT: u32 = 48;
const ABORT_PARENT_KNOWS: u64 = 1 << 56;

impl GroupState {
    /// Barrier `seq` aborted because of `failure`; `parent_knows`: the parent has the abort
    /// (it came from there, or the parent answered ours), so the re-sends upward stop.
    pub const fn aborted(seq: Seq, failure: Failure, parent_knows: bool) -> GroupState {
        let m = failure.switch.0;
        let id = (m[0] as u64) << 40
            | (m[1] as u64) << 32
            | (m[2] as u64) << 24
            | (m[3] as u64) << 16
            | (m[4] as u64) << 8
            | m[5] as u64;
        let knows = if parent_knows { ABORT_PARENT_KNOWS } else { 0 };
        GroupState {
            seq,
            arrived: PortSet(id | (failure.port as u64) << ABORT_PORT_SHIFT | knows),
            phase: Phase::Aborted,
        }
    }

    /// The children recorded for `seq`: `arrived`, or none when aborted (whose `arrived`
    /// bits hold the failure).
    pub const fn arrivals(&self) -> PortSet {
        match self.phase {
            Phase::Aborted => PortSet::empty(),
            _ => self.arrived,
        }
    }

    /// Who was declared failed, when the group is aborted.
    pub const fn failure(&self) -> Option<Failure> {
        if !matches!(self.phase, Phase::Aborted) {
            return None;
        }
        let w = self.arrived.0;
        let b = w.to_be_bytes();
        Some(Failure {
            switch: MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]]),
            port: (w >> ABORT_PORT_SHIFT) as u8,
        })
    }

    /// Aborted and the parent has the abort.
    const fn parent_knows(&self) -> bool {
        matches!(self.phase, Phase::Aborted) && self.arrived.0 & ABORT_PARENT_KNOWS != 0
    }
}

impl Default for GroupState {
    fn default() -> Self {
        Self::fresh()
    }
}

/// A barrier event for one group: a parsed frame and the port it came in on.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub enum Event {
    /// A reduce for `seq` of epoch `epoch` arrived on `port`.
    Reduce {
        /// Ingress port.
        port: PortIdx,
        /// The frame's epoch.
        epoch: Epoch,
        /// The frame's sequence number.
        seq: Seq,
    },
    /// A release for `seq` of epoch `epoch` arrived on `port`.
    Release {
        /// Ingress port.
        port: PortIdx,
        /// The frame's epoch.
        epoch: Epoch,
        /// The frame's sequence number.
        seq: Seq,
    },
    /// An abort of barrier `seq` of epoch `epoch` arrived on `port`.
    Abort {
        /// Ingress port.
        port: PortIdx,
        /// The frame's epoch.
        epoch: Epoch,
        /// The aborted barrier.
        seq: Seq,
        /// Who was declared failed.
        failure: Failure,
    },
}

impl Event {
    /// The event for a frame of `kind` for barrier `seq` of `epoch` that arrived on `port`:
    /// the one place a frame kind becomes a switch event.
    pub const fn new(kind: Kind, port: PortIdx, epoch: Epoch, seq: Seq) -> Event {
        match kind {
            Kind::Reduce => Event::Reduce { port, epoch, seq },
            Kind::Release => Event::Release { port, epoch, seq },
            Kind::Abort(failure) => Event::Abort {
                port,
                epoch,
                seq,
                failure,
            },
        }
    }

    /// The event for a parsed frame that arrived on ingress port `port`. The frame's group
    /// selects the table slot (`GroupTable::apply(frame.group, ..)`); its flags and timestamp
    /// do not matter to the control logic.
    pub const fn from_frame(frame: &FrameRepr, port: PortIdx) -> Event {
        Event::new(frame.kind, port, frame.epoch, frame.seq)
    }

    /// The same event, as if its frame carried `epoch`.
    #[must_use]
    pub const fn with_epoch(self, epoch: Epoch) -> Event {
        match self {
            Event::Reduce { port, seq, .. } => Event::Reduce { port, epoch, seq },
            Event::Release { port, seq, .. } => Event::Release { port, epoch, seq },
            Event::Abort {
                port, seq, failure, ..
            } => Event::Abort {
                port,
                epoch,
                seq,
                failure,
            },
        }
    }

    /// The frame's epoch.
    pub const fn epoch(&self) -> Epoch {
        match *self {
            Event::Reduce { epoch, .. }
            | Event::Release { epoch, .. }
            | Event::Abort { epoch, .. } => epoch,
        }
    }
}

/// Something the caller must do for this group.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub enum Action {
    /// Send a reduce for `seq` on `port` (the parent port).
    SendReduce {
        /// Sequence number to put in the frame.
        seq: Seq,
        /// Egress port.
        port: PortIdx,
        /// Set the RETRANSMIT flag.
        retransmit: bool,
    },
    /// Send a release for `seq` on every port in `ports`.
    SendRelease {
        /// Sequence number to put in the frame.
        seq: Seq,
        /// Egress ports.
        ports: PortSet,
        /// Set the RETRANSMIT flag.
        retransmit: bool,
    },
    /// Send an abort of barrier `seq`, naming `failure`, on every port in `ports`.
    SendAbort {
        /// The aborted barrier.
        seq: Seq,
        /// Egress ports.
        ports: PortSet,
        /// Who was declared failed.
        failure: Failure,
    },
    /// Call `on_timer` with this timer after `after_ns` nanoseconds. Arming again replaces
    /// nothing: a stale timer is harmless because `on_timer` checks the state.
    ArmTimer {
        /// The barrier the timer belongs to.
        seq: Seq,
        /// Delay in nanoseconds.
        after_ns: u64,
        /// What the timer is for.
        timer: Timer,
    },
}

impl Action {
    /// What a send puts on the wire: the ports it goes to, the frame's kind and barrier, and
    /// whether it carries the RETRANSMIT flag (an abort never does); `None` for a timer. The
    /// one place an action becomes frames, for whoever builds them (the scheduler, the RX
    /// path building in place, the checks of both).
    pub const fn frame(&self) -> Option<(PortSet, Kind, Seq, bool)> {
        match *self {
            Action::SendReduce {
                seq,
                port,
                retransmit,
            } => Some((PortSet::single(port), Kind::Reduce, seq, retransmit)),
            Action::SendRelease {
                seq,
                ports,
                retransmit,
            } => Some((ports, Kind::Release, seq, retransmit)),
            Action::SendAbort {
                seq,
                ports,
                failure,
            } => Some((ports, Kind::Abort(failure), seq, false)),
            Action::ArmTimer { .. } => None,
        }
    }
}

/// What a timer is for.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub enum Timer {
    /// Intermediate: re-send the reduce (or, aborted, the abort) to the parent; `attempt`
    /// re-sends of it came before (the backoff's attempt number).
    Resend {
        /// Re-sends so far.
        attempt: u32,
    },
    /// Failure declaration: the children that have not reported the barrier by now fail.
    Deadline,
}

/// One run of a group at one switch: what a decision, and every timer it arms, belongs to.
///
/// `epoch` is the run as management names it to the whole tree (frames carry it).
/// `generation` is the run as this switch's table knows it: a number that every
/// configuration of the group (create, reset, set), every removal and every loss of its
/// state (a restart) advances, so it also tells apart two configurations in one epoch (`set`,
/// delete and create of the same number and epoch). [`on_event`] and [`on_timer`] see only
/// the configuration, so they fill in the epoch and leave the generation 0;
/// [`crate::table::GroupTable`] stamps its own ([`Actions::with_generation`]) and checks it
/// when a timer fires.
#[derive(Copy, Clone, Debug, Default, Eq, PartialEq, Hash)]
pub struct Run {
    /// The group's epoch when the decision was made.
    pub epoch: Epoch,
    /// The table's configuration generation of the group when the decision was made (0
    /// outside a table).
    pub generation: u32,
}

impl Run {
    /// The run of epoch `epoch`, outside a table (generation 0).
    pub const fn of_epoch(epoch: Epoch) -> Run {
        Run {
            epoch,
            generation: 0,
        }
    }
}

/// A timer that fired: the group, the barrier, the timer armed for it, and the run that armed
/// it (a timer acts only on the run it was armed in: [`on_timer`]).
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub struct Fired {
    /// The group.
    pub group: GroupId,
    /// The barrier the timer was armed for.
    pub seq: Seq,
    /// What it is for.
    pub timer: Timer,
    /// The run that armed it: [`Actions::run`] of the decision that asked for the timer.
    pub run: Run,
}

/// The most actions one event can produce: a re-sent release, a reduce and a timer.
pub const MAX_ACTIONS: usize = 4;

/// A short list of actions with fixed capacity, so the per-frame path never allocates, and
/// the run of the group that decided them ([`Run`]): the frames they ask for carry its
/// epoch, fixed when the decision was made, so a send still queued when management resets
/// the group goes out in the old epoch (and is dropped as such), never in the new one; the
/// timers they arm carry the whole run, so a timer fires only into the run that armed it.
#[derive(Copy, Clone, Default, Eq, PartialEq, Hash)]
pub struct Actions {
    items: [Option<Action>; MAX_ACTIONS],
    len: u8,
    run: Run,
}

impl Actions {
    /// No actions, in [`Epoch::DEFAULT`].
    pub const fn new() -> Self {
        Actions::in_epoch(Epoch::DEFAULT)
    }

    /// No actions yet, decided in `epoch` (generation 0: outside a table).
    pub const fn in_epoch(epoch: Epoch) -> Self {
        Actions {
            items: [None; MAX_ACTIONS],
            len: 0,
            run: Run::of_epoch(epoch),
        }
    }

    /// The epoch every frame of these actions carries.
    pub const fn epoch(&self) -> Epoch {
        self.run.epoch
    }

    /// The run that decided these actions: what a timer they arm must carry
    /// ([`Fired::run`]).
    pub const fn run(&self) -> Run {
        self.run
    }

    /// The same actions, decided in the table's configuration generation `generation`.
    #[must_use]
    pub const fn with_generation(mut self, generation: u32) -> Self {
        self.run.generation = generation;
        self
    }

    /// The timer `ArmTimer` action `a` asks for, as the caller arms it: with this decision's
    /// group and run. `None` for any other action.
    pub const fn timer(&self, group: GroupId, a: &Action) -> Option<(Fired, u64)> {
        match *a {
            Action::ArmTimer {
                seq,
                after_ns,
                timer,
            } => Some((
                Fired {
                    group,
                    seq,
                    timer,
                    run: self.run,
                },
                after_ns,
            )),
            _ => None,
        }
    }

    /// Appends one action.
    ///
    /// # Panics
    /// When full; the control logic never produces more than [`MAX_ACTIONS`].
    pub fn push(&mut self, a: Action) {
        let i = self.len as usize;
        assert!(i < MAX_ACTIONS, "Actions overflow");
        self.items[i] = Some(a);
        self.len += 1;
    }

    /// Number of actions.
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// True when there is nothing to do.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The actions in the order they should be carried out.
    pub fn iter(&self) -> impl Iterator<Item = &Action> + '_ {
        self.items[..self.len as usize].iter().flatten()
    }

    /// True when one of the actions sends a reduce up: at an intermediate's completion, or
    /// (from a timer) a re-send. The one test for "this decision reduced up" that the table's
    /// re-send count, the scheduler's `timer_resends` and the straggler report share.
    pub fn reduces_up(&self) -> bool {
        self.iter().any(|a| matches!(a, Action::SendReduce { .. }))
    }

    /// Action `i`, if any.
    pub fn get(&self, i: usize) -> Option<&Action> {
        self.items.get(i).and_then(Option::as_ref)
    }
}

impl<'a> IntoIterator for &'a Actions {
    type Item = &'a Action;
    type IntoIter = core::iter::Flatten<core::slice::Iter<'a, Option<Action>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.items[..self.len as usize].iter().flatten()
    }
}

impl fmt::Debug for Actions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// What an event did to the group, for counters and for exactly-once completion.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub enum Outcome {
    /// A child's reduce for the current seq was recorded; the barrier is not yet complete.
    Recorded,
    /// A reduce already recorded, or a release already forwarded (the parent re-sent it).
    Duplicate,
    /// This event completed the barrier here (root: released the children and advanced;
    /// intermediate: reduced to the parent). Exactly one event per barrier gets this.
    Completed,
    /// Intermediate: the parent's release was forwarded to the children and seq advanced.
    Released,
    /// A reduce for an earlier barrier: the previous release was re-sent to that child.
    StaleReduce,
    /// A release for an earlier barrier: ignored. Known: further behind than `seq - 1`;
    /// `Unknown` with children heard at `seq`: `t + 1` behind `seq`.
    StaleRelease,
    /// Known state: a reduce for a later barrier than the current one. Claim 6: only the
    /// previous release is re-sent, to that child. A healthy tree never sends one; it shows a
    /// member that restarted without a new epoch, or a faulty one.
    AheadReduce,
    /// Known state: a release for a later barrier from the parent: ignored (claim 6).
    AheadRelease,
    /// The frame does not belong to this group's tree; nothing changed.
    Rejected(Reject),
    /// An abort from a member aborted the group here; it was passed on to the rest of the
    /// tree.
    Aborted,
    /// A frame for an aborted group: a reduce or an abort from a child is answered with the
    /// abort, the rest changes nothing.
    AfterAbort,
}

/// Why an event was rejected.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub enum Reject {
    /// A reduce from a port that is not in the child-port register, or an abort from a port
    /// that is neither a child nor the parent.
    NotAChild,
    /// A release from a port other than the parent port, or any release at the root.
    NotTheParent,
    /// A frame of another epoch than the group's current one: another run of the group (an
    /// old job's leaf still retrying, a new job that management has not set up here yet).
    OtherEpoch,
}

impl Outcome {
    /// Every outcome, for counter arrays ([`Outcome::index`] order).
    pub const ALL: [Outcome; 13] = [
        Outcome::Recorded,
        Outcome::Duplicate,
        Outcome::Completed,
        Outcome::Released,
        Outcome::StaleReduce,
        Outcome::StaleRelease,
        Outcome::Rejected(Reject::NotAChild),
        Outcome::Rejected(Reject::NotTheParent),
        Outcome::AheadReduce,
        Outcome::AheadRelease,
        Outcome::Rejected(Reject::OtherEpoch),
        Outcome::Aborted,
        Outcome::AfterAbort,
    ];

    /// Dense index into [`Outcome::ALL`].
    pub const fn index(&self) -> usize {
        match self {
            Outcome::Recorded => 0,
            Outcome::Duplicate => 1,
            Outcome::Completed => 2,
            Outcome::Released => 3,
            Outcome::StaleReduce => 4,
            Outcome::StaleRelease => 5,
            Outcome::Rejected(Reject::NotAChild) => 6,
            Outcome::Rejected(Reject::NotTheParent) => 7,
            Outcome::AheadReduce => 8,
            Outcome::AheadRelease => 9,
            Outcome::Rejected(Reject::OtherEpoch) => 10,
            Outcome::Aborted => 11,
            Outcome::AfterAbort => 12,
        }
    }

    /// A stable snake_case name for counters.
    pub const fn name(&self) -> &'static str {
        match self {
            Outcome::Recorded => "recorded",
            Outcome::Duplicate => "duplicate",
            Outcome::Completed => "completed",
            Outcome::Released => "released",
            Outcome::StaleReduce => "stale_reduce",
            Outcome::StaleRelease => "stale_release",
            Outcome::Rejected(Reject::NotAChild) => "not_a_child",
            Outcome::Rejected(Reject::NotTheParent) => "not_the_parent",
            Outcome::AheadReduce => "ahead_reduce",
            Outcome::AheadRelease => "ahead_release",
            Outcome::Rejected(Reject::OtherEpoch) => "other_epoch",
            Outcome::Aborted => "aborted",
            Outcome::AfterAbort => "after_abort",
        }
    }
}

/// Applies one event to one group (claim 6 plus the restart rules). Returns the new state,
/// what happened, and what to send.
///
/// One `match`, one arm per row of the table "Claim 6, event by event" in `docs/protocol.md`,
/// in the table's order: first the epoch and membership checks, then, with `s` the group's
/// `seq`, the rows of the known state (`Collecting` or `AwaitingRelease`), which are claim 6
/// exactly, then the rows of `Unknown`, where the restart rules read frames as evidence.
/// "Behind" is neither equal nor ahead (so `s + 2^31` is behind, see [`Seq::is_ahead_of`]).
/// `docs/protocol.md` gives the safety argument and its assumptions.
pub fn on_event(cfg: &GroupConfig, st: GroupState, ev: Event) -> (GroupState, Outcome, Actions) {
    use Phase::{Aborted, AwaitingRelease, Collecting, Unknown};
    let mut acts = Actions::in_epoch(cfg.epoch);
    let s = st.seq;
    let (next, outcome) = match (ev, st.phase) {
        // Epoch: a frame of another run of the group. Nothing changes.
        (ev, _) if ev.epoch() != cfg.epoch => (st, Outcome::Rejected(Reject::OtherEpoch)),
        // Membership: a reduce from a port not in `children`. Nothing changes.
        (Event::Reduce { port, .. }, _) if !cfg.children.contains(port) => {
            (st, Outcome::Rejected(Reject::NotAChild))
        }
        // Membership: a release at the root, or from any port but `parent`. Nothing changes.
        (Event::Release { port, .. }, _) if cfg.parent() != Some(port) => {
            (st, Outcome::Rejected(Reject::NotTheParent))
        }
        // Membership: an abort from a port that is neither a child nor the parent.
        (Event::Abort { port, .. }, _) if !cfg.members().contains(port) => {
            (st, Outcome::Rejected(Reject::NotAChild))
        }
        // Aborted, row "reduce from a child": answer with the abort, to that child only.
        (Event::Reduce { port, .. }, Aborted) => {
            push_abort(st, PortSet::single(port), &mut acts);
            (st, Outcome::AfterAbort)
        }
        // Aborted, row "abort from the parent": the parent has it; upward re-sends stop.
        (Event::Abort { .. }, Aborted) if ev_from_parent(cfg, ev) => {
            let failure = st.failure().expect("aborted state has a failure");
            (
                GroupState::aborted(st.seq, failure, true),
                Outcome::AfterAbort,
            )
        }
        // Aborted, row "abort from a child": answer with the abort (the child's re-sends
        // upward stop on it).
        (Event::Abort { port, .. }, Aborted) => {
            push_abort(st, PortSet::single(port), &mut acts);
            (st, Outcome::AfterAbort)
        }
        // Aborted, row "release": nothing (no barrier of this epoch completes any more).
        (Event::Release { .. }, Aborted) => (st, Outcome::AfterAbort),
        // Any other state, row "abort from a member": the group is aborted here. Pass it on:
        // from the parent, to every child; from a child, to every member, the sender
        // included (that answer tells it the abort arrived), and an intermediate keeps
        // re-sending it upward until the parent answers.
        (
            Event::Abort {
                port,
                seq: t,
                failure,
                ..
            },
            Unknown | Collecting | AwaitingRelease,
        ) => {
            let from_parent = cfg.parent() == Some(port);
            let next = GroupState::aborted(t, failure, from_parent || cfg.parent().is_none());
            let ports = if from_parent {
                cfg.children
            } else {
                cfg.members()
            };
            push_abort(next, ports, &mut acts);
            if !next.parent_knows() {
                acts.push(Action::ArmTimer {
                    seq: t,
                    after_ns: cfg.resend_timeout_ns,
                    timer: Timer::Resend { attempt: 0 },
                });
            }
            (next, Outcome::Aborted)
        }
        // Known, row "reduce s from a child not yet recorded | Collecting" (claim 6, row 2):
        // record it; the last child completes the barrier.
        (Event::Reduce { port, seq: t, .. }, Collecting)
            if t == s && !st.arrived.contains(port) =>
        {
            let mut recorded = st;
            recorded.arrived.insert(port);
            complete_if_last(cfg, recorded, &mut acts)
        }
        // Known, row "reduce s from a child already recorded | Collecting": nothing.
        (Event::Reduce { seq: t, .. }, Collecting) if t == s => (st, Outcome::Duplicate),
        // Known, row "reduce s | AwaitingRelease": nothing. The reduce is (or will be) with
        // the parent, and this switch's own timer re-sends it.
        (Event::Reduce { seq: t, .. }, AwaitingRelease) if t == s => (st, Outcome::Duplicate),
        // Known, row "reduce t behind s" (claim 6, row 1): the child missed the release of
        // s-1 and is retrying; re-send it to that child only.
        (Event::Reduce { port, seq: t, .. }, Collecting | AwaitingRelease) if !t.is_ahead_of(s) => {
            acts.push(resend_previous(s, port));
            (st, Outcome::StaleReduce)
        }
        // Known, row "reduce t ahead of s" (claim 6, row 1: another sequence number): the
        // same answer, to that child only. No other child is touched, so a member that
        // sends arbitrary numbers cannot release the others.
        (Event::Reduce { port, .. }, Collecting | AwaitingRelease) => {
            acts.push(resend_previous(s, port));
            (st, Outcome::AheadReduce)
        }
        // Known, row "release s from the parent (intermediate)" (claim 6, row 3): forward
        // it, advance.
        (Event::Release { seq: t, .. }, Collecting | AwaitingRelease) if t == s => {
            forward_release(cfg, t, &mut acts)
        }
        // Known, row "release s-1 from the parent": the one just forwarded, re-sent. Nothing.
        (Event::Release { seq: t, .. }, Collecting | AwaitingRelease) if t == s.prev() => {
            (st, Outcome::Duplicate)
        }
        // Known, row "release t ahead of s" (claim 6, row 4: another sequence number):
        // ignored.
        (Event::Release { seq: t, .. }, Collecting | AwaitingRelease) if t.is_ahead_of(s) => {
            (st, Outcome::AheadRelease)
        }
        // Known, row "release further behind" (claim 6, row 4): ignored.
        (Event::Release { .. }, Collecting | AwaitingRelease) => (st, Outcome::StaleRelease),
        // Unknown, row "reduce t, nothing heard yet" (restart rule 1): t is the highest
        // number reported; this child is recorded for it. It completes at once when it is
        // the only child.
        (Event::Reduce { port, seq: t, .. }, Unknown) if st.arrived.is_empty() => complete_if_last(
            cfg,
            GroupState::gathering(t, PortSet::single(port)),
            &mut acts,
        ),
        // Unknown, row "reduce s (the highest heard)": record it (or a duplicate); when
        // every child has reported s the barrier completes and the group is known.
        (Event::Reduce { port, seq: t, .. }, Unknown) if t == s => {
            if st.arrived.contains(port) {
                (st, Outcome::Duplicate)
            } else {
                let mut recorded = st;
                recorded.arrived.insert(port);
                complete_if_last(cfg, recorded, &mut acts)
            }
        }
        // Unknown, row "reduce t ahead of s" (restart rule 2): a member of this epoch at t
        // proves t-1 completed at the root. Release t-1 to every other child (those that
        // reported s, and any still waiting on t-1 that has not been heard), restart the
        // gathering at t with this child.
        (Event::Reduce { port, seq: t, .. }, Unknown) if t.is_ahead_of(s) => {
            let mut others = cfg.children;
            others.remove(port);
            if !others.is_empty() {
                acts.push(Action::SendRelease {
                    seq: t.prev(),
                    ports: others,
                    retransmit: true,
                });
            }
            complete_if_last(
                cfg,
                GroupState::gathering(t, PortSet::single(port)),
                &mut acts,
            )
        }
        // Unknown, row "reduce t behind s" (restart rule 3): the children recorded at s
        // prove s-1 completed; the child waits on it (or on an older barrier, which no
        // member of this epoch can). Re-send release s-1 to it.
        (Event::Reduce { port, .. }, Unknown) => {
            acts.push(resend_previous(s, port));
            (st, Outcome::StaleReduce)
        }
        // Unknown, row "release t from the parent, t+1 behind s, children heard at s" (the
        // stale-release guard): a child's reduce for s proves every leaf reached s-1, so no
        // one below waits on t; adopting it would put the switch behind its children.
        // Ignored, as a lost frame would be; the gathering goes on.
        (Event::Release { seq: t, .. }, Unknown)
            if !st.arrived.is_empty() && t.next() != s && !t.next().is_ahead_of(s) =>
        {
            (st, Outcome::StaleRelease)
        }
        // Unknown, row "release t from the parent" (restart rule 4): only the root
        // originates releases, and only for completed barriers, so a release for t proves t
        // completed. Forward it, advance to t+1: the group is known.
        (Event::Release { seq: t, .. }, Unknown) => forward_release(cfg, t, &mut acts),
    };
    (next, outcome, acts)
}

/// The abort of an aborted state `st` (its barrier and failure), to `ports`.
fn push_abort(st: GroupState, ports: PortSet, acts: &mut Actions) {
    if let Some(failure) = st.failure() {
        if !ports.is_empty() {
            acts.push(Action::SendAbort {
                seq: st.seq,
                ports,
                failure,
            });
        }
    }
}

/// True when `ev` came in on the parent port.
fn ev_from_parent(cfg: &GroupConfig, ev: Event) -> bool {
    let port = match ev {
        Event::Reduce { port, .. } | Event::Release { port, .. } | Event::Abort { port, .. } => {
            port
        }
    };
    cfg.parent() == Some(port)
}

/// Claim 6, row 1's answer: the release of `s - 1`, re-sent to `port` only.
const fn resend_previous(s: Seq, port: PortIdx) -> Action {
    Action::SendRelease {
        seq: s.prev(),
        ports: PortSet::single(port),
        retransmit: true,
    }
}

impl GroupState {
    /// `Unknown`, gathering: `seq` is the highest number heard, `arrived` the children that
    /// reported it.
    const fn gathering(seq: Seq, arrived: PortSet) -> GroupState {
        GroupState {
            seq,
            arrived,
            phase: Phase::Unknown,
        }
    }
}

/// The end of the rows that record a reduce: `Recorded` while a child is missing; once every
/// child is in, `Completed` with, at the root, the release to every child and `seq + 1`
/// (`Collecting`), at an intermediate, the reduce to the parent and its re-send timer
/// (`AwaitingRelease`).
fn complete_if_last(
    cfg: &GroupConfig,
    st: GroupState,
    acts: &mut Actions,
) -> (GroupState, Outcome) {
    if !cfg.children.is_subset_of(st.arrived) {
        // The first child of this barrier starts the failure-declaration deadline.
        if cfg.fail_after_ns > 0 && st.arrived.len() == 1 {
            acts.push(Action::ArmTimer {
                seq: st.seq,
                after_ns: cfg.fail_after_ns,
                timer: Timer::Deadline,
            });
        }
        return (st, Outcome::Recorded);
    }
    match cfg.role {
        Role::Root => {
            acts.push(Action::SendRelease {
                seq: st.seq,
                ports: cfg.children,
                retransmit: false,
            });
            let next = GroupState {
                seq: st.seq.next(),
                arrived: PortSet::empty(),
                phase: Phase::Collecting,
            };
            (next, Outcome::Completed)
        }
        Role::Intermediate { parent } => {
            acts.push(Action::SendReduce {
                seq: st.seq,
                port: parent,
                retransmit: false,
            });
            acts.push(Action::ArmTimer {
                seq: st.seq,
                after_ns: cfg.resend_timeout_ns,
                timer: Timer::Resend { attempt: 0 },
            });
            (
                GroupState {
                    phase: Phase::AwaitingRelease,
                    ..st
                },
                Outcome::Completed,
            )
        }
    }
}

/// The end of the rows that forward the parent's release for `t`: release `t` to every child,
/// `seq = t + 1`, `Collecting`.
fn forward_release(cfg: &GroupConfig, t: Seq, acts: &mut Actions) -> (GroupState, Outcome) {
    acts.push(Action::SendRelease {
        seq: t,
        ports: cfg.children,
        retransmit: false,
    });
    let next = GroupState {
        seq: t.next(),
        arrived: PortSet::empty(),
        phase: Phase::Collecting,
    };
    (next, Outcome::Released)
}

/// A timer armed for barrier `fired.seq` expired; `me` is this switch's id (named in the aborts
/// it declares). Stale timers do nothing: the group moved on from `seq`, or the timer was armed
/// in another run of the group (`fired.run.epoch` is not the configuration's: the group was
/// reset since, and the new run may be at the same `seq`). The configuration generation in
/// `fired.run` is the table's to check ([`crate::table::GroupTable::on_timer`]).
///
/// - [`Timer::Resend`]: an intermediate still waiting for the release of `seq` re-sends its
///   reduce (claim 3); one that aborted `seq` and has no answer from its parent re-sends the
///   abort. Either way it re-arms, the wait backing off by [`GroupConfig::backoff`].
/// - [`Timer::Deadline`]: while barrier `seq` is still being gathered and some child has
///   reported it, the children that have not are declared failed: the group is aborted,
///   naming the lowest such port, and the abort goes to every member (and, at an
///   intermediate, keeps going up until the parent answers).
pub fn on_timer(
    cfg: &GroupConfig,
    state: GroupState,
    fired: Fired,
    me: MacAddr,
) -> (GroupState, Actions) {
    let mut acts = Actions::in_epoch(cfg.epoch);
    let seq = fired.seq;
    if state.seq != seq || fired.run.epoch != cfg.epoch {
        return (state, acts);
    }
    let rearm = |attempt: u32| Action::ArmTimer {
        seq,
        after_ns: cfg
            .backoff
            .delay_ns(cfg.resend_timeout_ns, fired.group, cfg.epoch, seq, attempt),
        timer: Timer::Resend { attempt },
    };
    match (fired.timer, state.phase, cfg.role) {
        (Timer::Resend { attempt }, Phase::AwaitingRelease, Role::Intermediate { parent }) => {
            acts.push(Action::SendReduce {
                seq,
                port: parent,
                retransmit: true,
            });
            acts.push(rearm(attempt.saturating_add(1)));
            (state, acts)
        }
        (Timer::Resend { attempt }, Phase::Aborted, Role::Intermediate { parent })
            if !state.parent_knows() =>
        {
            push_abort(state, PortSet::single(parent), &mut acts);
            acts.push(rearm(attempt.saturating_add(1)));
            (state, acts)
        }
        (Timer::Deadline, Phase::Collecting | Phase::Unknown, _)
            if !state.arrived.is_empty() && !cfg.children.is_subset_of(state.arrived) =>
        {
            let silent = cfg.children.iter().find(|p| !state.arrived.contains(*p));
            let port = silent.map_or(0, PortIdx::get);
            let failure = Failure { switch: me, port };
            let next = GroupState::aborted(seq, failure, cfg.parent().is_none());
            push_abort(next, cfg.members(), &mut acts);
            if !next.parent_knows() {
                acts.push(Action::ArmTimer {
                    seq,
                    after_ns: cfg.resend_timeout_ns,
                    timer: Timer::Resend { attempt: 0 },
                });
            }
            (next, acts)
        }
        _ => (state, acts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(i: u8) -> PortIdx {
        PortIdx::new(i).unwrap()
    }
    fn ports(list: &[u8]) -> PortSet {
        list.iter().map(|&i| p(i)).collect()
    }
    fn red(port: u8, seq: u32) -> Event {
        Event::Reduce {
            port: p(port),
            epoch: Epoch::DEFAULT,
            seq: Seq(seq),
        }
    }
    fn rel(port: u8, seq: u32) -> Event {
        Event::Release {
            port: p(port),
            epoch: Epoch::DEFAULT,
            seq: Seq(seq),
        }
    }
    fn st(seq: u32, arrived: &[u8], phase: Phase) -> GroupState {
        GroupState {
            seq: Seq(seq),
            arrived: ports(arrived),
            phase,
        }
    }
    const ME: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xaa]);
    fn resend(seq: Seq) -> Fired {
        Fired {
            group: GroupId(0),
            seq,
            timer: Timer::Resend { attempt: 0 },
            run: Run::of_epoch(Epoch::DEFAULT),
        }
    }
    fn acts(a: &Actions) -> Vec<Action> {
        a.iter().copied().collect()
    }
    const ROOT3: GroupConfig = GroupConfig::root(PortSet(0b1110)); // children 1,2,3
    fn mid3() -> GroupConfig {
        GroupConfig::intermediate(p(0), ports(&[1, 2, 3]), 500)
    }

    #[test]
    fn state_bits_round_trip() {
        assert_eq!(GroupState::fresh().to_bits(), 0);
        for s in [
            st(0, &[], Phase::Unknown),
            st(u32::MAX, &[0, 63], Phase::Collecting),
            st(12345, &[1, 2, 3], Phase::AwaitingRelease),
        ] {
            let b = s.to_bits();
            assert_eq!(b & !bits::STATE_MASK, 0);
            assert_eq!(GroupState::from_bits(b), s);
            // free bits are ignored when unpacking
            assert_eq!(
                GroupState::from_bits(b | (0x3fff_ffffu128 << bits::FREE_SHIFT)),
                s
            );
        }
    }

    #[test]
    fn config_validation() {
        assert_eq!(ROOT3.validate(), Ok(()));
        assert_eq!(mid3().validate(), Ok(()));
        assert_eq!(
            GroupConfig::root(PortSet::empty()).validate(),
            Err(ConfigError::NoChildren)
        );
        assert_eq!(
            GroupConfig::intermediate(p(1), ports(&[1, 2]), 1).validate(),
            Err(ConfigError::ParentIsChild(p(1)))
        );
    }

    // --- claim 6, row 2: reduce with the current seq ---

    #[test]
    fn root_records_children_then_last_completes_and_releases() {
        let s0 = st(5, &[], Phase::Collecting);
        let (s1, o, a) = on_event(&ROOT3, s0, red(1, 5));
        assert_eq!((o, s1), (Outcome::Recorded, st(5, &[1], Phase::Collecting)));
        assert!(a.is_empty());
        let (s2, o, _) = on_event(&ROOT3, s1, red(3, 5));
        assert_eq!(
            (o, s2),
            (Outcome::Recorded, st(5, &[1, 3], Phase::Collecting))
        );
        let (s3, o, a) = on_event(&ROOT3, s2, red(2, 5));
        assert_eq!(o, Outcome::Completed);
        assert_eq!(s3, st(6, &[], Phase::Collecting));
        assert_eq!(
            acts(&a),
            vec![Action::SendRelease {
                seq: Seq(5),
                ports: ports(&[1, 2, 3]),
                retransmit: false
            }]
        );
    }

    #[test]
    fn intermediate_last_child_reduces_up_and_arms_timer() {
        let cfg = mid3();
        let mut s = st(9, &[], Phase::Collecting);
        for c in [3, 1] {
            let (n, o, a) = on_event(&cfg, s, red(c, 9));
            assert_eq!(o, Outcome::Recorded);
            assert!(a.is_empty());
            s = n;
        }
        let (s, o, a) = on_event(&cfg, s, red(2, 9));
        assert_eq!(o, Outcome::Completed);
        assert_eq!(s, st(9, &[1, 2, 3], Phase::AwaitingRelease));
        assert_eq!(
            acts(&a),
            vec![
                Action::SendReduce {
                    seq: Seq(9),
                    port: p(0),
                    retransmit: false
                },
                Action::ArmTimer {
                    seq: Seq(9),
                    after_ns: 500,
                    timer: Timer::Resend { attempt: 0 },
                },
            ]
        );
    }

    #[test]
    fn duplicate_reduce_changes_nothing() {
        let s = st(5, &[1], Phase::Collecting);
        let (n, o, a) = on_event(&ROOT3, s, red(1, 5));
        assert_eq!((n, o), (s, Outcome::Duplicate));
        assert!(a.is_empty());
        // intermediate waiting for the release: a child's retry is a duplicate (the timer re-sends)
        let s = st(9, &[1, 2, 3], Phase::AwaitingRelease);
        let (n, o, a) = on_event(&mid3(), s, red(2, 9));
        assert_eq!((n, o), (s, Outcome::Duplicate));
        assert!(a.is_empty());
    }

    #[test]
    fn single_child_group_completes_on_first_reduce() {
        let cfg = GroupConfig::root(ports(&[4]));
        let (s, o, a) = on_event(&cfg, st(0, &[], Phase::Collecting), red(4, 0));
        assert_eq!((s, o), (st(1, &[], Phase::Collecting), Outcome::Completed));
        assert_eq!(a.len(), 1);
    }

    #[test]
    fn fan_in_of_64() {
        let cfg = GroupConfig::root(PortSet(u64::MAX));
        let mut s = st(0, &[], Phase::Collecting);
        for c in 0..64u8 {
            let (n, o, _) = on_event(&cfg, s, red(c, 0));
            assert_eq!(
                o,
                if c == 63 {
                    Outcome::Completed
                } else {
                    Outcome::Recorded
                }
            );
            s = n;
        }
        assert_eq!(s, st(1, &[], Phase::Collecting));
    }

    // --- claim 6, row 1: reduce with another seq ---

    #[test]
    fn stale_reduce_resends_previous_release_to_that_child_only() {
        for (cfg, s) in [
            (ROOT3, st(6, &[2], Phase::Collecting)),
            (mid3(), st(6, &[2], Phase::Collecting)),
            (mid3(), st(6, &[1, 2, 3], Phase::AwaitingRelease)),
        ] {
            let (n, o, a) = on_event(&cfg, s, red(3, 5));
            assert_eq!((n, o), (s, Outcome::StaleReduce));
            assert_eq!(
                acts(&a),
                vec![Action::SendRelease {
                    seq: Seq(5),
                    ports: ports(&[3]),
                    retransmit: true
                }]
            );
            // further behind: still re-send seq-1, the only release this switch vouches for
            let (_, o, a) = on_event(&cfg, s, red(3, 1));
            assert_eq!(o, Outcome::StaleReduce);
            assert_eq!(
                acts(&a),
                vec![Action::SendRelease {
                    seq: Seq(5),
                    ports: ports(&[3]),
                    retransmit: true
                }]
            );
        }
    }

    /// Issue 10, case 3: in the known state one reduce far ahead (a faulty member, or a
    /// leaf restarted without a new epoch) must not release any other child. Claim 6 answers
    /// it like any other sequence number: the previous release, to that child only.
    #[test]
    fn known_reduce_ahead_gets_previous_release_and_touches_no_other_child() {
        for (cfg, s) in [
            (ROOT3, st(5, &[1], Phase::Collecting)),
            (ROOT3, st(0, &[1], Phase::Collecting)),
            (mid3(), st(5, &[1], Phase::Collecting)),
            (mid3(), st(5, &[1, 2, 3], Phase::AwaitingRelease)),
        ] {
            for t in [s.seq.0 + 1, s.seq.0 + 2, s.seq.0 + 9, s.seq.0 + (1 << 30)] {
                let (n, o, a) = on_event(&cfg, s, red(2, t));
                assert_eq!((n, o), (s, Outcome::AheadReduce), "{s:?} t={t}");
                assert_eq!(
                    acts(&a),
                    vec![Action::SendRelease {
                        seq: s.seq.prev(),
                        ports: ports(&[2]),
                        retransmit: true
                    }]
                );
            }
        }
    }

    /// Unknown: a reduce ahead of the highest number heard is evidence (restart rule 2):
    /// every other child is released from t-1 and the gathering restarts at t.
    #[test]
    fn unknown_reduce_ahead_catches_up_and_releases_everyone_waiting() {
        // restarted root heard child 1 at 5; child 2 reduces 7: 6 completed before the restart
        let (n, o, a) = on_event(&ROOT3, st(5, &[1], Phase::Unknown), red(2, 7));
        assert_eq!((n, o), (st(7, &[2], Phase::Unknown), Outcome::Recorded));
        assert_eq!(
            acts(&a),
            vec![Action::SendRelease {
                seq: Seq(6),
                ports: ports(&[1, 3]),
                retransmit: true
            }]
        );
        // restarted intermediate, single child: heard 5, then 6: catch up and complete 6
        let cfg = GroupConfig::intermediate(p(0), ports(&[1]), 100);
        let (n, o, a) = on_event(&cfg, st(5, &[1], Phase::Unknown), red(1, 6));
        assert_eq!(o, Outcome::Completed);
        assert_eq!(n, st(6, &[1], Phase::AwaitingRelease));
        assert_eq!(
            acts(&a),
            vec![
                Action::SendReduce {
                    seq: Seq(6),
                    port: p(0),
                    retransmit: false
                },
                Action::ArmTimer {
                    seq: Seq(6),
                    after_ns: 100,
                    timer: Timer::Resend { attempt: 0 },
                },
            ]
        );
    }

    // --- claim 6, rows 3 and 4: releases at an intermediate ---

    #[test]
    fn release_for_current_seq_forwards_and_advances() {
        let (n, o, a) = on_event(
            &mid3(),
            st(9, &[1, 2, 3], Phase::AwaitingRelease),
            rel(0, 9),
        );
        assert_eq!((n, o), (st(10, &[], Phase::Collecting), Outcome::Released));
        assert_eq!(
            acts(&a),
            vec![Action::SendRelease {
                seq: Seq(9),
                ports: ports(&[1, 2, 3]),
                retransmit: false
            }]
        );
        // also while still collecting (this switch restarted after it had reduced up)
        let (n, o, _) = on_event(&mid3(), st(9, &[2], Phase::Collecting), rel(0, 9));
        assert_eq!((n, o), (st(10, &[], Phase::Collecting), Outcome::Released));
    }

    /// Issue 10, case 4: an intermediate that knows its barrier (waiting for release 0)
    /// ignores a release for 7 from its parent (claim 6, row 4), where it used to forward it
    /// to every child and jump to 8.
    #[test]
    fn known_release_ahead_is_ignored() {
        for s in [
            st(0, &[1, 2, 3], Phase::AwaitingRelease),
            st(9, &[1], Phase::Collecting),
        ] {
            for t in [s.seq.0 + 1, s.seq.0 + 7] {
                let (n, o, a) = on_event(&mid3(), s, rel(0, t));
                assert_eq!((n, o), (s, Outcome::AheadRelease));
                assert!(a.is_empty(), "forwarded {a:?}");
            }
        }
    }

    #[test]
    fn unknown_release_is_proof_and_is_forwarded() {
        let (n, o, a) = on_event(&mid3(), st(9, &[1], Phase::Unknown), rel(0, 11));
        assert_eq!((n, o), (st(12, &[], Phase::Collecting), Outcome::Released));
        assert_eq!(
            acts(&a),
            vec![Action::SendRelease {
                seq: Seq(11),
                ports: ports(&[1, 2, 3]),
                retransmit: false
            }]
        );
    }

    /// The guard of fuzz finding 2: `Unknown` with children heard at `s`, a parent release for
    /// `t` with `t + 1` behind `s` is stale (no child can wait on `t` once one reported `s`):
    /// ignored and counted `StaleRelease`, the gathering kept. Serial arithmetic: behind is
    /// neither equal nor ahead, across the wrap and at exactly half the space.
    #[test]
    fn unknown_with_arrivals_ignores_a_parent_release_behind_the_gathered_barrier() {
        let cases: [(u32, &[u8], u32); 7] = [
            (9, &[1], 7),                          // t + 1 = s - 1
            (9, &[1, 3], 0),                       // far behind
            (1, &[2], u32::MAX),                   // t + 1 = 0 = s - 1, across the wrap
            (0, &[2], u32::MAX - 1),               // t + 1 = u32::MAX = s - 1, across the wrap
            (9, &[1], 9 + (1 << 31) - 1),          // t + 1 = s + 2^31: neither ahead nor equal
            (9, &[1], 9u32.wrapping_sub(1 << 31)), // t + 1 = s - 2^31 + 1
            (u32::MAX, &[1, 2], u32::MAX - 3),     // near the top
        ];
        for (s, arrived, t) in cases {
            let before = st(s, arrived, Phase::Unknown);
            let (n, o, a) = on_event(&mid3(), before, rel(0, t));
            assert_eq!((n, o), (before, Outcome::StaleRelease), "s {s} t {t}");
            assert!(a.is_empty(), "s {s} t {t}: {a:?}");
        }
    }

    /// The guard leaves restart rule 4 alone where the release can matter: `t + 1` equal to or
    /// ahead of the gathered `s` (a release for `s - 1`, `s`, or later), and any release while
    /// nothing has been heard (no number to compare with).
    #[test]
    fn unknown_still_adopts_a_parent_release_at_or_ahead_of_the_gathered_barrier() {
        let cases: [(u32, &[u8], u32); 6] = [
            (9, &[1], 8),                 // t + 1 = s: the previous barrier
            (9, &[1, 2], 9),              // t = s
            (9, &[1], 9 + (1 << 31) - 2), // t + 1 = s + 2^31 - 1: the farthest ahead
            (0, &[1], u32::MAX),          // t + 1 = s across the wrap
            (u32::MAX, &[2], u32::MAX),   // t = s, the next is 0
            (u32::MAX, &[2], 3),          // ahead across the wrap
        ];
        for (s, arrived, t) in cases {
            let (n, o, a) = on_event(&mid3(), st(s, arrived, Phase::Unknown), rel(0, t));
            assert_eq!(
                (n, o),
                (
                    st(t.wrapping_add(1), &[], Phase::Collecting),
                    Outcome::Released
                ),
                "s {s} t {t}"
            );
            assert_eq!(
                acts(&a),
                vec![Action::SendRelease {
                    seq: Seq(t),
                    ports: ports(&[1, 2, 3]),
                    retransmit: false
                }],
                "s {s} t {t}"
            );
        }
        // nothing heard: any number is taken, even one "behind" the meaningless seq 0
        for t in [u32::MAX - 5, 1 << 31, 5] {
            let (n, o, _) = on_event(&mid3(), GroupState::fresh(), rel(0, t));
            assert_eq!(
                (n, o),
                (
                    st(t.wrapping_add(1), &[], Phase::Collecting),
                    Outcome::Released
                ),
                "t {t}"
            );
        }
    }

    /// After the ignored stale release the restarted intermediate still completes from its
    /// children and takes the parent's release of that barrier: the case of finding 2 heals
    /// without a management reset.
    #[test]
    fn the_ignored_stale_release_does_not_stop_the_barrier() {
        let cfg = GroupConfig::intermediate(p(0), ports(&[1, 2]), 100);
        let (n, _, _) = on_event(&cfg, GroupState::fresh(), red(1, 6));
        let (n, o, a) = on_event(&cfg, n, rel(0, 4));
        assert_eq!((n, o), (st(6, &[1], Phase::Unknown), Outcome::StaleRelease));
        assert!(a.is_empty());
        let (n, o, a) = on_event(&cfg, n, red(2, 6));
        assert_eq!(
            (n, o),
            (st(6, &[1, 2], Phase::AwaitingRelease), Outcome::Completed)
        );
        assert_eq!(
            a.get(0),
            Some(&Action::SendReduce {
                seq: Seq(6),
                port: p(0),
                retransmit: false
            })
        );
        let (n, o, a) = on_event(&cfg, n, rel(0, 6));
        assert_eq!((n, o), (st(7, &[], Phase::Collecting), Outcome::Released));
        assert_eq!(a.len(), 1);
    }

    /// A frame of another epoch changes nothing, whatever it says, in every phase.
    #[test]
    fn other_epoch_is_rejected_in_every_phase() {
        let other = |ev: Event| ev.with_epoch(Epoch(7));
        for (cfg, s) in [
            (ROOT3, GroupState::fresh()),
            (ROOT3, st(5, &[1, 2], Phase::Collecting)),
            (mid3(), st(5, &[1], Phase::Unknown)),
            (mid3(), st(5, &[1, 2, 3], Phase::AwaitingRelease)),
        ] {
            for ev in [red(3, 5), red(3, 6), red(3, 4), rel(0, 5), rel(0, 9)] {
                let (n, o, a) = on_event(&cfg, s, other(ev));
                assert_eq!((n, o), (s, Outcome::Rejected(Reject::OtherEpoch)));
                assert!(a.is_empty());
            }
        }
        // the same frames in the group's epoch are acted on
        let e7 = ROOT3.with_epoch(Epoch(7));
        let (_, o, _) = on_event(&e7, GroupState::fresh(), other(red(3, 5)));
        assert_eq!(o, Outcome::Recorded);
    }

    #[test]
    fn release_behind_is_ignored() {
        let s = st(10, &[1], Phase::Collecting);
        let (n, o, a) = on_event(&mid3(), s, rel(0, 9));
        assert_eq!((n, o), (s, Outcome::Duplicate));
        assert!(a.is_empty());
        let (n, o, a) = on_event(&mid3(), s, rel(0, 3));
        assert_eq!((n, o), (s, Outcome::StaleRelease));
        assert!(a.is_empty());
    }

    // --- rejections ---

    #[test]
    fn reduce_from_non_child_is_rejected() {
        for (cfg, s) in [
            (ROOT3, st(5, &[1], Phase::Collecting)),
            (mid3(), st(5, &[1], Phase::Collecting)),
            (mid3(), GroupState::fresh()),
        ] {
            for port in [0u8, 4, 63] {
                let (n, o, a) = on_event(&cfg, s, red(port, 5));
                assert_eq!((n, o), (s, Outcome::Rejected(Reject::NotAChild)), "{port}");
                assert!(a.is_empty());
            }
        }
    }

    #[test]
    fn release_from_non_parent_is_rejected() {
        let s = st(9, &[1, 2, 3], Phase::AwaitingRelease);
        for port in [1u8, 2, 4, 63] {
            let (n, o, a) = on_event(&mid3(), s, rel(port, 9));
            assert_eq!((n, o), (s, Outcome::Rejected(Reject::NotTheParent)));
            assert!(a.is_empty());
        }
        // also while Unknown: a child cannot make a restarted switch adopt anything by release
        let (n, o, _) = on_event(&mid3(), GroupState::fresh(), rel(1, 9));
        assert_eq!(
            (n, o),
            (GroupState::fresh(), Outcome::Rejected(Reject::NotTheParent))
        );
    }

    #[test]
    fn release_at_root_is_rejected() {
        for s in [GroupState::fresh(), st(5, &[1], Phase::Collecting)] {
            for port in [0u8, 1, 7] {
                let (n, o, a) = on_event(&ROOT3, s, rel(port, 5));
                assert_eq!((n, o), (s, Outcome::Rejected(Reject::NotTheParent)));
                assert!(a.is_empty());
            }
        }
    }

    // --- timers (claim 3) ---

    #[test]
    fn timer_resends_only_while_awaiting_that_seq() {
        let cfg = mid3();
        let s = st(9, &[1, 2, 3], Phase::AwaitingRelease);
        let (n, a) = on_timer(&cfg, s, resend(Seq(9)), ME);
        assert_eq!(n, s);
        assert_eq!(
            acts(&a),
            vec![
                Action::SendReduce {
                    seq: Seq(9),
                    port: p(0),
                    retransmit: true
                },
                Action::ArmTimer {
                    seq: Seq(9),
                    after_ns: 500,
                    timer: Timer::Resend { attempt: 1 },
                },
            ]
        );
        assert!(
            on_timer(&cfg, s, resend(Seq(8)), ME).1.is_empty(),
            "stale timer"
        );
        assert!(
            on_timer(&cfg, st(10, &[], Phase::Collecting), resend(Seq(9)), ME)
                .1
                .is_empty(),
            "released"
        );
        assert!(
            on_timer(&cfg, GroupState::fresh(), resend(Seq(9)), ME)
                .1
                .is_empty(),
            "restarted"
        );
        assert!(
            on_timer(&ROOT3, st(9, &[1], Phase::Collecting), resend(Seq(9)), ME)
                .1
                .is_empty(),
            "root"
        );
    }

    // --- failure declaration ---

    fn abort(port: u8, seq: u32, failure: Failure) -> Event {
        Event::Abort {
            port: p(port),
            epoch: Epoch::DEFAULT,
            seq: Seq(seq),
            failure,
        }
    }
    fn deadline(seq: u32) -> Fired {
        Fired {
            group: GroupId(0),
            seq: Seq(seq),
            timer: Timer::Deadline,
            run: Run::of_epoch(Epoch::DEFAULT),
        }
    }
    const F: Failure = Failure {
        switch: MacAddr([2, 0, 0, 0, 0, 0x77]),
        port: 5,
    };

    /// A deadline and a re-send armed in one epoch, fired after the group was reset into the
    /// next and has reached the same barrier and phase: neither acts (issue 21: the previous
    /// run's deadline aborted the new run's barrier 0). The same timers in their own run do.
    #[test]
    fn a_timer_of_another_epoch_is_stale_at_the_same_seq() {
        let old = Run::of_epoch(Epoch::DEFAULT);
        let new = ROOT3.with_fail_after(1_000).with_epoch(Epoch(2));
        let (st, o, _) = on_event(&new, GroupState::fresh(), red(1, 0).with_epoch(Epoch(2)));
        assert_eq!(o, Outcome::Recorded);
        let stale = Fired {
            run: old,
            ..deadline(0)
        };
        assert_eq!(
            on_timer(&new, st, stale, F.switch),
            (st, Actions::in_epoch(Epoch(2)))
        );
        let own = Fired {
            run: Run::of_epoch(Epoch(2)),
            ..deadline(0)
        };
        assert_eq!(on_timer(&new, st, own, F.switch).0.phase, Phase::Aborted);

        let mid = mid3().with_epoch(Epoch(2));
        let mut st = GroupState::fresh();
        for c in 1..=3 {
            st = on_event(&mid, st, red(c, 0).with_epoch(Epoch(2))).0;
        }
        assert_eq!(st.phase, Phase::AwaitingRelease);
        let stale = Fired {
            run: old,
            ..resend(Seq(0))
        };
        assert!(on_timer(&mid, st, stale, F.switch).1.is_empty());
        let own = Fired {
            run: Run::of_epoch(Epoch(2)),
            ..resend(Seq(0))
        };
        assert_eq!(on_timer(&mid, st, own, F.switch).1.len(), 2);
    }

    #[test]
    fn the_first_arrival_starts_the_deadline_and_a_silent_child_is_declared_at_the_root() {
        let cfg = ROOT3.with_fail_after(1_000);
        let (s1, o, a) = on_event(&cfg, st(4, &[], Phase::Collecting), red(3, 4));
        assert_eq!(o, Outcome::Recorded);
        assert_eq!(
            acts(&a),
            vec![Action::ArmTimer {
                seq: Seq(4),
                after_ns: 1_000,
                timer: Timer::Deadline
            }]
        );
        // the second arrival does not arm it again
        let (s2, _, a) = on_event(&cfg, s1, red(1, 4));
        assert!(a.is_empty());
        // ports 1 and 3 reported, 2 did not: it is declared, the abort goes to every child
        let (s3, a) = on_timer(&cfg, s2, deadline(4), ME);
        let failure = Failure {
            switch: ME,
            port: 2,
        };
        assert_eq!(s3, GroupState::aborted(Seq(4), failure, true));
        assert_eq!(s3.failure(), Some(failure));
        assert_eq!(s3.arrivals(), PortSet::empty());
        assert_eq!(
            acts(&a),
            vec![Action::SendAbort {
                seq: Seq(4),
                ports: ports(&[1, 2, 3]),
                failure
            }]
        );
        // no deadline without the register, and none for a barrier already complete
        assert!(on_event(&ROOT3, st(4, &[], Phase::Collecting), red(3, 4))
            .2
            .is_empty());
        assert!(
            on_timer(&cfg, st(5, &[1], Phase::Collecting), deadline(4), ME)
                .1
                .is_empty()
        );
        assert!(
            on_timer(&cfg, st(4, &[], Phase::Collecting), deadline(4), ME)
                .1
                .is_empty()
        );
    }

    #[test]
    fn an_aborted_group_answers_reduces_with_the_abort_and_never_releases() {
        let cfg = ROOT3.with_fail_after(1_000);
        let ab = GroupState::aborted(Seq(4), F, true);
        for seq in [3, 4, 5, 900] {
            let (n, o, a) = on_event(&cfg, ab, red(2, seq));
            assert_eq!((n, o), (ab, Outcome::AfterAbort));
            assert_eq!(
                acts(&a),
                vec![Action::SendAbort {
                    seq: Seq(4),
                    ports: ports(&[2]),
                    failure: F
                }]
            );
        }
        // another epoch and non-members stay rejected
        assert_eq!(
            on_event(&cfg, ab, red(2, 4).with_epoch(Epoch(9))).1,
            Outcome::Rejected(Reject::OtherEpoch)
        );
        assert_eq!(
            on_event(&cfg, ab, abort(7, 4, F)).1,
            Outcome::Rejected(Reject::NotAChild)
        );
        // a reset (configure: fresh state) is the way out
        assert_eq!(
            on_event(&cfg, GroupState::fresh(), red(1, 0)).1,
            Outcome::Recorded
        );
    }

    #[test]
    fn an_intermediate_tells_its_parent_until_the_parent_answers() {
        let cfg = mid3().with_fail_after(1_000);
        let (s1, _, _) = on_event(&cfg, st(0, &[], Phase::Collecting), red(1, 0));
        let (s2, a) = on_timer(&cfg, s1, deadline(0), ME);
        assert_eq!(s2.phase, Phase::Aborted);
        let failure = Failure {
            switch: ME,
            port: 2,
        };
        assert_eq!(
            acts(&a),
            vec![
                Action::SendAbort {
                    seq: Seq(0),
                    ports: ports(&[0, 1, 2, 3]),
                    failure
                },
                Action::ArmTimer {
                    seq: Seq(0),
                    after_ns: 500,
                    timer: Timer::Resend { attempt: 0 }
                },
            ]
        );
        // no answer: the abort goes up again
        let (s3, a) = on_timer(&cfg, s2, resend(Seq(0)), ME);
        assert_eq!(s3, s2);
        assert_eq!(
            acts(&a)[0],
            Action::SendAbort {
                seq: Seq(0),
                ports: ports(&[0]),
                failure
            }
        );
        // the parent answers with the abort: the re-sends stop
        let (s4, o, a) = on_event(&cfg, s3, abort(0, 0, failure));
        assert_eq!(o, Outcome::AfterAbort);
        assert!(a.is_empty());
        assert!(on_timer(&cfg, s4, resend(Seq(0)), ME).1.is_empty());
        assert_eq!(s4.failure(), Some(failure));
    }

    #[test]
    fn an_abort_from_a_member_aborts_and_travels_on() {
        // from the parent: to every child, the parent already knows
        let (n, o, a) = on_event(&mid3(), st(2, &[1], Phase::Collecting), abort(0, 2, F));
        assert_eq!(
            (n, o),
            (GroupState::aborted(Seq(2), F, true), Outcome::Aborted)
        );
        assert_eq!(
            acts(&a),
            vec![Action::SendAbort {
                seq: Seq(2),
                ports: ports(&[1, 2, 3]),
                failure: F
            }]
        );
        // from a child at an intermediate waiting for its release: to every member, the sender
        // included (its answer), and up again until the parent answers
        let (n, o, a) = on_event(
            &mid3(),
            st(2, &[1, 2, 3], Phase::AwaitingRelease),
            abort(3, 2, F),
        );
        assert_eq!(
            (n, o),
            (GroupState::aborted(Seq(2), F, false), Outcome::Aborted)
        );
        assert_eq!(a.len(), 2);
        assert_eq!(
            a.get(0),
            Some(&Action::SendAbort {
                seq: Seq(2),
                ports: ports(&[0, 1, 2, 3]),
                failure: F
            })
        );
        // a root that restarted (Unknown) aborts too, and answers the sender
        let (n, o, a) = on_event(&ROOT3, GroupState::fresh(), abort(1, 7, F));
        assert_eq!((n.phase, o), (Phase::Aborted, Outcome::Aborted));
        assert_eq!(
            acts(&a),
            vec![Action::SendAbort {
                seq: Seq(7),
                ports: ports(&[1, 2, 3]),
                failure: F
            }]
        );
        // a release after the abort changes nothing
        let ab = GroupState::aborted(Seq(2), F, true);
        assert_eq!(
            on_event(&mid3(), ab, rel(0, 2)),
            (ab, Outcome::AfterAbort, Actions::new())
        );
    }

    #[test]
    fn the_failure_survives_the_state_word() {
        let f = Failure {
            switch: MacAddr([0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54]),
            port: 63,
        };
        for knows in [false, true] {
            let s = GroupState::aborted(Seq(u32::MAX), f, knows);
            let back = GroupState::from_bits(s.to_bits());
            assert_eq!(back, s);
            assert_eq!(back.failure(), Some(f));
            assert_eq!(back.parent_knows(), knows);
        }
        assert_eq!(st(1, &[1], Phase::Collecting).failure(), None);
    }

    // --- restart rules ---

    #[test]
    fn unknown_gathers_from_first_reduce() {
        let (n, o, a) = on_event(&ROOT3, GroupState::fresh(), red(2, 77));
        assert_eq!((n, o), (st(77, &[2], Phase::Unknown), Outcome::Recorded));
        assert!(a.is_empty(), "adoption alone sends nothing");
        // a restarted root needs every child again before it completes
        let (n, o, _) = on_event(&ROOT3, n, red(1, 77));
        assert_eq!(o, Outcome::Recorded);
        let (n2, o, a) = on_event(&ROOT3, n, red(1, 77));
        assert_eq!((n2, o), (n, Outcome::Duplicate));
        assert!(a.is_empty());
        let (n, o, a) = on_event(&ROOT3, n, red(3, 77));
        assert_eq!((n, o), (st(78, &[], Phase::Collecting), Outcome::Completed));
        assert_eq!(a.len(), 1);
    }

    #[test]
    fn unknown_intermediate_forwards_parents_release() {
        let (n, o, a) = on_event(&mid3(), GroupState::fresh(), rel(0, 41));
        assert_eq!((n, o), (st(42, &[], Phase::Collecting), Outcome::Released));
        assert_eq!(
            acts(&a),
            vec![Action::SendRelease {
                seq: Seq(41),
                ports: ports(&[1, 2, 3]),
                retransmit: false
            }]
        );
    }

    #[test]
    fn after_adoption_behind_child_gets_previous_release() {
        // restarted root adopts 8 from child 1; child 2 still waits for release 7
        let (n, _, _) = on_event(&ROOT3, GroupState::fresh(), red(1, 8));
        let (n2, o, a) = on_event(&ROOT3, n, red(2, 7));
        assert_eq!((n2, o), (n, Outcome::StaleReduce));
        assert_eq!(
            acts(&a),
            vec![Action::SendRelease {
                seq: Seq(7),
                ports: ports(&[2]),
                retransmit: true
            }]
        );
    }

    #[test]
    fn hearing_an_old_number_first_heals_on_the_next_reduce() {
        // restarted root first sees a delayed duplicate of 3; the children are at 8
        let (n, _, _) = on_event(&ROOT3, GroupState::fresh(), red(1, 3));
        let (n, o, a) = on_event(&ROOT3, n, red(1, 8));
        assert_eq!((n, o), (st(8, &[1], Phase::Unknown), Outcome::Recorded));
        assert_eq!(a.len(), 1);
    }

    /// The liveness case the old reduce-ahead rule existed for: an intermediate restarts,
    /// hears leaf 1 (which missed release 5 and retries 5) before leaf 2 (at 6). Staying
    /// Unknown until the children agree heals it: leaf 1 gets release 5, both reduce 6.
    #[test]
    fn restarted_intermediate_heals_a_child_that_missed_a_release() {
        let cfg = GroupConfig::intermediate(p(0), ports(&[1, 2]), 100);
        let (n, o, a) = on_event(&cfg, GroupState::fresh(), red(1, 5));
        assert_eq!((n, o), (st(5, &[1], Phase::Unknown), Outcome::Recorded));
        assert!(a.is_empty());
        let (n, o, a) = on_event(&cfg, n, red(2, 6));
        assert_eq!((n, o), (st(6, &[2], Phase::Unknown), Outcome::Recorded));
        assert_eq!(
            acts(&a),
            vec![Action::SendRelease {
                seq: Seq(5),
                ports: ports(&[1]),
                retransmit: true
            }]
        );
        let (n, o, _) = on_event(&cfg, n, red(1, 6));
        assert_eq!(
            (n, o),
            (st(6, &[1, 2], Phase::AwaitingRelease), Outcome::Completed)
        );
        // and in the other order: leaf 2's 6 first, then leaf 1's 5 is behind
        let (n, _, _) = on_event(&cfg, GroupState::fresh(), red(2, 6));
        let (n2, o, a) = on_event(&cfg, n, red(1, 5));
        assert_eq!((n2, o), (n, Outcome::StaleReduce));
        assert_eq!(
            acts(&a),
            vec![Action::SendRelease {
                seq: Seq(5),
                ports: ports(&[1]),
                retransmit: true
            }]
        );
    }

    #[test]
    fn wrap_around() {
        // root completes u32::MAX and moves to 0
        let cfg = GroupConfig::root(ports(&[1]));
        let (n, o, _) = on_event(&cfg, st(u32::MAX, &[], Phase::Collecting), red(1, u32::MAX));
        assert_eq!((n, o), (st(0, &[], Phase::Collecting), Outcome::Completed));
        // reduce 0 while at MAX is ahead: known, the previous release to that child;
        // Unknown, evidence that MAX completed
        let s = st(u32::MAX, &[1], Phase::Collecting);
        let (n, o, a) = on_event(&ROOT3, s, red(2, 0));
        assert_eq!((n, o), (s, Outcome::AheadReduce));
        assert_eq!(
            acts(&a),
            vec![Action::SendRelease {
                seq: Seq(u32::MAX - 1),
                ports: ports(&[2]),
                retransmit: true
            }]
        );
        let (n, o, a) = on_event(&ROOT3, st(u32::MAX, &[1], Phase::Unknown), red(2, 0));
        assert_eq!((n, o), (st(0, &[2], Phase::Unknown), Outcome::Recorded));
        assert_eq!(
            acts(&a),
            vec![Action::SendRelease {
                seq: Seq(u32::MAX),
                ports: ports(&[1, 3]),
                retransmit: true
            }]
        );
        // reduce MAX while at 0 is behind: re-send release MAX
        let (_, o, a) = on_event(&ROOT3, st(0, &[], Phase::Collecting), red(2, u32::MAX));
        assert_eq!(o, Outcome::StaleReduce);
        assert_eq!(
            acts(&a),
            vec![Action::SendRelease {
                seq: Seq(u32::MAX),
                ports: ports(&[2]),
                retransmit: true
            }]
        );
        // intermediate at 0 ignores release MAX (duplicate) and forwards release 0
        let (_, o, _) = on_event(&mid3(), st(0, &[], Phase::Collecting), rel(0, u32::MAX));
        assert_eq!(o, Outcome::Duplicate);
        let (n, o, _) = on_event(
            &mid3(),
            st(u32::MAX, &[1, 2, 3], Phase::AwaitingRelease),
            rel(0, u32::MAX),
        );
        assert_eq!((n, o), (st(0, &[], Phase::Collecting), Outcome::Released));
    }

    #[test]
    fn half_the_sequence_space_away_is_behind() {
        // s + 2^31 is neither equal to s nor ahead of it: behind (docs/protocol.md, "Sequence
        // numbers"), so a reduce is stale and a release further behind.
        let s = st(5, &[1], Phase::Collecting);
        let far = 5u32.wrapping_add(1 << 31);
        let (n, o, a) = on_event(&ROOT3, s, red(2, far));
        assert_eq!((n, o), (s, Outcome::StaleReduce));
        assert_eq!(
            acts(&a),
            vec![Action::SendRelease {
                seq: Seq(4),
                ports: ports(&[2]),
                retransmit: true
            }]
        );
        let (n, o, a) = on_event(&mid3(), s, rel(0, far));
        assert_eq!((n, o), (s, Outcome::StaleRelease));
        assert!(a.is_empty());
    }

    #[test]
    fn events_from_frames() {
        use crate::wire::{Flags, MacAddr};
        let f = FrameRepr {
            dst: MacAddr::BROADCAST,
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            kind: Kind::Release,
            flags: Flags::RETRANSMIT,
            group: crate::GroupId(3),
            epoch: Epoch::DEFAULT,
            seq: Seq(9),
            tx_timestamp: Some(1),
        };
        assert_eq!(Event::from_frame(&f, p(4)), rel(4, 9));
        let f = FrameRepr {
            kind: Kind::Reduce,
            ..f
        };
        assert_eq!(Event::from_frame(&f, p(2)), red(2, 9));
        assert_eq!(
            Event::new(Kind::Release, p(0), Epoch::DEFAULT, Seq(1)),
            rel(0, 1)
        );
    }

    #[test]
    fn outcome_indices_are_dense() {
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(o.index(), i);
            assert!(!o.name().is_empty());
        }
    }
}
