//! Counter arrays keyed by an enum: one `AtomicU64` per [`Outcome`] of the switch logic
//! ([`OutcomeCounts`]) and per [`ParseError`] of the frame parser ([`ParseErrorCounts`]),
//! indexed by the enum's dense `index()` and named by its stable name
//! ([`Outcome::name`], [`ParseError::reason`]). The switch's RX pollers and the simulator count
//! with these, so a new outcome or parse error gets a counter everywhere without a hand-written
//! `match` to keep in step.
//!
//! A cell has one writer: [`Counts::bump`] is a load and a store, not a locked
//! read-modify-write, which is what a per-lcore (or single-threaded) counter wants. Any thread
//! may read ([`Counts::get`], [`Counts::values`]).

use core::fmt;
use core::marker::PhantomData;
use core::ops::Index;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::switch::Outcome;
use crate::wire::ParseError;

/// An enum whose values key a counter array: every value, a dense index, a stable name.
pub trait CountKey: Copy + 'static {
    /// Every value, in index order.
    const ALL: &'static [Self];
    /// Position in [`CountKey::ALL`].
    fn index(self) -> usize;
    /// A stable snake_case name.
    fn name(self) -> &'static str;
}

impl CountKey for Outcome {
    const ALL: &'static [Self] = &Outcome::ALL;
    fn index(self) -> usize {
        Outcome::index(&self)
    }
    fn name(self) -> &'static str {
        Outcome::name(&self)
    }
}

impl CountKey for ParseError {
    const ALL: &'static [Self] = &ParseError::ALL;
    fn index(self) -> usize {
        ParseError::index(&self)
    }
    fn name(self) -> &'static str {
        self.reason()
    }
}

/// One counter per value of `K`; `N` is the number of values (checked at compile time).
pub struct Counts<K: CountKey, const N: usize> {
    cells: [AtomicU64; N],
    _key: PhantomData<fn(K)>,
}

/// A counter per [`Outcome`], indexed by [`Outcome::index`], named by [`Outcome::name`].
pub type OutcomeCounts = Counts<Outcome, { Outcome::ALL.len() }>;

/// A counter per [`ParseError`], indexed by [`ParseError::index`], named by
/// [`ParseError::reason`].
pub type ParseErrorCounts = Counts<ParseError, { ParseError::ALL.len() }>;

impl<K: CountKey, const N: usize> Counts<K, N> {
    /// All zero.
    pub fn new() -> Self {
        const { assert!(N == K::ALL.len(), "one cell per key") };
        Counts {
            cells: [const { AtomicU64::new(0) }; N],
            _key: PhantomData,
        }
    }

    /// Adds one to `key`'s counter. Owner-only: a load and a store, so the cell must have a
    /// single writer (the thread that owns this set).
    #[inline]
    pub fn bump(&self, key: K) {
        let c = &self.cells[key.index()];
        c.store(c.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// `key`'s counter.
    pub fn get(&self, key: K) -> u64 {
        self.cells[key.index()].load(Relaxed)
    }

    /// Every counter, in index order.
    pub fn values(&self) -> [u64; N] {
        core::array::from_fn(|i| self.cells[i].load(Relaxed))
    }

    /// Every key's name, in index order.
    pub fn names() -> [&'static str; N] {
        core::array::from_fn(|i| K::ALL[i].name())
    }

    /// Every key with its counter, in index order.
    pub fn iter(&self) -> impl Iterator<Item = (K, u64)> + '_ {
        K::ALL.iter().map(move |&k| (k, self.get(k)))
    }
}

impl<K: CountKey, const N: usize> Index<K> for Counts<K, N> {
    type Output = AtomicU64;
    /// The cell itself, for callers that sum or store counters generically.
    fn index(&self, key: K) -> &AtomicU64 {
        &self.cells[key.index()]
    }
}

impl<K: CountKey, const N: usize> Default for Counts<K, N> {
    fn default() -> Self {
        Self::new()
    }
}

/// A snapshot: the copy's counters start at this one's current values.
impl<K: CountKey, const N: usize> Clone for Counts<K, N> {
    fn clone(&self) -> Self {
        let c = Self::new();
        for (cell, v) in c.cells.iter().zip(self.values()) {
            cell.store(v, Relaxed);
        }
        c
    }
}

impl<K: CountKey, const N: usize> fmt::Debug for Counts<K, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(k, v)| (k.name(), v)))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::Reject;

    #[test]
    fn every_key_has_its_own_cell_and_name() {
        let c = OutcomeCounts::new();
        for (i, &o) in Outcome::ALL.iter().enumerate() {
            for _ in 0..=i {
                c.bump(o);
            }
        }
        assert_eq!(c.values(), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
        assert_eq!(c.get(Outcome::Rejected(Reject::OtherEpoch)), 11);
        assert_eq!(c.get(Outcome::Rejected(Reject::NotTheParent)), 8);
        assert_eq!(
            c[Outcome::Completed].load(Relaxed),
            c.get(Outcome::Completed)
        );
        assert_eq!(OutcomeCounts::names()[2], "completed");
        let p = ParseErrorCounts::default();
        p.bump(ParseError::BadChecksum);
        assert_eq!(p.values(), [0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(ParseErrorCounts::names()[7], "bad_checksum");
        let names = ParseErrorCounts::names();
        for e in ParseError::ALL {
            assert_eq!(names[e.index()], e.reason());
        }
    }

    #[test]
    fn clone_is_a_snapshot_and_debug_names_the_cells() {
        let c = OutcomeCounts::new();
        c.bump(Outcome::Recorded);
        let d = c.clone();
        c.bump(Outcome::Recorded);
        assert_eq!((c.get(Outcome::Recorded), d.get(Outcome::Recorded)), (2, 1));
        let s = format!("{d:?}");
        assert!(s.starts_with("{\"recorded\": 1, \"duplicate\": 0"), "{s}");
    }
}
