//! A hashed timer wheel: O(1) arm, no cancel, generic over what a timer carries. The switch's
//! scheduler arms one per intermediate re-send (keyed by group and sequence number), the test
//! bed's emulated-leaf fleet one per waiting leaf. A timer is never cancelled: its owner checks
//! on firing whether it still matters (the group table ignores a sequence number no longer
//! awaited, a leaf one it is no longer waiting on), so an answer that came in time cancels it
//! for free. Time per tick is the entries in one slot.
//!
//! Storage is flat: one array of entries cut into chunks of [`CHUNK`] entries, each chunk with
//! an intrusive `next` index, chained into one list per slot (head, tail, and how full the tail
//! chunk is) or into the free list. Arming appends to the slot's tail chunk, taking a chunk
//! from the free list when it is full, and grows the array only when the free list is empty;
//! firing a slot compacts its survivors (timers for a later turn) to the front of its chain
//! and gives the emptied chunks back at once. So nothing is allocated once the array has
//! reached its high-water mark, and that mark is bounded by the most timers ever armed at once
//! (the peak of [`TimerWheel::len`]), not by run time nor by slots times each slot's own peak,
//! as with one vector per slot (which kept each slot's largest capacity for good:
//! docs/reliability.md, "Soak"): at most `peak + CHUNK x min(slots, peak)` entries (one
//! partly filled chunk per non-empty slot), see [`TimerWheel::entries`]; the array's heap
//! capacity is at most twice that (`Vec`'s doubling).
//!
//! Why chunks and not one `next` per entry: a slot's timers are then walked through
//! contiguous memory, not one cache miss per timer. With one list node per entry, a million
//! timers in flight (the generator's fleet at a million groups) cost 12 times more per timer
//! than the vector per slot (perf/wheel.md); chunks of 8 cost 1.2-1.6 times the vector's time
//! (a chunk of 8 entries of a `u32` key is two cache lines), and keep the partly filled chunks
//! of a sparse wheel (the switch's: 4,096 slots, a few timers each) below the vectors' memory.

/// Entries per chunk.
pub const CHUNK: usize = 8;

/// End of a list.
const NIL: u32 = u32::MAX;

/// An armed timer: fire `key` at `tick`.
#[derive(Copy, Clone, Debug)]
struct Entry<K> {
    key: K,
    tick: u64,
}

/// A slot's chain of chunks: armed timers in the order armed, all chunks full but the tail.
#[derive(Copy, Clone, Debug)]
struct Slot {
    head: u32,
    tail: u32,
    /// Entries in the tail chunk (1..=CHUNK when the slot is not empty).
    fill: u32,
}

const EMPTY: Slot = Slot {
    head: NIL,
    tail: NIL,
    fill: 0,
};

pub struct TimerWheel<K> {
    /// Chunk `c` is `entries[c * CHUNK..(c + 1) * CHUNK]`; every chunk ever needed at once.
    entries: Vec<Entry<K>>,
    /// Per chunk: the next chunk of its slot's chain, or of the free list.
    next: Vec<u32>,
    /// Head of the free list of chunks.
    free: u32,
    slots: Vec<Slot>,
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
            next: Vec::new(),
            free: NIL,
            slots: vec![EMPTY; n],
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

    /// A chunk off the free list, or a new one (filled with copies of `e`: every entry of the
    /// array holds a value, no uninitialized memory).
    fn take_chunk(&mut self, e: Entry<K>) -> u32 {
        if self.free != NIL {
            let c = self.free;
            self.free = self.next[c as usize];
            return c;
        }
        let c = u32::try_from(self.next.len())
            .ok()
            .filter(|&c| c != NIL)
            .expect("timer wheel: more than u32::MAX - 1 chunks");
        self.entries.extend(std::iter::repeat_n(e, CHUNK));
        self.next.push(NIL);
        c
    }

    /// Arm a timer for `deadline_ns`. A deadline already past fires on the next `advance`.
    /// Allocates only when more chunks are in use at once than ever before.
    ///
    /// # Panics
    /// With more than `u32::MAX - 1` chunks in use at once (the index type's limit).
    pub fn arm(&mut self, key: K, deadline_ns: u64) {
        // Round up so a timer never fires early.
        let tick = (deadline_ns.saturating_add((1 << self.tick_shift) - 1) >> self.tick_shift)
            .max(self.next_tick);
        let s = (tick & self.mask) as usize;
        let e = Entry { key, tick };
        let mut slot = self.slots[s];
        if slot.head == NIL || slot.fill as usize == CHUNK {
            let c = self.take_chunk(e);
            self.next[c as usize] = NIL;
            if slot.head == NIL {
                slot.head = c;
            } else {
                self.next[slot.tail as usize] = c;
            }
            slot.tail = c;
            slot.fill = 0;
        }
        self.entries[slot.tail as usize * CHUNK + slot.fill as usize] = e;
        slot.fill += 1;
        self.slots[s] = slot;
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
        for i in 0..steps {
            let s = ((self.next_tick + i) & self.mask) as usize;
            if self.slots[s].head != NIL {
                self.fire_slot(s, now_tick, fired);
            }
        }
        self.next_tick = now_tick + 1;
    }

