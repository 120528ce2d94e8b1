//! The switch side: every switch runs the real `switch::on_event` (through
//! `broken::control`, which bends one rule when a broken switch is asked for) and
//! `switch::on_timer` for each group it is configured for, carries out the actions, and
//! restarts when told to.

use super::{Ev, Sim, ViolationKind};
use crate::broken;
use crate::topology::NodeRef;
use crate::trace::TraceWhat;
use barrier_protocol::switch::{self, Action, Event, Fired, GroupState, Outcome, Run, Timer};
use barrier_protocol::wire::{Kind, MacAddr};
use barrier_protocol::{GroupId, PortIdx, Seq, Time};

impl Sim<'_> {
    /// A frame sent at `sent` reaches `switch` on `port`. Dropped while the switch is down,
    /// and when it was sent before the switch last went down: the protocol's assumption that
    /// a frame lives in the network for less time than a switch takes to restart
    /// (`docs/protocol.md`, "Assumptions"), made exact here whatever delays the faults draw.
    pub(super) fn switch_receive(
        &mut self,
        now: Time,
        sent: Time,
        switch: u32,
        port: PortIdx,
        frame: &[u8],
    ) {
        let sw = &self.switches[switch as usize];
        if now < sw.down_until || sw.went_down.is_some_and(|t| sent < t) {
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
                Action::ArmTimer {
                    seq,
                    after_ns,
                    timer,
                } => {
                    self.queue.push(
                        now + after_ns,
                        Ev::SwitchTimer {
                            switch,
                            slot,
                            seq,
                            timer,
                            epoch,
                        },
                    );
                }
                Action::SendAbort { .. } => {
                    // the simulator configures no failure declaration (fail_after 0)
                    let msg = format!("sw{switch} sends an abort, but no deadline is configured");
                    self.violation(now, ViolationKind::Model, msg, vec![]);
                }
            }
        }
        self.actions = actions;
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

    /// The re-send timer `switch` armed for group slot `slot` and barrier `seq` fired (claim
    /// 3). A timer armed before a restart (another `epoch`) died with the state.
    pub(super) fn switch_timer(
        &mut self,
        now: Time,
        switch: u32,
        slot: u16,
        seq: Seq,
        timer: Timer,
        epoch: u32,
    ) {
        let sw = &mut self.switches[switch as usize];
        if sw.epoch != epoch {
            return; // armed before a restart: the restart dropped it
        }
        let g = &mut sw.groups[slot as usize];
        // The simulator runs one epoch per group (no management resets): the restart count
        // `epoch` above is what tells this switch's runs apart.
        let fired = Fired {
            group: self.groups[g.group as usize].id,
            seq,
            timer,
            run: Run::of_epoch(g.cfg.epoch),
        };
        let me = MacAddr([2, 0, 0, 0, (switch >> 8) as u8, switch as u8]);
        let (state, actions) = switch::on_timer(&g.cfg, g.state, fired, me);
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

    /// `switch` restarts: every group's state is fresh, its timers die, and it drops every
    /// frame for the restart's down time. A random restart (`scheduled` false) happens only
    /// while faults are on.
    pub(super) fn restart(&mut self, now: Time, switch: u32, scheduled: bool) {
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
        sw.went_down = Some(now);
        self.restarts += 1;
        self.quiet_since = self.quiet_since.max(down_until);
        self.trace.push(now, TraceWhat::Restart { switch });
        self.decisions.push(now, TraceWhat::Restart { switch });
    }
}
