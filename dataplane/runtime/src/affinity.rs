//! Where the threads that are not lcores run: the management thread (signals, counters, the
//! control socket), the metrics endpoint, barrier-gen's interval-log writer and any other
//! helper thread a program starts. A thread started after `rte_eal_init` inherits the main
//! lcore's CPU, so left alone it takes its time from that lcore's busy loop (a client
//! hammering the control socket slows the RX lcore down). These threads go instead to the
//! **control cores**: the CPUs this process may use that no polling lcore runs on, as DPDK
//! places its own control threads (`rte_ctrl_thread_create`); or to the cores the operator
//! configured (`[management] cpus` in the switch's file).
//!
//! The pieces: [`CpuList`] (a set of CPU numbers, parsed from `"0-3,6"` or a list of integers,
//! as in TOML), [`control_cpus`] (the set arithmetic, a pure function), [`ControlCores`] (the
//! control cores shared by a process's helper threads, which it spreads round-robin; each
//! placement is logged). Pinning goes through the `core_affinity` crate, in one function
//! ([`pin_current`]). With feature `dpdk`, [`ControlCores::automatic`] and
//! [`ControlCores::resolve`] read the CPUs from the running EAL.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// CPU numbers go up to this bound, excluded (glibc's `CPU_SETSIZE`, the size of the
/// `cpu_set_t` that `sched_setaffinity` and DPDK's lcore cpusets take).
pub const MAX_CPUS: usize = 1024;

/// A non-empty set of CPU numbers, in increasing order. Written and parsed as Linux and DPDK
/// write them (`"0-3,6"`: `taskset -c`, `cpuset.cpus`, EAL's `-l`); in a configuration file
/// either such a string or a list of integers (`cpus = [0, 2]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CpuList(Vec<usize>);

/// Why a CPU list was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    /// Nothing in it (`""`, `[]`).
    #[error("an empty CPU list (write CPUs as \"0-3,6\" or [0, 1, 2, 3, 6])")]
    Empty,
    /// An item that is neither a number nor a range `A-B`.
    #[error("{item:?} is not a CPU number or a range A-B (write CPUs as \"0-3,6\")")]
    NotACpu { item: String },
    /// A range whose end is below its start.
    #[error("the range {first}-{last} ends before it starts")]
    Reversed { first: usize, last: usize },
    /// A CPU number past what a CPU set holds.
    #[error("CPU {cpu} is past the largest CPU number {} (CPU_SETSIZE {MAX_CPUS})", MAX_CPUS - 1)]
    TooLarge { cpu: usize },
}

impl CpuList {
    /// The set of `cpus` (any order, repeats allowed), or why not: empty, or a number past
    /// [`MAX_CPUS`].
    pub fn from_cpus(cpus: impl IntoIterator<Item = usize>) -> Result<CpuList, CpuListError> {
        let mut v: Vec<usize> = cpus.into_iter().collect();
        if let Some(&cpu) = v.iter().find(|&&c| c >= MAX_CPUS) {
            return Err(CpuListError::TooLarge { cpu });
        }
        v.sort_unstable();
        v.dedup();
        if v.is_empty() {
            return Err(CpuListError::Empty);
        }
        Ok(CpuList(v))
    }

    /// One CPU.
    pub fn single(cpu: usize) -> Result<CpuList, CpuListError> {
        CpuList::from_cpus([cpu])
    }

    /// The CPUs, in increasing order.
    pub fn cpus(&self) -> &[usize] {
        &self.0
    }

    /// How many CPUs (at least one).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a `CpuList` holds at least one CPU.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: usize) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }
}

impl FromStr for CpuList {
    type Err = CpuListError;

