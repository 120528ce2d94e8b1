//! Diagnostics go through `tracing`; a program's `main` calls `init` once. The level comes from
//! `RUST_LOG` (`RUST_LOG=debug`, `RUST_LOG=barrier_runtime=debug`), `info` by default, written
//! to stderr. Program output (reports, counters, summaries) stays on stdout, and contract lines
//! that scripts wait for (`barrier-switch: ready`) are printed as they are, not as log records.
//!
//! Each record starts with its time in UTC (RFC 3339, microseconds) and its level. Colour only
//! when stderr is a terminal: a file, a pipe or the journal gets plain text. Under systemd, when
//! stderr is the journal's stream (`JOURNAL_STREAM` names it), the time is left out: the
//! journal stamps every line itself.

use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// How records are written, from where stderr goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// ANSI colour codes (stderr is a terminal).
    pub ansi: bool,
    /// A timestamp on each record (not when the journal adds its own).
    pub time: bool,
}

/// The style for this process's stderr.
pub fn style() -> Style {
    let journal = std::env::var("JOURNAL_STREAM")
        .ok()
        .is_some_and(|v| stderr_is_stream(&v));
    Style {
        ansi: std::io::stderr().is_terminal(),
        time: !journal,
    }
}

/// Whether stderr is the stream `JOURNAL_STREAM` names (`DEVICE:INODE`, as systemd sets it for
/// a service whose output goes to the journal): a child that inherited the variable but writes
/// elsewhere (`2>file`) still gets timestamps.
fn stderr_is_stream(value: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some((dev, ino)) = value.split_once(':') else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    std::fs::metadata("/proc/self/fd/2").is_ok_and(|m| m.dev() == dev && m.ino() == ino)
}

/// Installs the stderr subscriber (once; later calls do nothing).
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let style = style();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(style.ansi);
    let _ = if style.time {
        builder.try_init()
    } else {
        builder.without_time().try_init()
    };
}

#[cfg(test)]
mod tests {
    use super::stderr_is_stream;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn journal_stream_must_name_this_stderr() {
        assert!(!stderr_is_stream(""));
        assert!(!stderr_is_stream("1:2:3"));
        assert!(!stderr_is_stream("x:1"));
        let m = std::fs::metadata("/proc/self/fd/2").unwrap();
        assert!(stderr_is_stream(&format!("{}:{}", m.dev(), m.ino())));
        assert!(!stderr_is_stream(&format!("{}:{}", m.dev(), m.ino() + 1)));
    }
}
