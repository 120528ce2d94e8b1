//! Packet capture by a secondary process (`dpdk-dumpcap`): `rte_pdump` in the primary answers
//! the capture tool's requests over EAL's multi-process channel and copies the frames of the
//! ports and queues it asks for into the tool's ring. That channel exists only with shared
//! configuration: EAL started without `--no-shconf` and without `--in-memory`. Without it
//! `rte_pdump_init` still succeeds (DPDK ignores the channel's `ENOTSUP`), but no capture tool
//! can reach the process: callers decide from their EAL arguments whether to offer capture.

use dpdk_sys as sys;

use crate::eal::Eal;
use crate::error::{check_rte_errno, DpdkError};

/// Initialises `rte_pdump` in this (primary) process so `dpdk-dumpcap` can capture its ports:
/// reserves the pdump statistics memzone and registers the multi-process handler. Lasts until
/// `rte_eal_cleanup`; a second call fails (the memzone exists: `EEXIST`/`ENOMEM`).
pub fn pdump_init(_eal: &Eal) -> Result<(), DpdkError> {
    // SAFETY: EAL is initialised (the `Eal` token proves it); the call takes no pointers.
    check_rte_errno("rte_pdump_init", unsafe { sys::rte_pdump_init() }).map(|_| ())
}
