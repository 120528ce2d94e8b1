//! A bounded ring of the last K things that happened in a run. Entries are small plain values
//! formatted only when a violation is reported, so tracing every event costs little.

use crate::topology::NodeRef;
use barrier_protocol::switch::{GroupState, Outcome};
use barrier_protocol::wire::Kind;
use barrier_protocol::{GroupId, PortIdx, Seq, Time};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug)]
pub enum TraceWhat {
    /// A node put a frame on a link; `fate` says what the link did with it.
    Send {
        from: NodeRef,
        to: NodeRef,
        kind: Kind,
        group: GroupId,
        seq: Seq,
        retransmit: bool,
        fate: Fate,
    },
    /// A frame reached a node (`port` is the switch port it came in on).
    Deliver {
        to: NodeRef,
        port: Option<PortIdx>,
        kind: Kind,
        group: GroupId,
        seq: Seq,
    },
    /// The switch control logic ran on an event.
    Control {
        switch: u32,
        group: GroupId,
        before: GroupState,
        after: GroupState,
        outcome: Outcome,
    },
    SwitchTimer {
        switch: u32,
        group: GroupId,
        seq: Seq,
        after: GroupState,
    },
    DroppedAtDownSwitch {
        switch: u32,
    },
    LeafArrive {
        leaf: u32,
        group: GroupId,
        seq: Seq,
        barrier: u64,
    },
    LeafResend {
        leaf: u32,
        group: GroupId,
        seq: Seq,
    },
    LeafReleased {
        leaf: u32,
        group: GroupId,
        seq: Seq,
        barrier: u64,
    },
    LeafIgnoredRelease {
        leaf: u32,
        group: GroupId,
        seq: Seq,
        leaf_seq: Seq,
    },
    Restart {
        switch: u32,
    },
    /// The `--broken-switch` rule changed the next control step.
    BrokenRule {
        switch: u32,
        group: GroupId,
        kind: crate::broken::BrokenSwitch,
        /// The frame it bent the rule on.
        kind_of_frame: Kind,
        port: PortIdx,
        seq: Seq,
    },
    Outage {
        link: u32,
        until: Time,
    },
    FaultsStopped,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Delivered,
    Duplicated,
    Reordered,
    Delayed,
    Lost,
    LinkDown,
    QueueFull,
}

#[derive(Clone, Copy, Debug)]
pub struct TraceEntry {
    pub at: Time,
    pub what: TraceWhat,
}

pub struct Trace {
    cap: usize,
    ring: VecDeque<TraceEntry>,
    total: u64,
}

impl Trace {
    pub fn new(cap: usize) -> Self {
        Trace {
            cap,
            ring: VecDeque::with_capacity(cap),
            total: 0,
        }
    }

    #[inline]
    pub fn push(&mut self, at: Time, what: TraceWhat) {
        self.total += 1;
        if self.cap == 0 {
            return;
        }
        if self.ring.len() == self.cap {
            self.ring.pop_front();
        }
        self.ring.push_back(TraceEntry { at, what });
    }

    /// Entries recorded in the whole run (the ring keeps the last `cap`).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The ring, oldest first, one line each.
    pub fn lines(&self) -> Vec<String> {
        self.ring.iter().map(format_entry).collect()
    }
}

pub fn fmt_time(t: Time) -> String {
    let ns = t.nanos();
    format!("{}.{:03}µs", ns / 1_000, ns % 1_000)
}

pub fn format_entry(e: &TraceEntry) -> String {
    let body = match e.what {
        TraceWhat::Send {
            from,
            to,
            kind,
            group,
            seq,
            retransmit,
            fate,
        } => format!(
            "{from} -> {to}: {} {group:?} seq {}{} [{}]",
            kind.name(),
            seq.0,
            if retransmit { " (retransmit)" } else { "" },
            match fate {
                Fate::Delivered => "sent",
                Fate::Duplicated => "sent, DUPLICATED",
                Fate::Reordered => "sent, REORDERED",
                Fate::Delayed => "sent, DELAYED",
                Fate::Lost => "LOST",
                Fate::LinkDown => "LINK DOWN",
                Fate::QueueFull => "QUEUE FULL, dropped",
            }
        ),
        TraceWhat::Deliver {
            to,
            port,
            kind,
            group,
            seq,
        } => match port {
            Some(p) => format!("{to} <- {p:?}: {} {group:?} seq {}", kind.name(), seq.0),
            None => format!("{to} <- {} {group:?} seq {}", kind.name(), seq.0),
        },
        TraceWhat::Control {
            switch,
            group,
            before,
            after,
            outcome,
        } => {
            format!("sw{switch} {group:?}: {outcome:?}; {before:?} => {after:?}")
        }
        TraceWhat::SwitchTimer {
            switch,
            group,
            seq,
            after,
        } => {
            format!(
                "sw{switch} {group:?}: re-send timer for seq {} fired; now {after:?}",
                seq.0
            )
        }
        TraceWhat::DroppedAtDownSwitch { switch } => {
            format!("sw{switch} is restarting: frame dropped")
        }
        TraceWhat::LeafArrive {
            leaf,
            group,
            seq,
            barrier,
        } => {
            format!(
                "leaf{leaf} {group:?}: arrives at barrier {barrier} (seq {}), sends reduce",
                seq.0
            )
        }
        TraceWhat::LeafResend { leaf, group, seq } => format!(
            "leaf{leaf} {group:?}: timeout, re-sends reduce seq {}",
            seq.0
        ),
        TraceWhat::LeafReleased {
            leaf,
            group,
            seq,
            barrier,
        } => {
            format!(
                "leaf{leaf} {group:?}: released from barrier {barrier} (seq {})",
                seq.0
            )
        }
        TraceWhat::LeafIgnoredRelease {
            leaf,
            group,
            seq,
            leaf_seq,
        } => {
            format!(
                "leaf{leaf} {group:?}: ignores release seq {} (at seq {})",
                seq.0, leaf_seq.0
            )
        }
        TraceWhat::BrokenRule {
            switch,
            group,
            kind,
            kind_of_frame,
            port,
            seq,
        } => format!(
            "sw{switch} {group:?}: BROKEN RULE {kind:?} applies to the {} seq {} from {port:?}",
            kind_of_frame.name(),
            seq.0
        ),
        TraceWhat::Restart { switch } => {
            format!("sw{switch} RESTARTS: every group back to fresh, timers dropped")
        }
        TraceWhat::Outage { link, until } => format!("link{link} DOWN until {}", fmt_time(until)),
        TraceWhat::FaultsStopped => "faults stop".to_string(),
    };
    format!("{:>14}  {body}", fmt_time(e.at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_last_entries() {
        let mut t = Trace::new(3);
        for i in 0..5u64 {
            t.push(Time(i), TraceWhat::Restart { switch: i as u32 });
        }
        let lines = t.lines();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("sw2 RESTARTS"));
        assert!(lines[2].contains("sw4 RESTARTS"));
        assert_eq!(t.total(), 5);
        assert_eq!(fmt_time(Time(12_345)), "12.345µs");
    }
}
