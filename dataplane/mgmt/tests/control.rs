//! The control socket over a switch on in-memory wires: admission, changes seen by the data
//! path, write-back, and the socket's hostile cases.

use barrier_ctl::client::{Client, RequestError};
use barrier_ctl::proto::{Reply, Request, Response};
use barrier_mgmt::{BindError, Control, ControlServer, PortDesc, MAX_CLIENTS};
use barrier_protocol::leaf::LeafSend;
use barrier_protocol::switch::GroupConfig;
use barrier_protocol::table::GroupTable;
use barrier_protocol::wire::{FrameRepr, Kind, MacAddr};
use barrier_protocol::Seq;
use barrier_protocol::{Epoch, GroupId, PortIdx, PortSet};
use barrier_runtime::io::{MemRx, MemTx, TxQueue};
use barrier_runtime::poll::Poller;
use barrier_switch::config::{self, DEFAULT_RESEND_TIMEOUT_US};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

const PORTS: [&str; 4] = ["up", "d0", "d1", "d2"];

/// A switch on in-memory wires with ports `PORTS`, a table of `cap` groups, group 1 a root
/// of d0, d1; its pollers, the leaves' ends of its wires and its `Control`.
struct Bed {
    pollers: Vec<Box<dyn Poller>>,
    to_switch: Vec<MemTx>,
    from_switch: Vec<MemRx>,
    control: Control,
    stats: barrier_switch::engine::SwitchStats,
}

/// The ports of `PORTS` as the control socket shows them.
fn descs() -> Vec<PortDesc> {
    PORTS
        .iter()
        .enumerate()
        .map(|(i, n)| PortDesc {
            name: n.to_string(),
            device: format!("vdev:net_ring{i}"),
            peer_mac: [0xff; 6],
        })
        .collect()
}

fn bed(cap: u32) -> Bed {
    bed_watching(cap, &[])
}

/// `bed` whose RX pollers keep straggler reports of `watched` groups.
fn bed_watching(cap: u32, watched: &[u32]) -> Bed {
    let table = Arc::new(GroupTable::new(cap));
    table
        .configure(GroupId(1), GroupConfig::root(PortSet(0b110)))
        .unwrap();
    let mut ports = Vec::new();
    let mut to_switch = Vec::new();
    let mut from_switch = Vec::new();
    for name in PORTS {
        let (port, in_tx, out_rx) = barrier_switch::engine::mem_port(name, 256);
        to_switch.push(in_tx);
        from_switch.push(out_rx);
        ports.push(port);
    }
    // room for two watched groups, as `[stragglers] limit = 2` gives
    let watch = Some(Arc::new(
        barrier_mgmt::straggler::Watch::with_limit(
            watched,
            cap,
            2,
            barrier_runtime::clock::Clock::new(),
        )
        .unwrap(),
    ));
    let sw = barrier_switch::engine::SwitchBuilder::new("t", [2, 0, 0, 0, 0, 1])
        .watch(watch)
        .build(ports, table, 0);
    let control = Control::new(sw.stats.clone(), descs(), None);
    let stats = sw.stats.clone();
    let mut pollers: Vec<Box<dyn Poller>> = sw.rx.into_iter().map(|(_, _, p)| p).collect();
    pollers.push(sw.sched);
    Bed {
        pollers,
        to_switch,
        from_switch,
        control,
        stats,
    }
}

impl Bed {
    fn req(&mut self, line: &str) -> Response {
        self.control.handle_line(line.as_bytes())
    }
    fn ok(&mut self, line: &str) -> Reply {
        let r = self.req(line);
        assert!(r.ok, "{line}: {r:?}");
        r.result.unwrap()
    }
    fn refused(&mut self, line: &str, why: &str) {
        let before = self.snapshot();
        let r = self.req(line);
        assert!(!r.ok, "{line} was accepted: {r:?}");
        let e = r.error.unwrap();
        assert!(e.contains(why), "{line}: {e:?} lacks {why:?}");
        assert_eq!(self.snapshot(), before, "{line} changed the table");
    }
    /// Every group's configuration and epoch.
    fn snapshot(&self) -> Vec<(u32, Option<GroupConfig>, u32)> {
        let t = self.control.table();
        (0..t.capacity())
            .map(|n| (n, t.config(GroupId(n)), self.control.epoch(n)))
            .collect()
    }
    /// A reduce in the group's epoch (the default one for a group that does not exist).
    fn send_reduce(&mut self, port: usize, group: u32, seq: u32) {
        let epoch = self.control.epoch(group);
        self.send_reduce_in(port, group, epoch, seq);
    }
    fn send_reduce_in(&mut self, port: usize, group: u32, epoch: u32, seq: u32) {
        let f = LeafSend {
            group: GroupId(group),
            epoch: Epoch::new(epoch),
            seq: Seq(seq),
            retransmit: false,
        }
        .frame(MacAddr([2, 0, 0, 0, 0, 9]), MacAddr::BROADCAST, None)
        .to_bytes();
        self.to_switch[port].offer(&f).unwrap();
        self.to_switch[port].flush();
    }
    fn run(&mut self) {
        for _ in 0..4 {
            for p in &mut self.pollers {
                p.poll(0);
            }
        }
    }
    /// The frames the switch sent on `port`.
    fn received(&mut self, port: usize) -> Vec<(Kind, u32, u32)> {
        use barrier_runtime::io::RxQueue;
        let mut v = Vec::new();
        self.from_switch[port].rx_burst(&mut v, 1024);
        v.iter()
            .map(|b| {
                let r = FrameRepr::parse(b).unwrap();
                (r.kind, r.group.0, r.seq.0)
            })
            .collect()
    }
}

