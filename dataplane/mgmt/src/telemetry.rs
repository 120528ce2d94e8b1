//! The switch's counters and group state for the tools operators already use: DPDK telemetry
//! commands (`dpdk-telemetry.py -f <file-prefix>`, next to DPDK's own `/ethdev/...`) and a JSON
//! dump of the final counters (`barrier-switch run --stats-json FILE`).
//!
//! | command | reply (a flat dictionary; `/` in a key separates levels) |
//! | --- | --- |
//! | `/barrier/stats` | every RX counter summed over the pollers (`rx/<name>`, the names the report prints), every TX counter summed over the ports (`tx/<name>`), the scheduler's (`scheduler/<name>`) |
//! | `/barrier/ports` | per port: `<port>/port_id`, `<port>/rx_frames`, `<port>/tx_frames_out`, `<port>/policer_rate` and `<port>/policer_burst` (0: no policer), and the port's xstats under DPDK's own names (`<port>/rx_good_packets`, ...) |
//! | `/barrier/lcores` | per loop: `<lcore>/busy_polls`, `<lcore>/idle_polls`, `<lcore>/backoffs` |
//! | `/barrier/groups` | `capacity`, `configured`, `completions`, `resends`, then `<group>/completions` for the first configured groups |
//! | `/barrier/group,N` | group N: `epoch`, `role`, `parent`, `children`, `phase`, `seq`, `arrived`, `missing`, `completions`, `resends`; for a group in `[stragglers] groups` also its straggler report (`crate::straggler`) |
//!
//! Consistency: every counter is one `AtomicU64` (or `AtomicU32`) cell written by one thread,
//! so no value is ever torn; a reply is not one snapshot across cells (a frame counted in `rx/`
//! may not be in `tx/` yet). A group's state is one 128-bit load of its table slot, so `phase`,
//! `seq` and `arrived` always belong together.

use crate::dataplane::Dataplane;
use crate::snapshot::{Set, Snapshot};
#[cfg(feature = "dpdk")]
use barrier_protocol::switch::{GroupState, Phase, Role};
#[cfg(feature = "dpdk")]
use barrier_protocol::{GroupId, PortSet};
use barrier_runtime::counters::LoopCounters;
#[cfg(feature = "dpdk")]
use dpdk::telemetry::register_dict;
#[cfg(feature = "dpdk")]
use dpdk::{DpdkError, Eal, PortId, TelemetryValue};
use std::sync::{Arc, OnceLock};

/// Groups listed one by one in `/barrier/groups` (a dictionary holds at most 256 entries).
pub const GROUPS_LISTED: usize = 64;

#[cfg(feature = "dpdk")]
/// Why the telemetry commands could not be registered.
#[derive(Debug, thiserror::Error)]
#[error("telemetry command {command}: {source}")]
pub struct RegisterError {
    pub command: &'static str,
    #[source]
    pub source: DpdkError,
}

#[cfg(feature = "dpdk")]
/// A telemetry command's answer, as `register_dict` takes it.
type Handler = Box<dyn Fn(Option<&str>) -> Vec<(String, TelemetryValue)> + Send + Sync>;

/// The loops of a running switch, known once they are placed (set by the management thread).
pub type LoopsCell = Arc<OnceLock<Vec<(u32, Arc<LoopCounters>)>>>;

/// `(name, value)` pairs of `/barrier/stats`: the RX, TX and scheduler counters, every one,
/// summed over pollers and ports. Also the body of `--stats-json`.
pub fn stats_entries(dp: &dyn Dataplane) -> Vec<(String, u64)> {
    snapshot_entries(&dp.snapshot())
}

/// `stats_entries` of one snapshot.
pub fn snapshot_entries(snap: &Snapshot) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for (prefix, set) in [
        ("rx", Set::Rx),
        ("tx", Set::Tx),
        ("scheduler", Set::Scheduler),
    ] {
        out.extend(
            snap.named(set, snap.total(set))
                .map(|(n, v)| (format!("{prefix}/{n}"), v)),
        );
    }
    out
}

/// The final counters as one JSON object: `{"switch": name, "rx": {...}, "tx": {...},
/// "scheduler": {...}, "ports": {"a": {"rx": {...}, "tx": {...}}}}`, every counter (zeroes
/// included) under the names the report prints.
pub fn stats_json(dp: &dyn Dataplane) -> serde_json::Value {
    snapshot_json(&dp.snapshot())
}

