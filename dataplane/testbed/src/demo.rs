//! `barrier-demo`: a whole barrier tree in one process. A root switch, intermediate switches
//! and emulated leaves, each switch the same engine as `barrier-switch run` (RX pollers, shared
//! group table, scheduler), all placed as pollers on a few busy loops (never more than the cores
//! given). The wires are DPDK `net_ring` queues (see `dpdk_io`) or, with `--io mem`, in-memory
//! rings; the engine cannot tell them apart.

use crate::error::DemoError;
use crate::leafhost::{LeafLink, LeafPoller, LeafReport};
use barrier_protocol::backoff::Backoff;
use barrier_protocol::switch::{GroupConfig, Role};
use barrier_protocol::{Epoch, PortIdx, PortSet};
use barrier_runtime::io::{mem_wire, MemRx, MemTx, RxQueue, TxQueue};
use barrier_runtime::poll::Poller;
use barrier_switch::engine::{build_switch, build_table, PortIo, SwitchStats};
use barrier_switch::spec::GroupBlock;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct DemoOpts {
    /// Children per level: `[2, 4]` is a root with 2 intermediates, each with 4 leaves.
    pub fanout: Vec<usize>,
    pub groups: u32,
    /// Stop after this many barriers per group (else after `duration`).
    pub count: Option<u64>,
    pub duration: Duration,
    /// Busy loops (one per core).
    pub loops: usize,
    pub leaf_timeout_ns: u64,
    pub switch_timeout_ns: u64,
    /// Per group: pause between a release and the leaves' next arrival (`u64::MAX`: never).
    pub think_ns: Vec<u64>,
    /// Per group: copies sent of each reduce (above 1: a flood of duplicates).
    pub copies: Vec<u32>,
    /// Deal each switch's RX pollers over the switch loops instead of keeping a switch on one.
    pub spread_rx: bool,
    /// What the loops do when a pass finds no work.
    pub idle: barrier_runtime::poll::Idle,
    /// Print a progress line on stderr once a second (barriers so far, and their rate).
    pub progress: bool,
}

impl Default for DemoOpts {
    fn default() -> Self {
        DemoOpts {
            fanout: vec![2, 4],
            groups: 1,
            count: None,
            duration: Duration::from_secs(3),
            loops: 2,
            leaf_timeout_ns: 50_000_000,
            switch_timeout_ns: 20_000_000,
            think_ns: Vec::new(),
            copies: Vec::new(),
            spread_rx: false,
            idle: barrier_runtime::poll::Idle::Spin,
            progress: false,
        }
    }
}

/// The shape of the tree: node 0 is the root; leaves are the nodes without children.
#[derive(Clone, Debug)]
pub struct Tree {
    pub nodes: Vec<Node>,
}

#[derive(Clone, Debug)]
pub struct Node {
    /// (parent node, this node's child slot at the parent)
    pub parent: Option<(usize, usize)>,
    pub children: Vec<usize>,
}

impl Tree {
    pub fn new(fanout: &[usize]) -> Result<Tree, DemoError> {
        if fanout.is_empty() {
            return Err("fanout needs at least one level".into());
        }
        // A switch has at most 64 ports: the root can use all of them for children, an
        // intermediate needs one for its parent.
        for (i, &f) in fanout.iter().enumerate() {
            let max = if i == 0 { 64 } else { 63 };
            if f == 0 || f > max {
                return Err(
                    format!("fanout {f} at level {}: 1..={max} children there", i + 1).into(),
                );
            }
        }
        let mut nodes = vec![Node {
            parent: None,
            children: vec![],
        }];
        let mut level = vec![0usize];
        for &f in fanout {
            let mut next = Vec::new();
            for &p in &level {
                for slot in 0..f {
                    let id = nodes.len();
                    nodes.push(Node {
                        parent: Some((p, slot)),
                        children: vec![],
                    });
                    nodes[p].children.push(id);
                    next.push(id);
                }
            }
            level = next;
        }
        Ok(Tree { nodes })
    }

