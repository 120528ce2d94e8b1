//! The switch's event handling fed arbitrary frame sequences, with its safety invariants
//! checked after every step.
//!
//! # The harness
//!
//! One switch with [`PORTS`] ports and a table of [`CAPACITY`] groups, run through the real RX
//! path: each port's frames go through a `barrier_switch::rx::RxPoller` (parse, one
//! `GroupTable::apply`, its counters, its ring of actions) over an in-memory wire. The
//! scheduler's part is played here: the actions are read off the rings and checked, and the
//! re-send timers they arm are kept in a list and fired through `GroupTable::on_timer` when the
//! input advances time. The groups start as [`PRESETS`] 0, 1, 2 (group 3 unconfigured):
//!
//! | preset | role | parent | children | re-send |
//! | --- | --- | --- | --- | --- |
//! | 0 | root | | 1, 2, 3 | |
//! | 1 | intermediate | 0 | 2, 4 | 1 µs |
//! | 2 | intermediate | 5 | 3 | 0.5 µs |
//! | 3 | root | | 4 | |
//!
//! The input is decoded ([`Input`]) into a sequence of operations:
//!
//! - a **frame** on any port for any group (0..6: groups 4 and 5 are outside the table), of
//!   either kind, in the group's epoch, the next one or any, with a sequence number near the
//!   group's current one (-2..+3), half the sequence space away, or any; any flags and
//!   timestamp; optionally one byte damaged after the checksum was filled;
//! - **raw bytes** of any length up to 64 as a frame on any port;
//! - **time** advancing, which fires the re-send timers that are due;
//! - a **restart**: one group's state or the whole table's lost (`reset`, `reset_all`);
//! - **management**: a group configured anew (any preset, in its epoch, the next one or any)
//!   or removed.
//!
//! # What may be forged
//!
//! Everything: any port, any group, any epoch, any kind, any number, any damage. The fuzzer is a
//! hostile network and hostile members at once. The properties below are therefore stated per
//! what this switch has **seen**, not per what leaves did: the *history* of a group is the set of
//! frames the switch received for it, in its current epoch, from a member port (reduces from a
//! child port, releases from the parent port), since its state was last lost (configuration,
//! reset or restart). With *all(r)*: every child port sent a reduce for `r` in the history;
//! *parent(r)*: the parent port sent a release for `r`; *ahead(r)*: some child sent a reduce for
//! `r + 1`.
//!
//! # Invariants, after every step
//!
//! 1. **Counters add up** (`rx::RxCounters`): every frame is counted in `frames` and in exactly
//!    one class: one parse-error reason (the one `FrameRepr::parse` gives), `drop_unknown_group`
//!    (a group outside the table or unconfigured), or one outcome; `reduce_in + release_in`
//!    counts the parsed frames of a known group and the unknown-group drops, by kind.
//! 2. **Other epochs change nothing**: a frame of another epoch than its group's is counted
//!    `other_epoch`, leaves every group's configuration and state as they were and asks for
//!    nothing.
//! 3. **Non-members change nothing**: a reduce from a port that is not a child, a release from a
//!    port that is not the parent (every release at a root): counted `not_a_child` /
//!    `not_the_parent`, nothing changed, nothing sent. A frame never changes another group. A
//!    frame on a port that no configured group names is counted so whatever its group (known,
//!    unknown, any epoch): the RX path refuses it for its port before reading the table.
//! 4. **Releases are justified by the history** (invariant (R) of `docs/protocol.md`, local to
//!    one switch): a release for `r` goes only to child ports, in the group's current epoch,
//!    and only if *all(r)*, *parent(r)* or *ahead(r)*. Under assumption 3 of
//!    `docs/protocol.md` (members honest while the switch is `Unknown`) and (U) below, each of
//!    these implies that `r` completed at the root (or `r` is the barrier before the first,
//!    which no leaf waits on).
//! 5. **Only the frame in hand or a completion releases another member**: a release sent to a
//!    port other than the one the frame came in on needs *all(r)*, or the frame in hand being
//!    the parent's release for `r`, or, **only while the group was `Unknown`** (the window of
//!    assumption 3), the frame in hand being a child's reduce for `r + 1`. In the known state a
//!    forged reduce (any number, right epoch, member port) gets at most the previous release
//!    back on its own port.
//! 6. **Reduces up are justified** (invariant (U), local): a reduce for `t` goes only to the
//!    parent port, only from an intermediate, and only if *all(t)*; the same for every re-send
//!    on a timer. A timer never changes a state.
//! 7. **The state is derived from the history**: the ports recorded in `arrived` all reduced
//!    the current `seq`; `AwaitingRelease` only at an intermediate with *all(seq)*; a known
//!    `seq = s`, or an `Unknown` one with arrivals, has *all(s-1)*, *parent(s-1)* or a reduce
//!    for `s` in the history (invariant (S), local).
//! 8. **Monotone between losses**: the `seq` of a known group, or of an `Unknown` one with
//!    arrivals, only stays or moves ahead, on every frame, the parent's release while `Unknown`
//!    included (finding 2 of the campaign: restart rule 4 took a release for a barrier behind
//!    the children's at its word; the guard in `switch::on_event` now ignores it, see
//!    `docs/reliability.md`); the only exception is an abort, which names its own barrier; a
//!    known group never becomes `Unknown` by a frame; each barrier completes (outcome
//!    `Completed`) at most once between two losses of state.
//! 9. **A timer acts only on the run it was armed in**: a re-send or a deadline armed before
//!    the group's state was last lost (configured anew in any epoch, the same one included;
//!    removed and configured again; restarted) sends nothing, arms nothing and changes no
//!    state when it fires, even when the new run has reached the same barrier and phase. The
//!    harness counts runs itself (one per loss of state), not through the table's generation.
//!
//! Assumptions used: 1 (a child is its port: the history is keyed by ingress port) and 3 (only
//! in the meaning of invariant 4's "implies"); the checks themselves assume nothing about the
//! frames. Assumption 2 (one run, one epoch) is not assumed: management may reuse an epoch,
//! and the history starts over at every configuration, which is what the switch can know.
//! Assumptions 5 (frame lifetime) and 7 (quiet time after a restart) are not needed for these
//! local properties.

