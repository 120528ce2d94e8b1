//! The management plane's sections of a dataplane's configuration file, and the checks they
//! share: `[[groups]]` (each entry a `barrier_ctl::group::GroupSpec`, resolved by the same
//! `group::resolve` the control socket uses), `[control]`, `[metrics]`, `[stragglers]` and `[management]`.
//! A dataplane's own file (for the DPDK switch, `barrier_switch::config`) holds these sections
//! beside its own ones, parses the whole file with [`parse_toml`] and checks them with
//! [`validate`]; every refusal is a [`ConfigError`] naming the key path and, where the file has
//! it, the line. Reference: docs/configuration.md.

use barrier_ctl::group::{self, GroupSpec};
use barrier_protocol::switch::GroupConfig;
use barrier_protocol::GroupId;
use barrier_runtime::affinity::CpuList;
use serde::Deserialize;
use std::fmt;
use std::ops::Range;

/// Group numbers are `0..MAX_GROUPS` (the wire format's limit, barrier_protocol::MAX_GROUPS).
pub const MAX_GROUPS: u32 = 1 << 20;

/// A refused configuration: where (the key path, and the line for syntax errors) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub key: String,
    pub reason: String,
    pub line: Option<usize>,
}

impl ConfigError {
    pub fn new(key: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            reason: reason.into(),
            line: None,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if self.key.is_empty() || self.key == "." {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "{}: {}", self.key, self.reason)
        }
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// The error with the line of its key in `text`, when it has none yet and the file has
    /// the key (a missing key has no line; the key path still says where it belongs).
    pub fn at_line_of_key(mut self, text: &str) -> Self {
        if self.line.is_none() {
            self.line = span_of_key(text, &self.key).map(|r| line_of(text, r.start));
        }
        self
    }
}

/// Where the key path `groups[3].children[2]` (as validation writes it) sits in `text`: the
/// deepest part of the path the file has.
pub fn span_of_key(text: &str, key: &str) -> Option<Range<usize>> {
    use toml_edit::{Item, Table, Value};
    enum Node<'a> {
        Table(&'a Table),
        Item(&'a Item),
        Value(&'a Value),
    }
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut node = Node::Table(doc.as_table());
    let mut best = None;
    for part in key.split('.').filter(|p| !p.is_empty()) {
        let (name, indices) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        let next = match node {
            Node::Table(t) => {
                best = t.key(name).and_then(|k| k.span()).or(best);
                t.get(name).map(Node::Item)
            }
            Node::Item(Item::Table(t)) => {
                best = t.key(name).and_then(|k| k.span()).or(best);
                t.get(name).map(Node::Item)
            }
            Node::Item(Item::Value(v)) | Node::Value(v) => v
                .as_inline_table()
                .and_then(|t| t.get(name))
                .map(Node::Value),
            Node::Item(_) => None,
        };
        let Some(mut n) = next else { break };
        for idx in indices.split(['[', ']']).filter(|s| !s.is_empty()) {
            let Ok(i) = idx.parse::<usize>() else { break };
            let inner = match n {
                Node::Item(Item::ArrayOfTables(a)) => a.get(i).map(Node::Table),
                Node::Item(Item::Value(Value::Array(a))) | Node::Value(Value::Array(a)) => {
                    a.get(i).map(Node::Value)
                }
                _ => None,
            };
            match inner {
                Some(x) => n = x,
                None => break,
            }
        }
        best = match &n {
            Node::Table(t) => t.span(),
            Node::Item(i) => i.span(),
            Node::Value(v) => v.span(),
        }
        .or(best);
        node = n;
    }
    best
}

/// The 1-based line of byte `offset` in `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

/// `text` as a `T` (a whole file's raw shape), a refusal naming the key path and the line.
pub fn parse_toml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize::<_, T>(de).map_err(|e| {
        let key = e.path().to_string();
        let inner = e.into_inner();
        let line = inner.span().map(|s| line_of(text, s.start));
        // toml's own message repeats the source snippet over several lines; keep its first
        // sentence, the one that says what is wrong.
        let mut msg = inner.message().trim().to_string();
        if msg.is_empty() {
            // toml says nothing for some refusals (a control character in a comment, found
            // by fuzzing: docs/reliability.md, "Fuzzing"); say what it is where we can.
            msg = match line.and_then(|l| text.split('\n').nth(l - 1)).and_then(|l| {
                l.char_indices()
                    .find(|&(_, c)| c.is_control() && c != '\t' && c != '\r')
                    .map(|(i, c)| (l[..i].chars().count() + 1, c))
            }) {
                Some((col, c)) => format!(
                    "control character U+{:04X} at column {col}: TOML allows none but tab, not even in comments",
                    c as u32
                ),
                None => "not valid TOML here".to_string(),
            };
        }
        ConfigError {
            key: if key == "." { String::new() } else { key },
            reason: msg,
            line,
        }
    })
}

/// A group number range, `"0..1000"` or `"0..=999"`, inside `0..MAX_GROUPS`.
pub fn parse_range(key: &str, s: &str) -> Result<Range<u32>, ConfigError> {
    let bad = || {
        ConfigError::new(
            key,
            format!("{s:?} is not a range (want \"0..1000\" or \"0..=999\")"),
        )
    };
    let (a, b, inclusive) = if let Some((a, b)) = s.split_once("..=") {
        (a, b, true)
    } else if let Some((a, b)) = s.split_once("..") {
        (a, b, false)
    } else {
        return Err(bad());
    };
    let start: u64 = a.trim().parse().map_err(|_| bad())?;
    let mut end: u64 = b.trim().parse().map_err(|_| bad())?;
    if inclusive {
        end += 1;
    }
    if end <= start {
        return Err(ConfigError::new(key, format!("{s:?} is empty")));
    }
    if end > u64::from(MAX_GROUPS) {
        return Err(ConfigError::new(
            key,
            format!(
                "{s:?} reaches beyond the last group number {} (groups are 0..{MAX_GROUPS})",
                MAX_GROUPS - 1
            ),
        ));
    }
    Ok(start as u32..end as u32)
}

// ---------------------------------------------------------------------------------------------
// The sections' raw shape (serde), `deny_unknown_fields`: a typo is an error, not a default.

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawControl {
    pub socket: String,
    pub capacity: Option<u32>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawStragglers {
    #[serde(default)]
    pub groups: Vec<u32>,
    pub limit: Option<usize>,
}

/// `[management]`: where the threads that are not lcores run.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawManagement {
    /// The control cores: `[0, 1]` or `"0-1"` (`barrier_runtime::affinity::CpuList`).
    pub cpus: Option<CpuList>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    pub listen: Option<String>,
    #[serde(default)]
    pub groups: Vec<u32>,
}

// ---------------------------------------------------------------------------------------------
// The sections checked.

/// One `[[groups]]` entry checked: its group numbers and their common registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupBlock {
    pub numbers: Range<u32>,
    pub config: GroupConfig,
}

