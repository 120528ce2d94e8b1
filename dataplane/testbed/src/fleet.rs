//! One fleet of emulated leaves, the bookkeeping the demo tree (`leafhost`) and the load
//! generator (`barrier-gen`) share: `members` leaves in each of `groups` groups, one
//! `barrier_protocol::leaf::Leaf` state machine per (group, member), per-group barrier state in
//! flat arrays indexed by group, re-send timers on the runtime's timer wheel, and the safety
//! check every release gets. No I/O and no clock: the caller sends the frames it is handed and
//! passes the time in, so it paces arrivals (closed loop, token bucket, think time) its own way.
//!
//! The safety check: a release must not reach a leaf before every leaf of its group arrived at
//! that barrier (`Released::early`), nor reach a leaf that has not arrived at it yet
//! (`Received::NotReached`). Either is a broken switch.
//!
//! Cost: a frame in or out is O(1) (array indexing). A group with leaves waiting has one timer
//! on the wheel, at the earliest deadline of its waiting leaves; it is looked at when it is due
//! (its leaves polled, re-armed for those still waiting), never by a scan of every leaf, so the
//! cost per frame does not grow with the number of groups.

use barrier_protocol::backoff::Backoff;
use barrier_protocol::leaf::{Leaf, LeafConfig, LeafError, LeafSend, LeafState};
use barrier_protocol::wire::{FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{Epoch, GroupId, Seq, Time};
use barrier_runtime::wheel::TimerWheel;

/// What the fleet is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FleetConfig {
    /// Leaves in every group: a demo tree's leaves, a generator's ports.
    pub members: u32,
    /// Groups `first_group .. first_group + groups`; every leaf is a member of every group.
    pub first_group: u32,
    pub groups: u32,
    /// Sequence number of every group's first barrier.
    pub first_seq: Seq,
    /// The leaves' re-send timer (the first wait; `backoff` says how later waits grow).
    pub resend_timeout_ns: u64,
    /// The groups' epoch on the switches: every reduce carries it; releases of another epoch
    /// are someone else's.
    pub epoch: Epoch,
    /// Re-sends after the first: doubling up to a cap, per-group jitter.
    pub backoff: Backoff,
}

/// A leaf arrived at its group's next barrier: send `send`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Arrival {
    pub send: LeafSend,
    /// The first leaf of its group to arrive at this barrier.
    pub first: bool,
}

/// Every leaf of a group was released from a barrier.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Completed {
    pub seq: Seq,
    /// When the first and the last leaf sent their first reduce.
    pub first_arrive_ns: u64,
    pub last_arrive_ns: u64,
    /// Some leaf re-sent its reduce for this barrier.
    pub resent: bool,
}

/// What a received frame was to the leaf it reached.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Received {
    /// Not a barrier frame, not a release, or a release for a group outside the fleet.
    Other,
    /// A release the leaf was not waiting for (a duplicate, a stale one).
    Ignored,
    /// A release for the barrier the leaf is at but has not arrived at: the switch released
    /// without its reduce.
    NotReached,
    /// The leaf was waiting for this release and goes on to its next barrier.
    Released(Release),
}

/// A release that ended a leaf's wait.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Release {
    /// Group index (`group - first_group`).
    pub group: u32,
    pub seq: Seq,
    /// From the leaf's first reduce to now.
    pub waited_ns: u64,
    /// Not every leaf of the group had arrived at this barrier: the switch released early.
    pub early: bool,
    /// The tx timestamp the release carries (a switch that echoes the reduce's).
    pub tx_timestamp: Option<u64>,
    /// This was the group's last leaf to be released.
    pub completed: Option<Completed>,
}

/// The fleet. Leaf state is indexed `group * members + member`, so a group's leaves share
/// cache lines; per-group state is one array per field, indexed by group.
pub struct Fleet {
    cfg: FleetConfig,
    leaves: Vec<Leaf>,
    /// Per group, by barrier parity (a group's leaves can be arriving at barrier t+1 while
    /// others still wait for the release of t): leaves arrived, first and last arrival time.
    arrived: Vec<[u32; 2]>,
    first_ns: Vec<[u64; 2]>,
    last_ns: Vec<[u64; 2]>,
    /// Per group: bit `parity` set when a leaf re-sent its reduce for that barrier.
    resent: Vec<u8>,
    /// Per group: leaves released from the barrier being released.
    released: Vec<u32>,
    /// Per group: its timer is on the wheel (at most one per group, never cancelled: a group
    /// whose leaves were all released in time finds nothing to do when it fires).
    armed: Vec<bool>,
    wheel: TimerWheel<u32>,
    fired: Vec<u32>,
}

