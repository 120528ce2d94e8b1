//! Emulated-leaf fleet benchmark (`cargo bench -p barrier-testbed --bench fleet [-- SECONDS]`; no
//! root, no DPDK): what keeping a fleet of emulated leaves costs per frame at 1,024 and at
//! 1,048,576 groups, with the re-send timers on the runtime's timer wheel
//! (`barrier_testbed::fleet`) and, in the same run on the same workload, with the periodic scan
//! of every group that barrier-gen used before (re-enacted below from its old
//! `engine/leaves.rs`). Prints frames/s, the nanoseconds per frame spent in timer code, and the
//! ratios 1M / 1K groups. See perf/gen.md ("Scale: the leaves' timers").

use barrier_protocol::leaf::{Leaf, LeafConfig, LeafSend};
use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{GroupId, Seq, Time};
use barrier_runtime::clock::Clock;
use barrier_testbed::fleet::{Fleet, FleetConfig, Received};
use std::collections::VecDeque;

/// Leaves per group (barrier-gen's ports).
const MEMBERS: u32 = 4;
/// Barriers in flight: the generator's bounded queues keep about this many open at once.
const WINDOW: usize = 1024;
/// barrier-gen's default leaf timer.
const TIMEOUT_NS: u64 = 10_000_000;
/// Frames between two timer calls: about one pass of the generator's loop (a burst).
const BATCH: u64 = 32;
const SRC: [u8; 6] = [2, 0, 0, 0, 1, 0];

/// The two ways of keeping the leaves, driven by the same loop.
trait Leaves {
    fn arrive(&mut self, member: u32, group: u32, now: u64) -> (LeafSend, [u8; FRAME_LEN]);
    fn release(&mut self, member: u32, frame: &[u8], now: u64);
    /// Re-send timers due now; returns the re-sends.
    fn timers(&mut self, now: u64) -> usize;
    /// Releases that came early: must stay 0.
    fn early(&self) -> u64;
}

impl Leaves for (Fleet, Vec<(u32, LeafSend)>, u64) {
    fn arrive(&mut self, member: u32, group: u32, now: u64) -> (LeafSend, [u8; FRAME_LEN]) {
        let send = self.0.arrive(member, group, now).expect("working").send;
        (send, self.0.reduce_frame(send, SRC, [0xff; 6], Some(now)))
    }
    fn release(&mut self, member: u32, frame: &[u8], now: u64) {
        match self.0.receive(member, frame, now) {
            Received::Released(r) => self.2 += u64::from(r.early),
            Received::NotReached => self.2 += 1,
            Received::Ignored | Received::Other => {}
        }
    }
    fn timers(&mut self, now: u64) -> usize {
        self.1.clear();
        self.0.expire(now, &mut self.1);
        self.1.len()
    }
    fn early(&self) -> u64 {
        self.2
    }
}

/// barrier-gen's leaves before the fleet: `Leaf`s indexed port-major, a 48-byte record per
/// group, and every `timeout / 8` (clamped to 20 µs..1 ms) a scan of every group with a
/// barrier open and of each of its leaves' timers.
struct Scan {
    leaves: Vec<Leaf>,
    groups: Vec<OldGroup>,
    next_scan: u64,
    scan_every: u64,
    early: u64,
}

#[derive(Clone, Default)]
#[allow(dead_code)] // the fields the old record carried, for its size
struct OldGroup {
    arrived: u32,
    released: u32,
    first_ns: u64,
    last_arrive_ns: u64,
    resent: bool,
    late: bool,
    trial: u32,
    done: u64,
    queued: bool,
}

impl Scan {
    fn new(groups: u32) -> Scan {
        let mut leaves = Vec::with_capacity((MEMBERS * groups) as usize);
        for _ in 0..MEMBERS {
            for g in 0..groups {
                leaves.push(Leaf::new(LeafConfig {
                    group: GroupId(g),
                    epoch: barrier_protocol::Epoch::DEFAULT,
                    resend_timeout_ns: TIMEOUT_NS,
                    first_seq: Seq(0),
                }));
            }
        }
        Scan {
            leaves,
            groups: vec![OldGroup::default(); groups as usize],
            next_scan: 0,
            scan_every: (TIMEOUT_NS / 8).clamp(20_000, 1_000_000),
            early: 0,
        }
    }
}

