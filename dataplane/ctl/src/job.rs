//! `barrierctl job`: a job gets its own run of a group.
//!
//! One run of a group, one epoch (docs/protocol.md, "Assumptions", 2). A job launcher that
//! hands out group numbers must therefore give every job a number that no other job holds now,
//! and an epoch that no earlier run of that number used on any switch of the tree. The
//! switches alone cannot promise the second: each remembers the highest epoch it has had per
//! group number after a delete, but forgets it when its process restarts, so a switch
//! restarted between two jobs would accept the old epoch again. So the launcher keeps a
//! **state file** (JSON, locked while it is read and written): per group number the highest
//! epoch it has given, and the runs it has open (the job's id, group, epoch, plan, sockets,
//! and for `barrierctl job -- CMD` the pid and start time of the barrierctl that owns it).
//!
//! The epoch of a new run ([`choose_epoch`]): the later of the next after the state file's
//! highest for the number, and the current Unix time in seconds. The state file is the
//! guarantee; the clock is a second line for a lost state file (it is fresh as long as no
//! number got more than one run per second before). A switch that remembers a later epoch for
//! the number (an operator's run outside the state file) refuses the create, naming that
//! epoch; [`start`] then takes the next after it and tries again.
//!
//! [`start`] allocates (a number of the range free on every switch of the tree and in the
//! state file; the tree planned and created leaf-most first, [`crate::apply`]), [`stop`]
//! deletes (root first, [`crate::tree::delete`]) and forgets the run, [`stale`] lists the
//! runs whose owning barrierctl is gone (killed with SIGKILL, say) for `--cleanup`.

use crate::apply::{apply, ApplyError};
use crate::client::RequestError;
use crate::epoch;
use crate::plan::{plan, Plan, PlanRequest, Topology};
use crate::tree;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Where `barrierctl job` keeps its state unless told (`--state`).
pub const DEFAULT_STATE: &str = "/var/lib/netbarrier/jobs.json";

/// A range of group numbers to allocate from, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupRange {
    pub first: u32,
    pub last: u32,
}

impl GroupRange {
    /// `N` or `FIRST-LAST` (both included).
    pub fn parse(s: &str) -> Result<GroupRange, String> {
        let num = |t: &str| {
            t.trim().parse::<u32>().map_err(|_| {
                format!("--groups {s:?}: {t:?} is not a group number (want N or FIRST-LAST)")
            })
        };
        let (first, last) = match s.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let n = num(s)?;
                (n, n)
            }
        };
        if last < first {
            return Err(format!("--groups {s:?}: the range ends before it starts"));
        }
        Ok(GroupRange { first, last })
    }
}

/// One open run, as the state file keeps it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Run {
    pub id: String,
    pub group: u32,
    pub epoch: u32,
    pub plan: Plan,
    pub sockets: BTreeMap<String, PathBuf>,
    /// The barrierctl that owns the run (`barrierctl job -- CMD`), with its start time in
    /// clock ticks after boot (`/proc/PID/stat` field 22), so a reused pid is not taken for it.
    /// None: the run is owned by a launcher that stops it by id (`--stop`, a Slurm epilog).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
    /// Unix time the run began.
    pub started: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Owner {
    pub pid: u32,
    pub start_ticks: u64,
}

impl Owner {
    /// This process.
    pub fn me() -> Option<Owner> {
        let pid = std::process::id();
        Some(Owner {
            pid,
            start_ticks: start_ticks(pid)?,
        })
    }

    /// True while the process still runs (the same pid with the same start time).
    pub fn alive(&self) -> bool {
        start_ticks(self.pid) == Some(self.start_ticks)
    }
}

/// A process's start time after boot in clock ticks, from `/proc/PID/stat`.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The state file's content.
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// Per group number, the highest epoch given to a run of it.
    #[serde(default)]
    pub epochs: BTreeMap<u32, u32>,
    /// The open runs, by id.
    #[serde(default)]
    pub runs: BTreeMap<String, Run>,
}

/// The state file, locked for as long as this value lives.
pub struct Locked {
    path: PathBuf,
    _lock: File,
    pub state: State,
}

/// Why the state file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("state file {}: not barrierctl job's state ({source}); move it away to start afresh (and give every switch's groups of the range new epochs by hand)", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

