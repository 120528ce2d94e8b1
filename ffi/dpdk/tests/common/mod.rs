//! Helpers shared by the integration tests (each test file is its own process with its own EAL).
#![allow(dead_code)]

use dpdk::{Eal, Mbuf, Mempool};

/// Initialises the one EAL of this test process with the test flags plus `extra`.
pub fn eal(prog: &str, extra: &[&str]) -> Eal {
    let (eal, app) = Eal::init(dpdk::test_args(prog, extra)).expect("EAL init");
    assert!(app.is_empty(), "no app args were given: {app:?}");
    eal
}

/// A 60-byte barrier-like frame (EtherType 0x88B5) whose payload encodes `seq`.
pub fn barrier_frame(seq: u32) -> [u8; 60] {
    let mut f = [0u8; 60];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[12..14].copy_from_slice(&0x88B5u16.to_be_bytes());
    f[14] = 0xB1; // magic/version
    f[15] = (seq % 2) as u8; // kind
    f[16..20].copy_from_slice(&7u32.to_be_bytes()); // group
    f[20..24].copy_from_slice(&seq.to_be_bytes()); // sequence
    for (i, b) in f[24..].iter_mut().enumerate() {
        *b = (seq as u8).wrapping_mul(31).wrapping_add(i as u8);
    }
    f
}

/// An mbuf holding `bytes`.
pub fn mbuf(pool: &Mempool, bytes: &[u8]) -> Mbuf {
    Mbuf::from_slice(pool, bytes).expect("mbuf alloc")
}

/// Runs `f`, which must panic; the panic message is kept out of the test output.
pub fn expect_panic<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    r
}

/// Writes a classic pcap file (microsecond timestamps, Ethernet link type).
pub fn write_pcap(path: &std::path::Path, frames: &[Vec<u8>]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes()); // magic, microseconds
    out.extend_from_slice(&2u16.to_le_bytes()); // version major
    out.extend_from_slice(&4u16.to_le_bytes()); // version minor
    out.extend_from_slice(&0i32.to_le_bytes()); // thiszone
    out.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
    out.extend_from_slice(&65535u32.to_le_bytes()); // snaplen
    out.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    for (i, f) in frames.iter().enumerate() {
        out.extend_from_slice(&(i as u32).to_le_bytes()); // ts_sec
        out.extend_from_slice(&0u32.to_le_bytes()); // ts_usec
        out.extend_from_slice(&(f.len() as u32).to_le_bytes()); // incl_len
        out.extend_from_slice(&(f.len() as u32).to_le_bytes()); // orig_len
        out.extend_from_slice(f);
    }
    std::fs::write(path, out).unwrap();
}
