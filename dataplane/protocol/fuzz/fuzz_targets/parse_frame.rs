//! Fuzz the frame parser: any bytes either fail with a named error or parse; a parsed frame
//! emits and re-parses to the same value, and the emitted frame keeps the meaningful bytes.
//! Each input is also tried with its header checksum repaired, since random bytes almost never
//! carry a right one and the fuzzer would otherwise rarely get past the checksum.
#![no_main]

use barrier_protocol::wire::{field, Frame, FrameRepr, ParseError, FRAME_LEN, HEADER_END};
use libfuzzer_sys::fuzz_target;

fn check(data: &[u8]) {
    match FrameRepr::parse(data) {
        Ok(repr) => {
            assert!(data.len() >= HEADER_END);
            assert!(Frame::new_unchecked(data).verify_checksum());
            let mut buf = [0u8; FRAME_LEN];
            assert_eq!(repr.emit(&mut buf), FRAME_LEN);
            assert_eq!(FrameRepr::parse(&buf), Ok(repr));
            // header up to the sequence number (epoch included) is reproduced byte for byte
            assert_eq!(&buf[..field::SEQ.end], &data[..field::SEQ.end]);
            assert!(buf[HEADER_END..].iter().all(|&b| b == 0));
        }
        Err(e) => {
            assert!(ParseError::ALL.contains(&e));
            assert_eq!(ParseError::ALL[e.index()], e);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if data.len() >= HEADER_END {
        let mut repaired = data.to_vec();
        Frame::new_unchecked(&mut repaired[..]).fill_checksum();
        check(&repaired);
        // A repaired frame fails, if at all, for a reason other than its checksum.
        assert_ne!(FrameRepr::parse(&repaired), Err(ParseError::BadChecksum));
    }
});
