//! cargo-fuzz target: `barrier_fuzz_check::frame::check` (its documentation says what it checks;
//! `dataplane/fuzz-check/tests/replay.rs` replays `corpus/parse_frame` through the same function).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| barrier_fuzz_check::frame::check(data));
