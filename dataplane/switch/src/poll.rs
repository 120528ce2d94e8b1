//! Pollers and the loop that runs them. One busy loop per core: an lcore runs a list of pollers
//! (RX queues, a scheduler, emulated leaves, in the demo several switches), so the number of
//! spinning threads never exceeds the cores given to it.

use crate::counters::{bump, LoopCounters};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

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

/// The process's monotonic clock in nanoseconds, shared by every loop so times compare. On
/// DPDK it reads the TSC (a few cycles; the loops read it every iteration), elsewhere the OS
/// monotonic clock.
#[derive(Copy, Clone, Debug)]
pub enum Clock {
    Os {
        origin: Instant,
    },
    /// `ns = (tsc - origin) * mult >> 32`, with `mult = 1e9 * 2^32 / hz`.
    Tsc {
        origin: u64,
        mult: u64,
        read: fn() -> u64,
    },
}

impl Clock {
    pub fn new() -> Self {
        Clock::Os {
            origin: Instant::now(),
        }
    }

    /// A clock on a cycle counter `read` that ticks `hz` times a second (DPDK's TSC).
    pub fn from_counter(read: fn() -> u64, hz: u64) -> Self {
        if hz == 0 {
            return Clock::new();
        }
        let mult = ((1_000_000_000u128 << 32) / u128::from(hz)) as u64;
        Clock::Tsc {
            origin: read(),
            mult,
            read,
        }
    }

    #[inline]
    pub fn now_ns(&self) -> u64 {
        match *self {
            Clock::Os { origin } => origin.elapsed().as_nanos() as u64,
            Clock::Tsc { origin, mult, read } => {
                ((u128::from(read().wrapping_sub(origin)) * u128::from(mult)) >> 32) as u64
            }
        }
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// Run `pollers` round-robin until `quit` is set. Returns the pollers for `finish_all`.
pub fn run_loop(
    mut pollers: Vec<Box<dyn Poller>>,
    quit: &AtomicBool,
    clock: Clock,
    counters: &LoopCounters,
) -> Vec<Box<dyn Poller>> {
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
            std::hint::spin_loop();
        }
    }
    pollers
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    static FAKE: AtomicU64 = AtomicU64::new(1_000);

    fn fake() -> u64 {
        FAKE.load(Ordering::Relaxed)
    }

    #[test]
    fn counter_clock_converts_ticks_to_nanoseconds() {
        // 2.5 GHz: 2.5 ticks per ns.
        let c = Clock::from_counter(fake, 2_500_000_000);
        assert_eq!(c.now_ns(), 0);
        FAKE.store(1_000 + 2_500_000_000, Ordering::Relaxed);
        let one_s = c.now_ns();
        assert!((999_999_990..=1_000_000_000).contains(&one_s), "{one_s}");
        // Hours later the product still fits (u128 intermediate).
        FAKE.store(1_000 + 2_500_000_000 * 3600 * 24, Ordering::Relaxed);
        let day = c.now_ns();
        assert!(
            (86_399_999_000_000..=86_400_000_000_000).contains(&day),
            "{day}"
        );
    }

    #[test]
    fn os_clock_moves_forward() {
        let c = Clock::new();
        let a = c.now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(c.now_ns() >= a + 2_000_000);
    }
}
