//! `run`: the XDP switch from its configuration. The program is loaded with a group map of the
//! file's capacity, its ports and MAC set and the file's groups configured, then attached to
//! every port; the timer side (re-sends, failure deadlines) runs on its own thread; the
//! management loop serves the control socket (and Prometheus on its own thread) until
//! SIGINT/SIGTERM, then stops the timers and detaches. Timers still armed at the stop are
//! dropped with the wheel. The program's maps (the groups' state) go with
//! this process: nothing of a run survives it but the file.

use barrier_bpf::XdpMode;
use barrier_mgmt::{metrics, notify, telemetry};
use barrier_mgmt::{BindError, Control, ControlServer, Dataplane, Groups};
use barrier_protocol::wire::MacAddr;
use barrier_protocol::PortIdx;
use barrier_runtime::affinity::ControlCores;
use barrier_runtime::launch::Signals;
use barrier_xdp::config::{self, XdpSpec};
use barrier_xdp::timers::{PacketPorts, TimerCounters, TimerSide};
use barrier_xdp::{XdpDataplane, XdpError, XdpSwitch};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The line the switch prints on stderr once the program is attached to every port and the
/// control socket listens: from here on it takes frames. Scripts and tests wait for it.
pub const READY_LINE: &str = "barrier-xdp: ready";

/// What a run ended with.
pub struct RunOutcome {
    /// Counters and what became of the program.
    pub report: String,
    /// The final counters, as barrier-switch's `--stats-json` writes them.
    pub stats_json: serde_json::Value,
}

/// Why `run` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error("loading the program: {0}")]
    Load(#[source] XdpError),
    #[error("port {port} ({iface}): {source}")]
    Port {
        port: String,
        iface: String,
        #[source]
        source: XdpError,
    },
    #[error("groups[{index}]: {reason}")]
    Group { index: usize, reason: String },
    #[error("port {port} ({iface}): attaching {mode:?}: {source}{hint}")]
    Attach {
        port: String,
        iface: String,
        mode: XdpMode,
        #[source]
        source: XdpError,
        hint: &'static str,
    },
    #[error("control socket: {0}")]
    Control(#[from] BindError),
    #[error("timer side: {0}")]
    Timers(String),
    #[error(transparent)]
    Metrics(#[from] metrics::ServeError),
}

/// The timer side (`barrier_xdp::timers`: intermediates' re-sends, failure deadlines) on a
/// thread of its own, sending on packet sockets on the switch ports. It polls while timers are
/// armed (one wheel tick apart) and otherwise sleeps on the program's timer ring; the groups'
/// lock is held only for each poll. Ends when `stop` is set, with its counts.
fn start_timers(
    dp: &XdpDataplane,
    cfg: &XdpSpec,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<TimerCounters>, RunError> {
    let now_ns = || rawsock::monotonic_now().as_nanos() as u64;
    let ports: Vec<(PortIdx, &str)> = cfg
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            (
                PortIdx::new(i as u8).expect("config: at most MAX_PORT ports"),
                p.iface.as_str(),
            )
        })
        .collect();
    let mut tx = PacketPorts::open(&ports)
        .map_err(|e| RunError::Timers(format!("packet sockets on the ports: {e}")))?;
    let mut side = dp
        .groups()
        .with_switch(|sw| TimerSide::new(sw, now_ns()))
        .map_err(|e| RunError::Timers(e.to_string()))?;
    let dp = dp.clone();
    Ok(std::thread::Builder::new()
        .name("xdp-timers".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let polled = dp
                    .groups()
                    .with_switch(|sw| side.poll(sw, &mut tx, now_ns()));
                let waited = polled.and_then(|_| side.wait(Duration::from_millis(20)));
                if let Err(e) = waited {
                    tracing::error!("timer side: {e}");
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            side.counters
        })
        .expect("spawn the timer thread"))
}

/// The counters as barrier-switch's report shows them (`barrier_mgmt::snapshot::report_counters`:
/// `== switch NAME`, the totals, then each port's RX and TX; non-zero counters), each summed
/// over the CPUs.
fn counters_report(dp: &XdpDataplane) -> String {
    barrier_mgmt::snapshot::report_counters(&dp.snapshot())
}

/// What to do about a refused attach, by its errno.
fn attach_hint(e: &XdpError, mode: XdpMode) -> &'static str {
    use libc::{EBUSY, EEXIST, EINVAL, EOPNOTSUPP};
    let errno = match e {
        XdpError::Bpf(b) => b.errno(),
        _ => None,
    };
    match errno {
        Some(EBUSY | EEXIST) => {
            " (another XDP program is attached to it: `bpftool net` names it and its owner, a \
             link of another process or a netlink attach; stop that one or detach it first)"
        }
        Some(EINVAL | EOPNOTSUPP) if mode == XdpMode::Native => {
            " (a driver without native XDP? set [xdp] mode = \"generic\" in the file)"
        }
        _ => "",
    }
}

