//! Summaries shared by the tree run and the dissemination model: latency statistics over
//! modelled time and the number formatting of the tables.

use serde::Serialize;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencyStats {
    pub count: u64,
    pub mean_ns: f64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl LatencyStats {
    /// Nearest-rank percentiles of `samples` (reordered in place).
    pub fn from_samples(samples: &mut [u64]) -> LatencyStats {
        if samples.is_empty() {
            return LatencyStats::default();
        }
        samples.sort_unstable();
        let n = samples.len();
        let rank = |p: f64| samples[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        LatencyStats {
            count: n as u64,
            mean_ns: samples.iter().map(|&x| x as f64).sum::<f64>() / n as f64,
            min_ns: samples[0],
            p50_ns: rank(0.50),
            p90_ns: rank(0.90),
            p99_ns: rank(0.99),
            max_ns: samples[n - 1],
        }
    }
}

/// 1234567 -> "1,234,567".
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Nanoseconds as microseconds with three decimals.
pub fn us(ns: f64) -> String {
    format!("{:.3} µs", ns / 1_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_nearest_rank() {
        let mut v: Vec<u64> = (1..=100).rev().collect();
        let s = LatencyStats::from_samples(&mut v);
        assert_eq!(
            (s.min_ns, s.p50_ns, s.p90_ns, s.p99_ns, s.max_ns),
            (1, 50, 90, 99, 100)
        );
        assert_eq!(s.mean_ns, 50.5);
        assert_eq!(LatencyStats::from_samples(&mut []), LatencyStats::default());
        assert_eq!(thousands(1_048_576), "1,048,576");
        assert_eq!(thousands(12), "12");
    }
}
