//! A compute node's side of a barrier (claim 2): send a reduce when the barrier point is reached,
//! re-send it whenever the timer expires without a release, and on the release for the current
//! sequence number stop the timer and advance. Pure state machine, time passed in.
//!
//! A real leaf also notices when the switch is at another barrier of its epoch (an earlier run
//! of the group used the epoch): [`Leaf::on_release_checked`] and [`MISMATCH_ANSWERS`].

use crate::backoff::Backoff;
use crate::wire::{Failure, Flags, FrameRepr, Kind, MacAddr};
use crate::{Epoch, GroupId, Seq, Time};

/// A leaf's configuration for one group.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub struct LeafConfig {
    /// The barrier group.
    pub group: GroupId,
    /// The group's epoch, as management set it up on the switches: every reduce carries it,
    /// and a release of any other epoch is ignored.
    pub epoch: Epoch,
    /// Re-send the reduce if no release came within this many nanoseconds.
    pub resend_timeout_ns: u64,
    /// Sequence number of the group's first barrier; every leaf of a group must use the same
    /// value (usually 0).
    pub first_seq: Seq,
}

/// Where the leaf stands.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub enum LeafState {
    /// Between barriers: computing.
    Working,
    /// Reduce for `seq` sent at `since`; re-send at `deadline` unless released.
    Waiting {
        /// The barrier waited on.
        seq: Seq,
        /// When the first reduce was sent.
        since: Time,
        /// When to re-send.
        deadline: Time,
    },
    /// The group's run was aborted: a switch declared `failure`. Every barrier of this epoch
    /// fails from now on; management resets the group (a new epoch) and a new leaf joins it.
    Aborted {
        /// The barrier the abort named.
        seq: Seq,
        /// Who was declared failed.
        failure: Failure,
    },
    /// The switch is at another barrier of this epoch ([`Mismatch`]): every barrier of this
    /// epoch fails from now on; management resets the group (a new epoch) and a new leaf
    /// joins it.
    Mismatched {
        /// The barrier this leaf waited on.
        seq: Seq,
        /// The barrier the switch answered with.
        answered: Seq,
    },
}

/// A reduce the caller must send to the parent.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub struct LeafSend {
    /// Group.
    pub group: GroupId,
    /// The group's epoch.
    pub epoch: Epoch,
    /// Barrier.
    pub seq: Seq,
    /// A re-send after timeout (sets the RETRANSMIT flag).
    pub retransmit: bool,
}

impl LeafSend {
    /// The reduce frame for this send, from `src` to `dst`, with an optional tx timestamp.
    pub fn frame(self, src: MacAddr, dst: MacAddr, tx_timestamp: Option<u64>) -> FrameRepr {
        FrameRepr {
            dst,
            src,
            kind: Kind::Reduce,
            flags: Flags::retransmit(self.retransmit),
            group: self.group,
            epoch: self.epoch,
            seq: self.seq,
            tx_timestamp,
        }
    }
}

/// A barrier ended for this leaf.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub struct Released {
    /// The barrier that completed.
    pub seq: Seq,
    /// Nanoseconds from the first reduce to the release.
    pub waited_ns: u64,
}

/// The group's run ended without a release: a switch declared a member failed.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub struct Aborted {
    /// The barrier the abort named (the one the declaring switch was gathering).
    pub seq: Seq,
    /// The barrier this leaf was waiting on, if it was waiting.
    pub waiting: Option<Seq>,
    /// Who was declared failed.
    pub failure: Failure,
}

/// Misuse of the leaf API, or a group that can no longer synchronize.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash, thiserror::Error)]
pub enum LeafError {
    /// `arrive` while already waiting on a barrier.
    #[error("already waiting on barrier {0:?}")]
    AlreadyWaiting(Seq),
    /// `arrive` after the group's run was aborted.
    #[error("barrier {seq:?} was aborted: {failure} failed")]
    Aborted {
        /// The barrier the abort named.
        seq: Seq,
        /// Who was declared failed.
        failure: Failure,
    },
    /// `arrive` after the switch answered with releases of another barrier ([`Mismatch`]).
    #[error(
        "the switch answers barrier {seq:?} with the release of {answered:?}: the epoch is in use"
    )]
    Mismatched {
        /// The barrier this leaf waited on.
        seq: Seq,
        /// The barrier the switch answered with.
        answered: Seq,
    },
}

