//! Counters: plain `AtomicU64` cells, each written by exactly one thread (Relaxed), read and
//! summed by the management thread. One set per RX poller, per egress port, per lcore loop, and
//! a frugal per-group pair (completions, re-sends) as `u32` arrays.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// Declares a struct of named `AtomicU64` counters with `add`, `get` and a name/value listing.
macro_rules! counter_set {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Default, Debug)]
        pub struct $name { $($(#[$fm])* pub $field: AtomicU64,)* }
        impl $name {
            pub const NAMES: &'static [&'static str] = &[$(stringify!($field)),*];
            /// Current values in declaration order (same order as NAMES).
            pub fn values(&self) -> Vec<u64> { vec![$(self.$field.load(Relaxed)),*] }
            /// Add `other`'s values into `into` (same order as NAMES).
            pub fn sum_into(&self, into: &mut [u64]) {
                for (slot, v) in into.iter_mut().zip(self.values()) { *slot += v; }
            }
        }
    };
}

/// Owner-only increment: a load and a store, no locked instruction (the cell has one writer).
#[inline]
pub fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

counter_set! {
    /// One RX poller (a port queue), written by the lcore that polls it.
    RxCounters {
        /// Frames found in the port's RX queues when it started, freed unread: nothing received
        /// before every port is bound and started can be trusted to name its ingress port
        /// (`dpdk::Port::discard_received`). Counted on the port's first queue.
        discarded_at_start,
        frames,
        reduce_in,
        release_in,
        recorded,
        completions,
        released_down,
        duplicates,
        stale_reduce,
        stale_release,
        drop_too_short,
        drop_not_barrier,
        drop_bad_magic,
        drop_bad_version,
        drop_bad_kind,
        drop_reserved_flags,
        drop_group_out_of_range,
        drop_bad_checksum,
        drop_unknown_group,
        drop_not_a_child,
        drop_not_the_parent,
        /// The ring to the scheduler was full: the RX lcore waited for room.
        ring_full_waits,
    }
}

counter_set! {
    /// One egress port, written by the scheduler.
    TxCounters {
        frames_out,
        reduce_out,
        release_out,
        retransmits_out,
        /// `tx_burst` took fewer frames than offered; the rest stayed first in line.
        tx_full_waits,
        /// No mbuf to build a frame: the send stayed queued.
        alloc_fail_waits,
        /// A send equal to one already waiting for the same group and port was merged into it.
        coalesced,
    }
}

counter_set! {
    /// One lcore loop (all the pollers it runs).
    LoopCounters {
        busy_polls,
        idle_polls,
        /// Empty passes on which the loop yielded or slept (its idle policy backed off).
        backoffs,
    }
}

counter_set! {
    /// The scheduler's own work.
    SchedCounters {
        messages,
        timers_armed,
        timers_fired,
        timer_resends,
    }
}

/// Per-group completions and re-sends, `u32` each (8 bytes a group: 8 MiB for a million).
/// Several RX lcores may complete the same group, so these use `fetch_add`.
pub struct GroupCounters {
    completions: Box<[AtomicU32]>,
    resends: Box<[AtomicU32]>,
}

impl GroupCounters {
    pub fn new(capacity: u32) -> Self {
        let mk = || {
            (0..capacity)
                .map(|_| AtomicU32::new(0))
                .collect::<Vec<_>>()
                .into_boxed_slice()
        };
        GroupCounters {
            completions: mk(),
            resends: mk(),
        }
    }
    #[inline]
    pub fn completed(&self, group: u32) {
        if let Some(c) = self.completions.get(group as usize) {
            c.fetch_add(1, Relaxed);
        }
    }
    #[inline]
    pub fn resent(&self, group: u32) {
        if let Some(c) = self.resends.get(group as usize) {
            c.fetch_add(1, Relaxed);
        }
    }
    pub fn completions(&self, group: u32) -> u32 {
        self.completions
            .get(group as usize)
            .map_or(0, |c| c.load(Relaxed))
    }
    pub fn resends(&self, group: u32) -> u32 {
        self.resends
            .get(group as usize)
            .map_or(0, |c| c.load(Relaxed))
    }
    /// The `n` groups with most re-sends (the ones worth looking at), then totals.
    pub fn report(&self, n: usize) -> String {
        let mut out = String::new();
        let total_c: u64 = self
            .completions
            .iter()
            .map(|c| u64::from(c.load(Relaxed)))
            .sum();
        let total_r: u64 = self
            .resends
            .iter()
            .map(|c| u64::from(c.load(Relaxed)))
            .sum();
        let active = self
            .completions
            .iter()
            .filter(|c| c.load(Relaxed) > 0)
            .count();
        let _ = writeln!(
            out,
            "groups: {active} completed at least once, {total_c} completions, {total_r} re-sends"
        );
        let mut worst: Vec<(u32, u32)> = self
            .resends
            .iter()
            .enumerate()
            .filter_map(|(g, r)| {
                let r = r.load(Relaxed);
                (r > 0).then_some((r, g as u32))
            })
            .collect();
        worst.sort_unstable_by(|a, b| b.cmp(a));
        for (r, g) in worst.into_iter().take(n) {
            let _ = writeln!(
                out,
                "  group{g}: {} completions, {r} re-sends",
                self.completions(g)
            );
        }
        out
    }
}

/// Sum a set of counter structs by name and print the non-zero ones as `prefix.name value`.
pub fn format_sum<I>(title: &str, names: &[&str], sets: I) -> String
where
    I: IntoIterator<Item = Vec<u64>>,
{
    let mut sum = vec![0u64; names.len()];
    for v in sets {
        for (s, x) in sum.iter_mut().zip(v) {
            *s += x;
        }
    }
    let mut out = String::new();
    let parts: Vec<String> = names
        .iter()
        .zip(&sum)
        .filter(|(_, v)| **v > 0)
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    let _ = writeln!(
        out,
        "{title}: {}",
        if parts.is_empty() {
            "-".to_string()
        } else {
            parts.join(" ")
        }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_by_name_and_skips_zeroes() {
        let a = RxCounters::default();
        let b = RxCounters::default();
        bump(&a.frames, 3);
        bump(&b.frames, 4);
        bump(&b.drop_bad_magic, 1);
        let s = format_sum("rx", RxCounters::NAMES, [a.values(), b.values()]);
        assert_eq!(s, "rx: frames=7 drop_bad_magic=1\n");
        assert_eq!(RxCounters::NAMES.len(), a.values().len());
    }

    #[test]
    fn group_counters_are_bounded_and_report_worst() {
        let g = GroupCounters::new(10);
        g.completed(3);
        g.resent(3);
        g.resent(3);
        g.resent(5);
        g.completed(99); // out of range: ignored, not a panic
        assert_eq!(g.completions(3), 1);
        let r = g.report(1);
        assert!(r.contains("1 completions, 3 re-sends"), "{r}");
        assert!(r.contains("group3: 1 completions, 2 re-sends"), "{r}");
        assert!(!r.contains("group5"), "{r}");
    }
}
