//! Fault injection on one direction of one port: drop, duplicate, reorder and corrupt frames at
//! set rates, decided by a seeded generator so a run can be repeated exactly. Pure: frames in,
//! frames out, time passed in.

use barrier_protocol::rng::Rng;
use barrier_protocol::wire::field;
use std::collections::VecDeque;

/// Frames the injector handles are copied into this many bytes (barrier frames are 60).
pub const PKT_MAX: usize = 64;

/// A frame held by value while it is delayed, duplicated or damaged.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Pkt {
    pub len: u8,
    pub bytes: [u8; PKT_MAX],
}

impl Pkt {
    /// Copies up to `PKT_MAX` bytes of `frame` (anything longer is not a barrier frame anyway).
    pub fn from_slice(frame: &[u8]) -> Pkt {
        let n = frame.len().min(PKT_MAX);
        let mut bytes = [0u8; PKT_MAX];
        bytes[..n].copy_from_slice(&frame[..n]);
        Pkt {
            len: n as u8,
            bytes,
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl std::fmt::Debug for Pkt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pkt({} bytes)", self.len)
    }
}

/// A probability as a threshold on a uniform u64: `rng < threshold` happens with probability p.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct Chance(u64);

impl Chance {
    fn new(p: f64) -> Chance {
        // NaN and non-positive rates mean never.
        if p.is_nan() || p <= 0.0 {
            Chance(0)
        } else if p >= 1.0 {
            Chance(u64::MAX)
        } else {
            Chance((p * 18_446_744_073_709_551_616.0) as u64)
        }
    }
    #[inline]
    fn hit(self, rng: &mut Rng) -> bool {
        self.0 == u64::MAX || (self.0 != 0 && rng.next_u64() < self.0)
    }
}

/// Which bytes a corruption may hit.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CorruptScope {
    /// Magic, version, kind or flags (bytes 14..18), XOR 0xFF: every such frame is refused by a
    /// correct parser, the software picture of a frame a NIC would drop for a bad FCS.
    #[default]
    Detectable,
    /// Any byte of the barrier header before its checksum (14..38), XOR 0xFF, group, epoch and
    /// sequence included: damage only the header checksum can catch (docs/faults.md); tests
    /// the switch as a link without FCS would.
    Header,
}

/// Rates of one injector, each a probability per frame.
#[derive(Copy, Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct FaultRates {
    pub drop: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub corrupt: f64,
    pub corrupt_scope: CorruptScope,
}

impl FaultRates {
    pub fn is_none(&self) -> bool {
        self.drop <= 0.0 && self.duplicate <= 0.0 && self.reorder <= 0.0 && self.corrupt <= 0.0
    }
}

/// What an injector did, by kind.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FaultCounts {
    pub frames_in: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
}

impl FaultCounts {
    pub fn add(&mut self, o: &FaultCounts) {
        self.frames_in += o.frames_in;
        self.dropped += o.dropped;
        self.duplicated += o.duplicated;
        self.reordered += o.reordered;
        self.corrupted += o.corrupted;
    }
}

/// One direction of one port.
///
/// Per frame, in this order: drop (the frame is gone); corrupt (one byte XOR 0xFF); reorder (the
/// frame is held back and goes out right after the next frame, or after `max_hold_ns` if none
/// comes, so a lone frame is delayed rather than lost); duplicate (a second copy right behind).
pub struct Injector {
    drop: Chance,
    dup: Chance,
    reorder: Chance,
    corrupt: Chance,
    scope: CorruptScope,
    rng: Rng,
    held: Option<(Pkt, u64)>,
    max_hold_ns: u64,
    pub counts: FaultCounts,
    active: bool,
}

impl Injector {
    pub fn new(rates: &FaultRates, seed: u64, max_hold_ns: u64) -> Injector {
        Injector {
            drop: Chance::new(rates.drop),
            dup: Chance::new(rates.duplicate),
            reorder: Chance::new(rates.reorder),
            corrupt: Chance::new(rates.corrupt),
            scope: rates.corrupt_scope,
            rng: Rng::new(seed),
            held: None,
            max_hold_ns,
            counts: FaultCounts::default(),
            active: !rates.is_none(),
        }
    }

