//! Pollers and the loop that runs them. One busy loop per core: an lcore runs a list of pollers
//! (RX queues, a scheduler, emulated leaves, in the demo several switches), so the number of
//! spinning threads never exceeds the cores given to it.

use crate::clock::Clock;
use crate::counters::{bump, LoopCounters};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A unit of poll-mode work. `poll` does a bounded amount of work and says whether it did any.
pub trait Poller: Send {
    fn poll(&mut self, now_ns: u64) -> bool;
    /// Called once after every loop has stopped: hand buffered frames to the device.
    fn finish(&mut self) {}
    /// Called after every poller's `finish`: receive and free whatever is still queued, so
    /// every mbuf is back in its pool before the ports close. Returns the frames freed.
    fn drain(&mut self) -> usize {
        0
    }
}

/// Shut a set of stopped loops down in the order that loses nothing: every `finish` (flush)
/// first, then every `drain`. Returns the frames drained.
pub fn finish_all(pollers: &mut [Box<dyn Poller>]) -> usize {
    for p in pollers.iter_mut() {
        p.finish();
    }
    pollers.iter_mut().map(|p| p.drain()).sum()
}

/// The idle policy's name, as a command line or a configuration file gives it; `Idle` adds
/// its parameters.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IdleMode {
    /// Never give the core up (a core per loop: the deployment default).
    Spin,
    /// `sched_yield` after a run of empty passes (other threads of the core may run).
    Yield,
    /// Sleep after a run of empty passes (fewer cores than busy loops).
    Sleep,
}

impl IdleMode {
    /// The mode called `name` (`spin`, `yield`, `sleep`), as clap parses it.
    pub fn parse(name: &str) -> Option<IdleMode> {
        <IdleMode as clap::ValueEnum>::from_str(name, false).ok()
    }
}

/// What a loop does on a pass where no poller found work.
///
/// `Spin` is the deployment default: the loop owns its core, and giving the core up would put
/// the OS scheduler's wake-up latency on the next frame. On a machine with fewer cores than
/// busy loops (several switch processes on a laptop or a CI box, the reduced mode) a spinning
/// loop holds its core for a whole time slice while the process that has the next frame to
/// forward waits for one, and a barrier then takes milliseconds; backing off after a run of
/// empty passes hands the core over, as DPDK applications do with `rte_pause`/`usleep` in
/// their idle paths (l3fwd-power).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum Idle {
    #[default]
    Spin,
    /// After `after` empty passes in a row, `sched_yield` on every further empty pass.
    Yield { after: u32 },
    /// After `after` empty passes in a row, sleep `ns` on every further empty pass.
    Sleep { after: u32, ns: u64 },
}

impl Idle {
    /// Empty passes before backing off: an empty pass over two `net_af_packet` ports took
    /// about 70 ns here, so this spins some tens of µs (about a leaf's turn-around on a small
    /// tree) before giving the core away.
    pub const DEFAULT_AFTER: u32 = 1000;
    /// Sleep per empty pass: short against a re-send timeout (1 ms and up), long enough that
    /// the OS gives the core to another process.
    pub const DEFAULT_SLEEP_NS: u64 = 20_000;

    /// The policy of `mode` with the default parameters.
    pub fn with_defaults(mode: IdleMode) -> Idle {
        match mode {
            IdleMode::Spin => Idle::Spin,
            IdleMode::Yield => Idle::Yield {
                after: Self::DEFAULT_AFTER,
            },
            IdleMode::Sleep => Idle::Sleep {
                after: Self::DEFAULT_AFTER,
                ns: Self::DEFAULT_SLEEP_NS,
            },
        }
    }

    /// What a polling thread does after one pass: nothing after a busy pass, else spin, or
    /// yield or sleep once `after` empty passes came in a row (`idle_run` counts them). Returns
    /// whether it gave the core away. For any polling loop: the lcore loops here, the leaf's
    /// DPDK transport.
    #[inline]
    pub fn pause(self, busy: bool, idle_run: &mut u32) -> bool {
        if busy {
            *idle_run = 0;
            return false;
        }
        match self {
            Idle::Spin => {
                std::hint::spin_loop();
                false
            }
            Idle::Yield { after } | Idle::Sleep { after, .. } if *idle_run < after => {
                *idle_run += 1;
                std::hint::spin_loop();
                false
            }
            Idle::Yield { .. } => {
                std::thread::yield_now();
                true
            }
            Idle::Sleep { ns, .. } => {
                std::thread::sleep(std::time::Duration::from_nanos(ns));
                true
            }
        }
    }

