//! barrier-linkemu: a link emulator in the middle of a link. Two DPDK ports (by default
//! net_af_packet on two interfaces, e.g. the veth ends of a namespace put between a switch and
//! its child); every frame received on one is sent on the other after the delay, jitter and
//! reordering of `barrier_testbed::linkemu::DelayLine`. Counters per direction at exit (SIGINT,
//! SIGTERM), as text on stdout and with --stats-json as JSON. docs/faults.md describes it.

use barrier_testbed::linkemu::{DelayLine, LineCounters, LinkShape};
use clap::Parser;
use dpdk::{Eal, Mbuf, MbufBatch, Mempool, Port, QueueId};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Delay, jitter and reordering between two interfaces.
#[derive(Parser, Debug)]
#[command(name = "barrier-linkemu", version)]
struct Cli {
    /// The first interface (net_af_packet on it), e.g. the veth end towards the parent.
    #[arg(long)]
    a: String,
    /// The second interface, e.g. the veth end towards the child.
    #[arg(long)]
    b: String,
    /// One-way delay, µs, each direction.
    #[arg(long, default_value_t = 0)]
    delay_us: u64,
    /// Uniform jitter of ± this many µs around the delay (a frame never leaves before it came).
    #[arg(long, default_value_t = 0)]
    jitter_us: u64,
    /// Probability (0 to 1) that a frame is held back --reorder-extra-us longer, so that the
    /// frames behind it overtake it.
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// How much longer a held-back frame waits, µs.
    #[arg(long, default_value_t = 500)]
    reorder_extra_us: u64,
    /// Frames each direction's queue holds at most (more are dropped and counted).
    #[arg(long, default_value_t = 4096)]
    queue: usize,
    /// Seed of the random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// At exit, also write the counters as JSON to this file.
    #[arg(long)]
    stats_json: Option<PathBuf>,
    /// EAL arguments (after --) [default: --no-huge -m 128 --no-shconf --no-pci
    /// --iova-mode=va --no-telemetry --file-prefix linkemu-<pid> -l 0].
    #[arg(last = true)]
    eal: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("barrier-linkemu: {e}");
            ExitCode::FAILURE
        }
    }
}

fn shape(cli: &Cli) -> Result<LinkShape, String> {
    if !(0.0..=1.0).contains(&cli.reorder) {
        return Err(format!(
            "--reorder {} is not a probability in [0, 1]",
            cli.reorder
        ));
    }
    if cli.queue == 0 {
        return Err("--queue must be at least 1".into());
    }
    Ok(LinkShape {
        delay_ns: cli.delay_us * 1000,
        jitter_ns: cli.jitter_us * 1000,
        reorder: cli.reorder,
        reorder_extra_ns: cli.reorder_extra_us * 1000,
        capacity: cli.queue,
    })
}

fn open(eal: &Eal, n: usize, iface: &str, pool: &Mempool) -> Result<Port, String> {
    // qdisc_bypass=0: frames go out through the qdisc layer, so tc programs (the eBPF faults)
    // on these interfaces see them, as they see the switches'.
    let spec = format!("net_af_packet{n},iface={iface},qdisc_bypass=0");
    let mut p = Port::attach_vdev(eal, &spec).map_err(|e| format!("port {iface}: {e}"))?;
    p.configure(1, 1, 512, 512, pool)
        .map_err(|e| format!("port {iface}: {e}"))?;
    p.start().map_err(|e| format!("port {iface}: {e}"))?;
    let _ = p.set_promiscuous(true);
    p.discard_received()
        .map_err(|e| format!("port {iface}: {e}"))?;
    Ok(p)
}

/// Per direction: the line and the frames the driver refused.
struct Dir {
    line: DelayLine<Mbuf>,
    tx_refused: u64,
}

