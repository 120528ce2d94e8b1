//! A flood of frames the switch's access lists must refuse (issue 12, item 5): the frame mix per
//! flooded port, what each class must be counted as by the switch, and the check of a
//! barrier-switch's counters and table after the run (`--inproc-switch`).
//!
//! Two kinds of flooded port:
//!
//! - a **non-member** port, named by no group of the switch: reduces and releases for random
//!   group numbers of the switch's table. barrier-switch refuses them for their port before the
//!   table (`drop_not_a_child` for reduces, `drop_not_the_parent` for releases).
//! - a **member** port, a child of every generator group, flooded beside its leaves' own frames:
//!   releases of member groups (a release on a child port: `drop_not_the_parent`); reduces of
//!   member groups in another epoch (`drop_other_epoch`); reduces for configured groups this
//!   port is no child of (`drop_not_a_child`, only when such "foreign" groups are known); reduces
//!   for group numbers the switch has no configuration for (`drop_unknown_group`, only when such
//!   numbers are known).
//!
//! The classes of a port are sent in turn (so each gets an even share) with random groups and
//! sequence numbers (half of them small, near the barriers in progress, half anywhere).

use barrier_protocol::counts::CountKey;
use barrier_protocol::rng::Rng;
use barrier_protocol::switch::{GroupState, Outcome, Reject};
use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, ParseError, FRAME_LEN};
use barrier_protocol::{Epoch, GroupId, Seq};
use barrier_switch::counters::RxCounters;
use barrier_switch::engine::SwitchStats;
use serde::Serialize;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

/// One class of refused frame.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FloodClass {
    /// A reduce on a port no group names, for a random group of the table.
    NonMemberReduce,
    /// A release on a port no group names, for a random group of the table.
    NonMemberRelease,
    /// A release of a member group arriving on one of its child ports.
    ChildRelease,
    /// A reduce of a member group on a child port, in another epoch.
    OtherEpoch,
    /// A reduce for a configured group the port is no child of.
    ForeignGroup,
    /// A reduce for a group number the switch has no configuration for.
    UnknownGroup,
}

/// Every class, a dense index and a stable name: the project's counter-key trait, as for
/// outcomes and parse errors.
impl CountKey for FloodClass {
    const ALL: &'static [Self] = &[
        FloodClass::NonMemberReduce,
        FloodClass::NonMemberRelease,
        FloodClass::ChildRelease,
        FloodClass::OtherEpoch,
        FloodClass::ForeignGroup,
        FloodClass::UnknownGroup,
    ];

    fn index(self) -> usize {
        self as usize
    }

    fn name(self) -> &'static str {
        match self {
            FloodClass::NonMemberReduce => "nonmember_reduce",
            FloodClass::NonMemberRelease => "nonmember_release",
            FloodClass::ChildRelease => "child_release",
            FloodClass::OtherEpoch => "other_epoch",
            FloodClass::ForeignGroup => "foreign_group",
            FloodClass::UnknownGroup => "unknown_group",
        }
    }
}

impl FloodClass {
    /// The barrier-switch RX counter that must count a frame of this class on the port it was
    /// sent to.
    pub fn counter(self) -> RxCount {
        match self {
            FloodClass::NonMemberReduce | FloodClass::ForeignGroup => {
                RxCount::Outcome(Outcome::Rejected(Reject::NotAChild))
            }
            FloodClass::NonMemberRelease | FloodClass::ChildRelease => {
                RxCount::Outcome(Outcome::Rejected(Reject::NotTheParent))
            }
            FloodClass::OtherEpoch => RxCount::Outcome(Outcome::Rejected(Reject::OtherEpoch)),
            FloodClass::UnknownGroup => RxCount::UnknownGroup,
        }
    }

    fn kind(self) -> Kind {
        match self {
            FloodClass::NonMemberRelease | FloodClass::ChildRelease => Kind::Release,
            _ => Kind::Reduce,
        }
    }
}

/// Frames per class, indexed by [`FloodClass::index`].
pub type ClassCounts = [u64; FloodClass::ALL.len()];

