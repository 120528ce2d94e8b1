//! `barrier-sim`: command line of the simulator. `run` drives the protocol over a modelled
//! tree with faults and checks safety and liveness; `compare` puts the in-network barrier next
//! to a dissemination barrier on the same model.
#![forbid(unsafe_code)]

use barrier_sim::compare::{self, CompareConfig};
use barrier_sim::{BrokenSwitch, ComputeModel, FaultStop, Faults, LinkParams, SimConfig, TreeSpec};
use clap::{Args, Parser, Subcommand};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "barrier-sim",
    version,
    about = "Deterministic simulator of the in-network barrier",
    after_help = "Exit status: 0 every check passed; 1 a check failed (a safety or liveness \
                  violation); 2 the command line, or the tree or faults it describes, was refused."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run barriers over a tree with faults; exit 0 when safe and live, 1 on any violation.
    Run(Box<RunArgs>),
    /// In-network tree barrier against the dissemination barrier, same leaves and link model.
    Compare(CompareArgs),
}

#[derive(Args, Clone)]
struct TreeArgs {
    /// Fanouts: root, then each next level, the last level's children are leaves ("4,4,4")
    /// [default: run 4,4,4; compare: the tree --leaves and --levels give].
    #[arg(long, conflicts_with = "random_tree")]
    tree: Option<String>,
    /// A random tree from this seed, within --max-depth, --max-fanout, --max-leaves [default:
    /// the --tree].
    #[arg(long, value_name = "SEED")]
    random_tree: Option<u64>,
    /// Random trees: most switch levels.
    #[arg(long, default_value_t = 4)]
    max_depth: u32,
    /// Random trees: most children per switch.
    #[arg(long, default_value_t = 8)]
    max_fanout: usize,
    /// Random trees: about this many leaves at most.
    #[arg(long, default_value_t = 256)]
    max_leaves: usize,
}

