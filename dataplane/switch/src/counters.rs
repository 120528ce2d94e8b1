//! Counters: plain `AtomicU64` cells, each written by exactly one thread (Relaxed), read and
//! summed by the management thread. One set per RX poller, per egress port, the scheduler, and
//! a frugal per-group pair (completions, re-sends) as `u32` arrays. The RX poller's counts of
//! outcomes and parse errors are the protocol crate's arrays (`barrier_protocol::counts`),
//! printed under the names listed in `RX_LAYOUT`.

use barrier_protocol::counts::{OutcomeCounts, ParseErrorCounts};
use barrier_protocol::switch::{Outcome, Reject};
use barrier_protocol::table::GroupTable;
use barrier_protocol::wire::ParseError;
use barrier_protocol::GroupId;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use barrier_runtime::counter_set;
pub(crate) use barrier_runtime::counters::bump;

/// One RX poller (a port queue), written by the lcore that polls it.
#[derive(Default, Debug)]
pub struct RxCounters {
    /// Frames found in the port's RX queues when it started, freed unread: nothing received
    /// before every port is bound and started can be trusted to name its ingress port
    /// (`dpdk::Port::discard_received`). Counted on the port's first queue.
    pub discarded_at_start: AtomicU64,
    pub frames: AtomicU64,
    pub reduce_in: AtomicU64,
    pub release_in: AtomicU64,
    pub abort_in: AtomicU64,
    /// What the group table decided for each barrier frame, one cell per `Outcome`.
    pub outcomes: OutcomeCounts,
    /// Frames the parser refused, one cell per `ParseError`.
    pub parse_drops: ParseErrorCounts,
    /// A group the table does not hold or has no configuration for.
    pub drop_unknown_group: AtomicU64,
    /// The link to the scheduler was full: the RX lcore waited for room (`crate::link`).
    pub ring_full_waits: AtomicU64,
    /// Barrier frames over the port's policer rate (`crate::policer`), dropped before the table.
    pub drop_policed: AtomicU64,
    /// Frames that are not barrier frames handed to the port's exception path
    /// (`crate::exception`), and their bytes; on a port without one they are
    /// `drop_not_barrier`.
    pub exception_to_kernel: AtomicU64,
    pub exception_to_kernel_bytes: AtomicU64,
    /// Frames for the exception path its TX did not take (the kernel interface is backed up):
    /// freed.
    pub exception_drop_full: AtomicU64,
    /// Frames the kernel sent on the exception interface, sent out of the port, and their
    /// bytes. Written by the port's kernel poller (`crate::exception::KernelPoller`), not by
    /// the RX poller: these cells are in the port's first queue's set, each still with one
    /// writer.
    pub exception_from_kernel: AtomicU64,
    pub exception_from_kernel_bytes: AtomicU64,
    /// Passes on which the port's extra TX queue was full, so the kernel's frames waited in
    /// the TAP interface's queue (the kernel counts what it drops there).
    pub exception_from_kernel_waits: AtomicU64,
}

/// Where a printed RX counter lives.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum RxCell {
    DiscardedAtStart,
    Frames,
    ReduceIn,
    ReleaseIn,
    AbortIn,
    Outcome(Outcome),
    Parse(ParseError),
    UnknownGroup,
    RingFullWaits,
    Policed,
    ToKernel,
    ToKernelBytes,
    ExceptionDropFull,
    FromKernel,
    FromKernelBytes,
    FromKernelWaits,
}

