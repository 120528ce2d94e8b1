//! The Environment Abstraction Layer: one per process. `Eal` owns the process's DPDK runtime;
//! pools and ports hold a clone of its inner handle, so `rte_eal_cleanup` runs only after the last
//! of them is gone.

use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use dpdk_sys as sys;

use crate::error::DpdkError;
use crate::ids::LcoreId;

/// Process-wide EAL state: DPDK allows one successful `rte_eal_init` per process and nothing
/// after `rte_eal_cleanup`, so a second `Eal::init` must fail before it reaches DPDK.
static EAL_STATE: AtomicU8 = AtomicU8::new(STATE_NONE);
const STATE_NONE: u8 = 0;
const STATE_INITIALISING: u8 = 1;
const STATE_LIVE: u8 = 2;
const STATE_DONE: u8 = 3;

/// The `--vdev` specs of the `Eal::init` call, so that a port that is missing although it was
/// asked for can say why (see [`vdev_spec`]).
static VDEV_SPECS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The `--vdev` spec (`net_af_packet0,iface=eth1`) EAL was given for device `name`, if any.
pub(crate) fn vdev_spec(name: &str) -> Option<String> {
    let specs = VDEV_SPECS.lock().unwrap_or_else(|e| e.into_inner());
    specs
        .iter()
        .find(|s| s.split(',').next() == Some(name))
        .cloned()
}

/// The CPUs the thread calling `Eal::init` could run on just before `rte_eal_init` pinned it to
/// the main lcore (see [`Eal::startup_cpus`]); empty when the OS would not say.
static STARTUP_CPUS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// The `--vdev` values in an EAL argument list (`--vdev X` and `--vdev=X`).
fn vdev_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if a == "--vdev" {
            out.extend(it.next().cloned());
        } else if let Some(v) = a.strip_prefix("--vdev=") {
            out.push(v.to_string());
        }
    }
    out
}

/// EAL's runtime folder (`/var/run/dpdk/<file-prefix>` for root), as EAL set it up; `None`
/// before EAL got that far.
fn runtime_dir() -> Option<std::path::PathBuf> {
    // SAFETY: rte_eal_get_runtime_dir returns a pointer to EAL's own static, NUL-terminated
    // buffer (empty until EAL creates the folder); it is valid before, during and after init.
    let dir = unsafe { CStr::from_ptr(sys::rte_eal_get_runtime_dir()) };
    dir.to_str()
        .ok()
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
}

/// Removes EAL's runtime folder if it is empty. EAL creates `/var/run/dpdk/<file-prefix>` and
/// never removes it: with a unique prefix per run (tests, demos) empty folders pile up. Only an
/// empty folder goes, so another process's files (a primary's config, sockets) are never
/// touched, and a shared-config run's own files stay.
fn remove_runtime_dir(dir: Option<std::path::PathBuf>) {
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir(dir);
    }
}

/// A handle to the initialised EAL. Cloning is cheap; the EAL is cleaned up when the last clone
/// (including those held inside `Mempool` and `Port`) is dropped.
#[derive(Clone)]
pub struct Eal {
    /// Held only to keep the EAL alive; its Drop cleans up.
    _inner: Arc<EalInner>,
}

pub(crate) struct EalInner {
    _private: (),
}

impl std::fmt::Debug for Eal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Eal")
            .field("main_lcore", &self.main_lcore())
            .finish()
    }
}

