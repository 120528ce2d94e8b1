//! `barrier-leaf`: run N barriers of one group on one interface (AF_PACKET) or one DPDK port
//! and print latency percentiles; `--json` for machines, `--records FILE` for the per-barrier
//! records.
//!
//! The command line follows DPDK's convention, as `barrier-gen` does:
//!
//! ```text
//! barrier-leaf --iface IF --group G [options]                    AF_PACKET, no EAL
//! barrier-leaf [EAL args] -- --dpdk-port NAME --group G [options]  a DPDK port
//! ```
//!
//! With a `--`, everything before it goes to DPDK's EAL and everything after it is the leaf's;
//! without one, everything is the leaf's (and a `--dpdk-port` starts EAL with no arguments, its
//! defaults). See [`split_eal`].

use std::ffi::OsString;

use barrier_leaf::report::{LatencyRecorder, Summary};
use barrier_leaf::{Config, Durability, RecordSink, Session, Transport};
use barrier_protocol::backoff::Backoff;
use barrier_protocol::wire::MacAddr;
use barrier_protocol::{Epoch, Seq};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Run barriers as a compute node (leaf) of a barrier tree.
#[derive(Parser, Debug)]
#[command(
    name = "barrier-leaf",
    version,
    override_usage = "barrier-leaf --iface IF --group G [OPTIONS]\n       \
                      barrier-leaf [EAL ARGS] -- --dpdk-port NAME --group G [OPTIONS]",
    after_help = "With `--`, the arguments before it are DPDK's EAL arguments and the leaf's \
                  options follow it (DPDK's convention); without `--`, every argument is the \
                  leaf's. EAL arguments are taken only with --dpdk-port.\n\n\
                  Exit status: 0 every barrier completed; 1 the run failed (a barrier timed out, \
                  SIGINT/SIGTERM, or the interface, EAL or the DPDK port could not be opened); \
                  2 the command line was refused; 3 the switch is at another barrier of this \
                  epoch (an earlier run used the group's epoch: reset the group to a new epoch \
                  on every switch and run with --epoch set to it)."
)]
#[cfg_attr(
    feature = "dpdk",
    command(group(clap::ArgGroup::new("link").required(true).args(["iface", "dpdk_port"])))
)]
struct Cli {
    /// Network interface towards the parent switch (AF_PACKET).
    #[arg(long, short = 'i', required = cfg!(not(feature = "dpdk")))]
    iface: Option<String>,
    /// DPDK port towards the parent switch, by its EAL name (a PCI address given with `-a`, or
    /// a vdev such as net_af_packet0 given with `--vdev`); EAL arguments go before `--`.
    #[cfg(feature = "dpdk")]
    #[arg(long, value_name = "NAME")]
    dpdk_port: Option<String>,
    /// With --dpdk-port, what the polling thread does when nothing arrived: spin (lowest
    /// latency, a whole core; the default), yield or sleep (after a run of empty polls, let
    /// other threads of the core run): the switch's idle policies.
    #[cfg(feature = "dpdk")]
    #[arg(long, value_enum)]
    dpdk_idle: Option<barrier_runtime::poll::IdleMode>,
    /// With --dpdk-port, receive frames for any destination MAC.
    #[cfg(feature = "dpdk")]
    #[arg(long)]
    dpdk_promisc: bool,
    /// Pin the thread that sends and waits (the leaf's only thread) to CPU N, so it does not
    /// move between cores mid-barrier: on a compute node, a core beside the NIC's interrupts
    /// and away from the application's busy ones. AF_PACKET only: with --dpdk-port that thread
    /// is EAL's main lcore, which EAL places (`-l N` before `--`).
    #[cfg_attr(
        feature = "dpdk",
        arg(long, value_name = "N", conflicts_with = "dpdk_port")
    )]
    #[cfg_attr(not(feature = "dpdk"), arg(long, value_name = "N"))]
    cpu: Option<usize>,
    /// Busy-poll the socket this many µs before sleeping in each wait for a frame (what MPI
    /// libraries do): a release that comes within it is taken without a sleep and a wake-up, at
    /// the price of a busy CPU for that long per wait. 0: block at once. AF_PACKET only (a DPDK
    /// port polls anyway).
    #[cfg_attr(
        feature = "dpdk",
        arg(
            long,
            value_name = "US",
            default_value_t = 0,
            conflicts_with = "dpdk_port"
        )
    )]
    #[cfg_attr(
        not(feature = "dpdk"),
        arg(long, value_name = "US", default_value_t = 0)
    )]
    busy_poll_us: u64,
    /// With --busy-poll-us: yield the CPU (sched_yield) between polls, as MPI libraries do when
    /// ranks outnumber cores, instead of spinning.
    #[arg(long, requires = "busy_poll_us")]
    busy_poll_yield: bool,
    /// Set SO_BUSY_POLL to this many µs on the AF_PACKET socket: the kernel busy-polls the
    /// device's receive queue before a blocking wait sleeps, on drivers with NAPI busy polling
    /// (no effect measured on veth: docs/leaf.md). Needs CAP_NET_ADMIN above net.core.busy_read.
    #[cfg_attr(
        feature = "dpdk",
        arg(long, value_name = "US", conflicts_with = "dpdk_port")
    )]
    #[cfg_attr(not(feature = "dpdk"), arg(long, value_name = "US"))]
    so_busy_poll_us: Option<u32>,
    /// EAL arguments for --dpdk-port: what came before `--` (see [`split_eal`]).
    #[cfg(feature = "dpdk")]
    #[arg(skip)]
    eal: Vec<String>,
    /// Barrier group number, 0 to 1048575.
    #[arg(long, short = 'g', value_parser = clap::value_parser!(u32).range(..i64::from(barrier_protocol::MAX_GROUPS)))]
    group: u32,
    /// Number of barriers to run [default: 1000; no limit with --duration].
    #[arg(long, short = 'n')]
    count: Option<u64>,
    /// Run barriers for this many seconds (and at most --count, if given). A leaf whose time
    /// runs out while it waits at a barrier waits --duration-grace-ms longer for the release,
    /// then leaves: that arrival is recorded as not released and the run still succeeds (the
    /// other leaves of a timed run stop at slightly different barriers).
    #[arg(long, value_name = "SECONDS", value_parser = parse_duration_s)]
    duration: Option<Duration>,
    /// With --duration: how long a leaf whose time ran out still waits for the release of the
    /// barrier it is at.
    #[arg(long, default_value_t = 100, requires = "duration", value_name = "MS")]
    duration_grace_ms: u64,
    /// Give up on a barrier after this many µs without a release (the error names group and seq).
    #[arg(long, default_value_t = 10_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    timeout_us: u64,
    /// Re-send the reduce after this many µs without a release.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    resend_us: u64,
    /// Double the wait after each re-send of a barrier, up to this many µs (capped exponential
    /// backoff; the default, 0, keeps every wait at --resend-us).
    #[arg(long, default_value_t = 0)]
    resend_max_us: u64,
    /// Shorten each re-send wait by up to this many percent, differently per group and barrier
    /// (0..=50), so that groups sharing a link do not retry in lockstep.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=50))]
    resend_jitter_pct: u8,
    /// Destination MAC of reduces (the switch accepts any).
    #[arg(long, default_value = "ff:ff:ff:ff:ff:ff", value_parser = parse_mac)]
    dst: MacAddr,
    /// Sequence number of the first barrier. Every leaf of the group must start at the same
    /// number; a leaf may only rejoin at S if it saw the release of S-1 (anything else can let
    /// the switches release a barrier this leaf never reached).
    #[arg(long, default_value_t = 0)]
    first_seq: u32,
    /// The group's epoch on the switches (`barrierctl group show N` prints it; a group
    /// configured from a file without an `epoch` key is in epoch 1). Every leaf of one run of
    /// the group uses the same epoch; releases of another epoch are ignored.
    #[arg(long, default_value_t = 1)]
    epoch: u32,
    /// Pause this many µs between a release and the next arrival (emulated work).
    #[arg(long, default_value_t = 0)]
    gap_us: u64,
    /// Carry the send time in each reduce (HAS_TIMESTAMP).
    #[arg(long)]
    timestamps: bool,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    /// No progress line (runs longer than a second print one a second on stderr).
    #[arg(long)]
    quiet: bool,
    /// Write one record per barrier (seq, first reduce and release on CLOCK_MONOTONIC):
    /// JSON lines for *.json / *.jsonl, CSV otherwise [default: no records].
    #[arg(long)]
    records: Option<PathBuf>,
    /// Keep records in an 8 KiB buffer until the end of the run instead of writing each one
    /// through to the kernel at its release (the default, so that a leaf killed with SIGKILL
    /// leaves every completed barrier's record, in whole lines). For measuring what that costs.
    #[arg(long, requires = "records")]
    records_buffered: bool,
}