fn run(cli: &Cli) -> Result<(), String> {
    let shape = shape(cli)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).map_err(|e| format!("signals: {e}"))?;
    }
    let mut args = vec!["barrier-linkemu".to_string()];
    if cli.eal.is_empty() {
        args.extend(
            [
                "--no-huge",
                "-m",
                "128",
                "--no-shconf",
                "--no-pci",
                "--iova-mode=va",
                "--no-telemetry",
                "--log-level=*:warning",
                "-l",
                "0",
                "--file-prefix",
            ]
            .map(String::from),
        );
        args.push(format!("linkemu-{}", std::process::id()));
    } else {
        args.extend(cli.eal.iter().cloned());
    }
    let (eal, rest) = Eal::init(args).map_err(|e| format!("EAL: {e}"))?;
    if !rest.is_empty() {
        return Err(format!(
            "unexpected arguments after the EAL arguments: {rest:?}"
        ));
    }
    let mbufs = (2 * cli.queue + 2048).next_power_of_two() as u32 - 1;
    let pool = Mempool::new_pktmbuf(&eal, "linkemu", mbufs, 64, dpdk::MBUF_DEFAULT_BUF_SIZE)
        .map_err(|e| format!("mempool: {e}"))?;
    let mut ports = [open(&eal, 0, &cli.a, &pool)?, open(&eal, 1, &cli.b, &pool)?];
    // dirs[0]: a -> b, dirs[1]: b -> a.
    let mut dirs = [
        Dir {
            line: DelayLine::new(shape, cli.seed),
            tx_refused: 0,
        },
        Dir {
            line: DelayLine::new(shape, cli.seed ^ 0x9e37_79b9_7f4a_7c15),
            tx_refused: 0,
        },
    ];
    eprintln!(
        "barrier-linkemu: ready: {} <-> {}: delay {} µs, jitter ±{} µs, reorder {} (+{} µs), queue {}",
        cli.a, cli.b, cli.delay_us, cli.jitter_us, cli.reorder, cli.reorder_extra_us, cli.queue
    );
    let start = Instant::now();
    let now = || start.elapsed().as_nanos() as u64;
    let q = QueueId(0);
    let mut rx: MbufBatch = MbufBatch::default();
    let mut tx: MbufBatch = MbufBatch::default();
    while !stop.load(Ordering::Relaxed) {
        let mut busy = false;
        for (from, dir) in [(0usize, 0usize), (1, 1)] {
            if ports[from].rx_burst(q, &mut rx) > 0 {
                busy = true;
                let t = now();
                for m in rx.drain() {
                    // A full queue hands the frame back: dropped here (the mbuf is freed).
                    drop(dirs[dir].line.push(t, m));
                }
            }
        }
        for (dir, to) in [(0usize, 1usize), (1, 0)] {
            let t = now();
            while !tx.is_full() {
                match dirs[dir].line.pop_due(t) {
                    Some(m) => {
                        let _ = tx.push(m);
                    }
                    None => break,
                }
            }
            if !tx.is_empty() {
                busy = true;
                ports[to].tx_burst(q, &mut tx);
                // What the driver did not take is dropped, as a full NIC queue would.
                dirs[dir].tx_refused += tx.len() as u64;
                tx.clear();
            }
        }
        if !busy {
            // Sleep until the next departure, at most 50 µs (frames may arrive meanwhile): two
            // shared cores cannot spare one for a spinning emulator.
            let t = now();
            let next = dirs
                .iter()
                .filter_map(|d| d.line.next_due())
                .min()
                .map_or(50_000, |d| d.saturating_sub(t).min(50_000));
            if next > 0 {
                std::thread::sleep(Duration::from_nanos(next));
            }
        }
    }
    let counters: Vec<(String, LineCounters, u64, usize)> = [
        format!("{}->{}", cli.a, cli.b),
        format!("{}->{}", cli.b, cli.a),
    ]
    .into_iter()
    .zip(dirs.iter_mut())
    .map(|(name, d)| {
        let left = d.line.drain();
        (name, d.line.counters(), d.tx_refused, left)
    })
    .collect();
    let mut json = serde_json::Map::new();
    for (name, c, refused, left) in &counters {
        let mean = c.sum_delay_ns.checked_div(c.departed).unwrap_or(0);
        println!(
            "{name}: arrived {} departed {} reordered {} held_back {} dropped_full {} tx_refused {refused} left_at_exit {left}; delay min {:.1} mean {:.1} max {:.1} µs; sent late by mean {:.1} max {:.1} µs",
            c.arrived,
            c.departed,
            c.reordered,
            c.held_back,
            c.dropped_full,
            c.min_delay_ns as f64 / 1e3,
            mean as f64 / 1e3,
            c.max_delay_ns as f64 / 1e3,
            c.sum_late_ns.checked_div(c.departed).unwrap_or(0) as f64 / 1e3,
            c.max_late_ns as f64 / 1e3,
        );
        let mut v = serde_json::to_value(c).map_err(|e| e.to_string())?;
        v["tx_refused"] = (*refused).into();
        v["left_at_exit"] = (*left).into();
        json.insert(name.clone(), v);
    }
    if let Some(path) = &cli.stats_json {
        std::fs::write(path, serde_json::Value::Object(json).to_string() + "\n")
            .map_err(|e| format!("--stats-json {}: {e}", path.display()))?;
    }
    for p in &mut ports {
        let _ = p.stop();
    }
    for p in ports {
        let _ = p.close();
    }
    Ok(())
}
