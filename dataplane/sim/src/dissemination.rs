//! The dissemination barrier (Hensgen, Finkel and Manber; what MPI libraries use), modelled on
//! the same leaves, tree and link model as the in-network barrier: N leaves, ceil(log2 N)
//! rounds; in round k leaf i sends a message to leaf (i + 2^k) mod N and waits for the one
//! from leaf (i - 2^k) mod N. Every message is routed hop by hop through the switches (up to
//! the lowest common ancestor of the two leaves, then down), each hop one frame on one link,
//! queueing behind the other frames on that link.

use crate::link::{Faults, LinkParams, Network};
use crate::queue::EventQueue;
use crate::report::LatencyStats;
use crate::rng::Rng;
use crate::simulation::ComputeModel;
use crate::topology::{Dir, NodeRef, Topology};
use barrier_protocol::Time;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct DisseminationReport {
    pub leaves: u64,
    pub rounds: u32,
    pub barriers: u64,
    /// Per barrier: last leaf's completion minus last leaf's arrival, in modelled ns.
    pub latency: LatencyStats,
    /// End-to-end messages: leaves x rounds.
    pub messages_per_barrier: f64,
    /// Frames on links: every message counts once per link it crosses.
    pub link_frames_per_barrier: f64,
    pub mean_hops_per_message: f64,
    pub modelled_time_ns: u64,
    pub events: u64,
    /// Leaves that completed a barrier before every leaf had arrived at it: a check of the
    /// model itself, always 0 for a correct dissemination barrier.
    pub safety_violations: u64,
}

#[derive(Clone, Copy, Debug)]
struct Msg {
    dst: u32,
    barrier: u32,
    round: u8,
}

#[derive(Clone, Copy, Debug)]
enum DEv {
    Hop { link: u32, dir: Dir, msg: Msg },
    Arrive { leaf: u32 },
}

#[derive(Clone, Copy, Default)]
struct LeafState {
    barrier: u64,
    round: u32,
    sent: bool,
    /// Between `Arrive` and completing `barrier`.
    active: bool,
    /// Rounds received, per barrier parity: messages of the next barrier can come in early
    /// (never of the one after: that would need this leaf to have arrived there).
    recv: [u64; 2],
}

#[derive(Clone, Copy, Default)]
struct Track {
    arrivals: u64,
    completions: u64,
    last_arrive: Time,
    last_done: Time,
}

pub fn rounds_for(n: u64) -> u32 {
    if n <= 1 {
        0
    } else {
        64 - (n - 1).leading_zeros()
    }
}

struct Model<'a> {
    topo: &'a Topology,
    n: u64,
    rounds: u32,
    barriers: u64,
    net: Network,
    queue: EventQueue<DEv>,
    leaves: Vec<LeafState>,
    tracks: Vec<Track>,
    compute: ComputeModel,
    rng: Rng,
    link_frames: u64,
    messages: u64,
    safety_violations: u64,
    now: Time,
}

pub fn run(
    topo: &Topology,
    link: LinkParams,
    compute: ComputeModel,
    barriers: u64,
    seed: u64,
) -> DisseminationReport {
    let n = topo.leaves.len() as u64;
    let mut m = Model {
        topo,
        n,
        rounds: rounds_for(n),
        barriers,
        // Lossless: this model has no retransmission, so it gets queues without limit.
        net: Network::new(
            LinkParams {
                queue_frames: 0,
                ..link
            },
            topo.links.len(),
            |_| Faults::none(),
            seed,
        ),
        queue: EventQueue::new(),
        leaves: vec![LeafState::default(); n as usize],
        tracks: vec![Track::default(); barriers as usize],
        compute,
        rng: Rng::stream(seed, 0xC0DE),
        link_frames: 0,
        messages: 0,
        safety_violations: 0,
        now: Time(0),
    };
    if barriers > 0 {
        for i in 0..n as u32 {
            let d = m.compute.draw(&mut m.rng);
            m.queue.push(Time(d), DEv::Arrive { leaf: i });
        }
    }
    while let Some((t, ev)) = m.queue.pop() {
        m.now = t;
        match ev {
            DEv::Arrive { leaf } => {
                let st = &mut m.leaves[leaf as usize];
                st.active = true;
                st.round = 0;
                st.sent = false;
                let tr = &mut m.tracks[st.barrier as usize];
                tr.arrivals += 1;
                tr.last_arrive = t;
                m.advance(t, leaf);
            }
            DEv::Hop { link, dir, msg } => m.hop(t, link, dir, msg),
        }
    }
    let mut lat: Vec<u64> = m
        .tracks
        .iter()
        .map(|t| t.last_done.saturating_sub(t.last_arrive))
        .collect();
    let b = barriers.max(1) as f64;
    DisseminationReport {
        leaves: n,
        rounds: m.rounds,
        barriers,
        latency: LatencyStats::from_samples(&mut lat),
        messages_per_barrier: m.messages as f64 / b,
        link_frames_per_barrier: m.link_frames as f64 / b,
        mean_hops_per_message: if m.messages > 0 {
            m.link_frames as f64 / m.messages as f64
        } else {
            0.0
        },
        modelled_time_ns: m.now.nanos(),
        events: m.queue.pushed(),
        safety_violations: m.safety_violations,
    }
}

