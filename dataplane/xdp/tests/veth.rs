//! The program attached natively to veth ports in a throw-away namespace: a frame of another
//! EtherType reaches the kernel (`XDP_PASS`), and two leaves' reduces get the root's release
//! back on both leaves' links (a broadcast redirect that includes the ingress port). Prints the
//! kernel's figures for the loaded program (docs/offload.md). Needs root: skipped otherwise,
//! failed under `NB_REQUIRE_ROOT=1`.

mod common;

use std::time::{Duration, Instant};

use barrier_bpf::XdpMode;
use barrier_protocol::switch::{Event, GroupConfig, Phase};
use barrier_protocol::wire::{Kind, ETHERTYPE};
use barrier_protocol::{Epoch, GroupId, PortIdx, PortSet, Seq};
use barrier_xdp::{Egress, XdpError, XdpSwitch, SWITCH_OBJECT};
use rawsock::RawSocket;

const OTHER_ETHERTYPE: u16 = 0x88B6;

#[test]
fn attached_natively_it_passes_other_traffic_and_releases_a_barrier() {
    let Some(bed) = common::bed("attached_natively_it_passes_other_traffic_and_releases_a_barrier")
    else {
        return;
    };
    let names = common::port_names(&bed);
    // Switch ports: the a ends (ports 0, 2, 4 = veth-a0, veth-a1, veth-a2); leaves on the b ends.
    let (leaf0, leaf1, other) = (names[1].clone(), names[3].clone(), names[5].clone());
    let group = GroupId(5);
    let s0 = RawSocket::open_in_netns(&bed.netns, &leaf0, ETHERTYPE).expect("leaf 0 socket");
    let s1 = RawSocket::open_in_netns(&bed.netns, &leaf1, ETHERTYPE).expect("leaf 1 socket");
    let host = RawSocket::open_in_netns(&bed.netns, &names[4], OTHER_ETHERTYPE).expect("host");
    let sender = RawSocket::open_in_netns(&bed.netns, &other, OTHER_ETHERTYPE).expect("sender");

    barrier_bpf::in_netns(&bed.netns, || {
        let (mut sw, ifindexes) = common::switch_on(&bed, SWITCH_OBJECT);
        let cfg = GroupConfig::root(
            PortSet::single(PortIdx::new(0).expect("port"))
                .union(PortSet::single(PortIdx::new(2).expect("port"))),
        )
        .with_epoch(Epoch(4));
        sw.configure(group, &cfg).expect("configure");
        let info = sw.program().expect("program").info().expect("program info");
        eprintln!(
            "nb_switch: id {}, verifier processed {} instructions, xlated {} bytes ({} \
             instructions), jited {} bytes",
            info.id,
            info.verified_insns,
            info.xlated_len,
            info.xlated_len / 8,
            info.jited_len
        );
        let _attached: Vec<_> = [0usize, 2, 4]
            .iter()
            .map(|&p| {
                sw.attach(ifindexes[p], XdpMode::Native)
                    .expect("attach natively")
            })
            .collect();
        let _peers: Vec<_> = [1usize, 3, 5]
            .iter()
            .map(|&p| {
                sw.attach_pass(ifindexes[p])
                    .expect("attach the pass program")
            })
            .collect();

        // Another EtherType goes on to the kernel: a packet socket on the switch port sees it.
        let mut frame = [0u8; 60];
        frame[..6].copy_from_slice(&[0xff; 6]);
        frame[6..12].copy_from_slice(&sender.mac());
        frame[12..14].copy_from_slice(&OTHER_ETHERTYPE.to_be_bytes());
        frame[14..19].copy_from_slice(b"hello");
        sender.send(&frame).expect("send");
        let mut buf = [0u8; 2048];
        let end = Instant::now() + Duration::from_secs(2);
        let mut seen = false;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            if let Ok(Some(n)) = host.recv(&mut buf, Some(left)) {
                if n >= 19 && &buf[14..19] == b"hello" {
                    seen = true;
                    break;
                }
            }
        }
        assert!(
            seen,
            "a frame of another EtherType did not reach the kernel"
        );
        assert!(sw.counters().expect("counters").get("pass_not_barrier") >= Some(1));

        // Two leaves reduce barrier 0; both get the release.
        for (sock, port) in [(&s0, 0u8), (&s1, 2u8)] {
            let ev = Event::Reduce {
                port: PortIdx::new(port).expect("port"),
                epoch: cfg.epoch,
                seq: Seq(0),
            };
            sock.send(&common::frame_for(group, ev, false))
                .expect("send reduce");
        }
        for (sock, name) in [(&s0, "leaf 0"), (&s1, "leaf 1")] {
            let f = common::next_from_switch(sock, Duration::from_secs(2))
                .unwrap_or_else(|| panic!("{name} got no release"));
            assert_eq!(
                (f.kind, f.group, f.epoch, f.seq),
                (Kind::Release, group, cfg.epoch, Seq(0))
            );
        }
        let st = sw.state(group).expect("state").expect("configured");
        assert_eq!((st.seq, st.phase), (Seq(1), Phase::Collecting));
        let c = sw.counters().expect("counters");
        assert_eq!(c.get("completions"), Some(1));
        assert_eq!(c.get("tx_failed"), Some(0));
    })
    .expect("enter the namespace");
}