impl GroupBlock {
    pub fn ids(&self) -> impl Iterator<Item = GroupId> {
        self.numbers.clone().map(GroupId)
    }

    pub fn count(&self) -> u64 {
        u64::from(self.numbers.end - self.numbers.start)
    }
}

/// `[control]`: the socket, the group numbers it may use, the file it writes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlSpec {
    pub socket: std::path::PathBuf,
    /// Group numbers `0..capacity` (at least the file's own).
    pub capacity: u32,
    /// The configuration file, for write-back (set by the loader, not by the file).
    pub file: Option<std::path::PathBuf>,
}

/// `[metrics]`: where the Prometheus endpoint listens and the groups that get per-group series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsSpec {
    pub listen: std::net::SocketAddr,
    pub groups: Vec<u32>,
}

impl MetricsSpec {
    pub const DEFAULT_LISTEN: std::net::SocketAddr = std::net::SocketAddr::V4(
        std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 9464),
    );
}

/// The management plane's sections of one file, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagementSpec {
    pub groups: Vec<GroupBlock>,
    pub control: Option<ControlSpec>,
    pub metrics: Option<MetricsSpec>,
    /// `[stragglers] groups`: watched from the start.
    pub stragglers: Vec<u32>,
    /// `[stragglers] limit`: the most groups watched at once.
    pub straggler_limit: usize,
    /// `[management] cpus`: the CPUs the management threads (control socket, metrics
    /// endpoint) run on; `None`: the CPUs no polling lcore uses (`barrier_runtime::affinity`).
    pub cpus: Option<CpuList>,
}

/// The management sections as a file has them (each borrowed from the dataplane's raw file).
pub struct Sections<'a> {
    pub groups: &'a [GroupSpec],
    pub control: Option<&'a RawControl>,
    pub metrics: Option<&'a RawMetrics>,
    pub stragglers: &'a RawStragglers,
    pub management: Option<&'a RawManagement>,
}

/// Checks the management sections of a file whose dataplane has the ports `port_names`.
pub fn validate(s: Sections<'_>, port_names: &[&str]) -> Result<ManagementSpec, ConfigError> {
    let groups = validate_groups(s.groups, port_names)?;
    let control = s
        .control
        .map(|c| validate_control(c, &groups))
        .transpose()?;
    let metrics = s
        .metrics
        .map(|m| validate_metrics(m, &groups))
        .transpose()?;
    let stragglers = configured_groups("stragglers.groups", &s.stragglers.groups, &groups)?;
    let straggler_limit = s
        .stragglers
        .limit
        .unwrap_or(crate::straggler::DEFAULT_LIMIT);
    if stragglers.len() > straggler_limit {
        return Err(ConfigError::new(
            "stragglers.limit",
            format!(
                "{straggler_limit}, below the {} groups of stragglers.groups",
                stragglers.len()
            ),
        ));
    }
    Ok(ManagementSpec {
        groups,
        control,
        metrics,
        stragglers,
        straggler_limit,
        cpus: s.management.and_then(|m| m.cpus.clone()),
    })
}

