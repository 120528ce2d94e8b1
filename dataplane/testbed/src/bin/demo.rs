//! barrier-demo: a whole barrier tree (root, intermediate switches, emulated leaves) in one
//! process, on DPDK `net_ring` ports (`--io dpdk`, the default: no NIC, no hugepages) or on
//! in-memory rings (`--io mem`), running barriers and printing their rate and latency.
//!
//! The switches are the real pipeline (`barrier_switch::engine`), the leaves the test bed's
//! emulated fleet (`barrier_testbed::demo`, `demo_dpdk`). It is a test bed program, not part of
//! the switch daemon: `barrier-switch` links none of the test bed.
//!
//! Command lines follow DPDK's convention: `barrier-demo [EAL args] -- [OPTIONS]`. Without
//! `--` every argument is the program's (the demo's default EAL arguments apply).

use barrier_runtime::clock::Clock;
use barrier_runtime::launch::Signals;
use barrier_runtime::poll::{Idle, IdleMode};
use barrier_switch::config::idle_policy;
use barrier_testbed::demo::{build_demo, mem_wires, run_on_threads, DemoOpts, Tree};
use barrier_testbed::demo_dpdk::run_demo_dpdk;
use clap::{CommandFactory, Parser, ValueEnum};
use std::process::ExitCode;
use std::time::Duration;

const NAME: &str = "barrier-demo";

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum IoKind {
    /// DPDK net_ring virtual ports (no NIC needed).
    Dpdk,
    /// In-memory rings, no DPDK at all.
    Mem,
}

/// Build a whole tree (root, intermediates, emulated leaves) in this process and run barriers.
#[derive(Parser)]
#[command(
    name = "barrier-demo",
    version,
    override_usage = "barrier-demo [EAL args] -- [OPTIONS]\n       barrier-demo [OPTIONS]",
    after_help = "Exit status: 0 done; 1 the run failed (EAL, a port, a release before every leaf \
                  arrived); 2 the command line was refused. See docs/configuration.md."
)]
struct DemoArgs {
    /// Children per level: 2,4 is a root with 2 intermediates, each with 4 leaves.
    #[arg(long, default_value = "2,4", value_delimiter = ',')]
    fanout: Vec<usize>,
    /// Barrier groups running at once (every leaf is in every group).
    #[arg(long, default_value_t = 1)]
    groups: u32,
    /// Seconds to run (ignored with --count).
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Run exactly this many barriers per group, then stop [default: run for --duration].
    #[arg(long)]
    count: Option<u64>,
    /// Busy-polling lcores (at most the cores you can spare): with 1, every switch and the leaves
    /// share one loop; with 2 or more the leaves get one and the switches share the rest
    /// (default: 2, or 1 on a machine with one core).
    #[arg(long, default_value_t = default_lcores())]
    lcores: usize,
    /// The links between the demo's switches and leaves.
    #[arg(long, value_enum, default_value_t = IoKind::Dpdk)]
    io: IoKind,
    /// Leaf re-send timeout, µs. Longer than barrier-leaf's 1000 µs because the demo runs
    /// every switch and leaf on a few shared busy loops, often more loops than cores: a loop
    /// waiting for a time slice (milliseconds) would make a 1 ms timer fire on every barrier.
    /// Lower it when each loop has a core of its own.
    #[arg(long, default_value_t = 50_000)]
    leaf_timeout_us: u64,
    /// Intermediate switches' re-send timeout, µs (below the leaves', so that a switch repairs
    /// the upper path before every leaf re-sends).
    #[arg(long, default_value_t = 20_000)]
    switch_timeout_us: u64,
    /// Print every switch's counters at the end.
    #[arg(long)]
    counters: bool,
    /// No progress line on stderr (a run longer than a second prints one every second:
    /// barriers so far, and in the last second).
    #[arg(long)]
    quiet: bool,
    /// What the loops do when idle: spin, yield or sleep (more loops than cores).
    #[arg(long, value_enum, default_value_t = IdleMode::Spin)]
    idle: IdleMode,
    /// Empty passes in a row before a yield/sleep loop backs off [default: 1000].
    #[arg(long)]
    idle_after_polls: Option<u32>,
    /// Microseconds a sleeping loop sleeps per further empty pass, 1 to 500 (with --idle
    /// sleep) [default: 20].
    #[arg(long)]
    idle_sleep_us: Option<u32>,
}

fn default_lcores() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(2)
}

