//! The frame parser: any bytes either fail with one of the named errors or parse; a parsed
//! frame emits and re-parses to the same value, and re-encodes to the same bytes wherever the
//! format fixes them (`docs/wire-format.md`): the header through the sequence number always,
//! the timestamp and the checksum too when the frame carries a timestamp or its timestamp field
//! is zero (without HAS_TIMESTAMP the field's value is ignored, and `emit` writes zeros). Each
//! input is also tried with its header checksum repaired, since random bytes almost never carry
//! a right one and the fuzzer would otherwise rarely get past the checksum.

use barrier_protocol::wire::{field, Flags, Frame, FrameRepr, ParseError, FRAME_LEN, HEADER_END};

fn check_one(data: &[u8]) {
    match FrameRepr::parse(data) {
        Ok(repr) => {
            assert!(data.len() >= HEADER_END);
            assert!(Frame::new_unchecked(data).verify_checksum());
            assert_eq!(
                repr.flags.contains(Flags::HAS_TIMESTAMP),
                repr.tx_timestamp.is_some()
            );
            let mut buf = [0u8; FRAME_LEN];
            assert_eq!(repr.emit(&mut buf), FRAME_LEN);
            assert_eq!(FrameRepr::parse(&buf), Ok(repr));
            assert_eq!(repr.to_bytes(), buf);
            // header up to the sequence number (epoch included) is reproduced byte for byte
            assert_eq!(&buf[..field::SEQ.end], &data[..field::SEQ.end]);
            let ts_zero = data[field::TX_TIMESTAMP].iter().all(|&b| b == 0);
            if repr.tx_timestamp.is_some() || ts_zero {
                // nothing the format ignores was set: the whole header, and the checksum up to
                // the two ones' complement zeros: a header whose sum is 0xFFFF verifies with
                // 0x0000 and with 0xFFFF in the checksum field, `emit` writes 0x0000 (finding
                // 1 of the campaign, `tests/findings.rs`)
                assert_eq!(
                    &buf[..field::CHECKSUM.start],
                    &data[..field::CHECKSUM.start]
                );
                let (ours, theirs) = (&buf[field::CHECKSUM], &data[field::CHECKSUM]);
                assert!(
                    ours == theirs || (ours == [0, 0] && theirs == [0xff, 0xff]),
                    "checksum {theirs:02x?} re-encoded as {ours:02x?}"
                );
            }
            assert!(buf[HEADER_END..].iter().all(|&b| b == 0));
        }
        Err(e) => {
            assert!(ParseError::ALL.contains(&e));
            assert_eq!(ParseError::ALL[e.index()], e);
            assert!(!e.reason().is_empty());
        }
    }
}

/// Runs one input (and its checksum-repaired copy) through the parser; panics on a failed
/// property.
pub fn check(data: &[u8]) {
    check_one(data);
    if data.len() >= HEADER_END {
        let mut repaired = data.to_vec();
        Frame::new_unchecked(&mut repaired[..]).fill_checksum();
        check_one(&repaired);
        // A repaired frame fails, if at all, for a reason other than its checksum.
        assert_ne!(FrameRepr::parse(&repaired), Err(ParseError::BadChecksum));
    }
}
