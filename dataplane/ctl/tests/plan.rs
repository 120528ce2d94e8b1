//! The tree planner on a 16-switch, 64-host leaf-spine fabric (4 spines, 12 leaf switches,
//! every leaf switch linked to every spine, 64 hosts spread over the leaf switches: a 2-level
//! fat tree): the emitted `[[groups]]` blocks are loaded through the switch's own configuration
//! parser into one group table per switch, an in-memory router carries the frames over the
//! topology's links, and barriers must complete, never before every member arrived. Then every
//! refusal.

use barrier_ctl::plan::{plan, Plan, PlanError, PlanRequest, Topology, TopologyError};
use barrier_protocol::switch::{Action, Event, Outcome, Reject};
use barrier_protocol::table::GroupTable;
use barrier_protocol::wire::Kind;
use barrier_protocol::{Epoch, GroupId, PortIdx, Seq};
use barrier_switch::engine::build_table;
use std::collections::{HashMap, HashSet, VecDeque};

const SPINES: usize = 4;
const LEAVES: usize = 12;
const HOSTS: usize = 64;

/// The fabric as a topology file: spine`j` port `d<i>` to leaf`i` port `up<j>`; host `k` on
/// leaf `k % 12`, port `h<k / 12>`.
fn fabric() -> String {
    let mut s = String::new();
    for j in 0..SPINES {
        s += &format!("[[switches]]\nname = \"spine{j}\"\n");
    }
    for i in 0..LEAVES {
        s += &format!("[[switches]]\nname = \"leaf{i:02}\"\n");
    }
    for k in 0..HOSTS {
        s += &format!("[[hosts]]\nname = \"h{k:02}\"\n");
    }
    for i in 0..LEAVES {
        for j in 0..SPINES {
            s += &format!("[[links]]\na = \"leaf{i:02}:up{j}\"\nb = \"spine{j}:d{i}\"\n");
        }
    }
    for k in 0..HOSTS {
        s += &format!(
            "[[links]]\na = \"h{k:02}:eth0\"\nb = \"leaf{:02}:h{}\"\n",
            k % LEAVES,
            k / LEAVES
        );
    }
    s
}

fn req(group: u32, members: &[&str]) -> PlanRequest {
    PlanRequest {
        group,
        epoch: None,
        members: members.iter().map(|m| m.to_string()).collect(),
        resend_timeout_us: 1000,
    }
}

fn all_hosts() -> Vec<String> {
    (0..HOSTS).map(|k| format!("h{k:02}")).collect()
}

/// Where a frame sent on (node, port) arrives: the topology's links, both ways.
type Wiring = HashMap<(String, String), (String, String)>;

fn wiring(topo_text: &str) -> Wiring {
    let v: toml::Value = toml::from_str(topo_text).unwrap();
    let mut w = Wiring::new();
    let split = |s: &str| {
        let (n, p) = s.split_once(':').unwrap_or((s, ""));
        (n.to_string(), p.to_string())
    };
    for l in v["links"].as_array().unwrap() {
        let a = split(l["a"].as_str().unwrap());
        let b = split(l["b"].as_str().unwrap());
        w.insert(a.clone(), b.clone());
        w.insert(b, a);
    }
    w
}

/// One in-process switch per planned switch: a full switch file (every port the topology
/// gives it, one lcore) around the plan's block, parsed by `barrier_switch::config::parse`.
struct Fabric {
    tables: HashMap<String, (GroupTable, Vec<String>)>,
    hosts: HashSet<String>,
    wiring: Wiring,
    /// The group's epoch (the plan's).
    epoch: Epoch,
    /// Frames of another epoch the switches refused.
    other_epoch: std::cell::Cell<u64>,
}

