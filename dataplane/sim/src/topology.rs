//! The modelled barrier tree: switches (the root and intermediates), leaves, the links between
//! them and the per-switch, per-group configuration (child-port and parent-port registers) that
//! the management module of the method would write. Leaves are numbered in depth-first order,
//! so every switch's subtree is one contiguous range of leaves (the dissemination model routes
//! with it).

use crate::rng::Rng;
use barrier_protocol::backoff::Backoff;
use barrier_protocol::switch::{GroupConfig, Role};
use barrier_protocol::{Epoch, GroupId, PortIdx, PortSet, MAX_GROUPS, MAX_PORTS};
use serde::Serialize;
use std::fmt;

/// Children a root may have: every port can lead to a child.
pub const MAX_ROOT_CHILDREN: usize = MAX_PORTS;
/// Children an intermediate switch may have: one of its `MAX_PORTS` ports leads to its parent.
pub const MAX_INTERMEDIATE_CHILDREN: usize = MAX_PORTS - 1;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeRef {
    Switch(u32),
    Leaf(u32),
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeRef::Switch(s) => write!(f, "sw{s}"),
            NodeRef::Leaf(l) => write!(f, "leaf{l}"),
        }
    }
}

/// How to build a tree.
#[derive(Clone, Debug, PartialEq)]
pub enum TreeSpec {
    /// Root fanout, then the fanout of every switch on each next level; the last level's
    /// children are leaves. `[4, 4, 4]`: 64 leaves under 1 + 4 + 16 switches.
    Fanouts(Vec<usize>),
    /// A random shape: up to `max_depth` switch levels, 1..=`max_fanout` children per switch,
    /// a mix of leaf and switch children at every level, at most about `max_leaves` leaves;
    /// child and parent port numbers are shuffled.
    Random {
        seed: u64,
        max_depth: u32,
        max_fanout: usize,
        max_leaves: usize,
    },
}

impl TreeSpec {
    /// Parses "4,4,4" (also "4x4x4").
    pub fn parse_fanouts(s: &str) -> Result<TreeSpec, String> {
        let f: Result<Vec<usize>, _> = s
            .split([',', 'x'])
            .map(|p| p.trim().parse::<usize>())
            .collect();
        let f = f.map_err(|e| format!("bad fanout list {s:?}: {e}"))?;
        if f.is_empty() {
            return Err("empty fanout list".into());
        }
        Ok(TreeSpec::Fanouts(f))
    }

    /// Fanouts for a tree of exactly `leaves` leaves under `levels` switch levels, as even as
    /// the port limits allow (65,536 leaves, 3 levels: 64,32,32).
    pub fn auto(leaves: usize, levels: usize) -> Result<TreeSpec, String> {
        fn search(
            n: usize,
            level: usize,
            levels: usize,
            acc: &mut Vec<usize>,
            best: &mut Option<Vec<usize>>,
        ) {
            let cap = if level == 0 {
                MAX_ROOT_CHILDREN
            } else {
                MAX_INTERMEDIATE_CHILDREN
            };
            if level + 1 == levels {
                if n >= 1 && n <= cap {
                    acc.push(n);
                    let spread = |v: &Vec<usize>| v.iter().max().unwrap() - v.iter().min().unwrap();
                    if best.as_ref().is_none_or(|b| spread(acc) < spread(b)) {
                        *best = Some(acc.clone());
                    }
                    acc.pop();
                }
                return;
            }
            for f in (1..=cap.min(n)).rev() {
                if n.is_multiple_of(f) {
                    acc.push(f);
                    search(n / f, level + 1, levels, acc, best);
                    acc.pop();
                }
            }
        }
        if levels == 0 || leaves == 0 {
            return Err("need at least one level and one leaf".into());
        }
        let mut best = None;
        search(leaves, 0, levels, &mut Vec::new(), &mut best);
        best.map(TreeSpec::Fanouts).ok_or_else(|| {
            format!(
                "no {levels}-level tree has exactly {leaves} leaves with at most {MAX_ROOT_CHILDREN} \
                 children at the root and {MAX_INTERMEDIATE_CHILDREN} below; give the fanouts"
            )
        })
    }
}

