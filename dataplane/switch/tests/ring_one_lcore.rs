//! The reduced machine: every switch of a 2-level tree and all the leaves as pollers on one
//! lcore (`--lcores 1`), on net_ring wires, still completing every barrier exactly once.
mod common;

#[test]
fn whole_tree_on_one_lcore() {
    common::run_tree_on(&[2, 2], 10, 500, 1);
}