#[derive(Args, Clone)]
struct LinkArgs {
    /// Per-hop latency, ns.
    #[arg(long, default_value_t = 1_000)]
    latency_ns: u64,
    /// Per-frame uniform jitter 0..=N ns (order kept).
    #[arg(long, default_value_t = 100)]
    jitter_ns: u64,
    /// Link rate in Gb/s (0: infinite).
    #[arg(long, default_value_t = 100.0)]
    gbps: f64,
    /// Transmit queue per link direction, frames (tail drop when full; 0: unbounded). `compare`
    /// applies it to the in-network tree only: its dissemination barrier is always lossless.
    #[arg(long, default_value_t = 1024)]
    queue_frames: u64,
    /// Leaf compute time between barriers, minimum, ns.
    #[arg(long, default_value_t = 0)]
    compute_min_ns: u64,
    /// Leaf compute time between barriers, maximum, ns.
    #[arg(long, default_value_t = 2_000)]
    compute_max_ns: u64,
    /// Probability that a leaf is a straggler at a barrier, 0..=1 [default: run 0.01, compare 0].
    #[arg(long)]
    late: Option<f64>,
    /// A straggler computes up to this much longer, ns.
    #[arg(long, default_value_t = 50_000)]
    late_ns: u64,
    /// Seed of every random choice of the run (faults, compute times, groups, restarts).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    tree: TreeArgs,
    #[command(flatten)]
    link: LinkArgs,
    /// Barriers per group.
    #[arg(long, default_value_t = 1_000)]
    barriers: u64,
    /// Barrier groups (group 0 spans every leaf, others random subsets).
    #[arg(long, default_value_t = 1)]
    groups: u32,
    /// Probability that a link drops a frame, per frame and link direction (0..=1).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Probability that a link delivers a frame twice, per frame (0..=1).
    #[arg(long, default_value_t = 0.0)]
    dup: f64,
    /// Probability that a frame gets an extra random delay of up to --reorder-ns, so that later
    /// frames overtake it, per frame (0..=1).
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// Most extra delay of a reordered frame, ns (default: 3 hop latencies).
    #[arg(long)]
    reorder_ns: Option<u64>,
    /// Probability of a long delay (longer than the re-send timeouts).
    #[arg(long, default_value_t = 0.0)]
    delay: f64,
    /// Length of a long delay, ns (default: 2 leaf timeouts).
    #[arg(long)]
    delay_ns: Option<u64>,
    /// Give each link its own fault rates (0..2x the given ones; a quarter clean).
    #[arg(long)]
    vary_faults: bool,
    /// Faults stop when group 0 reaches this barrier [default: faults never stop].
    #[arg(long, conflicts_with = "faults_until_ns")]
    faults_until_barrier: Option<u64>,
    /// Faults stop at this modelled time, ns [default: faults never stop].
    #[arg(long)]
    faults_until_ns: Option<u64>,
    /// Switch restarts at random switches and barriers.
    #[arg(long, default_value_t = 0)]
    restarts: u32,
    /// Restart switch S at modelled time T ns (repeatable): "S@T", e.g. "0@250000" restarts
    /// the root at 250 µs. Switch 0 is the root, the others are numbered depth-first.
    #[arg(long = "restart", value_name = "SWITCH@NS", value_parser = parse_restart)]
    scheduled_restarts: Vec<(u32, u64)>,
    /// A restarting switch drops frames for this long, ns.
    #[arg(long, default_value_t = 5_000)]
    restart_down_ns: u64,
    /// Link outages (both directions down) at random links and barriers.
    #[arg(long, default_value_t = 0)]
    outages: u32,
    /// Length of each link outage, ns.
    #[arg(long, default_value_t = 50_000)]
    outage_ns: u64,
    /// Leaves' re-send timeout, ns [default: 4 times the tree's longest round trip, at least
    /// 1000].
    #[arg(long)]
    leaf_timeout_ns: Option<u64>,
    /// Leaves double their re-send wait after each re-send of a barrier, up to this many ns
    /// (0: no doubling, every wait is the timeout).
    #[arg(long, default_value_t = 0)]
    leaf_backoff_max_ns: u64,
    /// Leaves shorten each re-send wait by up to this many percent, per group and barrier
    /// (0..=50).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=50))]
    leaf_jitter_pct: u8,
    /// Intermediate switches' re-send timeout, ns [default: the leaves'].
    #[arg(long)]
    switch_timeout_ns: Option<u64>,
    /// Intermediates double their re-send wait after each re-send of a barrier, up to this many
    /// ns (0: no doubling).
    #[arg(long, default_value_t = 0)]
    switch_backoff_max_ns: u64,
    /// Intermediates shorten each re-send wait by up to this many percent, per group and
    /// barrier (0..=50).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=50))]
    switch_jitter_pct: u8,
    /// Liveness window: stuck when nothing progresses this long after the last fault, ns
    /// [default: 100 re-send timeouts plus the longest compute time].
    #[arg(long)]
    stall_ns: Option<u64>,
    /// Sequence number of the first barrier.
    #[arg(long, default_value_t = 0)]
    first_seq: u32,
    /// Use a deliberately wrong switch rule (the checks must catch it) [default: the right one].
    #[arg(long, value_enum)]
    broken_switch: Option<BrokenSwitch>,
    /// Events kept in the trace printed with a violation.
    #[arg(long, default_value_t = 48)]
    trace: usize,
    /// Do not stop at the first safety violation.
    #[arg(long)]
    keep_going: bool,
    /// No progress line on stderr (a run longer than a second prints one every second:
    /// barriers completed, modelled time, events).
    #[arg(long)]
    quiet: bool,
}

#[derive(Args)]
struct CompareArgs {
    /// Leaves; the tree is the most even 3-level tree with exactly this many (or give --tree).
    #[arg(long, default_value_t = 65_536)]
    leaves: usize,
    /// Switch levels for the automatic tree.
    #[arg(long, default_value_t = 3)]
    levels: usize,
    #[command(flatten)]
    tree: TreeArgs,
    #[command(flatten)]
    link: LinkArgs,
    /// Barriers each model runs.
    #[arg(long, default_value_t = 10)]
    barriers: u64,
}

fn parse_restart(s: &str) -> Result<(u32, u64), String> {
    let (sw, at) = s.split_once('@').ok_or("expected SWITCH@NS")?;
    Ok((
        sw.trim().parse().map_err(|e| format!("switch: {e}"))?,
        at.trim().parse().map_err(|e| format!("time: {e}"))?,
    ))
}

fn tree_spec(t: &TreeArgs) -> Result<Option<TreeSpec>, String> {
    if let Some(s) = &t.tree {
        return TreeSpec::parse_fanouts(s).map(Some);
    }
    Ok(t.random_tree.map(|seed| TreeSpec::Random {
        seed,
        max_depth: t.max_depth,
        max_fanout: t.max_fanout,
        max_leaves: t.max_leaves,
    }))
}

fn link_params(l: &LinkArgs, default_late: f64) -> (LinkParams, ComputeModel) {
    (
        LinkParams {
            latency_ns: l.latency_ns,
            jitter_ns: l.jitter_ns,
            gbps: l.gbps,
            queue_frames: l.queue_frames,
        },
        ComputeModel {
            min_ns: l.compute_min_ns,
            max_ns: l.compute_max_ns,
            late: l.late.unwrap_or(default_late),
            late_ns: l.late_ns,
        },
    )
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run(a) => run(*a),
        Cmd::Compare(a) => compare(a),
    }
}

