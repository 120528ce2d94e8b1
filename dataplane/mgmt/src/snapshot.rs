//! Every counter of one dataplane, read once: the one input of every rendering (the text
//! report, the telemetry commands and `--stats-json`, Prometheus, the control socket's `stats`
//! and `port_show`). The dataplane names its counter sets (`Names`); the exporters look for
//! the names docs/operations.md lists ("Counters"), so two dataplanes that count the same
//! events under the same names render the same.

use barrier_runtime::counters::{format_sum, LoopCounters};
use std::fmt::Write as _;
use std::sync::Arc;

/// The counter names of a dataplane's sets, each in the order its rows are pushed and every
/// rendering lists them (the loop set's are the runtime's `LoopCounters::NAMES`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Names {
    pub rx: &'static [&'static str],
    pub tx: &'static [&'static str],
    pub scheduler: &'static [&'static str],
}

/// Which counter set a snapshot row belongs to; each set has its name table.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Set {
    /// One RX poller's (`RxCounters`): labelled with its port and queue.
    Rx,
    /// One egress port's (`TxCounters`): labelled with its port.
    Tx,
    /// The scheduler's (`SchedCounters`): no labels.
    Scheduler,
    /// One polling loop's (`LoopCounters`): labelled with its lcore.
    Loop,
}

impl Names {
    /// The names of `set`, in the order every rendering lists them.
    pub fn of(&self, set: Set) -> &'static [&'static str] {
        match set {
            Set::Rx => self.rx,
            Set::Tx => self.tx,
            Set::Scheduler => self.scheduler,
            Set::Loop => LoopCounters::NAMES,
        }
    }
}

/// One counter cell as read into a `Snapshot`: its set and name, its labels (the fixed set
/// the dataplane has: port, RX queue, lcore) and its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub set: Set,
    pub name: &'static str,
    /// Switch-local port index (`Set::Rx`, `Set::Tx`).
    pub port: Option<usize>,
    /// The RX queue of `port`, counted from 0 in the order the pollers were built (`Set::Rx`).
    pub queue: Option<usize>,
    /// The lcore of a polling loop (`Set::Loop`).
    pub lcore: Option<u32>,
    pub value: u64,
}

/// Every counter of one switch, read once (`Dataplane::snapshot`): the one input of every
/// rendering (the text report, the telemetry commands and `--stats-json`, Prometheus, the
/// control socket's `stats`). Each cell is read once, so renderings of one snapshot agree value
/// for value; the snapshot is not atomic across cells (a frame counted in RX may not be in TX
/// yet).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The switch's name.
    pub switch: String,
    /// Port names, by switch-local index.
    pub ports: Vec<String>,
    /// The dataplane's counter names, per set.
    pub names: Names,
    /// Per set, per labelled instance, the set's names in order.
    pub rows: Vec<Row>,
}

impl Snapshot {
    /// An empty snapshot of dataplane `switch` with ports `ports`, counting under `names`.
    pub fn new(switch: impl Into<String>, ports: Vec<String>, names: Names) -> Snapshot {
        Snapshot {
            switch: switch.into(),
            ports,
            names,
            rows: Vec::new(),
        }
    }

