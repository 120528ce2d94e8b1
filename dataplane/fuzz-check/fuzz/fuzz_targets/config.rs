//! cargo-fuzz target: `barrier_fuzz_check::config::check` (its documentation says what it checks;
//! `dataplane/fuzz-check/tests/replay.rs` replays `corpus/config` through the same function).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| barrier_fuzz_check::config::check(data));