/// A refused command line (exit 2): the one exit-code rule of docs/operations.md.
fn fail(msg: String) -> ExitCode {
    eprintln!("barrier-sim: {msg}");
    ExitCode::from(2)
}

fn run(a: RunArgs) -> ExitCode {
    let tree = match tree_spec(&a.tree) {
        Ok(Some(t)) => t,
        Ok(None) => TreeSpec::Fanouts(vec![4, 4, 4]),
        Err(e) => return fail(e),
    };
    let (link, compute) = link_params(&a.link, 0.01);
    let faults = Faults {
        loss: a.loss,
        dup: a.dup,
        reorder: a.reorder,
        reorder_ns: a.reorder_ns.unwrap_or(3 * link.latency_ns),
        delay: a.delay,
        delay_ns: a.delay_ns.unwrap_or(0),
    };
    for (name, p) in [
        ("loss", a.loss),
        ("dup", a.dup),
        ("reorder", a.reorder),
        ("delay", a.delay),
        ("late", compute.late),
    ] {
        if !(0.0..=1.0).contains(&p) {
            return fail(format!("--{name} must be a probability in 0..=1"));
        }
    }
    let mut cfg = SimConfig {
        tree,
        groups: a.groups,
        barriers: a.barriers,
        seed: a.link.seed,
        link,
        faults,
        vary_faults_per_link: a.vary_faults,
        faults_stop: match (a.faults_until_barrier, a.faults_until_ns) {
            (Some(b), _) => FaultStop::AtBarrier(b),
            (None, Some(t)) => FaultStop::AtTime(t),
            _ => FaultStop::Never,
        },
        restarts: a.restarts,
        scheduled_restarts: a.scheduled_restarts,
        restart_down_ns: a.restart_down_ns,
        outages: a.outages,
        outage_ns: a.outage_ns,
        compute,
        leaf_timeout_ns: a.leaf_timeout_ns,
        leaf_backoff: barrier_protocol::backoff::Backoff {
            max_ns: a.leaf_backoff_max_ns,
            jitter_pct: a.leaf_jitter_pct,
        },
        switch_timeout_ns: a.switch_timeout_ns,
        switch_backoff: barrier_protocol::backoff::Backoff {
            max_ns: a.switch_backoff_max_ns,
            jitter_pct: a.switch_jitter_pct,
        },
        stall_ns: a.stall_ns,
        first_seq: a.first_seq,
        broken: a.broken_switch,
        trace_len: a.trace,
        keep_going: a.keep_going,
        progress: !a.quiet,
        ..SimConfig::default()
    };
    if a.delay_ns.is_none() && a.delay > 0.0 {
        // A long delay means longer than the re-send timeout, whatever that resolves to.
        let probe = match barrier_sim::simulation::resolved_timeouts(&cfg) {
            Ok(t) => t,
            Err(e) => return fail(e),
        };
        cfg.faults.delay_ns = 2 * probe.0;
    }
    let started = Instant::now();
    let report = match barrier_sim::run(&cfg) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    print_report(&report, report.table(), a.link.json, started);
    if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// A report on stdout, as JSON or as its table; the wall-clock time since `started` on stderr
/// (it is about this host, not the model, so it stays outside the report).
fn print_report(report: &impl serde::Serialize, table: String, json: bool, started: Instant) {
    let wall = started.elapsed();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(report).expect("report serializes")
        );
    } else {
        print!("{table}");
    }
    eprintln!("barrier-sim: {:.2} s wall clock", wall.as_secs_f64());
}

fn compare(a: CompareArgs) -> ExitCode {
    let tree = match tree_spec(&a.tree) {
        Ok(Some(t)) => t,
        Ok(None) => match TreeSpec::auto(a.leaves, a.levels) {
            Ok(t) => t,
            Err(e) => return fail(e),
        },
        Err(e) => return fail(e),
    };
    // Stragglers do not change the latency measured from the last arrival, but their waiting
    // neighbours re-send: keep them out of the frame count unless asked for.
    let (link, compute) = link_params(&a.link, 0.0);
    let cfg = CompareConfig {
        tree,
        barriers: a.barriers,
        seed: a.link.seed,
        link,
        compute,
    };
    let started = Instant::now();
    let report = match compare::run(&cfg) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    print_report(&report, report.table(), a.link.json, started);
    if report.in_network.ok && report.dissemination.safety_violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
