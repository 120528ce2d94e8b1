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
//! create and present for the rest), so a refused request changes nothing.

use crate::config::{self, DEFAULT_RESEND_TIMEOUT_US};
use crate::counters::{RxCounters, SchedCounters, TxCounters};
use crate::engine::SwitchStats;
use crate::spec::{Device, SwitchSpec};
use barrier_ctl::proto::{
    parse_request, CounterSet, GroupBlockInfo, GroupInfo, GroupRegisters, PortInfo, Reply, Request,
    Response, MAX_REQUEST_LINE,
};
use barrier_protocol::switch::{GroupConfig, Phase, Role};
use barrier_protocol::{GroupId, PortIdx, PortSet, MAX_PORTS};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Connections served at once; one more is answered with an error and closed.
pub const MAX_CLIENTS: usize = 16;

/// Answers queued for one client before its further lines wait.
const OUTPUT_HIGH_WATER: usize = 1 << 20;

/// The epoch a group gets when its creator does not say.
pub const DEFAULT_EPOCH: u32 = 1;

/// A port as the control socket shows it.
#[derive(Debug, Clone)]
pub struct PortDesc {
    pub name: String,
    pub device: String,
    pub peer_mac: [u8; 6],
}

/// The deciding half: a request against the running switch's table and counters.
pub struct Control {
    stats: SwitchStats,
    ports: Vec<PortDesc>,
    /// The configuration file, for write-back.
    file: Option<PathBuf>,
    /// Epochs of the groups, by number (absent: `DEFAULT_EPOCH`).
    epochs: BTreeMap<u32, u32>,
}

