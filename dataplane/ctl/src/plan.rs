//! The tree planner: a group's barrier tree over a topology of switches, hosts and links.
//!
//! A topology file names switches and hosts and the links between them; a switch's end of a
//! link is `switch:port` with the port's name in that switch's configuration (`[[ports]]
//! name`), a host's end is the host's name (or `host:interface`, kept for the reader). A port
//! may appear in more than one link (a shared segment); the planner refuses a group that would
//! use such a port twice.
//!
//! ```toml
//! [[switches]]
//! name = "spine0"
//! [[switches]]
//! name = "leaf0"
//! [[hosts]]
//! name = "h0"
//! [[links]]
//! a = "leaf0:up0"
//! b = "spine0:d0"
//! [[links]]
//! a = "h0:eth0"
//! b = "leaf0:h0"
//! ```
//!
//! [`plan`] chooses the root (the switch whose farthest member is nearest; ties by name),
//! builds a breadth-first tree from it over switch-to-switch links (so no loops, and each
//! member on a shortest path), keeps the switches that lead to a member, and gives each its
//! child ports, its parent port and its role. Refused, with the reason: an unknown member, a
//! member that is not a host, a member with no link or several links to switches, members no
//! single switch reaches, a port used twice in the group, more than 64 children at a switch.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt::Write as _;

/// Children per group at one switch (a child set is one 64-bit mask).
pub const MAX_FAN_IN: usize = barrier_protocol::MAX_PORTS;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawTopology {
    #[serde(default)]
    switches: Vec<RawNode>,
    #[serde(default)]
    hosts: Vec<RawNode>,
    #[serde(default)]
    links: Vec<RawLink>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: String,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawLink {
    a: String,
    b: String,
}

/// A node of the topology.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Node {
    Switch(usize),
    Host(usize),
}

/// A switch-to-switch link, seen from one side.
#[derive(Clone, Debug)]
struct Edge {
    /// Port on this switch.
    port: String,
    /// The switch at the other end, and its port.
    peer: usize,
    peer_port: String,
}

/// A checked topology.
#[derive(Debug)]
pub struct Topology {
    switches: Vec<String>,
    hosts: Vec<String>,
    /// Per switch, its links to other switches in file order.
    edges: Vec<Vec<Edge>>,
    /// Per host, the switch ports it is linked to.
    attach: Vec<Vec<(usize, String)>>,
}

/// A topology file that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopologyError {
    #[error("{0}")]
    Toml(String),
    #[error("{0:?} is defined twice")]
    DuplicateName(String),
    #[error("links[{link}]: unknown switch or host {name:?}")]
    UnknownNode { link: usize, name: String },
    #[error("links[{link}]: {end:?}: a switch's end names its port (\"switch:port\")")]
    MissingPort { link: usize, end: String },
    #[error("links[{link}]: links two hosts ({a:?}, {b:?}); hosts attach to switches")]
    HostToHost { link: usize, a: String, b: String },
    #[error("links[{link}]: links {name:?} to itself")]
    SelfLink { link: usize, name: String },
}

