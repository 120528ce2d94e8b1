//! libbarrier: the C ABI of the barrier-leaf library (`include/barrier.h`). Every function here
//! checks its pointers, turns the safe Rust API's errors into `barrier_status` codes with a
//! thread-local message, and catches panics so none unwinds into C. The only `unsafe` is the
//! pointer handling at this boundary, each block with its `// SAFETY:` argument.

use barrier_leaf::{Config, Error, Record, RecordSink, Session, Stats, Transport};
use barrier_protocol::wire::MacAddr;
use barrier_protocol::{Epoch, Seq};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, CStr, CString};
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

/// `barrier_status` of barrier.h.
pub mod status {
    use std::ffi::c_int;
    /// Success.
    pub const OK: c_int = 0;
    /// try_wait: not released yet.
    pub const PENDING: c_int = 1;
    /// Bad argument.
    pub const EINVAL: c_int = -1;
    /// Socket error.
    pub const EIO: c_int = -2;
    /// Not released within the timeout.
    pub const ETIMEDOUT: c_int = -3;
    /// Group not added.
    pub const ENOGROUP: c_int = -4;
    /// Group already added / already waiting.
    pub const EBUSY: c_int = -5;
    /// No permission (CAP_NET_RAW).
    pub const EPERM: c_int = -6;
    /// No such interface.
    pub const ENODEV: c_int = -7;
    /// Caught panic.
    pub const EINTERNAL: c_int = -8;
    /// The group's run was aborted: a switch declared a member failed.
    pub const EABORTED: c_int = -9;
    /// The switch is at another barrier of the leaf's epoch: an earlier run used the epoch.
    pub const EEPOCHINUSE: c_int = -10;
    /// Not in this build of libbarrier (barrier_leaf_open_dpdk without the `dpdk` feature).
    pub const ENOTSUP: c_int = -11;
}

/// `barrier_leaf_options` of barrier.h.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BarrierLeafOptions {
    /// Re-send timeout, µs.
    pub resend_timeout_us: u32,
    /// Default wait timeout, µs.
    pub wait_timeout_us: u64,
    /// Destination MAC of reduces.
    pub dst_mac: [u8; 6],
    /// Nonzero: timestamps in reduces.
    pub timestamps: u8,
    /// Must be 0.
    pub reserved: u8,
    /// First sequence number.
    pub first_seq: u32,
    /// The groups' epoch on the switches.
    pub epoch: u32,
}

/// `barrier_record` of barrier.h.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BarrierRecord {
    /// Group.
    pub group: u32,
    /// Sequence number.
    pub seq: u32,
    /// CLOCK_MONOTONIC ns of the first reduce.
    pub first_reduce_ns: u64,
    /// CLOCK_MONOTONIC ns of the release.
    pub release_ns: u64,
    /// Re-sends.
    pub resends: u32,
    /// Zero.
    pub reserved: u32,
}

/// `barrier_stats` of barrier.h.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BarrierStats {
    /// First reduces sent.
    pub reduces: u64,
    /// Reduces re-sent.
    pub resends: u64,
    /// Releases that ended a barrier.
    pub releases: u64,
    /// Ignored releases.
    pub stale_releases: u64,
    /// Frames of other groups, or reduces.
    pub foreign_frames: u64,
    /// Unparsable frames.
    pub bad_frames: u64,
}

impl From<Record> for BarrierRecord {
    fn from(r: Record) -> Self {
        BarrierRecord {
            group: r.group,
            seq: r.seq,
            first_reduce_ns: r.first_reduce_ns,
            release_ns: r.release_ns,
            resends: r.resends,
            reserved: 0,
        }
    }
}

impl From<Stats> for BarrierStats {
    fn from(s: Stats) -> Self {
        BarrierStats {
            reduces: s.reduces,
            resends: s.resends,
            releases: s.releases,
            stale_releases: s.stale_releases,
            foreign_frames: s.foreign_frames,
            bad_frames: s.bad_frames,
        }
    }
}

impl BarrierLeafOptions {
    /// The defaults of `barrier_leaf_options_init`.
    pub fn defaults() -> Self {
        let d = Config::default();
        BarrierLeafOptions {
            resend_timeout_us: d.resend_timeout.as_micros() as u32,
            wait_timeout_us: d.wait_timeout.as_micros() as u64,
            dst_mac: d.dst.0,
            timestamps: d.timestamps as u8,
            reserved: 0,
            first_seq: d.first_seq.0,
            epoch: d.epoch.get(),
        }
    }

    fn to_config(self) -> Result<Config, (c_int, String)> {
        if self.resend_timeout_us == 0 || self.wait_timeout_us == 0 || self.reserved != 0 {
            return Err((
                status::EINVAL,
                "options: timeouts must be > 0 and reserved must be 0".into(),
            ));
        }
        Ok(Config {
            resend_timeout: Duration::from_micros(self.resend_timeout_us.into()),
            wait_timeout: Duration::from_micros(self.wait_timeout_us),
            dst: MacAddr(self.dst_mac),
            first_seq: Seq(self.first_seq),
            epoch: Epoch(self.epoch),
            backoff: Default::default(),
            timestamps: self.timestamps != 0,
            busy_poll: Duration::ZERO,
            busy_poll_yield: false,
        })
    }
}

/// The object behind `barrier_leaf *`.
pub struct BarrierLeaf {
    session: Session<Box<dyn Transport + Send>>,
    /// Releases `barrier_leaf_poll` could not hand out for lack of room.
    pending: VecDeque<Record>,
}

impl BarrierLeaf {
    /// Wraps a session (any transport); what `barrier_leaf_open` does after opening the socket.
    /// Rust callers (and this crate's tests) use it to put the C API on another transport.
    pub fn from_session(session: Session<Box<dyn Transport + Send>>) -> Box<BarrierLeaf> {
        Box::new(BarrierLeaf {
            session,
            pending: VecDeque::new(),
        })
    }

