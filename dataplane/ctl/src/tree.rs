//! `barrierctl reset` and `barrierctl delete`: a planned group (the `plan --json` file that
//! `apply` takes) given a new run, or removed, on every switch of its tree.
//!
//! A run of a group is one unit: every switch of the tree in one epoch. So a reset first reaches
//! every switch and reads the group there (it must exist on each, with the plan's role, parent
//! and children), chooses one epoch for all (the one asked, else the next after the highest any
//! switch has had), checks it against every switch's epoch rules ([`crate::epoch::admit`]),
//! and only then resets, one switch after the other. A delete also reaches every switch before
//! it deletes anything, and takes a switch where the group is gone already as done.
//!
//! **Order: the root first, then parents before their children** (by depth; ties by name).
//! Any order is safe for releases: epochs keep the runs apart, a switch takes only frames of
//! the epoch it is in, and a reset switch starts the new run `unknown` with nothing recorded.
//! The order decides what the runs' frames meet on the way:
//! - reset, root first: when a switch starts taking the new run's frames, its parent is in the
//!   new run already, so its first reduce up is taken, not dropped as `drop_other_epoch` and
//!   left to the re-send timer (leaf-most first, a leaf that starts early completes the lower
//!   switches and every reduce up is dropped until the parent is reset). And the old run stops
//!   from the top: a switch whose parent moved on waits for a release that does not come, but
//!   no parent still in the old run misses a child that moved on first, so no failure deadline
//!   (`fail_after_ms`) runs out on such a child, as it can leaf-most first when a lower switch
//!   moves while its parent still gathers an old barrier.
//! - delete, root first: the mirror of `apply` (which creates the root last), so at every step
//!   the switches that hold the group are whole subtrees of the plan; the root, where every
//!   barrier completes, goes first, so no barrier completes once the delete has begun, and no
//!   parent is left gathering for a child switch that no longer answers.
//!
//! A failure midway stops there and says which switches were changed: a reset is not undone
//! (an older epoch would be a used one), the operator runs it again, which puts every switch
//! in a newer epoch.

use crate::client::{Client, ConnectError, RequestError};
use crate::epoch::{self, Admission, Change, EpochRefusal};
use crate::plan::{Plan, SwitchPlan};
use crate::proto::{GroupInfo, Reply, Request};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What happened at one switch.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub switch: String,
    /// `reset`, `deleted`, or `absent` (a delete found the group gone already).
    pub action: String,
    /// The group's epoch before the change (none when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<u32>,
    /// A reset's new epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u32>,
}

/// Why a tree reset or delete stopped.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("no socket given for switch {0:?} (--sockets {0}=PATH)")]
    MissingSocket(String),
    #[error("switch {switch:?}: {source}")]
    Connect {
        switch: String,
        #[source]
        source: ConnectError,
    },
    #[error("switch {switch:?}: {source}")]
    Request {
        switch: String,
        #[source]
        source: RequestError,
    },
    #[error("switch {switch:?}: group {group} is not configured there; a reset needs it on every switch of the plan (`barrierctl apply` creates it)")]
    NotConfigured { switch: String, group: u32 },
    #[error("switch {switch:?}: group {group} is {found} there, the plan says {planned}: the plan is not this tree's (plan it again, or fix the switch with `group set`)")]
    NotThePlan {
        switch: String,
        group: u32,
        found: String,
        planned: String,
    },
    #[error("switch {switch:?}: {refusal}{}", if refusal.next() == *tree_next { String::new() } else { format!(" (without --epoch this reset takes epoch {tree_next} on every switch)") })]
    Refused {
        switch: String,
        refusal: EpochRefusal,
        tree_next: u32,
    },
    #[error("switch {switch:?}: unexpected answer {answer}")]
    Unexpected { switch: String, answer: String },
}

/// What a tree reset or delete did, switch by switch, and where it stopped.
#[derive(Debug)]
pub struct Report {
    pub group: u32,
    /// A reset's epoch, once chosen.
    pub epoch: Option<u32>,
    /// What was done, in order.
    pub steps: Vec<Step>,
    /// The plan's switches not reached by a change because of the error (in order).
    pub left: Vec<String>,
    pub error: Option<TreeError>,
}