    pub fn is_leaf(&self, i: usize) -> bool {
        i != 0 && self.nodes[i].children.is_empty()
    }
    pub fn leaves(&self) -> Vec<usize> {
        (0..self.nodes.len()).filter(|&i| self.is_leaf(i)).collect()
    }
    pub fn switches(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| !self.is_leaf(i))
            .collect()
    }
}

/// Both ends of every link. For a non-root node i: `at_child[i]` is its port toward its parent,
/// `at_parent[i]` the parent's port toward i. Each end is (RX queue, TX queue).
pub struct Wires<R, T> {
    pub at_child: Vec<Option<(R, T)>>,
    pub at_parent: Vec<Option<(R, T)>>,
}

/// In-memory wires for `tree`.
pub fn mem_wires(tree: &Tree) -> Wires<MemRx, MemTx> {
    let mut w = Wires {
        at_child: Vec::new(),
        at_parent: Vec::new(),
    };
    for n in &tree.nodes {
        if n.parent.is_some() {
            let (down_tx, down_rx) = mem_wire(1024);
            let (up_tx, up_rx) = mem_wire(1024);
            w.at_child.push(Some((down_rx, up_tx)));
            w.at_parent.push(Some((up_rx, down_tx)));
        } else {
            w.at_child.push(None);
            w.at_parent.push(None);
        }
    }
    w
}

/// A demo ready to run: pollers per loop and the handles to read it.
pub struct Demo {
    pub loops: Vec<Vec<Box<dyn Poller>>>,
    pub switches: Vec<SwitchStats>,
    pub report: Arc<Mutex<Option<LeafReport>>>,
    pub progress: Arc<AtomicU64>,
    pub done: Arc<AtomicBool>,
}

fn mac(kind: u8, i: usize) -> [u8; 6] {
    [0x02, kind, 0, 0, (i >> 8) as u8, i as u8]
}

/// Build every switch and the leaves of `tree`, and place them on `opts.loops` loops: with one
/// loop everything shares it; with more, the leaves get the last loop to themselves and the
/// switches are dealt over the others.
pub fn build_demo<R, T>(
    opts: &DemoOpts,
    tree: &Tree,
    mut wires: Wires<R, T>,
    now_ns: u64,
) -> Result<Demo, DemoError>
where
    R: RxQueue + 'static,
    T: TxQueue<Frame = R::Frame> + 'static,
{
    if opts.groups == 0 {
        return Err("at least one group".into());
    }
    let loops = opts.loops.max(1);
    let mut placed: Vec<Vec<Box<dyn Poller>>> = (0..loops).map(|_| Vec::new()).collect();
    let switch_loops = if loops == 1 { 1 } else { loops - 1 };
    let mut switches = Vec::new();
    for (k, &s) in tree.switches().iter().enumerate() {
        let node = &tree.nodes[s];
        let nchild = node.children.len();
        let mut ports = Vec::new();
        for (slot, &c) in node.children.iter().enumerate() {
            let (rx, tx) = wires.at_parent[c].take().ok_or("wire used twice")?;
            ports.push(PortIo::new(format!("child{slot}"), rx, tx));
        }
        let role = match node.parent {
            None => Role::Root,
            Some(_) => {
                let (rx, tx) = wires.at_child[s].take().ok_or("wire used twice")?;
                ports.push(PortIo::new("parent", rx, tx));
                Role::Intermediate {
                    parent: PortIdx::new(nchild as u8).ok_or("more than 63 children")?,
                }
            }
        };
        let children = if nchild == 64 {
            u64::MAX
        } else {
            (1u64 << nchild) - 1
        };
        let spec = GroupBlock {
            numbers: 0..opts.groups,
            config: GroupConfig {
                role,
                children: PortSet(children),
                resend_timeout_ns: opts.switch_timeout_ns,
                epoch: Epoch::DEFAULT,
                backoff: Backoff::FIXED,
                fail_after_ns: 0,
            },
        };
        let table = Arc::new(build_table(&[spec])?);
        let name = if s == 0 {
            "root".to_string()
        } else {
            format!("s{s}")
        };
        let sw = build_switch(&name, mac(1, s), ports, table, now_ns);
        let l = k % switch_loops;
        for (i, (_, _, p)) in sw.rx.into_iter().enumerate() {
            // Spread: a switch's ports are polled from several loops, so the children of one
            // group arrive on different threads and meet in the table's CAS.
            let rl = if opts.spread_rx {
                (l + i) % switch_loops
            } else {
                l
            };
            placed[rl].push(p);
        }
        placed[l].push(sw.sched);
        switches.push(sw.stats);
    }
    let mut links = Vec::new();
    for &leaf in &tree.leaves() {
        let (rx, tx) = wires.at_child[leaf].take().ok_or("wire used twice")?;
        links.push(LeafLink {
            rx,
            tx,
            mac: mac(2, leaf),
        });
    }
    let report = Arc::new(Mutex::new(None));
    let leaves = LeafPoller::new(
        links,
        0,
        opts.groups,
        opts.leaf_timeout_ns,
        opts.count,
        report.clone(),
    )
    .with_pacing(&opts.think_ns, &opts.copies);
    let progress = leaves.progress.clone();
    let done = leaves.done.clone();
    placed[loops - 1].push(Box::new(leaves));
    Ok(Demo {
        loops: placed,
        switches,
        report,
        progress,
        done,
    })
}