impl Locked {
    /// Opens (creating it and its folder when missing) and locks the state file at `path`:
    /// an exclusive lock on `PATH.lock`, so concurrent barrierctls take turns.
    pub fn open(path: &Path) -> Result<Locked, StateError> {
        let io = |source| StateError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io)?;
        lock.lock().map_err(io)?;
        let state = match File::open(path) {
            Ok(mut f) => {
                let mut text = String::new();
                f.read_to_string(&mut text).map_err(io)?;
                if text.trim().is_empty() {
                    State::default()
                } else {
                    serde_json::from_str(&text).map_err(|source| StateError::Parse {
                        path: path.to_path_buf(),
                        source,
                    })?
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(io(e)),
        };
        Ok(Locked {
            path: path.to_path_buf(),
            _lock: lock,
            state,
        })
    }

    /// Writes the state back (a new file renamed over the old, so a crash leaves one or the
    /// other whole).
    pub fn save(&self) -> Result<(), StateError> {
        let io = |source| StateError::Io {
            path: self.path.clone(),
            source,
        };
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(".new");
        let mut f = File::create(&tmp).map_err(io)?;
        let mut text = serde_json::to_string_pretty(&self.state).expect("state serializes");
        text.push('\n');
        f.write_all(text.as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)
    }
}

/// The Unix time in seconds.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The epoch of a new run of a number whose highest given epoch is `highest` (None: never
/// given), at Unix time `now`: the later of the next after `highest` and `now` (as 32 bits).
pub fn choose_epoch(highest: Option<u32>, now: u64) -> u32 {
    let clock = (now as u32).max(1);
    match highest {
        Some(h) => epoch::later(epoch::next_after(h), clock),
        None => clock,
    }
}

/// What a job asks for.
#[derive(Debug, Clone)]
pub struct JobRequest {
    pub id: String,
    pub members: Vec<String>,
    pub groups: GroupRange,
    pub resend_timeout_us: u64,
    pub sockets: BTreeMap<String, PathBuf>,
    pub owner: Option<Owner>,
}

/// Why a job's group was not allocated.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error(
        "job {0:?} has a group already (group {1}); stop it first (barrierctl job --stop {0})"
    )]
    Duplicate(String, u32),
    #[error("cannot plan the job's group: {0}")]
    Plan(#[from] crate::plan::PlanError),
    #[error("no group of {first}-{last} is free on every switch of the tree ({why})")]
    NoneFree { first: u32, last: u32, why: String },
    #[error("group {group}: {source}")]
    Apply {
        group: u32,
        #[source]
        source: ApplyError,
    },
}

/// The highest epoch a switch's create refusal names (`... is not ahead of epoch H, the
/// highest this switch has had ...`, [`crate::epoch::EpochRefusal::Used`]).
fn refused_highest(e: &ApplyError) -> Option<u32> {
    let ApplyError::Create {
        source: RequestError::Refused { error, .. },
        left,
        ..
    } = e
    else {
        return None;
    };
    if !left.is_empty() {
        return None;
    }
    epoch::highest_in_refusal(error)
}

/// Allocates the job's group: the first number of the range that the state file does not
/// hold and no switch of the tree has, planned over `topo` and created on every switch of the
/// tree in a fresh epoch; the run is recorded in the state file before it returns.
pub fn start(state_path: &Path, topo: &Topology, req: &JobRequest) -> Result<Run, StartError> {
    let mut locked = Locked::open(state_path)?;
    if let Some(r) = locked.state.runs.get(&req.id) {
        return Err(StartError::Duplicate(req.id.clone(), r.group));
    }
    let mut why: Vec<String> = Vec::new();
    for group in req.groups.first..=req.groups.last {
        if let Some(r) = locked.state.runs.values().find(|r| r.group == group) {
            if why.len() < 4 {
                why.push(format!("{group}: held by job {}", r.id));
            }
            continue;
        }
        let p = plan(
            topo,
            &PlanRequest {
                group,
                epoch: None,
                members: req.members.clone(),
                resend_timeout_us: req.resend_timeout_us,
            },
        )?;
        let mut epoch = choose_epoch(locked.state.epochs.get(&group).copied(), unix_now());
        // A switch that remembers a later epoch (a run outside this state file) names it.
        let mut tries = 0;
        let created = loop {
            match apply(&p, &req.sockets, Some(epoch)) {
                Ok(_) => break true,
                Err(ApplyError::Exists { switch, .. }) => {
                    if why.len() < 4 {
                        why.push(format!("{group}: configured on {switch}"));
                    }
                    break false;
                }
                Err(e) => match refused_highest(&e) {
                    Some(h) if tries < 3 => {
                        tries += 1;
                        epoch = epoch::later(epoch::next_after(h), epoch::next_after(epoch));
                    }
                    _ => return Err(StartError::Apply { group, source: e }),
                },
            }
        };
        if !created {
            continue;
        }
        let run = Run {
            id: req.id.clone(),
            group,
            epoch,
            plan: p,
            sockets: req.sockets.clone(),
            owner: req.owner,
            started: unix_now(),
        };
        let e = locked.state.epochs.entry(group).or_insert(epoch);
        *e = epoch::later(*e, epoch);
        locked.state.runs.insert(req.id.clone(), run.clone());
        if let Err(err) = locked.save() {
            // Unrecorded, the run would be nobody's: take it down again.
            let _ = tree::delete(&run.plan, &run.sockets);
            return Err(err.into());
        }
        return Ok(run);
    }
    let mut why = why.join("; ");
    if why.is_empty() {
        why = "empty range".into();
    }
    Err(StartError::NoneFree {
        first: req.groups.first,
        last: req.groups.last,
        why,
    })
}

