//! The control socket's protocol: one JSON object per line each way. A request names its
//! operation in `op`; the answer is `{"ok":true,"result":{...}}` or `{"ok":false,"error":"..."}`;
//! a refused group's settings also carry a stable `code` (`{"ok":false,"code":"unknown_port",
//! "error":"children[1]: ..."}`: [`crate::group`]); clients that do not know `code` ignore it.
//! Unknown fields are refused (`deny_unknown_fields`), so a typo is an error, never a default.
//!
//! ```text
//! {"op":"group_create","group":7,"children":["p1","p2"],"parent":"p0","resend_timeout_ns":500000,"epoch":3}
//! {"ok":true,"result":{"kind":"changed","group":7,"action":"created","epoch":3}}
//! ```
//!
//! The switch serves it (`barrier_mgmt::control`); `barrierctl` and [`crate::client`] speak it.

use crate::group::RoleName;
use barrier_protocol::switch::Phase;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The longest request line the switch reads (bytes, newline excluded). A longer one is
/// answered with an error and skipped up to its newline; the connection stays usable.
pub const MAX_REQUEST_LINE: usize = 64 * 1024;

/// The longest response line a client reads: a `groups` listing of a table where every
/// group differs can be long.
pub const MAX_RESPONSE_LINE: usize = 256 << 20;

/// Where `barrierctl` looks for the switch when not told (`--socket`).
pub const DEFAULT_SOCKET: &str = "/run/netbarrier/switch.sock";

/// One request.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Every configured group, as blocks of consecutive numbers with one configuration.
    /// (The operations without arguments are empty struct variants: serde refuses unknown
    /// fields only in those, not in unit variants.)
    Groups {},
    /// One group: configuration, epoch, state, counters.
    GroupShow { group: u32 },
    /// A new group. Root without `parent`, intermediate with it.
    GroupCreate {
        group: u32,
        children: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<String>,
        /// Intermediate re-send timeout; the switch's default when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resend_timeout_ns: Option<u64>,
        /// The run of the group; the switch's default (1) when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        epoch: Option<u32>,
        /// Failure declaration: a child silent this long after its first sibling reported is
        /// declared failed and the group aborted. Absent or 0: never.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fail_after_ns: Option<u64>,
        /// For a number this switch had before (deleted since): allow an epoch at or behind the
        /// highest it had ([`crate::epoch`]). Absent: false.
        #[serde(default, skip_serializing_if = "is_false")]
        force: bool,
    },
    /// A new run of the group: state back to unknown, a new epoch (unless given, the next
    /// after the highest this switch has had for the group). Never the epoch it is in; one at
    /// or behind the highest only with `force` ([`crate::epoch`]).
    GroupReset {
        group: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        epoch: Option<u32>,
        /// Allow an epoch at or behind the highest this switch has had for the group (not the
        /// current one). Absent: false.
        #[serde(default, skip_serializing_if = "is_false")]
        force: bool,
    },
    /// Change a group's registers; what is absent stays. `root: true` makes an intermediate
    /// the root; `parent` makes it an intermediate with that parent.
    GroupSet {
        group: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        children: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<String>,
        #[serde(default, skip_serializing_if = "is_false")]
        root: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resend_timeout_ns: Option<u64>,
        /// Failure declaration deadline; 0 turns it off.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fail_after_ns: Option<u64>,
    },
    /// Remove a group: its frames are dropped and counted (`drop_unknown_group`).
    GroupDelete { group: u32 },
    /// Start a straggler report and per-group Prometheus series for a configured group, up to
    /// the switch's `[stragglers] limit`.
    GroupWatch { group: u32 },
    /// Stop them and drop the group's report.
    GroupUnwatch { group: u32 },
    /// Every counter, switch-wide and per port.
    Stats {},
    /// The switch's ports.
    Ports {},
    /// One port: device, frames in and out, its policer and the frames it dropped.
    PortShow { port: String },
    /// Set a port's policer while the switch runs: `policer_rate` barrier frames/s (0: off),
    /// `policer_burst` frames (absent: `rate / 100`, at least 64; with the rate absent, the
    /// burst of the policer in force changes). Each of the port's RX queues takes it at its
    /// next received burst, with a full bucket.
    PortSet {
        port: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policer_rate: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policer_burst: Option<u64>,
    },
    /// Write the running groups into the switch's configuration file (other sections kept).
    WriteBack {},
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Request {
    /// One line of the protocol, newline included.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("requests serialize");
        s.push('\n');
        s
    }
}

