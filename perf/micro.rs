//! Microbenchmarks of the switch's per-frame steps (`cargo bench -p barrier-switch --bench
//! micro [-- MILLIONS]`), each next to a baseline measured in the same run, so the ratio says
//! what the step costs beyond the least any implementation must do:
//!
//! | step | baseline |
//! | --- | --- |
//! | `FrameRepr::parse` of a reduce | reading the 26 header bytes and summing them (the checksum alone) |
//! | `FrameRepr::emit` of a release | copying a prepared 60-byte frame |
//! | `switch::on_event` (pure, no atomics) | - (the logic the table step adds a CAS to) |
//! | `GroupTable::apply`, one thread, 1,024 groups | `fetch_add` on one `AtomicU64` per 64-byte slot, same groups |
//! | `GroupTable::apply`, two threads on the same groups (each one child) | the same two threads on disjoint groups |
//! | scheduler round-robin push + pop, 1,024 groups on one port | `VecDeque` push + pop of the same values |
//!
//! Single-threaded numbers are the median of 7 repetitions; ns per operation. No DPDK, no root.
//! The machines are shared: read the ratios, not the nanoseconds (docs/performance.md).

use barrier_protocol::switch::{on_event, Event, GroupConfig, GroupState};
use barrier_protocol::table::GroupTable;
use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{Epoch, GroupId, PortIdx, PortSet, Seq};
use barrier_switch::scheduler::round_robin::{PendingFrame, RoundRobin};
use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Barrier};
use std::time::Instant;

const GROUPS: u32 = 1024;

fn main() {
    let millions = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<f64>().ok())
        .unwrap_or(2.0);
    let n = (millions * 1e6) as u64;
    println!("micro: {n} operations per repetition, median of 7 (ns per operation)");
    let rows = [
        ("frame parse", parse(n), sum_header(n)),
        ("frame emit", emit(n), copy_frame(n)),
        ("table apply, 1 thread", table_apply(n), atomic_add(n)),
        (
            "table apply, 2 threads, same groups",
            two_threads(n, true),
            two_threads(n, false),
        ),
        ("round-robin push+pop", round_robin(n), vecdeque(n)),
    ];
    println!(
        "{:<38} {:>10} {:>10} {:>8}",
        "step", "ns/op", "baseline", "ratio"
    );
    for (name, subject, base) in rows {
        println!(
            "{name:<38} {subject:>10.2} {base:>10.2} {:>8.2}",
            subject / base
        );
    }
    println!(
        "{:<38} {:>10.2}   (pure logic, for the table rows)",
        "on_event, no atomics",
        on_event_pure(n)
    );
}

