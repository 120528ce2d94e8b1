//! The fairness benchmark (perf/fairness.rs) runs to completion with short phases. No timing is
//! asserted: speed is the benchmark's business, and a loaded test machine would make it flaky.

use barrier_testbed::demo_dpdk::demo_eal_args;
use barrier_testbed::fairness::{run_fairness, FairnessOpts};
use std::time::Duration;

#[test]
fn fairness_benchmark_completes() {
    let opts = FairnessOpts {
        duration: Duration::from_millis(800),
        ..FairnessOpts::default()
    };
    let (eal, _) = dpdk::Eal::init(demo_eal_args(opts.loops, &[])).unwrap();
    let r = run_fairness(&eal, &opts).unwrap();
    print!("{}", r.summary());
    assert!(
        !r.alone.slow.is_empty(),
        "slow group made no progress alone"
    );
    assert!(
        !r.flooded.slow.is_empty(),
        "slow group made no progress next to the flood"
    );
    assert_eq!(
        r.alone.flood_barriers, 0,
        "the flooding group is idle in the first phase"
    );
    assert!(
        r.flooded.flood_barriers > 0,
        "the flooding group made no progress"
    );
    assert!(r.ratio(0.5).is_finite());
}