/// Answers for another barrier a waiting leaf takes before it concludes that the switch is at
/// another barrier of its epoch ([`Leaf::on_release_checked`]), counted at most one per reduce
/// sent (the first one or a re-send).
///
/// Why more than one: a single release for another barrier can be a stray frame, delayed in
/// the network or duplicated, and one stray frame must not kill a job. Why a few: a switch that
/// really is at another barrier answers every reduce of the leaf that way (claim 6: a reduce
/// for another barrier gets the previous release, to that child), so a real mismatch shows up
/// once per re-send period and is reported after this many periods instead of the wait timeout.
pub const MISMATCH_ANSWERS: u32 = 3;

/// The switch answered this leaf's reduces for one barrier with releases for another barrier
/// of the same epoch, [`MISMATCH_ANSWERS`] times: the group is further on (or behind) in this
/// epoch, because an earlier run used it. Final for the epoch.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub struct Mismatch {
    /// The barrier this leaf waits on.
    pub seq: Seq,
    /// The barrier of the last release the switch answered with.
    pub answered: Seq,
}

/// What a release did to the leaf ([`Leaf::on_release_checked`]).
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub enum ReleaseOutcome {
    /// The barrier waited on ended.
    Released(Released),
    /// Nothing changed: another epoch's release, a duplicate of the previous barrier's, one
    /// that came while not waiting, or an answer for another barrier not yet conclusive.
    Ignored,
    /// The last answer that proves the switch is at another barrier: the leaf stopped waiting
    /// (no more re-sends) and every later `arrive` of this epoch fails.
    Mismatched(Mismatch),
}

/// One leaf in one group.
#[derive(Clone, Debug)]
pub struct Leaf {
    cfg: LeafConfig,
    seq: Seq,
    state: LeafState,
    resends: u64,
    backoff: Backoff,
    /// Re-sends of the current barrier so far (the backoff's attempt number).
    attempt: u32,
    /// Answers for another barrier counted while waiting on the current one.
    mismatches: u32,
    /// The `attempt` whose answer was counted last: one count per reduce sent.
    mismatch_counted_at: Option<u32>,
}

impl Leaf {
    /// A leaf before its first barrier.
    pub fn new(cfg: LeafConfig) -> Self {
        Leaf {
            cfg,
            seq: cfg.first_seq,
            state: LeafState::Working,
            resends: 0,
            backoff: Backoff::FIXED,
            attempt: 0,
            mismatches: 0,
            mismatch_counted_at: None,
        }
    }

    /// The same leaf re-sending with `backoff` (doubling waits up to a cap, per-group jitter)
    /// instead of every `resend_timeout_ns`: the timeout is then the first wait.
    #[must_use]
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    fn wait_ns(&self) -> u64 {
        self.backoff.delay_ns(
            self.cfg.resend_timeout_ns,
            self.cfg.group,
            self.cfg.epoch,
            self.seq,
            self.attempt,
        )
    }

    /// The configuration.
    pub fn config(&self) -> &LeafConfig {
        &self.cfg
    }

    /// The sequence number of the current barrier (while waiting) or the next one.
    pub fn seq(&self) -> Seq {
        self.seq
    }

    /// Working, waiting, or ended for the epoch (aborted, mismatched).
    pub fn state(&self) -> LeafState {
        self.state
    }

    /// Reduces re-sent on timeout so far.
    pub fn resends(&self) -> u64 {
        self.resends
    }

    /// The barrier point is reached: returns the reduce to send and starts the timer.
    pub fn arrive(&mut self, now: Time) -> Result<LeafSend, LeafError> {
        match self.state {
            LeafState::Waiting { seq, .. } => return Err(LeafError::AlreadyWaiting(seq)),
            LeafState::Aborted { seq, failure } => return Err(LeafError::Aborted { seq, failure }),
            LeafState::Mismatched { seq, answered } => {
                return Err(LeafError::Mismatched { seq, answered })
            }
            LeafState::Working => {}
        }
        self.attempt = 0;
        self.state = LeafState::Waiting {
            seq: self.seq,
            since: now,
            deadline: now + self.wait_ns(),
        };
        Ok(LeafSend {
            group: self.cfg.group,
            epoch: self.cfg.epoch,
            seq: self.seq,
            retransmit: false,
        })
    }

