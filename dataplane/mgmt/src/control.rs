//! [`Control`]: one request against the running switch's group table and counters, one
//! answer. No socket here; the only I/O is the write-back of the configuration file.

use crate::dataplane::{Dataplane, Groups};
use crate::policer::PolicerSpec;
use crate::snapshot::Set;
use barrier_ctl::epoch::{self, Admission, Change};
use barrier_ctl::group::{self, GroupError, GroupSpec, RoleName};
use barrier_ctl::proto::{
    parse_request, CounterSet, GroupBlockInfo, GroupInfo, GroupRegisters, PortInfo, Reply, Request,
    Response, StragglerBarrier, Stragglers,
};
use barrier_protocol::switch::{GroupConfig, Phase, Role};
use barrier_protocol::{Epoch, GroupId, PortIdx};
use std::path::PathBuf;

/// The epoch a group gets when its creator does not say (as in the file: `Epoch::DEFAULT`).
pub const DEFAULT_EPOCH: u32 = Epoch::DEFAULT.get();

/// The configuration file the control socket's `write_back` rewrites: its path, and the
/// dataplane's check of a whole file (what is written must be what the dataplane accepts at its
/// next start; for the DPDK switch, `barrier_switch::config::parse`).
#[derive(Clone)]
pub struct WriteBack {
    pub path: PathBuf,
    pub check: fn(&str) -> Result<(), String>,
}

impl std::fmt::Debug for WriteBack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBack")
            .field("path", &self.path)
            .finish()
    }
}

/// A port as the control socket shows it.
#[derive(Debug, Clone)]
pub struct PortDesc {
    pub name: String,
    pub device: String,
    pub peer_mac: [u8; 6],
}

/// The deciding half: a request against the running switch's table and counters.
pub struct Control {
    dp: Box<dyn Dataplane>,
    ports: Vec<PortDesc>,
    /// The configuration file, for write-back.
    pub(crate) file: Option<WriteBack>,
    /// Per group number, the highest epoch this process has had for it (`barrier_ctl::epoch`
    /// order), `None` for a number never configured: taken from the table at start (the
    /// file's groups), raised by every create and reset, kept after a delete, lost with the
    /// process. Creates and resets are admitted against it (`epoch::admit`). One slot per
    /// number of the table, allocated once: 8 bytes a number beside the table's 64.
    highest: Box<[Option<u32>]>,
}

/// A refused request: its message and, for a refused group specification, its stable code.
#[derive(Debug)]
struct Refusal {
    code: Option<&'static str>,
    message: String,
}

impl From<String> for Refusal {
    fn from(message: String) -> Self {
        Refusal {
            code: None,
            message,
        }
    }
}

impl From<&str> for Refusal {
    fn from(message: &str) -> Self {
        message.to_string().into()
    }
}

impl From<GroupError> for Refusal {
    fn from(e: GroupError) -> Self {
        Refusal {
            code: Some(e.code()),
            message: e.to_string(),
        }
    }
}

