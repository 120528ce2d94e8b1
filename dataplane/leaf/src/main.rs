//! `barrier-leaf`: run N barriers of one group on one interface (AF_PACKET) and print latency
//! percentiles; `--json` for machines, `--records FILE` for the per-barrier records.

use barrier_leaf::report::{LatencyRecorder, Summary};
use barrier_leaf::{Config, RecordSink, Session};
use barrier_protocol::wire::MacAddr;
use barrier_protocol::Seq;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Run barriers as a compute node (leaf) of a barrier tree.
#[derive(Parser, Debug)]
#[command(name = "barrier-leaf", version)]
struct Cli {
    /// Network interface towards the parent switch.
    #[arg(long, short = 'i')]
    iface: String,
    /// Barrier group number.
    #[arg(long, short = 'g')]
    group: u32,
    /// Number of barriers to run.
    #[arg(long, short = 'n', default_value_t = 1000)]
    count: u64,
    /// Give up on a barrier after this many µs without a release (the error names group and seq).
    #[arg(long, default_value_t = 10_000_000)]
    timeout_us: u64,
    /// Re-send the reduce after this many µs without a release.
    #[arg(long, default_value_t = 1_000)]
    resend_us: u64,
    /// Destination MAC of reduces (the switch accepts any).
    #[arg(long, default_value = "ff:ff:ff:ff:ff:ff", value_parser = parse_mac)]
    dst: MacAddr,
    /// Sequence number of the first barrier (to rejoin a running tree).
    #[arg(long, default_value_t = 0)]
    first_seq: u32,
    /// Pause this many µs between a release and the next arrival (emulated work).
    #[arg(long, default_value_t = 0)]
    gap_us: u64,
    /// Carry the send time in each reduce (HAS_TIMESTAMP).
    #[arg(long)]
    timestamps: bool,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    /// Write one record per barrier (seq, first reduce and release on CLOCK_MONOTONIC):
    /// JSON lines for *.json / *.jsonl, CSV otherwise.
    #[arg(long)]
    records: Option<PathBuf>,
}

fn parse_mac(s: &str) -> Result<MacAddr, String> {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    if parts.len() != 6 {
        return Err(format!(
            "{s:?}: a MAC address has six bytes, like 02:00:00:00:00:01"
        ));
    }
    let mut mac = [0u8; 6];
    for (b, p) in mac.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16)
            .ok()
            .filter(|_| p.len() <= 2)
            .ok_or_else(|| format!("{s:?}: bad byte {p:?}"))?;
    }
    Ok(MacAddr(mac))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(summary) => {
            if cli.json {
                println!(
                    "{}",
                    serde_json::to_string(&summary).expect("summary serialises")
                );
            } else {
                println!("{summary}");
            }
            if summary.error.is_some() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("barrier-leaf: {e}");
            ExitCode::from(2)
        }
    }
}

/// Sets up and runs the barriers. An error before the first barrier is returned; one during
/// the run ends it and is reported in the summary (with what completed until then).
fn run(cli: &Cli) -> Result<Summary, barrier_leaf::Error> {
    let cfg = Config {
        resend_timeout: Duration::from_micros(cli.resend_us.max(1)),
        wait_timeout: Duration::from_micros(cli.timeout_us),
        dst: cli.dst,
        first_seq: Seq(cli.first_seq),
        timestamps: cli.timestamps,
    };
    let mut leaf = Session::open_af_packet(&cli.iface, cfg, &[cli.group])?;
    // SIGINT/SIGTERM end the run between or during barriers; the summary and the records of
    // what completed are still written.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    leaf.set_interrupt_flag(Arc::clone(&stop));
    if let Some(path) = &cli.records {
        leaf.set_record_sink(RecordSink::create(path)?);
    }
    let mut lat = LatencyRecorder::default();
    let mut error = None;
    let start = Instant::now();
    for i in 0..cli.count {
        if i > 0 && cli.gap_us > 0 {
            std::thread::sleep(Duration::from_micros(cli.gap_us));
        }
        if stop.load(Ordering::Relaxed) {
            error = Some(format!("interrupted after {i} barriers"));
            break;
        }
        match leaf.wait(cli.group) {
            Ok(rec) => lat.record(&rec),
            Err(e) => {
                error = Some(e.to_string());
                eprintln!("barrier-leaf: {e}");
                break;
            }
        }
    }
    let elapsed = start.elapsed();
    if let Err(e) = leaf.flush_records() {
        error.get_or_insert(format!("writing records: {e}"));
    }
    Ok(Summary::new(
        &cli.iface,
        cli.group,
        cli.count,
        cli.first_seq,
        elapsed,
        &lat,
        leaf.stats(),
        error,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_with_defaults() {
        let c = Cli::try_parse_from([
            "barrier-leaf",
            "--iface",
            "veth0",
            "--group",
            "7",
            "--count",
            "5",
        ])
        .unwrap();
        assert_eq!((c.iface.as_str(), c.group, c.count), ("veth0", 7, 5));
        assert_eq!(
            (c.timeout_us, c.resend_us, c.first_seq),
            (10_000_000, 1_000, 0)
        );
        assert_eq!(c.dst, MacAddr::BROADCAST);
        assert!(!c.json && c.records.is_none());
        let c = Cli::try_parse_from([
            "barrier-leaf",
            "-i",
            "eth1",
            "-g",
            "3",
            "--dst",
            "02:00:00:00:00:0a",
            "--json",
            "--records",
            "r.csv",
        ])
        .unwrap();
        assert_eq!(c.dst, MacAddr([2, 0, 0, 0, 0, 10]));
        assert!(c.json);
        assert_eq!(c.records.as_deref(), Some(std::path::Path::new("r.csv")));
    }

    #[test]
    fn bad_arguments_are_refused() {
        assert!(
            Cli::try_parse_from(["barrier-leaf", "--group", "7"]).is_err(),
            "iface is required"
        );
        assert!(
            Cli::try_parse_from(["barrier-leaf", "-i", "x"]).is_err(),
            "group is required"
        );
        assert!(Cli::try_parse_from(["barrier-leaf", "-i", "x", "-g", "-1"]).is_err());
        for bad in [
            "02:00:00:00:00",
            "02:00:00:00:00:0g",
            "02:00:00:00:00:100",
            "0200.0000.0001",
        ] {
            assert!(parse_mac(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_mac("02-00-00-00-00-01").unwrap(),
            MacAddr([2, 0, 0, 0, 0, 1])
        );
    }
}
