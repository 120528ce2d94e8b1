//! The engine against an in-process barrier-switch and against stand-ins, on in-memory wires.

use super::*;
use crate::fault::FaultRates;
use barrier_protocol::leaf::LeafSend;
use barrier_protocol::switch::GroupConfig;
use barrier_protocol::table::GroupTable;
use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr};
use barrier_protocol::{Epoch, GroupId, PortSet};
use barrier_runtime::io::{mem_wire, MemRx, MemTx};
use barrier_switch::engine::{build_switch, build_table, PortIo};
use barrier_switch::spec::GroupBlock;
use std::time::Duration;

const MS: u64 = 1_000_000;

/// The loops spin; run them one at a time so they do not starve each other of the CPU.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn cfg(groups: u32) -> GenConfig {
    GenConfig {
        groups,
        resend_timeout_ns: 2 * MS,
        barrier_deadline_ns: 500 * MS,
        ..GenConfig::default()
    }
}

/// Generator port `i` (faults in both directions) and the switch port at the other end of its
/// two in-memory wires.
fn wired(i: usize, faults: FaultRates) -> (GenPort<MemRx, MemTx>, PortIo<MemRx, MemTx>) {
    let (up_tx, up_rx) = mem_wire(1024);
    let (down_tx, down_rx) = mem_wire(1024);
    let mac = [2, 0, 0, 0, 1, i as u8];
    (
        GenPort {
            name: format!("g{i}"),
            mac,
            rx: down_rx,
            tx: up_tx,
            faults_tx: faults,
            faults_rx: faults,
        },
        PortIo {
            name: format!("s{i}"),
            rx: vec![up_rx],
            tx: down_tx,
            peer_mac: mac,
            mac: None,
        },
    )
}

/// The generator's `n` ports wired to a barrier-switch root (in-memory wires), whose pollers
/// run inside the generator's loop.
fn with_switch(n: usize, gcfg: GenConfig, faults: FaultRates) -> Engine<MemRx, MemTx> {
    let (gen_ports, sw_ports): (Vec<_>, Vec<_>) = (0..n).map(|i| wired(i, faults)).unzip();
    let spec = GroupBlock {
        numbers: gcfg.first_group..gcfg.first_group + gcfg.groups,
        config: GroupConfig {
            resend_timeout_ns: 5 * MS,
            ..GroupConfig::root(PortSet((1u64 << n) - 1))
        },
    };
    let table = Arc::new(build_table(&[spec]).unwrap());
    inline_switch(gcfg, gen_ports, sw_ports, table).0
}

/// A generator on `gen_ports` with a barrier-switch on `sw_ports` (its table `table`) whose
/// pollers run inside the generator's loop; the switch's counters.
fn inline_switch(
    gcfg: GenConfig,
    gen_ports: Vec<GenPort<MemRx, MemTx>>,
    sw_ports: Vec<PortIo<MemRx, MemTx>>,
    table: Arc<GroupTable>,
) -> (Engine<MemRx, MemTx>, barrier_switch::engine::SwitchStats) {
    let clock = Clock::new();
    let sw = build_switch("sut", [2, 0, 0, 0, 0, 1], sw_ports, table, clock.now_ns());
    let mut pollers: Vec<Box<dyn Poller>> = sw.rx.into_iter().map(|(_, _, p)| p).collect();
    pollers.push(sw.sched);
    let mut e = Engine::new(gcfg, gen_ports, Clock::new());
    e.set_inline_pollers(pollers, clock);
    (e, sw.stats)
}

fn closed(count: u64) -> TrialSpec {
    TrialSpec {
        load: Load::Closed,
        duration: Duration::from_secs(60),
        count: Some(count),
        drain: Duration::from_secs(5),
    }
}

