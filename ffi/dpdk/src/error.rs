//! Errors from DPDK calls: every failure names the operation and carries `rte_strerror`'s text,
//! so a log line says what was attempted and why DPDK refused.

use std::ffi::CStr;

use dpdk_sys as sys;

/// A DPDK operation that failed, or a request the safe layer refused before calling DPDK.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DpdkError {
    /// A DPDK function returned an error code.
    #[error("{op} failed: {message} (errno {errno})")]
    Call {
        /// The DPDK function or safe-layer operation, e.g. `rte_eth_dev_configure`.
        op: &'static str,
        /// The positive errno value DPDK reported.
        errno: i32,
        /// `rte_strerror(errno)`.
        message: String,
    },
    /// `Eal::init` was called after an earlier init in this process (successful or failed, or
    /// already cleaned up): DPDK allows one.
    #[error("EAL already initialised in this process (or its init failed earlier): DPDK allows one rte_eal_init per process")]
    EalAlreadyInitialized,
    /// An argument the safe layer rejects before calling DPDK.
    #[error("{op}: {reason}")]
    Invalid {
        /// The operation that was asked for.
        op: &'static str,
        /// Why it was refused.
        reason: String,
    },
}

impl DpdkError {
    /// Builds the error for `op` from a positive errno value.
    #[cold]
    pub fn from_errno(op: &'static str, errno: i32) -> Self {
        let errno = errno.abs();
        DpdkError::Call {
            op,
            errno,
            message: strerror(errno),
        }
    }

    /// Builds the error for `op` from the calling thread's `rte_errno`.
    #[cold]
    pub fn from_rte_errno(op: &'static str) -> Self {
        Self::from_errno(op, rte_errno())
    }

    /// Builds an `Invalid` error.
    #[cold]
    pub fn invalid(op: &'static str, reason: impl Into<String>) -> Self {
        DpdkError::Invalid {
            op,
            reason: reason.into(),
        }
    }

    /// The errno carried by a `Call` error.
    pub fn errno(&self) -> Option<i32> {
        match self {
            DpdkError::Call { errno, .. } => Some(*errno),
            DpdkError::EalAlreadyInitialized => Some(libc_ealready()),
            DpdkError::Invalid { .. } => None,
        }
    }
}

/// `EALREADY` on Linux (the value rte_eal_init sets for a second call).
const fn libc_ealready() -> i32 {
    114
}

/// The calling thread's `rte_errno`.
pub fn rte_errno() -> i32 {
    // SAFETY: the shim reads a thread-local integer; it has no preconditions.
    unsafe { sys::dpdk_sys_rte_errno() }
}

/// `rte_strerror(errno)` as an owned string.
pub fn strerror(errno: i32) -> String {
    // SAFETY: rte_strerror accepts any value and returns a pointer to a NUL-terminated string
    // (static, or in a thread-local buffer that stays valid until this thread's next call); we
    // copy it out before returning.
    unsafe {
        let p = sys::rte_strerror(errno);
        if p.is_null() {
            return format!("errno {errno}");
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Maps DPDK's "negative errno on failure" convention to a `Result`.
pub(crate) fn check(op: &'static str, ret: i32) -> Result<i32, DpdkError> {
    if ret < 0 {
        Err(DpdkError::from_errno(op, -ret))
    } else {
        Ok(ret)
    }
}

/// Maps "-1 with rte_errno set" to a `Result`.
pub(crate) fn check_rte_errno(op: &'static str, ret: i32) -> Result<i32, DpdkError> {
    if ret < 0 {
        Err(DpdkError::from_rte_errno(op))
    } else {
        Ok(ret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_shim_reads_this_threads_value() {
        // SAFETY: setting the thread-local rte_errno has no preconditions.
        unsafe { sys::dpdk_sys_set_rte_errno(22) };
        assert_eq!(rte_errno(), 22);
        let other = std::thread::spawn(rte_errno).join().unwrap();
        assert_eq!(other, 0, "rte_errno is per thread");
        let e = DpdkError::from_rte_errno("op_name");
        let text = e.to_string();
        assert!(text.starts_with("op_name failed: "), "{text}");
        assert!(text.contains("Invalid argument"), "{text}");
        assert_eq!(e.errno(), Some(22));
    }

    #[test]
    fn negative_returns_become_errors() {
        assert_eq!(strerror(12), "Cannot allocate memory");
        assert_eq!(check("x", 3), Ok(3));
        assert!(matches!(
            check("x", -12),
            Err(DpdkError::Call { errno: 12, .. })
        ));
    }
}