/// Exit status when the switch answers with releases of another barrier of the leaf's epoch
/// (`Error::EpochInUse`): the group's epoch was used by an earlier run. Its own status, apart
/// from 1, because the fix is not in this run but in the group's management (a new epoch), and
/// a job script can say so or do it.
const EXIT_EPOCH_IN_USE: u8 = 3;

fn parse_duration_s(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if !(secs > 0.0 && secs.is_finite()) {
        return Err("a positive number of seconds".into());
    }
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())
}

fn parse_mac(s: &str) -> Result<MacAddr, String> {
    s.parse()
        .map_err(|e: barrier_protocol::wire::MacParseError| e.to_string())
}

/// Splits a command line (program name first) by DPDK's convention `program [EAL args] --
/// [program args]` (`barrier_runtime::args`): with a `--`, the arguments before the first one
/// are EAL's and those after it the program's; without one, all are the program's and there are
/// no EAL arguments. Returns the program's command line (its name first) and the EAL arguments.
/// The order before DPDK's convention (`barrier-leaf [options] -- [EAL args]`) is refused: a
/// leaf option in the EAL part (EAL has none of these names) says that order was used.
fn split_eal(argv: Vec<OsString>) -> Result<(Vec<OsString>, Vec<OsString>), String> {
    use clap::CommandFactory;
    barrier_runtime::args::split_eal(argv, 1, &Cli::command(), "barrier-leaf", |_| {
        "barrier-leaf [EAL ARGS] -- --dpdk-port NAME --group G [OPTIONS]".into()
    })
    .map(|s| (s.program, s.eal))
}

