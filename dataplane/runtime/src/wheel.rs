//! A hashed timer wheel: O(1) arm, no cancel, generic over what a timer carries. The switch's
//! scheduler arms one per intermediate re-send (keyed by group and sequence number), the test
//! bed's emulated-leaf fleet one per waiting leaf. A timer is never cancelled: its owner checks
//! on firing whether it still matters (the group table ignores a sequence number no longer
//! awaited, a leaf one it is no longer waiting on), so an answer that came in time cancels it
//! for free. Time per tick is the entries in one slot.
//!
//! Storage is flat: one array of entries, each with an intrusive `next` index, chained into one
//! singly linked list per slot (`heads`) or into the free list. Arming takes an entry from the
//! free list and only grows the array when the free list is empty, so the array never holds more
//! entries than the most timers ever armed at once (the high-water mark of [`TimerWheel::len`],
//! see [`TimerWheel::entries`]); its heap capacity is at most twice that (`Vec`'s doubling).
//! Memory is bounded by the peak number of timers in flight, not by slots times each slot's
//! own peak, as with one vector per slot (which kept each slot's largest capacity for good:
//! docs/reliability.md, "Soak"). A fired entry goes back to the free list at once.

/// End of a list.
const NIL: u32 = u32::MAX;

/// An armed timer (fire `key` at `tick`), or a free entry; `next` chains either list.
#[derive(Copy, Clone, Debug)]
struct Entry<K> {
    key: K,
    tick: u64,
    next: u32,
}

