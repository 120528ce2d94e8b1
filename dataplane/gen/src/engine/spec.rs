//! What a generator run is: its configuration, its ports, and each trial's load.

use crate::fault::FaultRates;
use std::time::Duration;

/// How arrivals are paced.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Load {
    /// A group's leaves arrive at the next barrier as soon as its release is back.
    Closed,
    /// First reduces leave at `rate` frames/s (token bucket, `burst` tokens deep), as long as
    /// some group is ready; re-sends are not paced.
    Open { rate: u64, burst: u64 },
}

/// One trial: how to load, for how long, and how long to wait for stragglers.
#[derive(Copy, Clone, Debug)]
pub struct TrialSpec {
    pub load: Load,
    pub duration: Duration,
    /// Stop after this many barriers per group (then `duration` is only an upper bound).
    pub count: Option<u64>,
    /// After arrivals stop, wait at most this long for outstanding barriers.
    pub drain: Duration,
}

/// Fixed for the generator's life.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// Groups `first_group .. first_group + groups`; every port is a child in every group.
    pub first_group: u32,
    pub groups: u32,
    pub first_seq: u32,
    /// The groups' epoch on the switch (every reduce carries it).
    pub epoch: u32,
    /// The leaves' re-sends after the first: doubling up to a cap, per-group jitter.
    pub backoff: barrier_protocol::backoff::Backoff,
    /// The leaf's re-send timer.
    pub resend_timeout_ns: u64,
    /// Closed loop: keep only as many barriers in flight as the adaptive window allows
    /// (`crate::window`), else every group.
    pub adaptive_window: bool,
    /// A barrier that takes longer than this from its first reduce counts as lost.
    pub barrier_deadline_ns: u64,
    /// Destination MAC of reduces (the switch's port, or broadcast).
    pub dst_mac: [u8; 6],
    /// Put a tx timestamp (HAS_TIMESTAMP) in every reduce.
    pub timestamps: bool,
    /// Seed of the fault injectors; each port and direction gets its own stream.
    pub seed: u64,
    /// A reordered frame waits at most this long for a frame to overtake it.
    pub reorder_hold_ns: u64,
    /// Print a progress line every second to stderr.
    pub progress: bool,
    /// Names this generator in progress lines and interval-log tags when several run at once
    /// (empty: alone).
    pub label: String,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            first_group: 0,
            groups: 1,
            first_seq: 0,
            epoch: barrier_protocol::Epoch::DEFAULT.get(),
            backoff: barrier_protocol::backoff::Backoff::FIXED,
            resend_timeout_ns: 10_000_000,
            adaptive_window: false,
            barrier_deadline_ns: 1_000_000_000,
            dst_mac: [0xff; 6],
            timestamps: true,
            seed: 1,
            reorder_hold_ns: 50_000,
            progress: false,
            label: String::new(),
        }
    }
}

/// One generator port: a child link of the switch under test.
pub struct GenPort<R, T> {
    pub name: String,
    pub mac: [u8; 6],
    pub rx: R,
    pub tx: T,
    pub faults_tx: FaultRates,
    pub faults_rx: FaultRates,
}