    /// A release for `seq` of `epoch` arrived. Ends the barrier when waiting on exactly `seq`
    /// in this leaf's epoch; any other release (a duplicate of an earlier one, one for a
    /// barrier not yet reached, one of another run of the group) is ignored.
    ///
    /// The rule of claim 2 alone, for models and emulations of many leaves, where a group
    /// stuck at another barrier is something to observe. A leaf that runs a job uses
    /// [`Leaf::on_release_checked`], which also reports that case.
    pub fn on_release(&mut self, now: Time, epoch: Epoch, seq: Seq) -> Option<Released> {
        match self.release(now, epoch, seq, false) {
            ReleaseOutcome::Released(r) => Some(r),
            ReleaseOutcome::Ignored | ReleaseOutcome::Mismatched(_) => None,
        }
    }

    /// [`Leaf::on_release`], and in addition: while waiting on barrier `s`, a release of this
    /// leaf's epoch for a barrier `t` other than `s` and `s - 1` (wrapping) is an answer from a
    /// switch that is at another barrier. A switch that knows the group answers a reduce for
    /// any barrier but its own with its previous release (claim 6), so a switch at barrier `u`
    /// answers reduce `s` with release `u - 1`: a previous run in this epoch left the group
    /// there. The [`MISMATCH_ANSWERS`]th such answer for the same `s`, counting at most one per
    /// reduce sent, moves the leaf to [`LeafState::Mismatched`] and returns
    /// [`ReleaseOutcome::Mismatched`]: it stops re-sending and every later `arrive` fails. It
    /// never releases anyone: the barrier does not end and `seq` does not advance. The count
    /// starts over with each barrier.
    ///
    /// Release `s - 1` never counts: it is the release this leaf already took, again, which a
    /// working tree legitimately sends: a duplicate or late copy, or the release a restarted
    /// switch sends to every child once another child's reduce for `s` proves `s - 1`
    /// complete (docs/protocol.md, restart rule 2).
    ///
    /// What it cannot detect: a previous run that ended exactly one barrier ahead. A switch at
    /// `s + 1` answers reduce `s` with release `s`, which is the release this leaf waits for:
    /// it ends the barrier, early, exactly as a lost release re-sent would, and nothing in the
    /// frame tells the two apart. Nor a previous run that stopped at `s` itself, with some
    /// arrivals recorded: those count for this run's barrier `s`. Only giving each run an
    /// epoch of its own prevents both (docs/protocol.md, "Assumptions", 2; management refusing
    /// an epoch already used).
    pub fn on_release_checked(&mut self, now: Time, epoch: Epoch, seq: Seq) -> ReleaseOutcome {
        self.release(now, epoch, seq, true)
    }

    fn release(&mut self, now: Time, epoch: Epoch, seq: Seq, check: bool) -> ReleaseOutcome {
        if epoch != self.cfg.epoch {
            return ReleaseOutcome::Ignored;
        }
        let LeafState::Waiting {
            seq: waiting,
            since,
            ..
        } = self.state
        else {
            return ReleaseOutcome::Ignored;
        };
        if seq == waiting {
            self.state = LeafState::Working;
            self.seq = seq.next();
            self.mismatches = 0;
            self.mismatch_counted_at = None;
            return ReleaseOutcome::Released(Released {
                seq,
                waited_ns: now.saturating_sub(since),
            });
        }
        if !check || seq == waiting.prev() || self.mismatch_counted_at == Some(self.attempt) {
            return ReleaseOutcome::Ignored;
        }
        self.mismatch_counted_at = Some(self.attempt);
        self.mismatches += 1;
        if self.mismatches < MISMATCH_ANSWERS {
            return ReleaseOutcome::Ignored;
        }
        self.state = LeafState::Mismatched {
            seq: waiting,
            answered: seq,
        };
        ReleaseOutcome::Mismatched(Mismatch {
            seq: waiting,
            answered: seq,
        })
    }

