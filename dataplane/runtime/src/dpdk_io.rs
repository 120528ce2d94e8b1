//! The DPDK side of the I/O seam: an RX queue handle with its burst, and a TX queue handle with
//! an l2fwd-style buffer whose frames are built in mbufs from the scheduler's mempool.

use crate::io::{RxFrame, RxQueue, TxBlocked, TxQueue, BURST};
use dpdk::{Mbuf, MbufBatch, Mempool};

/// A received frame: the mbuf, freed when dropped.
pub struct MbufFrame(pub Mbuf);

impl AsRef<[u8]> for MbufFrame {
    fn as_ref(&self) -> &[u8] {
        self.0.data()
    }
}

impl RxFrame for MbufFrame {
    #[inline]
    fn rewrite<const N: usize>(&mut self) -> Option<&mut [u8; N]> {
        self.0.rewrite::<N>()
    }

    #[inline]
    fn share(&self) -> Option<Self> {
        Some(MbufFrame(self.0.clone_ref()))
    }

    #[inline]
    fn prefetch_header(&self) {
        self.0.prefetch_header();
    }
}

pub struct DpdkRx {
    queue: dpdk::RxQueue,
    batch: MbufBatch<BURST>,
}

impl DpdkRx {
    pub fn new(queue: dpdk::RxQueue) -> Self {
        DpdkRx {
            queue,
            batch: MbufBatch::default(),
        }
    }
}

impl RxQueue for DpdkRx {
    type Frame = MbufFrame;
    #[inline]
    fn rx_burst(&mut self, out: &mut Vec<MbufFrame>, max: usize) {
        if self.queue.rx_burst_max(&mut self.batch, max) > 0 {
            out.extend(self.batch.drain().map(MbufFrame));
        }
    }

    /// Back into the burst batch and freed with one `rte_pktmbuf_free_bulk` per burst, instead
    /// of one `rte_pktmbuf_free` per frame as dropping them would.
    #[inline]
    fn recycle(&mut self, frames: &mut Vec<MbufFrame>) {
        for f in frames.drain(..) {
            if let Err(m) = self.batch.push(f.0) {
                self.batch.clear();
                // The batch has room now; an mbuf it cannot take is freed on its own.
                let _ = self.batch.push(m);
            }
        }
        self.batch.clear();
    }
}

/// The buffer in front of a TX queue (the l2fwd pattern): up to one burst of frames built in
/// mbufs from `pool`. The mbufs come from a stash refilled with one bulk allocation per burst
/// (`rte_pktmbuf_alloc_bulk`) rather than one call per frame; when the pool cannot give a whole
/// burst, one at a time, so the last mbufs are still used. The stash holds at most one burst
/// out of the pool and is freed with the buffer.
pub struct MbufTxBuffer {
    pool: Mempool,
    spare: MbufBatch<BURST>,
    /// Frames built and not yet handed to the device, oldest first.
    pub batch: MbufBatch<BURST>,
}

impl MbufTxBuffer {
    pub fn new(pool: Mempool) -> Self {
        MbufTxBuffer {
            pool,
            spare: MbufBatch::default(),
            batch: MbufBatch::default(),
        }
    }

    #[inline]
    fn take(&mut self) -> Result<Mbuf, TxBlocked> {
        if let Some(m) = self.spare.pop() {
            return Ok(m);
        }
        if Mbuf::alloc_bulk(&self.pool, &mut self.spare).is_ok() {
            if let Some(m) = self.spare.pop() {
                return Ok(m);
            }
        }
        Mbuf::alloc(&self.pool).map_err(|_| TxBlocked::NoBuffer)
    }

    /// `TxQueue::offer_with` on this buffer.
    #[inline]
    pub fn offer_with<const N: usize>(
        &mut self,
        fill: impl FnOnce(&mut [u8; N]),
    ) -> Result<(), TxBlocked> {
        if self.batch.is_full() {
            return Err(TxBlocked::Full);
        }
        let mut m = self.take()?;
        let data: &mut [u8; N] = m
            .append(N)
            .map_err(|_| TxBlocked::NoBuffer)?
            .try_into()
            .expect("append gives N bytes");
        fill(data);
        self.batch.push(m).map_err(|_| TxBlocked::Full)
    }

    /// `TxQueue::offer_frame` on this buffer: a received mbuf sent as it is.
    #[inline]
    pub fn offer_frame(&mut self, frame: MbufFrame) -> Result<(), (TxBlocked, MbufFrame)> {
        self.batch
            .push(frame.0)
            .map_err(|m| (TxBlocked::Full, MbufFrame(m)))
    }

    /// `TxQueue::offer` on this buffer.
    #[inline]
    pub fn offer(&mut self, frame: &[u8]) -> Result<(), TxBlocked> {
        if self.batch.is_full() {
            return Err(TxBlocked::Full);
        }
        let mut m = self.take()?;
        m.append(frame.len())
            .map_err(|_| TxBlocked::NoBuffer)?
            .copy_from_slice(frame);
        self.batch.push(m).map_err(|_| TxBlocked::Full)
    }
}

pub struct DpdkTx {
    queue: dpdk::TxQueue,
    buf: MbufTxBuffer,
}

impl DpdkTx {
    pub fn new(queue: dpdk::TxQueue, pool: Mempool) -> Self {
        DpdkTx {
            queue,
            buf: MbufTxBuffer::new(pool),
        }
    }
}

impl TxQueue for DpdkTx {
    type Frame = MbufFrame;

    #[inline]
    fn offer_frame(&mut self, frame: MbufFrame) -> Result<(), (TxBlocked, MbufFrame)> {
        self.buf.offer_frame(frame)
    }

    #[inline]
    fn offer(&mut self, frame: &[u8]) -> Result<(), TxBlocked> {
        self.buf.offer(frame)
    }

    #[inline]
    fn offer_with<const N: usize>(
        &mut self,
        fill: impl FnOnce(&mut [u8; N]),
    ) -> Result<(), TxBlocked> {
        self.buf.offer_with(fill)
    }

    #[inline]
    fn flush(&mut self) -> (usize, usize) {
        let sent = self.queue.tx_burst(&mut self.buf.batch);
        (sent, self.buf.batch.len())
    }

    fn buffered(&self) -> usize {
        self.buf.batch.len()
    }
}
