//! The switch's configuration: a TOML file parsed into raw serde types, then checked, section by
//! section, into a typed `SwitchSpec` (`spec.rs`) before DPDK starts. Every refusal names the key (`groups[3].children[2]`) and says
//! why, so an operator can fix the file without reading the code. Reference: docs/configuration.md.

use crate::policer::PolicerSpec;
use crate::poll::{Idle, IdleMode};
use crate::spec::{Device, Exception, LcoreSpec, MempoolSpec, PortSpec, RxLcore, SwitchSpec};
use barrier_ctl::group::GroupSpec;
use barrier_mgmt::config::{
    parse_toml, ManagementSpec, RawControl, RawManagement, RawMetrics, RawStragglers, Sections,
};
pub use barrier_mgmt::config::{ConfigError, MAX_GROUPS, MAX_SOCKET_PATH};
use barrier_protocol::PortIdx;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};

/// Ports per switch and fan-in per group: a child set is one 64-bit mask.
pub const MAX_PORTS: usize = 64;

/// Queues an AF_XDP port may have: the size of its steering program's socket map
/// (`barrier_xdp::steer::MAX_QUEUES`).
pub const MAX_AF_XDP_QUEUES: u16 = 64;

/// The re-send timeout an intermediate group gets when the file does not say
/// (`barrier_ctl::group`, shared with the control socket).
pub use barrier_ctl::group::DEFAULT_RESEND_TIMEOUT_US;
/// Longest idle sleep accepted: a loop asleep cannot answer, so a sleep must stay well below
/// the re-send timeouts (1 ms by default) or every quiet moment costs a re-send.
pub const MAX_IDLE_SLEEP_US: u32 = 500;

