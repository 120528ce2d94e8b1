//! `barrierctl apply`: create a planned group on every switch of its tree, leaf-most first and
//! the root last, with one epoch. Every switch is reached and checked (the group absent) before
//! the first create; a create that is refused undoes the ones before it.

use crate::client::{Client, ConnectError, RequestError};
use crate::plan::Plan;
use crate::proto::{Reply, Request};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Why a plan was not applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("no socket given for switch {0:?} (--sockets {0}=PATH)")]
    MissingSocket(String),
    #[error("switch {switch:?}: {source}")]
    Connect {
        switch: String,
        #[source]
        source: ConnectError,
    },
    #[error("switch {switch:?}: group {group} exists already (delete it, or reset it, first)")]
    Exists { switch: String, group: u32 },
    #[error("switch {switch:?}: {source}")]
    Request {
        switch: String,
        #[source]
        source: RequestError,
    },
    /// A create was refused; the creates before it were undone (`undone`), or not (`left`).
    #[error("switch {switch:?}: {source}; undone on {undone:?}{}", if left.is_empty() { String::new() } else { format!("; could NOT undo on {left:?}") })]
    Create {
        switch: String,
        #[source]
        source: RequestError,
        undone: Vec<String>,
        left: Vec<String>,
    },
}

/// Creates `plan`'s group on each switch through the socket `sockets` names for it, in
/// `epoch`, else the plan's, else the switches' default. Returns the switches in the order
/// they were configured.
pub fn apply(
    plan: &Plan,
    sockets: &BTreeMap<String, PathBuf>,
    epoch: Option<u32>,
) -> Result<Vec<String>, ApplyError> {
    let mut clients = Vec::new();
    for sw in &plan.switches {
        let path = sockets
            .get(&sw.switch)
            .ok_or_else(|| ApplyError::MissingSocket(sw.switch.clone()))?;
        let mut c = Client::connect(path).map_err(|source| ApplyError::Connect {
            switch: sw.switch.clone(),
            source,
        })?;
        match c.request(&Request::GroupShow { group: plan.group }) {
            Ok(_) => {
                return Err(ApplyError::Exists {
                    switch: sw.switch.clone(),
                    group: plan.group,
                })
            }
            Err(RequestError::Refused { error: e, .. }) if e.contains("not configured") => {}
            Err(source) => {
                return Err(ApplyError::Request {
                    switch: sw.switch.clone(),
                    source,
                })
            }
        }
        clients.push(c);
    }
    let epoch = epoch.or(plan.epoch);
    let mut done: Vec<usize> = Vec::new();
    for (i, (sw, c)) in plan.switches.iter().zip(clients.iter_mut()).enumerate() {
        let req = Request::GroupCreate {
            group: plan.group,
            children: sw.children.clone(),
            parent: sw.parent.clone(),
            resend_timeout_ns: sw.resend_timeout_us.map(|us| us.saturating_mul(1000)),
            epoch,
            fail_after_ns: None,
            force: false,
        };
        match c.request(&req) {
            Ok(Reply::Changed { .. }) => done.push(i),
            Ok(other) => {
                return Err(undo(
                    plan,
                    &mut clients,
                    &done,
                    i,
                    RequestError::refused(format!("unexpected answer {other:?}")),
                ))
            }
            Err(source) => return Err(undo(plan, &mut clients, &done, i, source)),
        }
    }
    Ok(plan.switches.iter().map(|s| s.switch.clone()).collect())
}

fn undo(
    plan: &Plan,
    clients: &mut [Client],
    done: &[usize],
    failed: usize,
    source: RequestError,
) -> ApplyError {
    let mut undone = Vec::new();
    let mut left = Vec::new();
    for &i in done.iter().rev() {
        let name = plan.switches[i].switch.clone();
        match clients[i].request(&Request::GroupDelete { group: plan.group }) {
            Ok(_) => undone.push(name),
            Err(_) => left.push(name),
        }
    }
    ApplyError::Create {
        switch: plan.switches[failed].switch.clone(),
        source,
        undone,
        left,
    }
}
