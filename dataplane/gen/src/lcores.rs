//! The default lcores, from what the machine has free: the CPUs this process may use
//! (`sched_getaffinity`, through `barrier_runtime::affinity::current_cpus`) and how busy each
//! was over a short sample of `/proc/stat`. Every lcore of the generator (and of an in-process
//! switch) is a busy poller; two of them on CPUs that other work also wants both lose their
//! core in turns and the run measures the scheduler, so without a free CPU for each the run
//! takes one lcore that may float over every allowed CPU. The choice is pure (`plan`); only
//! `sample` reads the system.

use std::time::Duration;

/// A CPU counts as free when it was busy less than this fraction of the sample.
pub const FREE_BELOW: f64 = 0.5;

/// How long `sample` watches `/proc/stat`.
pub const SAMPLE: Duration = Duration::from_millis(200);

/// Per CPU of a `/proc/stat` text: (cpu, busy jiffies, all jiffies). Busy is every field but
/// idle and iowait (guest time is inside user already).
pub fn parse_stat(text: &str) -> Vec<(usize, u64, u64)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu: usize = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = f.take(8).filter_map(|x| x.parse().ok()).collect();
            if v.len() < 4 {
                return None;
            }
            let all: u64 = v.iter().sum();
            let idle = v[3] + v.get(4).copied().unwrap_or(0);
            Some((cpu, all - idle, all))
        })
        .collect()
}

/// Busy fraction per CPU between two `parse_stat` samples (CPUs in both, with time passed).
pub fn busy(before: &[(usize, u64, u64)], after: &[(usize, u64, u64)]) -> Vec<(usize, f64)> {
    after
        .iter()
        .filter_map(|&(cpu, b1, a1)| {
            let &(_, b0, a0) = before.iter().find(|x| x.0 == cpu)?;
            let all = a1.checked_sub(a0).filter(|&d| d > 0)?;
            Some((cpu, b1.saturating_sub(b0) as f64 / all as f64))
        })
        .collect()
}

/// The lcores to give EAL, and the line that says why.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// An EAL `--lcores` value.
    pub lcores: String,
    /// How many lcores that is.
    pub count: usize,
    pub note: String,
}

/// `want` busy pollers (generators, plus one for an in-process switch that could have its
/// own) on the `allowed` CPUs, of which `load` says how busy each was (a CPU missing from
/// `load` counts as free). With a free CPU for each, lcore i on the i-th least busy free CPU;
/// otherwise `min_lcores` lcores (one per generator: they cannot share one), each allowed on
/// every allowed CPU, so the kernel puts them where there is room.
pub fn plan(allowed: &[usize], load: &[(usize, f64)], want: usize, min_lcores: usize) -> Plan {
    let busy_of = |c: usize| load.iter().find(|x| x.0 == c).map_or(0.0, |x| x.1);
    let mut free: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|&c| busy_of(c) < FREE_BELOW)
        .collect();
    free.sort_by(|&a, &b| busy_of(a).total_cmp(&busy_of(b)).then(a.cmp(&b)));
    let seen = allowed
        .iter()
        .map(|&c| format!("CPU {c} {:.0}% busy", busy_of(c) * 100.0))
        .collect::<Vec<_>>()
        .join(", ");
    if free.len() >= want.max(1) {
        let chosen = &free[..want.max(1)];
        return Plan {
            lcores: chosen
                .iter()
                .enumerate()
                .map(|(i, c)| format!("{i}@{c}"))
                .collect::<Vec<_>>()
                .join(","),
            count: chosen.len(),
            note: format!(
                "barrier-gen: {} of {} CPUs free ({seen}): {} lcore{} on CPU {} (-l/--lcores to choose)",
                free.len(),
                allowed.len(),
                chosen.len(),
                if chosen.len() == 1 { "" } else { "s" },
                chosen.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
            ),
        };
    }
    let n = min_lcores.max(1);
    let set = allowed
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let set = if set.is_empty() { "0".to_string() } else { set };
    Plan {
        lcores: (0..n)
            .map(|i| format!("{i}@({set})"))
            .collect::<Vec<_>>()
            .join(","),
        count: n,
        note: format!(
            "barrier-gen: {} of {} CPUs free ({seen}), {want} busy poller{} wanted: {} on {n} lcore{} that may run on CPUs {set}{} (-l/--lcores to choose)",
            free.len(),
            allowed.len(),
            if want == 1 { "" } else { "s" },
            match (want > n, n) {
                (true, _) => "running them",
                (false, 1) => "the generator",
                (false, _) => "the generators",
            },
            if n == 1 { "" } else { "s" },
            if want > n { ", the in-process switch inside the generator's loop" } else { "" },
        ),
    }
}

