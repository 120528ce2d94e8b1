//! What a switch is, in typed values: ports, lcores and groups, the groups already as the
//! protocol's per-group registers (`GroupConfig`). `config` turns a TOML file into a
//! `SwitchSpec`; the engine, the demo tree and the generator's in-process switch build from
//! these types and know nothing of TOML.

use crate::poll::Idle;
pub use barrier_mgmt::config::{ControlSpec, GroupBlock, MetricsSpec};
use barrier_protocol::PortIdx;

/// A validated switch. Port indices are positions in `ports`: the switch-local port numbers the
/// group registers use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchSpec {
    /// EAL arguments from the file; the runtime adds `-a` for each PCI port.
    pub eal_args: Vec<String>,
    pub mempool: MempoolSpec,
    /// Source MAC of every frame the switch sends (one identity for the whole switch).
    pub mac: [u8; 6],
    pub ports: Vec<PortSpec>,
    pub lcores: LcoreSpec,
    pub groups: Vec<GroupBlock>,
    /// The control socket (`[control]`), when the file names one.
    pub control: Option<ControlSpec>,
    /// The Prometheus endpoint, if the file has a `[metrics]` section.
    pub metrics: Option<MetricsSpec>,
    /// Groups with straggler reports from the start (`[stragglers] groups`).
    pub stragglers: Vec<u32>,
    /// How many groups may be watched at once, those above included (`[stragglers] limit`; 0:
    /// none, and no watch at all on the RX path).
    pub straggler_limit: usize,
    /// The CPUs of the threads that are not lcores (`[management] cpus`); `None`: the CPUs no
    /// polling lcore uses (`barrier_runtime::affinity::ControlCores`).
    pub management_cpus: Option<barrier_runtime::affinity::CpuList>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MempoolSpec {
    pub mbufs: u32,
    pub cache: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Device {
    /// A DPDK virtual device argument, e.g. `net_ring0` or `net_pcap0,rx_pcap=in.pcap`.
    Vdev(String),
    /// A PCI address, e.g. `0000:01:00.0`.
    Pci(String),
    /// A Linux interface shared with the kernel through an AF_XDP socket: DPDK's `net_af_xdp`
    /// PMD as `name` (`net_af_xdp<port index>`), with the steering program that sends barrier
    /// frames to the switch and every other frame to the kernel (docs/operations.md, "Sharing
    /// a link with ordinary traffic").
    AfXdp {
        /// The interface.
        iface: String,
        /// The DPDK device name.
        name: String,
    },
}

impl Device {
    /// The name DPDK gives the port (what `rte_eth_dev_get_port_by_name` takes).
    pub fn dpdk_name(&self) -> &str {
        match self {
            Device::Vdev(s) => s.split(',').next().unwrap_or(s),
            Device::Pci(s) => s,
            Device::AfXdp { name, .. } => name,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    pub name: String,
    pub device: Device,
    pub rx_queues: u16,
    pub tx_queues: u16,
    pub rx_descriptors: u16,
    pub tx_descriptors: u16,
    /// Destination MAC of frames sent on this port (broadcast unless given).
    pub peer_mac: [u8; 6],
    /// Source MAC of frames sent on this port (`switch.mac` unless given).
    pub mac: [u8; 6],
    /// Barrier frames received on this port are policed to this rate (`crate::policer`).
    pub policer: Option<crate::policer::PolicerSpec>,
    /// Where the port's frames that are not barrier frames go (`crate::exception`); `None`:
    /// they are dropped, counted `drop_not_barrier`.
    pub exception: Option<Exception>,
}

/// A port's exception path: a kernel interface that gets the port's ordinary frames and whose
/// frames go out of the port, so the kernel bridges or routes as if it owned the NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exception {
    /// DPDK's TAP PMD: a TAP interface called `iface`, created by the switch in its network
    /// namespace, as DPDK device `name` (`net_tap_exc<port index>`).
    Tap { iface: String, name: String },
}

impl Exception {
    /// The kernel interface.
    pub fn iface(&self) -> &str {
        match self {
            Exception::Tap { iface, .. } => iface,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LcoreSpec {
    pub scheduler: u32,
    /// Reduced mode: RX polling and the scheduler run on one lcore.
    pub shared: bool,
    pub rx: Vec<RxLcore>,
    /// What every loop does on a pass with no work (default: spin).
    pub idle: Idle,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxLcore {
    pub lcore: u32,
    /// (port, RX queue) pairs this lcore polls.
    pub polls: Vec<(PortIdx, u16)>,
}

impl SwitchSpec {
    /// Index of the port called `name`.
    pub fn port_index(&self, name: &str) -> Option<PortIdx> {
        self.ports
            .iter()
            .position(|p| p.name == name)
            .and_then(|i| PortIdx::new(i as u8))
    }

    /// Number of group numbers configured (ranges expanded).
    pub fn group_count(&self) -> u64 {
        self.groups.iter().map(GroupBlock::count).sum()
    }

    /// The group table's capacity: one past the highest configured group number, or
    /// `control.capacity` when that is larger (groups created at run time).
    pub fn group_capacity(&self) -> u32 {
        let file = self.groups.iter().map(|g| g.numbers.end).max().unwrap_or(0);
        file.max(self.control.as_ref().map_or(0, |c| c.capacity))
    }

    /// The ports as the control socket shows them (`barrier_mgmt::PortDesc`).
    pub fn port_descs(&self) -> Vec<barrier_mgmt::PortDesc> {
        self.ports
            .iter()
            .map(|p| barrier_mgmt::PortDesc {
                name: p.name.clone(),
                device: match &p.device {
                    Device::Vdev(v) => format!("vdev:{v}"),
                    Device::Pci(a) => format!("pci:{a}"),
                    Device::AfXdp { iface, .. } => format!("af_xdp:{iface}"),
                },
                peer_mac: p.peer_mac,
            })
            .collect()
    }
}