/// The RX counters as printed: name and cell, in the order they have always been printed.
/// Reports, tests and scripts read these names, so each outcome's name is chosen here rather
/// than taken from `Outcome::name` (`completions` for `Completed`, `drop_not_a_child` for
/// `Rejected(NotAChild)`, ...); a parse error is `drop_` and its `ParseError::reason`. A test
/// checks that every outcome and every parse error is listed exactly once.
const RX_LAYOUT: [(&str, RxCell); 35] = [
    ("discarded_at_start", RxCell::DiscardedAtStart),
    ("frames", RxCell::Frames),
    ("reduce_in", RxCell::ReduceIn),
    ("release_in", RxCell::ReleaseIn),
    ("recorded", RxCell::Outcome(Outcome::Recorded)),
    ("completions", RxCell::Outcome(Outcome::Completed)),
    ("released_down", RxCell::Outcome(Outcome::Released)),
    ("duplicates", RxCell::Outcome(Outcome::Duplicate)),
    ("stale_reduce", RxCell::Outcome(Outcome::StaleReduce)),
    ("stale_release", RxCell::Outcome(Outcome::StaleRelease)),
    ("ahead_reduce", RxCell::Outcome(Outcome::AheadReduce)),
    ("ahead_release", RxCell::Outcome(Outcome::AheadRelease)),
    ("abort_in", RxCell::AbortIn),
    ("aborted", RxCell::Outcome(Outcome::Aborted)),
    ("after_abort", RxCell::Outcome(Outcome::AfterAbort)),
    ("drop_too_short", RxCell::Parse(ParseError::TooShort)),
    ("drop_not_barrier", RxCell::Parse(ParseError::NotBarrier)),
    ("drop_bad_magic", RxCell::Parse(ParseError::BadMagic)),
    ("drop_bad_version", RxCell::Parse(ParseError::BadVersion)),
    ("drop_bad_kind", RxCell::Parse(ParseError::BadKind)),
    (
        "drop_reserved_flags",
        RxCell::Parse(ParseError::ReservedFlags),
    ),
    (
        "drop_group_out_of_range",
        RxCell::Parse(ParseError::GroupOutOfRange),
    ),
    ("drop_bad_checksum", RxCell::Parse(ParseError::BadChecksum)),
    ("drop_unknown_group", RxCell::UnknownGroup),
    (
        "drop_not_a_child",
        RxCell::Outcome(Outcome::Rejected(Reject::NotAChild)),
    ),
    (
        "drop_not_the_parent",
        RxCell::Outcome(Outcome::Rejected(Reject::NotTheParent)),
    ),
    (
        "drop_other_epoch",
        RxCell::Outcome(Outcome::Rejected(Reject::OtherEpoch)),
    ),
    ("ring_full_waits", RxCell::RingFullWaits),
    ("drop_policed", RxCell::Policed),
    ("exception_to_kernel", RxCell::ToKernel),
    ("exception_to_kernel_bytes", RxCell::ToKernelBytes),
    ("exception_drop_full", RxCell::ExceptionDropFull),
    ("exception_from_kernel", RxCell::FromKernel),
    ("exception_from_kernel_bytes", RxCell::FromKernelBytes),
    ("exception_from_kernel_waits", RxCell::FromKernelWaits),
];

impl RxCounters {
    /// The names of `RX_LAYOUT`, in its order.
    pub const NAMES: &'static [&'static str] = &{
        let mut names = [""; RX_LAYOUT.len()];
        let mut i = 0;
        while i < names.len() {
            names[i] = RX_LAYOUT[i].0;
            i += 1;
        }
        names
    };

    /// The cell behind one printed counter.
    fn cell(&self, c: RxCell) -> &AtomicU64 {
        match c {
            RxCell::DiscardedAtStart => &self.discarded_at_start,
            RxCell::Frames => &self.frames,
            RxCell::ReduceIn => &self.reduce_in,
            RxCell::ReleaseIn => &self.release_in,
            RxCell::AbortIn => &self.abort_in,
            RxCell::Outcome(o) => &self.outcomes[o],
            RxCell::Parse(e) => &self.parse_drops[e],
            RxCell::UnknownGroup => &self.drop_unknown_group,
            RxCell::RingFullWaits => &self.ring_full_waits,
            RxCell::Policed => &self.drop_policed,
            RxCell::ToKernel => &self.exception_to_kernel,
            RxCell::ToKernelBytes => &self.exception_to_kernel_bytes,
            RxCell::ExceptionDropFull => &self.exception_drop_full,
            RxCell::FromKernel => &self.exception_from_kernel,
            RxCell::FromKernelBytes => &self.exception_from_kernel_bytes,
            RxCell::FromKernelWaits => &self.exception_from_kernel_waits,
        }
    }

    /// Current values in `RX_LAYOUT` order (same order as NAMES).
    pub fn values(&self) -> Vec<u64> {
        RX_LAYOUT
            .iter()
            .map(|&(_, c)| self.cell(c).load(Relaxed))
            .collect()
    }
}

counter_set! {
    /// One egress port, written by the scheduler.
    TxCounters {
        frames_out,
        reduce_out,
        release_out,
        abort_out,
        retransmits_out,
        /// `tx_burst` took fewer frames than offered; the rest stayed first in line.
        tx_full_waits,
        /// No mbuf to build a frame: the send stayed queued.
        alloc_fail_waits,
        /// A send equal to one already waiting for the same group and port was merged into it.
        coalesced,
        /// Frames sent in the buffer of the received frame that caused them (built by the RX
        /// lcore, `crate::link`), included in `frames_out`; the rest were built here in new
        /// mbufs.
        built_in_place,
    }
}

counter_set! {
    /// The scheduler's own work.
    SchedCounters {
        /// Actions taken from the RX pollers.
        messages,
        /// Batches they came in: one per RX burst with any action.
        batches,
        timers_armed,
        timers_fired,
        timer_resends,
        /// Failure declarations: a group aborted because a child stayed silent.
        declared,
    }
}

/// Per-group completions and re-sends, as the group table counts them in each group's slot
/// (`GroupTable::counts`: two `u32`s inside the slot's 64 bytes, counted where the decision is
/// made, no separate array to miss in). Read by the management thread.
pub struct GroupCounters {
    table: Arc<GroupTable>,
}