impl Leaves for Scan {
    fn arrive(&mut self, member: u32, group: u32, now: u64) -> (LeafSend, [u8; FRAME_LEN]) {
        let ng = self.groups.len();
        let send = self.leaves[member as usize * ng + group as usize]
            .arrive(Time(now))
            .expect("working");
        let gr = &mut self.groups[group as usize];
        if gr.arrived == 0 {
            gr.first_ns = now;
        }
        gr.arrived += 1;
        gr.last_arrive_ns = now;
        let mut buf = [0u8; FRAME_LEN];
        send.frame(MacAddr(SRC), MacAddr::BROADCAST, Some(now))
            .emit(&mut buf);
        (send, buf)
    }
    fn release(&mut self, member: u32, frame: &[u8], now: u64) {
        let Ok(r) = FrameRepr::parse(frame) else {
            return;
        };
        let ng = self.groups.len();
        let gi = r.group.0 as usize;
        if r.kind != Kind::Release || gi >= ng {
            return;
        }
        if self.leaves[member as usize * ng + gi]
            .on_release(Time(now), r.epoch, r.seq)
            .is_some()
        {
            let gr = &mut self.groups[gi];
            self.early += u64::from(gr.arrived < MEMBERS);
            gr.released += 1;
            if gr.released == MEMBERS {
                gr.arrived = 0;
                gr.released = 0;
                gr.resent = false;
                gr.late = false;
            }
        }
    }
    fn timers(&mut self, now: u64) -> usize {
        if now < self.next_scan {
            return 0;
        }
        self.next_scan = now + self.scan_every;
        let ng = self.groups.len();
        let mut n = 0;
        for gi in 0..ng {
            if self.groups[gi].arrived == 0 {
                continue;
            }
            let gr = &mut self.groups[gi];
            if now.saturating_sub(gr.first_ns) > 1_000_000_000 {
                gr.late = true;
            }
            for port in 0..MEMBERS as usize {
                if self.leaves[port * ng + gi].poll(Time(now)).is_some() {
                    self.groups[gi].resent = true;
                    n += 1;
                }
            }
        }
        n
    }
    fn early(&self) -> u64 {
        self.early
    }
}

struct Measured {
    frames: u64,
    secs: f64,
    timer_ns: u64,
    resends: u64,
    early: u64,
}

impl Measured {
    fn fps(&self) -> f64 {
        self.frames as f64 / self.secs
    }
    fn timer_per_frame(&self) -> f64 {
        self.timer_ns as f64 / self.frames as f64
    }
}

/// Closed loop over `groups` groups, `WINDOW` barriers open: arrive every leaf of the next
/// group (4 reduces built), release the oldest open barrier (4 releases parsed and applied),
/// and every `BATCH` frames run the timers, timed on their own.
fn drive(leaves: &mut impl Leaves, clock: &Clock, groups: u32, secs: f64) -> Measured {
    assert!(groups as usize >= WINDOW);
    let end = clock.now_ns() + (secs * 1e9) as u64;
    let mut open: VecDeque<(u32, Seq)> = VecDeque::with_capacity(WINDOW);
    let (mut next, mut frames, mut timer_ns, mut resends) = (0u32, 0u64, 0u64, 0u64);
    let start = clock.now_ns();
    let mut now = start;
    while now < end {
        let mut n = 0;
        while n < BATCH {
            if open.len() < WINDOW {
                let mut seq = Seq(0);
                for m in 0..MEMBERS {
                    let (send, frame) = leaves.arrive(m, next, now);
                    seq = send.seq;
                    // The whole frame is used: no side may skip building it.
                    std::hint::black_box(&frame);
                }
                open.push_back((next, seq));
                next = (next + 1) % groups;
            } else {
                let (g, seq) = open.pop_front().expect("open barrier");
                release(leaves, g, seq, now);
            }
            n += u64::from(MEMBERS);
        }
        frames += n;
        now = clock.now_ns();
        resends += leaves.timers(now) as u64;
        let after = clock.now_ns();
        timer_ns += after - now;
        now = after;
    }
    // Close what is open, so that the next phase starts with every leaf working.
    for (g, seq) in open {
        release(leaves, g, seq, now);
    }
    Measured {
        frames,
        secs: (now - start) as f64 / 1e9,
        timer_ns,
        resends,
        early: leaves.early(),
    }
}