    /// Turns the box into the pointer C holds.
    pub fn into_raw(self: Box<Self>) -> *mut BarrierLeaf {
        Box::into_raw(self)
    }

    /// A release of `group` that `barrier_leaf_poll` received but could not hand out. The
    /// session already counts it as handed out, so `wait`/`try_wait` must look here first:
    /// otherwise they would see the leaf as not waiting and arrive at the next barrier.
    fn take_pending(&mut self, group: u32) -> Option<Record> {
        let i = self.pending.iter().position(|r| r.group == group)?;
        self.pending.remove(i)
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(msg: String) {
    // A message with an interior NUL would be cut there by C anyway.
    let msg = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = msg);
}

fn io_status(e: &io::Error) -> c_int {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => status::EPERM,
        Some(libc::ENODEV) | Some(libc::ENXIO) => status::ENODEV,
        Some(libc::EINVAL) => status::EINVAL,
        _ => match e.kind() {
            io::ErrorKind::PermissionDenied => status::EPERM,
            io::ErrorKind::InvalidInput => status::EINVAL,
            _ => status::EIO,
        },
    }
}

fn error_status(e: &Error) -> c_int {
    match e {
        Error::Timeout { .. } => status::ETIMEDOUT,
        // The C API sets no interrupt flag; should a Rust caller, it reads as a timeout.
        Error::Interrupted { .. } => status::ETIMEDOUT,
        Error::UnknownGroup(_) => status::ENOGROUP,
        Error::GroupAlreadyOpen(_) | Error::AlreadyWaiting { .. } => status::EBUSY,
        Error::GroupOutOfRange(_) => status::EINVAL,
        Error::Aborted { .. } => status::EABORTED,
        Error::EpochInUse { .. } => status::EEPOCHINUSE,
        Error::Open { source, .. } => io_status(source),
        Error::Io(io) => io_status(io),
    }
}

/// Runs `f`, mapping its error to a status with a message, and a panic to EINTERNAL.
fn guard(f: impl FnOnce() -> Result<c_int, (c_int, String)>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(code)) => code,
        Ok(Err((code, msg))) => {
            set_last_error(msg);
            code
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(format!("internal error in libbarrier: {what}"));
            status::EINTERNAL
        }
    }
}

fn fail(e: Error) -> (c_int, String) {
    (error_status(&e), e.to_string())
}

fn null(what: &str) -> (c_int, String) {
    (status::EINVAL, format!("{what} is NULL"))
}

/// # Safety
/// `leaf` is NULL or a pointer from `barrier_leaf_open` not yet closed, used by one thread at
/// a time (barrier.h's contract).
unsafe fn leaf_mut<'a>(leaf: *mut BarrierLeaf) -> Result<&'a mut BarrierLeaf, (c_int, String)> {
    // SAFETY: per this function's contract the pointer is NULL (-> None) or valid and unaliased.
    unsafe { leaf.as_mut() }.ok_or_else(|| null("leaf"))
}

/// Fills `*opts` with the defaults.
///
/// # Safety
/// `opts` is NULL (ignored) or points to writable memory for a `barrier_leaf_options`.
#[no_mangle]
pub unsafe extern "C" fn barrier_leaf_options_init(opts: *mut BarrierLeafOptions) {
    if !opts.is_null() {
        // SAFETY: non-NULL and writable per the contract; write() does not read the old value.
        unsafe { opts.write(BarrierLeafOptions::defaults()) };
    }
}

/// Opens a leaf on interface `ifname`.
///
/// # Safety
/// `ifname` is a NUL-terminated string; `opts` is NULL or a valid `barrier_leaf_options`;
/// `out` points to writable storage for a pointer.
#[no_mangle]
pub unsafe extern "C" fn barrier_leaf_open(
    ifname: *const c_char,
    opts: *const BarrierLeafOptions,
    out: *mut *mut BarrierLeaf,
) -> c_int {
    guard(|| {
        if ifname.is_null() {
            return Err(null("ifname"));
        }
        if out.is_null() {
            return Err(null("out"));
        }
        // SAFETY: non-NULL and NUL-terminated per the contract; only read during this call.
        let name = unsafe { CStr::from_ptr(ifname) }
            .to_str()
            .map_err(|_| (status::EINVAL, "ifname is not UTF-8".to_string()))?;
        // SAFETY: NULL or a valid options struct per the contract; copied out.
        let opts = unsafe { opts.as_ref() }
            .copied()
            .unwrap_or_else(BarrierLeafOptions::defaults);
        let cfg = opts.to_config()?;
        let sock = barrier_leaf::transport::af_packet(name).map_err(fail)?;
        let session =
            Session::new(Box::new(sock) as Box<dyn Transport + Send>, cfg, &[]).map_err(fail)?;
        let leaf = BarrierLeaf::from_session(session).into_raw();
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { out.write(leaf) };
        Ok(status::OK)
    })
}

/// Opens a leaf on DPDK port `port`, starting DPDK's EAL with `eal_args` on the first call.
///
/// # Safety
/// `eal_args` is NULL or a NUL-terminated string; `port` is a NUL-terminated string; `opts` is
/// NULL or a valid `barrier_leaf_options`; `out` points to writable storage for a pointer.
#[no_mangle]
pub unsafe extern "C" fn barrier_leaf_open_dpdk(
    eal_args: *const c_char,
    port: *const c_char,
    opts: *const BarrierLeafOptions,
    out: *mut *mut BarrierLeaf,
) -> c_int {
    guard(|| {
        if port.is_null() {
            return Err(null("port"));
        }
        if out.is_null() {
            return Err(null("out"));
        }
        let utf8 = |what: &str, p: *const c_char| -> Result<String, (c_int, String)> {
            // SAFETY: non-NULL (checked by the callers below) and NUL-terminated per the
            // contract; copied out during this call.
            let s = unsafe { CStr::from_ptr(p) };
            s.to_str()
                .map(str::to_owned)
                .map_err(|_| (status::EINVAL, format!("{what} is not UTF-8")))
        };
        let port = utf8("port", port)?;
        let eal_args = if eal_args.is_null() {
            String::new()
        } else {
            utf8("eal_args", eal_args)?
        };
        // SAFETY: NULL or a valid options struct per the contract; copied out.
        let opts = unsafe { opts.as_ref() }
            .copied()
            .unwrap_or_else(BarrierLeafOptions::defaults);
        let cfg = opts.to_config()?;
        let transport = dpdk_port::open(&eal_args, &port)?;
        let session = Session::new(transport, cfg, &[]).map_err(fail)?;
        let leaf = BarrierLeaf::from_session(session).into_raw();
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { out.write(leaf) };
        Ok(status::OK)
    })
}