#[test]
fn closed_loop_every_barrier_completes_once() {
    let _serial = serial();
    let mut e = with_switch(3, cfg(16), FaultRates::default());
    let r = e.run_trial(&closed(50));
    let b = &r.barriers;
    assert_eq!(b.started, 16 * 50);
    assert_eq!(b.completed, 16 * 50);
    assert_eq!(
        (b.lost, b.incomplete, b.early_releases, b.needed_resend),
        (0, 0, 0, 0),
        "{}",
        r.text()
    );
    assert_eq!(r.frames.tx_reduce, 3 * 16 * 50);
    assert_eq!(r.frames.rx_release, 3 * 16 * 50);
    assert_eq!(r.latency_leaf.samples, 3 * 16 * 50);
    assert_eq!(r.latency_barrier.samples, 16 * 50);
    assert!(r.latency_leaf.p50_ns > 0 && r.latency_leaf.p50_ns <= r.latency_leaf.max_ns);
    assert!(
        r.latency_echo.is_none(),
        "barrier-switch does not echo timestamps"
    );
    // A second trial goes on from where the first stopped.
    let r2 = e.run_trial(&closed(10));
    assert_eq!(r2.barriers.completed, 160);
    assert_eq!(r2.barriers.lost, 0);
}

#[test]
fn faults_both_ways_still_complete_every_barrier() {
    let _serial = serial();
    let faults = FaultRates {
        drop: 0.05,
        duplicate: 0.02,
        reorder: 0.02,
        corrupt: 0.01,
        ..Default::default()
    };
    let mut e = with_switch(4, cfg(32), faults);
    let r = e.run_trial(&closed(40));
    let b = &r.barriers;
    assert_eq!(b.completed, 32 * 40, "{}", r.text());
    assert_eq!((b.incomplete, b.early_releases), (0, 0), "{}", r.text());
    assert!(r.faults_tx.dropped > 0 && r.faults_rx.dropped > 0);
    assert!(r.faults_tx.duplicated > 0 && r.faults_tx.reordered > 0 && r.faults_tx.corrupted > 0);
    // Losses were made good by re-sends, and such barriers count as lost for the search.
    assert!(b.needed_resend > 0 && r.frames.tx_resend > 0);
    assert!(b.lost >= b.needed_resend);
    // Each lost barrier has one reason; those re-sent are unanswered or the generator's.
    assert_eq!(b.lost_by.total(), b.lost, "{}", r.text());
    assert_eq!(
        b.lost_by.unanswered + b.lost_by.generator_behind,
        b.needed_resend,
        "{}",
        r.text()
    );
    assert!(
        r.frames.rx_release_ignored > 0,
        "duplicated releases are ignored"
    );
}

#[test]
fn open_loop_offers_the_set_rate() {
    let _serial = serial();
    // A generous leaf timer: a test machine may deschedule the loop for milliseconds.
    let mut e = with_switch(
        2,
        GenConfig {
            resend_timeout_ns: 200 * MS,
            ..cfg(64)
        },
        FaultRates::default(),
    );
    // A bucket one second deep: however the test is scheduled, no credit is lost, so the
    // count checks the bucket's accounting rather than the machine.
    let spec = TrialSpec {
        load: Load::Open {
            rate: 20_000,
            burst: 20_000,
        },
        duration: Duration::from_secs(1),
        count: None,
        drain: Duration::from_secs(2),
    };
    let r = e.run_trial(&spec);
    let ratio = r.achieved_ratio.unwrap();
    assert!(
        (0.9..=1.05).contains(&ratio),
        "achieved {ratio}: {}",
        r.text()
    );
    assert_eq!(r.barriers.lost, 0, "{}", r.text());
    assert_eq!(r.barriers.completed, r.barriers.started);
    // The reduces sent are what the bucket allowed: rate x time, give or take a burst.
    let expect = 20_000.0 * (r.elapsed_s - r.drain_s);
    assert!(
        (r.frames.tx_reduce as f64 - expect).abs() <= 0.1 * expect + 64.0,
        "{} vs {expect}",
        r.frames.tx_reduce
    );
}

/// A "switch" that releases a group as soon as the first port's reduce arrives: the
/// generator must see the releases as early.
struct EagerSwitch {
    rx: Vec<MemRx>,
    tx: Vec<MemTx>,
}
impl Poller for EagerSwitch {
    fn poll(&mut self, _now: u64) -> bool {
        let mut frames = Vec::new();
        self.rx[0].rx_burst(&mut frames, BURST);
        for rx in &mut self.rx[1..] {
            let mut junk = Vec::new();
            rx.rx_burst(&mut junk, BURST);
        }
        for f in &frames {
            let r = FrameRepr::parse(f).unwrap();
            let rel = FrameRepr {
                kind: Kind::Release,
                flags: Flags::empty(),
                tx_timestamp: None,
                ..r
            }
            .to_bytes();
            for tx in &mut self.tx {
                let _ = tx.offer(&rel);
                tx.flush();
            }
        }
        !frames.is_empty()
    }
}