use crate::Input;
use barrier_protocol::switch::{
    Action, Event, Fired, GroupConfig, GroupState, Outcome, Phase, Reject, Run, Timer as Kind2,
};
use barrier_protocol::table::GroupTable;
use barrier_protocol::wire::{
    Failure, Flags, Frame, FrameRepr, FrameTemplate, Kind, MacAddr, ParseError, FRAME_LEN,
};
use barrier_protocol::{Epoch, GroupId, PortIdx, PortSet, Seq};
use barrier_runtime::io::{mem_wire, MemRx, MemTx, TxQueue};
use barrier_runtime::poll::Poller;
use barrier_switch::counters::RxCounters;
use barrier_switch::link::{Link, Out};
use barrier_switch::rx::RxPoller;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Ports of the fuzzed switch.
pub const PORTS: u8 = 6;
/// Groups its table holds; frames name groups `0..CAPACITY + 2`.
pub const CAPACITY: u32 = 4;
/// Most operations decoded from one input.
pub const MAX_OPS: usize = 512;

const fn ports(mask: u64) -> PortSet {
    PortSet(mask)
}

const fn port(i: u8) -> PortIdx {
    match PortIdx::new(i) {
        Some(p) => p,
        None => panic!("port"),
    }
}

/// The configurations management may install (table in the module documentation).
pub const PRESETS: [GroupConfig; 4] = [
    GroupConfig::root(ports(0b1110)).with_fail_after(4_000),
    GroupConfig::intermediate(port(0), ports(0b10100), 1_000).with_fail_after(3_000),
    GroupConfig::intermediate(port(5), ports(0b1000), 500),
    GroupConfig::root(ports(0b10000)),
];

/// What the switch has seen of one group since its state was last lost.
#[derive(Default, Debug, Clone)]
struct History {
    /// seq -> child ports that sent a reduce for it
    reduces: BTreeMap<u32, PortSet>,
    /// seqs the parent port released
    parent_releases: BTreeSet<u32>,
    /// seqs completed here (outcome `Completed`)
    completed: BTreeSet<u32>,
    /// The group was aborted: an abort frame from a member, or this switch declared a child
    /// failed on its deadline.
    aborted: bool,
}

impl History {
    fn all(&self, cfg: &GroupConfig, r: Seq) -> bool {
        self.reduces
            .get(&r.0)
            .is_some_and(|s| cfg.children.is_subset_of(*s))
    }
    fn parent(&self, r: Seq) -> bool {
        self.parent_releases.contains(&r.0)
    }
    fn any_reduce(&self, t: Seq) -> bool {
        self.reduces.get(&t.0).is_some_and(|s| !s.is_empty())
    }
    fn ahead(&self, r: Seq) -> bool {
        self.any_reduce(r.next())
    }
    fn justifies_release(&self, cfg: &GroupConfig, r: Seq) -> bool {
        self.all(cfg, r) || self.parent(r) || self.ahead(r)
    }
}

