//! barrier-switch: `run` one switch from a configuration file, or `check` a file without
//! starting DPDK. (The demo tree is the test bed's program `barrier-demo`, not linked here.)
//!
//! Command lines follow DPDK's convention, after the subcommand: `barrier-switch run [EAL args]
//! -- --config FILE [options]`. Without `--` every argument is the program's (the file's
//! `eal.args` then apply).

mod af_xdp;
mod daemon;
mod tap;

use crate::daemon::run_config;
use barrier_runtime::launch::Signals;
use barrier_runtime::poll::IdleMode;
use barrier_switch::config::{self, idle_policy};
use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

const RUN_USAGE: &str = "barrier-switch run [EAL args] -- --config <FILE> [OPTIONS]\n       \
                         barrier-switch run --config <FILE> [OPTIONS]";

#[derive(Parser)]
#[command(
    name = "barrier-switch",
    version,
    about = "Barrier synchronization in the network, on DPDK",
    override_usage = "barrier-switch <run|check> [EAL args] -- [OPTIONS]\n       \
                      barrier-switch <run|check> [OPTIONS]",
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
}

/// clap's refusal, and for an argument it does not know that is not one of the program's
/// (`run -l 0 --config F`: EAL arguments without `--`), where EAL's go. Help and version are
/// not refusals (exit 0).
fn refused(e: clap::Error, app: &[String]) -> ExitCode {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() == ErrorKind::InvalidSubcommand && app.get(1).is_some_and(|s| s == "demo") {
        let _ = e.print();
        eprintln!("note: the demo tree is a program of its own: barrier-demo [OPTIONS]");
        return ExitCode::from(2);
    }
    if !matches!(e.kind(), ErrorKind::UnknownArgument) {
        e.exit();
    }
    let _ = e.print();
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(a)) => a.clone(),
        _ => String::new(),
    };
    let sub = app.get(1).map_or("run", String::as_str);
    let sub = if ["run", "check"].contains(&sub) {
        sub
    } else {
        "run"
    };
    if sub == "check" {
        eprintln!("note: check starts no DPDK and takes no EAL arguments");
    } else {
        eprintln!(
            "note: if {arg:?} is for DPDK (EAL), EAL arguments come first and end with `--`: \
             barrier-switch run [EAL args] -- --config <FILE> [OPTIONS]  (docs/configuration.md)"
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
                for p in &c.ports {
                    if let barrier_switch::spec::Device::AfXdp { iface, .. } = &p.device {
                        match af_xdp::check_port(iface, p.rx_queues) {
                            Ok(plan) => println!("{}: port {}: {plan}", config.display(), p.name),
                            Err(e) => {
                                eprintln!("{}: port {}: {e}", config.display(), p.name);
                                return ExitCode::from(2);
                            }
                        }
                    }
                    if let Some(x) = &p.exception {
                        match tap::check_tap(x.iface()) {
                            Ok(plan) => println!("{}: port {}: {plan}", config.display(), p.name),
                            Err(e) => {
                                eprintln!("{}: port {}: {e}", config.display(), p.name);
                                return ExitCode::from(2);
                            }
                        }
                    }
                }
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
    }
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
        let (eal, app) = split_eal(v("barrier-switch run --config s.toml")).unwrap();
        assert!(eal.is_empty());
        assert_eq!(app, v("barrier-switch run --config s.toml"));
    }

    #[test]
    fn the_old_order_is_refused_with_the_new_one() {
        let e = split_eal(v("barrier-switch run --config s.toml -- -l 0")).unwrap_err();
        assert!(e.contains("EAL arguments come first"), "{e}");
        assert!(
            e.contains("barrier-switch run [EAL args] -- --config"),
            "{e}"
        );
        // The subcommand's options are known (clap's own list); EAL's pass. Short forms are
        // EAL's: `-c` before `--` is EAL's core mask, not the switch's `--config`.
        assert!(split_eal(v("barrier-switch run -c 0x3 -- --config s.toml")).is_ok());
        assert!(split_eal(v("barrier-switch run --idle=sleep -- -l 0")).is_err());
        assert!(split_eal(v("barrier-switch run -l 0,1 --no-huge -- --config s.toml")).is_ok());
    }
}
