//! The group map at full size: 2^20 groups (every group number the wire format allows) load
//! and the last one configures and reads back; port-set slots churned past their number are
//! freed and reused. Needs root: skipped otherwise, failed under
//! `NB_REQUIRE_ROOT=1`.

mod common;

use barrier_protocol::switch::{Event, GroupConfig, GroupState};
use barrier_protocol::{GroupId, PortIdx, PortSet, Seq, MAX_GROUPS};
use barrier_xdp::{Egress, XdpSwitch, GROUP_SLOT_BYTES, MAX_PORT_SETS};

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
        let cfg = GroupConfig::root(PortSet(0b11));
        sw.configure(last, &cfg).expect("configure the last group");
        assert_eq!(sw.state(last).expect("state"), Some(GroupState::fresh()));

        // Every group's counts at once (what `barrierctl stats` sums): the last group's one
        // barrier and group 5's two, found where a lookup per group finds them.
        let ifindexes: Vec<u32> = common::port_names(&bed)
            .iter()
            .map(|n| barrier_bpf::ifindex(n).expect("ifindex"))
            .collect();
        sw.configure(GroupId(5), &cfg).expect("configure group 5");
        for (group, barriers) in [(last, 1), (GroupId(5), 2)] {
            for seq in 0..barriers {
                for (p, &ifindex) in ifindexes.iter().enumerate().take(2) {
                    let ev = Event::Reduce {
                        port: PortIdx::new(p as u8).expect("port"),
                        epoch: cfg.epoch,
                        seq: Seq(seq),
                    };
                    sw.run_frame(&common::frame_for(group, ev, false), ifindex)
                        .expect("run");
                }
            }
        }
        let t = std::time::Instant::now();
        let all = sw.all_group_counts().expect("all counts");
        let batched = t.elapsed();
        assert_eq!(all.len(), MAX_GROUPS as usize);
        assert_eq!(all[last.0 as usize].completions, 1);
        assert_eq!(all[5].completions, 2);
        let t = std::time::Instant::now();
        let each: Vec<_> = (0..MAX_GROUPS)
            .map(|n| sw.group_counts(GroupId(n)).expect("counts"))
            .collect();
        let one_by_one = t.elapsed();
        if let Some(n) = (0..all.len()).find(|&n| all[n] != each[n]) {
            panic!("group {n}: batch {:?}, lookup {:?}", all[n], each[n]);
        }
        assert_eq!(all.iter().map(|c| c.completions).sum::<u32>(), 3);
        // Both read in this run, one after the other: their ratio is the figure.
        eprintln!(
            "counts of {MAX_GROUPS} groups: {batched:?} in batches of 1,024, {one_by_one:?} a \
             lookup each: {:.1}x",
            one_by_one.as_secs_f64() / batched.as_secs_f64()
        );
        eprintln!(
            "nb_groups: {} groups x {} bytes = {} MiB",
            MAX_GROUPS,
            GROUP_SLOT_BYTES,
            (MAX_GROUPS as usize * GROUP_SLOT_BYTES) >> 20
        );
    })
    .expect("enter the namespace");
}

/// Port-set slots are freed with their last group: four groups reconfigured again and again,
/// each time over a port set no group had before, pass `MAX_PORT_SETS` distinct sets (before
/// the slots were counted, the 1,025th was refused; the last 100 take the slots of sets idle
/// longest); removing the groups leaves no set in use; a set two groups share stays while one
/// of them has it, and its broadcast still reaches exactly its ports; the frames sent through
/// a set stay in its ports' totals when it goes idle and when its slot is reclaimed.
#[test]
fn port_set_slots_are_freed_with_their_last_group() {
    let Some(bed) = common::bed("port_set_slots_are_freed_with_their_last_group") else {
        return;
    };
    barrier_bpf::in_netns(&bed.netns, || {
        let (mut sw, ifindexes) = common::switch_on(&bed, barrier_xdp::SWITCH_OBJECT);
        // Ports 6..11 on the same interfaces as 0..5 (a port set needs an interface per port),
        // then 0..5 again, so that a frame on an interface is port 0..5's.
        let port = |i: usize| PortIdx::new(i as u8).expect("port");
        for i in (6..12).chain(0..6) {
            sw.add_port(port(i), ifindexes[i % ifindexes.len()])
                .expect("add port");
        }
        let distinct = MAX_PORT_SETS as u64 + 100;
        for k in 1..=distinct {
            // Every k a set of its own: children = the bits of k over ports 0..11.
            let g = GroupId((k % 4) as u32);
            sw.configure(g, &GroupConfig::root(PortSet(k)))
                .unwrap_or_else(|e| panic!("set {k} of {distinct}: {e}"));
            assert!(
                sw.port_sets_in_use() <= 4,
                "{} in use",
                sw.port_sets_in_use()
            );
            assert!(sw.port_sets_published() <= MAX_PORT_SETS as usize);
        }
        for g in 0..4 {
            sw.remove(GroupId(g)).expect("remove");
        }
        assert_eq!(sw.port_sets_in_use(), 0);

        // Two groups share {0, 1}; one goes; the other's release still reaches both ports.
        let pair = PortSet::single(port(0)).union(PortSet::single(port(1)));
        let cfg = GroupConfig::root(pair);
        sw.configure(GroupId(10), &cfg).expect("configure 10");
        sw.configure(GroupId(11), &cfg).expect("configure 11");
        sw.remove(GroupId(10)).expect("remove 10");
        assert_eq!(sw.port_sets_in_use(), 1);
        for p in [0usize, 1] {
            let frame = common::frame_for(
                GroupId(11),
                Event::Reduce {
                    port: port(p),
                    epoch: cfg.epoch,
                    seq: Seq(0),
                },
                false,
            );
            sw.clear_last_decision().expect("clear");
            sw.run_frame(&frame, ifindexes[p]).expect("run");
        }
        let last = sw.last_decision().expect("read").expect("a decision");
        let Egress::Set { slot, .. } = last.egress else {
            panic!("the completion went to {:?}", last.egress)
        };
        assert_eq!(sw.port_set_of_slot(slot), Some(pair));
        let released = |sw: &XdpSwitch| -> Vec<u64> {
            sw.sent()
                .expect("sent")
                .iter()
                .filter(|(p, _)| p.get() < 2)
                .map(|(_, c)| c[2])
                .collect()
        };
        assert_eq!(released(&sw), [1, 1]);
        sw.remove(GroupId(11)).expect("remove 11");
        assert_eq!(sw.port_sets_in_use(), 0);
        assert_eq!(
            released(&sw),
            [1, 1],
            "the idle set's frames left the totals"
        );
        let reclaimed = sw.reclaim_idle_port_sets().expect("reclaim");
        assert!(reclaimed >= 1, "{reclaimed}");
        assert_eq!(sw.port_sets_published(), 0);
        assert_eq!(
            released(&sw),
            [1, 1],
            "the reclaimed slot's frames left the totals"
        );
    })
    .expect("enter the namespace");
}