/// Invariants 4 and 5 for a release of `r` to `to` decided on event `ev` (already in the
/// history `h`) in state `st0`.
fn check_release(
    h: &History,
    cfg: &GroupConfig,
    st0: GroupState,
    ev: Event,
    r: Seq,
    to: PortSet,
) -> Result<(), String> {
    if to.is_empty() || !to.is_subset_of(cfg.children) {
        return Err(format!(
            "release {r:?} to {to:?}, not child ports of {cfg:?}"
        ));
    }
    if !h.justifies_release(cfg, r) {
        return Err(format!(
            "release {r:?} to {to:?} not justified by {h:?} on {ev:?}"
        ));
    }
    let in_port = match ev {
        Event::Reduce { port, .. } | Event::Release { port, .. } | Event::Abort { port, .. } => {
            port
        }
    };
    if !to.is_subset_of(PortSet::single(in_port)) {
        let by_frame = match ev {
            Event::Release { seq, .. } => seq == r,
            Event::Reduce { seq, .. } => st0.phase == Phase::Unknown && seq == r.next(),
            Event::Abort { .. } => false,
        };
        if !(h.all(cfg, r) || by_frame) {
            return Err(format!(
                "release {r:?} to {to:?} on {ev:?} in {st0:?}: releases another member, history {h:?}"
            ));
        }
    }
    Ok(())
}

/// `m`'s frame, if the RX poller built one, is what the port's template builds for the
/// action's first port.
fn check_built(templates: &[FrameTemplate], m: &Out<Vec<u8>>) {
    let Some(built) = &m.frame else {
        return;
    };
    let (to, kind, seq, retransmit) = m
        .action
        .frame()
        .unwrap_or_else(|| panic!("a frame built for a timer: {m:?}"));
    let to = to.iter().next();
    let to = to.expect("a send to no port");
    let mut want = [0u8; FRAME_LEN];
    templates[to.get() as usize].write(
        &mut want,
        kind,
        Flags::retransmit(retransmit),
        m.group,
        m.run.epoch,
        seq,
    );
    assert_eq!(built[..], want[..], "built in place for {m:?}");
}

struct RxPort {
    to_switch: MemTx,
    poller: RxPoller<MemRx>,
    ring: Arc<Link<Vec<u8>>>,
    counters: Arc<RxCounters>,
}

/// The switch's id in the aborts it declares.
const ME: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xee]);

/// A pending timer: (due time, group, seq, what for, the run that armed it as the switch
/// stamped it, the run that armed it as the harness counts runs).
type Timer = (u64, u32, Seq, Kind2, Run, u64);

struct Harness {
    table: Arc<GroupTable>,
    /// Each port's frame template: the RX pollers build sends in place from them.
    templates: Arc<[FrameTemplate]>,
    ports: Vec<RxPort>,
    history: Vec<History>,
    /// Per group, its runs so far as the harness counts them: one more at every loss of state
    /// (configuration, removal, restart), independently of the table's own generation.
    runs: Vec<u64>,
    timers: Vec<Timer>,
    now: u64,
}

/// The class a frame must be counted in.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Class {
    Parse(ParseError),
    UnknownGroup,
    Outcome(Outcome),
}

fn rx_classes(c: &RxCounters) -> Vec<(Class, u64)> {
    let mut v: Vec<(Class, u64)> = c
        .parse_drops
        .iter()
        .map(|(e, n)| (Class::Parse(e), n))
        .collect();
    v.push((Class::UnknownGroup, c.drop_unknown_group.load(Relaxed)));
    v.extend(c.outcomes.iter().map(|(o, n)| (Class::Outcome(o), n)));
    v
}

fn informative(s: &GroupState) -> bool {
    s.phase != Phase::Unknown || !s.arrived.is_empty()
}

/// An abort sent on `to` for barrier `r` naming `failure`: the group is aborted with exactly
/// that failure, the abort goes to members only, and the history has the cause.
fn check_abort(
    h: &History,
    cfg: &GroupConfig,
    st1: GroupState,
    r: Seq,
    to: PortSet,
    failure: Failure,
) {
    assert!(h.aborted, "an abort without a cause: {h:?}");
    assert_eq!(
        st1.phase,
        Phase::Aborted,
        "an abort sent by a group not aborted"
    );
    assert_eq!((st1.seq, st1.failure()), (r, Some(failure)));
    assert!(
        !to.is_empty() && to.is_subset_of(cfg.members()),
        "abort to {to:?}"
    );
}