/// The DPDK side of `barrier_leaf_open_dpdk`: one EAL per process, started by the first call
/// and kept until the process exits (DPDK cannot start its EAL a second time in a process, so
/// closing the last DPDK leaf must not clean it up), one mempool and one started port per leaf.
#[cfg(feature = "dpdk")]
mod dpdk_port {
    use super::status;
    use barrier_leaf::dpdk_transport::{DpdkOptions, DpdkPort};
    use barrier_leaf::Transport;
    use std::ffi::c_int;
    use std::sync::Mutex;

    struct Started {
        eal: dpdk::Eal,
        /// The arguments it was started with, to refuse different ones later.
        args: String,
        /// Mempools made so far (their names must differ).
        pools: u32,
    }

    static EAL: Mutex<Option<Started>> = Mutex::new(None);

    /// Starts the EAL (first call) and opens `port` on it.
    pub(super) fn open(
        eal_args: &str,
        port: &str,
    ) -> Result<Box<dyn Transport + Send>, (c_int, String)> {
        let mut started = EAL.lock().unwrap_or_else(|p| p.into_inner());
        let args: Vec<String> = eal_args.split_whitespace().map(String::from).collect();
        let normalised = args.join(" ");
        if started.is_none() {
            let argv = std::iter::once("libbarrier".to_string()).chain(args);
            let (eal, rest) = dpdk::Eal::init(argv)
                .map_err(|e| (status::EIO, format!("EAL ({normalised}): {e}")))?;
            // Kept even when refused below: dropping it would clean the EAL up, and DPDK cannot
            // start one again in this process.
            *started = Some(Started {
                eal,
                args: normalised.clone(),
                pools: 0,
            });
            if !rest.is_empty() {
                return Err((
                    status::EINVAL,
                    format!("eal_args: arguments after the EAL's (a `--`?): {rest:?}"),
                ));
            }
        }
        let st = started.as_mut().expect("started above");
        if !eal_args.trim().is_empty() && normalised != st.args {
            return Err((
                status::EINVAL,
                format!(
                    "eal_args {normalised:?}: the EAL of this process was started with {:?}; \
                     pass NULL (or the same arguments) to open more ports on it",
                    st.args
                ),
            ));
        }
        let opts = DpdkOptions::default();
        let mbufs = u32::from(opts.rx_desc) + u32::from(opts.tx_desc) + 1023;
        st.pools += 1;
        let pool = dpdk::Mempool::new_pktmbuf(
            &st.eal,
            &format!("barrier_c{}", st.pools),
            mbufs,
            32,
            dpdk::MBUF_DEFAULT_BUF_SIZE,
        )
        .map_err(|e| (status::EIO, format!("mempool: {e}")))?;
        let p = DpdkPort::open(&st.eal, port, &pool, &opts).map_err(|e| {
            let code = if e.to_string().contains("no port named") {
                status::ENODEV
            } else {
                status::EIO
            };
            (code, format!("DPDK port {port}: {e}"))
        })?;
        Ok(Box::new(p))
    }
}

/// Without the `dpdk` feature: the function is there (barrier.h declares it), DPDK is not.
#[cfg(not(feature = "dpdk"))]
mod dpdk_port {
    use super::status;
    use barrier_leaf::Transport;
    use std::ffi::c_int;

    pub(super) fn open(
        _eal_args: &str,
        port: &str,
    ) -> Result<Box<dyn Transport + Send>, (c_int, String)> {
        Err((
            status::ENOTSUP,
            format!(
                "DPDK port {port}: this libbarrier was built without DPDK (cargo build -p \
                 barrier-leaf-capi --features dpdk)"
            ),
        ))
    }
}

/// Busy-polls `us` µs before sleeping in each wait for a frame (0: block at once).
///
/// # Safety
/// `leaf` as in barrier.h: from `barrier_leaf_open`, not closed, one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn barrier_leaf_set_busy_poll(leaf: *mut BarrierLeaf, us: u32) -> c_int {
    guard(|| {
        // SAFETY: forwarded contract of this function.
        let leaf = unsafe { leaf_mut(leaf) }?;
        leaf.session.set_busy_poll(Duration::from_micros(us.into()));
        Ok(status::OK)
    })
}

/// Nonzero: yield the CPU between the busy poll's polls; 0: spin (the default).
///
/// # Safety
/// `leaf` as in barrier.h: from `barrier_leaf_open`, not closed, one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn barrier_leaf_set_busy_poll_yield(
    leaf: *mut BarrierLeaf,
    yield_cpu: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded contract of this function.
        let leaf = unsafe { leaf_mut(leaf) }?;
        leaf.session.set_busy_poll_yield(yield_cpu != 0);
        Ok(status::OK)
    })
}

/// Joins a group.
///
/// # Safety
/// `leaf` as in barrier.h: from `barrier_leaf_open`, not closed, one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn barrier_leaf_add_group(leaf: *mut BarrierLeaf, group: u32) -> c_int {
    guard(|| {
        // SAFETY: forwarded contract of this function.
        let leaf = unsafe { leaf_mut(leaf) }?;
        leaf.session.add_group(group).map_err(fail)?;
        Ok(status::OK)
    })
}

