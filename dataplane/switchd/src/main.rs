//! barrier-switch: `run` one switch from a configuration file, `check` a file without starting
//! DPDK, or `demo` a whole barrier tree in one process.
//!
//! Command lines follow DPDK's convention, after the subcommand: `barrier-switch run [EAL args]
//! -- --config FILE [options]`. Without `--` every argument is the program's (the file's
//! `eal.args`, or the demo's defaults, then apply).

mod daemon;

use crate::daemon::run_config;
use barrier_runtime::clock::Clock;
use barrier_runtime::launch::Signals;
use barrier_runtime::poll::{Idle, IdleMode};
use barrier_switch::config::{self, idle_policy};
use barrier_testbed::demo::{build_demo, mem_wires, run_on_threads, DemoOpts, Tree};
use barrier_testbed::demo_dpdk::run_demo_dpdk;
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const RUN_USAGE: &str = "barrier-switch run [EAL args] -- --config <FILE> [OPTIONS]\n       \
                         barrier-switch run --config <FILE> [OPTIONS]";
const DEMO_USAGE: &str = "barrier-switch demo [EAL args] -- [OPTIONS]\n       \
                          barrier-switch demo [OPTIONS]";

#[derive(Parser)]
#[command(
    name = "barrier-switch",
    version,
    about = "Barrier synchronization in the network, on DPDK",
    override_usage = "barrier-switch <run|check|demo> [EAL args] -- [OPTIONS]\n       \
                      barrier-switch <run|check|demo> [OPTIONS]",
    after_help = "Exit status: 0 done (run: stopped by SIGINT/SIGTERM, every mbuf back); 1 the run \
                  failed (EAL, a port, a check); 2 the command line or the configuration was \
                  refused. See docs/operations.md."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one switch as the configuration file says, until SIGINT/SIGTERM.
    #[command(override_usage = RUN_USAGE)]
    Run {
        /// The switch's configuration file (TOML; docs/configuration.md,
        /// examples in dataplane/switchd/configs/).
        #[arg(long, short)]
        config: PathBuf,
        /// Idle policy of every loop, replacing the file's lcores.idle: spin (the default; a
        /// core per loop), yield or sleep (fewer cores than busy loops, e.g. several switches
        /// on one machine). See docs/configuration.md.
        #[arg(long, value_enum)]
        idle: Option<IdleMode>,
        /// Empty passes in a row before a yield/sleep loop backs off (with --idle; default
        /// 1000).
        #[arg(long, requires = "idle")]
        idle_after_polls: Option<u32>,
        /// Microseconds a sleeping loop sleeps per further empty pass, 1 to 500 (with --idle
        /// sleep; default 20).
        #[arg(long, requires = "idle")]
        idle_sleep_us: Option<u32>,
        /// At exit, also write the final counters as JSON to this file (every counter, zeroes
        /// included, under the report's names: docs/operations.md).
        #[arg(long, value_name = "FILE")]
        stats_json: Option<PathBuf>,
    },
    /// Validate a configuration file and print what it describes; DPDK is not started.
    #[command(override_usage = "barrier-switch check --config <FILE>")]
    Check {
        /// The configuration file to check.
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Build a whole tree (root, intermediates, emulated leaves) in this process and run barriers.
    #[command(override_usage = DEMO_USAGE)]
    Demo(DemoArgs),
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum IoKind {
    /// DPDK net_ring virtual ports (no NIC needed).
    Dpdk,
    /// In-memory rings, no DPDK at all.
    Mem,
}

#[derive(clap::Args)]
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

/// clap's refusal, and for an argument it does not know that is not one of the program's
/// (`run -l 0 --config F`: EAL arguments without `--`), where EAL's go. Help and version are
/// not refusals (exit 0).
fn refused(e: clap::Error, app: &[String]) -> ExitCode {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(e.kind(), ErrorKind::UnknownArgument) {
        e.exit();
    }
    let _ = e.print();
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(a)) => a.clone(),
        _ => String::new(),
    };
    let sub = app.get(1).map_or("run", String::as_str);
    let sub = if ["run", "check", "demo"].contains(&sub) {
        sub
    } else {
        "run"
    };
    if sub == "check" {
        eprintln!("note: check starts no DPDK and takes no EAL arguments");
    } else {
        let rest = if sub == "run" {
            "--config <FILE> [OPTIONS]"
        } else {
            "[OPTIONS]"
        };
        eprintln!(
            "note: if {arg:?} is for DPDK (EAL), EAL arguments come first and end with `--`: \
             barrier-switch {sub} [EAL args] -- {rest}  (docs/configuration.md)"
        );
    }
    ExitCode::from(2)
}