    /// False when every rate is zero: callers skip the copy into a `Pkt`.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// One frame enters; the frames to deliver, in order, are appended to `out`.
    pub fn push(&mut self, mut pkt: Pkt, now_ns: u64, out: &mut VecDeque<Pkt>) {
        self.counts.frames_in += 1;
        if self.drop.hit(&mut self.rng) {
            self.counts.dropped += 1;
            return;
        }
        if self.corrupt.hit(&mut self.rng) {
            let (lo, hi) = match self.scope {
                CorruptScope::Detectable => (14, 18),
                CorruptScope::Header => (field::MAGIC, field::TX_TIMESTAMP.end),
            };
            let hi = hi.min(pkt.len as usize);
            if hi > lo {
                let i = lo + self.rng.below((hi - lo) as u64) as usize;
                pkt.bytes[i] ^= 0xFF;
                self.counts.corrupted += 1;
            }
        }
        let copies = if self.dup.hit(&mut self.rng) {
            self.counts.duplicated += 1;
            2
        } else {
            1
        };
        if self.held.is_none() && self.reorder.hit(&mut self.rng) {
            self.counts.reordered += 1;
            self.held = Some((pkt, now_ns));
            if copies == 2 {
                out.push_back(pkt);
            }
            return;
        }
        for _ in 0..copies {
            out.push_back(pkt);
        }
        if let Some((h, _)) = self.held.take() {
            out.push_back(h);
        }
    }

    /// Lets a held frame go once it has waited `max_hold_ns`.
    #[inline]
    pub fn tick(&mut self, now_ns: u64, out: &mut VecDeque<Pkt>) {
        if let Some((h, since)) = self.held {
            if now_ns.saturating_sub(since) >= self.max_hold_ns {
                out.push_back(h);
                self.held = None;
            }
        }
    }

