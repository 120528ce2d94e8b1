//! Frames on links: every frame a leaf or switch sends is emitted with `wire::FrameRepr`,
//! handed to the link model (which decides its fate: lost, duplicated, reordered, delayed,
//! dropped at a full queue or a down link) and parsed again where it arrives.

use super::{Ev, Sim, ViolationKind};
use crate::topology::{Dir, NodeRef};
use crate::trace::{Fate, TraceWhat};
use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{Epoch, GroupId, Seq, Time};

fn mac_of(node: NodeRef) -> MacAddr {
    // Locally administered unicast addresses: 02:<kind>:<index, 32-bit BE>.
    let (k, i) = match node {
        NodeRef::Leaf(i) => (0u8, i),
        NodeRef::Switch(s) => (1u8, s),
    };
    let b = i.to_be_bytes();
    MacAddr([0x02, k, b[0], b[1], b[2], b[3]])
}

impl Sim<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn transmit(
        &mut self,
        now: Time,
        from: NodeRef,
        link: u32,
        dir: Dir,
        kind: Kind,
        group: GroupId,
        seq: Seq,
        retransmit: bool,
    ) {
        let to = match dir {
            Dir::Up => NodeRef::Switch(self.topo.links[link as usize].parent),
            Dir::Down => self.topo.links[link as usize].child,
        };
        let repr = FrameRepr {
            dst: mac_of(to),
            src: mac_of(from),
            kind,
            flags: Flags::retransmit(retransmit),
            group,
            // The simulator models one run of each group: every group and leaf is in the
            // default epoch (epoch changes are the table's and the leaf's own tests).
            epoch: Epoch::DEFAULT,
            seq,
            // Exercises the optional timestamp field; the receiver checks it came back.
            tx_timestamp: Some(now.nanos()),
        };
        let mut frame = [0u8; FRAME_LEN];
        repr.emit(&mut frame);
        self.frames.sent += 1;
        if self.barrier_of(seq) >= self.cfg.barriers {
            self.frames.past_last_barrier += 1;
        }
        match kind {
            Kind::Reduce => self.frames.reduces_sent += 1,
            Kind::Release => self.frames.releases_sent += 1,
            Kind::Abort(_) => {}
        }
        let tx = self.net.transmit(now, link, dir, self.faults_active);
        let fate = if tx.queue_full {
            self.frames.dropped_queue_full += 1;
            Fate::QueueFull
        } else if tx.down {
            self.frames.dropped_link_down += 1;
            Fate::LinkDown
        } else if tx.lost {
            self.frames.lost += 1;
            Fate::Lost
        } else if tx.duplicated {
            self.frames.duplicated += 1;
            Fate::Duplicated
        } else if tx.reordered {
            Fate::Reordered
        } else if tx.delayed {
            Fate::Delayed
        } else {
            Fate::Delivered
        };
        self.frames.reordered += tx.reordered as u64;
        self.frames.delayed += tx.delayed as u64;
        self.trace.push(
            now,
            TraceWhat::Send {
                from,
                to,
                kind,
                group,
                seq,
                retransmit,
                fate,
            },
        );
        for at in tx.arrivals.into_iter().flatten() {
            self.queue.push(
                at,
                Ev::Deliver {
                    link,
                    dir,
                    frame,
                    sent: now,
                },
            );
        }
    }

    pub(super) fn parse(&mut self, now: Time, at: NodeRef, frame: &[u8]) -> Option<FrameRepr> {
        match FrameRepr::parse(frame) {
            Ok(r) => match r.tx_timestamp {
                Some(ts) if ts <= now.nanos() => {
                    let hop = now.nanos() - ts;
                    self.frames.max_hop_ns = self.frames.max_hop_ns.max(hop);
                    Some(r)
                }
                other => {
                    let msg = format!(
                        "{at} parsed a frame sent at {other:?} ns, now is {} ns",
                        now.nanos()
                    );
                    self.violation(now, ViolationKind::Model, msg, vec![]);
                    None
                }
            },
            Err(e) => {
                let msg = format!("{at} could not parse a frame the model emitted: {e:?}");
                self.violation(now, ViolationKind::Model, msg, vec![]);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_are_unique_locally_administered_unicast() {
        let a = mac_of(NodeRef::Leaf(7));
        let b = mac_of(NodeRef::Switch(7));
        assert_ne!(a, b);
        assert_eq!(a.0[0] & 0b11, 0b10);
    }
}