/// Parses the command line, with the checks clap's derive cannot express.
fn parse_cli<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    use clap::error::ErrorKind;
    use clap::CommandFactory;
    let (program, eal) = split_eal(args.into_iter().map(Into::into).collect())
        .map_err(|e| Cli::command().error(ErrorKind::UnknownArgument, e))?;
    #[cfg_attr(not(feature = "dpdk"), allow(unused_mut))]
    let mut cli = Cli::try_parse_from(program)?;
    #[cfg(not(feature = "dpdk"))]
    if !eal.is_empty() {
        return Err(Cli::command().error(
            ErrorKind::UnknownArgument,
            "EAL arguments before `--`: this barrier-leaf is built without DPDK (cargo feature \
             `dpdk`); AF_PACKET only",
        ));
    }
    #[cfg(feature = "dpdk")]
    {
        cli.eal = eal
            .into_iter()
            .map(OsString::into_string)
            .collect::<Result<_, _>>()
            .map_err(|a| {
                Cli::command().error(
                    ErrorKind::InvalidUtf8,
                    format!("EAL argument {a:?} is not UTF-8"),
                )
            })?;
        // DPDK settings without a DPDK port are a mistake worth saying.
        if cli.dpdk_port.is_none() {
            let given = [
                (!cli.eal.is_empty(), "EAL arguments (before `--`)"),
                (cli.dpdk_idle.is_some(), "--dpdk-idle"),
                (cli.dpdk_promisc, "--dpdk-promisc"),
            ];
            if let Some((_, what)) = given.iter().find(|(given, _)| *given) {
                return Err(Cli::command().error(
                    ErrorKind::MissingRequiredArgument,
                    format!("{what}: only with --dpdk-port"),
                ));
            }
        }
    }
    Ok(cli)
}

fn main() -> ExitCode {
    let cli = parse_cli(std::env::args_os()).unwrap_or_else(|e| e.exit());
    match run(&cli) {
        Ok((summary, status)) => {
            if cli.json {
                println!(
                    "{}",
                    serde_json::to_string(&summary).expect("summary serialises")
                );
            } else {
                println!("{summary}");
            }
            ExitCode::from(status)
        }
        // Opening the link failed (the command line was fine: clap refused it otherwise, with
        // status 2): a device error, status 1 by the rule of docs/operations.md.
        Err(e) => {
            eprintln!("barrier-leaf: {e}");
            ExitCode::from(1)
        }
    }
}

