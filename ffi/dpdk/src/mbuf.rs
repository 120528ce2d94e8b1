//! Owned packet buffers and fixed-capacity batches of them. An `Mbuf` is one pointer wide and
//! frees itself on drop; an `MbufBatch` is an inline array of such pointers handed straight to
//! `rte_eth_rx_burst`/`rte_eth_tx_burst`, so a burst costs no allocation.

use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use dpdk_sys as sys;

use crate::error::DpdkError;
use crate::mempool::Mempool;

/// One owned packet (`struct rte_mbuf *`). Dropping it returns it to its pool (or drops one
/// reference if it was shared with `clone_ref`).
///
/// Data accessors look at the first segment, which holds the whole frame for every pool whose
/// data room fits the frame (all pools this project creates).
#[repr(transparent)]
pub struct Mbuf(NonNull<sys::rte_mbuf>);

// SAFETY: an Mbuf is the sole handle to its rte_mbuf (or one of several counted by the atomic
// refcnt, in which case mutation is refused); freeing from any thread is allowed by DPDK.
unsafe impl Send for Mbuf {}

impl std::fmt::Debug for Mbuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mbuf")
            .field("len", &self.len())
            .field("refcnt", &self.refcnt())
            .finish()
    }
}

impl Mbuf {
    /// Takes one mbuf from `pool`, empty, with the default headroom.
    #[inline]
    pub fn alloc(pool: &Mempool) -> Result<Mbuf, DpdkError> {
        // SAFETY: the pool pointer is valid while `pool` lives; alloc returns an initialised
        // mbuf or NULL.
        let p = unsafe { sys::rte_pktmbuf_alloc(pool.as_ptr()) };
        NonNull::new(p)
            .map(Mbuf)
            .ok_or_else(|| DpdkError::from_errno("rte_pktmbuf_alloc", 105 /* ENOBUFS */))
    }

    /// Allocates an mbuf holding a copy of `bytes`.
    pub fn from_slice(pool: &Mempool, bytes: &[u8]) -> Result<Mbuf, DpdkError> {
        let mut m = Mbuf::alloc(pool)?;
        m.append(bytes.len())?.copy_from_slice(bytes);
        Ok(m)
    }

    /// Fills `batch` up to its capacity with fresh mbufs in one bulk call; on failure nothing is
    /// taken.
    pub fn alloc_bulk<const N: usize>(
        pool: &Mempool,
        batch: &mut MbufBatch<N>,
    ) -> Result<usize, DpdkError> {
        let want = N - batch.len;
        if want == 0 {
            return Ok(0);
        }
        // SAFETY: the slots from `len` to N are free (not owned mbufs); alloc_bulk either fills
        // all `want` of them with initialised mbufs or none.
        let ret = unsafe {
            sys::rte_pktmbuf_alloc_bulk(
                pool.as_ptr(),
                batch.ptrs.as_mut_ptr().add(batch.len),
                want as u32,
            )
        };
        if ret != 0 {
            return Err(DpdkError::from_errno("rte_pktmbuf_alloc_bulk", -ret));
        }
        batch.len = N;
        Ok(want)
    }

    /// Takes ownership of a raw mbuf.
    ///
    /// # Safety
    /// `p` must be a valid mbuf that the caller owns (one reference), not used afterwards
    /// except through the returned `Mbuf`.
    #[inline]
    pub unsafe fn from_raw(p: NonNull<sys::rte_mbuf>) -> Mbuf {
        Mbuf(p)
    }

    /// Gives up ownership without freeing.
    #[inline]
    pub fn into_raw(self) -> NonNull<sys::rte_mbuf> {
        ManuallyDrop::new(self).0
    }

    /// The raw pointer, still owned by `self`.
    #[inline]
    pub fn as_ptr(&self) -> *mut sys::rte_mbuf {
        self.0.as_ptr()
    }

    /// Bytes in the first segment (`data_len`).
    #[inline]
    pub fn len(&self) -> usize {
        // SAFETY: the mbuf is valid while owned.
        unsafe { (*self.0.as_ptr()).data_len as usize }
    }