fn with_poller(
    n: usize,
    gcfg: GenConfig,
    make: impl FnOnce(Vec<MemRx>, Vec<MemTx>) -> Box<dyn Poller>,
) -> Engine<MemRx, MemTx> {
    let (mut gp, mut srx, mut stx) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let (up_tx, up_rx) = mem_wire(1024);
        let (down_tx, down_rx) = mem_wire(1024);
        gp.push(GenPort {
            name: format!("g{i}"),
            mac: [2, 0, 0, 0, 1, i as u8],
            rx: down_rx,
            tx: up_tx,
            faults_tx: FaultRates::default(),
            faults_rx: FaultRates::default(),
        });
        srx.push(up_rx);
        stx.push(down_tx);
    }
    let mut e = Engine::new(gcfg, gp, Clock::new());
    e.set_inline_pollers(vec![make(srx, stx)], Clock::new());
    e
}

#[test]
fn early_releases_are_caught() {
    let _serial = serial();
    let mut e = with_poller(3, cfg(4), |rx, tx| Box::new(EagerSwitch { rx, tx }));
    // One reduce per millisecond: the eager release overtakes the next leaf's arrival.
    let spec = TrialSpec {
        load: Load::Open {
            rate: 1000,
            burst: 1,
        },
        duration: Duration::from_millis(100),
        ..closed(20)
    };
    let r = e.run_trial(&spec);
    assert!(r.barriers.early_releases > 0, "{}", r.text());
}

/// A switch that never answers: every barrier started is lost, and the drain ends the
/// trial instead of waiting forever.
struct BlackHole(Vec<MemRx>);
impl Poller for BlackHole {
    fn poll(&mut self, _now: u64) -> bool {
        let mut junk = Vec::new();
        for rx in &mut self.0 {
            rx.rx_burst(&mut junk, BURST);
        }
        !junk.is_empty()
    }
}

#[test]
fn silent_switch_loses_every_barrier_and_drain_bounds_the_trial() {
    let _serial = serial();
    let mut e = with_poller(2, cfg(8), |rx, _tx| Box::new(BlackHole(rx)));
    let spec = TrialSpec {
        duration: Duration::from_millis(50),
        drain: Duration::from_millis(100),
        ..closed(5)
    };
    let t0 = std::time::Instant::now();
    let r = e.run_trial(&spec);
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(r.barriers.started, 8);
    assert_eq!(r.barriers.completed, 0);
    assert_eq!(r.barriers.incomplete, 8);
    assert_eq!(r.barriers.lost, 8);
    assert_eq!(r.barriers.lost_by.in_flight_at_end, 8, "{}", r.text());
    assert_eq!(r.barriers.lost_by.total(), 8);
    assert!(r.frames.tx_resend > 0, "leaves re-send while waiting");
    assert!(!r.passes(&crate::report::PassRule {
        min_achieved_ratio: 0.9
    }));
}

#[test]
fn reduce_frames_carry_timestamp_and_flags() {
    let _serial = serial();
    let mut e = with_poller(1, cfg(1), |rx, _tx| Box::new(BlackHole(rx)));
    let now = 123_456_789;
    let pkt = e.reduce_pkt(
        0,
        LeafSend {
            group: GroupId(0),
            epoch: Epoch::DEFAULT,
            seq: Seq(7),
            retransmit: true,
        },
        now,
    );
    let r = FrameRepr::parse(pkt.as_slice()).unwrap();
    assert_eq!(r.kind, Kind::Reduce);
    assert_eq!(r.seq, Seq(7));
    assert_eq!(r.tx_timestamp, Some(now));
    assert!(r.flags.contains(Flags::RETRANSMIT) && r.flags.contains(Flags::HAS_TIMESTAMP));
    assert_eq!(r.src, MacAddr([2, 0, 0, 0, 1, 0]));
    e.cfg.timestamps = false;
    let r = FrameRepr::parse(
        e.reduce_pkt(
            0,
            LeafSend {
                group: GroupId(0),
                epoch: Epoch::DEFAULT,
                seq: Seq(7),
                retransmit: false,
            },
            now,
        )
        .as_slice(),
    )
    .unwrap();
    assert_eq!(r.tx_timestamp, None);
}