fn mac_string(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl Control {
    /// Control over a switch built from `spec`, whose running parts `stats` holds; `file` is
    /// the configuration file write-back rewrites.
    pub fn new(stats: SwitchStats, spec: &SwitchSpec, file: Option<PathBuf>) -> Control {
        let ports = spec
            .ports
            .iter()
            .map(|p| PortDesc {
                name: p.name.clone(),
                device: match &p.device {
                    Device::Vdev(v) => format!("vdev:{v}"),
                    Device::Pci(a) => format!("pci:{a}"),
                },
                peer_mac: p.peer_mac,
            })
            .collect();
        Control::with_ports(stats, ports, file)
    }

    /// As `new`, with the ports described directly (a switch not built from a file).
    pub fn with_ports(stats: SwitchStats, ports: Vec<PortDesc>, file: Option<PathBuf>) -> Control {
        Control {
            stats,
            ports,
            file,
            epochs: BTreeMap::new(),
        }
    }

    /// Answers one request line (the newline stripped).
    pub fn handle_line(&mut self, line: &[u8]) -> Response {
        match parse_request(line) {
            Ok(req) => self.handle(req),
            Err(e) => Response::error(e),
        }
    }

    /// Answers one request.
    pub fn handle(&mut self, req: Request) -> Response {
        let out = match req {
            Request::Groups {} => Ok(self.groups()),
            Request::GroupShow { group } => self.show(group),
            Request::GroupCreate {
                group,
                children,
                parent,
                resend_timeout_ns,
                epoch,
            } => self.create(
                group,
                &children,
                parent.as_deref(),
                resend_timeout_ns,
                epoch,
            ),
            Request::GroupReset { group, epoch } => self.reset(group, epoch),
            Request::GroupSet {
                group,
                children,
                parent,
                root,
                resend_timeout_ns,
            } => self.set(
                group,
                children.as_deref(),
                parent.as_deref(),
                root,
                resend_timeout_ns,
            ),
            Request::GroupDelete { group } => self.delete(group),
            Request::Stats {} => Ok(self.stats()),
            Request::Ports {} => Ok(self.ports()),
            Request::WriteBack {} => self.write_back(),
        };
        match out {
            Ok(r) => Response::ok(r),
            Err(e) => Response::error(e),
        }
    }

    fn table(&self) -> &barrier_protocol::table::GroupTable {
        &self.stats.table
    }

    fn epoch(&self, group: u32) -> u32 {
        self.epochs.get(&group).copied().unwrap_or(DEFAULT_EPOCH)
    }

    fn port_name(&self, p: PortIdx) -> String {
        self.ports
            .get(p.get() as usize)
            .map_or_else(|| p.to_string(), |d| d.name.clone())
    }

    fn port(&self, name: &str) -> Result<PortIdx, String> {
        self.ports
            .iter()
            .position(|d| d.name == name)
            .and_then(|i| PortIdx::new(i as u8))
            .ok_or_else(|| {
                let known: Vec<&str> = self.ports.iter().map(|d| d.name.as_str()).collect();
                format!(
                    "unknown port {name:?} (this switch has {})",
                    known.join(", ")
                )
            })
    }

    fn children(&self, names: &[String]) -> Result<PortSet, String> {
        if names.is_empty() {
            return Err("a group needs at least one child port".into());
        }
        if names.len() > MAX_PORTS {
            return Err(format!(
                "{} children: fan-in over {MAX_PORTS} (a group has at most {MAX_PORTS} children per switch)",
                names.len()
            ));
        }
        let mut set = PortSet::empty();
        for n in names {
            let p = self.port(n)?;
            if set.contains(p) {
                return Err(format!("port {n:?} listed twice"));
            }
            set.insert(p);
        }
        Ok(set)
    }

    fn in_table(&self, group: u32) -> Result<GroupId, String> {
        let cap = self.table().capacity();
        if group >= cap {
            return Err(format!(
                "group {group} is outside the table: this switch holds groups 0..{cap} (raise [control] capacity)"
            ));
        }
        Ok(GroupId(group))
    }

    fn configured(&self, group: u32) -> Result<(GroupId, GroupConfig), String> {
        let g = self.in_table(group)?;
        let cfg = self
            .table()
            .config(g)
            .ok_or_else(|| format!("group {group} is not configured"))?;
        Ok((g, cfg))
    }

    fn timeout(ns: Option<u64>) -> Result<u64, String> {
        match ns {
            None => Ok(DEFAULT_RESEND_TIMEOUT_US * 1000),
            Some(0) => Err("a zero re-send timeout would re-send forever".into()),
            Some(n) if !n.is_multiple_of(1000) => Err(format!(
                "resend_timeout_ns {n}: give whole microseconds (the file's resend_timeout_us)"
            )),
            Some(n) => Ok(n),
        }
    }

    fn registers(&self, group: u32, cfg: &GroupConfig) -> GroupRegisters {
        GroupRegisters {
            role: match cfg.role {
                Role::Root => "root",
                Role::Intermediate { .. } => "intermediate",
            }
            .into(),
            children: cfg.children.iter().map(|p| self.port_name(p)).collect(),
            parent: cfg.parent().map(|p| self.port_name(p)),
            resend_timeout_ns: match cfg.role {
                Role::Root => 0,
                Role::Intermediate { .. } => cfg.resend_timeout_ns,
            },
            epoch: self.epoch(group),
        }
    }

    /// Installs `cfg` for `g` (one atomic `configure`) with `epoch`.
    fn install(&mut self, g: GroupId, cfg: GroupConfig, epoch: u32) -> Result<(), String> {
        self.table().configure(g, cfg).map_err(|e| e.to_string())?;
        self.epochs.insert(g.0, epoch);
        Ok(())
    }

    fn create(
        &mut self,
        group: u32,
        children: &[String],
        parent: Option<&str>,
        timeout_ns: Option<u64>,
        epoch: Option<u32>,
    ) -> Result<Reply, String> {
        let g = self.in_table(group)?;
        if self.table().config(g).is_some() {
            return Err(format!(
                "group {group} exists already (epoch {}): use group set, reset or delete",
                self.epoch(group)
            ));
        }
        let kids = self.children(children)?;
        let cfg = match parent {
            None => {
                if timeout_ns.is_some() {
                    return Err(
                        "a root has no re-send timeout (resend_timeout_ns is for intermediates)"
                            .into(),
                    );
                }
                GroupConfig::root(kids)
            }
            Some(name) => {
                let p = self.port(name)?;
                if kids.contains(p) {
                    return Err(format!("port {name:?} is both a child and the parent"));
                }
                GroupConfig::intermediate(p, kids, Self::timeout(timeout_ns)?)
            }
        };
        let epoch = epoch.unwrap_or(DEFAULT_EPOCH);
        self.install(g, cfg, epoch)?;
        tracing::info!(group, epoch, "control: group created");
        Ok(Reply::Changed {
            group,
            action: "created".into(),
            epoch,
        })
    }

    fn reset(&mut self, group: u32, epoch: Option<u32>) -> Result<Reply, String> {
        let (g, cfg) = self.configured(group)?;
        let epoch = match epoch {
            Some(e) => e,
            None => self.epoch(group).checked_add(1).ok_or_else(|| {
                format!(
                    "group {group}: epoch {} is the last one: give --epoch",
                    u32::MAX
                )
            })?,
        };
        self.install(g, cfg, epoch)?;
        tracing::info!(group, epoch, "control: group reset");
        Ok(Reply::Changed {
            group,
            action: "reset".into(),
            epoch,
        })
    }

    fn set(
        &mut self,
        group: u32,
        children: Option<&[String]>,
        parent: Option<&str>,
        root: bool,
        timeout_ns: Option<u64>,
    ) -> Result<Reply, String> {
        let (g, old) = self.configured(group)?;
        if children.is_none() && parent.is_none() && !root && timeout_ns.is_none() {
            return Err("nothing to change: give children, parent, root or a timeout".into());
        }
        if root && parent.is_some() {
            return Err("root and parent exclude each other".into());
        }
        let kids = match children {
            Some(c) => self.children(c)?,
            None => old.children,
        };
        let role = if root {
            Role::Root
        } else if let Some(name) = parent {
            Role::Intermediate {
                parent: self.port(name)?,
            }
        } else {
            old.role
        };
        let cfg = match role {
            Role::Root => {
                if timeout_ns.is_some() {
                    return Err("a root has no re-send timeout".into());
                }
                GroupConfig::root(kids)
            }
            Role::Intermediate { parent: p } => {
                if kids.contains(p) {
                    return Err(format!(
                        "port {:?} is both a child and the parent",
                        self.port_name(p)
                    ));
                }
                let t = match (timeout_ns, old.role) {
                    (Some(_), _) => Self::timeout(timeout_ns)?,
                    (None, Role::Intermediate { .. }) => old.resend_timeout_ns,
                    (None, Role::Root) => Self::timeout(None)?,
                };
                GroupConfig::intermediate(p, kids, t)
            }
        };
        let epoch = self.epoch(group);
        self.install(g, cfg, epoch)?;
        tracing::info!(group, epoch, "control: group changed");
        Ok(Reply::Changed {
            group,
            action: "changed".into(),
            epoch,
        })
    }

    fn delete(&mut self, group: u32) -> Result<Reply, String> {
        let (g, _) = self.configured(group)?;
        let epoch = self.epoch(group);
        self.table().remove(g).map_err(|e| e.to_string())?;
        self.epochs.remove(&group);
        tracing::info!(group, epoch, "control: group deleted");
        Ok(Reply::Changed {
            group,
            action: "deleted".into(),
            epoch,
        })
    }

    fn show(&self, group: u32) -> Result<Reply, String> {
        let (g, cfg) = self.configured(group)?;
        let st = self
            .table()
            .state(g)
            .ok_or_else(|| format!("group {group} is not configured"))?;
        let phase = match st.phase {
            Phase::Unknown => "unknown",
            Phase::Collecting => "collecting",
            Phase::AwaitingRelease => "awaiting_release",
        };
        Ok(Reply::Group {
            group: GroupInfo {
                group,
                registers: self.registers(group, &cfg),
                phase: phase.into(),
                seq: (st.phase != Phase::Unknown).then_some(st.seq.0),
                arrived: st.arrived.iter().map(|p| self.port_name(p)).collect(),
                completions: self.stats.groups.completions(group),
                resends: self.stats.groups.resends(group),
            },
        })
    }

    /// Consecutive numbers with equal registers, in order.
    fn blocks(&self) -> Vec<(u32, u32, GroupConfig, u32)> {
        let mut out: Vec<(u32, u32, GroupConfig, u32)> = Vec::new();
        for n in 0..self.table().capacity() {
            let Some(cfg) = self.table().config(GroupId(n)) else {
                continue;
            };
            let epoch = self.epoch(n);
            match out.last_mut() {
                Some(b) if b.1 + 1 == n && b.2 == cfg && b.3 == epoch => b.1 = n,
                _ => out.push((n, n, cfg, epoch)),
            }
        }
        out
    }

    fn groups(&self) -> Reply {
        Reply::Groups {
            capacity: self.table().capacity(),
            blocks: self
                .blocks()
                .into_iter()
                .map(|(first, last, cfg, _)| GroupBlockInfo {
                    first,
                    last,
                    registers: self.registers(first, &cfg),
                })
                .collect(),
        }
    }

    fn stats(&self) -> Reply {
        let s = &self.stats;
        let set = |scope: String, names: &[&str], values: Vec<u64>| CounterSet {
            scope,
            counters: names.iter().map(|n| n.to_string()).zip(values).collect(),
        };
        let sum = |rows: Vec<Vec<u64>>, n: usize| {
            rows.into_iter().fold(vec![0u64; n], |mut acc, r| {
                for (a, v) in acc.iter_mut().zip(r) {
                    *a += v;
                }
                acc
            })
        };
        let rx_n = RxCounters::NAMES.len();
        let tx_n = TxCounters::NAMES.len();
        let mut sets = vec![
            set(
                "rx total".into(),
                RxCounters::NAMES,
                sum(s.rx.iter().map(|(_, c)| c.values()).collect(), rx_n),
            ),
            set(
                "tx total".into(),
                TxCounters::NAMES,
                sum(s.tx.iter().map(|c| c.values()).collect(), tx_n),
            ),
            set("scheduler".into(), SchedCounters::NAMES, s.sched.values()),
        ];
        for (p, name) in s.port_names.iter().enumerate() {
            sets.push(set(
                format!("port {name} rx"),
                RxCounters::NAMES,
                sum(
                    s.rx.iter()
                        .filter(|(i, _)| *i == p)
                        .map(|(_, c)| c.values())
                        .collect(),
                    rx_n,
                ),
            ));
            sets.push(set(
                format!("port {name} tx"),
                TxCounters::NAMES,
                s.tx[p].values(),
            ));
        }
        let cap = self.table().capacity();
        let configured = (0..cap)
            .filter(|&n| self.table().config(GroupId(n)).is_some())
            .count() as u64;
        let completions = (0..cap).map(|n| u64::from(s.groups.completions(n))).sum();
        let resends = (0..cap).map(|n| u64::from(s.groups.resends(n))).sum();
        sets.push(CounterSet {
            scope: "groups".into(),
            counters: [
                ("capacity".to_string(), u64::from(cap)),
                ("configured".to_string(), configured),
                ("completions".to_string(), completions),
                ("resends".to_string(), resends),
            ]
            .into_iter()
            .collect(),
        });
        Reply::Stats { sets }
    }

    fn ports(&self) -> Reply {
        let s = &self.stats;
        let frames = RxCounters::NAMES
            .iter()
            .position(|n| *n == "frames")
            .expect("RX counts frames");
        Reply::Ports {
            ports: self
                .ports
                .iter()
                .enumerate()
                .map(|(i, d)| PortInfo {
                    index: i as u8,
                    name: d.name.clone(),
                    device: d.device.clone(),
                    peer_mac: mac_string(d.peer_mac),
                    rx_frames: s
                        .rx
                        .iter()
                        .filter(|(p, _)| *p == i)
                        .map(|(_, c)| c.values()[frames])
                        .sum(),
                    tx_frames: s.tx.get(i).map_or(0, |c| {
                        c.frames_out.load(std::sync::atomic::Ordering::Relaxed)
                    }),
                })
                .collect(),
        }
    }

    /// The running groups as the file's `[[groups]]` array.
    fn groups_toml(&self) -> (toml_edit::ArrayOfTables, u64) {
        use toml_edit::{value, Array, ArrayOfTables, Table};
        let mut aot = ArrayOfTables::new();
        let mut n = 0u64;
        for (first, last, cfg, _epoch) in self.blocks() {
            n += u64::from(last - first) + 1;
            let regs = self.registers(first, &cfg);
            let mut t = Table::new();
            if first == last {
                t.insert("number", value(i64::from(first)));
            } else {
                t.insert("numbers", value(format!("{first}..={last}")));
            }
            t.insert("role", value(regs.role.clone()));
            let mut kids = Array::new();
            for c in &regs.children {
                kids.push(c.as_str());
            }
            t.insert("children", value(kids));
            if let Some(p) = &regs.parent {
                t.insert("parent", value(p.as_str()));
                t.insert(
                    "resend_timeout_us",
                    value((regs.resend_timeout_ns / 1000) as i64),
                );
            }
            aot.push(t);
        }
        (aot, n)
    }

    fn write_back(&self) -> Result<Reply, String> {
        let Some(path) = &self.file else {
            return Err("this switch was not started from a file: nothing to write back".into());
        };
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut doc: toml_edit::DocumentMut = text
            .parse()
            .map_err(|e| format!("{}: no longer TOML: {e}", path.display()))?;
        let (aot, n) = self.groups_toml();
        doc.remove("groups");
        if !aot.is_empty() {
            doc.insert("groups", toml_edit::Item::ArrayOfTables(aot));
        }
        let new = doc.to_string();
        // What is written must be what the switch would accept at its next start.
        config::parse(&new).map_err(|e| {
            format!(
                "{}: the file with the running groups would be refused ({e}); not written",
                path.display()
            )
        })?;
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, &new)
            .and_then(|()| {
                let mode = std::fs::metadata(path)?.permissions();
                std::fs::set_permissions(&tmp, mode)?;
                std::fs::rename(&tmp, path)
            })
            .map_err(|e| format!("{}: {e}", path.display()))?;
        tracing::info!(path = %path.display(), groups = n, "control: running groups written back");
        Ok(Reply::WrittenBack {
            path: path.display().to_string(),
            groups: n,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The socket.

/// Why the control socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("{}: another process listens there (a switch already running with this socket?)", .0.display())]
    InUse(PathBuf),
    #[error("{}: exists and is not a socket; not replacing it", .0.display())]
    NotASocket(PathBuf),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// One client connection.
struct Conn {
    stream: UnixStream,
    input: Vec<u8>,
    output: Vec<u8>,
    /// Skipping the rest of a line that was too long.
    skipping: bool,
    /// The peer closed, or the connection is to be closed once its output is written.
    closing: bool,
}

/// The control socket, served by [`ControlServer::serve`] from the management loop.
pub struct ControlServer {
    listener: UnixListener,
    path: PathBuf,
    conns: Vec<Conn>,
    control: Control,
    /// Root and this user may connect.
    owner: rustix::process::Uid,
}

impl ControlServer {
    /// Listens at `path`, mode 0600: the socket is bound in a private directory (mode 0700)
    /// beside it, set to 0600 and renamed into place, so it is never reachable with a wider
    /// mode. A stale socket (nobody listening) is replaced; a live one is refused.
    pub fn bind(path: &Path, control: Control) -> Result<ControlServer, BindError> {
        let io_err = |source| BindError::Io {
            path: path.to_path_buf(),
            source,
        };
        match std::fs::symlink_metadata(path) {
            Ok(m) => {
                use std::os::unix::fs::FileTypeExt;
                if !m.file_type().is_socket() {
                    return Err(BindError::NotASocket(path.to_path_buf()));
                }
                if UnixStream::connect(path).is_ok() {
                    return Err(BindError::InUse(path.to_path_buf()));
                }
                std::fs::remove_file(path).map_err(io_err)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(e)),
        }
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let file = path.file_name().ok_or_else(|| {
            io_err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a file path",
            ))
        })?;
        let private = dir.join(format!(
            ".{}.{}.d",
            file.to_string_lossy(),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&private);
        std::fs::create_dir(&private).map_err(io_err)?;
        let bound = (|| {
            std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700))?;
            let inner = private.join("s");
            let l = UnixListener::bind(&inner)?;
            std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o600))?;
            std::fs::rename(&inner, path)?;
            l.set_nonblocking(true)?;
            Ok(l)
        })();
        let _ = std::fs::remove_dir_all(&private);
        let listener = bound.map_err(io_err)?;
        tracing::info!(path = %path.display(), "control socket listening (mode 0600)");
        Ok(ControlServer {
            listener,
            path: path.to_path_buf(),
            conns: Vec::new(),
            control,
            owner: rustix::process::geteuid(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Waits up to `timeout` for something to do, then does it: accepts, reads, answers,
    /// writes. Never blocks longer than `timeout`.
    pub fn serve(&mut self, timeout: Duration) {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let ts = Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        // A connection with whole lines waiting and nothing to write is served now.
        let pending = |c: &Conn| c.output.is_empty() && !c.closing && c.input.contains(&b'\n');
        let ts = if self.conns.iter().any(pending) {
            Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            }
        } else {
            ts
        };
        let (listen_ready, ready) = {
            let mut fds = Vec::with_capacity(self.conns.len() + 1);
            fds.push(PollFd::new(&self.listener, PollFlags::IN));
            for c in &self.conns {
                let mut f = PollFlags::empty();
                if c.output.is_empty() && !c.closing {
                    f |= PollFlags::IN;
                }
                if !c.output.is_empty() {
                    f |= PollFlags::OUT;
                }
                fds.push(PollFd::new(&c.stream, f));
            }
            if poll(&mut fds, Some(&ts)).is_err() {
                // EINTR (a signal: SIGUSR1) or similar: the caller loops anyway.
                return;
            }
            let ready: Vec<bool> = fds[1..].iter().map(|f| !f.revents().is_empty()).collect();
            (!fds[0].revents().is_empty(), ready)
        };
        for (c, r) in self.conns.iter_mut().zip(ready) {
            if r || pending(c) {
                Self::service(&mut self.control, c);
            }
        }
        self.conns.retain(|c| !(c.closing && c.output.is_empty()));
        if listen_ready {
            self.accept();
        }
    }

    fn accept(&mut self) {
        loop {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    tracing::warn!("control socket: accept: {e}");
                    return;
                }
            };
            let refusal = match rustix::net::sockopt::socket_peercred(stream.as_fd()) {
                Ok(cred) if cred.uid.is_root() || cred.uid == self.owner => None,
                Ok(cred) => Some(format!(
                    "uid {} may not manage this switch (root and uid {} only)",
                    cred.uid.as_raw(),
                    self.owner.as_raw()
                )),
                Err(e) => Some(format!("peer credentials: {e}")),
            };
            if let Some(why) = refusal {
                tracing::warn!("control socket: refused a connection: {why}");
                // Best effort: a short line fits the socket buffer; then close.
                let _ = stream.set_nonblocking(true);
                let _ = (&stream).write_all(Response::error(why).to_line().as_bytes());
                continue;
            }
            if self.conns.len() >= MAX_CLIENTS {
                let _ = stream.set_nonblocking(true);
                let _ = (&stream).write_all(
                    Response::error(format!("too many connections (at most {MAX_CLIENTS})"))
                        .to_line()
                        .as_bytes(),
                );
                continue;
            }
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            self.conns.push(Conn {
                stream,
                input: Vec::new(),
                output: Vec::new(),
                skipping: false,
                closing: false,
            });
        }
    }

    /// Reads what the client sent, answers every whole line, writes what it can.
    fn service(control: &mut Control, c: &mut Conn) {
        if c.output.is_empty() && !c.closing {
            let mut buf = [0u8; 4096];
            loop {
                match c.stream.read(&mut buf) {
                    Ok(0) => {
                        c.closing = true;
                        break;
                    }
                    Ok(n) => {
                        c.input.extend_from_slice(&buf[..n]);
                        if c.input.len() > MAX_REQUEST_LINE {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        c.closing = true;
                        c.output.clear();
                        return;
                    }
                }
            }
            Self::lines(control, c);
        }
        while !c.output.is_empty() {
            match c.stream.write(&c.output) {
                Ok(0) => {
                    c.output.clear();
                    c.closing = true;
                }
                Ok(n) => {
                    c.output.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    c.output.clear();
                    c.closing = true;
                }
            }
        }
    }

    /// Answers the whole lines in `c.input`; a line over the cap gets an error and is skipped
    /// to its newline.
    fn lines(control: &mut Control, c: &mut Conn) {
        loop {
            // Answers wait to be written before more lines are read: one client cannot make
            // the switch hold more than about one answer for it.
            if c.output.len() >= OUTPUT_HIGH_WATER {
                return;
            }
            match c.input.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    let line: Vec<u8> = c.input.drain(..=i).collect();
                    if c.skipping {
                        c.skipping = false;
                        continue;
                    }
                    let line = &line[..line.len() - 1];
                    let resp = if line.len() > MAX_REQUEST_LINE {
                        Response::error(format!(
                            "request line longer than {MAX_REQUEST_LINE} bytes: skipped"
                        ))
                    } else {
                        control.handle_line(line)
                    };
                    c.output.extend_from_slice(resp.to_line().as_bytes());
                }
                None => {
                    if c.input.len() > MAX_REQUEST_LINE {
                        if !c.skipping {
                            c.output.extend_from_slice(
                                Response::error(format!(
                                    "request line longer than {MAX_REQUEST_LINE} bytes: skipped to its end"
                                ))
                                .to_line()
                                .as_bytes(),
                            );
                        }
                        c.skipping = true;
                        c.input.clear();
                    }
                    return;
                }
            }
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{build_switch, PortIo};
    use crate::io::{mem_wire, MemRx, MemTx, TxQueue};
    use crate::poll::Poller;
    use barrier_ctl::client::{Client, RequestError};
    use barrier_protocol::leaf::LeafSend;
    use barrier_protocol::table::GroupTable;
    use barrier_protocol::wire::{FrameRepr, Kind, MacAddr};
    use barrier_protocol::Seq;
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;

    const PORTS: [&str; 4] = ["up", "d0", "d1", "d2"];

    /// A switch on in-memory wires with ports `PORTS`, a table of `cap` groups, group 1 a root
    /// of d0, d1; its pollers, the leaves' ends of its wires and its `Control`.
    struct Bed {
        pollers: Vec<Box<dyn Poller>>,
        to_switch: Vec<MemTx>,
        from_switch: Vec<MemRx>,
        control: Control,
    }

    fn bed(cap: u32) -> Bed {
        let table = Arc::new(GroupTable::new(cap));
        table
            .configure(GroupId(1), GroupConfig::root(PortSet(0b110)))
            .unwrap();
        let mut ports = Vec::new();
        let mut to_switch = Vec::new();
        let mut from_switch = Vec::new();
        for name in PORTS {
            let (in_tx, in_rx) = mem_wire(256);
            let (out_tx, out_rx) = mem_wire(256);
            to_switch.push(in_tx);
            from_switch.push(out_rx);
            ports.push(PortIo {
                name: name.into(),
                rx: vec![in_rx],
                tx: out_tx,
                peer_mac: [0xff; 6],
                mac: None,
            });
        }
        let sw = build_switch("t", [2, 0, 0, 0, 0, 1], ports, table, 0);
        let descs = PORTS
            .iter()
            .enumerate()
            .map(|(i, n)| PortDesc {
                name: n.to_string(),
                device: format!("vdev:net_ring{i}"),
                peer_mac: [0xff; 6],
            })
            .collect();
        let control = Control::with_ports(sw.stats.clone(), descs, None);
        let mut pollers: Vec<Box<dyn Poller>> = sw.rx.into_iter().map(|(_, _, p)| p).collect();
        pollers.push(sw.sched);
        Bed {
            pollers,
            to_switch,
            from_switch,
            control,
        }
    }

    impl Bed {
        fn req(&mut self, line: &str) -> Response {
            self.control.handle_line(line.as_bytes())
        }
        fn ok(&mut self, line: &str) -> Reply {
            let r = self.req(line);
            assert!(r.ok, "{line}: {r:?}");
            r.result.unwrap()
        }
        fn refused(&mut self, line: &str, why: &str) {
            let before = self.snapshot();
            let r = self.req(line);
            assert!(!r.ok, "{line} was accepted: {r:?}");
            let e = r.error.unwrap();
            assert!(e.contains(why), "{line}: {e:?} lacks {why:?}");
            assert_eq!(self.snapshot(), before, "{line} changed the table");
        }
        /// Every group's configuration and epoch.
        fn snapshot(&self) -> Vec<(u32, Option<GroupConfig>, u32)> {
            let t = self.control.table();
            (0..t.capacity())
                .map(|n| (n, t.config(GroupId(n)), self.control.epoch(n)))
                .collect()
        }
        fn send_reduce(&mut self, port: usize, group: u32, seq: u32) {
            let f = LeafSend {
                group: GroupId(group),
                seq: Seq(seq),
                retransmit: false,
            }
            .frame(MacAddr([2, 0, 0, 0, 0, 9]), MacAddr::BROADCAST, None)
            .to_bytes();
            self.to_switch[port].offer(&f).unwrap();
            self.to_switch[port].flush();
        }
        fn run(&mut self) {
            for _ in 0..4 {
                for p in &mut self.pollers {
                    p.poll(0);
                }
            }
        }
        /// The frames the switch sent on `port`.
        fn received(&mut self, port: usize) -> Vec<(Kind, u32, u32)> {
            use crate::io::RxQueue;
            let mut v = Vec::new();
            self.from_switch[port].rx_burst(&mut v, 1024);
            v.iter()
                .map(|b| {
                    let r = FrameRepr::parse(b).unwrap();
                    (r.kind, r.group.0, r.seq.0)
                })
                .collect()
        }
    }

    #[test]
    fn create_show_reset_set_delete() {
        let mut b = bed(16);
        let r = b.ok(r#"{"op":"group_create","group":7,"children":["d0","d1"],"parent":"up","resend_timeout_ns":500000,"epoch":3}"#);
        assert_eq!(
            r,
            Reply::Changed {
                group: 7,
                action: "created".into(),
                epoch: 3
            }
        );
        let cfg = b.control.table().config(GroupId(7)).unwrap();
        assert_eq!(
            cfg,
            GroupConfig::intermediate(PortIdx::new(0).unwrap(), PortSet(0b110), 500_000)
        );
        // A reduce from d1: the group collects, d1 arrived.
        b.send_reduce(2, 7, 5);
        b.run();
        let Reply::Group { group: g } = b.ok(r#"{"op":"group_show","group":7}"#) else {
            panic!()
        };
        assert_eq!(
            (
                g.phase.as_str(),
                g.seq,
                g.arrived.clone(),
                g.registers.epoch
            ),
            ("collecting", Some(5), vec!["d1".to_string()], 3)
        );
        assert_eq!(g.registers.parent.as_deref(), Some("up"));
        // Reset: the next epoch, the state forgotten.
        let r = b.ok(r#"{"op":"group_reset","group":7}"#);
        assert_eq!(
            r,
            Reply::Changed {
                group: 7,
                action: "reset".into(),
                epoch: 4
            }
        );
        let Reply::Group { group: g } = b.ok(r#"{"op":"group_show","group":7}"#) else {
            panic!()
        };
        assert_eq!(
            (g.phase.as_str(), g.seq, g.arrived.len()),
            ("unknown", None, 0)
        );
        b.ok(r#"{"op":"group_reset","group":7,"epoch":40}"#);
        assert_eq!(b.control.epoch(7), 40);
        // Set: children and timer change, parent and epoch stay.
        b.ok(r#"{"op":"group_set","group":7,"children":["d2"],"resend_timeout_ns":2000000}"#);
        assert_eq!(
            b.control.table().config(GroupId(7)).unwrap(),
            GroupConfig::intermediate(PortIdx::new(0).unwrap(), PortSet(0b1000), 2_000_000)
        );
        assert_eq!(b.control.epoch(7), 40);
        b.ok(r#"{"op":"group_set","group":7,"root":true}"#);
        assert_eq!(
            b.control.table().config(GroupId(7)).unwrap(),
            GroupConfig::root(PortSet(0b1000))
        );
        b.ok(r#"{"op":"group_set","group":7,"parent":"d0"}"#);
        assert_eq!(
            b.control.table().config(GroupId(7)).unwrap(),
            GroupConfig::intermediate(
                PortIdx::new(1).unwrap(),
                PortSet(0b1000),
                DEFAULT_RESEND_TIMEOUT_US * 1000
            )
        );
        // Listing: groups 1 and 7.
        let Reply::Groups { capacity, blocks } = b.ok(r#"{"op":"groups"}"#) else {
            panic!()
        };
        assert_eq!(capacity, 16);
        assert_eq!(
            blocks.iter().map(|b| (b.first, b.last)).collect::<Vec<_>>(),
            [(1, 1), (7, 7)]
        );
        // Delete: gone; its frames are dropped and counted.
        b.ok(r#"{"op":"group_delete","group":7}"#);
        assert_eq!(b.control.table().config(GroupId(7)), None);
        b.refused(
            r#"{"op":"group_show","group":7}"#,
            "group 7 is not configured",
        );
        b.send_reduce(3, 7, 0);
        b.run();
        assert!(b.received(0).is_empty());
        let Reply::Stats { sets } = b.ok(r#"{"op":"stats"}"#) else {
            panic!()
        };
        let port_d2 = sets.iter().find(|s| s.scope == "port d2 rx").unwrap();
        assert_eq!(port_d2.counters["drop_unknown_group"], 1, "{sets:?}");
        let total = sets.iter().find(|s| s.scope == "rx total").unwrap();
        assert_eq!(total.counters["drop_unknown_group"], 1);
        let groups = sets.iter().find(|s| s.scope == "groups").unwrap();
        assert_eq!(groups.counters["configured"], 1);
    }

    #[test]
    fn a_group_created_at_run_time_completes_barriers() {
        let mut b = bed(16);
        b.ok(r#"{"op":"group_create","group":9,"children":["d0","d2"]}"#);
        for seq in 0..3 {
            b.send_reduce(1, 9, seq);
            b.run();
            assert!(b.received(1).is_empty(), "released before d2 arrived");
            b.send_reduce(3, 9, seq);
            b.run();
            assert_eq!(b.received(1), [(Kind::Release, 9, seq)]);
            assert_eq!(b.received(3), [(Kind::Release, 9, seq)]);
        }
        let Reply::Group { group: g } = b.ok(r#"{"op":"group_show","group":9}"#) else {
            panic!()
        };
        assert_eq!((g.completions, g.seq), (3, Some(3)));
        // Group 1, configured before, untouched.
        assert_eq!(
            b.control.table().config(GroupId(1)),
            Some(GroupConfig::root(PortSet(0b110)))
        );
    }

    #[test]
    fn admission_refuses_with_the_reason_and_changes_nothing() {
        let mut b = bed(16);
        let many: Vec<String> = (0..65).map(|i| format!("\"p{i}\"")).collect();
        let create = |extra: &str| format!(r#"{{"op":"group_create","group":5,{extra}}}"#);
        for (line, why) in [
            (
                r#"{"op":"group_create","group":16,"children":["d0"]}"#.to_string(),
                "outside the table: this switch holds groups 0..16",
            ),
            (create(r#""children":["d0","p9"]"#), "unknown port \"p9\""),
            (
                create(&format!("\"children\":[{}]", many.join(","))),
                "fan-in over 64",
            ),
            (
                create(r#""children":["d0","d1"],"parent":"d1""#),
                "both a child and the parent",
            ),
            (
                create(r#""children":["d0"],"parent":"nowhere""#),
                "unknown port \"nowhere\"",
            ),
            (create(r#""children":[]"#), "at least one child"),
            (create(r#""children":["d0","d0"]"#), "listed twice"),
            (
                create(r#""children":["d0"],"parent":"up","resend_timeout_ns":0"#),
                "zero re-send timeout",
            ),
            (
                create(r#""children":["d0"],"parent":"up","resend_timeout_ns":1500"#),
                "whole microseconds",
            ),
            (
                create(r#""children":["d0"],"resend_timeout_ns":1000"#),
                "a root has no re-send timeout",
            ),
            (
                r#"{"op":"group_create","group":1,"children":["d0"]}"#.to_string(),
                "group 1 exists already (epoch 1)",
            ),
            (
                r#"{"op":"group_reset","group":3}"#.to_string(),
                "group 3 is not configured",
            ),
            (
                r#"{"op":"group_delete","group":3}"#.to_string(),
                "group 3 is not configured",
            ),
            (
                r#"{"op":"group_delete","group":99}"#.to_string(),
                "outside the table",
            ),
            (
                r#"{"op":"group_set","group":3,"children":["d0"]}"#.to_string(),
                "group 3 is not configured",
            ),
            (
                r#"{"op":"group_set","group":1}"#.to_string(),
                "nothing to change",
            ),
            (
                r#"{"op":"group_set","group":1,"root":true,"parent":"up"}"#.to_string(),
                "exclude each other",
            ),
            (
                r#"{"op":"group_set","group":1,"parent":"d0"}"#.to_string(),
                "both a child and the parent",
            ),
            (
                r#"{"op":"group_set","group":1,"children":["d0","zz"]}"#.to_string(),
                "unknown port \"zz\"",
            ),
            (
                r#"{"op":"write_back"}"#.to_string(),
                "not started from a file",
            ),
            (
                r#"{"op":"group_create","group":5,"children":["d0"],"colour":"red"}"#.to_string(),
                "unknown field `colour`",
            ),
            (
                "{\"op\":\"group_create\",\"group\":5,".to_string(),
                "bad request",
            ),
            ("gibberish".to_string(), "bad request"),
        ] {
            b.refused(&line, why);
        }
    }

    #[test]
    fn write_back_keeps_the_other_sections() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        let text = r#"# my switch
[eal]
args = ["-l", "0,1"]

[[ports]]
name = "up"
vdev = "net_ring0"

[[ports]]
name = "d0"
vdev = "net_ring1" # the first child

[[ports]]
name = "d1"
vdev = "net_ring2"

[[ports]]
name = "d2"
vdev = "net_ring3"

[lcores]
scheduler = 1
rx = [ { lcore = 0, poll = ["up", "d0", "d1", "d2"] } ]

[[groups]]
number = 1
role = "root"
children = ["d0", "d1"]

[control]
socket = "/tmp/nb-test.sock"
capacity = 16
"#;
        std::fs::write(&path, text).unwrap();
        let spec = config::load(&path).unwrap();
        let mut b = bed(16);
        b.control.file = spec.control.as_ref().unwrap().file.clone();
        b.ok(r#"{"op":"group_create","group":7,"children":["d0","d1"],"parent":"up","resend_timeout_ns":500000}"#);
        b.ok(r#"{"op":"group_create","group":8,"children":["d0","d1"],"parent":"up","resend_timeout_ns":500000}"#);
        b.ok(r#"{"op":"group_delete","group":1}"#);
        let r = b.ok(r#"{"op":"write_back"}"#);
        assert_eq!(
            r,
            Reply::WrittenBack {
                path: path.display().to_string(),
                groups: 2
            }
        );
        let new = std::fs::read_to_string(&path).unwrap();
        assert!(new.starts_with("# my switch\n[eal]"), "{new}");
        assert!(
            new.contains("vdev = \"net_ring1\" # the first child"),
            "{new}"
        );
        let spec = config::parse(&new).unwrap();
        assert_eq!(spec.groups.len(), 1, "{new}");
        assert_eq!(spec.groups[0].numbers, 7..9);
        assert_eq!(
            spec.groups[0].config,
            GroupConfig::intermediate(PortIdx::new(0).unwrap(), PortSet(0b110), 500_000)
        );
        assert_eq!(spec.control.unwrap().capacity, 16);
    }

    /// A server on a thread over `control`, stopped and joined on drop.
    struct Served {
        path: PathBuf,
        stop: Arc<AtomicBool>,
        join: Option<std::thread::JoinHandle<()>>,
        _dir: tempfile::TempDir,
    }

    fn serve(control: Control) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctl.sock");
        let mut server = ControlServer::bind(&path, control).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let join = std::thread::spawn(move || {
            while !s.load(Relaxed) {
                server.serve(Duration::from_millis(10));
            }
        });
        Served {
            path,
            stop,
            join: Some(join),
            _dir: dir,
        }
    }

    impl Drop for Served {
        fn drop(&mut self) {
            self.stop.store(true, Relaxed);
            if let Some(j) = self.join.take() {
                let _ = j.join();
            }
        }
    }

    #[test]
    fn the_socket_is_0600_and_replaces_only_a_stale_one() {
        let b = bed(4);
        let s = serve(b.control);
        let mode = std::fs::metadata(&s.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        // A second server on the same path is refused while the first listens.
        let b2 = bed(4);
        match ControlServer::bind(&s.path, b2.control) {
            Err(BindError::InUse(_)) => {}
            Err(e) => panic!("wrong refusal {e}"),
            Ok(_) => panic!("second server bound a live socket"),
        }
        // A file that is not a socket is not replaced.
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("plain");
        std::fs::write(&f, "x").unwrap();
        assert!(matches!(
            ControlServer::bind(&f, bed(4).control),
            Err(BindError::NotASocket(_))
        ));
        // A stale socket (nobody listening) is replaced; the socket goes with the server.
        let stale = dir.path().join("stale.sock");
        drop(UnixListener::bind(&stale).unwrap());
        let server = ControlServer::bind(&stale, bed(4).control).unwrap();
        assert!(stale.exists());
        drop(server);
        assert!(!stale.exists(), "the socket outlived its server");
    }

    #[test]
    fn hostile_lines_get_errors_and_the_connection_stays_usable() {
        let b = bed(4);
        let s = serve(b.control);
        let mut c = Client::connect(&s.path).unwrap();
        for (bytes, why) in [
            (&b"{not json}\n"[..], "bad request"),
            (
                b"{\"op\":\"groups\",\"extra\":1}\n",
                "unknown field `extra`",
            ),
            (b"{\"op\":\"group_show\",\"group\":2}\n", "not configured"),
            (b"\xff\xff\n", "not UTF-8"),
            (b"\n", "bad request"),
        ] {
            let r = c.raw(bytes).unwrap();
            assert!(!r.ok);
            assert!(r.error.as_ref().unwrap().contains(why), "{r:?}");
        }
        // A 1 MiB line: one error, the rest of the line skipped; then a request is answered.
        let mut huge = vec![b'x'; 1 << 20];
        huge.push(b'\n');
        let r = c.raw(&huge).unwrap();
        assert!(
            r.error
                .as_ref()
                .unwrap()
                .contains("longer than 65536 bytes"),
            "{r:?}"
        );
        let reply = c.request(&Request::GroupShow { group: 1 }).unwrap();
        assert!(matches!(reply, Reply::Group { .. }), "{reply:?}");
        // Two requests in one write: two answers, in order.
        let r1 = c
            .raw(b"{\"op\":\"groups\"}\n{\"op\":\"group_show\",\"group\":3}\n")
            .unwrap();
        assert!(r1.ok);
        let r2 = c.read_response().unwrap();
        assert!(r2.error.unwrap().contains("group 3 is not configured"));
        // A refusal through the client API is `Refused`.
        match c.request(&Request::GroupDelete { group: 3 }) {
            Err(RequestError::Refused(e)) => assert!(e.contains("not configured")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_client_that_goes_away_mid_line_is_forgotten() {
        let b = bed(4);
        let s = serve(b.control);
        {
            let mut raw = UnixStream::connect(&s.path).unwrap();
            raw.write_all(b"{\"op\":\"gro").unwrap();
        }
        let mut c = Client::connect(&s.path).unwrap();
        assert!(c.request(&Request::Groups {}).is_ok());
    }
}
