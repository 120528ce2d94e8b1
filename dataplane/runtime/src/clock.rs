//! The process's monotonic clock, shared by every loop so that times compare. On DPDK it reads
//! the TSC (a few cycles; the loops read it on every pass), elsewhere the OS monotonic clock.
//! Reading (`ticks`) and converting (`ns`) are separate so a hot path can stamp raw ticks and
//! convert later; `now_ns` does both.

use std::time::Instant;

#[derive(Copy, Clone, Debug)]
pub enum Clock {
    /// `Instant`: ticks are nanoseconds since `origin`.
    Os { origin: Instant },
    /// A cycle counter: `ns = (ticks - origin) * mult >> 32`, with `mult = 1e9 * 2^32 / hz`.
    Counter {
        origin: u64,
        mult: u64,
        hz: u64,
        read: fn() -> u64,
    },
}

impl Clock {
    /// The OS monotonic clock (no EAL needed).
    pub fn new() -> Self {
        Clock::Os {
            origin: Instant::now(),
        }
    }

    /// A clock on a cycle counter `read` that ticks `hz` times a second; the OS clock if `hz`
    /// is 0.
    pub fn from_counter(read: fn() -> u64, hz: u64) -> Self {
        if hz == 0 {
            return Clock::new();
        }
        Clock::Counter {
            origin: read(),
            mult: ((1_000_000_000u128 << 32) / u128::from(hz)) as u64,
            hz,
            read,
        }
    }

    /// DPDK's TSC at the rate EAL measured (EAL must be initialised; the OS clock otherwise).
    #[cfg(feature = "dpdk")]
    pub fn tsc() -> Self {
        Self::from_counter(dpdk::tsc, dpdk::tsc_hz())
    }

    /// Built without DPDK (no feature `dpdk`): the OS clock, as with EAL not initialised.
    #[cfg(not(feature = "dpdk"))]
    pub fn tsc() -> Self {
        Self::new()
    }

    /// The raw reading: counter ticks, or nanoseconds for the OS clock.
    #[inline]
    pub fn ticks(&self) -> u64 {
        match *self {
            Clock::Os { origin } => origin.elapsed().as_nanos() as u64,
            Clock::Counter { read, .. } => read(),
        }
    }

    /// Ticks per second.
    pub fn hz(&self) -> u64 {
        match *self {
            Clock::Os { .. } => 1_000_000_000,
            Clock::Counter { hz, .. } => hz,
        }
    }

    /// Nanoseconds since the clock was made, for a `ticks` value read from it.
    #[inline]
    pub fn ns(&self, ticks: u64) -> u64 {
        match *self {
            Clock::Os { .. } => ticks,
            Clock::Counter { origin, mult, .. } => {
                // u128: hours of a GHz counter times a 32.32 multiplier do not fit u64.
                ((u128::from(ticks.saturating_sub(origin)) * u128::from(mult)) >> 32) as u64
            }
        }
    }

    /// Nanoseconds since the clock was made.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.ns(self.ticks())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    static FAKE: AtomicU64 = AtomicU64::new(1_000);

    fn fake() -> u64 {
        FAKE.load(Ordering::Relaxed)
    }

    #[test]
    fn counter_clock_converts_ticks_to_nanoseconds() {
        // 2.5 GHz: 2.5 ticks per ns.
        let c = Clock::from_counter(fake, 2_500_000_000);
        assert_eq!(c.now_ns(), 0);
        assert_eq!(c.hz(), 2_500_000_000);
        FAKE.store(1_000 + 2_500_000_000, Ordering::Relaxed);
        let one_s = c.now_ns();
        assert!((999_999_990..=1_000_000_000).contains(&one_s), "{one_s}");
        // A reading taken before the origin is time zero, not a wrapped-around eternity.
        assert_eq!(c.ns(10), 0);
        // Hours later the product still fits (u128 intermediate).
        FAKE.store(1_000 + 2_500_000_000 * 3600 * 24, Ordering::Relaxed);
        let day = c.now_ns();
        assert!(
            (86_399_999_000_000..=86_400_000_000_000).contains(&day),
            "{day}"
        );
    }

    #[test]
    fn os_clock_ticks_are_nanoseconds() {
        let c = Clock::new();
        let t = c.ticks();
        assert_eq!(c.ns(t), t);
        assert_eq!(c.hz(), 1_000_000_000);
    }
}
