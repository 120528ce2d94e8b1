//! The timestamp counter DPDK programs use for time: cheap to read, ticks at `tsc_hz()`.

use dpdk_sys as sys;

/// The current TSC value.
#[inline(always)]
pub fn tsc() -> u64 {
    // SAFETY: rdtsc has no preconditions.
    unsafe { sys::rte_rdtsc() }
}

/// TSC ticks per second, as EAL measured it at init (0 before init).
pub fn tsc_hz() -> u64 {
    // SAFETY: reads a value set by EAL init; harmless before it.
    unsafe { sys::rte_get_tsc_hz() }
}
