//! Access lists under attack, measured (`cargo bench -p barrier-switch --bench acl [-- SECONDS
//! [FLOOD_FPS]]`): member groups' barrier latency (p50, p99) and leaf re-sends with and without a
//! flood of frames the access lists refuse, on a non-member port and on a member port, each with
//! and without the port's policer, printed as ratios to a control phase of the same run. No
//! root, no DPDK: the bed of `dataplane/switch/tests/acl_attack.rs` (a root and an intermediate
//! switch of the library, two emulated leaves, an attacker sharing each of the intermediate's
//! wires) on in-memory wires, every poller on this one thread on the wall clock. See
//! perf/acl.md for what was measured and how to read it.

#[path = "../dataplane/switch/tests/common/acl_bed.rs"]
mod acl_bed;

use acl_bed::{frame, run_until, Bed, BedConfig, C0, NAMES, X};
use barrier_protocol::rng::Rng;
use barrier_protocol::wire::Kind;
use barrier_protocol::{Epoch, GroupId};
use barrier_runtime::clock::Clock;
use barrier_runtime::io::{TxQueue, BURST};
use barrier_switch::policer::PolicerSpec;

/// Member groups (each: two leaves on c0 and c1, barriers back to back).
const MEMBERS: u32 = 64;
/// Group numbers of both switches' tables (default; the fourth number on the command line): the
/// flood's groups are spread over all of them, so its table lookups miss the cache as a real
/// flood's would.
const CAPACITY: u32 = 1 << 20;

fn capacity() -> u32 {
    std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<f64>().ok())
        .nth(3)
        .map_or(CAPACITY, |c| c as u32)
        .clamp(MEMBERS + 2, CAPACITY)
}
/// Frames in the attacker's pool, cycled.
const POOL: usize = 8192;

struct Phase {
    name: String,
    barriers: u64,
    p50_us: f64,
    p99_us: f64,
    resends: u64,
    flood_fps: f64,
    policed: u64,
    rejected: u64,
    elapsed: f64,
    /// Passes of the loop over every poller.
    passes: u64,
    /// Flood frames that found the port's wire full.
    ring_full: u64,
    /// Wall time per frame in the RX poller of the flooded port (x or c0; c0 in the control
    /// phase), ns: parse, then table or policer, then free.
    rx_ns_per_frame: f64,
}

/// The attacker's frames for `port`: on x (no group's port) reduces and releases of random
/// groups; on c0 (a child of the member groups) releases, reduces of another epoch and reduces
/// of random groups c0 is no child of. Every one is refused by the access lists.
fn pool(port: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    let e = Epoch::DEFAULT;
    (0..POOL)
        .map(|i| {
            let g = (rng.next_u64() % u64::from(capacity())) as u32;
            let seq = (rng.next_u64() % 1000) as u32;
            match (port, i % 3) {
                (X, 0 | 2) => frame(Kind::Reduce, g, e, seq),
                (X, _) => frame(Kind::Release, g, e, seq),
                (_, 0) => frame(Kind::Release, g % MEMBERS, e, seq),
                (_, 1) => frame(Kind::Reduce, g % MEMBERS, Epoch(7), seq),
                _ => frame(
                    Kind::Reduce,
                    MEMBERS + 1 + g % (CAPACITY - MEMBERS - 1),
                    e,
                    seq,
                ),
            }
        })
        .collect()
}

fn phase(
    name: &str,
    secs: f64,
    flood: Option<(usize, u64)>,
    policer: Option<(usize, PolicerSpec)>,
) -> Phase {
    let mut cfg = BedConfig {
        members: MEMBERS,
        capacity: capacity(),
        barriers: None,
        leaf_timeout_ns: 1_000_000,
        switch_timeout_ns: 1_000_000,
        policers: vec![None; NAMES.len()],
    };
    if let Some((port, spec)) = policer {
        cfg.policers[port] = Some(spec);
    }
    let clock = Clock::new();
    let mut bed = Bed::new(cfg, clock.now_ns());
    // Touch every slot of both tables once, as a switch that has run a while has: the first
    // touch of each page is a page fault, not the switch's work.
    for g in 0..capacity() {
        std::hint::black_box(bed.mid.table.state(GroupId(g)));
        std::hint::black_box(bed.root.table.state(GroupId(g)));
    }
    let frames = flood.map(|(port, _)| pool(port, 0xac1 + port as u64));
    let (mut sent, mut next, mut ring_full, mut passes) = (0u64, 0usize, 0u64, 0u64);
    let start = clock.now_ns();
    let end = start + (secs * 1e9) as u64;
    let spent = run_until(&mut bed, &clock, end, |bed, now| {
        passes += 1;
        let (Some((port, fps)), Some(frames)) = (flood, &frames) else {
            return;
        };
        // Frames due by now at `fps` (0: a full burst every pass). What the port's wire (4096
        // frames, an RX ring) cannot hold is not sent: the flood's rate is what got on the wire.
        let due = if fps == 0 {
            sent + BURST as u64
        } else {
            (now - start) * fps / 1_000_000_000
        };
        let tx = &mut bed.attacker[port];
        while sent < due {
            while sent < due && tx.offer(&frames[next % POOL]).is_ok() {
                next += 1;
                sent += 1;
            }
            if tx.flush().1 > 0 {
                // The wire is full: the rest of what is due now is lost, as at a full RX ring.
                ring_full += due - sent;
                sent = due;
            }
        }
    });
    let elapsed = (clock.now_ns() - start) as f64 / 1e9;
    let (report, bed) = bed.finish();
    let rejected: u64 = NAMES
        .iter()
        .enumerate()
        .map(|(p, _)| {
            bed.rx(p, "drop_not_a_child")
                + bed.rx(p, "drop_not_the_parent")
                + bed.rx(p, "drop_other_epoch")
                + bed.rx(p, "drop_unknown_group")
        })
        .sum();
    let policed = (0..NAMES.len()).map(|p| bed.rx(p, "drop_policed")).sum();
    let port = flood.map_or(C0, |(p, _)| p);
    let rx_ns_per_frame = spent[port] as f64 / bed.rx(port, "frames").max(1) as f64;
    let h = &report.latency;
    Phase {
        name: name.to_string(),
        barriers: h.len(),
        p50_us: h.value_at_quantile(0.5) as f64 / 1e3,
        p99_us: h.value_at_quantile(0.99) as f64 / 1e3,
        resends: report.resends,
        flood_fps: (sent - ring_full) as f64 / elapsed,
        passes,
        ring_full,
        rx_ns_per_frame,
        policed,
        rejected,
        elapsed,
    }
}