impl Harness {
    fn new() -> Self {
        let table = Arc::new(GroupTable::new(CAPACITY));
        for (g, cfg) in PRESETS.iter().take(3).enumerate() {
            table.configure(GroupId(g as u32), *cfg).unwrap();
        }
        let templates: Arc<[FrameTemplate]> = (0..PORTS)
            .map(|i| FrameTemplate::new(MacAddr::BROADCAST, MacAddr([2, 0, 0, 0, 1, i])))
            .collect();
        let ports = (0..PORTS)
            .map(|i| {
                let (to_switch, rx) = mem_wire(4);
                let ring = Arc::new(Link::new(16));
                let counters = Arc::new(RxCounters::default());
                let poller =
                    RxPoller::new(port(i), rx, table.clone(), ring.clone(), counters.clone())
                        .with_templates(Some(templates.clone()));
                RxPort {
                    to_switch,
                    poller,
                    ring,
                    counters,
                }
            })
            .collect();
        Harness {
            table,
            templates,
            ports,
            history: vec![History::default(); CAPACITY as usize],
            runs: vec![0; CAPACITY as usize],
            timers: Vec::new(),
            now: 0,
        }
    }

    fn snapshot(&self) -> Vec<(Option<GroupConfig>, Option<GroupState>)> {
        (0..CAPACITY)
            .map(|g| (self.table.config(GroupId(g)), self.table.state(GroupId(g))))
            .collect()
    }

    fn epoch_of(&self, group: u32) -> Epoch {
        self.table
            .config(GroupId(group))
            .map_or(Epoch::DEFAULT, |c| c.epoch)
    }

    fn seq_of(&self, group: u32) -> Seq {
        self.table.state(GroupId(group)).map_or(Seq(0), |s| s.seq)
    }

