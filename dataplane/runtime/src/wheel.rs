//! A hashed timer wheel: O(1) arm, no cancel, generic over what a timer carries. The switch's
//! scheduler arms one per intermediate re-send (keyed by group and sequence number), the test
//! bed's emulated-leaf fleet one per waiting leaf. A timer is never cancelled: its owner checks
//! on firing whether it still matters (the group table ignores a sequence number no longer
//! awaited, a leaf one it is no longer waiting on), so an answer that came in time cancels it
//! for free. Memory is one entry per armed timer; time per tick is the entries in one slot.

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
}