// ---------------------------------------------------------------------------------------------
// Raw file shape (serde). `deny_unknown_fields` everywhere: a typo is an error, not a default.

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    eal: RawEal,
    #[serde(default)]
    mempool: RawMempool,
    #[serde(default)]
    switch: RawSwitch,
    #[serde(default)]
    ports: Vec<RawPort>,
    lcores: Option<RawLcores>,
    /// One `barrier_ctl::group::GroupSpec` per entry: the type the control socket and the
    /// write-back use too.
    #[serde(default)]
    groups: Vec<GroupSpec>,
    control: Option<RawControl>,
    /// Prometheus endpoint (`barrier_mgmt::metrics`): off unless the section is present.
    metrics: Option<RawMetrics>,
    /// Where the management threads run (`barrier_mgmt::config::RawManagement`).
    management: Option<RawManagement>,
    /// Straggler reports (`barrier_mgmt::straggler`) for the groups listed.
    #[serde(default)]
    stragglers: RawStragglers,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct RawEal {
    #[serde(default)]
    args: Vec<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawMempool {
    #[serde(default = "default_mbufs")]
    mbufs: u32,
    #[serde(default = "default_cache")]
    cache: u32,
}

fn default_mbufs() -> u32 {
    8191
}
fn default_cache() -> u32 {
    256
}

impl Default for RawMempool {
    fn default() -> Self {
        RawMempool {
            mbufs: default_mbufs(),
            cache: default_cache(),
        }
    }
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct RawSwitch {
    mac: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawPort {
    name: String,
    vdev: Option<String>,
    pci: Option<String>,
    /// A Linux interface shared with the kernel through AF_XDP ([`Device::AfXdp`]).
    af_xdp: Option<String>,
    #[serde(default = "one")]
    rx_queues: u16,
    #[serde(default = "one")]
    tx_queues: u16,
    #[serde(default = "default_desc")]
    rx_descriptors: u16,
    #[serde(default = "default_desc")]
    tx_descriptors: u16,
    peer_mac: Option<String>,
    mac: Option<String>,
    /// Barrier frames per second this port takes (`crate::policer`); absent: no policer.
    policer_rate: Option<i64>,
    /// The policer's burst in frames (needs `policer_rate`).
    policer_burst: Option<i64>,
    /// The port's exception path for frames that are not barrier frames (`"tap"`).
    exception: Option<String>,
    /// The exception path's kernel interface (default: `nb-` and the port's name).
    exception_iface: Option<String>,
}

fn one() -> u16 {
    1
}
fn default_desc() -> u16 {
    1024
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawLcores {
    scheduler: u32,
    #[serde(default)]
    shared: bool,
    #[serde(default)]
    rx: Vec<RawRx>,
    idle: Option<String>,
    idle_after_polls: Option<u32>,
    idle_sleep_us: Option<u32>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawRx {
    lcore: u32,
    poll: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// The checked configuration.

/// Parse and validate a configuration file's text. Errors name the key and, where the file has
/// it, the line.
pub fn parse(text: &str) -> Result<SwitchSpec, ConfigError> {
    let raw: RawConfig = parse_toml(text)?;
    validate(raw).map_err(|e| e.at_line_of_key(text))
}

/// The write-back of file `path` by the control socket: what it writes must pass `parse`.
pub fn write_back(path: std::path::PathBuf) -> barrier_mgmt::WriteBack {
    barrier_mgmt::WriteBack {
        path,
        check: |text| parse(text).map(drop).map_err(|e| e.to_string()),
    }
}

/// Read, parse and validate a file. The error does not repeat the path: the caller has it.
pub fn load(path: &std::path::Path) -> Result<SwitchSpec, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new("", format!("cannot read the file: {e}")))?;
    let mut spec = parse(&text)?;
    if let Some(c) = &mut spec.control {
        c.file = Some(path.to_path_buf());
    }
    Ok(spec)
}

fn parse_mac(key: &str, s: &str) -> Result<[u8; 6], ConfigError> {
    s.parse::<barrier_protocol::wire::MacAddr>()
        .map(|m| m.0)
        .map_err(|e| ConfigError::new(key, e.to_string()))
}

/// `"0..1000"` (end excluded) or `"0..=999"`.
/// The lcores an EAL `-l`/`--lcores` list names, when the file gives one in a form we read
/// (`-l 0,1`, `-l 0-3`, `-l0-1`). None when not given or not understood (then DPDK checks).
fn eal_lcore_list(args: &[String]) -> Option<LcoreList> {
    let mut list = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-l" {
            list = it.next().cloned();
        } else if let Some(rest) = a.strip_prefix("-l") {
            if !rest.is_empty() && !rest.starts_with('-') {
                list = Some(rest.to_string());
            }
        }
    }
    let text = list?;
    let mut ranges = Vec::new();
    for part in text.split(',') {
        // Kept as ranges, never expanded: `-l 0-4000000000` is a list to refuse (DPDK will),
        // not four billion numbers to hold; checking a file costs its length, not its ranges.
        if let Some((a, b)) = part.split_once('-') {
            let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
            ranges.push(a..=b);
        } else {
            let l: u32 = part.parse().ok()?;
            ranges.push(l..=l);
        }
    }
    Some(LcoreList { text, ranges })
}

/// An EAL lcore list as the file wrote it, and the ranges it names.
struct LcoreList {
    text: String,
    ranges: Vec<std::ops::RangeInclusive<u32>>,
}

impl LcoreList {
    fn contains(&self, l: u32) -> bool {
        self.ranges.iter().any(|r| r.contains(&l))
    }
}

/// The idle policy from its three settings (the file's `lcores.idle*` keys or the command
/// line's `--idle*` options; `key` names the first, `after_key` and `sleep_key` the others):
/// `spin`, `yield` or `sleep`; `after` empty passes before backing off; `sleep_us` per sleep.
pub fn idle_policy(
    mode: IdleMode,
    after: Option<u32>,
    sleep_us: Option<u32>,
    [after_key, sleep_key]: [&str; 2],
) -> Result<Idle, ConfigError> {
    let after_v = after.unwrap_or(Idle::DEFAULT_AFTER);
    match mode {
        IdleMode::Spin => {
            if after.is_some() {
                return Err(ConfigError::new(
                    after_key,
                    "only with yield or sleep: spin never backs off",
                ));
            }
            if sleep_us.is_some() {
                return Err(ConfigError::new(sleep_key, "only with sleep"));
            }
            Ok(Idle::Spin)
        }
        IdleMode::Yield => {
            if sleep_us.is_some() {
                return Err(ConfigError::new(sleep_key, "only with sleep"));
            }
            Ok(Idle::Yield { after: after_v })
        }
        IdleMode::Sleep => {
            let us = sleep_us.unwrap_or((Idle::DEFAULT_SLEEP_NS / 1000) as u32);
            if us == 0 || us > MAX_IDLE_SLEEP_US {
                return Err(ConfigError::new(
                    sleep_key,
                    format!("{us} µs: 1..={MAX_IDLE_SLEEP_US} (a sleeping loop answers nothing; keep it well below the re-send timeouts)"),
                ));
            }
            Ok(Idle::Sleep {
                after: after_v,
                ns: u64::from(us) * 1000,
            })
        }
    }
}

/// Port names to switch-local port indices, for the sections that name ports.
type PortNames<'a> = HashMap<&'a str, PortIdx>;

fn lookup(names: &PortNames<'_>, key: String, name: &str) -> Result<PortIdx, ConfigError> {
    names.get(name).copied().ok_or_else(|| {
        let mut known: Vec<&str> = names.keys().copied().collect();
        known.sort_unstable();
        ConfigError::new(
            key,
            format!("unknown port {name:?} (the switch's ports: {known:?})"),
        )
    })
}

fn validate(raw: RawConfig) -> Result<SwitchSpec, ConfigError> {
    let mempool = validate_mempool(&raw.mempool)?;
    let mac = match &raw.switch.mac {
        Some(m) => parse_mac("switch.mac", m)?,
        None => [0x02, 0, 0, 0, 0, 0x01],
    };
    let (ports, names) = validate_ports(&raw.ports, mac)?;
    let Some(rl) = &raw.lcores else {
        return Err(ConfigError::new(
            "lcores",
            "missing: say which lcore is the scheduler and which lcores poll which ports",
        ));
    };
    let lcores = validate_lcores(rl, &raw.eal.args, &ports, &names)?;
    let port_names: Vec<&str> = ports.iter().map(|p| p.name.as_str()).collect();
    let ManagementSpec {
        groups,
        control,
        metrics,
        stragglers,
        straggler_limit,
        cpus,
    } = barrier_mgmt::config::validate(
        Sections {
            groups: &raw.groups,
            control: raw.control.as_ref(),
            metrics: raw.metrics.as_ref(),
            stragglers: &raw.stragglers,
            management: raw.management.as_ref(),
        },
        &port_names,
    )?;
    Ok(SwitchSpec {
        eal_args: raw.eal.args,
        mempool,
        mac,
        ports,
        lcores,
        groups,
        control,
        metrics,
        stragglers,
        straggler_limit,
        management_cpus: cpus,
    })
}

fn validate_mempool(m: &RawMempool) -> Result<MempoolSpec, ConfigError> {
    if m.mbufs < 64 {
        return Err(ConfigError::new(
            "mempool.mbufs",
            format!("{} mbufs is too few (at least 64)", m.mbufs),
        ));
    }
    if m.cache > 512 || m.cache > m.mbufs / 2 {
        return Err(ConfigError::new(
            "mempool.cache",
            format!(
                "cache {} too large (at most 512 and at most half of mempool.mbufs)",
                m.cache
            ),
        ));
    }
    Ok(MempoolSpec {
        mbufs: m.mbufs,
        cache: m.cache,
    })
}

fn validate_ports(
    raw: &[RawPort],
    mac: [u8; 6],
) -> Result<(Vec<PortSpec>, PortNames<'_>), ConfigError> {
    if raw.is_empty() {
        return Err(ConfigError::new("ports", "no ports configured"));
    }
    if raw.len() > MAX_PORTS {
        return Err(ConfigError::new(
            "ports",
            format!("{} ports, a switch has at most {MAX_PORTS}", raw.len()),
        ));
    }
    let mut ports = Vec::with_capacity(raw.len());
    let mut names: PortNames<'_> = HashMap::new();
    for (i, p) in raw.iter().enumerate() {
        let key = format!("ports[{i}]");
        if p.name.is_empty() {
            return Err(ConfigError::new(format!("{key}.name"), "empty port name"));
        }
        let idx = PortIdx::new(i as u8).expect("at most MAX_PORTS ports");
        if let Some(prev) = names.insert(p.name.as_str(), idx) {
            return Err(ConfigError::new(
                format!("{key}.name"),
                format!("port {:?} already defined by ports[{}]", p.name, prev.get()),
            ));
        }
        let device = match (&p.vdev, &p.pci, &p.af_xdp) {
            (Some(v), None, None) if !v.is_empty() => Device::Vdev(v.clone()),
            (None, Some(a), None) if !a.is_empty() => Device::Pci(a.clone()),
            (None, None, Some(iface)) => {
                if iface.is_empty() || iface.len() > 15 || iface.contains(['/', ',', ' ']) {
                    return Err(ConfigError::new(
                        format!("{key}.af_xdp"),
                        format!(
                            "{iface:?} is not an interface name (1-15 bytes, no '/', ',' or space)"
                        ),
                    ));
                }
                if p.rx_queues > MAX_AF_XDP_QUEUES {
                    return Err(ConfigError::new(
                        format!("{key}.rx_queues"),
                        format!(
                            "{} queues: an AF_XDP port's steering program serves at most {MAX_AF_XDP_QUEUES}",
                            p.rx_queues
                        ),
                    ));
                }
                Device::AfXdp {
                    iface: iface.clone(),
                    name: format!("net_af_xdp{i}"),
                }
            }
            (None, None, None) => {
                return Err(ConfigError::new(
                    &key,
                    "give vdev (e.g. \"net_ring0\"), pci (e.g. \"0000:01:00.0\") or af_xdp \
                     (an interface, e.g. \"eth1\")",
                ))
            }
            (Some(v), None, None) | (None, Some(v), None) if v.is_empty() => {
                return Err(ConfigError::new(
                    &key,
                    "give vdev (e.g. \"net_ring0\"), pci (e.g. \"0000:01:00.0\") or af_xdp \
                     (an interface, e.g. \"eth1\")",
                ))
            }
            _ => {
                return Err(ConfigError::new(
                    &key,
                    "give one of vdev, pci and af_xdp, not several",
                ))
            }
        };
        if p.rx_queues == 0 {
            return Err(ConfigError::new(
                format!("{key}.rx_queues"),
                "a port needs at least one RX queue",
            ));
        }
        if p.tx_queues == 0 {
            return Err(ConfigError::new(
                format!("{key}.tx_queues"),
                "a port needs at least one TX queue",
            ));
        }
        for (field, d) in [
            ("rx_descriptors", p.rx_descriptors),
            ("tx_descriptors", p.tx_descriptors),
        ] {
            if d < 32 || !d.is_power_of_two() {
                return Err(ConfigError::new(
                    format!("{key}.{field}"),
                    format!("{d} must be a power of two, at least 32"),
                ));
            }
        }
        let policer = validate_policer(&key, p)?;
        let exception = validate_exception(&key, i, p, &device)?;
        let peer_mac = match &p.peer_mac {
            Some(m) => parse_mac(&format!("{key}.peer_mac"), m)?,
            None => [0xff; 6],
        };
        ports.push(PortSpec {
            name: p.name.clone(),
            device,
            rx_queues: p.rx_queues,
            tx_queues: p.tx_queues,
            rx_descriptors: p.rx_descriptors,
            tx_descriptors: p.tx_descriptors,
            peer_mac,
            mac: match &p.mac {
                Some(m) => parse_mac(&format!("{key}.mac"), m)?,
                None => mac,
            },
            policer,
            exception,
        });
    }
    // Two exception paths on one kernel interface would both create it.
    let mut ifaces: HashMap<&str, usize> = HashMap::new();
    for (i, p) in ports.iter().enumerate() {
        if let Some(e) = &p.exception {
            if let Some(prev) = ifaces.insert(e.iface(), i) {
                return Err(ConfigError::new(
                    format!("ports[{i}].exception_iface"),
                    format!(
                        "interface {:?} already the exception path of ports[{prev}]",
                        e.iface()
                    ),
                ));
            }
        }
    }
    // Two ports on one device would fight over its queues.
    let mut devs: HashMap<&str, usize> = HashMap::new();
    for (i, p) in ports.iter().enumerate() {
        if let Some(prev) = devs.insert(p.device.dpdk_name(), i) {
            return Err(ConfigError::new(
                format!("ports[{i}]"),
                format!(
                    "device {:?} already used by ports[{prev}]",
                    p.device.dpdk_name()
                ),
            ));
        }
    }
    Ok((ports, names))
}

/// `ports[i].exception` and `exception_iface`: `"tap"` (the only kind this machine's kernel
/// can serve without vhost-net, docs/operations.md), on a port the switch owns.
fn validate_exception(
    key: &str,
    i: usize,
    p: &RawPort,
    device: &Device,
) -> Result<Option<Exception>, ConfigError> {
    let kind = match (&p.exception, &p.exception_iface) {
        (None, None) => return Ok(None),
        (None, Some(_)) => {
            return Err(ConfigError::new(
                format!("{key}.exception_iface"),
                "an interface for an exception path needs exception = \"tap\" too",
            ))
        }
        (Some(kind), _) => kind,
    };
    if kind != "tap" {
        return Err(ConfigError::new(
            format!("{key}.exception"),
            format!("{kind:?} is not an exception path: give \"tap\" (a TAP interface)"),
        ));
    }
    if let Device::AfXdp { .. } = device {
        return Err(ConfigError::new(
            format!("{key}.exception"),
            "an AF_XDP port already leaves every frame that is not a barrier frame to the \
             kernel on its own interface: no exception path",
        ));
    }
    let iface = match &p.exception_iface {
        Some(iface) => iface.clone(),
        None => format!("nb-{}", p.name),
    };
    if iface.is_empty() || iface.len() > 15 || iface.contains(['/', ',', ' ', '=']) {
        let field = if p.exception_iface.is_some() {
            "exception_iface"
        } else {
            "name"
        };
        return Err(ConfigError::new(
            format!("{key}.{field}"),
            format!(
                "{iface:?} is not an interface name (1-15 bytes, no '/', ',', '=' or space){}",
                if p.exception_iface.is_none() {
                    ": give exception_iface"
                } else {
                    ""
                }
            ),
        ));
    }
    Ok(Some(Exception::Tap {
        iface,
        name: format!("net_tap_exc{i}"),
    }))
}

/// `ports[i].policer_rate` and `policer_burst`: a rate in frames/s, a burst in frames.
fn validate_policer(key: &str, p: &RawPort) -> Result<Option<PolicerSpec>, ConfigError> {
    let rate = match (p.policer_rate, p.policer_burst) {
        (None, None) => return Ok(None),
        (None, Some(_)) => {
            return Err(ConfigError::new(
                format!("{key}.policer_burst"),
                "a burst needs a rate: give policer_rate (frames/s) too",
            ))
        }
        (Some(r), _) => r,
    };
    let queues = i64::from(p.rx_queues.max(1));
    if rate < queues || rate > PolicerSpec::MAX_RATE as i64 {
        return Err(ConfigError::new(
            format!("{key}.policer_rate"),
            format!(
                "{rate} frames/s: the rate must be {queues} (one per RX queue) to {} frames/s",
                PolicerSpec::MAX_RATE
            ),
        ));
    }
    let rate = rate as u64;
    let burst = match p.policer_burst {
        None => PolicerSpec::default_burst(rate),
        Some(b) if b >= queues && b <= PolicerSpec::MAX_BURST as i64 => b as u64,
        Some(b) => {
            return Err(ConfigError::new(
                format!("{key}.policer_burst"),
                format!(
                    "{b} frames: the burst must be {queues} (one per RX queue) to {} frames",
                    PolicerSpec::MAX_BURST
                ),
            ))
        }
    };
    Ok(Some(PolicerSpec { rate, burst }))
}

fn validate_lcores(
    rl: &RawLcores,
    eal_args: &[String],
    ports: &[PortSpec],
    names: &PortNames<'_>,
) -> Result<LcoreSpec, ConfigError> {
    let eal_lcores = eal_lcore_list(eal_args);
    let check_in_eal = |key: String, l: u32| -> Result<(), ConfigError> {
        match &eal_lcores {
            Some(list) if !list.contains(l) => Err(ConfigError::new(
                key,
                format!(
                    "lcore {l} is not in the EAL lcore list \"{}\" (eal.args -l)",
                    list.text
                ),
            )),
            _ => Ok(()),
        }
    };
    check_in_eal("lcores.scheduler".into(), rl.scheduler)?;
    let mut rx = Vec::new();
    let mut polled: BTreeMap<(PortIdx, u16), usize> = BTreeMap::new();
    let mut rx_lcores_seen: HashMap<u32, usize> = HashMap::new();
    if rl.rx.is_empty() {
        return Err(ConfigError::new(
            "lcores.rx",
            "no RX lcore: every port queue must be polled by one",
        ));
    }
    for (i, r) in rl.rx.iter().enumerate() {
        let key = format!("lcores.rx[{i}]");
        check_in_eal(format!("{key}.lcore"), r.lcore)?;
        if r.lcore == rl.scheduler && !rl.shared {
            return Err(ConfigError::new(
                format!("{key}.lcore"),
                format!("lcore {} is already the scheduler: one lcore, one role (or set lcores.shared = true for the reduced mode)", r.lcore),
            ));
        }
        if let Some(prev) = rx_lcores_seen.insert(r.lcore, i) {
            return Err(ConfigError::new(
                format!("{key}.lcore"),
                format!("lcore {} already has an RX role in lcores.rx[{prev}]: list all its queues there", r.lcore),
            ));
        }
        if r.poll.is_empty() {
            return Err(ConfigError::new(
                format!("{key}.poll"),
                "an RX lcore with nothing to poll",
            ));
        }
        let mut polls = Vec::new();
        for (j, s) in r.poll.iter().enumerate() {
            let pkey = format!("{key}.poll[{j}]");
            let (name, queue) = match s.split_once(':') {
                Some((n, q)) => {
                    let q: u16 = q.parse().map_err(|_| {
                        ConfigError::new(
                            &pkey,
                            format!("{s:?}: queue must be a number (\"port:queue\")"),
                        )
                    })?;
                    (n, q)
                }
                None => (s.as_str(), 0),
            };
            let port = lookup(names, pkey.clone(), name)?;
            let nq = ports[port.get() as usize].rx_queues;
            if queue >= nq {
                return Err(ConfigError::new(
                    &pkey,
                    format!("port {name:?} has {nq} RX queue(s), no queue {queue}"),
                ));
            }
            if let Some(prev) = polled.insert((port, queue), i) {
                return Err(ConfigError::new(
                    &pkey,
                    format!("queue {queue} of port {name:?} is already polled by lcores.rx[{prev}]: a queue has one poller"),
                ));
            }
            polls.push((port, queue));
        }
        rx.push(RxLcore {
            lcore: r.lcore,
            polls,
        });
    }
    if rl.shared && !(rx.len() == 1 && rx[0].lcore == rl.scheduler) {
        return Err(ConfigError::new(
            "lcores.shared",
            "reduced mode wants exactly one RX lcore, the scheduler's (lcores.rx = [{ lcore = <scheduler>, ... }])",
        ));
    }
    let mode = match rl.idle.as_deref() {
        None => IdleMode::Spin,
        Some(name) => IdleMode::parse(name).ok_or_else(|| {
            ConfigError::new(
                "lcores.idle",
                format!(
                    "{name:?}: spin (a core per loop), yield or sleep (fewer cores than busy loops)"
                ),
            )
        })?,
    };
    let idle = idle_policy(
        mode,
        rl.idle_after_polls,
        rl.idle_sleep_us,
        ["lcores.idle_after_polls", "lcores.idle_sleep_us"],
    )?;
    for (pi, p) in ports.iter().enumerate() {
        let idx = PortIdx::new(pi as u8).expect("at most MAX_PORTS ports");
        for q in 0..p.rx_queues {
            if !polled.contains_key(&(idx, q)) {
                return Err(ConfigError::new(
                    format!("ports[{pi}]"),
                    format!("RX queue {q} of port {:?} is polled by no lcore (add \"{}:{q}\" to an lcores.rx poll list)", p.name, p.name),
                ));
            }
        }
    }
    Ok(LcoreSpec {
        scheduler: rl.scheduler,
        shared: rl.shared,
        rx,
        idle,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::MetricsSpec;
    use barrier_protocol::backoff::Backoff;
    use barrier_protocol::switch::{GroupConfig, Role};
    use barrier_protocol::PortSet;

    const GOOD: &str = r#"
[eal]
args = ["-l", "0,1"]

[[ports]]
name = "up"
vdev = "net_ring0"

[[ports]]
name = "d0"
vdev = "net_ring1"

[[ports]]
name = "d1"
vdev = "net_ring2"

[lcores]
scheduler = 1
rx = [ { lcore = 0, poll = ["up", "d0", "d1:0"] } ]

[[groups]]
number = 7
role = "intermediate"
children = ["d0", "d1"]
parent = "up"
resend_timeout_us = 200

[[groups]]
numbers = "100..1100"
role = "root"
children = ["d0", "d1", "up"]
"#;

    fn err(text: &str) -> ConfigError {
        parse(text).expect_err("config should be refused")
    }

    /// Apply a textual edit to GOOD and expect a refusal naming `key`.
    fn refused(from: &str, to: &str, key: &str, reason_part: &str) {
        assert!(GOOD.contains(from), "test edit {from:?} not found");
        let text = GOOD.replacen(from, to, 1);
        let e = err(&text);
        assert_eq!(e.key, key, "wrong key in {e}");
        assert!(
            e.reason.contains(reason_part),
            "reason {:?} lacks {reason_part:?}",
            e.reason
        );
        assert!(e.to_string().contains(key));
    }

    #[test]
    fn backoff_and_failure_declaration_registers() {
        let text = GOOD.replacen(
            "resend_timeout_us = 200",
            "resend_timeout_us = 200\nresend_max_us = 3200\nresend_jitter_pct = 25\nfail_after_ms = 750",
            1,
        );
        let c = parse(&text).unwrap();
        let g = c.groups[0].config;
        assert_eq!(
            g.backoff,
            Backoff {
                max_ns: 3_200_000,
                jitter_pct: 25
            }
        );
        assert_eq!(g.fail_after_ns, 750_000_000);
        // defaults: a fixed period, never declare
        let d = parse(GOOD).unwrap().groups[1].config;
        assert_eq!((d.backoff, d.fail_after_ns), (Backoff::FIXED, 0));
        let with = |extra: &str| GOOD.replacen("resend_timeout_us = 200", extra, 1);
        let e = parse(&with("resend_timeout_us = 200\nresend_jitter_pct = 51")).unwrap_err();
        assert_eq!(e.key, "groups[0].resend_jitter_pct");
        assert!(e.line.is_some(), "{e}");
        let e = parse(&with("resend_timeout_us = 200\nfail_after_ms = 4294968")).unwrap_err();
        assert_eq!(e.key, "groups[0].fail_after_ms");
        assert!(
            e.line.is_some() && e.to_string().contains("71 minutes"),
            "{e}"
        );
        let ok = parse(&with("resend_timeout_us = 200\nfail_after_ms = 4294967")).unwrap();
        assert_eq!(ok.groups[0].config.fail_after_ns, 4_294_967_000_000);
        let e = parse(&with("resend_timeout_us = 200\nresend_max_us = 100")).unwrap_err();
        assert_eq!(e.key, "groups[0].resend_max_us");
        let e = parse(&GOOD.replacen(
            "children = [\"d0\", \"d1\", \"up\"]",
            "children = [\"d0\", \"d1\", \"up\"]\nresend_max_us = 5000",
            1,
        ))
        .unwrap_err();
        assert_eq!(e.key, "groups[1].resend_max_us");
        assert!(e.reason.contains("root"), "{e}");
    }

    #[test]
    fn refusals_of_valid_toml_name_the_line_of_their_key() {
        let line_of = |needle: &str| GOOD.lines().position(|l| l.contains(needle)).unwrap() + 1;
        // A child that is not a port: the line of that array element.
        let text = GOOD.replace("children = [\"d0\", \"d1\"]", "children = [\"d0\", \"dx\"]");
        let e = parse(&text).unwrap_err();
        assert_eq!(e.key, "groups[0].children[1]");
        assert_eq!(e.line, Some(line_of("children = [\"d0\", \"d1\"]")), "{e}");
        assert!(
            e.to_string()
                .starts_with(&format!("line {}: ", e.line.unwrap())),
            "{e}"
        );
        // A poll entry inside an inline table.
        let e = parse(&GOOD.replace("\"d1:0\"", "\"d1:3\"")).unwrap_err();
        assert_eq!(e.key, "lcores.rx[0].poll[2]");
        assert_eq!(e.line, Some(line_of("rx = [")), "{e}");
        // A table of an array of tables: its header's line or the key inside it.
        let e =
            parse(&GOOD.replace("resend_timeout_us = 200", "resend_timeout_us = 0")).unwrap_err();
        assert_eq!(e.key, "groups[0].resend_timeout_us");
        assert_eq!(e.line, Some(line_of("resend_timeout_us = 200")), "{e}");
        // A key the file lacks has no line.
        let e = parse(&GOOD.replace(
            "[lcores]\nscheduler = 1\nrx = [ { lcore = 0, poll = [\"up\", \"d0\", \"d1:0\"] } ]\n",
            "",
        ))
        .unwrap_err();
        assert_eq!((e.key.as_str(), e.line), ("lcores", None), "{e}");
    }

    #[test]
    fn good_config_parses() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.ports.len(), 3);
        let port = |i| PortIdx::new(i).unwrap();
        assert_eq!(c.port_index("d1"), Some(port(2)));
        assert_eq!(
            c.groups[0].config.role,
            Role::Intermediate { parent: port(0) }
        );
        assert_eq!(c.groups[0].config.children, PortSet(0b110));
        assert_eq!(c.groups[0].config.resend_timeout_ns, 200_000);
        assert_eq!(c.groups[1].numbers, 100..1100);
        // A root does not re-send: its timeout register is 0, as a root created on the
        // control socket has it (GroupConfig::root).
        assert_eq!(c.groups[1].config, GroupConfig::root(PortSet(0b111)));
        let intermediate_default = GOOD.replace("resend_timeout_us = 200\n", "");
        assert_eq!(
            parse(&intermediate_default).unwrap().groups[0]
                .config
                .resend_timeout_ns,
            DEFAULT_RESEND_TIMEOUT_US * 1000
        );
        assert_eq!(c.group_count(), 1001);
        assert_eq!(c.group_capacity(), 1100);
        assert_eq!(
            c.lcores.rx[0].polls,
            vec![(port(0), 0), (port(1), 0), (port(2), 0)]
        );
        assert_eq!(c.ports[0].peer_mac, [0xff; 6]);
        assert_eq!(
            c.ports[0].mac, c.mac,
            "a port sends with the switch's MAC unless told"
        );
        assert_eq!(c.ports[1].device.dpdk_name(), "net_ring1");
    }

    #[test]
    fn metrics_are_off_unless_configured_and_loopback_by_default() {
        assert_eq!(parse(GOOD).unwrap().metrics, None);
        let on = parse(&format!("{GOOD}\n[metrics]\ngroups = [7, 100]\n")).unwrap();
        assert_eq!(
            on.metrics,
            Some(MetricsSpec {
                listen: "127.0.0.1:9464".parse().unwrap(),
                groups: vec![7, 100],
            })
        );
        let any = parse(&format!("{GOOD}\n[metrics]\nlisten = \"0.0.0.0:9100\"\n")).unwrap();
        assert_eq!(any.metrics.unwrap().listen, "0.0.0.0:9100".parse().unwrap());
    }

    #[test]
    fn management_cpus_take_a_list_or_a_string_and_name_a_bad_one() {
        assert_eq!(parse(GOOD).unwrap().management_cpus, None);
        for cpus in ["[1, 0]", "\"0-1\"", "\"1,0,1\""] {
            let spec = parse(&format!("{GOOD}\n[management]\ncpus = {cpus}\n")).unwrap();
            assert_eq!(spec.management_cpus.unwrap().cpus(), [0, 1], "{cpus}");
        }
        let text = format!("{GOOD}\n[management]\ncpus = \"0-x\"\n");
        let e = err(&text);
        assert_eq!(e.key, "management.cpus", "{e}");
        assert_eq!(e.line, Some(text.lines().count()), "{e}");
        assert!(e.reason.contains("not a CPU number"), "{e}");
        for bad in ["[]", "\"3-1\"", "[99999]"] {
            let e = err(&format!("{GOOD}\n[management]\ncpus = {bad}\n"));
            assert_eq!(e.key, "management.cpus", "{bad}: {e}");
        }
        let e = err(&format!("{GOOD}\n[management]\ncores = [0]\n"));
        assert!(e.to_string().contains("cores"), "{e}");
    }

    #[test]
    fn stragglers_watch_configured_groups_only() {
        assert!(parse(GOOD).unwrap().stragglers.is_empty());
        let on = parse(&format!("{GOOD}\n[stragglers]\ngroups = [7, 1099]\n")).unwrap();
        assert_eq!(on.stragglers, [7, 1099]);
        let e = err(&format!("{GOOD}\n[stragglers]\ngroups = [1100]\n"));
        assert_eq!(e.key, "stragglers.groups", "{e}");
        assert_eq!(
            parse(GOOD).unwrap().straggler_limit,
            barrier_mgmt::straggler::DEFAULT_LIMIT
        );
        let e = err(&format!(
            "{GOOD}\n[stragglers]\ngroups = [7, 1099]\nlimit = 1\n"
        ));
        assert_eq!(e.key, "stragglers.limit", "{e}");
    }

    #[test]
    fn metrics_refusals() {
        let e = err(&format!("{GOOD}\n[metrics]\nlisten = \"localhost\"\n"));
        assert_eq!(e.key, "metrics.listen", "{e}");
        let e = err(&format!("{GOOD}\n[metrics]\ngroups = [7, 8]\n"));
        assert_eq!(e.key, "metrics.groups", "{e}");
        assert!(e.reason.contains("group 8 is not configured"), "{e}");
        let e = err(&format!("{GOOD}\n[metrics]\nport = 9100\n"));
        assert!(e.to_string().contains("port"), "{e}");
    }

    #[test]
    fn unknown_child_port() {
        refused(
            r#"children = ["d0", "d1"]"#,
            r#"children = ["d0", "p9"]"#,
            "groups[0].children[1]",
            "unknown port \"p9\" (the switch's ports: [\"d0\", \"d1\", \"up\"])",
        );
    }

    #[test]
    fn unknown_parent_port() {
        refused(
            r#"parent = "up""#,
            r#"parent = "nowhere""#,
            "groups[0].parent",
            "unknown port",
        );
    }

    #[test]
    fn unknown_polled_port() {
        refused(
            r#""d1:0""#,
            r#""d7:0""#,
            "lcores.rx[0].poll[2]",
            "unknown port \"d7\"",
        );
    }

    #[test]
    fn port_both_child_and_parent() {
        refused(
            r#"parent = "up""#,
            r#"parent = "d1""#,
            "groups[0].parent",
            "both a child and the parent",
        );
    }

    #[test]
    fn child_set_wider_than_64() {
        let many: Vec<String> = (0..65).map(|i| format!("\"p{i}\"")).collect();
        refused(
            r#"children = ["d0", "d1"]"#,
            &format!("children = [{}]", many.join(",")),
            "groups[0].children",
            "at most 64",
        );
    }

    #[test]
    fn too_many_ports() {
        let mut text =
            String::from("[lcores]\nscheduler = 1\nrx = [{ lcore = 0, poll = [\"p0\"] }]\n");
        for i in 0..65 {
            text += &format!("[[ports]]\nname = \"p{i}\"\nvdev = \"net_ring{i}\"\n");
        }
        let e = err(&text);
        assert_eq!(e.key, "ports");
        assert!(e.reason.contains("at most 64"));
    }

    #[test]
    fn group_number_out_of_range() {
        refused(
            "number = 7",
            "number = 1048576",
            "groups[0].number",
            "out of range",
        );
        refused(
            r#"numbers = "100..1100""#,
            r#"numbers = "0..2000000""#,
            "groups[1].numbers",
            "beyond",
        );
    }

    #[test]
    fn bad_range_syntax() {
        refused(
            r#"numbers = "100..1100""#,
            r#"numbers = "100-1100""#,
            "groups[1].numbers",
            "not a range",
        );
        refused(
            r#"numbers = "100..1100""#,
            r#"numbers = "100..100""#,
            "groups[1].numbers",
            "empty",
        );
    }

    #[test]
    fn duplicate_group_numbers() {
        refused(
            "number = 7",
            "number = 150",
            "groups[1].numbers",
            "group 150 is also defined by groups[0]",
        );
        let text =
            format!("{GOOD}\n[[groups]]\nnumber = 7\nrole = \"root\"\nchildren = [\"d0\"]\n");
        let e = err(&text);
        assert_eq!(e.key, "groups[2].number");
        assert!(e.reason.contains("group 7 is also defined by groups[0]"));
    }

    #[test]
    fn lcore_with_two_roles() {
        refused(
            "scheduler = 1",
            "scheduler = 0",
            "lcores.rx[0].lcore",
            "already the scheduler",
        );
        let text = GOOD.replace(
            r#"rx = [ { lcore = 0, poll = ["up", "d0", "d1:0"] } ]"#,
            r#"rx = [ { lcore = 0, poll = ["up", "d0"] }, { lcore = 0, poll = ["d1"] } ]"#,
        );
        let e = err(&text);
        assert_eq!(e.key, "lcores.rx[1].lcore");
        assert!(e.reason.contains("already has an RX role"));
    }

    #[test]
    fn shared_mode_allows_one_lcore_for_both() {
        let text = GOOD.replace("scheduler = 1", "scheduler = 0\nshared = true");
        let c = parse(&text).unwrap();
        assert!(c.lcores.shared);
        // ...but only in the shape it is meant for.
        let text = GOOD.replace("scheduler = 1", "scheduler = 1\nshared = true");
        assert_eq!(err(&text).key, "lcores.shared");
    }

    #[test]
    fn idle_policy_keys() {
        assert_eq!(parse(GOOD).unwrap().lcores.idle, Idle::Spin);
        let with_line = |extra: &str| format!("scheduler = 1\n{extra}");
        let with = |extra: &str| GOOD.replacen("scheduler = 1", &with_line(extra), 1);
        let c = parse(&with(
            "idle = \"sleep\"\nidle_after_polls = 50\nidle_sleep_us = 10",
        ))
        .unwrap();
        assert_eq!(
            c.lcores.idle,
            Idle::Sleep {
                after: 50,
                ns: 10_000
            }
        );
        let c = parse(&with("idle = \"yield\"")).unwrap();
        assert_eq!(
            c.lcores.idle,
            Idle::Yield {
                after: Idle::DEFAULT_AFTER
            }
        );
        let c = parse(&with("idle = \"sleep\"")).unwrap();
        assert_eq!(
            c.lcores.idle,
            Idle::Sleep {
                after: Idle::DEFAULT_AFTER,
                ns: Idle::DEFAULT_SLEEP_NS
            }
        );
        refused(
            "scheduler = 1",
            &with_line("idle = \"nap\""),
            "lcores.idle",
            "spin (a core per loop)",
        );
        refused(
            "scheduler = 1",
            &with_line("idle_after_polls = 5"),
            "lcores.idle_after_polls",
            "spin never backs off",
        );
        refused(
            "scheduler = 1",
            &with_line("idle = \"yield\"\nidle_sleep_us = 5"),
            "lcores.idle_sleep_us",
            "only with sleep",
        );
        refused(
            "scheduler = 1",
            &with_line("idle = \"sleep\"\nidle_sleep_us = 0"),
            "lcores.idle_sleep_us",
            "1..=500",
        );
        refused(
            "scheduler = 1",
            &with_line("idle = \"sleep\"\nidle_sleep_us = 5000"),
            "lcores.idle_sleep_us",
            "well below",
        );
    }

    #[test]
    fn queue_polled_twice() {
        refused(
            r#""d1:0""#,
            r#""d0:0""#,
            "lcores.rx[0].poll[2]",
            "already polled by lcores.rx[0]",
        );
    }

    #[test]
    fn queue_polled_by_none() {
        refused(
            r#"["up", "d0", "d1:0"]"#,
            r#"["up", "d0"]"#,
            "ports[2]",
            "polled by no lcore",
        );
        refused(
            "vdev = \"net_ring0\"",
            "vdev = \"net_ring0\"\nrx_queues = 2",
            "ports[0]",
            "RX queue 1",
        );
    }

    #[test]
    fn queue_that_does_not_exist() {
        refused(
            r#""d1:0""#,
            r#""d1:3""#,
            "lcores.rx[0].poll[2]",
            "no queue 3",
        );
    }

    #[test]
    fn lcore_not_in_eal_list() {
        refused(
            "scheduler = 1",
            "scheduler = 5",
            "lcores.scheduler",
            "not in the EAL lcore list",
        );
    }

    /// Fuzzing finding 4 (config, 8.8 M executions): an EAL lcore range with a huge end
    /// (`-l 99949-0491414532`) was expanded into a list of every number in it, hundreds of
    /// millions of them: 45 s and then out of memory, for a file DPDK would refuse at once. The
    /// list is now kept as ranges; the refusal quotes it as written.
    #[test]
    fn a_huge_eal_lcore_range_is_not_expanded() {
        // Before the fix this test ran out of memory.
        let huge = GOOD.replacen(
            r#"args = ["-l", "0,1"]"#,
            r#"args = ["-l", "2-4000000000"]"#,
            1,
        );
        let e = err(&huge);
        assert_eq!(e.key, "lcores.scheduler", "{e}");
        assert!(e.reason.contains("\"2-4000000000\""), "{e}");
        let ok = GOOD.replacen(
            r#"args = ["-l", "0,1"]"#,
            r#"args = ["-l", "0-4000000000"]"#,
            1,
        );
        parse(&ok).unwrap();
    }

    #[test]
    fn zero_timeout() {
        refused(
            "resend_timeout_us = 200",
            "resend_timeout_us = 0",
            "groups[0].resend_timeout_us",
            "zero",
        );
    }

    #[test]
    fn role_and_parent_must_agree() {
        refused(
            r#"role = "intermediate""#,
            r#"role = "root""#,
            "groups[0].parent",
            "root group has no parent",
        );
        refused(
            "parent = \"up\"\n",
            "",
            "groups[0].parent",
            "needs its parent",
        );
        refused(
            r#"role = "intermediate""#,
            r#"role = "leaf""#,
            "groups[0].role",
            "unknown variant",
        );
    }

    #[test]
    fn duplicate_child() {
        refused(
            r#"children = ["d0", "d1"]"#,
            r#"children = ["d0", "d0"]"#,
            "groups[0].children[1]",
            "twice",
        );
    }

    #[test]
    fn unknown_keys_are_refused_with_their_path_and_line() {
        let text = GOOD.replace("resend_timeout_us = 200", "resend_timeout = 200");
        let e = err(&text);
        assert_eq!(e.key, "groups[0].resend_timeout");
        assert!(e.reason.contains("unknown field `resend_timeout`"), "{e}");
        let want_line = GOOD
            .lines()
            .position(|l| l.contains("resend_timeout_us = 200"))
            .unwrap()
            + 1;
        assert_eq!(e.line, Some(want_line), "{e}");

        let e = err(&GOOD.replace("[eal]", "[eal]\nmemory = 3"));
        assert_eq!(e.key, "eal.memory");
        assert!(e.reason.contains("unknown field"));
    }

    #[test]
    fn syntax_error_reports_the_line() {
        let text = GOOD.replace("number = 7", "number = = 7");
        let e = err(&text);
        let want_line = GOOD.lines().position(|l| l == "number = 7").unwrap() + 1;
        assert_eq!(e.line, Some(want_line), "{e}");
        assert!(e.to_string().starts_with(&format!("line {want_line}:")));
    }

    #[test]
    fn wrong_type_names_key() {
        let e = err(&GOOD.replace("number = 7", "number = \"seven\""));
        assert_eq!(e.key, "groups[0].number");
        assert!(e.line.is_some());
    }

    #[test]
    fn policer_keys() {
        let with = |extra: &str| {
            GOOD.replacen(
                "vdev = \"net_ring1\"",
                &format!("vdev = \"net_ring1\"\n{extra}"),
                1,
            )
        };
        let c = parse(GOOD).unwrap();
        assert!(
            c.ports.iter().all(|p| p.policer.is_none()),
            "off by default"
        );
        let c = parse(&with("policer_rate = 50000\npolicer_burst = 200")).unwrap();
        assert_eq!(
            c.ports[1].policer,
            Some(PolicerSpec {
                rate: 50_000,
                burst: 200
            })
        );
        assert_eq!(c.ports[0].policer, None);
        // A rate alone: 10 ms of it as the burst, at least 64.
        let c = parse(&with("policer_rate = 1000000")).unwrap();
        assert_eq!(c.ports[1].policer.unwrap().burst, 10_000);
        let c = parse(&with("policer_rate = 10")).unwrap();
        assert_eq!(c.ports[1].policer.unwrap().burst, 64);
        // Refusals name the key and its line.
        let line_of =
            |text: &str, needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
        for (extra, key, why) in [
            (
                "policer_rate = 0",
                "ports[1].policer_rate",
                "the rate must be 1",
            ),
            (
                "policer_rate = -5",
                "ports[1].policer_rate",
                "the rate must be",
            ),
            (
                "policer_rate = 2000000000",
                "ports[1].policer_rate",
                "to 1000000000 frames/s",
            ),
            (
                "policer_rate = 100\npolicer_burst = 0",
                "ports[1].policer_burst",
                "the burst must be 1",
            ),
            (
                "policer_rate = 100\npolicer_burst = 1000000000",
                "ports[1].policer_burst",
                "to 100000000 frames",
            ),
            (
                "policer_burst = 10",
                "ports[1].policer_burst",
                "needs a rate",
            ),
        ] {
            let text = with(extra);
            let e = err(&text);
            assert_eq!(e.key, key, "{e}");
            assert!(e.reason.contains(why), "{e}");
            let needle = extra
                .lines()
                .find(|l| l.starts_with(key.rsplit('.').next().unwrap()))
                .unwrap();
            assert_eq!(e.line, Some(line_of(&text, needle)), "{e}");
            assert!(
                e.to_string()
                    .starts_with(&format!("line {}: {key}: ", e.line.unwrap())),
                "{e}"
            );
        }
        // A wrong type names the key too.
        let e = err(&with("policer_rate = \"fast\""));
        assert!(e.to_string().contains("policer_rate"), "{e}");
        // Two RX queues: the rate and the burst must give each queue at least one frame.
        let two = GOOD
            .replacen(
                "vdev = \"net_ring1\"",
                "vdev = \"net_ring1\"\nrx_queues = 2\npolicer_rate = 1",
                1,
            )
            .replacen("\"d0\", \"d1:0\"", "\"d0\", \"d0:1\", \"d1:0\"", 1);
        let e = err(&two);
        assert_eq!(e.key, "ports[1].policer_rate", "{e}");
        assert!(e.reason.contains("must be 2 (one per RX queue)"), "{e}");
    }

    #[test]
    fn an_af_xdp_port_names_an_interface() {
        let c = parse(&GOOD.replacen("vdev = \"net_ring1\"", "af_xdp = \"eth1\"", 1)).unwrap();
        assert_eq!(
            c.ports[1].device,
            Device::AfXdp {
                iface: "eth1".into(),
                name: "net_af_xdp1".into()
            }
        );
        assert_eq!(c.ports[1].device.dpdk_name(), "net_af_xdp1");
        assert_eq!(c.port_descs()[1].device, "af_xdp:eth1");
    }

    #[test]
    fn an_exception_path_is_a_tap_interface() {
        let c = parse(&GOOD.replacen(
            "vdev = \"net_ring1\"",
            "vdev = \"net_ring1\"\nexception = \"tap\"",
            1,
        ))
        .unwrap();
        assert_eq!(
            c.ports[1].exception,
            Some(Exception::Tap {
                iface: "nb-d0".into(),
                name: "net_tap_exc1".into()
            })
        );
        assert_eq!(c.ports[0].exception, None);
        let c = parse(&GOOD.replacen(
            "vdev = \"net_ring1\"",
            "vdev = \"net_ring1\"\nexception = \"tap\"\nexception_iface = \"ex1\"",
            1,
        ))
        .unwrap();
        assert_eq!(
            c.ports[1].exception.as_ref().map(Exception::iface),
            Some("ex1")
        );
    }

    #[test]
    fn exception_path_rules() {
        refused(
            "vdev = \"net_ring0\"",
            "vdev = \"net_ring0\"\nexception = \"kni\"",
            "ports[0].exception",
            "\"kni\" is not an exception path: give \"tap\"",
        );
        refused(
            "vdev = \"net_ring0\"",
            "af_xdp = \"eth1\"\nexception = \"tap\"",
            "ports[0].exception",
            "AF_XDP port already leaves",
        );
        refused(
            "vdev = \"net_ring0\"",
            "vdev = \"net_ring0\"\nexception_iface = \"ex0\"",
            "ports[0].exception_iface",
            "needs exception = \"tap\"",
        );
        refused(
            "vdev = \"net_ring0\"",
            "vdev = \"net_ring0\"\nexception = \"tap\"\nexception_iface = \"a-name-far-too-long\"",
            "ports[0].exception_iface",
            "not an interface name",
        );
        refused(
            "name = \"up\"\nvdev = \"net_ring0\"",
            "name = \"uplink-to-the-core\"\nvdev = \"net_ring0\"\nexception = \"tap\"",
            "ports[0].name",
            "give exception_iface",
        );
        let tap = "\nexception = \"tap\"\nexception_iface = \"ex\"";
        let e = err(&GOOD
            .replacen(
                "vdev = \"net_ring1\"",
                &format!("vdev = \"net_ring1\"{tap}"),
                1,
            )
            .replacen(
                "vdev = \"net_ring2\"",
                &format!("vdev = \"net_ring2\"{tap}"),
                1,
            ));
        assert_eq!(e.key, "ports[2].exception_iface", "{e}");
        assert!(
            e.reason.contains("already the exception path of ports[1]"),
            "{e}"
        );
    }

    #[test]
    fn port_device_rules() {
        refused(
            "vdev = \"net_ring0\"",
            "vdev = \"net_ring0\"\npci = \"0000:01:00.0\"",
            "ports[0]",
            "not several",
        );
        refused(
            "vdev = \"net_ring0\"",
            "vdev = \"net_ring0\"\naf_xdp = \"eth1\"",
            "ports[0]",
            "not several",
        );
        refused(
            "vdev = \"net_ring0\"",
            "af_xdp = \"eth1,x=1\"",
            "ports[0].af_xdp",
            "not an interface name",
        );
        refused(
            "vdev = \"net_ring0\"",
            "af_xdp = \"eth1\"\nrx_queues = 65",
            "ports[0].rx_queues",
            "at most 64",
        );
        refused("vdev = \"net_ring0\"", "", "ports[0]", "give vdev");
        refused(
            "vdev = \"net_ring1\"",
            "vdev = \"net_ring0,x=1\"",
            "ports[1]",
            "already used by ports[0]",
        );
        refused(
            "name = \"d1\"",
            "name = \"d0\"",
            "ports[2].name",
            "already defined",
        );
        refused(
            "vdev = \"net_ring0\"",
            "vdev = \"net_ring0\"\nrx_descriptors = 100",
            "ports[0].rx_descriptors",
            "power of two",
        );
    }

    #[test]
    fn bad_macs() {
        refused(
            "[eal]",
            "[switch]\nmac = \"02:00:00\"\n[eal]",
            "switch.mac",
            "not a MAC",
        );
        refused(
            "vdev = \"net_ring0\"",
            "vdev = \"net_ring0\"\npeer_mac = \"zz:00:00:00:00:00\"",
            "ports[0].peer_mac",
            "not a MAC",
        );
    }

    #[test]
    fn a_port_can_have_its_own_source_mac() {
        let c = parse(&GOOD.replace(
            "vdev = \"net_ring1\"",
            "vdev = \"net_ring1\"\nmac = \"02:00:00:00:00:77\"",
        ))
        .unwrap();
        assert_eq!(c.ports[1].mac, [2, 0, 0, 0, 0, 0x77]);
        assert_eq!(c.ports[0].mac, c.mac);
        refused(
            "vdev = \"net_ring1\"",
            "vdev = \"net_ring1\"\nmac = \"02:00\"",
            "ports[1].mac",
            "not a MAC",
        );
    }

    #[test]
    fn missing_lcores_and_empty_children() {
        let e = err("[[ports]]\nname = \"a\"\nvdev = \"net_ring0\"\n");
        assert_eq!(e.key, "lcores");
        refused(
            r#"children = ["d0", "d1"]"#,
            "children = []",
            "groups[0].children",
            "at least one",
        );
    }

    #[test]
    fn mempool_limits() {
        let e = err(&format!("[mempool]\nmbufs = 10\n{GOOD}"));
        assert_eq!(e.key, "mempool.mbufs");
    }

    #[test]
    fn control_socket_and_capacity() {
        assert_eq!(parse(GOOD).unwrap().control, None);
        let c = parse(&format!(
            "{GOOD}\n[control]\nsocket = \"/run/netbarrier/s0.sock\"\n"
        ))
        .unwrap();
        let ctl = c.control.clone().unwrap();
        assert_eq!(
            ctl.socket,
            std::path::PathBuf::from("/run/netbarrier/s0.sock")
        );
        assert_eq!(ctl.capacity, 1100, "default: the file's groups");
        assert_eq!(c.group_capacity(), 1100);
        let c = parse(&format!(
            "{GOOD}\n[control]\nsocket = \"/tmp/s.sock\"\ncapacity = 65536\n"
        ))
        .unwrap();
        assert_eq!(c.group_capacity(), 65536);
        let line_of =
            |text: &str, needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
        for (extra, key, reason, needle) in [
            ("socket = \"\"", "control.socket", "empty path", "socket ="),
            (
                "socket = \"/tmp/s\"\ncapacity = 0",
                "control.capacity",
                "1..=1048576",
                "capacity =",
            ),
            (
                "socket = \"/tmp/s\"\ncapacity = 2000000",
                "control.capacity",
                "1..=1048576",
                "capacity =",
            ),
            (
                "socket = \"/tmp/s\"\ncapacity = 1000",
                "control.capacity",
                "below the groups",
                "capacity =",
            ),
            (
                "sockt = \"/tmp/s\"",
                "control.sockt",
                "unknown field",
                "sockt =",
            ),
        ] {
            let text = format!("{GOOD}\n[control]\n{extra}\n");
            let e = err(&text);
            assert_eq!(e.key, key, "{e}");
            assert!(e.reason.contains(reason), "{e}");
            assert_eq!(e.line, Some(line_of(&text, needle)), "{e}");
        }
        let long = format!("/tmp/{}", "x".repeat(120));
        let e = err(&format!("{GOOD}\n[control]\nsocket = \"{long}\"\n"));
        assert_eq!(e.key, "control.socket");
        assert!(e.reason.contains("at most 107"), "{e}");
    }

    #[test]
    fn a_million_groups_as_one_range() {
        let text = GOOD.replace(r#"numbers = "100..1100""#, r#"numbers = "8..=1048575""#);
        let c = parse(&text).unwrap();
        assert_eq!(c.group_count(), 1 + (1_048_576 - 8));
        assert_eq!(c.group_capacity(), MAX_GROUPS);
    }
}
