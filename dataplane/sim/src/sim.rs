//! The tree simulation: the real `barrier_protocol` switch logic at every switch and the real
//! `Leaf` at every leaf, over the link model, with faults, restarts, outages and late leaves.
//! Every frame is emitted and parsed with `wire::FrameRepr`. Safety and liveness are checked
//! on the fly; a violation is reported with the trace of the events that led to it.

use crate::broken::{self, BrokenSwitch};
use crate::link::{Faults, LinkParams, Network};
use crate::queue::EventQueue;
use crate::report::LatencyStats;
use crate::rng::Rng;
use crate::topology::{Dir, NodeRef, Topology, TreeSpec, TreeSummary};
use crate::trace::{Fate, Trace, TraceWhat};
use barrier_protocol::counts::OutcomeCounts;
use barrier_protocol::leaf::{Leaf, LeafConfig, LeafState};
use barrier_protocol::switch::{self, Action, Event, GroupConfig, GroupState, Outcome, Reject};
use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{GroupId, PortIdx, Seq, Time};
use serde::Serialize;

/// When faults (loss, duplication, reordering, delay, restarts, outages) end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum FaultStop {
    Never,
    /// When the first leaf of group 0 arrives at this barrier.
    AtBarrier(u64),
    AtTime(u64),
}

/// How long a leaf computes between two barriers: uniform in `min..=max`, and with
/// probability `late` a further uniform `0..=late_ns` (a straggler).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ComputeModel {
    pub min_ns: u64,
    pub max_ns: u64,
    pub late: f64,
    pub late_ns: u64,
}

impl Default for ComputeModel {
    fn default() -> Self {
        ComputeModel {
            min_ns: 0,
            max_ns: 2_000,
            late: 0.01,
            late_ns: 50_000,
        }
    }
}

impl ComputeModel {
    pub fn draw(&self, rng: &mut Rng) -> u64 {
        let mut d = rng.range_inclusive(self.min_ns, self.max_ns.max(self.min_ns));
        if rng.chance(self.late) {
            d += rng.range_inclusive(0, self.late_ns);
        }
        d
    }

    pub fn worst_ns(&self) -> u64 {
        self.max_ns.max(self.min_ns) + if self.late > 0.0 { self.late_ns } else { 0 }
    }
}

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub tree: TreeSpec,
    /// Barrier groups; group 0 spans every leaf, the others random subsets.
    pub groups: u32,
    /// Barriers every group runs.
    pub barriers: u64,
    pub seed: u64,
    pub link: LinkParams,
    pub faults: Faults,
    /// Give every link its own fault rates: the configured ones scaled by a random factor in
    /// 0..2 (a quarter of the links clean).
    pub vary_faults_per_link: bool,
    pub faults_stop: FaultStop,
    /// Switch restarts, at random switches and random barriers (while faults are on).
    pub restarts: u32,
    /// Restarts at given times: `(switch, ns)`. Switch 0 is the root; the others are numbered
    /// depth-first.
    pub scheduled_restarts: Vec<(u32, u64)>,
    /// How long a restarting switch drops every frame.
    pub restart_down_ns: u64,
    /// Link outages (both directions down), at random links and barriers.
    pub outages: u32,
    pub outage_ns: u64,
    pub compute: ComputeModel,
    /// Leaf re-send timeout; `None`: 4x the longest round trip of the tree.
    pub leaf_timeout_ns: Option<u64>,
    /// Intermediate re-send timeout; `None`: same as the leaf's.
    pub switch_timeout_ns: Option<u64>,
    /// Liveness: a barrier is stuck when nothing progresses for this long after the last
    /// fault. `None`: 100 re-send timeouts plus the longest compute time.
    pub stall_ns: Option<u64>,
    /// Sequence number of the first barrier (tests start near 2^32 to cross the wrap).
    pub first_seq: u32,
    pub broken: Option<BrokenSwitch>,
    /// Events kept in the trace ring.
    pub trace_len: usize,
    /// Keep running after a safety violation (count them all).
    pub keep_going: bool,
    /// Violations reported in full (with their trace); later ones are only counted.
    pub max_reported: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            tree: TreeSpec::Fanouts(vec![4, 4, 4]),
            groups: 1,
            barriers: 100,
            seed: 1,
            link: LinkParams::default(),
            faults: Faults::none(),
            vary_faults_per_link: false,
            faults_stop: FaultStop::Never,
            restarts: 0,
            scheduled_restarts: Vec::new(),
            restart_down_ns: 5_000,
            outages: 0,
            outage_ns: 50_000,
            compute: ComputeModel::default(),
            leaf_timeout_ns: None,
            switch_timeout_ns: None,
            stall_ns: None,
            first_seq: 0,
            broken: None,
            trace_len: 48,
            keep_going: false,
            max_reported: 5,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// A switch sent a release for a barrier some leaf had not sent its reduce for.
    ReleaseBeforeAllArrived,
    /// A leaf accepted the release of a barrier some leaf had not sent its reduce for.
    LeafReleasedEarly,
    /// No progress for the stall window after the last fault.
    Stuck,
    /// The model itself found something impossible (a frame that does not parse, a send on a
    /// port with no link, a leaf accepting a release for another sequence number).
    Model,
}

#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    pub kind: ViolationKind,
    pub at_ns: u64,
    pub message: String,
    pub details: Vec<String>,
    /// The last events before the violation, oldest first.
    pub trace: Vec<String>,
    /// The last decisive events, further back: switch steps other than recording or ignoring
    /// a duplicate (completions, releases, stale frames, rejections), broken-rule
    /// applications, restarts, outages. The cause of a violation is often older than the
    /// plain trace reaches.
    pub decisions: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct FrameStats {
    /// Frames put on links by leaves and switches (one frame per hop), retransmits included.
    pub sent: u64,
    pub reduces_sent: u64,
    pub releases_sent: u64,
    pub leaf_retransmits: u64,
    pub switch_retransmits: u64,
    /// Copies the network added.
    pub duplicated: u64,
    pub lost: u64,
    pub reordered: u64,
    pub delayed: u64,
    pub dropped_link_down: u64,
    pub dropped_switch_restarting: u64,
    /// Dropped because the link's transmit queue was full.
    pub dropped_queue_full: u64,
    pub delivered: u64,
    /// Frames of a group the receiving switch or leaf has no configuration for.
    pub unknown_group: u64,
    pub leaf_ignored_releases: u64,
    /// Of `sent`: frames for the barrier after the last counted one (leaves go on past the
    /// end of the run); left out of `frames_per_barrier`.
    pub past_last_barrier: u64,
    /// Longest time a frame took over one link (queueing, serialization, latency, delays),
    /// from the tx timestamp it carried.
    pub max_hop_ns: u64,
}

