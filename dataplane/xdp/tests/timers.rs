//! The timer side on live frames: the XDP switch attached natively to veth ports in a
//! throw-away namespace, its `TimerSide` polled by the test, the frames it sends going out of
//! packet sockets on the switch ports. An intermediate whose parent ignores the first reduce
//! re-sends it (claim 3) until the release comes; a root whose child never reports declares it
//! failed at the deadline and aborts the group (the aborts seen on every member's link). Needs
//! root: skipped otherwise, failed under `NB_REQUIRE_ROOT=1`.

mod common;

use std::time::{Duration, Instant};

use barrier_bpf::{XdpAttachment, XdpMode};
use barrier_protocol::switch::{Event, Failure, GroupConfig, Phase};
use barrier_protocol::wire::{Flags, FrameRepr, Kind, ETHERTYPE};
use barrier_protocol::{Epoch, GroupId, PortIdx, PortSet, Seq};
use barrier_testbed::netns::VethNetns;
use barrier_xdp::timers::{PacketPorts, TimerSide};
use barrier_xdp::{XdpSwitch, SWITCH_OBJECT};
use rawsock::RawSocket;

fn p(i: u8) -> PortIdx {
    PortIdx::new(i).expect("port")
}

fn now_ns() -> u64 {
    rawsock::monotonic_now().as_nanos() as u64
}

/// The switch on the `a` ends (ports 0, 2, 4), the pass program on the `b` ends, the timer
/// side with packet sockets on the switch ports, and a raw socket on each `b` end.
struct Bed {
    sw: XdpSwitch,
    side: TimerSide,
    tx: PacketPorts,
    far: Vec<RawSocket>,
    _attached: Vec<XdpAttachment>,
}

fn bed_on(bed: &VethNetns) -> Bed {
    let names = common::port_names(bed);
    let (sw, ifindexes) = common::switch_on(bed, SWITCH_OBJECT);
    let mut attached = Vec::new();
    for i in [0usize, 2, 4] {
        attached.push(sw.attach(ifindexes[i], XdpMode::Native).expect("attach"));
        attached.push(
            sw.attach_pass(ifindexes[i + 1])
                .expect("attach the pass program"),
        );
    }
    let tx = PacketPorts::open(&[
        (p(0), names[0].as_str()),
        (p(2), names[2].as_str()),
        (p(4), names[4].as_str()),
    ])
    .expect("packet sockets on the switch ports");
    let far = [1usize, 3, 5]
        .iter()
        .map(|&i| RawSocket::open(&names[i], ETHERTYPE).expect("far-end socket"))
        .collect();
    let side = TimerSide::new(&sw, now_ns()).expect("timer side");
    Bed {
        sw,
        side,
        tx,
        far,
        _attached: attached,
    }
}

impl Bed {
    /// The next frame from the switch on far end `i` within `timeout` that `want` accepts,
    /// polling the timer side meanwhile (as a daemon's loop would).
    fn wait(
        &mut self,
        i: usize,
        timeout: Duration,
        want: impl Fn(&FrameRepr) -> bool,
    ) -> Option<FrameRepr> {
        let end = Instant::now() + timeout;
        let mut buf = [0u8; 2048];
        while Instant::now() < end {
            self.side
                .poll(&self.sw, &mut self.tx, now_ns())
                .expect("timer side");
            if let Ok(Some(n)) = self.far[i].recv(&mut buf, Some(Duration::from_millis(1))) {
                if let Ok(f) = FrameRepr::parse(&buf[..n]) {
                    if f.src == common::ME && want(&f) {
                        return Some(f);
                    }
                }
            }
        }
        None
    }

    /// Far end `i`'s reduce of barrier `seq`, as arriving on switch port `port`.
    fn reduce(&self, i: usize, group: GroupId, port: PortIdx, epoch: Epoch, seq: Seq) {
        self.send(i, group, Event::Reduce { port, epoch, seq });
    }

    fn send(&self, i: usize, group: GroupId, ev: Event) {
        self.far[i]
            .send(&common::frame_for(group, ev, false))
            .expect("send");
    }
}

