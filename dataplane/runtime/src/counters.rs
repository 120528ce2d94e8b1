//! Counter cells: plain `AtomicU64`s, each written by exactly one thread (Relaxed), read and
//! summed by the management thread, the way DPDK applications keep per-lcore statistics.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Declares a struct of named `AtomicU64` counters with its names and a value listing.
#[macro_export]
macro_rules! counter_set {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Default, Debug)]
        pub struct $name { $($(#[$fm])* pub $field: ::std::sync::atomic::AtomicU64,)* }
        impl $name {
            pub const NAMES: &'static [&'static str] = &[$(stringify!($field)),*];
            /// Current values in declaration order (same order as NAMES).
            pub fn values(&self) -> Vec<u64> {
                vec![$(self.$field.load(::std::sync::atomic::Ordering::Relaxed)),*]
            }
        }
    };
}

/// Owner-only increment: a load and a store, no locked instruction (the cell has one writer).
#[inline]
pub fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

counter_set! {
    /// One lcore loop (all the pollers it runs).
    LoopCounters {
        busy_polls,
        idle_polls,
        /// Empty passes on which the loop yielded or slept (its idle policy backed off).
        backoffs,
    }
}

/// Sum a set of counter structs by name and print the non-zero ones as `title: name=value ...`.
pub fn format_sum<I>(title: &str, names: &[&str], sets: I) -> String
where
    I: IntoIterator<Item = Vec<u64>>,
{
    let mut sum = vec![0u64; names.len()];
    for v in sets {
        for (s, x) in sum.iter_mut().zip(v) {
            *s += x;
        }
    }
    let mut out = String::new();
    let parts: Vec<String> = names
        .iter()
        .zip(&sum)
        .filter(|(_, v)| **v > 0)
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    let _ = writeln!(
        out,
        "{title}: {}",
        if parts.is_empty() {
            "-".to_string()
        } else {
            parts.join(" ")
        }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    counter_set! {
        Two { a, b }
    }

    #[test]
    fn sums_by_name_and_skips_zeroes() {
        let x = Two::default();
        let y = Two::default();
        bump(&x.a, 3);
        bump(&y.a, 4);
        bump(&y.b, 1);
        let s = format_sum("rx", Two::NAMES, [x.values(), y.values()]);
        assert_eq!(s, "rx: a=7 b=1\n");
        assert_eq!(Two::NAMES.len(), x.values().len());
        let none = format_sum("tx", Two::NAMES, [Two::default().values()]);
        assert_eq!(none, "tx: -\n");
    }
}
