//! The per-port policer for barrier frames: a token bucket on the RX lcore, checked after a frame
//! parses and before the group table is touched. A frame over the port's rate is freed and counted
//! (`drop_policed`), so a flood on one port costs the switch a parse and this check, and cannot
//! make the table, the scheduler's ring or the egress ports work for it.
//!
//! The bucket is plain fields owned by the RX poller that polls the queue: no atomics, no
//! allocation, no clock of its own (the caller passes the loop's `now_ns`). Arithmetic is in
//! frame-nanoseconds (one frame = 10^9 units), so any rate from 1 frame/s to 10^9 frames/s refills
//! exactly, without rounding drift, from the nanosecond clock.
//!
//! Management changes a port's policer while the switch runs (`barrierctl port set`, the
//! control socket's `port_set`) through the port's [`PolicerRegister`]: one word of spec and a
//! generation, written by the management thread; each RX queue's [`QueuePolicer`] checks the
//! generation once per received burst and rebuilds its bucket, in place, when it moved.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A port's policer as configured (`ports[].policer_rate`, `ports[].policer_burst`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicerSpec {
    /// Barrier frames per second let through in the long run.
    pub rate: u64,
    /// Frames let through back to back after a quiet period (the bucket's depth).
    pub burst: u64,
}

impl PolicerSpec {
    /// The highest rate accepted (frames/s): far above any port's line rate in 60-byte frames.
    pub const MAX_RATE: u64 = 1_000_000_000;
    /// The deepest bucket accepted (frames).
    pub const MAX_BURST: u64 = 100_000_000;

    /// The burst when the file gives only a rate: 10 ms of traffic at the rate, at least 64
    /// frames (two receive bursts).
    pub fn default_burst(rate: u64) -> u64 {
        (rate / 100).max(64)
    }

    /// The share of one of a port's `queues` RX queues: each queue's poller has its own bucket
    /// (one owner each), with the rate and the burst split evenly, at least 1 each.
    pub fn per_queue(&self, queues: u16) -> PolicerSpec {
        let q = u64::from(queues.max(1));
        PolicerSpec {
            rate: (self.rate / q).max(1),
            burst: (self.burst / q).max(1),
        }
    }
}

/// Why a policer cannot be set as asked (the control socket's `port_set`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicerError {
    /// The rate is outside `queues..=MAX_RATE` (0 turns the policer off and takes no burst).
    #[error("policer_rate {rate}: give 0 (off) or {min}..={max} frames/s{why}")]
    Rate {
        rate: u64,
        min: u64,
        max: u64,
        /// Why the minimum is what it is, when it is not 1.
        why: String,
    },
    /// The burst is outside `queues..=MAX_BURST`.
    #[error("policer_burst {burst}: give {min}..={max} frames{why}")]
    Burst {
        burst: u64,
        min: u64,
        max: u64,
        why: String,
    },
    /// A burst with the policer turned off.
    #[error(
        "policer_burst {0} with policer_rate 0: a burst needs a rate (0 turns the policer off)"
    )]
    BurstWithoutRate(u64),
}

impl PolicerSpec {
    /// The policer of a port with `queues` RX queues for a rate (0: off) and an optional burst
    /// (default: [`PolicerSpec::default_burst`]), checked as the file's keys are: each queue's
    /// share of rate and burst must be at least 1 (`per_queue`).
    pub fn checked(
        rate: u64,
        burst: Option<u64>,
        queues: u16,
    ) -> Result<Option<PolicerSpec>, PolicerError> {
        let q = u64::from(queues.max(1));
        let why = if q > 1 {
            format!(" (the port has {q} RX queues, each polices its share)")
        } else {
            String::new()
        };
        if rate == 0 {
            return match burst {
                None | Some(0) => Ok(None),
                Some(b) => Err(PolicerError::BurstWithoutRate(b)),
            };
        }
        if rate < q || rate > Self::MAX_RATE {
            return Err(PolicerError::Rate {
                rate,
                min: q,
                max: Self::MAX_RATE,
                why,
            });
        }
        let burst = burst.unwrap_or_else(|| Self::default_burst(rate));
        if burst < q || burst > Self::MAX_BURST {
            return Err(PolicerError::Burst {
                burst,
                min: q,
                max: Self::MAX_BURST,
                why,
            });
        }
        Ok(Some(PolicerSpec { rate, burst }))
    }