impl Topology {
    /// Parses and checks a topology file's text.
    pub fn parse(text: &str) -> Result<Topology, TopologyError> {
        let raw: RawTopology =
            toml::from_str(text).map_err(|e| TopologyError::Toml(e.to_string()))?;
        let mut names: HashMap<String, Node> = HashMap::new();
        for (i, s) in raw.switches.iter().enumerate() {
            if names.insert(s.name.clone(), Node::Switch(i)).is_some() {
                return Err(TopologyError::DuplicateName(s.name.clone()));
            }
        }
        for (i, h) in raw.hosts.iter().enumerate() {
            if names.insert(h.name.clone(), Node::Host(i)).is_some() {
                return Err(TopologyError::DuplicateName(h.name.clone()));
            }
        }
        let mut t = Topology {
            switches: raw.switches.into_iter().map(|n| n.name).collect(),
            hosts: raw.hosts.into_iter().map(|n| n.name).collect(),
            edges: Vec::new(),
            attach: Vec::new(),
        };
        t.edges = vec![Vec::new(); t.switches.len()];
        t.attach = vec![Vec::new(); t.hosts.len()];
        for (li, l) in raw.links.iter().enumerate() {
            let end = |s: &str| -> Result<(Node, Option<String>), TopologyError> {
                let (name, port) = match s.split_once(':') {
                    Some((n, p)) => (n, Some(p.to_string())),
                    None => (s, None),
                };
                let node = *names.get(name).ok_or_else(|| TopologyError::UnknownNode {
                    link: li,
                    name: name.to_string(),
                })?;
                if matches!(node, Node::Switch(_)) && port.as_deref().is_none_or(str::is_empty) {
                    return Err(TopologyError::MissingPort {
                        link: li,
                        end: s.to_string(),
                    });
                }
                Ok((node, port))
            };
            let (a, pa) = end(&l.a)?;
            let (b, pb) = end(&l.b)?;
            match (a, b) {
                (Node::Switch(x), Node::Switch(y)) => {
                    if x == y {
                        return Err(TopologyError::SelfLink {
                            link: li,
                            name: t.switches[x].clone(),
                        });
                    }
                    let (pa, pb) = (pa.unwrap_or_default(), pb.unwrap_or_default());
                    t.edges[x].push(Edge {
                        port: pa.clone(),
                        peer: y,
                        peer_port: pb.clone(),
                    });
                    t.edges[y].push(Edge {
                        port: pb,
                        peer: x,
                        peer_port: pa,
                    });
                }
                (Node::Switch(s), Node::Host(h)) => t.attach[h].push((s, pa.unwrap_or_default())),
                (Node::Host(h), Node::Switch(s)) => t.attach[h].push((s, pb.unwrap_or_default())),
                (Node::Host(_), Node::Host(_)) => {
                    return Err(TopologyError::HostToHost {
                        link: li,
                        a: l.a.clone(),
                        b: l.b.clone(),
                    })
                }
            }
        }
        Ok(t)
    }

    pub fn switches(&self) -> &[String] {
        &self.switches
    }

    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// Hop counts from switch `from` to every switch over switch-to-switch links.
    fn distances(&self, from: usize) -> Vec<Option<u32>> {
        let mut dist = vec![None; self.switches.len()];
        dist[from] = Some(0);
        let mut q = VecDeque::from([from]);
        while let Some(s) = q.pop_front() {
            let d = dist[s].expect("queued switches have a distance");
            for e in &self.edges[s] {
                if dist[e.peer].is_none() {
                    dist[e.peer] = Some(d + 1);
                    q.push_back(e.peer);
                }
            }
        }
        dist
    }
}

/// One switch's part of a group's tree.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SwitchPlan {
    pub switch: String,
    /// Hops from the root (0 at the root).
    pub depth: u32,
    /// `root` or `intermediate`.
    pub role: String,
    /// Ports to this switch's children in the group, by port name.
    pub children: Vec<String>,
    /// Port to the parent switch (intermediates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Intermediates: the re-send timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resend_timeout_us: Option<u64>,
}

/// A group's barrier tree: what every switch of it is to be configured with.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub group: u32,
    /// The run every switch is configured in (`epoch = E` in each block); absent: the
    /// switches' default, or `barrierctl apply --epoch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u32>,
    pub root: String,
    pub members: Vec<String>,
    /// Leaf-most first, the root last: the order `barrierctl apply` creates the group in.
    pub switches: Vec<SwitchPlan>,
}

/// What the planner is asked.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    pub group: u32,
    /// The group's epoch, written into every block.
    pub epoch: Option<u32>,
    pub members: Vec<String>,
    /// Re-send timeout of every intermediate.
    pub resend_timeout_us: u64,
}

