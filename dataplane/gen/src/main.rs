//! barrier-gen: `barrier-gen [run|search] [EAL args] -- [options]`. Runs the generator on DPDK
//! ports (or on ring pairs to a barrier-switch in this process), prints progress once a second
//! and a final report (text, or JSON with --json); `search` finds the highest open-loop rate
//! with no lost barrier.

use barrier_gen::engine::{Clock, Engine, GenConfig, Load, TrialSpec};
use barrier_gen::fault::{CorruptScope, FaultRates};
use barrier_gen::hdrlog::HdrLog;
use barrier_gen::multi;
use barrier_gen::report::{PassRule, TrialReport};
use barrier_gen::search::{search, SearchParams};
use barrier_gen::wiring::{self, PortPlan};
use clap::{Parser, ValueEnum};
use dpdk::Eal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
enum Mode {
    /// Arrive at the next barrier as soon as the release is back.
    Closed,
    /// First reduces at --rate frames/s.
    Open,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
enum WindowMode {
    Adaptive,
    Fixed,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
enum Dir {
    Tx,
    Rx,
    Both,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
enum Scope {
    /// magic/version/kind/flags: refused by the parser (a counted loss)
    Detectable,
    /// any barrier-header byte, group and sequence included (undetectable; see docs/faults.md)
    Header,
}

#[derive(Parser, Debug)]
#[command(
    name = "barrier-gen",
    version,
    about = "Line-rate load generator for barrier switches",
    override_usage = "barrier-gen [run|search] [EAL args] -- [OPTIONS]",
    after_help = "`run` (the default) loads the switch once and reports; `search` finds the highest open-loop rate \
                  with no lost barrier (docs/gen.md). Without EAL args, virtual-device defaults are used \
                  (--no-huge, --no-pci) and, unless EAL args name lcores, lcores from what the machine has free: one per busy \
                  poller (generators, in-process switch) where each has a free CPU, else one (docs/gen.md). Exit status: 0 the run passed; 1 it did not \
                  (incomplete barriers, early releases, interrupted; no passing rate found) or \
                  EAL or a port failed; 2 the command line was refused."
)]
struct Opts {
    /// A DPDK port to use as a child of the switch (device name, or a vdev spec with arguments).
    /// Repeat for more ports. Port i is the switch's child port i in every group.
    #[arg(long = "port", value_name = "NAME")]
    port: Vec<String>,
    /// Run a barrier-switch root in this process, joined to the generator by net_ring pairs.
    #[arg(long, conflicts_with = "port")]
    inproc_switch: bool,
    /// With --inproc-switch: how many ports (children).
    #[arg(long, default_value_t = 4)]
    ports: usize,
    /// TX queues per port (1..=16): each frame goes out on queue `group % queues`, so a switch
    /// that polls the port's RX queues from several lcores gets each group on one of them
    /// (on net_ring pairs TX queue i is the peer's RX queue i; with --inproc-switch the switch
    /// polls every queue). docs/configuration.md, "Spreading frames over RX queues".
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    queues: u16,
    /// Generators side by side, one per lcore (the first on the main lcore, the others on
    /// worker lcores): each takes an even share of the ports and of the groups, and its groups'
    /// children are its own ports.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Groups emulated at once (every port is a child in every group).
    #[arg(long, default_value_t = 1024)]
    groups: u32,
    /// The first group number; groups first-group .. first-group + groups.
    #[arg(long, default_value_t = 0)]
    first_group: u32,
    /// Sequence number of each group's first barrier (must match the switch's state).
    #[arg(long, default_value_t = 0)]
    first_seq: u32,
    /// The groups' epoch on the switch (a group configured without an `epoch` key is in 1).
    #[arg(long, default_value_t = 1)]
    epoch: u32,
    /// Leaves double their re-send wait after each re-send of a barrier, up to this many µs
    /// (capped exponential backoff; 0: every wait is --resend-timeout-us, fixed periods).
    #[arg(long, default_value_t = 200_000)]
    resend_max_us: u64,
    /// Leaves shorten each re-send wait by up to this many percent, per group and barrier
    /// (0..=50), so groups do not retry in lockstep.
    #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u8).range(0..=50))]
    resend_jitter_pct: u8,
    /// Closed loop: how many barriers may be in flight: `adaptive` halves the window when a
    /// leaf re-sends or a barrier takes more than half the leaf timer, and grows it back one
    /// barrier per window of fast ones (docs/gen.md, "Load"); `fixed`: every group, always.
    #[arg(long, value_enum, default_value_t = WindowMode::Adaptive)]
    window: WindowMode,
    /// Pacing of arrivals.
    #[arg(long, value_enum, default_value_t = Mode::Closed)]
    mode: Mode,
    /// Open loop: first reduces per second (all ports together).
    #[arg(long, default_value_t = 1_000_000)]
    rate: u64,
    /// Open loop: token bucket depth (frames): how far the generator may catch up after its core
    /// was taken away. Default: 10 ms worth of frames, at least 64.
    #[arg(long)]
    burst: Option<u64>,
    /// Seconds of load per run (per trial in search).
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Run exactly this many barriers per group, then stop [default: run for --duration].
    #[arg(long)]
    count: Option<u64>,
    /// Seconds to wait for outstanding barriers after the load stops.
    #[arg(long, default_value_t = 2.0)]
    drain: f64,
    /// Leaf re-send timer, microseconds.
    #[arg(long, default_value_t = 10_000)]
    resend_timeout_us: u64,
    /// A barrier slower than this (first reduce to last release) counts as lost, milliseconds.
    #[arg(long, default_value_t = 1_000)]
    deadline_ms: u64,
    /// With --inproc-switch: the switch's re-send timer, microseconds (a root arms none: see
    /// --inproc-parent).
    #[arg(long, default_value_t = 20_000)]
    switch_resend_us: u64,
    /// With --inproc-switch: the switch doubles its re-send wait after each re-send of a
    /// barrier, up to this many µs (the group register resend_max_us; default 0: fixed).
    #[arg(long, default_value_t = 0)]
    switch_resend_max_us: u64,
    /// With --inproc-switch: the switch shortens each re-send wait by up to this many percent
    /// (the group register resend_jitter_pct, 0..=50; default 0).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=50))]
    switch_resend_jitter_pct: u8,
    /// With --inproc-switch: the switch is an intermediate whose parent is a second in-process
    /// switch (the root, one more net_ring pair), so it re-sends reduces upward on its timer.
    #[arg(long, requires = "inproc_switch")]
    inproc_parent: bool,
    /// With --inproc-parent: the root's frames to the intermediate are held back this many µs
    /// (a long or slow link to the parent), so the intermediate's re-send timer can run out.
    #[arg(long, default_value_t = 0, requires = "inproc_parent")]
    inproc_parent_delay_us: u64,
    /// Drop probability per frame.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Duplicate probability per frame.
    #[arg(long, default_value_t = 0.0)]
    dup: f64,
    /// Reorder probability per frame (held back behind the next frame).
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// Corrupt probability per frame.
    #[arg(long, default_value_t = 0.0)]
    corrupt: f64,
    /// Which bytes a corruption may hit.
    #[arg(long, value_enum, default_value_t = Scope::Detectable)]
    corrupt_scope: Scope,
    /// Which direction faults apply to: frames the generator sends, receives, or both.
    #[arg(long, value_enum, default_value_t = Dir::Both)]
    fault_dir: Dir,
    /// Apply faults only on these port indices (repeat); default all ports.
    #[arg(long = "fault-port")]
    fault_port: Vec<usize>,
    /// Seed of the fault injectors (each port and direction draws its own stream from it).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Destination MAC of reduces (default broadcast).
    #[arg(long, value_parser = parse_mac)]
    dst_mac: Option<[u8; 6]>,
    /// Leave the tx timestamp out of reduces.
    #[arg(long)]
    no_timestamp: bool,
    /// Print the final report as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Write an hdrhistogram interval log (one histogram per second, tags leaf and barrier)
    /// [default: none].
    #[arg(long, value_name = "FILE")]
    hdr_log: Option<PathBuf>,
    /// No progress lines.
    #[arg(long, short)]
    quiet: bool,
    /// Flood (docs/gen.md, "Flood"): with --inproc-switch, one more net_ring pair to the
    /// switch, a port that no group names, flooded with reduces and releases of random groups.
    #[arg(long, requires = "inproc_switch")]
    flood_nonmember: bool,
    /// Flood: one more DPDK port (device name or vdev spec) wired to a port of the switch that
    /// no group names, flooded like --flood-nonmember.
    #[arg(long, value_name = "NAME", conflicts_with = "inproc_switch")]
    flood_port: Option<String>,
    /// Flood: generator port I (a child of every group), beside its leaves' frames, with
    /// releases on a child port, reduces of another epoch, of groups it is no child of
    /// (--flood-foreign-groups) and of unconfigured groups (--inproc-switch). Repeatable.
    #[arg(long = "flood-member", value_name = "I")]
    flood_member: Vec<usize>,
    /// Flood frames per second per flooded port, or `full`: as many as the device queue takes
    /// on every pass of the loop (at most 256 a pass).
    #[arg(long, default_value = "500000", value_name = "FPS|full")]
    flood_rate: String,
    /// Flood: N control phases and N flood phases over --duration, alternating, control first.
    #[arg(long, default_value_t = 2, value_name = "N")]
    flood_phases: u32,
    /// Flood: groups after the generator's that no flooded member port belongs to, for
    /// reduces of groups the port is no child of. With --inproc-switch (default 16) the switch
    /// gets them with the generator's other ports as children; a switch elsewhere must have
    /// them configured that way (default 0: not sent).
    #[arg(long, value_name = "K")]
    flood_foreign_groups: Option<u32>,
    /// search: lowest rate (frames/s).
    #[arg(long, default_value_t = 1_000)]
    min_rate: u64,
    /// search: highest rate (frames/s); default: twice what a closed-loop trial reaches.
    #[arg(long)]
    max_rate: Option<u64>,
    /// search: stop when pass and fail are this close (frames/s); default 1% of max.
    #[arg(long)]
    resolution: Option<u64>,
    /// search: at most this many trials.
    #[arg(long, default_value_t = 20)]
    max_trials: u32,
    /// search: open loop must reach this fraction of the offered rate to pass.
    #[arg(long, default_value_t = 0.98)]
    min_achieved: f64,
}

/// `pass`, or `FAIL: ` and every reason (the search's table and log lines).
fn verdict(r: &TrialReport, rule: &PassRule) -> String {
    let why = r.failures(rule);
    if why.is_empty() {
        "pass".into()
    } else {
        format!("FAIL: {}", why.join("; "))
    }
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    s.parse::<barrier_protocol::wire::MacAddr>()
        .map(|m| m.0)
        .map_err(|e| e.to_string())
}

/// EAL arguments for virtual devices on a machine without NIC or hugepages, on `lcores`
/// (an EAL `--lcores` value).
fn default_eal(prog: &str, lcores: &str) -> Vec<String> {
    [
        "--no-huge",
        "-m",
        "512",
        "--no-shconf",
        "--no-pci",
        "--iova-mode=va",
        "--no-telemetry",
        "--log-level=*:warning",
        "--lcores",
        lcores,
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        "--file-prefix".to_string(),
        format!("{prog}-{}", std::process::id()),
    ])
    .collect()
}

