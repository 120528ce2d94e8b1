//! Claim 6 black-box, on both dataplanes: one scenario, driven only through raw sockets on
//! veth pairs in a throw-away namespace, run against the XDP switch (loaded in-process through
//! `XdpSwitch`, attached natively to the switch ends) and against the DPDK `barrier-switch`
//! binary (`run --config FILE`, `net_af_packet` ports on the same ends).
//!
//! Three member leaves and one non-member, each on the `a` end of a pair; the switch, the root
//! of the group, on the `b` ends. Per barrier the leaves' reduces go out in random order, with
//! duplicates, a stale reduce (the previous barrier), a reduce of another epoch and a reduce
//! from the non-member mixed in. After every frame sent before the last member's reduce, the
//! test listens on every leaf: a release of the barrier then breaks claim 6 (no early release).
//! After it, every member must get the release; the stale reducer the previous one again; the
//! non-member nothing. Needs root: skipped otherwise, failed under `NB_REQUIRE_ROOT=1`. The DPDK
//! run needs the `barrier-switch` binary in this target directory (`cargo build -p
//! barrier-switchd`, or the workspace as scripts/test.sh builds it) and fails without it.

mod common;

use std::time::{Duration, Instant};

use barrier_bpf::{XdpAttachment, XdpMode};
use barrier_protocol::leaf::LeafSend;
use barrier_protocol::switch::GroupConfig;
use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, ETHERTYPE};
use barrier_protocol::{Epoch, GroupId, PortIdx, PortSet, Seq};
use barrier_testbed::netns::{can_create, VethNetns};
use barrier_testbed::switch_process::{counter, root_config, switch_binary, SwitchProcess};
use barrier_xdp::{LoadOptions, XdpSwitch, BROKEN_NO_EPOCH_CHECK_OBJECT, SWITCH_OBJECT};
use rawsock::RawSocket;

const GROUP: GroupId = GroupId(11);
const MEMBERS: usize = 3;
const BARRIERS: u32 = 6;
/// How long the test listens for an early release after each frame.
const LISTEN: Duration = Duration::from_millis(25);

/// xorshift64*: the scenario's order, from a seed the test prints.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn seed() -> u64 {
    std::env::var("NB_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rawsock::monotonic_now().as_nanos() as u64 | 1)
}

/// One reduce a leaf sends: which leaf (`MEMBERS` is the non-member), barrier, epoch.
#[derive(Debug, Clone, Copy)]
struct Send {
    leaf: usize,
    seq: Seq,
    epoch: Epoch,
}

/// What a leaf has seen from the switch: (kind, barrier, RETRANSMIT).
type Seen = Vec<(Kind, Seq, bool)>;

/// Reads every barrier frame of the group waiting on any leaf for `wait`, into `seen`.
fn listen(leaves: &[RawSocket], seen: &mut [Seen], wait: Duration) {
    let end = Instant::now() + wait;
    let mut buf = [0u8; 2048];
    loop {
        let mut any = false;
        for (i, s) in leaves.iter().enumerate() {
            while let Ok(Some(n)) = s.recv(&mut buf, Some(Duration::ZERO)) {
                any = true;
                if let Ok(f) = FrameRepr::parse(&buf[..n]) {
                    if f.group == GROUP {
                        seen[i].push((f.kind, f.seq, f.flags.contains(Flags::RETRANSMIT)));
                    }
                }
            }
        }
        if Instant::now() >= end {
            return;
        }
        if !any {
            std::thread::sleep(Duration::from_micros(500));
        }
    }
}

fn released(seen: &Seen, seq: Seq) -> bool {
    seen.iter().any(|&(k, s, _)| k == Kind::Release && s == seq)
}

