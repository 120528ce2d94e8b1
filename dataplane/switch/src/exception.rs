//! A port's exception path (issue 25): the frames a port receives that are not barrier frames
//! go to a kernel interface (a TAP interface, DPDK's TAP PMD), and the frames the kernel sends
//! on that interface go out of the port, so the kernel bridges or routes as if it owned the
//! NIC. The RX poller hands frames over through `ToKernel` (`crate::rx`); `KernelPoller`
//! carries the other way. Barrier frames, well formed or not, never take this path: only a
//! frame the parser refuses for its EtherType (`ParseError::NotBarrier`) does.

use crate::counters::{bump, RxCounters};
use crate::io::{RxQueue, TxQueue, BURST};
use crate::poll::Poller;
use std::sync::Arc;

/// Where an RX poller hands the frames that are not barrier frames: the exception interface's
/// TX queue that belongs to this RX queue. Object-safe, so that an RX poller's type is the same
/// with or without an exception path; the call is on the ordinary frames only.
pub trait ToKernel<F>: Send {
    /// Queue `frame` for the kernel; handed back when the queue's buffer is full (the device
    /// did not take the previous burst).
    fn offer_to_kernel(&mut self, frame: F) -> Result<(), F>;
    /// Hand what is buffered to the device; what it does not take stays first in line.
    fn flush_to_kernel(&mut self);
    /// Frames waiting in the buffer.
    fn waiting(&self) -> usize;
}

impl<T: TxQueue> ToKernel<T::Frame> for T {
    #[inline]
    fn offer_to_kernel(&mut self, frame: T::Frame) -> Result<(), T::Frame> {
        self.offer_frame(frame).map_err(|(_, f)| f)
    }
    #[inline]
    fn flush_to_kernel(&mut self) {
        TxQueue::flush(self);
    }
    #[inline]
    fn waiting(&self) -> usize {
        TxQueue::buffered(self)
    }
}

/// One port's exception path, as a switch is built with it (`SwitchBuilder::build_with`).
pub struct ExceptionIo<R, T> {
    /// The exception interface's TX queues, one per RX queue of the port, in queue order.
    pub to_kernel: Vec<T>,
    /// The exception interface's RX queues: what the kernel sent on it.
    pub from_kernel: Vec<R>,
    /// The port's own TX queue for the kernel's frames, beside the scheduler's.
    pub out: T,
}

/// Carries the frames the kernel sent on a port's exception interface out of the port. It
/// takes no more from the interface than the port's TX buffer has room for: when the port is
/// backed up the frames wait in the TAP interface's queue, where the kernel counts what it
/// drops, instead of being dropped here.
pub struct KernelPoller<R: RxQueue, T> {
    from: Vec<R>,
    out: T,
    frames: Vec<R::Frame>,
    /// The port's first RX queue's set; this poller writes only its `exception_from_kernel*`
    /// cells.
    counters: Arc<RxCounters>,
}

impl<R: RxQueue, T: TxQueue<Frame = R::Frame>> KernelPoller<R, T> {
    pub fn new(from: Vec<R>, out: T, counters: Arc<RxCounters>) -> Self {
        KernelPoller {
            from,
            out,
            frames: Vec::with_capacity(BURST),
            counters,
        }
    }
}

impl<R: RxQueue, T: TxQueue<Frame = R::Frame>> Poller for KernelPoller<R, T> {
    fn poll(&mut self, _now_ns: u64) -> bool {
        let c = &*self.counters;
        let mut work = false;
        if self.out.buffered() > 0 {
            work |= self.out.flush().0 > 0;
        }
        for q in &mut self.from {
            let room = BURST - self.out.buffered();
            if room == 0 {
                bump(&c.exception_from_kernel_waits, 1);
                break;
            }
            q.rx_burst(&mut self.frames, room);
            if self.frames.is_empty() {
                continue;
            }
            work = true;
            let (mut n, mut bytes) = (0, 0);
            for f in self.frames.drain(..) {
                let len = f.as_ref().len() as u64;
                // Within the room asked for: taken. A queue that refuses anyway frees it.
                if self.out.offer_frame(f).is_ok() {
                    n += 1;
                    bytes += len;
                }
            }
            bump(&c.exception_from_kernel, n);
            bump(&c.exception_from_kernel_bytes, bytes);
            self.out.flush();
        }
        work
    }

    fn finish(&mut self) {
        self.out.flush();
    }

    fn drain(&mut self) -> usize {
        let mut scratch = std::mem::take(&mut self.frames);
        let n = self.from.iter_mut().map(|q| q.drain(&mut scratch)).sum();
        self.frames = scratch;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::mem_wire;
    use std::sync::atomic::Ordering::Relaxed;

    /// The kernel's frames go out of the port as they are; when the port is backed up they
    /// wait on the kernel's side, none lost, and the wait is counted.
    #[test]
    fn the_kernels_frames_go_out_and_wait_when_the_port_is_full() {
        let (mut kernel, tap_rx) = mem_wire(256);
        let (port_tx, mut wire) = mem_wire(BURST);
        let c = Arc::new(RxCounters::default());
        let mut p = KernelPoller::new(vec![tap_rx], port_tx, c.clone());
        let frames: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 60 + usize::from(i)]).collect();
        let mut sent = 0;
        let mut got = Vec::new();
        for _ in 0..10 {
            // Two bursts from the kernel per round, one burst out of the port.
            for _ in 0..2 {
                while sent < frames.len() && TxQueue::offer(&mut kernel, &frames[sent]).is_ok() {
                    sent += 1;
                }
                TxQueue::flush(&mut kernel);
            }
            p.poll(0);
            p.poll(0);
            // The port's wire drained once per round: the port is slower than the kernel.
            wire.rx_burst(&mut got, BURST);
        }
        for _ in 0..20 {
            p.poll(0);
            wire.rx_burst(&mut got, BURST);
        }
        assert_eq!(got, frames, "every frame, in order");
        assert_eq!(c.exception_from_kernel.load(Relaxed), 100);
        let bytes: usize = frames.iter().map(Vec::len).sum();
        assert_eq!(c.exception_from_kernel_bytes.load(Relaxed), bytes as u64);
        assert!(c.exception_from_kernel_waits.load(Relaxed) > 0);
        // Only the kernel poller's cells moved.
        assert_eq!(c.frames.load(Relaxed), 0);
        assert_eq!(p.drain(), 0);
    }
}