    /// An abort of barrier `seq` of `epoch` arrived, naming `failure`. In this leaf's epoch it
    /// ends the run: a wait in progress ends with the returned [`Aborted`], the timer stops,
    /// and every later `arrive` fails. Another epoch's abort, a second one, or one after the
    /// leaf ended with a [`Mismatch`], is ignored.
    pub fn on_abort(&mut self, epoch: Epoch, seq: Seq, failure: Failure) -> Option<Aborted> {
        if epoch != self.cfg.epoch {
            return None;
        }
        let waiting = match self.state {
            LeafState::Aborted { .. } | LeafState::Mismatched { .. } => return None,
            LeafState::Waiting { seq, .. } => Some(seq),
            LeafState::Working => None,
        };
        self.state = LeafState::Aborted { seq, failure };
        Some(Aborted {
            seq,
            waiting,
            failure,
        })
    }

    /// Checks the timer: if waiting and the deadline has passed, returns the reduce to re-send
    /// and restarts the timer from `now`.
    pub fn poll(&mut self, now: Time) -> Option<LeafSend> {
        match self.state {
            LeafState::Waiting { seq, deadline, .. } if now >= deadline => {
                self.attempt = self.attempt.saturating_add(1);
                let next = now + self.wait_ns();
                if let LeafState::Waiting { deadline, .. } = &mut self.state {
                    *deadline = next;
                }
                self.resends += 1;
                Some(LeafSend {
                    group: self.cfg.group,
                    epoch: self.cfg.epoch,
                    seq,
                    retransmit: true,
                })
            }
            _ => None,
        }
    }