/// The scenario: leaves on the `a` ends of `bed`'s first `MEMBERS + 1` pairs, the switch (root
/// of `GROUP` in `Epoch::DEFAULT`, children the first `MEMBERS` `b` ends) already running.
fn claim6(bed: &VethNetns, seed: u64) {
    eprintln!("claim 6 scenario, seed {seed} (NB_SEED={seed} repeats it)");
    let mut rng = Rng(seed);
    let leaves: Vec<RawSocket> = (0..=MEMBERS)
        .map(|i| RawSocket::open_in_netns(&bed.netns, &bed.pairs[i].0, ETHERTYPE).expect("leaf"))
        .collect();
    let mut seen: Vec<Seen> = vec![Vec::new(); MEMBERS + 1];
    let epoch = Epoch::DEFAULT;
    for b in 0..BARRIERS {
        let seq = Seq(b);
        let mut sends: Vec<Send> = (0..MEMBERS).map(|leaf| Send { leaf, seq, epoch }).collect();
        for _ in 0..2 {
            let leaf = rng.below(MEMBERS);
            sends.push(Send { leaf, seq, epoch });
        }
        let stale = (b > 0).then(|| rng.below(MEMBERS));
        if let Some(leaf) = stale {
            sends.push(Send {
                leaf,
                seq: seq.prev(),
                epoch,
            });
        }
        sends.push(Send {
            leaf: rng.below(MEMBERS),
            seq,
            epoch: Epoch(epoch.0 + 1),
        });
        sends.push(Send {
            leaf: MEMBERS,
            seq,
            epoch,
        });
        for i in (1..sends.len()).rev() {
            sends.swap(i, rng.below(i + 1));
        }

        let mut reported = PortSet::empty();
        let mut stale_at = None;
        for (k, s) in sends.iter().enumerate() {
            if s.seq != seq {
                listen(&leaves, &mut seen, Duration::ZERO);
                stale_at = Some((s.leaf, seen[s.leaf].len()));
            }
            let frame = LeafSend {
                group: GROUP,
                epoch: s.epoch,
                seq: s.seq,
                retransmit: false,
            }
            .frame(MacAddr(leaves[s.leaf].mac()), MacAddr::BROADCAST, None)
            .to_bytes();
            leaves[s.leaf].send(&frame).expect("send a reduce");
            if s.leaf < MEMBERS && s.seq == seq && s.epoch == epoch {
                reported.insert(PortIdx::new(s.leaf as u8).expect("port"));
            }
            if reported.len() < MEMBERS {
                listen(&leaves, &mut seen, LISTEN);
                for (i, l) in seen.iter().enumerate() {
                    assert!(
                        !released(l, seq),
                        "claim 6 broken: leaf {i} saw the release of {seq:?} before every \
                         member's reduce was sent (sent so far: {:?}; seed {seed})",
                        &sends[..=k]
                    );
                }
            }
        }
        // Every release comes: the barrier's to every member, and to the stale reducer a
        // release after its stale reduce: the previous barrier's again (RETRANSMIT) when the
        // stale reduce reached the switch while this barrier gathered, this barrier's once it
        // completed (the switch answers a reduce behind its barrier s with release s-1). DPDK
        // polls its ports in its own order, and its scheduler merges a queued re-sent release
        // into this barrier's release to the same port (`coalesced`): either one releases the
        // leaf.
        let resent = |seen: &[Seen]| {
            stale_at.is_none_or(|(leaf, from)| {
                seen[leaf][from..]
                    .iter()
                    .any(|&(k, s, _)| k == Kind::Release && (s == seq.prev() || s == seq))
            })
        };
        let end = Instant::now() + Duration::from_secs(3);
        while ((0..MEMBERS).any(|i| !released(&seen[i], seq)) || !resent(&seen))
            && Instant::now() < end
        {
            listen(&leaves, &mut seen, Duration::from_millis(5));
        }
        for (i, l) in seen.iter().enumerate().take(MEMBERS) {
            assert!(
                released(l, seq),
                "member {i} never got the release of {seq:?} ({l:?}; seed {seed})"
            );
        }
        assert!(
            resent(&seen),
            "the stale reducer {stale:?} got no release again ({seen:?}; seed {seed})"
        );
    }
    assert!(
        seen[MEMBERS].is_empty(),
        "the non-member got frames of the group: {:?}",
        seen[MEMBERS]
    );
}

fn bed(test: &str) -> Option<VethNetns> {
    if !can_create() {
        eprintln!("{test}: skipped: needs root (CAP_BPF, CAP_NET_ADMIN) and iproute2");
        return None;
    }
    Some(VethNetns::with_pairs(MEMBERS + 1).expect("create a namespace with veth pairs"))
}

