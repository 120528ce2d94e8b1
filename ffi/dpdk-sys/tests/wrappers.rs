//! Calls every generated static-inline wrapper and the errno shim once against a live EAL and
//! checks each against a value known independently (the mbuf's own fields, the CPU's TSC), so a
//! wrapper bound to the wrong function or compiled with different flags shows up here.
//! (`rte_eth_rx_burst`/`rte_eth_tx_burst` are exercised end to end in ffi/dpdk/tests.)

use std::ffi::CString;
use std::os::raw::{c_char, c_void};
use std::ptr;

use dpdk_sys::*;

fn eal_init() {
    let args = [
        "wrappers",
        "--no-huge",
        "-m",
        "128",
        "--no-shconf",
        "--file-prefix",
        &format!("nb-sys-{}", std::process::id()),
        "--no-pci",
        "--iova-mode=va",
        "--no-telemetry",
        "-l",
        "0",
    ]
    .map(|s| CString::new(s).unwrap());
    let mut argv: Vec<*mut c_char> = args.iter().map(|a| a.as_ptr() as *mut c_char).collect();
    // The strings must outlive EAL (it may keep pointers into argv).
    std::mem::forget(args);
    // SAFETY: argv holds valid C strings kept alive for the process; first and only init.
    let ret = unsafe { rte_eal_init(argv.len() as i32, argv.as_mut_ptr()) };
    assert!(ret >= 0, "rte_eal_init: {ret}");
    std::mem::forget(argv);
}

#[test]
fn every_wrapper_does_what_its_c_function_does() {
    eal_init();
    // SAFETY: EAL is initialised on this thread; every pointer passed comes from
    // the DPDK allocation just above it and is checked for NULL before use.
    unsafe {
        assert_eq!(rte_lcore_id(), 0, "this thread is the main lcore");

        // TSC readers agree with the CPU instruction.
        let a = core::arch::x86_64::_rdtsc();
        let b = rte_rdtsc();
        let c = rte_rdtsc_precise();
        let d = rte_get_tsc_cycles();
        let e = core::arch::x86_64::_rdtsc();
        assert!(a <= b && b <= c && c <= d && d <= e, "{a} {b} {c} {d} {e}");
        assert!(rte_get_tsc_hz() > 1_000_000);

        // errno shim.
        dpdk_sys_set_rte_errno(EINVAL_FOR_TEST);
        assert_eq!(dpdk_sys_rte_errno(), EINVAL_FOR_TEST);

        let name = CString::new("wrap_pool").unwrap();
        let pool = rte_pktmbuf_pool_create(
            name.as_ptr(),
            63,
            0,
            0,
            RTE_MBUF_DEFAULT_BUF_SIZE as u16,
            SOCKET_ID_ANY,
        );
        assert!(!pool.is_null());
        assert_eq!(
            rte_pktmbuf_data_room_size(pool),
            RTE_MBUF_DEFAULT_BUF_SIZE as u16
        );
        assert_eq!(rte_mempool_avail_count(pool), 63);

        let m = rte_pktmbuf_alloc(pool);
        assert!(!m.is_null());
        assert_eq!(rte_mempool_in_use_count(pool), 1);
        assert_eq!((*m).data_len, 0);
        assert_eq!(rte_pktmbuf_headroom(m), (*m).data_off);
        assert_eq!(rte_pktmbuf_headroom(m) as u32, RTE_PKTMBUF_HEADROOM);
        assert_eq!(
            rte_pktmbuf_tailroom(m) as u32,
            RTE_MBUF_DEFAULT_BUF_SIZE - RTE_PKTMBUF_HEADROOM
        );

        let p = rte_pktmbuf_append(m, 10) as *mut u8;
        assert_eq!(p, rte_pktmbuf_mtod(m));
        assert_eq!(((*m).data_len, (*m).pkt_len), (10, 10));
        let q = rte_pktmbuf_prepend(m, 4) as *mut u8;
        assert_eq!(q, p.sub(4));
        assert_eq!((*m).data_len, 14);
        let r = rte_pktmbuf_adj(m, 6) as *mut u8;
        assert_eq!(r, q.add(6));
        assert_eq!((*m).data_len, 8);
        assert_eq!(rte_pktmbuf_trim(m, 3), 0);
        assert_eq!((*m).data_len, 5);
        assert_eq!(rte_pktmbuf_trim(m, 6), -1, "more than the segment holds");
        assert_eq!(rte_pktmbuf_is_contiguous(m), 1);

        assert_eq!(rte_mbuf_refcnt_read(m), 1);
        assert_eq!(rte_mbuf_refcnt_update(m, 2), 3);
        assert_eq!(rte_mbuf_refcnt_read(m), 3);
        rte_mbuf_refcnt_set(m, 1);
        assert_eq!(rte_mbuf_refcnt_read(m), 1);
        rte_pktmbuf_refcnt_update(m, 1);
        assert_eq!(rte_mbuf_refcnt_read(m), 2);
        rte_pktmbuf_free(m); // drops one reference only
        assert_eq!(rte_mempool_in_use_count(pool), 1);
        let clone = rte_pktmbuf_clone(m, pool);
        assert!(!clone.is_null());
        assert_eq!((*clone).pkt_len, 5);
        assert_eq!(
            rte_pktmbuf_mtod(clone),
            rte_pktmbuf_mtod(m),
            "a clone points at the same data"
        );
        rte_pktmbuf_free(clone);
        rte_pktmbuf_free(m);
        assert_eq!(rte_mempool_in_use_count(pool), 0);

        let mut bulk = [ptr::null_mut::<rte_mbuf>(); 8];
        assert_eq!(rte_pktmbuf_alloc_bulk(pool, bulk.as_mut_ptr(), 8), 0);
        assert!(bulk.iter().all(|b| !b.is_null()));
        assert_eq!(rte_mempool_avail_count(pool), 55);
        assert!(
            rte_pktmbuf_alloc_bulk(pool, bulk.as_mut_ptr(), 100) < 0,
            "more than the pool holds"
        );

        let rname = CString::new("wrap_ring").unwrap();
        let ring = rte_ring_create(
            rname.as_ptr(),
            16,
            SOCKET_ID_ANY,
            RING_F_SP_ENQ | RING_F_SC_DEQ,
        );
        assert!(!ring.is_null());
        let objs = bulk.map(|b| b as *mut c_void);
        assert_eq!(
            rte_ring_enqueue_burst(ring, objs.as_ptr(), 8, ptr::null_mut()),
            8
        );
        assert_eq!(rte_ring_count(ring), 8);
        let mut out = [ptr::null_mut::<c_void>(); 8];
        let mut left = 99u32;
        assert_eq!(
            rte_ring_dequeue_burst(ring, out.as_mut_ptr(), 5, &mut left),
            5
        );
        assert_eq!(left, 3);
        assert_eq!(out[..5], objs[..5], "FIFO order");
        assert_eq!(
            rte_ring_dequeue_burst(ring, out.as_mut_ptr().add(5), 8, ptr::null_mut()),
            3
        );
        assert_eq!(out, objs);
        rte_ring_free(ring);

        rte_pktmbuf_free_bulk(bulk.as_mut_ptr(), 8);
        assert_eq!(rte_mempool_avail_count(pool), 63);
        rte_mempool_free(pool);
        let dir = std::ffi::CStr::from_ptr(rte_eal_get_runtime_dir())
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(rte_eal_cleanup(), 0);
        // EAL never removes its runtime folder (empty with --no-shconf): leave none behind.
        std::fs::remove_dir(&dir).unwrap();
    }
}

const EINVAL_FOR_TEST: i32 = 22;