/// Why a run was not stopped.
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error("no open run of job {0:?} in the state file")]
    Unknown(String),
    #[error("job {id:?} (group {group}): {message}")]
    Delete {
        id: String,
        group: u32,
        message: String,
    },
}

/// Deletes the run `id`'s group on every switch of its tree (root first) and forgets the run.
/// The report says what happened at each switch. A delete that fails keeps the run in the
/// state file, so that `--stop` again (or `--cleanup`) finishes it.
pub fn stop(state_path: &Path, id: &str) -> Result<(Run, tree::Report), StopError> {
    let mut locked = Locked::open(state_path)?;
    let run = locked
        .state
        .runs
        .get(id)
        .cloned()
        .ok_or_else(|| StopError::Unknown(id.to_string()))?;
    let report = tree::delete(&run.plan, &run.sockets);
    if let Some(e) = &report.error {
        return Err(StopError::Delete {
            id: id.to_string(),
            group: run.group,
            message: format!(
                "{e}; deleted on [{}], NOT on [{}]; the run stays in the state file: run `barrierctl job --stop {id}` again",
                report.changed().join(", "),
                report.left.join(", ")
            ),
        });
    }
    locked.state.runs.remove(id);
    locked.save()?;
    Ok((run, report))
}

/// The open runs whose owning barrierctl is gone (`barrierctl job -- CMD` killed with
/// SIGKILL, or its machine restarted); runs stopped by id (Slurm's) are never stale here.
pub fn stale(state_path: &Path) -> Result<Vec<Run>, StateError> {
    let locked = Locked::open(state_path)?;
    Ok(locked
        .state
        .runs
        .values()
        .filter(|r| r.owner.is_some_and(|o| !o.alive()))
        .cloned()
        .collect())
}

/// Every open run.
pub fn runs(state_path: &Path) -> Result<Vec<Run>, StateError> {
    Ok(Locked::open(state_path)?.state.runs.into_values().collect())
}

/// The environment a run's ranks get: NETBARRIER_GROUP, NETBARRIER_EPOCH and, when given,
/// NETBARRIER_IFACE.
pub fn env(run: &Run, iface: Option<&str>) -> Vec<(&'static str, String)> {
    let mut v = vec![
        ("NETBARRIER_GROUP", run.group.to_string()),
        ("NETBARRIER_EPOCH", run.epoch.to_string()),
    ];
    if let Some(i) = iface {
        v.push(("NETBARRIER_IFACE", i.to_string()));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_ranges() {
        assert_eq!(
            GroupRange::parse("100-199").unwrap(),
            GroupRange {
                first: 100,
                last: 199
            }
        );
        assert_eq!(
            GroupRange::parse("7").unwrap(),
            GroupRange { first: 7, last: 7 }
        );
        assert!(GroupRange::parse("9-3")
            .unwrap_err()
            .contains("ends before"));
        assert!(GroupRange::parse("a-3").unwrap_err().contains("\"a\""));
    }

    #[test]
    fn an_epoch_is_after_the_state_and_not_behind_the_clock() {
        assert_eq!(choose_epoch(None, 1_800_000_000), 1_800_000_000);
        assert_eq!(choose_epoch(Some(5), 1_800_000_000), 1_800_000_000);
        // Two runs in one second: the second is after the first.
        assert_eq!(
            choose_epoch(Some(1_800_000_000), 1_800_000_000),
            1_800_000_001
        );
        // A clock set back does not take an epoch back.
        assert_eq!(
            choose_epoch(Some(1_800_000_100), 1_700_000_000),
            1_800_000_101
        );
    }

    #[test]
    fn this_process_is_alive_and_a_made_up_owner_is_not() {
        let me = Owner::me().unwrap();
        assert!(me.alive());
        let other = Owner {
            pid: me.pid,
            start_ticks: me.start_ticks + 1,
        };
        assert!(!other.alive());
    }
}
