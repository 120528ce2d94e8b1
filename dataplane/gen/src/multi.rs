//! Several generators side by side, one per lcore: generator i owns a contiguous share of the
//! ports and of the groups, and its groups' children are exactly its ports, so the generators
//! share nothing (no receive dispatch, no locks). A trial runs on all of them at once; their
//! reports merge into one (counts added, histograms merged).

use crate::engine::{Engine, Load, TrialSpec};
use crate::report::{merge, TrialReport};
use barrier_runtime::io::{RxQueue, TxQueue};
use dpdk::{Eal, LcoreId};
use std::ops::Range;

/// Generator i's ports and groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    pub ports: Range<usize>,
    pub groups: Range<u32>,
}

impl Shard {
    /// The group's children at the switch: this shard's ports as a bitmask.
    pub fn children_mask(&self) -> u64 {
        self.ports.clone().fold(0u64, |m, p| m | (1u64 << p))
    }
}

/// Splits `ports` ports and the groups `first .. first + groups` into `n` contiguous shares as
/// even as they go (the first ones get the remainders).
pub fn split(n: usize, ports: usize, first: u32, groups: u32) -> Result<Vec<Shard>, String> {
    if n == 0 || n > ports || n as u64 > u64::from(groups) {
        return Err(format!("{n} generators need at least one port and one group each ({ports} ports, {groups} groups)"));
    }
    let cut = |total: u64, i: u64| -> u64 { total * i / n as u64 };
    Ok((0..n as u64)
        .map(|i| Shard {
            ports: cut(ports as u64, i) as usize..cut(ports as u64, i + 1) as usize,
            groups: first + cut(u64::from(groups), i) as u32
                ..first + cut(u64::from(groups), i + 1) as u32,
        })
        .collect())
}

/// The share of an open-loop rate for each generator: proportional to the frames one round of
/// its barriers takes (ports x groups), at least 1 frame/s.
pub fn share_load(load: Load, weights: &[u64]) -> Vec<Load> {
    let total: u64 = weights.iter().sum::<u64>().max(1);
    weights
        .iter()
        .map(|&w| match load {
            Load::Closed => Load::Closed,
            Load::Open { rate, burst } => Load::Open {
                rate: ((u128::from(rate) * u128::from(w) / u128::from(total)) as u64).max(1),
                burst: ((u128::from(burst) * u128::from(w) / u128::from(total)) as u64).max(1),
            },
        })
        .collect()
}

/// Runs one trial on every generator: the first on this thread, the others on `lcores` (one
/// each), and merges the reports.
pub fn run_trial_all<R, T>(
    eal: &Eal,
    engines: &mut Vec<Engine<R, T>>,
    lcores: &[LcoreId],
    spec: &TrialSpec,
) -> Result<TrialReport, String>
where
    R: RxQueue + 'static,
    T: TxQueue + 'static,
{
    if engines.len() == 1 {
        return Ok(engines[0].run_trial(spec));
    }
    if lcores.len() + 1 < engines.len() {
        return Err(format!(
            "{} generators need {} worker lcores, EAL has {}",
            engines.len(),
            engines.len() - 1,
            lcores.len()
        ));
    }
    let weights: Vec<u64> = engines
        .iter()
        .map(|e| e.ports() as u64 * u64::from(e.groups()))
        .collect();
    let loads = share_load(spec.load, &weights);
    let others: Vec<Engine<R, T>> = engines.drain(1..).collect();
    let mut joins = Vec::new();
    let mut launch_error = None;
    for (i, mut e) in others.into_iter().enumerate() {
        let s = TrialSpec {
            load: loads[i + 1],
            ..*spec
        };
        match dpdk::launch_on(eal, lcores[i], move || {
            let r = e.run_trial(&s);
            (e, r)
        }) {
            Ok(j) => joins.push(j),
            Err(err) => {
                launch_error = Some(format!("generator {}: {err}", i + 1));
                break;
            }
        }
    }
    let first = if launch_error.is_none() {
        Some(engines[0].run_trial(&TrialSpec {
            load: loads[0],
            ..*spec
        }))
    } else {
        None
    };
    // Generator 0's loop may also carry the in-process switch: keep it turning until every
    // other generator has finished its trial.
    while joins.iter().any(|j| !j.is_finished()) {
        engines[0].poll_inline();
    }
    let mut reports = Vec::new();
    for j in joins {
        match j.join() {
            Ok((e, r)) => {
                engines.push(e);
                reports.push(r);
            }
            Err(err) => launch_error = launch_error.or(Some(format!("generator lcore: {err}"))),
        }
    }
    if let Some(e) = launch_error {
        return Err(e);
    }
    reports.insert(0, first.expect("ran when every launch succeeded"));
    let hists: Vec<_> = engines.iter().map(|e| e.histograms()).collect();
    Ok(merge(&reports, &hists))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_covers_everything_once() {
        let s = split(3, 8, 100, 1000).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].ports.start, 0);
        assert_eq!(s[2].ports.end, 8);
        assert_eq!(s[0].groups.start, 100);
        assert_eq!(s[2].groups.end, 1100);
        for w in s.windows(2) {
            assert_eq!(w[0].ports.end, w[1].ports.start);
            assert_eq!(w[0].groups.end, w[1].groups.start);
        }
        assert!(s
            .iter()
            .all(|x| !x.ports.is_empty() && !x.groups.is_empty()));
        // 8 ports in 3: 0..2, 2..5, 5..8
        assert_eq!(s[1].ports, 2..5);
        assert_eq!(s[1].children_mask(), 0b0001_1100);
        assert!(split(3, 2, 0, 10).is_err(), "a generator without a port");
        assert!(split(0, 2, 0, 10).is_err());
        assert_eq!(
            split(1, 4, 0, 10).unwrap(),
            vec![Shard {
                ports: 0..4,
                groups: 0..10
            }]
        );
    }

    #[test]
    fn open_rate_is_shared_by_weight() {
        let l = share_load(
            Load::Open {
                rate: 1_000_000,
                burst: 1000,
            },
            &[2 * 100, 2 * 300],
        );
        assert_eq!(
            l,
            vec![
                Load::Open {
                    rate: 250_000,
                    burst: 250
                },
                Load::Open {
                    rate: 750_000,
                    burst: 750
                }
            ]
        );
        assert_eq!(
            share_load(Load::Closed, &[1, 1]),
            vec![Load::Closed, Load::Closed]
        );
    }
}
