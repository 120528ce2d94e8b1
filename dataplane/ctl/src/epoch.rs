//! The epoch rules of a group's runs: which epoch a create or a reset may put a group in. One
//! run of a group, one epoch (docs/protocol.md, "Assumptions", 2), so a new run must not take
//! an epoch an earlier run of the group used. The switch enforces these rules on each create
//! and reset (`barrier_mgmt::control`); `barrierctl reset` checks a whole tree against them
//! before it resets any switch. Both call [`admit`], so they cannot disagree.
//!
//! What a switch knows of earlier runs is the highest epoch it has had for the group number
//! since its process started ([`later`] order), kept after a delete, lost at a restart. An
//! epoch at or behind it counts as used (it may not have been, which costs a `force` at
//! most): a reset to the epoch the group is in is always refused, one to an older epoch only
//! without `force`.
//!
//! Epochs are ordered like sequence numbers (`Seq::is_ahead_of`): 32 bits, wrapping, `a`
//! ahead of `b` when `a - b` (wrapping) is in `1..2^31`.

use std::fmt;

/// True when epoch `a` is ahead of (later than) epoch `b`: `a - b` (wrapping) in `1..2^31`.
pub const fn is_ahead(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b);
    d != 0 && d < (1 << 31)
}

/// The later of two epochs; `a` when neither is ahead of the other (equal, or exactly 2^31
/// apart).
pub const fn later(a: u32, b: u32) -> u32 {
    if is_ahead(b, a) {
        b
    } else {
        a
    }
}

/// The epoch a reset without one takes: the next after the highest the group has had.
pub const fn next_after(highest: u32) -> u32 {
    highest.wrapping_add(1)
}

/// What is asked: a new group, or a new run of a configured one.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Create,
    Reset,
}

/// The group number's history at one switch, and the request.
#[derive(Copy, Clone, Debug)]
pub struct Admission {
    pub group: u32,
    pub change: Change,
    /// The group's epoch now; `None` when it is not configured (a create).
    pub current: Option<u32>,
    /// The highest epoch the switch has had for this number since it started; `None` when it
    /// never had the number.
    pub highest: Option<u32>,
    /// The epoch asked for; `None`: a create takes `default`, a reset the next after
    /// `highest`.
    pub asked: Option<u32>,
    /// A create's epoch when none is asked.
    pub default: u32,
    /// Reuse an epoch at or behind `highest` (never the current one).
    pub force: bool,
}

/// Why an epoch was refused. The texts name the group, the epochs and the way out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EpochRefusal {
    /// A reset to the epoch the group is in: the new run would take the old run's frames.
    Same {
        group: u32,
        epoch: u32,
        /// The epoch a reset without one would take.
        next: u32,
        highest: u32,
    },
    /// An epoch at or behind the highest the switch has had for the group, without force.
    Used {
        group: u32,
        change: Change,
        asked: u32,
        highest: u32,
        /// The group's epoch now (`None`: deleted since).
        current: Option<u32>,
        next: u32,
    },
}

impl fmt::Display for EpochRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EpochRefusal::Same {
                group,
                epoch,
                next,
                highest,
            } => write!(
                f,
                "group {group} is in epoch {epoch} already: a new run needs a new epoch \
                 (the old run's frames would count in this one); leave the epoch out for the \
                 next one ({next}), or give one ahead of {highest}"
            ),
            EpochRefusal::Used {
                group,
                change,
                asked,
                highest,
                current,
                next,
            } => {
                let now = match current {
                    Some(c) if c != highest => format!(" (it is in {c} now)"),
                    Some(_) => String::new(),
                    None => " (deleted since)".into(),
                };
                let fix = match change {
                    Change::Reset => format!(
                        "leave the epoch out for the next one ({next}), give one ahead of {highest}"
                    ),
                    Change::Create => format!("give one ahead of {highest} (--epoch {next})"),
                };
                write!(
                    f,
                    "group {group}: epoch {asked} is not ahead of epoch {highest}, the highest \
                     this switch has had for the group{now}: a new run needs an epoch no earlier \
                     run used; {fix}, or --force to reuse {asked} (only when no frame of its \
                     earlier run can still arrive)"
                )
            }
        }
    }
}

impl EpochRefusal {
    /// The epoch a reset without one would take at this switch.
    pub fn next(&self) -> u32 {
        match *self {
            EpochRefusal::Same { next, .. } | EpochRefusal::Used { next, .. } => next,
        }
    }
}

impl std::error::Error for EpochRefusal {}

/// The epoch the change installs, or why not.
pub fn admit(a: &Admission) -> Result<u32, EpochRefusal> {
    let epoch = match (a.asked, a.change) {
        (Some(e), _) => e,
        (None, Change::Create) => a.default,
        (None, Change::Reset) => next_after(a.highest.or(a.current).unwrap_or(a.default)),
    };
    let highest = a.highest.or(a.current);
    let next = next_after(highest.unwrap_or(epoch));
    if a.current == Some(epoch) {
        return Err(EpochRefusal::Same {
            group: a.group,
            epoch,
            next,
            highest: highest.unwrap_or(epoch),
        });
    }
    if let Some(h) = highest {
        if !is_ahead(epoch, h) && !a.force {
            return Err(EpochRefusal::Used {
                group: a.group,
                change: a.change,
                asked: epoch,
                highest: h,
                current: a.current,
                next,
            });
        }
    }
    Ok(epoch)
}

