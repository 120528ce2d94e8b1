//! A compute node's side of a barrier (claim 2): send a reduce when the barrier point is reached,
//! re-send it whenever the timer expires without a release, and on the release for the current
//! sequence number stop the timer and advance. Pure state machine, time passed in.

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

    /// Working or waiting.
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
    pub fn on_release(&mut self, now: Time, epoch: Epoch, seq: Seq) -> Option<Released> {
        if epoch != self.cfg.epoch {
            return None;
        }
        match self.state {
            LeafState::Waiting {
                seq: waiting,
                since,
                ..
            } if waiting == seq => {
                self.state = LeafState::Working;
                self.seq = seq.next();
                Some(Released {
                    seq,
                    waited_ns: now.saturating_sub(since),
                })
            }
            _ => None,
        }
    }

    /// An abort of barrier `seq` of `epoch` arrived, naming `failure`. In this leaf's epoch it
    /// ends the run: a wait in progress ends with the returned [`Aborted`], the timer stops,
    /// and every later `arrive` fails. Another epoch's abort, or a second one, is ignored.
    pub fn on_abort(&mut self, epoch: Epoch, seq: Seq, failure: Failure) -> Option<Aborted> {
        if epoch != self.cfg.epoch {
            return None;
        }
        let waiting = match self.state {
            LeafState::Aborted { .. } => return None,
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
            LeafState::Working | LeafState::Aborted { .. } => None,
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
