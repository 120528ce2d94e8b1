//! What the XDP tests share: a throw-away namespace whose interfaces are the switch's ports,
//! and one differential step (the protocol's `on_event` against the program).

#![allow(dead_code)]

use barrier_bpf::RingBuffer;
use barrier_protocol::switch::{
    on_event, on_timer, Action, Actions, Event, Fired, GroupConfig, GroupState, Outcome, Run, Timer,
};
use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr};
use barrier_protocol::{GroupId, PortIdx, PortSet};
use barrier_testbed::netns::{can_create, VethNetns};
use barrier_xdp::timers::{delay_ns, parse_arm_record, TimerOutcome};
use barrier_xdp::{counter_outcome, Egress, LoadOptions, XdpSwitch};

/// This switch's id (the source MAC of what it sends).
pub const ME: MacAddr = MacAddr([0x02, 0x00, 0x00, 0x00, 0x00, 0xaa]);

/// Ports of the tests: both ends of three veth pairs in one namespace.
pub const PORTS: usize = 6;

/// The namespace, or `None` (with a printed line) when this run cannot make one; panics
/// instead under `NB_REQUIRE_ROOT=1` (`barrier_testbed::netns::can_create`).
pub fn bed(test: &str) -> Option<VethNetns> {
    if !can_create() {
        eprintln!("{test}: skipped: needs root (CAP_BPF, CAP_NET_ADMIN) and iproute2");
        return None;
    }
    Some(VethNetns::with_pairs(PORTS / 2).expect("create a namespace with veth pairs"))
}

/// The interface names of ports 0..PORTS.
pub fn port_names(bed: &VethNetns) -> Vec<String> {
    bed.pairs
        .iter()
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .collect()
}

/// Loads `object` (inside the namespace) with ports 0..PORTS on the namespace's interfaces;
/// returns the switch and the ifindex of every port.
pub fn switch_on(bed: &VethNetns, object: &[u8]) -> (XdpSwitch, Vec<u32>) {
    let mut sw =
        XdpSwitch::load_object(object, 64, LoadOptions::RECORDING).expect("load the XDP program");
    sw.set_switch_mac(ME).expect("set the switch's MAC");
    let mut ifindexes = Vec::new();
    for (i, name) in port_names(bed).iter().enumerate() {
        let ifindex = barrier_bpf::ifindex(name).expect("interface of a port");
        sw.add_port(PortIdx::new(i as u8).expect("port"), ifindex)
            .expect("add port");
        ifindexes.push(ifindex);
    }
    (sw, ifindexes)
}

/// The frame a peer sends for `ev` of `group`.
pub fn frame_for(group: GroupId, ev: Event, retransmit: bool) -> [u8; 60] {
    let (kind, epoch, seq) = match ev {
        Event::Reduce { epoch, seq, .. } => (Kind::Reduce, epoch, seq),
        Event::Release { epoch, seq, .. } => (Kind::Release, epoch, seq),
        Event::Abort {
            epoch,
            seq,
            failure,
            ..
        } => (Kind::Abort(failure), epoch, seq),
    };
    FrameRepr {
        dst: MacAddr::BROADCAST,
        src: MacAddr([0x02, 0, 0, 0, 0x11, 0x22]),
        kind,
        flags: Flags::retransmit(retransmit),
        group,
        epoch,
        seq,
        tx_timestamp: None,
    }
    .to_bytes()
}

/// The bytes this switch sends for a decided frame (`FrameRepr::emit`, as the program writes
/// them: broadcast, no timestamp).
fn emitted(
    group: GroupId,
    epoch: barrier_protocol::Epoch,
    kind: Kind,
    seq: barrier_protocol::Seq,
    retransmit: bool,
) -> [u8; 60] {
    FrameRepr {
        dst: MacAddr::BROADCAST,
        src: ME,
        kind,
        flags: Flags::retransmit(retransmit),
        group,
        epoch,
        seq,
        tx_timestamp: None,
    }
    .to_bytes()
}