/// What the switches' control steps decided, over the whole run.
#[derive(Clone, Debug, Default)]
pub struct OutcomeStats {
    /// One count per `Outcome` of `switch::on_event`.
    pub by_outcome: OutcomeCounts,
    pub switch_timer_fired: u64,
}

impl OutcomeStats {
    /// `o`'s count.
    pub fn get(&self, o: Outcome) -> u64 {
        self.by_outcome.get(o)
    }
}

/// The JSON report's field for an outcome: `Outcome::name`, rejections prefixed `rejected_`.
fn json_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Rejected(Reject::NotAChild) => "rejected_not_a_child",
        Outcome::Rejected(Reject::NotTheParent) => "rejected_not_the_parent",
        other => other.name(),
    }
}

/// One field per outcome (in `Outcome::ALL` order), then `switch_timer_fired`.
impl Serialize for OutcomeStats {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = ser.serialize_struct("OutcomeStats", Outcome::ALL.len() + 1)?;
        for (o, n) in self.by_outcome.iter() {
            st.serialize_field(json_name(o), &n)?;
        }
        st.serialize_field("switch_timer_fired", &self.switch_timer_fired)?;
        st.end()
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct GroupSummary {
    pub group: u32,
    pub members: u32,
    pub barriers_completed: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub tree: TreeSummary,
    pub seed: u64,
    pub barriers_per_group: u64,
    pub groups: Vec<GroupSummary>,
    pub link: LinkParams,
    pub faults: Faults,
    pub vary_faults_per_link: bool,
    pub faults_stop: FaultStop,
    pub faults_stopped_at_ns: Option<u64>,
    pub restarts: u64,
    pub outages: u64,
    pub leaf_timeout_ns: u64,
    pub switch_timeout_ns: u64,
    pub stall_ns: u64,
    pub first_seq: u32,
    pub broken_switch: Option<BrokenSwitch>,
    pub modelled_time_ns: u64,
    pub events: u64,
    pub barriers_completed: u64,
    /// Per barrier: last leaf's release minus last leaf's arrival, in modelled ns.
    pub latency: LatencyStats,
    pub frames: FrameStats,
    pub frames_per_barrier: f64,
    pub outcomes: OutcomeStats,
    pub safety_violations: u64,
    /// Barriers (over all groups) left incomplete by a stall (the liveness check fired).
    pub stuck_barriers: u64,
    /// The run stopped at a violation before every barrier ran (see `violations`).
    pub halted_early: bool,
    pub violations: Vec<Violation>,
    pub ok: bool,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Deliver {
        link: u32,
        dir: Dir,
        frame: [u8; FRAME_LEN],
    },
    LeafCompute {
        leaf: u32,
        slot: u16,
    },
    LeafTimer {
        leaf: u32,
        slot: u16,
        gen: u32,
    },
    SwitchTimer {
        switch: u32,
        slot: u16,
        seq: Seq,
        epoch: u32,
    },
    /// `scheduled`: given by time in the configuration, carried out even after faults stop.
    Restart {
        switch: u32,
        scheduled: bool,
    },
    Outage {
        link: u32,
        duration: u64,
    },
    StopFaults,
}

#[derive(Clone, Copy, Debug)]
enum Disruption {
    /// `at`: when in the barrier cycle, as a fraction of the cycle's length.
    Restart {
        switch: u32,
        at: f64,
    },
    Outage {
        link: u32,
        at: f64,
        duration: u64,
    },
}

struct LeafSlot {
    group: u16,
    leaf: Leaf,
    /// Barriers this leaf has been released from.
    done: u64,
    /// Only the newest timer event of the slot is live.
    gen: u32,
}

struct SwitchGroup {
    group: u16,
    cfg: GroupConfig,
    state: GroupState,
}

struct SwitchSim {
    groups: Vec<SwitchGroup>,
    /// Bumped by a restart: timer events armed before it are dropped.
    epoch: u32,
    down_until: Time,
}

#[derive(Clone, Copy, Default)]
struct Track {
    arrivals: u32,
    releases: u32,
    last_arrive: Time,
    last_release: Time,
}

struct GroupSim {
    id: GroupId,
    members: u32,
    tracks: Vec<Track>,
    completed: u64,
}

struct Sim<'a> {
    cfg: &'a SimConfig,
    topo: Topology,
    net: Network,
    queue: EventQueue<Ev>,
    trace: Trace,
    decisions: Trace,
    switches: Vec<SwitchSim>,
    leaves: Vec<Vec<LeafSlot>>,
    groups: Vec<GroupSim>,
    compute_rng: Rng,
    faults_active: bool,
    faults_stopped_at: Option<Time>,
    /// Pending disruptions by barrier, latest first (popped from the end).
    disruptions: Vec<(u64, Disruption)>,
    /// Last time something progressed or a fault ended: the stall window counts from here.
    quiet_since: Time,
    unfinished_slots: u64,
    leaf_timeout_ns: u64,
    switch_timeout_ns: u64,
    stall_ns: u64,
    /// A barrier cycle without faults: round trip plus compute.
    est_barrier_ns: u64,
    /// Group 0's last barrier start and the time between its last two starts.
    last_start: Time,
    cycle_ns: u64,
    frames: FrameStats,
    outcomes: OutcomeStats,
    restarts: u64,
    outages: u64,
    safety_violations: u64,
    violations: Vec<Violation>,
    halt: bool,
    actions: Vec<Action>,
    now: Time,
}

fn mac_of(node: NodeRef) -> MacAddr {
    // Locally administered unicast addresses: 02:<kind>:<index, 32-bit BE>.
    let (k, i) = match node {
        NodeRef::Leaf(i) => (0u8, i),
        NodeRef::Switch(s) => (1u8, s),
    };
    let b = i.to_be_bytes();
    MacAddr([0x02, k, b[0], b[1], b[2], b[3]])
}

/// Longest leaf-root-leaf round trip without queueing or faults.
fn round_trip_ns(cfg: &SimConfig, topo: &Topology) -> u64 {
    let hop = cfg.link.latency_ns + cfg.link.jitter_ns + cfg.link.serialization_ns();
    2 * topo.max_leaf_depth() as u64 * hop.max(1)
}