/// What a demo run measured.
pub struct DemoResult {
    pub elapsed: Duration,
    pub report: LeafReport,
}

impl DemoResult {
    pub fn barriers(&self) -> u64 {
        self.report.completed.iter().sum()
    }

    pub fn summary(&self, opts: &DemoOpts, tree: &Tree) -> String {
        let h = &self.report.latency;
        let us = |v: u64| v as f64 / 1000.0;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "tree: fanout {:?} = {} switches, {} leaves; {} group(s); {} loop(s)",
            opts.fanout,
            tree.switches().len(),
            tree.leaves().len(),
            opts.groups,
            opts.loops
        );
        let secs = self.elapsed.as_secs_f64();
        let _ = writeln!(
            s,
            "barriers: {} in {:.3} s = {:.0} barriers/s",
            self.barriers(),
            secs,
            self.barriers() as f64 / secs.max(1e-9)
        );
        if !h.is_empty() {
            let _ = writeln!(
                s,
                "latency (first reduce sent -> last release received): p50 {:.1} µs  p99 {:.1} µs  p99.9 {:.1} µs  max {:.1} µs",
                us(h.value_at_quantile(0.5)),
                us(h.value_at_quantile(0.99)),
                us(h.value_at_quantile(0.999)),
                us(h.max())
            );
        }
        let _ = writeln!(
            s,
            "checks: early releases {}, ignored releases {}, leaf re-sends {}",
            self.report.early_releases, self.report.ignored_releases, self.report.resends
        );
        s
    }
}

/// Run a built demo on plain threads (the `--io mem` mode and the unit tests): one thread per
/// loop, the caller's thread manages. Stops at the count or after the duration.
pub fn run_on_threads(
    demo: Demo,
    opts: &DemoOpts,
    clock: barrier_runtime::clock::Clock,
    quit: Arc<AtomicBool>,
) -> DemoResult {
    let start = Instant::now();
    let mut handles = Vec::new();
    let idle = opts.idle;
    for pollers in demo.loops {
        let quit = quit.clone();
        handles.push(std::thread::spawn(move || {
            // A panicking loop must end the wait below, not leave it waiting for the count.
            let _stop = barrier_runtime::poll::StopOnDrop(quit.clone());
            let c = barrier_runtime::counters::LoopCounters::default();
            barrier_runtime::poll::run_loop(pollers, &quit, clock, &c, idle)
        }));
    }
    wait_until_done(&demo.done, &demo.progress, opts, start, &[&quit]);
    let elapsed = start.elapsed();
    quit.store(true, Ordering::Relaxed);
    let mut all: Vec<Box<dyn Poller>> = Vec::new();
    for h in handles {
        all.extend(h.join().expect("poll loop panicked"));
    }
    barrier_runtime::poll::finish_all(&mut all);
    let report = demo
        .report
        .lock()
        .expect("report lock")
        .take()
        .expect("leaf poller finished");
    DemoResult { elapsed, report }
}

