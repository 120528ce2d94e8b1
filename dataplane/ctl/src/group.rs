//! One group's specification: what the configuration file's `[[groups]]` entry, the control
//! socket's `group_create` / `group_set` and the write-back of the running groups all say about
//! a group, as one serde type ([`GroupSpec`]), and the one check that turns it into the
//! table's registers ([`resolve`]).
//!
//! - Ports are named (resolved against the switch's port list, in port-index order).
//! - Times are whole **microseconds** (the table keeps the failure deadline in µs; the file
//!   never had a finer unit). Compatibility: the file's `fail_after_ms` is still read (and
//!   written back when the deadline is whole milliseconds); the socket's `resend_timeout_ns`
//!   and `fail_after_ns` are still read and must be whole microseconds
//!   ([`GroupSpec::from_socket`]).
//! - A refusal is a [`GroupError`]: a stable snake_case [`GroupError::code`], the field of the
//!   spec it is about (`children[1]`) and a message. The file prefixes the field with the
//!   entry's key path (`groups[2].children[1]: ...`); the socket answers
//!   `{"ok":false,"code":...,"error":"children[1]: ..."}`. The same mistake reads the same
//!   after the location.

use barrier_protocol::backoff::Backoff;
use barrier_protocol::switch::{GroupConfig, Role};
use barrier_protocol::{Epoch, PortIdx, PortSet, MAX_PORTS};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The re-send timeout an intermediate group gets when the spec does not say (µs).
pub const DEFAULT_RESEND_TIMEOUT_US: u64 = 1000;
/// The most re-send jitter, percent of the wait.
pub const MAX_JITTER_PCT: u8 = 50;
/// The longest failure deadline (µs): the table keeps it in 32 bits of microseconds.
pub const MAX_FAIL_AFTER_US: u64 = GroupConfig::MAX_FAIL_AFTER_NS / 1000;

/// A group's role at one switch.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RoleName {
    Root,
    Intermediate,
}

impl RoleName {
    /// `root` or `intermediate`, as the file and the socket write it.
    pub const fn as_str(self) -> &'static str {
        match self {
            RoleName::Root => "root",
            RoleName::Intermediate => "intermediate",
        }
    }
}

impl std::fmt::Display for RoleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One group's settings at one switch: the file's `[[groups]]` entry, field for field
/// (`number` / `numbers` are the file's numbering; the socket names the group in its request
/// instead). Unknown keys are refused.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    /// File: one group number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<u32>,
    /// File: a range of numbers with these settings, `"a..b"` or `"a..=b"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numbers: Option<String>,
    pub role: RoleName,
    /// Child ports, by name.
    pub children: Vec<String>,
    /// Intermediate: the parent port, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Intermediate: re-send the reduce after this long without a release (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resend_timeout_us: Option<u64>,
    /// Intermediate: the cap of the doubling re-send wait (µs; 0 or absent: fixed period).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resend_max_us: Option<u64>,
    /// Intermediate: re-send jitter, percent of the wait (at most 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resend_jitter_pct: Option<u8>,
    /// Failure declaration deadline (µs; 0 or absent: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_after_us: Option<u64>,
    /// The same in milliseconds: the file's older key (not with `fail_after_us`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_after_ms: Option<u64>,
    /// The group's run (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u32>,
}

/// What is wrong with a spec; [`GroupError::code`] names it stably.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupErrorKind {
    NoChildren,
    TooManyChildren,
    UnknownPort,
    DuplicateChild,
    ParentIsChild,
    RootWithParent,
    MissingParent,
    RootResends,
    ZeroTimeout,
    MaxBelowTimeout,
    JitterTooHigh,
    FailAfterTooLong,
    NotWholeMicroseconds,
    ConflictingKeys,
}

impl GroupErrorKind {
    /// The stable code (docs/configuration.md, "Group errors").
    pub const fn code(self) -> &'static str {
        match self {
            GroupErrorKind::NoChildren => "no_children",
            GroupErrorKind::TooManyChildren => "too_many_children",
            GroupErrorKind::UnknownPort => "unknown_port",
            GroupErrorKind::DuplicateChild => "duplicate_child",
            GroupErrorKind::ParentIsChild => "parent_is_child",
            GroupErrorKind::RootWithParent => "root_with_parent",
            GroupErrorKind::MissingParent => "missing_parent",
            GroupErrorKind::RootResends => "root_resends",
            GroupErrorKind::ZeroTimeout => "zero_timeout",
            GroupErrorKind::MaxBelowTimeout => "max_below_timeout",
            GroupErrorKind::JitterTooHigh => "jitter_too_high",
            GroupErrorKind::FailAfterTooLong => "fail_after_too_long",
            GroupErrorKind::NotWholeMicroseconds => "not_whole_microseconds",
            GroupErrorKind::ConflictingKeys => "conflicting_keys",
        }
    }
}