    /// `pause`, counting the back-offs in the loop's counters.
    #[inline]
    fn after_pass(self, busy: bool, idle_run: &mut u32, counters: &LoopCounters) {
        if self.pause(busy, idle_run) {
            bump(&counters.backoffs, 1);
        }
    }
}

impl std::fmt::Display for Idle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Idle::Spin => write!(f, "spin"),
            Idle::Yield { after } => write!(f, "yield after {after} empty passes"),
            Idle::Sleep { after, ns } => write!(
                f,
                "sleep {} µs after {after} empty passes",
                ns as f64 / 1000.0
            ),
        }
    }
}

/// Run `pollers` round-robin until `quit` is set, doing what `idle` says on empty passes.
/// Returns the pollers for `finish_all`.
pub fn run_loop(
    mut pollers: Vec<Box<dyn Poller>>,
    quit: &AtomicBool,
    clock: Clock,
    counters: &LoopCounters,
    idle: Idle,
) -> Vec<Box<dyn Poller>> {
    let mut idle_run = 0u32;
    while !quit.load(Ordering::Relaxed) {
        let now = clock.now_ns();
        let mut busy = false;
        for p in pollers.iter_mut() {
            busy |= p.poll(now);
        }
        if busy {
            bump(&counters.busy_polls, 1);
        } else {
            bump(&counters.idle_polls, 1);
        }
        idle.after_pass(busy, &mut idle_run, counters);
    }
    pollers
}

/// Sets the flag when dropped, also while unwinding from a panic: a loop that ends, normally or
/// not, stops every other loop and the management thread watching the flag.
pub struct StopOnDrop(pub Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Busy on the passes listed in `work`, idle on the others.
    struct Scripted {
        pass: usize,
        work: Vec<usize>,
        stop_at: usize,
        quit: std::sync::Arc<AtomicBool>,
    }

    impl Poller for Scripted {
        fn poll(&mut self, _now: u64) -> bool {
            self.pass += 1;
            if self.pass >= self.stop_at {
                self.quit.store(true, Ordering::Relaxed);
            }
            self.work.contains(&self.pass)
        }
    }

    fn backoffs(idle: Idle, work: Vec<usize>, passes: usize) -> (u64, u64) {
        let quit = std::sync::Arc::new(AtomicBool::new(false));
        let c = LoopCounters::default();
        let p = Scripted {
            pass: 0,
            work,
            stop_at: passes,
            quit: quit.clone(),
        };
        run_loop(vec![Box::new(p)], &quit, Clock::new(), &c, idle);
        (
            c.backoffs.load(Ordering::Relaxed),
            c.idle_polls.load(Ordering::Relaxed),
        )
    }

    #[test]
    fn spin_never_backs_off() {
        assert_eq!(backoffs(Idle::Spin, vec![], 50), (0, 50));
    }

    #[test]
    fn backoff_starts_after_a_run_of_empty_passes_and_work_resets_it() {
        // 10 empty passes, then one backoff per further empty pass: passes 11..=20.
        let y = Idle::Yield { after: 10 };
        assert_eq!(backoffs(y, vec![], 20), (10, 20));
        // Work on pass 15 restarts the count: 16..=25 spin, 26..=30 back off; before it,
        // 11..=14 backed off.
        assert_eq!(backoffs(y, vec![15], 30).0, 4 + 5);
        let s = Idle::Sleep {
            after: 3,
            ns: 1_000,
        };
        assert_eq!(backoffs(s, vec![], 8), (5, 8));
    }

    #[test]
    fn os_clock_moves_forward() {
        let c = Clock::new();
        let a = c.now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(c.now_ns() >= a + 2_000_000);
    }
}
