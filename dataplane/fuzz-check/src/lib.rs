//! # barrier-fuzz-check: what the fuzz targets check, callable from ordinary tests
//!
//! One module per cargo-fuzz target of `dataplane/fuzz-check/fuzz` (see `docs/reliability.md`,
//! "Fuzzing"). Each has a `check(data: &[u8])` that runs one input through the real code and
//! panics when a property fails. The fuzz targets are one line each around these functions, and
//! `tests/replay.rs` runs every file of the committed corpus through the same functions on
//! stable Rust, without cargo-fuzz, so CI replays the corpus with the workspace's tests.
//!
//! | target | code under test | properties |
//! | --- | --- | --- |
//! | [`frame`] | `wire::FrameRepr::parse` / `emit` | a named error or a frame; a frame re-encodes to the same header bytes |
//! | [`config`] | `barrier_switch::config::parse` | no panic; a refusal names a line the text has; what parses is a valid switch |
//! | [`control`] | `barrier_mgmt::Control::handle_line` (`barrier_ctl::proto::parse_request`) | no panic; one JSON answer line per request; a bad request gets an error; bounded answers; the table stays valid |
//! | [`events`] | the switch's RX path (`rx::RxPoller`, `table::GroupTable`, `switch::on_event`) fed frame sequences | the safety invariants of [`events`] |

pub mod config;
pub mod control;
pub mod events;
pub mod frame;

/// Reads a fuzz input as a stream of choices. Past the end every read gives zero, so every
/// input, however short, decodes to something; [`Input::done`] says when it is used up.
#[derive(Debug)]
pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }

    /// True when every byte has been read.
    pub fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// The next four bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// The next eight bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }

    /// Up to `n` next bytes (fewer at the end).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        let end = (start + n).min(self.data.len());
        self.pos += n;
        &self.data[start..end]
    }
}
