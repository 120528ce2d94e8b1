//! The access-list bed shared by `tests/acl_attack.rs` and the benchmark `perf/acl.rs`
//! (included by `#[path]`): a real two-level tree of the library's switches on in-memory wires,
//! with an attacker sharing the wire of each of the intermediate switch's ports. See
//! `tests/acl_attack.rs` for the picture.
#![allow(dead_code)]

use barrier_protocol::switch::{GroupConfig, GroupState, Role};
use barrier_protocol::table::GroupTable;
use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{Epoch, GroupId, PortIdx, PortSet, Seq};
use barrier_runtime::io::{mem_wire, MemRx, MemTx, RxQueue, TxQueue, BURST};
use barrier_runtime::poll::Poller;
use barrier_switch::counters::RxCounters;
use barrier_switch::engine::{build_switch, PortIo, SwitchBuilder, SwitchStats};
use barrier_switch::policer::PolicerSpec;
use barrier_testbed::leafhost::{LeafLink, LeafPoller, LeafReport};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

/// Simulated time per pass (`Bed::pass`).
pub const TICK_NS: u64 = 10_000;
const WIRE: usize = 4096;

/// The shape of a bed.
#[derive(Clone, Debug)]
pub struct BedConfig {
    /// Member groups `0..members`, children c0 and c1, parent up.
    pub members: u32,
    /// Group numbers the tables hold (at least `members + 2`): OTHER is `members`, the
    /// unconfigured group `members + 1`, every number above is unconfigured too.
    pub capacity: u32,
    /// Barriers each member group completes before the leaves are done (None: until stopped).
    pub barriers: Option<u64>,
    pub leaf_timeout_ns: u64,
    pub switch_timeout_ns: u64,
    /// Policers of mid's ports, by port.
    pub policers: Vec<Option<PolicerSpec>>,
}

impl BedConfig {
    pub fn small(barriers: u64) -> BedConfig {
        BedConfig {
            members: 4,
            capacity: 16,
            barriers: Some(barriers),
            leaf_timeout_ns: 5_000_000,
            switch_timeout_ns: 2_000_000,
            policers: Vec::new(),
        }
    }
    pub fn other(&self) -> u32 {
        self.members
    }
    pub fn unconfigured(&self) -> u32 {
        self.members + 1
    }
}

/// Port numbers of the intermediate switch "mid".
pub const C0: usize = 0;
pub const C1: usize = 1;
pub const C2: usize = 2;
pub const UP: usize = 3;
pub const X: usize = 4;
pub const NAMES: [&str; 5] = ["c0", "c1", "c2", "up", "x"];

/// A port's receive side fed by two wires, taken one frame from each in turn: the attacker and
/// the legitimate sender share the link.
pub struct Shared {
    a: MemRx,
    b: MemRx,
    turn: bool,
}

impl RxQueue for Shared {
    type Frame = Vec<u8>;
    fn rx_burst(&mut self, out: &mut Vec<Vec<u8>>, max: usize) {
        // Which wire goes first alternates from one burst to the next, then one frame each.
        self.turn = !self.turn;
        let mut turn = self.turn;
        let mut empty_in_a_row = 0;
        while out.len() < max && empty_in_a_row < 2 {
            let q = if turn { &mut self.a } else { &mut self.b };
            turn = !turn;
            let before = out.len();
            q.rx_burst(out, 1);
            empty_in_a_row = if out.len() == before {
                empty_in_a_row + 1
            } else {
                0
            };
        }
    }
}

pub fn p(i: usize) -> PortIdx {
    PortIdx::new(i as u8).unwrap()
}

pub fn frame(kind: Kind, group: u32, epoch: Epoch, seq: u32) -> Vec<u8> {
    let mut b = vec![0u8; FRAME_LEN];
    FrameRepr {
        dst: MacAddr::BROADCAST,
        src: MacAddr([2, 0xee, 0, 0, 0, 1]),
        kind,
        flags: Flags::empty(),
        group: GroupId(group),
        epoch,
        seq: Seq(seq),
        tx_timestamp: None,
    }
    .emit(&mut b);
    b
}

/// One attack frame and the RX counter it must land in.
#[derive(Clone)]
pub struct Attack {
    pub port: usize,
    pub frame: Vec<u8>,
    pub counter: &'static str,
}

