//! The per-port policer for barrier frames: a token bucket on the RX lcore, checked after a frame
//! parses and before the group table is touched. A frame over the port's rate is freed and counted
//! (`drop_policed`), so a flood on one port costs the switch a parse and this check, and cannot
//! make the table, the scheduler's ring or the egress ports work for it.
//!
//! The bucket is plain fields owned by the RX poller that polls the queue: no atomics, no
//! allocation, no clock of its own (the caller passes the loop's `now_ns`). Arithmetic is in
//! frame-nanoseconds (one frame = 10^9 units), so any rate from 1 frame/s to 10^9 frames/s refills
//! exactly, without rounding drift, from the nanosecond clock.

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
