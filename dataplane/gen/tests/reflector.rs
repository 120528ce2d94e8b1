//! The generator against the reference reflector (`barrier_testbed::reflector`), in memory: the
//! generator's own ceiling, and the counts both sides must agree on.
use barrier_gen::engine::{Clock, Engine, GenConfig, GenPort, Load, TrialSpec};
use barrier_gen::fault::FaultRates;
use barrier_runtime::io::{mem_wire, MemRx, MemTx};
use barrier_testbed::reflector::{Reflector, ReflectorPort};
use std::time::Duration;

type Rig = (Vec<GenPort<MemRx, MemTx>>, Vec<ReflectorPort<MemRx, MemTx>>);

fn ports(n: u8) -> Rig {
    let mut gp = Vec::new();
    let mut rp = Vec::new();
    for i in 0..n {
        let (up_tx, up_rx) = mem_wire(1024);
        let (down_tx, down_rx) = mem_wire(1024);
        let mac = [2, 0, 0, 0, 1, i];
        gp.push(GenPort {
            name: format!("g{i}"),
            mac,
            rx: down_rx,
            tx: up_tx,
            faults_tx: FaultRates::default(),
            faults_rx: FaultRates::default(),
        });
        rp.push(ReflectorPort {
            rx: up_rx,
            tx: down_tx,
            peer_mac: mac,
        });
    }
    (gp, rp)
}

fn closed(count: u64) -> TrialSpec {
    TrialSpec {
        load: Load::Closed,
        duration: Duration::from_secs(30),
        count: Some(count),
        drain: Duration::from_secs(5),
    }
}

#[test]
fn generator_completes_barriers_through_the_reflector() {
    let (gp, rp) = ports(3);
    let cfg = GenConfig {
        groups: 20,
        first_group: 100,
        first_seq: u32::MAX - 5,
        ..GenConfig::default()
    };
    let mut e = Engine::new(cfg, gp, Clock::new());
    e.set_inline_pollers(
        vec![Box::new(Reflector::new(rp, 100, 20, u32::MAX - 5))],
        barrier_runtime::clock::Clock::new(),
    );
    let r = e.run_trial(&closed(30));
    assert!(r.latency_echo.is_none());
    // Thirty barriers per group across the sequence-number wrap.
    assert_eq!(r.barriers.completed, 600, "{}", r.text());
    assert_eq!((r.barriers.lost, r.barriers.early_releases), (0, 0));
}

#[test]
fn echoed_timestamps_give_the_echo_latency() {
    let (gp, rp) = ports(2);
    let cfg = GenConfig {
        groups: 8,
        ..GenConfig::default()
    };
    let mut e = Engine::new(cfg, gp, Clock::new());
    let mut refl = Reflector::new(rp, 0, 8, 0);
    refl.echo_timestamps = true;
    e.set_inline_pollers(vec![Box::new(refl)], barrier_runtime::clock::Clock::new());
    let r = e.run_trial(&closed(25));
    assert_eq!(r.barriers.completed, 200);
    let echo = r.latency_echo.expect("releases carried timestamps");
    // One sample per leaf release; the echoed stamp is the last reduce's, so the echo
    // latency never exceeds the leaf's own wait from its first reduce.
    assert_eq!(echo.samples, r.latency_leaf.samples);
    assert!(
        echo.max_ns <= r.latency_leaf.max_ns + 1,
        "{echo:?} vs {:?}",
        r.latency_leaf
    );
}
