//! Packet-buffer pools (`rte_pktmbuf_pool_create`). A `Mempool` is a cheap clonable handle; the
//! pool is freed when the last handle goes and no mbuf from it is outstanding.

use std::ffi::CString;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::Arc;

use dpdk_sys as sys;

use crate::eal::Eal;
use crate::error::DpdkError;

/// A pool of packet mbufs. Ports keep a clone for their RX queues, so the pool outlives them.
#[derive(Clone)]
pub struct Mempool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    ptr: NonNull<sys::rte_mempool>,
    name: String,
    /// Mbufs that may stay out when the pool is dropped without keeping it alive: those a
    /// closed port's driver kept and will never touch again (`Mempool::abandon_held`).
    abandoned: std::sync::atomic::AtomicU32,
    /// Dropped by hand after the pool is freed, or leaked with the pool (see Drop).
    _eal: ManuallyDrop<Eal>,
}

// SAFETY: rte_mempool get/put are thread-safe (lock-free ring plus per-lcore caches); the pointer
// is only used through those calls and read-only counters.
unsafe impl Send for PoolInner {}
// SAFETY: as above; no method mutates the pool except through DPDK's thread-safe calls.
unsafe impl Sync for PoolInner {}

impl std::fmt::Debug for Mempool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mempool")
            .field("name", &self.inner.name)
            .field("avail", &self.avail_count())
            .field("in_use", &self.in_use_count())
            .finish()
    }
}

impl Mempool {
    /// Creates a pool of `n` mbufs with a per-lcore cache of `cache` and `data_room` bytes of
    /// buffer each (headroom included: `RTE_MBUF_DEFAULT_BUF_SIZE` for standard frames).
    /// Names are process-wide unique (memzone names).
    #[cold]
    pub fn new_pktmbuf(
        eal: &Eal,
        name: &str,
        n: u32,
        cache: u32,
        data_room: u16,
    ) -> Result<Mempool, DpdkError> {
        Self::create(eal, name, n, cache, data_room, false)
    }

    /// Like [`Mempool::new_pktmbuf`], but the mbufs lie back to back in one piece of virtual
    /// memory, each object right after the last, as DPDK 22.11's `net_af_xdp` assumes when it
    /// maps a pool as its UMEM (`dpdk_sys_pktmbuf_pool_create_packed` in dpdk-sys's shim says
    /// why the plain pool breaks that on 4 KiB pages). Objects may cross pages, so the pool is
    /// for devices that address buffers virtually (AF_XDP, virtual devices), not for a PCI NIC
    /// in IOVA-as-PA mode. Fails (EFBIG) when EAL's memory could not give one piece: more
    /// memory (`-m`) or hugepages.
    #[cold]
    pub fn new_pktmbuf_packed(
        eal: &Eal,
        name: &str,
        n: u32,
        cache: u32,
        data_room: u16,
    ) -> Result<Mempool, DpdkError> {
        Self::create(eal, name, n, cache, data_room, true)
    }

    fn create(
        eal: &Eal,
        name: &str,
        n: u32,
        cache: u32,
        data_room: u16,
        packed: bool,
    ) -> Result<Mempool, DpdkError> {
        let op = if packed {
            "dpdk_sys_pktmbuf_pool_create_packed"
        } else {
            "rte_pktmbuf_pool_create"
        };
        if n == 0 {
            return Err(DpdkError::invalid(op, "a pool needs at least one mbuf"));
        }
        if data_room < sys::RTE_PKTMBUF_HEADROOM as u16 {
            return Err(DpdkError::invalid(
                op,
                format!(
                    "data_room {data_room} is smaller than the headroom {}",
                    sys::RTE_PKTMBUF_HEADROOM
                ),
            ));
        }
        let c_name = CString::new(name).map_err(|_| DpdkError::invalid(op, "name contains NUL"))?;
        // SAFETY: EAL is initialised (we hold an `Eal`); the name is a valid C string that DPDK
        // copies; sizes are plain integers it validates.
        let ptr = unsafe {
            if packed {
                sys::dpdk_sys_pktmbuf_pool_create_packed(
                    c_name.as_ptr(),
                    n,
                    cache,
                    0,
                    data_room,
                    sys::SOCKET_ID_ANY,
                )
            } else {
                sys::rte_pktmbuf_pool_create(
                    c_name.as_ptr(),
                    n,
                    cache,
                    0,
                    data_room,
                    sys::SOCKET_ID_ANY,
                )
            }
        };
        let ptr = NonNull::new(ptr).ok_or_else(|| DpdkError::from_rte_errno(op))?;
        Ok(Mempool {
            inner: Arc::new(PoolInner {
                ptr,
                name: name.to_string(),
                abandoned: std::sync::atomic::AtomicU32::new(0),
                _eal: ManuallyDrop::new(eal.clone()),
            }),
        })
    }