/// A refused spec: the kind, the field of the spec (`children[1]`; empty: the whole entry)
/// and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupError {
    pub kind: GroupErrorKind,
    pub field: String,
    pub message: String,
}

impl GroupError {
    fn new(kind: GroupErrorKind, field: impl Into<String>, message: impl Into<String>) -> Self {
        GroupError {
            kind,
            field: field.into(),
            message: message.into(),
        }
    }

    /// The stable code, e.g. `unknown_port`.
    pub const fn code(&self) -> &'static str {
        self.kind.code()
    }
}

impl fmt::Display for GroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for GroupError {}

use GroupErrorKind as K;

fn port(ports: &[&str], field: String, name: &str) -> Result<PortIdx, GroupError> {
    ports
        .iter()
        .position(|p| *p == name)
        .and_then(|i| PortIdx::new(i as u8))
        .ok_or_else(|| {
            let mut known = ports.to_vec();
            known.sort_unstable();
            GroupError::new(
                K::UnknownPort,
                field,
                format!("unknown port {name:?} (the switch's ports: {known:?})"),
            )
        })
}

/// Nanoseconds from the socket's fields (`resend_timeout_ns`, `fail_after_ns`), as whole
/// microseconds; `field` names the socket's field in the refusal.
pub fn whole_us(field: &str, ns: Option<u64>) -> Result<Option<u64>, GroupError> {
    match ns {
        Some(n) if !n.is_multiple_of(1000) => Err(GroupError::new(
            K::NotWholeMicroseconds,
            field,
            format!("{n} ns: give whole microseconds (the table keeps µs)"),
        )),
        other => Ok(other.map(|n| n / 1000)),
    }
}

impl GroupSpec {
    /// A spec from the control socket's `group_create` fields: root without a parent,
    /// intermediate with one; the older nanosecond fields in whole microseconds.
    pub fn from_socket(
        children: Vec<String>,
        parent: Option<String>,
        resend_timeout_ns: Option<u64>,
        fail_after_ns: Option<u64>,
        epoch: Option<u32>,
    ) -> Result<GroupSpec, GroupError> {
        Ok(GroupSpec {
            number: None,
            numbers: None,
            role: if parent.is_some() {
                RoleName::Intermediate
            } else {
                RoleName::Root
            },
            children,
            parent,
            resend_timeout_us: whole_us("resend_timeout_ns", resend_timeout_ns)?,
            resend_max_us: None,
            resend_jitter_pct: None,
            fail_after_us: whole_us("fail_after_ns", fail_after_ns)?,
            fail_after_ms: None,
            epoch,
        })
    }

    /// The spec of registers the table holds, ports named by `ports` (index order). Times in
    /// µs (rounded down); `fail_after_ms` when the deadline is whole milliseconds (what older
    /// switches read), else `fail_after_us`.
    pub fn from_config(cfg: &GroupConfig, ports: &[&str]) -> GroupSpec {
        let name = |p: PortIdx| {
            ports
                .get(p.get() as usize)
                .map_or_else(|| p.to_string(), |s| s.to_string())
        };
        let inter = matches!(cfg.role, Role::Intermediate { .. });
        let nz = |v: u64| (v != 0).then_some(v);
        let fail_us = cfg.fail_after_ns / 1000;
        let (fail_after_ms, fail_after_us) = match fail_us {
            0 => (None, None),
            us if us.is_multiple_of(1000) => (Some(us / 1000), None),
            us => (None, Some(us)),
        };
        GroupSpec {
            number: None,
            numbers: None,
            role: if inter {
                RoleName::Intermediate
            } else {
                RoleName::Root
            },
            children: cfg.children.iter().map(name).collect(),
            parent: cfg.parent().map(name),
            resend_timeout_us: inter.then_some(cfg.resend_timeout_ns / 1000),
            resend_max_us: if inter {
                nz(cfg.backoff.max_ns / 1000)
            } else {
                None
            },
            resend_jitter_pct: if inter {
                (cfg.backoff.jitter_pct != 0).then_some(cfg.backoff.jitter_pct)
            } else {
                None
            },
            fail_after_us,
            fail_after_ms,
            epoch: (cfg.epoch != Epoch::DEFAULT).then_some(cfg.epoch.get()),
        }
    }