impl Eal {
    /// Initialises DPDK from `app [EAL args] [-- app args]` (the first item is the program name,
    /// as in `argv`). Returns the EAL handle and the application's own arguments (those after
    /// `--`, without the program name).
    ///
    /// The calling thread becomes the main lcore. Cleanup (when the last handle drops) first
    /// waits for every worker lcore to return, so stop long-running lcore loops (a quit flag)
    /// before dropping the last handle.
    ///
    /// Errors: a second call in the same process (`EalAlreadyInitialized`), or whatever
    /// `rte_eal_init` reports (unknown flag, missing driver, ...). After a failed init DPDK may
    /// keep half-initialised state: treat it as fatal for the process.
    #[cold]
    pub fn init(args: impl IntoIterator<Item = String>) -> Result<(Eal, Vec<String>), DpdkError> {
        let args: Vec<String> = args.into_iter().collect();
        if args.is_empty() {
            return Err(DpdkError::invalid(
                "Eal::init",
                "argument list needs a program name first",
            ));
        }
        let mut c_args = Vec::with_capacity(args.len());
        for a in &args {
            let c = CString::new(a.as_str()).map_err(|_| {
                DpdkError::invalid("Eal::init", format!("argument {a:?} contains NUL"))
            })?;
            c_args.push(c);
        }
        if EAL_STATE
            .compare_exchange(
                STATE_NONE,
                STATE_INITIALISING,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            return Err(DpdkError::EalAlreadyInitialized);
        }
        // EAL may keep pointers into argv (and getopt permutes it), so the strings and the
        // pointer array live for the rest of the process: one small leak per process.
        let strings: &'static mut [CString] = Box::leak(c_args.into_boxed_slice());
        let argv: &'static mut [*mut c_char] = Box::leak(
            strings
                .iter()
                .map(|c| c.as_ptr() as *mut c_char)
                .chain(std::iter::once(std::ptr::null_mut()))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        );
        let argc = (argv.len() - 1) as i32;
        // Once EAL is up, this thread runs on the main lcore's CPU only, and every thread it
        // starts inherits that: what the process may use is known only now.
        *STARTUP_CPUS.lock().unwrap_or_else(|e| e.into_inner()) = core_affinity::get_core_ids()
            .map(|ids| ids.into_iter().map(|c| c.id).collect())
            .unwrap_or_default();
        // SAFETY: argv is a NULL-terminated array of argc valid NUL-terminated strings that
        // outlive the process; the state guard above ensures this is the only call.
        let ret = unsafe { sys::rte_eal_init(argc, argv.as_mut_ptr()) };
        if ret < 0 {
            let err = DpdkError::from_rte_errno("rte_eal_init");
            // A failed init leaves its runtime folder too (empty with --no-shconf).
            remove_runtime_dir(runtime_dir());
            // DPDK itself refuses re-initialisation after most failures; keep our guard closed
            // too so the error stays the clear one.
            EAL_STATE.store(STATE_DONE, Ordering::Release);
            return Err(err);
        }
        *VDEV_SPECS.lock().unwrap_or_else(|e| e.into_inner()) = vdev_args(&args[1..]);
        EAL_STATE.store(STATE_LIVE, Ordering::Release);
        // rte_eal_init put the program name at argv[ret]; the application's arguments follow.
        let consumed = ret as usize;
        let app_args = argv[consumed + 1..argc as usize]
            .iter()
            .map(|&p| {
                // SAFETY: every entry below argc is one of our leaked CStrings (possibly
                // permuted by getopt), still valid.
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            })
            .collect();
        Ok((
            Eal {
                _inner: Arc::new(EalInner { _private: () }),
            },
            app_args,
        ))
    }

    /// The main lcore (the thread that called `init`).
    pub fn main_lcore(&self) -> LcoreId {
        // SAFETY: EAL is initialised while `self` exists.
        LcoreId(unsafe { sys::rte_get_main_lcore() })
    }

    /// Worker lcores enabled by `-l`/`--lcores`, in id order (the main lcore excluded).
    pub fn worker_lcores(&self) -> Vec<LcoreId> {
        let mut out = Vec::new();
        let mut i = u32::MAX; // rte_get_next_lcore(-1, ...) starts from lcore 0
        loop {
            // SAFETY: EAL is initialised; the call only reads the lcore table.
            i = unsafe { sys::rte_get_next_lcore(i, 1, 0) };
            if i >= sys::RTE_MAX_LCORE {
                break;
            }
            out.push(LcoreId(i));
        }
        out
    }

    /// The CPUs the process could run on when `init` was called: the calling thread's
    /// affinity just before `rte_eal_init` pinned it to the main lcore (a thread started after
    /// `init` inherits the main lcore's CPUs only). DPDK starts its own control threads'
    /// placement from the same set. Empty if the OS would not tell.
    pub fn startup_cpus(&self) -> Vec<usize> {
        STARTUP_CPUS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The CPUs `lcore` runs on (`rte_lcore_cpuset`): one with `-l`/`-c`, possibly several with
    /// `--lcores 0@(0-1)`. Empty for an lcore that is not enabled.
    pub fn lcore_cpus(&self, lcore: LcoreId) -> Vec<usize> {
        // SAFETY: EAL is initialised; the call reads the lcore table; the bound is checked first.
        if lcore.0 >= sys::RTE_MAX_LCORE || unsafe { sys::rte_lcore_is_enabled(lcore.0) } == 0 {
            return Vec::new();
        }
        // CPU_SETSIZE is 1024 with glibc: 16 words; the shim says how many a set takes.
        let mut words = [0u64; 16];
        // SAFETY: EAL is initialised and `lcore` is an enabled lcore below RTE_MAX_LCORE; the
        // shim writes at most `words.len()` words into the array it is given.
        let whole =
            unsafe { sys::dpdk_sys_lcore_cpuset(lcore.0, words.as_mut_ptr(), words.len() as u32) };
        debug_assert!(
            whole as usize <= words.len(),
            "a cpu_set_t of {whole} words"
        );
        cpus_in(&words)
    }

    /// Number of lcores enabled (main and workers).
    pub fn lcore_count(&self) -> u32 {
        // SAFETY: EAL is initialised.
        unsafe { sys::rte_lcore_count() }
    }

    /// Runs `f` on worker `lcore`; see [`crate::launch_on`].
    pub fn launch_on<F, T>(&self, lcore: LcoreId, f: F) -> Result<crate::LcoreJoin<T>, DpdkError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        crate::lcore::launch_on(self, lcore, f)
    }

    /// Consumes this handle. The EAL is cleaned up now if no pool, port or other clone is
    /// left; otherwise when the last one goes. Same as dropping it, spelled out for shutdown code.
    pub fn shutdown(self) {}
}

