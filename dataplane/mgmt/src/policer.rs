//! A port's policer for barrier frames as management sees it: its settings (`PolicerSpec`,
//! checked as the file's keys and the control socket's `port_set` are) and the register the
//! management thread writes while the dataplane runs (`PolicerRegister`), which the
//! dataplane's per-queue token buckets follow (for the DPDK pipeline,
//! `barrier_switch::policer::QueuePolicer`).

use std::sync::atomic::{AtomicU64, Ordering};

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

    #[inline]
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
    #[inline]
    pub fn get(&self) -> Option<PolicerSpec> {
        PolicerSpec::unpack(self.spec.load(Ordering::Acquire))
    }

    /// How many times it was set since the switch started.
    #[inline]
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