fn timeouts(cfg: &SimConfig, topo: &Topology) -> Result<(u64, u64), String> {
    let leaf = cfg
        .leaf_timeout_ns
        .unwrap_or((4 * round_trip_ns(cfg, topo)).max(1_000));
    let switch = cfg.switch_timeout_ns.unwrap_or(leaf);
    if leaf == 0 || switch == 0 {
        return Err("re-send timeouts must be positive".into());
    }
    Ok((leaf, switch))
}

/// The (leaf, switch) re-send timeouts a run with this configuration uses.
pub fn resolved_timeouts(cfg: &SimConfig) -> Result<(u64, u64), String> {
    timeouts(cfg, &Topology::build(&cfg.tree)?)
}

/// Runs one simulation. `Err` only for a configuration that cannot be built.
pub fn run(cfg: &SimConfig) -> Result<RunReport, String> {
    let topo = Topology::build(&cfg.tree)?;
    if cfg.groups == 0 || cfg.groups > 1024 {
        // Frames find their group by a linear scan of the few a node belongs to.
        return Err("--groups must be in 1..=1024".into());
    }
    if cfg.barriers == 0 {
        return Err("--barriers must be at least 1".into());
    }
    if cfg.barriers >= 1 << 31 {
        return Err("at most 2^31 - 1 barriers (sequence numbers are compared modulo 2^32)".into());
    }
    let mut sim = Sim::new(cfg, topo)?;
    sim.run();
    Ok(sim.report())
}

impl<'a> Sim<'a> {
    fn new(cfg: &'a SimConfig, topo: Topology) -> Result<Self, String> {
        let (leaf_timeout_ns, switch_timeout_ns) = timeouts(cfg, &topo)?;
        let rtt = round_trip_ns(cfg, &topo);
        let stall_ns = cfg.stall_ns.unwrap_or(
            100 * leaf_timeout_ns.max(switch_timeout_ns)
                    + cfg.compute.worst_ns()
                    // Full transmit queues on every hop, twice over.
                    + 4 * topo.max_leaf_depth() as u64 * cfg.link.max_queueing_ns(),
        );
        let est_barrier_ns = rtt + cfg.compute.max_ns;

        let mut fault_rng = Rng::stream(cfg.seed, 0xFA17);
        let link_faults: Vec<Faults> = (0..topo.links.len())
            .map(|_| {
                if cfg.vary_faults_per_link {
                    if fault_rng.chance(0.25) {
                        Faults::none()
                    } else {
                        cfg.faults.scaled(2.0 * fault_rng.unit())
                    }
                } else {
                    cfg.faults
                }
            })
            .collect();
        let net = Network::new(cfg.link, topo.links.len(), |l| link_faults[l], cfg.seed);

        let plans = topo.plan_groups(cfg.groups, cfg.seed, switch_timeout_ns);
        let mut switches: Vec<SwitchSim> = (0..topo.switches.len())
            .map(|_| SwitchSim {
                groups: Vec::new(),
                epoch: 0,
                down_until: Time(0),
            })
            .collect();
        let mut leaves: Vec<Vec<LeafSlot>> = (0..topo.leaves.len()).map(|_| Vec::new()).collect();
        let mut groups = Vec::with_capacity(plans.len());
        for (gi, plan) in plans.iter().enumerate() {
            for (s, gc) in &plan.switch_configs {
                gc.validate()
                    .map_err(|e| format!("bad config for {:?} at sw{s}: {e:?}", plan.id))?;
                switches[*s as usize].groups.push(SwitchGroup {
                    group: gi as u16,
                    cfg: *gc,
                    state: GroupState::fresh(),
                });
            }
            for &m in &plan.members {
                leaves[m as usize].push(LeafSlot {
                    group: gi as u16,
                    leaf: Leaf::new(LeafConfig {
                        group: plan.id,
                        resend_timeout_ns: leaf_timeout_ns,
                        first_seq: Seq(cfg.first_seq),
                    }),
                    done: 0,
                    gen: 0,
                });
            }
            groups.push(GroupSim {
                id: plan.id,
                members: plan.members.len() as u32,
                // One more than counted: leaves go on past the last counted barrier.
                tracks: vec![Track::default(); cfg.barriers as usize + 1],
                completed: 0,
            });
        }
        let unfinished_slots = leaves.iter().map(|v| v.len() as u64).sum();

        // Disruptions are placed by barrier rather than by time, so they spread over the run
        // whatever its length turns out to be.
        let mut drng = Rng::stream(cfg.seed, 0xD15);
        let fault_barriers = match cfg.faults_stop {
            FaultStop::AtBarrier(b) => b.min(cfg.barriers),
            _ => cfg.barriers,
        };
        let mut disruptions = Vec::new();
        if fault_barriers > 0 {
            for _ in 0..cfg.restarts {
                let b = drng.below(fault_barriers);
                let switch = drng.below(topo.switches.len() as u64) as u32;
                disruptions.push((
                    b,
                    Disruption::Restart {
                        switch,
                        at: drng.unit(),
                    },
                ));
            }
            for _ in 0..cfg.outages {
                let b = drng.below(fault_barriers);
                let link = drng.below(topo.links.len() as u64) as u32;
                let duration = drng.range_inclusive(cfg.outage_ns / 2, cfg.outage_ns);
                disruptions.push((
                    b,
                    Disruption::Outage {
                        link,
                        at: drng.unit(),
                        duration,
                    },
                ));
            }
        }
        disruptions.sort_by_key(|(b, _)| std::cmp::Reverse(*b));

        Ok(Sim {
            cfg,
            net,
            queue: EventQueue::new(),
            trace: Trace::new(cfg.trace_len),
            decisions: Trace::new(cfg.trace_len),
            switches,
            leaves,
            groups,
            compute_rng: Rng::stream(cfg.seed, 0xC0DE),
            faults_active: !cfg.faults.is_none() || cfg.restarts > 0 || cfg.outages > 0,
            faults_stopped_at: None,
            disruptions,
            quiet_since: Time(0),
            unfinished_slots,
            leaf_timeout_ns,
            switch_timeout_ns,
            stall_ns,
            est_barrier_ns,
            last_start: Time(0),
            cycle_ns: 0,
            frames: FrameStats::default(),
            outcomes: OutcomeStats::default(),
            restarts: 0,
            outages: 0,
            safety_violations: 0,
            violations: Vec::new(),
            halt: false,
            actions: Vec::with_capacity(16),
            now: Time(0),
            topo,
        })
    }