impl Report {
    fn new(group: u32) -> Report {
        Report {
            group,
            epoch: None,
            steps: Vec::new(),
            left: Vec::new(),
            error: None,
        }
    }

    fn fail(mut self, error: TreeError, left: Vec<String>) -> Report {
        self.error = Some(error);
        self.left = left;
        self
    }

    /// The switches whose group changed.
    pub fn changed(&self) -> Vec<&str> {
        self.steps
            .iter()
            .filter(|s| s.action != "absent")
            .map(|s| s.switch.as_str())
            .collect()
    }
}

/// The plan's switches root first, then by depth, so that every switch comes after its parent
/// (ties by name).
pub fn root_first(plan: &Plan) -> Vec<&SwitchPlan> {
    let mut v: Vec<&SwitchPlan> = plan.switches.iter().collect();
    v.sort_by(|a, b| a.depth.cmp(&b.depth).then_with(|| a.switch.cmp(&b.switch)));
    v
}

fn names(switches: &[&SwitchPlan]) -> Vec<String> {
    switches.iter().map(|s| s.switch.clone()).collect()
}

/// Connects to every switch of `order`; the first that cannot be reached stops it.
fn connect_all(
    order: &[&SwitchPlan],
    sockets: &BTreeMap<String, PathBuf>,
) -> Result<Vec<Client>, TreeError> {
    let mut clients = Vec::new();
    for sw in order {
        let path = sockets
            .get(&sw.switch)
            .ok_or_else(|| TreeError::MissingSocket(sw.switch.clone()))?;
        clients.push(Client::connect(path).map_err(|source| TreeError::Connect {
            switch: sw.switch.clone(),
            source,
        })?);
    }
    Ok(clients)
}

/// The group at one switch: `None` when it is not configured there.
fn show(c: &mut Client, switch: &str, group: u32) -> Result<Option<GroupInfo>, TreeError> {
    match c.request(&Request::GroupShow { group }) {
        Ok(Reply::Group { group: g }) => Ok(Some(g)),
        Ok(other) => Err(TreeError::Unexpected {
            switch: switch.into(),
            answer: format!("{other:?}"),
        }),
        Err(RequestError::Refused { error: e, .. }) if e.contains("is not configured") => Ok(None),
        Err(source) => Err(TreeError::Request {
            switch: switch.into(),
            source,
        }),
    }
}

/// The switch's registers against its part of the plan: role, parent and children (as sets).
fn matches_plan(g: &GroupInfo, sw: &SwitchPlan) -> Result<(), (String, String)> {
    let describe = |role: &str, parent: Option<&str>, children: &[String]| {
        let mut kids = children.to_vec();
        kids.sort();
        match parent {
            Some(p) => format!("{role} (parent {p}, children {})", kids.join(",")),
            None => format!("{role} (children {})", kids.join(",")),
        }
    };
    let r = &g.registers;
    let found = describe(r.role.as_str(), r.parent.as_deref(), &r.children);
    let planned = describe(&sw.role, sw.parent.as_deref(), &sw.children);
    if found == planned {
        Ok(())
    } else {
        Err((found, planned))
    }
}