/// The XDP switch (`object`) on the `b` ends of `bed`, the root of `GROUP` over the first
/// `MEMBERS` of them; the pass program on the `a` ends. Call inside the namespace.
fn xdp_switch_on(bed: &VethNetns, object: &[u8]) -> (XdpSwitch, Vec<XdpAttachment>) {
    let mut sw =
        XdpSwitch::load_object(object, 64, LoadOptions::default()).expect("load the XDP program");
    sw.set_switch_mac(common::ME).expect("switch MAC");
    let mut attached = Vec::new();
    for (i, (a, b)) in bed.pairs.iter().enumerate() {
        let ifb = barrier_bpf::ifindex(b).expect("switch end");
        sw.add_port(PortIdx::new(i as u8).expect("port"), ifb)
            .expect("add port");
        attached.push(sw.attach(ifb, XdpMode::Native).expect("attach"));
        let ifa = barrier_bpf::ifindex(a).expect("leaf end");
        attached.push(sw.attach_pass(ifa).expect("attach the pass program"));
    }
    let children = (0..MEMBERS as u8)
        .map(|i| PortIdx::new(i).expect("port"))
        .collect::<PortSet>();
    sw.configure(GROUP, &GroupConfig::root(children))
        .expect("configure");
    (sw, attached)
}

#[test]
fn claim6_black_box_on_the_xdp_switch() {
    let Some(bed) = bed("claim6_black_box_on_the_xdp_switch") else {
        return;
    };
    barrier_bpf::in_netns(&bed.netns, || {
        let (sw, _attached) = xdp_switch_on(&bed, SWITCH_OBJECT);
        claim6(&bed, seed());
        let c = sw.counters().expect("counters");
        eprintln!(
            "XDP switch: {:?}",
            c.iter().filter(|(_, v)| *v > 0).collect::<Vec<_>>()
        );
        assert_eq!(c.get("completions"), Some(u64::from(BARRIERS)));
        assert_eq!(c.get("drop_not_a_child"), Some(u64::from(BARRIERS)));
        assert_eq!(c.get("drop_other_epoch"), Some(u64::from(BARRIERS)));
        assert_eq!(c.get("tx_failed"), Some(0));
    })
    .expect("enter the namespace");
}

/// The scenario must catch a switch that releases early: the build without the epoch check
/// records a member's reduce of another epoch, and when that member is the last one missing it
/// releases everyone before the member's own reduce. The order is random, so a run of six
/// barriers shows it in about two of five seeds; up to 20 seeds are tried.
#[test]
fn the_black_box_catches_a_switch_that_takes_other_epochs() {
    let Some(bed) = bed("the_black_box_catches_a_switch_that_takes_other_epochs") else {
        return;
    };
    let caught = barrier_bpf::in_netns(&bed.netns, || {
        let first = seed();
        (0..20).find_map(|i| {
            let (_sw, _attached) = xdp_switch_on(&bed, BROKEN_NO_EPOCH_CHECK_OBJECT);
            let run =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| claim6(&bed, first + i)));
            let why = run.err()?;
            let msg = why.downcast_ref::<String>().cloned().unwrap_or_default();
            Some(msg)
        })
    })
    .expect("enter the namespace");
    let msg = caught.expect("20 seeds of the scenario did not catch the broken switch");
    assert!(
        msg.starts_with("claim 6 broken"),
        "caught, but not as an early release: {msg}"
    );
}

#[test]
fn claim6_black_box_on_the_dpdk_switch() {
    let Some(bed) = bed("claim6_black_box_on_the_dpdk_switch") else {
        return;
    };
    eprintln!("barrier-switch: {}", switch_binary().display());
    let prefix = format!("nb-claim6-{}", std::process::id());
    let all = root_config(&bed, GROUP.0, &prefix);
    let quoted = |n: usize| {
        (0..n)
            .map(|i| format!("\"c{i}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // The last pair's port is the switch's, but not the group's: the non-member.
    let from = format!("children = [{}]", quoted(MEMBERS + 1));
    assert!(all.contains(&from), "root_config's children line: {all}");
    let cfg_text = all.replace(&from, &format!("children = [{}]", quoted(MEMBERS)));
    let path = std::env::temp_dir().join(format!("{prefix}.toml"));
    std::fs::write(&path, cfg_text).expect("write the configuration");
    let mut sw = SwitchProcess::start(&bed, &path, &prefix);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| claim6(&bed, seed())));
    let (status, report) = sw.stop();
    let _ = std::fs::remove_file(&path);
    if let Err(e) = outcome {
        eprintln!("barrier-switch's counters:\n{report}");
        std::panic::resume_unwind(e);
    }
    assert!(status.success(), "barrier-switch exit {status:?}\n{report}");
    eprintln!("{report}");
    assert_eq!(
        counter(&report, "rx total", "completions"),
        Some(u64::from(BARRIERS)),
        "{report}"
    );
    drop(sw);
}
