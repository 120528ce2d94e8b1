//! The checks run on every run, every frame: safety (no release, sent or accepted, before
//! every member leaf sent its reduce), liveness (the stall window) and model checks, and the
//! violations they report with the trace of the events that led to them.

use super::Sim;
use barrier_protocol::leaf::LeafState;
use barrier_protocol::{Seq, Time};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// A switch sent a release for a barrier some leaf had not sent its reduce for.
    ReleaseBeforeAllArrived,
    /// A leaf accepted the release of a barrier some leaf had not sent its reduce for.
    LeafReleasedEarly,
    /// No progress for the stall window after the last fault.
    Stuck,
    /// The model itself found something impossible (a frame that does not parse, a send on a
    /// port with no link, a leaf accepting a release for another sequence number).
    Model,
}

#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    pub kind: ViolationKind,
    pub at_ns: u64,
    pub message: String,
    pub details: Vec<String>,
    /// The last events before the violation, oldest first.
    pub trace: Vec<String>,
    /// The last decisive events, further back: switch steps other than recording or ignoring
    /// a duplicate (completions, releases, stale frames, rejections), broken-rule
    /// applications, restarts, outages. The cause of a violation is often older than the
    /// plain trace reaches.
    pub decisions: Vec<String>,
}

impl Sim<'_> {
    /// Safety, checked where it is first at risk: a release leaves a switch only for a barrier
    /// every member leaf has sent its reduce for. The one exception is the barrier before the
    /// group's first (`first_seq - 1`), which no leaf ever waits on: claim 6's answer to a
    /// reduce with another number while the switch is at the first barrier is "the previous
    /// release", and that is it. A leaf that acted on it would still be caught by
    /// [`Sim::check_leaf_release`].
    pub(super) fn check_release(&mut self, now: Time, switch: u32, gi: usize, seq: Seq) {
        let b = self.barrier_of(seq);
        if seq == Seq(self.cfg.first_seq).prev() {
            return;
        }
        let g = &self.groups[gi];
        let arrived = g.tracks.get(b as usize).map_or(0, |t| t.arrivals);
        if arrived < g.members {
            let msg = format!(
                "sw{switch} sends release {:?} seq {} (barrier {b}) while only {arrived} of {} leaves have sent their reduce for it",
                g.id, seq.0, g.members
            );
            let details = self.waiting_leaves(gi, b);
            self.safety_violations += 1;
            self.violation(now, ViolationKind::ReleaseBeforeAllArrived, msg, details);
        }
    }

    /// Safety, checked where a leaf acts on it: leaf `leaf` accepted the release of barrier
    /// `b` (sequence `seq`) of group `gi`; every member leaf must have sent its reduce for it.
    pub(super) fn check_leaf_release(&mut self, now: Time, leaf: u32, gi: usize, b: u64, seq: Seq) {
        let g = &self.groups[gi];
        let t = &g.tracks[b as usize];
        if t.arrivals < g.members {
            let msg = format!(
                "leaf{leaf} released from barrier {b} ({:?} seq {}) while only {} of {} leaves had sent their reduce for it",
                g.id, seq.0, t.arrivals, g.members
            );
            let details = self.waiting_leaves(gi, b);
            self.safety_violations += 1;
            self.violation(now, ViolationKind::LeafReleasedEarly, msg, details);
        }
    }

    /// Members of group `gi` that have not sent their reduce for barrier `b` (up to 16).
    fn waiting_leaves(&self, gi: usize, b: u64) -> Vec<String> {
        let mut out = Vec::new();
        let mut more = 0;
        for (l, slots) in self.leaves.iter().enumerate() {
            for s in slots.iter().filter(|s| s.group as usize == gi) {
                let has_sent = s.done > b
                    || (s.done == b && matches!(s.leaf.state(), LeafState::Waiting { .. }));
                if !has_sent {
                    if out.len() < 16 {
                        out.push(format!("leaf{l} has not sent its reduce for barrier {b} (it is at barrier {}, {:?})", s.done, s.leaf.state()));
                    } else {
                        more += 1;
                    }
                }
            }
        }
        if more > 0 {
            out.push(format!("... and {more} more"));
        }
        out
    }

    pub(super) fn stuck(&mut self, at: Time, why: &str) {
        let mut details = Vec::new();
        for (gi, g) in self.groups.iter().enumerate() {
            if g.completed >= self.cfg.barriers {
                continue;
            }
            let b = g.completed;
            details.push(format!(
                "{:?}: barrier {b} (seq {}) stuck: {} of {} leaves arrived, {} released",
                g.id,
                self.cfg.first_seq.wrapping_add(b as u32),
                g.tracks[b as usize].arrivals,
                g.members,
                g.tracks[b as usize].releases
            ));
            let mut waiting = 0;
            for (l, slots) in self.leaves.iter().enumerate() {
                for s in slots
                    .iter()
                    .filter(|s| s.group as usize == gi && s.done == b)
                {
                    if waiting < 8 {
                        details.push(format!("  leaf{l}: {:?}", s.leaf.state()));
                    }
                    waiting += 1;
                }
            }
            if waiting > 8 {
                details.push(format!("  ... {} leaves at this barrier in all", waiting));
            }
            let mut shown = 0;
            for (si, sw) in self.switches.iter().enumerate() {
                for sg in sw.groups.iter().filter(|sg| sg.group as usize == gi) {
                    if shown < 16 {
                        details.push(format!(
                            "  sw{si}: {:?} (children {:?}, role {:?})",
                            sg.state, sg.cfg.children, sg.cfg.role
                        ));
                    }
                    shown += 1;
                }
            }
        }
        let msg = format!(
            "{why}: nothing progressed from {} to {} (stall window {} ns{})",
            crate::trace::fmt_time(self.quiet_since),
            crate::trace::fmt_time(at),
            self.stall_ns,
            match self.faults_stopped_at {
                Some(t) => format!(", faults stopped at {}", crate::trace::fmt_time(t)),
                None => ", faults never stopped".to_string(),
            }
        );
        self.violation(at, ViolationKind::Stuck, msg, details);
        self.halt = true;
    }

    pub(super) fn violation(
        &mut self,
        at: Time,
        kind: ViolationKind,
        message: String,
        details: Vec<String>,
    ) {
        if self.violations.len() < self.cfg.max_reported.max(1) {
            self.violations.push(Violation {
                kind,
                at_ns: at.nanos(),
                message,
                details,
                trace: self.trace.lines(),
                decisions: self.decisions.lines(),
            });
        }
        if !self.cfg.keep_going || kind == ViolationKind::Model {
            self.halt = true;
        }
    }
}
