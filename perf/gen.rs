//! barrier-gen benchmark (`cargo bench -p barrier-gen --bench gen [-- SECONDS]`, as root): the
//! same generator, in the same run and process, drives first a minimal reference system under
//! test (`barrier_testbed::reflector`: counts reduces, sends releases) and then a barrier-switch
//! root, both on net_ring pairs and run inside the generator's loop on one lcore. Prints each
//! side's closed-loop barriers/s and latency, and the ratios barrier-switch / reference. The
//! reference phase is also the generator's own ceiling on this machine; a third phase runs it
//! against the reflector with 1,048,576 groups, and the ratio to the 1,024-group phase is the
//! generator's own scaling. See perf/gen.md.

use barrier_gen::engine::{Clock, Engine, GenConfig, Load, TrialSpec};
use barrier_gen::report::{ns, rate, TrialReport};
use barrier_gen::spread::ByGroup;
use barrier_gen::wiring::{self, FarEnd, PortPlan, Wiring};
use barrier_runtime::dpdk_io::{DpdkRx, DpdkTx};
use barrier_runtime::poll::Poller;
use barrier_testbed::reflector::Reflector;
use std::time::Duration;

const PORTS: usize = 4;
const GROUPS: u32 = 1024;
/// The scale phase: the generator against the reflector with this many groups.
const BIG_GROUPS: u32 = 1 << 20;

fn run(engine: &mut Engine<DpdkRx, ByGroup<DpdkTx>>, secs: f64) -> TrialReport {
    // A short warm-up trial first (page faults, caches), then the measured one.
    let spec = |s: f64| TrialSpec {
        load: Load::Closed,
        duration: Duration::from_secs_f64(s),
        count: None,
        drain: Duration::from_secs(2),
    };
    engine.run_trial(&spec(secs / 5.0));
    engine.run_trial(&spec(secs))
}

/// The generator on `gen` against the system under test attached to `w`, run inline in the
/// generator's loop (one lcore): warm-up and measured trial, then everything closed.
fn measure(mut w: Wiring, gen: Vec<wiring::DpdkGenPort>, cfg: GenConfig, secs: f64) -> TrialReport {
    let mut e = Engine::new(cfg, gen, Clock::tsc());
    let (p, c) = w
        .switch
        .as_mut()
        .unwrap()
        .inline
        .take()
        .expect("one lcore: inline");
    e.set_inline_pollers(p, c);
    let r = run(&mut e, secs);
    finish(e, w);
    r
}

fn finish(mut engine: Engine<DpdkRx, ByGroup<DpdkTx>>, mut w: Wiring) {
    let inline = engine.take_inline_pollers();
    let sut = w.stop_switch(inline).expect("stop system under test");
    engine.drain_rx();
    drop(engine);
    drop(sut);
    w.close().expect("every mbuf back");
}

fn cfg() -> GenConfig {
    // A long leaf timer: this measures throughput, and a preempted loop should not turn into
    // re-send traffic.
    GenConfig {
        groups: GROUPS,
        resend_timeout_ns: 200_000_000,
        barrier_deadline_ns: 10_000_000_000,
        ..GenConfig::default()
    }
}

/// The generator against the minimal reflector, `groups` groups on every port.
fn reflector_phase(
    eal: &dpdk::Eal,
    plan: &PortPlan,
    name: &str,
    groups: u32,
    secs: f64,
) -> TrialReport {
    let (mut w, gen, far) = wiring::open_ports(eal.clone(), name, plan, &[], 1).expect("ports");
    let rp = far.into_iter().map(FarEnd::into_reflector_port).collect();
    let pollers: Vec<Box<dyn Poller>> = vec![Box::new(Reflector::new(rp, 0, groups, 0))];
    w.attach(pollers, barrier_runtime::clock::Clock::new(), None, None)
        .expect("attach");
    measure(w, gen, GenConfig { groups, ..cfg() }, secs)
}

fn main() {
    let secs = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<f64>().ok())
        .unwrap_or(3.0);
    let args = dpdk::test_args("bench-gen", &["-l", "0", "--log-level=*:warning"]);
    let (eal, _) = match dpdk::Eal::init(args) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("gen bench: EAL: {e} (DPDK needs root)");
            std::process::exit(1);
        }
    };
    println!("gen bench: {PORTS} ports x {GROUPS} groups (then the reflector at {BIG_GROUPS} groups), closed loop, {secs} s per phase, one lcore (generator and system under test in one loop)");
    let plan = PortPlan::Inproc {
        ports: PORTS,
        switch_resend_ns: 20_000_000,
        switch_backoff: barrier_protocol::backoff::Backoff::FIXED,
        parent: false,
        parent_delay_ns: 0,
    };

    // Phase 1: the minimal reflector.
    let reference = reflector_phase(&eal, &plan, "ref", GROUPS, secs);

    // Phase 2: barrier-switch.
    let (w, gen) = wiring::open(
        eal.clone(),
        "sw",
        &plan,
        &[(0..GROUPS, (1u64 << PORTS) - 1)],
        &[],
        1,
        None,
    )
    .expect("ports");
    let switch = measure(w, gen, cfg(), secs);

    // Phase 3: the generator alone at scale, against the reflector with a million groups.
    let scaled = reflector_phase(&eal, &plan, "big", BIG_GROUPS, secs);

    for (name, r) in [
        ("reference", &reference),
        ("barrier-switch", &switch),
        ("reference 1M", &scaled),
    ] {
        println!(
            "{name:>15}: {} barriers/s, {} frames/s each way, lost {}, leaf latency p50 {} p99 {} max {}",
            rate(r.barriers.per_s),
            rate(r.frames.tx_per_s),
            r.barriers.lost,
            ns(r.latency_leaf.p50_ns),
            ns(r.latency_leaf.p99_ns),
            ns(r.latency_leaf.max_ns)
        );
    }
    println!(
        "ratio barrier-switch / reference: barriers/s {:.2}, leaf p50 latency {:.2}",
        switch.barriers.per_s / reference.barriers.per_s.max(1e-9),
        switch.latency_leaf.p50_ns as f64 / reference.latency_leaf.p50_ns.max(1) as f64
    );
    println!(
        "ratio reference {BIG_GROUPS} groups / {GROUPS} groups (the generator's own scaling): barriers/s {:.2}, frames/s {:.2}, re-sends {}",
        scaled.barriers.per_s / reference.barriers.per_s.max(1e-9),
        scaled.frames.tx_per_s / reference.frames.tx_per_s.max(1e-9),
        scaled.frames.tx_resend
    );
}
