//! The link model: every link is full duplex; each direction serializes frames one after the
//! other at the link rate, then adds a propagation latency with jitter and keeps frames in order.
//! Faults, when active, act per frame: loss, duplication, reordering (an extra random delay that
//! lets later frames overtake) and long delays. A link can also be down for a while (outage).

use crate::rng::Rng;
use crate::topology::Dir;
use barrier_protocol::Time;
use serde::Serialize;

/// Bits one minimum frame occupies on Ethernet: 60 bytes + 4 FCS + 8 preamble/SFD + 12 gap.
pub const WIRE_BITS_PER_FRAME: u64 = (60 + 4 + 8 + 12) * 8;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LinkParams {
    /// Propagation plus forwarding latency of one hop, in ns.
    pub latency_ns: u64,
    /// Extra uniform random latency `0..=jitter_ns` per frame (order is still kept).
    pub jitter_ns: u64,
    /// Link rate; 0 means infinitely fast (no serialization, no queueing).
    pub gbps: f64,
    /// Transmit queue of each link direction, in frames; a frame that finds it full is
    /// dropped (tail drop). 0: unbounded. Bounded by default: with an unbounded queue, leaves
    /// that re-send faster than the link drains bury their newest reduce behind an ever longer
    /// backlog of old ones, and no real port buffers without limit.
    pub queue_frames: u64,
}

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            latency_ns: 1_000,
            jitter_ns: 100,
            gbps: 100.0,
            queue_frames: 1024,
        }
    }
}

impl LinkParams {
    /// Time one frame holds the link, rounded up to whole ns.
    /// Longest wait in one full transmit queue.
    pub fn max_queueing_ns(&self) -> u64 {
        self.queue_frames.saturating_mul(self.serialization_ns())
    }

    pub fn serialization_ns(&self) -> u64 {
        if self.gbps <= 0.0 {
            0
        } else {
            (WIRE_BITS_PER_FRAME as f64 / self.gbps).ceil() as u64
        }
    }
}

/// Per-frame fault probabilities of one link (both directions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Faults {
    pub loss: f64,
    pub dup: f64,
    pub reorder: f64,
    /// Upper bound of the extra delay of a reordered frame.
    pub reorder_ns: u64,
    /// Probability of a long delay, and its length: models a frame stuck in a queue longer
    /// than the re-send timeouts, so that it arrives after its retransmission.
    pub delay: f64,
    pub delay_ns: u64,
}

impl Faults {
    pub fn none() -> Self {
        Faults::default()
    }

    pub fn is_none(&self) -> bool {
        self.loss <= 0.0 && self.dup <= 0.0 && self.reorder <= 0.0 && self.delay <= 0.0
    }

    /// These faults scaled by `k` (probabilities capped at 1).
    pub fn scaled(&self, k: f64) -> Faults {
        Faults {
            loss: (self.loss * k).min(1.0),
            dup: (self.dup * k).min(1.0),
            reorder: (self.reorder * k).min(1.0),
            delay: (self.delay * k).min(1.0),
            ..*self
        }
    }
}

/// What happened to one frame handed to a link.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Transmission {
    /// Arrival times at the far end: none (lost), one, or two (duplicated).
    pub arrivals: [Option<Time>; 2],
    pub lost: bool,
    pub down: bool,
    pub queue_full: bool,
    pub duplicated: bool,
    pub reordered: bool,
    pub delayed: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct DirState {
    /// When the transmitter is free again.
    free_at: Time,
    /// Latest in-order arrival so far: later frames never arrive before it (a FIFO wire).
    last_arrival: Time,
}

#[derive(Clone, Debug)]
struct LinkState {
    faults: Faults,
    down_until: Time,
    dirs: [DirState; 2],
}

pub struct Network {
    params: LinkParams,
    ser_ns: u64,
    links: Vec<LinkState>,
    rng: Rng,
}

impl Network {
    /// `faults_of(link)` gives each link's faults (same for all, or varied per link).
    pub fn new(
        params: LinkParams,
        links: usize,
        mut faults_of: impl FnMut(usize) -> Faults,
        seed: u64,
    ) -> Network {
        Network {
            params,
            ser_ns: params.serialization_ns(),
            links: (0..links)
                .map(|l| LinkState {
                    faults: faults_of(l),
                    down_until: Time(0),
                    dirs: [DirState::default(); 2],
                })
                .collect(),
            rng: Rng::stream(seed, 0x11AC),
        }
    }

    pub fn params(&self) -> LinkParams {
        self.params
    }

    pub fn faults(&self, link: u32) -> Faults {
        self.links[link as usize].faults
    }

    /// Takes the link down (both directions) until `until`: every frame sent meanwhile is lost.
    pub fn set_down(&mut self, link: u32, until: Time) {
        let l = &mut self.links[link as usize];
        l.down_until = l.down_until.max(until);
    }

