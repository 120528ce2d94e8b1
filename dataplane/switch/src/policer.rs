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

use std::sync::Arc;

pub use barrier_mgmt::policer::{PolicerError, PolicerRegister, PolicerSpec};

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
        if self.register.generation() != self.seen {
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
    use std::sync::atomic::Ordering;

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
