//! barrier-mgmt: the management plane of a barrier dataplane, which does not know which
//! dataplane it manages. It reaches the dataplane through one trait, [`Dataplane`]: the group
//! table (configure, remove, read), the counters as one [`Snapshot`], the straggler watch, each
//! port's policer register. The DPDK pipeline (`barrier_switch::engine::SwitchStats`) is one
//! implementation; the daemon that runs it is `barrier-switch` (`dataplane/switchd`). The XDP
//! program's maps (`barrier_xdp::XdpDataplane`, daemon `barrier-xdp`) are another.
//!
//! | module | role |
//! | --- | --- |
//! | `config` | the file's management sections (`[[groups]]`, `[control]`, `[metrics]`, `[stragglers]`, `[management]`), checked, every refusal naming its key and line |
//! | `dataplane` | [`Dataplane`]: what the management plane reads and changes; [`Groups`]: the group store behind it |
//! | `snapshot` | [`Snapshot`]: every counter read once, the one input of every exporter; the text report |
//! | `control` | [`Control`]: control socket requests against the dataplane, admission, write-back |
//! | `server` | [`ControlServer`]: the socket, peer credentials, lines, `poll(2)` |
//! | `telemetry` | DPDK telemetry commands (`/barrier/...`, feature `dpdk`), the `--stats-json` dump |
//! | `metrics` | Prometheus text exposition on a plain thread (`[metrics]`) |
//! | `straggler` | straggler reports of watched groups: last child, spread, latency histogram, waiting since |
//! | `policer` | a port's policer settings and the register management writes |
//! | `notify` | systemd readiness (`sd_notify`) |
#![forbid(unsafe_code)]

pub mod config;
pub mod control;
pub mod dataplane;
pub mod metrics;
pub mod notify;
pub mod policer;
pub mod server;
pub mod snapshot;
pub mod straggler;
pub mod telemetry;

pub use control::{Control, PortDesc, WriteBack, DEFAULT_EPOCH};
pub use dataplane::{Dataplane, Groups};
pub use server::{BindError, ControlServer, MAX_CLIENTS};
pub use snapshot::{Names, Row, Set, Snapshot};