/// Runs the switch of `cfg` (called `name`) until `signals.quit`; SIGUSR1 prints the counters.
pub fn run(name: &str, cfg: &XdpSpec, signals: &Signals) -> Result<RunOutcome, RunError> {
    let ifindexes = config::ifindexes(cfg)?;
    let capacity = cfg.group_capacity();
    let mut sw = XdpSwitch::load(capacity).map_err(RunError::Load)?;
    sw.set_switch_mac(MacAddr(cfg.mac))
        .map_err(RunError::Load)?;
    for (i, (p, &ifindex)) in cfg.ports.iter().zip(&ifindexes).enumerate() {
        let port = PortIdx::new(i as u8).expect("config: at most MAX_PORT ports");
        sw.add_port(port, ifindex)
            .map_err(|source| RunError::Port {
                port: p.name.clone(),
                iface: p.iface.clone(),
                source,
            })?;
    }
    let port_names: Vec<String> = cfg.ports.iter().map(|p| p.name.clone()).collect();
    let dp = XdpDataplane::new(name, port_names, sw, capacity);
    for (index, block) in cfg.mgmt.groups.iter().enumerate() {
        for g in block.ids() {
            dp.groups()
                .configure(g, block.config)
                .map_err(|reason| RunError::Group { index, reason })?;
        }
    }

    // Attached last: from the first attach on, frames meet the configured groups.
    let mut attached = Vec::with_capacity(cfg.ports.len());
    for (p, &ifindex) in cfg.ports.iter().zip(&ifindexes) {
        let a = dp
            .groups()
            .with_switch(|sw| sw.attach(ifindex, cfg.mode))
            .map_err(|source| RunError::Attach {
                port: p.name.clone(),
                iface: p.iface.clone(),
                mode: cfg.mode,
                hint: attach_hint(&source, cfg.mode),
                source,
            })?;
        attached.push(a);
    }

    let stop_timers = Arc::new(AtomicBool::new(false));
    let timers = start_timers(&dp, cfg, stop_timers.clone())?;

    let mut control = match &cfg.mgmt.control {
        Some(c) => Some(ControlServer::bind(
            &c.socket,
            Control::new(
                dp.clone(),
                cfg.port_descs(),
                c.file.clone().map(config::write_back),
            ),
        )?),
        None => None,
    };
    // `[management] cpus`: this thread (the control socket) and the metrics endpoint's go
    // there; the frames are the kernel's, on whatever CPU receives them.
    let control_cores = cfg.mgmt.cpus.clone().map(ControlCores::new);
    ControlCores::pin_opt(control_cores.as_ref(), "management");
    let metrics = match &cfg.mgmt.metrics {
        Some(m) => {
            let server = metrics::MetricsServer::start(
                m.listen,
                Arc::new(dp.clone()),
                telemetry::LoopsCell::default(),
                m.groups.clone(),
                signals.quit.clone(),
                control_cores.clone(),
            )?;
            tracing::info!(
                "metrics: Prometheus endpoint on http://{}/metrics",
                server.addr
            );
            Some(server)
        }
        None => None,
    };

    let ports: Vec<String> = cfg
        .ports
        .iter()
        .map(|p| format!("{}={}", p.name, p.iface))
        .collect();
    eprintln!(
        "{READY_LINE} (ports: {}; attached {:?}; {} groups)",
        ports.join(" "),
        cfg.mode,
        cfg.group_count()
    );
    notify::notify_logged("READY=1");
    let started = Instant::now();
    while !signals.quit.load(Ordering::Relaxed) {
        if signals.dump.swap(false, Ordering::Relaxed) {
            println!("{}", counters_report(&dp));
        }
        match &mut control {
            Some(server) => server.serve(Duration::from_millis(50)),
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    notify::notify_logged("STOPPING=1");
    drop(control);
    drop(metrics);
    stop_timers.store(true, Ordering::Relaxed);
    let tc = timers.join().unwrap_or_default();

    let mut report = counters_report(&dp);
    let _ = writeln!(
        report,
        "timer side: timers_armed={} timers_fired={} frames_out={} tx_failed={} \
         stale_records={} fire_failed={} loss_rescans={} rearmed_after_loss={}",
        tc.timers_armed,
        tc.timers_fired,
        tc.frames_out,
        tc.tx_failed,
        tc.stale_records,
        tc.fire_failed,
        tc.loss_rescans,
        tc.rearmed_after_loss
    );
    let stats_json = telemetry::stats_json(&dp);
    let mut detached = 0;
    for (p, a) in cfg.ports.iter().zip(attached) {
        match a.detach() {
            Ok(()) => detached += 1,
            Err(e) => {
                let _ = writeln!(report, "port {} ({}): {e}", p.name, p.iface);
            }
        }
    }
    let _ = writeln!(
        report,
        "ran {:.3} s; detached from {detached} of {} ports: the program and its maps (every \
         group's state, the counters) are gone with it; the next run starts from the file's \
         groups",
        started.elapsed().as_secs_f64(),
        cfg.ports.len()
    );
    Ok(RunOutcome { report, stats_json })
}