pub struct TimerWheel<K> {
    /// Every entry ever needed at once: armed ones (in a slot's list) and free ones.
    entries: Vec<Entry<K>>,
    /// Head of the free list.
    free: u32,
    /// Head of each slot's list, newest first.
    heads: Vec<u32>,
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
            entries: Vec::new(),
            free: NIL,
            heads: vec![NIL; n],
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
    /// Allocates only when more timers are armed at once than ever before.
    ///
    /// # Panics
    /// With more than `u32::MAX - 1` timers armed at once (the index type's limit).
    pub fn arm(&mut self, key: K, deadline_ns: u64) {
        // Round up so a timer never fires early.
        let tick = (deadline_ns.saturating_add((1 << self.tick_shift) - 1) >> self.tick_shift)
            .max(self.next_tick);
        let slot = (tick & self.mask) as usize;
        let entry = Entry {
            key,
            tick,
            next: self.heads[slot],
        };
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.entries[i as usize].next;
            self.entries[i as usize] = entry;
            i
        } else {
            let i = u32::try_from(self.entries.len())
                .ok()
                .filter(|&i| i != NIL)
                .expect("timer wheel: more than u32::MAX - 1 timers armed at once");
            self.entries.push(entry);
            i
        };
        self.heads[slot] = i;
        self.len += 1;
    }

    /// Fire every timer due at `now_ns`: push its key onto `fired` (within a slot, in the order
    /// armed).
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
        for s in 0..steps {
            let slot = ((self.next_tick + s) & self.mask) as usize;
            let start = fired.len();
            let mut prev = NIL;
            let mut i = self.heads[slot];
            while i != NIL {
                let e = self.entries[i as usize];
                if e.tick <= now_tick {
                    // Unlink, fire, free.
                    if prev == NIL {
                        self.heads[slot] = e.next;
                    } else {
                        self.entries[prev as usize].next = e.next;
                    }
                    fired.push(e.key);
                    self.entries[i as usize].next = self.free;
                    self.free = i;
                    self.len -= 1;
                } else {
                    prev = i;
                }
                i = e.next;
            }
            // The list is newest first: fire in the order armed.
            fired[start..].reverse();
        }
        self.next_tick = now_tick + 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries held (armed and free): the most timers ever armed at once.
    pub fn entries(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_on_time_never_early() {
        let mut w = TimerWheel::new(8, 10, 0); // 1024 ns ticks
        w.arm((1, 10), 5_000);
        w.arm((2, 20), 3_000);
        let mut f = Vec::new();
        w.advance(2_999, &mut f);
        assert!(f.is_empty());
        w.advance(3_100, &mut f);
        assert_eq!(f, vec![(2, 20)]);
        f.clear();
        w.advance(4_999, &mut f);
        assert!(f.is_empty());
        w.advance(6_200, &mut f);
        assert_eq!(f, vec![(1, 10)]);
        assert!(w.is_empty());
    }

    #[test]
    fn timers_beyond_one_turn_wait_their_turn() {
        let mut w = TimerWheel::new(4, 10, 0); // one turn = 4 ticks
        w.arm(1u32, 100 * 1024);
        let mut f = Vec::new();
        for t in 0..99 {
            w.advance(t * 1024, &mut f);
        }
        assert!(f.is_empty());
        w.advance(100 * 1024, &mut f);
        assert_eq!(f, vec![1]);
    }

    #[test]
    fn a_long_stall_fires_everything_due_once() {
        let mut w = TimerWheel::new(16, 10, 0);
        for g in 0..1000u32 {
            w.arm(g, u64::from(g) * 1024);
        }
        w.arm(5000, 10_000 * 1024);
        let mut f = Vec::new();
        w.advance(2000 * 1024, &mut f);
        assert_eq!(f.len(), 1000);
        f.sort();
        f.dedup();
        assert_eq!(f.len(), 1000);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn past_deadline_fires_next_advance() {
        let mut w = TimerWheel::new(8, 10, 50_000);
        w.arm('x', 10);
        let mut f = Vec::new();
        w.advance(50_000, &mut f);
        assert_eq!(f, vec!['x']);
    }

    #[test]
    fn a_million_timers() {
        let mut w = TimerWheel::new(1 << 14, 10, 0);
        for g in 0..1_000_000u32 {
            w.arm(g, 1_000_000 + u64::from(g % 1000) * 1000);
        }
        let mut f = Vec::new();
        let mut now = 0;
        while !w.is_empty() {
            now += 50_000;
            w.advance(now, &mut f);
        }
        assert_eq!(f.len(), 1_000_000);
    }

    #[test]
    fn sized_for_a_delay_one_turn_covers_it() {
        for delay in [1_000, 2_000_000, 10_000_000, 200_000_000, 60_000_000_000] {
            let w: TimerWheel<u8> = TimerWheel::for_delay(delay, 0);
            let turn = (w.mask + 1) * w.tick_ns();
            assert!(w.tick_ns() >= 1024);
            assert!(turn >= delay, "delay {delay}: turn {turn}");
            assert!(w.mask < 256, "delay {delay}: {} slots", w.mask + 1);
            assert!(w.tick_ns() <= (delay / 64).max(1024), "delay {delay}");
        }
        // A timer at the full delay fires once, within a tick of its deadline.
        let mut w = TimerWheel::for_delay(10_000_000, 5);
        w.arm(7u32, 10_000_005);
        let mut f = Vec::new();
        w.advance(10_000_004, &mut f);
        assert!(f.is_empty());
        w.advance(10_000_005 + w.tick_ns(), &mut f);
        assert_eq!(f, vec![7]);
    }

    #[test]
    fn within_a_slot_timers_fire_in_the_order_armed() {
        let mut w = TimerWheel::new(8, 10, 0);
        for k in 0..5u32 {
            w.arm(k, 3_000);
        }
        let mut f = Vec::new();
        w.advance(4_096, &mut f);
        assert_eq!(f, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn fired_entries_are_reused_storage_stays_at_the_peak() {
        // The old wheel (one vector per slot) kept every slot's largest vector: timers spread
        // over all 64 slots, 100 at a time, left 64 x 100 entries allocated. Now the storage is
        // the most timers ever armed at once.
        let mut w = TimerWheel::new(64, 10, 0);
        let mut f = Vec::new();
        let mut now = 0u64;
        for round in 0..64u64 {
            for k in 0..100u64 {
                w.arm(k, now + (round + 1) * 1024 + k);
            }
            now += 200 * 1024;
            w.advance(now, &mut f);
            assert!(w.is_empty());
        }
        assert_eq!(f.len(), 6400);
        assert_eq!(w.entries(), 100);
    }

    /// What a timer wheel promises, as a naive model: a list of (due tick, arm order, key),
    /// sorted on firing. A timer is due at its deadline rounded up to a tick, or at the first
    /// tick not yet processed when armed if that is later; an `advance` fires every timer due
    /// at or before its tick, once; time only moves forward.
    struct Model {
        timers: Vec<(u64, u64, u32)>,
        shift: u32,
        next_tick: u64,
        armed: u64,
    }

    impl Model {
        fn arm(&mut self, key: u32, deadline: u64) {
            let t = (deadline + (1 << self.shift) - 1) >> self.shift;
            self.timers.push((t.max(self.next_tick), self.armed, key));
            self.armed += 1;
        }

        fn advance(&mut self, now: u64) -> Vec<u32> {
            let now_tick = now >> self.shift;
            if now_tick < self.next_tick {
                return Vec::new();
            }
            self.next_tick = now_tick + 1;
            let mut due: Vec<_> = self.timers.iter().copied().filter(|t| t.0 <= now_tick).collect();
            self.timers.retain(|t| t.0 > now_tick);
            due.sort_unstable();
            due.into_iter().map(|t| t.2).collect()
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Arm at now + offset (may be in the past: offset < 0).
        Arm(i64),
        /// Move time forward.
        Advance(u64),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            // Up to a few turns of a 16-slot wheel of 1,024 ns ticks, some in the past.
            4 => (-5_000i64..80_000).prop_map(Op::Arm),
            // Mostly within a turn; sometimes a stall of several turns.
            2 => (0u64..3_000).prop_map(Op::Advance),
            1 => (0u64..100_000).prop_map(Op::Advance),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        #[test]
        fn matches_a_naive_model(
            start in 0u64..100_000,
            ops in proptest::collection::vec(op(), 1..400),
        ) {
            let shift = 10;
            let mut w = TimerWheel::new(16, shift, start);
            let mut m = Model { timers: Vec::new(), shift, next_tick: start >> shift, armed: 0 };
            let mut now = start;
            let mut deadline = std::collections::HashMap::new();
            let mut peak = 0;
            let mut key = 0u32;
            let mut f = Vec::new();
            for op in ops {
                match op {
                    Op::Arm(off) => {
                        let d = now.saturating_add_signed(off);
                        w.arm(key, d);
                        m.arm(key, d);
                        deadline.insert(key, d);
                        key += 1;
                    }
                    Op::Advance(dt) => {
                        now += dt;
                        f.clear();
                        w.advance(now, &mut f);
                        let mut got = f.clone();
                        got.sort_unstable();
                        let mut want = m.advance(now);
                        want.sort_unstable();
                        proptest::prop_assert_eq!(&got, &want, "at {}", now);
                        for k in &f {
                            // Never early; fired once (removed from the map).
                            let d = deadline.remove(k);
                            proptest::prop_assert!(d.is_some_and(|d| d <= now), "{} early or twice", k);
                        }
                    }
                }
                peak = peak.max(w.len());
                proptest::prop_assert_eq!(w.len(), m.timers.len());
                // Storage: never more entries than the most timers armed at once.
                proptest::prop_assert!(w.entries() <= peak, "{} entries, peak {}", w.entries(), peak);
            }
            proptest::prop_assert_eq!(w.entries(), peak);
        }
    }
}
