//! The XDP switch's configuration file: barrier-switch's file (docs/configuration.md) with
//! ports that are interfaces (`iface = "veth0"`) instead of DPDK devices. The management
//! sections (`[[groups]]`, `[control]`, `[metrics]`, `[management]`) are checked by
//! `barrier_mgmt::config`, as for barrier-switch; the DPDK-only sections and keys are refused by
//! name, each refusal naming its key and line.

use barrier_bpf::XdpMode;
use barrier_ctl::group::GroupSpec;
pub use barrier_mgmt::config::ConfigError;
use barrier_mgmt::config::{
    parse_toml, ManagementSpec, RawControl, RawManagement, RawMetrics, RawStragglers, Sections,
};
use serde::Deserialize;

use crate::MAX_PORT;

/// A key barrier-switch's file has and this one refuses (a DPDK setting): present or not.
type Refused = Option<toml::Value>;

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    switch: RawSwitch,
    #[serde(default)]
    xdp: RawXdp,
    #[serde(default)]
    ports: Vec<RawPort>,
    #[serde(default)]
    groups: Vec<GroupSpec>,
    control: Option<RawControl>,
    metrics: Option<RawMetrics>,
    management: Option<RawManagement>,
    #[serde(default)]
    stragglers: RawStragglers,
    eal: Refused,
    mempool: Refused,
    lcores: Refused,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct RawSwitch {
    mac: Option<String>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct RawXdp {
    /// `native` (the default) or `generic` (SKB mode, for drivers without XDP).
    mode: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawPort {
    name: String,
    iface: Option<String>,
    peer_mac: Option<String>,
    vdev: Refused,
    pci: Refused,
    rx_queues: Refused,
    tx_queues: Refused,
    rx_descriptors: Refused,
    tx_descriptors: Refused,
    mac: Refused,
    policer_rate: Refused,
    policer_burst: Refused,
}

/// One port: its name (what groups and `barrierctl` use), its interface, and the peer's MAC
/// (shown by `barrierctl ports`; the program sends to broadcast).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpPortSpec {
    pub name: String,
    pub iface: String,
    pub peer_mac: [u8; 6],
}

/// A checked XDP switch configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpSpec {
    /// The switch's MAC: source of every frame it sends, its id in aborts.
    pub mac: [u8; 6],
    /// How the program is attached to every port.
    pub mode: XdpMode,
    /// Port `i` is `ports[i]`.
    pub ports: Vec<XdpPortSpec>,
    /// The management sections.
    pub mgmt: ManagementSpec,
}

impl XdpSpec {
    /// Group numbers the group map holds: the file's groups and `[control] capacity`.
    pub fn group_capacity(&self) -> u32 {
        let file = self
            .mgmt
            .groups
            .iter()
            .map(|g| g.numbers.end)
            .max()
            .unwrap_or(0);
        file.max(self.mgmt.control.as_ref().map_or(0, |c| c.capacity))
            .max(1)
    }

    /// Groups the file configures.
    pub fn group_count(&self) -> u64 {
        self.mgmt.groups.iter().map(|g| g.count()).sum()
    }

    /// The ports as the control socket shows them.
    pub fn port_descs(&self) -> Vec<barrier_mgmt::PortDesc> {
        self.ports
            .iter()
            .map(|p| barrier_mgmt::PortDesc {
                name: p.name.clone(),
                device: format!("iface:{}", p.iface),
                peer_mac: p.peer_mac,
            })
            .collect()
    }
}

/// Parses and checks a file's text; interfaces are not looked up (`load` does).
pub fn parse(text: &str) -> Result<XdpSpec, ConfigError> {
    let raw: RawConfig = parse_toml(text)?;
    validate(raw).map_err(|e| e.at_line_of_key(text))
}

/// Reads, parses and checks the file at `path`, and finds every port's interface in this
/// network namespace. The error does not repeat the path.
pub fn load(path: &std::path::Path) -> Result<XdpSpec, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new("", format!("cannot read the file: {e}")))?;
    let mut spec = parse(&text)?;
    if let Some(c) = &mut spec.mgmt.control {
        c.file = Some(path.to_path_buf());
    }
    ifindexes(&spec).map_err(|e| e.at_line_of_key(&text))?;
    Ok(spec)
}

/// Each port's interface index in the calling thread's network namespace.
pub fn ifindexes(spec: &XdpSpec) -> Result<Vec<u32>, ConfigError> {
    spec.ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            barrier_bpf::ifindex(&p.iface).map_err(|_| {
                ConfigError::new(
                    format!("ports[{i}].iface"),
                    format!("no interface {:?} in this network namespace", p.iface),
                )
            })
        })
        .collect()
}