/// One answer.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With `error`, for a refused group specification: its stable code
    /// ([`crate::group::GroupErrorKind::code`]). Absent for other refusals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Reply>,
}

impl Response {
    pub fn ok(result: Reply) -> Self {
        Response {
            ok: true,
            error: None,
            code: None,
            result: Some(result),
        }
    }

    pub fn error(msg: impl Into<String>) -> Self {
        Response {
            ok: false,
            error: Some(msg.into()),
            code: None,
            result: None,
        }
    }

    /// A refusal with its stable code (a group specification's [`crate::group::GroupError`]).
    pub fn refused(code: &str, msg: impl Into<String>) -> Self {
        Response {
            code: Some(code.to_string()),
            ..Response::error(msg)
        }
    }

    /// One line of the protocol, newline included.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("responses serialize");
        s.push('\n');
        s
    }
}

/// What a successful request returns.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
// One reply per request on the management path: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Reply {
    Groups {
        /// The table's capacity: groups `0..capacity` can exist.
        capacity: u32,
        blocks: Vec<GroupBlockInfo>,
    },
    Group {
        group: GroupInfo,
    },
    /// A create, reset, set or delete was applied.
    Changed {
        group: u32,
        /// `created`, `reset`, `changed` or `deleted`.
        action: String,
        /// The group's epoch after the change (before it, for a delete).
        epoch: u32,
    },
    Stats {
        sets: Vec<CounterSet>,
    },
    Ports {
        ports: Vec<PortInfo>,
    },
    /// One port (`port_show`, and `port_set` with the policer now in force).
    Port {
        port: PortInfo,
    },
    WrittenBack {
        path: String,
        /// Group numbers written.
        groups: u64,
    },
}

/// A group's registers as names: what `[[groups]]` holds. (Answers use `flatten`, which
/// serde cannot combine with `deny_unknown_fields`; requests never flatten.)
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct GroupRegisters {
    /// `root` or `intermediate`.
    pub role: RoleName,
    pub children: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Intermediate re-send timeout (0 at the root).
    pub resend_timeout_ns: u64,
    pub epoch: u32,
    /// Intermediate: the cap of the re-send backoff (0: no backoff).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resend_max_ns: u64,
    /// Intermediate: re-send jitter, percent of the wait.
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub resend_jitter_pct: u8,
    /// Failure declaration deadline (0: never).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fail_after_ns: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero_u8(v: &u8) -> bool {
    *v == 0
}

/// Consecutive group numbers with the same registers.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct GroupBlockInfo {
    /// First number.
    pub first: u32,
    /// Last number (included).
    pub last: u32,
    #[serde(flatten)]
    pub registers: GroupRegisters,
}

/// One group at this switch.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    pub group: u32,
    #[serde(flatten)]
    pub registers: GroupRegisters,
    /// The highest epoch this switch has had for the group number since it started, when it
    /// is not the current one (a reset to an older epoch was forced): a reset without an
    /// epoch goes past it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_epoch: Option<u32>,
    /// `unknown`, `collecting`, `awaiting_release` or `aborted`.
    pub phase: PhaseName,
    /// Aborted: who was declared failed ("port P of switch MAC").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// The current barrier's sequence number; none while `unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u32>,
    /// Children whose reduce for `seq` was recorded, by port name.
    pub arrived: Vec<String>,
    /// Completions at this switch since it started (per group number, across runs).
    pub completions: u32,
    /// Re-sends (timer re-sends up, releases again for stale reduces) since it started.
    pub resends: u32,
    /// The dataplane does not count per group (its `Dataplane::counts` gives none; both
    /// shipped dataplanes count): `completions` and `resends` are 0 and say nothing; its
    /// totals are in `stats`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub uncounted: bool,
    /// Straggler report, for a group the switch watches (`[stragglers] groups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stragglers: Option<Stragglers>,
}