/// Longest Unix socket path (`sun_path` holds 108 bytes with its terminating NUL).
pub const MAX_SOCKET_PATH: usize = 107;

fn validate_control(c: &RawControl, groups: &[GroupBlock]) -> Result<ControlSpec, ConfigError> {
    if c.socket.is_empty() {
        return Err(ConfigError::new("control.socket", "empty path"));
    }
    if c.socket.len() > MAX_SOCKET_PATH {
        return Err(ConfigError::new(
            "control.socket",
            format!(
                "{} bytes: a Unix socket path has at most {MAX_SOCKET_PATH}",
                c.socket.len()
            ),
        ));
    }
    let file = groups.iter().map(|g| g.numbers.end).max().unwrap_or(0);
    let capacity = match c.capacity {
        None => file,
        Some(n) if n == 0 || n > MAX_GROUPS => {
            return Err(ConfigError::new(
                "control.capacity",
                format!("{n}: 1..={MAX_GROUPS} group numbers"),
            ))
        }
        Some(n) if n < file => {
            return Err(ConfigError::new(
                "control.capacity",
                format!(
                    "{n} is below the groups the file configures (up to {})",
                    file - 1
                ),
            ))
        }
        Some(n) => n,
    };
    Ok(ControlSpec {
        socket: c.socket.clone().into(),
        capacity,
        file: None,
    })
}

/// `list` (the value of `key`) if every group in it is configured.
fn configured_groups(
    key: &str,
    list: &[u32],
    groups: &[GroupBlock],
) -> Result<Vec<u32>, ConfigError> {
    match list
        .iter()
        .find(|&&g| !groups.iter().any(|b| b.numbers.contains(&g)))
    {
        Some(g) => Err(ConfigError::new(
            key,
            format!("group {g} is not configured in [[groups]]"),
        )),
        None => Ok(list.to_vec()),
    }
}

/// `[metrics]`: the listen address (loopback port 9464 unless given) and the groups that get
/// per-group series, each of which must be configured.
fn validate_metrics(m: &RawMetrics, groups: &[GroupBlock]) -> Result<MetricsSpec, ConfigError> {
    let listen = match &m.listen {
        None => MetricsSpec::DEFAULT_LISTEN,
        Some(a) => a.parse().map_err(|e| {
            ConfigError::new(
                "metrics.listen",
                format!("{a:?}: want ADDRESS:PORT, e.g. \"127.0.0.1:9464\" ({e})"),
            )
        })?,
    };
    Ok(MetricsSpec {
        listen,
        groups: configured_groups("metrics.groups", &m.groups, groups)?,
    })
}

/// The file's groups: numbering here, every setting through `group::resolve` (the control
/// socket's check too), its field prefixed with the entry's key path.
pub fn validate_groups(
    raw: &[GroupSpec],
    port_names: &[&str],
) -> Result<Vec<GroupBlock>, ConfigError> {
    let mut groups = Vec::with_capacity(raw.len());
    for (i, g) in raw.iter().enumerate() {
        let key = format!("groups[{i}]");
        let numbers = match (&g.number, &g.numbers) {
            (Some(n), None) => {
                if *n >= MAX_GROUPS {
                    return Err(ConfigError::new(
                        format!("{key}.number"),
                        format!("{n} is out of range (groups are 0..{MAX_GROUPS})"),
                    ));
                }
                *n..*n + 1
            }
            (None, Some(r)) => parse_range(&format!("{key}.numbers"), r)?,
            (Some(_), Some(_)) => {
                return Err(ConfigError::new(&key, "give number or numbers, not both"))
            }
            (None, None) => {
                return Err(ConfigError::new(
                    &key,
                    "missing number (or numbers = \"a..b\")",
                ))
            }
        };
        let config = group::resolve(g, port_names).map_err(|e| {
            let at = if e.field.is_empty() {
                key.clone()
            } else {
                format!("{key}.{}", e.field)
            };
            ConfigError::new(at, e.message)
        })?;
        groups.push(GroupBlock { numbers, config });
    }
    // Duplicate numbers, across single numbers and ranges: sort by start, compare neighbours.
    let mut spans: Vec<(u32, u32, usize)> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (g.numbers.start, g.numbers.end, i))
        .collect();
    spans.sort();
    for w in spans.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b.0 < a.1 {
            let (first, second) = if a.2 < b.2 { (a.2, b.2) } else { (b.2, a.2) };
            let field = if raw[second].number.is_some() {
                "number"
            } else {
                "numbers"
            };
            return Err(ConfigError::new(
                format!("groups[{second}].{field}"),
                format!("group {} is also defined by groups[{first}]", b.0.max(a.0)),
            ));
        }
    }
    Ok(groups)
}