fn port_of(ev: &Event) -> PortIdx {
    match *ev {
        Event::Reduce { port, .. } | Event::Release { port, .. } | Event::Abort { port, .. } => {
            port
        }
    }
}

/// Feeds `ev` of `group` to the protocol (`cfg`, `st`) and to the program (through
/// BPF_PROG_TEST_RUN on the event's port, `len` bytes of frame: 40 unpadded, 60 padded) and
/// compares outcome, next state, the frame sent with the ports it goes to, and the timers armed
/// (the program's records in `ring` against `on_event`'s `ArmTimer`s). Returns the protocol's
/// next state, or what disagreed.
#[allow(clippy::too_many_arguments)]
pub fn step(
    sw: &XdpSwitch,
    ring: &mut RingBuffer,
    ifindexes: &[u32],
    group: GroupId,
    cfg: &GroupConfig,
    st: GroupState,
    ev: Event,
    len: usize,
) -> Result<GroupState, String> {
    let (next, outcome, acts) = on_event(cfg, st, ev);
    // The protocol sends a frame: the TX counters per port are read around the run (a
    // decision that sends nothing has no send path to count in, which the verdict check
    // below holds it to).
    let sends_any = acts.iter().any(|a| a.frame().is_some());
    let port = port_of(&ev);
    let frame = frame_for(group, ev, false);
    let before = sw.counters().map_err(|e| e.to_string())?;
    let sent_before = if sends_any {
        sw.sent().map_err(|e| e.to_string())?
    } else {
        Vec::new()
    };
    sw.clear_last_decision().map_err(|e| e.to_string())?;
    let run = sw
        .run_frame(&frame[..len], ifindexes[port.get() as usize])
        .map_err(|e| e.to_string())?;
    let after = sw.counters().map_err(|e| e.to_string())?;
    let ctx = || format!("event {ev:?} in {st:?} with {cfg:?}");
    check_armed(sw, ring, group, cfg, &acts).map_err(|e| format!("{}: {e}", ctx()))?;

    // Outcome: exactly one outcome counter moved, by one.
    let moved: Vec<Outcome> = (0..after.0.len())
        .filter(|&i| after.0[i] != before.0[i])
        .filter_map(counter_outcome)
        .collect();
    if moved != [outcome] {
        return Err(format!(
            "{}: protocol outcome {outcome:?}, program counted {moved:?}",
            ctx()
        ));
    }
    let got = sw
        .state(group)
        .map_err(|e| e.to_string())?
        .ok_or("group not configured in the program")?;
    if got != next {
        return Err(format!(
            "{}: protocol next state {next:?}, program {got:?}",
            ctx()
        ));
    }

    // Frames: the protocol's sends (timers are the userspace side's) against the verdict,
    // the bytes left in the buffer and where the redirect goes.
    let sends: Vec<(PortSet, Kind, barrier_protocol::Seq, bool)> =
        acts.iter().filter_map(|a| a.frame()).collect();
    // The TX counters per port (`XdpSwitch::sent`: frames_out, reduce_out, release_out,
    // abort_out, retransmits_out) moved by exactly the protocol's sends.
    let sent_after = if sends_any {
        sw.sent().map_err(|e| e.to_string())?
    } else {
        Vec::new()
    };
    for ((p, b), (_, a)) in sent_before.iter().zip(&sent_after) {
        let mut want = [0u64; 5];
        for (ports, kind, _, retransmit) in &sends {
            if ports.contains(*p) {
                want[0] += 1;
                want[match kind {
                    Kind::Reduce => 1,
                    Kind::Release => 2,
                    Kind::Abort(_) => 3,
                }] += 1;
                want[4] += u64::from(*retransmit);
            }
        }
        let got: Vec<u64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
        if got != want {
            return Err(format!(
                "{}: port {p:?} sent counters moved by {got:?}, the protocol's sends {want:?}",
                ctx()
            ));
        }
    }
    let last = sw
        .last_decision()
        .map_err(|e| e.to_string())?
        .ok_or("no decision recorded")?;
    match sends.as_slice() {
        [] => {
            if run.retval != barrier_bpf::xdp::DROP || last.egress != Egress::None {
                return Err(format!(
                    "{}: protocol sends nothing, program returned {} to {:?}",
                    ctx(),
                    run.retval,
                    last.egress
                ));
            }
        }
        [(ports, kind, seq, retransmit)] => {
            let want = emitted(group, acts.epoch(), *kind, *seq, *retransmit);
            if run.data != want {
                return Err(format!(
                    "{}: frame sent differs:\n protocol {:02x?}\n program  {:02x?}",
                    ctx(),
                    want,
                    run.data
                ));
            }
            let to = match (run.retval, last.egress) {
                (barrier_bpf::xdp::TX, Egress::Ingress) => PortSet::single(port),
                (barrier_bpf::xdp::REDIRECT, Egress::Port(p)) => {
                    PortSet::single(PortIdx::new(p).expect("port"))
                }
                (
                    barrier_bpf::xdp::REDIRECT,
                    Egress::Set {
                        slot,
                        exclude_ingress,
                    },
                ) => {
                    let mut set = sw.port_set_of_slot(slot).ok_or("unknown port-set slot")?;
                    if exclude_ingress {
                        set.remove(port);
                    }
                    set
                }
                other => return Err(format!("{}: program verdict {other:?}", ctx())),
            };
            if to != *ports {
                return Err(format!(
                    "{}: protocol sends to {ports:?}, program to {to:?}",
                    ctx()
                ));
            }
        }
        more => return Err(format!("{}: protocol sends {} frames", ctx(), more.len())),
    }
    Ok(next)
}