/// Where a group's barrier stands, as the socket names it (`Phase::name`).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PhaseName {
    Unknown,
    Collecting,
    AwaitingRelease,
    Aborted,
}

impl PhaseName {
    /// The name on the wire: `unknown`, `collecting`, `awaiting_release`, `aborted`.
    pub const fn as_str(self) -> &'static str {
        match self {
            PhaseName::Unknown => "unknown",
            PhaseName::Collecting => "collecting",
            PhaseName::AwaitingRelease => "awaiting_release",
            PhaseName::Aborted => "aborted",
        }
    }
}

impl From<Phase> for PhaseName {
    fn from(p: Phase) -> Self {
        match p {
            Phase::Unknown => PhaseName::Unknown,
            Phase::Collecting => PhaseName::Collecting,
            Phase::AwaitingRelease => PhaseName::AwaitingRelease,
            Phase::Aborted => PhaseName::Aborted,
        }
    }
}

/// Who holds a watched group back (docs/operations.md, "Observing a running switch").
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Stragglers {
    /// The barrier in progress: how long since its first reduce arrived (the missing
    /// children are the group's children not in `arrived`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_ns: Option<u64>,
    /// Recent completed barriers, oldest first.
    pub recent: Vec<StragglerBarrier>,
}

/// One completed barrier of a watched group.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StragglerBarrier {
    pub seq: u32,
    /// The child whose reduce arrived last.
    pub last: String,
    /// Last arrival minus first, ns.
    pub spread_ns: u64,
    /// First arrival to the release decision, ns; none while an intermediate waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<u64>,
}

/// Counters of one scope (`rx total`, `port d0 tx`, ...), by name.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CounterSet {
    pub scope: String,
    pub counters: BTreeMap<String, u64>,
}

/// One port of the switch.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PortInfo {
    /// Switch-local port number (the position in the file's `[[ports]]`).
    pub index: u8,
    pub name: String,
    /// `vdev:...` or `pci:...`.
    pub device: String,
    pub peer_mac: String,
    pub rx_frames: u64,
    pub tx_frames: u64,
    /// The port's policer: barrier frames/s let through (0: no policer).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub policer_rate: u64,
    /// The policer's burst, frames (0: no policer).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub policer_burst: u64,
    /// Barrier frames the policer dropped (`drop_policed`), since the switch started.
    #[serde(default)]
    pub drop_policed: u64,
}

