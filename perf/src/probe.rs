//! `barrier-perf probe`: a system under test's own frame-in to frame-out latency at half of its
//! own peak load, measured from another process over one DPDK port (issue 23's latency target).
//!
//! The same probe drives every system: it sends one reduce per group (every group has at most
//! one in flight), stamps the TSC when the burst goes to the device, and takes as the answer the
//! first frame back that names the same group and sequence number, whatever its kind: testpmd
//! `macswap` returns the reduce itself, a barrier-switch root whose groups have this port as
//! their only child answers with the release. A frame not back in 50 ms is sent again (flagged
//! `RETRANSMIT`) and its barrier left out of the histogram; frames that match nothing are
//! counted. Phases: a warm-up, the peak (as fast as answers come back, every group in flight),
//! then the measured phase paced by a TSC token bucket at `--load` (0.5) of that peak.
//!
//! The probe and the system under test each have a CPU (`--lcores` in the EAL arguments), and
//! the port is `net_memif` in the suite (perf/run.sh step `latency`): shared memory between the
//! two processes, so the transport adds little and adds it to both systems alike.

use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{Epoch, GroupId, Seq};
use dpdk::{Eal, Mbuf, MbufBatch, Mempool, Port, QueueId};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// What `barrier-perf probe` was asked to do.
pub struct ProbeArgs {
    /// The system under test's name in the JSON (`testpmd`, `switch`).
    pub label: String,
    /// Port spec, created as a vdev (`net_memif0,role=client,socket=...`).
    pub port: String,
    /// Groups 0..groups, one barrier in flight each.
    pub groups: u32,
    /// Seconds of the peak phase and of the measured phase each.
    pub secs: f64,
    /// The measured phase's rate as a fraction of the peak.
    pub load: f64,
    /// Frames' epoch (the switch's groups must have it).
    pub epoch: u32,
}

const QUEUE: QueueId = QueueId(0);
const RESEND_AFTER: Duration = Duration::from_millis(50);

#[derive(Clone, Copy, Default)]
struct Flight {
    busy: bool,
    /// Sent again: its latency is not the system's.
    resent: bool,
    seq: u32,
    sent_tsc: u64,
}

#[derive(Default)]
struct PhaseStats {
    sent: u64,
    answered: u64,
    unmatched: u64,
    resent: u64,
    elapsed_s: f64,
}

struct Prober {
    port: Port,
    pool: Mempool,
    epoch: Epoch,
    flights: Vec<Flight>,
    free: VecDeque<u32>,
    hz: u64,
}

impl Prober {
    fn frame(&self, group: u32, f: &Flight, resend: bool) -> [u8; FRAME_LEN] {
        let mut b = [0u8; FRAME_LEN];
        FrameRepr {
            dst: MacAddr::BROADCAST,
            src: MacAddr([2, 0, 0, 0, 0, 0x77]),
            kind: Kind::Reduce,
            flags: if resend {
                Flags::RETRANSMIT
            } else {
                Flags::empty()
            },
            group: GroupId(group),
            epoch: self.epoch,
            seq: Seq(f.seq),
            tx_timestamp: None,
        }
        .emit(&mut b);
        b
    }

