//! The DPDK side of the I/O seam: an RX queue handle with its burst, and a TX queue handle with
//! an l2fwd-style buffer whose frames are built in mbufs from the scheduler's mempool.

use crate::io::{RxQueue, TxBlocked, TxQueue, BURST};
use dpdk::{Mbuf, MbufBatch, Mempool};

/// A received frame: the mbuf, freed when dropped.
pub struct MbufFrame(pub Mbuf);

impl AsRef<[u8]> for MbufFrame {
    fn as_ref(&self) -> &[u8] {
        self.0.data()
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

pub struct DpdkTx {
    queue: dpdk::TxQueue,
    pool: Mempool,
    batch: MbufBatch<BURST>,
}

impl DpdkTx {
    pub fn new(queue: dpdk::TxQueue, pool: Mempool) -> Self {
        DpdkTx {
            queue,
            pool,
            batch: MbufBatch::default(),
        }
    }
}

impl TxQueue for DpdkTx {
    #[inline]
    fn offer(&mut self, frame: &[u8]) -> Result<(), TxBlocked> {
        if self.batch.is_full() {
            return Err(TxBlocked::Full);
        }
        let m = Mbuf::from_slice(&self.pool, frame).map_err(|_| TxBlocked::NoBuffer)?;
        self.batch.push(m).map_err(|_| TxBlocked::Full)
    }

    #[inline]
    fn flush(&mut self) -> (usize, usize) {
        let sent = self.queue.tx_burst(&mut self.batch);
        (sent, self.batch.len())
    }

    fn buffered(&self) -> usize {
        self.batch.len()
    }
}