    /// Sends `bytes` into port `p` and checks everything the switch did with it.
    fn frame(&mut self, p: u8, bytes: &[u8]) {
        let parsed = FrameRepr::parse(bytes);
        let before = self.snapshot();
        let counts_before = rx_classes(&self.ports[p as usize].counters);
        let (frames0, red0, rel0) = {
            let c = &self.ports[p as usize].counters;
            (
                c.frames.load(Relaxed),
                c.reduce_in.load(Relaxed),
                c.release_in.load(Relaxed),
            )
        };
        let port_io = &mut self.ports[p as usize];
        port_io.to_switch.offer(bytes).expect("room on the wire");
        assert_eq!(port_io.to_switch.flush(), (1, 0));
        port_io.poller.poll(self.now);
        let msgs: Vec<Out<Vec<u8>>> = port_io.ring.drain_actions();
        // A send built in the received frame's buffer: at most one, byte for byte the frame
        // the scheduler would build for the action's first port.
        assert!(msgs.iter().filter(|m| m.frame.is_some()).count() <= 1);
        for m in &msgs {
            check_built(&self.templates, m);
        }
        let after = self.snapshot();

        // 1. counters: one class, the expected one
        let c = &self.ports[p as usize].counters;
        assert_eq!(c.frames.load(Relaxed), frames0 + 1);
        let moved: Vec<(Class, u64)> = rx_classes(c)
            .into_iter()
            .zip(&counts_before)
            .filter(|((_, n), (_, m))| n != m)
            .map(|((k, n), (_, m))| (k, n - m))
            .collect();
        assert_eq!(moved.len(), 1, "frame counted in {moved:?}");
        assert_eq!(moved[0].1, 1);
        let class = moved[0].0;
        let total: u64 = rx_classes(c).iter().map(|(_, n)| n).sum();
        assert_eq!(total, c.frames.load(Relaxed), "classes do not add up");
        let (dred, drel) = (
            c.reduce_in.load(Relaxed) - red0,
            c.release_in.load(Relaxed) - rel0,
        );
        let repr = match parsed {
            Err(e) => {
                assert_eq!(class, Class::Parse(e));
                assert_eq!((dred, drel), (0, 0));
                assert_eq!(after, before, "a malformed frame changed a group");
                assert!(msgs.is_empty());
                return;
            }
            Ok(r) => r,
        };
        match repr.kind {
            Kind::Reduce => assert_eq!((dred, drel), (1, 0)),
            Kind::Release => assert_eq!((dred, drel), (0, 1)),
            Kind::Abort(_) => assert_eq!((dred, drel), (0, 0)),
        }
        // 3. (first part) a port that no configured group names: refused for its port before
        // the table is read, whatever the group, counted as a member's frame on a wrong port
        let port_used = before
            .iter()
            .any(|(cfg, _)| cfg.is_some_and(|c| c.members().contains(port(p))));
        if !port_used {
            let want = match repr.kind {
                Kind::Release => Reject::NotTheParent,
                Kind::Reduce | Kind::Abort(_) => Reject::NotAChild,
            };
            assert_eq!(class, Class::Outcome(Outcome::Rejected(want)));
            assert_eq!(after, before, "a frame on an unused port changed a group");
            assert!(msgs.is_empty());
            return;
        }
        let g = repr.group.0;
        let known = g < CAPACITY && before[g as usize].0.is_some();
        if !known {
            assert_eq!(class, Class::UnknownGroup);
            assert_eq!(after, before);
            assert!(msgs.is_empty());
            return;
        }
        let Class::Outcome(outcome) = class else {
            panic!("a frame of a configured group counted as {class:?}")
        };
        // 3. (part) other groups untouched
        for (i, (b, a)) in before.iter().zip(&after).enumerate() {
            if i != g as usize {
                assert_eq!(a, b, "a frame of group {g} changed group {i}");
            }
        }
        let cfg = before[g as usize].0.unwrap();
        let st0 = before[g as usize].1.unwrap();
        let st1 = after[g as usize].1.unwrap();
        assert_eq!(after[g as usize].0, Some(cfg));
        let ev = Event::from_frame(&repr, port(p));
        // 2. other epochs
        if repr.epoch != cfg.epoch {
            assert_eq!(outcome, Outcome::Rejected(Reject::OtherEpoch));
            assert_eq!(st1, st0);
            assert!(msgs.is_empty());
            return;
        }
        assert_ne!(outcome, Outcome::Rejected(Reject::OtherEpoch));
        // 3. non-members
        let member = match ev {
            Event::Reduce { port, .. } => cfg.children.contains(port),
            Event::Release { port, .. } => cfg.parent() == Some(port),
            Event::Abort { port, .. } => cfg.members().contains(port),
        };
        if !member {
            let want = match ev {
                Event::Reduce { .. } | Event::Abort { .. } => Reject::NotAChild,
                Event::Release { .. } => Reject::NotTheParent,
            };
            assert_eq!(outcome, Outcome::Rejected(want));
            assert_eq!(st1, st0);
            assert!(msgs.is_empty());
            return;
        }
        assert!(!matches!(outcome, Outcome::Rejected(_)));
        let h = &mut self.history[g as usize];
        match ev {
            Event::Reduce { port, seq, .. } => {
                h.reduces.entry(seq.0).or_default().insert(port);
            }
            Event::Release { seq, .. } => {
                h.parent_releases.insert(seq.0);
            }
            Event::Abort { .. } => h.aborted = true,
        }
        let mut completed = None;
        for m in &msgs {
            assert_eq!(m.group, repr.group);
            assert_eq!(m.run.epoch, cfg.epoch, "an action in another epoch");
            match m.action {
                Action::SendRelease {
                    seq: r,
                    ports: to,
                    retransmit,
                } => {
                    if let Err(e) = check_release(h, &cfg, st0, ev, r, to) {
                        panic!("{e} ({st0:?} -> {st1:?})");
                    }
                    if !retransmit && cfg.parent().is_none() && to == cfg.children {
                        completed = Some(r);
                    }
                }
                Action::SendReduce {
                    seq: t,
                    port: to,
                    retransmit,
                } => {
                    assert_eq!(Some(to), cfg.parent(), "a reduce not to the parent");
                    assert!(h.all(&cfg, t), "reduce {t:?} up without every child: {h:?}");
                    if !retransmit {
                        completed = Some(t);
                    }
                }
                Action::ArmTimer {
                    seq,
                    after_ns,
                    timer,
                } => {
                    match timer {
                        Kind2::Resend { attempt } => {
                            assert!(cfg.parent().is_some(), "a root armed a re-send timer");
                            assert_eq!((after_ns, attempt), (cfg.resend_timeout_ns, 0));
                        }
                        Kind2::Deadline => {
                            assert_eq!(after_ns, cfg.fail_after_ns);
                            assert_eq!(
                                st1.arrivals().len(),
                                1,
                                "a deadline not on a first arrival"
                            );
                        }
                    }
                    let run = self.runs[g as usize];
                    self.timers
                        .push((self.now + after_ns, g, seq, timer, m.run, run));
                }
                Action::SendAbort {
                    seq: r,
                    ports: to,
                    failure,
                } => check_abort(h, &cfg, st1, r, to, failure),
            }
        }
        // 8. completion at most once between losses
        if outcome == Outcome::Completed {
            let s = completed.expect("a completion sends its release or reduce");
            assert!(h.completed.insert(s.0), "barrier {s:?} completed twice");
        } else {
            assert!(completed.is_none(), "{outcome:?} sent a completion's frame");
        }
        // 8. monotone: no exception for the parent's release while Unknown (finding 2,
        // `tests/findings.rs`: the guard ignores one behind the number gathered so far); an
        // abort names its own barrier.
        if informative(&st0) && st1.phase != Phase::Aborted {
            assert!(
                st1.seq == st0.seq || st1.seq.is_ahead_of(st0.seq),
                "seq went back: {st0:?} -> {st1:?}"
            );
        }
        if st0.phase != Phase::Unknown {
            assert_ne!(
                st1.phase,
                Phase::Unknown,
                "a frame made a known group unknown"
            );
        }
        self.check_state(g);
    }