/// The release of barrier `seq` of group `g` reaches every member.
fn release(leaves: &mut impl Leaves, g: u32, seq: Seq, now: u64) {
    let rel = FrameRepr {
        dst: MacAddr::BROADCAST,
        src: MacAddr([2, 0, 0, 0, 0, 1]),
        kind: Kind::Release,
        flags: Flags::empty(),
        group: GroupId(g),
        epoch: barrier_protocol::Epoch::DEFAULT,
        seq,
        tx_timestamp: None,
    }
    .to_bytes();
    for m in 0..MEMBERS {
        leaves.release(m, &rel, now);
    }
}

fn fleet(groups: u32, clock: &Clock) -> (Fleet, Vec<(u32, LeafSend)>, u64) {
    let cfg = FleetConfig {
        members: MEMBERS,
        first_group: 0,
        groups,
        first_seq: Seq(0),
        resend_timeout_ns: TIMEOUT_NS,
        epoch: barrier_protocol::Epoch::DEFAULT,
        backoff: barrier_protocol::backoff::Backoff::FIXED,
    };
    (Fleet::new(cfg, clock.now_ns()), Vec::new(), 0)
}

fn main() {
    // `cargo bench` passes `--bench`; a number is the phase length in seconds.
    let secs = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<f64>().ok())
        .unwrap_or(2.0);
    println!(
        "fleet bench: {MEMBERS} leaves per group, {WINDOW} barriers open, leaf timer {} ms, timers every {BATCH} frames, {secs} s per phase (plus a warm-up of a fifth)",
        TIMEOUT_NS / 1_000_000
    );
    // One clock for every phase: the leaves' deadlines carry over from warm-up to measurement.
    let clock = Clock::new();
    let sizes = [1u32 << 10, 1 << 20];
    let mut rows = Vec::new();
    for &groups in &sizes {
        let mut s = Scan::new(groups);
        drive(&mut s, &clock, groups, secs / 5.0);
        rows.push(("scan (before)", groups, drive(&mut s, &clock, groups, secs)));
        drop(s);
        let mut f = fleet(groups, &clock);
        drive(&mut f, &clock, groups, secs / 5.0);
        rows.push(("wheel (fleet)", groups, drive(&mut f, &clock, groups, secs)));
    }
    println!(
        "{:>14} {:>9} {:>12} {:>16} {:>12} {:>8} {:>6}",
        "timers", "groups", "frames/s", "timer ns/frame", "timer share", "resends", "early"
    );
    for (name, groups, m) in &rows {
        println!(
            "{name:>14} {groups:>9} {:>11.2}M {:>16.2} {:>11.1}% {:>8} {:>6}",
            m.fps() / 1e6,
            m.timer_per_frame(),
            100.0 * m.timer_ns as f64 / (m.secs * 1e9),
            m.resends,
            m.early
        );
    }
    let get = |name: &str, groups: u32| {
        &rows
            .iter()
            .find(|r| r.0 == name && r.1 == groups)
            .expect("row")
            .2
    };
    for name in ["scan (before)", "wheel (fleet)"] {
        let (small, big) = (get(name, sizes[0]), get(name, sizes[1]));
        println!(
            "{name}: 1M / 1K groups: frames/s {:.3}, timer ns per frame {:.2}",
            big.fps() / small.fps(),
            big.timer_per_frame() / small.timer_per_frame().max(1e-9)
        );
    }
    let (before, after) = (
        get("scan (before)", sizes[1]),
        get("wheel (fleet)", sizes[1]),
    );
    println!(
        "at 1M groups, wheel / scan: frames/s {:.2}, timer ns per frame {:.4}",
        after.fps() / before.fps(),
        after.timer_per_frame() / before.timer_per_frame().max(1e-9)
    );
}
