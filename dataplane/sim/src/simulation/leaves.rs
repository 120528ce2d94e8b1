//! The leaf side: every member leaf of every group runs the real `leaf::Leaf`: it computes,
//! arrives (its reduce goes up), re-sends on its timeout, and on the release computes again,
//! for the configured number of barriers and one more (see "The end of a run" in
//! docs/simulator.md).

use super::{Ev, Sim, ViolationKind};
use crate::topology::{Dir, NodeRef};
use crate::trace::TraceWhat;
use barrier_protocol::leaf::LeafState;
use barrier_protocol::wire::Kind;
use barrier_protocol::{GroupId, Seq, Time};

impl Sim<'_> {
    pub(super) fn leaf_arrive(&mut self, now: Time, leaf: u32, slot: u16) {
        let s = &mut self.leaves[leaf as usize][slot as usize];
        let send = match s.leaf.arrive(now) {
            Ok(send) => send,
            Err(e) => {
                let msg = format!("leaf{leaf} could not arrive: {e:?}");
                self.violation(now, ViolationKind::Model, msg, vec![]);
                return;
            }
        };
        let b = s.done;
        let gi = s.group as usize;
        let g = &mut self.groups[gi];
        let Some(t) = g.tracks.get_mut(b as usize) else {
            let msg = format!("leaf{leaf} arrives at barrier {b}, past the end of the run");
            self.violation(now, ViolationKind::Model, msg, vec![]);
            return;
        };
        t.arrivals += 1;
        t.last_arrive = now;
        let first = t.arrivals == 1;
        self.quiet_since = self.quiet_since.max(now);
        self.trace.push(
            now,
            TraceWhat::LeafArrive {
                leaf,
                group: send.group,
                seq: send.seq,
                barrier: b,
            },
        );
        if gi == 0 && first {
            self.barrier_started(now, b);
        }
        self.leaf_send(now, leaf, send.group, send.seq, send.retransmit);
        self.arm_leaf_timer(leaf, slot);
    }

    fn arm_leaf_timer(&mut self, leaf: u32, slot: u16) {
        let s = &mut self.leaves[leaf as usize][slot as usize];
        if let Some(d) = s.leaf.next_deadline() {
            s.gen = s.gen.wrapping_add(1);
            self.queue.push(
                d,
                Ev::LeafTimer {
                    leaf,
                    slot,
                    gen: s.gen,
                },
            );
        }
    }

    pub(super) fn leaf_timer(&mut self, now: Time, leaf: u32, slot: u16, gen: u32) {
        let s = &mut self.leaves[leaf as usize][slot as usize];
        if s.gen != gen {
            return;
        }
        match s.leaf.poll(now) {
            Some(send) => {
                self.trace.push(
                    now,
                    TraceWhat::LeafResend {
                        leaf,
                        group: send.group,
                        seq: send.seq,
                    },
                );
                self.leaf_send(now, leaf, send.group, send.seq, send.retransmit);
                self.arm_leaf_timer(leaf, slot);
            }
            None => {
                // Not due yet by the leaf's own reckoning: look again at its deadline.
                if let (LeafState::Waiting { .. }, Some(d)) =
                    (s.leaf.state(), s.leaf.next_deadline())
                {
                    self.queue
                        .push(d.max(now + 1), Ev::LeafTimer { leaf, slot, gen });
                }
            }
        }
    }

    fn leaf_send(&mut self, now: Time, leaf: u32, group: GroupId, seq: Seq, retransmit: bool) {
        if retransmit {
            self.frames.leaf_retransmits += 1;
        }
        self.transmit(
            now,
            NodeRef::Leaf(leaf),
            leaf,
            Dir::Up,
            Kind::Reduce,
            group,
            seq,
            retransmit,
        );
    }

    pub(super) fn leaf_receive(&mut self, now: Time, leaf: u32, frame: &[u8]) {
        let Some(repr) = self.parse(now, NodeRef::Leaf(leaf), frame) else {
            return;
        };
        self.trace.push(
            now,
            TraceWhat::Deliver {
                to: NodeRef::Leaf(leaf),
                port: None,
                kind: repr.kind,
                group: repr.group,
                seq: repr.seq,
            },
        );
        if repr.kind != Kind::Release {
            let msg = format!("leaf{leaf} received a {:?} frame", repr.kind);
            self.violation(now, ViolationKind::Model, msg, vec![]);
            return;
        }
        let Some(slot) = self.leaves[leaf as usize]
            .iter()
            .position(|s| self.groups[s.group as usize].id == repr.group)
        else {
            self.frames.unknown_group += 1;
            return;
        };
        let s = &mut self.leaves[leaf as usize][slot];
        let leaf_seq = s.leaf.seq();
        let Some(released) = s.leaf.on_release(now, repr.epoch, repr.seq) else {
            self.frames.leaf_ignored_releases += 1;
            self.trace.push(
                now,
                TraceWhat::LeafIgnoredRelease {
                    leaf,
                    group: repr.group,
                    seq: repr.seq,
                    leaf_seq,
                },
            );
            return;
        };
        let b = s.done;
        s.done += 1;
        s.gen = s.gen.wrapping_add(1); // its re-send timer is void now
        let finished = s.done == self.cfg.barriers;
        let gi = s.group as usize;
        self.trace.push(
            now,
            TraceWhat::LeafReleased {
                leaf,
                group: repr.group,
                seq: released.seq,
                barrier: b,
            },
        );
        if released.seq != leaf_seq {
            let msg = format!(
                "leaf{leaf} accepted release seq {} while at seq {}",
                released.seq.0, leaf_seq.0
            );
            self.violation(now, ViolationKind::Model, msg, vec![]);
        }
        self.check_leaf_release(now, leaf, gi, b, released.seq);
        let g = &mut self.groups[gi];
        let t = &mut g.tracks[b as usize];
        t.releases += 1;
        t.last_release = now;
        if t.releases == g.members && b < self.cfg.barriers {
            g.completed += 1;
        }
        self.quiet_since = self.quiet_since.max(now);
        if finished {
            self.unfinished_slots -= 1;
        }
        // A leaf done with its last counted barrier goes on to the next one, as an application
        // would: a restarted switch may need a reduce for the next barrier as the evidence
        // that the last one completed (see docs/simulator.md, "The end of a run").
        if b < self.cfg.barriers {
            let d = self.cfg.compute.draw(&mut self.compute_rng);
            self.queue.push(
                now + d,
                Ev::LeafCompute {
                    leaf,
                    slot: slot as u16,
                },
            );
        }
    }
}
