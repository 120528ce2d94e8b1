//! A minimal reference system under test: counts reduces per group and, when every port has
//! sent the current barrier's reduce, sends the release on every port. No restart rules, no
//! shared table, no scheduler, no re-sends of its own: only what any barrier switch must do.
//! Benchmarks measure barrier-switch against it in the same run, and it shows how fast the
//! generator itself can go. It assumes loss-free wires (a lost frame stalls its group).

use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::Seq;
use barrier_switch::io::{RxQueue, TxQueue, BURST};
use barrier_switch::poll::Poller;
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
            for f in self.frames.drain(..) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Clock, Engine, GenConfig, GenPort, Load, TrialSpec};
    use crate::fault::FaultRates;
    use barrier_switch::io::{mem_wire, MemRx, MemTx};
    use std::time::Duration;

    type Rig = (Vec<GenPort<MemRx, MemTx>>, Vec<ReflectorPort<MemRx, MemTx>>);

    fn ports(n: u8) -> Rig {
        let mut gp = Vec::new();
        let mut rp = Vec::new();
        for i in 0..n {
            let (up_tx, up_rx) = mem_wire(1024);
            let (down_tx, down_rx) = mem_wire(1024);
            let mac = [2, 0, 0, 0, 1, i];
            gp.push(GenPort {
                name: format!("g{i}"),
                mac,
                rx: down_rx,
                tx: up_tx,
                faults_tx: FaultRates::default(),
                faults_rx: FaultRates::default(),
            });
            rp.push(ReflectorPort {
                rx: up_rx,
                tx: down_tx,
                peer_mac: mac,
            });
        }
        (gp, rp)
    }

    fn closed(count: u64) -> TrialSpec {
        TrialSpec {
            load: Load::Closed,
            duration: Duration::from_secs(30),
            count: Some(count),
            drain: Duration::from_secs(5),
        }
    }

    #[test]
    fn generator_completes_barriers_through_the_reflector() {
        let (gp, rp) = ports(3);
        let cfg = GenConfig {
            groups: 20,
            first_group: 100,
            first_seq: u32::MAX - 5,
            ..GenConfig::default()
        };
        let mut e = Engine::new(cfg, gp, Clock::instant());
        e.set_inline_pollers(
            vec![Box::new(Reflector::new(rp, 100, 20, u32::MAX - 5))],
            barrier_switch::poll::Clock::new(),
        );
        let r = e.run_trial(&closed(30));
        assert!(r.latency_echo.is_none());
        // Thirty barriers per group across the sequence-number wrap.
        assert_eq!(r.barriers.completed, 600, "{}", r.text());
        assert_eq!((r.barriers.lost, r.barriers.early_releases), (0, 0));
    }

    #[test]
    fn echoed_timestamps_give_the_echo_latency() {
        let (gp, rp) = ports(2);
        let cfg = GenConfig {
            groups: 8,
            ..GenConfig::default()
        };
        let mut e = Engine::new(cfg, gp, Clock::instant());
        let mut refl = Reflector::new(rp, 0, 8, 0);
        refl.echo_timestamps = true;
        e.set_inline_pollers(vec![Box::new(refl)], barrier_switch::poll::Clock::new());
        let r = e.run_trial(&closed(25));
        assert_eq!(r.barriers.completed, 200);
        let echo = r.latency_echo.expect("releases carried timestamps");
        // One sample per leaf release; the echoed stamp is the last reduce's, so the echo
        // latency never exceeds the leaf's own wait from its first reduce.
        assert_eq!(echo.samples, r.latency_leaf.samples);
        assert!(
            echo.max_ns <= r.latency_leaf.max_ns + 1,
            "{echo:?} vs {:?}",
            r.latency_leaf
        );
    }
}