fn parity(seq: Seq) -> usize {
    (seq.0 & 1) as usize
}

impl Fleet {
    pub fn new(cfg: FleetConfig, now_ns: u64) -> Fleet {
        assert!(cfg.members > 0 && cfg.groups > 0, "an empty fleet");
        let n = u64::from(cfg.members) * u64::from(cfg.groups);
        assert!(n <= u64::from(u32::MAX), "{n} leaves: at most 2^32 - 1");
        let g = cfg.groups as usize;
        let mut leaves = Vec::with_capacity(n as usize);
        for gi in 0..cfg.groups {
            let leaf = Leaf::new(LeafConfig {
                group: GroupId(cfg.first_group.wrapping_add(gi)),
                epoch: cfg.epoch,
                resend_timeout_ns: cfg.resend_timeout_ns,
                first_seq: cfg.first_seq,
            })
            .with_backoff(cfg.backoff);
            leaves.extend((0..cfg.members).map(|_| leaf.clone()));
        }
        Fleet {
            leaves,
            arrived: vec![[0; 2]; g],
            first_ns: vec![[0; 2]; g],
            last_ns: vec![[0; 2]; g],
            resent: vec![0; g],
            released: vec![0; g],
            armed: vec![false; g],
            wheel: TimerWheel::for_delay(cfg.resend_timeout_ns, now_ns),
            fired: Vec::new(),
            cfg,
        }
    }

    pub fn config(&self) -> &FleetConfig {
        &self.cfg
    }

    #[inline]
    fn index(&self, member: u32, group: u32) -> usize {
        debug_assert!(member < self.cfg.members && group < self.cfg.groups);
        group as usize * self.cfg.members as usize + member as usize
    }

    /// The state machine of `member` in group index `group`.
    #[inline]
    pub fn leaf(&self, member: u32, group: u32) -> &Leaf {
        &self.leaves[self.index(member, group)]
    }

    /// Some leaf of the group has arrived at a barrier that has not completed.
    #[inline]
    pub fn in_progress(&self, group: u32) -> bool {
        self.arrived[group as usize] != [0, 0]
    }

    /// Groups with a timer on the wheel (some for barriers already released).
    pub fn timers(&self) -> usize {
        self.wheel.len()
    }

    /// `member` reached its next barrier in group index `group`: returns the reduce to send
    /// and starts its timer. An error when it is already waiting.
    #[inline]
    pub fn arrive(&mut self, member: u32, group: u32, now_ns: u64) -> Result<Arrival, LeafError> {
        let i = self.index(member, group);
        let send = self.leaves[i].arrive(Time(now_ns))?;
        let (g, p) = (group as usize, parity(send.seq));
        let first = self.arrived[g][p] == 0;
        if first {
            self.first_ns[g][p] = now_ns;
            self.resent[g] &= !(1 << p);
        }
        self.arrived[g][p] += 1;
        self.last_ns[g][p] = now_ns;
        // A timer already armed for the group is due no later than this leaf's deadline (it was
        // armed for an earlier one) and re-arms for the leaves still waiting when it fires.
        if !self.armed[g] {
            if let Some(deadline) = self.leaves[i].next_deadline() {
                self.armed[g] = true;
                self.wheel.arm(group, deadline.nanos());
            }
        }
        Ok(Arrival { send, first })
    }

    /// A frame reached `member`.
    #[inline]
    pub fn receive(&mut self, member: u32, frame: &[u8], now_ns: u64) -> Received {
        let Ok(r) = FrameRepr::parse(frame) else {
            return Received::Other;
        };
        let group = r.group.0.wrapping_sub(self.cfg.first_group);
        if r.kind != Kind::Release || group >= self.cfg.groups || r.epoch != self.cfg.epoch {
            return Received::Other;
        }
        let i = self.index(member, group);
        let leaf = &mut self.leaves[i];
        let Some(rel) = leaf.on_release(Time(now_ns), r.epoch, r.seq) else {
            return if leaf.state() == LeafState::Working && leaf.seq() == r.seq {
                Received::NotReached
            } else {
                Received::Ignored
            };
        };
        let (g, p) = (group as usize, parity(rel.seq));
        let members = self.cfg.members;
        let early = self.arrived[g][p] < members;
        self.released[g] += 1;
        let completed = (self.released[g] == members).then(|| {
            self.released[g] = 0;
            self.arrived[g][p] = 0;
            Completed {
                seq: rel.seq,
                first_arrive_ns: self.first_ns[g][p],
                last_arrive_ns: self.last_ns[g][p],
                resent: self.resent[g] & (1 << p) != 0,
            }
        });
        Received::Released(Release {
            group,
            seq: rel.seq,
            waited_ns: rel.waited_ns,
            early,
            tx_timestamp: r.tx_timestamp,
            completed,
        })
    }