/// Median ns per operation of `f(n)` over 7 repetitions.
fn median(n: u64, mut f: impl FnMut(u64)) -> f64 {
    let mut t: Vec<f64> = (0..7)
        .map(|_| {
            let s = Instant::now();
            f(n);
            s.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[3]
}

fn reduce_frame() -> [u8; FRAME_LEN] {
    FrameRepr {
        dst: MacAddr::BROADCAST,
        src: MacAddr([2, 0, 0, 0, 0, 1]),
        kind: Kind::Reduce,
        flags: Flags::empty(),
        group: GroupId(7),
        epoch: Epoch::DEFAULT,
        seq: Seq(42),
        tx_timestamp: None,
    }
    .to_bytes()
}

fn parse(n: u64) -> f64 {
    let f = reduce_frame();
    median(n, |n| {
        for _ in 0..n {
            black_box(FrameRepr::parse(black_box(&f[..])).is_ok());
        }
    })
}

fn sum_header(n: u64) -> f64 {
    let f = reduce_frame();
    median(n, |n| {
        for _ in 0..n {
            let b = black_box(&f[14..40]);
            let s: u32 = b
                .chunks_exact(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                .sum();
            black_box(s);
        }
    })
}

fn emit(n: u64) -> f64 {
    let r = FrameRepr::parse(&reduce_frame()).unwrap();
    let r = FrameRepr {
        kind: Kind::Release,
        ..r
    };
    let mut buf = [0u8; FRAME_LEN];
    median(n, |n| {
        for i in 0..n {
            let r = FrameRepr {
                seq: Seq(i as u32),
                ..r
            };
            black_box(black_box(&r).emit(&mut buf));
        }
    })
}

fn copy_frame(n: u64) -> f64 {
    let f = reduce_frame();
    let mut buf = [0u8; FRAME_LEN];
    median(n, |n| {
        for _ in 0..n {
            buf.copy_from_slice(black_box(&f));
            black_box(&mut buf);
        }
    })
}

fn p(i: u8) -> PortIdx {
    PortIdx::new(i).unwrap()
}

fn two_child_table() -> GroupTable {
    let t = GroupTable::new(GROUPS);
    let children = PortSet::single(p(0)).union(PortSet::single(p(1)));
    for g in 0..GROUPS {
        t.configure(GroupId(g), GroupConfig::root(children))
            .unwrap();
    }
    t
}

fn reduce(port: u8, seq: u32) -> Event {
    Event::Reduce {
        port: p(port),
        epoch: Epoch::DEFAULT,
        seq: Seq(seq),
    }
}

/// Both children of every group in turn: a record, then a completion, per group per round.
fn table_apply(n: u64) -> f64 {
    let t = two_child_table();
    let mut seq = 0u32;
    median(n, |n| {
        let mut i = 0u64;
        while i < n {
            for port in 0..2 {
                for g in 0..GROUPS {
                    black_box(t.apply(GroupId(g), reduce(port, seq)).unwrap());
                }
            }
            seq = seq.wrapping_add(1);
            i += 2 * u64::from(GROUPS);
        }
    })
}

fn atomic_add(n: u64) -> f64 {
    #[repr(align(64))]
    struct Line(AtomicU64);
    let lines: Vec<Line> = (0..GROUPS).map(|_| Line(AtomicU64::new(0))).collect();
    median(n, |n| {
        let mut i = 0u64;
        while i < n {
            for l in &lines {
                black_box(l.0.fetch_add(1, Relaxed));
            }
            i += u64::from(GROUPS);
        }
    })
}

fn on_event_pure(n: u64) -> f64 {
    let cfg = GroupConfig::root(PortSet::single(p(0)).union(PortSet::single(p(1))));
    let mut states = vec![GroupState::fresh(); GROUPS as usize];
    let mut seq = 0u32;
    median(n, |n| {
        let mut i = 0u64;
        while i < n {
            for port in 0..2 {
                for st in states.iter_mut() {
                    let (next, o, a) = on_event(&cfg, *st, reduce(port, seq));
                    black_box((o, a));
                    *st = next;
                }
            }
            seq = seq.wrapping_add(1);
            i += 2 * u64::from(GROUPS);
        }
    })
}

/// Two threads, each one child of the groups it works on, `n` applies each. `shared`: both
/// work on all groups (every group's two reduces come from the two threads, as from two RX
/// lcores); otherwise each works on its own half with both children (no line shared).
fn two_threads(n: u64, shared: bool) -> f64 {
    let t = Arc::new(two_child_table());
    let start = Arc::new(Barrier::new(3));
    let handles: Vec<_> = (0..2u8)
        .map(|who| {
            let t = t.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let (lo, hi) = if shared {
                    (0, GROUPS)
                } else {
                    (
                        u32::from(who) * GROUPS / 2,
                        (u32::from(who) + 1) * GROUPS / 2,
                    )
                };
                let mut i = 0u64;
                let mut seq = 0u32;
                while i < n {
                    if shared {
                        for g in lo..hi {
                            black_box(t.apply(GroupId(g), reduce(who, seq)).unwrap());
                        }
                        i += u64::from(hi - lo);
                    } else {
                        for port in 0..2 {
                            for g in lo..hi {
                                black_box(t.apply(GroupId(g), reduce(port, seq)).unwrap());
                            }
                        }
                        i += 2 * u64::from(hi - lo);
                    }
                    seq = seq.wrapping_add(1);
                }
            })
        })
        .collect();
    start.wait();
    let s = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    // Wall time per operation of one thread (both ran n operations side by side).
    s.elapsed().as_nanos() as f64 / n as f64
}

fn pending(seq: u32) -> PendingFrame {
    PendingFrame {
        kind: Kind::Release,
        epoch: Epoch::DEFAULT,
        seq: Seq(seq),
        retransmit: false,
    }
}

fn round_robin(n: u64) -> f64 {
    let mut rr = RoundRobin::new(1);
    median(n, |n| {
        let mut i = 0u64;
        while i < n {
            for g in 0..GROUPS {
                rr.push(0, GroupId(g), pending(i as u32));
            }
            while let Some(x) = rr.pop(0) {
                black_box(x);
            }
            i += u64::from(GROUPS);
        }
    })
}

fn vecdeque(n: u64) -> f64 {
    let mut q: VecDeque<(GroupId, PendingFrame)> = VecDeque::with_capacity(GROUPS as usize);
    median(n, |n| {
        let mut i = 0u64;
        while i < n {
            for g in 0..GROUPS {
                q.push_back((GroupId(g), pending(i as u32)));
            }
            while let Some(x) = q.pop_front() {
                black_box(x);
            }
            i += u64::from(GROUPS);
        }
    })
}
