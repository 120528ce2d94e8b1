//! libbarrier: the C ABI of the barrier-leaf library (`include/barrier.h`). Every function here
//! checks its pointers, turns the safe Rust API's errors into `barrier_status` codes with a
//! thread-local message, and catches panics so none unwinds into C. The only `unsafe` is the
//! pointer handling at this boundary, each block with its `// SAFETY:` argument.

use barrier_leaf::{Config, Error, Record, RecordSink, Session, Stats, Transport};
use barrier_protocol::wire::MacAddr;
use barrier_protocol::Seq;
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
            timestamps: self.timestamps != 0,
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
        Error::UnknownGroup(_) => status::ENOGROUP,
        Error::GroupAlreadyOpen(_) | Error::AlreadyWaiting { .. } => status::EBUSY,
        Error::GroupOutOfRange(_) => status::EINVAL,
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
        let r = if timeout_us == 0 {
            leaf.session.wait(group)
        } else {
            leaf.session
                .wait_timeout(group, Duration::from_micros(timeout_us))
        }
        .map_err(fail)?;
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
        match leaf.session.try_wait(group).map_err(fail)? {
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