/// The write-back of file `path` by the control socket: what it writes must pass `parse`.
pub fn write_back(path: std::path::PathBuf) -> barrier_mgmt::WriteBack {
    barrier_mgmt::WriteBack {
        path,
        check: |text| parse(text).map(drop).map_err(|e| e.to_string()),
    }
}

fn parse_mac(key: &str, s: &str) -> Result<[u8; 6], ConfigError> {
    s.parse::<barrier_protocol::wire::MacAddr>()
        .map(|m| m.0)
        .map_err(|e| ConfigError::new(key, e.to_string()))
}

fn validate(raw: RawConfig) -> Result<XdpSpec, ConfigError> {
    for (key, v) in [
        ("eal", &raw.eal),
        ("mempool", &raw.mempool),
        ("lcores", &raw.lcores),
    ] {
        if v.is_some() {
            return Err(ConfigError::new(
                key,
                "a DPDK switch's section: the XDP switch runs in the kernel's receive path, with no EAL, mempool or lcores (remove it)",
            ));
        }
    }
    let mac = match &raw.switch.mac {
        Some(m) => parse_mac("switch.mac", m)?,
        None => [0x02, 0, 0, 0, 0, 0x01],
    };
    let mode = match raw.xdp.mode.as_deref() {
        None | Some("native") => XdpMode::Native,
        Some("generic") => XdpMode::Generic,
        Some(other) => {
            return Err(ConfigError::new(
                "xdp.mode",
                format!("{other:?}: native (the driver's XDP, the default) or generic (SKB mode)"),
            ))
        }
    };
    let ports = validate_ports(&raw.ports)?;
    if !raw.stragglers.groups.is_empty() || raw.stragglers.limit.is_some_and(|l| l > 0) {
        return Err(ConfigError::new(
            "stragglers",
            "the XDP switch has no straggler watch (its RX path is the program's): remove the section",
        ));
    }
    let names: Vec<&str> = ports.iter().map(|p| p.name.as_str()).collect();
    let mgmt = barrier_mgmt::config::validate(
        Sections {
            groups: &raw.groups,
            control: raw.control.as_ref(),
            metrics: raw.metrics.as_ref(),
            stragglers: &raw.stragglers,
            management: raw.management.as_ref(),
        },
        &names,
    )?;
    Ok(XdpSpec {
        mac,
        mode,
        ports,
        mgmt,
    })
}

