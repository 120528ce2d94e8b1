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

/// The process's monotonic clock in nanoseconds, shared by every loop so times compare.
#[derive(Copy, Clone, Debug)]
pub struct Clock {
    origin: Instant,
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            origin: Instant::now(),
        }
    }
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
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
