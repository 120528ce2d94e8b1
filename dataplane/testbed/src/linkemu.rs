//! The link emulator's queue (`barrier-linkemu`, src/bin/linkemu.rs): delay, jitter and
//! reordering of the frames of one link direction, without I/O or clocks of its own (times are
//! given in nanoseconds by the caller), so its behaviour is tested here frame by frame.
//!
//! A frame that arrives at `t` departs at `t + delay + j`, `j` uniform in `[-jitter, +jitter]`
//! (never before `t`); with probability `reorder` it is held `reorder_extra` longer, so that the
//! frames behind it overtake it. Jitter larger than the gap between two frames reorders them
//! too. The queue holds at most `capacity` frames: an arrival beyond that is dropped and
//! counted, as a full link queue would. Departures leave in departure-time order.
//!
//! This kernel has no netem (and no fq qdisc to honour eBPF departure times), which is why the
//! emulator is a program in the middle of the link (docs/faults.md, "Delay, jitter and
//! reordering").

use barrier_protocol::rng::Rng;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What one direction of the emulated link does to frames.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkShape {
    /// Base one-way delay, ns.
    pub delay_ns: u64,
    /// Half-width of the uniform jitter around the delay, ns.
    pub jitter_ns: u64,
    /// Probability that a frame is held back by `reorder_extra_ns` (0..=1).
    pub reorder: f64,
    /// How much longer a held-back frame waits, ns.
    pub reorder_extra_ns: u64,
    /// Frames the queue holds at most.
    pub capacity: usize,
}

impl Default for LinkShape {
    fn default() -> Self {
        LinkShape {
            delay_ns: 0,
            jitter_ns: 0,
            reorder: 0.0,
            reorder_extra_ns: 500_000,
            capacity: 4096,
        }
    }
}

/// Counters of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LineCounters {
    /// Frames that arrived.
    pub arrived: u64,
    /// Frames that departed (handed to the caller).
    pub departed: u64,
    /// Frames dropped because the queue was full.
    pub dropped_full: u64,
    /// Frames picked to be held back (`reorder`).
    pub held_back: u64,
    /// Frames that departed after a frame that arrived later than they did had departed: each
    /// such frame was overtaken at least once.
    pub reordered: u64,
    /// Smallest, largest and total time in the queue of departed frames, ns (from arrival to
    /// the departure the caller asked for: the emulated delay, not counting the caller's own
    /// lateness in asking).
    pub min_delay_ns: u64,
    pub max_delay_ns: u64,
    pub sum_delay_ns: u64,
    /// How late departures were handed out: the caller's `now` at `pop_due` minus the due
    /// time, largest and total, ns (the emulator's own lateness, e.g. a loop that slept long).
    pub max_late_ns: u64,
    pub sum_late_ns: u64,
}

struct Held<T> {
    depart: u64,
    arrival_no: u64,
    arrive: u64,
    item: T,
}

impl<T> PartialEq for Held<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.depart, self.arrival_no) == (o.depart, o.arrival_no)
    }
}
impl<T> Eq for Held<T> {}
impl<T> PartialOrd for Held<T> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Held<T> {
    // Reversed: the heap's top is the earliest departure (ties: the earlier arrival).
    fn cmp(&self, o: &Self) -> Ordering {
        (o.depart, o.arrival_no).cmp(&(self.depart, self.arrival_no))
    }
}

/// One direction's queue of frames (`T`: an mbuf in the program, anything in tests).
pub struct DelayLine<T> {
    shape: LinkShape,
    rng: Rng,
    heap: BinaryHeap<Held<T>>,
    next_arrival_no: u64,
    /// The latest arrival number that has departed.
    latest_departed: Option<u64>,
    counters: LineCounters,
}

impl<T> DelayLine<T> {
    /// An empty line shaped by `shape`, its random choices from `seed`.
    pub fn new(shape: LinkShape, seed: u64) -> DelayLine<T> {
        DelayLine {
            shape,
            rng: Rng::new(seed),
            heap: BinaryHeap::with_capacity(shape.capacity.min(1 << 16)),
            next_arrival_no: 0,
            latest_departed: None,
            counters: LineCounters {
                min_delay_ns: u64::MAX,
                ..LineCounters::default()
            },
        }
    }

    /// A frame arrives at `now`: queued (`None`), or handed back when the queue is full (the
    /// caller drops it; counted).
    pub fn push(&mut self, now: u64, item: T) -> Option<T> {
        self.counters.arrived += 1;
        if self.heap.len() >= self.shape.capacity {
            self.counters.dropped_full += 1;
            return Some(item);
        }
        let s = &self.shape;
        let mut depart = now + s.delay_ns;
        if s.jitter_ns > 0 {
            let j = self.rng.range_inclusive(0, 2 * s.jitter_ns);
            depart = (depart + j).saturating_sub(s.jitter_ns).max(now);
        }
        if s.reorder > 0.0 && self.rng.chance(s.reorder) {
            depart += s.reorder_extra_ns;
            self.counters.held_back += 1;
        }
        let arrival_no = self.next_arrival_no;
        self.next_arrival_no += 1;
        self.heap.push(Held {
            depart,
            arrival_no,
            arrive: now,
            item,
        });
        None
    }

