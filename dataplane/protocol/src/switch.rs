//! The per-group control logic of a root or intermediate switch (claim 6), including what a
//! switch does after it lost its state (the restart rule of `docs/protocol.md`).
//!
//! Pure functions `(config, state, event) -> (state, outcome, actions)`: no I/O, no clock, no
//! allocation. [`crate::table::GroupTable`] runs them inside a compare-and-swap loop; the
//! simulator and tests call them directly.

use core::fmt;

use crate::wire::{FrameRepr, Kind};
use crate::{PortIdx, PortSet, Seq};

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
}

impl GroupConfig {
    /// A root with the given children.
    pub const fn root(children: PortSet) -> Self {
        GroupConfig {
            role: Role::Root,
            children,
            resend_timeout_ns: 0,
        }
    }

    /// An intermediate switch with the given parent, children and re-send timeout.
    pub const fn intermediate(parent: PortIdx, children: PortSet, resend_timeout_ns: u64) -> Self {
        GroupConfig {
            role: Role::Intermediate { parent },
            children,
            resend_timeout_ns,
        }
    }

    /// Children non-empty, parent not a child.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.children.is_empty() {
            return Err(ConfigError::NoChildren);
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
    /// After configuration or a restart: no sequence number adopted yet. The first reduce from
    /// a child (or release from the parent) sets it.
    Unknown,
    /// Recording which children reduced `seq`.
    Collecting,
    /// Intermediate only: every child reduced `seq`, the reduce went to the parent, waiting
    /// for the release (the re-send timer runs).
    AwaitingRelease,
}

impl Phase {
    const fn to_bits(self) -> u128 {
        match self {
            Phase::Unknown => 0,
            Phase::Collecting => 1,
            Phase::AwaitingRelease => 2,
        }
    }

    const fn from_bits(b: u128) -> Phase {
        match b & 0b11 {
            1 => Phase::Collecting,
            2 => Phase::AwaitingRelease,
            // 3 is never written; reading it as Unknown is the safe choice (adopt afresh)
            _ => Phase::Unknown,
        }
    }
}

/// The whole mutable state of one group at one switch. Fits one 128-bit word
/// ([`GroupState::to_bits`]), so the table changes it with one compare-and-swap.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub struct GroupState {
    /// The current barrier's sequence number (meaningless in [`Phase::Unknown`]).
    pub seq: Seq,
    /// Children whose reduce for `seq` was recorded since `seq` became current.
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

impl Default for GroupState {
    fn default() -> Self {
        Self::fresh()
    }
}

/// A barrier event for one group: a parsed frame and the port it came in on.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub enum Event {
    /// A reduce for `seq` arrived on `port`.
    Reduce {
        /// Ingress port.
        port: PortIdx,
        /// The frame's sequence number.
        seq: Seq,
    },
    /// A release for `seq` arrived on `port`.
    Release {
        /// Ingress port.
        port: PortIdx,
        /// The frame's sequence number.
        seq: Seq,
    },
}

impl Event {
    /// The event for a frame of `kind` for barrier `seq` that arrived on `port`: the one
    /// place a frame kind becomes a switch event.
    pub const fn new(kind: Kind, port: PortIdx, seq: Seq) -> Event {
        match kind {
            Kind::Reduce => Event::Reduce { port, seq },
            Kind::Release => Event::Release { port, seq },
        }
    }

