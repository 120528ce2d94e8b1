//! The control-socket request parser and the requests it decides
//! (`barrier_ctl::proto::parse_request`, `barrier_mgmt::Control::handle_line`), fed a
//! session: the input split at newlines, one request line each (as the socket server hands
//! them over, newline stripped), against a switch on in-memory ports with a table of
//! [`CAPACITY`] groups and four ports (`up`, `d0`, `d1`, `d2`). For every line:
//!
//! - no panic; the answer is one JSON line that reads back as the same `Response`; `ok` comes
//!   with a result, an error with a non-empty message;
//! - a line `parse_request` refuses gets exactly that error as its answer, and a line it
//!   accepts re-encodes (`Request::to_line`) to a line that parses to the same request;
//! - answers are bounded: an error at most [`ERROR_SLACK`] bytes plus [`ERROR_PER_BYTE`] times
//!   the request (a message may quote a name from the request, escaped), any answer at most
//!   [`MAX_ANSWER`] bytes for this table;
//! - a refused request changes nothing (every group's configuration, epoch and state as
//!   before), and so does any read-only request (`groups`, `group_show`, `stats`, `ports`);
//! - after every request each configured group is a valid tree over the switch's ports.
//!
//! Out of reach here: the server's line framing and its `MAX_REQUEST_LINE` cap
//! (`mgmt::server`, private to the socket loop; its tests cover the long-line cases). Lines
//! longer than the cap are skipped, as the server never hands them to `handle_line`.

use barrier_ctl::proto::{parse_request, Request, Response, MAX_REQUEST_LINE};
use barrier_mgmt::{Control, PortDesc};
use barrier_protocol::switch::{GroupConfig, GroupState};
use barrier_protocol::table::GroupTable;
use barrier_protocol::GroupId;
use barrier_switch::engine::{build_switch, mem_port};
use std::sync::Arc;

/// Groups the fuzzed switch's table holds.
pub const CAPACITY: u32 = 16;
/// Most request lines run per input.
pub const MAX_LINES: usize = 64;
/// An error answer is at most `ERROR_SLACK + ERROR_PER_BYTE * request length` bytes.
pub const ERROR_SLACK: usize = 1024;
/// See [`ERROR_SLACK`]: JSON escapes a control character in six bytes (`\u0000`), and a
/// message quotes a name at most once, Rust-escaped (`\u{0}`) inside JSON.
pub const ERROR_PER_BYTE: usize = 12;
/// Any answer for this table of [`CAPACITY`] groups and four ports.
pub const MAX_ANSWER: usize = 64 * 1024;

const PORTS: [&str; 4] = ["up", "d0", "d1", "d2"];

type Snapshot = Vec<(Option<GroupConfig>, Option<GroupState>)>;

fn snapshot(t: &GroupTable) -> Snapshot {
    (0..t.capacity())
        .map(|g| (t.config(GroupId(g)), t.state(GroupId(g))))
        .collect()
}

/// A control over a fresh switch, and its table.
pub fn new_control() -> (Control, Arc<GroupTable>) {
    let table = Arc::new(GroupTable::new(CAPACITY));
    let ports = PORTS.iter().map(|n| mem_port(*n, 8).0).collect();
    let sw = build_switch("fuzz", [2, 0, 0, 0, 0, 1], ports, table.clone(), 0);
    let descs = PORTS
        .iter()
        .enumerate()
        .map(|(i, n)| PortDesc {
            name: n.to_string(),
            device: format!("vdev:net_ring{i}"),
            peer_mac: [0xff; 6],
        })
        .collect();
    (Control::new(sw.stats, descs, None), table)
}

/// Answers one line and checks the answer and the table; returns the answer.
pub fn check_line(control: &mut Control, table: &GroupTable, line: &[u8]) -> Response {
    let before = snapshot(table);
    let parsed = parse_request(line);
    let resp = control.handle_line(line);
    let out = resp.to_line();
    assert!(
        out.ends_with('\n') && !out[..out.len() - 1].contains('\n'),
        "answer is not one line"
    );
    let back: Response = serde_json::from_str(&out).expect("the answer reads back");
    assert_eq!(back, resp);
    assert!(out.len() <= MAX_ANSWER, "answer of {} bytes", out.len());
    if resp.ok {
        assert!(resp.result.is_some() && resp.error.is_none());
    } else {
        let e = resp.error.as_deref().expect("an error answer says why");
        assert!(!e.trim().is_empty() && resp.result.is_none());
        assert!(
            out.len() <= ERROR_SLACK + ERROR_PER_BYTE * line.len(),
            "error answer of {} bytes for a {}-byte request",
            out.len(),
            line.len()
        );
        assert_eq!(
            snapshot(table),
            before,
            "a refused request changed the table"
        );
    }
    match parsed {
        Err(e) => assert_eq!(resp.error.as_deref(), Some(e.as_str()), "bad request"),
        Ok(req) => {
            let again = req.to_line();
            assert_eq!(parse_request(again.trim_end().as_bytes()), Ok(req.clone()));
            if matches!(
                req,
                Request::Groups {}
                    | Request::GroupShow { .. }
                    | Request::Stats {}
                    | Request::Ports {}
                    | Request::PortShow { .. }
            ) {
                assert_eq!(snapshot(table), before, "{req:?} changed the table");
            }
        }
    }
    for g in 0..table.capacity() {
        if let Some(cfg) = table.config(GroupId(g)) {
            cfg.validate().expect("a configured group is a tree");
            assert!(cfg
                .children
                .iter()
                .all(|p| (p.get() as usize) < PORTS.len()));
            assert!(cfg
                .parent()
                .is_none_or(|p| (p.get() as usize) < PORTS.len()));
            assert!(table.state(GroupId(g)).is_some());
        }
    }
    resp
}

thread_local! {
    /// One switch per thread, emptied before each input: building one per input (its rings to
    /// the scheduler and their buffers) held the fuzzer to a few hundred inputs a second.
    static BED: std::cell::RefCell<(Control, Arc<GroupTable>)> = std::cell::RefCell::new(new_control());
}

/// Runs one input as a session of request lines, against a switch with no group configured;
/// panics on a failed property.
pub fn check(data: &[u8]) {
    BED.with(|bed| {
        let (control, table) = &mut *bed.borrow_mut();
        for g in 0..table.capacity() {
            table.remove(GroupId(g)).expect("in the table");
        }
        session(control, table, data);
    });
}

fn session(control: &mut Control, table: &GroupTable, data: &[u8]) {
    for line in data.split(|&b| b == b'\n').take(MAX_LINES) {
        if line.len() > MAX_REQUEST_LINE {
            continue;
        }
        check_line(control, table, line);
    }
}