/// Resets `plan`'s group on every switch of its tree to one new epoch: `epoch`, else the next
/// after the highest any switch has had. Nothing changes unless every switch is reached, has
/// the group as planned, and admits the epoch; then root first (see the module's words on
/// the order).
pub fn reset(
    plan: &Plan,
    sockets: &BTreeMap<String, PathBuf>,
    epoch: Option<u32>,
    force: bool,
) -> Report {
    let group = plan.group;
    let report = Report::new(group);
    let order = root_first(plan);
    let all = names(&order);
    let mut clients = match connect_all(&order, sockets) {
        Ok(c) => c,
        Err(e) => return report.fail(e, all),
    };
    // Every switch's epoch now and the highest it has had.
    let mut seen: Vec<(u32, u32)> = Vec::new();
    for (sw, c) in order.iter().zip(clients.iter_mut()) {
        let g = match show(c, &sw.switch, group) {
            Ok(Some(g)) => g,
            Ok(None) => {
                let e = TreeError::NotConfigured {
                    switch: sw.switch.clone(),
                    group,
                };
                return report.fail(e, all);
            }
            Err(e) => return report.fail(e, all),
        };
        if let Err((found, planned)) = matches_plan(&g, sw) {
            let e = TreeError::NotThePlan {
                switch: sw.switch.clone(),
                group,
                found,
                planned,
            };
            return report.fail(e, all);
        }
        let current = g.registers.epoch;
        seen.push((current, g.highest_epoch.unwrap_or(current)));
    }
    let highest = seen
        .iter()
        .map(|&(_, h)| h)
        .reduce(epoch::later)
        .expect("a plan has a switch");
    let tree_next = epoch::next_after(highest);
    let chosen = epoch.unwrap_or(tree_next);
    for (sw, &(current, h)) in order.iter().zip(&seen) {
        let admitted = epoch::admit(&Admission {
            group,
            change: Change::Reset,
            current: Some(current),
            highest: Some(h),
            asked: Some(chosen),
            default: chosen,
            force,
        });
        if let Err(refusal) = admitted {
            let e = TreeError::Refused {
                switch: sw.switch.clone(),
                refusal,
                tree_next,
            };
            return report.fail(e, all);
        }
    }
    let mut report = report;
    report.epoch = Some(chosen);
    for (i, ((sw, c), &(current, _))) in order.iter().zip(clients.iter_mut()).zip(&seen).enumerate()
    {
        let req = Request::GroupReset {
            group,
            epoch: Some(chosen),
            force,
        };
        match c.request(&req) {
            Ok(Reply::Changed { epoch, .. }) => report.steps.push(Step {
                switch: sw.switch.clone(),
                action: "reset".into(),
                from: Some(current),
                epoch: Some(epoch),
            }),
            Ok(other) => {
                let e = TreeError::Unexpected {
                    switch: sw.switch.clone(),
                    answer: format!("{other:?}"),
                };
                return report.fail(e, all[i..].to_vec());
            }
            Err(source) => {
                let e = TreeError::Request {
                    switch: sw.switch.clone(),
                    source,
                };
                return report.fail(e, all[i..].to_vec());
            }
        }
    }
    report
}

/// Deletes `plan`'s group on every switch of its tree, root first, once every switch is
/// reached; a switch where the group is gone already counts as `absent`.
pub fn delete(plan: &Plan, sockets: &BTreeMap<String, PathBuf>) -> Report {
    let group = plan.group;
    let report = Report::new(group);
    let order = root_first(plan);
    let all = names(&order);
    let mut clients = match connect_all(&order, sockets) {
        Ok(c) => c,
        Err(e) => return report.fail(e, all),
    };
    let mut present = Vec::new();
    for (sw, c) in order.iter().zip(clients.iter_mut()) {
        match show(c, &sw.switch, group) {
            Ok(g) => present.push(g.map(|g| g.registers.epoch)),
            Err(e) => return report.fail(e, all),
        }
    }
    let mut report = report;
    for (i, ((sw, c), epoch)) in order
        .iter()
        .zip(clients.iter_mut())
        .zip(present)
        .enumerate()
    {
        let absent = Step {
            switch: sw.switch.clone(),
            action: "absent".into(),
            from: None,
            epoch: None,
        };
        if epoch.is_none() {
            report.steps.push(absent);
            continue;
        }
        match c.request(&Request::GroupDelete { group }) {
            Ok(Reply::Changed { epoch, .. }) => report.steps.push(Step {
                switch: sw.switch.clone(),
                action: "deleted".into(),
                from: Some(epoch),
                epoch: None,
            }),
            // Deleted by someone else since it was looked at: gone all the same.
            Err(RequestError::Refused { error: e, .. }) if e.contains("is not configured") => {
                report.steps.push(absent)
            }
            Ok(other) => {
                let e = TreeError::Unexpected {
                    switch: sw.switch.clone(),
                    answer: format!("{other:?}"),
                };
                return report.fail(e, all[i..].to_vec());
            }
            Err(source) => {
                let e = TreeError::Request {
                    switch: sw.switch.clone(),
                    source,
                };
                return report.fail(e, all[i..].to_vec());
            }
        }
    }
    report
}