/// What `run` will do about the control socket at `path` (`check` says it), or why it cannot:
/// a socket file is replaced when stale (refused while a switch listens on it); a missing
/// folder is created, parents too, mode 0755 (as `mgmt::ControlServer::bind` does); a path
/// through something that is not a folder, or a file that is not a socket, can never work.
/// Whether the user who runs the switch may write there is not judged: `check` often runs as
/// another user than the switch.
fn socket_plan(path: &std::path::Path) -> Result<String, String> {
    use std::os::unix::fs::FileTypeExt;
    let shown = path.display();
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            return Ok(format!(
                "control socket {shown} (exists: replaced if no switch listens on it)"
            ))
        }
        Ok(_) => {
            return Err(format!(
                "{shown} exists and is not a socket; run would refuse to replace it"
            ))
        }
        Err(_) => {}
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let mut have = dir;
    loop {
        match std::fs::metadata(have) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => {
                return Err(format!(
                    "{} is not a folder: the socket's folder {} cannot be created",
                    have.display(),
                    dir.display()
                ))
            }
            Err(_) => match have.parent().filter(|p| !p.as_os_str().is_empty()) {
                Some(p) => have = p,
                None => break,
            },
        }
    }
    if have == dir {
        Ok(format!("control socket {shown}"))
    } else {
        Ok(format!(
            "control socket {shown} (folder {} missing: run creates it, mode 0755)",
            dir.display()
        ))
    }
}

/// SIGINT/SIGTERM and SIGUSR1 handlers; `None` (reported) if they cannot be installed.
fn signals() -> Option<Signals> {
    Signals::install()
        .map_err(|e| eprintln!("barrier-switch: signals: {e}"))
        .ok()
}

fn default_lcores() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(2)
}