/// The timers the program asked for since the last call (its `nb_arm` records) against the
/// `ArmTimer` actions of `acts`: same barrier, kind, run (epoch; generation: the loader's) and,
/// through the timer side's [`delay_ns`], the same delay.
pub fn check_armed(
    sw: &XdpSwitch,
    ring: &mut RingBuffer,
    group: GroupId,
    cfg: &GroupConfig,
    acts: &Actions,
) -> Result<(), String> {
    let mut got = Vec::new();
    ring.consume(|r| got.push(parse_arm_record(r)))
        .map_err(|e| e.to_string())?;
    let generation = sw.config(group).map(|(_, g)| g).unwrap_or(0);
    let want: Vec<Option<Fired>> = acts
        .iter()
        .filter_map(|a| acts.timer(group, a))
        .map(|(f, _)| {
            Some(Fired {
                run: Run {
                    epoch: f.run.epoch,
                    generation,
                },
                ..f
            })
        })
        .collect();
    if got != want {
        return Err(format!("protocol arms {want:?}, program asked for {got:?}"));
    }
    for (f, after) in acts.iter().filter_map(|a| acts.timer(group, a)) {
        let d = delay_ns(cfg, group, f.seq, f.timer);
        if d != after {
            return Err(format!(
                "timer {f:?}: protocol delay {after} ns, timer side {d} ns"
            ));
        }
    }
    Ok(())
}

