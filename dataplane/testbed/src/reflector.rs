//! A minimal reference system under test: counts reduces per group and, when every port has
//! sent the current barrier's reduce, sends the release on every port. No restart rules, no
//! shared table, no scheduler, no re-sends of its own: only what any barrier switch must do.
//! Benchmarks measure barrier-switch against it in the same run, and it shows how fast the
//! generator itself can go. It assumes loss-free wires (a lost frame stalls its group).

use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::Seq;
use barrier_runtime::io::{RxQueue, TxQueue, BURST};
use barrier_runtime::poll::Poller;
use std::collections::VecDeque;

/// One port of the reflector.
pub struct ReflectorPort<R, T> {
    pub rx: R,
    pub tx: T,
    pub peer_mac: [u8; 6],
}

pub struct Reflector<R: RxQueue, T: TxQueue> {
    ports: Vec<ReflectorPort<R, T>>,
    first_group: u32,
    /// Per group: the barrier being collected and the ports seen for it.
    seq: Vec<u32>,
    seen: Vec<u64>,
    all: u64,
    /// Releases waiting for room, per port.
    out: Vec<VecDeque<[u8; FRAME_LEN]>>,
    frames: Vec<R::Frame>,
    pub completions: u64,
    /// Put the completing reduce's tx timestamp into the release (as some hardware does).
    pub echo_timestamps: bool,
}

impl<R: RxQueue, T: TxQueue> Reflector<R, T> {
    pub fn new(
        ports: Vec<ReflectorPort<R, T>>,
        first_group: u32,
        groups: u32,
        first_seq: u32,
    ) -> Self {
        let n = ports.len();
        assert!((1..=64).contains(&n));
        Reflector {
            out: (0..n).map(|_| VecDeque::new()).collect(),
            ports,
            first_group,
            seq: vec![first_seq; groups as usize],
            seen: vec![0; groups as usize],
            all: if n == 64 { u64::MAX } else { (1u64 << n) - 1 },
            frames: Vec::with_capacity(BURST),
            completions: 0,
            echo_timestamps: false,
        }
    }
}

impl<R: RxQueue, T: TxQueue> Poller for Reflector<R, T> {
    fn poll(&mut self, _now_ns: u64) -> bool {
        let mut busy = false;
        for p in 0..self.ports.len() {
            // Receive only while this port's backlog is small: backpressure onto the wire.
            if self.out.iter().any(|o| o.len() >= 4 * BURST) {
                break;
            }
            self.ports[p].rx.rx_burst(&mut self.frames, BURST);
            busy |= !self.frames.is_empty();
            let mut frames = std::mem::take(&mut self.frames);
            for f in &frames {
                let Ok(r) = FrameRepr::parse(f.as_ref()) else {
                    continue;
                };
                let g = r.group.0.wrapping_sub(self.first_group) as usize;
                if r.kind != Kind::Reduce || g >= self.seq.len() || r.seq.0 != self.seq[g] {
                    continue;
                }
                self.seen[g] |= 1 << p;
                if self.seen[g] == self.all {
                    self.seen[g] = 0;
                    self.seq[g] = Seq(self.seq[g]).next().0;
                    self.completions += 1;
                    for (q, port) in self.ports.iter().enumerate() {
                        let rel = FrameRepr {
                            dst: MacAddr(port.peer_mac),
                            src: MacAddr([0x02, 0, 0, 0, 0x5f, 0]),
                            kind: Kind::Release,
                            flags: Flags::empty(),
                            group: r.group,
                            epoch: r.epoch,
                            seq: r.seq,
                            tx_timestamp: if self.echo_timestamps {
                                r.tx_timestamp
                            } else {
                                None
                            },
                        };
                        self.out[q].push_back(rel.to_bytes());
                    }
                }
            }
            self.ports[p].rx.recycle(&mut frames);
            self.frames = frames;
        }
        for (q, port) in self.ports.iter_mut().enumerate() {
            while let Some(f) = self.out[q].front() {
                if port.tx.offer(f).is_err() {
                    if port.tx.flush().0 == 0 {
                        break;
                    }
                    continue;
                }
                self.out[q].pop_front();
                busy = true;
            }
            if port.tx.buffered() > 0 {
                port.tx.flush();
            }
        }
        busy
    }

    fn finish(&mut self) {
        for p in &mut self.ports {
            p.tx.flush();
        }
    }
}
