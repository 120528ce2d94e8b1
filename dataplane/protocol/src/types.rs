//! Small value types shared by every layer: modelled time, group numbers, wrapping sequence
//! numbers, switch-local port indices and port bitmasks. Their Debug forms read like the
//! method's words (`group7`, `port3`, `seq12`) so traces are legible.

use core::fmt;
use core::ops::Add;

/// Ports per switch and fan-in limit per group: a [`PortSet`] is one `u64`.
pub const MAX_PORTS: usize = 64;

/// Group numbers are `0..MAX_GROUPS` (1,048,576); the wire format rejects anything larger.
pub const MAX_GROUPS: u32 = 1 << 20;

/// A point in time, in nanoseconds since an arbitrary epoch chosen by the caller.
///
/// The protocol never reads a clock: the switch passes its TSC-derived time, the simulator its
/// modelled time, tests a constant.
#[derive(Copy, Clone, Eq, PartialEq, Ord, PartialOrd, Hash, Default)]
pub struct Time(pub u64);

impl Time {
    /// The time `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Self {
        Time(nanos)
    }

    /// Nanoseconds since the epoch.
    pub const fn nanos(self) -> u64 {
        self.0
    }

    /// `self - earlier` in nanoseconds, 0 if `earlier` is later.
    pub const fn saturating_sub(self, earlier: Time) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl Add<u64> for Time {
    type Output = Time;
    /// Adds nanoseconds, saturating at the end of time rather than wrapping into the past.
    fn add(self, ns: u64) -> Time {
        Time(self.0.saturating_add(ns))
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns < 1_000 {
            write!(f, "{ns}ns")
        } else if ns < 1_000_000 {
            write!(f, "{}.{:03}µs", ns / 1_000, ns % 1_000)
        } else if ns < 1_000_000_000 {
            write!(f, "{}.{:03}ms", ns / 1_000_000, (ns / 1_000) % 1_000)
        } else {
            write!(f, "{}.{:03}s", ns / 1_000_000_000, (ns / 1_000_000) % 1_000)
        }
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A barrier group number (claim 4: "the group number names the barrier group").
#[derive(Copy, Clone, Eq, PartialEq, Ord, PartialOrd, Hash, Default)]
pub struct GroupId(pub u32);

impl fmt::Debug for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "group{}", self.0)
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "group{}", self.0)
    }
}

/// A group's epoch: which run of a group a frame belongs to. Management assigns it when it
/// creates or resets a group (a new job on a reused group number gets a new epoch); every
/// barrier frame carries it, and a switch or leaf drops frames of any other epoch. Compared
/// for equality only, never ordered.
#[derive(Copy, Clone, Eq, PartialEq, Ord, PartialOrd, Hash)]
pub struct Epoch(pub u32);

impl Epoch {
    /// The epoch of a group configured from a file without an `epoch` key, and of a leaf
    /// opened without one.
    pub const DEFAULT: Epoch = Epoch(1);

    /// The epoch with this number.
    pub const fn new(v: u32) -> Epoch {
        Epoch(v)
    }

    /// Its number.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The epoch a reset assigns when the operator names none: the next number, wrapping.
    #[must_use]
    pub const fn next(self) -> Epoch {
        Epoch(self.0.wrapping_add(1))
    }
}

impl Default for Epoch {
    fn default() -> Self {
        Epoch::DEFAULT
    }
}

impl fmt::Debug for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "epoch{}", self.0)
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A barrier sequence number: 32 bits, wrapping.
///
/// Order is defined only between numbers less than 2^31 apart: `a` is ahead of `b` when
/// `a - b` (wrapping) is in `1..2^31`. Barriers of one group are strictly sequential, so two
/// live sequence numbers of a group differ by one or two; the half-range rule leaves a margin
/// of 2^31 barriers for frames delayed in the network.
#[derive(Copy, Clone, Eq, PartialEq, Hash, Default)]
pub struct Seq(pub u32);

impl Seq {
    /// The next barrier's number (wraps from `u32::MAX` to 0).
    #[must_use]
    pub const fn next(self) -> Seq {
        Seq(self.0.wrapping_add(1))
    }

    /// The previous barrier's number (wraps from 0 to `u32::MAX`).
    #[must_use]
    pub const fn prev(self) -> Seq {
        Seq(self.0.wrapping_sub(1))
    }

    /// `self - other`, wrapping.
    pub const fn wrapping_diff(self, other: Seq) -> u32 {
        self.0.wrapping_sub(other.0)
    }

    /// True when `self` is a later barrier than `other`: the wrapping difference
    /// `self - other` is in `1..2^31`.
    pub const fn is_ahead_of(self, other: Seq) -> bool {
        let d = self.wrapping_diff(other);
        d != 0 && d < (1 << 31)
    }

    /// True when `self` is an earlier barrier than `other` (`other` is ahead of `self`).
    pub const fn is_behind(self, other: Seq) -> bool {
        other.is_ahead_of(self)
    }
}

impl fmt::Debug for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seq{}", self.0)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A switch-local port index, `0..MAX_PORTS`. A child is identified by the port its frame
/// arrived on, so this is also the identity of a child within a group.
#[derive(Copy, Clone, Eq, PartialEq, Ord, PartialOrd, Hash)]
pub struct PortIdx(u8);

impl PortIdx {
    /// `Some` for `0..64`, `None` otherwise.
    pub const fn new(idx: u8) -> Option<Self> {
        if (idx as usize) < MAX_PORTS {
            Some(PortIdx(idx))
        } else {
            None
        }
    }

    /// The index, `0..64`.
    pub const fn get(self) -> u8 {
        self.0
    }
}