/// clap's refusal, and for an argument it does not know (EAL arguments without `--`), where
/// EAL's go. Help and version are not refusals (exit 0).
fn refused(e: clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(e.kind(), ErrorKind::UnknownArgument) {
        e.exit();
    }
    let _ = e.print();
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(a)) => a.clone(),
        _ => String::new(),
    };
    eprintln!(
        "note: if {arg:?} is for DPDK (EAL), EAL arguments come first and end with `--`: \
         {NAME} [EAL args] -- [OPTIONS]  (docs/configuration.md)"
    );
    ExitCode::from(2)
}

/// Splits `argv` as `barrier-demo [EAL args] -- [program args]` into (EAL args, what clap
/// parses), by the convention of every program here (`barrier_runtime::args`): without `--`, no
/// EAL args; the demo's own options before `--` are refused with the right order.
fn split_eal(argv: Vec<String>) -> Result<(Vec<String>, Vec<String>), String> {
    let split = barrier_runtime::args::split_eal(
        argv.into_iter().map(Into::into).collect(),
        1,
        &DemoArgs::command(),
        NAME,
        |word| format!("{NAME} [EAL args] -- {word} ..."),
    )?;
    let strings = |v: Vec<std::ffi::OsString>| {
        v.into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    };
    Ok((strings(split.eal), strings(split.program)))
}

fn main() -> ExitCode {
    barrier_runtime::logging::init();
    let (eal, app) = match split_eal(std::env::args().collect()) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{NAME}: {e}");
            return ExitCode::from(2);
        }
    };
    match DemoArgs::try_parse_from(&app) {
        Ok(a) => demo(a, &eal),
        Err(e) => refused(e),
    }
}

fn demo(a: DemoArgs, eal: &[String]) -> ExitCode {
    let idle = match idle_policy(
        a.idle,
        a.idle_after_polls,
        a.idle_sleep_us,
        ["--idle-after-polls", "--idle-sleep-us"],
    ) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{NAME}: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = DemoOpts {
        idle,
        fanout: a.fanout.clone(),
        groups: a.groups,
        count: a.count,
        duration: Duration::from_secs_f64(a.duration.max(0.0)),
        loops: a.lcores.max(1),
        leaf_timeout_ns: a.leaf_timeout_us * 1000,
        switch_timeout_ns: a.switch_timeout_us * 1000,
        progress: !a.quiet,
        ..DemoOpts::default()
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if opts.loops > cores && opts.idle == Idle::Spin {
        tracing::warn!(
            "{NAME}: {} busy lcores on {cores} core(s): the loops will preempt each other and latency will be scheduler time slices (--idle sleep gives the core up when idle)",
            opts.loops
        );
    }
    let tree = match Tree::new(&opts.fanout) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{NAME}: {e}");
            return ExitCode::from(2);
        }
    };
    let signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{NAME}: signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (result, extra) = match a.io {
        IoKind::Mem => {
            let clock = Clock::new();
            let demo = match build_demo(&opts, &tree, mem_wires(&tree), clock.now_ns()) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("{NAME}: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let switches = demo.switches.clone();
            let r = run_on_threads(demo, &opts, clock, signals.quit.clone());
            (r, switches.iter().map(|s| s.report()).collect::<String>())
        }
        IoKind::Dpdk => match run_demo_dpdk(&opts, eal, signals.quit.clone()) {
            Ok(o) => (o.result, o.report),
            Err(e) => {
                eprintln!("{NAME}: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    print!("{}", result.summary(&opts, &tree));
    if a.counters {
        print!("{extra}");
    }
    if result.report.early_releases > 0 {
        eprintln!(
            "{NAME}: {} releases came before all leaves arrived",
            result.report.early_releases
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::split_eal;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn eal_arguments_come_before_the_dashes() {
        let (eal, app) = split_eal(v("barrier-demo -l 0,1 --no-huge -- --groups 3")).unwrap();
        assert_eq!(eal, v("-l 0,1 --no-huge"));
        assert_eq!(app, v("barrier-demo --groups 3"));
        let (eal, app) = split_eal(v("barrier-demo --groups 3")).unwrap();
        assert!(eal.is_empty());
        assert_eq!(app, v("barrier-demo --groups 3"));
    }

    #[test]
    fn the_demos_options_before_the_dashes_are_refused_with_the_right_order() {
        let e = split_eal(v("barrier-demo --groups=3 -- -l 0")).unwrap_err();
        assert!(e.contains("EAL arguments come first"), "{e}");
        assert!(e.contains("barrier-demo [EAL args] -- --groups=3"), "{e}");
    }
}
