//! The tree simulation: the real `barrier_protocol` switch logic at every switch and the real
//! `Leaf` at every leaf, over the link model, with faults, restarts, outages and late leaves.
//! Every frame is emitted and parsed with `wire::FrameRepr`. Safety and liveness are checked
//! on the fly; a violation is reported with the trace of the events that led to it.
//!
//! | module | concern |
//! | --- | --- |
//! | `config` | [`SimConfig`] and what is derived from it (timeouts) |
//! | this module | the run: state, the event queue and its loop, faults and disruptions |
//! | `leaves` | the leaf side: arrive, re-send, receive releases |
//! | `switches` | the switch side: control steps, actions, timers, restarts |
//! | `frames` | frames on links: emit, the link model's fate, parse |
//! | `checks` | safety, liveness and model checks; [`Violation`] |
//! | `report` | [`RunReport`] and its table |

mod checks;
mod config;
mod frames;
mod leaves;
mod report;
mod switches;

pub use checks::{Violation, ViolationKind};
pub use config::{resolved_timeouts, ComputeModel, FaultStop, SimConfig};
pub use report::{FrameStats, GroupSummary, OutcomeStats, RunReport};

use crate::link::{Faults, Network};
use crate::queue::EventQueue;
use crate::rng::Rng;
use crate::topology::{Dir, NodeRef, Topology};
use crate::trace::{Trace, TraceWhat};
use barrier_protocol::leaf::{Leaf, LeafConfig};
use barrier_protocol::switch::{Action, GroupConfig, GroupState, Timer};
use barrier_protocol::wire::FRAME_LEN;
use barrier_protocol::{Epoch, GroupId, Seq, Time};
use config::{round_trip_ns, timeouts};

#[derive(Clone, Copy, Debug)]
enum Ev {
    Deliver {
        link: u32,
        dir: Dir,
        frame: [u8; FRAME_LEN],
        /// When the frame was handed to the link (queueing included in the trip).
        sent: Time,
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
        timer: Timer,
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
    /// When the switch last went down: frames sent before it are lost with the restart.
    went_down: Option<Time>,
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
        // The longest re-send wait: the timeouts, or the leaves' backoff cap when it is longer.
        let longest_wait = leaf_timeout_ns
            .max(switch_timeout_ns)
            .max(cfg.leaf_backoff.max_ns)
            .max(cfg.switch_backoff.max_ns);
        let stall_ns = cfg.stall_ns.unwrap_or(
            100 * longest_wait
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

        let plans = topo.plan_groups(cfg.groups, cfg.seed, switch_timeout_ns, cfg.switch_backoff);
        let mut switches: Vec<SwitchSim> = (0..topo.switches.len())
            .map(|_| SwitchSim {
                groups: Vec::new(),
                epoch: 0,
                down_until: Time(0),
                went_down: None,
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
                        epoch: Epoch::DEFAULT,
                        resend_timeout_ns: leaf_timeout_ns,
                        first_seq: Seq(cfg.first_seq),
                    })
                    .with_backoff(cfg.leaf_backoff),
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
        let started = std::time::Instant::now();
        let mut next_progress = started + std::time::Duration::from_secs(1);
        let mut events = 0u64;
        while self.unfinished_slots > 0 && !self.halt {
            events += 1;
            // A clock read every 64k events: cheap, and often enough for a line a second.
            if self.cfg.progress && events.is_multiple_of(65_536) {
                let now = std::time::Instant::now();
                if now >= next_progress {
                    next_progress = now + std::time::Duration::from_secs(1);
                    let done: u64 = self.groups.iter().map(|g| g.completed).sum();
                    let want = self.cfg.barriers * self.groups.len() as u64;
                    eprintln!(
                        "barrier-sim: {:.0} s: {done} of {want} barriers, modelled {:.3} ms, {events} events",
                        started.elapsed().as_secs_f64(),
                        self.now.nanos() as f64 / 1e6
                    );
                }
            }
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
            Ev::Deliver {
                link,
                dir,
                frame,
                sent,
            } => {
                self.frames.delivered += 1;
                let l = &self.topo.links[link as usize];
                match (dir, l.child) {
                    (Dir::Up, _) => {
                        self.switch_receive(now, sent, l.parent, l.port_at_parent, &frame)
                    }
                    (Dir::Down, NodeRef::Switch(s)) => {
                        let p = l.port_at_child.expect("a switch child has a parent port");
                        self.switch_receive(now, sent, s, p, &frame)
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
                timer,
                epoch,
            } => self.switch_timer(now, switch, slot, seq, timer, epoch),
            Ev::Restart { switch, scheduled } => self.restart(now, switch, scheduled),
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
