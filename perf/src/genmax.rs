//! `barrier-perf genmax`: how many frames barrier-gen sends per second on its one TX lcore when
//! the system under test is not the limit (issue 23's generator target, against `testpmd
//! --forward-mode=txonly`, which perf/run.sh measures in the same run).
//!
//! The generator (closed loop, every group in flight, leaf timer 200 ms so a preempted loop
//! does not turn into re-sends) runs on the main lcore; `barrier_testbed::reflector` (counts
//! reduces per group, sends the release when every port reported: the least any switch does)
//! runs on a second lcore, over `net_ring` pairs in this process. The generator also receives
//! and checks every release on its lcore: what it is measured doing is its whole job, where
//! txonly only allocates and sends.

use barrier_gen::engine::{Clock, Engine, GenConfig, Load, TrialSpec};
use barrier_gen::wiring::{self, FarEnd, PortPlan};
use barrier_runtime::poll::Poller;
use barrier_testbed::reflector::Reflector;
use dpdk::{Eal, LcoreId};
use serde_json::{json, Value};
use std::time::Duration;

/// Runs the generator against the reflector on `sut_lcore`; the JSON object for genmax.json.
pub fn genmax(
    eal: &Eal,
    ports: usize,
    groups: u32,
    secs: f64,
    sut_lcore: LcoreId,
) -> Result<Value, String> {
    let plan = PortPlan::Inproc {
        ports,
        switch_resend_ns: 20_000_000,
        switch_backoff: barrier_protocol::backoff::Backoff::FIXED,
        parent: false,
        parent_delay_ns: 0,
    };
    let (mut w, gen, far) =
        wiring::open_ports(eal.clone(), "gm", &plan, &[], 1).map_err(|e| format!("ports: {e}"))?;
    let rp = far.into_iter().map(FarEnd::into_reflector_port).collect();
    let pollers: Vec<Box<dyn Poller>> = vec![Box::new(Reflector::new(rp, 0, groups, 0))];
    w.attach(
        pollers,
        barrier_runtime::clock::Clock::new(),
        None,
        Some(sut_lcore),
    )
    .map_err(|e| format!("reflector lcore: {e}"))?;
    let cfg = GenConfig {
        groups,
        resend_timeout_ns: 200_000_000,
        barrier_deadline_ns: 10_000_000_000,
        ..GenConfig::default()
    };
    let mut e = Engine::new(cfg, gen, Clock::tsc());
    let spec = |s: f64| TrialSpec {
        load: Load::Closed,
        duration: Duration::from_secs_f64(s),
        count: None,
        drain: Duration::from_secs(2),
    };
    e.run_trial(&spec((secs / 5.0).max(0.2)));
    let r = e.run_trial(&spec(secs));
    let inline = e.take_inline_pollers();
    w.stop_switch(inline)
        .map_err(|e| format!("stop reflector: {e}"))?;
    e.drain_rx();
    drop(e);
    w.close().map_err(|e| format!("close: {e}"))?;
    Ok(json!({
        "ports": ports,
        "groups": groups,
        "device": "net_ring pairs, one process; the reflector on its own lcore",
        "tx_fps": r.frames.tx_per_s,
        "rx_fps": r.frames.rx_per_s,
        "barriers_per_s": r.barriers.per_s,
        "lost": r.barriers.lost,
        "early_releases": r.barriers.early_releases,
        "tx_resend": r.frames.tx_resend,
        "tx_blocked": r.frames.tx_blocked,
        "what": "frames barrier-gen sent per second on its one lcore (which also receives every release), closed loop against a reflector on another lcore",
    }))
}