/// Waits at the group's barrier.
///
/// # Safety
/// `leaf` as in barrier.h; `rec` is NULL or writable for a `barrier_record`.
#[no_mangle]
pub unsafe extern "C" fn barrier_leaf_wait(
    leaf: *mut BarrierLeaf,
    group: u32,
    timeout_us: u64,
    rec: *mut BarrierRecord,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded contract of this function.
        let leaf = unsafe { leaf_mut(leaf) }?;
        let r = match leaf.take_pending(group) {
            Some(r) => r,
            None if timeout_us == 0 => leaf.session.wait(group).map_err(fail)?,
            None => leaf
                .session
                .wait_timeout(group, Duration::from_micros(timeout_us))
                .map_err(fail)?,
        };
        // SAFETY: NULL or writable per the contract.
        unsafe { write_record(rec, r) };
        Ok(status::OK)
    })
}

/// Arrives at the group's barrier without blocking.
///
/// # Safety
/// `leaf` as in barrier.h.
#[no_mangle]
pub unsafe extern "C" fn barrier_leaf_arrive(leaf: *mut BarrierLeaf, group: u32) -> c_int {
    guard(|| {
        // SAFETY: forwarded contract of this function.
        let leaf = unsafe { leaf_mut(leaf) }?;
        leaf.session.arrive(group).map_err(fail)?;
        Ok(status::OK)
    })
}

/// The non-blocking barrier.
///
/// # Safety
/// `leaf` as in barrier.h; `rec` is NULL or writable for a `barrier_record`.
#[no_mangle]
pub unsafe extern "C" fn barrier_leaf_try_wait(
    leaf: *mut BarrierLeaf,
    group: u32,
    rec: *mut BarrierRecord,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded contract of this function.
        let leaf = unsafe { leaf_mut(leaf) }?;
        let released = match leaf.take_pending(group) {
            Some(r) => Some(r),
            None => leaf.session.try_wait(group).map_err(fail)?,
        };
        match released {
            Some(r) => {
                // SAFETY: NULL or writable per the contract.
                unsafe { write_record(rec, r) };
                Ok(status::OK)
            }
            None => Ok(status::PENDING),
        }
    })
}

/// Handles frames and timers; hands out up to `cap` released barriers.
///
/// # Safety
/// `leaf` as in barrier.h; `recs` is writable for `cap` records (may be NULL when `cap` is 0);
/// `n` is writable.
#[no_mangle]
pub unsafe extern "C" fn barrier_leaf_poll(
    leaf: *mut BarrierLeaf,
    timeout_us: u32,
    recs: *mut BarrierRecord,
    cap: usize,
    n: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded contract of this function.
        let leaf = unsafe { leaf_mut(leaf) }?;
        if n.is_null() {
            return Err(null("n"));
        }
        if recs.is_null() && cap > 0 {
            return Err(null("recs"));
        }
        let got = leaf
            .session
            .poll_for(Duration::from_micros(timeout_us.into()))
            .map_err(fail)?;
        leaf.pending.extend(got);
        let k = cap.min(leaf.pending.len());
        for (i, r) in leaf.pending.drain(..k).enumerate() {
            // SAFETY: i < k <= cap and `recs` is writable for `cap` records per the contract.
            unsafe { recs.add(i).write(r.into()) };
        }
        // SAFETY: non-NULL (checked) and writable per the contract.
        unsafe { n.write(k) };
        Ok(status::OK)
    })
}

/// The group's current sequence number.
///
/// # Safety
/// `leaf` as in barrier.h; `seq` writable.
#[no_mangle]
pub unsafe extern "C" fn barrier_leaf_seq(
    leaf: *const BarrierLeaf,
    group: u32,
    seq: *mut u32,
) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live handle per the contract; only read.
        let leaf = unsafe { leaf.as_ref() }.ok_or_else(|| null("leaf"))?;
        if seq.is_null() {
            return Err(null("seq"));
        }
        let s = leaf.session.seq(group).map_err(fail)?;
        // SAFETY: non-NULL (checked) and writable per the contract.
        unsafe { seq.write(s.0) };
        Ok(status::OK)
    })
}

/// The leaf's counters.
///
/// # Safety
/// `leaf` as in barrier.h; `out` writable for a `barrier_stats`.
#[no_mangle]
pub unsafe extern "C" fn barrier_leaf_stats(
    leaf: *const BarrierLeaf,
    out: *mut BarrierStats,
) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live handle per the contract; only read.
        let leaf = unsafe { leaf.as_ref() }.ok_or_else(|| null("leaf"))?;
        if out.is_null() {
            return Err(null("out"));
        }
        // SAFETY: non-NULL (checked) and writable per the contract.
        unsafe { out.write(leaf.session.stats().into()) };
        Ok(status::OK)
    })
}

/// Writes records to `path` from now on.
///
/// # Safety
/// `leaf` as in barrier.h; `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn barrier_leaf_records_to(
    leaf: *mut BarrierLeaf,
    path: *const c_char,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded contract of this function.
        let leaf = unsafe { leaf_mut(leaf) }?;
        if path.is_null() {
            return Err(null("path"));
        }
        // SAFETY: non-NULL and NUL-terminated per the contract; only read during this call.
        let p = unsafe { CStr::from_ptr(path) }
            .to_str()
            .map_err(|_| (status::EINVAL, "path is not UTF-8".to_string()))?;
        let sink = RecordSink::create(std::path::Path::new(p))
            .map_err(|e| (io_status(&e), format!("{p}: {e}")))?;
        leaf.session.set_record_sink(sink);
        Ok(status::OK)
    })
}

/// Closes and frees the leaf.
///
/// # Safety
/// `leaf` is NULL or from `barrier_leaf_open` and not closed before; not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn barrier_leaf_close(leaf: *mut BarrierLeaf) {
    if leaf.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the pointer came from Box::into_raw in barrier_leaf_open and, per the
        // contract, is closed once: ownership returns to this Box, dropped here.
        let mut b = unsafe { Box::from_raw(leaf) };
        if let Err(e) = b.session.flush_records() {
            set_last_error(format!("writing records: {e}"));
        }
    }));
}

