//! [`Dataplane`]: the one door between the management plane and the dataplane it manages, and
//! [`Groups`]: the group store behind it (the DPDK switch's [`GroupTable`], the XDP switch's
//! group map).

use crate::policer::PolicerRegister;
use crate::snapshot::Snapshot;
use crate::straggler::Watch;
use barrier_protocol::switch::{GroupConfig, GroupState, Run};
use barrier_protocol::table::{GroupCounts, GroupTable};
use barrier_protocol::GroupId;
use std::sync::Arc;

/// What the management plane (the control socket, the telemetry commands, Prometheus, the
/// report) reads from and changes in one running dataplane, and nothing more: it does not know
/// which dataplane it manages. `barrier_switch::engine::SwitchStats`, the DPDK pipeline's (and
/// the in-memory switch's the tests run), is one implementation; `barrier_xdp::XdpDataplane`
/// (the XDP program's maps) is another. A feature a dataplane does not have answers `None`
/// (`watch`, `policer`, `Groups::counts`, `Groups::run`), and the management plane says so.
pub trait Dataplane: Send + Sync {
    /// The switch's name.
    fn name(&self) -> &str;
    /// Port names, by switch-local index.
    fn port_names(&self) -> &[String];
    /// The group store: configure or remove a group, read its configuration, state and counts.
    fn table(&self) -> &dyn Groups;
    /// Every counter, each cell read once.
    fn snapshot(&self) -> Snapshot;
    /// Straggler reports, if the dataplane can watch groups.
    fn watch(&self) -> Option<&Arc<Watch>>;
    /// Port `port`'s policer register, if it has one.
    fn policer(&self, port: usize) -> Option<&PolicerRegister>;
    /// The RX queues of port `port` (they share its policer's rate and burst).
    fn rx_queues(&self, port: usize) -> usize;
}

/// A dataplane's groups, numbered `0..capacity()`: what the management plane configures,
/// removes and reads. Every method takes `&self`; a change to one group is atomic for it (its
/// configuration, epoch and fresh state together).
pub trait Groups: Send + Sync {
    /// Group numbers `0..capacity()`.
    fn capacity(&self) -> u32;
    /// Installs `cfg` for `group` with a fresh state (create, reset, set).
    fn configure(&self, group: GroupId, cfg: GroupConfig) -> Result<(), String>;
    /// Removes `group`: its frames are refused from now on.
    fn remove(&self, group: GroupId) -> Result<(), String>;
    /// The group's configuration, if configured.
    fn config(&self, group: GroupId) -> Option<GroupConfig>;
    /// The group's state, if configured.
    fn state(&self, group: GroupId) -> Option<GroupState>;
    /// The group's completions and re-sends, if the dataplane counts per group.
    fn counts(&self, group: GroupId) -> Option<GroupCounts>;
    /// Every group's counts, indexed by group number (`0..capacity()`), if the dataplane counts
    /// per group: what `stats` adds up. One [`Groups::counts`] per
    /// group unless the dataplane reads them all at once (the XDP switch: one map batch).
    fn all_counts(&self) -> Option<Vec<GroupCounts>> {
        (0..self.capacity())
            .map(|n| self.counts(GroupId(n)))
            .collect()
    }
    /// The group's current run (what the straggler watch keys barriers by), if the dataplane
    /// has one.
    fn run(&self, group: GroupId) -> Option<Run>;
}

impl Groups for GroupTable {
    fn capacity(&self) -> u32 {
        GroupTable::capacity(self)
    }
    fn configure(&self, group: GroupId, cfg: GroupConfig) -> Result<(), String> {
        GroupTable::configure(self, group, cfg).map_err(|e| e.to_string())
    }
    fn remove(&self, group: GroupId) -> Result<(), String> {
        GroupTable::remove(self, group).map_err(|e| e.to_string())
    }
    fn config(&self, group: GroupId) -> Option<GroupConfig> {
        GroupTable::config(self, group)
    }
    fn state(&self, group: GroupId) -> Option<GroupState> {
        GroupTable::state(self, group)
    }
    fn counts(&self, group: GroupId) -> Option<GroupCounts> {
        Some(GroupTable::counts(self, group))
    }
    fn run(&self, group: GroupId) -> Option<Run> {
        GroupTable::run(self, group)
    }
}
