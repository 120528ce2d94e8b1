//! The control socket, served on the switch's management thread (never on an lcore): a Unix
//! socket, mode 0600, one JSON request per line and one answer per line (`barrier_ctl::proto`).
//! It creates, resets, changes and deletes groups while the dataplane runs; each change is one
//! `GroupTable::configure` or `remove`, atomic for the group (the table's generation), so no
//! frame sees half a configuration and no other group is touched.
//!
//! Two parts: [`Control`] decides (request in, answer out, no I/O but the optional write-back
//! of the file); [`ControlServer`] does the socket: bind, peer credentials, `poll(2)` with a
//! timeout (the management loop's sleep), lines capped at `MAX_REQUEST_LINE`.
//!
//! Admission: everything a request names is checked before the table is written (group inside
//! the table, ports that exist, 1 to 64 children, parent not a child, the group absent for a
//! create and present for the rest, and the epoch: `barrier_ctl::epoch::admit` against the
//! highest epoch this process has had for the number), so a refused request changes nothing.

//!
//! | module | role |
//! | --- | --- |
//! | `control` | [`Control`]: requests against the table and counters, admission, write-back |
//! | `server` | [`ControlServer`]: the socket, peer credentials, lines, `poll(2)` |

mod control;
mod server;
#[cfg(test)]
mod tests;

pub use control::{Control, PortDesc, DEFAULT_EPOCH};
pub use server::{BindError, ControlServer, MAX_CLIENTS};
