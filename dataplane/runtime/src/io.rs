//! The I/O seam: a switch port is one RX queue and one TX queue behind two small traits. DPDK
//! (`dpdk_io`) is one implementation; the in-memory links here are another, used by unit tests
//! and by `demo --io mem`, so the whole data path runs and is tested without EAL.

use crossbeam_queue::ArrayQueue;
use std::sync::Arc;

/// Frames per `rx_burst`/`tx_burst`, as in DPDK's examples.
pub const BURST: usize = 32;

/// A received frame: its bytes, and the one way to reuse its buffer for a frame the switch
/// sends (a release built in the buffer of the reduce that completed the barrier).
pub trait RxFrame: AsRef<[u8]> + Send {
    /// The frame cut to exactly `N` bytes and handed out writable, so the caller can write a
    /// whole new `N`-byte frame over it; `None` when its buffer cannot be rewritten in place
    /// (shorter than `N` bytes, in several segments, or shared with another handle): then the
    /// caller builds the frame in a new buffer and drops this one.
    fn rewrite<const N: usize>(&mut self) -> Option<&mut [u8; N]>;

    /// A second handle to the same bytes, to send one frame on several ports where it is the
    /// same frame (a DPDK mbuf's reference count, as DPDK's multicast example does; an
    /// in-memory buffer is copied). `None`: the frame cannot be shared, build another.
    /// Neither handle can be rewritten while both exist.
    fn share(&self) -> Option<Self>
    where
        Self: Sized;

    /// A cache hint for what must be read before the frame's bytes can be found (a DPDK mbuf's
    /// header); nothing for a frame that is its bytes.
    #[inline]
    fn prefetch_header(&self) {}
}

impl RxFrame for Vec<u8> {
    #[inline]
    fn share(&self) -> Option<Self> {
        Some(self.clone())
    }

    #[inline]
    fn rewrite<const N: usize>(&mut self) -> Option<&mut [u8; N]> {
        if self.len() < N {
            return None;
        }
        self.truncate(N);
        self.as_mut_slice().try_into().ok()
    }
}

/// One RX queue. Frames are dropped (freed) by the caller after processing.
pub trait RxQueue: Send {
    type Frame: RxFrame;
    /// Append up to `max` received frames to `out`.
    fn rx_burst(&mut self, out: &mut Vec<Self::Frame>, max: usize);

    /// Free processed frames, emptying `frames` (the DPDK queue frees them in bulk).
    #[inline]
    fn recycle(&mut self, frames: &mut Vec<Self::Frame>) {
        frames.clear();
    }

    /// Receive and drop everything waiting (at shutdown), using `scratch` as the burst buffer;
    /// returns how many frames there were.
    fn drain(&mut self, scratch: &mut Vec<Self::Frame>) -> usize {
        let mut n = 0;
        loop {
            self.recycle(scratch);
            self.rx_burst(scratch, BURST);
            if scratch.is_empty() {
                return n;
            }
            n += scratch.len();
        }
    }
}

/// Why a frame could not be queued for transmission. Either way the caller keeps the send.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TxBlocked {
    /// The TX buffer is full because the device did not take the previous burst.
    Full,
    /// No buffer to build the frame in (mempool empty).
    NoBuffer,
}

/// One TX queue with a small buffer in front of it (the l2fwd pattern).
pub trait TxQueue: Send {
    /// A frame this queue can send as it is, without a copy: a received frame of the same I/O
    /// kind (a DPDK mbuf, an in-memory buffer), rewritten in place ([`RxFrame::rewrite`]).
    type Frame: RxFrame;
    /// Queue `frame` as it is; sent on the next `flush`. Refused (and handed back) when the
    /// buffer is full.
    fn offer_frame(&mut self, frame: Self::Frame) -> Result<(), (TxBlocked, Self::Frame)>;
    /// Copy `frame` into a buffer and queue it; sent on the next `flush`.
    fn offer(&mut self, frame: &[u8]) -> Result<(), TxBlocked>;
    /// Build an `N`-byte frame in place with `fill` and queue it, like `offer` without the
    /// copy: a DPDK queue hands `fill` the mbuf's data. The default builds it on the stack and
    /// offers that.
    #[inline]
    fn offer_with<const N: usize>(
        &mut self,
        fill: impl FnOnce(&mut [u8; N]),
    ) -> Result<(), TxBlocked>
    where
        Self: Sized,
    {
        let mut frame = [0u8; N];
        fill(&mut frame);
        self.offer(&frame)
    }
    /// Hand buffered frames to the device. Returns (sent, still buffered): frames the device did
    /// not take stay first in line for the next flush.
    fn flush(&mut self) -> (usize, usize);
    /// Frames waiting in the buffer.
    fn buffered(&self) -> usize;
}

/// The receiving end of an in-memory wire.
pub struct MemRx {
    wire: Arc<ArrayQueue<Vec<u8>>>,
}

/// The sending end of an in-memory wire. `capacity` models the device's TX ring.
pub struct MemTx {
    wire: Arc<ArrayQueue<Vec<u8>>>,
    buf: Vec<Vec<u8>>,
}

/// A one-way wire holding up to `capacity` frames in flight.
pub fn mem_wire(capacity: usize) -> (MemTx, MemRx) {
    let wire = Arc::new(ArrayQueue::new(capacity));
    (
        MemTx {
            wire: wire.clone(),
            buf: Vec::with_capacity(BURST),
        },
        MemRx { wire },
    )
}

impl RxQueue for MemRx {
    type Frame = Vec<u8>;
    fn rx_burst(&mut self, out: &mut Vec<Vec<u8>>, max: usize) {
        for _ in 0..max {
            match self.wire.pop() {
                Some(f) => out.push(f),
                None => break,
            }
        }
    }
}

impl TxQueue for MemTx {
    type Frame = Vec<u8>;
    fn offer_frame(&mut self, frame: Vec<u8>) -> Result<(), (TxBlocked, Vec<u8>)> {
        if self.buf.len() >= BURST {
            return Err((TxBlocked::Full, frame));
        }
        self.buf.push(frame);
        Ok(())
    }
    fn offer(&mut self, frame: &[u8]) -> Result<(), TxBlocked> {
        if self.buf.len() >= BURST {
            return Err(TxBlocked::Full);
        }
        self.buf.push(frame.to_vec());
        Ok(())
    }
    fn flush(&mut self) -> (usize, usize) {
        let mut sent = 0;
        let mut frames = std::mem::take(&mut self.buf).into_iter();
        while let Some(f) = frames.next() {
            if let Err(f) = self.wire.push(f) {
                // Device full: keep this frame and everything after it, in order.
                self.buf.push(f);
                self.buf.extend(frames);
                break;
            }
            sent += 1;
        }
        (sent, self.buf.len())
    }
    fn buffered(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_wire_keeps_frames_in_order() {
        let (mut tx, mut rx) = mem_wire(2);
        for i in 0..4u8 {
            tx.offer(&[i]).unwrap();
        }
        assert_eq!(tx.flush(), (2, 2));
        let mut got = Vec::new();
        rx.rx_burst(&mut got, 10);
        assert_eq!(tx.flush(), (2, 0));
        rx.rx_burst(&mut got, 10);
        assert_eq!(got, vec![vec![0], vec![1], vec![2], vec![3]]);
    }

    #[test]
    fn offer_refuses_when_buffer_full() {
        let (mut tx, _rx) = mem_wire(1);
        for _ in 0..BURST {
            tx.offer(&[0]).unwrap();
        }
        assert_eq!(tx.offer(&[0]), Err(TxBlocked::Full));
    }
}
