//! Counters: plain `AtomicU64` cells, each written by exactly one thread (Relaxed), read and
//! summed by the management thread. One set per RX poller, per egress port, the scheduler, and
//! a frugal per-group pair (completions, re-sends) as `u32` arrays.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use barrier_runtime::counter_set;
pub(crate) use barrier_runtime::counters::{bump, format_sum};

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

#[cfg(test)]
mod tests {
    use super::*;

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