impl fmt::Display for TreeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TreeSpec::Fanouts(v) => {
                let s: Vec<String> = v.iter().map(|x| x.to_string()).collect();
                write!(f, "fanouts {}", s.join(","))
            }
            TreeSpec::Random { seed, max_depth, max_fanout, max_leaves } => write!(
                f,
                "random seed {seed} (depth <= {max_depth}, fanout <= {max_fanout}, leaves <= ~{max_leaves})"
            ),
        }
    }
}

/// One child of a switch.
#[derive(Clone, Debug)]
pub struct Child {
    pub node: NodeRef,
    /// The port of the parent switch that leads to this child.
    pub port: PortIdx,
    /// The link between the two (see [`Link`]).
    pub link: u32,
    /// Leaves under this child: `lo..hi` in depth-first numbering.
    pub leaves: (u32, u32),
}

#[derive(Clone, Debug)]
pub struct SwitchNode {
    /// `(parent switch, port of THIS switch that leads to it, link)`; `None` at the root.
    pub parent: Option<(u32, PortIdx, u32)>,
    pub children: Vec<Child>,
    pub depth: u32,
    pub leaves: (u32, u32),
}

#[derive(Clone, Debug)]
pub struct LeafNode {
    pub switch: u32,
    pub port_at_switch: PortIdx,
    /// Number of links between the leaf and the root.
    pub depth: u32,
}

/// A full-duplex link between a child (leaf or switch) and its parent switch. Link `i < leaves`
/// is leaf `i`'s uplink; link `leaves + s` is switch `s`'s uplink (the root has none).
#[derive(Clone, Debug)]
pub struct Link {
    pub child: NodeRef,
    pub parent: u32,
    pub port_at_parent: PortIdx,
    /// For a switch child: its port towards the parent.
    pub port_at_child: Option<PortIdx>,
}

/// Which way a frame crosses a link.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Dir {
    Up,
    Down,
}

/// One barrier group: its number, its member leaves and every switch's registers for it.
#[derive(Clone, Debug)]
pub struct GroupPlan {
    pub id: GroupId,
    pub members: Vec<u32>,
    /// `(switch, config)` for every switch whose subtree holds a member.
    pub switch_configs: Vec<(u32, GroupConfig)>,
}

#[derive(Clone, Debug)]
pub struct Topology {
    pub switches: Vec<SwitchNode>,
    pub leaves: Vec<LeafNode>,
    pub links: Vec<Link>,
    /// `port_links[s][p]`: the link behind port `p` of switch `s`, and the direction a frame
    /// sent out of that port takes.
    pub port_links: Vec<[Option<(u32, Dir)>; MAX_PORTS]>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TreeSummary {
    pub spec: String,
    pub leaves: usize,
    pub switches: usize,
    pub links: usize,
    /// Switch levels (root = level 1).
    pub switch_levels: u32,
    /// Most links between a leaf and the root.
    pub max_leaf_depth: u32,
    pub max_children: usize,
}

enum Shape {
    Leaf,
    Switch(Vec<Shape>),
}

impl Topology {
    pub fn build(spec: &TreeSpec) -> Result<Topology, String> {
        let (shape, shuffle) = match spec {
            TreeSpec::Fanouts(f) => (fanout_shape(f)?, None),
            TreeSpec::Random {
                seed,
                max_depth,
                max_fanout,
                max_leaves,
            } => {
                let mut rng = Rng::stream(*seed, 0x7EE);
                let depth = rng.range_inclusive(1, (*max_depth).max(1) as u64) as u32;
                let mut budget = (*max_leaves).max(1);
                let fan = (*max_fanout).clamp(1, MAX_INTERMEDIATE_CHILDREN);
                let shape = random_shape(&mut rng, 0, depth, fan, &mut budget);
                (shape, Some(rng))
            }
        };
        let mut t = Topology {
            switches: Vec::new(),
            leaves: Vec::new(),
            links: Vec::new(),
            port_links: Vec::new(),
        };
        let mut shuffle = shuffle;
        let n_leaves = count_leaves(&shape);
        t.materialize(&shape, None, 0, n_leaves as u32, &mut shuffle)?;
        // Links were pushed in creation order; sort them into the documented numbering.
        let mut links: Vec<Option<Link>> =
            vec![None; t.leaves.len() + t.switches.len().saturating_sub(1)];
        for l in t.links.drain(..) {
            let idx = match l.child {
                NodeRef::Leaf(i) => i as usize,
                NodeRef::Switch(s) => t.leaves.len() + s as usize - 1,
            };
            links[idx] = Some(l);
        }
        t.links = links
            .into_iter()
            .map(|l| l.expect("every non-root node has one uplink"))
            .collect();
        t.index_ports();
        Ok(t)
    }

