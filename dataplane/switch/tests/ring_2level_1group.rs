//! End-to-end on DPDK net_ring wires (own process, own EAL): 2-level tree, 1 group.
mod common;

#[test]
fn completes_every_barrier_exactly_once() {
    common::run_tree(&[2, 4], 1, 10_000);
}
