//! One update of the group table per group per burst: a burst's barrier events grouped by
//! group (the groups in the order of their first frame, each group's events in burst order),
//! each group's events applied with one `GroupTable::apply_burst` (one load, one
//! compare-and-swap). Pure logic over the table, no I/O: the RX poller (`crate::rx`) feeds it
//! parsed frames and turns its decisions into counts and sends.
//!
//! The decisions are exactly those of applying the burst's events one by one in burst order:
//! only the order *across* groups changes, and groups share nothing. The property test
//! `burst_at_once_equals_frame_by_frame` below checks it, and checks that its checker catches
//! two plausible wrong merges.

use crate::io::BURST;
use barrier_protocol::switch::{Actions, Event, Outcome};
use barrier_protocol::table::{GroupTable, TableError};
use barrier_protocol::GroupId;

/// The grouping of one burst and its scratch space, kept from burst to burst so that nothing is
/// allocated per burst. `T` is the caller's record of one frame.
pub struct BurstApply<T> {
    /// Per map bucket: group number + 1 (0: empty) and the group's run.
    buckets: [(u32, u8); 2 * BURST],
    /// Per run: its bucket, its events, its first index in `sorted`.
    runs: Vec<(u8, u8, u8)>,
    /// Per item: its run.
    run_of: Vec<u8>,
    /// The items in run order, when some group has several.
    sorted: Vec<T>,
    events: Vec<Event>,
    decided: Vec<(Outcome, Actions)>,
}

impl<T: Copy> Default for BurstApply<T> {
    fn default() -> Self {
        BurstApply {
            buckets: [(0, 0); 2 * BURST],
            runs: Vec::with_capacity(BURST),
            run_of: Vec::with_capacity(BURST),
            sorted: Vec::with_capacity(BURST),
            events: Vec::with_capacity(BURST),
            decided: vec![(Outcome::Duplicate, Actions::new()); BURST],
        }
    }
}

impl<T: Copy> BurstApply<T> {
    /// Apply `items` (at most one burst: `BURST`), whose group and event `key` gives, to
    /// `table`: one `apply_burst` per group. `sink` gets every item with its decision (or the
    /// table's refusal: a group the table does not hold or has no configuration for), group
    /// after group in the order of each group's first item, each group's items in their order.
    #[inline]
    pub fn apply(
        &mut self,
        table: &GroupTable,
        items: &[T],
        key: impl Fn(&T) -> (GroupId, Event),
        mut sink: impl FnMut(&T, Result<(Outcome, &Actions), TableError>),
    ) {
        assert!(items.len() <= BURST, "a burst is at most {BURST} frames");
        if items.len() <= 1 || self.plan(items, &key) {
            // Every item its own group, as in most bursts: no copy, one event each.
            let actions = &mut self.decided[0].1;
            for it in items {
                let (group, ev) = key(it);
                let r = table.apply_into(group, ev, actions);
                sink(it, r.map(|o| (o, &*actions)));
            }
            return;
        }
        let mut sorted = std::mem::take(&mut self.sorted);
        self.sort(items, &mut sorted);
        for &(_, len, start) in &self.runs {
            let run = &sorted[start as usize..][..len as usize];
            let group = key(&run[0]).0;
            self.events.clear();
            self.events.extend(run.iter().map(|it| key(it).1));
            match table.apply_burst(group, &self.events, &mut self.decided) {
                Ok(()) => {
                    for (it, (o, a)) in run.iter().zip(&self.decided) {
                        sink(it, Ok((*o, a)));
                    }
                }
                Err(e) => {
                    for it in run {
                        sink(it, Err(e));
                    }
                }
            }
        }
        self.sorted = sorted;
    }