#[test]
fn an_intermediate_re_sends_its_reduce_until_the_parent_releases() {
    let Some(ns) = common::bed("an_intermediate_re_sends_its_reduce_until_the_parent_releases")
    else {
        return;
    };
    barrier_bpf::in_netns(&ns.netns, || {
        let mut b = bed_on(&ns);
        let group = GroupId(6);
        let cfg = GroupConfig::intermediate(
            p(4),
            PortSet::single(p(0)).union(PortSet::single(p(2))),
            20_000_000,
        )
        .with_epoch(Epoch(4));
        b.sw.configure(group, &cfg).expect("configure");
        for (i, port) in [(0usize, 0u8), (1, 2)] {
            b.reduce(i, group, p(port), cfg.epoch, Seq(0));
        }
        // The parent (far end 2) gets the reduce, and drops it: it never answers this one.
        let first = b
            .wait(2, Duration::from_secs(2), |f| f.kind == Kind::Reduce)
            .expect("the completion's reduce to the parent");
        assert_eq!(
            (first.seq, first.flags.contains(Flags::RETRANSMIT)),
            (Seq(0), false)
        );
        let t0 = Instant::now();
        let again = b
            .wait(2, Duration::from_secs(2), |f| f.kind == Kind::Reduce)
            .expect("the timer side re-sent no reduce");
        eprintln!("re-sent after {:?}", t0.elapsed());
        assert_eq!(
            (
                again.group,
                again.epoch,
                again.seq,
                again.flags.contains(Flags::RETRANSMIT)
            ),
            (group, cfg.epoch, Seq(0), true)
        );
        let st = b.sw.state(group).expect("state").expect("configured");
        assert_eq!((st.seq, st.phase), (Seq(0), Phase::AwaitingRelease));
        assert!(b.sw.counters().expect("counters").get("timer_resends") >= Some(1));

        // The parent answers the re-send: both children get the release, the re-sends stop.
        b.send(
            2,
            group,
            Event::Release {
                port: p(4),
                epoch: cfg.epoch,
                seq: Seq(0),
            },
        );
        for i in [0usize, 1] {
            let r = b
                .wait(i, Duration::from_secs(2), |f| f.kind == Kind::Release)
                .unwrap_or_else(|| panic!("child {i} got no release"));
            assert_eq!(r.seq, Seq(0));
        }
        let resends = b.sw.counters().expect("counters").get("timer_resends");
        assert!(
            b.wait(2, Duration::from_millis(150), |f| f.kind == Kind::Reduce)
                .is_none(),
            "a reduce re-sent after the release"
        );
        assert_eq!(
            b.sw.counters().expect("counters").get("timer_resends"),
            resends
        );
        let st = b.sw.state(group).expect("state").expect("configured");
        assert_eq!((st.seq, st.phase), (Seq(1), Phase::Collecting));
        assert_eq!(b.side.counters.tx_failed, 0);
        eprintln!("timer side: {:?}", b.side.counters);
    })
    .expect("enter the namespace");
}

#[test]
fn the_deadline_aborts_a_group_whose_child_never_reports() {
    let Some(ns) = common::bed("the_deadline_aborts_a_group_whose_child_never_reports") else {
        return;
    };
    barrier_bpf::in_netns(&ns.netns, || {
        let mut b = bed_on(&ns);
        let info =
            b.sw.timer_program()
                .expect("nb_timer")
                .info()
                .expect("program info");
        eprintln!(
            "nb_timer: verifier processed {} instructions, xlated {} bytes ({} instructions), \
             jited {} bytes",
            info.verified_insns,
            info.xlated_len,
            info.xlated_len / 8,
            info.jited_len
        );
        let group = GroupId(8);
        let children = [p(0), p(2), p(4)].into_iter().collect::<PortSet>();
        let cfg = GroupConfig::root(children)
            .with_epoch(Epoch(2))
            .with_fail_after(30_000_000);
        b.sw.configure(group, &cfg).expect("configure");
        // Children 0 and 4 report barrier 0; child 2 (far end 1) never does.
        for (i, port) in [(0usize, 0u8), (2, 4)] {
            b.reduce(i, group, p(port), cfg.epoch, Seq(0));
        }
        let t0 = Instant::now();
        let want = Failure {
            switch: common::ME,
            port: 2,
        };
        for i in 0..3 {
            let a = b
                .wait(i, Duration::from_secs(2), |f| {
                    matches!(f.kind, Kind::Abort(_))
                })
                .unwrap_or_else(|| panic!("member {i} saw no abort"));
            assert_eq!(
                (a.group, a.epoch, a.seq, a.kind),
                (group, cfg.epoch, Seq(0), Kind::Abort(want))
            );
        }
        let waited = t0.elapsed();
        eprintln!("aborts seen {waited:?} after the reduces");
        assert!(
            waited >= Duration::from_millis(25),
            "declared before the deadline: {waited:?}"
        );
        let st = b.sw.state(group).expect("state").expect("configured");
        assert_eq!((st.phase, st.failure()), (Phase::Aborted, Some(want)));
        let c = b.sw.counters().expect("counters");
        assert_eq!(c.get("declared"), Some(1));
        assert_eq!(c.get("timers_lost"), Some(0));
        assert_eq!(b.side.counters.frames_out, 3);
        // A member's reduce now gets the abort back (the program's answer, no timer).
        b.reduce(1, group, p(2), cfg.epoch, Seq(0));
        let a = b
            .wait(1, Duration::from_secs(2), |f| {
                matches!(f.kind, Kind::Abort(_))
            })
            .expect("the abort answering a member of an aborted group");
        assert_eq!(a.kind, Kind::Abort(want));
    })
    .expect("enter the namespace");
}

