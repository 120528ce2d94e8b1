//! The method's scheduling module, as pure logic: per egress port, the pending frames of each
//! group, served round-robin across groups so that a burst from one group cannot starve another.
//! A group with something to send sits once in its port's ring of ready groups; it sends one
//! frame per turn and re-enters the back of the ring if it has more. No DPDK here: the scheduler
//! poller (the parent module) pops pending frames, builds them and transmits them.

use barrier_protocol::wire::Kind;
use barrier_protocol::{Epoch, GroupId, Seq};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// A frame waiting for its turn on one port: what it will say. The switch fills in the MACs
/// and the group when it builds the frame.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PendingFrame {
    pub kind: Kind,
    pub epoch: Epoch,
    pub seq: Seq,
    pub retransmit: bool,
}

impl PendingFrame {
    /// The same frame but perhaps for the RETRANSMIT flag: sending both says nothing more.
    pub fn says_the_same(&self, other: &PendingFrame) -> bool {
        self.kind == other.kind && self.seq == other.seq && self.epoch == other.epoch
    }
}

/// Group numbers are small dense integers: a multiplicative hash is enough and much cheaper
/// than SipHash on the hot path.
#[derive(Default)]
pub struct GroupHasher(u64);

impl Hasher for GroupHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (u64::from(n) ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub type GroupMap<V> = HashMap<GroupId, V, BuildHasherDefault<GroupHasher>>;

#[derive(Default)]
struct PortQueue {
    /// Groups with pending frames on this port, each at most once, in service order.
    ready: VecDeque<GroupId>,
    /// Per group, its pending frames in arrival order. An entry exists iff the group is in
    /// `ready`.
    pending: GroupMap<VecDeque<PendingFrame>>,
    len: usize,
    /// Emptied queues kept for reuse, so steady state allocates nothing.
    spare: Vec<VecDeque<PendingFrame>>,
}

/// Per-port round-robin queues of pending frames.
pub struct RoundRobin {
    ports: Vec<PortQueue>,
}

/// What `push` did with a pending frame.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Pushed {
    Queued,
    /// An equal frame (same kind and seq) was already waiting for this group and port: dropped
    /// as redundant (the waiting one says the same thing).
    /// A retry storm from one group thus costs one queue slot, not one per retry.
    Coalesced,
}

impl RoundRobin {
    pub fn new(ports: usize) -> Self {
        RoundRobin {
            ports: (0..ports).map(|_| PortQueue::default()).collect(),
        }
    }

    pub fn ports(&self) -> usize {
        self.ports.len()
    }

    /// Queue `send` for `group` on `port`.
    pub fn push(&mut self, port: usize, group: GroupId, send: PendingFrame) -> Pushed {
        let pq = &mut self.ports[port];
        match pq.pending.get_mut(&group) {
            Some(q) => {
                // The waiting copy keeps its own flags: it has not gone out yet, so it is not
                // a retransmission even if the request for it was.
                if q.iter().any(|s| s.says_the_same(&send)) {
                    return Pushed::Coalesced;
                }
                q.push_back(send);
            }
            None => {
                let mut q = pq.spare.pop().unwrap_or_default();
                q.push_back(send);
                pq.pending.insert(group, q);
                pq.ready.push_back(group);
            }
        }
        pq.len += 1;
        Pushed::Queued
    }

    /// The next frame on `port`: the first pending frame of the group at the front of the ring.
    /// That group goes to the back of the ring if it has more.
    pub fn pop(&mut self, port: usize) -> Option<(GroupId, PendingFrame)> {
        let pq = &mut self.ports[port];
        let group = pq.ready.pop_front()?;
        let q = pq
            .pending
            .get_mut(&group)
            .expect("ready group has a pending queue");
        let send = q.pop_front().expect("ready group has a pending send");
        if q.is_empty() {
            let q = pq.pending.remove(&group).expect("present");
            if pq.spare.len() < 1024 {
                pq.spare.push(q);
            }
        } else {
            pq.ready.push_back(group);
        }
        pq.len -= 1;
        Some((group, send))
    }

    /// Put a frame that could not go out back at the FRONT, ahead of everything (backpressure
    /// must delay a frame, never reorder it behind later ones nor lose it).
    pub fn unpop(&mut self, port: usize, group: GroupId, send: PendingFrame) {
        let pq = &mut self.ports[port];
        match pq.pending.get_mut(&group) {
            Some(q) => {
                q.push_front(send);
                // The group is in the ring; move it to the front. Right after `pop` it is at the
                // back (O(1)); the scan is only for a caller that popped something else since.
                if pq.ready.back() == Some(&group) {
                    pq.ready.pop_back();
                } else if let Some(pos) = pq.ready.iter().position(|&g| g == group) {
                    pq.ready.remove(pos);
                }
            }
            None => {
                let mut q = pq.spare.pop().unwrap_or_default();
                q.push_back(send);
                pq.pending.insert(group, q);
            }
        }
        pq.ready.push_front(group);
        pq.len += 1;
    }