    /// True when the first segment holds no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total packet length over all segments (`pkt_len`).
    #[inline]
    pub fn pkt_len(&self) -> usize {
        // SAFETY: the mbuf is valid while owned.
        unsafe { (*self.0.as_ptr()).pkt_len as usize }
    }

    /// Number of segments.
    #[inline]
    pub fn segments(&self) -> u16 {
        // SAFETY: the mbuf is valid while owned.
        unsafe { (*self.0.as_ptr()).nb_segs }
    }

    /// Free bytes before the data.
    pub fn headroom(&self) -> usize {
        // SAFETY: the mbuf is valid while owned.
        unsafe { sys::rte_pktmbuf_headroom(self.0.as_ptr()) as usize }
    }

    /// Free bytes after the data in the last segment.
    pub fn tailroom(&self) -> usize {
        // SAFETY: the mbuf is valid while owned.
        unsafe { sys::rte_pktmbuf_tailroom(self.0.as_ptr()) as usize }
    }

    /// The first segment's bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        // SAFETY: mtod points at data_len initialised bytes inside the mbuf's buffer, valid
        // while the mbuf is owned; shared handles only read.
        unsafe { std::slice::from_raw_parts(sys::rte_pktmbuf_mtod(self.0.as_ptr()), self.len()) }
    }

    /// The first segment's bytes, writable.
    ///
    /// # Panics
    /// If the mbuf is shared (`clone_ref`), since another handle may be reading or sending it.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.assert_unique("data_mut");
        // SAFETY: as in `data`, and this is the only handle (refcnt 1), borrowed mutably.
        unsafe {
            std::slice::from_raw_parts_mut(sys::rte_pktmbuf_mtod(self.0.as_ptr()), self.len())
        }
    }

    /// The packet cut to exactly its first `N` bytes, handed out writable: for building a reply
    /// in the buffer of the frame it answers (no allocation, and a header already in cache).
    /// `None`, and nothing changed, when the mbuf is shared (`clone_ref`), has more than one
    /// segment, or holds fewer than `N` bytes.
    #[inline]
    pub fn rewrite<const N: usize>(&mut self) -> Option<&mut [u8; N]> {
        let m = self.0.as_ptr();
        // SAFETY: the mbuf is valid while owned; its header fields are read and, below, written
        // through the only handle (refcnt 1), borrowed mutably.
        unsafe {
            if (*m).nb_segs != 1 || ((*m).data_len as usize) < N || self.is_shared() {
                return None;
            }
            let n16 = u16::try_from(N).ok()?;
            (*m).data_len = n16;
            (*m).pkt_len = u32::from(n16);
            // SAFETY: mtod points at the first segment's data, at least N bytes of the buffer.
            Some(&mut *(sys::rte_pktmbuf_mtod(m) as *mut [u8; N]))
        }
    }

    /// Grows the packet by `n` bytes at the end and returns them (uninitialised contents are
    /// whatever the buffer held: write them).
    ///
    /// # Panics
    /// If the mbuf is shared.
    pub fn append(&mut self, n: usize) -> Result<&mut [u8], DpdkError> {
        self.assert_unique("append");
        let n16 = u16::try_from(n)
            .map_err(|_| DpdkError::invalid("rte_pktmbuf_append", "length over 65535"))?;
        // SAFETY: the mbuf is owned and unique; append returns NULL when tailroom is short.
        let p = unsafe { sys::rte_pktmbuf_append(self.0.as_ptr(), n16) };
        if p.is_null() {
            return Err(DpdkError::invalid(
                "rte_pktmbuf_append",
                format!("{n} bytes requested, {} bytes of tailroom", self.tailroom()),
            ));
        }
        // SAFETY: p points at n bytes inside the buffer that now belong to the packet.
        Ok(unsafe { std::slice::from_raw_parts_mut(p as *mut u8, n) })
    }

    /// Grows the packet by `n` bytes at the front (into the headroom) and returns them.
    ///
    /// # Panics
    /// If the mbuf is shared.
    pub fn prepend(&mut self, n: usize) -> Result<&mut [u8], DpdkError> {
        self.assert_unique("prepend");
        let n16 = u16::try_from(n)
            .map_err(|_| DpdkError::invalid("rte_pktmbuf_prepend", "length over 65535"))?;
        // SAFETY: the mbuf is owned and unique; prepend returns NULL when headroom is short.
        let p = unsafe { sys::rte_pktmbuf_prepend(self.0.as_ptr(), n16) };
        if p.is_null() {
            return Err(DpdkError::invalid(
                "rte_pktmbuf_prepend",
                format!("{n} bytes requested, {} bytes of headroom", self.headroom()),
            ));
        }
        // SAFETY: p points at the n bytes now at the front of the packet.
        Ok(unsafe { std::slice::from_raw_parts_mut(p as *mut u8, n) })
    }

    /// Removes `n` bytes from the end.
    ///
    /// # Panics
    /// If the mbuf is shared.
    pub fn trim(&mut self, n: usize) -> Result<(), DpdkError> {
        self.assert_unique("trim");
        let n16 = u16::try_from(n)
            .map_err(|_| DpdkError::invalid("rte_pktmbuf_trim", "length over 65535"))?;
        // SAFETY: the mbuf is owned and unique; trim checks the length against the last segment.
        let ret = unsafe { sys::rte_pktmbuf_trim(self.0.as_ptr(), n16) };
        if ret != 0 {
            return Err(DpdkError::invalid(
                "rte_pktmbuf_trim",
                format!("{n} bytes is more than the last segment holds"),
            ));
        }
        Ok(())
    }

    /// Removes `n` bytes from the front.
    ///
    /// # Panics
    /// If the mbuf is shared.
    pub fn adj(&mut self, n: usize) -> Result<(), DpdkError> {
        self.assert_unique("adj");
        let n16 = u16::try_from(n)
            .map_err(|_| DpdkError::invalid("rte_pktmbuf_adj", "length over 65535"))?;
        // SAFETY: the mbuf is owned and unique; adj returns NULL when n exceeds the first segment.
        let p = unsafe { sys::rte_pktmbuf_adj(self.0.as_ptr(), n16) };
        if p.is_null() {
            return Err(DpdkError::invalid(
                "rte_pktmbuf_adj",
                format!("{n} bytes is more than the first segment holds"),
            ));
        }
        Ok(())
    }

    /// The reference count (1 unless shared with `clone_ref`).
    #[inline]
    pub fn refcnt(&self) -> u16 {
        // SAFETY: the mbuf is valid while owned, and `refcnt` is a naturally aligned u16 that
        // DPDK only changes atomically. An atomic load, as `rte_mbuf_refcnt_read` does, without
        // its out-of-line wrapper (it is `static inline` in C) on the hot path; Acquire, so a
        // count of 1 (this handle alone: `rewrite`, `data_mut`) comes after everything another
        // handle did before dropping its reference (a plain load on x86).
        unsafe {
            std::sync::atomic::AtomicU16::from_ptr(std::ptr::addr_of_mut!(
                (*self.0.as_ptr()).refcnt
            ))
            .load(std::sync::atomic::Ordering::Acquire)
        }
    }

    /// True when another handle shares this mbuf.
    #[inline]
    pub fn is_shared(&self) -> bool {
        self.refcnt() != 1
    }

    /// A second handle to the same packet, for sending one frame on several ports without
    /// copying: bumps the reference count of every segment. Each handle's drop (or a driver's
    /// free after transmit) drops one reference; the buffer returns to its pool at zero.
    /// Neither handle can be mutated while both exist.
    #[inline]
    pub fn clone_ref(&self) -> Mbuf {
        // SAFETY: the mbuf is valid; updating the refcnt of all segments atomically is how
        // DPDK shares a packet; the new handle owns the added reference.
        unsafe {
            let m = self.0.as_ptr();
            if (*m).nb_segs == 1 {
                // One segment: `rte_mbuf_refcnt_update` on it, without the out-of-line wrapper
                // (it is `static inline` in C): a relaxed atomic add (a plain store while this
                // is the only reference, as DPDK does: no other handle can change it then).
                let rc =
                    std::sync::atomic::AtomicU16::from_ptr(std::ptr::addr_of_mut!((*m).refcnt));
                if rc.load(std::sync::atomic::Ordering::Relaxed) == 1 {
                    rc.store(2, std::sync::atomic::Ordering::Relaxed);
                } else {
                    rc.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                }
            } else {
                sys::rte_pktmbuf_refcnt_update(m, 1);
            }
        }
        Mbuf(self.0)
    }

    /// A cache hint for the mbuf's header (its first cache line: the data offset and lengths),
    /// so that reading the data's address later does not wait for it: the RX path asks for a
    /// whole burst's headers before it touches the first.
    #[inline]
    pub fn prefetch_header(&self) {
        // SAFETY: the mbuf is valid while owned; a reference to its header is only hinted at.
        crate::prefetch(unsafe { &*self.0.as_ptr() });
    }

    /// A deep copy into a fresh mbuf from `pool` (mutable independently).
    pub fn copy(&self, pool: &Mempool) -> Result<Mbuf, DpdkError> {
        // SAFETY: the source is valid and only read; copy allocates from a valid pool.
        let p = unsafe { sys::rte_pktmbuf_copy(self.0.as_ptr(), pool.as_ptr(), 0, u32::MAX) };
        NonNull::new(p)
            .map(Mbuf)
            .ok_or_else(|| DpdkError::from_errno("rte_pktmbuf_copy", 105))
    }

    #[inline]
    fn assert_unique(&self, op: &str) {
        assert!(
            !self.is_shared(),
            "Mbuf::{op} on a shared mbuf (refcnt {})",
            self.refcnt()
        );
    }
}

