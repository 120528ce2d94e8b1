//! The safe layer over DPDK: `Eal` (one per process), `Mempool` and `Mbuf`, `Port` with
//! `rx_burst`/`tx_burst` on `MbufBatch`, lcore launch, TSC time. This crate and `dpdk-sys` are
//! the only places in netbarrier with `unsafe` code touching DPDK; each block says why it holds.
//!
//! Lifetimes follow ownership: pools and ports hold the EAL alive, ports hold their RX pools
//! alive, and `rte_eal_cleanup` runs when the last of them is gone.
//!
//! ```no_run
//! use dpdk::{Eal, Mempool, MbufBatch, Port, QueueId};
//!
//! let (eal, _app_args) = Eal::init(dpdk::test_args("demo", &["--vdev=net_ring0"]))?;
//! let pool = Mempool::new_pktmbuf(&eal, "demo", 8191, 256, dpdk::MBUF_DEFAULT_BUF_SIZE)?;
//! let mut port = Port::open_by_name(&eal, "net_ring0")?;
//! port.configure(1, 1, 1024, 1024, &pool)?;
//! port.start()?;
//! let mut batch: MbufBatch = MbufBatch::new();
//! port.rx_burst(QueueId(0), &mut batch);
//! port.tx_burst(QueueId(0), &mut batch); // unsent frames stay in `batch`
//! # Ok::<(), dpdk::DpdkError>(())
//! ```

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod capture;
pub mod eal;
pub mod error;
pub mod ids;
pub mod lcore;
pub mod mbuf;
pub mod mempool;
pub mod port;
pub mod telemetry;
pub mod time;

pub use eal::{test_args, Eal};
pub use error::DpdkError;
pub use ids::{LcoreId, PortId, QueueId};
pub use lcore::{current_lcore, launch_on, LcoreError, LcoreJoin, ThreadRegistration};
pub use mbuf::{Mbuf, MbufBatch, DEFAULT_BURST};
pub use mempool::{Mempool, MempoolSpan};
pub use port::{LinkStatus, Port, PortStats, RxQueue, TxQueue};
pub use telemetry::TelemetryValue;
pub use time::{tsc, tsc_hz};

/// Asks the CPU to bring the cache line holding `*r` into every cache level without waiting
/// for it (`rte_prefetch0`): a hint that lets the misses of a burst's frames or table slots
/// overlap instead of being taken one at a time. It changes nothing the program computes.
#[inline(always)]
pub fn prefetch<T: ?Sized>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads nothing into the program, never faults, and `r`
    // is a valid reference anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            (r as *const T).cast::<i8>(),
        )
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// Asks the kernel to back `region` with transparent huge pages (`madvise(MADV_HUGEPAGE)` over
/// the 2 MiB pages wholly inside it), best effort: call it before the memory is first
/// written, so that the pages are huge when they fault in. Returns whether the kernel took the
/// advice (false for a region smaller than a huge page, or with THP disabled ("never")).
/// With THP "madvise" (Debian's default) only advised memory gets huge pages; with "always"
/// it is implied.
pub fn advise_hugepages<T>(region: &mut [std::mem::MaybeUninit<T>]) -> bool {
    const HUGE: usize = 2 << 20;
    let start = region.as_mut_ptr() as usize;
    let end = start + std::mem::size_of_val(region);
    let (lo, hi) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
    if hi <= lo {
        return false;
    }
    // SAFETY: [lo, hi) lies inside `region`, memory this call borrows exclusively; the advice
    // changes how the kernel backs the pages, never their contents.
    unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) == 0 }
}

/// `RTE_MBUF_DEFAULT_BUF_SIZE`: data room (with headroom) for standard Ethernet frames.
pub const MBUF_DEFAULT_BUF_SIZE: u16 = dpdk_sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_page_advice_covers_whole_huge_pages_only() {
        let mut small: Vec<u64> = Vec::with_capacity(1024);
        assert!(
            !advise_hugepages(small.spare_capacity_mut()),
            "8 KiB: no huge page inside"
        );
        let mut big: Vec<u64> = Vec::with_capacity(1 << 20); // 8 MiB: at least 3 huge pages
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        let offered = thp.contains("[always]") || thp.contains("[madvise]");
        let advised = advise_hugepages(big.spare_capacity_mut());
        // With THP "never" the kernel may still accept the advice (it only marks the range).
        assert!(advised || !offered, "THP: {thp}");
        big.extend(0..1 << 20);
        assert_eq!(big[12345], 12345, "the memory works as before");
    }
}