/// The group numbers a flood's frames name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FloodGroups {
    /// The generator's groups: every generator port is a child of each.
    pub members: Range<u32>,
    /// Configured groups that no flooded member port is a child of (may be empty).
    pub foreign: Range<u32>,
    /// Non-member frames name random groups `0..table` (the switch's table).
    pub table: u32,
    /// Group numbers the switch has no configuration for (may be empty).
    pub unknown: Range<u32>,
    /// The member groups' epoch at the switch.
    pub epoch: u32,
}

/// Where a flood goes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A port that no group names.
    NonMember,
    /// A child port of every member group, shared with its leaves.
    Member,
}

/// The classes a target of this kind is sent, given the groups known.
pub fn classes_for(target: Target, groups: &FloodGroups) -> Vec<FloodClass> {
    match target {
        Target::NonMember => vec![FloodClass::NonMemberReduce, FloodClass::NonMemberRelease],
        Target::Member => {
            let mut v = vec![FloodClass::ChildRelease, FloodClass::OtherEpoch];
            if !groups.foreign.is_empty() {
                v.push(FloodClass::ForeignGroup);
            }
            if !groups.unknown.is_empty() {
                v.push(FloodClass::UnknownGroup);
            }
            v
        }
    }
}

/// The frames of one flooded port: its classes in turn, random groups and sequence numbers.
pub struct FloodSource {
    classes: Vec<FloodClass>,
    next: usize,
    rng: Rng,
    groups: FloodGroups,
    src: MacAddr,
    dst: MacAddr,
}

impl FloodSource {
    /// A source for `target`; `src` is the flooding port's MAC, `dst` the reduces' destination.
    pub fn new(
        target: Target,
        groups: FloodGroups,
        seed: u64,
        src: [u8; 6],
        dst: [u8; 6],
    ) -> Result<FloodSource, String> {
        if groups.members.is_empty() || groups.table == 0 {
            return Err("a flood needs the member groups and the table size".into());
        }
        for r in [&groups.members, &groups.foreign, &groups.unknown] {
            if r.end > barrier_protocol::MAX_GROUPS {
                return Err(format!(
                    "flood groups {r:?}: beyond the wire format's {} groups",
                    barrier_protocol::MAX_GROUPS
                ));
            }
        }
        Ok(FloodSource {
            classes: classes_for(target, &groups),
            next: 0,
            rng: Rng::stream(seed, 0xF100D),
            groups,
            src: MacAddr(src),
            dst: MacAddr(dst),
        })
    }

    pub fn classes(&self) -> &[FloodClass] {
        &self.classes
    }

    fn pick(&mut self, r: &Range<u32>) -> u32 {
        r.start + self.rng.below(u64::from(r.end - r.start)) as u32
    }

    /// The class of the next frame (what [`FloodSource::build`] will write).
    pub fn peek(&self) -> FloodClass {
        self.classes[self.next]
    }

    /// Writes the next frame into `buf` and moves on to the next class; returns the class.
    pub fn build(&mut self, buf: &mut [u8; FRAME_LEN]) -> FloodClass {
        let class = self.classes[self.next];
        self.next = (self.next + 1) % self.classes.len();
        let members = self.groups.members.clone();
        let e = self.groups.epoch;
        let (group, epoch) = match class {
            FloodClass::NonMemberReduce | FloodClass::NonMemberRelease => {
                (self.rng.below(u64::from(self.groups.table)) as u32, e)
            }
            FloodClass::ChildRelease => (self.pick(&members), e),
            // Any epoch but the group's: 1 ..= 2^20 ahead, wrapping.
            FloodClass::OtherEpoch => (
                self.pick(&members),
                e.wrapping_add(1 + self.rng.below(1 << 20) as u32),
            ),
            FloodClass::ForeignGroup => {
                let f = self.groups.foreign.clone();
                (self.pick(&f), e)
            }
            FloodClass::UnknownGroup => {
                let u = self.groups.unknown.clone();
                (self.pick(&u), e)
            }
        };
        let seq = if self.rng.below(2) == 0 {
            self.rng.below(1024) as u32
        } else {
            self.rng.next_u64() as u32
        };
        FrameRepr {
            dst: self.dst,
            src: self.src,
            kind: class.kind(),
            flags: Flags::empty(),
            group: GroupId(group),
            epoch: Epoch(epoch),
            seq: Seq(seq),
            tx_timestamp: None,
        }
        .emit(buf);
        class
    }
}

