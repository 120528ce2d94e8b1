//! The generator's ports: frames through the fault injectors in both directions, the device
//! queues, and what is left on them at the end.

use super::Engine;
use crate::fault::{Injector, Pkt};
use barrier_runtime::io::{RxQueue, TxBlocked, TxQueue, BURST};
use std::collections::VecDeque;

pub(super) struct PortRt<R: RxQueue, T> {
    pub(super) name: String,
    pub(super) mac: [u8; 6],
    pub(super) rx: R,
    pub(super) tx: T,
    pub(super) inj_tx: Injector,
    pub(super) inj_rx: Injector,
    /// Frames past the TX injector, not yet taken by the device.
    pub(super) pending: VecDeque<Pkt>,
    /// Frames past the RX injector, not yet processed.
    pub(super) rx_pkts: VecDeque<Pkt>,
    pub(super) frames: Vec<R::Frame>,
    pub(super) tx_count: u64,
    pub(super) rx_count: u64,
}

impl<R: RxQueue, T: TxQueue> Engine<R, T> {
    /// Takes in up to `bursts` bursts per port (fewer where a burst comes back short).
    pub(super) fn receive(&mut self, now: u64, running: bool, count: Option<u64>, bursts: usize) {
        for port in 0..self.ports.len() {
            for _ in 0..bursts {
                if self.receive_burst(port, now, running, count) < BURST {
                    break;
                }
            }
        }
    }

    /// One burst from `port`; returns how many frames it had.
    fn receive_burst(&mut self, port: usize, now: u64, running: bool, count: Option<u64>) -> usize {
        let mut frames = std::mem::take(&mut self.ports[port].frames);
        self.ports[port].rx.rx_burst(&mut frames, BURST);
        let n = frames.len() as u64;
        self.t.rx += n;
        self.ports[port].rx_count += n;
        if self.ports[port].inj_rx.is_active() {
            let p = &mut self.ports[port];
            for f in &frames {
                p.inj_rx
                    .push(Pkt::from_slice(f.as_ref()), now, &mut p.rx_pkts);
            }
            p.inj_rx.tick(now, &mut p.rx_pkts);
            while let Some(pkt) = self.ports[port].rx_pkts.pop_front() {
                self.on_frame(port, pkt.as_slice(), now, running, count);
            }
        } else {
            for f in &frames {
                self.on_frame(port, f.as_ref(), now, running, count);
            }
        }
        self.ports[port].rx.recycle(&mut frames);
        self.ports[port].frames = frames;
        n as usize
    }

    pub(super) fn transmit(&mut self, now: u64) {
        for p in &mut self.ports {
            if p.inj_tx.is_active() {
                p.inj_tx.tick(now, &mut p.pending);
            }
            while let Some(pkt) = p.pending.front() {
                match p.tx.offer(pkt.as_slice()) {
                    Ok(()) => {
                        p.pending.pop_front();
                    }
                    Err(TxBlocked::Full) => {
                        let (sent, _) = p.tx.flush();
                        p.tx_count += sent as u64;
                        self.t.tx += sent as u64;
                        if sent == 0 {
                            self.t.tx_blocked += 1;
                            break;
                        }
                    }
                    Err(TxBlocked::NoBuffer) => {
                        self.t.tx_blocked += 1;
                        break;
                    }
                }
            }
            if p.tx.buffered() > 0 {
                let (sent, _) = p.tx.flush();
                p.tx_count += sent as u64;
                self.t.tx += sent as u64;
            }
        }
    }

    /// Receives and frees whatever is still queued towards the generator (shutdown).
    pub fn drain_rx(&mut self) -> usize {
        let mut n = 0;
        for p in &mut self.ports {
            n += p.rx.drain(&mut p.frames);
        }
        n + self.flood_drain_rx()
    }
}