/// The management side of a demo: sleep until the count is reached, the time is up, or one of
/// the `stop` flags is set (a signal, a loop that ended early). With `opts.progress`, a line
/// on stderr once a second from `progress` (barriers completed over all groups).
pub fn wait_until_done(
    done: &AtomicBool,
    progress: &AtomicU64,
    opts: &DemoOpts,
    start: Instant,
    stop: &[&AtomicBool],
) {
    let mut next = start + Duration::from_secs(1);
    let mut last = 0u64;
    loop {
        if done.load(Ordering::Relaxed) || stop.iter().any(|f| f.load(Ordering::Relaxed)) {
            return;
        }
        if opts.count.is_none() && start.elapsed() >= opts.duration {
            return;
        }
        let now = Instant::now();
        if opts.progress && now >= next {
            let n = progress.load(Ordering::Relaxed);
            let want = opts
                .count
                .map(|c| format!(" of {}", c * u64::from(opts.groups)))
                .unwrap_or_default();
            eprintln!(
                "barrier-demo: {:.0} s: {n}{want} barriers, {} in the last second",
                start.elapsed().as_secs_f64(),
                n - last
            );
            last = n;
            next = now + Duration::from_secs(1);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use barrier_protocol::switch::Outcome;
    use barrier_runtime::clock::Clock;

    fn run_mem(
        fanout: &[usize],
        groups: u32,
        count: u64,
        loops: usize,
    ) -> (DemoResult, Vec<SwitchStats>) {
        let opts = DemoOpts {
            fanout: fanout.to_vec(),
            groups,
            count: Some(count),
            loops,
            ..DemoOpts::default()
        };
        let tree = Tree::new(fanout).unwrap();
        let clock = Clock::new();
        let demo = build_demo(&opts, &tree, mem_wires(&tree), clock.now_ns()).unwrap();
        assert_eq!(demo.switches.len(), tree.switches().len());
        let stats = demo.switches.clone();
        (
            run_on_threads(demo, &opts, clock, Arc::new(AtomicBool::new(false))),
            stats,
        )
    }

    fn check(fanout: &[usize], groups: u32, count: u64, loops: usize) {
        let (r, stats) = run_mem(fanout, groups, count, loops);
        assert_eq!(r.report.early_releases, 0);
        assert!(
            r.report.completed.iter().all(|&c| c == count),
            "completed {:?}",
            &r.report.completed[..4.min(r.report.completed.len())]
        );
        for (i, &n) in r.report.releases_per_leaf.iter().enumerate() {
            assert_eq!(n, count * u64::from(groups), "leaf {i} released {n} times");
        }
        let root = &stats[0];
        assert_eq!(root.name, "root");
        assert_eq!(
            root.rx_sum(|c| &c.outcomes[Outcome::Completed]),
            count * u64::from(groups)
        );
        assert_eq!(r.report.latency.len(), count * u64::from(groups));
    }

    #[test]
    fn one_level_tree_one_group() {
        check(&[4], 1, 500, 2);
    }

    #[test]
    fn two_level_tree_many_groups_one_loop() {
        check(&[2, 3], 50, 20, 1);
    }

    #[test]
    fn switches_that_lose_their_state_never_release_early() {
        // Every 0.5 ms one switch of the tree "restarts" (its table goes back to fresh state);
        // the leaves' and intermediates' re-send timers (1 ms, 0.5 ms) bring the tree back.
        let opts = DemoOpts {
            fanout: vec![2, 3],
            groups: 8,
            count: Some(600),
            loops: 2,
            leaf_timeout_ns: 1_000_000,
            switch_timeout_ns: 500_000,
            ..DemoOpts::default()
        };
        let tree = Tree::new(&opts.fanout).unwrap();
        let clock = Clock::new();
        let demo = build_demo(&opts, &tree, mem_wires(&tree), clock.now_ns()).unwrap();
        let tables: Vec<_> = demo.switches.iter().map(|s| s.table.clone()).collect();
        let done = demo.done.clone();
        let resetter = std::thread::spawn(move || {
            let mut resets = 0;
            while !done.load(Ordering::Relaxed) && resets < 2000 {
                std::thread::sleep(Duration::from_micros(500));
                tables[resets % tables.len()].reset_all();
                resets += 1;
            }
            resets
        });
        let r = run_on_threads(demo, &opts, clock, Arc::new(AtomicBool::new(false)));
        let resets = resetter.join().unwrap();
        assert!(resets > 10, "only {resets} resets during the run");
        assert_eq!(
            r.report.early_releases, 0,
            "a release came before every leaf arrived"
        );
        assert!(
            r.report.completed.iter().all(|&c| c == 600),
            "{:?}",
            r.report.completed
        );
        for &n in &r.report.releases_per_leaf {
            assert_eq!(n, 600 * 8);
        }
    }

    #[test]
    fn children_of_a_group_on_different_rx_threads() {
        // 3 switch loops + the leaves' loop: each switch's ports are polled from 3 threads, so
        // the last two reduces of a barrier race in the group table's CAS; exactly one thread
        // must complete it (one release per leaf per barrier, none early).
        let opts = DemoOpts {
            fanout: vec![3, 3],
            groups: 20,
            count: Some(200),
            loops: 4,
            spread_rx: true,
            ..DemoOpts::default()
        };
        let tree = Tree::new(&opts.fanout).unwrap();
        let clock = Clock::new();
        let demo = build_demo(&opts, &tree, mem_wires(&tree), clock.now_ns()).unwrap();
        assert!(demo.loops[..3].iter().all(|l| !l.is_empty()));
        let stats = demo.switches.clone();
        let r = run_on_threads(demo, &opts, clock, Arc::new(AtomicBool::new(false)));
        assert_eq!(r.report.early_releases, 0);
        assert!(r.report.completed.iter().all(|&c| c == 200));
        assert!(r.report.releases_per_leaf.iter().all(|&n| n == 200 * 20));
        assert_eq!(
            stats[0].rx_sum(|c| &c.outcomes[Outcome::Completed]),
            200 * 20,
            "one completion per barrier at the root"
        );
    }

    #[test]
    fn loops_that_sleep_when_idle_still_complete_every_barrier() {
        // Three loops on (usually) fewer cores, the case the sleep policy is for; the leaves'
        // think time makes every loop go idle between barriers, so each one backs off.
        let opts = DemoOpts {
            fanout: vec![2, 2],
            groups: 2,
            count: Some(200),
            loops: 3,
            think_ns: vec![30_000, 30_000],
            idle: barrier_runtime::poll::Idle::Sleep {
                after: 10,
                ns: 5_000,
            },
            ..DemoOpts::default()
        };
        let tree = Tree::new(&opts.fanout).unwrap();
        let clock = Clock::new();
        let demo = build_demo(&opts, &tree, mem_wires(&tree), clock.now_ns()).unwrap();
        let r = run_on_threads(demo, &opts, clock, Arc::new(AtomicBool::new(false)));
        assert_eq!(r.report.early_releases, 0);
        assert!(r.report.completed.iter().all(|&c| c == 200));
        assert!(r.report.releases_per_leaf.iter().all(|&n| n == 400));
    }

    #[test]
    fn tree_shapes() {
        let t = Tree::new(&[2, 4]).unwrap();
        assert_eq!(t.switches().len(), 3);
        assert_eq!(t.leaves().len(), 8);
        assert!(Tree::new(&[]).is_err());
        assert!(Tree::new(&[65]).is_err());
        assert!(Tree::new(&[64]).is_ok());
        assert!(
            Tree::new(&[2, 64]).is_err(),
            "an intermediate needs a port for its parent"
        );
    }
}