    /// Invariant 7 for group `g`.
    fn check_state(&self, g: u32) {
        let (Some(cfg), Some(st)) = (self.table.config(GroupId(g)), self.table.state(GroupId(g)))
        else {
            return;
        };
        let h = &self.history[g as usize];
        if st.phase == Phase::Aborted {
            assert!(
                h.aborted,
                "aborted without an abort or a declaration: {h:?}"
            );
            return;
        }
        assert!(st.arrived.is_subset_of(cfg.children));
        if !st.arrived.is_empty() {
            let heard = h.reduces.get(&st.seq.0).copied().unwrap_or_default();
            assert!(
                st.arrived.is_subset_of(heard),
                "arrived {:?} at {:?} but heard {heard:?}",
                st.arrived,
                st.seq
            );
        }
        if st.phase == Phase::AwaitingRelease {
            assert!(cfg.parent().is_some(), "a root awaiting a release");
            assert!(h.all(&cfg, st.seq));
        }
        if informative(&st) {
            let s = st.seq;
            assert!(
                h.all(&cfg, s.prev()) || h.parent(s.prev()) || h.any_reduce(s),
                "state {st:?} not derived from {h:?}"
            );
        } else {
            assert_eq!(st, GroupState::fresh());
        }
    }

    /// Advances time by `dt` and fires the due timers (what the scheduler's wheel does).
    fn advance(&mut self, dt: u64) {
        self.now += dt;
        let now = self.now;
        let mut due: Vec<Timer> = Vec::new();
        self.timers.retain(|t| {
            if t.0 <= now {
                due.push(*t);
                false
            } else {
                true
            }
        });
        due.sort_unstable_by_key(|t| t.0);
        for (_, g, seq, timer, stamped, run) in due {
            let before = self.snapshot();
            let fired = Fired {
                group: GroupId(g),
                seq,
                timer,
                run: stamped,
            };
            let acts = self.table.on_timer(fired, ME);
            let after = self.snapshot();
            // 9. a timer acts only on the run it was armed in
            if run != self.runs[g as usize] {
                assert!(
                    acts.is_empty(),
                    "a {timer:?} timer for {seq:?} armed in an earlier run of group {g} acted: {acts:?}"
                );
                assert_eq!(after, before, "a timer of an earlier run changed a state");
                continue;
            }
            // A deadline that declares is the one timer that changes a state: the group's,
            // from gathering `seq` with some children but not all, to aborted naming a silent
            // child and this switch.
            let declared = timer == Kind2::Deadline && !acts.is_empty();
            if declared {
                let (cfg, st0) = (before[g as usize].0.unwrap(), before[g as usize].1.unwrap());
                let st1 = after[g as usize].1.unwrap();
                assert!(matches!(st0.phase, Phase::Collecting | Phase::Unknown));
                assert!(!st0.arrived.is_empty() && !cfg.children.is_subset_of(st0.arrived));
                let f = st1.failure().expect("declared: aborted");
                assert_eq!(f.switch, ME);
                let silent = PortIdx::new(f.port).expect("a port");
                assert!(cfg.children.contains(silent) && !st0.arrived.contains(silent));
                self.history[g as usize].aborted = true;
                for (i, (b, a)) in before.iter().zip(&after).enumerate() {
                    if i != g as usize {
                        assert_eq!(a, b, "a deadline of group {g} changed group {i}");
                    }
                }
            } else {
                assert_eq!(after, before, "a timer changed a state");
            }
            let cfg = self.table.config(GroupId(g));
            for a in acts.iter() {
                let cfg = cfg.expect("a timer of an unconfigured group acted");
                assert_eq!(acts.epoch(), cfg.epoch);
                match *a {
                    Action::SendReduce {
                        seq: t, port: to, ..
                    } => {
                        assert_eq!(Some(to), cfg.parent());
                        assert_eq!(t, seq);
                        assert!(self.history[g as usize].all(&cfg, t), "timer re-sent {t:?}");
                    }
                    Action::ArmTimer {
                        seq: t,
                        after_ns,
                        timer: next,
                    } => {
                        assert_eq!(t, seq);
                        assert!(
                            matches!(next, Kind2::Resend { .. }),
                            "a timer armed {next:?}"
                        );
                        self.timers
                            .push((now + after_ns, g, t, next, acts.run(), run));
                    }
                    Action::SendAbort {
                        seq: r,
                        ports: to,
                        failure,
                    } => {
                        let st1 = after[g as usize].1.unwrap();
                        let h = &self.history[g as usize];
                        check_abort(h, &cfg, st1, r, to, failure);
                        if !declared {
                            // the re-sent abort goes up only
                            assert_eq!(Some(to), cfg.parent().map(PortSet::single));
                        }
                    }
                    Action::SendRelease { .. } => panic!("a timer sent a release"),
                }
            }
        }
    }