/// The mixed set, one frame of each class per port it is sent on, aimed at member group `g`
/// (`cfg.other()` and `cfg.unconfigured()` for the classes that need another group). `seq`
/// varies the sequence numbers so that they also hit the barrier in progress.
pub fn attacks(cfg: &BedConfig, g: u32, seq: u32) -> Vec<Attack> {
    let e = Epoch::DEFAULT;
    let (other, unconfigured) = (cfg.other(), cfg.unconfigured());
    let mut bad_magic = frame(Kind::Reduce, g, e, seq);
    bad_magic[14] ^= 0xff;
    let mut short = frame(Kind::Reduce, g, e, seq);
    short.truncate(20);
    vec![
        // A non-member port: no group lists it.
        Attack {
            port: X,
            frame: frame(Kind::Reduce, g, e, seq),
            counter: "drop_not_a_child",
        },
        Attack {
            port: X,
            frame: frame(Kind::Release, g, e, seq),
            counter: "drop_not_the_parent",
        },
        // A release on a child port.
        Attack {
            port: C0,
            frame: frame(Kind::Release, g, e, seq),
            counter: "drop_not_the_parent",
        },
        // A reduce for a group the port does not belong to.
        Attack {
            port: C0,
            frame: frame(Kind::Reduce, other, e, seq),
            counter: "drop_not_a_child",
        },
        // Another epoch, on a member port, for a member group.
        Attack {
            port: C0,
            frame: frame(Kind::Reduce, g, Epoch(e.0 + 6), seq),
            counter: "drop_other_epoch",
        },
        Attack {
            port: C0,
            frame: frame(Kind::Reduce, unconfigured, e, seq),
            counter: "drop_unknown_group",
        },
        Attack {
            port: C0,
            frame: bad_magic,
            counter: "drop_bad_magic",
        },
        Attack {
            port: C0,
            frame: short,
            counter: "drop_too_short",
        },
        // A reduce from the parent port.
        Attack {
            port: UP,
            frame: frame(Kind::Reduce, g, e, seq),
            counter: "drop_not_a_child",
        },
        // A release from the parent port, of another epoch.
        Attack {
            port: UP,
            frame: frame(Kind::Release, g, Epoch(e.0 + 1), seq),
            counter: "drop_other_epoch",
        },
        // Ordinary traffic on every port (issue 25: a data flood must not release or wedge a
        // barrier): an IPv4 and an IPv6 frame, the barrier frame's bytes after the EtherType,
        // so that only the EtherType tells them apart. This bed has no exception path: they
        // are dropped and counted.
        Attack {
            port: C0,
            frame: ordinary(&frame(Kind::Reduce, g, e, seq), 0x0800),
            counter: "drop_not_barrier",
        },
        Attack {
            port: X,
            frame: ordinary(&frame(Kind::Release, g, e, seq), 0x86DD),
            counter: "drop_not_barrier",
        },
        Attack {
            port: UP,
            frame: ordinary(&frame(Kind::Release, g, e, seq + 1), 0x0800),
            counter: "drop_not_barrier",
        },
    ]
}

/// `barrier` with EtherType `ethertype`: an ordinary frame with a barrier frame's payload.
fn ordinary(barrier: &[u8], ethertype: u16) -> Vec<u8> {
    let mut f = barrier.to_vec();
    f[12..14].copy_from_slice(&ethertype.to_be_bytes());
    f
}

