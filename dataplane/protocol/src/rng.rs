//! Deterministic pseudo-random numbers: xoshiro256** seeded through SplitMix64. Not used by the
//! protocol's decisions; it lives here as the one seeded generator for everything built on this
//! crate that must be repeatable from a seed (the simulator's model, barrier-gen's faults).
//! Every random choice comes from a stream derived from the seed, so one seed gives one run, on
//! any machine and in any build profile.

/// SplitMix64 step: used to expand a 64-bit seed into xoshiro's 256-bit state.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256** (Blackman and Vigna): fast, small state, good enough statistics for a model.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose whole sequence follows from `seed`.
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let mut s = [0u64; 4];
        for word in &mut s {
            *word = splitmix64(&mut sm);
        }
        Rng { s }
    }

    /// An independent stream for one purpose (topology, faults, compute times...), so that
    /// adding a random draw in one part of the model does not shift every other part.
    pub fn stream(seed: u64, purpose: u64) -> Self {
        let mut sm = seed ^ purpose.wrapping_mul(0xD1B5_4A32_D192_ED03);
        Rng::new(splitmix64(&mut sm))
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the tiny bias is irrelevant here). `n = 0` gives 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        match (hi - lo).checked_add(1) {
            Some(span) => lo + self.below(span),
            None => self.next_u64(),
        }
    }

    /// Uniform in `[0, 1)` with 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (no draw at all when `p <= 0`, so fault-free runs do not
    /// consume the fault stream).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }

    /// A uniformly random permutation of `0..n` (Fisher-Yates).
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_streams_differ() {
        let a: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(42);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(42);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        let mut s1 = Rng::stream(42, 1);
        let mut s2 = Rng::stream(42, 2);
        assert_ne!(s1.next_u64(), s2.next_u64());
    }

    #[test]
    fn ranges_stay_in_bounds_and_cover() {
        let mut r = Rng::new(7);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let x = r.range_inclusive(3, 7);
            assert!((3..=7).contains(&x));
            seen[(x - 3) as usize] = true;
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(r.range_inclusive(9, 9), 9);
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
    }

    #[test]
    fn chance_frequency_is_roughly_p() {
        let mut r = Rng::new(1);
        let hits = (0..100_000).filter(|_| r.chance(0.05)).count();
        assert!((4_500..5_500).contains(&hits), "{hits}");
    }

    #[test]
    fn permutation_is_a_permutation() {
        let mut r = Rng::new(3);
        let mut p = r.permutation(64);
        p.sort_unstable();
        assert_eq!(p, (0..64).collect::<Vec<_>>());
    }
}