/// A refused command line: exit status 2 (docs/operations.md, "Exit status"); every other
/// error (EAL, ports, the run) is 1.
#[derive(Debug)]
struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

fn usage(msg: impl Into<String>) -> Box<dyn std::error::Error> {
    Box::new(Usage(msg.into()))
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("barrier-gen: {e}");
            ExitCode::from(if e.is::<Usage>() { 2 } else { 1 })
        }
    }
}

fn real_main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    barrier_runtime::logging::init();
    let mut argv: Vec<String> = std::env::args().collect();
    let prog = "barrier-gen".to_string();
    let mut is_search = false;
    if let Some(first) = argv.get(1) {
        if first == "search" || first == "run" {
            is_search = first == "search";
            argv.remove(1);
        }
    }
    if argv
        .iter()
        .skip(1)
        .any(|a| a == "-h" || a == "--help" || a == "-V" || a == "--version")
        && !argv.iter().any(|a| a == "--")
    {
        let _ = Opts::parse_from(std::iter::once(prog.clone()).chain(argv.into_iter().skip(1)));
        return Ok(ExitCode::SUCCESS);
    }
    // `prog [EAL] -- [app]` (`barrier_runtime::args`); with no EAL arguments, defaults for
    // virtual devices.
    let mode = if is_search { "search" } else { "run" };
    let split = barrier_runtime::args::split_eal(
        argv.into_iter().map(Into::into).collect(),
        1,
        &<Opts as clap::CommandFactory>::command(),
        "barrier-gen",
        |word| format!("barrier-gen {mode} [EAL args] -- {word} ..."),
    )
    .map_err(usage)?;
    let eal_part: Vec<String> = split
        .eal
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let app_part = split.program.into_iter().skip(1);
    let opts = match Opts::try_parse_from(std::iter::once(prog.clone().into()).chain(app_part)) {
        Ok(o) => o,
        Err(e) => {
            let _ = e.print();
            // --help and --version after `--` are answers, not errors
            return if e.use_stderr() {
                Err(usage("bad arguments"))
            } else {
                Ok(ExitCode::SUCCESS)
            };
        }
    };
    if !opts.inproc_switch && opts.port.is_empty() {
        return Err(usage(
            "give --port NAME (one per child port) or --inproc-switch",
        ));
    }
    let flooding =
        opts.flood_nonmember || opts.flood_port.is_some() || !opts.flood_member.is_empty();
    let flood_rate = match opts.flood_rate.as_str() {
        "full" => None,
        s => Some(
            s.parse::<u64>()
                .ok()
                .filter(|&r| r > 0)
                .ok_or_else(|| usage(format!("--flood-rate {s}: frames/s above 0, or full")))?,
        ),
    };
    if opts.flood_nonmember && !opts.inproc_switch {
        return Err(usage(
            "--flood-nonmember adds a ring pair to the in-process switch: give --inproc-switch \
             (or --flood-port NAME for a switch elsewhere)",
        ));
    }
    if flooding {
        if is_search {
            return Err(usage("a flood runs with `run`, not `search`"));
        }
        if opts.workers != 1 {
            return Err(usage("a flood runs with one generator (--workers 1)"));
        }
        if opts.count.is_some() {
            return Err(usage(
                "a flood's phases divide --duration: leave --count out",
            ));
        }
        if opts.flood_phases == 0 {
            return Err(usage("--flood-phases: at least 1"));
        }
    }
    // Lcores the user did not name: one busy poller per free CPU (`barrier_gen::lcores`).
    let lcore_plan = (!barrier_gen::lcores::names_lcores(&eal_part)).then(|| {
        let plan = barrier_gen::lcores::sample(
            opts.workers + usize::from(opts.inproc_switch),
            opts.workers,
        );
        tracing::info!("{}", plan.note);
        plan
    });
    let eal_args = match (&lcore_plan, eal_part.is_empty()) {
        (Some(p), true) => default_eal(&prog, &p.lcores),
        (Some(p), false) => eal_part
            .into_iter()
            .chain(["--lcores".to_string(), p.lcores.clone()])
            .collect(),
        (None, _) => eal_part,
    };
    let (eal, _) =
        Eal::init(std::iter::once(prog).chain(eal_args)).map_err(|e| format!("EAL: {e}"))?;

    let rates = FaultRates {
        drop: opts.loss,
        duplicate: opts.dup,
        reorder: opts.reorder,
        corrupt: opts.corrupt,
        corrupt_scope: match opts.corrupt_scope {
            Scope::Detectable => CorruptScope::Detectable,
            Scope::Header => CorruptScope::Header,
        },
    };
    let nports = if opts.inproc_switch {
        opts.ports
    } else {
        opts.port.len()
    };
    let faults: Vec<(FaultRates, FaultRates)> = (0..nports)
        .map(|i| {
            let on = opts.fault_port.is_empty() || opts.fault_port.contains(&i);
            let pick = |d: bool| {
                if on && d {
                    rates
                } else {
                    FaultRates::default()
                }
            };
            (
                pick(opts.fault_dir != Dir::Rx),
                pick(opts.fault_dir != Dir::Tx),
            )
        })
        .collect();
    let plan = if opts.inproc_switch {
        PortPlan::Inproc {
            ports: opts.ports,
            switch_resend_ns: opts.switch_resend_us * 1000,
            switch_backoff: barrier_protocol::backoff::Backoff {
                max_ns: opts.switch_resend_max_us.saturating_mul(1000),
                jitter_pct: opts.switch_resend_jitter_pct,
            },
            parent: opts.inproc_parent,
            parent_delay_ns: opts.inproc_parent_delay_us.saturating_mul(1000),
        }
    } else {
        PortPlan::Named(opts.port.clone())
    };
    let groups = opts.first_group
        ..opts
            .first_group
            .checked_add(opts.groups)
            .ok_or_else(|| usage("group range overflows"))?;
    if groups.end > barrier_protocol::MAX_GROUPS || opts.groups == 0 {
        return Err(usage(format!(
            "groups {groups:?}: need 1 or more, below {}",
            barrier_protocol::MAX_GROUPS
        )));
    }
    let shards =
        multi::split(opts.workers, nports, opts.first_group, opts.groups).map_err(usage)?;
    let lcores = eal.worker_lcores();
    if lcores.len() + 1 < shards.len() {
        return Err(usage(format!(
            "--workers {} needs {} worker lcores; EAL has {} (give more with -l/--lcores)",
            shards.len(),
            shards.len() - 1,
            lcores.len()
        )));
    }
    // The in-process switch gets the next lcore if there is one, else it runs inside the first
    // generator's loop.
    let sut_lcore = if opts.inproc_switch {
        lcores.get(shards.len() - 1).copied()
    } else {
        None
    };
    let switch_shards: Vec<_> = shards
        .iter()
        .map(|s| (s.groups.clone(), s.children_mask()))
        .collect();
    // The flood's groups: the generator's, then the foreign ones, then (in-process) numbers the
    // switch has no configuration for.
    let foreign_n = if opts.flood_member.is_empty() {
        0
    } else {
        opts.flood_foreign_groups
            .unwrap_or(if opts.inproc_switch { 16 } else { 0 })
    };
    let foreign = groups.end..groups.end.saturating_add(foreign_n);
    if foreign.end > barrier_protocol::MAX_GROUPS {
        return Err(usage("--flood-foreign-groups: beyond the group numbers"));
    }
    let not_flooded: u64 = (0..nports)
        .filter(|i| !opts.flood_member.contains(i))
        .fold(0, |m, i| m | (1u64 << i));
    if let Some(&i) = opts.flood_member.iter().find(|&&i| i >= nports) {
        return Err(usage(format!("--flood-member {i}: ports are 0..{nports}")));
    }
    if opts.inproc_switch && foreign_n > 0 && not_flooded == 0 {
        return Err(usage(
            "foreign groups need a generator port that is not flooded (their child);              give --flood-foreign-groups 0 or flood fewer ports",
        ));
    }
    let extras = wiring::InprocExtras {
        lcore: sut_lcore,
        groups: if opts.inproc_switch && foreign_n > 0 {
            vec![(foreign.clone(), not_flooded)]
        } else {
            Vec::new()
        },
        flood_nonmember: opts.flood_nonmember,
    };
    let table_groups = foreign.end;
    let flood_groups = barrier_gen::flood::FloodGroups {
        members: groups.clone(),
        foreign: foreign.clone(),
        table: table_groups,
        unknown: if opts.inproc_switch {
            table_groups..(table_groups.saturating_add(4096)).min(barrier_protocol::MAX_GROUPS)
        } else {
            0..0
        },
        epoch: opts.epoch,
    };
    let (mut wiring, gen_ports) = wiring::open_with(
        eal.clone(),
        "gen",
        &plan,
        &switch_shards,
        &faults,
        opts.queues,
        &extras,
    )?;
    if let Some(name) = &opts.flood_port {
        wiring.open_flood_port(name)?;
    }
    let foreign_before = wiring
        .switch
        .as_ref()
        .and_then(|s| s.stats.as_ref())
        .map(|s| barrier_gen::flood::states(s, foreign.clone()))
        .unwrap_or_default();
    let flood_ports: Vec<_> = std::mem::take(&mut wiring.flood);
    let flood_switch_port: Vec<(String, Option<usize>)> = flood_ports
        .iter()
        .map(|(p, i)| (p.name.clone(), *i))
        .collect();

    // Echoed in the JSON report so a result says how it was produced.
    let config = serde_json::json!({
        "ports": gen_ports.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
        "inproc_switch": opts.inproc_switch,
        "queues": opts.queues,
        "inproc_parent": opts.inproc_parent,
        "inproc_parent_delay_us": opts.inproc_parent_delay_us,
        "switch_resend_us": opts.switch_resend_us,
        "switch_resend_max_us": opts.switch_resend_max_us,
        "switch_resend_jitter_pct": opts.switch_resend_jitter_pct,
        "workers": shards.len(),
        "groups": opts.groups,
        "first_group": opts.first_group,
        "first_seq": opts.first_seq,
        "epoch": opts.epoch,
        "resend_max_us": opts.resend_max_us,
        "resend_jitter_pct": opts.resend_jitter_pct,
        "window": format!("{:?}", opts.window).to_lowercase(),
        "mode": format!("{:?}", opts.mode).to_lowercase(),
        "rate": (opts.mode == Mode::Open).then_some(opts.rate),
        "duration_s": opts.duration,
        "count": opts.count,
        "resend_timeout_us": opts.resend_timeout_us,
        "deadline_ms": opts.deadline_ms,
        "faults": rates,
        "fault_dir": format!("{:?}", opts.fault_dir).to_lowercase(),
        "fault_ports": opts.fault_port,
        "seed": opts.seed,
        "timestamps": !opts.no_timestamp,
        "flood": flooding.then(|| serde_json::json!({
            "nonmember": opts.flood_nonmember,
            "port": opts.flood_port,
            "member": opts.flood_member,
            "rate_per_port": flood_rate,
            "phases": opts.flood_phases,
            "foreign_groups": [foreign.start, foreign.end],
        })),
    });
    let quit = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, quit.clone()).map_err(|e| e.to_string())?;
    }
    let hdr = match &opts.hdr_log {
        Some(path) => {
            let comment = format!(
                "barrier-gen: {} ports x {} groups, values in ns",
                nports, opts.groups
            );
            // Its writer thread on a CPU no lcore polls (DPDK's placement of its own control
            // threads), not the main lcore's CPU it would inherit.
            let control = barrier_runtime::affinity::ControlCores::for_eal(&eal);
            Some(
                HdrLog::create(path, &comment, control.as_ref())
                    .map_err(|e| format!("{}: {e}", path.display()))?,
            )
        }
        None => None,
    };
    let mut gen_ports = gen_ports.into_iter();
    let mut engines = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        let cfg = GenConfig {
            first_group: shard.groups.start,
            groups: shard.groups.len() as u32,
            first_seq: opts.first_seq,
            epoch: opts.epoch,
            backoff: barrier_protocol::backoff::Backoff {
                max_ns: opts.resend_max_us.saturating_mul(1000),
                jitter_pct: opts.resend_jitter_pct,
            },
            resend_timeout_ns: opts.resend_timeout_us * 1000,
            adaptive_window: opts.window == WindowMode::Adaptive,
            barrier_deadline_ns: opts.deadline_ms * 1_000_000,
            dst_mac: opts.dst_mac.unwrap_or([0xff; 6]),
            timestamps: !opts.no_timestamp,
            // Each generator draws its own fault streams.
            seed: opts.seed.wrapping_add(0x1000_0000_0000 * i as u64),
            progress: !opts.quiet,
            label: if shards.len() > 1 {
                format!("w{i}")
            } else {
                String::new()
            },
            ..GenConfig::default()
        };
        let mut e = Engine::new(
            cfg,
            gen_ports.by_ref().take(shard.ports.len()).collect(),
            Clock::tsc(),
        );
        e.set_quit(quit.clone());
        if let Some(log) = &hdr {
            e.set_hdr_log(log.handle());
        }
        engines.push(e);
    }
    if flooding {
        let mut targets: Vec<barrier_gen::engine::FloodOn<_, _>> = flood_ports
            .into_iter()
            .map(|(p, _)| barrier_gen::engine::FloodOn::Extra(p))
            .collect();
        targets.extend(
            opts.flood_member
                .iter()
                .map(|&i| barrier_gen::engine::FloodOn::Member(i)),
        );
        engines[0]
            .set_flood(barrier_gen::engine::FloodPlan {
                targets,
                rate: flood_rate,
                phases: opts.flood_phases,
                groups: flood_groups,
                seed: opts.seed,
            })
            .map_err(usage)?;
    }
    if let Some(sw) = &mut wiring.switch {
        if let Some((pollers, clock)) = sw.inline.take() {
            engines[0].set_inline_pollers(pollers, clock);
        }
    }
    let burst_for = |rate: u64| opts.burst.unwrap_or((rate / 100).max(64));
    let duration = Duration::from_secs_f64(opts.duration);
    let drain = Duration::from_secs_f64(opts.drain);
    let load = match opts.mode {
        Mode::Closed => Load::Closed,
        Mode::Open => Load::Open {
            rate: opts.rate,
            burst: burst_for(opts.rate),
        },
    };

    let ok;
    let output = if is_search {
        let rule = PassRule {
            min_achieved_ratio: opts.min_achieved,
        };
        let max_rate = match opts.max_rate {
            Some(r) => r,
            None => {
                let probe = multi::run_trial_all(
                    &eal,
                    &mut engines,
                    &lcores,
                    &TrialSpec {
                        load: Load::Closed,
                        duration,
                        count: None,
                        drain,
                    },
                )?;
                let r = (probe.frames.tx_reduce as f64
                    / (probe.elapsed_s - probe.drain_s).max(1e-9)
                    * 2.0) as u64;
                tracing::info!(
                    "barrier-gen search: closed loop reached {:.0} reduces/s; searching up to {r}",
                    r as f64 / 2.0
                );
                r.max(opts.min_rate)
            }
        };
        let params = SearchParams {
            min_rate: opts.min_rate.min(max_rate),
            max_rate,
            resolution: opts.resolution.unwrap_or((max_rate / 100).max(1)),
            max_trials: opts.max_trials,
        };
        let q = quit.clone();
        let mut trial_error = None;
        let result = search(&params, |rate| {
            if q.load(std::sync::atomic::Ordering::Relaxed) {
                return None;
            }
            let spec = TrialSpec {
                load: Load::Open {
                    rate,
                    burst: burst_for(rate),
                },
                duration,
                count: None,
                drain,
            };
            let r = match multi::run_trial_all(&eal, &mut engines, &lcores, &spec) {
                Ok(r) => r,
                Err(e) => {
                    trial_error = Some(e);
                    return None;
                }
            };
            if r.interrupted {
                return None; // not a verdict on this rate
            }
            let pass = r.passes(&rule);
            if !opts.quiet {
                tracing::info!(
                    "barrier-gen search: {rate} frames/s: {} (lost {}, early {}, reached {:.1}%)",
                    verdict(&r, &rule),
                    r.barriers.lost,
                    r.barriers.early_releases,
                    r.achieved_ratio.unwrap_or(0.0) * 100.0
                );
            }
            Some((pass, r))
        });
        if let Some(e) = trial_error {
            return Err(e.into());
        }
        ok = result.best_rate.is_some()
            && result
                .steps
                .iter()
                .all(|s| s.detail.barriers.early_releases == 0);
        if opts.json {
            let mut doc = serde_json::json!({ "config": config, "search": { "params": params, "rule": rule, "result": result } });
            // Each step says why it failed (empty when it passed).
            if let Some(steps) = doc["search"]["result"]["steps"].as_array_mut() {
                for (j, st) in steps.iter_mut().zip(&result.steps) {
                    j["failures"] = serde_json::json!(st.detail.failures(&rule));
                }
            }
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        } else {
            let mut s = String::new();
            for st in &result.steps {
                s += &format!(
                    "{:>12} frames/s  barriers/s {:>8}  leaf p99 {:>9}  {}\n",
                    st.rate,
                    barrier_gen::report::rate(st.detail.barriers.per_s),
                    barrier_gen::report::ns(st.detail.latency_leaf.p99_ns),
                    verdict(&st.detail, &rule),
                );
            }
            s += &match result.best_rate {
                Some(r) => format!(
                    "highest rate with no lost barrier: {r} frames/s ({} reduces/s per port){}\n",
                    r / nports as u64,
                    if result.cut_short {
                        " (search cut short)"
                    } else {
                        ""
                    }
                ),
                None if result.cut_short => "search cut short before any rate passed\n".into(),
                None => "no rate passed\n".into(),
            };
            s
        }
    } else {
        let r: TrialReport = multi::run_trial_all(
            &eal,
            &mut engines,
            &lcores,
            &TrialSpec {
                load,
                duration,
                count: opts.count,
                drain,
            },
        )?;
        let mut good =
            r.barriers.incomplete == 0 && r.barriers.early_releases == 0 && !r.interrupted;
        let stats = wiring.switch.as_ref().and_then(|s| s.stats.clone());
        // A flood against the in-process switch: once the switch has taken every frame sent
        // to it, each flood frame must be in its refusal class and no group changed for it.
        let check = match (&stats, &r.flood) {
            (Some(stats), Some(fr)) => {
                let sent = engines[0].flood_sent();
                let extra_tx = engines[0].flood_device_tx();
                let mut want: Vec<(usize, u64)> = r
                    .per_port
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (i, p.tx))
                    .collect();
                let mut expect = Vec::new();
                for (member, name, counts) in sent {
                    let switch_port = match member {
                        Some(i) => i,
                        None => flood_switch_port
                            .iter()
                            .find(|(n, _)| *n == name)
                            .and_then(|(_, i)| *i)
                            .ok_or("a flood port without a switch port")?,
                    };
                    if member.is_none() {
                        let device = extra_tx
                            .iter()
                            .find(|(n, _)| *n == name)
                            .map_or(0, |(_, n)| *n);
                        want.push((switch_port, device));
                    }
                    expect.push(barrier_gen::flood::PortExpect {
                        switch_port,
                        name,
                        nonmember: member.is_none(),
                        sent: counts,
                    });
                }
                // Wait (at most 5 s) until the switch received every frame the devices took.
                let t0 = std::time::Instant::now();
                while want.iter().any(|&(p, n)| {
                    barrier_gen::flood::rx_counter(stats, p, barrier_gen::flood::RxCount::Frames)
                        < n
                }) && t0.elapsed() < Duration::from_secs(5)
                {
                    if !engines[0].poll_inline() {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
                let c = barrier_gen::flood::check_switch(
                    stats,
                    &expect,
                    &foreign_before,
                    foreign.clone(),
                    r.barriers.completed + r.barriers.carried_over,
                    fr.unsent,
                );
                good &= c.ok;
                Some(c)
            }
            _ => None,
        };
        ok = good;
        let switch_report = stats.as_ref().map(|s| s.report());
        if opts.json {
            serde_json::to_string_pretty(&serde_json::json!({
                "config": config,
                "report": r,
                "switch": switch_report,
                "flood_check": check,
            }))
            .map_err(|e| e.to_string())?
        } else {
            r.text()
                + &switch_report.unwrap_or_default()
                + &check.map(|c| c.text()).unwrap_or_default()
        }
    };

    // Shutdown: stop the switch (flushing toward us), drain our side, drop every queue handle,
    // close the ports, and check every mbuf came back.
    let inline = engines[0].take_inline_pollers();
    let switch_pollers = wiring.stop_switch(inline)?;
    for e in &mut engines {
        e.drain_rx();
        // The generators' handles on the interval log go first: the writer ends with the last.
        drop(e.take_hdr_log());
    }
    if let Some(log) = hdr {
        log.finish().map_err(|e| format!("hdr log: {e}"))?;
    }
    drop(engines);
    drop(switch_pollers);
    let closed = wiring.close()?;
    // A closed pipe (`| head`) is not an error worth a panic.
    use std::io::Write as _;
    let mut so = std::io::stdout().lock();
    let _ = writeln!(so, "{output}");
    if !opts.json {
        let _ = writeln!(so, "{closed}");
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