/// Fires `fired` (its run's generation as given) both in the protocol (`on_timer`, nothing when
/// the generation is not the loader's current one: the table's check) and in the program
/// (`XdpSwitch::fire`) and compares the next state, the frame and its ports, the re-arm with
/// its delay, and the counters the decision moves. Returns the protocol's next state and the
/// row both took.
pub fn fire_step(
    sw: &XdpSwitch,
    group: GroupId,
    cfg: &GroupConfig,
    st: GroupState,
    fired: Fired,
) -> Result<(GroupState, TimerOutcome), String> {
    let current = sw.config(group).map(|(_, g)| g);
    let (next, acts) = if current == Some(fired.run.generation) {
        on_timer(cfg, st, fired, ME)
    } else {
        (st, Actions::in_epoch(cfg.epoch))
    };
    let ctx = || format!("timer {fired:?} in {st:?} with {cfg:?}");
    let before = sw.counters().map_err(|e| e.to_string())?;
    let d = sw.fire(fired).map_err(|e| e.to_string())?;
    let after = sw.counters().map_err(|e| e.to_string())?;
    let got = sw
        .state(group)
        .map_err(|e| e.to_string())?
        .ok_or("group not configured in the program")?;
    if got != next {
        return Err(format!(
            "{}: protocol next state {next:?}, program {got:?} ({d:?})",
            ctx()
        ));
    }
    let sends: Vec<(PortSet, Kind, barrier_protocol::Seq, bool)> =
        acts.iter().filter_map(|a| a.frame()).collect();
    let want_frame = match sends.as_slice() {
        [] => None,
        [(ports, kind, seq, retransmit)] => Some((
            emitted(group, acts.epoch(), *kind, *seq, *retransmit),
            *ports,
        )),
        more => return Err(format!("{}: protocol sends {} frames", ctx(), more.len())),
    };
    if d.frame != want_frame {
        return Err(format!(
            "{}: protocol sends {want_frame:02x?}, program {:02x?}",
            ctx(),
            d.frame
        ));
    }
    let want_rearm: Vec<(Timer, u64)> = acts
        .iter()
        .filter_map(|a| match *a {
            Action::ArmTimer {
                seq,
                after_ns,
                timer,
            } if seq == fired.seq => Some((timer, after_ns)),
            Action::ArmTimer { .. } => Some((Timer::Deadline, u64::MAX)),
            _ => None,
        })
        .collect();
    let got_rearm: Vec<(Timer, u64)> = d
        .rearm
        .map(|t| (t, delay_ns(cfg, group, fired.seq, t)))
        .into_iter()
        .collect();
    if want_rearm != got_rearm {
        return Err(format!(
            "{}: protocol re-arms {want_rearm:?}, timer side {got_rearm:?}",
            ctx()
        ));
    }
    let want_outcome = match (sends.first(), next.phase != st.phase) {
        (None, _) => TimerOutcome::Nothing,
        (Some((_, Kind::Reduce, _, _)), _) => TimerOutcome::ResentReduce,
        (Some((_, Kind::Abort(_), _, _)), true) => TimerOutcome::Declared,
        (Some(_), _) => TimerOutcome::ResentAbort,
    };
    if d.outcome != want_outcome {
        return Err(format!(
            "{}: protocol {want_outcome:?}, program {:?}",
            ctx(),
            d.outcome
        ));
    }
    let moved = |name: &str| after.get(name).unwrap_or(0) - before.get(name).unwrap_or(0);
    let want_counts = (
        u64::from(want_outcome == TimerOutcome::ResentReduce),
        u64::from(want_outcome == TimerOutcome::Declared),
    );
    if (moved("timer_resends"), moved("declared")) != want_counts {
        return Err(format!(
            "{}: timer_resends/declared moved {:?}, want {want_counts:?}",
            ctx(),
            (moved("timer_resends"), moved("declared"))
        ));
    }
    Ok((next, want_outcome))
}

/// The next barrier frame from the switch under test (source [`ME`]) on `sock`, within
/// `timeout`.
pub fn next_from_switch(
    sock: &rawsock::RawSocket,
    timeout: std::time::Duration,
) -> Option<FrameRepr> {
    let end = std::time::Instant::now() + timeout;
    let mut buf = [0u8; 2048];
    while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
        if let Ok(Some(n)) = sock.recv(&mut buf, Some(left)) {
            if let Ok(f) = FrameRepr::parse(&buf[..n]) {
                if f.src == ME {
                    return Some(f);
                }
            }
        }
    }
    None
}