    /// Says that `n` of the mbufs still out will never come back nor be touched again: DPDK
    /// 22.11's `net_af_xdp` keeps what sits in a queue's fill and TX rings when it closes, and
    /// closes the socket (the kernel's last reference to that memory) with the port. After
    /// this, dropping the pool with at most `n` mbufs out frees it (and lets EAL clean up and
    /// remove its runtime folder) instead of leaking it. Only for the ports' pools, after every
    /// port that used the pool is closed.
    pub fn abandon_held(&self, n: u32) {
        self.inner
            .abandoned
            .store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// The pool's span of virtual memory, first object to the end of the last, and whether it
    /// is one piece (the objects of a pool that is not may lie anywhere between).
    pub fn span(&self) -> MempoolSpan {
        let mut span = MempoolSpan {
            start: usize::MAX,
            end: 0,
            objects: 0,
            chunks: 0,
        };
        // SAFETY: the pool is valid while `inner` lives; the callback only reads the object's
        // address and writes through the `MempoolSpan` pointer it is given, which outlives the
        // call (rte_mempool_obj_iter is synchronous).
        unsafe {
            span.chunks = (*self.inner.ptr.as_ptr()).nb_mem_chunks;
            sys::rte_mempool_obj_iter(
                self.inner.ptr.as_ptr(),
                Some(span_one),
                (&mut span as *mut MempoolSpan).cast(),
            );
        }
        span
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Mbufs free in the pool (per-lcore caches included).
    pub fn avail_count(&self) -> u32 {
        // SAFETY: the pool pointer is valid while `inner` lives.
        unsafe { sys::rte_mempool_avail_count(self.inner.ptr.as_ptr()) }
    }

    /// Mbufs taken from the pool and not yet returned (held by the application or by drivers).
    pub fn in_use_count(&self) -> u32 {
        // SAFETY: the pool pointer is valid while `inner` lives.
        unsafe { sys::rte_mempool_in_use_count(self.inner.ptr.as_ptr()) }
    }

    /// Bytes of buffer per mbuf, headroom included.
    pub fn data_room(&self) -> u16 {
        // SAFETY: a pktmbuf pool (created by new_pktmbuf) carries the private area this reads.
        unsafe { sys::rte_pktmbuf_data_room_size(self.inner.ptr.as_ptr()) }
    }

    /// The raw pool pointer, for calls the safe layer does not wrap yet.
    pub fn as_ptr(&self) -> *mut sys::rte_mempool {
        self.inner.ptr.as_ptr()
    }
}

/// Where a pool's objects lie ([`Mempool::span`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MempoolSpan {
    /// Address of the lowest object (its mempool header).
    pub start: usize,
    /// One past the end of the highest object (`elt_size` after its start, header included).
    pub end: usize,
    /// Objects seen.
    pub objects: u32,
    /// Memory chunks the pool was populated from.
    pub chunks: u32,
}

unsafe extern "C" fn span_one(
    mp: *mut sys::rte_mempool,
    arg: *mut std::ffi::c_void,
    obj: *mut std::ffi::c_void,
    _idx: u32,
) {
    // SAFETY: called by rte_mempool_obj_iter from `Mempool::span` with `arg` pointing at its
    // live `MempoolSpan` and `mp` its pool.
    unsafe {
        let span = &mut *arg.cast::<MempoolSpan>();
        let total = ((*mp).header_size + (*mp).elt_size + (*mp).trailer_size) as usize;
        let start = obj as usize - (*mp).header_size as usize;
        span.start = span.start.min(start);
        span.end = span.end.max(start + total);
        span.objects += 1;
    }
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        // SAFETY: the pool pointer is valid until freed below.
        let in_use = unsafe { sys::rte_mempool_in_use_count(self.ptr.as_ptr()) };
        if in_use > self.abandoned.load(std::sync::atomic::Ordering::Relaxed) {
            // Mbufs from this pool are still alive somewhere (an Mbuf handle, or a driver ring
            // of a port that was not closed); freeing the pool would leave them dangling. Leak
            // the pool and its Eal clone, so rte_eal_cleanup never runs under those mbufs.
            tracing::warn!(
                "dpdk: mempool {} dropped with {in_use} mbufs in use; leaking it",
                self.name
            );
            return;
        }
        // SAFETY: no mbuf from this pool is outstanding and no handle remains; the pool is
        // not used again.
        unsafe { sys::rte_mempool_free(self.ptr.as_ptr()) };
        // SAFETY: `_eal` is dropped exactly once, here, after the pool it kept alive is gone.
        unsafe { ManuallyDrop::drop(&mut self._eal) };
    }
}