    /// One word: rate in bits 0..32, burst in 32..64 (both fit: `MAX_RATE` < 2^30,
    /// `MAX_BURST` < 2^27). 0: no policer (a policer's rate is never 0).
    fn pack(spec: Option<PolicerSpec>) -> u64 {
        spec.map_or(0, |s| {
            (s.rate.min(Self::MAX_RATE) & 0xffff_ffff) | (s.burst.min(Self::MAX_BURST) << 32)
        })
    }

    fn unpack(w: u64) -> Option<PolicerSpec> {
        (w != 0).then_some(PolicerSpec {
            rate: w & 0xffff_ffff,
            burst: w >> 32,
        })
    }
}

/// A port's policer as management sets it while the switch runs: one register per port,
/// written by the management thread, read by the port's RX pollers on their lcores.
///
/// The spec is one word ([`PolicerSpec`] packed, 0: off), so a reader never sees half of a
/// change; `generation` counts the changes. A poller ([`QueuePolicer`]) compares the generation
/// with the one it last saw once per received burst (one load) and re-reads the spec only when
/// it moved: no lock, no allocation, and the per-frame call stays [`TokenBucket::allow`]. The
/// writer stores the spec before it bumps the generation (release; the reader's load of the
/// generation is an acquire), so a poller that sees a new generation reads that spec or a
/// later one; a later one is read again, harmlessly, when its own generation is seen.
#[derive(Debug, Default)]
pub struct PolicerRegister {
    spec: AtomicU64,
    generation: AtomicU64,
}

impl PolicerRegister {
    /// A register holding `spec` (generation 0).
    pub fn new(spec: Option<PolicerSpec>) -> PolicerRegister {
        PolicerRegister {
            spec: AtomicU64::new(PolicerSpec::pack(spec)),
            generation: AtomicU64::new(0),
        }
    }

    /// The port's policer now (`None`: off).
    pub fn get(&self) -> Option<PolicerSpec> {
        PolicerSpec::unpack(self.spec.load(Ordering::Acquire))
    }

    /// How many times it was set since the switch started.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Publishes a new policer for the port (`None`: off); every RX queue of the port takes it
    /// at its next received burst, with a full bucket. Returns the new generation.
    pub fn set(&self, spec: Option<PolicerSpec>) -> u64 {
        self.spec.store(PolicerSpec::pack(spec), Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel) + 1
    }
}

/// One RX queue's policer: its own token bucket (plain fields, one owner) following the port's
/// [`PolicerRegister`] with this queue's share (`PolicerSpec::per_queue`).
#[derive(Debug)]
pub struct QueuePolicer {
    register: Arc<PolicerRegister>,
    queues: u16,
    seen: u64,
    /// The bucket of the policer in force; `None`: the port is not policed now.
    pub bucket: Option<TokenBucket>,
}

impl QueuePolicer {
    /// One of a port's `queues` RX queues, following `register` from `now_ns`.
    pub fn new(register: Arc<PolicerRegister>, queues: u16, now_ns: u64) -> QueuePolicer {
        let mut q = QueuePolicer {
            register,
            queues,
            seen: 0,
            bucket: None,
        };
        q.reload(now_ns);
        q
    }

    fn reload(&mut self, now_ns: u64) {
        self.seen = self.register.generation();
        self.bucket = self
            .register
            .get()
            .map(|s| TokenBucket::new(s.per_queue(self.queues), now_ns));
    }

    /// Once per received burst, before its frames: takes a policer management changed (one
    /// load when nothing changed; a new bucket, full, in place when it did).
    #[inline]
    pub fn refresh(&mut self, now_ns: u64) {
        if self.register.generation.load(Ordering::Acquire) != self.seen {
            self.reload(now_ns);
        }
    }
}

const UNIT: u128 = 1_000_000_000;

/// A token bucket: `rate` frames/s, at most `burst` frames of credit, starting full.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: u64,
    /// Capacity in frame-ns: burst * 10^9.
    cap: u128,
    /// Credit in frame-ns.
    tokens: u128,
    last_ns: u64,
}

impl TokenBucket {
    pub fn new(spec: PolicerSpec, now_ns: u64) -> TokenBucket {
        let cap = u128::from(spec.burst.max(1)) * UNIT;
        TokenBucket {
            rate: spec.rate,
            cap,
            tokens: cap,
            last_ns: now_ns,
        }
    }