#[test]
fn an_intermediate_re_sends_its_abort_until_the_parent_answers() {
    let Some(ns) = common::bed("an_intermediate_re_sends_its_abort_until_the_parent_answers")
    else {
        return;
    };
    barrier_bpf::in_netns(&ns.netns, || {
        let mut b = bed_on(&ns);
        let group = GroupId(9);
        let cfg = GroupConfig::intermediate(
            p(4),
            PortSet::single(p(0)).union(PortSet::single(p(2))),
            20_000_000,
        )
        .with_epoch(Epoch(3))
        .with_fail_after(30_000_000);
        b.sw.configure(group, &cfg).expect("configure");
        // Child 0 reports barrier 5; child 2 (far end 1) never does.
        b.reduce(0, group, p(0), cfg.epoch, Seq(5));
        let want = Kind::Abort(Failure {
            switch: common::ME,
            port: 2,
        });
        // The deadline's abort reaches every member, the parent (far end 2) included.
        for i in 0..3 {
            let a = b
                .wait(i, Duration::from_secs(2), |f| {
                    matches!(f.kind, Kind::Abort(_))
                })
                .unwrap_or_else(|| panic!("member {i} saw no abort"));
            assert_eq!((a.seq, a.kind), (Seq(5), want));
        }
        // The parent ignores it: the timer side re-sends it to the parent, and only there.
        let again = b
            .wait(2, Duration::from_secs(2), |f| {
                matches!(f.kind, Kind::Abort(_))
            })
            .expect("the abort was not re-sent to the parent");
        assert_eq!((again.seq, again.kind), (Seq(5), want));
        for i in [0usize, 1] {
            assert!(
                b.wait(i, Duration::from_millis(1), |f| matches!(
                    f.kind,
                    Kind::Abort(_)
                ))
                .is_none(),
                "the re-sent abort went to child {i} too"
            );
        }
        // The parent answers with the abort: it knows; the re-sends stop.
        b.send(
            2,
            group,
            Event::Abort {
                port: p(4),
                epoch: cfg.epoch,
                seq: Seq(5),
                failure: Failure {
                    switch: common::ME,
                    port: 2,
                },
            },
        );
        std::thread::sleep(Duration::from_millis(5));
        b.wait(2, Duration::from_millis(30), |_| false);
        assert!(
            b.wait(2, Duration::from_millis(150), |f| matches!(
                f.kind,
                Kind::Abort(_)
            ))
            .is_none(),
            "the abort was re-sent after the parent answered"
        );
        let c = b.sw.counters().expect("counters");
        assert_eq!(c.get("declared"), Some(1));
        assert_eq!(c.get("timer_resends"), Some(0));
        assert_eq!(b.side.counters.tx_failed, 0);
        eprintln!("timer side: {:?}", b.side.counters);
    })
    .expect("enter the namespace");
}

/// Frames the timer side sends, kept instead of sent.
#[derive(Default)]
struct Kept(Vec<(PortIdx, FrameRepr)>);

impl barrier_xdp::timers::FrameSink for Kept {
    fn send(&mut self, port: PortIdx, frame: &[u8]) -> std::io::Result<()> {
        self.0
            .push((port, FrameRepr::parse(frame).expect("a barrier frame")));
        Ok(())
    }
}