    /// `"0-3,6"`: numbers and inclusive ranges, separated by commas (blanks around items are
    /// allowed).
    fn from_str(s: &str) -> Result<CpuList, CpuListError> {
        let number = |t: &str| -> Result<usize, CpuListError> {
            let t = t.trim();
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(CpuListError::NotACpu {
                    item: t.to_string(),
                });
            }
            // All digits: the only failure left is overflow, which is past MAX_CPUS anyway.
            let cpu = t.parse().unwrap_or(usize::MAX);
            if cpu >= MAX_CPUS {
                return Err(CpuListError::TooLarge { cpu });
            }
            Ok(cpu)
        };
        if s.trim().is_empty() {
            return Err(CpuListError::Empty);
        }
        let mut cpus = Vec::new();
        for item in s.split(',') {
            let not_a_cpu = || CpuListError::NotACpu {
                item: item.trim().to_string(),
            };
            match item.split_once('-') {
                Some((a, b)) => {
                    let (first, last) = (
                        number(a).map_err(|e| match e {
                            CpuListError::NotACpu { .. } => not_a_cpu(),
                            e => e,
                        })?,
                        number(b).map_err(|e| match e {
                            CpuListError::NotACpu { .. } => not_a_cpu(),
                            e => e,
                        })?,
                    );
                    if last < first {
                        return Err(CpuListError::Reversed { first, last });
                    }
                    cpus.extend(first..=last);
                }
                None => cpus.push(number(item)?),
            }
        }
        CpuList::from_cpus(cpus)
    }
}

impl fmt::Display for CpuList {
    /// The short form, ranges merged: `0-3,6`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        while i < self.0.len() {
            let first = self.0[i];
            let mut j = i;
            while j + 1 < self.0.len() && self.0[j + 1] == self.0[j] + 1 {
                j += 1;
            }
            if i > 0 {
                f.write_str(",")?;
            }
            match j - i {
                0 => write!(f, "{first}")?,
                1 => write!(f, "{first},{}", self.0[j])?,
                _ => write!(f, "{first}-{}", self.0[j])?,
            }
            i = j + 1;
        }
        Ok(())
    }
}

impl serde::Serialize for CpuList {
    /// A list of integers (`[0, 2]`), the form a TOML file takes most naturally.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for CpuList {
    /// A list of integers (`cpus = [0, 2]`) or a string in the `"0-3,6"` form.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CpuList, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = CpuList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of CPU numbers ([0, 2]) or a CPU list string (\"0-3,6\")")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<CpuList, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<CpuList, A::Error> {
                let mut cpus = Vec::new();
                while let Some(cpu) = a.next_element::<usize>()? {
                    cpus.push(cpu);
                }
                CpuList::from_cpus(cpus).map_err(serde::de::Error::custom)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// The control cores: the CPUs in `allowed` (the process's, at start-up) that are not in
/// `polled` (the CPUs of every lcore that runs a busy loop); when that leaves nothing, `main`
/// (the main lcore's CPUs). Empty only when `allowed` and `main` are both empty.
///
/// This mirrors where DPDK puts its own control threads (`rte_ctrl_thread_create`, placed by
/// `compute_ctrl_threads_cpuset` in EAL: the startup affinity less every lcore's cpuset, else
/// the main lcore's cpuset). One difference: DPDK leaves out every *enabled* lcore; callers
/// here pass the lcores that actually poll (a main lcore that only waits for the workers is
/// not busy), or every enabled one ([`ControlCores::automatic`] with all of them).
pub fn control_cpus(allowed: &[usize], polled: &[usize], main: &[usize]) -> Vec<usize> {
    let mut free: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|c| !polled.contains(c))
        .collect();
    if free.is_empty() {
        free = main.to_vec();
    }
    free.sort_unstable();
    free.dedup();
    free
}

/// The CPUs of `cpus` that are also in `polled`: a configured control core that a busy lcore
/// runs on (worth a warning: the helper thread would take that lcore's time).
pub fn overlap(cpus: &CpuList, polled: &[usize]) -> Vec<usize> {
    cpus.cpus()
        .iter()
        .copied()
        .filter(|c| polled.contains(c))
        .collect()
}

/// Pins the calling thread to `cpu` (`core_affinity::set_for_current`: one CPU). False when
/// the OS refused (a CPU this process may not use, or none such). The only system call of this
/// module.
pub fn pin_current(cpu: usize) -> bool {
    // core_affinity indexes a cpu_set_t with it: past the set, refuse rather than panic.
    cpu < MAX_CPUS && core_affinity::set_for_current(core_affinity::CoreId { id: cpu })
}