    /// When `poll` next has something to do; `None` while working.
    pub fn next_deadline(&self) -> Option<Time> {
        match self.state {
            LeafState::Waiting { deadline, .. } => Some(deadline),
            LeafState::Working | LeafState::Aborted { .. } | LeafState::Mismatched { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: Epoch = Epoch(4);

    fn leaf() -> Leaf {
        Leaf::new(LeafConfig {
            group: GroupId(3),
            epoch: Epoch(4),
            resend_timeout_ns: 100,
            first_seq: Seq(0),
        })
    }

    #[test]
    fn arrive_sends_reduce_and_starts_timer() {
        let mut l = leaf();
        assert_eq!(l.state(), LeafState::Working);
        assert_eq!(l.next_deadline(), None);
        let s = l.arrive(Time(1000)).unwrap();
        assert_eq!(
            s,
            LeafSend {
                group: GroupId(3),
                epoch: Epoch(4),
                seq: Seq(0),
                retransmit: false
            }
        );
        assert_eq!(l.next_deadline(), Some(Time(1100)));
        assert_eq!(l.arrive(Time(1001)), Err(LeafError::AlreadyWaiting(Seq(0))));
    }

    #[test]
    fn timeout_resends_and_restarts_timer() {
        let mut l = leaf();
        l.arrive(Time(0)).unwrap();
        assert_eq!(l.poll(Time(99)), None);
        assert_eq!(
            l.poll(Time(100)),
            Some(LeafSend {
                group: GroupId(3),
                epoch: Epoch(4),
                seq: Seq(0),
                retransmit: true
            })
        );
        assert_eq!(l.next_deadline(), Some(Time(200)));
        assert_eq!(l.poll(Time(150)), None);
        assert!(l.poll(Time(250)).is_some());
        assert_eq!(l.next_deadline(), Some(Time(350)));
        assert_eq!(l.resends(), 2);
    }

    #[test]
    fn release_stops_timer_and_advances() {
        let mut l = leaf();
        l.arrive(Time(10)).unwrap();
        assert_eq!(
            l.on_release(Time(60), E, Seq(0)),
            Some(Released {
                seq: Seq(0),
                waited_ns: 50
            })
        );
        assert_eq!(l.state(), LeafState::Working);
        assert_eq!(l.seq(), Seq(1));
        assert_eq!(l.poll(Time(1_000_000)), None, "timer stopped");
        // the next barrier uses the next sequence number
        assert_eq!(l.arrive(Time(70)).unwrap().seq, Seq(1));
    }

    #[test]
    fn an_abort_of_its_epoch_ends_the_wait_and_every_later_barrier() {
        let failure = Failure {
            switch: MacAddr([2, 0, 0, 0, 0, 9]),
            port: 2,
        };
        let mut l = leaf();
        l.arrive(Time(0)).unwrap();
        assert_eq!(l.on_abort(Epoch(5), Seq(0), failure), None, "other epoch");
        assert_eq!(
            l.on_abort(E, Seq(0), failure),
            Some(Aborted {
                seq: Seq(0),
                waiting: Some(Seq(0)),
                failure
            })
        );
        assert_eq!(l.on_abort(E, Seq(0), failure), None, "only once");
        assert_eq!(l.next_deadline(), None);
        assert_eq!(l.poll(Time(1_000_000)), None, "no more re-sends");
        assert_eq!(l.on_release(Time(5), E, Seq(0)), None);
        assert_eq!(
            l.arrive(Time(10)),
            Err(LeafError::Aborted {
                seq: Seq(0),
                failure
            })
        );
        // a leaf between barriers learns it too
        let mut idle = leaf();
        assert_eq!(
            idle.on_abort(E, Seq(3), failure).map(|a| a.waiting),
            Some(None)
        );
        assert!(idle.arrive(Time(0)).is_err());
    }

    #[test]
    fn other_releases_are_ignored() {
        let mut l = leaf();
        // before arriving, even a release for the current seq does nothing
        assert_eq!(l.on_release(Time(0), E, Seq(0)), None);
        l.arrive(Time(0)).unwrap();
        assert_eq!(l.on_release(Time(1), E, Seq(1)), None);
        assert_eq!(
            l.on_release(Time(1), E, Seq(u32::MAX)),
            None,
            "release of seq-1 (first barrier)"
        );
        assert!(matches!(l.state(), LeafState::Waiting { seq: Seq(0), .. }));
        assert!(l.on_release(Time(2), E, Seq(0)).is_some());
        // duplicate of the release just handled
        assert_eq!(l.on_release(Time(3), E, Seq(0)), None);
        assert_eq!(l.seq(), Seq(1));
    }

    #[test]
    fn backoff_doubles_the_wait_up_to_the_cap_and_restarts_per_barrier() {
        let mut l = leaf().with_backoff(Backoff {
            max_ns: 400,
            jitter_pct: 0,
        });
        l.arrive(Time(0)).unwrap();
        assert_eq!(l.next_deadline(), Some(Time(100)));
        let mut t = 100;
        let mut waits = vec![];
        for _ in 0..5 {
            assert!(l.poll(Time(t)).is_some());
            let d = l.next_deadline().unwrap().nanos();
            waits.push(d - t);
            t = d;
        }
        assert_eq!(waits, [200, 400, 400, 400, 400]);
        l.on_release(Time(t), E, Seq(0)).unwrap();
        l.arrive(Time(t)).unwrap();
        assert_eq!(
            l.next_deadline(),
            Some(Time(t + 100)),
            "the next barrier starts over"
        );
    }

    #[test]
    fn jittered_leaves_of_different_groups_retry_at_different_times() {
        let deadlines: std::collections::BTreeSet<u64> = (0..50)
            .map(|g| {
                let mut l = Leaf::new(LeafConfig {
                    group: GroupId(g),
                    epoch: E,
                    resend_timeout_ns: 10_000,
                    first_seq: Seq(0),
                })
                .with_backoff(Backoff {
                    max_ns: 10_000,
                    jitter_pct: 25,
                });
                l.arrive(Time(0)).unwrap();
                l.next_deadline().unwrap().nanos()
            })
            .collect();
        assert!(deadlines.len() > 40, "{deadlines:?}");
        assert!(deadlines.iter().all(|d| (7_500..=10_000).contains(d)));
    }

    /// A release of another epoch (an old job's switch state, another run of the group)
    /// never ends a barrier, even for the sequence number waited on.
    #[test]
    fn releases_of_another_epoch_are_ignored() {
        let mut l = leaf();
        let s = l.arrive(Time(0)).unwrap();
        assert_eq!(
            s.frame(MacAddr::BROADCAST, MacAddr::BROADCAST, None).epoch,
            E
        );
        for other in [Epoch(0), Epoch(3), Epoch(5), Epoch(u32::MAX)] {
            assert_eq!(l.on_release(Time(1), other, Seq(0)), None);
        }
        assert!(matches!(l.state(), LeafState::Waiting { seq: Seq(0), .. }));
        assert!(l.on_release(Time(2), E, Seq(0)).is_some());
    }

    /// `n` releases for `seq`, one per reduce: the first reduce's answer, then one after each
    /// re-send (while the leaf still re-sends). Returns the outcomes.
    fn answer_each_reduce(l: &mut Leaf, epoch: Epoch, seq: Seq, n: usize) -> Vec<ReleaseOutcome> {
        (0..n)
            .map(|i| {
                if let (true, Some(due)) = (i > 0, l.next_deadline()) {
                    assert!(l.poll(due).is_some(), "re-send {i}");
                }
                let now = l.next_deadline().map_or(Time(0), |d| Time(d.nanos() - 1));
                l.on_release_checked(now, epoch, seq)
            })
            .collect()
    }

    #[test]
    fn a_switch_at_another_barrier_ends_the_wait_after_the_threshold() {
        let mut l = leaf();
        l.arrive(Time(0)).unwrap();
        let k = MISMATCH_ANSWERS as usize;
        let outcomes = answer_each_reduce(&mut l, E, Seq(9), k);
        assert!(
            outcomes[..k - 1]
                .iter()
                .all(|o| *o == ReleaseOutcome::Ignored),
            "{outcomes:?}"
        );
        let m = Mismatch {
            seq: Seq(0),
            answered: Seq(9),
        };
        assert_eq!(outcomes[k - 1], ReleaseOutcome::Mismatched(m));
        assert_eq!(
            l.state(),
            LeafState::Mismatched {
                seq: Seq(0),
                answered: Seq(9)
            }
        );
        // final: no timer, no re-sends, no release, every later barrier fails
        assert_eq!(l.seq(), Seq(0), "a mismatch never advances");
        assert_eq!(l.next_deadline(), None);
        assert_eq!(l.poll(Time(u64::MAX)), None);
        assert_eq!(
            l.on_release_checked(Time(5_000), E, Seq(0)),
            ReleaseOutcome::Ignored
        );
        assert_eq!(l.on_release(Time(5_000), E, Seq(0)), None);
        assert_eq!(
            l.arrive(Time(6_000)),
            Err(LeafError::Mismatched {
                seq: Seq(0),
                answered: Seq(9)
            })
        );
        let failure = Failure {
            switch: MacAddr([2, 0, 0, 0, 0, 9]),
            port: 1,
        };
        assert_eq!(l.on_abort(E, Seq(0), failure), None, "already ended");
    }

    #[test]
    fn a_switch_behind_is_a_mismatch_too() {
        let mut l = Leaf::new(LeafConfig {
            first_seq: Seq(20),
            ..*leaf().config()
        });
        l.arrive(Time(0)).unwrap();
        let outcomes = answer_each_reduce(&mut l, E, Seq(4), MISMATCH_ANSWERS as usize);
        assert_eq!(
            outcomes.last(),
            Some(&ReleaseOutcome::Mismatched(Mismatch {
                seq: Seq(20),
                answered: Seq(4)
            }))
        );
    }

    #[test]
    fn duplicates_of_the_previous_release_never_count() {
        // at the first barrier (s - 1 wraps) and further on
        for first in [0, 1, 77, u32::MAX] {
            let mut l = Leaf::new(LeafConfig {
                first_seq: Seq(first),
                ..*leaf().config()
            });
            l.arrive(Time(0)).unwrap();
            let prev = Seq(first).prev();
            let outcomes = answer_each_reduce(&mut l, E, prev, 100);
            assert!(
                outcomes.iter().all(|o| *o == ReleaseOutcome::Ignored),
                "{first}"
            );
            assert!(matches!(l.state(), LeafState::Waiting { .. }), "{first}");
            let now = l.next_deadline().unwrap();
            assert!(matches!(
                l.on_release_checked(now, E, Seq(first)),
                ReleaseOutcome::Released(Released { seq, .. }) if seq == Seq(first)
            ));
        }
    }

    #[test]
    fn releases_of_another_epoch_never_count() {
        let mut l = leaf();
        l.arrive(Time(0)).unwrap();
        for other in [Epoch(0), Epoch(3), Epoch(5), Epoch(u32::MAX)] {
            let outcomes = answer_each_reduce(&mut l, other, Seq(9), 10);
            assert!(outcomes.iter().all(|o| *o == ReleaseOutcome::Ignored));
        }
        assert!(matches!(l.state(), LeafState::Waiting { seq: Seq(0), .. }));
    }

    #[test]
    fn a_mismatch_never_releases() {
        for answered in [1, 2, 3, 9, 1 << 31, u32::MAX - 1] {
            let mut l = leaf();
            l.arrive(Time(0)).unwrap();
            let outcomes = answer_each_reduce(&mut l, E, Seq(answered), 50);
            assert!(
                !outcomes
                    .iter()
                    .any(|o| matches!(o, ReleaseOutcome::Released(_))),
                "{answered}: {outcomes:?}"
            );
            assert_eq!(
                outcomes
                    .iter()
                    .filter(|o| matches!(o, ReleaseOutcome::Mismatched(_)))
                    .count(),
                1,
                "{answered}: reported once"
            );
            assert_eq!(l.seq(), Seq(0));
        }
    }

    #[test]
    fn stray_releases_within_one_resend_period_count_once() {
        let mut l = leaf();
        l.arrive(Time(0)).unwrap();
        // a burst of delayed or duplicated frames before the first re-send
        for t in 1..50 {
            assert_eq!(
                l.on_release_checked(Time(t), E, Seq(7)),
                ReleaseOutcome::Ignored
            );
        }
        assert!(matches!(l.state(), LeafState::Waiting { .. }));
        // it counted as the first reduce's answer: the re-sends' answers complete the count
        let rest = answer_each_reduce(&mut l, E, Seq(7), MISMATCH_ANSWERS as usize);
        assert_eq!(
            rest[0],
            ReleaseOutcome::Ignored,
            "the first reduce's answer again"
        );
        assert!(matches!(rest.last(), Some(ReleaseOutcome::Mismatched(_))));
    }

    #[test]
    fn the_count_starts_over_with_each_barrier() {
        let mut l = leaf();
        let k = MISMATCH_ANSWERS as usize;
        l.arrive(Time(0)).unwrap();
        let outcomes = answer_each_reduce(&mut l, E, Seq(9), k - 1);
        assert!(outcomes.iter().all(|o| *o == ReleaseOutcome::Ignored));
        let now = l.next_deadline().unwrap();
        assert!(matches!(
            l.on_release_checked(now, E, Seq(0)),
            ReleaseOutcome::Released(_)
        ));
        l.arrive(now).unwrap();
        let outcomes = answer_each_reduce(&mut l, E, Seq(9), k);
        assert!(
            outcomes[..k - 1]
                .iter()
                .all(|o| *o == ReleaseOutcome::Ignored),
            "{outcomes:?}"
        );
        assert_eq!(
            outcomes[k - 1],
            ReleaseOutcome::Mismatched(Mismatch {
                seq: Seq(1),
                answered: Seq(9)
            })
        );
    }

    /// The emulations' rule: `on_release` only ever ignores another barrier's release.
    #[test]
    fn the_plain_release_rule_never_mismatches() {
        let mut l = leaf();
        l.arrive(Time(0)).unwrap();
        for i in 0..20 {
            if i > 0 {
                let due = l.next_deadline().unwrap();
                l.poll(due).unwrap();
            }
            assert_eq!(l.on_release(Time(1), E, Seq(9)), None);
        }
        assert!(matches!(l.state(), LeafState::Waiting { seq: Seq(0), .. }));
    }

    /// The case the check cannot see: a switch one barrier ahead answers reduce `s` with
    /// release `s`, the release the leaf waits for (and the answer to a lost release).
    #[test]
    fn a_switch_one_barrier_ahead_is_indistinguishable_from_a_lost_release() {
        let mut l = leaf();
        l.arrive(Time(0)).unwrap();
        assert!(matches!(
            l.on_release_checked(Time(1), E, Seq(0)),
            ReleaseOutcome::Released(Released { seq: Seq(0), .. })
        ));
    }

    #[test]
    fn first_seq_and_wrap() {
        let mut l = Leaf::new(LeafConfig {
            group: GroupId(0),
            epoch: Epoch::DEFAULT,
            resend_timeout_ns: 1,
            first_seq: Seq(u32::MAX),
        });
        assert_eq!(l.arrive(Time(0)).unwrap().seq, Seq(u32::MAX));
        l.on_release(Time(1), Epoch::DEFAULT, Seq(u32::MAX))
            .unwrap();
        assert_eq!(l.seq(), Seq(0));
    }
}
