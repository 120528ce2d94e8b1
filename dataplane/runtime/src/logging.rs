//! Diagnostics go through `tracing`; a program's `main` calls `init` once. The level comes from
//! `RUST_LOG` (`RUST_LOG=debug`, `RUST_LOG=barrier_runtime=debug`), `info` by default, written
//! to stderr. Program output (reports, counters, summaries) stays on stdout, and contract lines
//! that scripts wait for (`barrier-switch: ready`) are printed as they are, not as log records.

use tracing_subscriber::EnvFilter;

/// Installs the stderr subscriber (once; later calls do nothing).
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .try_init();
}