    fn lose_state(&mut self, g: u32) {
        self.history[g as usize] = History::default();
        self.runs[g as usize] += 1;
        if self.table.config(GroupId(g)).is_some() {
            assert_eq!(self.table.state(GroupId(g)), Some(GroupState::fresh()));
        } else {
            assert_eq!(self.table.state(GroupId(g)), None);
        }
    }

    fn op(&mut self, inp: &mut Input) {
        match inp.u8() % 16 {
            // a well-formed frame, optionally damaged
            0..=9 => {
                let p = inp.u8() % PORTS;
                let kind = match inp.u8() % 5 {
                    0 | 1 => Kind::Reduce,
                    2 | 3 => Kind::Release,
                    _ => Kind::Abort(Failure {
                        switch: MacAddr([2, 0, 0, 0, 0, inp.u8()]),
                        port: inp.u8(),
                    }),
                };
                let g = u32::from(inp.u8()) % (CAPACITY + 2);
                let epoch = match inp.u8() % 4 {
                    0 | 1 => self.epoch_of(g),
                    2 => self.epoch_of(g).next(),
                    _ => Epoch::new(inp.u32()),
                };
                let s = self.seq_of(g);
                let seq = match inp.u8() % 8 {
                    d @ 0..=5 => Seq(s.0.wrapping_add(d as u32).wrapping_sub(2)),
                    6 => Seq(s.0.wrapping_add(1 << 31)),
                    _ => Seq(inp.u32()),
                };
                let fl = inp.u8();
                let repr = FrameRepr {
                    dst: MacAddr::BROADCAST,
                    src: MacAddr([2, 0, 0, 0, 0, p]),
                    kind,
                    flags: Flags::retransmit(fl & 1 != 0),
                    group: GroupId(g),
                    epoch,
                    seq,
                    tx_timestamp: (fl & 2 != 0).then_some(u64::from(fl)),
                };
                let mut bytes = [0u8; FRAME_LEN];
                repr.emit(&mut bytes);
                if fl & 0x80 != 0 {
                    let at = inp.u8() as usize % FRAME_LEN;
                    bytes[at] ^= inp.u8() | 1;
                    if fl & 0x40 != 0 {
                        // damage the checksum cannot see: a forged field, checksum refilled
                        Frame::new_unchecked(&mut bytes[..]).fill_checksum();
                    }
                }
                self.frame(p, &bytes);
            }
            // raw bytes
            10 | 11 => {
                let p = inp.u8() % PORTS;
                let len = inp.u8() as usize % (FRAME_LEN + 5);
                let mut bytes = inp.bytes(len).to_vec();
                if bytes.len() >= barrier_protocol::wire::HEADER_END && inp.u8() & 1 == 1 {
                    Frame::new_unchecked(&mut bytes[..]).fill_checksum();
                }
                self.frame(p, &bytes);
            }
            // time
            12 | 13 => {
                let dt = u64::from(inp.u8()) * 20;
                self.advance(dt);
            }
            // restart
            14 => {
                let b = inp.u8();
                if b & 1 == 0 {
                    self.table.reset_all();
                    for g in 0..CAPACITY {
                        self.lose_state(g);
                    }
                } else {
                    let g = u32::from(b >> 1) % CAPACITY;
                    self.table.reset(GroupId(g)).unwrap();
                    self.lose_state(g);
                }
            }
            // management: configure anew (a reset into an epoch) or remove
            _ => {
                let g = u32::from(inp.u8()) % CAPACITY;
                let b = inp.u8();
                if b & 0x0f == 0x0f {
                    self.table.remove(GroupId(g)).unwrap();
                } else {
                    let cfg = PRESETS[(b & 3) as usize];
                    let epoch = match (b >> 2) & 3 {
                        0 => self.epoch_of(g),
                        1 | 2 => self.epoch_of(g).next(),
                        _ => Epoch::new(u32::from(inp.u8())),
                    };
                    self.table
                        .configure(GroupId(g), cfg.with_epoch(epoch))
                        .unwrap();
                    assert_eq!(self.table.config(GroupId(g)), Some(cfg.with_epoch(epoch)));
                }
                self.lose_state(g);
            }
        }
    }
}

