//! [`Dataplane`]: the one door between the management plane and the dataplane it manages.

use crate::policer::PolicerRegister;
use crate::snapshot::Snapshot;
use crate::straggler::Watch;
use barrier_protocol::table::GroupTable;
use std::sync::Arc;

/// What the management plane (the control socket, the telemetry commands, Prometheus, the
/// report) reads from and changes in one running dataplane, and nothing more: it does not know
/// which dataplane it manages. `barrier_switch::engine::SwitchStats`, the DPDK pipeline's (and the in-memory switch's
/// the tests run), is one implementation; another dataplane (XDP, a later issue) would give
/// the same: a group table the management plane configures and removes groups in and reads
/// state and per-group counts from, its counters as one `Snapshot`, and per port a policer
/// register and the number of RX queues sharing it.
pub trait Dataplane: Send + Sync {
    /// The switch's name.
    fn name(&self) -> &str;
    /// Port names, by switch-local index.
    fn port_names(&self) -> &[String];
    /// The group table: configure or remove a group, read its configuration, state and counts.
    fn table(&self) -> &GroupTable;
    /// Every counter, each cell read once.
    fn snapshot(&self) -> Snapshot;
    /// Straggler reports, if the dataplane can watch groups.
    fn watch(&self) -> Option<&Arc<Watch>>;
    /// Port `port`'s policer register, if it has one.
    fn policer(&self, port: usize) -> Option<&PolicerRegister>;
    /// The RX queues of port `port` (they share its policer's rate and burst).
    fn rx_queues(&self, port: usize) -> usize;
}