    /// Link number of a node's uplink.
    pub fn uplink(&self, node: NodeRef) -> Option<u32> {
        match node {
            NodeRef::Leaf(i) => Some(i),
            NodeRef::Switch(0) => None,
            NodeRef::Switch(s) => Some(self.leaves.len() as u32 + s - 1),
        }
    }

    fn index_ports(&mut self) {
        self.port_links = vec![[None; MAX_PORTS]; self.switches.len()];
        for (li, l) in self.links.iter().enumerate() {
            self.port_links[l.parent as usize][l.port_at_parent.get() as usize] =
                Some((li as u32, Dir::Down));
            if let (NodeRef::Switch(s), Some(p)) = (l.child, l.port_at_child) {
                self.port_links[s as usize][p.get() as usize] = Some((li as u32, Dir::Up));
            }
        }
    }

    /// Creates the switch for `shape` (a `Shape::Switch`) and its subtree; returns its index.
    fn materialize(
        &mut self,
        shape: &Shape,
        parent: Option<(u32, PortIdx)>,
        depth: u32,
        total_leaves: u32,
        shuffle: &mut Option<Rng>,
    ) -> Result<u32, String> {
        let Shape::Switch(kids) = shape else {
            unreachable!("materialize is called on switches")
        };
        let cap = if parent.is_none() {
            MAX_ROOT_CHILDREN
        } else {
            MAX_INTERMEDIATE_CHILDREN
        };
        if kids.is_empty() || kids.len() > cap {
            return Err(format!(
                "a switch at depth {depth} has {} children; allowed 1..={cap} (ports are 0..{MAX_PORTS}{})",
                kids.len(),
                if parent.is_some() { ", one is the parent port" } else { "" }
            ));
        }
        let ports: Vec<u8> = match shuffle {
            Some(rng) => rng
                .permutation(MAX_PORTS)
                .into_iter()
                .map(|p| p as u8)
                .collect(),
            None => (0..MAX_PORTS as u8).collect(),
        };
        let me = self.switches.len() as u32;
        let parent_port = if parent.is_some() {
            Some(PortIdx::new(ports[kids.len()]).unwrap())
        } else {
            None
        };
        let lo = self.leaves.len() as u32;
        self.switches.push(SwitchNode {
            parent: parent.map(|(p, _)| (p, parent_port.unwrap(), 0)),
            children: Vec::with_capacity(kids.len()),
            depth,
            leaves: (lo, lo),
        });
        if let Some((p, port_at_parent)) = parent {
            let link = self.links.len() as u32; // provisional, renumbered in build()
            let _ = link;
            self.links.push(Link {
                child: NodeRef::Switch(me),
                parent: p,
                port_at_parent,
                port_at_child: parent_port,
            });
        }
        for (i, kid) in kids.iter().enumerate() {
            let port = PortIdx::new(ports[i]).unwrap();
            match kid {
                Shape::Leaf => {
                    let leaf = self.leaves.len() as u32;
                    self.leaves.push(LeafNode {
                        switch: me,
                        port_at_switch: port,
                        depth: depth + 1,
                    });
                    self.links.push(Link {
                        child: NodeRef::Leaf(leaf),
                        parent: me,
                        port_at_parent: port,
                        port_at_child: None,
                    });
                    self.switches[me as usize].children.push(Child {
                        node: NodeRef::Leaf(leaf),
                        port,
                        link: leaf,
                        leaves: (leaf, leaf + 1),
                    });
                }
                Shape::Switch(_) => {
                    let first = self.leaves.len() as u32;
                    let s =
                        self.materialize(kid, Some((me, port)), depth + 1, total_leaves, shuffle)?;
                    let last = self.leaves.len() as u32;
                    self.switches[me as usize].children.push(Child {
                        node: NodeRef::Switch(s),
                        port,
                        link: total_leaves + s - 1,
                        leaves: (first, last),
                    });
                }
            }
        }
        let hi = self.leaves.len() as u32;
        let sw = &mut self.switches[me as usize];
        sw.leaves = (lo, hi);
        if let Some(p) = sw.parent.as_mut() {
            p.2 = total_leaves + me - 1;
        }
        Ok(me)
    }

