//! Prometheus: the switch's counters in the text exposition format (version 0.0.4), served by a
//! small HTTP/1.0 server on one plain thread (`std::net`, no async runtime) when the
//! configuration has a `[metrics]` section. Off by default; the configuration's address, which
//! `config` defaults to loopback.
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `barrier_frames_received_total` | counter | `port`, `kind` (`reduce`, `release`) |
//! | `barrier_frames_sent_total` | counter | `port`, `kind` |
//! | `barrier_frames_dropped_total` | counter | `reason` (the RX counter's name without `drop_`) |
//! | `barrier_frames_policed_total` | counter | `port` |
//! | `barrier_port_policer_rate`, `barrier_port_policer_burst` | gauge | `port` (0: no policer) |
//! | `barrier_rx_events_total` | counter | `event` (`recorded`, `completions`, `duplicates`, ...) |
//! | `barrier_tx_events_total` | counter | `port`, `event` (`retransmits_out`, `tx_full_waits`, `coalesced`, `built_in_place`, ...) |
//! | `barrier_loop_passes_total` | counter | `lcore`, `state` (`busy`, `idle`) |
//! | `barrier_group_completions_total`, `barrier_group_resends_total` | counter | `group` |
//! | `barrier_group_epoch`, `barrier_group_seq`, `barrier_group_children_missing` | gauge | `group` |
//! | `barrier_group_latency_seconds` | histogram | `group` (watched groups) |
//! | `barrier_group_last_arrivals_total` | counter | `group`, `port` (watched groups) |
//! | `barrier_group_waiting_seconds` | gauge | `group` (watched groups) |
//!
//! Per-group series exist only for the groups listed in `metrics.groups` and the watched groups
//! (`[stragglers] groups` and any group `barrierctl group watch` adds while the switch runs, up
//! to `[stragglers] limit`): a million groups would be a million series.

