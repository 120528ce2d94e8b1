//! End-to-end on DPDK net_ring wires (own process, own EAL): 1-level tree, 1000 groups at once, 10,000 barriers each (10 million in all).
mod common;

#[test]
fn completes_every_barrier_exactly_once() {
    common::run_tree(&[4], 1000, 10_000);
}