    fn run(&mut self) {
        for &(switch, at_ns) in &self.cfg.scheduled_restarts {
            self.queue.push(
                Time(at_ns),
                Ev::Restart {
                    switch,
                    scheduled: true,
                },
            );
        }
        if let FaultStop::AtTime(t) = self.cfg.faults_stop {
            self.queue.push(Time(t), Ev::StopFaults);
        }
        if let FaultStop::AtBarrier(0) = self.cfg.faults_stop {
            self.stop_faults(Time(0));
        }
        for l in 0..self.leaves.len() {
            for s in 0..self.leaves[l].len() {
                let d = self.cfg.compute.draw(&mut self.compute_rng);
                self.queue.push(
                    Time(d),
                    Ev::LeafCompute {
                        leaf: l as u32,
                        slot: s as u16,
                    },
                );
            }
        }
        while self.unfinished_slots > 0 && !self.halt {
            let Some((t, ev)) = self.queue.pop() else {
                self.stuck(self.now, "the event queue ran dry");
                break;
            };
            // Liveness is promised only once faults stop. With a stop time ahead, a stall under
            // heavy faults is no violation yet; otherwise (no stop, or a stop at a barrier that
            // a stall would never reach) the window applies throughout.
            let waiting_for_stop =
                matches!(self.cfg.faults_stop, FaultStop::AtTime(_)) && self.faults_active;
            if !waiting_for_stop
                && t.nanos() > self.quiet_since.nanos().saturating_add(self.stall_ns)
            {
                self.stuck(t, "no progress for the stall window");
                break;
            }
            self.now = t;
            self.handle(t, ev);
        }
    }

    fn handle(&mut self, now: Time, ev: Ev) {
        match ev {
            Ev::Deliver { link, dir, frame } => {
                self.frames.delivered += 1;
                let l = &self.topo.links[link as usize];
                match (dir, l.child) {
                    (Dir::Up, _) => self.switch_receive(now, l.parent, l.port_at_parent, &frame),
                    (Dir::Down, NodeRef::Switch(s)) => {
                        let p = l.port_at_child.expect("a switch child has a parent port");
                        self.switch_receive(now, s, p, &frame)
                    }
                    (Dir::Down, NodeRef::Leaf(i)) => self.leaf_receive(now, i, &frame),
                }
            }
            Ev::LeafCompute { leaf, slot } => self.leaf_arrive(now, leaf, slot),
            Ev::LeafTimer { leaf, slot, gen } => self.leaf_timer(now, leaf, slot, gen),
            Ev::SwitchTimer {
                switch,
                slot,
                seq,
                epoch,
            } => {
                let sw = &mut self.switches[switch as usize];
                if sw.epoch != epoch {
                    return; // armed before a restart: the restart dropped it
                }
                let g = &mut sw.groups[slot as usize];
                let (state, actions) = switch::on_timer(&g.cfg, g.state, seq);
                g.state = state;
                let gi = g.group;
                self.outcomes.switch_timer_fired += 1;
                self.trace.push(
                    now,
                    TraceWhat::SwitchTimer {
                        switch,
                        group: self.groups[gi as usize].id,
                        seq,
                        after: state,
                    },
                );
                self.actions.clear();
                self.actions.extend(actions.iter().copied());
                self.perform(now, switch, slot);
            }
            Ev::Restart { switch, scheduled } => {
                if !self.faults_active && !scheduled {
                    return;
                }
                if switch as usize >= self.switches.len() {
                    let msg = format!("scheduled restart of sw{switch}, which does not exist");
                    self.violation(now, ViolationKind::Model, msg, vec![]);
                    return;
                }
                let down_until = now + self.cfg.restart_down_ns;
                let sw = &mut self.switches[switch as usize];
                for g in &mut sw.groups {
                    g.state = GroupState::fresh();
                }
                sw.epoch = sw.epoch.wrapping_add(1);
                sw.down_until = down_until;
                self.restarts += 1;
                self.quiet_since = self.quiet_since.max(down_until);
                self.trace.push(now, TraceWhat::Restart { switch });
                self.decisions.push(now, TraceWhat::Restart { switch });
            }
            Ev::Outage { link, duration } => {
                if !self.faults_active {
                    return;
                }
                let until = now + duration;
                self.net.set_down(link, until);
                self.outages += 1;
                self.quiet_since = self.quiet_since.max(until);
                self.trace.push(now, TraceWhat::Outage { link, until });
                self.decisions.push(now, TraceWhat::Outage { link, until });
            }
            Ev::StopFaults => self.stop_faults(now),
        }
    }

    fn stop_faults(&mut self, now: Time) {
        if self.faults_stopped_at.is_none() {
            self.faults_active = false;
            self.faults_stopped_at = Some(now);
            self.quiet_since = self.quiet_since.max(now);
            self.trace.push(now, TraceWhat::FaultsStopped);
            self.decisions.push(now, TraceWhat::FaultsStopped);
        }
    }

    /// Group 0's first leaf arrived at barrier `b`: start what was planned for it.
    fn barrier_started(&mut self, now: Time, b: u64) {
        if b > 0 {
            self.cycle_ns = now.saturating_sub(self.last_start);
        }
        self.last_start = now;
        if let FaultStop::AtBarrier(x) = self.cfg.faults_stop {
            if b >= x {
                self.stop_faults(now);
            }
        }
        while let Some(&(db, d)) = self.disruptions.last() {
            if db > b {
                break;
            }
            self.disruptions.pop();
            if !self.faults_active {
                continue;
            }
            // Anywhere in the cycle, computing between barriers included: a restart while a
            // switch collects, while it waits for the release, and while its leaves compute
            // all need to be covered.
            let cycle = self.cycle_ns.max(self.est_barrier_ns).max(1) as f64;
            match d {
                Disruption::Restart { switch, at } => self.queue.push(
                    now + (at * cycle) as u64,
                    Ev::Restart {
                        switch,
                        scheduled: false,
                    },
                ),
                Disruption::Outage { link, at, duration } => self
                    .queue
                    .push(now + (at * cycle) as u64, Ev::Outage { link, duration }),
            }
        }
    }

    fn barrier_of(&self, seq: Seq) -> u64 {
        seq.0.wrapping_sub(self.cfg.first_seq) as u64
    }

    // ---- leaves ----------------------------------------------------------------------------