    /// The failure deadline in µs, from whichever key gave it.
    fn fail_after(&self) -> Result<u64, GroupError> {
        match (self.fail_after_us, self.fail_after_ms) {
            (Some(_), Some(_)) => Err(GroupError::new(
                K::ConflictingKeys,
                "fail_after_ms",
                "give fail_after_us or fail_after_ms, not both",
            )),
            (Some(us), None) => Ok(us),
            (None, Some(ms)) => {
                let field = "fail_after_ms";
                ms.checked_mul(1000)
                    .filter(|&us| us <= MAX_FAIL_AFTER_US)
                    .ok_or_else(|| too_long(field, ms, MAX_FAIL_AFTER_US / 1000))
            }
            (None, None) => Ok(0),
        }
    }
}

fn too_long(field: &str, v: u64, max: u64) -> GroupError {
    GroupError::new(
        K::FailAfterTooLong,
        field,
        format!("{v}: at most {max} (about 71 minutes: the table keeps microseconds in 32 bits)"),
    )
}

/// The one check of a group's settings: `spec` against the switch's ports (by name, in
/// port-index order) into the table's registers. Every rule of the file and the socket is
/// here; the first broken one is the refusal.
pub fn resolve(spec: &GroupSpec, ports: &[&str]) -> Result<GroupConfig, GroupError> {
    if spec.children.is_empty() {
        return Err(GroupError::new(
            K::NoChildren,
            "children",
            "a group needs at least one child port",
        ));
    }
    if spec.children.len() > MAX_PORTS {
        return Err(GroupError::new(
            K::TooManyChildren,
            "children",
            format!(
                "{} children, a group has at most {MAX_PORTS}",
                spec.children.len()
            ),
        ));
    }
    let mut children = PortSet::empty();
    for (j, c) in spec.children.iter().enumerate() {
        let field = format!("children[{j}]");
        let p = port(ports, field.clone(), c)?;
        if children.contains(p) {
            return Err(GroupError::new(
                K::DuplicateChild,
                field,
                format!("port {c:?} listed twice"),
            ));
        }
        children.insert(p);
    }
    let role = match (spec.role, &spec.parent) {
        (RoleName::Root, None) => Role::Root,
        (RoleName::Root, Some(_)) => {
            return Err(GroupError::new(
                K::RootWithParent,
                "parent",
                "a root group has no parent port",
            ))
        }
        (RoleName::Intermediate, None) => {
            return Err(GroupError::new(
                K::MissingParent,
                "parent",
                "an intermediate group needs its parent port",
            ))
        }
        (RoleName::Intermediate, Some(name)) => {
            let p = port(ports, "parent".into(), name)?;
            if children.contains(p) {
                return Err(GroupError::new(
                    K::ParentIsChild,
                    "parent",
                    format!("port {name:?} is both a child and the parent"),
                ));
            }
            Role::Intermediate { parent: p }
        }
    };
    if role == Role::Root {
        for (k, set) in [
            ("resend_timeout_us", spec.resend_timeout_us.is_some()),
            ("resend_max_us", spec.resend_max_us.is_some()),
            ("resend_jitter_pct", spec.resend_jitter_pct.is_some()),
        ] {
            if set {
                return Err(GroupError::new(
                    K::RootResends,
                    k,
                    "a root does not re-send (re-send settings are for intermediates)",
                ));
            }
        }
    }
    let timeout_us = match spec.resend_timeout_us {
        Some(0) => {
            return Err(GroupError::new(
                K::ZeroTimeout,
                "resend_timeout_us",
                "a zero timeout would re-send forever",
            ))
        }
        Some(t) => t,
        None => DEFAULT_RESEND_TIMEOUT_US,
    };
    let max_us = spec.resend_max_us.unwrap_or(0);
    if max_us != 0 && max_us < timeout_us {
        return Err(GroupError::new(
            K::MaxBelowTimeout,
            "resend_max_us",
            format!("the cap {max_us} us is below resend_timeout_us ({timeout_us} us)"),
        ));
    }
    let jitter_pct = spec.resend_jitter_pct.unwrap_or(0);
    if jitter_pct > MAX_JITTER_PCT {
        return Err(GroupError::new(
            K::JitterTooHigh,
            "resend_jitter_pct",
            format!("{jitter_pct}: jitter is at most {MAX_JITTER_PCT} (percent of the wait)"),
        ));
    }
    let fail_after_us = spec.fail_after()?;
    if fail_after_us > MAX_FAIL_AFTER_US {
        return Err(too_long("fail_after_us", fail_after_us, MAX_FAIL_AFTER_US));
    }
    let cfg = GroupConfig {
        role,
        children,
        resend_timeout_ns: match role {
            Role::Root => 0,
            Role::Intermediate { .. } => timeout_us.saturating_mul(1000),
        },
        epoch: spec.epoch.map_or(Epoch::DEFAULT, Epoch),
        backoff: Backoff {
            max_ns: max_us.saturating_mul(1000),
            jitter_pct,
        },
        fail_after_ns: fail_after_us * 1000,
    };
    debug_assert!(
        cfg.validate().is_ok(),
        "resolve covers the table's own check"
    );
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PORTS: &[&str] = &["up", "d0", "d1"];

    fn spec() -> GroupSpec {
        GroupSpec::from_socket(
            vec!["d0".into(), "d1".into()],
            Some("up".into()),
            Some(200_000),
            None,
            None,
        )
        .unwrap()
    }

    #[test]
    fn a_good_spec_resolves_and_round_trips_through_the_table() {
        let mut s = spec();
        s.resend_max_us = Some(3200);
        s.resend_jitter_pct = Some(25);
        s.fail_after_ms = Some(750);
        s.epoch = Some(4);
        let cfg = resolve(&s, PORTS).unwrap();
        assert_eq!(cfg.resend_timeout_ns, 200_000);
        assert_eq!(cfg.fail_after_ns, 750_000_000);
        assert_eq!(cfg.epoch, Epoch(4));
        let back = GroupSpec::from_config(&cfg, PORTS);
        assert_eq!(back, s);
        assert_eq!(resolve(&back, PORTS).unwrap(), cfg);
        // A deadline that is not whole milliseconds goes back in µs.
        let odd = cfg.with_fail_after(1_500_000);
        let back = GroupSpec::from_config(&odd, PORTS);
        assert_eq!((back.fail_after_us, back.fail_after_ms), (Some(1500), None));
        assert_eq!(resolve(&back, PORTS).unwrap(), odd);
    }

    #[test]
    fn every_rule_has_its_code_and_field() {
        type Edit = Box<dyn Fn(&mut GroupSpec)>;
        let cases: Vec<(Edit, &str, &str)> = vec![
            (Box::new(|s| s.children.clear()), "no_children", "children"),
            (
                Box::new(|s| s.children = vec!["d0".into(); 65]),
                "too_many_children",
                "children",
            ),
            (
                Box::new(|s| s.children[1] = "x".into()),
                "unknown_port",
                "children[1]",
            ),
            (
                Box::new(|s| s.children[1] = "d0".into()),
                "duplicate_child",
                "children[1]",
            ),
            (
                Box::new(|s| s.parent = Some("d1".into())),
                "parent_is_child",
                "parent",
            ),
            (
                Box::new(|s| s.parent = Some("x".into())),
                "unknown_port",
                "parent",
            ),
            (
                Box::new(|s| {
                    s.role = RoleName::Root;
                    s.parent = None;
                }),
                "root_resends",
                "resend_timeout_us",
            ),
            (
                Box::new(|s| {
                    s.role = RoleName::Root;
                    s.resend_timeout_us = None;
                }),
                "root_with_parent",
                "parent",
            ),
            (Box::new(|s| s.parent = None), "missing_parent", "parent"),
            (
                Box::new(|s| s.resend_timeout_us = Some(0)),
                "zero_timeout",
                "resend_timeout_us",
            ),
            (
                Box::new(|s| s.resend_max_us = Some(100)),
                "max_below_timeout",
                "resend_max_us",
            ),
            (
                Box::new(|s| s.resend_jitter_pct = Some(51)),
                "jitter_too_high",
                "resend_jitter_pct",
            ),
            (
                Box::new(|s| s.fail_after_ms = Some(MAX_FAIL_AFTER_US / 1000 + 1)),
                "fail_after_too_long",
                "fail_after_ms",
            ),
            (
                Box::new(|s| s.fail_after_us = Some(MAX_FAIL_AFTER_US + 1)),
                "fail_after_too_long",
                "fail_after_us",
            ),
            (
                Box::new(|s| {
                    s.fail_after_us = Some(1);
                    s.fail_after_ms = Some(1);
                }),
                "conflicting_keys",
                "fail_after_ms",
            ),
        ];
        for (edit, code, field) in cases {
            let mut s = spec();
            edit(&mut s);
            let e = resolve(&s, PORTS).unwrap_err();
            assert_eq!((e.code(), e.field.as_str()), (code, field), "{e}");
        }
        let e = GroupSpec::from_socket(vec!["d0".into()], Some("up".into()), Some(1), None, None)
            .unwrap_err();
        assert_eq!(e.code(), "not_whole_microseconds");
        assert_eq!(
            e.to_string(),
            "resend_timeout_ns: 1 ns: give whole microseconds (the table keeps µs)"
        );
    }
}