    /// Fires the re-send timers due at `now_ns`: appends `(member, send)` to `resends` for each
    /// leaf whose release did not come in time, and starts its timer again.
    pub fn expire(&mut self, now_ns: u64, resends: &mut Vec<(u32, LeafSend)>) {
        if self.wheel.is_empty() {
            return;
        }
        let mut fired = std::mem::take(&mut self.fired);
        self.wheel.advance(now_ns, &mut fired);
        let members = self.cfg.members as usize;
        for &group in &fired {
            let g = group as usize;
            let mut next: Option<Time> = None;
            for (m, leaf) in self.leaves[g * members..(g + 1) * members]
                .iter_mut()
                .enumerate()
            {
                if let Some(send) = leaf.poll(Time(now_ns)) {
                    self.resent[g] |= 1 << parity(send.seq);
                    resends.push((m as u32, send));
                }
                if let Some(d) = leaf.next_deadline() {
                    next = Some(next.map_or(d, |n| n.min(d)));
                }
            }
            self.armed[g] = next.is_some();
            if let Some(d) = next {
                self.wheel.arm(group, d.nanos());
            }
        }
        fired.clear();
        self.fired = fired;
    }

    /// The frame for a leaf's reduce, from `src` to `dst`, with an optional tx timestamp: the
    /// one place the fleet's users build frames.
    #[inline]
    pub fn reduce_frame(
        &self,
        send: LeafSend,
        src: [u8; 6],
        dst: [u8; 6],
        tx_timestamp: Option<u64>,
    ) -> [u8; FRAME_LEN] {
        let mut buf = [0u8; FRAME_LEN];
        send.frame(MacAddr(src), MacAddr(dst), tx_timestamp)
            .emit(&mut buf);
        buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use barrier_protocol::wire::Flags;

    const T: u64 = 1_000_000;

    fn fleet(members: u32, groups: u32) -> Fleet {
        Fleet::new(
            FleetConfig {
                members,
                first_group: 100,
                groups,
                first_seq: Seq(0),
                resend_timeout_ns: T,
                epoch: Epoch::DEFAULT,
                backoff: Backoff::FIXED,
            },
            0,
        )
    }

    fn release(group: u32, seq: u32) -> [u8; FRAME_LEN] {
        FrameRepr {
            dst: MacAddr::BROADCAST,
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            kind: Kind::Release,
            flags: Flags::empty(),
            group: GroupId(group),
            epoch: Epoch::DEFAULT,
            seq: Seq(seq),
            tx_timestamp: None,
        }
        .to_bytes()
    }

    fn released(r: Received) -> Release {
        match r {
            Received::Released(r) => r,
            other => panic!("not released: {other:?}"),
        }
    }

    #[test]
    fn a_barrier_completes_when_every_member_is_released() {
        let mut f = fleet(3, 2);
        for m in 0..3 {
            let a = f.arrive(m, 1, 10 + u64::from(m)).unwrap();
            assert_eq!(a.first, m == 0);
            assert_eq!(a.send.group, GroupId(101));
            assert_eq!(a.send.seq, Seq(0));
        }
        assert!(f.in_progress(1) && !f.in_progress(0));
        assert!(f.arrive(0, 1, 20).is_err(), "already waiting");
        let r = released(f.receive(0, &release(101, 0), 50));
        assert_eq!(
            (r.group, r.waited_ns, r.early, r.completed),
            (1, 40, false, None)
        );
        released(f.receive(1, &release(101, 0), 51));
        let r = released(f.receive(2, &release(101, 0), 52));
        assert_eq!(
            r.completed,
            Some(Completed {
                seq: Seq(0),
                first_arrive_ns: 10,
                last_arrive_ns: 12,
                resent: false
            })
        );
        assert!(!f.in_progress(1));
        assert_eq!(f.leaf(2, 1).seq(), Seq(1));
        // A duplicate of that release is ignored; other groups and kinds are not ours.
        assert_eq!(f.receive(2, &release(101, 0), 60), Received::Ignored);
        assert_eq!(f.receive(0, &release(99, 0), 60), Received::Other);
        assert_eq!(f.receive(0, &release(102, 0), 60), Received::Other);
        assert_eq!(f.receive(0, &[0u8; 20], 60), Received::Other);
        let reduce = f.reduce_frame(
            f.leaf(0, 0).clone().arrive(Time(0)).unwrap(),
            [2; 6],
            [3; 6],
            None,
        );
        assert_eq!(f.receive(0, &reduce, 60), Received::Other);
    }

    #[test]
    fn releases_before_every_member_arrived_are_caught() {
        let mut f = fleet(3, 1);
        f.arrive(0, 0, 0).unwrap();
        // Released with one of three arrived: early for the waiting leaf...
        assert!(released(f.receive(0, &release(100, 0), 5)).early);
        // ...and a release for a barrier the other two have not arrived at.
        assert_eq!(f.receive(1, &release(100, 0), 5), Received::NotReached);
        // A release for a barrier further on is only stale, not a broken promise.
        assert_eq!(f.receive(2, &release(100, 7), 5), Received::Ignored);
    }

    #[test]
    fn arrivals_at_the_next_barrier_overlap_releases_of_the_last() {
        let mut f = fleet(2, 1);
        f.arrive(0, 0, 0).unwrap();
        f.arrive(1, 0, 1).unwrap();
        released(f.receive(0, &release(100, 0), 10));
        // Member 0 is on to barrier 1 before member 1 got the release of barrier 0.
        assert!(f.arrive(0, 0, 11).unwrap().first);
        let r = released(f.receive(1, &release(100, 0), 12));
        assert!(!r.early);
        assert_eq!(r.completed.unwrap().first_arrive_ns, 0);
        assert!(!f.arrive(1, 0, 13).unwrap().first);
        released(f.receive(0, &release(100, 1), 20));
        let r = released(f.receive(1, &release(100, 1), 21));
        assert!(!r.early);
        let c = r.completed.unwrap();
        assert_eq!(
            (c.seq, c.first_arrive_ns, c.last_arrive_ns),
            (Seq(1), 11, 13)
        );
    }

    #[test]
    fn a_timer_re_sends_until_the_release_and_never_after() {
        let mut f = fleet(2, 4);
        f.arrive(0, 3, 0).unwrap();
        f.arrive(1, 3, 0).unwrap();
        let mut sent = Vec::new();
        f.expire(T - 1, &mut sent);
        assert!(sent.is_empty());
        let tick = f.wheel.tick_ns();
        f.expire(T + tick, &mut sent);
        assert_eq!(sent.len(), 2);
        assert!(sent.iter().all(|(_, s)| s.retransmit && s.seq == Seq(0)));
        sent.sort_by_key(|&(m, _)| m);
        assert_eq!(sent.iter().map(|&(m, _)| m).collect::<Vec<_>>(), [0, 1]);
        // Member 0 is released; only member 1 re-sends again one timeout later.
        released(f.receive(0, &release(103, 0), T + 2 * tick));
        sent.clear();
        f.expire(3 * T, &mut sent);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].0, 1);
        let c = released(f.receive(1, &release(103, 0), 3 * T))
            .completed
            .unwrap();
        assert!(c.resent);
        // Both released: every timer still armed is dropped when it fires.
        sent.clear();
        f.expire(100 * T, &mut sent);
        assert!(sent.is_empty(), "re-send after release");
        assert_eq!(f.timers(), 0);
        // The next barriers (the one of the other parity, then the same parity again) start
        // with a clean re-send flag.
        for seq in [1, 2] {
            let now = (100 + u64::from(seq)) * T;
            f.arrive(0, 3, now).unwrap();
            f.arrive(1, 3, now).unwrap();
            released(f.receive(0, &release(103, seq), now));
            let c = released(f.receive(1, &release(103, seq), now));
            assert!(!c.completed.unwrap().resent, "barrier {seq}");
        }
    }

    #[test]
    fn among_a_million_waiting_leaves_only_the_due_one_re_sends() {
        // A million groups waiting, one of them overdue.
        let mut f = fleet(1, 1 << 20);
        for g in 0..1 << 20 {
            f.arrive(0, g, if g == 77 { 0 } else { 10 * T }).unwrap();
        }
        let mut sent = Vec::new();
        f.expire(2 * T, &mut sent);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].1.group, GroupId(177));
        assert_eq!(
            f.timers(),
            1 << 20,
            "the re-sent leaf's timer is armed again"
        );
    }

    #[test]
    fn the_reduce_frame_is_the_leafs_send() {
        let mut f = fleet(1, 1);
        let send = f.arrive(0, 0, 0).unwrap().send;
        let r = FrameRepr::parse(&f.reduce_frame(send, [2, 0, 0, 0, 0, 9], [0xff; 6], Some(42)))
            .unwrap();
        assert_eq!(
            (r.kind, r.group, r.seq),
            (Kind::Reduce, GroupId(100), Seq(0))
        );
        assert_eq!(r.src, MacAddr([2, 0, 0, 0, 0, 9]));
        assert_eq!(r.tx_timestamp, Some(42));
        assert!(!r.flags.contains(Flags::RETRANSMIT));
    }
}