    fn leaf_arrive(&mut self, now: Time, leaf: u32, slot: u16) {
        let s = &mut self.leaves[leaf as usize][slot as usize];
        let send = match s.leaf.arrive(now) {
            Ok(send) => send,
            Err(e) => {
                let msg = format!("leaf{leaf} could not arrive: {e:?}");
                self.violation(now, ViolationKind::Model, msg, vec![]);
                return;
            }
        };
        let b = s.done;
        let gi = s.group as usize;
        let g = &mut self.groups[gi];
        let Some(t) = g.tracks.get_mut(b as usize) else {
            let msg = format!("leaf{leaf} arrives at barrier {b}, past the end of the run");
            self.violation(now, ViolationKind::Model, msg, vec![]);
            return;
        };
        t.arrivals += 1;
        t.last_arrive = now;
        let first = t.arrivals == 1;
        self.quiet_since = self.quiet_since.max(now);
        self.trace.push(
            now,
            TraceWhat::LeafArrive {
                leaf,
                group: send.group,
                seq: send.seq,
                barrier: b,
            },
        );
        if gi == 0 && first {
            self.barrier_started(now, b);
        }
        self.leaf_send(now, leaf, send.group, send.seq, send.retransmit);
        self.arm_leaf_timer(leaf, slot);
    }

    fn arm_leaf_timer(&mut self, leaf: u32, slot: u16) {
        let s = &mut self.leaves[leaf as usize][slot as usize];
        if let Some(d) = s.leaf.next_deadline() {
            s.gen = s.gen.wrapping_add(1);
            self.queue.push(
                d,
                Ev::LeafTimer {
                    leaf,
                    slot,
                    gen: s.gen,
                },
            );
        }
    }

    fn leaf_timer(&mut self, now: Time, leaf: u32, slot: u16, gen: u32) {
        let s = &mut self.leaves[leaf as usize][slot as usize];
        if s.gen != gen {
            return;
        }
        match s.leaf.poll(now) {
            Some(send) => {
                self.trace.push(
                    now,
                    TraceWhat::LeafResend {
                        leaf,
                        group: send.group,
                        seq: send.seq,
                    },
                );
                self.leaf_send(now, leaf, send.group, send.seq, send.retransmit);
                self.arm_leaf_timer(leaf, slot);
            }
            None => {
                // Not due yet by the leaf's own reckoning: look again at its deadline.
                if let (LeafState::Waiting { .. }, Some(d)) =
                    (s.leaf.state(), s.leaf.next_deadline())
                {
                    self.queue
                        .push(d.max(now + 1), Ev::LeafTimer { leaf, slot, gen });
                }
            }
        }
    }

    fn leaf_send(&mut self, now: Time, leaf: u32, group: GroupId, seq: Seq, retransmit: bool) {
        if retransmit {
            self.frames.leaf_retransmits += 1;
        }
        self.transmit(
            now,
            NodeRef::Leaf(leaf),
            leaf,
            Dir::Up,
            Kind::Reduce,
            group,
            seq,
            retransmit,
        );
    }

    fn leaf_receive(&mut self, now: Time, leaf: u32, frame: &[u8]) {
        let Some(repr) = self.parse(now, NodeRef::Leaf(leaf), frame) else {
            return;
        };
        self.trace.push(
            now,
            TraceWhat::Deliver {
                to: NodeRef::Leaf(leaf),
                port: None,
                kind: repr.kind,
                group: repr.group,
                seq: repr.seq,
            },
        );
        if repr.kind != Kind::Release {
            let msg = format!("leaf{leaf} received a {:?} frame", repr.kind);
            self.violation(now, ViolationKind::Model, msg, vec![]);
            return;
        }
        let Some(slot) = self.leaves[leaf as usize]
            .iter()
            .position(|s| self.groups[s.group as usize].id == repr.group)
        else {
            self.frames.unknown_group += 1;
            return;
        };
        let s = &mut self.leaves[leaf as usize][slot];
        let leaf_seq = s.leaf.seq();
        let Some(released) = s.leaf.on_release(now, repr.seq) else {
            self.frames.leaf_ignored_releases += 1;
            self.trace.push(
                now,
                TraceWhat::LeafIgnoredRelease {
                    leaf,
                    group: repr.group,
                    seq: repr.seq,
                    leaf_seq,
                },
            );
            return;
        };
        let b = s.done;
        s.done += 1;
        s.gen = s.gen.wrapping_add(1); // its re-send timer is void now
        let finished = s.done == self.cfg.barriers;
        let gi = s.group as usize;
        self.trace.push(
            now,
            TraceWhat::LeafReleased {
                leaf,
                group: repr.group,
                seq: released.seq,
                barrier: b,
            },
        );
        if released.seq != leaf_seq {
            let msg = format!(
                "leaf{leaf} accepted release seq {} while at seq {}",
                released.seq.0, leaf_seq.0
            );
            self.violation(now, ViolationKind::Model, msg, vec![]);
        }
        let g = &mut self.groups[gi];
        let t = &mut g.tracks[b as usize];
        if t.arrivals < g.members {
            let msg = format!(
                "leaf{leaf} released from barrier {b} ({:?} seq {}) while only {} of {} leaves had sent their reduce for it",
                g.id, released.seq.0, t.arrivals, g.members
            );
            let details = self.waiting_leaves(gi, b);
            self.safety_violations += 1;
            self.violation(now, ViolationKind::LeafReleasedEarly, msg, details);
        }
        let g = &mut self.groups[gi];
        let t = &mut g.tracks[b as usize];
        t.releases += 1;
        t.last_release = now;
        if t.releases == g.members && b < self.cfg.barriers {
            g.completed += 1;
        }
        self.quiet_since = self.quiet_since.max(now);
        if finished {
            self.unfinished_slots -= 1;
        }
        // A leaf done with its last counted barrier goes on to the next one, as an application
        // would: a restarted switch may need a reduce for the next barrier as the evidence
        // that the last one completed (see docs/simulator.md, "The end of a run").
        if b < self.cfg.barriers {
            let d = self.cfg.compute.draw(&mut self.compute_rng);
            self.queue.push(
                now + d,
                Ev::LeafCompute {
                    leaf,
                    slot: slot as u16,
                },
            );
        }
    }

    // ---- switches --------------------------------------------------------------------------

