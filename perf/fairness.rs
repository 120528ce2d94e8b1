//! Fairness benchmark (`cargo bench -p barrier-testbed --bench fairness [-- SECONDS]`): the slow
//! group's barrier latency next to a flooding group, as a ratio to its latency alone, measured
//! in the same run on the same tree (root, 2 intermediates, 8 leaves on net_ring wires, two
//! busy lcores). Needs root (DPDK). The method's promise is a small factor; see
//! perf/fairness.md for what was measured and how to read it.

use barrier_testbed::demo_dpdk::demo_eal_args;
use barrier_testbed::fairness::{run_fairness, FairnessOpts};
use std::time::Duration;

fn main() {
    // `cargo bench` passes `--bench`; a number is the phase length in seconds.
    let secs = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<f64>().ok())
        .unwrap_or(3.0);
    let opts = FairnessOpts {
        duration: Duration::from_secs_f64(secs),
        ..FairnessOpts::default()
    };
    let (eal, _) = match dpdk::Eal::init(demo_eal_args(opts.loops, &[])) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("fairness: EAL: {e} (DPDK needs root)");
            std::process::exit(1);
        }
    };
    println!(
        "fairness: tree {:?}, slow group pauses {} µs between barriers, flooding group sends each reduce {}x back to back, {secs} s per phase",
        opts.fanout,
        opts.slow_think_ns / 1000,
        opts.flood_copies
    );
    match run_fairness(&eal, &opts) {
        Ok(r) => print!("{}", r.summary()),
        Err(e) => {
            eprintln!("fairness: {e}");
            std::process::exit(1);
        }
    }
}