    /// Find the runs of `items`; true when every item is a run of its own.
    #[inline]
    fn plan(&mut self, items: &[T], key: &impl Fn(&T) -> (GroupId, Event)) -> bool {
        // The previous burst's buckets, cleared.
        for &(b, _, _) in &self.runs {
            self.buckets[b as usize] = (0, 0);
        }
        self.runs.clear();
        self.run_of.clear();
        for it in items {
            let g = key(it).0 .0;
            let k = g.wrapping_add(1);
            let mut b = (g.wrapping_mul(0x9E37_79B1) >> 26) as usize;
            let run = loop {
                match self.buckets[b] {
                    (0, _) => {
                        let r = self.runs.len() as u8;
                        self.buckets[b] = (k, r);
                        self.runs.push((b as u8, 0, 0));
                        break r;
                    }
                    (x, r) if x == k => break r,
                    _ => b = (b + 1) % self.buckets.len(),
                }
            };
            self.runs[run as usize].1 += 1;
            self.run_of.push(run);
        }
        self.runs.len() == items.len()
    }

    /// `items` in run order into `sorted` (a counting sort, after `plan`).
    fn sort(&mut self, items: &[T], sorted: &mut Vec<T>) {
        let mut next = [0u8; BURST];
        let mut start = 0u8;
        for (r, n) in self.runs.iter_mut().zip(next.iter_mut()) {
            r.2 = start;
            *n = start;
            start += r.1;
        }
        sorted.clear();
        sorted.extend_from_slice(items);
        for (it, &r) in items.iter().zip(&self.run_of) {
            let n = &mut next[r as usize];
            sorted[*n as usize] = *it;
            *n += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use barrier_protocol::switch::{on_event, Action, GroupConfig, GroupState, Run};
    use barrier_protocol::{Epoch, PortIdx, PortSet, Seq};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    const GROUPS: u32 = 4;
    const PORTS: u8 = 4;

    /// One frame of a burst: its group (possibly one the table does not hold) and event.
    type Item = (usize, GroupId, Event);

    /// What one group decided for its frames, in the order decided: (frame index, outcome,
    /// the run, the actions).
    type Decisions = BTreeMap<u32, Vec<(usize, Result<(Outcome, Run, Vec<Action>), TableError>)>>;

    /// Applies one burst to `table`; the decisions, by group.
    type Merge = fn(&GroupTable, &[Item]) -> Decisions;

    fn record(d: &mut Decisions, it: &Item, r: Result<(Outcome, &Actions), TableError>) {
        let r = r.map(|(o, a)| (o, a.run(), a.iter().copied().collect()));
        d.entry(it.1 .0).or_default().push((it.0, r));
    }

    /// The RX path's merge: `BurstApply`.
    fn burst_at_once(table: &GroupTable, items: &[Item]) -> Decisions {
        let mut d = Decisions::new();
        BurstApply::default().apply(
            table,
            items,
            |it| (it.1, it.2),
            |it, r| record(&mut d, it, r),
        );
        d
    }

    /// A group of the model: its configuration, state, run and (completions, re-sends).
    type ModelGroup = (GroupConfig, GroupState, Run, (u32, u32));

    /// A generated frame: group, kind, port, epoch, sequence number (before it moves on).
    type Raw = (u32, u8, u8, u32, u32);

    /// The reference: the protocol's `on_event`, one frame at a time in burst order, on a model
    /// of each group's state (no table code: the table's own per-frame `apply` shares its
    /// loop with `apply_burst`).
    #[derive(Clone, Debug, PartialEq)]
    struct Model {
        /// Per group: its configuration, state, run and (completions, re-sends).
        groups: Vec<Option<ModelGroup>>,
    }

    impl Model {
        fn of(t: &GroupTable) -> Model {
            let groups = (0..GROUPS)
                .map(|g| {
                    let g = GroupId(g);
                    Some((t.config(g)?, t.state(g)?, t.run(g)?, (0, 0)))
                })
                .collect();
            Model { groups }
        }

        fn frame_by_frame(&mut self, items: &[Item]) -> Decisions {
            let mut d = Decisions::new();
            for it in items {
                let r = match self.groups.get_mut(it.1 .0 as usize) {
                    None => Err(TableError::GroupOutOfRange(it.1)),
                    Some(None) => Err(TableError::NotConfigured(it.1)),
                    Some(Some((cfg, st, run, counts))) => {
                        let (next, o, a) = on_event(cfg, *st, it.2);
                        *st = next;
                        counts.0 += u32::from(o == Outcome::Completed);
                        counts.1 += u32::from(o == Outcome::StaleReduce);
                        let a = a.with_generation(run.generation);
                        Ok((o, a.run(), a.iter().copied().collect()))
                    }
                };
                d.entry(it.1 .0).or_default().push((it.0, r));
            }
            d
        }
    }

    /// Wrong on purpose: a group's repeated frame (same event as an earlier one of the burst)
    /// is taken for a duplicate without being decided; after a completion in between it is a
    /// stale reduce that must be answered.
    fn broken_dedup(table: &GroupTable, items: &[Item]) -> Decisions {
        let mut d = Decisions::new();
        let mut seen: Vec<(GroupId, Event)> = Vec::new();
        let mut kept = Vec::new();
        for it in items {
            if seen.contains(&(it.1, it.2)) {
                let run = table.run(it.1).unwrap_or(Run::of_epoch(Epoch::DEFAULT));
                d.entry(it.1 .0)
                    .or_default()
                    .push((it.0, Ok((Outcome::Duplicate, run, Vec::new()))));
            } else {
                seen.push((it.1, it.2));
                kept.push(*it);
            }
        }
        for (g, v) in burst_at_once(table, &kept) {
            d.entry(g).or_default().extend(v);
        }
        for v in d.values_mut() {
            v.sort_by_key(|e| e.0);
        }
        d
    }

    /// Wrong on purpose: each group's frames applied in port order, not burst order.
    fn broken_order(table: &GroupTable, items: &[Item]) -> Decisions {
        let mut sorted = items.to_vec();
        sorted.sort_by_key(|it| (it.1 .0, port_of(it.2)));
        let mut d = burst_at_once(table, &sorted);
        for v in d.values_mut() {
            v.sort_by_key(|e| e.0);
        }
        d
    }

    fn port_of(ev: Event) -> u8 {
        match ev {
            Event::Reduce { port, .. }
            | Event::Release { port, .. }
            | Event::Abort { port, .. } => port.get(),
        }
    }

    fn config(i: u32, shape: u8) -> GroupConfig {
        let p = |i: u8| PortIdx::new(i).unwrap();
        match shape % 3 {
            0 => GroupConfig::root(PortSet(0b0111)),
            1 => GroupConfig::intermediate(p(3), PortSet(0b0011), 10_000),
            _ => GroupConfig::root(PortSet(0b1110)).with_epoch(Epoch(i + 1)),
        }
    }

    fn event(kind: u8, port: u8, epoch: u32, seq: u32) -> Event {
        let port = PortIdx::new(port % PORTS).unwrap();
        let (epoch, seq) = (Epoch(epoch), Seq(seq));
        match kind % 8 {
            // Mostly reduces, as a switch mostly sees.
            0..=4 => Event::Reduce { port, epoch, seq },
            5 | 6 => Event::Release { port, epoch, seq },
            _ => Event::Abort {
                port,
                epoch,
                seq,
                failure: barrier_protocol::wire::Failure {
                    switch: barrier_protocol::wire::MacAddr([2, 0, 0, 0, 0, 7]),
                    port: 1,
                },
            },
        }
    }

    /// A run of bursts over a few groups: duplicates, stale, ahead and other-epoch frames,
    /// frames of groups the table does not hold, several ports.
    fn bursts() -> impl Strategy<Value = (Vec<u8>, Vec<Vec<Raw>>)> {
        (
            prop::collection::vec(any::<u8>(), GROUPS as usize),
            prop::collection::vec(
                prop::collection::vec(
                    (0..GROUPS + 1, any::<u8>(), 0..PORTS, 0u32..3, 0u32..4),
                    1..=BURST,
                ),
                1..12,
            ),
        )
    }

    fn table(shapes: &[u8]) -> GroupTable {
        let t = GroupTable::new(GROUPS);
        for (g, s) in shapes.iter().enumerate() {
            t.configure(GroupId(g as u32), config(g as u32, *s))
                .unwrap();
        }
        t
    }

    /// Runs `bursts` through `merge` on a table and frame by frame on a model of it; the first
    /// burst whose decisions or resulting states differ, described.
    fn differs(merge: Merge, shapes: &[u8], bursts: &[Vec<Raw>]) -> Option<String> {
        let t = table(shapes);
        let mut model = Model::of(&t);
        for (n, burst) in bursts.iter().enumerate() {
            let items: Vec<Item> = burst
                .iter()
                .enumerate()
                .map(|(i, &(g, kind, port, epoch, seq))| {
                    // Sequence numbers move on from burst to burst, so barriers complete and
                    // earlier ones go stale; epoch 0 is the default, group 2's shape has its
                    // own (other-epoch frames otherwise).
                    (
                        i,
                        GroupId(g),
                        event(kind, port, epoch, seq + 10 * n as u32 / 3),
                    )
                })
                .collect();
            let (got, want) = (merge(&t, &items), model.frame_by_frame(&items));
            if got != want {
                return Some(format!("burst {n} {items:?}:\n got {got:?}\nwant {want:?}"));
            }
            for (g, m) in model.groups.iter().enumerate() {
                let g = GroupId(g as u32);
                let counts = t.counts(g);
                let now = (t.state(g), (counts.completions, counts.resends));
                if now != (m.map(|m| m.1), m.map_or((0, 0), |m| m.3)) {
                    return Some(format!(
                        "burst {n}: group {g:?} differs afterwards: {now:?} vs {m:?}"
                    ));
                }
            }
        }
        None
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// A burst applied at once (one update per group) decides exactly what its frames
        /// applied one by one decide: every frame's outcome and actions, in order within its
        /// group, and the states and counts after.
        #[test]
        fn burst_at_once_equals_frame_by_frame((shapes, bursts) in bursts()) {
            if let Some(d) = differs(burst_at_once, &shapes, &bursts) {
                return Err(TestCaseError::fail(d));
            }
        }
    }

    /// The checker above catches a wrong merge: each of two plausible ones fails it on some
    /// of a few hundred random runs.
    #[test]
    fn the_equivalence_check_catches_a_broken_merge() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::TestRunner;
        for (name, broken) in [
            ("dedup", broken_dedup as Merge),
            ("port order", broken_order),
        ] {
            let mut runner = TestRunner::deterministic();
            let caught = (0..2000).any(|_| {
                let (shapes, bursts) = bursts().new_tree(&mut runner).unwrap().current();
                differs(broken, &shapes, &bursts).is_some()
            });
            assert!(caught, "the {name} merge was not caught");
        }
    }

    #[test]
    fn a_burst_of_one_group_is_one_run_in_order_and_distinct_groups_are_not_copied() {
        let t = table(&[0, 0, 0, 0]);
        let p = |i| PortIdx::new(i).unwrap();
        let red = |port, seq| Event::Reduce {
            port: p(port),
            epoch: Epoch::DEFAULT,
            seq: Seq(seq),
        };
        let items: Vec<Item> = vec![
            (0, GroupId(1), red(0, 5)),
            (1, GroupId(3), red(0, 5)),
            (2, GroupId(1), red(1, 5)),
            (3, GroupId(1), red(2, 5)),
            (4, GroupId(9), red(2, 5)),
        ];
        let mut order = Vec::new();
        let mut ba = BurstApply::default();
        ba.apply(
            &t,
            &items,
            |it| (it.1, it.2),
            |it, r| {
                order.push((it.0, r.map(|(o, _)| o)));
            },
        );
        // Group 1 first (its first frame is first), its three frames in order: the third
        // completes the barrier (the group was unknown: it adopts 5 and completes on all
        // three children); then group 3; then group 9, which the table does not hold.
        assert_eq!(
            order,
            [
                (0, Ok(Outcome::Recorded)),
                (2, Ok(Outcome::Recorded)),
                (3, Ok(Outcome::Completed)),
                (1, Ok(Outcome::Recorded)),
                (4, Err(TableError::GroupOutOfRange(GroupId(9)))),
            ]
        );
        assert!(!ba.plan(&items, &|it: &Item| (it.1, it.2)));
        assert!(ba.plan(&items[..2], &|it: &Item| (it.1, it.2)));
    }
}