    fn switch_receive(&mut self, now: Time, switch: u32, port: PortIdx, frame: &[u8]) {
        if now < self.switches[switch as usize].down_until {
            self.frames.dropped_switch_restarting += 1;
            self.trace
                .push(now, TraceWhat::DroppedAtDownSwitch { switch });
            return;
        }
        let Some(repr) = self.parse(now, NodeRef::Switch(switch), frame) else {
            return;
        };
        self.trace.push(
            now,
            TraceWhat::Deliver {
                to: NodeRef::Switch(switch),
                port: Some(port),
                kind: repr.kind,
                group: repr.group,
                seq: repr.seq,
            },
        );
        let groups = &self.groups;
        let Some(slot) = self.switches[switch as usize]
            .groups
            .iter()
            .position(|g| groups[g.group as usize].id == repr.group)
        else {
            self.frames.unknown_group += 1;
            return;
        };
        let ev = Event::from_frame(&repr, port);
        let g = &mut self.switches[switch as usize].groups[slot];
        let before = g.state;
        self.actions.clear();
        let (after, outcome, bent) =
            broken::control(self.cfg.broken, &g.cfg, before, ev, &mut self.actions);
        g.state = after;
        let gid = self.groups[g.group as usize].id;
        if let (true, Some(kind)) = (bent, self.cfg.broken) {
            let what = TraceWhat::BrokenRule {
                switch,
                group: gid,
                kind,
                kind_of_frame: repr.kind,
                port,
                seq: repr.seq,
            };
            self.trace.push(now, what);
            self.decisions.push(now, what);
        }
        self.outcomes.by_outcome.bump(outcome);
        let what = TraceWhat::Control {
            switch,
            group: gid,
            before,
            after,
            outcome,
        };
        self.trace.push(now, what);
        if !matches!(outcome, Outcome::Recorded | Outcome::Duplicate) {
            self.decisions.push(now, what);
        }
        self.perform(now, switch, slot as u16);
    }

    /// Carries out `self.actions` for group slot `slot` of `switch`.
    fn perform(&mut self, now: Time, switch: u32, slot: u16) {
        let actions = std::mem::take(&mut self.actions);
        let (gi, epoch) = {
            let sw = &self.switches[switch as usize];
            (sw.groups[slot as usize].group as usize, sw.epoch)
        };
        let gid = self.groups[gi].id;
        for a in &actions {
            match *a {
                Action::SendReduce {
                    seq,
                    port,
                    retransmit,
                } => {
                    if retransmit {
                        self.frames.switch_retransmits += 1;
                    }
                    self.switch_send(now, switch, port, Kind::Reduce, gid, seq, retransmit);
                }
                Action::SendRelease {
                    seq,
                    ports,
                    retransmit,
                } => {
                    self.check_release(now, switch, gi, seq);
                    for p in ports.iter() {
                        if retransmit {
                            self.frames.switch_retransmits += 1;
                        }
                        self.switch_send(now, switch, p, Kind::Release, gid, seq, retransmit);
                    }
                }
                Action::ArmTimer { seq, after_ns } => {
                    self.queue.push(
                        now + after_ns,
                        Ev::SwitchTimer {
                            switch,
                            slot,
                            seq,
                            epoch,
                        },
                    );
                }
            }
        }
        self.actions = actions;
    }

