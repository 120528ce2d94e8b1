//! cargo-fuzz target: `barrier_fuzz_check::events::check` (its documentation says what it checks;
//! `dataplane/fuzz-check/tests/replay.rs` replays `corpus/switch_events` through the same function).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| barrier_fuzz_check::events::check(data));
