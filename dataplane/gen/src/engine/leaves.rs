//! The emulated leaves: the test bed's shared [`Fleet`](barrier_testbed::fleet::Fleet), one
//! leaf per port and group, their arrivals (paced by the token bucket or by the releases), the
//! releases they receive, the barriers they complete and their re-send timers.

use super::{Engine, PENDING_CAP};
use crate::bucket::TokenBucket;
use crate::fault::Pkt;
use barrier_protocol::leaf::LeafSend;
use barrier_runtime::io::{RxQueue, TxQueue};
use barrier_testbed::fleet::{Completed, Received};

/// What the generator keeps per group beside the fleet's barrier state.
#[derive(Clone, Debug, Default)]
pub(super) struct GroupRun {
    /// The trial the current barrier started in.
    pub(super) trial: u32,
    /// Barriers completed in this trial (for `count`).
    pub(super) done: u64,
    /// In the ready queue.
    pub(super) queued: bool,
    /// The current barrier had a re-send while the generator kept up (no pause of its loop
    /// within one leaf timer before it).
    pub(super) resent_keeping_up: bool,
}

impl<R: RxQueue, T: TxQueue> Engine<R, T> {
    pub(super) fn reduce_pkt(&self, port: usize, send: LeafSend, now: u64) -> Pkt {
        Pkt::from_slice(&self.fleet.reduce_frame(
            send,
            self.ports[port].mac,
            self.cfg.dst_mac,
            self.cfg.timestamps.then_some(now),
        ))
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
        let closed = bucket.is_none();
        while let Some(&g) = self.ready.front() {
            let port = self.cursor;
            if closed && port == 0 && self.outstanding >= self.window.limit() {
                break;
            }
            if self.ports[port].pending.len() >= PENDING_CAP {
                break;
            }
            if let Some(b) = bucket.as_deref_mut() {
                if !b.try_take_one() {
                    break;
                }
            }
            let arrival = match self.fleet.arrive(port as u32, g, now) {
                Ok(a) => a,
                Err(e) => unreachable!("a queued leaf is working: {e}"),
            };
            if arrival.first {
                self.groups[g as usize].trial = self.trial;
                self.groups[g as usize].resent_keeping_up = false;
                self.outstanding += 1;
                self.t.started += 1;
            }
            self.t.tx_reduce += 1;
            self.send(port, arrival.send, now);
            self.cursor += 1;
            if self.cursor == np {
                self.cursor = 0;
                self.ready.pop_front();
                self.groups[g as usize].queued = false;
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
        let rel = match self.fleet.receive(port as u32, bytes, now) {
            Received::Released(rel) => rel,
            Received::Other => {
                self.t.rx_other += 1;
                return;
            }
            Received::Ignored => {
                self.t.rx_release += 1;
                self.t.rx_ignored += 1;
                return;
            }
            Received::NotReached => {
                // A release for a barrier this leaf has not reached: the switch released
                // without its reduce.
                self.t.rx_release += 1;
                self.t.early += 1;
                return;
            }
        };
        self.t.rx_release += 1;
        self.t.early += u64::from(rel.early);
        let gi = rel.group as usize;
        if self.groups[gi].trial == self.trial {
            // A switch that echoes a reduce's tx timestamp in its release measures itself;
            // only releases that end a wait count, like the leaf latency.
            if let Some(ts) = rel.tx_timestamp.filter(|&ts| ts <= now) {
                let _ = self.hist_echo.record((now - ts).max(1));
            }
            let _ = self.hist_leaf.record(rel.waited_ns.max(1));
            let _ = self.iv_leaf.record(rel.waited_ns.max(1));
            self.flood_note_leaf(rel.waited_ns);
        }
        if let Some(c) = rel.completed {
            self.complete(gi, c, now, running, count);
        }
    }

    pub(super) fn complete(
        &mut self,
        gi: usize,
        c: Completed,
        now: u64,
        running: bool,
        count: Option<u64>,
    ) {
        let trial = self.trial;
        let deadline = self.cfg.barrier_deadline_ns;
        let keeping_up = self.keeping_up(now);
        self.window.on_completed(
            now,
            now.saturating_sub(c.first_arrive_ns),
            c.resent,
            keeping_up,
        );
        let gr = &mut self.groups[gi];
        self.outstanding -= 1;
        if gr.trial == trial {
            self.t.completed += 1;
            let lat = now.saturating_sub(c.last_arrive_ns).max(1);
            let _ = self.hist_barrier.record(lat);
            let _ = self.iv_barrier.record(lat);
            let late = now.saturating_sub(c.first_arrive_ns) > deadline;
            self.t.over_deadline += u64::from(late);
            self.t.needed_resend += u64::from(c.resent);
            self.t.lost += u64::from(late || c.resent);
            let why = &mut self.t.lost_by;
            match (c.resent, gr.resent_keeping_up, late) {
                (true, true, _) => why.unanswered += 1,
                (true, false, _) => why.generator_behind += 1,
                (false, _, true) => why.over_deadline += 1,
                (false, _, false) => {}
            }
            gr.done += 1;
        } else {
            self.t.carried += 1;
        }
        let this_trial = gr.trial == trial;
        if running && count.is_none_or(|c| gr.done < c) {
            gr.queued = true;
            self.ready.push_back(gi as u32);
        }
        if this_trial {
            self.flood_note_completed(c.resent);
        }
    }

    /// No pause of the generator's own loop within one leaf timer before `now`.
    pub(super) fn keeping_up(&self, now: u64) -> bool {
        self.paused_at
            .is_none_or(|t| now.saturating_sub(t) > self.cfg.resend_timeout_ns)
    }

    /// The leaves' re-send timers due now (the fleet's timer wheel: only what is due).
    pub(super) fn expire_timers(&mut self, now: u64) {
        let mut resends = std::mem::take(&mut self.resends);
        self.fleet.expire(now, &mut resends);
        let keeping_up = self.keeping_up(now);
        if !resends.is_empty() {
            self.window.on_resend(now, keeping_up);
        }
        for &(port, send) in &resends {
            if keeping_up {
                let gi = send.group.0.wrapping_sub(self.cfg.first_group) as usize;
                if let Some(gr) = self.groups.get_mut(gi) {
                    gr.resent_keeping_up = true;
                }
            }
            self.t.tx_resend += 1;
            self.flood_note_resend();
            self.send(port as usize, send, now);
        }
        resends.clear();
        self.resends = resends;
    }
}