/// The CPUs the calling thread may run on now (`core_affinity::get_core_ids`); empty when the
/// OS would not say. After `rte_eal_init` the main thread's is the main lcore's: use
/// `dpdk::Eal::startup_cpus` for the process's.
pub fn current_cpus() -> Vec<usize> {
    core_affinity::get_core_ids()
        .map(|ids| ids.into_iter().map(|c| c.id).collect())
        .unwrap_or_default()
}

/// The control cores of a process, shared by its helper threads: each [`ControlCores::pin`]
/// puts the calling thread on the next one, round-robin (clones share the turn), and logs it.
#[derive(Clone, Debug)]
pub struct ControlCores {
    cpus: CpuList,
    next: Arc<AtomicUsize>,
}

impl ControlCores {
    /// Threads go to `cpus`, in turn.
    pub fn new(cpus: CpuList) -> ControlCores {
        ControlCores {
            cpus,
            next: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The control cores.
    pub fn cpus(&self) -> &CpuList {
        &self.cpus
    }

    /// The CPU the next thread gets (and advances the turn).
    pub fn next_cpu(&self) -> usize {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.cpus.cpus()[i % self.cpus.len()]
    }

    /// Pins the calling thread, called `thread` in the log, to the next control core. Returns
    /// the CPU, or None when the OS refused (logged as a warning; the thread stays where it
    /// was).
    pub fn pin(&self, thread: &str) -> Option<usize> {
        let cpu = self.next_cpu();
        if pin_current(cpu) {
            tracing::info!(
                "thread {thread:?} placed on CPU {cpu} (control cores {})",
                self.cpus
            );
            Some(cpu)
        } else {
            tracing::warn!(
                "thread {thread:?}: could not pin it to CPU {cpu} (control cores {}); it runs \
                 where it was started",
                self.cpus
            );
            None
        }
    }

    /// Pins the calling thread like [`ControlCores::pin`] when there are control cores; with
    /// `None`, leaves it where it is.
    pub fn pin_opt(control: Option<&ControlCores>, thread: &str) -> Option<usize> {
        control.and_then(|c| c.pin(thread))
    }
}

#[cfg(feature = "dpdk")]
impl ControlCores {
    /// The control cores of a DPDK process whose busy loops run on `lcores`:
    /// [`control_cpus`] of the CPUs the process had before `rte_eal_init`, the `lcores`' CPUs
    /// and the main lcore's. With every enabled lcore (`for_eal`) this is DPDK's own
    /// control-thread placement. None only if neither the OS nor EAL named a CPU.
    pub fn automatic(eal: &dpdk::Eal, lcores: &[u32]) -> Option<ControlCores> {
        let polled = lcore_cpus(eal, lcores);
        let main = eal.lcore_cpus(eal.main_lcore());
        let cpus = control_cpus(&eal.startup_cpus(), &polled, &main);
        CpuList::from_cpus(cpus).ok().map(ControlCores::new)
    }

    /// [`ControlCores::automatic`] over every enabled lcore (main and workers): exactly where
    /// DPDK puts its own control threads. For programs whose lcores all poll (barrier-gen).
    pub fn for_eal(eal: &dpdk::Eal) -> Option<ControlCores> {
        let lcores: Vec<u32> = std::iter::once(eal.main_lcore())
            .chain(eal.worker_lcores())
            .map(|l| l.0)
            .collect();
        ControlCores::automatic(eal, &lcores)
    }

    /// The control cores for a process whose busy loops run on `lcores`: `configured` when
    /// given (warning about a configured CPU that one of those lcores polls, or that the
    /// process may not use), else [`ControlCores::automatic`]. Logs the result.
    pub fn resolve(
        eal: &dpdk::Eal,
        lcores: &[u32],
        configured: Option<CpuList>,
    ) -> Option<ControlCores> {
        let control = match configured {
            Some(cpus) => {
                let busy = overlap(&cpus, &lcore_cpus(eal, lcores));
                if !busy.is_empty() {
                    tracing::warn!(
                        "control cores {cpus}: CPU(s) {busy:?} are polled by an lcore; threads \
                         placed there take time from its loop"
                    );
                }
                let allowed = eal.startup_cpus();
                let outside: Vec<usize> = cpus
                    .cpus()
                    .iter()
                    .copied()
                    .filter(|c| !allowed.is_empty() && !allowed.contains(c))
                    .collect();
                if !outside.is_empty() {
                    tracing::warn!(
                        "control cores {cpus}: CPU(s) {outside:?} are not among this process's \
                         {allowed:?}; pinning there will fail"
                    );
                }
                Some(ControlCores::new(cpus))
            }
            None => ControlCores::automatic(eal, lcores),
        };
        match &control {
            Some(c) => tracing::info!(
                "control cores: {} (threads that are not lcores run there)",
                c.cpus()
            ),
            None => tracing::warn!(
                "no control cores found: threads that are not lcores run where they start"
            ),
        }
        control
    }
}

/// The CPUs of `lcores` (their cpusets together).
#[cfg(feature = "dpdk")]
fn lcore_cpus(eal: &dpdk::Eal, lcores: &[u32]) -> Vec<usize> {
    let mut cpus: Vec<usize> = lcores
        .iter()
        .flat_map(|&l| eal.lcore_cpus(dpdk::LcoreId(l)))
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> Vec<usize> {
        s.parse::<CpuList>().unwrap().cpus().to_vec()
    }

    #[test]
    fn cpu_lists_parse_in_the_linux_form() {
        assert_eq!(list("0"), [0]);
        assert_eq!(list("0-3,6"), [0, 1, 2, 3, 6]);
        assert_eq!(list(" 6 , 0-1 ,1"), [0, 1, 6]);
        assert_eq!(list("5-5"), [5]);
        assert_eq!(list("1023"), [1023]);
    }

    #[test]
    fn cpu_list_mistakes_are_named() {
        let err = |s: &str| s.parse::<CpuList>().unwrap_err();
        assert_eq!(err(""), CpuListError::Empty);
        assert_eq!(err("  "), CpuListError::Empty);
        assert_eq!(
            err("0,,2"),
            CpuListError::NotACpu {
                item: String::new()
            }
        );
        assert_eq!(err("0-"), CpuListError::NotACpu { item: "0-".into() });
        assert_eq!(err("a-3"), CpuListError::NotACpu { item: "a-3".into() });
        assert_eq!(err("-1"), CpuListError::NotACpu { item: "-1".into() });
        assert_eq!(
            err("1-2-3"),
            CpuListError::NotACpu {
                item: "1-2-3".into()
            }
        );
        assert_eq!(err("x"), CpuListError::NotACpu { item: "x".into() });
        assert_eq!(err("3-1"), CpuListError::Reversed { first: 3, last: 1 });
        assert_eq!(err("1024"), CpuListError::TooLarge { cpu: 1024 });
        assert_eq!(err("0-4096"), CpuListError::TooLarge { cpu: 4096 });
        assert_eq!(
            err("99999999999999999999999"),
            CpuListError::TooLarge { cpu: usize::MAX }
        );
        let msg = err("3-1").to_string();
        assert!(msg.contains("3-1 ends before it starts"), "{msg}");
        let msg = err("x").to_string();
        assert!(msg.contains("\"x\" is not a CPU number"), "{msg}");
        assert_eq!(CpuList::from_cpus([]), Err(CpuListError::Empty));
        assert_eq!(
            CpuList::from_cpus([1, 2000]),
            Err(CpuListError::TooLarge { cpu: 2000 })
        );
    }

    #[test]
    fn cpu_lists_print_short_and_read_back() {
        for (cpus, text) in [
            (vec![0], "0"),
            (vec![0, 1], "0,1"),
            (vec![0, 1, 2, 3, 6], "0-3,6"),
            (vec![1, 3, 4, 5, 7, 8], "1,3-5,7,8"),
        ] {
            let l = CpuList::from_cpus(cpus).unwrap();
            assert_eq!(l.to_string(), text);
            assert_eq!(text.parse::<CpuList>().unwrap(), l);
        }
        let l = CpuList::from_cpus([6, 0, 6, 2]).unwrap();
        assert_eq!(l.cpus(), [0, 2, 6]);
        assert_eq!((l.len(), l.is_empty()), (3, false));
        assert!(l.contains(2) && !l.contains(1));
    }

    #[test]
    fn cpu_lists_deserialize_from_a_list_or_a_string() {
        #[derive(serde::Deserialize, serde::Serialize, Debug)]
        struct M {
            cpus: CpuList,
        }
        let list: M = toml::from_str("cpus = [2, 0]").unwrap();
        assert_eq!(list.cpus.cpus(), [0, 2]);
        let text: M = toml::from_str("cpus = \"0-2\"").unwrap();
        assert_eq!(text.cpus.cpus(), [0, 1, 2]);
        assert_eq!(toml::to_string(&list).unwrap().trim(), "cpus = [0, 2]");
        for (bad, says) in [
            ("cpus = []", "empty CPU list"),
            ("cpus = \"3-1\"", "ends before it starts"),
            ("cpus = [-1]", "invalid value"),
            ("cpus = [4096]", "past the largest CPU number 1023"),
            ("cpus = 3", "a list of CPU numbers"),
        ] {
            let e = toml::from_str::<M>(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn control_cpus_are_the_allowed_ones_no_lcore_polls() {
        // Two CPUs, the loop on CPU 1: control on 0.
        assert_eq!(control_cpus(&[0, 1], &[1], &[1]), [0]);
        // Four CPUs, loops on 1 and 2, main lcore 1: 0 and 3.
        assert_eq!(control_cpus(&[0, 1, 2, 3], &[1, 2], &[1]), [0, 3]);
        // Lcores outside the allowed set change nothing; order and repeats are normalised.
        assert_eq!(control_cpus(&[3, 0, 3], &[7], &[0]), [0, 3]);
        // Every allowed CPU polled: the main lcore's CPU, as DPDK falls back.
        assert_eq!(control_cpus(&[0, 1], &[0, 1], &[0]), [0]);
        assert_eq!(control_cpus(&[1], &[1], &[1]), [1]);
        // The OS would not say: the main lcore's CPU.
        assert_eq!(control_cpus(&[], &[1], &[1]), [1]);
        assert!(control_cpus(&[], &[], &[]).is_empty());
    }

    #[test]
    fn configured_cpus_that_an_lcore_polls_are_found() {
        let cpus = CpuList::from_cpus([0, 1, 2]).unwrap();
        assert_eq!(overlap(&cpus, &[1, 2, 5]), [1, 2]);
        assert!(overlap(&cpus, &[3]).is_empty());
    }

    #[test]
    fn threads_are_spread_round_robin_and_clones_share_the_turn() {
        let c = ControlCores::new(CpuList::from_cpus([0, 3]).unwrap());
        let d = c.clone();
        assert_eq!(c.next_cpu(), 0);
        assert_eq!(d.next_cpu(), 3);
        assert_eq!(c.next_cpu(), 0);
        assert_eq!(c.cpus().to_string(), "0,3");
    }

    #[test]
    fn a_thread_is_pinned_to_a_cpu_it_may_use() {
        // On a thread of its own, so the test harness's thread keeps its affinity.
        std::thread::spawn(|| {
            let mine = current_cpus();
            let Some(&last) = mine.last() else {
                return; // the OS does not say: nothing to check
            };
            let c = ControlCores::new(CpuList::single(last).unwrap());
            assert_eq!(c.pin("test"), Some(last));
            assert_eq!(current_cpus(), [last]);
            assert_eq!(ControlCores::pin_opt(None, "test"), None);
            // A CPU past every machine's is refused, and the thread stays where it was.
            let never = ControlCores::new(CpuList::single(MAX_CPUS - 1).unwrap());
            if !mine.contains(&(MAX_CPUS - 1)) {
                assert_eq!(never.pin("test"), None);
                assert_eq!(current_cpus(), [last]);
            }
        })
        .join()
        .unwrap();
    }
}