/// Whether EAL arguments already say which lcores to use (`-l`, `-c`, `--lcores`).
pub fn names_lcores(eal: &[String]) -> bool {
    eal.iter().any(|a| {
        a == "--lcores"
            || a.starts_with("--lcores=")
            || (a.starts_with("-l") && !a.starts_with("--"))
            || (a.starts_with("-c") && !a.starts_with("--"))
    })
}

/// The plan for this machine now: the allowed CPUs and a `SAMPLE` of `/proc/stat` (without
/// it, every allowed CPU counts as free).
pub fn sample(want: usize, min_lcores: usize) -> Plan {
    let mut allowed = barrier_runtime::affinity::current_cpus();
    if allowed.is_empty() {
        allowed = (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    }
    let read = || std::fs::read_to_string("/proc/stat").map(|t| parse_stat(&t));
    let load = match read() {
        Ok(before) => {
            std::thread::sleep(SAMPLE);
            read()
                .map(|after| busy(&before, &after))
                .unwrap_or_default()
        }
        Err(_) => Vec::new(),
    };
    plan(&allowed, &load, want, min_lcores)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  10 0 10 80 0 0 0 0 0 0\n\
        cpu0 5 0 5 40 0 0 0 0 0 0\n\
        cpu1 5 0 5 40 0 0 0 0 0 0\n\
        intr 1 2 3\n";

    #[test]
    fn stat_lines_per_cpu() {
        assert_eq!(parse_stat(STAT), vec![(0, 10, 50), (1, 10, 50)]);
        let after = "cpu0 95 0 5 40 0 0 0 0 0 0\ncpu1 6 0 5 139 0 0 0 0 0 0\n";
        let b = busy(&parse_stat(STAT), &parse_stat(after));
        assert_eq!(b, vec![(0, 1.0), (1, 0.01)]);
        assert!(busy(&parse_stat(STAT), &parse_stat(STAT)).is_empty());
    }

    #[test]
    fn a_free_cpu_each_gives_pinned_lcores_least_busy_first() {
        let p = plan(&[0, 1, 2], &[(0, 0.3), (1, 0.9), (2, 0.1)], 2, 1);
        assert_eq!(p.lcores, "0@2,1@0");
        assert_eq!(p.count, 2);
        assert!(p.note.contains("2 of 3 CPUs free"), "{}", p.note);
    }

    #[test]
    fn too_few_free_cpus_gives_one_floating_lcore() {
        let p = plan(&[0, 1], &[(0, 0.2), (1, 0.97)], 2, 1);
        assert_eq!((p.lcores.as_str(), p.count), ("0@(0,1)", 1));
        assert!(p.note.contains("inside the generator's loop"), "{}", p.note);
        assert!(p.note.contains("CPU 1 97% busy"), "{}", p.note);
        let p = plan(&[0, 1], &[(0, 0.9), (1, 0.9)], 1, 1);
        assert!(
            p.note
                .contains("1 busy poller wanted: the generator on 1 lcore"),
            "{}",
            p.note
        );
        // several generators keep one lcore each
        let p = plan(&[0, 1], &[(0, 0.9), (1, 0.9)], 3, 2);
        assert_eq!((p.lcores.as_str(), p.count), ("0@(0,1),1@(0,1)", 2));
    }

    #[test]
    fn unknown_load_counts_as_free() {
        assert_eq!(plan(&[4, 5], &[], 2, 1).lcores, "0@4,1@5");
    }

    #[test]
    fn lcore_flags_are_recognised() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(names_lcores(&v(&["--no-huge", "-l", "0"])));
        assert!(names_lcores(&v(&["-l0,1"])));
        assert!(names_lcores(&v(&["--lcores=0@1"])));
        assert!(names_lcores(&v(&["-c", "0x3"])));
        assert!(!names_lcores(&v(&[
            "--no-huge",
            "--log-level=*:warning",
            "-m",
            "256"
        ])));
    }
}
