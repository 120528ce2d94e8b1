//! The group map at full size: 2^20 groups (every group number the wire format allows) load
//! and the last one configures and reads back. Needs root: skipped otherwise, failed under
//! `NB_REQUIRE_ROOT=1`.

mod common;

use barrier_protocol::switch::{GroupConfig, GroupState};
use barrier_protocol::{GroupId, PortIdx, PortSet, MAX_GROUPS};
use barrier_xdp::{XdpSwitch, GROUP_SLOT_BYTES};

#[test]
fn a_million_groups_load() {
    let Some(bed) = common::bed("a_million_groups_load") else {
        return;
    };
    barrier_bpf::in_netns(&bed.netns, || {
        let mut sw = XdpSwitch::load(MAX_GROUPS).expect("load with 2^20 groups");
        for (i, name) in common::port_names(&bed).iter().enumerate() {
            let ifindex = barrier_bpf::ifindex(name).expect("ifindex");
            sw.add_port(PortIdx::new(i as u8).expect("port"), ifindex)
                .expect("add port");
        }
        let last = GroupId(MAX_GROUPS - 1);
        sw.configure(last, &GroupConfig::root(PortSet(0b11)))
            .expect("configure the last group");
        assert_eq!(sw.state(last).expect("state"), Some(GroupState::fresh()));
        eprintln!(
            "nb_groups: {} groups x {} bytes = {} MiB",
            MAX_GROUPS,
            GROUP_SLOT_BYTES,
            (MAX_GROUPS as usize * GROUP_SLOT_BYTES) >> 20
        );
    })
    .expect("enter the namespace");
}