/// A timer record the ring had no room for (`timers_lost`) is not the end of the timer: the
/// timer side, seeing the counter grow, reads the configured groups' states and arms what
/// their phase needs. Here the ring fills while nothing consumes it (an intermediate's 32,767
/// completions, each arming a re-send); then two records are lost: the intermediate's next
/// completion (its re-send) and a root's first arrival with `fail_after` set (its deadline).
/// Once the timer side runs, the reduce must still be re-sent to the parent and the root must
/// still declare its silent child failed. Without the rescan neither timer exists: the
/// barrier waits for the parent, and the root for its child, forever.
#[test]
fn a_timer_record_lost_to_a_full_ring_is_armed_again_from_the_state() {
    let Some(ns) = common::bed("a_timer_record_lost_to_a_full_ring_is_armed_again_from_the_state")
    else {
        return;
    };
    barrier_bpf::in_netns(&ns.netns, || {
        let (mut sw, ifindexes) = common::switch_on(&ns, SWITCH_OBJECT);
        let group = GroupId(6);
        let (c0, c1, parent) = (p(0), p(2), p(4));
        let cfg = GroupConfig::intermediate(
            parent,
            PortSet::single(c0).union(PortSet::single(c1)),
            1_000_000,
        );
        sw.configure(group, &cfg).expect("configure");
        // The root: children c0 and c1, a child declared failed 1 ms after the first arrival.
        let root = GroupId(7);
        let root_cfg = GroupConfig::root(PortSet::single(c0).union(PortSet::single(c1)))
            .with_fail_after(1_000_000);
        sw.configure(root, &root_cfg).expect("configure the root");
        let run_in = |group: GroupId, port: PortIdx, ev: Event| {
            sw.run_frame(
                &common::frame_for(group, ev, false),
                ifindexes[usize::from(port.get())],
            )
            .expect("run");
        };
        let run = |port: PortIdx, ev: Event| run_in(group, port, ev);
        let complete = |seq: u32| {
            for c in [c0, c1] {
                run(
                    c,
                    Event::Reduce {
                        port: c,
                        epoch: cfg.epoch,
                        seq: Seq(seq),
                    },
                );
            }
        };
        let lost = || {
            sw.counters()
                .expect("counters")
                .get("timers_lost")
                .expect("timers_lost")
        };
        // Barriers until the ring is full (each completion writes a record, each release
        // from the parent opens the next barrier), then one more: its record is lost.
        let mut seq = 0;
        while lost() == 0 {
            assert!(seq < 40_000, "the ring never filled");
            for _ in 0..1_000 {
                complete(seq);
                run(
                    parent,
                    Event::Release {
                        port: parent,
                        epoch: cfg.epoch,
                        seq: Seq(seq),
                    },
                );
                seq += 1;
            }
        }
        complete(seq);
        let lost_before_root = lost();
        run_in(
            root,
            c0,
            Event::Reduce {
                port: c0,
                epoch: root_cfg.epoch,
                seq: Seq(0),
            },
        );
        let before = lost();
        assert!(
            before > lost_before_root,
            "the root's deadline record was not lost"
        );
        assert_eq!(
            sw.state(group).expect("state").map(|s| (s.phase, s.seq)),
            Some((Phase::AwaitingRelease, Seq(seq)))
        );

        // The timer side starts now: the ring's 32,768 records are barriers long released
        // (they fire and do nothing); the last barrier's re-send must come from the rescan.
        let mut side = TimerSide::new(&sw, now_ns()).expect("timer side");
        let mut kept = Kept::default();
        let end = Instant::now() + Duration::from_secs(20);
        let resent = |kept: &Kept| {
            kept.0.iter().any(|(port, f)| {
                *port == parent
                    && f.group == group
                    && f.kind == Kind::Reduce
                    && f.seq == Seq(seq)
                    && f.flags.contains(Flags::RETRANSMIT)
            })
        };
        // The root's abort to both children (the deadline declared c1, which never reported).
        let aborted = |kept: &Kept| {
            [c0, c1].iter().all(|&c| {
                kept.0.iter().any(|(port, f)| {
                    *port == c && f.group == root && matches!(f.kind, Kind::Abort(_))
                })
            })
        };
        while !(resent(&kept) && aborted(&kept)) && Instant::now() < end {
            side.poll(&sw, &mut kept, now_ns()).expect("poll");
            std::thread::sleep(Duration::from_micros(200));
        }
        let seen = format!(
            "{before} lost; frames sent: {}, counters {:?}",
            kept.0.len(),
            side.counters
        );
        assert!(
            resent(&kept),
            "no re-send of barrier {seq}'s reduce after its timer record was lost ({seen})"
        );
        assert!(
            aborted(&kept),
            "the root's deadline was lost with its record: no abort ({seen})"
        );
        assert!(
            kept.0
                .iter()
                .all(|(_, f)| (f.group == group && f.seq == Seq(seq)) || f.group == root),
            "a released barrier's timer sent a frame"
        );
        assert_eq!(side.counters.loss_rescans, 1, "{:?}", side.counters);
        assert_eq!(side.counters.rearmed_after_loss, 2, "{:?}", side.counters);
    })
    .expect("enter the namespace");
}
