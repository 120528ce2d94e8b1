//! Deliberately broken switch rules, for testing the checker: each wraps the real
//! `switch::on_event` and bends one rule the way a plausible bug would. The simulator must
//! catch every one of them; they are selectable from the CLI with `--broken-switch`.

use barrier_protocol::switch::{self, Action, Event, GroupConfig, GroupState, Outcome, Phase};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum BrokenSwitch {
    /// Completes a barrier on the first reduce it records, as if every other child had
    /// reported too.
    FirstReduce,
    /// Counts a reduce for another sequence number (a child retrying a barrier whose release
    /// it missed) as a reduce for the current one, instead of re-sending the old release.
    StaleReduceCompletes,
    /// After a restart (state unknown), completes on the first reduce it sees: trusts that the
    /// other children must have reported before the restart.
    RestartTrustsFirst,
    /// Ignores a reduce for another sequence number instead of re-sending the previous
    /// release (drops claim 6's first row): safe, but a child that lost its release retries
    /// forever, so the liveness check must catch it.
    IgnoreStaleReduce,
}

/// The switch control step, correct when `broken` is `None`. Actions are appended to `out`.
/// The flag says whether the broken rule changed this step (the trace marks it).
pub fn control(
    broken: Option<BrokenSwitch>,
    cfg: &GroupConfig,
    state: GroupState,
    ev: Event,
    out: &mut Vec<Action>,
) -> (GroupState, Outcome, bool) {
    let mark = out.len();
    let (mut s, mut o, actions) = switch::on_event(cfg, state, ev);
    out.extend(actions.iter().copied());
    let Event::Reduce { port, epoch, seq } = ev else {
        return (s, o, false);
    };
    let mut bent = true;
    match broken {
        None => bent = false,
        Some(BrokenSwitch::FirstReduce) if matches!(o, Outcome::Recorded) => {
            fabricate_rest(cfg, &mut s, &mut o, seq, out);
        }
        Some(BrokenSwitch::RestartTrustsFirst)
            if matches!(state.phase, Phase::Unknown) && matches!(o, Outcome::Recorded) =>
        {
            fabricate_rest(cfg, &mut s, &mut o, seq, out);
        }
        Some(BrokenSwitch::IgnoreStaleReduce) if matches!(o, Outcome::StaleReduce) => {
            out.truncate(mark);
        }
        Some(BrokenSwitch::StaleReduceCompletes)
            if matches!(o, Outcome::StaleReduce) && matches!(state.phase, Phase::Collecting) =>
        {
            out.truncate(mark);
            let (s2, o2, a2) = switch::on_event(
                cfg,
                state,
                Event::Reduce {
                    port,
                    epoch,
                    seq: state.seq,
                },
            );
            out.extend(a2.iter().copied());
            s = s2;
            o = o2;
        }
        Some(_) => bent = false,
    }
    (s, o, bent)
}

/// Feeds the real logic a reduce for `seq` from every child not yet recorded, until the
/// barrier completes: a completion no child asked for.
fn fabricate_rest(
    cfg: &GroupConfig,
    s: &mut GroupState,
    o: &mut Outcome,
    seq: barrier_protocol::Seq,
    out: &mut Vec<Action>,
) {
    for p in cfg.children.iter() {
        if s.arrived.contains(p) {
            continue;
        }
        let (s2, o2, a2) = switch::on_event(
            cfg,
            *s,
            Event::Reduce {
                port: p,
                epoch: cfg.epoch,
                seq,
            },
        );
        out.extend(a2.iter().copied());
        *s = s2;
        if matches!(o2, Outcome::Completed) {
            *o = o2;
            break;
        }
    }
}
