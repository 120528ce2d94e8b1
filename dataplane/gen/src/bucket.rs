//! Open-loop pacing: a token bucket on a tick counter (the TSC in production, nanoseconds in
//! tests). Integer arithmetic in "token x hz" units, so no rounding drift accumulates however
//! often it is refilled.

/// A token bucket: `rate` tokens per second, at most `burst` tokens stored.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    rate: u64,
    hz: u64,
    /// Credit in token*hz units: one token is `hz` credit.
    credit: u128,
    cap: u128,
    last: u64,
}

impl TokenBucket {
    /// A bucket that starts empty at tick `now`; the counter runs at `hz` ticks per second.
    pub fn new(rate_per_s: u64, burst: u64, hz: u64, now: u64) -> Self {
        assert!(hz > 0, "tick rate must be known");
        let burst = burst.max(1);
        TokenBucket {
            rate: rate_per_s,
            hz,
            credit: 0,
            cap: u128::from(burst) * u128::from(hz),
            last: now,
        }
    }

    /// Tokens per second.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Adds the credit earned since the last refill. A clock that went backwards adds nothing.
    #[inline]
    pub fn refill(&mut self, now: u64) {
        if now > self.last {
            let earned = u128::from(now - self.last) * u128::from(self.rate);
            self.credit = (self.credit + earned).min(self.cap);
            self.last = now;
        }
    }

    /// Whole tokens available now.
    #[inline]
    pub fn available(&self) -> u64 {
        (self.credit / u128::from(self.hz)) as u64
    }

    /// Takes up to `want` tokens; returns how many were taken.
    #[inline]
    pub fn take(&mut self, want: u64) -> u64 {
        let n = want.min(self.available());
        self.credit -= u128::from(n) * u128::from(self.hz);
        n
    }

    /// Takes one token if there is one.
    #[inline]
    pub fn try_take_one(&mut self) -> bool {
        if self.credit >= u128::from(self.hz) {
            self.credit -= u128::from(self.hz);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: u64 = 1_000_000_000;

    #[test]
    fn earns_rate_per_second_and_starts_empty() {
        let mut b = TokenBucket::new(1_000_000, 1_000_000, NS, 0);
        assert_eq!(b.available(), 0);
        b.refill(1_000_000); // 1 ms
        assert_eq!(b.available(), 1000);
        assert_eq!(b.take(400), 400);
        assert_eq!(b.take(1000), 600);
        assert_eq!(b.take(1), 0);
    }

    #[test]
    fn burst_caps_stored_tokens() {
        let mut b = TokenBucket::new(1_000_000, 32, NS, 0);
        b.refill(NS); // a whole second idle
        assert_eq!(b.available(), 32);
    }

    #[test]
    fn many_small_refills_do_not_drift() {
        // 3 frames per µs at a clock of 2.5 GHz, refilled every 7 ticks for one second: exactly
        // rate tokens, because fractions of a token are carried, not rounded away.
        let hz = 2_500_000_000u64;
        let rate = 3_000_000u64;
        let mut b = TokenBucket::new(rate, u64::MAX / hz, hz, 0);
        let mut taken = 0;
        let mut t = 0;
        while t < hz {
            t = (t + 7).min(hz);
            b.refill(t);
            taken += b.take(u64::MAX);
        }
        assert_eq!(taken, rate);
    }

    #[test]
    fn one_at_a_time_matches_rate_within_one() {
        let mut b = TokenBucket::new(123_457, 8, NS, 0);
        let mut sent = 0u64;
        for t in (0..NS).step_by(997) {
            b.refill(t);
            while b.try_take_one() {
                sent += 1;
            }
        }
        assert!((123_455..=123_457).contains(&sent), "{sent}");
    }

    #[test]
    fn clock_going_back_earns_nothing() {
        let mut b = TokenBucket::new(1000, 1000, NS, NS);
        b.refill(NS / 2);
        assert_eq!(b.available(), 0);
        b.refill(NS + NS / 10);
        assert_eq!(b.available(), 100);
    }
}