/// The generator's `n` ports and one more, `x`, wired to a barrier-switch root (in-memory,
/// inline) whose groups are the generator's (all `n` ports children) and 8 foreign groups whose
/// one child is the last generator port; `x` is named by no group.
fn with_switch_and_x(
    n: usize,
    gcfg: GenConfig,
) -> (
    Engine<MemRx, MemTx>,
    FloodPort<MemRx, MemTx>,
    barrier_switch::engine::SwitchStats,
) {
    let mut gen_ports = Vec::new();
    let mut sw_ports = Vec::new();
    let mut x = None;
    for i in 0..=n {
        let (g, sw) = wired(i, FaultRates::default());
        if i < n {
            gen_ports.push(g);
        } else {
            x = Some(FloodPort {
                name: "x".into(),
                mac: g.mac,
                rx: g.rx,
                tx: g.tx,
            });
        }
        sw_ports.push(sw);
    }
    let members = gcfg.first_group..gcfg.first_group + gcfg.groups;
    let table = Arc::new(
        build_table(&[
            GroupBlock {
                numbers: members.clone(),
                config: GroupConfig::root(PortSet((1u64 << n) - 1)),
            },
            GroupBlock {
                numbers: members.end..members.end + 8,
                config: GroupConfig::root(PortSet(1u64 << (n - 1))),
            },
        ])
        .unwrap(),
    );
    let (e, stats) = inline_switch(gcfg, gen_ports, sw_ports, table);
    (e, x.expect("port x"), stats)
}

#[test]
fn a_flood_on_a_nonmember_and_a_member_port_is_refused_and_every_barrier_completes() {
    use crate::flood::{check_switch, states, FloodGroups, PortExpect};
    let _serial = serial();
    let gcfg = GenConfig {
        resend_timeout_ns: 20 * MS,
        ..cfg(32)
    };
    let (mut e, x, stats) = with_switch_and_x(3, gcfg);
    let foreign = 32..40;
    let foreign_before = states(&stats, foreign.clone());
    e.set_flood(FloodPlan {
        targets: vec![FloodOn::Extra(x), FloodOn::Member(0)],
        rate: Some(200_000),
        phases: 2,
        groups: FloodGroups {
            members: 0..32,
            foreign: foreign.clone(),
            table: 40,
            unknown: 40..1000,
            epoch: 1,
        },
        seed: 3,
    })
    .unwrap();
    let r = e.run_trial(&TrialSpec {
        load: Load::Closed,
        duration: Duration::from_millis(800),
        count: None,
        drain: Duration::from_secs(5),
    });
    let f = r.flood.clone().expect("a flood report");
    let b = &r.barriers;
    assert!(b.completed > 0, "{}", r.text());
    assert_eq!((b.incomplete, b.early_releases), (0, 0), "{}", r.text());
    assert_eq!(b.started, b.completed);
    // Four phases, control first; the flood only in flood phases; every class sent.
    assert_eq!(f.per_phase.len(), 4);
    for (i, p) in f.per_phase.iter().enumerate() {
        assert_eq!(p.flood, i % 2 == 1);
        // (A flood phase may send nothing only if the loop lost its CPU for all of it.)
        assert!(p.flood || p.flood_frames == 0, "{}", r.text());
    }
    assert!(f.flood.flood_frames > 0, "{}", r.text());
    assert_eq!(f.sent, f.flood.flood_frames, "{}", r.text());
    // The phases cover the load, not the drain: at most the groups' last barriers are outside.
    let in_phases = f.control.completed + f.flood.completed;
    assert!(
        in_phases <= b.completed && in_phases + 32 >= b.completed,
        "{}",
        r.text()
    );
    assert_eq!(f.targets.len(), 2);
    assert_eq!(f.targets[0].by_class.len(), 2);
    assert_eq!(f.targets[1].by_class.len(), 4);
    for t in &f.targets {
        assert!(t.by_class.iter().all(|(_, n)| *n > 0), "{}", r.text());
    }
    assert_eq!(f.unsent, 0);
    // What the switch counted: let it take everything left on its wires first.
    for _ in 0..1000 {
        e.poll_inline();
    }
    let expect: Vec<PortExpect> = e
        .flood_sent()
        .into_iter()
        .map(|(member, name, sent)| PortExpect {
            switch_port: member.unwrap_or(3),
            name,
            nonmember: member.is_none(),
            sent,
        })
        .collect();
    let check = check_switch(
        &stats,
        &expect,
        &foreign_before,
        foreign,
        b.completed,
        f.unsent,
    );
    assert!(check.ok, "{}\n{}", check.text(), r.text());
    // The extra port's device took exactly the frames counted per class.
    assert_eq!(
        e.flood_device_tx(),
        vec![("x".to_string(), f.targets[0].sent)]
    );
}

