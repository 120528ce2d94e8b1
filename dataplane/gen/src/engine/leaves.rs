//! The emulated leaves: one `barrier_protocol::leaf::Leaf` per port and group, their arrivals
//! (paced by the token bucket or by the releases), the releases they receive, the barriers they
//! complete and their re-send timers.

use super::{Engine, PENDING_CAP};
use crate::bucket::TokenBucket;
use crate::fault::Pkt;
use barrier_protocol::leaf::{LeafSend, LeafState};
use barrier_protocol::wire::{FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::Time;
use barrier_runtime::io::{RxQueue, TxQueue};

/// A group's barrier in progress.
#[derive(Clone, Debug, Default)]
pub(super) struct GroupRun {
    /// Leaves that sent their first reduce for the current barrier.
    pub(super) arrived: u32,
    /// Leaves released from the current barrier.
    pub(super) released: u32,
    pub(super) first_ns: u64,
    pub(super) last_arrive_ns: u64,
    pub(super) resent: bool,
    pub(super) late: bool,
    /// The trial the current barrier started in.
    pub(super) trial: u32,
    /// Barriers completed in this trial (for `count`).
    pub(super) done: u64,
    /// In the ready queue.
    pub(super) queued: bool,
}

impl<R: RxQueue, T: TxQueue> Engine<R, T> {
    pub(super) fn reduce_pkt(&self, port: usize, send: LeafSend, now: u64) -> Pkt {
        let mut pkt = Pkt {
            len: FRAME_LEN as u8,
            bytes: [0; crate::fault::PKT_MAX],
        };
        send.frame(
            MacAddr(self.ports[port].mac),
            MacAddr(self.cfg.dst_mac),
            self.cfg.timestamps.then_some(now),
        )
        .emit(&mut pkt.bytes[..FRAME_LEN]);
        pkt
    }

    /// A reduce enters the port's TX fault injector.
    pub(super) fn send(&mut self, port: usize, send: LeafSend, now: u64) {
        let pkt = self.reduce_pkt(port, send, now);
        let p = &mut self.ports[port];
        if p.inj_tx.is_active() {
            p.inj_tx.push(pkt, now, &mut p.pending);
        } else {
            p.pending.push_back(pkt);
        }
    }

    pub(super) fn arrivals(&mut self, now: u64, mut bucket: Option<&mut TokenBucket>) {
        let np = self.ports.len();
        let ng = self.cfg.groups as usize;
        while let Some(&g) = self.ready.front() {
            let port = self.cursor;
            if self.ports[port].pending.len() >= PENDING_CAP {
                break;
            }
            if let Some(b) = bucket.as_deref_mut() {
                if !b.try_take_one() {
                    break;
                }
            }
            let gi = g as usize;
            let send = match self.leaves[port * ng + gi].arrive(Time(now)) {
                Ok(s) => s,
                Err(e) => unreachable!("a queued leaf is working: {e}"),
            };
            let gr = &mut self.groups[gi];
            if gr.arrived == 0 {
                gr.first_ns = now;
                gr.trial = self.trial;
                self.outstanding += 1;
                self.t.started += 1;
            }
            gr.arrived += 1;
            gr.last_arrive_ns = now;
            self.t.tx_reduce += 1;
            self.send(port, send, now);
            self.cursor += 1;
            if self.cursor == np {
                self.cursor = 0;
                self.ready.pop_front();
                self.groups[gi].queued = false;
            }
        }
    }

    pub(super) fn on_frame(
        &mut self,
        port: usize,
        bytes: &[u8],
        now: u64,
        running: bool,
        count: Option<u64>,
    ) {
        let Ok(r) = FrameRepr::parse(bytes) else {
            self.t.rx_other += 1;
            return;
        };
        let gi = r.group.0.wrapping_sub(self.cfg.first_group);
        if r.kind != Kind::Release || gi >= self.cfg.groups {
            self.t.rx_other += 1;
            return;
        }
        self.t.rx_release += 1;
        let gi = gi as usize;
        let li = port * self.cfg.groups as usize + gi;
        let leaf = &mut self.leaves[li];
        match leaf.on_release(Time(now), r.epoch, r.seq) {
            Some(rel) => {
                let np = self.np();
                let gr = &mut self.groups[gi];
                if gr.arrived < np {
                    self.t.early += 1;
                }
                gr.released += 1;
                if gr.trial == self.trial {
                    // A switch that echoes a reduce's tx timestamp in its release measures
                    // itself; only releases that end a wait count, like the leaf latency.
                    if let Some(ts) = r.tx_timestamp.filter(|&ts| ts <= now) {
                        let _ = self.hist_echo.record((now - ts).max(1));
                    }
                    let _ = self.hist_leaf.record(rel.waited_ns.max(1));
                    let _ = self.iv_leaf.record(rel.waited_ns.max(1));
                }
                if gr.released == np {
                    self.complete(gi, now, running, count);
                }
            }
            None => {
                if leaf.seq() == r.seq && leaf.state() == LeafState::Working {
                    // A release for a barrier this leaf has not reached: the switch released
                    // without its reduce.
                    self.t.early += 1;
                } else {
                    self.t.rx_ignored += 1;
                }
            }
        }
    }

    pub(super) fn complete(&mut self, gi: usize, now: u64, running: bool, count: Option<u64>) {
        let trial = self.trial;
        let deadline = self.cfg.barrier_deadline_ns;
        let gr = &mut self.groups[gi];
        self.outstanding -= 1;
        if gr.trial == trial {
            self.t.completed += 1;
            let lat = now.saturating_sub(gr.last_arrive_ns).max(1);
            let _ = self.hist_barrier.record(lat);
            let _ = self.iv_barrier.record(lat);
            let late = gr.late || now.saturating_sub(gr.first_ns) > deadline;
            self.t.over_deadline += u64::from(late);
            self.t.needed_resend += u64::from(gr.resent);
            self.t.lost += u64::from(late || gr.resent);
            gr.done += 1;
        } else {
            self.t.carried += 1;
        }
        gr.arrived = 0;
        gr.released = 0;
        gr.resent = false;
        gr.late = false;
        if running && count.is_none_or(|c| gr.done < c) {
            gr.queued = true;
            self.ready.push_back(gi as u32);
        }
    }

    pub(super) fn scan_timers(&mut self, now: u64) {
        let ng = self.cfg.groups as usize;
        let np = self.ports.len();
        for gi in 0..ng {
            if self.groups[gi].arrived == 0 {
                continue;
            }
            let gr = &mut self.groups[gi];
            if now.saturating_sub(gr.first_ns) > self.cfg.barrier_deadline_ns {
                gr.late = true;
            }
            for port in 0..np {
                if let Some(send) = self.leaves[port * ng + gi].poll(Time(now)) {
                    self.groups[gi].resent = true;
                    self.t.tx_resend += 1;
                    self.send(port, send, now);
                }
            }
        }
    }
}
