//! A hashed timer wheel for the intermediate re-send timers: O(1) arm, no cancel. A timer is
//! keyed by (group, seq); when it fires, the group table's `on_timer` ignores a seq that is no
//! longer awaited, so a release that arrived in time "cancels" it for free. Sized for a million
//! groups: memory is one entry per armed timer, time per tick is the entries in one slot.

use barrier_protocol::{GroupId, Seq};

/// An armed timer: fire `on_timer(group, seq)` at `tick`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Entry {
    group: GroupId,
    seq: Seq,
    tick: u64,
}

pub struct TimerWheel {
    slots: Vec<Vec<Entry>>,
    mask: u64,
    /// log2 of the nanoseconds per tick.
    tick_shift: u32,
    /// The next tick not yet processed.
    next_tick: u64,
    len: usize,
}

impl TimerWheel {
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

    /// Arm a timer for `deadline_ns`. A deadline already past fires on the next `advance`.
    pub fn arm(&mut self, group: GroupId, seq: Seq, deadline_ns: u64) {
        // Round up so a timer never fires early.
        let tick = (deadline_ns.saturating_add((1 << self.tick_shift) - 1) >> self.tick_shift)
            .max(self.next_tick);
        self.slots[(tick & self.mask) as usize].push(Entry { group, seq, tick });
        self.len += 1;
    }

    /// Fire every timer due at `now_ns`: push `(group, seq)` onto `fired`.
    pub fn advance(&mut self, now_ns: u64, fired: &mut Vec<(GroupId, Seq)>) {
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
                    fired.push((e.group, e.seq));
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

    /// The (group, seq) of a timer, for brevity.
    fn gs(group: u32, seq: u32) -> (GroupId, Seq) {
        (GroupId(group), Seq(seq))
    }

    #[test]
    fn fires_on_time_never_early() {
        let mut w = TimerWheel::new(8, 10, 0); // 1024 ns ticks
        w.arm(GroupId(1), Seq(10), 5_000);
        w.arm(GroupId(2), Seq(20), 3_000);
        let mut f = Vec::new();
        w.advance(2_999, &mut f);
        assert!(f.is_empty());
        w.advance(3_100, &mut f);
        assert_eq!(f, vec![gs(2, 20)]);
        f.clear();
        w.advance(4_999, &mut f);
        assert!(f.is_empty());
        w.advance(6_200, &mut f);
        assert_eq!(f, vec![gs(1, 10)]);
        assert!(w.is_empty());
    }

    #[test]
    fn timers_beyond_one_turn_wait_their_turn() {
        let mut w = TimerWheel::new(4, 10, 0); // one turn = 4 ticks
        w.arm(GroupId(1), Seq(1), 100 * 1024);
        let mut f = Vec::new();
        for t in 0..99 {
            w.advance(t * 1024, &mut f);
        }
        assert!(f.is_empty());
        w.advance(100 * 1024, &mut f);
        assert_eq!(f, vec![gs(1, 1)]);
    }

    #[test]
    fn a_long_stall_fires_everything_due_once() {
        let mut w = TimerWheel::new(16, 10, 0);
        for g in 0..1000u32 {
            w.arm(GroupId(g), Seq(0), u64::from(g) * 1024);
        }
        w.arm(GroupId(5000), Seq(0), 10_000 * 1024);
        let mut f = Vec::new();
        w.advance(2000 * 1024, &mut f);
        assert_eq!(f.len(), 1000);
        f.sort_by_key(|&(g, s)| (g, s.0));
        f.dedup();
        assert_eq!(f.len(), 1000);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn past_deadline_fires_next_advance() {
        let mut w = TimerWheel::new(8, 10, 50_000);
        w.arm(GroupId(3), Seq(3), 10);
        let mut f = Vec::new();
        w.advance(50_000, &mut f);
        assert_eq!(f, vec![gs(3, 3)]);
    }

    #[test]
    fn a_million_timers() {
        let mut w = TimerWheel::new(1 << 14, 10, 0);
        for g in 0..1_000_000u32 {
            w.arm(GroupId(g), Seq(1), 1_000_000 + u64::from(g % 1000) * 1000);
        }
        let mut f = Vec::new();
        let mut now = 0;
        while !w.is_empty() {
            now += 50_000;
            w.advance(now, &mut f);
        }
        assert_eq!(f.len(), 1_000_000);
    }
}
