//! Straggler reports for the groups an operator watches (`[stragglers] groups` in the
//! configuration): for each recent barrier, the child port whose reduce arrived last and the
//! spread between the first and the last arrival; the switch's per-barrier latency (first
//! arrival to the release decision) in an hdrhistogram; and, for the barrier in progress, since
//! when it has been waiting. Read by telemetry (`/barrier/group,N`) and Prometheus.
//!
//! Cost: RX pollers of a switch without watched groups pay one `Option` test per frame. For a
//! watched group, each reduce, completion and forwarded release takes the group's mutex (a
//! handful of groups chosen for debugging, so the lock is not shared by the bulk of the
//! traffic); unwatched groups are found not watched by a binary search of the watched list.
//!
//! Arrivals are stamped with the polling loop's clock reading for the pass that received them:
//! two reduces received in one pass (or one burst) have the same time, and a spread of 0 means
//! "within one pass".
//!
//! Latency ends at the release *decision*: at a root when the last reduce completes the
//! barrier, at an intermediate when the parent's release is taken to be forwarded. The frames
//! then wait in the scheduler's queue for their port (sub-microsecond without backpressure);
//! that wait is not included.

use barrier_protocol::switch::{Outcome, Run};
use barrier_protocol::wire::Kind;
use barrier_protocol::{GroupId, PortIdx};
use barrier_runtime::clock::Clock;
use hdrhistogram::Histogram;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// Barriers kept per watched group in the recent list.
pub const RECENT: usize = 16;

/// One completed barrier of a watched group.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Barrier {
    pub seq: u32,
    /// The child whose reduce arrived last (completed the barrier here).
    pub last_port: PortIdx,
    /// Last arrival minus first arrival.
    pub spread_ns: u64,
    /// First arrival to the release decision; `None` while an intermediate waits for its parent.
    pub latency_ns: Option<u64>,
}

/// What is known of one watched group.
///
/// The barrier in progress and an intermediate's barrier awaiting its release belong to the run
/// of the group they were seen in ([`Run`]: epoch and configuration generation). A reset, `set`,
/// delete and create, or restart ends that run: a frame of the next run at the same sequence
/// number starts its own barrier instead of inheriting the old first arrival, and the readers
/// ([`GroupWatch::waiting`], [`GroupWatch::awaiting_release`]) show nothing of a run that is not
/// the group's current one. The recent list and the histograms are the group number's history
/// across runs.
#[derive(Clone)]
pub struct GroupWatch {
    /// The barrier in progress: its sequence number, run and first arrival.
    current: Option<(u32, Run, u64)>,
    /// An intermediate's completed barrier waiting for the parent's release, with its run and
    /// first arrival (the latency ends when the release comes).
    pending: Option<(Barrier, Run, u64)>,
    pub recent: VecDeque<Barrier>,
    /// Per-barrier latency in ns (1 ns .. 1 h, 3 significant digits).
    pub latency: Histogram<u64>,
    /// Per-barrier spread in ns.
    pub spread: Histogram<u64>,
    /// How often each port (index) was the last to arrive.
    pub last_counts: [u64; 64],
}

impl GroupWatch {
    fn new() -> Self {
        let h = || Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
        GroupWatch {
            current: None,
            pending: None,
            recent: VecDeque::with_capacity(RECENT),
            latency: h(),
            spread: h(),
            last_counts: [0; 64],
        }
    }

    /// The barrier in progress in run `run` (the group's current one,
    /// `GroupTable::run`), if a reduce for it has arrived: (seq, first arrival ns).
    pub fn waiting(&self, run: Option<Run>) -> Option<(u32, u64)> {
        self.current
            .filter(|c| Some(c.1) == run)
            .map(|(seq, _, first)| (seq, first))
    }

    /// An intermediate's barrier of run `run` completed here and waiting for the parent's
    /// release: its sequence number, last child and spread.
    pub fn awaiting_release(&self, run: Option<Run>) -> Option<(u32, PortIdx, u64)> {
        self.pending
            .filter(|p| Some(p.1) == run)
            .map(|(b, _, _)| (b.seq, b.last_port, b.spread_ns))
    }

    fn finish(&mut self, b: Barrier) {
        if let Some(l) = b.latency_ns {
            let _ = self.latency.record(l);
        }
        let _ = self.spread.record(b.spread_ns);
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(b);
    }
}

/// One watched group's report, shared with the RX pollers that update it.
pub struct Report(Arc<Mutex<GroupWatch>>);