pub struct Bed {
    pub cfg: BedConfig,
    pub pollers: Vec<Box<dyn Poller>>,
    /// The attacker's end of each of mid's ports.
    pub attacker: Vec<MemTx>,
    /// A legitimate sender on c2 for group OTHER (the leaves only do the member groups).
    pub other_c2: MemTx,
    pub mid: SwitchStats,
    pub root: SwitchStats,
    pub done: Arc<std::sync::atomic::AtomicBool>,
    pub report: Arc<Mutex<Option<LeafReport>>>,
    pub now: u64,
    /// Attack frames injected, per (port, counter name).
    pub injected: Vec<(usize, &'static str, u64)>,
}

impl Bed {
    pub fn new(cfg: BedConfig, now_ns: u64) -> Bed {
        let (members, capacity, other) = (cfg.members, cfg.capacity, cfg.other());
        assert!(capacity >= members + 2);
        // mid: groups 0..MEMBERS children {c0, c1} parent up; OTHER children {c1, c2} parent up.
        let mid_table = Arc::new(GroupTable::new(capacity));
        let member = GroupConfig {
            role: Role::Intermediate { parent: p(UP) },
            children: PortSet(1 << C0 | 1 << C1),
            resend_timeout_ns: cfg.switch_timeout_ns,
            epoch: Epoch::DEFAULT,
            backoff: barrier_protocol::backoff::Backoff::FIXED,
            fail_after_ns: 0,
        };
        for g in 0..members {
            mid_table.configure(GroupId(g), member).unwrap();
        }
        let other_cfg = GroupConfig {
            children: PortSet(1 << C1 | 1 << C2),
            ..member
        };
        mid_table.configure(GroupId(other), other_cfg).unwrap();
        let root_table = Arc::new(GroupTable::new(capacity));
        for g in (0..members).chain([other]) {
            root_table
                .configure(GroupId(g), GroupConfig::root(PortSet::single(p(0))))
                .unwrap();
        }

        let (up_tx, up_rx) = mem_wire(WIRE); // mid -> root
        let (down_tx, down_rx) = mem_wire(WIRE); // root -> mid
        let mut attacker = Vec::new();
        let mut mid_ports = Vec::new();
        let mut links = Vec::new();
        let mut other_c2 = None;
        let mut legit_in = Some(down_rx);
        let mut mid_out = Some(up_tx);
        for (i, name) in NAMES.iter().enumerate() {
            let (atk_tx, atk_rx) = mem_wire(WIRE);
            attacker.push(atk_tx);
            let (legit_rx, tx) = if i == UP {
                (legit_in.take().unwrap(), mid_out.take().unwrap())
            } else {
                let (in_tx, in_rx) = mem_wire(WIRE);
                let (out_tx, out_rx) = mem_wire(WIRE);
                if i == C0 || i == C1 {
                    links.push(LeafLink {
                        rx: out_rx,
                        tx: in_tx,
                        mac: [2, 2, 0, 0, 0, i as u8],
                    });
                } else if i == C2 {
                    other_c2 = Some(in_tx);
                }
                (in_rx, out_tx)
            };
            mid_ports.push(PortIo::new(
                *name,
                Shared {
                    a: atk_rx,
                    b: legit_rx,
                    turn: false,
                },
                tx,
            ));
        }
        let mid = SwitchBuilder::new("mid", [2, 1, 0, 0, 0, 1])
            .policers(&cfg.policers)
            .build(mid_ports, mid_table, now_ns);
        let root = build_switch(
            "root",
            [2, 1, 0, 0, 0, 2],
            vec![PortIo::new("down", up_rx, down_tx)],
            root_table,
            now_ns,
        );
        let report = Arc::new(Mutex::new(None));
        let leaves = LeafPoller::new(
            links,
            0,
            members,
            cfg.leaf_timeout_ns,
            cfg.barriers,
            report.clone(),
        );
        let done = leaves.done.clone();
        let mut pollers: Vec<Box<dyn Poller>> = Vec::new();
        for sw in [mid.rx, root.rx] {
            pollers.extend(sw.into_iter().map(|(_, _, p)| p));
        }
        pollers.push(mid.sched);
        pollers.push(root.sched);
        pollers.push(Box::new(leaves));
        Bed {
            cfg,
            pollers,
            attacker,
            other_c2: other_c2.unwrap(),
            mid: mid.stats,
            root: root.stats,
            done,
            report,
            now: now_ns,
            injected: Vec::new(),
        }
    }

    /// One pass over every poller, `TICK_NS` of simulated time after the last.
    /// Group OTHER mid-barrier: its child c2 arrives (c1, a member port, never does), so its
    /// state stays "waiting for c1" for good.
    pub fn start_other(&mut self) {
        let f = frame(Kind::Reduce, self.cfg.other(), Epoch::DEFAULT, 0);
        self.other_c2.offer(&f).unwrap();
        self.other_c2.flush();
    }

    pub fn pass(&mut self) {
        self.pass_at(self.now + TICK_NS);
    }

