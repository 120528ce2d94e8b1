//! [`XdpDataplane`]: the XDP switch as `barrier_mgmt` sees it (`Dataplane`, `Groups`), so the
//! control socket, Prometheus and `--stats-json` serve it as they serve barrier-switch. Groups
//! are configured, removed and read in the program's `nb_groups` map; the counters are the
//! program's per-CPU counters summed: per port (RX by ingress port, TX by egress port, under
//! barrier-switch's names) and per group (completions, re-sends). What the program has not:
//! policers, the straggler watch (each answers `None`).

use std::sync::{Arc, Mutex, MutexGuard};

use barrier_mgmt::policer::PolicerRegister;
use barrier_mgmt::straggler::Watch;
use barrier_mgmt::{Dataplane, Groups, Names, Set, Snapshot};
use barrier_protocol::switch::{GroupConfig, GroupState, Run};
use barrier_protocol::table::GroupCounts;
use barrier_protocol::GroupId;

use crate::{XdpSwitch, COUNTERS, TX_COUNTERS};

/// The counter names of the XDP switch's snapshot: the program's counters as the RX set, one
/// row set per port (queue 0; per CPU in the program, summed) and one without a port (frames
/// on no port, the timer side's decisions); the frames sent per port as the TX set
/// ([`TX_COUNTERS`]); no scheduler set.
pub const NAMES: Names = Names {
    rx: &COUNTERS,
    tx: &TX_COUNTERS,
    scheduler: &[],
};

/// The loaded program. The map keeps of a configuration what the program reads (children,
/// parent, epoch, `fail_after`); [`XdpSwitch`] keeps the whole of each one beside it
/// ([`XdpSwitch::config`]: re-send timeout and backoff for the timer side, the role for
/// `group show`).
#[derive(Debug)]
struct Inner {
    sw: XdpSwitch,
}

/// The XDP switch's groups: `nb_groups`, through [`XdpSwitch`].
#[derive(Debug)]
pub struct XdpGroups {
    inner: Mutex<Inner>,
    capacity: u32,
}

impl XdpGroups {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic under the lock leaves the map as the kernel has it; go on with it.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the switch (attaching, counters) under the lock.
    pub fn with_switch<T>(&self, f: impl FnOnce(&XdpSwitch) -> T) -> T {
        f(&self.lock().sw)
    }
}

impl Groups for XdpGroups {
    fn capacity(&self) -> u32 {
        self.capacity
    }
    fn configure(&self, group: GroupId, cfg: GroupConfig) -> Result<(), String> {
        self.lock()
            .sw
            .configure(group, &cfg)
            .map_err(|e| e.to_string())
    }
    fn remove(&self, group: GroupId) -> Result<(), String> {
        self.lock().sw.remove(group).map_err(|e| e.to_string())
    }
    fn config(&self, group: GroupId) -> Option<GroupConfig> {
        self.lock().sw.config(group).map(|(cfg, _generation)| cfg)
    }
    fn state(&self, group: GroupId) -> Option<GroupState> {
        self.lock().sw.state(group).ok().flatten()
    }
    fn counts(&self, group: GroupId) -> Option<GroupCounts> {
        match self.lock().sw.group_counts(group) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!("group {}: counts: {e}", group.0);
                None
            }
        }
    }
    fn all_counts(&self) -> Option<Vec<GroupCounts>> {
        match self.lock().sw.all_group_counts() {
            Ok(mut c) => {
                c.truncate(self.capacity as usize);
                Some(c)
            }
            Err(e) => {
                tracing::warn!("group counts: {e}");
                None
            }
        }
    }
    fn run(&self, _group: GroupId) -> Option<Run> {
        None
    }
}

/// The XDP switch as the management plane sees it. Cheap to clone: the control socket, the
/// metrics endpoint and the daemon share one.
#[derive(Debug, Clone)]
pub struct XdpDataplane {
    name: String,
    port_names: Vec<String>,
    groups: Arc<XdpGroups>,
}

impl XdpDataplane {
    /// `sw` (loaded, its ports added) with room for groups `0..capacity`, called `name`.
    pub fn new(name: &str, port_names: Vec<String>, sw: XdpSwitch, capacity: u32) -> Self {
        XdpDataplane {
            name: name.to_string(),
            port_names,
            groups: Arc::new(XdpGroups {
                inner: Mutex::new(Inner { sw }),
                capacity,
            }),
        }
    }

    /// The groups, and through them the switch.
    pub fn groups(&self) -> &XdpGroups {
        &self.groups
    }
}

impl Dataplane for XdpDataplane {
    fn name(&self) -> &str {
        &self.name
    }
    fn port_names(&self) -> &[String] {
        &self.port_names
    }
    fn table(&self) -> &dyn Groups {
        &*self.groups
    }
    fn snapshot(&self) -> Snapshot {
        let mut snap = Snapshot::new(self.name.clone(), self.port_names.clone(), NAMES);
        let read = self
            .groups
            .with_switch(|sw| Ok::<_, crate::XdpError>((sw.port_counters()?, sw.sent()?)));
        match read {
            Ok((rx, tx)) => {
                for (port, c) in rx {
                    let port = port.map(|p| usize::from(p.get()));
                    snap.push(Set::Rx, port, port.map(|_| 0), None, c.0.to_vec());
                }
                for (port, c) in tx {
                    snap.push(
                        Set::Tx,
                        Some(usize::from(port.get())),
                        None,
                        None,
                        c.to_vec(),
                    );
                }
            }
            Err(e) => tracing::warn!("counters: {e}"),
        }
        snap
    }
    fn watch(&self) -> Option<&Arc<Watch>> {
        None
    }
    fn policer(&self, _port: usize) -> Option<&PolicerRegister> {
        None
    }
    fn rx_queues(&self, _port: usize) -> usize {
        1
    }
}