/// Splits `argv` as `prog SUBCOMMAND [EAL args] -- [program args]` into (EAL args, what clap
/// parses), by the convention of every program here (`barrier_runtime::args`): without `--`, no
/// EAL args; the old order (`run --config F -- EAL`) is refused with the right one.
fn split_eal(argv: Vec<String>) -> Result<(Vec<String>, Vec<String>), String> {
    let sub = argv.get(1).cloned().unwrap_or_else(|| "run".into());
    let split = barrier_runtime::args::split_eal(
        argv.into_iter().map(Into::into).collect(),
        2,
        &Cli::command(),
        "barrier-switch",
        |word| format!("barrier-switch {sub} [EAL args] -- {word} ..."),
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
            eprintln!("barrier-switch: {e}");
            return ExitCode::from(2);
        }
    };
    let cli = match Cli::try_parse_from(&app) {
        Ok(c) => c,
        Err(e) => return refused(e, &app),
    };
    match cli.cmd {
        Cmd::Check { config } => match config::load(&config) {
            Ok(c) => {
                println!(
                    "{}: ok: {} ports, {} groups, scheduler on lcore {}, RX lcores {:?}{}, idle: {}",
                    config.display(),
                    c.ports.len(),
                    c.group_count(),
                    c.lcores.scheduler,
                    c.lcores.rx.iter().map(|r| r.lcore).collect::<Vec<_>>(),
                    if c.lcores.shared {
                        " (shared: reduced mode)"
                    } else {
                        ""
                    },
                    c.lcores.idle
                );
                if let Some(ctl) = &c.control {
                    match socket_plan(&ctl.socket) {
                        Ok(plan) => println!("{}: {plan}", config.display()),
                        Err(e) => {
                            eprintln!("{}: control.socket: {e}", config.display());
                            return ExitCode::from(2);
                        }
                    }
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}: {e}", config.display());
                ExitCode::from(2)
            }
        },
        Cmd::Run {
            config,
            idle,
            idle_after_polls,
            idle_sleep_us,
            stats_json,
        } => {
            let mut cfg = match config::load(&config) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("{}: {e}", config.display());
                    return ExitCode::from(2);
                }
            };
            if let Some(mode) = idle {
                match idle_policy(
                    mode,
                    idle_after_polls,
                    idle_sleep_us,
                    ["--idle-after-polls", "--idle-sleep-us"],
                ) {
                    Ok(p) => cfg.lcores.idle = p,
                    Err(e) => {
                        eprintln!("barrier-switch: {e}");
                        return ExitCode::from(2);
                    }
                }
            }
            let Some(signals) = signals() else {
                return ExitCode::FAILURE;
            };
            let name = config
                .file_stem()
                .map_or("switch".into(), |s| s.to_string_lossy().into_owned());
            match run_config(&name, &cfg, &eal, signals) {
                Ok(out) => {
                    println!("{}", out.report);
                    if let Some(path) = stats_json {
                        let json = barrier_mgmt::telemetry::stats_json(&out.stats);
                        let text = serde_json::to_string_pretty(&json).unwrap_or_default();
                        if let Err(e) = std::fs::write(&path, text + "\n") {
                            eprintln!("barrier-switch: --stats-json {}: {e}", path.display());
                            return ExitCode::FAILURE;
                        }
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("barrier-switch: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Demo(a) => demo(a, &eal),
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
            eprintln!("barrier-switch demo: {e}");
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
            "barrier-switch demo: {} busy lcores on {cores} core(s): the loops will preempt each other and latency will be scheduler time slices (--idle sleep gives the core up when idle)",
            opts.loops
        );
    }
    let tree = match Tree::new(&opts.fanout) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("barrier-switch demo: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(signals) = signals() else {
        return ExitCode::FAILURE;
    };
    let (result, extra) = match a.io {
        IoKind::Mem => {
            let clock = Clock::new();
            let demo = match build_demo(&opts, &tree, mem_wires(&tree), clock.now_ns()) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("barrier-switch demo: {e}");
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
                eprintln!("barrier-switch demo: {e}");
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
            "barrier-switch demo: {} releases came before all leaves arrived",
            result.report.early_releases
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::{socket_plan, split_eal};

    #[test]
    fn check_says_what_run_does_with_the_control_socket() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let plan = socket_plan(&d.join("s.sock")).unwrap();
        assert!(!plan.contains("missing"), "{plan}");
        let plan = socket_plan(&d.join("run/netbarrier/s.sock")).unwrap();
        assert!(
            plan.contains("run/netbarrier missing: run creates it, mode 0755"),
            "{plan}"
        );
        std::fs::write(d.join("file"), "").unwrap();
        let e = socket_plan(&d.join("file/s.sock")).unwrap_err();
        assert!(e.contains("is not a folder"), "{e}");
        let e = socket_plan(&d.join("file")).unwrap_err();
        assert!(e.contains("exists and is not a socket"), "{e}");
        let _l = std::os::unix::net::UnixListener::bind(d.join("live.sock")).unwrap();
        let plan = socket_plan(&d.join("live.sock")).unwrap();
        assert!(plan.contains("exists: replaced if"), "{plan}");
    }

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn eal_arguments_come_between_the_subcommand_and_the_dashes() {
        let (eal, app) =
            split_eal(v("barrier-switch run -l 0,1 --no-huge -- --config s.toml")).unwrap();
        assert_eq!(eal, v("-l 0,1 --no-huge"));
        assert_eq!(app, v("barrier-switch run --config s.toml"));
        let (eal, app) = split_eal(v("barrier-switch demo --groups 3")).unwrap();
        assert!(eal.is_empty());
        assert_eq!(app, v("barrier-switch demo --groups 3"));
    }

    #[test]
    fn the_old_order_is_refused_with_the_new_one() {
        let e = split_eal(v("barrier-switch run --config s.toml -- -l 0")).unwrap_err();
        assert!(e.contains("EAL arguments come first"), "{e}");
        assert!(
            e.contains("barrier-switch run [EAL args] -- --config"),
            "{e}"
        );
        // The demo's options are known too (clap's own list); EAL's pass. Short forms are
        // EAL's: `-c` before `--` is EAL's core mask, not the switch's `--config`.
        assert!(split_eal(v("barrier-switch run -c 0x3 -- --config s.toml")).is_ok());
        assert!(split_eal(v("barrier-switch demo --groups=3 -- -l 0")).is_err());
        assert!(split_eal(v("barrier-switch demo -l 0,1 --no-huge -- --groups 3")).is_ok());
    }
}