/// Details of the last failure on this thread.
#[no_mangle]
pub extern "C" fn barrier_leaf_last_error() -> *const c_char {
    // The CString lives in the thread-local until the next failure on this thread replaces it.
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// A static description of a status code.
#[no_mangle]
pub extern "C" fn barrier_strerror(code: c_int) -> *const c_char {
    let s: &'static CStr = match code {
        status::OK => c"success",
        status::PENDING => c"barrier not released yet",
        status::EINVAL => c"invalid argument",
        status::EIO => c"input/output error on the leaf's socket",
        status::ETIMEDOUT => c"barrier not released within the timeout",
        status::ENOGROUP => c"group not added to this leaf",
        status::EBUSY => c"group already added, or already waiting at its barrier",
        status::EPERM => c"operation not permitted (raw sockets need CAP_NET_RAW)",
        status::ENODEV => c"no such network interface",
        status::EINTERNAL => c"internal error in libbarrier",
        status::EABORTED => c"the group's run was aborted: a switch declared a member failed",
        status::EEPOCHINUSE => {
            c"the switch is at another barrier of this epoch: an earlier run used the group's \
              epoch; reset the group to a new epoch and open the leaf with it"
        }
        status::ENOTSUP => c"not supported by this build of libbarrier",
        _ => c"unknown barrier status code",
    };
    s.as_ptr()
}

/// The library version.
#[no_mangle]
pub extern "C" fn barrier_version() -> *const c_char {
    const V: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(v) => v,
            Err(_) => panic!("version without NUL"),
        };
    V.as_ptr()
}

/// # Safety
/// `rec` is NULL or writable for a `barrier_record`.
unsafe fn write_record(rec: *mut BarrierRecord, r: Record) {
    if !rec.is_null() {
        // SAFETY: non-NULL and writable per this function's contract.
        unsafe { rec.write(r.into()) };
    }
}