fn validate_ports(raw: &[RawPort]) -> Result<Vec<XdpPortSpec>, ConfigError> {
    if raw.is_empty() {
        return Err(ConfigError::new("ports", "no ports configured"));
    }
    let mut ports: Vec<XdpPortSpec> = Vec::with_capacity(raw.len());
    for (i, p) in raw.iter().enumerate() {
        let key = format!("ports[{i}]");
        if i >= usize::from(MAX_PORT) {
            return Err(ConfigError::new(
                &key,
                format!(
                    "port index {i}: the XDP program holds ports 0..{} (at most {MAX_PORT} ports)",
                    MAX_PORT - 1
                ),
            ));
        }
        if p.vdev.is_some() || p.pci.is_some() {
            let field = if p.vdev.is_some() { "vdev" } else { "pci" };
            return Err(ConfigError::new(
                format!("{key}.{field}"),
                "a DPDK device: the XDP switch's ports are interfaces (iface = \"veth0\")",
            ));
        }
        for (field, v) in [
            ("rx_queues", &p.rx_queues),
            ("tx_queues", &p.tx_queues),
            ("rx_descriptors", &p.rx_descriptors),
            ("tx_descriptors", &p.tx_descriptors),
            ("mac", &p.mac),
        ] {
            if v.is_some() {
                return Err(ConfigError::new(
                    format!("{key}.{field}"),
                    "a DPDK port's setting: the XDP switch uses the interface as the kernel has it (remove it)",
                ));
            }
        }
        for (field, v) in [
            ("policer_rate", &p.policer_rate),
            ("policer_burst", &p.policer_burst),
        ] {
            if v.is_some() {
                return Err(ConfigError::new(
                    format!("{key}.{field}"),
                    "the XDP switch has no policer (remove it)",
                ));
            }
        }
        if p.name.is_empty() {
            return Err(ConfigError::new(format!("{key}.name"), "empty port name"));
        }
        if let Some(j) = ports.iter().position(|q| q.name == p.name) {
            return Err(ConfigError::new(
                format!("{key}.name"),
                format!("port {:?} already defined by ports[{j}]", p.name),
            ));
        }
        let iface = match &p.iface {
            Some(s) if !s.is_empty() => s.clone(),
            _ => {
                return Err(ConfigError::new(
                    &key,
                    "give iface, the interface the program attaches to (e.g. \"veth0\")",
                ))
            }
        };
        if let Some(j) = ports.iter().position(|q| q.iface == iface) {
            return Err(ConfigError::new(
                format!("{key}.iface"),
                format!("interface {iface:?} is already ports[{j}]"),
            ));
        }
        let peer_mac = match &p.peer_mac {
            Some(m) => parse_mac(&format!("{key}.peer_mac"), m)?,
            None => [0xff; 6],
        };
        ports.push(XdpPortSpec {
            name: p.name.clone(),
            iface,
            peer_mac,
        });
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[switch]
mac = "02:00:00:00:00:0a"

[[ports]]
name = "leaf0"
iface = "veth-a0"

[[ports]]
name = "leaf1"
iface = "veth-a1"

[[groups]]
numbers = "0..4"
role = "root"
children = ["leaf0", "leaf1"]

[control]
socket = "/run/netbarrier/x.sock"
capacity = 16
"#;

    fn refused(text: &str) -> ConfigError {
        parse(text).expect_err("refused")
    }

    #[test]
    fn a_good_file_is_read() {
        let s = parse(GOOD).expect("good");
        assert_eq!(s.mac, [2, 0, 0, 0, 0, 0x0a]);
        assert_eq!(s.mode, XdpMode::Native);
        assert_eq!(s.ports[1].iface, "veth-a1");
        assert_eq!((s.group_count(), s.group_capacity()), (4, 16));
        let g = parse(&format!("{GOOD}\n[xdp]\nmode = \"generic\"\n")).expect("generic");
        assert_eq!(g.mode, XdpMode::Generic);
    }

    #[test]
    fn a_vdev_is_refused_at_its_line() {
        let text = GOOD.replace("iface = \"veth-a1\"", "vdev = \"net_ring0\"");
        let e = refused(&text);
        assert_eq!((e.key.as_str(), e.line), ("ports[1].vdev", Some(11)), "{e}");
        assert!(e.reason.contains("iface"), "{e}");
    }

    #[test]
    fn dpdk_sections_and_keys_are_refused_by_name() {
        let e = refused(&format!("{GOOD}\n[lcores]\nscheduler = 0\n"));
        assert_eq!(e.key, "lcores", "{e}");
        assert!(e.line.is_some(), "{e}");
        let e = refused(&GOOD.replace(
            "iface = \"veth-a0\"",
            "iface = \"veth-a0\"\npolicer_rate = 1000",
        ));
        assert_eq!(e.key, "ports[0].policer_rate", "{e}");
        let e = refused(&format!("{GOOD}\n[stragglers]\ngroups = [1]\n"));
        assert_eq!(e.key, "stragglers", "{e}");
        let e = refused(&format!("{GOOD}\n[xdp]\nmode = \"offload\"\n"));
        assert_eq!(e.key, "xdp.mode", "{e}");
    }

    #[test]
    fn a_port_the_program_cannot_hold_is_refused() {
        let mut text = String::new();
        for i in 0..63 {
            text += &format!("[[ports]]\nname = \"p{i}\"\niface = \"v{i}\"\n");
        }
        let e = refused(&text);
        assert_eq!((e.key.as_str(), e.line), ("ports[62]", Some(187)), "{e}");
        assert!(e.reason.contains("0..61"), "{e}");
        // 62 ports fit.
        let fits: String = text.lines().take(62 * 3).collect::<Vec<_>>().join("\n");
        assert_eq!(parse(&fits).expect("62 ports").ports.len(), 62);
    }

    #[test]
    fn a_missing_interface_is_refused_with_its_key() {
        let text = GOOD
            .replace("veth-a0", "lo")
            .replace("veth-a1", "nb-no-such-if");
        let s = parse(&text).expect("parses");
        let e = ifindexes(&s).expect_err("no such interface");
        assert_eq!(e.key, "ports[1].iface", "{e}");
        assert!(e.reason.contains("nb-no-such-if"), "{e}");
    }

    #[test]
    fn groups_are_checked_by_the_management_plane() {
        let e = refused(&GOOD.replace("\"leaf0\", \"leaf1\"", "\"leaf0\", \"leaf9\""));
        assert!(e.key.starts_with("groups[0]"), "{e}");
        assert!(e.line.is_some(), "{e}");
    }

    #[test]
    fn the_examples_in_configuration_md_are_valid() {
        let page =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
        let text = std::fs::read_to_string(page).expect("docs/configuration.md");
        let mut blocks = Vec::new();
        let mut cur: Option<String> = None;
        for line in text.lines() {
            match (&mut cur, line.trim_end()) {
                (None, "```toml xdp") => cur = Some(String::new()),
                (Some(_), "```") => blocks.extend(cur.take()),
                (Some(s), l) => {
                    s.push_str(l);
                    s.push('\n');
                }
                _ => {}
            }
        }
        assert!(!blocks.is_empty(), "no `toml xdp` example");
        for b in &blocks {
            parse(b).unwrap_or_else(|e| panic!("{e}:\n{b}"));
        }
    }
}