    pub fn summary(&self, spec: &TreeSpec) -> TreeSummary {
        TreeSummary {
            spec: spec.to_string(),
            leaves: self.leaves.len(),
            switches: self.switches.len(),
            links: self.links.len(),
            switch_levels: self.switches.iter().map(|s| s.depth + 1).max().unwrap_or(0),
            max_leaf_depth: self.max_leaf_depth(),
            max_children: self
                .switches
                .iter()
                .map(|s| s.children.len())
                .max()
                .unwrap_or(0),
        }
    }

    pub fn max_leaf_depth(&self) -> u32 {
        self.leaves.iter().map(|l| l.depth).max().unwrap_or(0)
    }

    /// The links a frame crosses from leaf `a` to leaf `b`: up to their lowest common ancestor,
    /// then down. Its length is the hop count the dissemination model charges.
    pub fn leaf_path_hops(&self, a: u32, b: u32) -> u32 {
        if a == b {
            return 0;
        }
        let mut s = self.leaves[a as usize].switch;
        let mut up = 1;
        while !(self.switches[s as usize].leaves.0 <= b && b < self.switches[s as usize].leaves.1) {
            s = self.switches[s as usize]
                .parent
                .expect("the root holds every leaf")
                .0;
            up += 1;
        }
        let down = self.leaves[b as usize].depth - self.switches[s as usize].depth;
        up + down
    }

    /// The group plans: group 0 spans every leaf; each further group is a random non-empty
    /// subset (drawn from `seed`), so switches see groups with different child-port sets.
    pub fn plan_groups(
        &self,
        groups: u32,
        seed: u64,
        resend_timeout_ns: u64,
        backoff: Backoff,
    ) -> Vec<GroupPlan> {
        let mut rng = Rng::stream(seed, 0x6209);
        (0..groups.max(1))
            .map(|g| {
                // 104,729 is prime, so these numbers are distinct for every g below MAX_GROUPS and
                // spread over the 20-bit group space.
                let id = GroupId((g.wrapping_mul(104_729).wrapping_add(7)) % MAX_GROUPS);
                let members: Vec<u32> = if g == 0 {
                    (0..self.leaves.len() as u32).collect()
                } else {
                    let keep = 0.3 + 0.7 * rng.unit();
                    let mut m: Vec<u32> = (0..self.leaves.len() as u32)
                        .filter(|_| rng.chance(keep))
                        .collect();
                    if m.is_empty() {
                        m.push(rng.below(self.leaves.len() as u64) as u32);
                    }
                    m
                };
                let switch_configs = self.group_configs(&members, resend_timeout_ns, backoff);
                GroupPlan {
                    id,
                    members,
                    switch_configs,
                }
            })
            .collect()
    }