/// The highest epoch named in a switch's refusal of a used epoch (the text of
/// [`EpochRefusal::Used`]: `... is not ahead of epoch H, the highest this switch has had ...`),
/// for a client that only has the text: `barrierctl job` takes the next after it.
pub fn highest_in_refusal(text: &str) -> Option<u32> {
    let (_, rest) = text.split_once(" is not ahead of epoch ")?;
    let (h, _) = rest.split_once(", the highest this switch has had")?;
    h.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reset(current: u32, highest: u32, asked: Option<u32>, force: bool) -> Result<u32, String> {
        admit(&Admission {
            group: 7,
            change: Change::Reset,
            current: Some(current),
            highest: Some(highest),
            asked,
            default: 1,
            force,
        })
        .map_err(|e| e.to_string())
    }

    #[test]
    fn serial_order_wraps() {
        assert!(is_ahead(2, 1));
        assert!(!is_ahead(1, 1));
        assert!(!is_ahead(1, 2));
        assert!(is_ahead(0, u32::MAX));
        assert!(is_ahead(5, u32::MAX - 5));
        assert!(!is_ahead(1 << 31, 0) && !is_ahead(0, 1 << 31));
        assert_eq!(later(3, 9), 9);
        assert_eq!(later(0, u32::MAX), 0);
        assert_eq!(later(1 << 31, 0), 1 << 31);
        assert_eq!(next_after(u32::MAX), 0);
    }

    #[test]
    fn resets() {
        assert_eq!(reset(5, 5, None, false), Ok(6));
        assert_eq!(reset(3, 9, None, false), Ok(10), "ahead of the highest");
        assert_eq!(reset(u32::MAX, u32::MAX, None, false), Ok(0), "wraps");
        assert_eq!(reset(5, 5, Some(6), false), Ok(6));
        assert_eq!(reset(5, 5, Some(1000), false), Ok(1000));
        // the same epoch: refused, force or not
        for force in [false, true] {
            let e = reset(5, 5, Some(5), force).unwrap_err();
            assert_eq!(e, "group 7 is in epoch 5 already: a new run needs a new epoch (the old run's frames would count in this one); leave the epoch out for the next one (6), or give one ahead of 5");
        }
        // behind the highest: refused without force
        let e = reset(5, 5, Some(1), false).unwrap_err();
        assert_eq!(e, "group 7: epoch 1 is not ahead of epoch 5, the highest this switch has had for the group: a new run needs an epoch no earlier run used; leave the epoch out for the next one (6), give one ahead of 5, or --force to reuse 1 (only when no frame of its earlier run can still arrive)");
        assert_eq!(reset(5, 5, Some(1), true), Ok(1));
        let e = reset(1, 5, Some(3), false).unwrap_err();
        assert!(e.contains("epoch 3 is not ahead of epoch 5, the highest this switch has had for the group (it is in 1 now)"), "{e}");
        // more than 2^31 ahead is behind
        assert!(reset(5, 5, Some(5 + (1 << 31) + 1), false).is_err());
        assert!(reset(5, 5, Some(5 + (1 << 31)), false).is_err());
        assert_eq!(
            reset(5, 5, Some(5 + (1 << 31) - 1), false),
            Ok(5 + (1 << 31) - 1)
        );
    }

    #[test]
    fn creates() {
        let create = |highest: Option<u32>, asked: Option<u32>, force: bool| {
            admit(&Admission {
                group: 7,
                change: Change::Create,
                current: None,
                highest,
                asked,
                default: 1,
                force,
            })
            .map_err(|e| e.to_string())
        };
        assert_eq!(
            create(None, None, false),
            Ok(1),
            "a new number: the default"
        );
        assert_eq!(create(None, Some(9), false), Ok(9));
        assert_eq!(create(Some(4), Some(5), false), Ok(5));
        let e = create(Some(4), None, false).unwrap_err();
        assert_eq!(e, "group 7: epoch 1 is not ahead of epoch 4, the highest this switch has had for the group (deleted since): a new run needs an epoch no earlier run used; give one ahead of 4 (--epoch 5), or --force to reuse 1 (only when no frame of its earlier run can still arrive)");
        assert!(create(Some(4), Some(4), false).is_err());
        assert_eq!(create(Some(4), Some(4), true), Ok(4));
    }

    #[test]
    fn the_highest_is_read_back_from_a_used_refusal() {
        let r = admit(&Admission {
            group: 7,
            change: Change::Create,
            current: None,
            highest: Some(1_800_000_123),
            asked: Some(4),
            default: 1,
            force: false,
        })
        .unwrap_err();
        assert_eq!(highest_in_refusal(&r.to_string()), Some(1_800_000_123));
        assert_eq!(highest_in_refusal("group 7 is not configured"), None);
    }
}