    /// One frame at `now_ns`: true if it may pass (one frame of credit taken), false if it is
    /// over the rate. A clock that goes backwards adds no credit.
    #[inline]
    pub fn allow(&mut self, now_ns: u64) -> bool {
        if now_ns > self.last_ns {
            let dt = u128::from(now_ns - self.last_ns);
            self.last_ns = now_ns;
            // dt < 2^64 and rate <= 2^30: no overflow in u128.
            self.tokens = (self.tokens + dt * u128::from(self.rate)).min(self.cap);
        }
        if self.tokens >= UNIT {
            self.tokens -= UNIT;
            true
        } else {
            false
        }
    }

    /// Whole frames of credit left.
    pub fn available(&self) -> u64 {
        (self.tokens / UNIT) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn bucket(rate: u64, burst: u64) -> TokenBucket {
        TokenBucket::new(PolicerSpec { rate, burst }, 1_000)
    }

    fn passed(b: &mut TokenBucket, n: u64, now: u64) -> u64 {
        (0..n).filter(|_| b.allow(now)).count() as u64
    }

    #[test]
    fn starts_full_and_lets_exactly_the_burst_through_at_one_instant() {
        let mut b = bucket(1000, 50);
        assert_eq!(b.available(), 50);
        assert_eq!(passed(&mut b, 200, 1_000), 50);
        assert_eq!(b.available(), 0);
        assert!(!b.allow(1_000));
    }

    #[test]
    fn refills_at_the_rate_exactly() {
        // 1000 frames/s: one frame of credit per millisecond, none before.
        let mut b = bucket(1000, 10);
        assert_eq!(passed(&mut b, 10, 1_000), 10);
        assert!(!b.allow(1_000 + 999_999));
        assert!(b.allow(1_000 + 1_000_000));
        assert!(!b.allow(1_000 + 1_000_000));
        // 7.5 ms later: 7 frames (the half frame of credit stays).
        let t = 1_000 + 8_500_000;
        assert_eq!(passed(&mut b, 100, t), 7);
        // The half frame plus another half: one more.
        assert_eq!(passed(&mut b, 100, t + 500_000), 1);
    }

    #[test]
    fn credit_is_capped_at_the_burst() {
        let mut b = bucket(1000, 10);
        assert_eq!(passed(&mut b, 10, 1_000), 10);
        // An hour idle: still only the burst.
        let t = 1_000 + 3600 * S;
        assert_eq!(passed(&mut b, 1000, t), 10);
    }

    #[test]
    fn a_flood_over_the_rate_passes_only_the_rate_plus_the_burst() {
        // 100 k frames/s offered 1 M frames/s for one second, in bursts of 32 every 32 µs.
        let (rate, burst) = (100_000, 1_000);
        let mut b = bucket(rate, burst);
        let mut ok = 0u64;
        let mut offered = 0u64;
        let mut now = 1_000;
        while now < 1_000 + S {
            ok += passed(&mut b, 32, now);
            offered += 32;
            now += 32_000;
        }
        assert_eq!(offered, 1_000_000);
        // Credit earned over the second (rate x time, the last burst at 1 s - 32 µs) plus the
        // starting burst.
        let earned = rate * (S - 32_000) / S;
        assert_eq!(ok, earned + burst);
    }

    #[test]
    fn a_clock_that_goes_back_adds_nothing_and_extreme_values_do_not_overflow() {
        let b = bucket(PolicerSpec::MAX_RATE, PolicerSpec::MAX_BURST);
        assert_eq!(b.available(), PolicerSpec::MAX_BURST);
        let mut b = bucket(1, 1);
        assert!(b.allow(1_000));
        assert!(!b.allow(500));
        assert!(!b.allow(1_000));
        assert!(b.allow(1_000 + S));
        // u64::MAX ns later: capped at one frame.
        let mut b = bucket(PolicerSpec::MAX_RATE, 1);
        assert!(b.allow(u64::MAX));
        assert!(!b.allow(u64::MAX));
    }

    #[test]
    fn checked_takes_the_files_range_and_names_what_is_wrong() {
        let ok = |r, b, q| PolicerSpec::checked(r, b, q).unwrap();
        let err = |r, b, q| PolicerSpec::checked(r, b, q).unwrap_err().to_string();
        assert_eq!(ok(0, None, 1), None);
        assert_eq!(ok(0, Some(0), 4), None);
        assert_eq!(
            ok(1000, None, 1),
            Some(PolicerSpec {
                rate: 1000,
                burst: 64
            })
        );
        assert_eq!(
            ok(PolicerSpec::MAX_RATE, Some(PolicerSpec::MAX_BURST), 1),
            Some(PolicerSpec {
                rate: PolicerSpec::MAX_RATE,
                burst: PolicerSpec::MAX_BURST
            })
        );
        assert_eq!(
            err(2_000_000_000, None, 1),
            "policer_rate 2000000000: give 0 (off) or 1..=1000000000 frames/s"
        );
        assert_eq!(
            err(3, None, 4),
            "policer_rate 3: give 0 (off) or 4..=1000000000 frames/s (the port has 4 RX queues, each polices its share)"
        );
        assert_eq!(
            err(100, Some(0), 1),
            "policer_burst 0: give 1..=100000000 frames"
        );
        assert_eq!(
            err(100, Some(100_000_001), 1),
            "policer_burst 100000001: give 1..=100000000 frames"
        );
        assert!(err(0, Some(5), 1).contains("a burst needs a rate"));
    }

    #[test]
    fn the_register_packs_every_spec_it_accepts() {
        for spec in [
            None,
            Some(PolicerSpec { rate: 1, burst: 1 }),
            Some(PolicerSpec {
                rate: PolicerSpec::MAX_RATE,
                burst: PolicerSpec::MAX_BURST,
            }),
            Some(PolicerSpec {
                rate: 123_456,
                burst: 789,
            }),
        ] {
            let r = PolicerRegister::new(spec);
            assert_eq!((r.get(), r.generation()), (spec, 0));
            assert_eq!(r.set(None), 1);
            assert_eq!(r.get(), None);
            assert_eq!(r.set(spec), 2);
            assert_eq!(r.get(), spec);
        }
    }

    #[test]
    fn a_queue_takes_a_change_at_its_next_refresh_and_only_then() {
        let reg = Arc::new(PolicerRegister::new(None));
        let mut q = QueuePolicer::new(reg.clone(), 2, 0);
        assert!(q.bucket.is_none());
        reg.set(Some(PolicerSpec {
            rate: 1000,
            burst: 10,
        }));
        assert!(q.bucket.is_none(), "a change before the refresh");
        q.refresh(7);
        // this queue's share: 500 frames/s, burst 5, full
        let b = q.bucket.as_mut().expect("policed after the refresh");
        assert_eq!((b.rate, b.available()), (500, 5));
        assert_eq!(passed(b, 10, 7), 5);
        // nothing changed: the same bucket, still empty
        q.refresh(7);
        assert!(!q.bucket.as_mut().unwrap().allow(7));
        // off
        reg.set(None);
        q.refresh(8);
        assert!(q.bucket.is_none());
    }

    /// The management thread flips the spec while a poller refreshes: every bucket the poller
    /// builds is one of the specs written, never half of one and half of another.
    #[test]
    fn a_poller_never_sees_half_a_change() {
        let a = PolicerSpec { rate: 7, burst: 3 };
        let b = PolicerSpec {
            rate: 900_000_000,
            burst: 90_000_000,
        };
        let reg = Arc::new(PolicerRegister::new(Some(a)));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (reg, stop) = (reg.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) || n < 10_000 {
                    reg.set([Some(a), None, Some(b)][(n % 3) as usize]);
                    n += 1;
                }
            })
        };
        let mut q = QueuePolicer::new(reg.clone(), 1, 0);
        let mut seen = [false; 3];
        for i in 0..200_000u64 {
            q.refresh(i);
            match q.bucket.as_ref().map(|k| (k.rate, k.cap / UNIT)) {
                None => seen[1] = true,
                Some((7, 3)) => seen[0] = true,
                Some((900_000_000, 90_000_000)) => seen[2] = true,
                Some(other) => panic!("a torn spec: {other:?}"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        q.refresh(u64::MAX);
        assert_eq!(
            q.bucket.as_ref().map(|k| k.rate),
            reg.get().map(|s| s.rate),
            "the last change was not taken"
        );
        assert!(seen.iter().filter(|s| **s).count() >= 1);
    }

    #[test]
    fn per_queue_shares_split_rate_and_burst() {
        let s = PolicerSpec {
            rate: 1000,
            burst: 10,
        };
        assert_eq!(
            s.per_queue(4),
            PolicerSpec {
                rate: 250,
                burst: 2
            }
        );
        assert_eq!(s.per_queue(1), s);
        assert_eq!(s.per_queue(0), s);
        assert_eq!(
            PolicerSpec { rate: 3, burst: 1 }.per_queue(8),
            PolicerSpec { rate: 1, burst: 1 }
        );
        assert_eq!(PolicerSpec::default_burst(1_000_000), 10_000);
        assert_eq!(PolicerSpec::default_burst(10), 64);
    }
}