/// What one flooded port of a barrier-switch must show: the port's index at the switch, what was
/// sent per class, and whether no group names it.
#[derive(Clone, Debug)]
pub struct PortExpect {
    pub switch_port: usize,
    pub name: String,
    pub nonmember: bool,
    pub sent: ClassCounts,
}

/// One compared counter.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CounterCheck {
    pub port: String,
    pub counter: String,
    pub expected: u64,
    pub got: u64,
}

/// The verdict on a barrier-switch after a flood.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SwitchCheck {
    /// Every comparison held and nothing else was found.
    pub ok: bool,
    pub counters: Vec<CounterCheck>,
    /// Foreign groups whose state at the switch changed during the run (must be 0).
    pub foreign_changed: u64,
    /// Barriers the switch completed (`completions`, all ports) against those the generator
    /// completed: equal when no flood frame completed a barrier.
    pub switch_completions: u64,
    pub generator_completions: u64,
    pub problems: Vec<String>,
}

/// One of barrier-switch's RX counters, named by the cell that holds it, so that a misspelt
/// counter does not compile (it was a string looked up in `RxCounters::NAMES`, and a typo a
/// panic at run time). Its printed name comes from the switch's own table ([`RxCount::name`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum RxCount {
    /// `frames`: every frame taken off the port's queues.
    Frames,
    /// `reduce_in`.
    ReduceIn,
    /// `release_in`.
    ReleaseIn,
    /// What the group table decided (`recorded`, `completions`, `drop_not_a_child`, ...).
    Outcome(Outcome),
    /// A frame the parser refused (`drop_` and the error's reason).
    Parse(ParseError),
    /// `drop_unknown_group`.
    UnknownGroup,
    /// `drop_policed`.
    Policed,
}

impl RxCount {
    /// Every counter that refuses a frame (the switch's `drop_*`), with `recorded` and
    /// `completions`: what a port no group names must show nothing in but its flood's classes.
    pub fn refusals_and_progress() -> Vec<RxCount> {
        let mut v = vec![
            RxCount::Outcome(Outcome::Recorded),
            RxCount::Outcome(Outcome::Completed),
        ];
        v.extend(ParseError::ALL.map(RxCount::Parse));
        v.push(RxCount::UnknownGroup);
        v.extend(
            Outcome::ALL
                .into_iter()
                .filter(|o| matches!(o, Outcome::Rejected(_)))
                .map(RxCount::Outcome),
        );
        v.push(RxCount::Policed);
        v
    }

    /// The cell in one RX poller's counters.
    fn cell(self, c: &RxCounters) -> &AtomicU64 {
        match self {
            RxCount::Frames => &c.frames,
            RxCount::ReduceIn => &c.reduce_in,
            RxCount::ReleaseIn => &c.release_in,
            RxCount::Outcome(o) => &c.outcomes[o],
            RxCount::Parse(e) => &c.parse_drops[e],
            RxCount::UnknownGroup => &c.drop_unknown_group,
            RxCount::Policed => &c.drop_policed,
        }
    }

    /// The name barrier-switch prints it under (`RxCounters::NAMES`), found by counting one in
    /// the cell of a fresh set and seeing which printed value moved: never out of step with
    /// the switch's table.
    pub fn name(self) -> &'static str {
        let probe = RxCounters::default();
        self.cell(&probe).store(1, Ordering::Relaxed);
        let moved = probe.values().iter().position(|&v| v == 1);
        moved
            .and_then(|i| RxCounters::NAMES.get(i).copied())
            .expect("every cell of RxCount is one of the switch's printed RX counters")
    }
}

/// A port's RX counter summed over its pollers.
pub fn rx_counter(stats: &SwitchStats, port: usize, counter: RxCount) -> u64 {
    stats
        .rx
        .iter()
        .filter(|(p, _)| *p == port)
        .map(|(_, c)| counter.cell(c).load(Ordering::Relaxed))
        .sum()
}

