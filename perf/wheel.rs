//! The timer wheel's arm + advance cost and memory, the flat wheel (`barrier_runtime::wheel`)
//! against the one it replaced (one `Vec` per slot, copied below as it was), same workload,
//! same run (`cargo bench -p barrier-runtime --bench wheel [-- MILLIONS]`; no DPDK, no root).
//!
//! Each workload keeps `inflight` timers armed: time moves on in steps of one tick, the due
//! timers fire, and each fired timer is armed again at now + a random delay (xorshift, the
//! same sequence for both wheels), as a re-send timer is armed again for the next barrier.
//! Every `1/8` of the run the number in flight moves to a random value between half and all
//! of `inflight` (load that ebbs and flows). Reported: ns per timer (one arm and one fire),
//! median of 5 repetitions, the ratio new / old, and the heap each wheel holds at the end
//! of a repetition (old: the slot vectors' capacities; new: the entry array and slot heads)
//! with the most timers that were armed at once.

use barrier_runtime::wheel::TimerWheel;
use std::hint::black_box;
use std::time::Instant;

// Copied as it was: not every method is used here.
#[allow(dead_code)]
mod old {
    //! The wheel before the flat storage (dataplane/runtime/src/wheel.rs at d64a1ec), plus
    //! `heap_bytes`.
    /// An armed timer: fire `key` at `tick`.
    #[derive(Copy, Clone, Debug, PartialEq, Eq)]
    struct Entry<K> {
        key: K,
        tick: u64,
    }

    pub struct TimerWheel<K> {
        slots: Vec<Vec<Entry<K>>>,
        mask: u64,
        /// log2 of the nanoseconds per tick.
        tick_shift: u32,
        /// The next tick not yet processed.
        next_tick: u64,
        len: usize,
    }

    impl<K: Copy> TimerWheel<K> {
        /// `slots` (rounded up to a power of two) of `2^tick_shift` ns each. A timer further away
        /// than one turn stays in its slot for more turns (it is compared by tick, not by slot).
        pub fn new(slots: usize, tick_shift: u32, now_ns: u64) -> Self {
            let n = slots.next_power_of_two().max(1);
            TimerWheel {
                slots: (0..n).map(|_| Vec::new()).collect(),
                mask: n as u64 - 1,
                tick_shift,
                next_tick: now_ns >> tick_shift,
                len: 0,
            }
        }

        /// A wheel for timers at most `max_delay_ns` away: ticks of about 1/64 of it (at least
        /// 1.024 µs, a power of two), and enough slots that one turn covers twice the delay, so a
        /// timer is looked at once, when it fires, never on the turns before.
        pub fn for_delay(max_delay_ns: u64, now_ns: u64) -> Self {
            let tick_shift = (max_delay_ns / 64).max(1).ilog2().max(10);
            let slots = ((2 * max_delay_ns) >> tick_shift).max(64) as usize;
            TimerWheel::new(slots, tick_shift, now_ns)
        }

        /// Nanoseconds per tick: how late at most a timer fires after its deadline (plus the time
        /// between two `advance` calls).
        pub fn tick_ns(&self) -> u64 {
            1 << self.tick_shift
        }

        /// Arm a timer for `deadline_ns`. A deadline already past fires on the next `advance`.
        pub fn arm(&mut self, key: K, deadline_ns: u64) {
            // Round up so a timer never fires early.
            let tick = (deadline_ns.saturating_add((1 << self.tick_shift) - 1) >> self.tick_shift)
                .max(self.next_tick);
            self.slots[(tick & self.mask) as usize].push(Entry { key, tick });
            self.len += 1;
        }

        /// Fire every timer due at `now_ns`: push its key onto `fired`.
        pub fn advance(&mut self, now_ns: u64, fired: &mut Vec<K>) {
            let now_tick = now_ns >> self.tick_shift;
            if now_tick < self.next_tick {
                return;
            }
            if self.len == 0 {
                self.next_tick = now_tick + 1;
                return;
            }
            // After a long stall every slot is visited once, not once per missed tick.
            let steps = (now_tick - self.next_tick + 1).min(self.mask + 1);
            for i in 0..steps {
                let slot = &mut self.slots[((self.next_tick + i) & self.mask) as usize];
                let mut j = 0;
                while j < slot.len() {
                    if slot[j].tick <= now_tick {
                        let e = slot.swap_remove(j);
                        fired.push(e.key);
                        self.len -= 1;
                    } else {
                        j += 1;
                    }
                }
            }
            self.next_tick = now_tick + 1;
        }

        pub fn len(&self) -> usize {
            self.len
        }

        pub fn is_empty(&self) -> bool {
            self.len == 0
        }

        pub fn heap_bytes(&self) -> usize {
            self.slots.capacity() * std::mem::size_of::<Vec<Entry<K>>>()
                + self
                    .slots
                    .iter()
                    .map(|v| v.capacity() * std::mem::size_of::<Entry<K>>())
                    .sum::<usize>()
        }
    }
}