    /// Safety, checked where it is first at risk: a release leaves a switch only for a barrier
    /// every member leaf has sent its reduce for.
    fn check_release(&mut self, now: Time, switch: u32, gi: usize, seq: Seq) {
        let b = self.barrier_of(seq);
        let g = &self.groups[gi];
        let arrived = g.tracks.get(b as usize).map_or(0, |t| t.arrivals);
        if arrived < g.members {
            let msg = format!(
                "sw{switch} sends release {:?} seq {} (barrier {b}) while only {arrived} of {} leaves have sent their reduce for it",
                g.id, seq.0, g.members
            );
            let details = self.waiting_leaves(gi, b);
            self.safety_violations += 1;
            self.violation(now, ViolationKind::ReleaseBeforeAllArrived, msg, details);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn switch_send(
        &mut self,
        now: Time,
        switch: u32,
        port: PortIdx,
        kind: Kind,
        group: GroupId,
        seq: Seq,
        retransmit: bool,
    ) {
        match self.topo.port_links[switch as usize][port.get() as usize] {
            Some((link, dir)) => self.transmit(
                now,
                NodeRef::Switch(switch),
                link,
                dir,
                kind,
                group,
                seq,
                retransmit,
            ),
            None => {
                let msg = format!("sw{switch} sends on {port:?}, which has no link");
                self.violation(now, ViolationKind::Model, msg, vec![]);
            }
        }
    }

    // ---- frames on links -------------------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    fn transmit(
        &mut self,
        now: Time,
        from: NodeRef,
        link: u32,
        dir: Dir,
        kind: Kind,
        group: GroupId,
        seq: Seq,
        retransmit: bool,
    ) {
        let to = match dir {
            Dir::Up => NodeRef::Switch(self.topo.links[link as usize].parent),
            Dir::Down => self.topo.links[link as usize].child,
        };
        let repr = FrameRepr {
            dst: mac_of(to),
            src: mac_of(from),
            kind,
            flags: Flags::retransmit(retransmit),
            group,
            seq,
            // Exercises the optional timestamp field; the receiver checks it came back.
            tx_timestamp: Some(now.nanos()),
        };
        let mut frame = [0u8; FRAME_LEN];
        repr.emit(&mut frame);
        self.frames.sent += 1;
        if self.barrier_of(seq) >= self.cfg.barriers {
            self.frames.past_last_barrier += 1;
        }
        match kind {
            Kind::Reduce => self.frames.reduces_sent += 1,
            Kind::Release => self.frames.releases_sent += 1,
        }
        let tx = self.net.transmit(now, link, dir, self.faults_active);
        let fate = if tx.queue_full {
            self.frames.dropped_queue_full += 1;
            Fate::QueueFull
        } else if tx.down {
            self.frames.dropped_link_down += 1;
            Fate::LinkDown
        } else if tx.lost {
            self.frames.lost += 1;
            Fate::Lost
        } else if tx.duplicated {
            self.frames.duplicated += 1;
            Fate::Duplicated
        } else if tx.reordered {
            Fate::Reordered
        } else if tx.delayed {
            Fate::Delayed
        } else {
            Fate::Delivered
        };
        self.frames.reordered += tx.reordered as u64;
        self.frames.delayed += tx.delayed as u64;
        self.trace.push(
            now,
            TraceWhat::Send {
                from,
                to,
                kind,
                group,
                seq,
                retransmit,
                fate,
            },
        );
        for at in tx.arrivals.into_iter().flatten() {
            self.queue.push(at, Ev::Deliver { link, dir, frame });
        }
    }

    fn parse(&mut self, now: Time, at: NodeRef, frame: &[u8]) -> Option<FrameRepr> {
        match FrameRepr::parse(frame) {
            Ok(r) => match r.tx_timestamp {
                Some(ts) if ts <= now.nanos() => {
                    let hop = now.nanos() - ts;
                    self.frames.max_hop_ns = self.frames.max_hop_ns.max(hop);
                    Some(r)
                }
                other => {
                    let msg = format!(
                        "{at} parsed a frame sent at {other:?} ns, now is {} ns",
                        now.nanos()
                    );
                    self.violation(now, ViolationKind::Model, msg, vec![]);
                    None
                }
            },
            Err(e) => {
                let msg = format!("{at} could not parse a frame the model emitted: {e:?}");
                self.violation(now, ViolationKind::Model, msg, vec![]);
                None
            }
        }
    }

    // ---- checks and reporting --------------------------------------------------------------

    /// Members of group `gi` that have not sent their reduce for barrier `b` (up to 16).
    fn waiting_leaves(&self, gi: usize, b: u64) -> Vec<String> {
        let mut out = Vec::new();
        let mut more = 0;
        for (l, slots) in self.leaves.iter().enumerate() {
            for s in slots.iter().filter(|s| s.group as usize == gi) {
                let has_sent = s.done > b
                    || (s.done == b && matches!(s.leaf.state(), LeafState::Waiting { .. }));
                if !has_sent {
                    if out.len() < 16 {
                        out.push(format!("leaf{l} has not sent its reduce for barrier {b} (it is at barrier {}, {:?})", s.done, s.leaf.state()));
                    } else {
                        more += 1;
                    }
                }
            }
        }
        if more > 0 {
            out.push(format!("... and {more} more"));
        }
        out
    }

    fn stuck(&mut self, at: Time, why: &str) {
        let mut details = Vec::new();
        for (gi, g) in self.groups.iter().enumerate() {
            if g.completed >= self.cfg.barriers {
                continue;
            }
            let b = g.completed;
            details.push(format!(
                "{:?}: barrier {b} (seq {}) stuck: {} of {} leaves arrived, {} released",
                g.id,
                self.cfg.first_seq.wrapping_add(b as u32),
                g.tracks[b as usize].arrivals,
                g.members,
                g.tracks[b as usize].releases
            ));
            let mut waiting = 0;
            for (l, slots) in self.leaves.iter().enumerate() {
                for s in slots
                    .iter()
                    .filter(|s| s.group as usize == gi && s.done == b)
                {
                    if waiting < 8 {
                        details.push(format!("  leaf{l}: {:?}", s.leaf.state()));
                    }
                    waiting += 1;
                }
            }
            if waiting > 8 {
                details.push(format!("  ... {} leaves at this barrier in all", waiting));
            }
            let mut shown = 0;
            for (si, sw) in self.switches.iter().enumerate() {
                for sg in sw.groups.iter().filter(|sg| sg.group as usize == gi) {
                    if shown < 16 {
                        details.push(format!(
                            "  sw{si}: {:?} (children {:?}, role {:?})",
                            sg.state, sg.cfg.children, sg.cfg.role
                        ));
                    }
                    shown += 1;
                }
            }
        }
        let msg = format!(
            "{why}: nothing progressed from {} to {} (stall window {} ns{})",
            crate::trace::fmt_time(self.quiet_since),
            crate::trace::fmt_time(at),
            self.stall_ns,
            match self.faults_stopped_at {
                Some(t) => format!(", faults stopped at {}", crate::trace::fmt_time(t)),
                None => ", faults never stopped".to_string(),
            }
        );
        self.violation(at, ViolationKind::Stuck, msg, details);
        self.halt = true;
    }

    fn violation(&mut self, at: Time, kind: ViolationKind, message: String, details: Vec<String>) {
        if self.violations.len() < self.cfg.max_reported.max(1) {
            self.violations.push(Violation {
                kind,
                at_ns: at.nanos(),
                message,
                details,
                trace: self.trace.lines(),
                decisions: self.decisions.lines(),
            });
        }
        if !self.cfg.keep_going || kind == ViolationKind::Model {
            self.halt = true;
        }
    }

    fn report(mut self) -> RunReport {
        let mut lat: Vec<u64> = Vec::new();
        let mut completed = 0;
        for g in &self.groups {
            completed += g.completed;
            for t in g.tracks[..self.cfg.barriers as usize]
                .iter()
                .filter(|t| t.releases == g.members)
            {
                lat.push(t.last_release.saturating_sub(t.last_arrive));
            }
        }
        let incomplete: u64 = self
            .groups
            .iter()
            .map(|g| self.cfg.barriers.saturating_sub(g.completed))
            .sum();
        let stalled = self
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::Stuck);
        let stuck_barriers = if stalled { incomplete } else { 0 };
        let halted_early = incomplete > 0 && !stalled;
        let ok = self.violations.is_empty() && incomplete == 0 && self.safety_violations == 0;
        RunReport {
            tree: self.topo.summary(&self.cfg.tree),
            seed: self.cfg.seed,
            barriers_per_group: self.cfg.barriers,
            groups: self
                .groups
                .iter()
                .map(|g| GroupSummary {
                    group: g.id.0,
                    members: g.members,
                    barriers_completed: g.completed,
                })
                .collect(),
            link: self.cfg.link,
            faults: self.cfg.faults,
            vary_faults_per_link: self.cfg.vary_faults_per_link,
            faults_stop: self.cfg.faults_stop,
            faults_stopped_at_ns: self.faults_stopped_at.map(|t| t.nanos()),
            restarts: self.restarts,
            outages: self.outages,
            leaf_timeout_ns: self.leaf_timeout_ns,
            switch_timeout_ns: self.switch_timeout_ns,
            stall_ns: self.stall_ns,
            first_seq: self.cfg.first_seq,
            broken_switch: self.cfg.broken,
            modelled_time_ns: self.now.nanos(),
            events: self.queue.pushed(),
            barriers_completed: completed,
            latency: LatencyStats::from_samples(&mut lat),
            frames_per_barrier: if completed > 0 {
                (self.frames.sent - self.frames.past_last_barrier) as f64 / completed as f64
            } else {
                0.0
            },
            frames: std::mem::take(&mut self.frames),
            outcomes: std::mem::take(&mut self.outcomes),
            safety_violations: self.safety_violations,
            stuck_barriers,
            halted_early,
            violations: std::mem::take(&mut self.violations),
            ok,
        }
    }
}

