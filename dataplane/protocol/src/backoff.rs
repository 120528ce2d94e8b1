//! How long to wait before the next re-send: capped exponential backoff with per-group jitter,
//! as a pure function of the barrier and the attempt (no random state, so the simulator and a
//! real leaf make the same choice for the same barrier).
//!
//! Fixed re-send periods have two failure modes, both seen here. Several groups whose re-sends
//! share a short queue can keep displacing each other, period after period, because they retry
//! in lockstep (docs/simulator.md, "Known limits"); and under overload every waiting barrier
//! re-sends on the same clock, adding load to a full path exactly when it is full (at a million
//! groups in flight nearly every barrier was re-sent, docs/performance.md). Jitter breaks the
//! lockstep; doubling the wait (as SwitchML's workers double their timeout) turns a retry storm
//! into a retry drizzle. The first send is never delayed: only re-sends.

use crate::{Epoch, GroupId, Seq};

/// A re-send policy. [`Backoff::FIXED`] is the classic fixed period.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub struct Backoff {
    /// The longest wait: the doubling stops here. Equal to the base timeout: no backoff.
    pub max_ns: u64,
    /// Jitter, in percent of the wait (0..=50): each wait is shortened by a deterministic
    /// fraction in `0..jitter_pct` percent, different per group, barrier and attempt.
    pub jitter_pct: u8,
}

impl Backoff {
    /// A fixed period: no doubling (the cap is taken as the base), no jitter.
    pub const FIXED: Backoff = Backoff {
        max_ns: 0,
        jitter_pct: 0,
    };

    /// The wait before re-send number `attempt + 1` (attempt 0: the wait after the first
    /// send) of barrier `seq` of `group` in `epoch`, with base period `base_ns`: `base_ns *
    /// 2^attempt`, capped at `max(max_ns, base_ns)`, then shortened by the jitter. Never less
    /// than half the capped wait, never 0 for a positive base.
    pub fn delay_ns(
        &self,
        base_ns: u64,
        group: GroupId,
        epoch: Epoch,
        seq: Seq,
        attempt: u32,
    ) -> u64 {
        let cap = self.max_ns.max(base_ns);
        let wait = base_ns
            .checked_shl(attempt.min(63))
            .filter(|w| *w >> attempt.min(63) == base_ns)
            .map_or(cap, |w| w.min(cap));
        let pct = u64::from(self.jitter_pct.min(50));
        if pct == 0 || wait == 0 {
            return wait;
        }
        let h = mix(
            u64::from(group.0) << 32 | u64::from(seq.0),
            u64::from(epoch.0) << 32 | u64::from(attempt),
        );
        // A fraction of `pct` percent, in 1/1024ths: (h mod (pct * 1024 / 100 + 1)) / 1024.
        let span = pct * 1024 / 100;
        let cut = (h % (span + 1)) * wait / 1024;
        (wait - cut).max(1)
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::FIXED
    }
}

/// SplitMix64's finaliser over two words: every input bit moves every output bit.
fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.rotate_left(29) ^ 0x9E37_79B9_7F4A_7C15;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: GroupId = GroupId(3);
    const E: Epoch = Epoch(1);

    #[test]
    fn fixed_is_the_base_every_time() {
        for a in [0, 1, 5, 63, 64, u32::MAX] {
            assert_eq!(Backoff::FIXED.delay_ns(1000, G, E, Seq(7), a), 1000);
        }
    }

    #[test]
    fn doubling_is_capped_and_never_overflows() {
        let b = Backoff {
            max_ns: 8000,
            jitter_pct: 0,
        };
        let waits: Vec<u64> = (0..6).map(|a| b.delay_ns(1000, G, E, Seq(0), a)).collect();
        assert_eq!(waits, [1000, 2000, 4000, 8000, 8000, 8000]);
        // huge attempts and bases do not wrap
        assert_eq!(b.delay_ns(1000, G, E, Seq(0), 200), 8000);
        let big = Backoff {
            max_ns: u64::MAX,
            jitter_pct: 0,
        };
        assert_eq!(big.delay_ns(u64::MAX / 2, G, E, Seq(0), 3), u64::MAX);
        // a cap below the base means "no backoff"
        let low = Backoff {
            max_ns: 10,
            jitter_pct: 0,
        };
        assert_eq!(low.delay_ns(1000, G, E, Seq(0), 4), 1000);
    }

    #[test]
    fn jitter_stays_in_range_and_differs_between_groups() {
        let b = Backoff {
            max_ns: 1000,
            jitter_pct: 25,
        };
        let mut seen = std::collections::BTreeSet::new();
        for g in 0..1000 {
            let d = b.delay_ns(1000, GroupId(g), E, Seq(5), 0);
            assert!((750..=1000).contains(&d), "{d}");
            seen.insert(d);
            // deterministic
            assert_eq!(d, b.delay_ns(1000, GroupId(g), E, Seq(5), 0));
        }
        assert!(seen.len() > 100, "only {} distinct waits", seen.len());
        // jitter is clamped to 50%
        let wild = Backoff {
            max_ns: 1000,
            jitter_pct: 200,
        };
        for g in 0..1000 {
            assert!(wild.delay_ns(1000, GroupId(g), E, Seq(1), 2) >= 500);
        }
    }
}