    /// One phase: `rate` frames/s (None: as fast as groups come free) for `secs`, latencies into
    /// `hist` when given.
    fn phase(
        &mut self,
        rate: Option<f64>,
        secs: f64,
        mut hist: Option<&mut Histogram<u64>>,
    ) -> PhaseStats {
        let mut st = PhaseStats::default();
        let mut rx: MbufBatch<32> = MbufBatch::new();
        let mut tx: MbufBatch<32> = MbufBatch::new();
        let mut sending: Vec<u32> = Vec::with_capacity(32);
        let ticks_ns = 1e9 / self.hz as f64;
        let start = dpdk::tsc();
        let end = start + (secs * self.hz as f64) as u64;
        let resend_ticks = (RESEND_AFTER.as_secs_f64() * self.hz as f64) as u64;
        // Token bucket in frames (f64 is exact enough over seconds), at most one burst deep.
        let mut tokens = 0.0f64;
        let mut last = start;
        let mut next_scan = start + resend_ticks;
        loop {
            let now = dpdk::tsc();
            if now >= end {
                break;
            }
            // Answers.
            let n = self.port.rx_burst(QUEUE, &mut rx);
            if n > 0 {
                let t = dpdk::tsc();
                for m in rx.drain() {
                    let g = match FrameRepr::parse(m.data()) {
                        Ok(f) if f.group.0 < self.flights.len() as u32 => f,
                        _ => {
                            st.unmatched += 1;
                            continue;
                        }
                    };
                    let fl = &mut self.flights[g.group.0 as usize];
                    if !fl.busy || fl.seq != g.seq.0 {
                        st.unmatched += 1;
                        continue;
                    }
                    if !fl.resent {
                        if let Some(h) = hist.as_deref_mut() {
                            let ns = (t.saturating_sub(fl.sent_tsc) as f64 * ticks_ns) as u64;
                            let _ = h.record(ns.max(1));
                        }
                    }
                    st.answered += 1;
                    fl.busy = false;
                    fl.resent = false;
                    fl.seq = fl.seq.wrapping_add(1);
                    self.free.push_back(g.group.0);
                }
            }
            // New reduces.
            let mut want = self.free.len().min(32);
            if let Some(r) = rate {
                tokens = (tokens + (now - last) as f64 * r / self.hz as f64).min(32.0);
                last = now;
                want = want.min(tokens as usize);
            }
            if want > 0 {
                sending.clear();
                for _ in 0..want {
                    let g = self.free.pop_front().expect("counted");
                    let f = self.flights[g as usize];
                    match Mbuf::from_slice(&self.pool, &self.frame(g, &f, false)) {
                        Ok(m) => {
                            let _ = tx.push(m);
                            sending.push(g);
                        }
                        Err(_) => {
                            self.free.push_front(g);
                            break;
                        }
                    }
                }
                let t = dpdk::tsc();
                let sent = self.port.tx_burst(QUEUE, &mut tx);
                tx.clear(); // what the device did not take is freed; its groups stay free
                for (i, &g) in sending.iter().enumerate() {
                    if i < sent {
                        let fl = &mut self.flights[g as usize];
                        fl.busy = true;
                        fl.sent_tsc = t;
                    } else {
                        self.free.push_back(g);
                    }
                }
                st.sent += sent as u64;
                if rate.is_some() {
                    tokens -= sent as f64;
                }
            }
            // Frames lost on the way: send them again, out of the histogram.
            if now >= next_scan {
                next_scan = now + resend_ticks / 4;
                for g in 0..self.flights.len() {
                    let f = self.flights[g];
                    if f.busy && now.saturating_sub(f.sent_tsc) > resend_ticks {
                        if let Ok(m) = Mbuf::from_slice(&self.pool, &self.frame(g as u32, &f, true))
                        {
                            let _ = tx.push(m);
                            if self.port.tx_burst(QUEUE, &mut tx) == 1 {
                                let fl = &mut self.flights[g];
                                fl.resent = true;
                                fl.sent_tsc = now;
                                st.resent += 1;
                            }
                            tx.clear();
                        }
                    }
                }
            }
        }
        st.elapsed_s = (dpdk::tsc() - start) as f64 / self.hz as f64;
        st
    }
}

fn stats_json(st: &PhaseStats) -> Value {
    json!({
        "sent": st.sent,
        "answered": st.answered,
        "answered_per_s": st.answered as f64 / st.elapsed_s.max(1e-9),
        "unmatched": st.unmatched,
        "resent": st.resent,
        "elapsed_s": st.elapsed_s,
    })
}

/// Runs the probe; the JSON object for `probe-LABEL.json`.
pub fn probe(eal: &Eal, a: &ProbeArgs) -> Result<Value, String> {
    let pool =
        Mempool::new_pktmbuf(eal, "probe", 8191, 256, 2048).map_err(|e| format!("mempool: {e}"))?;
    let mut port = Port::attach_vdev(eal, &a.port).map_err(|e| format!("port {}: {e}", a.port))?;
    port.configure(1, 1, 1024, 1024, &pool)
        .map_err(|e| format!("configure {}: {e}", a.port))?;
    port.start().map_err(|e| format!("start {}: {e}", a.port))?;
    // memif comes up when the other side has connected.
    let t0 = Instant::now();
    while !port.link().map(|l| l.up).unwrap_or(false) {
        if t0.elapsed() > Duration::from_secs(20) {
            return Err(format!(
                "{}: link still down after 20 s (is the other side running?)",
                a.port
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut p = Prober {
        port,
        pool,
        epoch: Epoch(a.epoch),
        flights: vec![Flight::default(); a.groups as usize],
        free: (0..a.groups).collect(),
        hz: dpdk::tsc_hz(),
    };
    p.phase(None, (a.secs / 4.0).max(0.2), None);
    let peak = p.phase(None, a.secs, None);
    let peak_fps = peak.answered as f64 / peak.elapsed_s.max(1e-9);
    let rate = peak_fps * a.load;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram");
    let measured = p.phase(Some(rate), a.secs, Some(&mut hist));
    // Drain what is still in flight, so the far side is idle before this process goes.
    p.phase(Some(0.0), 0.1, None);
    let lost = p.flights.iter().filter(|f| f.busy).count();
    let dump = p.port.stats().ok();
    p.port.stop().map_err(|e| format!("stop: {e}"))?;
    drop(p.port);
    Ok(json!({
        "label": a.label,
        "port": a.port,
        "groups": a.groups,
        "load": a.load,
        "peak": stats_json(&peak),
        "peak_fps": peak_fps,
        "rate_fps": rate,
        "measured": stats_json(&measured),
        "achieved_ratio": measured.answered as f64 / measured.elapsed_s.max(1e-9) / rate.max(1e-9),
        "in_flight_at_end": lost,
        "port_stats": dump.map(|s| json!({"ipackets": s.ipackets, "opackets": s.opackets, "imissed": s.imissed, "oerrors": s.oerrors})),
        "latency": crate::hist_json(&hist),
        "what": "frame-in to frame-out round trip through the system under test: TSC when the burst goes to the device, TSC when the answer's burst comes back (same group and sequence); every group at most one frame in flight",
    }))
}