impl fmt::Debug for PortIdx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "port{}", self.0)
    }
}

impl fmt::Display for PortIdx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "port{}", self.0)
    }
}

/// A set of ports as a 64-bit mask, bit `i` for port `i`: the child-port register of a group,
/// and the set of children that have reported.
#[derive(Copy, Clone, Eq, PartialEq, Hash, Default)]
pub struct PortSet(pub u64);

impl PortSet {
    /// No ports.
    pub const fn empty() -> Self {
        PortSet(0)
    }

    /// Exactly `port`.
    pub const fn single(port: PortIdx) -> Self {
        PortSet(1u64 << port.0)
    }

    /// Whether `port` is in the set.
    pub const fn contains(self, port: PortIdx) -> bool {
        self.0 & (1u64 << port.0) != 0
    }

    /// Adds `port`.
    pub fn insert(&mut self, port: PortIdx) {
        self.0 |= 1u64 << port.0;
    }

    /// Removes `port`.
    pub fn remove(&mut self, port: PortIdx) {
        self.0 &= !(1u64 << port.0);
    }

    /// Number of ports in the set.
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// True when no port is in the set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Ports in ascending order.
    pub fn iter(self) -> PortSetIter {
        PortSetIter(self.0)
    }

    /// Ports in either set.
    #[must_use]
    pub const fn union(self, other: PortSet) -> PortSet {
        PortSet(self.0 | other.0)
    }

    /// Ports in both sets.
    #[must_use]
    pub const fn intersection(self, other: PortSet) -> PortSet {
        PortSet(self.0 & other.0)
    }

    /// True when every port of `self` is in `other`.
    pub const fn is_subset_of(self, other: PortSet) -> bool {
        self.0 & !other.0 == 0
    }
}

impl FromIterator<PortIdx> for PortSet {
    fn from_iter<I: IntoIterator<Item = PortIdx>>(iter: I) -> Self {
        let mut s = PortSet::empty();
        for p in iter {
            s.insert(p);
        }
        s
    }
}

impl IntoIterator for PortSet {
    type Item = PortIdx;
    type IntoIter = PortSetIter;
    fn into_iter(self) -> PortSetIter {
        self.iter()
    }
}

impl fmt::Debug for PortSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// Iterator over a [`PortSet`], lowest port first.
#[derive(Clone, Debug)]
pub struct PortSetIter(u64);

impl Iterator for PortSetIter {
    type Item = PortIdx;
    fn next(&mut self) -> Option<PortIdx> {
        if self.0 == 0 {
            return None;
        }
        let i = self.0.trailing_zeros() as u8;
        self.0 &= self.0 - 1;
        Some(PortIdx(i))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.0.count_ones() as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for PortSetIter {}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(i: u8) -> PortIdx {
        PortIdx::new(i).unwrap()
    }

    #[test]
    fn seq_wraps_and_orders_by_half_range() {
        assert_eq!(Seq(u32::MAX).next(), Seq(0));
        assert_eq!(Seq(0).prev(), Seq(u32::MAX));
        assert!(Seq(0).is_ahead_of(Seq(u32::MAX)));
        assert!(Seq(5).is_ahead_of(Seq(4)));
        assert!(!Seq(4).is_ahead_of(Seq(4)));
        assert!(!Seq(4).is_ahead_of(Seq(5)));
        assert!(Seq(4).is_behind(Seq(5)));
        // exactly 2^31 apart: neither is ahead (the ambiguous point counts as behind for both)
        assert!(!Seq(1 << 31).is_ahead_of(Seq(0)));
        assert!(!Seq(0).is_ahead_of(Seq(1 << 31)));
        assert!(Seq((1 << 31) - 1).is_ahead_of(Seq(0)));
        assert!(Seq(3).is_ahead_of(Seq(u32::MAX - 3)));
    }

    #[test]
    fn port_idx_range() {
        assert!(PortIdx::new(63).is_some());
        assert!(PortIdx::new(64).is_none());
        assert_eq!(format!("{:?}", p(3)), "port3");
    }

    #[test]
    fn port_set_ops() {
        let mut s = PortSet::empty();
        assert!(s.is_empty());
        s.insert(p(0));
        s.insert(p(63));
        s.insert(p(7));
        assert_eq!(s.len(), 3);
        assert!(s.contains(p(63)));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![p(0), p(7), p(63)]);
        s.remove(p(7));
        assert!(!s.contains(p(7)));
        assert!(PortSet::single(p(0)).is_subset_of(s));
        assert!(!s.is_subset_of(PortSet::single(p(0))));
        assert_eq!(PortSet::single(p(1)).union(PortSet::single(p(2))).len(), 2);
        assert_eq!(format!("{s:?}"), "{port0, port63}");
        let c: PortSet = [p(1), p(2)].into_iter().collect();
        assert_eq!(c, PortSet(0b110));
    }

    #[test]
    fn time_format_and_math() {
        assert_eq!(format!("{:?}", Time(999)), "999ns");
        assert_eq!(format!("{:?}", Time(12_345)), "12.345µs");
        assert_eq!(format!("{:?}", Time(12_345_678)), "12.345ms");
        assert_eq!(format!("{:?}", Time(2_500_000_000)), "2.500s");
        assert_eq!((Time(5) + 10).nanos(), 15);
        assert_eq!(Time(u64::MAX) + 1, Time(u64::MAX));
        assert_eq!(Time(10).saturating_sub(Time(3)), 7);
        assert_eq!(Time(3).saturating_sub(Time(10)), 0);
        assert_eq!(format!("{:?}", GroupId(7)), "group7");
    }
}
