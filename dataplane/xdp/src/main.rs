//! barrier-xdp: the XDP switch's daemon. `check --config FILE` validates a file (interfaces
//! looked up, nothing loaded); `run --config FILE` loads the program, attaches it to every
//! port, configures the file's groups and serves the management plane (control socket,
//! Prometheus) until SIGINT/SIGTERM. The file is barrier-switch's with ports as interfaces
//! (docs/configuration.md); operations in docs/operations.md, "Running the XDP switch".

mod daemon;

use barrier_xdp::config;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "barrier-xdp",
    version,
    about = "Barrier synchronization in the network, as an XDP program",
    after_help = "Exit status: 0 done (run: stopped by SIGINT/SIGTERM, program detached); 1 the run \
                  failed (loading, attaching, the control socket); 2 the command line or the \
                  configuration was refused. See docs/operations.md."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the XDP switch as the configuration file says, until SIGINT/SIGTERM.
    Run {
        /// The switch's configuration file (TOML; docs/configuration.md).
        #[arg(long, short)]
        config: PathBuf,
        /// At exit, also write the final counters as JSON to this file (as barrier-switch's
        /// `--stats-json`).
        #[arg(long, value_name = "FILE")]
        stats_json: Option<PathBuf>,
    },
    /// Validate a configuration file and print what it describes; nothing is loaded.
    Check {
        /// The configuration file to check.
        #[arg(long, short)]
        config: PathBuf,
    },
}

fn main() -> ExitCode {
    barrier_runtime::logging::init();
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Check { config } => match config::load(&config) {
            Ok(c) => {
                let ports: Vec<String> = c
                    .ports
                    .iter()
                    .map(|p| format!("{}={}", p.name, p.iface))
                    .collect();
                println!(
                    "{}: ok: {} ports ({}), {} groups, group map of {}, attach {:?}",
                    config.display(),
                    c.ports.len(),
                    ports.join(" "),
                    c.group_count(),
                    c.group_capacity(),
                    c.mode
                );
                if let Some(ctl) = &c.mgmt.control {
                    println!(
                        "{}: control socket {}",
                        config.display(),
                        ctl.socket.display()
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}: {e}", config.display());
                ExitCode::from(2)
            }
        },
        Cmd::Run { config, stats_json } => {
            let cfg = match config::load(&config) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("{}: {e}", config.display());
                    return ExitCode::from(2);
                }
            };
            let signals = match barrier_runtime::launch::Signals::install() {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("barrier-xdp: signals: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let name = config
                .file_stem()
                .map_or("switch".into(), |s| s.to_string_lossy().into_owned());
            match daemon::run(&name, &cfg, &signals) {
                Ok(out) => {
                    println!("{}", out.report);
                    if let Some(path) = stats_json {
                        let text =
                            serde_json::to_string_pretty(&out.stats_json).unwrap_or_default();
                        if let Err(e) = std::fs::write(&path, text + "\n") {
                            eprintln!("barrier-xdp: --stats-json {}: {e}", path.display());
                            return ExitCode::FAILURE;
                        }
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("barrier-xdp: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
