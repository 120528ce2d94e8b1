//! Several CPUs at once: six threads, one per child port, run the program on their reduces at
//! the same time (BPF_PROG_TEST_RUN runs on the calling thread's CPU), each twice per barrier.
//! The group's spin lock must record every arrival once: exactly one completion per barrier,
//! every second copy a duplicate (or stale, once the barrier completed), the state at the next barrier. Needs root: skipped
//! otherwise, failed under `NB_REQUIRE_ROOT=1`.

mod common;

use std::sync::Barrier;

use barrier_protocol::switch::{Event, GroupConfig, Phase};
use barrier_protocol::{GroupId, PortIdx, PortSet, Seq};
use barrier_xdp::SWITCH_OBJECT;

#[test]
fn concurrent_reduces_complete_each_barrier_exactly_once() {
    let Some(bed) = common::bed("concurrent_reduces_complete_each_barrier_exactly_once") else {
        return;
    };
    const ROUNDS: u32 = 300;
    let group = GroupId(11);
    let (sw, ifindexes) = barrier_bpf::in_netns(&bed.netns, || {
        let (mut sw, ifindexes) = common::switch_on(&bed, SWITCH_OBJECT);
        let cfg = GroupConfig::root(PortSet((1 << common::PORTS) - 1));
        sw.configure(group, &cfg).expect("configure");
        (sw, ifindexes)
    })
    .expect("enter the namespace");
    let cfg = GroupConfig::root(PortSet((1 << common::PORTS) - 1));
    let start = Barrier::new(common::PORTS);
    let done = Barrier::new(common::PORTS);
    std::thread::scope(|s| {
        for port in 0..common::PORTS {
            let (sw, ifindexes, start, done, bed) = (&sw, &ifindexes, &start, &done, &bed);
            s.spawn(move || {
                barrier_bpf::in_netns(&bed.netns, || {
                    for round in 0..ROUNDS {
                        start.wait();
                        let ev = Event::Reduce {
                            port: PortIdx::new(port as u8).expect("port"),
                            epoch: cfg.epoch,
                            seq: Seq(round),
                        };
                        let frame = common::frame_for(group, ev, false);
                        for _ in 0..2 {
                            sw.run_frame(&frame, ifindexes[port]).expect("test run");
                        }
                        done.wait();
                        if port == 0 {
                            let st = sw.state(group).expect("state").expect("configured");
                            assert_eq!(
                                (st.seq, st.phase),
                                (Seq(round + 1), Phase::Collecting),
                                "after barrier {round}"
                            );
                        }
                    }
                })
                .expect("enter the namespace");
            });
        }
    });
    let c = sw.counters().expect("counters");
    assert_eq!(c.get("completions"), Some(u64::from(ROUNDS)));
    // A second copy is a duplicate, or, when the barrier completed between a thread's two
    // copies, a stale reduce (answered with the release).
    assert_eq!(
        c.get("duplicates").unwrap_or(0) + c.get("stale_reduce").unwrap_or(0),
        u64::from(ROUNDS) * common::PORTS as u64
    );
    assert_eq!(
        c.get("recorded"),
        Some(u64::from(ROUNDS) * (common::PORTS as u64 - 1))
    );
}