fn load(plan: &Plan, topo_text: &str) -> Fabric {
    let wiring = wiring(topo_text);
    let mut tables = HashMap::new();
    for sw in &plan.switches {
        let mut ports: Vec<&String> = wiring
            .keys()
            .filter(|(n, _)| *n == sw.switch)
            .map(|(_, p)| p)
            .collect();
        ports.sort();
        let mut file = String::from("[eal]\nargs = [\"-l\", \"0\"]\n");
        for (i, p) in ports.iter().enumerate() {
            file += &format!("[[ports]]\nname = \"{p}\"\nvdev = \"net_ring{i}\"\n");
        }
        let polls: Vec<String> = ports.iter().map(|p| format!("\"{p}\"")).collect();
        file += &format!(
            "[lcores]\nscheduler = 0\nshared = true\nrx = [ {{ lcore = 0, poll = [{}] }} ]\n",
            polls.join(", ")
        );
        file += &sw.toml_block(plan.group, plan.epoch);
        let spec = barrier_switch::config::parse(&file)
            .unwrap_or_else(|e| panic!("switch {}: {e}\n{file}", sw.switch));
        let table = build_table(&spec.groups).unwrap();
        let names = spec.ports.iter().map(|p| p.name.clone()).collect();
        tables.insert(sw.switch.clone(), (table, names));
    }
    let v: toml::Value = toml::from_str(topo_text).unwrap();
    let hosts = v["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap().to_string())
        .collect();
    Fabric {
        tables,
        hosts,
        wiring,
        epoch: plan.epoch.map_or(Epoch::DEFAULT, Epoch::new),
        other_epoch: std::cell::Cell::new(0),
    }
}

/// A frame on its way: arriving at (node, port).
struct Frame {
    to: (String, String),
    release: bool,
    epoch: Epoch,
    seq: Seq,
}

impl Fabric {
    #[allow(clippy::too_many_arguments)]
    fn send_from(
        &self,
        q: &mut VecDeque<Frame>,
        node: &str,
        port: &str,
        release: bool,
        epoch: Epoch,
        seq: Seq,
    ) {
        let to = self
            .wiring
            .get(&(node.to_string(), port.to_string()))
            .unwrap_or_else(|| panic!("{node}:{port} is not linked"))
            .clone();
        q.push_back(Frame {
            to,
            release,
            epoch,
            seq,
        });
    }

    /// Delivers frames until none is left; returns the releases hosts got.
    fn run(&self, group: u32, mut q: VecDeque<Frame>) -> Vec<(String, Seq)> {
        let mut got = Vec::new();
        let mut hops = 0;
        while let Some(f) = q.pop_front() {
            hops += 1;
            assert!(hops < 100_000, "frames loop");
            let (node, port) = &f.to;
            let Some((table, names)) = self.tables.get(node) else {
                if self.hosts.contains(node) {
                    assert!(f.release, "a host got a reduce");
                    got.push((node.clone(), f.seq));
                } else {
                    panic!("a frame reached switch {node}, which is not in the group's tree");
                }
                continue;
            };
            let idx = names.iter().position(|n| n == port).unwrap();
            let p = PortIdx::new(idx as u8).unwrap();
            let kind = if f.release {
                Kind::Release
            } else {
                Kind::Reduce
            };
            let ev = Event::new(kind, p, f.epoch, f.seq);
            let (outcome, actions) = table.apply(GroupId(group), ev).unwrap();
            if f.epoch != self.epoch {
                assert_eq!(outcome, Outcome::Rejected(Reject::OtherEpoch));
                self.other_epoch.set(self.other_epoch.get() + 1);
            }
            let e = actions.epoch();
            for a in actions.iter() {
                match *a {
                    Action::SendReduce { seq, port, .. } => {
                        self.send_from(&mut q, node, &names[port.get() as usize], false, e, seq)
                    }
                    Action::SendRelease { seq, ports, .. } => {
                        for port in ports {
                            self.send_from(&mut q, node, &names[port.get() as usize], true, e, seq);
                        }
                    }
                    Action::ArmTimer { .. } => {}
                    Action::SendAbort { .. } => panic!("the plan sets no failure deadline"),
                }
            }
        }
        got
    }
}

/// Barriers 0..n over the planned group: every member but one reduces, no release; the last
/// reduces, every member is released exactly once. Before each barrier every member also
/// sends a reduce of another epoch: refused by the switch it reaches, it releases nobody.
fn barriers_complete(plan: &Plan, topo_text: &str, n: u32) {
    let fabric = load(plan, topo_text);
    let stranger = Epoch::new(fabric.epoch.get().wrapping_add(1000));
    let mut order: Vec<&String> = plan.members.iter().collect();
    for seq in 0..n {
        // A different arrival order each barrier (a fixed rotation and reversal).
        let k = 7 % order.len();
        order.rotate_left(k);
        if seq % 2 == 1 {
            order.reverse();
        }
        let (last, first) = order.split_last().unwrap();
        let mut q = VecDeque::new();
        for m in &order {
            fabric.send_from(&mut q, m, "eth0", false, stranger, Seq(seq));
        }
        for m in first {
            fabric.send_from(&mut q, m, "eth0", false, fabric.epoch, Seq(seq));
        }
        let early = fabric.run(plan.group, q);
        assert!(
            early.is_empty(),
            "barrier {seq}: released before {last} arrived: {early:?}"
        );
        let mut q = VecDeque::new();
        fabric.send_from(&mut q, last, "eth0", false, fabric.epoch, Seq(seq));
        let mut got = fabric.run(plan.group, q);
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let mut want: Vec<(String, Seq)> =
            plan.members.iter().map(|m| (m.clone(), Seq(seq))).collect();
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(got, want, "barrier {seq}");
    }
    assert_eq!(
        fabric.other_epoch.get(),
        u64::from(n) * plan.members.len() as u64
    );
}

#[test]
fn fat_tree_of_16_switches_and_64_hosts_completes_barriers() {
    let text = fabric();
    let topo = Topology::parse(&text).unwrap();
    assert_eq!((topo.switches().len(), topo.hosts().len()), (16, 64));
    let hosts = all_hosts();
    let members: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let p = plan(&topo, &req(7, &members)).unwrap();
    // Every leaf switch is one hop from every spine: a spine is the root (ties by name).
    assert_eq!(p.root, "spine0");
    assert_eq!(p.switches.len(), 13);
    let root = p.switches.last().unwrap();
    assert_eq!(
        (root.switch.as_str(), root.role.as_str()),
        ("spine0", "root")
    );
    let want: Vec<String> = {
        let mut v: Vec<String> = (0..LEAVES).map(|i| format!("d{i}")).collect();
        v.sort();
        v
    };
    assert_eq!(root.children, want);
    for sw in &p.switches[..12] {
        assert_eq!(sw.role, "intermediate");
        assert_eq!(sw.parent.as_deref(), Some("up0"));
        assert_eq!(sw.depth, 1);
        let i: usize = sw.switch["leaf".len()..].parse().unwrap();
        let n = (0..HOSTS).filter(|k| k % LEAVES == i).count();
        assert_eq!(sw.children.len(), n, "{}", sw.switch);
    }
    barriers_complete(&p, &text, 5);
    // In an epoch of its own: every block says it, and the switches take only its frames.
    let mut r = req(7, &members);
    r.epoch = Some(12);
    let p12 = plan(&topo, &r).unwrap();
    assert_eq!(p12.to_toml().matches("epoch = 12\n").count(), 13);
    barriers_complete(&p12, &text, 2);
    // The same plan through JSON (what `apply` reads) is the same plan.
    let back: Plan = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
    assert_eq!(back, p);
    // The TOML output holds one block per switch.
    let toml_out = p.to_toml();
    assert_eq!(toml_out.matches("[[groups]]").count(), 13);
    assert!(toml_out.contains("# switch spine0 (depth 0)"), "{toml_out}");
}

#[test]
fn a_subset_of_members_uses_only_the_switches_it_needs() {
    let text = fabric();
    let topo = Topology::parse(&text).unwrap();
    // h00, h12 on leaf00; h05 on leaf05; h11 on leaf11.
    let p = plan(&topo, &req(3, &["h00", "h12", "h05", "h11"])).unwrap();
    let names: Vec<&str> = p.switches.iter().map(|s| s.switch.as_str()).collect();
    assert_eq!(names, ["leaf00", "leaf05", "leaf11", "spine0"]);
    assert_eq!(p.switches[0].children, ["h0", "h1"]);
    barriers_complete(&p, &text, 4);
    // All members on one leaf switch: it is the root, alone.
    let p = plan(&topo, &req(4, &["h01", "h13", "h25"])).unwrap();
    assert_eq!(p.root, "leaf01");
    assert_eq!(p.switches.len(), 1);
    assert_eq!(p.switches[0].role, "root");
    barriers_complete(&p, &text, 3);
}

/// A chain s0 - s1 - s2 - s3 with hosts at both ends and in the middle: three levels.
const CHAIN: &str = r#"
[[switches]]
name = "s0"
[[switches]]
name = "s1"
[[switches]]
name = "s2"
[[switches]]
name = "s3"
[[hosts]]
name = "a"
[[hosts]]
name = "b"
[[hosts]]
name = "c"
[[links]]
a = "s0:e"
b = "s1:w"
[[links]]
a = "s1:e"
b = "s2:w"
[[links]]
a = "s2:e"
b = "s3:w"
[[links]]
a = "a:eth0"
b = "s0:h"
[[links]]
a = "b:eth0"
b = "s3:h"
[[links]]
a = "c:eth0"
b = "s1:h"
"#;

#[test]
fn a_chain_gets_a_central_root_and_intermediates_leaf_most_first() {
    let topo = Topology::parse(CHAIN).unwrap();
    let p = plan(&topo, &req(9, &["a", "b", "c"])).unwrap();
    // s1: farthest member 2 hops (s3); s2: 2 hops (s0): tie, by name.
    assert_eq!(p.root, "s1");
    let order: Vec<(&str, u32)> = p
        .switches
        .iter()
        .map(|s| (s.switch.as_str(), s.depth))
        .collect();
    assert_eq!(order, [("s3", 2), ("s0", 1), ("s2", 1), ("s1", 0)]);
    let s2 = &p.switches[2];
    assert_eq!(
        (s2.children.clone(), s2.parent.clone()),
        (vec!["e".to_string()], Some("w".to_string()))
    );
    barriers_complete(&p, CHAIN, 4);
}

fn refused(topo: &str, members: &[&str], want: PlanError) {
    let t = Topology::parse(topo).unwrap();
    assert_eq!(plan(&t, &req(1, members)), Err(want.clone()));
    assert!(!want.to_string().is_empty());
}

#[test]
fn refusals() {
    let with = |extra: &str| format!("{CHAIN}{extra}");
    refused(CHAIN, &[], PlanError::NoMembers);
    refused(CHAIN, &["a", "zz"], PlanError::UnknownMember("zz".into()));
    refused(CHAIN, &["a", "s2"], PlanError::NotAHost("s2".into()));
    refused(
        CHAIN,
        &["a", "b", "a"],
        PlanError::DuplicateMember("a".into()),
    );
    // A host with no link.
    refused(
        &with("[[hosts]]\nname = \"lonely\"\n"),
        &["a", "lonely"],
        PlanError::NotAttached("lonely".into()),
    );
    // A host on two switches.
    refused(
        &with("[[hosts]]\nname = \"two\"\n[[links]]\na = \"two\"\nb = \"s0:x\"\n[[links]]\na = \"two\"\nb = \"s2:x\"\n"),
        &["a", "two"],
        PlanError::MultiHomed {
            host: "two".into(),
            n: 2,
        },
    );
    // A switch island: its host is unreachable from the others.
    refused(
        &with("[[switches]]\nname = \"island\"\n[[hosts]]\nname = \"far\"\n[[links]]\na = \"far\"\nb = \"island:h\"\n"),
        &["a", "b", "far"],
        PlanError::Unreachable {
            from: "a".into(),
            unreachable: vec!["far".into()],
        },
    );
    // Two members behind one port (a shared segment): one child per port per group.
    refused(
        &with("[[hosts]]\nname = \"d\"\n[[links]]\na = \"d\"\nb = \"s0:h\"\n"),
        &["a", "d"],
        PlanError::PortUsedTwice {
            group: 1,
            switch: "s0".into(),
            port: "h".into(),
            first: "member \"a\"".into(),
            second: "member \"d\"".into(),
        },
    );
    // A member on the port that leads to the parent.
    refused(
        &with("[[hosts]]\nname = \"e\"\n[[links]]\na = \"e\"\nb = \"s0:e\"\n"),
        &["a", "b", "e"],
        PlanError::PortUsedTwice {
            group: 1,
            switch: "s0".into(),
            port: "e".into(),
            first: "the parent".into(),
            second: "member \"e\"".into(),
        },
    );
    // 65 members on one switch.
    let mut wide = String::from("[[switches]]\nname = \"big\"\n");
    for k in 0..65 {
        wide += &format!("[[hosts]]\nname = \"w{k}\"\n[[links]]\na = \"w{k}\"\nb = \"big:p{k}\"\n");
    }
    let names: Vec<String> = (0..65).map(|k| format!("w{k}")).collect();
    let members: Vec<&str> = names.iter().map(String::as_str).collect();
    refused(
        &wide,
        &members,
        PlanError::FanIn {
            group: 1,
            switch: "big".into(),
            n: 65,
        },
    );
    // ...and 64 are fine.
    let t = Topology::parse(&wide).unwrap();
    assert!(plan(&t, &req(1, &members[..64])).is_ok());
    // Request values.
    let t = Topology::parse(CHAIN).unwrap();
    assert_eq!(
        plan(&t, &req(1 << 20, &["a"])),
        Err(PlanError::GroupOutOfRange(1 << 20))
    );
    let mut r = req(1, &["a"]);
    r.resend_timeout_us = 0;
    assert_eq!(plan(&t, &r), Err(PlanError::ZeroTimeout));
}

#[test]
fn topology_refusals() {
    let base = "[[switches]]\nname = \"s\"\n[[hosts]]\nname = \"h\"\n";
    for (extra, want) in [
        (
            "[[switches]]\nname = \"s\"\n",
            TopologyError::DuplicateName("s".into()),
        ),
        (
            "[[hosts]]\nname = \"s\"\n",
            TopologyError::DuplicateName("s".into()),
        ),
        (
            "[[links]]\na = \"h\"\nb = \"t:1\"\n",
            TopologyError::UnknownNode {
                link: 0,
                name: "t".into(),
            },
        ),
        (
            "[[links]]\na = \"h\"\nb = \"s\"\n",
            TopologyError::MissingPort {
                link: 0,
                end: "s".into(),
            },
        ),
        (
            "[[hosts]]\nname = \"g\"\n[[links]]\na = \"h\"\nb = \"g\"\n",
            TopologyError::HostToHost {
                link: 0,
                a: "h".into(),
                b: "g".into(),
            },
        ),
        (
            "[[links]]\na = \"s:1\"\nb = \"s:2\"\n",
            TopologyError::SelfLink {
                link: 0,
                name: "s".into(),
            },
        ),
    ] {
        assert_eq!(
            Topology::parse(&format!("{base}{extra}")).unwrap_err(),
            want
        );
    }
    match Topology::parse("[[switchs]]\nname = \"s\"\n") {
        Err(TopologyError::Toml(e)) => assert!(e.contains("unknown field `switchs`"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn plan_is_deterministic() {
    let text = fabric();
    let topo = Topology::parse(&text).unwrap();
    let hosts = all_hosts();
    let members: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let a = plan(&topo, &req(7, &members)).unwrap();
    let b = plan(&topo, &req(7, &members)).unwrap();
    assert_eq!(a, b);
}

/// The topology in docs/operations.md plans as the page shows.
#[test]
fn the_operations_page_example_plans_as_shown() {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md"),
    )
    .unwrap();
    let start = page.find("```toml topology\n").expect("a topology example") + 17;
    let topo = &page[start..start + page[start..].find("```").unwrap()];
    let cmd = "$ barrierctl plan topo.toml --group 7 --members h1,h2,h3,h4\n";
    let out_start = page.find(cmd).expect("the plan command") + cmd.len();
    let shown = &page[out_start..out_start + page[out_start..].find("$ barrierctl").unwrap()];
    let t = Topology::parse(topo).unwrap();
    let p = plan(&t, &req(7, &["h1", "h2", "h3", "h4"])).unwrap();
    assert_eq!(p.to_toml(), shown);
    barriers_complete(&p, topo, 3);
    assert_eq!(
        plan(&t, &req(7, &["h1", "h9"])).unwrap_err().to_string(),
        "unknown member \"h9\": no such host in the topology"
    );
}