fn mac_string(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl Control {
    /// Control over the running dataplane `dp` whose ports are `ports` (by index); `file`: the
    /// configuration file `write_back` rewrites, and how the dataplane checks it.
    pub fn new(
        dp: impl Dataplane + 'static,
        ports: Vec<PortDesc>,
        file: Option<WriteBack>,
    ) -> Control {
        let table = dp.table();
        let highest = (0..table.capacity())
            .map(|n| table.config(GroupId(n)).map(|c| c.epoch.get()))
            .collect();
        Control {
            dp: Box::new(dp),
            ports,
            file,
            highest,
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
        let out: Result<Reply, Refusal> = match req {
            Request::Groups {} => Ok(self.groups()),
            Request::GroupShow { group } => self.show(group).map_err(Refusal::from),
            Request::GroupCreate {
                group,
                children,
                parent,
                resend_timeout_ns,
                epoch,
                fail_after_ns,
                force,
            } => GroupSpec::from_socket(children, parent, resend_timeout_ns, fail_after_ns, epoch)
                .map_err(Refusal::from)
                .and_then(|spec| self.create(group, &spec, force)),
            Request::GroupReset {
                group,
                epoch,
                force,
            } => self.reset(group, epoch, force).map_err(Refusal::from),
            Request::GroupSet {
                group,
                children,
                parent,
                root,
                resend_timeout_ns,
                fail_after_ns,
            } => self.set(
                group,
                children.as_deref(),
                parent.as_deref(),
                root,
                resend_timeout_ns,
                fail_after_ns,
            ),
            Request::GroupDelete { group } => self.delete(group).map_err(Refusal::from),
            Request::GroupWatch { group } => self.watch(group, true).map_err(Refusal::from),
            Request::GroupUnwatch { group } => self.watch(group, false).map_err(Refusal::from),
            Request::Stats {} => Ok(self.stats()),
            Request::Ports {} => Ok(self.ports()),
            Request::PortShow { port } => self.port_show(&port).map_err(Refusal::from),
            Request::PortSet {
                port,
                policer_rate,
                policer_burst,
            } => self
                .port_set(&port, policer_rate, policer_burst)
                .map_err(Refusal::from),
            Request::WriteBack {} => self.write_back().map_err(Refusal::from),
        };
        match out {
            Ok(r) => Response::ok(r),
            Err(Refusal {
                code: Some(code),
                message,
            }) => Response::refused(code, message),
            Err(Refusal {
                code: None,
                message,
            }) => Response::error(message),
        }
    }

    /// The managed dataplane's groups.
    pub fn table(&self) -> &dyn Groups {
        self.dp.table()
    }

    /// The group's epoch (`DEFAULT_EPOCH` for a group that does not exist).
    pub fn epoch(&self, group: u32) -> u32 {
        self.table()
            .config(GroupId(group))
            .map_or(DEFAULT_EPOCH, |c| c.epoch.get())
    }

    /// The highest epoch this process has had for `group` (`None`: never configured).
    pub fn highest_epoch(&self, group: u32) -> Option<u32> {
        self.highest.get(group as usize).copied().flatten()
    }

    /// Notes that `group` is in `epoch` now.
    fn had(&mut self, group: u32, epoch: u32) {
        if let Some(slot) = self.highest.get_mut(group as usize) {
            *slot = Some(slot.map_or(epoch, |h| epoch::later(h, epoch)));
        }
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

    /// The switch's port names, in port-index order (what a group spec names).
    fn port_names(&self) -> Vec<&str> {
        self.ports.iter().map(|d| d.name.as_str()).collect()
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

    fn registers(&self, cfg: &GroupConfig) -> GroupRegisters {
        GroupRegisters {
            role: match cfg.role {
                Role::Root => RoleName::Root,
                Role::Intermediate { .. } => RoleName::Intermediate,
            },
            children: cfg.children.iter().map(|p| self.port_name(p)).collect(),
            parent: cfg.parent().map(|p| self.port_name(p)),
            resend_timeout_ns: match cfg.role {
                Role::Root => 0,
                Role::Intermediate { .. } => cfg.resend_timeout_ns,
            },
            epoch: cfg.epoch.get(),
            resend_max_ns: cfg.backoff.max_ns,
            resend_jitter_pct: cfg.backoff.jitter_pct,
            fail_after_ns: cfg.fail_after_ns,
        }
    }

    /// Installs `cfg` in `epoch` for `g`: one `configure`, atomic for the group (its
    /// registers, epoch and fresh state change together).
    fn install(&mut self, g: GroupId, cfg: GroupConfig, epoch: u32) -> Result<(), String> {
        self.table().configure(g, cfg.with_epoch(Epoch::new(epoch)))
    }

    /// A new group from its spec: resolved (`group::resolve`, the file's check), then its
    /// epoch admitted (`epoch::admit`).
    fn create(&mut self, group: u32, spec: &GroupSpec, force: bool) -> Result<Reply, Refusal> {
        let g = self.in_table(group)?;
        if self.table().config(g).is_some() {
            return Err(format!(
                "group {group} exists already (epoch {}): use group set, reset or delete",
                self.epoch(group)
            )
            .into());
        }
        let cfg = group::resolve(spec, &self.port_names())?;
        let epoch = spec.epoch;
        // A number this process had before is a new run of it: an epoch no run here had.
        let highest = self.highest_epoch(group);
        let epoch = epoch::admit(&Admission {
            group,
            change: Change::Create,
            current: None,
            highest,
            asked: epoch,
            default: DEFAULT_EPOCH,
            force,
        })
        .map_err(|e| e.to_string())?;
        self.install(g, cfg, epoch)?;
        self.had(group, epoch);
        if highest.is_some_and(|h| !epoch::is_ahead(epoch, h)) {
            tracing::warn!(
                group,
                epoch,
                highest,
                "control: group created in a used epoch (forced)"
            );
        }
        tracing::info!(group, epoch, "control: group created");
        Ok(Reply::Changed {
            group,
            action: "created".into(),
            epoch,
        })
    }

    fn reset(&mut self, group: u32, epoch: Option<u32>, force: bool) -> Result<Reply, String> {
        let (g, cfg) = self.configured(group)?;
        let before = cfg.epoch.get();
        let highest = self.highest_epoch(group);
        let epoch = epoch::admit(&Admission {
            group,
            change: Change::Reset,
            current: Some(before),
            highest,
            asked: epoch,
            default: DEFAULT_EPOCH,
            force,
        })
        .map_err(|e| e.to_string())?;
        self.install(g, cfg, epoch)?;
        self.had(group, epoch);
        if highest.is_some_and(|h| !epoch::is_ahead(epoch, h)) {
            tracing::warn!(
                group,
                from = before,
                epoch,
                highest,
                "control: group reset to a used epoch (forced)"
            );
        }
        tracing::info!(group, from = before, epoch, "control: group reset");
        Ok(Reply::Changed {
            group,
            action: "reset".into(),
            epoch,
        })
    }

    /// Changes a group's settings: its spec as the table holds it, the request's fields
    /// applied, resolved as a create is (`group::resolve`); the epoch stays.
    fn set(
        &mut self,
        group: u32,
        children: Option<&[String]>,
        parent: Option<&str>,
        root: bool,
        timeout_ns: Option<u64>,
        fail_after_ns: Option<u64>,
    ) -> Result<Reply, Refusal> {
        let (g, old) = self.configured(group)?;
        if children.is_none()
            && parent.is_none()
            && !root
            && timeout_ns.is_none()
            && fail_after_ns.is_none()
        {
            return Err(
                "nothing to change: give children, parent, root, a timeout or fail_after".into(),
            );
        }
        if root && parent.is_some() {
            return Err("root and parent exclude each other".into());
        }
        let names = self.port_names();
        let mut spec = GroupSpec::from_config(&old, &names);
        if let Some(c) = children {
            spec.children = c.to_vec();
        }
        if root {
            spec.role = RoleName::Root;
            spec.parent = None;
            spec.resend_timeout_us = None;
            spec.resend_max_us = None;
            spec.resend_jitter_pct = None;
        } else if let Some(p) = parent {
            spec.role = RoleName::Intermediate;
            spec.parent = Some(p.to_string());
        }
        if timeout_ns.is_some() {
            spec.resend_timeout_us = group::whole_us("resend_timeout_ns", timeout_ns)?;
        }
        if fail_after_ns.is_some() {
            spec.fail_after_us = group::whole_us("fail_after_ns", fail_after_ns)?;
            spec.fail_after_ms = None;
        }
        let cfg = group::resolve(&spec, &names)?;
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
        self.table().remove(g)?;
        tracing::info!(group, epoch, "control: group deleted");
        Ok(Reply::Changed {
            group,
            action: "deleted".into(),
            epoch,
        })
    }

    /// Starts (`on`) or stops the straggler report and per-group series of `group`.
    fn watch(&mut self, group: u32, on: bool) -> Result<Reply, String> {
        let Some(watch) = self.dp.watch().cloned() else {
            return Err("this switch watches no group: [stragglers] limit = 0 in its file, or a dataplane without a straggler watch (the XDP switch has none)".into());
        };
        let action = if on {
            self.configured(group)?;
            watch.watch(group).map_err(|e| e.to_string())?;
            "watched"
        } else {
            if !watch.unwatch(group) {
                return Err(format!("group {group} is not watched"));
            }
            "unwatched"
        };
        tracing::info!(group, action, "control: group watch changed");
        Ok(Reply::Changed {
            group,
            action: action.into(),
            epoch: self.epoch(group),
        })
    }

    fn show(&self, group: u32) -> Result<Reply, String> {
        let (g, cfg) = self.configured(group)?;
        let st = self
            .table()
            .state(g)
            .ok_or_else(|| format!("group {group} is not configured"))?;
        let counts = self.table().counts(g);
        Ok(Reply::Group {
            group: GroupInfo {
                group,
                registers: self.registers(&cfg),
                highest_epoch: self.highest_epoch(group).filter(|&h| h != cfg.epoch.get()),
                phase: st.phase.into(),
                failed: st.failure().map(|f| f.to_string()),
                seq: (st.phase != Phase::Unknown).then_some(st.seq.0),
                arrived: st.arrivals().iter().map(|p| self.port_name(p)).collect(),
                completions: counts.map_or(0, |c| c.completions),
                resends: counts.map_or(0, |c| c.resends),
                uncounted: counts.is_none(),
                stragglers: self.stragglers(group),
            },
        })
    }

    /// The straggler report of a watched group (`[stragglers] groups`), else `None`.
    fn stragglers(&self, group: u32) -> Option<Stragglers> {
        let watch = self.dp.watch()?;
        let r = watch.report(group)?;
        let w = r.lock();
        let now = watch.clock.now_ns();
        Some(Stragglers {
            waiting_ns: w
                .waiting(self.table().run(GroupId(group)))
                .map(|(_, since)| now.saturating_sub(since)),
            recent: w
                .recent
                .iter()
                .map(|b| StragglerBarrier {
                    seq: b.seq,
                    last: self.port_name(b.last_port),
                    spread_ns: b.spread_ns,
                    latency_ns: b.latency_ns,
                })
                .collect(),
        })
    }

    /// Consecutive numbers with equal registers (epoch included), in order.
    fn blocks(&self) -> Vec<(u32, u32, GroupConfig)> {
        let mut out: Vec<(u32, u32, GroupConfig)> = Vec::new();
        for n in 0..self.table().capacity() {
            let Some(cfg) = self.table().config(GroupId(n)) else {
                continue;
            };
            match out.last_mut() {
                Some(b) if b.1 + 1 == n && b.2 == cfg => b.1 = n,
                _ => out.push((n, n, cfg)),
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
                .map(|(first, last, cfg)| GroupBlockInfo {
                    first,
                    last,
                    registers: self.registers(&cfg),
                })
                .collect(),
        }
    }

    fn stats(&self) -> Reply {
        let snap = self.dp.snapshot();
        let set = |scope: String, set: Set, values: Vec<u64>| CounterSet {
            scope,
            counters: snap
                .named(set, values)
                .map(|(n, v)| (n.to_string(), v))
                .collect(),
        };
        let mut sets = vec![
            set("rx total".into(), Set::Rx, snap.total(Set::Rx)),
            set("tx total".into(), Set::Tx, snap.total(Set::Tx)),
            set(
                "scheduler".into(),
                Set::Scheduler,
                snap.total(Set::Scheduler),
            ),
        ];
        for (p, name) in snap.ports.iter().enumerate() {
            sets.push(set(
                format!("port {name} rx"),
                Set::Rx,
                snap.port(Set::Rx, p),
            ));
            sets.push(set(
                format!("port {name} tx"),
                Set::Tx,
                snap.port(Set::Tx, p),
            ));
        }
        let cap = self.table().capacity();
        let configured = (0..cap)
            .filter(|&n| self.table().config(GroupId(n)).is_some())
            .count() as u64;
        let mut counters: Vec<(String, u64)> = vec![
            ("capacity".to_string(), u64::from(cap)),
            ("configured".to_string(), configured),
        ];
        // Per-group sums only where the dataplane counts per group (both shipped ones do; one
        // that does not has its completions in the rx counters only).
        if let Some(counts) = self.table().all_counts() {
            let completions = counts.iter().map(|c| u64::from(c.completions)).sum();
            let resends = counts.iter().map(|c| u64::from(c.resends)).sum();
            counters.push(("completions".to_string(), completions));
            counters.push(("resends".to_string(), resends));
        }
        sets.push(CounterSet {
            scope: "groups".into(),
            counters: counters.into_iter().collect(),
        });
        Reply::Stats { sets }
    }

    /// One port as the control socket shows it: counters summed over its RX queues, the
    /// policer its register holds now.
    fn port_info(&self, i: usize) -> PortInfo {
        let snap = self.dp.snapshot();
        let rx = |name: &str| snap.value(Set::Rx, name, Some(i));
        let d = &self.ports[i];
        let policer = self.dp.policer(i).and_then(|r| r.get());
        PortInfo {
            index: i as u8,
            name: d.name.clone(),
            device: d.device.clone(),
            peer_mac: mac_string(d.peer_mac),
            rx_frames: rx("frames"),
            tx_frames: snap.value(Set::Tx, "frames_out", Some(i)),
            policer_rate: policer.map_or(0, |p| p.rate),
            policer_burst: policer.map_or(0, |p| p.burst),
            drop_policed: rx("drop_policed"),
        }
    }

    fn ports(&self) -> Reply {
        Reply::Ports {
            ports: (0..self.ports.len()).map(|i| self.port_info(i)).collect(),
        }
    }

    fn port_show(&self, name: &str) -> Result<Reply, String> {
        let p = self.port(name)?;
        Ok(Reply::Port {
            port: self.port_info(p.get() as usize),
        })
    }

    /// Sets a port's policer: checked as the file's `policer_rate` / `policer_burst` are (each
    /// RX queue's share at least 1 frame/s and 1 frame), then published through the port's
    /// register, which the port's RX pollers read once per burst. A refusal changes nothing.
    fn port_set(
        &mut self,
        name: &str,
        rate: Option<u64>,
        burst: Option<u64>,
    ) -> Result<Reply, String> {
        let p = self.port(name)?;
        let i = p.get() as usize;
        let register = self
            .dp
            .policer(i)
            .ok_or_else(|| {
                format!(
                    "port {name:?} has no policer register: this dataplane polices no port (the XDP switch has no policer)"
                )
            })?;
        let rate = match (rate, burst) {
            (None, None) => {
                return Err(
                    "nothing to change: give policer_rate (frames/s, 0: off) or policer_burst"
                        .into(),
                )
            }
            (Some(r), _) => r,
            (None, Some(_)) => match register.get() {
                Some(now) => now.rate,
                None => {
                    return Err(format!(
                        "port {name:?} has no policer: give policer_rate with the burst"
                    ))
                }
            },
        };
        let queues = self.dp.rx_queues(i);
        let spec = PolicerSpec::checked(rate, burst, u16::try_from(queues).unwrap_or(u16::MAX))
            .map_err(|e| format!("port {name:?}: {e}"))?;
        let generation = register.set(spec);
        tracing::info!(
            port = name,
            rate = spec.map_or(0, |s| s.rate),
            burst = spec.map_or(0, |s| s.burst),
            generation,
            "control: port policer set"
        );
        Ok(Reply::Port {
            port: self.port_info(i),
        })
    }

    /// The running groups as the file's `[[groups]]` array: each block's `GroupSpec`
    /// (`GroupSpec::from_config`), serialized by serde as the file reads it.
    fn groups_toml(&self) -> Result<(toml_edit::Item, u64), String> {
        #[derive(serde::Serialize)]
        struct File {
            groups: Vec<GroupSpec>,
        }
        let names = self.port_names();
        let mut n = 0u64;
        let groups: Vec<GroupSpec> = self
            .blocks()
            .into_iter()
            .map(|(first, last, cfg)| {
                n += u64::from(last - first) + 1;
                let mut spec = GroupSpec::from_config(&cfg, &names);
                if first == last {
                    spec.number = Some(first);
                } else {
                    spec.numbers = Some(format!("{first}..={last}"));
                }
                spec
            })
            .collect();
        if groups.is_empty() {
            return Ok((toml_edit::Item::None, 0));
        }
        let text = toml::to_string(&File { groups })
            .map_err(|e| format!("the running groups as TOML: {e}"))?;
        let doc: toml_edit::DocumentMut = text
            .parse()
            .map_err(|e| format!("the running groups as TOML: {e}"))?;
        // Fresh tables, without the positions they had in that document, so that the array
        // goes where it is inserted (after the file's other sections), not before them.
        let mut aot = toml_edit::ArrayOfTables::new();
        if let Some(parsed) = doc
            .get("groups")
            .and_then(toml_edit::Item::as_array_of_tables)
        {
            for t in parsed.iter() {
                aot.push(t.iter().map(|(k, v)| (k, v.clone())).collect());
            }
        }
        Ok((toml_edit::Item::ArrayOfTables(aot), n))
    }

    fn write_back(&self) -> Result<Reply, String> {
        let Some(WriteBack { path, check }) = &self.file else {
            return Err("this switch was not started from a file: nothing to write back".into());
        };
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut doc: toml_edit::DocumentMut = text
            .parse()
            .map_err(|e| format!("{}: no longer TOML: {e}", path.display()))?;
        let (groups, n) = self.groups_toml()?;
        doc.remove("groups");
        if !groups.is_none() {
            doc.insert("groups", groups);
        }
        let new = doc.to_string();
        // What is written must be what the switch would accept at its next start.
        check(&new).map_err(|e| {
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