    /// The event for a parsed frame that arrived on ingress port `port`. The frame's group
    /// selects the table slot (`GroupTable::apply(frame.group, ..)`); its flags and timestamp
    /// do not matter to the control logic.
    pub const fn from_frame(frame: &FrameRepr, port: PortIdx) -> Event {
        Event::new(frame.kind, port, frame.seq)
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
    /// Intermediate: call `on_timer(seq)` after `after_ns` nanoseconds. Arming again replaces
    /// nothing: a stale timer is harmless because `on_timer` checks the state.
    ArmTimer {
        /// The barrier the timer belongs to.
        seq: Seq,
        /// Delay in nanoseconds.
        after_ns: u64,
    },
}

/// The most actions one event can produce: a re-sent release, a reduce and a timer.
pub const MAX_ACTIONS: usize = 4;

/// A short list of actions with fixed capacity, so the per-frame path never allocates.
#[derive(Copy, Clone, Default, Eq, PartialEq, Hash)]
pub struct Actions {
    items: [Option<Action>; MAX_ACTIONS],
    len: u8,
}

impl Actions {
    /// No actions.
    pub const fn new() -> Self {
        Actions {
            items: [None; MAX_ACTIONS],
            len: 0,
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
    /// A release for an earlier barrier: ignored.
    StaleRelease,
    /// The frame does not belong to this group's tree; nothing changed.
    Rejected(Reject),
}

/// Why an event was rejected.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub enum Reject {
    /// A reduce from a port that is not in the child-port register.
    NotAChild,
    /// A release from a port other than the parent port, or any release at the root.
    NotTheParent,
}

impl Outcome {
    /// Every outcome, for counter arrays ([`Outcome::index`] order).
    pub const ALL: [Outcome; 8] = [
        Outcome::Recorded,
        Outcome::Duplicate,
        Outcome::Completed,
        Outcome::Released,
        Outcome::StaleReduce,
        Outcome::StaleRelease,
        Outcome::Rejected(Reject::NotAChild),
        Outcome::Rejected(Reject::NotTheParent),
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
        }
    }
}

/// Applies one event to one group (claim 6 plus the restart rule). Returns the new state, what
/// happened, and what to send.
///
/// One `match`, one arm per row of the table "Claim 6, event by event" in `docs/protocol.md`,
/// in the table's order: first the two membership checks, then, with `s` the group's `seq`,
/// the reduce rows and the release rows. "Known" is `Collecting` or `AwaitingRelease`; "behind"
/// is neither equal nor ahead (so `s + 2^31` is behind, see [`Seq::is_ahead_of`]).
/// `docs/protocol.md` gives the safety argument for the rows that go beyond claim 6.
pub fn on_event(cfg: &GroupConfig, st: GroupState, ev: Event) -> (GroupState, Outcome, Actions) {
    use Phase::{AwaitingRelease, Collecting, Unknown};
    let mut acts = Actions::new();
    let s = st.seq;
    let (next, outcome) = match (ev, st.phase) {
        // Membership: a reduce from a port not in `children`. Nothing changes.
        (Event::Reduce { port, .. }, _) if !cfg.children.contains(port) => {
            (st, Outcome::Rejected(Reject::NotAChild))
        }
        // Membership: a release at the root, or from any port but `parent`. Nothing changes.
        (Event::Release { port, .. }, _) if cfg.parent() != Some(port) => {
            (st, Outcome::Rejected(Reject::NotTheParent))
        }
        // Row "reduce s from a child not yet recorded | Collecting": record it; the last child
        // completes the barrier.
        (Event::Reduce { port, seq: t }, Collecting) if t == s && !st.arrived.contains(port) => {
            let mut recorded = st;
            recorded.arrived.insert(port);
            complete_if_last(cfg, recorded, &mut acts)
        }
        // Row "reduce s from a child already recorded | Collecting": nothing.
        (Event::Reduce { seq: t, .. }, Collecting) if t == s => (st, Outcome::Duplicate),
        // Row "reduce s | AwaitingRelease": nothing. The reduce is (or will be) with the
        // parent, and this switch's own timer re-sends it.
        (Event::Reduce { seq: t, .. }, AwaitingRelease) if t == s => (st, Outcome::Duplicate),
        // Row "reduce t behind s | known": the child missed the release of s-1 and is
        // retrying; re-send it to that child only (claim 6, row 1).
        (Event::Reduce { port, seq: t }, Collecting | AwaitingRelease) if !t.is_ahead_of(s) => {
            acts.push(Action::SendRelease {
                seq: s.prev(),
                ports: PortSet::single(port),
                retransmit: true,
            });
            (st, Outcome::StaleReduce)
        }
        // Row "reduce t ahead of s | known" (restart rule 2; ahead is all that is left): a
        // child is at t, so t-1 completed at the root and this switch lost a release (or
        // adopted an old number). Release every child still waiting on t-1, catch up to t
        // with only this child recorded; it may complete at once.
        (Event::Reduce { port, seq: t }, Collecting | AwaitingRelease) => {
            acts.push(Action::SendRelease {
                seq: t.prev(),
                ports: cfg.children,
                retransmit: true,
            });
            complete_if_last(cfg, GroupState::collecting(t, port), &mut acts)
        }
        // Row "reduce t | Unknown" (restart rule 1): adopt t with only this child recorded; it
        // may complete at once. Every genuine reduce for t says t-1 completed at the root (or
        // t is the group's first barrier), so re-sending release t-1 later is truthful or
        // addressed to a barrier nobody waits for.
        (Event::Reduce { port, seq: t }, Unknown) => {
            complete_if_last(cfg, GroupState::collecting(t, port), &mut acts)
        }
        // Row "release s from the parent | known (intermediate)": forward it, advance
        // (claim 6, row 3).
        (Event::Release { seq: t, .. }, Collecting | AwaitingRelease) if t == s => {
            forward_release(cfg, t, &mut acts)
        }
        // Row "release t ahead of s from the parent | known" (restart rule 4): only the root
        // originates releases, and only for completed barriers, so a release for t proves t
        // completed whatever this switch remembers. Forward it, advance to t+1.
        (Event::Release { seq: t, .. }, Collecting | AwaitingRelease) if t.is_ahead_of(s) => {
            forward_release(cfg, t, &mut acts)
        }
        // Row "release t from the parent | Unknown" (restart rule 4): the same proof.
        (Event::Release { seq: t, .. }, Unknown) => forward_release(cfg, t, &mut acts),
        // Row "release s-1 from the parent | known": the one just forwarded, re-sent. Nothing.
        (Event::Release { seq: t, .. }, Collecting | AwaitingRelease) if t == s.prev() => {
            (st, Outcome::Duplicate)
        }
        // Row "release further behind | known": nothing (claim 6, row 4).
        (Event::Release { .. }, Collecting | AwaitingRelease) => (st, Outcome::StaleRelease),
    };
    (next, outcome, acts)
}

impl GroupState {
    /// `Collecting` barrier `seq` with only `port` recorded: a group that adopted or caught
    /// up to a child's reduce.
    const fn collecting(seq: Seq, port: PortIdx) -> GroupState {
        GroupState {
            seq,
            arrived: PortSet::single(port),
            phase: Phase::Collecting,
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

/// The re-send timer armed for `seq` expired. An intermediate still waiting for the release of
/// `seq` re-sends its reduce (claim 3) and re-arms; in any other state the timer is stale and
/// does nothing. Never changes the state.
pub fn on_timer(cfg: &GroupConfig, state: GroupState, seq: Seq) -> (GroupState, Actions) {
    let mut acts = Actions::new();
    if let Role::Intermediate { parent } = cfg.role {
        if state.phase == Phase::AwaitingRelease && state.seq == seq {
            acts.push(Action::SendReduce {
                seq,
                port: parent,
                retransmit: true,
            });
            acts.push(Action::ArmTimer {
                seq,
                after_ns: cfg.resend_timeout_ns,
            });
        }
    }
    (state, acts)
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
            seq: Seq(seq),
        }
    }
    fn rel(port: u8, seq: u32) -> Event {
        Event::Release {
            port: p(port),
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
                    after_ns: 500
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

    #[test]
    fn reduce_ahead_catches_up_and_releases_everyone_waiting() {
        // root at 5 with child 1 recorded; child 2 reduces 7: 6 completed somewhere we missed
        let (n, o, a) = on_event(&ROOT3, st(5, &[1], Phase::Collecting), red(2, 7));
        assert_eq!(o, Outcome::Recorded);
        assert_eq!(n, st(7, &[2], Phase::Collecting));
        assert_eq!(
            acts(&a),
            vec![Action::SendRelease {
                seq: Seq(6),
                ports: ports(&[1, 2, 3]),
                retransmit: true
            }]
        );
        // intermediate awaiting 5, single child reduces 6: catch up and complete 6 at once
        let cfg = GroupConfig::intermediate(p(0), ports(&[1]), 100);
        let (n, o, a) = on_event(&cfg, st(5, &[1], Phase::AwaitingRelease), red(1, 6));
        assert_eq!(o, Outcome::Completed);
        assert_eq!(n, st(6, &[1], Phase::AwaitingRelease));
        assert_eq!(
            acts(&a),
            vec![
                Action::SendRelease {
                    seq: Seq(5),
                    ports: ports(&[1]),
                    retransmit: true
                },
                Action::SendReduce {
                    seq: Seq(6),
                    port: p(0),
                    retransmit: false
                },
                Action::ArmTimer {
                    seq: Seq(6),
                    after_ns: 100
                },
            ]
        );
        // root, single child, ahead: release t-1 then complete and release t
        let cfg = GroupConfig::root(ports(&[1]));
        let (n, o, a) = on_event(&cfg, st(2, &[], Phase::Collecting), red(1, 4));
        assert_eq!((n, o), (st(5, &[], Phase::Collecting), Outcome::Completed));
        assert_eq!(a.len(), 2);
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

    #[test]
    fn release_ahead_is_proof_and_is_forwarded() {
        let (n, o, a) = on_event(&mid3(), st(9, &[1], Phase::Collecting), rel(0, 11));
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
        let (n, a) = on_timer(&cfg, s, Seq(9));
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
                    after_ns: 500
                },
            ]
        );
        assert!(on_timer(&cfg, s, Seq(8)).1.is_empty(), "stale timer");
        assert!(
            on_timer(&cfg, st(10, &[], Phase::Collecting), Seq(9))
                .1
                .is_empty(),
            "released"
        );
        assert!(
            on_timer(&cfg, GroupState::fresh(), Seq(9)).1.is_empty(),
            "restarted"
        );
        assert!(
            on_timer(&ROOT3, st(9, &[1], Phase::Collecting), Seq(9))
                .1
                .is_empty(),
            "root"
        );
    }

    // --- restart rules ---

    #[test]
    fn unknown_adopts_first_reduce() {
        let (n, o, a) = on_event(&ROOT3, GroupState::fresh(), red(2, 77));
        assert_eq!((n, o), (st(77, &[2], Phase::Collecting), Outcome::Recorded));
        assert!(a.is_empty(), "adoption alone sends nothing");
        // a restarted root needs every child again before it completes
        let (n, o, _) = on_event(&ROOT3, n, red(1, 77));
        assert_eq!(o, Outcome::Recorded);
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
    fn adopting_an_old_number_heals_on_the_next_reduce() {
        // restarted root first sees a delayed duplicate of 3; the children are at 8
        let (n, _, _) = on_event(&ROOT3, GroupState::fresh(), red(1, 3));
        let (n, o, a) = on_event(&ROOT3, n, red(1, 8));
        assert_eq!((n, o), (st(8, &[1], Phase::Collecting), Outcome::Recorded));
        assert_eq!(a.len(), 1);
    }

    #[test]
    fn wrap_around() {
        // root completes u32::MAX and moves to 0
        let cfg = GroupConfig::root(ports(&[1]));
        let (n, o, _) = on_event(&cfg, st(u32::MAX, &[], Phase::Collecting), red(1, u32::MAX));
        assert_eq!((n, o), (st(0, &[], Phase::Collecting), Outcome::Completed));
        // reduce 0 while at MAX is ahead
        let (n, o, a) = on_event(&ROOT3, st(u32::MAX, &[1], Phase::Collecting), red(2, 0));
        assert_eq!((n, o), (st(0, &[2], Phase::Collecting), Outcome::Recorded));
        assert_eq!(
            acts(&a),
            vec![Action::SendRelease {
                seq: Seq(u32::MAX),
                ports: ports(&[1, 2, 3]),
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
            seq: Seq(9),
            tx_timestamp: Some(1),
        };
        assert_eq!(Event::from_frame(&f, p(4)), rel(4, 9));
        let f = FrameRepr {
            kind: Kind::Reduce,
            ..f
        };
        assert_eq!(Event::from_frame(&f, p(2)), red(2, 9));
        assert_eq!(Event::new(Kind::Release, p(0), Seq(1)), rel(0, 1));
    }

    #[test]
    fn outcome_indices_are_dense() {
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(o.index(), i);
            assert!(!o.name().is_empty());
        }
    }
}