/// Opens the link and runs the barriers. An error before the first barrier is returned; one
/// during the run ends it and is reported in the summary (with what completed until then).
/// Returns the summary and the exit status.
fn run(cli: &Cli) -> Result<(Summary, u8), Box<dyn std::error::Error>> {
    let cfg = Config {
        resend_timeout: Duration::from_micros(cli.resend_us.max(1)),
        wait_timeout: Duration::from_micros(cli.timeout_us),
        dst: cli.dst,
        first_seq: Seq(cli.first_seq),
        epoch: Epoch(cli.epoch),
        backoff: Backoff {
            max_ns: cli.resend_max_us.saturating_mul(1000),
            jitter_pct: cli.resend_jitter_pct,
        },
        timestamps: cli.timestamps,
        busy_poll: Duration::from_micros(cli.busy_poll_us),
        busy_poll_yield: cli.busy_poll_yield,
    };
    #[cfg(feature = "dpdk")]
    if let Some(name) = &cli.dpdk_port {
        let port = open_dpdk(cli, name)?;
        return Ok(run_barriers(
            cli,
            name,
            Session::new(port, cfg, &[cli.group])?,
        )?);
    }
    let iface = cli
        .iface
        .as_deref()
        .expect("clap requires --iface or --dpdk-port");
    if let Some(cpu) = cli.cpu {
        pin_to(cpu)?;
    }
    let sock = barrier_leaf::transport::af_packet(iface)?;
    if let Some(us) = cli.so_busy_poll_us {
        sock.set_busy_poll(us)
            .map_err(|e| format!("--so-busy-poll-us {us} on {iface}: {e}"))?;
    }
    let leaf = Session::new(sock, cfg, &[cli.group])?;
    Ok(run_barriers(cli, iface, leaf)?)
}

/// `--cpu N`: this thread on CPU N only (`barrier_runtime::affinity::pin_current`, through
/// `core_affinity`), or why not.
fn pin_to(cpu: usize) -> Result<(), String> {
    use barrier_runtime::affinity::{current_cpus, pin_current, CpuList};
    let mine = current_cpus();
    if pin_current(cpu) {
        return Ok(());
    }
    Err(match CpuList::from_cpus(mine) {
        Ok(may) => format!("--cpu {cpu}: this process may run on CPUs {may} only"),
        Err(_) => format!("--cpu {cpu}: the OS refused to pin this thread there"),
    })
}