/// `nb_last` is opt-in at load time: loaded as the daemon loads it (`XdpSwitch::load`, no
/// record), the program has no write to it (the verifier removed the branch on the `.rodata`
/// switch: fewer instructions than the recording build) and `last_decision` refuses; loaded
/// with `LoadOptions::RECORDING`, the same frame's decision is there.
#[test]
fn the_last_decision_is_recorded_only_when_asked_at_load() {
    let Some(bed) = common::bed("the_last_decision_is_recorded_only_when_asked_at_load") else {
        return;
    };
    barrier_bpf::in_netns(&bed.netns, || {
        let (mut rec, ifindexes) = common::switch_on(&bed, SWITCH_OBJECT);
        let mut plain = XdpSwitch::load(64).expect("load without the record");
        plain.set_switch_mac(common::ME).expect("MAC");
        let p0 = PortIdx::new(0).expect("port");
        plain.add_port(p0, ifindexes[0]).expect("add port");
        let group = GroupId(3);
        let cfg = GroupConfig::root(PortSet::single(p0));
        rec.configure(group, &cfg).expect("configure");
        plain.configure(group, &cfg).expect("configure");
        let frame = common::frame_for(
            group,
            Event::Reduce {
                port: p0,
                epoch: cfg.epoch,
                seq: Seq(0),
            },
            false,
        );

        rec.clear_last_decision().expect("clear");
        rec.run_frame(&frame, ifindexes[0]).expect("run");
        let last = rec.last_decision().expect("read").expect("a decision");
        assert!(matches!(last.egress, Egress::Set { .. }), "{last:?}");

        plain.run_frame(&frame, ifindexes[0]).expect("run");
        assert_eq!(
            plain.counters().expect("counters").get("completions"),
            Some(1)
        );
        assert!(matches!(plain.last_decision(), Err(XdpError::NotRecording)));
        assert!(matches!(
            plain.clear_last_decision(),
            Err(XdpError::NotRecording)
        ));

        let (ri, pi) = (
            rec.program().expect("program").info().expect("info"),
            plain.program().expect("program").info().expect("info"),
        );
        eprintln!(
            "xlated bytes: recording {}, not recording {}",
            ri.xlated_len, pi.xlated_len
        );
        assert!(
            pi.xlated_len < ri.xlated_len,
            "the program without the record is not shorter ({} >= {} bytes): the nb_last write \
             was not removed",
            pi.xlated_len,
            ri.xlated_len
        );
    })
    .expect("enter the namespace");
}