impl Drop for Mbuf {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own one reference; pktmbuf_free drops it and returns the segments to their
        // pool when it was the last.
        unsafe { sys::rte_pktmbuf_free(self.0.as_ptr()) }
    }
}

/// The usual burst size of DPDK examples.
pub const DEFAULT_BURST: usize = 64;

/// A fixed-capacity batch of owned mbufs, stored as the raw pointer array DPDK's burst calls
/// take. `rx_burst` appends into the free slots; `tx_burst` removes the mbufs the driver took and
/// leaves the rest, in order, at the front. Dropping the batch frees what it still holds.
pub struct MbufBatch<const N: usize = DEFAULT_BURST> {
    /// Slots `0..len` hold owned, non-null mbufs; the rest are free.
    ptrs: [*mut sys::rte_mbuf; N],
    len: usize,
}

// SAFETY: the batch owns its mbufs exactly like a Vec<Mbuf>, and Mbuf is Send.
unsafe impl<const N: usize> Send for MbufBatch<N> {}

impl<const N: usize> Default for MbufBatch<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> std::fmt::Debug for MbufBatch<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MbufBatch")
            .field("len", &self.len)
            .field("capacity", &N)
            .finish()
    }
}

impl<const N: usize> MbufBatch<N> {
    /// An empty batch.
    #[inline]
    pub const fn new() -> Self {
        MbufBatch {
            ptrs: [std::ptr::null_mut(); N],
            len: 0,
        }
    }