impl Report {
    /// The report, locked (an RX poller of the group waits meanwhile).
    pub fn lock(&self) -> MutexGuard<'_, GroupWatch> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How many groups a switch watches at most unless `[stragglers] limit` says otherwise.
pub const DEFAULT_LIMIT: usize = 64;

/// Why a group cannot be watched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    #[error("group {group} is outside the table (group numbers 0..{capacity})")]
    OutOfRange { group: u32, capacity: u32 },
    #[error(
        "{limit} groups are watched already, the limit ([stragglers] limit): unwatch one first"
    )]
    Full { limit: usize },
}

/// The watched groups of one switch: those of `[stragglers] groups` from the start, and any
/// group number management watches or unwatches while the switch runs, up to a limit.
///
/// The RX path asks [`Watch::watches`] for every frame: one bit of a bitmap over the table's
/// group numbers (128 KiB for a million groups), so an unwatched group costs a load. A watched
/// group's frames take its report's mutex. A report belongs to the watch of its group number:
/// it outlives a reset or a delete of the group (the recent list and histograms are the number's
/// history, [`GroupWatch`]) and is dropped by [`Watch::unwatch`]; watching again starts empty.
pub struct Watch {
    /// One bit per group number below the table's capacity: watched.
    bits: Box<[AtomicU64]>,
    capacity: u32,
    limit: usize,
    reports: RwLock<BTreeMap<u32, Arc<Mutex<GroupWatch>>>>,
    /// The clock the RX pollers stamp arrivals with (readers compute ages with it).
    pub clock: Clock,
}

