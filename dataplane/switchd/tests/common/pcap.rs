//! Minimal pcap (libpcap classic format, Ethernet link type) reader and writer for tests.

use std::io::{Read, Write};
use std::path::Path;

pub fn write(path: &Path, frames: &[Vec<u8>]) {
    let mut f = std::fs::File::create(path).unwrap();
    let mut hdr = Vec::new();
    hdr.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    hdr.extend_from_slice(&2u16.to_le_bytes());
    hdr.extend_from_slice(&4u16.to_le_bytes());
    hdr.extend_from_slice(&0i32.to_le_bytes());
    hdr.extend_from_slice(&0u32.to_le_bytes());
    hdr.extend_from_slice(&65535u32.to_le_bytes());
    hdr.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    f.write_all(&hdr).unwrap();
    for (i, fr) in frames.iter().enumerate() {
        let mut rec = Vec::new();
        rec.extend_from_slice(&(i as u32).to_le_bytes()); // ts_sec
        rec.extend_from_slice(&0u32.to_le_bytes());
        rec.extend_from_slice(&(fr.len() as u32).to_le_bytes());
        rec.extend_from_slice(&(fr.len() as u32).to_le_bytes());
        f.write_all(&rec).unwrap();
        f.write_all(fr).unwrap();
    }
}

/// The frames of a pcap file (timestamps ignored). Handles both byte orders and the
/// nanosecond magic.
pub fn read(path: &Path) -> Vec<Vec<u8>> {
    let mut b = Vec::new();
    std::fs::File::open(path)
        .unwrap()
        .read_to_end(&mut b)
        .unwrap();
    assert!(b.len() >= 24, "{} is not a pcap file", path.display());
    let magic = u32::from_le_bytes(b[0..4].try_into().unwrap());
    let le = matches!(magic, 0xa1b2c3d4 | 0xa1b23c4d);
    assert!(
        le || matches!(magic.swap_bytes(), 0xa1b2c3d4 | 0xa1b23c4d),
        "bad pcap magic {magic:#x}"
    );
    let u32_at = |o: usize| {
        let v: [u8; 4] = b[o..o + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(v)
        } else {
            u32::from_be_bytes(v)
        }
    };
    let mut out = Vec::new();
    let mut o = 24;
    while o + 16 <= b.len() {
        let caplen = u32_at(o + 8) as usize;
        o += 16;
        out.push(b[o..o + caplen].to_vec());
        o += caplen;
    }
    out
}