/// `stats_json` of one snapshot.
pub fn snapshot_json(snap: &Snapshot) -> serde_json::Value {
    use serde_json::{Map, Value};
    let obj = |set: Set, values: Vec<u64>| -> Value {
        Value::Object(
            snap.named(set, values)
                .map(|(n, v)| (n.to_string(), Value::from(v)))
                .collect(),
        )
    };
    let mut ports = Map::new();
    for (p, name) in snap.ports.iter().enumerate() {
        let mut port = Map::new();
        port.insert("rx".into(), obj(Set::Rx, snap.port(Set::Rx, p)));
        port.insert("tx".into(), obj(Set::Tx, snap.port(Set::Tx, p)));
        ports.insert(name.clone(), Value::Object(port));
    }
    let mut top = Map::new();
    top.insert("switch".into(), Value::from(snap.switch.clone()));
    for (key, set) in [
        ("rx", Set::Rx),
        ("tx", Set::Tx),
        ("scheduler", Set::Scheduler),
    ] {
        top.insert(key.into(), obj(set, snap.total(set)));
    }
    top.insert("ports".into(), Value::Object(ports));
    Value::Object(top)
}

#[cfg(feature = "dpdk")]
fn port_names(dp: &dyn Dataplane, set: PortSet) -> String {
    set.iter()
        .map(|p| {
            dp.port_names()
                .get(p.get() as usize)
                .cloned()
                .unwrap_or_else(|| format!("port{}", p.get()))
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(feature = "dpdk")]
/// `/barrier/group,N`: one group's configuration, state and counters; `None` for a number that
/// does not parse or a group that is not configured (DPDK answers the command with null).
pub fn group_entries(
    dp: &dyn Dataplane,
    param: Option<&str>,
) -> Option<Vec<(String, TelemetryValue)>> {
    let n: u32 = param?.trim().parse().ok()?;
    let g = GroupId(n);
    let cfg = dp.table().config(g)?;
    let state: GroupState = dp.table().state(g)?;
    // The telemetry commands run in the DPDK switch, whose table counts every group.
    let counts = dp.table().counts(g).unwrap_or_default();
    let s = |v: &str| TelemetryValue::Str(v.to_string());
    let u = TelemetryValue::U64;
    let (role, parent) = match cfg.role {
        Role::Root => ("root", String::new()),
        Role::Intermediate { parent } => ("intermediate", port_names(dp, PortSet::single(parent))),
    };
    let arrived = state.arrivals();
    let known = state.phase != Phase::Unknown || !arrived.is_empty();
    let missing = PortSet(cfg.children.0 & !arrived.0);
    let mut out = vec![
        ("group".into(), u(u64::from(n))),
        ("epoch".into(), u(u64::from(cfg.epoch.0))),
        ("role".into(), s(role)),
        ("parent".into(), s(&parent)),
        ("children".into(), s(&port_names(dp, cfg.children))),
        ("phase".into(), s(state.phase.name())),
        // In `unknown` with nothing heard, seq means nothing: say so rather than print 0.
        (
            "seq".into(),
            if known {
                u(u64::from(state.seq.0))
            } else {
                s("none")
            },
        ),
        ("arrived".into(), s(&port_names(dp, arrived))),
        (
            "failed".into(),
            s(&state.failure().map(|f| f.to_string()).unwrap_or_default()),
        ),
        ("missing".into(), s(&port_names(dp, missing))),
        ("completions".into(), u(u64::from(counts.completions))),
        ("resends".into(), u(u64::from(counts.resends))),
    ];
    if let Some(w) = dp.watch() {
        if let Some(r) = w.report(n) {
            let g = r.lock();
            let run = dp.table().run(GroupId(n));
            out.extend(straggler_entries(dp, &g, run, w.clock.now_ns()));
        }
    }
    Some(out)
}

#[cfg(feature = "dpdk")]
/// The straggler report of a watched group (`crate::straggler`): the barrier in progress and
/// since when it waits, latency percentiles, the recent barriers' last child and spread, and
/// how often each port was last.
fn straggler_entries(
    dp: &dyn Dataplane,
    g: &crate::straggler::GroupWatch,
    run: Option<barrier_protocol::switch::Run>,
    now_ns: u64,
) -> Vec<(String, TelemetryValue)> {
    let u = TelemetryValue::U64;
    let name = |p: barrier_protocol::PortIdx| port_names(dp, PortSet::single(p));
    let mut out = Vec::new();
    if let Some((seq, first)) = g.waiting(run) {
        out.push(("waiting_seq".into(), u(u64::from(seq))));
        out.push((
            "waiting_since_us".into(),
            u(now_ns.saturating_sub(first) / 1000),
        ));
    }
    if let Some((seq, last, spread)) = g.awaiting_release(run) {
        out.push(("awaiting_release_seq".into(), u(u64::from(seq))));
        out.push((
            "awaiting_release_last".into(),
            TelemetryValue::Str(name(last)),
        ));
        out.push(("awaiting_release_spread_ns".into(), u(spread)));
    }
    out.push(("barriers_measured".into(), u(g.latency.len())));
    if !g.latency.is_empty() {
        for (k, q) in [("p50", 0.5), ("p99", 0.99)] {
            out.push((format!("latency_{k}_ns"), u(g.latency.value_at_quantile(q))));
        }
        out.push(("latency_max_ns".into(), u(g.latency.max())));
    }
    if let Some(b) = g.recent.back() {
        out.push((
            "last_straggler".into(),
            TelemetryValue::Str(name(b.last_port)),
        ));
        out.push(("last_spread_ns".into(), u(b.spread_ns)));
    }
    for b in &g.recent {
        out.push((
            format!("recent/{}/last", b.seq),
            TelemetryValue::Str(name(b.last_port)),
        ));
        out.push((format!("recent/{}/spread_ns", b.seq), u(b.spread_ns)));
        if let Some(l) = b.latency_ns {
            out.push((format!("recent/{}/latency_ns", b.seq), u(l)));
        }
    }
    for (p, &c) in g.last_counts.iter().enumerate() {
        if c > 0 {
            if let Some(pn) = dp.port_names().get(p) {
                out.push((format!("last_arrivals/{pn}"), u(c)));
            }
        }
    }
    out
}

#[cfg(feature = "dpdk")]
/// `/barrier/groups`: totals, then the first `GROUPS_LISTED` configured groups' completions.
pub fn groups_entries(dp: &dyn Dataplane) -> Vec<(String, TelemetryValue)> {
    let cap = dp.table().capacity();
    let mut configured = 0u64;
    let mut completions = 0u64;
    let mut resends = 0u64;
    let mut listed = Vec::new();
    for n in 0..cap {
        if dp.table().config(GroupId(n)).is_none() {
            continue;
        }
        configured += 1;
        let counts = dp.table().counts(GroupId(n)).unwrap_or_default();
        let c = counts.completions;
        completions += u64::from(c);
        resends += u64::from(counts.resends);
        if listed.len() < GROUPS_LISTED {
            listed.push((
                format!("{n}/completions"),
                TelemetryValue::U64(u64::from(c)),
            ));
        }
    }
    let mut out = vec![
        ("capacity".to_string(), TelemetryValue::U64(u64::from(cap))),
        ("configured".to_string(), TelemetryValue::U64(configured)),
        ("completions".to_string(), TelemetryValue::U64(completions)),
        ("resends".to_string(), TelemetryValue::U64(resends)),
    ];
    out.extend(listed);
    out
}

#[cfg(feature = "dpdk")]
/// `/barrier/ports`: per port its id, the switch's RX frames and TX frames, and its xstats under
/// DPDK's names (a port whose xstats cannot be read gets `<port>/xstats_error`).
pub fn ports_entries(dp: &dyn Dataplane, ids: &[PortId]) -> Vec<(String, TelemetryValue)> {
    let mut out = Vec::new();
    let snap = dp.snapshot();
    for (p, (name, id)) in dp.port_names().iter().zip(ids).enumerate() {
        let rx = snap.value(Set::Rx, "frames", Some(p));
        out.push((
            format!("{name}/port_id"),
            TelemetryValue::U64(u64::from(id.0)),
        ));
        out.push((format!("{name}/rx_frames"), TelemetryValue::U64(rx)));
        out.push((
            format!("{name}/tx_frames_out"),
            TelemetryValue::U64(snap.value(Set::Tx, "frames_out", Some(p))),
        ));
        // the policer in force (file or `barrierctl port set`); 0: none
        let policer = dp.policer(p).and_then(|r| r.get());
        out.push((
            format!("{name}/policer_rate"),
            TelemetryValue::U64(policer.map_or(0, |s| s.rate)),
        ));
        out.push((
            format!("{name}/policer_burst"),
            TelemetryValue::U64(policer.map_or(0, |s| s.burst)),
        ));
        match dpdk::port::xstats_of(*id) {
            Ok(xs) => out.extend(
                xs.into_iter()
                    .map(|(k, v)| (format!("{name}/{k}"), TelemetryValue::U64(v))),
            ),
            Err(e) => out.push((
                format!("{name}/xstats_error"),
                TelemetryValue::Str(e.to_string()),
            )),
        }
    }
    out
}

#[cfg(feature = "dpdk")]
/// `/barrier/lcores`: each loop's passes with work, passes without, and idle back-offs.
pub fn lcores_entries(loops: &LoopsCell) -> Vec<(String, TelemetryValue)> {
    let Some(loops) = loops.get() else {
        return Vec::new();
    };
    let mut snap = Snapshot::default();
    snap.add_loops(loops);
    snap.rows
        .into_iter()
        .map(|r| {
            let l = r.lcore.unwrap_or_default();
            (format!("{l}/{}", r.name), TelemetryValue::U64(r.value))
        })
        .collect()
}

#[cfg(feature = "dpdk")]
/// Whether `dpdk-dumpcap` can attach to a switch started with these EAL arguments: it needs
/// shared configuration (no `--no-shconf`, no `--in-memory`). Initialises `rte_pdump` when it
/// can; returns the line the switch logs either way.
pub fn offer_capture(eal: &Eal, eal_args: &[String]) -> Result<String, DpdkError> {
    if let Some(flag) = eal_args
        .iter()
        .find(|a| *a == "--no-shconf" || *a == "--in-memory")
    {
        return Ok(format!(
            "capture: off ({flag}: no shared configuration for dpdk-dumpcap to attach to)"
        ));
    }
    dpdk::capture::pdump_init(eal)?;
    Ok("capture: rte_pdump initialised, dpdk-dumpcap can attach (same --file-prefix)".into())
}

#[cfg(feature = "dpdk")]
/// Registers the `/barrier/...` commands for one running switch. Commands last for the process
/// (DPDK cannot unregister them): one switch per process.
pub fn register(
    eal: &Eal,
    dp: Arc<dyn Dataplane>,
    port_ids: Vec<PortId>,
    loops: LoopsCell,
) -> Result<(), RegisterError> {
    let reg = |command: &'static str, help: &str, f: Handler| {
        register_dict(eal, command, help, f).map_err(|source| RegisterError { command, source })
    };
    let s = dp.clone();
    reg(
        "/barrier/stats",
        "Returns the switch's RX, TX and scheduler counters, summed. Takes no parameters.",
        Box::new(move |_| {
            stats_entries(&*s)
                .into_iter()
                .map(|(k, v)| (k, TelemetryValue::U64(v)))
                .collect()
        }),
    )?;
    let s = dp.clone();
    reg(
        "/barrier/ports",
        "Returns each port's id, barrier frames in and out, and xstats. Takes no parameters.",
        Box::new(move |_| ports_entries(&*s, &port_ids)),
    )?;
    reg(
        "/barrier/lcores",
        "Returns each polling loop's busy and idle passes and back-offs. Takes no parameters.",
        Box::new(move |_| lcores_entries(&loops)),
    )?;
    let s = dp.clone();
    reg(
        "/barrier/groups",
        "Returns the group table's totals and the first groups' completions. Takes no parameters.",
        Box::new(move |_| groups_entries(&*s)),
    )?;
    let s = dp.clone();
    reg(
        "/barrier/group",
        "Returns one group's epoch, phase, sequence number, arrived and missing children. Parameters: int group number",
        Box::new(move |p| {
            group_entries(&*s, p).unwrap_or_else(|| {
                vec![(
                    "error".into(),
                    TelemetryValue::Str(format!(
                        "no configured group {:?} (want /barrier/group,N)",
                        p.unwrap_or("")
                    )),
                )]
            })
        }),
    )?;
    Ok(())
}