/// Runs the switch's pollers, except on the first call: then it sleeps `pause` instead, as if
/// the generator's core had been taken away before the switch could answer.
struct PauseFirst {
    inner: Vec<Box<dyn Poller>>,
    pause: Option<Duration>,
}
impl Poller for PauseFirst {
    fn poll(&mut self, now: u64) -> bool {
        if let Some(d) = self.pause.take() {
            std::thread::sleep(d);
            return true;
        }
        let mut busy = false;
        for p in &mut self.inner {
            busy |= p.poll(now);
        }
        busy
    }
}

#[test]
fn re_sends_after_the_generators_own_pause_are_its_own() {
    let _serial = serial();
    // Leaf timer 2 ms; the loop stops for 20 ms right after the first reduces left, so every
    // leaf's timer runs out while the generator is away: each barrier needs a re-send, and
    // the report puts it on the generator, not on the switch.
    let mut e = with_switch(2, cfg(8), FaultRates::default());
    let inner = e.take_inline_pollers();
    let clock = e.inline_clock;
    e.set_inline_pollers(
        vec![Box::new(PauseFirst {
            inner,
            pause: Some(Duration::from_millis(20)),
        })],
        clock,
    );
    let r = e.run_trial(&closed(1));
    let b = &r.barriers;
    assert_eq!(b.completed, 8, "{}", r.text());
    assert_eq!(b.needed_resend, 8, "{}", r.text());
    assert_eq!(b.lost_by.generator_behind, 8, "{}", r.text());
    assert_eq!(b.lost_by.unanswered, 0, "{}", r.text());
    assert!(r.generator_pauses.count >= 1 && r.generator_pauses.longest_ns >= 20 * MS);
    assert!(
        r.text().contains("lost 8 (generator behind 8)"),
        "{}",
        r.text()
    );
}

#[test]
fn after_a_pause_every_waiting_release_is_read_before_any_timer() {
    let _serial = serial();
    // 256 groups on 2 ports: 256 releases wait on each port after the pause, 8 bursts' worth.
    // Read one burst and then judge the timers, and 224 of them would be re-sent although
    // their releases had arrived.
    struct PauseAfterAnswering {
        inner: Vec<Box<dyn Poller>>,
        answered: bool,
    }
    impl Poller for PauseAfterAnswering {
        fn poll(&mut self, now: u64) -> bool {
            let mut busy = false;
            for p in &mut self.inner {
                busy |= p.poll(now);
            }
            if !busy && !self.answered {
                // nothing more to do: every release is on its way; now the core goes away
                self.answered = true;
                std::thread::sleep(Duration::from_millis(20));
            }
            busy
        }
    }
    let mut e = with_switch(2, cfg(256), FaultRates::default());
    let inner = e.take_inline_pollers();
    let clock = e.inline_clock;
    // The switch runs to idle before the pause (the pollers are polled until none is busy).
    struct UntilIdle(PauseAfterAnswering);
    impl Poller for UntilIdle {
        fn poll(&mut self, now: u64) -> bool {
            let mut any = false;
            for _ in 0..10_000 {
                if !self.0.poll(now) {
                    break;
                }
                any = true;
            }
            any
        }
    }
    e.set_inline_pollers(
        vec![Box::new(UntilIdle(PauseAfterAnswering {
            inner,
            answered: false,
        }))],
        clock,
    );
    let r = e.run_trial(&closed(1));
    let b = &r.barriers;
    assert_eq!(b.completed, 256, "{}", r.text());
    assert!(r.generator_pauses.count >= 1, "{}", r.text());
    assert_eq!(b.needed_resend, 0, "{}", r.text());
}
