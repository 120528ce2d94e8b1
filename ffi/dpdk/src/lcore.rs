//! Running Rust closures on EAL worker lcores (`rte_eal_remote_launch`), and registering
//! non-EAL threads. A panic inside a closure is caught on the lcore (unwinding into C is
//! undefined) and handed back as an error by `LcoreJoin::join`.

use std::any::Any;
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};

use dpdk_sys as sys;

use crate::eal::Eal;
use crate::error::DpdkError;
use crate::ids::LcoreId;

/// Why `LcoreJoin::join` has no value.
#[derive(Debug, thiserror::Error)]
pub enum LcoreError {
    /// The closure panicked; the panic message when it was a string.
    #[error("closure on {lcore:?} panicked: {message}")]
    Panicked {
        /// The lcore it ran on.
        lcore: LcoreId,
        /// The panic payload as text.
        message: String,
    },
}

/// The result slot shared between the lcore and the joiner.
struct Slot<T> {
    value: Mutex<Option<std::thread::Result<T>>>,
    ready: Condvar,
}

/// A closure running on a worker lcore; `join` waits for its result.
#[must_use = "dropping the handle does not stop the closure; join it to get its result"]
pub struct LcoreJoin<T> {
    lcore: LcoreId,
    slot: Arc<Slot<T>>,
    _eal: Eal,
}

impl<T> std::fmt::Debug for LcoreJoin<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LcoreJoin({:?})", self.lcore)
    }
}

impl<T> LcoreJoin<T> {
    /// The lcore running the closure.
    pub fn lcore(&self) -> LcoreId {
        self.lcore
    }

    /// True once the closure has returned (or panicked).
    pub fn is_finished(&self) -> bool {
        self.slot
            .value
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Waits for the closure and returns its value, or the panic it raised.
    pub fn join(self) -> Result<T, LcoreError> {
        let mut guard = self.slot.value.lock().unwrap_or_else(|p| p.into_inner());
        while guard.is_none() {
            guard = self
                .slot
                .ready
                .wait(guard)
                .unwrap_or_else(|p| p.into_inner());
        }
        let result = guard.take().expect("checked above");
        drop(guard);
        // The closure has stored its result; let the lcore finish the trampoline and return to
        // WAIT so it can be launched again right away.
        // SAFETY: EAL is live (we hold an Eal); waiting on a worker id only reads its state.
        unsafe { sys::rte_eal_wait_lcore(self.lcore.0) };
        result.map_err(|payload| LcoreError::Panicked {
            lcore: self.lcore,
            message: panic_text(&payload),
        })
    }
}

fn panic_text(p: &Box<dyn Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// The C entry point every launch goes through: runs the boxed job, never unwinds.
unsafe extern "C" fn trampoline(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the Box<Job> leaked by launch_on, handed to exactly one lcore.
    let job: Box<Job> = unsafe { Box::from_raw(arg as *mut Job) };
    // The job catches the closure's panic itself; this outer guard covers the slot handling.
    match catch_unwind(AssertUnwindSafe(job)) {
        Ok(()) => 0,
        Err(_) => -1,
    }
}

/// Serialises launches: rte_eal_remote_launch is meant for the main lcore only, and two threads
/// launching on the same idle worker at once would both pass its WAIT check and overwrite each
/// other's function and argument. Under this lock the second sees RUNNING and gets EBUSY.
static LAUNCH_LOCK: Mutex<()> = Mutex::new(());

/// Runs `f` on worker `lcore`. Fails if the lcore is not an enabled worker or is busy.
/// Callable from any thread; `LcoreJoin::join` gives back `f`'s value or its panic.
pub fn launch_on<F, T>(eal: &Eal, lcore: LcoreId, f: F) -> Result<LcoreJoin<T>, DpdkError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    const OP: &str = "rte_eal_remote_launch";
    if lcore == eal.main_lcore() {
        return Err(DpdkError::invalid(
            OP,
            format!("{lcore:?} is the main lcore; call the closure directly"),
        ));
    }
    // SAFETY: called only after the RTE_MAX_LCORE bound check below; it reads the lcore table.
    let enabled = || unsafe { sys::rte_lcore_is_enabled(lcore.0) } != 0;
    if lcore.0 >= sys::RTE_MAX_LCORE || !enabled() {
        return Err(DpdkError::invalid(
            OP,
            format!("{lcore:?} is not an enabled lcore (see -l)"),
        ));
    }
    let slot = Arc::new(Slot {
        value: Mutex::new(None),
        ready: Condvar::new(),
    });
    let slot2 = slot.clone();
    let job: Job = Box::new(move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        *slot2.value.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        slot2.ready.notify_all();
    });
    let arg = Box::into_raw(Box::new(job)) as *mut c_void;
    let guard = LAUNCH_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: trampoline matches lcore_function_t and takes ownership of `arg`; the lcore id is
    // an enabled worker; LAUNCH_LOCK makes this the only launch in progress.
    let ret = unsafe { sys::rte_eal_remote_launch(Some(trampoline), arg, lcore.0) };
    drop(guard);
    if ret < 0 {
        // SAFETY: the launch failed, so no lcore took `arg`; reclaim it.
        drop(unsafe { Box::from_raw(arg as *mut Job) });
        return Err(DpdkError::from_errno(OP, -ret));
    }
    Ok(LcoreJoin {
        lcore,
        slot,
        _eal: eal.clone(),
    })
}

/// The calling thread's lcore id, or None on a thread EAL does not know.
pub fn current_lcore() -> Option<LcoreId> {
    // SAFETY: reads a thread-local.
    let id = unsafe { sys::rte_lcore_id() };
    (id != sys::LCORE_ID_ANY).then_some(LcoreId(id))
}

/// Registers the calling non-EAL thread with EAL (it gets an lcore id and mempool caches) until
/// dropped. Not `Send`: it must be dropped on the thread that made it.
pub struct ThreadRegistration {
    lcore: LcoreId,
    _eal: Eal,
    _not_send: PhantomData<*const ()>,
}

impl ThreadRegistration {
    /// Registers the calling thread.
    pub fn new(eal: &Eal) -> Result<ThreadRegistration, DpdkError> {
        if let Some(l) = current_lcore() {
            return Err(DpdkError::invalid(
                "rte_thread_register",
                format!("this thread is already {l:?}"),
            ));
        }
        // SAFETY: EAL is live; registering the calling thread has no other precondition.
        crate::error::check_rte_errno("rte_thread_register", unsafe {
            sys::rte_thread_register()
        })?;
        let lcore = current_lcore()
            .ok_or_else(|| DpdkError::invalid("rte_thread_register", "no lcore id was assigned"))?;
        Ok(ThreadRegistration {
            lcore,
            _eal: eal.clone(),
            _not_send: PhantomData,
        })
    }

    /// The lcore id this thread got.
    pub fn lcore(&self) -> LcoreId {
        self.lcore
    }
}

impl Drop for ThreadRegistration {
    fn drop(&mut self) {
        // SAFETY: this thread registered itself in `new` (the guard is !Send).
        unsafe { sys::rte_thread_unregister() };
    }
}