    /// One pass over every poller at `now_ns`.
    pub fn pass_at(&mut self, now_ns: u64) {
        self.now = now_ns;
        for p in self.pollers.iter_mut() {
            p.poll(self.now);
        }
    }

    /// `pass_at`, adding the wall time each poller took to `spent_ns` (by poller: mid's RX
    /// pollers are the first, one per port in `NAMES` order).
    pub fn timed_pass_at(
        &mut self,
        now_ns: u64,
        clock: &barrier_runtime::clock::Clock,
        spent_ns: &mut [u64],
    ) {
        self.now = now_ns;
        let mut t0 = clock.now_ns();
        for (p, spent) in self.pollers.iter_mut().zip(spent_ns.iter_mut()) {
            p.poll(self.now);
            let t1 = clock.now_ns();
            *spent += t1 - t0;
            t0 = t1;
        }
    }

    /// Queue `a` on the attacker's wire (sent at the next `flush_attacks`).
    pub fn inject(&mut self, a: &Attack) -> bool {
        if self.attacker[a.port].offer(&a.frame).is_err() {
            return false;
        }
        if self.attacker[a.port].buffered() == BURST {
            self.attacker[a.port].flush();
        }
        match self
            .injected
            .iter_mut()
            .find(|(p, c, _)| *p == a.port && *c == a.counter)
        {
            Some(e) => e.2 += 1,
            None => self.injected.push((a.port, a.counter, 1)),
        }
        true
    }

    pub fn flush_attacks(&mut self) {
        for t in &mut self.attacker {
            t.flush();
        }
    }

    /// A counter of mid's port `port`, summed over its RX pollers.
    pub fn rx(&self, port: usize, name: &str) -> u64 {
        let i = RxCounters::NAMES.iter().position(|n| *n == name).unwrap();
        self.mid
            .rx
            .iter()
            .filter(|(p, _)| *p == port)
            .map(|(_, c)| c.values()[i])
            .sum()
    }

    /// Every drop counter of every port of mid is exactly what was injected in its class.
    pub fn assert_counted(&self) {
        for (port, port_name) in NAMES.iter().enumerate() {
            for name in RxCounters::NAMES.iter().filter(|n| n.starts_with("drop_")) {
                let want = self
                    .injected
                    .iter()
                    .find(|(p, c, _)| *p == port && c == name)
                    .map_or(0, |e| e.2);
                assert_eq!(self.rx(port, name), want, "port {port_name} counter {name}");
            }
        }
    }

    pub fn finish(mut self) -> (LeafReport, Bed) {
        barrier_runtime::poll::finish_all(&mut self.pollers);
        let r = self.report.lock().unwrap().take().unwrap();
        (r, self)
    }
}

pub fn snapshot(t: &GroupTable) -> Vec<Option<GroupState>> {
    (0..t.capacity()).map(|g| t.state(GroupId(g))).collect()
}

/// Leaves complete `barriers` barriers of each member group while `attack(bed, pass)` injects.
/// Returns the leaves' report and the bed.
pub fn run(cfg: BedConfig, mut attack: impl FnMut(&mut Bed, u64)) -> (LeafReport, Bed) {
    let mut bed = Bed::new(cfg, 0);
    bed.start_other();
    let mut passes = 0u64;
    while !bed.done.load(Relaxed) {
        attack(&mut bed, passes);
        bed.flush_attacks();
        bed.pass();
        passes += 1;
        assert!(passes < 10_000_000, "stuck after {passes} passes");
    }
    // What is still on the wires is received (the attacker's wires hold up to 4096 frames).
    for _ in 0..1000 {
        bed.flush_attacks();
        bed.pass();
    }
    bed.finish()
}

/// Run `bed` on the wall clock `clock` until `end_ns` (the bench): `attack(bed, now)` before each
/// pass. Returns the wall time each poller took (`Bed::timed_pass_at`).
pub fn run_until(
    bed: &mut Bed,
    clock: &barrier_runtime::clock::Clock,
    end_ns: u64,
    mut attack: impl FnMut(&mut Bed, u64),
) -> Vec<u64> {
    let mut spent = vec![0u64; bed.pollers.len()];
    bed.start_other();
    loop {
        let now = clock.now_ns();
        if now >= end_ns {
            break;
        }
        attack(bed, now);
        bed.timed_pass_at(now, clock, &mut spent);
    }
    spent
}