impl GroupCounters {
    pub fn new(table: Arc<GroupTable>) -> Self {
        GroupCounters { table }
    }
    pub fn completions(&self, group: u32) -> u32 {
        self.table.counts(GroupId(group)).completions
    }
    pub fn resends(&self, group: u32) -> u32 {
        self.table.counts(GroupId(group)).resends
    }
    /// The `n` groups with most re-sends (the ones worth looking at), then totals.
    pub fn report(&self, n: usize) -> String {
        let mut out = String::new();
        let (mut total_c, mut total_r, mut active) = (0u64, 0u64, 0usize);
        let mut worst: Vec<(u32, u32)> = Vec::new();
        for g in 0..self.table.capacity() {
            let c = self.table.counts(GroupId(g));
            total_c += u64::from(c.completions);
            total_r += u64::from(c.resends);
            active += usize::from(c.completions > 0);
            if c.resends > 0 {
                worst.push((c.resends, g));
            }
        }
        let _ = writeln!(
            out,
            "groups: {active} completed at least once, {total_c} completions, {total_r} re-sends"
        );
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
    use barrier_runtime::counters::format_sum;

    #[test]
    fn sums_by_name_and_skips_zeroes() {
        let a = RxCounters::default();
        let b = RxCounters::default();
        bump(&a.frames, 3);
        bump(&b.frames, 4);
        b.parse_drops.bump(ParseError::BadMagic);
        let s = format_sum("rx", RxCounters::NAMES, [a.values(), b.values()]);
        assert_eq!(s, "rx: frames=7 drop_bad_magic=1\n");
        assert_eq!(RxCounters::NAMES.len(), a.values().len());
    }

    #[test]
    fn rx_names_are_the_printed_ones_and_cover_every_outcome_and_parse_error() {
        // The names reports, tests and scripts read, in the order they are printed.
        assert_eq!(
            RxCounters::NAMES,
            [
                "discarded_at_start",
                "frames",
                "reduce_in",
                "release_in",
                "recorded",
                "completions",
                "released_down",
                "duplicates",
                "stale_reduce",
                "stale_release",
                "ahead_reduce",
                "ahead_release",
                "abort_in",
                "aborted",
                "after_abort",
                "drop_too_short",
                "drop_not_barrier",
                "drop_bad_magic",
                "drop_bad_version",
                "drop_bad_kind",
                "drop_reserved_flags",
                "drop_group_out_of_range",
                "drop_bad_checksum",
                "drop_unknown_group",
                "drop_not_a_child",
                "drop_not_the_parent",
                "drop_other_epoch",
                "ring_full_waits",
                "drop_policed",
                "exception_to_kernel",
                "exception_to_kernel_bytes",
                "exception_drop_full",
                "exception_from_kernel",
                "exception_from_kernel_bytes",
                "exception_from_kernel_waits",
            ]
        );
        for o in Outcome::ALL {
            let n = RX_LAYOUT
                .iter()
                .filter(|(_, c)| *c == RxCell::Outcome(o))
                .count();
            assert_eq!(n, 1, "{o:?}");
        }
        for e in ParseError::ALL {
            let named: Vec<_> = RX_LAYOUT
                .iter()
                .filter(|(_, c)| *c == RxCell::Parse(e))
                .map(|(n, _)| *n)
                .collect();
            assert_eq!(named, [format!("drop_{}", e.reason())], "{e:?}");
        }
        // Each printed name reads its own cell.
        let c = RxCounters::default();
        for (i, &(_, cell)) in RX_LAYOUT.iter().enumerate() {
            bump(c.cell(cell), i as u64 + 1);
        }
        let want: Vec<u64> = (1..=RX_LAYOUT.len() as u64).collect();
        assert_eq!(c.values(), want);
        assert_eq!(c.outcomes.get(Outcome::Completed), 6);
        assert_eq!(c.parse_drops.get(ParseError::BadChecksum), 23);
    }

    #[test]
    fn group_counters_read_the_table_and_report_worst() {
        use barrier_protocol::switch::{Event, GroupConfig};
        use barrier_protocol::{Epoch, PortIdx, PortSet, Seq};
        let table = Arc::new(GroupTable::new(10));
        let children = PortSet(0b11);
        for g in [3, 5] {
            table
                .configure(GroupId(g), GroupConfig::root(children))
                .unwrap();
        }
        let reduce = |g: u32, port: u8| {
            let ev = Event::Reduce {
                port: PortIdx::new(port).unwrap(),
                epoch: Epoch::DEFAULT,
                seq: Seq(0),
            };
            table.apply(GroupId(g), ev).unwrap();
        };
        // group 3: completes, then two stale reduces (two re-sent releases); group 5: one.
        for (g, port) in [(3, 0), (3, 1), (3, 0), (3, 1), (5, 0), (5, 1), (5, 1)] {
            reduce(g, port);
        }
        let c = GroupCounters::new(table);
        assert_eq!((c.completions(3), c.resends(3)), (1, 2));
        assert_eq!(c.completions(99), 0, "beyond the table: zero, not a panic");
        let r = c.report(1);
        assert!(
            r.contains("2 completed at least once, 2 completions, 3 re-sends"),
            "{r}"
        );
        assert!(r.contains("group3: 1 completions, 2 re-sends"), "{r}");
        assert!(!r.contains("group5"), "{r}");
    }
}