/// What the bench needs of either wheel.
trait Wheel {
    fn arm(&mut self, key: u64, deadline_ns: u64);
    fn advance(&mut self, now_ns: u64, fired: &mut Vec<u64>);
    fn len(&self) -> usize;
    fn heap_bytes(&self) -> usize;
}

impl Wheel for TimerWheel<u64> {
    fn arm(&mut self, key: u64, deadline_ns: u64) {
        TimerWheel::arm(self, key, deadline_ns)
    }
    fn advance(&mut self, now_ns: u64, fired: &mut Vec<u64>) {
        TimerWheel::advance(self, now_ns, fired)
    }
    fn len(&self) -> usize {
        TimerWheel::len(self)
    }
    fn heap_bytes(&self) -> usize {
        TimerWheel::heap_bytes(self)
    }
}

impl Wheel for old::TimerWheel<u64> {
    fn arm(&mut self, key: u64, deadline_ns: u64) {
        old::TimerWheel::arm(self, key, deadline_ns)
    }
    fn advance(&mut self, now_ns: u64, fired: &mut Vec<u64>) {
        old::TimerWheel::advance(self, now_ns, fired)
    }
    fn len(&self) -> usize {
        old::TimerWheel::len(self)
    }
    fn heap_bytes(&self) -> usize {
        old::TimerWheel::heap_bytes(self)
    }
}

struct Load {
    name: &'static str,
    slots: usize,
    tick_shift: u32,
    inflight: usize,
    /// Delays are `min_ns + rand % spread_ns`.
    min_ns: u64,
    spread_ns: u64,
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Runs `load` until `n` timers fired; returns (ns per timer, heap bytes at the end, peak len).
fn run(w: &mut impl Wheel, load: &Load, n: u64) -> (f64, usize, usize) {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let tick = 1u64 << load.tick_shift;
    let mut now = 0u64;
    let mut key = 0u64;
    let mut target = load.inflight;
    let mut fired = Vec::new();
    let mut peak = 0;
    let mut done = 0u64;
    let mut phase = u64::MAX;
    let start = Instant::now();
    while done < n {
        // Every eighth of the run the load moves: between half and all of `inflight`.
        if done * 8 / n != phase {
            phase = done * 8 / n;
            target = load.inflight / 2 + (xorshift(&mut rng) as usize) % (load.inflight / 2 + 1);
        }
        now += tick;
        fired.clear();
        w.advance(now, &mut fired);
        done += fired.len() as u64;
        black_box(&fired);
        // Arm again what fired (a timer for the next barrier), up to the current target.
        while w.len() < target {
            let d = load.min_ns + xorshift(&mut rng) % load.spread_ns;
            w.arm(key, now + d);
            key += 1;
        }
        peak = peak.max(w.len());
    }
    let ns = start.elapsed().as_nanos() as f64 / done as f64;
    (ns, w.heap_bytes(), peak)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let millions = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<f64>().ok())
        .unwrap_or(2.0);
    let n = (millions * 1e6) as u64;
    let loads = [
        // The switch's scheduler: 4,096 slots of 1.024 µs (a 4.2 ms turn), re-send timers of
        // 2-6 ms (some wait a turn).
        Load {
            name: "switch, 8K timers",
            slots: 4096,
            tick_shift: 10,
            inflight: 8192,
            min_ns: 2_000_000,
            spread_ns: 4_000_000,
        },
        // The fleet: `for_delay(10 ms)` (ticks of 131 µs, 256 slots), jittered 7.5-10 ms.
        Load {
            name: "fleet, 1M timers",
            slots: 256,
            tick_shift: 17,
            inflight: 1 << 20,
            min_ns: 7_500_000,
            spread_ns: 2_500_000,
        },
    ];
    println!(
        "wheel bench: {n} timers fired per repetition, median of 5 (ns per timer: one arm and one fire)"
    );
    println!(
        "{:<20} {:>10} {:>10} {:>9} {:>12} {:>12} {:>10} {:>10}",
        "load", "old ns", "new ns", "new/old", "old heap kB", "new heap kB", "new/old", "peak len"
    );
    for load in &loads {
        let (mut to, mut tn) = (Vec::new(), Vec::new());
        let (mut ho, mut hn, mut peak) = (0, 0, 0);
        for _ in 0..5 {
            // Interleaved: old, new, old, new ...
            let mut o = old::TimerWheel::new(load.slots, load.tick_shift, 0);
            let (t, h, _) = run(&mut o, load, n);
            to.push(t);
            ho = h;
            drop(o);
            let mut w = TimerWheel::new(load.slots, load.tick_shift, 0);
            let (t, h, p) = run(&mut w, load, n);
            tn.push(t);
            hn = h;
            peak = p;
        }
        let (mo, mn) = (median(to), median(tn));
        println!(
            "{:<20} {:>10.2} {:>10.2} {:>9.2} {:>12.0} {:>12.0} {:>10.3} {:>10}",
            load.name,
            mo,
            mn,
            mn / mo,
            ho as f64 / 1024.0,
            hn as f64 / 1024.0,
            hn as f64 / ho as f64,
            peak
        );
    }
}