    /// Sends one frame at `now`. Faults apply only while `faults_active`; outages always do.
    pub fn transmit(
        &mut self,
        now: Time,
        link: u32,
        dir: Dir,
        faults_active: bool,
    ) -> Transmission {
        let params = self.params;
        let ser_ns = self.ser_ns;
        let l = &mut self.links[link as usize];
        let d = &mut l.dirs[dir as usize];
        let mut tx = Transmission::default();
        if ser_ns > 0
            && params.queue_frames > 0
            && d.free_at.saturating_sub(now) >= params.queue_frames * ser_ns
        {
            tx.queue_full = true;
            return tx;
        }
        // The sender serializes the frame whatever happens to it on the wire.
        let start = now.max(d.free_at);
        d.free_at = start + ser_ns;
        let sent = d.free_at;
        if now < l.down_until {
            tx.down = true;
            return tx;
        }
        let f = if faults_active {
            l.faults
        } else {
            Faults::none()
        };
        if self.rng.chance(f.loss) {
            tx.lost = true;
            return tx;
        }
        let jitter = if params.jitter_ns > 0 {
            self.rng.range_inclusive(0, params.jitter_ns)
        } else {
            0
        };
        let mut at = sent + params.latency_ns + jitter;
        if self.rng.chance(f.reorder) {
            // Bypasses the FIFO below: frames sent after it may arrive before it.
            at = at + self.rng.range_inclusive(1, f.reorder_ns.max(1));
            tx.reordered = true;
        } else if self.rng.chance(f.delay) {
            at = at + f.delay_ns + self.rng.range_inclusive(0, f.delay_ns / 4);
            tx.delayed = true;
        } else {
            at = at.max(d.last_arrival);
            d.last_arrival = at;
        }
        tx.arrivals[0] = Some(at);
        if self.rng.chance(f.dup) {
            // A copy made inside the network trails the original by up to one hop latency.
            tx.arrivals[1] = Some(at + self.rng.range_inclusive(0, params.latency_ns.max(1)));
            tx.duplicated = true;
        }
        tx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(f: Faults, params: LinkParams) -> Network {
        Network::new(params, 1, |_| f, 5)
    }

    #[test]
    fn clean_link_keeps_order_and_latency() {
        let p = LinkParams {
            latency_ns: 1000,
            jitter_ns: 500,
            gbps: 100.0,
            queue_frames: 0,
        };
        let mut n = net(Faults::none(), p);
        let mut last = Time(0);
        for i in 0..1000u64 {
            let tx = n.transmit(Time(i), 0, Dir::Up, true);
            let at = tx.arrivals[0].unwrap();
            assert!(tx.arrivals[1].is_none());
            assert!(at >= last, "FIFO");
            assert!(at.nanos() >= i + 1000);
            last = at;
        }
        // 1000 back-to-back frames at 7 ns each queue up behind each other.
        assert!(last.nanos() >= 1000 * p.serialization_ns());
    }

    #[test]
    fn faults_only_while_active() {
        let f = Faults {
            loss: 1.0,
            ..Faults::none()
        };
        let mut n = net(f, LinkParams::default());
        assert!(n.transmit(Time(0), 0, Dir::Down, true).lost);
        let tx = n.transmit(Time(0), 0, Dir::Down, false);
        assert!(!tx.lost && tx.arrivals[0].is_some());
    }

    #[test]
    fn fault_rates_match_and_reorder_overtakes() {
        let f = Faults {
            loss: 0.1,
            dup: 0.05,
            reorder: 0.1,
            reorder_ns: 10_000,
            delay: 0.0,
            delay_ns: 0,
        };
        let mut n = net(
            f,
            LinkParams {
                latency_ns: 100,
                jitter_ns: 0,
                gbps: 0.0,
                queue_frames: 0,
            },
        );
        let (mut lost, mut dup, mut overtaken) = (0, 0, 0);
        let mut prev_reordered_at: Option<Time> = None;
        for i in 0..20_000u64 {
            let tx = n.transmit(Time(i * 10), 0, Dir::Up, true);
            lost += tx.lost as u32;
            dup += tx.duplicated as u32;
            if let (Some(r), Some(a)) = (prev_reordered_at, tx.arrivals[0]) {
                if a < r {
                    overtaken += 1;
                }
            }
            if tx.reordered {
                prev_reordered_at = tx.arrivals[0];
            }
        }
        assert!((1_700..2_300).contains(&lost), "{lost}");
        assert!((700..1_100).contains(&dup), "{dup}");
        assert!(overtaken > 100, "{overtaken}");
    }

    #[test]
    fn a_full_queue_drops_the_newest_frame() {
        let p = LinkParams {
            latency_ns: 10,
            jitter_ns: 0,
            gbps: 1.0,
            queue_frames: 4,
        };
        let mut n = net(Faults::none(), p);
        let fates: Vec<bool> = (0..6)
            .map(|_| n.transmit(Time(0), 0, Dir::Up, false).queue_full)
            .collect();
        assert_eq!(fates, [false, false, false, false, true, true]);
        // One frame time later one slot is free again.
        assert!(!n.transmit(Time(672), 0, Dir::Up, false).queue_full);
        assert!(n.transmit(Time(672), 0, Dir::Up, false).queue_full);
    }

    #[test]
    fn outage_drops_until_it_ends() {
        let mut n = net(Faults::none(), LinkParams::default());
        n.set_down(0, Time(5_000));
        assert!(n.transmit(Time(4_999), 0, Dir::Up, false).down);
        assert!(!n.transmit(Time(5_000), 0, Dir::Up, false).down);
    }
}
