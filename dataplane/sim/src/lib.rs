//! Deterministic discrete-event simulator (issue 3). Placeholder until the crate lands.
#![forbid(unsafe_code)]
