//! A one-switch barrier tree for tests and examples: a root whose children are ports, running
//! the protocol's real switch logic (`barrier_protocol::switch::on_event`) behind a frame-in,
//! frames-out interface, plus a loop that serves it on a [`loopback::Hub`] or raw sockets.
//! It is not the switch (that is `barrier-switch`): no scheduler, no table, one thread.
//!
//! [`loopback::Hub`]: barrier_leaf::transport::loopback::Hub

use barrier_leaf::transport::loopback::{Filter, Hub};
use barrier_protocol::switch::{on_event, Action, Event, GroupConfig, GroupState, Outcome};
use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{GroupId, PortIdx, PortSet};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The root switch of a one-level tree.
pub struct MiniRoot {
    mac: MacAddr,
    groups: BTreeMap<u32, (GroupConfig, GroupState)>,
    release_filter: Option<Filter>,
    /// Barriers completed (releases sent for the first time), over all groups.
    pub completed: u64,
    /// Reduces received, including duplicates and stale ones.
    pub reduces: u64,
}

impl MiniRoot {
    /// A root with source MAC `mac` and no groups.
    pub fn new(mac: MacAddr) -> MiniRoot {
        MiniRoot {
            mac,
            groups: BTreeMap::new(),
            release_filter: None,
            completed: 0,
            reduces: 0,
        }
    }

    /// Configures `group` with the given child ports (state fresh, as after a restart).
    pub fn add_group(&mut self, group: u32, children: &[u8]) {
        let mut set = PortSet::empty();
        for &p in children {
            set.insert(PortIdx::new(p).expect("port index below 64"));
        }
        let cfg = GroupConfig::root(set);
        cfg.validate().expect("valid root config");
        self.groups.insert(group, (cfg, GroupState::fresh()));
    }

    /// Drops releases for which `filter` returns false (models loss on the way down).
    pub fn set_release_filter(&mut self, filter: Filter) {
        self.release_filter = Some(filter);
    }

    /// Handles one frame from child port `port`; pushes the frames to send, with their ports,
    /// onto `out`. Returns the switch logic's outcome, or `None` for a frame it does not take
    /// (unparsable, not a reduce, unknown group).
    pub fn on_frame(
        &mut self,
        port: u8,
        bytes: &[u8],
        out: &mut Vec<(u8, [u8; FRAME_LEN])>,
    ) -> Option<Outcome> {
        let repr = FrameRepr::parse(bytes).ok()?;
        if repr.kind != Kind::Reduce {
            return None;
        }
        let (cfg, state) = self.groups.get_mut(&repr.group.0)?;
        self.reduces += 1;
        let ev = Event::Reduce {
            port: PortIdx::new(port)?,
            epoch: repr.epoch,
            seq: repr.seq,
        };
        let (next, outcome, actions) = on_event(cfg, *state, ev);
        *state = next;
        if outcome == Outcome::Completed {
            self.completed += 1;
        }
        for action in actions.iter() {
            if let Action::SendRelease {
                seq,
                ports,
                retransmit,
            } = *action
            {
                let flags = if retransmit {
                    Flags::RETRANSMIT
                } else {
                    Flags::empty()
                };
                let rel = FrameRepr {
                    dst: MacAddr::BROADCAST,
                    src: self.mac,
                    kind: Kind::Release,
                    flags,
                    group: GroupId(repr.group.0),
                    epoch: actions.epoch(),
                    seq,
                    tx_timestamp: None,
                };
                let mut buf = [0u8; FRAME_LEN];
                rel.emit(&mut buf);
                for p in ports.iter() {
                    if self.release_filter.as_mut().is_none_or(|f| f(&buf)) {
                        out.push((p.get(), buf));
                    }
                }
            }
        }
        Some(outcome)
    }

    /// Serves the root on a loopback hub until `stop` is set.
    pub fn serve_hub(&mut self, hub: &Hub, stop: &AtomicBool) {
        let mut out = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let Some((port, frame)) = hub.recv(Duration::from_millis(5)) else {
                continue;
            };
            self.on_frame(port, &frame, &mut out);
            for (p, f) in out.drain(..) {
                hub.send(p, &f);
            }
        }
    }

    /// Serves the root on raw sockets (socket `i` is child port `i`) until `stop` is set.
    pub fn serve_sockets(
        &mut self,
        socks: &[rawsock::RawSocket],
        stop: &AtomicBool,
    ) -> std::io::Result<()> {
        let mut out = Vec::new();
        let mut buf = [0u8; 2048];
        // With one socket, block on it; with several, sweep them and nap briefly when idle.
        let wait = if socks.len() == 1 {
            Duration::from_millis(5)
        } else {
            Duration::ZERO
        };
        while !stop.load(Ordering::Relaxed) {
            let mut idle = true;
            for (i, s) in socks.iter().enumerate() {
                if let Some(n) = s.recv(&mut buf, Some(wait))? {
                    idle = false;
                    self.on_frame(i as u8, &buf[..n], &mut out);
                    for (p, f) in out.drain(..) {
                        socks[p as usize].send(&f)?;
                    }
                }
            }
            if idle && socks.len() > 1 {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        Ok(())
    }
}

/// Sets the flag when dropped: hold one in a scope that runs [`MiniRoot::serve_hub`] or
/// [`MiniRoot::serve_sockets`] on another thread, so the server stops also when the code
/// beside it panics (otherwise the scope would wait for it forever).
pub struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