impl Model<'_> {
    /// Runs leaf `i` as far as the messages it has allow.
    fn advance(&mut self, now: Time, i: u32) {
        loop {
            let st = self.leaves[i as usize];
            if !st.active {
                return;
            }
            if st.round == self.rounds {
                self.complete(now, i);
                return;
            }
            if !st.sent {
                let dst = ((i as u64 + (1u64 << st.round)) % self.n) as u32;
                self.messages += 1;
                let msg = Msg {
                    dst,
                    barrier: st.barrier as u32,
                    round: st.round as u8,
                };
                self.leaves[i as usize].sent = true;
                self.send(now, i, Dir::Up, msg);
            }
            let st = &mut self.leaves[i as usize];
            let bit = 1u64 << st.round;
            let parity = (st.barrier & 1) as usize;
            if st.recv[parity] & bit == 0 {
                return;
            }
            st.recv[parity] &= !bit;
            st.round += 1;
            st.sent = false;
        }
    }

    fn complete(&mut self, now: Time, i: u32) {
        let st = &mut self.leaves[i as usize];
        let b = st.barrier;
        let tr = &mut self.tracks[b as usize];
        if tr.arrivals < self.n {
            self.safety_violations += 1;
        }
        tr.completions += 1;
        tr.last_done = now;
        st.active = false;
        st.barrier += 1;
        if st.barrier < self.barriers {
            let d = self.compute.draw(&mut self.rng);
            self.queue.push(now + d, DEv::Arrive { leaf: i });
        }
    }

    fn send(&mut self, now: Time, link: u32, dir: Dir, msg: Msg) {
        self.link_frames += 1;
        let tx = self.net.transmit(now, link, dir, false);
        let at = tx.arrivals[0].expect("no faults in the dissemination model");
        self.queue.push(at, DEv::Hop { link, dir, msg });
    }

    /// A message finished crossing `link`: deliver it, or forward it one hop on.
    fn hop(&mut self, now: Time, link: u32, dir: Dir, msg: Msg) {
        let l = &self.topo.links[link as usize];
        let here = match dir {
            Dir::Up => l.parent,
            Dir::Down => match l.child {
                NodeRef::Leaf(i) => {
                    debug_assert_eq!(i, msg.dst);
                    return self.receive(now, msg);
                }
                NodeRef::Switch(s) => s,
            },
        };
        let sw = &self.topo.switches[here as usize];
        if sw.leaves.0 <= msg.dst && msg.dst < sw.leaves.1 {
            // Children are in depth-first order: the last child starting at or before dst.
            let idx = sw.children.partition_point(|c| c.leaves.0 <= msg.dst) - 1;
            let c = sw.children[idx].link;
            self.send(now, c, Dir::Down, msg);
        } else {
            let up = sw.parent.expect("the root holds every leaf").2;
            self.send(now, up, Dir::Up, msg);
        }
    }

    fn receive(&mut self, now: Time, msg: Msg) {
        let st = &mut self.leaves[msg.dst as usize];
        let b = msg.barrier as u64;
        assert!(
            b == st.barrier || b == st.barrier + 1,
            "message of barrier {b} at a leaf in barrier {}",
            st.barrier
        );
        st.recv[(b & 1) as usize] |= 1u64 << msg.round;
        if st.active && b == st.barrier {
            self.advance(now, msg.dst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TreeSpec;

    #[test]
    fn rounds_are_ceil_log2() {
        assert_eq!(rounds_for(1), 0);
        assert_eq!(rounds_for(2), 1);
        assert_eq!(rounds_for(3), 2);
        assert_eq!(rounds_for(64), 6);
        assert_eq!(rounds_for(65), 7);
        assert_eq!(rounds_for(65_536), 16);
    }

    #[test]
    fn counts_messages_and_hops_exactly_on_a_clean_tree() {
        let topo = Topology::build(&TreeSpec::Fanouts(vec![4, 4])).unwrap();
        let link = LinkParams {
            latency_ns: 1000,
            jitter_ns: 0,
            gbps: 0.0,
            queue_frames: 0,
        };
        let compute = ComputeModel {
            min_ns: 0,
            max_ns: 0,
            late: 0.0,
            late_ns: 0,
        };
        let r = run(&topo, link, compute, 3, 1);
        assert_eq!(r.rounds, 4);
        assert_eq!(r.messages_per_barrier, 64.0);
        // Hops from i to i + 2^k on a 4x4 tree: in-switch pairs cross 2 links, others 4.
        let expected: u32 = (0..4)
            .flat_map(|k| (0..16u32).map(move |i| (i, (i + (1 << k)) % 16)))
            .map(|(a, b)| topo.leaf_path_hops(a, b))
            .sum();
        assert_eq!(r.link_frames_per_barrier, expected as f64);
        assert_eq!(r.safety_violations, 0);
        // No jitter, no queueing, all arrive together: leaf i ends round k when it has both
        // started it and got the message leaf i - 2^k sent at the start of ITS round k.
        let mut t = vec![0u64; 16];
        for k in 0..4 {
            t = (0..16u32)
                .map(|i| {
                    let src = (i + 16 - (1 << k)) % 16;
                    t[i as usize].max(t[src as usize] + 1_000 * topo.leaf_path_hops(src, i) as u64)
                })
                .collect();
        }
        assert_eq!(r.latency.max_ns, *t.iter().max().unwrap());
        assert_eq!(r.latency.count, 3);
    }

    #[test]
    fn late_leaves_hold_everyone_back() {
        let topo = Topology::build(&TreeSpec::Random {
            seed: 3,
            max_depth: 3,
            max_fanout: 5,
            max_leaves: 40,
        })
        .unwrap();
        let compute = ComputeModel {
            min_ns: 0,
            max_ns: 5_000,
            late: 0.2,
            late_ns: 100_000,
        };
        let r = run(&topo, LinkParams::default(), compute, 20, 9);
        assert_eq!(r.safety_violations, 0);
        assert_eq!(r.latency.count, 20);
        assert!(r.latency.min_ns > 0);
    }
}
