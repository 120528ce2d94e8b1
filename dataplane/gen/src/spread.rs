//! Spreading barrier frames over a port's queues by group, so a switch can poll one port from
//! several RX lcores without two of them sharing a group's frames.
//!
//! The rule is [`queue_of`]: the group number modulo the number of queues. A NIC does the same
//! with a flow rule per queue on the group field (docs/configuration.md, "Spreading frames over
//! RX queues"); on virtual devices (`net_ring` pairs, whose TX queue *i* is the peer's RX queue
//! *i*) the sender chooses, and [`ByGroup`] is that choice: one TX queue of the device per
//! queue, each frame offered to the one its group maps to.

use barrier_protocol::wire::Frame;
use barrier_runtime::io::{TxBlocked, TxQueue};

/// The queue, of `queues`, that frames of `group` use.
#[inline]
pub fn queue_of(group: u32, queues: usize) -> usize {
    group as usize % queues.max(1)
}

/// A port's TX queues as one [`TxQueue`]: each frame goes to the queue of its group
/// ([`queue_of`]); a frame too short to name a group goes to queue 0.
pub struct ByGroup<T> {
    queues: Vec<T>,
}

impl<T: TxQueue> ByGroup<T> {
    /// `queues` in queue order; at least one.
    pub fn new(queues: Vec<T>) -> Self {
        assert!(!queues.is_empty(), "at least one TX queue");
        ByGroup { queues }
    }

    pub fn queues(&self) -> &[T] {
        &self.queues
    }

    fn pick(&mut self, frame: &[u8]) -> &mut T {
        let q = Frame::new_checked(frame).map_or(0, |f| queue_of(f.group(), self.queues.len()));
        &mut self.queues[q]
    }
}

impl<T: TxQueue> TxQueue for ByGroup<T> {
    type Frame = T::Frame;
    fn offer_frame(&mut self, frame: T::Frame) -> Result<(), (TxBlocked, T::Frame)> {
        let q = self.pick(frame.as_ref());
        q.offer_frame(frame)
    }

    fn offer(&mut self, frame: &[u8]) -> Result<(), TxBlocked> {
        self.pick(frame).offer(frame)
    }

    fn flush(&mut self) -> (usize, usize) {
        self.queues.iter_mut().fold((0, 0), |(s, b), q| {
            let (s2, b2) = q.flush();
            (s + s2, b + b2)
        })
    }

    fn buffered(&self) -> usize {
        self.queues.iter().map(TxQueue::buffered).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use barrier_protocol::wire::{Flags, FrameTemplate, Kind, MacAddr, FRAME_LEN};
    use barrier_protocol::{Epoch, GroupId, Seq};
    use barrier_runtime::io::{mem_wire, RxQueue};

    fn reduce(group: u32) -> Vec<u8> {
        let mut b = [0u8; FRAME_LEN];
        FrameTemplate::new(MacAddr::BROADCAST, MacAddr([2, 0, 0, 0, 0, 1])).write(
            &mut b,
            Kind::Reduce,
            Flags::empty(),
            GroupId(group),
            Epoch::DEFAULT,
            Seq(0),
        );
        b.to_vec()
    }

    #[test]
    fn each_frame_goes_to_its_groups_queue_and_short_ones_to_queue_0() {
        let (txs, mut rxs): (Vec<_>, Vec<_>) = (0..3).map(|_| mem_wire(64)).unzip();
        let mut t = ByGroup::new(txs);
        for g in 0..10u32 {
            t.offer(&reduce(g)).unwrap();
        }
        t.offer(&[0u8; 10]).unwrap();
        assert_eq!(t.buffered(), 11);
        assert_eq!(t.flush(), (11, 0));
        assert_eq!(t.buffered(), 0);
        for (q, rx) in rxs.iter_mut().enumerate() {
            let mut got = Vec::new();
            rx.rx_burst(&mut got, 64);
            let groups: Vec<Option<u32>> = got
                .iter()
                .map(|f| Frame::new_checked(&f[..]).ok().map(|f| f.group()))
                .collect();
            let mut want: Vec<Option<u32>> = (0..10u32)
                .filter(|g| queue_of(*g, 3) == q)
                .map(Some)
                .collect();
            if q == 0 {
                want.push(None);
            }
            assert_eq!(groups, want, "queue {q}");
        }
    }

    #[test]
    fn one_queue_takes_everything() {
        assert!((0..100).all(|g| queue_of(g, 1) == 0));
        assert!((0..100).all(|g| queue_of(g, 0) == 0));
        assert_eq!(queue_of(7, 4), 3);
    }
}