/// A group the planner cannot build.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("no members given")]
    NoMembers,
    #[error("group {0} is out of range (groups are 0..{max})", max = barrier_protocol::MAX_GROUPS)]
    GroupOutOfRange(u32),
    #[error("a zero re-send timeout would re-send forever")]
    ZeroTimeout,
    #[error("unknown member {0:?}: no such host in the topology")]
    UnknownMember(String),
    #[error("member {0:?} is a switch; members are hosts")]
    NotAHost(String),
    #[error("member {0:?} is listed twice")]
    DuplicateMember(String),
    #[error("member {0:?} is unreachable: it has no link to a switch")]
    NotAttached(String),
    #[error("member {host:?} is linked to {n} switch ports; a member is one child of one port")]
    MultiHomed { host: String, n: usize },
    #[error("member(s) {unreachable:?} are unreachable from the switch of {from:?}: no switch reaches every member")]
    Unreachable {
        from: String,
        unreachable: Vec<String>,
    },
    #[error("switch {switch:?}: port {port:?} would be used twice in group {group} (by {first} and {second}); one child per port per group")]
    PortUsedTwice {
        group: u32,
        switch: String,
        port: String,
        first: String,
        second: String,
    },
    #[error("switch {switch:?}: {n} children in group {group}, a group has at most {MAX_FAN_IN} per switch")]
    FanIn {
        group: u32,
        switch: String,
        n: usize,
    },
}

/// Computes the group's tree over `topo`.
pub fn plan(topo: &Topology, req: &PlanRequest) -> Result<Plan, PlanError> {
    if req.members.is_empty() {
        return Err(PlanError::NoMembers);
    }
    if req.group >= barrier_protocol::MAX_GROUPS {
        return Err(PlanError::GroupOutOfRange(req.group));
    }
    if req.resend_timeout_us == 0 {
        return Err(PlanError::ZeroTimeout);
    }
    // Members: hosts, once each, each on exactly one switch port.
    let mut seen = BTreeSet::new();
    let mut att: Vec<(usize, String, &str)> = Vec::new(); // (switch, port, host)
    for m in &req.members {
        if !seen.insert(m.as_str()) {
            return Err(PlanError::DuplicateMember(m.clone()));
        }
        let Some(h) = topo.hosts.iter().position(|h| h == m) else {
            return Err(if topo.switches.contains(m) {
                PlanError::NotAHost(m.clone())
            } else {
                PlanError::UnknownMember(m.clone())
            });
        };
        match topo.attach[h].as_slice() {
            [] => return Err(PlanError::NotAttached(m.clone())),
            [(s, p)] => att.push((*s, p.clone(), m)),
            more => {
                return Err(PlanError::MultiHomed {
                    host: m.clone(),
                    n: more.len(),
                })
            }
        }
    }
    // Root: the switch whose farthest member is nearest; ties by name.
    let mut best: Option<(u32, &str, usize)> = None;
    for s in 0..topo.switches.len() {
        let dist = topo.distances(s);
        let ecc = att
            .iter()
            .map(|(a, _, _)| dist[*a])
            .try_fold(0u32, |acc, d| d.map(|d| acc.max(d)));
        if let Some(ecc) = ecc {
            let cand = (ecc, topo.switches[s].as_str(), s);
            if best.is_none_or(|b| (cand.0, cand.1) < (b.0, b.1)) {
                best = Some(cand);
            }
        }
    }
    let Some((_, _, root)) = best else {
        let (from, _, first) = &att[0];
        let dist = topo.distances(*from);
        let unreachable = att
            .iter()
            .filter(|(a, _, _)| dist[*a].is_none())
            .map(|(_, _, h)| h.to_string())
            .collect();
        return Err(PlanError::Unreachable {
            from: first.to_string(),
            unreachable,
        });
    };
    // Breadth-first tree from the root: parent switch, the port on the parent, the port here.
    let n = topo.switches.len();
    let mut up: Vec<Option<(usize, String, String)>> = vec![None; n];
    let mut depth = vec![None; n];
    depth[root] = Some(0u32);
    let mut q = VecDeque::from([root]);
    while let Some(s) = q.pop_front() {
        for e in &topo.edges[s] {
            if depth[e.peer].is_none() {
                depth[e.peer] = Some(depth[s].expect("visited") + 1);
                up[e.peer] = Some((s, e.port.clone(), e.peer_port.clone()));
                q.push_back(e.peer);
            }
        }
    }
    // The switches that lead to a member, with their children (port -> who is behind it).
    let mut children: BTreeMap<usize, Vec<(String, String)>> = BTreeMap::new();
    for (s, port, host) in &att {
        children
            .entry(*s)
            .or_default()
            .push((port.clone(), format!("member {host:?}")));
        let mut cur = *s;
        while let Some((p, p_port, _)) = &up[cur] {
            let list = children.entry(*p).or_default();
            let by = format!("switch {:?}", topo.switches[cur]);
            let already = list.iter().any(|(port, who)| port == p_port && *who == by);
            if already {
                break; // the path above is in the tree already
            }
            list.push((p_port.clone(), by));
            cur = *p;
        }
    }
    let mut switches = Vec::new();
    for (&s, kids) in &children {
        let name = &topo.switches[s];
        let parent = up[s].as_ref().map(|(_, _, mine)| mine.clone());
        let mut used: BTreeMap<&str, &str> = BTreeMap::new();
        let parent_use = parent.as_ref().map(|p| (p.as_str(), "the parent"));
        for (port, who) in parent_use
            .into_iter()
            .chain(kids.iter().map(|(p, w)| (p.as_str(), w.as_str())))
        {
            if let Some(first) = used.insert(port, who) {
                return Err(PlanError::PortUsedTwice {
                    group: req.group,
                    switch: name.clone(),
                    port: port.to_string(),
                    first: first.to_string(),
                    second: who.to_string(),
                });
            }
        }
        if kids.len() > MAX_FAN_IN {
            return Err(PlanError::FanIn {
                group: req.group,
                switch: name.clone(),
                n: kids.len(),
            });
        }
        let mut ports: Vec<String> = kids.iter().map(|(p, _)| p.clone()).collect();
        ports.sort();
        let is_root = s == root;
        switches.push(SwitchPlan {
            switch: name.clone(),
            depth: depth[s].expect("tree switches are reached"),
            role: if is_root { "root" } else { "intermediate" }.into(),
            children: ports,
            parent,
            resend_timeout_us: (!is_root).then_some(req.resend_timeout_us),
        });
    }
    switches.sort_by(|a, b| b.depth.cmp(&a.depth).then_with(|| a.switch.cmp(&b.switch)));
    Ok(Plan {
        group: req.group,
        epoch: req.epoch,
        root: topo.switches[root].clone(),
        members: req.members.clone(),
        switches,
    })
}

