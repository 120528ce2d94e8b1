//! Where a pool's mbufs lie. DPDK 22.11's `net_af_xdp` maps a pool as its UMEM from the first
//! object for `populated_size * object size` bytes; an mbuf beyond that is no buffer the kernel
//! can take (with the switch's plain pool, its AF_XDP ports wedged under TCP load, their fill
//! rings dry: docs/operations.md). On EAL's 4 KiB pages (`--no-huge`, the test flags) the plain
//! pool leaves a page per 2,368-byte object, so its span is far larger than that; the packed
//! pool is exactly that long, in one piece.

mod common;

use dpdk::{Mbuf, Mempool, MBUF_DEFAULT_BUF_SIZE};

#[test]
fn a_packed_pool_lies_back_to_back_and_the_plain_one_does_not_on_small_pages() {
    let eal = common::eal("mempool_span", &[]);
    let n = 1023;
    let plain = Mempool::new_pktmbuf(&eal, "plain", n, 0, MBUF_DEFAULT_BUF_SIZE).unwrap();
    let packed = Mempool::new_pktmbuf_packed(&eal, "packed", n, 0, MBUF_DEFAULT_BUF_SIZE).unwrap();

    let p = plain.span();
    let q = packed.span();
    assert_eq!((p.objects, q.objects), (n, n));
    // One object's whole size, from the packed pool: its span divided by the count.
    let len = q.end - q.start;
    assert_eq!(len % n as usize, 0, "{q:?}");
    let object = len / n as usize;
    assert!(object >= MBUF_DEFAULT_BUF_SIZE as usize, "{object}");
    assert_eq!(q.chunks, 1, "{q:?}");
    // The plain pool on 4 KiB pages: objects do not cross a page, so the span is longer than
    // n objects, and the UMEM 22.11's net_af_xdp would map (n objects from the first) misses
    // the pool's last mbufs.
    assert!(
        p.end - p.start > n as usize * object,
        "plain pool {p:?}: span {} for {n} objects of {object} bytes",
        p.end - p.start
    );

    // The packed pool is an ordinary pktmbuf pool otherwise.
    let m = Mbuf::from_slice(&packed, &[0xAB; 60]).unwrap();
    assert_eq!(m.data(), &[0xAB; 60][..]);
    assert_eq!(packed.in_use_count(), 1);
    drop(m);
    assert_eq!(packed.in_use_count(), 0);
    assert_eq!(packed.data_room(), MBUF_DEFAULT_BUF_SIZE);
}
