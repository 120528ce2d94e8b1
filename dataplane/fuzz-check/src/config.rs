//! The switch configuration parser (`barrier_switch::config::parse`): never panics; a refusal
//! has a reason and, when it names a line, a line the text has; what parses is a switch the
//! engine can build: ports named once and at most 64, every group block a valid tree over
//! existing ports inside the group range and the table, every RX queue polled exactly once.
//! Parsing the same text twice gives the same answer.
//!
//! The input is the file's bytes; bytes that are not UTF-8 are a file `config::load` refuses
//! before parsing (`cannot read the file`), so they are checked as that refusal, and the lossy
//! text is parsed as well so the fuzzer's mutations of non-text bytes still reach the parser.

use barrier_switch::config::{self, MAX_GROUPS, MAX_PORTS};
use barrier_switch::spec::SwitchSpec;
use std::collections::BTreeSet;

/// Number of lines of `text` as an editor counts them (a final newline opens an empty one).
fn lines(text: &str) -> usize {
    text.bytes().filter(|&b| b == b'\n').count() + 1
}

fn check_text(text: &str) {
    let first = config::parse(text);
    assert_eq!(first, config::parse(text), "parse is not deterministic");
    match first {
        Ok(spec) => check_spec(&spec),
        Err(e) => {
            assert!(
                !e.reason.trim().is_empty(),
                "refusal without a reason: {e:?}"
            );
            if let Some(l) = e.line {
                assert!(
                    (1..=lines(text)).contains(&l),
                    "refusal names line {l} of a {}-line text: {e}",
                    lines(text)
                );
            }
            assert!(!e.to_string().is_empty());
        }
    }
}

fn check_spec(spec: &SwitchSpec) {
    assert!(!spec.ports.is_empty() && spec.ports.len() <= MAX_PORTS);
    let names: BTreeSet<&str> = spec.ports.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names.len(), spec.ports.len(), "port names repeat");
    for (i, p) in spec.ports.iter().enumerate() {
        assert!(
            p.rx_queues > 0 && p.tx_queues > 0,
            "port {i} without queues"
        );
        assert_eq!(spec.port_index(&p.name).map(|x| x.get() as usize), Some(i));
    }
    let nports = spec.ports.len() as u8;
    let mut numbers: Vec<(u32, u32)> = Vec::new();
    for g in &spec.groups {
        assert!(g.numbers.start < g.numbers.end && g.numbers.end <= MAX_GROUPS);
        g.config.validate().expect("a parsed group is a tree");
        assert!(g.config.children.iter().all(|p| p.get() < nports));
        if let Some(parent) = g.config.parent() {
            assert!(parent.get() < nports);
        }
        assert!(g.numbers.end <= spec.group_capacity());
        numbers.push((g.numbers.start, g.numbers.end));
    }
    numbers.sort_unstable();
    for w in numbers.windows(2) {
        assert!(w[0].1 <= w[1].0, "group blocks overlap: {w:?}");
    }
    let mut polled = BTreeSet::new();
    for r in &spec.lcores.rx {
        for &(port, q) in &r.polls {
            assert!(port.get() < nports);
            assert!(q < spec.ports[port.get() as usize].rx_queues);
            assert!(polled.insert((port, q)), "queue polled twice");
        }
    }
    let queues: usize = spec.ports.iter().map(|p| p.rx_queues as usize).sum();
    assert_eq!(polled.len(), queues, "a queue without a poller");
    if let Some(c) = &spec.control {
        assert!(c.capacity > 0 && c.capacity <= MAX_GROUPS);
    }
}

/// Runs one configuration file's bytes through the parser; panics on a failed property.
pub fn check(data: &[u8]) {
    match std::str::from_utf8(data) {
        Ok(text) => check_text(text),
        Err(_) => check_text(&String::from_utf8_lossy(data)),
    }
}