    /// The child-port and parent-port registers of every switch for a group with these members.
    fn group_configs(
        &self,
        members: &[u32],
        resend_timeout_ns: u64,
        backoff: Backoff,
    ) -> Vec<(u32, GroupConfig)> {
        let mut has = vec![false; self.switches.len()];
        let mut children: Vec<PortSet> = vec![PortSet::empty(); self.switches.len()];
        for &m in members {
            let leaf = &self.leaves[m as usize];
            children[leaf.switch as usize].insert(leaf.port_at_switch);
            let mut s = leaf.switch;
            has[s as usize] = true;
            while let Some((p, _, link)) = self.switches[s as usize].parent {
                children[p as usize].insert(self.links[link as usize].port_at_parent);
                has[p as usize] = true;
                s = p;
            }
        }
        (0..self.switches.len())
            .filter(|&s| has[s])
            .map(|s| {
                let role = match self.switches[s].parent {
                    None => Role::Root,
                    Some((_, port, _)) => Role::Intermediate { parent: port },
                };
                (
                    s as u32,
                    GroupConfig {
                        role,
                        children: children[s],
                        resend_timeout_ns,
                        epoch: Epoch::DEFAULT,
                        backoff,
                        fail_after_ns: 0,
                    },
                )
            })
            .collect()
    }
}

fn count_leaves(shape: &Shape) -> usize {
    match shape {
        Shape::Leaf => 1,
        Shape::Switch(k) => k.iter().map(count_leaves).sum(),
    }
}

fn fanout_shape(f: &[usize]) -> Result<Shape, String> {
    fn level(f: &[usize]) -> Shape {
        match f {
            [] => Shape::Leaf,
            [n, rest @ ..] => Shape::Switch((0..*n).map(|_| level(rest)).collect()),
        }
    }
    if f.contains(&0) {
        return Err("a fanout of 0 leaves a switch with no children".into());
    }
    let leaves: usize = f.iter().product();
    if leaves > 1 << 22 {
        return Err(format!(
            "{leaves} leaves is more than this simulator is meant for"
        ));
    }
    Ok(level(f))
}

fn random_shape(
    rng: &mut Rng,
    depth: u32,
    max_depth: u32,
    max_fanout: usize,
    budget: &mut usize,
) -> Shape {
    let fanout = rng.range_inclusive(1, max_fanout as u64) as usize;
    let mut kids = Vec::with_capacity(fanout);
    for _ in 0..fanout {
        if *budget == 0 && !kids.is_empty() {
            break;
        }
        if depth + 1 < max_depth && rng.chance(0.6) {
            kids.push(random_shape(rng, depth + 1, max_depth, max_fanout, budget));
        } else {
            kids.push(Shape::Leaf);
            *budget = budget.saturating_sub(1);
        }
    }
    Shape::Switch(kids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_invariants(t: &Topology) {
        assert_eq!(t.links.len(), t.leaves.len() + t.switches.len() - 1);
        for (i, l) in t.links.iter().enumerate() {
            assert_eq!(t.uplink(l.child), Some(i as u32));
            assert_eq!(
                t.port_links[l.parent as usize][l.port_at_parent.get() as usize],
                Some((i as u32, Dir::Down))
            );
        }
        for (s, sw) in t.switches.iter().enumerate() {
            let cap = if s == 0 {
                MAX_ROOT_CHILDREN
            } else {
                MAX_INTERMEDIATE_CHILDREN
            };
            assert!(!sw.children.is_empty() && sw.children.len() <= cap);
            assert_eq!(sw.parent.is_none(), s == 0);
            let mut ports = PortSet::empty();
            for c in &sw.children {
                assert!(!ports.contains(c.port), "port used twice");
                ports.insert(c.port);
            }
            if let Some((_, pp, link)) = sw.parent {
                assert!(!ports.contains(pp), "parent port is also a child port");
                assert_eq!(t.links[link as usize].child, NodeRef::Switch(s as u32));
            }
            // Depth-first numbering: children ranges tile the switch's range.
            let mut next = sw.leaves.0;
            for c in &sw.children {
                assert_eq!(c.leaves.0, next);
                next = c.leaves.1;
            }
            assert_eq!(next, sw.leaves.1);
        }
    }

    #[test]
    fn fanouts_build_the_expected_tree() {
        let t = Topology::build(&TreeSpec::parse_fanouts("4,4,4").unwrap()).unwrap();
        assert_eq!(t.leaves.len(), 64);
        assert_eq!(t.switches.len(), 21);
        assert_eq!(t.max_leaf_depth(), 3);
        check_invariants(&t);
        // Leaves 0 and 1 share a switch; 0 and 4 share the level-1 switch; 0 and 16 only the root.
        assert_eq!(t.leaf_path_hops(0, 1), 2);
        assert_eq!(t.leaf_path_hops(0, 4), 4);
        assert_eq!(t.leaf_path_hops(0, 16), 6);
        assert_eq!(t.leaf_path_hops(16, 0), 6);
    }

    #[test]
    fn port_limits_are_enforced() {
        assert!(Topology::build(&TreeSpec::Fanouts(vec![64])).is_ok());
        assert!(Topology::build(&TreeSpec::Fanouts(vec![64, 63])).is_ok());
        assert!(Topology::build(&TreeSpec::Fanouts(vec![65])).is_err());
        assert!(Topology::build(&TreeSpec::Fanouts(vec![2, 64])).is_err());
        assert!(Topology::build(&TreeSpec::Fanouts(vec![2, 0])).is_err());
    }

    #[test]
    fn auto_fanouts_for_65536_leaves() {
        assert_eq!(
            TreeSpec::auto(65_536, 3).unwrap(),
            TreeSpec::Fanouts(vec![64, 32, 32])
        );
        assert_eq!(
            TreeSpec::auto(64, 3).unwrap(),
            TreeSpec::Fanouts(vec![4, 4, 4])
        );
        assert!(TreeSpec::auto(67, 2).is_err()); // prime above every cap
    }

    #[test]
    fn random_trees_respect_invariants() {
        for seed in 0..200 {
            let spec = TreeSpec::Random {
                seed,
                max_depth: 4,
                max_fanout: 8,
                max_leaves: 64,
            };
            let t = Topology::build(&spec).unwrap();
            check_invariants(&t);
            assert!(!t.leaves.is_empty());
            let t2 = Topology::build(&spec).unwrap();
            assert_eq!(
                format!("{:?}", t.links),
                format!("{:?}", t2.links),
                "deterministic"
            );
        }
    }

    #[test]
    fn group_registers_cover_exactly_the_member_paths() {
        let t = Topology::build(&TreeSpec::Random {
            seed: 9,
            max_depth: 3,
            max_fanout: 6,
            max_leaves: 40,
        })
        .unwrap();
        let plans = t.plan_groups(4, 1, 1000, Backoff::FIXED);
        assert_eq!(plans[0].members.len(), t.leaves.len());
        for plan in &plans {
            // Every member's switch lists its port; every configured switch validates.
            for (s, cfg) in &plan.switch_configs {
                cfg.validate().unwrap();
                assert_eq!(matches!(cfg.role, Role::Root), *s == 0);
            }
            let root = plan
                .switch_configs
                .iter()
                .find(|(s, _)| *s == 0)
                .expect("root always in");
            assert!(!root.1.children.is_empty());
            let ids: std::collections::HashSet<u32> = plans.iter().map(|p| p.id.0).collect();
            assert_eq!(ids.len(), plans.len());
        }
    }
}