    /// The names of `set` in this snapshot, in the order every rendering lists them.
    pub fn names(&self, set: Set) -> &'static [&'static str] {
        self.names.of(set)
    }

    /// Rows of one counter set instance, `values` in the set's name order.
    pub fn push(
        &mut self,
        set: Set,
        port: Option<usize>,
        queue: Option<usize>,
        lcore: Option<u32>,
        values: Vec<u64>,
    ) {
        self.rows.extend(
            self.names
                .of(set)
                .iter()
                .zip(values)
                .map(|(&name, value)| Row {
                    set,
                    name,
                    port,
                    queue,
                    lcore,
                    value,
                }),
        );
    }

    /// Rows of the polling loops' counters, one set per `(lcore, counters)`.
    pub fn add_loops(&mut self, loops: &[(u32, Arc<LoopCounters>)]) {
        for (l, c) in loops {
            self.push(Set::Loop, None, None, Some(*l), c.values());
        }
    }

    /// Every counter of `set`, in its name order, summed over the rows `keep` accepts (zeroes
    /// included).
    pub fn sum(&self, set: Set, keep: impl Fn(&Row) -> bool) -> Vec<u64> {
        let names = self.names(set);
        let mut out = vec![0u64; names.len()];
        for r in self.rows.iter().filter(|r| r.set == set && keep(r)) {
            if let Some(i) = names.iter().position(|n| *n == r.name) {
                out[i] += r.value;
            }
        }
        out
    }

    /// `set` summed over the whole switch.
    pub fn total(&self, set: Set) -> Vec<u64> {
        self.sum(set, |_| true)
    }

    /// `set` summed over port `port` (its RX queues).
    pub fn port(&self, set: Set, port: usize) -> Vec<u64> {
        self.sum(set, |r| r.port == Some(port))
    }

    /// One counter of `set` summed over the switch (`port` None) or one port.
    pub fn value(&self, set: Set, name: &str, port: Option<usize>) -> u64 {
        self.rows
            .iter()
            .filter(|r| r.set == set && r.name == name && (port.is_none() || r.port == port))
            .map(|r| r.value)
            .sum()
    }

    /// The RX queues of port `port` that have rows, in order.
    pub fn queues(&self, port: usize) -> Vec<usize> {
        let mut qs: Vec<usize> = Vec::new();
        for r in &self.rows {
            if let (Set::Rx, Some(p), Some(q)) = (r.set, r.port, r.queue) {
                if p == port && !qs.contains(&q) {
                    qs.push(q);
                }
            }
        }
        qs
    }

    /// The lcores of the polling loops that have rows, in order.
    pub fn lcores(&self) -> Vec<u32> {
        let mut ls: Vec<u32> = Vec::new();
        for r in &self.rows {
            if let (Set::Loop, Some(l)) = (r.set, r.lcore) {
                if !ls.contains(&l) {
                    ls.push(l);
                }
            }
        }
        ls
    }

    /// `(name, value)` pairs of `values`, a vector of `set` in its name order.
    pub fn named(&self, set: Set, values: Vec<u64>) -> impl Iterator<Item = (&'static str, u64)> {
        self.names(set).iter().copied().zip(values)
    }
}

/// The counter lines of a dataplane's text report from one snapshot: its totals, then
/// each port's (and each RX queue's share where a port has several), non-zero counters only.
pub fn report_counters(snap: &Snapshot) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "== switch {}", snap.switch);
    out += &format_sum("  rx total", snap.names(Set::Rx), [snap.total(Set::Rx)]);
    out += &format_sum("  tx total", snap.names(Set::Tx), [snap.total(Set::Tx)]);
    out += &format_sum(
        "  scheduler",
        snap.names(Set::Scheduler),
        [snap.total(Set::Scheduler)],
    );
    for (p, name) in snap.ports.iter().enumerate() {
        out += &format_sum(
            &format!("  port {name} rx"),
            snap.names(Set::Rx),
            [snap.port(Set::Rx, p)],
        );
        // A port polled on several RX queues: each queue's share (how the frames spread,
        // docs/configuration.md, "Spreading frames over RX queues").
        let queues = snap.queues(p);
        if queues.len() > 1 {
            for q in queues {
                out += &format_sum(
                    &format!("  port {name} rx queue {q}"),
                    snap.names(Set::Rx),
                    [snap.sum(Set::Rx, |r| r.port == Some(p) && r.queue == Some(q))],
                );
            }
        }
        out += &format_sum(
            &format!("  port {name} tx"),
            snap.names(Set::Tx),
            [snap.port(Set::Tx, p)],
        );
    }
    out
}