/// The median phase of several runs of one kind, by barriers/s (its other figures are that
/// run's, so they belong together).
fn median(mut runs: Vec<Phase>) -> Phase {
    runs.sort_by(|a, b| {
        (a.barriers as f64 / a.elapsed)
            .partial_cmp(&(b.barriers as f64 / b.elapsed))
            .unwrap()
    });
    let n = runs.len();
    runs.swap_remove(n / 2)
}

fn main() {
    // `cargo bench` passes `--bench`; numbers are the phase length, the flood rate, the rounds.
    let nums: Vec<f64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<f64>().ok())
        .collect();
    let secs = nums.first().copied().unwrap_or(0.5);
    let fps = nums.get(1).copied().unwrap_or(500_000.0) as u64;
    let rounds = nums.get(2).copied().unwrap_or(5.0).max(1.0) as usize;
    // Policers: on the non-member port a trickle (it carries nothing legitimate); on the member
    // port twice what the leaf on it sent in the control phase of the round.
    let x_policer = PolicerSpec {
        rate: 1_000,
        burst: 64,
    };
    let rate_name = if fps == 0 {
        "a full burst every pass".to_string()
    } else {
        format!("{:.2} M frames/s", fps as f64 / 1e6)
    };
    println!(
        "acl bench: {MEMBERS} member groups (2 leaves each, back to back), tables of {} groups, one thread, {rounds} rounds of 5 phases of {secs} s, flood {rate_name}; per phase the median round by barriers/s",
        capacity()
    );
    let names = [
        "control (no flood)".to_string(),
        "flood on x (non-member)".to_string(),
        format!("flood on x, x policed at {}/s", x_policer.rate),
        "flood on c0 (member)".to_string(),
        "flood on c0, c0 policed at 2x its own".to_string(),
    ];
    let mut runs: Vec<Vec<Phase>> = (0..names.len()).map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        let control = phase(&names[0], secs, None, None);
        let c0_legit = (2.0 * control.barriers as f64 / control.elapsed) as u64;
        let c0_policer = PolicerSpec {
            rate: c0_legit.max(1000),
            burst: PolicerSpec::default_burst(c0_legit),
        };
        runs[0].push(control);
        runs[1].push(phase(&names[1], secs, Some((X, fps)), None));
        runs[2].push(phase(&names[2], secs, Some((X, fps)), Some((X, x_policer))));
        runs[3].push(phase(&names[3], secs, Some((C0, fps)), None));
        runs[4].push(phase(
            &names[4],
            secs,
            Some((C0, fps)),
            Some((C0, c0_policer)),
        ));
    }
    let phases: Vec<Phase> = runs.into_iter().map(median).collect();
    let line = |p: &Phase| {
        println!(
            "{:>38}: {:>8} barriers ({:>7.0}/s), p50 {:>7.1} µs, p99 {:>8.1} µs, re-sends {:>6} ({:.4}/barrier); flood {:.3} M frames/s, rejected {}, policed {}, lost at a full wire {}; {:.0} passes/s; RX {:.0} ns/frame on the flooded port",
            p.name,
            p.barriers,
            p.barriers as f64 / p.elapsed,
            p.p50_us,
            p.p99_us,
            p.resends,
            p.resends as f64 / p.barriers.max(1) as f64,
            p.flood_fps / 1e6,
            p.rejected,
            p.policed,
            p.ring_full,
            p.passes as f64 / p.elapsed,
            p.rx_ns_per_frame
        );
    };
    for p in &phases {
        line(p);
    }
    let control = &phases[0];
    let per_barrier = |p: &Phase| p.resends as f64 / p.barriers.max(1) as f64;
    println!("ratios to the control phase:");
    for p in &phases[1..] {
        let resend_ratio = if control.resends == 0 {
            format!("{} vs 0", p.resends)
        } else {
            format!("{:.2}", per_barrier(p) / per_barrier(control))
        };
        println!(
            "{:>38}: p50 {:.2}  p99 {:.2}  barriers/s {:.2}  re-sends per barrier {resend_ratio}",
            p.name,
            p.p50_us / control.p50_us,
            p.p99_us / control.p99_us,
            (p.barriers as f64 / p.elapsed) / (control.barriers as f64 / control.elapsed),
        );
    }
    println!(
        "RX cost of a flood frame on x: refused {:.0} ns, policed {:.0} ns (ratio {:.2})",
        phases[1].rx_ns_per_frame,
        phases[2].rx_ns_per_frame,
        phases[2].rx_ns_per_frame / phases[1].rx_ns_per_frame
    );
}