    /// Fire the due timers of slot `s`; the others (later turns) move to the front of its
    /// chain, in order, and the chunks left empty go back to the free list.
    fn fire_slot(&mut self, s: usize, now_tick: u64, fired: &mut Vec<K>) {
        let Slot { head, tail, fill } = self.slots[s];
        // Write cursor (chunk, index) never passes the read cursor: survivors stay in place
        // or move towards the head.
        let (mut wc, mut wi) = (head, 0usize);
        let mut rc = head;
        loop {
            let n = if rc == tail { fill as usize } else { CHUNK };
            let base = rc as usize * CHUNK;
            for ri in base..base + n {
                let e = self.entries[ri];
                if e.tick <= now_tick {
                    fired.push(e.key);
                    self.len -= 1;
                } else {
                    if wi == CHUNK {
                        wc = self.next[wc as usize];
                        wi = 0;
                    }
                    self.entries[wc as usize * CHUNK + wi] = e;
                    wi += 1;
                }
            }
            if rc == tail {
                break;
            }
            rc = self.next[rc as usize];
        }
        if wi == 0 {
            // Nothing left: the whole chain is free.
            self.next[tail as usize] = self.free;
            self.free = head;
            self.slots[s] = EMPTY;
        } else {
            if wc != tail {
                let rest = self.next[wc as usize];
                self.next[tail as usize] = self.free;
                self.free = rest;
                self.next[wc as usize] = NIL;
            }
            self.slots[s] = Slot {
                head,
                tail: wc,
                fill: wi as u32,
            };
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries held (in chunks armed or free): at most `peak + CHUNK x min(slots, peak)`,
    /// where `peak` is the most timers ever armed at once.
    pub fn entries(&self) -> usize {
        self.entries.len()
    }

    /// Bytes this wheel holds on the heap (entries, chunk links and slots, by capacity).
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Entry<K>>()
            + self.next.capacity() * std::mem::size_of::<u32>()
            + self.slots.capacity() * std::mem::size_of::<Slot>()
    }

    /// Slots (a power of two).
    pub fn slots(&self) -> usize {
        self.slots.len()
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
    fn a_slot_with_timers_for_later_turns_keeps_them_in_order() {
        // 4 slots of 1,024 ns: ticks 2, 6, 10, ... share slot 2. 50 timers alternate between
        // this turn and later ones, over several chunks.
        let mut w = TimerWheel::new(4, 10, 0);
        for k in 0..50u64 {
            let turns = if k % 2 == 0 { 0 } else { k % 3 + 1 };
            w.arm(k, (2 + 4 * turns) * 1024);
        }
        let mut f = Vec::new();
        w.advance(2 * 1024, &mut f);
        assert_eq!(f, (0..50).step_by(2).collect::<Vec<u64>>());
        for turn in 1..=3u64 {
            f.clear();
            w.advance((2 + 4 * turn) * 1024 - 1, &mut f);
            assert!(f.is_empty());
            w.advance((2 + 4 * turn) * 1024, &mut f);
            let want: Vec<u64> = (0..50)
                .filter(|k| k % 2 == 1 && k % 3 + 1 == turn)
                .collect();
            assert_eq!(f, want, "turn {turn}");
        }
        assert!(w.is_empty());
        // 50 timers in one slot: 50 / CHUNK chunks (rounded up), all free again and reused.
        assert_eq!(w.entries(), 50usize.div_ceil(CHUNK) * CHUNK);
        for k in 0..50u64 {
            w.arm(k, 100 * 1024);
        }
        assert_eq!(w.entries(), 50usize.div_ceil(CHUNK) * CHUNK);
    }

    #[test]
    fn fired_entries_are_reused_storage_stays_at_the_peak() {
        // The old wheel (one vector per slot) kept every slot's largest vector: timers spread
        // over all 64 slots, 100 at a time, left 64 x 100 entries allocated. Now the storage is
        // the chunks for the most timers ever armed at once.
        let mut w = TimerWheel::new(64, 10, 0);
        let mut f = Vec::new();
        let mut now = 0u64;
        for round in 0..64u64 {
            for k in 0..100u64 {
                w.arm(k, now + (round + 1) * 1024 - k);
            }
            now += 200 * 1024;
            w.advance(now, &mut f);
            assert!(w.is_empty());
        }
        assert_eq!(f.len(), 6400);
        // 100 timers in one slot at a time: 7 chunks of 16.
        assert_eq!(w.entries(), 100usize.div_ceil(CHUNK) * CHUNK);
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
            let mut due: Vec<_> = self
                .timers
                .iter()
                .copied()
                .filter(|t| t.0 <= now_tick)
                .collect();
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
                // Storage: bounded by the most timers armed at once (plus one partly filled
                // chunk per non-empty slot), whatever the run's length.
                let bound = peak + CHUNK * w.slots().min(peak);
                proptest::prop_assert!(w.entries() <= bound, "{} entries, peak {}", w.entries(), peak);
            }

        }
    }
}