#[test]
fn create_show_reset_set_delete() {
    let mut b = bed(16);
    let r = b.ok(r#"{"op":"group_create","group":7,"children":["d0","d1"],"parent":"up","resend_timeout_ns":500000,"epoch":3}"#);
    assert_eq!(
        r,
        Reply::Changed {
            group: 7,
            action: "created".into(),
            epoch: 3
        }
    );
    let cfg = b.control.table().config(GroupId(7)).unwrap();
    assert_eq!(
        cfg,
        GroupConfig::intermediate(PortIdx::new(0).unwrap(), PortSet(0b110), 500_000)
            .with_epoch(Epoch::new(3))
    );
    // A reduce from d1: the group gathers (unknown until every child reported), d1 arrived.
    b.send_reduce(2, 7, 5);
    b.run();
    let Reply::Group { group: g } = b.ok(r#"{"op":"group_show","group":7}"#) else {
        panic!()
    };
    assert_eq!(
        (
            g.phase.as_str(),
            g.seq,
            g.arrived.clone(),
            g.registers.epoch
        ),
        ("unknown", None, vec!["d1".to_string()], 3)
    );
    assert_eq!(g.registers.parent.as_deref(), Some("up"));
    // Reset: the next epoch, the state forgotten.
    let r = b.ok(r#"{"op":"group_reset","group":7}"#);
    assert_eq!(
        r,
        Reply::Changed {
            group: 7,
            action: "reset".into(),
            epoch: 4
        }
    );
    let Reply::Group { group: g } = b.ok(r#"{"op":"group_show","group":7}"#) else {
        panic!()
    };
    assert_eq!(
        (g.phase.as_str(), g.seq, g.arrived.len()),
        ("unknown", None, 0)
    );
    b.ok(r#"{"op":"group_reset","group":7,"epoch":40}"#);
    assert_eq!(b.control.epoch(7), 40);
    // Set: children and timer change, parent and epoch stay.
    b.ok(r#"{"op":"group_set","group":7,"children":["d2"],"resend_timeout_ns":2000000}"#);
    assert_eq!(
        b.control.table().config(GroupId(7)).unwrap(),
        GroupConfig::intermediate(PortIdx::new(0).unwrap(), PortSet(0b1000), 2_000_000)
            .with_epoch(Epoch::new(40))
    );
    assert_eq!(b.control.epoch(7), 40);
    b.ok(r#"{"op":"group_set","group":7,"root":true}"#);
    assert_eq!(
        b.control.table().config(GroupId(7)).unwrap(),
        GroupConfig::root(PortSet(0b1000)).with_epoch(Epoch::new(40))
    );
    b.ok(r#"{"op":"group_set","group":7,"parent":"d0"}"#);
    assert_eq!(
        b.control.table().config(GroupId(7)).unwrap(),
        GroupConfig::intermediate(
            PortIdx::new(1).unwrap(),
            PortSet(0b1000),
            DEFAULT_RESEND_TIMEOUT_US * 1000
        )
        .with_epoch(Epoch::new(40))
    );
    // Listing: groups 1 and 7.
    let Reply::Groups { capacity, blocks } = b.ok(r#"{"op":"groups"}"#) else {
        panic!()
    };
    assert_eq!(capacity, 16);
    assert_eq!(
        blocks.iter().map(|b| (b.first, b.last)).collect::<Vec<_>>(),
        [(1, 1), (7, 7)]
    );
    // Delete: gone; its frames are dropped and counted.
    b.ok(r#"{"op":"group_delete","group":7}"#);
    assert_eq!(b.control.table().config(GroupId(7)), None);
    b.refused(
        r#"{"op":"group_show","group":7}"#,
        "group 7 is not configured",
    );
    b.send_reduce(3, 7, 0);
    b.run();
    assert!(b.received(0).is_empty());
    let Reply::Stats { sets } = b.ok(r#"{"op":"stats"}"#) else {
        panic!()
    };
    // Group 7 was the only group naming d2: the port is now no group's, so the frame is
    // refused for its port before the table (a group naming d2 would make it an unknown
    // group's frame instead, `drop_unknown_group`).
    let port_d2 = sets.iter().find(|s| s.scope == "port d2 rx").unwrap();
    assert_eq!(port_d2.counters["drop_not_a_child"], 1, "{sets:?}");
    assert_eq!(port_d2.counters["drop_unknown_group"], 0, "{sets:?}");
    let total = sets.iter().find(|s| s.scope == "rx total").unwrap();
    assert_eq!(total.counters["drop_unknown_group"], 0);
    let groups = sets.iter().find(|s| s.scope == "groups").unwrap();
    assert_eq!(groups.counters["configured"], 1);
}

#[test]
fn a_group_created_at_run_time_completes_barriers() {
    let mut b = bed(16);
    b.ok(r#"{"op":"group_create","group":9,"children":["d0","d2"]}"#);
    for seq in 0..3 {
        b.send_reduce(1, 9, seq);
        b.run();
        assert!(b.received(1).is_empty(), "released before d2 arrived");
        b.send_reduce(3, 9, seq);
        b.run();
        assert_eq!(b.received(1), [(Kind::Release, 9, seq)]);
        assert_eq!(b.received(3), [(Kind::Release, 9, seq)]);
    }
    let Reply::Group { group: g } = b.ok(r#"{"op":"group_show","group":9}"#) else {
        panic!()
    };
    assert_eq!((g.completions, g.seq), (3, Some(3)));
    // Group 1, configured before, untouched.
    assert_eq!(
        b.control.table().config(GroupId(1)),
        Some(GroupConfig::root(PortSet(0b110)))
    );
}

#[test]
fn admission_refuses_with_the_reason_and_changes_nothing() {
    let mut b = bed(16);
    let many: Vec<String> = (0..65).map(|i| format!("\"p{i}\"")).collect();
    let create = |extra: &str| format!(r#"{{"op":"group_create","group":5,{extra}}}"#);
    for (line, why) in [
        (
            r#"{"op":"group_create","group":16,"children":["d0"]}"#.to_string(),
            "outside the table: this switch holds groups 0..16",
        ),
        (create(r#""children":["d0","p9"]"#), "unknown port \"p9\""),
        (
            create(&format!("\"children\":[{}]", many.join(","))),
            "65 children, a group has at most 64",
        ),
        (
            create(r#""children":["d0","d1"],"parent":"d1""#),
            "both a child and the parent",
        ),
        (
            create(r#""children":["d0"],"parent":"nowhere""#),
            "unknown port \"nowhere\"",
        ),
        (
            // One microsecond over what the slot keeps (whole microseconds in 32 bits).
            create(r#""children":["d0"],"fail_after_ns":4294967296000"#),
            "about 71 minutes",
        ),
        (create(r#""children":[]"#), "at least one child"),
        (create(r#""children":["d0","d0"]"#), "listed twice"),
        (
            create(r#""children":["d0"],"parent":"up","resend_timeout_ns":0"#),
            "resend_timeout_us: a zero timeout would re-send forever",
        ),
        (
            create(r#""children":["d0"],"parent":"up","resend_timeout_ns":1500"#),
            "whole microseconds",
        ),
        (
            create(r#""children":["d0"],"resend_timeout_ns":1000"#),
            "resend_timeout_us: a root does not re-send",
        ),
        (
            r#"{"op":"group_create","group":1,"children":["d0"]}"#.to_string(),
            "group 1 exists already (epoch 1)",
        ),
        (
            r#"{"op":"group_reset","group":3}"#.to_string(),
            "group 3 is not configured",
        ),
        (
            r#"{"op":"group_delete","group":3}"#.to_string(),
            "group 3 is not configured",
        ),
        (
            r#"{"op":"group_delete","group":99}"#.to_string(),
            "outside the table",
        ),
        (
            r#"{"op":"group_set","group":3,"children":["d0"]}"#.to_string(),
            "group 3 is not configured",
        ),
        (
            r#"{"op":"group_set","group":1}"#.to_string(),
            "nothing to change",
        ),
        (
            r#"{"op":"group_set","group":1,"root":true,"parent":"up"}"#.to_string(),
            "exclude each other",
        ),
        (
            r#"{"op":"group_set","group":1,"parent":"d0"}"#.to_string(),
            "both a child and the parent",
        ),
        (
            r#"{"op":"group_set","group":1,"children":["d0","zz"]}"#.to_string(),
            "unknown port \"zz\"",
        ),
        (
            r#"{"op":"write_back"}"#.to_string(),
            "not started from a file",
        ),
        (
            r#"{"op":"group_create","group":5,"children":["d0"],"colour":"red"}"#.to_string(),
            "unknown field `colour`",
        ),
        (
            "{\"op\":\"group_create\",\"group\":5,".to_string(),
            "bad request",
        ),
        ("gibberish".to_string(), "bad request"),
    ] {
        b.refused(&line, why);
    }
}

/// The group's epoch and the highest this switch has had for it, as `group_show` reports
/// them (the highest only when it differs).
fn epochs(b: &mut Bed, group: u32) -> (u32, Option<u32>) {
    let Reply::Group { group: g } = b.ok(&format!(r#"{{"op":"group_show","group":{group}}}"#))
    else {
        panic!()
    };
    (g.registers.epoch, g.highest_epoch)
}

fn changed(r: Reply) -> (String, u32) {
    let Reply::Changed { action, epoch, .. } = r else {
        panic!("{r:?}")
    };
    (action, epoch)
}

#[test]
fn a_reset_to_the_epoch_the_group_is_in_is_refused_forced_or_not() {
    let mut b = bed(16);
    b.ok(r#"{"op":"group_create","group":7,"children":["d0","d1"],"epoch":5}"#);
    let why = "group 7 is in epoch 5 already: a new run needs a new epoch (the old run's frames would count in this one); leave the epoch out for the next one (6), or give one ahead of 5";
    b.refused(r#"{"op":"group_reset","group":7,"epoch":5}"#, why);
    b.refused(
        r#"{"op":"group_reset","group":7,"epoch":5,"force":true}"#,
        why,
    );
    // The file's group 1 (epoch 1 from the start) likewise.
    b.refused(
        r#"{"op":"group_reset","group":1,"epoch":1,"force":true}"#,
        "group 1 is in epoch 1 already",
    );
    assert_eq!(epochs(&mut b, 7), (5, None));
}

#[test]
fn a_reset_to_a_used_epoch_is_refused_unless_forced() {
    let mut b = bed(16);
    b.ok(r#"{"op":"group_create","group":7,"children":["d0","d1"],"epoch":5}"#);
    // behind the current (and highest) epoch
    b.refused(
        r#"{"op":"group_reset","group":7,"epoch":1}"#,
        "group 7: epoch 1 is not ahead of epoch 5, the highest this switch has had for the group: a new run needs an epoch no earlier run used; leave the epoch out for the next one (6), give one ahead of 5, or --force to reuse 1 (only when no frame of its earlier run can still arrive)",
    );
    // more than 2^31 ahead is behind, in the wrapping order
    b.refused(
        &format!(
            r#"{{"op":"group_reset","group":7,"epoch":{}}}"#,
            5u32 + (1 << 31)
        ),
        "is not ahead of epoch 5",
    );
    // forced: taken; the switch still knows 5
    assert_eq!(
        changed(b.ok(r#"{"op":"group_reset","group":7,"epoch":3,"force":true}"#)),
        ("reset".into(), 3)
    );
    assert_eq!(epochs(&mut b, 7), (3, Some(5)));
    // 4 is not the current epoch, and was never had, but it is behind the highest: refused
    b.refused(
        r#"{"op":"group_reset","group":7,"epoch":4}"#,
        "group 7: epoch 4 is not ahead of epoch 5, the highest this switch has had for the group (it is in 3 now)",
    );
    b.refused(
        r#"{"op":"group_reset","group":7,"epoch":5}"#,
        "(it is in 3 now)",
    );
    // ahead of the highest: taken, and the highest again
    assert_eq!(
        changed(b.ok(r#"{"op":"group_reset","group":7,"epoch":9}"#)),
        ("reset".into(), 9)
    );
    assert_eq!(epochs(&mut b, 7), (9, None));
    // set keeps the epoch (registers change within the run) and the highest
    b.ok(r#"{"op":"group_set","group":7,"children":["d2"]}"#);
    assert_eq!(epochs(&mut b, 7), (9, None));
}

#[test]
fn a_reset_without_an_epoch_goes_past_the_highest() {
    let mut b = bed(16);
    // the file's group 1 is in epoch 1: the next is 2
    assert_eq!(
        changed(b.ok(r#"{"op":"group_reset","group":1}"#)),
        ("reset".into(), 2)
    );
    b.ok(r#"{"op":"group_create","group":7,"children":["d0","d1"],"epoch":40}"#);
    b.ok(r#"{"op":"group_reset","group":7,"epoch":12,"force":true}"#);
    // not 13 (the current + 1), which is behind 40
    assert_eq!(
        changed(b.ok(r#"{"op":"group_reset","group":7}"#)),
        ("reset".into(), 41)
    );
    // across the wrap: to u32::MAX in two steps of less than 2^31 each, then the next is 0
    for e in [41 + (1u32 << 31) - 1, u32::MAX] {
        b.ok(&format!(r#"{{"op":"group_reset","group":7,"epoch":{e}}}"#));
    }
    assert_eq!(
        changed(b.ok(r#"{"op":"group_reset","group":7}"#)),
        ("reset".into(), 0)
    );
    assert_eq!(epochs(&mut b, 7), (0, None));
}

#[test]
fn a_deleted_number_created_again_needs_a_new_epoch_unless_forced() {
    let mut b = bed(16);
    b.ok(r#"{"op":"group_create","group":7,"children":["d0","d1"],"epoch":4}"#);
    b.ok(r#"{"op":"group_delete","group":7}"#);
    // the default epoch (1) and 4 are behind or at 4, which the switch had
    b.refused(
        r#"{"op":"group_create","group":7,"children":["d0","d1"]}"#,
        "group 7: epoch 1 is not ahead of epoch 4, the highest this switch has had for the group (deleted since): a new run needs an epoch no earlier run used; give one ahead of 4 (--epoch 5), or --force to reuse 1 (only when no frame of its earlier run can still arrive)",
    );
    b.refused(
        r#"{"op":"group_create","group":7,"children":["d0","d1"],"epoch":4}"#,
        "epoch 4 is not ahead of epoch 4",
    );
    // ahead: taken
    assert_eq!(
        changed(b.ok(r#"{"op":"group_create","group":7,"children":["d0","d1"],"epoch":5}"#)),
        ("created".into(), 5)
    );
    // forced: taken, and the switch still knows 5
    b.ok(r#"{"op":"group_delete","group":7}"#);
    assert_eq!(
        changed(b.ok(
            r#"{"op":"group_create","group":7,"children":["d0","d1"],"epoch":2,"force":true}"#
        )),
        ("created".into(), 2)
    );
    assert_eq!(epochs(&mut b, 7), (2, Some(5)));
    assert_eq!(
        changed(b.ok(r#"{"op":"group_reset","group":7}"#)),
        ("reset".into(), 6)
    );
    // the file's group 1 counts as had: deleted and created again, it needs an epoch past 1
    b.ok(r#"{"op":"group_delete","group":1}"#);
    b.refused(
        r#"{"op":"group_create","group":1,"children":["d0"]}"#,
        "group 1: epoch 1 is not ahead of epoch 1, the highest this switch has had for the group (deleted since)",
    );
    b.ok(r#"{"op":"group_create","group":1,"children":["d0"],"epoch":2}"#);
    // a number the switch never had takes the default
    assert_eq!(
        changed(b.ok(r#"{"op":"group_create","group":9,"children":["d0"]}"#)),
        ("created".into(), 1)
    );
}

/// Old clients send no `force`: their resets and creates are read as not forced.
#[test]
fn a_request_without_force_is_not_forced() {
    let mut b = bed(16);
    b.refused(
        r#"{"op":"group_reset","group":1,"epoch":0}"#,
        "epoch 0 is not ahead of epoch 1",
    );
    b.refused(
        r#"{"op":"group_reset","group":1,"epoch":2,"force":1}"#,
        "bad request",
    );
}

#[test]
fn write_back_keeps_the_other_sections() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    let text = r#"# my switch
[eal]
args = ["-l", "0,1"]

[[ports]]
name = "up"
vdev = "net_ring0"

[[ports]]
name = "d0"
vdev = "net_ring1" # the first child

[[ports]]
name = "d1"
vdev = "net_ring2"

[[ports]]
name = "d2"
vdev = "net_ring3"

[lcores]
scheduler = 1
rx = [ { lcore = 0, poll = ["up", "d0", "d1", "d2"] } ]

[[groups]]
number = 1
role = "root"
children = ["d0", "d1"]

[control]
socket = "/tmp/nb-test.sock"
capacity = 16
"#;
    std::fs::write(&path, text).unwrap();
    let spec = config::load(&path).unwrap();
    let mut b = bed(16);
    let file = spec.control.as_ref().unwrap().file.clone();
    b.control = Control::new(b.stats.clone(), descs(), file.map(config::write_back));
    b.ok(r#"{"op":"group_create","group":7,"children":["d0","d1"],"parent":"up","resend_timeout_ns":500000}"#);
    b.ok(r#"{"op":"group_create","group":8,"children":["d0","d1"],"parent":"up","resend_timeout_ns":500000}"#);
    b.ok(r#"{"op":"group_create","group":10,"children":["d2"],"epoch":7}"#);
    b.ok(r#"{"op":"group_delete","group":1}"#);
    let r = b.ok(r#"{"op":"write_back"}"#);
    assert_eq!(
        r,
        Reply::WrittenBack {
            path: path.display().to_string(),
            groups: 3
        }
    );
    let new = std::fs::read_to_string(&path).unwrap();
    assert!(new.starts_with("# my switch\n[eal]"), "{new}");
    assert!(
        new.find("[control]") < new.find("[[groups]]"),
        "the groups go after the file's other sections: {new}"
    );
    assert!(
        new.contains("vdev = \"net_ring1\" # the first child"),
        "{new}"
    );
    let spec = config::parse(&new).unwrap();
    assert_eq!(spec.groups.len(), 2, "{new}");
    assert_eq!(spec.groups[0].numbers, 7..9);
    assert_eq!(spec.groups[1].numbers, 10..11);
    let g10 = spec.groups[1].config;
    assert_eq!(
        (g10.role, g10.children, g10.epoch),
        (
            barrier_protocol::switch::Role::Root,
            PortSet(0b1000),
            Epoch::new(7)
        ),
        "the epoch is written back: {new}"
    );
    assert_eq!(
        spec.groups[0].config,
        GroupConfig::intermediate(PortIdx::new(0).unwrap(), PortSet(0b110), 500_000)
    );
    assert_eq!(spec.control.unwrap().capacity, 16);
}

/// A server on a thread over `control`, stopped and joined on drop.
struct Served {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    join: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

fn serve(control: Control) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctl.sock");
    let mut server = ControlServer::bind(&path, control).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let join = std::thread::spawn(move || {
        while !s.load(Relaxed) {
            server.serve(Duration::from_millis(10));
        }
    });
    Served {
        path,
        stop,
        join: Some(join),
        _dir: dir,
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

#[test]
fn the_socket_is_0600_and_replaces_only_a_stale_one() {
    let b = bed(4);
    let s = serve(b.control);
    let mode = std::fs::metadata(&s.path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    // A second server on the same path is refused while the first listens.
    let b2 = bed(4);
    match ControlServer::bind(&s.path, b2.control) {
        Err(BindError::InUse(_)) => {}
        Err(e) => panic!("wrong refusal {e}"),
        Ok(_) => panic!("second server bound a live socket"),
    }
    // A file that is not a socket is not replaced.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("plain");
    std::fs::write(&f, "x").unwrap();
    assert!(matches!(
        ControlServer::bind(&f, bed(4).control),
        Err(BindError::NotASocket(_))
    ));
    // A stale socket (nobody listening) is replaced; the socket goes with the server.
    let stale = dir.path().join("stale.sock");
    drop(UnixListener::bind(&stale).unwrap());
    let server = ControlServer::bind(&stale, bed(4).control).unwrap();
    assert!(stale.exists());
    drop(server);
    assert!(!stale.exists(), "the socket outlived its server");
}

#[test]
fn a_missing_socket_directory_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run/netbarrier/s.sock");
    let server = ControlServer::bind(&path, bed(4).control).unwrap();
    let mode = std::fs::metadata(path.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755, "{mode:o}");
    assert!(path.exists());
    drop(server);
    assert!(!path.exists());
}

#[test]
fn hostile_lines_get_errors_and_the_connection_stays_usable() {
    let b = bed(4);
    let s = serve(b.control);
    let mut c = Client::connect(&s.path).unwrap();
    for (bytes, why) in [
        (&b"{not json}\n"[..], "bad request"),
        (
            b"{\"op\":\"groups\",\"extra\":1}\n",
            "unknown field `extra`",
        ),
        (b"{\"op\":\"group_show\",\"group\":2}\n", "not configured"),
        (b"\xff\xff\n", "not UTF-8"),
        (b"\n", "bad request"),
    ] {
        let r = c.raw(bytes).unwrap();
        assert!(!r.ok);
        assert!(r.error.as_ref().unwrap().contains(why), "{r:?}");
    }
    // A 1 MiB line: one error, the rest of the line skipped; then a request is answered.
    let mut huge = vec![b'x'; 1 << 20];
    huge.push(b'\n');
    let r = c.raw(&huge).unwrap();
    assert!(
        r.error
            .as_ref()
            .unwrap()
            .contains("longer than 65536 bytes"),
        "{r:?}"
    );
    let reply = c.request(&Request::GroupShow { group: 1 }).unwrap();
    assert!(matches!(reply, Reply::Group { .. }), "{reply:?}");
    // Two requests in one write: two answers, in order.
    let r1 = c
        .raw(b"{\"op\":\"groups\"}\n{\"op\":\"group_show\",\"group\":3}\n")
        .unwrap();
    assert!(r1.ok);
    let r2 = c.read_response().unwrap();
    assert!(r2.error.unwrap().contains("group 3 is not configured"));
    // A refusal through the client API is `Refused`.
    match c.request(&Request::GroupDelete { group: 3 }) {
        Err(RequestError::Refused { error: e, .. }) => assert!(e.contains("not configured")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_client_that_goes_away_mid_line_is_forgotten() {
    let b = bed(4);
    let s = serve(b.control);
    {
        let mut raw = UnixStream::connect(&s.path).unwrap();
        raw.write_all(b"{\"op\":\"gro").unwrap();
    }
    let mut c = Client::connect(&s.path).unwrap();
    assert!(c.request(&Request::Groups {}).is_ok());
}

#[test]
fn connections_beyond_the_limit_get_an_error() {
    let b = bed(4);
    let s = serve(b.control);
    let mut kept = Vec::new();
    for _ in 0..MAX_CLIENTS {
        let mut c = Client::connect(&s.path).unwrap();
        // Answered: this connection was accepted and is being served.
        c.request(&Request::Ports {}).unwrap();
        kept.push(c);
    }
    let mut extra = Client::connect(&s.path).unwrap();
    let r = extra.read_response().unwrap();
    assert!(
        r.error.as_ref().unwrap().contains("too many connections"),
        "{r:?}"
    );
    drop(kept.pop());
    // A place is free again (once the server has seen the close).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = Client::connect(&s.path).unwrap();
        match c.request(&Request::Ports {}) {
            Ok(_) => break,
            Err(e) => assert!(std::time::Instant::now() < deadline, "{e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_client_that_never_reads_does_not_hold_up_the_others() {
    let b = bed(4);
    let s = serve(b.control);
    let mut slow = UnixStream::connect(&s.path).unwrap();
    slow.set_nonblocking(true).unwrap();
    let line = b"{\"op\":\"stats\"}\n".repeat(20_000);
    let mut sent = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while sent < line.len() && std::time::Instant::now() < deadline {
        match slow.write(&line[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(sent > 0);
    // The slow client's answers fill its socket and then wait; another client is served.
    let t = std::time::Instant::now();
    let mut c = Client::connect(&s.path).unwrap();
    for _ in 0..10 {
        c.request(&Request::GroupShow { group: 1 }).unwrap();
    }
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "served slowly: {:?}",
        t.elapsed()
    );
}

/// `group show` of a watched group carries its straggler report: the child that arrived last
/// in each recent barrier, and how long the barrier in progress has waited for the missing one.
#[test]
fn group_show_names_the_straggler_of_a_watched_group() {
    let mut b = bed_watching(8, &[1]);
    // barrier 0: d1 (port 2) arrives first, d0 (port 1) last
    b.send_reduce(2, 1, 0);
    b.run();
    b.send_reduce(1, 1, 0);
    b.run();
    // barrier 1: only d1 so far
    b.send_reduce(2, 1, 1);
    b.run();
    let Reply::Group { group: g } = b.ok(r#"{"op":"group_show","group":1}"#) else {
        panic!("not a group reply");
    };
    let st = g.stragglers.expect("group 1 is watched");
    assert_eq!(st.recent.len(), 1);
    assert_eq!((st.recent[0].seq, st.recent[0].last.as_str()), (0, "d0"));
    assert!(st.waiting_ns.is_some(), "barrier 1 is in progress");
    assert_eq!(g.arrived, vec!["d1".to_string()]);
    // an unwatched group has no report
    let mut plain = bed(8);
    let Reply::Group { group: g } = plain.ok(r#"{"op":"group_show","group":1}"#) else {
        panic!("not a group reply");
    };
    assert!(g.stragglers.is_none());
}

/// A group created while the switch runs can be watched (its report and per-group series
/// start then) and unwatched, up to the limit; the refusals say why.
#[test]
fn groups_are_watched_and_unwatched_over_the_socket() {
    let mut b = bed(8);
    b.ok(r#"{"op":"group_create","group":3,"children":["d0","d1"]}"#);
    b.ok(r#"{"op":"group_create","group":4,"children":["d0","d1"]}"#);
    b.ok(r#"{"op":"group_create","group":5,"children":["d0","d1"]}"#);
    let show = |b: &mut Bed, g: u32| match b.ok(&format!(r#"{{"op":"group_show","group":{g}}}"#)) {
        Reply::Group { group } => group.stragglers,
        other => panic!("{other:?}"),
    };
    assert!(show(&mut b, 3).is_none());
    assert!(matches!(
        b.ok(r#"{"op":"group_watch","group":3}"#),
        Reply::Changed { ref action, .. } if action == "watched"
    ));
    b.send_reduce(2, 3, 0);
    b.run();
    b.send_reduce(1, 3, 0);
    b.run();
    let st = show(&mut b, 3).expect("watched");
    assert_eq!((st.recent[0].seq, st.recent[0].last.as_str()), (0, "d0"));
    let metrics = barrier_mgmt::metrics::render(&b.stats, &Default::default(), &[]);
    assert!(
        metrics.contains("barrier_group_completions_total{group=\"3\"} 1"),
        "{metrics}"
    );
    b.ok(r#"{"op":"group_watch","group":4}"#);
    b.refused(
        r#"{"op":"group_watch","group":5}"#,
        "2 groups are watched already, the limit ([stragglers] limit): unwatch one first",
    );
    b.refused(r#"{"op":"group_watch","group":6}"#, "group 6");
    b.ok(r#"{"op":"group_unwatch","group":3}"#);
    assert!(show(&mut b, 3).is_none());
    b.refused(
        r#"{"op":"group_unwatch","group":3}"#,
        "group 3 is not watched",
    );
    b.ok(r#"{"op":"group_watch","group":5}"#);
}

impl Bed {
    /// `port_show` of `name`: (rate, burst, rx frames, drop_policed).
    fn policer_of(&mut self, name: &str) -> (u64, u64, u64, u64) {
        match self.ok(&format!(r#"{{"op":"port_show","port":"{name}"}}"#)) {
            Reply::Port { port } => (
                port.policer_rate,
                port.policer_burst,
                port.rx_frames,
                port.drop_policed,
            ),
            other => panic!("port_show answered {other:?}"),
        }
    }
}

/// A policer set through the control socket's `port_set` polices the port's barrier frames
/// from the RX poller's next burst (`drop_policed`), and rate 0 turns it off. Time stands
/// still here (every poll at 0 ns), so the bucket never refills: exactly the burst passes.
#[test]
fn a_policer_set_at_run_time_drops_frames_over_it_and_0_turns_it_off() {
    let mut b = bed(4);
    assert_eq!(b.policer_of("d0"), (0, 0, 0, 0));
    for _ in 0..20 {
        b.send_reduce(1, 1, 0);
    }
    b.run();
    assert_eq!(b.policer_of("d0"), (0, 0, 20, 0), "policed with no policer");
    match b.ok(r#"{"op":"port_set","port":"d0","policer_rate":1000,"policer_burst":5}"#) {
        Reply::Port { port } => {
            assert_eq!(
                (port.name.as_str(), port.policer_rate, port.policer_burst),
                ("d0", 1000, 5)
            )
        }
        other => panic!("port_set answered {other:?}"),
    }
    for _ in 0..20 {
        b.send_reduce(1, 1, 0);
    }
    b.run();
    assert_eq!(
        b.policer_of("d0"),
        (1000, 5, 40, 15),
        "5 pass, 15 over the rate"
    );
    // the other ports are not policed
    b.send_reduce(2, 1, 0);
    b.run();
    assert_eq!(b.policer_of("d1"), (0, 0, 1, 0));
    // the listing shows it too
    match b.ok(r#"{"op":"ports"}"#) {
        Reply::Ports { ports } => {
            assert_eq!((ports[1].policer_rate, ports[1].drop_policed), (1000, 15));
            assert_eq!(ports[0].policer_rate, 0);
        }
        other => panic!("ports answered {other:?}"),
    }
    // only the burst changes: the rate in force stays, the bucket starts full again
    b.ok(r#"{"op":"port_set","port":"d0","policer_burst":2}"#);
    for _ in 0..5 {
        b.send_reduce(1, 1, 0);
    }
    b.run();
    assert_eq!(b.policer_of("d0"), (1000, 2, 45, 18));
    // 0: off
    b.ok(r#"{"op":"port_set","port":"d0","policer_rate":0}"#);
    for _ in 0..20 {
        b.send_reduce(1, 1, 0);
    }
    b.run();
    assert_eq!(b.policer_of("d0"), (0, 0, 65, 18), "policed after rate 0");
}

/// A `port_set` the switch cannot apply is refused naming what is wrong, and the port's
/// policer stays as it was.
#[test]
fn a_bad_policer_is_refused_with_the_reason_and_changes_nothing() {
    let mut b = bed(4);
    let bad = [
        (
            r#"{"op":"port_set","port":"d9","policer_rate":5}"#,
            "unknown port \"d9\" (this switch has up, d0, d1, d2)",
        ),
        (
            r#"{"op":"port_set","port":"d0","policer_rate":2000000000}"#,
            "port \"d0\": policer_rate 2000000000: give 0 (off) or 1..=1000000000 frames/s",
        ),
        (
            r#"{"op":"port_set","port":"d0","policer_rate":100,"policer_burst":0}"#,
            "policer_burst 0: give 1..=100000000 frames",
        ),
        (
            r#"{"op":"port_set","port":"d0","policer_rate":100,"policer_burst":100000001}"#,
            "policer_burst 100000001",
        ),
        (
            r#"{"op":"port_set","port":"d0","policer_rate":0,"policer_burst":5}"#,
            "a burst needs a rate",
        ),
        (r#"{"op":"port_set","port":"d0"}"#, "nothing to change"),
        (
            r#"{"op":"port_set","port":"d0","policer_rate":-5}"#,
            "invalid value",
        ),
        (
            r#"{"op":"port_set","port":"d0","policer_rate":"fast"}"#,
            "invalid type",
        ),
        (
            r#"{"op":"port_show","port":"nope"}"#,
            "unknown port \"nope\"",
        ),
    ];
    for (line, why) in bad {
        b.refused(line, why);
        assert_eq!(b.policer_of("d0").0, 0, "{line} set a policer");
    }
    b.refused(
        r#"{"op":"port_set","port":"d0","policer_burst":5}"#,
        "port \"d0\" has no policer: give policer_rate with the burst",
    );
    b.ok(r#"{"op":"port_set","port":"d0","policer_rate":1000,"policer_burst":5}"#);
    for (line, why) in bad {
        b.refused(line, why);
        let (r, bu, _, _) = b.policer_of("d0");
        assert_eq!((r, bu), (1000, 5), "{line} changed the policer");
    }
}

/// The same bad group, through the file and through the socket, is refused with the same
/// code and the same words after the location (`groups[0].` in the file; none on the socket):
/// both go through `barrier_ctl::group::resolve`.
#[test]
fn the_same_bad_group_is_refused_alike_by_the_file_and_the_socket() {
    // (the file's group lines, the socket's group_create fields, the code, the words)
    let cases = [
        (
            r#"role = "root"
children = ["d0", "p9"]"#,
            r#""children":["d0","p9"]"#,
            "unknown_port",
            r#"children[1]: unknown port "p9" (the switch's ports: ["d0", "d1", "d2", "up"])"#,
        ),
        (
            r#"role = "root"
children = []"#,
            r#""children":[]"#,
            "no_children",
            "children: a group needs at least one child port",
        ),
        (
            r#"role = "root"
children = ["d0", "d1", "d0"]"#,
            r#""children":["d0","d1","d0"]"#,
            "duplicate_child",
            r#"children[2]: port "d0" listed twice"#,
        ),
        (
            r#"role = "intermediate"
children = ["d0", "d1"]
parent = "d1""#,
            r#""children":["d0","d1"],"parent":"d1""#,
            "parent_is_child",
            r#"parent: port "d1" is both a child and the parent"#,
        ),
        (
            r#"role = "intermediate"
children = ["d0"]
parent = "nowhere""#,
            r#""children":["d0"],"parent":"nowhere""#,
            "unknown_port",
            r#"parent: unknown port "nowhere" (the switch's ports: ["d0", "d1", "d2", "up"])"#,
        ),
        (
            r#"role = "intermediate"
children = ["d0"]
parent = "up"
resend_timeout_us = 0"#,
            r#""children":["d0"],"parent":"up","resend_timeout_ns":0"#,
            "zero_timeout",
            "resend_timeout_us: a zero timeout would re-send forever",
        ),
        (
            r#"role = "root"
children = ["d0"]
resend_timeout_us = 300"#,
            r#""children":["d0"],"resend_timeout_ns":300000"#,
            "root_resends",
            "resend_timeout_us: a root does not re-send (re-send settings are for intermediates)",
        ),
        (
            r#"role = "root"
children = ["d0"]
fail_after_us = 4294967296"#,
            r#""children":["d0"],"fail_after_ns":4294967296000"#,
            "fail_after_too_long",
            "fail_after_us: 4294967296: at most 4294967295 (about 71 minutes: the table keeps microseconds in 32 bits)",
        ),
    ];
    for (file_group, socket_fields, code, words) in cases {
        let text = format!(
            r#"[eal]
args = ["-l", "0,1"]

[[ports]]
name = "up"
vdev = "net_ring0"

[[ports]]
name = "d0"
vdev = "net_ring1"

[[ports]]
name = "d1"
vdev = "net_ring2"

[[ports]]
name = "d2"
vdev = "net_ring3"

[lcores]
scheduler = 1
rx = [ {{ lcore = 0, poll = ["up", "d0", "d1", "d2"] }} ]

[[groups]]
number = 5
{file_group}
"#
        );
        let e = config::parse(&text).expect_err(file_group);
        let file_words = format!("{}: {}", e.key, e.reason);
        assert_eq!(
            file_words.strip_prefix("groups[0]."),
            Some(words),
            "file: {e}"
        );
        assert!(e.line.is_some(), "the file names the line: {e}");

        let mut b = bed(16);
        let line = format!(r#"{{"op":"group_create","group":5,{socket_fields}}}"#);
        let before = b.snapshot();
        let r = b.req(&line);
        assert_eq!(
            (r.ok, r.code.as_deref(), r.error.as_deref()),
            (false, Some(code), Some(words)),
            "socket: {line}"
        );
        assert_eq!(b.snapshot(), before, "{line} changed the table");
        // The code travels in the JSON answer.
        assert!(
            r.to_line().contains(&format!(r#""code":"{code}""#)),
            "{}",
            r.to_line()
        );
    }
}

/// The four renderings of the counters (the text report, the telemetry entries and
/// `--stats-json`, Prometheus, the control socket's `stats`) agree value for value with one
/// snapshot of a switch that carried traffic: completions, releases sent, a stale reduce, a
/// duplicate, a
/// frame from a port that is not a child, a frame for an unknown group, one that does not parse.
#[test]
fn every_rendering_agrees_with_the_snapshot() {
    use barrier_mgmt::snapshot::Set;
    let mut b = bed(8);
    for seq in 0..3 {
        b.send_reduce(1, 1, seq);
        b.send_reduce(2, 1, seq);
        b.run();
    }
    b.send_reduce(2, 1, 2); // a stale reduce of a completed barrier: a re-sent release
    b.send_reduce(1, 1, 3);
    b.send_reduce(1, 1, 3); // the same child twice in one barrier: a duplicate
    b.send_reduce(3, 1, 3); // d2 is not a child of group 1
    b.send_reduce(1, 5, 0); // no group 5
    b.to_switch[2].offer(&[0u8; 20]).unwrap(); // not a barrier frame (EtherType 0)
    b.to_switch[2].flush();
    b.run();
    for p in 0..PORTS.len() {
        b.received(p);
    }
    let snap = b.stats.snapshot();
    let sum = |set: Set| snap.total(set).iter().sum::<u64>();
    assert!(sum(Set::Rx) > 0 && sum(Set::Tx) > 0 && sum(Set::Scheduler) > 0);
    for name in [
        "completions",
        "recorded",
        "stale_reduce",
        "duplicates",
        "drop_not_a_child",
        "drop_unknown_group",
        "drop_not_barrier",
    ] {
        assert!(snap.value(Set::Rx, name, None) > 0, "{name}: {snap:?}");
    }

    let report = barrier_mgmt::snapshot::report_counters(&snap);
    assert_eq!(
        b.stats
            .report()
            .lines()
            .take(report.lines().count())
            .collect::<Vec<_>>(),
        report.lines().collect::<Vec<_>>(),
        "SwitchStats::report starts with the snapshot's counter lines"
    );
    let line = |title: &str| -> std::collections::BTreeMap<String, u64> {
        let l = report
            .lines()
            .find_map(|l| l.strip_prefix(&format!("  {title}: ")))
            .unwrap_or_else(|| panic!("no {title} in {report}"));
        l.split(' ')
            .filter(|w| *w != "-")
            .map(|w| {
                let (n, v) = w.split_once('=').unwrap();
                (n.to_string(), v.parse().unwrap())
            })
            .collect()
    };
    let entries: std::collections::BTreeMap<String, u64> =
        barrier_mgmt::telemetry::snapshot_entries(&snap)
            .into_iter()
            .collect();
    assert_eq!(
        entries,
        barrier_mgmt::telemetry::stats_entries(&b.stats)
            .into_iter()
            .collect()
    );
    let json = barrier_mgmt::telemetry::snapshot_json(&snap);
    assert_eq!(json, barrier_mgmt::telemetry::stats_json(&b.stats));
    let Reply::Stats { sets } = b.ok(r#"{"op":"stats"}"#) else {
        panic!("not a stats reply")
    };
    let scope = |s: &str| &sets.iter().find(|c| c.scope == s).unwrap().counters;
    let metrics = barrier_mgmt::metrics::render(&b.stats, &Default::default(), &[]);
    let prom = |series: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {series} in {metrics}"))
            .parse()
            .unwrap()
    };

    for (set, key, title) in [
        (Set::Rx, "rx", "rx total"),
        (Set::Tx, "tx", "tx total"),
        (Set::Scheduler, "scheduler", "scheduler"),
    ] {
        let printed = line(title);
        for (i, &name) in snap.names(set).iter().enumerate() {
            let v = snap.total(set)[i];
            assert_eq!(v, snap.value(set, name, None));
            assert_eq!(
                printed.get(name).copied().unwrap_or(0),
                v,
                "report {key}/{name}"
            );
            assert_eq!(
                entries[&format!("{key}/{name}")],
                v,
                "telemetry {key}/{name}"
            );
            assert_eq!(json[key][name], v, "json {key}/{name}");
            assert_eq!(scope(title)[name], v, "control {key}/{name}");
            if set == Set::Rx {
                let series = if let Some(reason) = name.strip_prefix("drop_") {
                    format!("barrier_frames_dropped_total{{reason=\"{reason}\"}}")
                } else if ["frames", "reduce_in", "release_in", "abort_in"].contains(&name) {
                    continue;
                } else {
                    format!("barrier_rx_events_total{{event=\"{name}\"}}")
                };
                assert_eq!(prom(&series), v, "{series}");
            }
        }
    }
    for (p, port) in PORTS.iter().enumerate() {
        let (rx, tx) = (
            line(&format!("port {port} rx")),
            line(&format!("port {port} tx")),
        );
        for (set, key, printed) in [(Set::Rx, "rx", rx), (Set::Tx, "tx", tx)] {
            for (i, &name) in snap.names(set).iter().enumerate() {
                let v = snap.port(set, p)[i];
                assert_eq!(
                    printed.get(name).copied().unwrap_or(0),
                    v,
                    "report {port} {name}"
                );
                assert_eq!(json["ports"][port][key][name], v, "json {port} {name}");
                assert_eq!(
                    scope(&format!("port {port} {key}"))[name],
                    v,
                    "control {port} {name}"
                );
            }
        }
        let rx = |n: &str| snap.value(Set::Rx, n, Some(p));
        let tx = |n: &str| snap.value(Set::Tx, n, Some(p));
        for (kind, i, o) in [
            ("reduce", "reduce_in", "reduce_out"),
            ("release", "release_in", "release_out"),
            ("abort", "abort_in", "abort_out"),
        ] {
            let l = format!("{{port=\"{port}\",kind=\"{kind}\"}}");
            assert_eq!(prom(&format!("barrier_frames_received_total{l}")), rx(i));
            assert_eq!(prom(&format!("barrier_frames_sent_total{l}")), tx(o));
        }
        assert_eq!(
            prom(&format!("barrier_frames_policed_total{{port=\"{port}\"}}")),
            rx("drop_policed")
        );
        for name in [
            "retransmits_out",
            "tx_full_waits",
            "alloc_fail_waits",
            "coalesced",
        ] {
            assert_eq!(
                prom(&format!(
                    "barrier_tx_events_total{{port=\"{port}\",event=\"{name}\"}}"
                )),
                tx(name)
            );
        }
        let Reply::Port { port: info } = b.ok(&format!(r#"{{"op":"port_show","port":"{port}"}}"#))
        else {
            panic!("not a port reply")
        };
        assert_eq!(
            (info.rx_frames, info.tx_frames, info.drop_policed),
            (rx("frames"), tx("frames_out"), rx("drop_policed"))
        );
    }
}

/// A dataplane that is only a group table and a fixed set of counters: no pollers, no
/// policers, no watch.
struct Bare {
    table: GroupTable,
    ports: Vec<String>,
    snap: barrier_mgmt::snapshot::Snapshot,
}

impl barrier_mgmt::Dataplane for Bare {
    fn name(&self) -> &str {
        "bare"
    }
    fn port_names(&self) -> &[String] {
        &self.ports
    }
    fn table(&self) -> &dyn barrier_mgmt::Groups {
        &self.table
    }
    fn snapshot(&self) -> barrier_mgmt::snapshot::Snapshot {
        self.snap.clone()
    }
    fn watch(&self) -> Option<&Arc<barrier_mgmt::straggler::Watch>> {
        None
    }
    fn policer(&self, _port: usize) -> Option<&barrier_mgmt::policer::PolicerRegister> {
        None
    }
    fn rx_queues(&self, _port: usize) -> usize {
        1
    }
}

/// The management plane needs nothing of a dataplane but `Dataplane`: over one that is a bare
/// table and a snapshot, the control socket creates and shows groups, and its `stats`, the
/// telemetry entries and Prometheus render that snapshot.
#[test]
fn control_and_exporters_run_over_any_dataplane() {
    use barrier_mgmt::snapshot::{Set, Snapshot};
    let ports: Vec<String> = PORTS.iter().map(|p| p.to_string()).collect();
    // A dataplane with counters of its own, some under the names the exporters look for.
    let names = barrier_mgmt::Names {
        rx: &["frames", "reduce_in", "drop_bad_magic", "drop_its_own"],
        tx: &["frames_out"],
        scheduler: &[],
    };
    let mut snap = Snapshot::new("bare", ports.clone(), names);
    snap.push(Set::Rx, Some(1), Some(0), None, vec![7, 0, 0, 3]);
    let bare = Bare {
        table: GroupTable::new(4),
        ports,
        snap,
    };
    assert_eq!(
        barrier_mgmt::telemetry::stats_entries(&bare)[0],
        ("rx/frames".into(), 7)
    );
    let metrics = barrier_mgmt::metrics::render(&bare, &Default::default(), &[]);
    assert!(
        metrics.contains("barrier_frames_dropped_total{reason=\"its_own\"} 3"),
        "{metrics}"
    );
    let descs = PORTS
        .iter()
        .map(|n| PortDesc {
            name: n.to_string(),
            device: "none".into(),
            peer_mac: [0xff; 6],
        })
        .collect();
    let mut c = Control::new(bare, descs, None);
    let r = c.handle_line(br#"{"op":"group_create","group":2,"children":["d0","d1"]}"#);
    assert!(r.ok, "{r:?}");
    assert!(c.table().config(GroupId(2)).is_some());
    let r = c.handle_line(br#"{"op":"stats"}"#);
    let Some(Reply::Stats { sets }) = r.result else {
        panic!("{r:?}")
    };
    let d0 = sets.iter().find(|s| s.scope == "port d0 rx").unwrap();
    assert_eq!(d0.counters["frames"], 7);
    assert_eq!(d0.counters["drop_its_own"], 3);
    let groups = sets.iter().find(|s| s.scope == "groups").unwrap();
    assert_eq!(groups.counters["configured"], 1);
    let r = c.handle_line(br#"{"op":"port_set","port":"d0","policer_rate":10}"#);
    assert!(!r.ok, "no policer register here: {r:?}");
}

/// A group store that does not count per group (as the XDP switch's map): the table's groups
/// without `counts` and `run`.
struct Uncounted(GroupTable);

impl barrier_mgmt::Groups for Uncounted {
    fn capacity(&self) -> u32 {
        self.0.capacity()
    }
    fn configure(&self, group: GroupId, cfg: GroupConfig) -> Result<(), String> {
        self.0.configure(group, cfg).map_err(|e| e.to_string())
    }
    fn remove(&self, group: GroupId) -> Result<(), String> {
        self.0.remove(group).map_err(|e| e.to_string())
    }
    fn config(&self, group: GroupId) -> Option<GroupConfig> {
        self.0.config(group)
    }
    fn state(&self, group: GroupId) -> Option<barrier_protocol::switch::GroupState> {
        self.0.state(group)
    }
    fn counts(&self, _group: GroupId) -> Option<barrier_protocol::table::GroupCounts> {
        None
    }
    fn run(&self, _group: GroupId) -> Option<barrier_protocol::switch::Run> {
        None
    }
}

/// A dataplane with only a group store that does not count per group, no watch, no policer.
struct NoCounts {
    groups: Uncounted,
    ports: Vec<String>,
}

impl barrier_mgmt::Dataplane for NoCounts {
    fn name(&self) -> &str {
        "no-counts"
    }
    fn port_names(&self) -> &[String] {
        &self.ports
    }
    fn table(&self) -> &dyn barrier_mgmt::Groups {
        &self.groups
    }
    fn snapshot(&self) -> barrier_mgmt::snapshot::Snapshot {
        barrier_mgmt::snapshot::Snapshot::new("no-counts", self.ports.clone(), Default::default())
    }
    fn watch(&self) -> Option<&Arc<barrier_mgmt::straggler::Watch>> {
        None
    }
    fn policer(&self, _port: usize) -> Option<&barrier_mgmt::policer::PolicerRegister> {
        None
    }
    fn rx_queues(&self, _port: usize) -> usize {
        1
    }
}

/// What a dataplane has not is said, not made up: a group show without per-group counts says
/// `uncounted` (and barrierctl prints so), `stats` has no per-group sums, and a watch or a
/// policer is refused naming the dataplane that has none.
#[test]
fn a_dataplane_without_per_group_counts_or_watch_says_so() {
    let ports: Vec<String> = PORTS.iter().map(|p| p.to_string()).collect();
    let descs = PORTS
        .iter()
        .map(|n| PortDesc {
            name: n.to_string(),
            device: "iface:x".into(),
            peer_mac: [0xff; 6],
        })
        .collect();
    let dp = NoCounts {
        groups: Uncounted(GroupTable::new(4)),
        ports,
    };
    let mut c = Control::new(dp, descs, None);
    let r = c.handle_line(br#"{"op":"group_create","group":2,"children":["d0","d1"]}"#);
    assert!(r.ok, "{r:?}");
    let r = c.handle_line(br#"{"op":"group_show","group":2}"#);
    let Some(Reply::Group { group: g }) = r.result else {
        panic!("{r:?}")
    };
    assert!(g.uncounted, "{g:?}");
    let r = c.handle_line(br#"{"op":"stats"}"#);
    let Some(Reply::Stats { sets }) = r.result else {
        panic!("{r:?}")
    };
    let groups = sets.iter().find(|s| s.scope == "groups").unwrap();
    assert_eq!(groups.counters["configured"], 1);
    assert!(!groups.counters.contains_key("completions"), "{groups:?}");
    let r = c.handle_line(br#"{"op":"group_watch","group":2}"#);
    assert!(
        r.error
            .as_deref()
            .is_some_and(|e| e.contains("without a straggler watch")),
        "{r:?}"
    );
    let r = c.handle_line(br#"{"op":"port_set","port":"d0","policer_rate":10}"#);
    assert!(
        r.error
            .as_deref()
            .is_some_and(|e| e.contains("polices no port")),
        "{r:?}"
    );
}
