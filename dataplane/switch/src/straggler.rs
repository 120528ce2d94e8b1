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
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

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

/// The watched groups of one switch.
pub struct Watch {
    /// Sorted group numbers; `slots[i]` watches `groups[i]`.
    groups: Vec<u32>,
    slots: Vec<Mutex<GroupWatch>>,
    /// The clock the RX pollers stamp arrivals with (readers compute ages with it).
    pub clock: Clock,
}

impl Watch {
    pub fn new(groups: &[u32], clock: Clock) -> Self {
        let mut groups = groups.to_vec();
        groups.sort_unstable();
        groups.dedup();
        let slots = groups
            .iter()
            .map(|_| Mutex::new(GroupWatch::new()))
            .collect();
        Watch {
            groups,
            slots,
            clock,
        }
    }

    pub fn groups(&self) -> &[u32] {
        &self.groups
    }

    /// Whether `group` is watched.
    #[inline]
    pub fn watches(&self, group: u32) -> bool {
        self.groups.binary_search(&group).is_ok()
    }

    /// The group's record, if watched.
    pub fn get(&self, group: u32) -> Option<MutexGuard<'_, GroupWatch>> {
        let i = self.groups.binary_search(&group).ok()?;
        Some(self.slots[i].lock().unwrap_or_else(|p| p.into_inner()))
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
        let Some(mut w) = self.get(group.0) else {
            return;
        };
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
        assert_eq!(w.get(7).unwrap().waiting(Some(R)), Some((0, 1_000)));
        assert_eq!(
            w.get(7).unwrap().waiting(Some(next)),
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
        assert_eq!(w.get(7).unwrap().waiting(Some(next)), Some((0, 50_000)));
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
        let b = *w.get(7).unwrap().recent.back().unwrap();
        assert_eq!((b.spread_ns, b.latency_ns), (1_000, Some(1_000)));

        // an intermediate: the old run's completion awaits a release that never comes
        let w = Watch::new(&[1], Clock::new());
        let g = GroupId(1);
        w.on_frame(g, Kind::Reduce, p(1), 0, R, Outcome::Completed, false, 10);
        assert!(w.get(1).unwrap().awaiting_release(Some(next)).is_none());
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
            w.get(1).unwrap().recent.is_empty(),
            "the old run's barrier is not finished by the new run's release"
        );
    }

    #[test]
    fn the_last_child_and_the_spread_of_each_barrier_at_a_root() {
        let w = Watch::new(&[7, 3], Clock::new());
        let g = GroupId(7);
        w.on_frame(g, Kind::Reduce, p(0), 0, R, Outcome::Recorded, true, 1_000);
        w.on_frame(g, Kind::Reduce, p(2), 0, R, Outcome::Recorded, true, 1_500);
        assert_eq!(w.get(7).unwrap().waiting(Some(R)), Some((0, 1_000)));
        w.on_frame(g, Kind::Reduce, p(1), 0, R, Outcome::Completed, true, 4_000);
        // a duplicate changes nothing
        w.on_frame(g, Kind::Reduce, p(1), 0, R, Outcome::Duplicate, true, 5_000);
        let s = w.get(7).unwrap();
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
        assert!(w.get(5).is_none());
        assert_eq!(w.get(3).unwrap().recent.len(), 0);
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
            assert_eq!(w.get(1).unwrap().latency.len(), u64::from(seq));
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
        let s = w.get(1).unwrap();
        assert_eq!(s.recent.len(), RECENT);
        let last = *s.recent.back().unwrap();
        assert_eq!(last.seq, RECENT as u32 + 3);
        assert_eq!((last.spread_ns, last.latency_ns), (10, Some(50)));
        assert_eq!(s.last_counts[1], RECENT as u64 + 4);
        drop(s);
        w.on_frame(g, Kind::Reduce, p(1), 99, R, Outcome::Completed, false, 7);
        assert_eq!(
            w.get(1).unwrap().awaiting_release(Some(R)),
            Some((99, p(1), 0))
        );
    }
}