/// Runs one input as a sequence of operations; panics on a failed invariant.
pub fn check(data: &[u8]) {
    let mut h = Harness::new();
    let mut inp = Input::new(data);
    let mut n = 0;
    while !inp.done() && n < MAX_OPS {
        h.op(&mut inp);
        n += 1;
    }
    for g in 0..CAPACITY {
        h.check_state(g);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn red(p: u8, seq: u32) -> Event {
        Event::Reduce {
            port: port(p),
            epoch: Epoch::DEFAULT,
            seq: Seq(seq),
        }
    }

    fn heard(list: &[(u32, u64)]) -> History {
        let mut h = History::default();
        for &(seq, mask) in list {
            h.reduces.insert(seq, PortSet(mask));
        }
        h
    }

    /// The check of invariant 5 catches the rule epochs removed: a known root at 5 with
    /// child 1 recorded takes a forged reduce for 9 from child 2 as evidence and releases 8 to
    /// children 1 and 3 (`docs/protocol.md`, "A faulty member").
    #[test]
    fn evidence_in_the_known_state_is_caught() {
        let cfg = PRESETS[0];
        let st0 = GroupState {
            seq: Seq(5),
            arrived: PortSet(0b10),
            phase: Phase::Collecting,
        };
        let h = heard(&[(5, 0b10), (9, 0b100)]);
        let e = check_release(&h, &cfg, st0, red(2, 9), Seq(8), PortSet(0b1010)).unwrap_err();
        assert!(e.contains("releases another member"), "{e}");
        // the same frame while Unknown is the evidence rule (assumption 3's window): allowed
        let unknown = GroupState {
            phase: Phase::Unknown,
            ..st0
        };
        check_release(&h, &cfg, unknown, red(2, 9), Seq(8), PortSet(0b1010)).unwrap();
        // the previous release back to the sender alone is claim 6's answer
        check_release(&h, &cfg, st0, red(2, 9), Seq(8), PortSet(0b100)).unwrap();
    }

    /// Invariant 4 catches an early release: barrier 5 with child 3 missing.
    #[test]
    fn a_release_without_every_child_is_caught() {
        let cfg = PRESETS[0];
        let st0 = GroupState {
            seq: Seq(5),
            arrived: PortSet(0b10),
            phase: Phase::Collecting,
        };
        let h = heard(&[(5, 0b110)]);
        let e = check_release(&h, &cfg, st0, red(2, 5), Seq(5), cfg.children).unwrap_err();
        assert!(e.contains("not justified"), "{e}");
        let h = heard(&[(5, 0b1110)]);
        check_release(&h, &cfg, st0, red(3, 5), Seq(5), cfg.children).unwrap();
        // never to a port that is not a child
        let e = check_release(&h, &cfg, st0, red(3, 5), Seq(5), PortSet(1)).unwrap_err();
        assert!(e.contains("not child ports"), "{e}");
    }

    /// The harness itself: a frame of another epoch, a non-member's frame and a full barrier.
    #[test]
    fn seeds_run_clean() {
        // root group 0: children 1, 2, 3 each reduce the current barrier, three times
        let mut s = Vec::new();
        for _ in 0..3 {
            for p in 1..=3u8 {
                s.extend_from_slice(&[0, p, 0, 0, 0, 2, 0]);
            }
        }
        check(&s);
        let h = {
            let mut h = Harness::new();
            h.op(&mut Input::new(&s));
            h
        };
        assert_eq!(h.table.state(GroupId(0)).unwrap().arrived, PortSet(0b10));
    }
}