/// An RX counter of the switch, summed over all ports.
fn rx_total(stats: &SwitchStats, counter: RxCount) -> u64 {
    (0..stats.port_names.len())
        .map(|p| rx_counter(stats, p, counter))
        .sum()
}

/// The states of groups `r` now (to compare before and after).
pub fn states(stats: &SwitchStats, r: Range<u32>) -> Vec<Option<GroupState>> {
    r.map(|g| stats.table.state(GroupId(g))).collect()
}

/// Checks a barrier-switch's counters and table after a flood: on each flooded port, every
/// class's counter equals what was sent of the classes it counts (for a non-member port also
/// `frames`, `reduce_in`, `release_in`, and nothing in any other drop counter); the foreign
/// groups' states are what they were before the run; the switch completed exactly the barriers
/// the generator completed; and no flood frame was left unsent.
pub fn check_switch(
    stats: &SwitchStats,
    ports: &[PortExpect],
    foreign_before: &[Option<GroupState>],
    foreign: Range<u32>,
    generator_completions: u64,
    unsent: u64,
) -> SwitchCheck {
    let mut counters = Vec::new();
    let mut problems = Vec::new();
    for pe in ports {
        let mut want: Vec<(RxCount, u64)> = Vec::new();
        fn add(want: &mut Vec<(RxCount, u64)>, counter: RxCount, n: u64) {
            match want.iter_mut().find(|(k, _)| *k == counter) {
                Some((_, v)) => *v += n,
                None => want.push((counter, n)),
            }
        }
        for &c in FloodClass::ALL {
            add(&mut want, c.counter(), pe.sent[c.index()]);
        }
        if pe.nonmember {
            // A port no group names: nothing but the flood, and nothing of it past the parse.
            let total: u64 = pe.sent.iter().sum();
            add(&mut want, RxCount::Frames, total);
            add(
                &mut want,
                RxCount::ReduceIn,
                pe.sent[FloodClass::NonMemberReduce.index()],
            );
            add(
                &mut want,
                RxCount::ReleaseIn,
                pe.sent[FloodClass::NonMemberRelease.index()],
            );
            for counter in RxCount::refusals_and_progress() {
                add(&mut want, counter, 0);
            }
        }
        for (counter, expected) in want {
            let got = rx_counter(stats, pe.switch_port, counter);
            let name = counter.name();
            if got != expected {
                problems.push(format!(
                    "port {}: {name} = {got}, expected {expected}",
                    pe.name
                ));
            }
            counters.push(CounterCheck {
                port: pe.name.clone(),
                counter: name.to_string(),
                expected,
                got,
            });
        }
    }
    let after = states(stats, foreign.clone());
    let foreign_changed = after
        .iter()
        .zip(foreign_before)
        .filter(|(a, b)| a != b)
        .count() as u64;
    if foreign_changed > 0 || after.len() != foreign_before.len() {
        problems.push(format!(
            "{foreign_changed} of the foreign groups {foreign:?} changed state"
        ));
    }
    let switch_completions = rx_total(stats, RxCount::Outcome(Outcome::Completed));
    if switch_completions != generator_completions {
        problems.push(format!(
            "the switch completed {switch_completions} barriers, the generator {generator_completions}"
        ));
    }
    if unsent > 0 {
        problems.push(format!(
            "{unsent} frames were still queued on flooded ports at the end"
        ));
    }
    SwitchCheck {
        ok: problems.is_empty(),
        counters,
        foreign_changed,
        switch_completions,
        generator_completions,
        problems,
    }
}

impl SwitchCheck {
    pub fn text(&self) -> String {
        let mut s = format!(
            "flood check: {} (switch completions {}, generator {}; foreign groups changed {})\n",
            if self.ok { "ok" } else { "FAILED" },
            self.switch_completions,
            self.generator_completions,
            self.foreign_changed
        );
        for c in &self.counters {
            if c.expected > 0 || c.got > 0 {
                s += &format!(
                    "  port {} {}: {} (sent {})\n",
                    c.port, c.counter, c.got, c.expected
                );
            }
        }
        for p in &self.problems {
            s += &format!("  PROBLEM: {p}\n");
        }
        s
    }
}

#[cfg(test)]
mod tests;