#[cfg(test)]
mod tests {
    //! The C functions called as C would, on a leaf over the in-memory loopback with a root
    //! switch (the protocol's switch logic) on another thread.
    use super::*;
    use barrier_leaf::transport::loopback;
    use barrier_testbed::mini_root::{MiniRoot, StopOnDrop};
    use std::ptr;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn last_error() -> String {
        // SAFETY: barrier_leaf_last_error returns a valid NUL-terminated string.
        unsafe { CStr::from_ptr(barrier_leaf_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    fn strerror(code: c_int) -> String {
        // SAFETY: barrier_strerror returns a static NUL-terminated string.
        unsafe { CStr::from_ptr(barrier_strerror(code)) }
            .to_string_lossy()
            .into_owned()
    }

    /// A handle on loopback port 0 with `groups`, and a root for them serving until `stop`.
    fn with_leaf(groups: &[u32], wait_timeout: Duration, f: impl FnOnce(*mut BarrierLeaf) + Send) {
        let (mut ports, hub) = loopback::star(1);
        let mut root = MiniRoot::new(MacAddr::default());
        for &g in groups {
            root.add_group(g, &[0]);
        }
        let cfg = Config {
            resend_timeout: Duration::from_millis(1),
            wait_timeout,
            ..Config::default()
        };
        let session = Session::new(
            Box::new(ports.remove(0)) as Box<dyn Transport + Send>,
            cfg,
            &[],
        )
        .unwrap();
        let leaf = BarrierLeaf::from_session(session).into_raw();
        for &g in groups {
            // SAFETY: `leaf` is a live handle from into_raw.
            assert_eq!(unsafe { barrier_leaf_add_group(leaf, g) }, status::OK);
        }
        let stop = AtomicBool::new(false);
        let leaf_addr = leaf as usize;
        std::thread::scope(|s| {
            let (root, stop) = (&mut root, &stop);
            s.spawn(move || root.serve_hub(&hub, stop));
            let _stop_guard = StopOnDrop(stop);
            f(leaf_addr as *mut BarrierLeaf);
        });
        // SAFETY: closed once, not used afterwards.
        unsafe { barrier_leaf_close(leaf) };
    }

    #[test]
    fn wait_try_wait_poll_and_errors_through_the_c_functions() {
        with_leaf(&[1, 2], Duration::from_secs(5), |leaf| {
            // SAFETY (whole block): `leaf` is a live handle used by this thread only; every
            // out-pointer points at a local of the right type.
            unsafe {
                let mut rec = BarrierRecord::default();
                assert_eq!(barrier_leaf_wait(leaf, 1, 0, &mut rec), status::OK);
                assert_eq!((rec.group, rec.seq), (1, 0));
                assert!(rec.release_ns >= rec.first_reduce_ns);
                assert_eq!(
                    barrier_leaf_wait(leaf, 1, 1_000_000, ptr::null_mut()),
                    status::OK
                );

                assert_eq!(barrier_leaf_arrive(leaf, 2), status::OK);
                assert_eq!(barrier_leaf_arrive(leaf, 2), status::EBUSY);
                assert!(
                    last_error().contains("group 2: already waiting for barrier seq 0"),
                    "{}",
                    last_error()
                );
                assert_eq!(barrier_leaf_arrive(leaf, 1), status::OK);
                // Both releases come; a poll with room for one keeps the other.
                let mut recs = [BarrierRecord::default(); 1];
                let mut got = Vec::new();
                while got.len() < 2 {
                    let mut n = 99;
                    assert_eq!(
                        barrier_leaf_poll(leaf, 10_000, recs.as_mut_ptr(), 1, &mut n),
                        status::OK
                    );
                    assert!(n <= 1);
                    got.extend_from_slice(&recs[..n]);
                }
                got.sort_by_key(|r| r.group);
                assert_eq!(
                    got.iter().map(|r| (r.group, r.seq)).collect::<Vec<_>>(),
                    vec![(1, 2), (2, 0)]
                );
                let mut n = 99;
                assert_eq!(
                    barrier_leaf_poll(leaf, 0, ptr::null_mut(), 0, &mut n),
                    status::OK
                );
                assert_eq!(n, 0);

                // try_wait: pending until released, then the record once.
                let rc = loop {
                    match barrier_leaf_try_wait(leaf, 2, &mut rec) {
                        status::PENDING => {}
                        rc => break rc,
                    }
                    std::thread::sleep(Duration::from_micros(200));
                };
                assert_eq!(rc, status::OK);
                assert_eq!((rec.group, rec.seq), (2, 1));

                let mut seq = 0;
                assert_eq!(barrier_leaf_seq(leaf, 1, &mut seq), status::OK);
                assert_eq!(seq, 3);
                let mut st = BarrierStats::default();
                assert_eq!(barrier_leaf_stats(leaf, &mut st), status::OK);
                assert_eq!((st.reduces, st.releases), (5, 5));

                assert_eq!(barrier_leaf_wait(leaf, 9, 0, &mut rec), status::ENOGROUP);
                assert!(last_error().contains("group 9"), "{}", last_error());
                assert_eq!(barrier_leaf_add_group(leaf, 1), status::EBUSY);
                assert_eq!(barrier_leaf_add_group(leaf, 1 << 20), status::EINVAL);
                assert_eq!(barrier_leaf_seq(leaf, 1, ptr::null_mut()), status::EINVAL);
                assert_eq!(
                    barrier_leaf_poll(leaf, 0, ptr::null_mut(), 4, &mut n),
                    status::EINVAL
                );
                assert!(last_error().contains("recs is NULL"));
            }
        });
    }

    #[test]
    fn busy_poll_takes_releases_before_the_thread_sleeps() {
        with_leaf(&[1], Duration::from_secs(5), |leaf| {
            // SAFETY (whole block): `leaf` is a live handle used by this thread only.
            unsafe {
                assert_eq!(
                    barrier_leaf_set_busy_poll(ptr::null_mut(), 5),
                    status::EINVAL
                );
                for _ in 0..20 {
                    assert_eq!(barrier_leaf_wait(leaf, 1, 0, ptr::null_mut()), status::OK);
                }
                assert_eq!((*leaf).session.stats().busy_poll_hits, 0, "off by default");
                // 100 ms: every release of the in-memory switch comes within it.
                assert_eq!(barrier_leaf_set_busy_poll(leaf, 100_000), status::OK);
                for _ in 0..20 {
                    assert_eq!(barrier_leaf_wait(leaf, 1, 0, ptr::null_mut()), status::OK);
                }
                let st = (*leaf).session.stats();
                assert_eq!(st.releases, 40);
                assert!(st.busy_poll_hits >= 20, "{st:?}");
                // Yielding between polls finds the releases the same way.
                assert_eq!(barrier_leaf_set_busy_poll_yield(leaf, 1), status::OK);
                assert!((*leaf).session.config().busy_poll_yield);
                for _ in 0..20 {
                    assert_eq!(barrier_leaf_wait(leaf, 1, 0, ptr::null_mut()), status::OK);
                }
                let st2 = (*leaf).session.stats();
                assert!(st2.busy_poll_hits >= st.busy_poll_hits + 20, "{st2:?}");
                assert_eq!(
                    barrier_leaf_set_busy_poll_yield(ptr::null_mut(), 1),
                    status::EINVAL
                );
                assert_eq!(barrier_leaf_set_busy_poll(leaf, 0), status::OK);
                assert_eq!((*leaf).session.config().busy_poll, Duration::ZERO);
            }
        });
    }

    #[cfg(not(feature = "dpdk"))]
    #[test]
    fn without_the_dpdk_feature_open_dpdk_says_so() {
        let port = CString::new("net_ring0").unwrap();
        let mut out: *mut BarrierLeaf = ptr::null_mut();
        // SAFETY: valid NUL-terminated strings and a writable out-pointer.
        let rc =
            unsafe { barrier_leaf_open_dpdk(ptr::null(), port.as_ptr(), ptr::null(), &mut out) };
        assert_eq!(rc, status::ENOTSUP);
        assert!(out.is_null());
        assert!(
            last_error().contains("built without DPDK"),
            "{}",
            last_error()
        );
        assert!(last_error().contains("net_ring0"), "{}", last_error());
        // SAFETY: NULL port is the argument check under test.
        let rc = unsafe { barrier_leaf_open_dpdk(ptr::null(), ptr::null(), ptr::null(), &mut out) };
        assert_eq!(rc, status::EINVAL);
    }

    #[test]
    fn a_release_kept_by_poll_is_what_wait_and_try_wait_return() {
        with_leaf(&[1], Duration::from_secs(5), |leaf| {
            // SAFETY (whole block): `leaf` is a live handle used by this thread only; every
            // out-pointer points at a local of the right type.
            unsafe {
                let mut rec = BarrierRecord::default();
                for expect in 0..2u32 {
                    assert_eq!(barrier_leaf_arrive(leaf, 1), status::OK);
                    // Poll with no room until the release has come in and is kept.
                    let mut seq = expect;
                    while seq == expect {
                        let mut n = 99;
                        assert_eq!(
                            barrier_leaf_poll(leaf, 1_000, ptr::null_mut(), 0, &mut n),
                            status::OK
                        );
                        assert_eq!(n, 0);
                        assert_eq!(barrier_leaf_seq(leaf, 1, &mut seq), status::OK);
                    }
                    // The kept release ends this barrier; it must not start the next one.
                    let rc = if expect == 0 {
                        barrier_leaf_try_wait(leaf, 1, &mut rec)
                    } else {
                        barrier_leaf_wait(leaf, 1, 0, &mut rec)
                    };
                    assert_eq!(rc, status::OK);
                    assert_eq!((rec.group, rec.seq), (1, expect));
                    assert_eq!(barrier_leaf_seq(leaf, 1, &mut seq), status::OK);
                    assert_eq!(seq, expect + 1, "no reduce for the next barrier was sent");
                }
                let mut st = BarrierStats::default();
                assert_eq!(barrier_leaf_stats(leaf, &mut st), status::OK);
                assert_eq!((st.reduces, st.releases), (2, 2));
            }
        });
    }

    /// A handle with `groups` on loopback port 0 (1 ms re-sends), and the hub's end, with no
    /// switch serving it yet.
    fn leaf_on_loopback(groups: &[u32]) -> (*mut BarrierLeaf, loopback::Hub) {
        let (mut ports, hub) = loopback::star(1);
        let cfg = Config {
            resend_timeout: Duration::from_millis(1),
            ..Config::default()
        };
        let session = Session::new(
            Box::new(ports.remove(0)) as Box<dyn Transport + Send>,
            cfg,
            groups,
        )
        .unwrap();
        (BarrierLeaf::from_session(session).into_raw(), hub)
    }

    #[test]
    fn a_wait_that_times_out_names_group_and_seq_and_goes_on_later() {
        // Group 5 is open at the leaf, but the switch knows only group 6: nothing releases 5.
        let (leaf, hub) = leaf_on_loopback(&[5]);
        // SAFETY: live handle, this thread only; closed once at the end.
        unsafe {
            assert_eq!(
                barrier_leaf_wait(leaf, 5, 20_000, ptr::null_mut()),
                status::ETIMEDOUT
            );
            assert!(
                last_error().starts_with("timeout: group 5 barrier seq 0"),
                "{}",
                last_error()
            );
            assert_eq!(
                barrier_leaf_try_wait(leaf, 5, ptr::null_mut()),
                status::PENDING
            );
            // A switch for group 5 appears; the next wait completes the same barrier.
            let mut root = MiniRoot::new(MacAddr::default());
            root.add_group(5, &[0]);
            let stop = AtomicBool::new(false);
            let leaf_addr = leaf as usize;
            std::thread::scope(|s| {
                let (root, stop) = (&mut root, &stop);
                s.spawn(move || root.serve_hub(&hub, stop));
                let _stop_guard = StopOnDrop(stop);
                let mut rec = BarrierRecord::default();
                assert_eq!(
                    barrier_leaf_wait(leaf_addr as *mut BarrierLeaf, 5, 0, &mut rec),
                    status::OK
                );
                assert_eq!(rec.seq, 0);
                assert!(rec.resends >= 1);
                stop.store(true, Ordering::Relaxed);
            });
            barrier_leaf_close(leaf);
        }
    }

    #[test]
    fn an_abort_is_its_own_status_naming_the_switch_and_port() {
        let (leaf, hub) = leaf_on_loopback(&[4]);
        // A switch declared port 2 of 02:00:00:00:0a:01 failed: its abort is waiting.
        use barrier_protocol::wire::{Failure, Flags, FrameRepr, Kind};
        let abort = FrameRepr {
            dst: MacAddr::BROADCAST,
            src: MacAddr([2, 0, 0, 0, 0x0a, 1]),
            kind: Kind::Abort(Failure {
                switch: MacAddr([2, 0, 0, 0, 0x0a, 1]),
                port: 2,
            }),
            flags: Flags::empty(),
            group: barrier_protocol::GroupId(4),
            epoch: Epoch::DEFAULT,
            seq: Seq(0),
            tx_timestamp: None,
        };
        assert!(hub.send(0, &abort.to_bytes()));
        // SAFETY: live handle, this thread only; closed once at the end.
        unsafe {
            assert_eq!(
                barrier_leaf_wait(leaf, 4, 5_000_000, ptr::null_mut()),
                status::EABORTED
            );
            assert!(
                last_error().contains("port 2 of switch 02:00:00:00:0a:01"),
                "{}",
                last_error()
            );
            assert!(strerror(status::EABORTED).contains("aborted"));
            // final for the epoch: the next barrier fails the same way, without waiting
            assert_eq!(barrier_leaf_arrive(leaf, 4), status::EABORTED);
            barrier_leaf_close(leaf);
        }
    }

    /// Issue 21: a second run on a group the first run left at barrier 10, in the same epoch.
    /// The switch answers each reduce 0 with release 9: the wait fails with its own status
    /// within a few re-sends instead of the 10 s timeout, and nothing is released.
    #[test]
    fn a_switch_at_another_barrier_of_the_epoch_is_its_own_status() {
        let mut root = MiniRoot::new(MacAddr::default());
        root.add_group(4, &[0]);
        let serve = |root: &mut MiniRoot, hub: loopback::Hub, run: &dyn Fn()| {
            let stop = AtomicBool::new(false);
            std::thread::scope(|s| {
                let stop = &stop;
                s.spawn(move || root.serve_hub(&hub, stop));
                let _stop_guard = StopOnDrop(stop);
                run();
                stop.store(true, Ordering::Relaxed);
            });
        };
        // SAFETY (whole block): each handle is live and used by one thread at a time (the
        // scope's), closed once; out-pointers point at locals of the right type.
        unsafe {
            let (first, hub) = leaf_on_loopback(&[4]);
            let addr = first as usize;
            serve(&mut root, hub, &|| {
                for _ in 0..10 {
                    let leaf = addr as *mut BarrierLeaf;
                    assert_eq!(barrier_leaf_wait(leaf, 4, 0, ptr::null_mut()), status::OK);
                }
            });
            barrier_leaf_close(first);

            let (second, hub) = leaf_on_loopback(&[4]);
            let addr = second as usize;
            let started = std::time::Instant::now();
            serve(&mut root, hub, &|| {
                let leaf = addr as *mut BarrierLeaf;
                assert_eq!(
                    barrier_leaf_wait(leaf, 4, 0, ptr::null_mut()),
                    status::EEPOCHINUSE
                );
            });
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "{:?}",
                started.elapsed()
            );
            assert_eq!(
                last_error(),
                "group 4 epoch 1: the switch answers barrier 0 with the release of barrier 9: the \
                 group was used by an earlier run in this epoch; reset the group's run on every \
                 switch of its tree (barrierctl reset PLAN, or barrierctl group reset 4 on each \
                 switch, root first) and open the leaves with the new epoch (Config::epoch, \
                 barrier_leaf_options.epoch, barrier-leaf --epoch E)"
            );
            assert!(strerror(status::EEPOCHINUSE).contains("new epoch"));
            let mut st = BarrierStats::default();
            assert_eq!(barrier_leaf_stats(second, &mut st), status::OK);
            assert_eq!(st.releases, 0, "nothing was released");
            let mut seq = 99;
            assert_eq!(barrier_leaf_seq(second, 4, &mut seq), status::OK);
            assert_eq!(seq, 0);
            // final for the epoch: every later call fails the same way, without waiting
            assert_eq!(barrier_leaf_arrive(second, 4), status::EEPOCHINUSE);
            assert_eq!(
                barrier_leaf_try_wait(second, 4, ptr::null_mut()),
                status::EEPOCHINUSE
            );
            barrier_leaf_close(second);
        }
    }

    #[test]
    fn records_go_to_a_file_and_are_flushed_at_close() {
        let path =
            std::env::temp_dir().join(format!("libbarrier-test-{}.jsonl", std::process::id()));
        let cpath = CString::new(path.to_str().unwrap()).unwrap();
        with_leaf(&[3], Duration::from_secs(5), |leaf| {
            // SAFETY: live handle, this thread only; `cpath` is NUL-terminated.
            unsafe {
                assert_eq!(barrier_leaf_records_to(leaf, cpath.as_ptr()), status::OK);
                for _ in 0..3 {
                    assert_eq!(barrier_leaf_wait(leaf, 3, 0, ptr::null_mut()), status::OK);
                }
                let bad = CString::new("/nonexistent-dir/x.csv").unwrap();
                assert_ne!(barrier_leaf_records_to(leaf, bad.as_ptr()), status::OK);
                assert!(last_error().contains("/nonexistent-dir/x.csv"));
            }
        });
        let recs =
            barrier_leaf::records::parse_records(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(
            recs.iter().map(|r| (r.group, r.seq)).collect::<Vec<_>>(),
            vec![(3, 0), (3, 1), (3, 2)]
        );
    }

    #[test]
    fn bad_arguments_and_status_strings() {
        let name = CString::new("lo").unwrap();
        let mut out: *mut BarrierLeaf = ptr::null_mut();
        // SAFETY: NULL arguments are what is being tested; the rest are valid locals.
        unsafe {
            assert_eq!(
                barrier_leaf_open(ptr::null(), ptr::null(), &mut out),
                status::EINVAL
            );
            assert!(last_error().contains("ifname is NULL"));
            assert_eq!(
                barrier_leaf_open(name.as_ptr(), ptr::null(), ptr::null_mut()),
                status::EINVAL
            );
            let mut o = BarrierLeafOptions::defaults();
            o.resend_timeout_us = 0;
            assert_eq!(
                barrier_leaf_open(name.as_ptr(), &o, &mut out),
                status::EINVAL
            );
            let missing = CString::new("nbnosuchif0").unwrap();
            let rc = barrier_leaf_open(missing.as_ptr(), ptr::null(), &mut out);
            assert!(rc == status::ENODEV || rc == status::EPERM, "{rc}");
            assert!(last_error().contains("nbnosuchif0"), "{}", last_error());
            assert!(out.is_null());
            assert_eq!(
                barrier_leaf_wait(ptr::null_mut(), 1, 0, ptr::null_mut()),
                status::EINVAL
            );
            assert_eq!(
                barrier_leaf_stats(ptr::null(), ptr::null_mut()),
                status::EINVAL
            );
            barrier_leaf_close(ptr::null_mut());
            barrier_leaf_options_init(ptr::null_mut());
            let mut o2 = std::mem::MaybeUninit::<BarrierLeafOptions>::uninit();
            barrier_leaf_options_init(o2.as_mut_ptr());
            let o2 = o2.assume_init();
            assert_eq!(
                (o2.resend_timeout_us, o2.dst_mac, o2.first_seq),
                (1000, [0xff; 6], 0)
            );
            assert_eq!(
                CStr::from_ptr(barrier_version()).to_str().unwrap(),
                env!("CARGO_PKG_VERSION")
            );
        }
        let codes = [
            status::OK,
            status::PENDING,
            status::EINVAL,
            status::EIO,
            status::ETIMEDOUT,
            status::ENOGROUP,
            status::EBUSY,
            status::EPERM,
            status::ENODEV,
            status::EINTERNAL,
            status::EABORTED,
            status::EEPOCHINUSE,
            status::ENOTSUP,
        ];
        let texts: std::collections::HashSet<String> = codes.iter().map(|&c| strerror(c)).collect();
        assert_eq!(texts.len(), codes.len(), "every code has its own text");
        assert!(!texts.contains(&strerror(42)));
        assert_eq!(strerror(42), "unknown barrier status code");
    }

    #[test]
    fn errors_map_to_their_codes() {
        let e = |raw| Error::Io(io::Error::from_raw_os_error(raw));
        assert_eq!(error_status(&e(libc::EPERM)), status::EPERM);
        assert_eq!(error_status(&e(libc::ENODEV)), status::ENODEV);
        assert_eq!(error_status(&e(libc::ENOBUFS)), status::EIO);
        assert_eq!(
            error_status(&Error::Timeout {
                group: 1,
                seq: 2,
                waited: Duration::ZERO,
                resends: 0
            }),
            status::ETIMEDOUT
        );
        assert_eq!(
            error_status(&Error::AlreadyWaiting { group: 1, seq: 2 }),
            status::EBUSY
        );
        assert_eq!(guard(|| panic!("boom")), status::EINTERNAL);
        assert!(last_error().contains("boom"));
    }
}