    /// Mbufs held.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no mbuf is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when no slot is free.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len == N
    }

    /// The capacity `N`.
    #[inline]
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Adds an mbuf at the end; gives it back when full.
    #[inline]
    pub fn push(&mut self, m: Mbuf) -> Result<(), Mbuf> {
        if self.len == N {
            return Err(m);
        }
        self.ptrs[self.len] = m.into_raw().as_ptr();
        self.len += 1;
        Ok(())
    }

    /// Removes the last mbuf.
    #[inline]
    pub fn pop(&mut self) -> Option<Mbuf> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        let p = self.ptrs[self.len];
        // SAFETY: slots below the old len hold owned non-null mbufs; this one leaves the batch.
        Some(unsafe { Mbuf::from_raw(NonNull::new_unchecked(p)) })
    }

    /// The held mbufs.
    #[inline]
    pub fn as_slice(&self) -> &[Mbuf] {
        // SAFETY: Mbuf is repr(transparent) over NonNull<rte_mbuf>, which has the layout of
        // *mut rte_mbuf; slots 0..len are non-null owned mbufs.
        unsafe { std::slice::from_raw_parts(self.ptrs.as_ptr() as *const Mbuf, self.len) }
    }

    /// The held mbufs, mutably (to edit frames in place).
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [Mbuf] {
        // SAFETY: as in as_slice; the batch is borrowed mutably, and replacing a slot through
        // the slice drops the old Mbuf properly.
        unsafe { std::slice::from_raw_parts_mut(self.ptrs.as_mut_ptr() as *mut Mbuf, self.len) }
    }

    /// Iterates over the held mbufs.
    pub fn iter(&self) -> std::slice::Iter<'_, Mbuf> {
        self.as_slice().iter()
    }

    /// Moves every mbuf out, front to back, leaving the batch empty.
    pub fn drain(&mut self) -> Drain<'_, N> {
        let end = self.len;
        self.len = 0;
        Drain {
            batch: self,
            next: 0,
            end,
        }
    }

    /// Frees every held mbuf in one bulk call.
    pub fn clear(&mut self) {
        if self.len == 0 {
            return;
        }
        // SAFETY: slots 0..len are owned mbufs; free_bulk drops one reference of each and the
        // batch forgets them.
        unsafe { sys::rte_pktmbuf_free_bulk(self.ptrs.as_mut_ptr(), self.len as u32) };
        self.len = 0;
    }

    /// Pointer to the first free slot and the number of free slots (for rx_burst).
    #[inline]
    pub(crate) fn free_slots(&mut self) -> (*mut *mut sys::rte_mbuf, u16) {
        // SAFETY: len <= N, so the offset stays inside the array (or one past its end when full).
        let p = unsafe { self.ptrs.as_mut_ptr().add(self.len) };
        (p, (N - self.len).min(u16::MAX as usize) as u16)
    }

    /// Records that `n` free slots were filled with owned mbufs.
    ///
    /// # Safety
    /// The first `n` free slots must now hold owned, non-null mbufs.
    #[inline]
    pub(crate) unsafe fn commit_filled(&mut self, n: usize) {
        debug_assert!(self.len + n <= N);
        self.len += n;
    }

    /// The held pointers and their count (for tx_burst).
    #[inline]
    pub(crate) fn held(&mut self) -> (*mut *mut sys::rte_mbuf, u16) {
        (
            self.ptrs.as_mut_ptr(),
            self.len.min(u16::MAX as usize) as u16,
        )
    }

    /// Forgets the first `n` mbufs (now owned by a driver) and moves the rest to the front.
    #[inline]
    pub(crate) fn consume_front(&mut self, n: usize) {
        debug_assert!(n <= self.len);
        self.ptrs.copy_within(n..self.len, 0);
        self.len -= n;
    }
}

impl<const N: usize> Drop for MbufBatch<N> {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Owning iterator from `MbufBatch::drain`; mbufs not taken are freed when it drops.
pub struct Drain<'a, const N: usize> {
    batch: &'a mut MbufBatch<N>,
    next: usize,
    end: usize,
}

impl<const N: usize> Iterator for Drain<'_, N> {
    type Item = Mbuf;

    #[inline]
    fn next(&mut self) -> Option<Mbuf> {
        if self.next == self.end {
            return None;
        }
        let p = self.batch.ptrs[self.next];
        self.next += 1;
        // SAFETY: slots below the drained length were owned non-null mbufs and each is handed
        // out once.
        Some(unsafe { Mbuf::from_raw(NonNull::new_unchecked(p)) })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.end - self.next, Some(self.end - self.next))
    }
}

impl<const N: usize> Drop for Drain<'_, N> {
    fn drop(&mut self) {
        for m in self.by_ref() {
            drop(m);
        }
    }
}