impl RunReport {
    /// The human-readable summary (the JSON form is the struct itself).
    pub fn table(&self) -> String {
        use crate::report::{thousands, us};
        let mut s = String::new();
        let t = &self.tree;
        s += &format!(
            "tree {}: {} leaves, {} switches, {} switch levels, leaves up to {} links deep\n",
            t.spec,
            thousands(t.leaves as u64),
            thousands(t.switches as u64),
            t.switch_levels,
            t.max_leaf_depth
        );
        for g in &self.groups {
            s += &format!(
                "  group{}: {} members, {} of {} barriers completed\n",
                g.group,
                thousands(g.members as u64),
                thousands(g.barriers_completed),
                thousands(self.barriers_per_group)
            );
        }
        let f = &self.faults;
        s += &format!(
            "link {} ns + 0..{} ns jitter, {} Gb/s, queue {} frames; faults: loss {} dup {} reorder {} (<= {} ns) delay {} ({} ns){}; stop {:?}{}\n",
            self.link.latency_ns, self.link.jitter_ns, self.link.gbps, self.link.queue_frames, f.loss, f.dup, f.reorder, f.reorder_ns, f.delay, f.delay_ns,
            if self.vary_faults_per_link { ", varied per link" } else { "" },
            self.faults_stop,
            match self.faults_stopped_at_ns { Some(n) => format!(" (stopped at {})", us(n as f64)), None => String::new() },
        );
        s += &format!(
            "restarts {}, outages {}; timeouts: leaf {} ns, switch {} ns; stall window {} ns; first seq {}{}\n",
            self.restarts, self.outages, self.leaf_timeout_ns, self.switch_timeout_ns, self.stall_ns, self.first_seq,
            match self.broken_switch { Some(b) => format!("; BROKEN SWITCH: {b:?}"), None => String::new() }
        );
        s += &format!(
            "modelled time {}, {} events, seed {}\n",
            us(self.modelled_time_ns as f64),
            thousands(self.events),
            self.seed
        );
        let l = &self.latency;
        s += &format!(
            "barrier latency (last arrival -> last release): mean {}  p50 {}  p99 {}  max {}\n",
            us(l.mean_ns),
            us(l.p50_ns as f64),
            us(l.p99_ns as f64),
            us(l.max_ns as f64)
        );
        let fr = &self.frames;
        s += &format!(
            "frames: {} sent ({:.1} per barrier), {} lost, {} duplicated, {} reordered, {} delayed, {} on down links, {} at restarting switches, {} at full queues; retransmits: leaf {}, switch {}\n",
            thousands(fr.sent), self.frames_per_barrier, thousands(fr.lost), thousands(fr.duplicated), thousands(fr.reordered),
            thousands(fr.delayed), thousands(fr.dropped_link_down), thousands(fr.dropped_switch_restarting),
            thousands(fr.dropped_queue_full), thousands(fr.leaf_retransmits), thousands(fr.switch_retransmits)
        );
        let o = &self.outcomes;
        s += &format!(
            "switch outcomes: recorded {}, completed {}, released {}, duplicate {}, stale reduce {}, stale release {}, rejected {}/{}, timer fired {}\n",
            thousands(o.get(Outcome::Recorded)), thousands(o.get(Outcome::Completed)), thousands(o.get(Outcome::Released)),
            thousands(o.get(Outcome::Duplicate)), thousands(o.get(Outcome::StaleReduce)), thousands(o.get(Outcome::StaleRelease)),
            o.get(Outcome::Rejected(Reject::NotAChild)), o.get(Outcome::Rejected(Reject::NotTheParent)), thousands(o.switch_timer_fired)
        );
        s += &format!(
            "barriers completed {} | safety violations {} | stuck barriers {} |{} {}\n",
            thousands(self.barriers_completed),
            self.safety_violations,
            self.stuck_barriers,
            if self.halted_early {
                " halted at the first violation |"
            } else {
                ""
            },
            if self.ok { "OK" } else { "FAILED" }
        );
        for v in &self.violations {
            s += &format!("\n{:?} at {}: {}\n", v.kind, us(v.at_ns as f64), v.message);
            for d in &v.details {
                s += &format!("    {d}\n");
            }
            s += &format!("  last {} decisive events:\n", v.decisions.len());
            for line in &v.decisions {
                s += &format!("  {line}\n");
            }
            s += &format!("  last {} events:\n", v.trace.len());
            for line in &v.trace {
                s += &format!("  {line}\n");
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_times_stay_in_their_bounds() {
        let m = ComputeModel {
            min_ns: 100,
            max_ns: 200,
            late: 0.5,
            late_ns: 1_000,
        };
        let mut rng = Rng::new(1);
        let draws: Vec<u64> = (0..1_000).map(|_| m.draw(&mut rng)).collect();
        assert!(draws.iter().all(|&d| (100..=1_200).contains(&d)));
        assert!(draws.iter().any(|&d| d > 200), "stragglers happen");
        assert_eq!(m.worst_ns(), 1_200);
    }

    #[test]
    fn macs_are_unique_locally_administered_unicast() {
        let a = mac_of(NodeRef::Leaf(7));
        let b = mac_of(NodeRef::Switch(7));
        assert_ne!(a, b);
        assert_eq!(a.0[0] & 0b11, 0b10);
    }

    #[test]
    fn sequence_numbers_map_to_barriers_across_the_wrap() {
        let cfg = SimConfig {
            first_seq: u32::MAX - 1,
            barriers: 5,
            ..SimConfig::default()
        };
        let topo = Topology::build(&cfg.tree).unwrap();
        let sim = Sim::new(&cfg, topo).unwrap();
        assert_eq!(sim.barrier_of(Seq(u32::MAX - 1)), 0);
        assert_eq!(sim.barrier_of(Seq(u32::MAX)), 1);
        assert_eq!(sim.barrier_of(Seq(0)), 2);
        assert_eq!(sim.barrier_of(Seq(2)), 4);
    }

    #[test]
    fn outcome_stats_serialize_as_before() {
        let o = OutcomeStats::default();
        o.by_outcome.bump(Outcome::Completed);
        o.by_outcome.bump(Outcome::Rejected(Reject::NotTheParent));
        assert_eq!(
            serde_json::to_string(&o).unwrap(),
            "{\"recorded\":0,\"duplicate\":0,\"completed\":1,\"released\":0,\"stale_reduce\":0,\
             \"stale_release\":0,\"rejected_not_a_child\":0,\"rejected_not_the_parent\":1,\
             \"switch_timer_fired\":0}"
        );
    }

    #[test]
    fn default_timeouts_follow_the_round_trip() {
        let cfg = SimConfig::default(); // 4,4,4: 3 links deep, 1,000 + 100 + 7 ns a hop
        let (leaf, switch) = resolved_timeouts(&cfg).unwrap();
        assert_eq!(leaf, 4 * 2 * 3 * 1_107);
        assert_eq!(switch, leaf);
    }
}