impl Drop for EalInner {
    fn drop(&mut self) {
        // SAFETY: rte_lcore_id reads a thread-local; valid on any thread.
        let me = unsafe { sys::rte_lcore_id() };
        // SAFETY: EAL is initialised until the cleanup below.
        let main = unsafe { sys::rte_get_main_lcore() };
        if me != main && me != sys::LCORE_ID_ANY {
            // The last handle died inside a closure running on a worker lcore: waiting for all
            // lcores here would wait for ourselves. Leave DPDK up; the process is ending anyway.
            return;
        }
        // SAFETY: waits for every worker lcore to return to WAIT; called from the main lcore or
        // a non-EAL thread, never from a worker (checked above).
        unsafe { sys::rte_eal_mp_wait_lcore() };
        // Copied before cleanup, which may free EAL's configuration.
        let dir = runtime_dir();
        // SAFETY: no pool, port or mbuf-owning object can remain: each holds a clone of this
        // Arc (or leaked it on purpose when mbufs were outstanding).
        unsafe { sys::rte_eal_cleanup() };
        remove_runtime_dir(dir);
        EAL_STATE.store(STATE_DONE, Ordering::Release);
    }
}

/// The CPU numbers set in a `cpu_set_t`'s words (bit `b` of word `w` is CPU `w * bits + b`).
fn cpus_in<W: Copy + Into<u64>>(words: &[W]) -> Vec<usize> {
    let bits = std::mem::size_of::<W>() * 8;
    let mut out = Vec::new();
    for (w, &word) in words.iter().enumerate() {
        let word: u64 = word.into();
        for b in 0..bits {
            if word >> b & 1 == 1 {
                out.push(w * bits + b);
            }
        }
    }
    out
}

/// True while an `Eal` is live in this process.
pub fn is_initialised() -> bool {
    EAL_STATE.load(Ordering::Acquire) == STATE_LIVE
}

/// EAL arguments for tests and demos on a machine without a NIC or hugepages: the flags from
/// DESIGN.md, a `--file-prefix` unique to this process and call, then `extra` (e.g. `-l 0,1` or
/// `--vdev=net_ring0`). The first element is the program name `prog`.
pub fn test_args(prog: &str, extra: &[&str]) -> Vec<String> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let prefix = format!("nb-{}-{}-{}", sanitize(prog), std::process::id(), n);
    let mut v: Vec<String> = vec![
        prog.to_string(),
        "--no-huge".into(),
        "-m".into(),
        "256".into(),
        "--no-shconf".into(),
        "--file-prefix".into(),
        prefix,
        "--no-pci".into(),
        "--iova-mode=va".into(),
        "--no-telemetry".into(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(24)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vdev_specs_are_read_from_both_spellings_before_the_dashes() {
        let a: Vec<String> = [
            "-l",
            "0",
            "--vdev",
            "net_ring0",
            "--vdev=net_af_packet0,iface=eth1",
            "--",
            "--vdev=app",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            vdev_args(&a),
            ["net_ring0", "net_af_packet0,iface=eth1"].map(String::from)
        );
    }

    #[test]
    fn cpu_set_words_give_cpu_numbers() {
        assert_eq!(cpus_in::<u64>(&[0, 0]), Vec::<usize>::new());
        assert_eq!(cpus_in::<u64>(&[0b1011, 1 << 63, 1]), [0, 1, 3, 127, 128]);
        assert_eq!(cpus_in::<u32>(&[1 << 31, 1]), [31, 32]);
    }

    #[test]
    fn test_args_have_design_flags_and_unique_prefix() {
        let a = test_args("t", &["--vdev=net_ring0"]);
        let b = test_args("t", &[]);
        assert_eq!(a[0], "t");
        for f in [
            "--no-huge",
            "--no-shconf",
            "--no-pci",
            "--iova-mode=va",
            "--no-telemetry",
        ] {
            assert!(a.iter().any(|x| x == f), "{f} missing");
        }
        assert_eq!(a.last().unwrap(), "--vdev=net_ring0");
        let pa = a.iter().position(|x| x == "--file-prefix").unwrap();
        let pb = b.iter().position(|x| x == "--file-prefix").unwrap();
        assert_ne!(a[pa + 1], b[pb + 1]);
    }
}