/// Starts the EAL with the arguments before `--` and opens `name` as the leaf's port. The EAL
/// lives as long as the port (and the pool) holds it: it is cleaned up when the session drops.
#[cfg(feature = "dpdk")]
fn open_dpdk(cli: &Cli, name: &str) -> Result<barrier_leaf::DpdkPort, Box<dyn std::error::Error>> {
    use barrier_leaf::dpdk_transport::{DpdkOptions, DpdkPort, Idle};
    let args = std::iter::once("barrier-leaf".to_string()).chain(cli.eal.iter().cloned());
    let (eal, rest) = dpdk::Eal::init(args).map_err(|e| format!("EAL: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("unexpected arguments after the EAL arguments: {rest:?}").into());
    }
    // Enough for the RX descriptors a NIC fills at start, the TX ring and a burst; standard
    // data room, since a NIC's RX queue must hold any frame it may receive.
    let opts = DpdkOptions {
        idle: cli.dpdk_idle.map_or(Idle::Spin, Idle::with_defaults),
        promiscuous: cli.dpdk_promisc,
        ..DpdkOptions::default()
    };
    let mbufs = u32::from(opts.rx_desc) + u32::from(opts.tx_desc) + 1023;
    let pool =
        dpdk::Mempool::new_pktmbuf(&eal, "barrier_leaf", mbufs, 32, dpdk::MBUF_DEFAULT_BUF_SIZE)
            .map_err(|e| format!("mempool: {e}"))?;
    DpdkPort::open(&eal, name, &pool, &opts).map_err(|e| format!("DPDK port {name}: {e}").into())
}

/// The exit status of a run that a barrier's error ended.
fn exit_status(e: &barrier_leaf::Error) -> u8 {
    match e {
        barrier_leaf::Error::EpochInUse { .. } => EXIT_EPOCH_IN_USE,
        _ => 1,
    }
}

/// Runs `--count` barriers, or barriers for `--duration`, on `leaf` (whose link is called `link`
/// in the summary). Returns the summary and the exit status: 0 when every barrier completed (or
/// the duration ran out) and its record was written. A leaf that stops while it waits at a
/// barrier (a signal, or the duration's grace ran out) records that arrival as not released.
fn run_barriers<T: Transport>(
    cli: &Cli,
    link: &str,
    mut leaf: Session<T>,
) -> Result<(Summary, u8), barrier_leaf::Error> {
    // SIGINT/SIGTERM end the run between or during barriers; the summary and the records of
    // what completed are still written.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    leaf.set_interrupt_flag(Arc::clone(&stop));
    if let Some(path) = &cli.records {
        let durability = if cli.records_buffered {
            Durability::Buffered
        } else {
            Durability::PerRecord
        };
        leaf.set_record_sink(RecordSink::create_with(path, durability)?);
    }
    let mut lat = LatencyRecorder::default();
    let mut error = None;
    let mut status = 0;
    let mut left_waiting = None;
    let count = cli.count.unwrap_or(if cli.duration.is_some() {
        u64::MAX
    } else {
        1000
    });
    let timeout = Duration::from_micros(cli.timeout_us);
    let grace = Duration::from_millis(cli.duration_grace_ms);
    let start = Instant::now();
    let end = cli.duration.map(|d| start + d);
    let mut next_progress = start + Duration::from_secs(1);
    let mut i = 0u64;
    while i < count {
        if !cli.quiet && i > 0 && Instant::now() >= next_progress {
            next_progress += Duration::from_secs(1);
            let secs = start.elapsed().as_secs_f64();
            let of = cli.count.map_or_else(String::new, |n| format!("/{n}"));
            eprintln!(
                "barrier-leaf: group {}: {i}{of} barriers in {secs:.1} s ({:.0}/s)",
                cli.group,
                i as f64 / secs
            );
        }
        if i > 0 && cli.gap_us > 0 {
            std::thread::sleep(Duration::from_micros(cli.gap_us));
        }
        if stop.load(Ordering::Relaxed) {
            error = Some(format!("interrupted after {i} barriers"));
            status = 1;
            break;
        }
        // A timed run arrives only before its end, and waits at most the grace past it.
        let wait_for = match end {
            Some(end) => {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                timeout.min(end + grace - now)
            }
            None => timeout,
        };
        match leaf.wait_timeout(cli.group, wait_for) {
            Ok(rec) => lat.record(&rec),
            // The run's time is up while this leaf waits: the others may have stopped before
            // this barrier. Leave it, recorded as an arrival not released.
            Err(barrier_leaf::Error::Timeout { seq, .. })
                if end.is_some_and(|end| Instant::now() >= end) =>
            {
                leaf.record_waiting();
                left_waiting = Some(seq);
                break;
            }
            Err(e) => {
                if let barrier_leaf::Error::Interrupted { seq, .. } = &e {
                    // Stopped while waiting: the arrival is a fact a checker uses.
                    leaf.record_waiting();
                    left_waiting = Some(*seq);
                }
                error = Some(e.to_string());
                status = exit_status(&e);
                eprintln!("barrier-leaf: {e}");
                break;
            }
        }
        i += 1;
    }
    let elapsed = start.elapsed();
    if let Err(e) = leaf.flush_records() {
        error.get_or_insert(format!("writing records: {e}"));
        status = status.max(1);
    }
    let mut summary = Summary::new(
        link,
        cli.group,
        cli.count
            .unwrap_or(if cli.duration.is_some() { 0 } else { 1000 }),
        cli.first_seq,
        elapsed,
        &lat,
        leaf.stats(),
        error,
    );
    summary.duration_s = cli.duration.map(|d| d.as_secs_f64());
    summary.left_waiting_seq = left_waiting;
    Ok((summary, status))
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
        assert_eq!(
            (c.iface.as_deref(), c.group, c.count),
            (Some("veth0"), 7, Some(5))
        );
        assert_eq!(
            (c.duration, c.busy_poll_us, c.so_busy_poll_us),
            (None, 0, None)
        );
        let c = Cli::try_parse_from(["barrier-leaf", "-i", "a", "-g", "1", "--duration", "1.5"])
            .unwrap();
        assert_eq!(c.duration, Some(Duration::from_millis(1500)));
        assert_eq!((c.count, c.duration_grace_ms), (None, 100));
        assert_eq!(
            (c.timeout_us, c.resend_us, c.first_seq),
            (10_000_000, 1_000, 0)
        );
        assert_eq!(c.dst, MacAddr::BROADCAST);
        assert!(!c.json && c.records.is_none() && !c.quiet);
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
    fn an_epoch_in_use_has_its_own_exit_status() {
        use barrier_leaf::Error;
        let in_use = Error::EpochInUse {
            group: 7,
            epoch: 1,
            seq: 0,
            answered: 9,
        };
        assert_eq!(exit_status(&in_use), 3);
        let timeout = Error::Timeout {
            group: 7,
            seq: 0,
            waited: Duration::from_secs(1),
            resends: 3,
        };
        let aborted = Error::Aborted {
            group: 7,
            seq: 0,
            switch: MacAddr::BROADCAST,
            port: 1,
        };
        for other in [timeout, aborted, Error::Interrupted { group: 7, seq: 0 }] {
            assert_eq!(exit_status(&other), 1, "{other}");
        }
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

    #[test]
    fn eal_arguments_are_the_ones_before_the_double_dash() {
        let os = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        // DPDK's convention: program [EAL args] -- [program args]
        assert_eq!(
            split_eal(os(&["barrier-leaf", "-l", "2", "--", "-g", "7", "--json"])).unwrap(),
            (os(&["barrier-leaf", "-g", "7", "--json"]), os(&["-l", "2"]))
        );
        // only the first `--` splits
        assert_eq!(
            split_eal(os(&["barrier-leaf", "--", "-g", "7", "--"])).unwrap(),
            (os(&["barrier-leaf", "-g", "7", "--"]), os(&[]))
        );
        // no `--`: everything is the leaf's (AF_PACKET, no EAL)
        assert_eq!(
            split_eal(os(&["barrier-leaf", "-i", "eth0", "-g", "7"])).unwrap(),
            (os(&["barrier-leaf", "-i", "eth0", "-g", "7"]), os(&[]))
        );
        let c = parse_cli(["barrier-leaf", "--", "-i", "eth0", "-g", "7"]).unwrap();
        assert_eq!((c.iface.as_deref(), c.group), (Some("eth0"), 7));
    }

    #[cfg(feature = "dpdk")]
    #[test]
    fn dpdk_port_takes_eal_arguments_before_the_double_dash() {
        let c = parse_cli([
            "barrier-leaf",
            "-l",
            "2",
            "--vdev=net_af_packet0,iface=eth1",
            "--no-huge",
            "--",
            "--dpdk-port",
            "net_af_packet0",
            "-g",
            "7",
            "--dpdk-idle",
            "yield",
        ])
        .unwrap();
        assert_eq!(c.dpdk_port.as_deref(), Some("net_af_packet0"));
        assert_eq!(c.iface, None);
        assert_eq!(c.dpdk_idle, Some(barrier_runtime::poll::IdleMode::Yield));
        assert!(!c.dpdk_promisc);
        assert_eq!(
            c.eal,
            ["-l", "2", "--vdev=net_af_packet0,iface=eth1", "--no-huge"]
        );
        // no `--`: EAL starts with no arguments (its defaults)
        let c = parse_cli(["barrier-leaf", "--dpdk-port", "0000:01:00.0", "-g", "7"]).unwrap();
        assert_eq!(c.dpdk_port.as_deref(), Some("0000:01:00.0"));
        assert!(c.eal.is_empty());
        let c = parse_cli(["barrier-leaf", "-i", "eth0", "-g", "1"]).unwrap();
        assert_eq!((c.dpdk_port, c.dpdk_idle), (None, None));
        assert!(c.eal.is_empty());
    }

    #[cfg(feature = "dpdk")]
    #[test]
    fn the_old_order_is_refused_with_the_new_one_in_the_message() {
        // `barrier-leaf [options] -- [EAL args]`, the order before DPDK's convention
        for old in [
            &["--dpdk-port", "p", "-g", "7", "--", "-l", "2"][..],
            &["-g", "7", "--dpdk-port=p", "--", "--no-huge"],
        ] {
            let e = parse_cli(std::iter::once(&"barrier-leaf").chain(old)).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{old:?}");
            let msg = e.to_string();
            assert!(msg.contains("is barrier-leaf's option, not EAL's"), "{msg}");
            assert!(msg.contains("[EAL ARGS] -- --dpdk-port NAME"), "{msg}");
        }
    }

    #[cfg(not(feature = "dpdk"))]
    #[test]
    fn without_dpdk_eal_arguments_are_refused() {
        let e =
            parse_cli(["barrier-leaf", "--no-huge", "--", "-i", "eth0", "-g", "1"]).unwrap_err();
        assert!(e.to_string().contains("without DPDK"), "{e}");
        assert!(parse_cli(["barrier-leaf", "--", "-i", "eth0", "-g", "1"]).is_ok());
    }

    #[cfg(feature = "dpdk")]
    #[test]
    fn exactly_one_link_and_dpdk_flags_only_with_a_dpdk_port() {
        // EAL part, then the leaf's options after `--`
        let parse = |eal: &[&str], args: &[&str]| {
            let argv = std::iter::once(&"barrier-leaf")
                .chain(eal)
                .chain(&["--", "-g", "1"])
                .chain(args);
            parse_cli(argv).map(|_| ()).map_err(|e| e.kind())
        };
        use clap::error::ErrorKind;
        assert_eq!(parse(&[], &[]), Err(ErrorKind::MissingRequiredArgument));
        assert_eq!(
            parse(&[], &["-i", "eth0", "--dpdk-port", "net_ring0"]),
            Err(ErrorKind::ArgumentConflict)
        );
        for (eal, bad) in [
            (&["--no-huge"][..], &["-i", "eth0"][..]),
            (&[], &["-i", "eth0", "--dpdk-idle", "yield"]),
            (&[], &["-i", "eth0", "--dpdk-promisc"]),
        ] {
            assert_eq!(
                parse(eal, bad),
                Err(ErrorKind::MissingRequiredArgument),
                "{eal:?} -- {bad:?}"
            );
        }
        assert!(parse(&[], &["--dpdk-port", "p", "--dpdk-idle", "nap"]).is_err());
        assert_eq!(
            parse(&[], &["--dpdk-port", "p", "--dpdk-idle", "sleep"]),
            Ok(())
        );
        assert_eq!(
            parse(&["-l", "1"], &["--dpdk-port", "p", "--dpdk-promisc"]),
            Ok(())
        );
        // --cpu places the AF_PACKET leaf's thread; a DPDK leaf's is placed by EAL's -l.
        assert_eq!(parse(&[], &["-i", "eth0", "--cpu", "1"]), Ok(()));
        assert_eq!(
            parse(&[], &["--dpdk-port", "p", "--cpu", "1"]),
            Err(ErrorKind::ArgumentConflict)
        );
        assert!(parse(&[], &["-i", "eth0", "--cpu", "x"]).is_err());
        // Busy polling is the AF_PACKET wait's; a DPDK port polls anyway.
        assert_eq!(parse(&[], &["-i", "eth0", "--busy-poll-us", "20"]), Ok(()));
        assert_eq!(
            parse(
                &[],
                &["-i", "eth0", "--busy-poll-us", "20", "--busy-poll-yield"]
            ),
            Ok(())
        );
        assert_eq!(
            parse(&[], &["-i", "eth0", "--busy-poll-yield"]),
            Err(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            parse(&[], &["-i", "eth0", "--so-busy-poll-us", "50"]),
            Ok(())
        );
        for flag in ["--busy-poll-us", "--so-busy-poll-us"] {
            assert_eq!(
                parse(&[], &["--dpdk-port", "p", flag, "5"]),
                Err(ErrorKind::ArgumentConflict),
                "{flag}"
            );
        }
        // --duration: positive seconds; its grace only with it.
        assert_eq!(parse(&[], &["-i", "eth0", "--duration", "2.5"]), Ok(()));
        for bad in ["0", "-1", "x", "inf"] {
            assert!(
                parse(&[], &["-i", "eth0", "--duration", bad]).is_err(),
                "{bad}"
            );
        }
        assert_eq!(
            parse(&[], &["-i", "eth0", "--duration-grace-ms", "5"]),
            Err(ErrorKind::MissingRequiredArgument)
        );
    }

    #[test]
    fn pinning_to_a_cpu_the_process_may_not_use_is_refused() {
        std::thread::spawn(|| {
            let msg = pin_to(barrier_runtime::affinity::MAX_CPUS - 1).unwrap_err();
            assert!(msg.starts_with("--cpu 1023: "), "{msg}");
            let mine = barrier_runtime::affinity::current_cpus();
            if let Some(&cpu) = mine.first() {
                assert_eq!(pin_to(cpu), Ok(()));
                assert_eq!(barrier_runtime::affinity::current_cpus(), [cpu]);
            }
        })
        .join()
        .unwrap();
    }
}