use crate::dataplane::Dataplane;
use crate::snapshot::{Set, Snapshot};
use crate::telemetry::LoopsCell;
use barrier_protocol::switch::Phase;
use barrier_protocol::{GroupId, PortSet};
use barrier_runtime::affinity::ControlCores;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Why the metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("metrics: cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("metrics: cannot start the server thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// Every metric family: name, type, HELP text (docs/operations.md, "Metrics", lists the same
/// families and labels). The one place these are written.
pub const FAMILIES: [(&str, &str, &str); 17] = [
    (
        "barrier_frames_received_total",
        "counter",
        "Barrier frames received (parsed), by port and kind.",
    ),
    (
        "barrier_frames_sent_total",
        "counter",
        "Barrier frames sent, by port and kind.",
    ),
    (
        "barrier_frames_dropped_total",
        "counter",
        "Frames the switch received and dropped, by reason (docs/wire-format.md).",
    ),
    (
        "barrier_frames_policed_total",
        "counter",
        "Barrier frames over the port's policer rate, dropped before the group table, by port.",
    ),
    (
        "barrier_port_policer_rate",
        "gauge",
        "The port's policer rate in barrier frames per second, as set by the file or barrierctl port set; 0: no policer.",
    ),
    (
        "barrier_port_policer_burst",
        "gauge",
        "The port's policer burst in frames; 0: no policer.",
    ),
    (
        "barrier_rx_events_total",
        "counter",
        "What the group table made of received frames, and RX-side waits, by event.",
    ),
    (
        "barrier_tx_events_total",
        "counter",
        "Egress events by port: re-sends, backpressure waits, coalesced sends, frames sent in the received frame's buffer.",
    ),
    (
        "barrier_loop_passes_total",
        "counter",
        "Passes of each polling loop over its pollers, with work (busy) and without (idle).",
    ),
    (
        "barrier_group_completions_total",
        "counter",
        "Barriers of the group this switch completed.",
    ),
    (
        "barrier_group_resends_total",
        "counter",
        "Re-sends (reduce to the parent, release to a child) for the group.",
    ),
    (
        "barrier_group_epoch",
        "gauge",
        "The group's current epoch.",
    ),
    (
        "barrier_group_seq",
        "gauge",
        "Sequence number of the group's current barrier (absent while unknown and nothing heard).",
    ),
    (
        "barrier_group_children_missing",
        "gauge",
        "Children whose reduce for the current barrier has not arrived.",
    ),
    (
        "barrier_group_latency_seconds",
        "histogram",
        "Per-barrier latency at this switch: first child's reduce to the release decision.",
    ),
    (
        "barrier_group_last_arrivals_total",
        "counter",
        "Barriers of the group whose last reduce (the straggler) came from this port.",
    ),
    (
        "barrier_group_waiting_seconds",
        "gauge",
        "Age of the barrier in progress (since its first reduce); 0 when none is in progress.",
    ),
];

/// The `# HELP` and `# TYPE` lines of family `name` (`FAMILIES`).
fn family(out: &mut String, name: &str) {
    let (_, kind, help) = FAMILIES
        .iter()
        .find(|(n, _, _)| *n == name)
        .copied()
        .unwrap_or((name, "untyped", ""));
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Label values are configuration names (ports) and fixed words; escape what the format
/// requires anyway.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The exposition text for one scrape.
pub fn render(dp: &dyn Dataplane, loops: &LoopsCell, groups: &[u32]) -> String {
    let loops = loops.get();
    let mut snap = dp.snapshot();
    snap.add_loops(loops.map_or(&[], Vec::as_slice));
    let mut out = String::new();
    render_counters(&mut out, &snap, Some(dp), loops.is_some());
    render_groups(&mut out, dp, groups);
    out
}

/// The counter families of one snapshot, in exposition order; with `dp`, the policer gauges
/// (registers, not counters) in their place among them; with `loops`, the loop passes.
pub fn render_counters(out: &mut String, snap: &Snapshot, dp: Option<&dyn Dataplane>, loops: bool) {
    let rx_names = snap.names(Set::Rx);
    let tx_names = snap.names(Set::Tx);
    // Per port sums of the RX pollers' counters.
    let per_port: Vec<Vec<u64>> = (0..snap.ports.len())
        .map(|p| snap.port(Set::Rx, p))
        .collect();
    let total = snap.total(Set::Rx);
    let rx_index = |name: &str| rx_names.iter().position(|n| *n == name);
    let tx_index = |name: &str| tx_names.iter().position(|n| *n == name);

    family(out, "barrier_frames_received_total");
    for (p, name) in snap.ports.iter().enumerate() {
        for (kind, counter) in [
            ("reduce", "reduce_in"),
            ("release", "release_in"),
            ("abort", "abort_in"),
        ] {
            let v = rx_index(counter).map_or(0, |i| per_port[p][i]);
            let _ = writeln!(
                out,
                "barrier_frames_received_total{{port=\"{}\",kind=\"{kind}\"}} {v}",
                esc(name)
            );
        }
    }
    family(out, "barrier_frames_sent_total");
    for (p, name) in snap.ports.iter().enumerate() {
        let v = snap.port(Set::Tx, p);
        for (kind, counter) in [
            ("reduce", "reduce_out"),
            ("release", "release_out"),
            ("abort", "abort_out"),
        ] {
            let n = tx_index(counter).map_or(0, |i| v[i]);
            let _ = writeln!(
                out,
                "barrier_frames_sent_total{{port=\"{}\",kind=\"{kind}\"}} {n}",
                esc(name)
            );
        }
    }
    family(out, "barrier_frames_dropped_total");
    for (i, n) in rx_names.iter().enumerate() {
        if let Some(reason) = n.strip_prefix("drop_") {
            let _ = writeln!(
                out,
                "barrier_frames_dropped_total{{reason=\"{reason}\"}} {}",
                total[i]
            );
        }
    }
    family(out, "barrier_frames_policed_total");
    for (p, name) in snap.ports.iter().enumerate() {
        let v = rx_index("drop_policed").map_or(0, |i| per_port[p][i]);
        let _ = writeln!(
            out,
            "barrier_frames_policed_total{{port=\"{}\"}} {v}",
            esc(name)
        );
    }
    if let Some(dp) = dp {
        type Pick = fn(crate::policer::PolicerSpec) -> u64;
        let rate: Pick = |s| s.rate;
        let burst: Pick = |s| s.burst;
        for (metric, pick) in [
            ("barrier_port_policer_rate", rate),
            ("barrier_port_policer_burst", burst),
        ] {
            family(out, metric);
            for (p, name) in snap.ports.iter().enumerate() {
                let v = dp.policer(p).and_then(|r| r.get()).map_or(0, pick);
                let _ = writeln!(out, "{metric}{{port=\"{}\"}} {v}", esc(name));
            }
        }
    }
    family(out, "barrier_rx_events_total");
    for (i, n) in rx_names.iter().enumerate() {
        if n.starts_with("drop_") || ["frames", "reduce_in", "release_in", "abort_in"].contains(n) {
            continue;
        }
        let _ = writeln!(out, "barrier_rx_events_total{{event=\"{n}\"}} {}", total[i]);
    }
    family(out, "barrier_tx_events_total");
    for (p, name) in snap.ports.iter().enumerate() {
        let v = snap.port(Set::Tx, p);
        for (i, n) in tx_names.iter().enumerate() {
            if ["frames_out", "reduce_out", "release_out", "abort_out"].contains(n) {
                continue;
            }
            let _ = writeln!(
                out,
                "barrier_tx_events_total{{port=\"{}\",event=\"{n}\"}} {}",
                esc(name),
                v[i]
            );
        }
    }
    if loops {
        family(out, "barrier_loop_passes_total");
        for l in snap.lcores() {
            for (state, counter) in [("busy", "busy_polls"), ("idle", "idle_polls")] {
                let n: u64 = snap
                    .rows
                    .iter()
                    .filter(|r| r.set == Set::Loop && r.lcore == Some(l) && r.name == counter)
                    .map(|r| r.value)
                    .sum();
                let _ = writeln!(
                    out,
                    "barrier_loop_passes_total{{lcore=\"{l}\",state=\"{state}\"}} {n}"
                );
            }
        }
    }
}

/// The per-group families: the groups `groups` lists and the watched ones.
fn render_groups(out: &mut String, dp: &dyn Dataplane, groups: &[u32]) {
    let table = dp.table();
    // The file's `metrics.groups` and every watched group (`[stragglers] groups` and those
    // `barrierctl group watch` added), configured ones only.
    let mut listed: Vec<u32> = groups.to_vec();
    if let Some(w) = dp.watch() {
        listed.extend(w.groups());
    }
    listed.sort_unstable();
    listed.dedup();
    listed.retain(|&g| table.config(GroupId(g)).is_some());
    if !listed.is_empty() {
        type Get<'a> = Box<dyn Fn(u32) -> Option<u64> + 'a>;
        let series: [(&str, Get); 5] = [
            (
                "barrier_group_completions_total",
                Box::new(|g| table.counts(GroupId(g)).map(|c| u64::from(c.completions))),
            ),
            (
                "barrier_group_resends_total",
                Box::new(|g| table.counts(GroupId(g)).map(|c| u64::from(c.resends))),
            ),
            (
                "barrier_group_epoch",
                Box::new(|g| table.config(GroupId(g)).map(|c| u64::from(c.epoch.0))),
            ),
            (
                "barrier_group_seq",
                Box::new(|g| {
                    let s = table.state(GroupId(g))?;
                    (s.phase != Phase::Unknown || !s.arrived.is_empty())
                        .then_some(u64::from(s.seq.0))
                }),
            ),
            (
                "barrier_group_children_missing",
                Box::new(|g| {
                    let c = table.config(GroupId(g))?;
                    let s = table.state(GroupId(g))?;
                    Some(PortSet(c.children.0 & !s.arrived.0).len() as u64)
                }),
            ),
        ];
        for (name, get) in &series {
            family(out, name);
            for &g in &listed {
                if let Some(v) = get(g) {
                    let _ = writeln!(out, "{name}{{group=\"{g}\"}} {v}");
                }
            }
        }
        if let Some(w) = dp.watch() {
            stragglers(out, dp, w, &listed);
        }
    }
}

/// Upper bounds (seconds) of the latency histogram's buckets.
const LATENCY_BOUNDS: [f64; 16] = [
    1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 0.1, 1.0, 10.0,
];

/// Straggler series for the listed groups that are also watched (`[stragglers] groups`).
fn stragglers(out: &mut String, dp: &dyn Dataplane, w: &crate::straggler::Watch, listed: &[u32]) {
    let watched: Vec<u32> = listed.iter().copied().filter(|&g| w.watches(g)).collect();
    if watched.is_empty() {
        return;
    }
    let now = w.clock.now_ns();
    family(out, "barrier_group_latency_seconds");
    for &g in &watched {
        let Some(r) = w.report(g) else { continue };
        let s = r.lock();
        for b in LATENCY_BOUNDS {
            let limit = (b * 1e9) as u64;
            let n: u64 = s
                .latency
                .iter_recorded()
                .filter(|v| s.latency.highest_equivalent(v.value_iterated_to()) <= limit)
                .map(|v| v.count_at_value())
                .sum();
            let _ = writeln!(
                out,
                "barrier_group_latency_seconds_bucket{{group=\"{g}\",le=\"{b}\"}} {n}"
            );
        }
        let count = s.latency.len();
        let sum_ns: u128 = s
            .latency
            .iter_recorded()
            .map(|v| u128::from(v.value_iterated_to()) * u128::from(v.count_at_value()))
            .sum();
        let sum = sum_ns as f64 / 1e9;
        let _ = writeln!(
            out,
            "barrier_group_latency_seconds_bucket{{group=\"{g}\",le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(
            out,
            "barrier_group_latency_seconds_sum{{group=\"{g}\"}} {sum}"
        );
        let _ = writeln!(
            out,
            "barrier_group_latency_seconds_count{{group=\"{g}\"}} {count}"
        );
    }
    family(out, "barrier_group_last_arrivals_total");
    for &g in &watched {
        let Some(r) = w.report(g) else { continue };
        let s = r.lock();
        for (p, &c) in s.last_counts.iter().enumerate() {
            if let Some(name) = dp.port_names().get(p) {
                let _ = writeln!(
                    out,
                    "barrier_group_last_arrivals_total{{group=\"{g}\",port=\"{}\"}} {c}",
                    esc(name)
                );
            }
        }
    }
    family(out, "barrier_group_waiting_seconds");
    for &g in &watched {
        let Some(r) = w.report(g) else { continue };
        let s = r.lock();
        let age = s
            .waiting(dp.table().run(GroupId(g)))
            .map_or(0.0, |(_, first)| now.saturating_sub(first) as f64 / 1e9);
        let _ = writeln!(out, "barrier_group_waiting_seconds{{group=\"{g}\"}} {age}");
    }
}

/// Answers one connection: `GET /metrics` gets the exposition, anything else 404.
fn answer(mut conn: TcpStream, body: impl FnOnce() -> String) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&req);
    let mut words = line.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, ctype, body) = if method == "GET" && (path == "/metrics" || path == "/") {
        ("200 OK", "text/plain; version=0.0.4; charset=utf-8", body())
    } else {
        (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "try GET /metrics\n".to_string(),
        )
    };
    write!(
        conn,
        "HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    conn.flush()
}

/// The running endpoint; `stop` (or drop) ends its thread.
pub struct MetricsServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `addr` and serves scrapes from one thread until `quit` or `stop`; the thread
    /// runs on the next of the `control` cores when given (`ControlCores::pin`).
    pub fn start(
        addr: SocketAddr,
        dp: Arc<dyn Dataplane>,
        loops: LoopsCell,
        groups: Vec<u32>,
        quit: Arc<AtomicBool>,
        control: Option<ControlCores>,
    ) -> Result<MetricsServer, ServeError> {
        let listener =
            TcpListener::bind(addr).map_err(|source| ServeError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr, source })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| ServeError::Bind { addr, source })?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                ControlCores::pin_opt(control.as_ref(), "metrics");
                while !s.load(Ordering::Relaxed) && !quit.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((conn, _)) => {
                            let _ = conn.set_nonblocking(false);
                            if let Err(e) = answer(conn, || render(&*dp, &loops, &groups)) {
                                tracing::debug!("metrics: {e}");
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(e) => {
                            tracing::warn!("metrics: accept: {e}");
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    }
                }
            })
            .map_err(ServeError::Thread)?;
        Ok(MetricsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.halt();
    }
}