    /// Frames waiting on `port`.
    pub fn pending(&self, port: usize) -> usize {
        self.ports[port].len
    }

    pub fn total_pending(&self) -> usize {
        self.ports.iter().map(|p| p.len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(seq: u32) -> PendingFrame {
        PendingFrame {
            kind: Kind::Release,
            epoch: Epoch::DEFAULT,
            seq: Seq(seq),
            retransmit: false,
        }
    }
    fn red(seq: u32) -> PendingFrame {
        PendingFrame {
            kind: Kind::Reduce,
            epoch: Epoch::DEFAULT,
            seq: Seq(seq),
            retransmit: false,
        }
    }
    fn g(n: u32) -> GroupId {
        GroupId(n)
    }

    #[test]
    fn round_robin_across_groups() {
        let mut s = RoundRobin::new(1);
        // Group 1 floods with many distinct sends, group 2 has one, group 3 has two.
        for seq in 0..100 {
            s.push(0, g(1), rel(seq));
        }
        s.push(0, g(2), rel(0));
        s.push(0, g(3), red(5));
        s.push(0, g(3), red(6));
        let order: Vec<u32> = (0..6).map(|_| s.pop(0).unwrap().0 .0).collect();
        assert_eq!(order, vec![1, 2, 3, 1, 3, 1]);
        assert_eq!(s.pending(0), 97);
        // Group 1's own sends stay in order.
        let mut last = 3;
        while let Some((group, send)) = s.pop(0) {
            assert_eq!(group, g(1));
            assert_eq!(send.seq, Seq(last));
            last += 1;
        }
        assert_eq!(last, 100);
        assert_eq!(s.total_pending(), 0);
    }

    #[test]
    fn a_late_group_waits_at_most_one_turn_per_other_group() {
        let mut s = RoundRobin::new(1);
        for group in 0..10 {
            for seq in 0..50 {
                s.push(0, g(group), rel(seq));
            }
        }
        s.push(0, g(99), rel(0));
        let pos = (0..).find(|_| s.pop(0).unwrap().0 == g(99)).unwrap();
        assert!(pos <= 10, "late group served after {pos} sends");
    }

    #[test]
    fn equal_sends_coalesce() {
        let mut s = RoundRobin::new(2);
        assert_eq!(s.push(1, g(4), rel(3)), Pushed::Queued);
        assert_eq!(
            s.push(
                1,
                g(4),
                PendingFrame {
                    retransmit: true,
                    ..rel(3)
                }
            ),
            Pushed::Coalesced
        );
        // the same barrier number of another epoch is another frame
        assert_eq!(
            s.push(
                1,
                g(4),
                PendingFrame {
                    epoch: Epoch(9),
                    ..rel(3)
                }
            ),
            Pushed::Queued
        );
        assert_eq!(s.pop(1).map(|(_, f)| f.epoch), Some(Epoch::DEFAULT));
        assert_eq!(s.pop(1).map(|(_, f)| f.epoch), Some(Epoch(9)));
        assert_eq!(s.push(1, g(4), rel(3)), Pushed::Queued);
        assert_eq!(s.push(1, g(4), red(3)), Pushed::Queued);
        assert_eq!(s.push(0, g(4), rel(3)), Pushed::Queued); // other port: separate
        assert_eq!(s.pending(1), 2);
        let (group, first) = s.pop(1).unwrap();
        assert_eq!(
            (group, first.kind, first.retransmit),
            (g(4), Kind::Release, false)
        );
    }

    #[test]
    fn unpop_goes_first_in_line() {
        let mut s = RoundRobin::new(1);
        s.push(0, g(1), rel(0));
        s.push(0, g(1), rel(1));
        s.push(0, g(2), rel(0));
        let (group, a) = s.pop(0).unwrap();
        assert_eq!((group, a.seq), (g(1), Seq(0)));
        s.unpop(0, group, a);
        assert_eq!(s.pop(0).unwrap(), (g(1), rel(0)));
        let (group, b) = s.pop(0).unwrap();
        assert_eq!(group, g(2));
        s.unpop(0, group, b);
        assert_eq!(s.pop(0).unwrap(), (g(2), rel(0)));
        assert_eq!(s.pop(0).unwrap(), (g(1), rel(1)));
        assert_eq!(s.pop(0), None);
        assert_eq!(s.total_pending(), 0);
    }

    #[test]
    fn ports_are_independent() {
        let mut s = RoundRobin::new(3);
        s.push(2, g(7), red(1));
        assert_eq!(s.pop(0), None);
        assert_eq!(s.pop(1), None);
        assert_eq!(s.pop(2), Some((g(7), red(1))));
    }
}