    /// Lets a held frame go now (end of a run).
    pub fn flush(&mut self, out: &mut VecDeque<Pkt>) {
        if let Some((h, _)) = self.held.take() {
            out.push_back(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use barrier_protocol::wire::FRAME_LEN;

    fn pkt(i: u32) -> Pkt {
        let mut b = [0u8; FRAME_LEN];
        b[14] = 0xBA;
        b[22..26].copy_from_slice(&i.to_be_bytes());
        Pkt::from_slice(&b)
    }
    fn id(p: &Pkt) -> u32 {
        u32::from_be_bytes(p.bytes[22..26].try_into().unwrap())
    }

    const N: u32 = 200_000;

    fn run(rates: FaultRates, seed: u64) -> (Injector, Vec<Pkt>) {
        let mut inj = Injector::new(&rates, seed, 1_000);
        let mut out = VecDeque::new();
        for i in 0..N {
            inj.push(pkt(i), u64::from(i), &mut out);
        }
        inj.flush(&mut out);
        (inj, out.into_iter().collect())
    }

    /// Within 5 standard deviations of the binomial expectation.
    fn near(count: u64, p: f64, n: u64) {
        let mean = p * n as f64;
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (count as f64 - mean).abs() <= 5.0 * sd + 1.0,
            "{count} vs expected {mean:.0} ± {sd:.0}"
        );
    }

    #[test]
    fn no_faults_is_identity() {
        let (inj, out) = run(FaultRates::default(), 1);
        assert!(!inj.is_active());
        assert_eq!(out.len(), N as usize);
        assert!(out.iter().enumerate().all(|(i, p)| id(p) == i as u32));
    }

    #[test]
    fn drop_rate_within_tolerance() {
        let (inj, out) = run(
            FaultRates {
                drop: 0.01,
                ..Default::default()
            },
            7,
        );
        near(inj.counts.dropped, 0.01, u64::from(N));
        assert_eq!(out.len() as u64, u64::from(N) - inj.counts.dropped);
        // Order kept, nothing invented.
        assert!(out.windows(2).all(|w| id(&w[0]) < id(&w[1])));
    }

    #[test]
    fn duplicate_rate_within_tolerance() {
        let (inj, out) = run(
            FaultRates {
                duplicate: 0.05,
                ..Default::default()
            },
            8,
        );
        near(inj.counts.duplicated, 0.05, u64::from(N));
        assert_eq!(out.len() as u64, u64::from(N) + inj.counts.duplicated);
        let adjacent_pairs = out.windows(2).filter(|w| id(&w[0]) == id(&w[1])).count() as u64;
        assert_eq!(adjacent_pairs, inj.counts.duplicated);
    }

    #[test]
    fn reorder_swaps_neighbours_and_loses_nothing() {
        let (inj, out) = run(
            FaultRates {
                reorder: 0.02,
                ..Default::default()
            },
            9,
        );
        // A frame is held only when none is held already, so the rate seen is slightly lower.
        near(inj.counts.reordered, 0.02 * (1.0 - 0.02), u64::from(N));
        assert_eq!(out.len(), N as usize);
        let mut ids: Vec<u32> = out.iter().map(id).collect();
        let inversions = ids.windows(2).filter(|w| w[0] > w[1]).count() as u64;
        assert_eq!(inversions, inj.counts.reordered);
        ids.sort_unstable();
        assert!(ids.iter().enumerate().all(|(i, &v)| v == i as u32));
    }

    #[test]
    fn held_frame_leaves_after_max_hold() {
        let mut inj = Injector::new(
            &FaultRates {
                reorder: 1.0,
                ..Default::default()
            },
            1,
            100,
        );
        let mut out = VecDeque::new();
        inj.push(pkt(0), 0, &mut out);
        assert!(out.is_empty());
        inj.tick(99, &mut out);
        assert!(out.is_empty());
        inj.tick(100, &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn corrupt_rate_and_scope() {
        let (inj, out) = run(
            FaultRates {
                corrupt: 0.03,
                ..Default::default()
            },
            10,
        );
        near(inj.counts.corrupted, 0.03, u64::from(N));
        // Detectable scope: only bytes 14..18 changed, each by XOR 0xFF.
        let damaged = out
            .iter()
            .filter(|p| p.bytes[14..18] != [0xBA, 0, 0, 0])
            .count() as u64;
        assert_eq!(damaged, inj.counts.corrupted);
        assert!(out.iter().all(|p| p.bytes[18..22] == [0; 4]));

        let (inj, out) = run(
            FaultRates {
                corrupt: 1.0,
                corrupt_scope: CorruptScope::Header,
                ..Default::default()
            },
            11,
        );
        assert_eq!(inj.counts.corrupted, u64::from(N));
        let mut hit = [false; 38];
        for (i, p) in out.iter().enumerate() {
            let clean = pkt(i as u32);
            let diffs: Vec<usize> = (0..FRAME_LEN)
                .filter(|&b| p.bytes[b] != clean.bytes[b])
                .collect();
            assert_eq!(diffs.len(), 1);
            assert!((14..38).contains(&diffs[0]));
            hit[diffs[0]] = true;
        }
        assert!(
            hit[14..38].iter().all(|&h| h),
            "every header byte can be hit"
        );
    }

    #[test]
    fn same_seed_same_faults_other_seed_other_faults() {
        let r = FaultRates {
            drop: 0.1,
            duplicate: 0.1,
            reorder: 0.1,
            corrupt: 0.1,
            ..Default::default()
        };
        let (_, a) = run(r, 42);
        let (_, b) = run(r, 42);
        let (_, c) = run(r, 43);
        assert!(a == b);
        assert!(a != c);
    }

    #[test]
    fn rng_below_is_uniform_enough() {
        let mut rng = Rng::new(5);
        let mut buckets = [0u64; 10];
        for _ in 0..100_000 {
            buckets[rng.below(10) as usize] += 1;
        }
        for b in buckets {
            near(b, 0.1, 100_000);
        }
    }
}