impl Watch {
    /// A watch of `groups` (numbers below `capacity`), which at most `limit` groups may join.
    pub fn with_limit(
        groups: &[u32],
        capacity: u32,
        limit: usize,
        clock: Clock,
    ) -> Result<Self, WatchError> {
        let w = Watch {
            bits: (0..capacity.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            capacity,
            limit,
            reports: RwLock::new(BTreeMap::new()),
            clock,
        };
        for &g in groups {
            w.watch(g)?;
        }
        Ok(w)
    }

    /// A watch of just `groups`, with room for [`DEFAULT_LIMIT`] (tests and tools).
    pub fn new(groups: &[u32], clock: Clock) -> Self {
        let capacity = groups.iter().max().map_or(1, |&g| g + 1);
        Watch::with_limit(groups, capacity, DEFAULT_LIMIT.max(groups.len()), clock)
            .expect("within range and limit")
    }

    /// The watched group numbers, in order.
    pub fn groups(&self) -> Vec<u32> {
        self.read().keys().copied().collect()
    }

    /// At most this many groups are watched.
    pub fn limit(&self) -> usize {
        self.limit
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<u32, Arc<Mutex<GroupWatch>>>> {
        self.reports.read().unwrap_or_else(|p| p.into_inner())
    }

    #[inline]
    fn bit(&self, group: u32) -> Option<(&AtomicU64, u64)> {
        let w = self.bits.get((group / 64) as usize)?;
        Some((w, 1 << (group % 64)))
    }

    /// Starts reporting `group` (nothing changes when it is watched already).
    pub fn watch(&self, group: u32) -> Result<(), WatchError> {
        let Some((word, bit)) = self.bit(group).filter(|_| group < self.capacity) else {
            return Err(WatchError::OutOfRange {
                group,
                capacity: self.capacity,
            });
        };
        let mut reports = self.reports.write().unwrap_or_else(|p| p.into_inner());
        if reports.contains_key(&group) {
            return Ok(());
        }
        if reports.len() >= self.limit {
            return Err(WatchError::Full { limit: self.limit });
        }
        reports.insert(group, Arc::new(Mutex::new(GroupWatch::new())));
        word.fetch_or(bit, Ordering::Release);
        Ok(())
    }

    /// Stops reporting `group` and drops its report; false when it was not watched.
    pub fn unwatch(&self, group: u32) -> bool {
        let mut reports = self.reports.write().unwrap_or_else(|p| p.into_inner());
        if let Some((word, bit)) = self.bit(group) {
            word.fetch_and(!bit, Ordering::Release);
        }
        reports.remove(&group).is_some()
    }

    /// Whether `group` is watched.
    #[inline]
    pub fn watches(&self, group: u32) -> bool {
        self.bit(group)
            .is_some_and(|(w, b)| w.load(Ordering::Relaxed) & b != 0)
    }

    /// The group's report, if watched (lock it to read it).
    pub fn report(&self, group: u32) -> Option<Report> {
        self.read().get(&group).cloned().map(Report)
    }

    /// `f` on the group's report, if watched.
    pub fn with<R>(&self, group: u32, f: impl FnOnce(&GroupWatch) -> R) -> Option<R> {
        self.report(group).map(|r| f(&r.lock()))
    }

    /// What an RX poller saw: a frame of `kind` for barrier `seq` of `group` from `port` at
    /// `now_ns`, and what the table made of it in run `run` (`Actions::run` of the decision).
    /// `root`: whether this switch is the group's root (a completion is then the release
    /// decision).
    #[allow(clippy::too_many_arguments)]
    pub fn on_frame(
        &self,
        group: GroupId,
        kind: Kind,
        port: PortIdx,
        seq: u32,
        run: Run,
        outcome: Outcome,
        root: bool,
        now_ns: u64,
    ) {
        if !self.watches(group.0) {
            return;
        }
        let Some(report) = self.read().get(&group.0).cloned() else {
            return;
        };
        let mut w = report.lock().unwrap_or_else(|p| p.into_inner());
        match (kind, outcome) {
            (Kind::Reduce, Outcome::Recorded)
                if w.current.map(|(s, r, _)| (s, r)) != Some((seq, run)) =>
            {
                w.current = Some((seq, run, now_ns));
            }
            (Kind::Reduce, Outcome::Completed) => {
                let first = match w.current {
                    Some((s, r, t)) if (s, r) == (seq, run) => t,
                    // one child, the first reduce we saw completed it, or the barrier in
                    // progress was another run's
                    _ => now_ns,
                };
                w.current = None;
                let w = &mut *w;
                w.last_counts[port.get() as usize] += 1;
                let b = Barrier {
                    seq,
                    last_port: port,
                    spread_ns: now_ns.saturating_sub(first),
                    latency_ns: root.then(|| now_ns.saturating_sub(first)),
                };
                if root {
                    w.finish(b);
                } else {
                    w.pending = Some((b, run, first));
                }
            }
            (Kind::Release, Outcome::Released) => {
                if let Some((mut b, r, first)) = w.pending.take() {
                    if (b.seq, r) == (seq, run) {
                        b.latency_ns = Some(now_ns.saturating_sub(first));
                        w.finish(b);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(i: u8) -> PortIdx {
        PortIdx::new(i).unwrap()
    }

    const R: Run = Run {
        epoch: barrier_protocol::Epoch(1),
        generation: 1,
    };

    /// A reset (or set, delete and create, restart) between two runs at the same barrier: the
    /// new run's barrier 0 is measured from its own first arrival, and the old run's barrier in
    /// progress or awaiting its release is not shown as the group's.
    #[test]
    fn a_barrier_of_the_previous_run_is_not_the_next_runs() {
        let w = Watch::new(&[7], Clock::new());
        let g = GroupId(7);
        let next = Run { generation: 2, ..R };
        w.on_frame(g, Kind::Reduce, p(0), 0, R, Outcome::Recorded, true, 1_000);
        assert_eq!(
            w.with(7, GroupWatch::clone).unwrap().waiting(Some(R)),
            Some((0, 1_000))
        );
        assert_eq!(
            w.with(7, GroupWatch::clone).unwrap().waiting(Some(next)),
            None,
            "not the new run's"
        );
        w.on_frame(
            g,
            Kind::Reduce,
            p(0),
            0,
            next,
            Outcome::Recorded,
            true,
            50_000,
        );
        assert_eq!(
            w.with(7, GroupWatch::clone).unwrap().waiting(Some(next)),
            Some((0, 50_000))
        );
        w.on_frame(
            g,
            Kind::Reduce,
            p(1),
            0,
            next,
            Outcome::Completed,
            true,
            51_000,
        );
        let b = *w.with(7, GroupWatch::clone).unwrap().recent.back().unwrap();
        assert_eq!((b.spread_ns, b.latency_ns), (1_000, Some(1_000)));

        // an intermediate: the old run's completion awaits a release that never comes
        let w = Watch::new(&[1], Clock::new());
        let g = GroupId(1);
        w.on_frame(g, Kind::Reduce, p(1), 0, R, Outcome::Completed, false, 10);
        assert!(w
            .with(1, GroupWatch::clone)
            .unwrap()
            .awaiting_release(Some(next))
            .is_none());
        w.on_frame(
            g,
            Kind::Release,
            p(2),
            0,
            next,
            Outcome::Released,
            false,
            90_000,
        );
        assert!(
            w.with(1, GroupWatch::clone).unwrap().recent.is_empty(),
            "the old run's barrier is not finished by the new run's release"
        );
    }

    #[test]
    fn the_last_child_and_the_spread_of_each_barrier_at_a_root() {
        let w = Watch::new(&[7, 3], Clock::new());
        let g = GroupId(7);
        w.on_frame(g, Kind::Reduce, p(0), 0, R, Outcome::Recorded, true, 1_000);
        w.on_frame(g, Kind::Reduce, p(2), 0, R, Outcome::Recorded, true, 1_500);
        assert_eq!(
            w.with(7, GroupWatch::clone).unwrap().waiting(Some(R)),
            Some((0, 1_000))
        );
        w.on_frame(g, Kind::Reduce, p(1), 0, R, Outcome::Completed, true, 4_000);
        // a duplicate changes nothing
        w.on_frame(g, Kind::Reduce, p(1), 0, R, Outcome::Duplicate, true, 5_000);
        let s = w.with(7, GroupWatch::clone).unwrap();
        assert_eq!(s.waiting(Some(R)), None);
        assert_eq!(
            s.recent.iter().copied().collect::<Vec<_>>(),
            [Barrier {
                seq: 0,
                last_port: p(1),
                spread_ns: 3_000,
                latency_ns: Some(3_000)
            }]
        );
        assert_eq!(s.last_counts[1], 1);
        assert_eq!(s.latency.len(), 1);
        drop(s);
        // Unwatched groups are ignored.
        w.on_frame(
            GroupId(5),
            Kind::Reduce,
            p(0),
            0,
            R,
            Outcome::Completed,
            true,
            1,
        );
        assert!(w.with(5, GroupWatch::clone).is_none());
        assert_eq!(w.with(3, GroupWatch::clone).unwrap().recent.len(), 0);
    }

    #[test]
    fn an_intermediate_measures_to_the_parents_release_and_keeps_recent_bounded() {
        let w = Watch::new(&[1], Clock::new());
        let g = GroupId(1);
        for seq in 0..(RECENT as u32 + 4) {
            let t = u64::from(seq) * 100_000;
            w.on_frame(g, Kind::Reduce, p(0), seq, R, Outcome::Recorded, false, t);
            w.on_frame(
                g,
                Kind::Reduce,
                p(1),
                seq,
                R,
                Outcome::Completed,
                false,
                t + 10,
            );
            assert_eq!(
                w.with(1, GroupWatch::clone).unwrap().latency.len(),
                u64::from(seq)
            );
            w.on_frame(
                g,
                Kind::Release,
                p(2),
                seq,
                R,
                Outcome::Released,
                false,
                t + 50,
            );
        }
        let s = w.with(1, GroupWatch::clone).unwrap();
        assert_eq!(s.recent.len(), RECENT);
        let last = *s.recent.back().unwrap();
        assert_eq!(last.seq, RECENT as u32 + 3);
        assert_eq!((last.spread_ns, last.latency_ns), (10, Some(50)));
        assert_eq!(s.last_counts[1], RECENT as u64 + 4);
        drop(s);
        w.on_frame(g, Kind::Reduce, p(1), 99, R, Outcome::Completed, false, 7);
        assert_eq!(
            w.with(1, GroupWatch::clone)
                .unwrap()
                .awaiting_release(Some(R)),
            Some((99, p(1), 0))
        );
    }

    /// Management watches and unwatches groups while frames flow, up to the limit; a report
    /// starts empty each time its group is watched.
    #[test]
    fn groups_are_watched_and_unwatched_at_run_time_up_to_the_limit() {
        let w = Watch::with_limit(&[3], 100, 2, Clock::new()).unwrap();
        let g = GroupId(42);
        w.on_frame(g, Kind::Reduce, p(0), 0, R, Outcome::Completed, true, 10);
        assert!(
            !w.watches(42) && w.with(42, |_| ()).is_none(),
            "not watched: nothing kept"
        );
        w.watch(42).unwrap();
        w.watch(42).unwrap(); // twice is once
        assert_eq!(w.groups(), [3, 42]);
        w.on_frame(g, Kind::Reduce, p(0), 0, R, Outcome::Completed, true, 10);
        assert_eq!(w.with(42, |s| s.recent.len()), Some(1));
        assert_eq!(w.watch(7), Err(WatchError::Full { limit: 2 }));
        assert_eq!(
            w.watch(100),
            Err(WatchError::OutOfRange {
                group: 100,
                capacity: 100
            })
        );
        assert!(w.unwatch(42));
        assert!(!w.unwatch(42));
        assert!(!w.watches(42));
        w.on_frame(g, Kind::Reduce, p(0), 1, R, Outcome::Completed, true, 20);
        w.watch(7).unwrap();
        w.watch(42).unwrap_err();
        w.unwatch(7);
        w.watch(42).unwrap();
        assert_eq!(
            w.with(42, |s| s.recent.len()),
            Some(0),
            "a new watch starts empty"
        );
    }
}