    /// The next frame due at `now`, if any, in departure order.
    pub fn pop_due(&mut self, now: u64) -> Option<T> {
        if self.heap.peek()?.depart > now {
            return None;
        }
        let h = self.heap.pop()?;
        let c = &mut self.counters;
        c.departed += 1;
        if self.latest_departed.is_some_and(|l| l > h.arrival_no) {
            c.reordered += 1;
        }
        self.latest_departed = Some(
            self.latest_departed
                .map_or(h.arrival_no, |l| l.max(h.arrival_no)),
        );
        let d = h.depart - h.arrive;
        c.min_delay_ns = c.min_delay_ns.min(d);
        c.max_delay_ns = c.max_delay_ns.max(d);
        c.sum_delay_ns += d;
        let late = now - h.depart;
        c.max_late_ns = c.max_late_ns.max(late);
        c.sum_late_ns += late;
        Some(h.item)
    }

    /// When the next frame is due, if one is queued.
    pub fn next_due(&self) -> Option<u64> {
        self.heap.peek().map(|h| h.depart)
    }

    /// Frames queued now.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no frame is queued.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The counters so far (`min_delay_ns` is 0 before the first departure).
    pub fn counters(&self) -> LineCounters {
        let mut c = self.counters;
        if c.departed == 0 {
            c.min_delay_ns = 0;
        }
        c
    }

    /// Empties the queue (the frames are dropped) and returns how many there were.
    pub fn drain(&mut self) -> usize {
        let n = self.heap.len();
        self.heap.clear();
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(shape: LinkShape, arrivals: &[u64]) -> (Vec<(u32, u64)>, LineCounters) {
        let mut line = DelayLine::new(shape, 7);
        let mut out = Vec::new();
        let mut t = 0;
        let mut next = 0;
        while out.len() + (line.counters().dropped_full as usize) < arrivals.len() {
            while next < arrivals.len() && arrivals[next] <= t {
                if line.push(t, next as u32).is_some() {
                    // dropped
                }
                next += 1;
            }
            while let Some(i) = line.pop_due(t) {
                out.push((i, t));
            }
            t += 1_000;
        }
        (out, line.counters())
    }

    #[test]
    fn a_fixed_delay_keeps_order_and_delays_every_frame() {
        let shape = LinkShape {
            delay_ns: 50_000,
            ..LinkShape::default()
        };
        let arrivals: Vec<u64> = (0..100).map(|i| i * 3_000).collect();
        let (out, c) = run(shape, &arrivals);
        assert_eq!(
            out.iter().map(|x| x.0).collect::<Vec<_>>(),
            (0..100).collect::<Vec<_>>()
        );
        for (i, t) in &out {
            assert!(
                *t >= arrivals[*i as usize] + 50_000,
                "frame {i} left at {t}"
            );
        }
        assert_eq!(
            (c.arrived, c.departed, c.reordered, c.held_back),
            (100, 100, 0, 0)
        );
        assert_eq!((c.min_delay_ns, c.max_delay_ns), (50_000, 50_000));
    }

    #[test]
    fn jitter_wider_than_the_gap_reorders_and_stays_in_bounds() {
        let shape = LinkShape {
            delay_ns: 100_000,
            jitter_ns: 80_000,
            ..LinkShape::default()
        };
        let arrivals: Vec<u64> = (0..1000).map(|i| i * 10_000).collect();
        let (out, c) = run(shape, &arrivals);
        assert_eq!(out.len(), 1000);
        assert!(c.reordered > 100, "{c:?}");
        assert!(
            c.min_delay_ns >= 20_000 && c.max_delay_ns <= 180_000,
            "{c:?}"
        );
        // Departures are in time order, and each frame is within delay ± jitter of its arrival
        // (plus the 1 µs step of this test's clock).
        for w in out.windows(2) {
            assert!(w[0].1 <= w[1].1);
        }
        for (i, t) in &out {
            let d = t - arrivals[*i as usize];
            assert!((20_000..=181_000).contains(&d), "frame {i}: {d} ns");
        }
    }

    #[test]
    fn held_back_frames_are_overtaken() {
        let shape = LinkShape {
            delay_ns: 10_000,
            reorder: 0.2,
            reorder_extra_ns: 200_000,
            ..LinkShape::default()
        };
        let arrivals: Vec<u64> = (0..1000).map(|i| i * 20_000).collect();
        let (out, c) = run(shape, &arrivals);
        assert_eq!(out.len(), 1000);
        assert!((150..=250).contains(&c.held_back), "{c:?}");
        // Every held-back frame is overtaken by the ~10 frames that arrive in its extra wait.
        assert!(c.reordered >= c.held_back - 5, "{c:?}");
        assert_eq!(c.max_delay_ns, 210_000);
    }

    #[test]
    fn a_full_queue_drops_and_counts() {
        let shape = LinkShape {
            delay_ns: 1_000_000,
            capacity: 10,
            ..LinkShape::default()
        };
        let arrivals: Vec<u64> = vec![0; 25];
        let (out, c) = run(shape, &arrivals);
        assert_eq!((out.len(), c.dropped_full, c.arrived), (10, 15, 25));
    }
}