/// A request line that is not a request, as the switch words it.
pub fn parse_request(line: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(line).map_err(|e| format!("request is not UTF-8: {e}"))?;
    serde_json::from_str(text.trim_end_matches('\r')).map_err(|e| format!("bad request: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip_request(r: Request) {
        let line = r.to_line();
        assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
        assert_eq!(
            parse_request(line.trim_end().as_bytes()).unwrap(),
            r,
            "{line}"
        );
    }

    #[test]
    fn requests_round_trip() {
        round_trip_request(Request::Groups {});
        round_trip_request(Request::GroupShow { group: 7 });
        round_trip_request(Request::GroupCreate {
            group: 7,
            children: vec!["p1".into(), "p2".into()],
            parent: Some("p0".into()),
            resend_timeout_ns: Some(500_000),
            epoch: Some(3),
            fail_after_ns: None,
            force: false,
        });
        round_trip_request(Request::GroupCreate {
            group: 0,
            children: vec!["p1".into()],
            parent: None,
            resend_timeout_ns: None,
            epoch: None,
            fail_after_ns: None,
            force: true,
        });
        round_trip_request(Request::GroupReset {
            group: 1,
            epoch: None,
            force: false,
        });
        round_trip_request(Request::GroupReset {
            group: 1,
            epoch: Some(9),
            force: true,
        });
        round_trip_request(Request::GroupSet {
            group: 2,
            children: Some(vec!["a".into()]),
            parent: None,
            root: true,
            resend_timeout_ns: Some(1),
            fail_after_ns: None,
        });
        round_trip_request(Request::GroupDelete { group: 3 });
        round_trip_request(Request::GroupWatch { group: 3 });
        round_trip_request(Request::GroupUnwatch { group: 3 });
        round_trip_request(Request::Stats {});
        round_trip_request(Request::Ports {});
        round_trip_request(Request::PortShow { port: "d0".into() });
        round_trip_request(Request::PortSet {
            port: "d0".into(),
            policer_rate: Some(50_000),
            policer_burst: Some(500),
        });
        round_trip_request(Request::PortSet {
            port: "up".into(),
            policer_rate: Some(0),
            policer_burst: None,
        });
        round_trip_request(Request::PortSet {
            port: "up".into(),
            policer_rate: None,
            policer_burst: Some(64),
        });
        round_trip_request(Request::WriteBack {});
    }

    #[test]
    fn the_documented_line_parses() {
        let r = parse_request(
            br#"{"op":"group_create","group":7,"children":["p1","p2"],"parent":"p0","resend_timeout_ns":500000,"epoch":3}"#,
        )
        .unwrap();
        assert_eq!(
            r,
            Request::GroupCreate {
                group: 7,
                children: vec!["p1".into(), "p2".into()],
                parent: Some("p0".into()),
                resend_timeout_ns: Some(500_000),
                epoch: Some(3),
                fail_after_ns: None,
                force: false,
            }
        );
        assert_eq!(
            parse_request(b"{\"op\":\"groups\"}\r").unwrap(),
            Request::Groups {}
        );
    }

    /// `force` and `highest_epoch` came later: lines without them still parse (an older
    /// client, an older switch), and a request that does not force is written without the
    /// field, so an older switch (which refuses unknown fields) still takes it.
    #[test]
    fn the_epoch_fields_are_optional_both_ways() {
        assert_eq!(
            parse_request(br#"{"op":"group_reset","group":7}"#).unwrap(),
            Request::GroupReset {
                group: 7,
                epoch: None,
                force: false
            }
        );
        assert_eq!(
            parse_request(br#"{"op":"group_reset","group":7,"epoch":3,"force":true}"#).unwrap(),
            Request::GroupReset {
                group: 7,
                epoch: Some(3),
                force: true
            }
        );
        assert_eq!(
            parse_request(br#"{"op":"group_create","group":7,"children":["a"]}"#).unwrap(),
            Request::GroupCreate {
                group: 7,
                children: vec!["a".into()],
                parent: None,
                resend_timeout_ns: None,
                epoch: None,
                fail_after_ns: None,
                force: false,
            }
        );
        let line = Request::GroupReset {
            group: 7,
            epoch: Some(3),
            force: false,
        }
        .to_line();
        assert_eq!(line, "{\"op\":\"group_reset\",\"group\":7,\"epoch\":3}\n");
        let e = parse_request(br#"{"op":"group_reset","group":7,"force":"yes"}"#).unwrap_err();
        assert!(e.contains("invalid type"), "{e}");
        // A switch's answer without highest_epoch (an older switch, or one whose group is in
        // its highest epoch): none.
        let old = r#"{"ok":true,"result":{"kind":"group","group":{"group":7,"role":"root","children":["a"],"resend_timeout_ns":0,"epoch":4,"phase":"unknown","arrived":[],"completions":0,"resends":0}}}"#;
        let r: Response = serde_json::from_str(old).unwrap();
        let Some(Reply::Group { group: g }) = r.result else {
            panic!("{r:?}")
        };
        assert_eq!((g.registers.epoch, g.highest_epoch), (4, None));
    }

    #[test]
    fn hostile_requests_are_errors() {
        for (line, want) in [
            (&br#"{"op":"groups","x":1}"#[..], "unknown field `x`"),
            (
                br#"{"op":"group_show","group":7,"verbose":true}"#,
                "unknown field `verbose`",
            ),
            (br#"{"op":"stats","all":1}"#, "unknown field `all`"),
            (
                br#"{"op":"write_back","path":"/etc/passwd"}"#,
                "unknown field `path`",
            ),
            (br#"{"op":"group_show"}"#, "missing field `group`"),
            (br#"{"op":"port_show"}"#, "missing field `port`"),
            (
                br#"{"op":"port_set","port":"d0","policer_rate":-1}"#,
                "invalid value",
            ),
            (
                br#"{"op":"port_set","port":"d0","rate":5}"#,
                "unknown field `rate`",
            ),
            (br#"{"op":"group_show","group":-1}"#, "invalid value"),
            (
                br#"{"op":"group_show","group":4294967296}"#,
                "invalid value",
            ),
            (br#"{"op":"format_disk"}"#, "unknown variant `format_disk`"),
            (br#"{"group":7}"#, "missing field `op`"),
            (b"not json", "bad request"),
            (b"{\"op\":", "bad request"),
            (b"[1,2,3]", "bad request"),
            (b"\xff\xfe", "not UTF-8"),
            (b"", "bad request"),
        ] {
            let e = parse_request(line).unwrap_err();
            assert!(
                e.contains(want),
                "{:?}: {e:?} lacks {want:?}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn responses_round_trip() {
        let regs = GroupRegisters {
            role: RoleName::Intermediate,
            children: vec!["d0".into(), "d1".into()],
            parent: Some("up".into()),
            resend_timeout_ns: 1_000_000,
            epoch: 4,
            resend_max_ns: 8_000_000,
            resend_jitter_pct: 20,
            fail_after_ns: 0,
        };
        for resp in [
            Response::error("group 9 is not configured"),
            Response::ok(Reply::Changed {
                group: 7,
                action: "created".into(),
                epoch: 1,
            }),
            Response::ok(Reply::Group {
                group: GroupInfo {
                    group: 7,
                    registers: regs.clone(),
                    highest_epoch: Some(9),
                    phase: PhaseName::Collecting,
                    failed: None,
                    seq: Some(12),
                    arrived: vec!["d1".into()],
                    completions: 12,
                    resends: 0,
                    uncounted: false,
                    stragglers: Some(Stragglers {
                        waiting_ns: Some(1_500_000),
                        recent: vec![StragglerBarrier {
                            seq: 11,
                            last: "d2".into(),
                            spread_ns: 42_000,
                            latency_ns: Some(45_000),
                        }],
                    }),
                },
            }),
            Response::ok(Reply::Groups {
                capacity: 1024,
                blocks: vec![GroupBlockInfo {
                    first: 0,
                    last: 999,
                    registers: regs,
                }],
            }),
            Response::ok(Reply::Stats {
                sets: vec![CounterSet {
                    scope: "rx total".into(),
                    counters: [("frames".to_string(), 3)].into_iter().collect(),
                }],
            }),
            Response::ok(Reply::Ports {
                ports: vec![PortInfo {
                    index: 0,
                    name: "d0".into(),
                    device: "vdev:net_ring0".into(),
                    peer_mac: "ff:ff:ff:ff:ff:ff".into(),
                    rx_frames: 1,
                    tx_frames: 2,
                    policer_rate: 0,
                    policer_burst: 0,
                    drop_policed: 0,
                }],
            }),
            Response::ok(Reply::Port {
                port: PortInfo {
                    index: 1,
                    name: "d1".into(),
                    device: "pci:0000:01:00.0".into(),
                    peer_mac: "02:00:00:00:00:07".into(),
                    rx_frames: 10,
                    tx_frames: 20,
                    policer_rate: 50_000,
                    policer_burst: 500,
                    drop_policed: 7,
                },
            }),
            Response::ok(Reply::WrittenBack {
                path: "/etc/s.toml".into(),
                groups: 3,
            }),
        ] {
            let line = resp.to_line();
            let back: Response = serde_json::from_str(&line).unwrap();
            assert_eq!(back, resp, "{line}");
        }
        let e = Response::error("no").to_line();
        assert_eq!(e, "{\"ok\":false,\"error\":\"no\"}\n");
    }
}