fn quoted(v: &[String]) -> String {
    v.iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl SwitchPlan {
    /// This switch's `[[groups]]` block in the switch configuration format, in `epoch` when
    /// given.
    pub fn toml_block(&self, group: u32, epoch: Option<u32>) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "[[groups]]");
        let _ = writeln!(s, "number = {group}");
        let _ = writeln!(s, "role = {:?}", self.role);
        let _ = writeln!(s, "children = [{}]", quoted(&self.children));
        if let Some(p) = &self.parent {
            let _ = writeln!(s, "parent = {p:?}");
        }
        if let Some(t) = self.resend_timeout_us {
            let _ = writeln!(s, "resend_timeout_us = {t}");
        }
        if let Some(e) = epoch {
            let _ = writeln!(s, "epoch = {e}");
        }
        s
    }
}

impl Plan {
    /// Every switch's block, each under a comment naming the switch.
    pub fn to_toml(&self) -> String {
        let mut s = format!(
            "# group {}: root {}, {} switches, {} members\n",
            self.group,
            self.root,
            self.switches.len(),
            self.members.len()
        );
        for sw in &self.switches {
            let _ = writeln!(s, "\n# switch {} (depth {})", sw.switch, sw.depth);
            s += &sw.toml_block(self.group, self.epoch);
        }
        s
    }
}
