//! The userspace side of the XDP switch: the timers an XDP program cannot run.
//!
//! An XDP program runs only when a frame arrives, and nothing in it has a clock that can send
//! one. So where `switch::on_event` arms a timer (an intermediate's completion: claim 3's
//! re-send; the first arrival of a barrier with `fail_after` set: the failure deadline; an
//! intermediate's abort from a child: the abort's re-send), the program writes a record into
//! the `nb_arm` ring buffer: group, barrier, timer kind and the run that armed it (epoch and
//! the loader's configuration generation). [`TimerSide::poll`] takes the records, keeps the
//! timers in barrier-runtime's [`TimerWheel`], and when one fires runs the program's second
//! entry point, `nb_timer`, with `BPF_PROG_TEST_RUN` on a small request buffer
//! ([`XdpSwitch::fire`]). `nb_timer` decides `switch::on_timer`'s row under the group's spin
//! lock, the same lock the frame path takes, writes the state, and hands back the frame to send
//! and the ports it goes to; the timer side sends it through a packet socket on each port
//! ([`FrameSink`], [`PacketPorts`]) and arms the re-send the decision asks for. Every state
//! change stays in the kernel under the one lock: userspace never reads, decides and writes
//! back, so it cannot race the frame path.
//!
//! Frames that take this path, and only these: the reduce re-sent (RETRANSMIT) to the parent,
//! the abort re-sent to the parent, and the abort to every member when the deadline declares a
//! child failed. Every other frame is decided and sent by the program at frame time.
//!
//! A daemon's loop, in the namespace of the switch ports:
//!
//! ```no_run
//! use barrier_protocol::PortIdx;
//! use barrier_xdp::timers::{PacketPorts, TimerSide};
//! use barrier_xdp::XdpSwitch;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let now = || rawsock::monotonic_now().as_nanos() as u64;
//! let mut sw = XdpSwitch::load(1024)?;
//! let port = PortIdx::new(0).expect("port 0");
//! sw.add_port(port, barrier_bpf::ifindex("eth1")?)?;
//! // ... configure groups, attach the program to the ports ...
//! let mut tx = PacketPorts::open(&[(port, "eth1")])?;
//! let mut timers = TimerSide::new(&sw, now())?;
//! loop {
//!     timers.poll(&sw, &mut tx, now())?;
//!     std::thread::sleep(std::time::Duration::from_micros(50));
//! }
//! # }
//! ```

use std::io;

use barrier_bpf::RingBuffer;
use barrier_protocol::switch::{Fired, GroupConfig, Phase, Role, Run, Timer};
use barrier_protocol::wire::ETHERTYPE;
use barrier_protocol::{Epoch, GroupId, PortIdx, PortSet, Seq};
use barrier_runtime::wheel::TimerWheel;
use rawsock::RawSocket;

use crate::{XdpError, XdpSwitch, TIMER_PROGRAM};

/// The ring buffer map the program writes timer records into.
pub const ARM_MAP: &str = "nb_arm";

/// Bytes of the buffer `nb_timer` runs on: a request in, the frame and the reply out.
pub const TIMER_BUF: usize = 88;
const TIMER_REPLY: usize = 64;
const TIMER_MAGIC: u32 = 0x4e42_544d;
const TIMER_RESEND: u32 = 1;
const TIMER_DEADLINE: u32 = 2;

/// What a fired timer did (`switch::on_timer`'s rows), decided by `nb_timer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerOutcome {
    /// Nothing: the group moved on, was reconfigured, or the timer does not apply.
    Nothing,
    /// The reduce re-sent to the parent (claim 3).
    ResentReduce,
    /// The abort re-sent to the parent (it has not answered it).
    ResentAbort,
    /// The deadline declared a child failed: the group is aborted.
    Declared,
}

/// What `nb_timer` decided for one fired timer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerDecision {
    /// Which row.
    pub outcome: TimerOutcome,
    /// The frame to send (`FrameRepr::emit`'s 60 bytes) and the ports it goes to.
    pub frame: Option<([u8; 60], PortSet)>,
    /// The timer to arm next for the same barrier and run (a re-send with its attempt number).
    pub rearm: Option<Timer>,
}

fn timer_code(t: Timer) -> (u32, u32) {
    match t {
        Timer::Resend { attempt } => (TIMER_RESEND, attempt),
        Timer::Deadline => (TIMER_DEADLINE, 0),
    }
}

/// One record of the `nb_arm` ring: the timer `on_event` armed, as a [`Fired`] to come.
pub fn parse_arm_record(rec: &[u8]) -> Option<Fired> {
    if rec.len() < 20 {
        return None;
    }
    let w = |i: usize| u32::from_ne_bytes(rec[4 * i..4 * i + 4].try_into().expect("4 bytes"));
    let timer = match w(4) {
        TIMER_RESEND => Timer::Resend { attempt: 0 },
        TIMER_DEADLINE => Timer::Deadline,
        _ => return None,
    };
    Some(Fired {
        group: GroupId(w(0)),
        seq: Seq(w(1)),
        timer,
        run: Run {
            epoch: Epoch(w(2)),
            generation: w(3),
        },
    })
}

/// How long after it is armed `timer` of barrier `seq` fires, from the group's registers:
/// the deadline after `fail_after_ns`; the first re-send after `resend_timeout_ns` (as
/// `on_event` arms it), later ones backing off by the group's `backoff` (as `on_timer` re-arms).
pub fn delay_ns(cfg: &GroupConfig, group: GroupId, seq: Seq, timer: Timer) -> u64 {
    match timer {
        Timer::Deadline => cfg.fail_after_ns,
        Timer::Resend { attempt: 0 } => cfg.resend_timeout_ns,
        Timer::Resend { attempt } => {
            cfg.backoff
                .delay_ns(cfg.resend_timeout_ns, group, cfg.epoch, seq, attempt)
        }
    }
}

impl XdpSwitch {
    /// A consumer of the program's timer records (`nb_arm`); [`TimerSide`] holds the one a
    /// running switch has, tests take their own.
    pub fn arm_ring(&self) -> Result<RingBuffer, XdpError> {
        Ok(RingBuffer::new(&self.obj.map(ARM_MAP)?)?)
    }

    /// The timer entry point (its figures: `Program::info`).
    pub fn timer_program(&self) -> Result<barrier_bpf::Program<'_>, XdpError> {
        Ok(self.obj.program(TIMER_PROGRAM)?)
    }

    /// Runs `on_timer`'s decision for `fired` in the kernel (`nb_timer` through
    /// `BPF_PROG_TEST_RUN`, under the group's lock): changes the group's state as `on_timer`
    /// does and returns the frame to send, its ports and the timer to arm next. A timer of
    /// another run (`fired.run`: epoch and configuration generation) or another barrier does
    /// nothing.
    pub fn fire(&self, fired: Fired) -> Result<TimerDecision, XdpError> {
        let mut buf = [0u8; TIMER_BUF];
        let (timer, attempt) = timer_code(fired.timer);
        for (i, v) in [
            TIMER_MAGIC,
            fired.group.0,
            fired.seq.0,
            fired.run.epoch.0,
            fired.run.generation,
            timer,
            attempt,
        ]
        .iter()
        .enumerate()
        {
            buf[4 * i..4 * i + 4].copy_from_slice(&v.to_ne_bytes());
        }
        let run = self.timer_program()?.test_run_xdp(&buf, 0)?;
        let out = &run.data;
        if run.retval == barrier_bpf::xdp::ABORTED || out.len() < TIMER_BUF {
            return Ok(TimerDecision {
                outcome: TimerOutcome::Nothing,
                frame: None,
                rearm: None,
            });
        }
        let w = |i: usize| {
            u32::from_ne_bytes(
                out[TIMER_REPLY + 4 * i..TIMER_REPLY + 4 * i + 4]
                    .try_into()
                    .expect("4"),
            )
        };
        let ports = u64::from_ne_bytes(out[TIMER_REPLY..TIMER_REPLY + 8].try_into().expect("8"));
        let outcome = match w(2) {
            1 => TimerOutcome::ResentReduce,
            2 => TimerOutcome::ResentAbort,
            3 => TimerOutcome::Declared,
            _ => TimerOutcome::Nothing,
        };
        let rearm = (w(3) == TIMER_RESEND).then_some(Timer::Resend { attempt: w(4) });
        let frame = (run.retval == barrier_bpf::xdp::TX && ports != 0).then(|| {
            let mut f = [0u8; 60];
            f.copy_from_slice(&out[..60]);
            (f, PortSet(ports))
        });
        Ok(TimerDecision {
            outcome,
            frame,
            rearm,
        })
    }
}

/// Where the timer side's frames leave: one whole Ethernet frame out of one switch port.
pub trait FrameSink {
    /// Sends `frame` out of `port`.
    fn send(&mut self, port: PortIdx, frame: &[u8]) -> io::Result<()>;
}

/// AF_PACKET sockets on the switch's port interfaces (`ffi/rawsock`, as leaves send): the
/// [`FrameSink`] of a running switch. Open them in the namespace the ports are in.
#[derive(Debug, Default)]
pub struct PacketPorts {
    socks: Vec<Option<RawSocket>>,
}

impl PacketPorts {
    /// One socket per `(port, interface name)`.
    pub fn open(ports: &[(PortIdx, &str)]) -> io::Result<PacketPorts> {
        let mut socks: Vec<Option<RawSocket>> = Vec::new();
        for &(port, ifname) in ports {
            let i = port.get() as usize;
            if socks.len() <= i {
                socks.resize_with(i + 1, || None);
            }
            socks[i] = Some(RawSocket::open(ifname, ETHERTYPE)?);
        }
        Ok(PacketPorts { socks })
    }
}

impl FrameSink for PacketPorts {
    fn send(&mut self, port: PortIdx, frame: &[u8]) -> io::Result<()> {
        match self.socks.get(port.get() as usize) {
            Some(Some(s)) => s.send(frame),
            _ => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no packet socket for {port:?}"),
            )),
        }
    }
}

/// The timer side's own counts (the decisions' counts, `timer_resends` and `declared`, are the
/// program's, in [`crate::Counters`]): barrier-switch's scheduler names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimerCounters {
    /// Timers armed: records from the ring plus re-arms.
    pub timers_armed: u64,
    /// Timers that fired (each one run through `nb_timer`).
    pub timers_fired: u64,
    /// Records of a group no longer configured in the run that armed them: not armed.
    pub stale_records: u64,
    /// Frames sent (one per port).
    pub frames_out: u64,
    /// Frames a socket refused.
    pub tx_failed: u64,
    /// Fired timers `nb_timer` could not be run for (a failed `BPF_PROG_TEST_RUN`): dropped.
    pub fire_failed: u64,
    /// Times the program's `timers_lost` was found grown and the groups' states were read to
    /// arm again what the lost records would have armed ([`TimerSide::poll`]).
    pub loss_rescans: u64,
    /// Timers those rescans armed.
    pub rearmed_after_loss: u64,
}

/// How often [`TimerSide::poll`] reads the program's `timers_lost` (a few map lookups).
pub const LOSS_CHECK_NS: u64 = 50_000_000;

/// The timers of one [`XdpSwitch`]: call [`TimerSide::poll`] from the daemon's loop, often
/// (its wheel's tick is 65.5 µs; a timer fires at the first poll after its deadline).
pub struct TimerSide {
    ring: RingBuffer,
    wheel: TimerWheel<Fired>,
    fired: Vec<Fired>,
    records: Vec<Fired>,
    /// `timers_lost` as the last check read it, and when the next check is due.
    lost_seen: u64,
    next_loss_check_ns: u64,
    /// What it did so far.
    pub counters: TimerCounters,
}

impl std::fmt::Debug for TimerSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimerSide")
            .field("armed", &self.wheel.len())
            .field("counters", &self.counters)
            .finish()
    }
}

impl TimerSide {
    /// The timer side of `sw`, starting at `now_ns` (any monotonic clock, the one later
    /// `poll`s use). Only one consumer of the ring may exist per loaded switch.
    pub fn new(sw: &XdpSwitch, now_ns: u64) -> Result<TimerSide, XdpError> {
        let ring = sw.arm_ring()?;
        Ok(TimerSide {
            ring,
            // 4,096 slots of 65.5 µs: one turn is 268 ms; longer timers wait turns in their slot.
            wheel: TimerWheel::new(4096, 16, now_ns),
            fired: Vec::new(),
            records: Vec::new(),
            // 0: records lost before this side existed are recovered at the first poll.
            lost_seen: 0,
            next_loss_check_ns: now_ns,
            counters: TimerCounters::default(),
        })
    }

    /// Timers armed and not yet fired.
    pub fn armed(&self) -> usize {
        self.wheel.len()
    }

    /// An epoll fd readable when timer records wait in the ring (for a loop that sleeps).
    pub fn epoll_fd(&self) -> i32 {
        self.ring.epoll_fd()
    }

    /// Sleeps until the next [`TimerSide::poll`] has work, or `idle` has passed: with no timer
    /// armed, until the program writes a record (the ring's epoll fd); with timers armed, one
    /// wheel tick (65.5 µs), since the next deadline may be that close.
    pub fn wait(&self, idle: std::time::Duration) -> Result<(), XdpError> {
        if self.wheel.is_empty() {
            self.ring.wait(idle)?;
        } else {
            std::thread::sleep(std::time::Duration::from_nanos(self.wheel.tick_ns()).min(idle));
        }
        Ok(())
    }

    fn arm(&mut self, sw: &XdpSwitch, fired: Fired, now_ns: u64) {
        match sw.config(fired.group) {
            Some((cfg, generation))
                if generation == fired.run.generation && cfg.epoch == fired.run.epoch =>
            {
                let after = delay_ns(&cfg, fired.group, fired.seq, fired.timer);
                self.wheel.arm(fired, now_ns.saturating_add(after));
                self.counters.timers_armed += 1;
            }
            _ => self.counters.stale_records += 1,
        }
    }

    /// A record the ring had no room for is a timer nobody armed: when the program's
    /// `timers_lost` has grown since the last look, every configured group's state says what
    /// may be missing, and that is armed for its current barrier and run: the re-send (reduce
    /// or abort to the parent) of an intermediate awaiting its parent or aborted, the deadline
    /// of a barrier some child has reported with `fail_after` set. `nb_timer` decides again
    /// when each fires, so one that was not lost (or no longer applies) costs at most a
    /// second re-send chain until the release, or nothing; a deadline armed now fires later
    /// than the lost one would have, never earlier.
    fn rearm_lost(&mut self, sw: &XdpSwitch, now_ns: u64) {
        let lost = match sw.counters() {
            Ok(c) => c.get("timers_lost").unwrap_or(0),
            Err(e) => {
                tracing::warn!("timer side: reading timers_lost: {e}");
                return;
            }
        };
        if lost <= self.lost_seen {
            return;
        }
        tracing::warn!(
            "timer side: {} timer record(s) lost to a full ring: arming again from the groups' states",
            lost - self.lost_seen
        );
        self.lost_seen = lost;
        self.counters.loss_rescans += 1;
        let missing: Vec<Fired> = sw
            .configured()
            .filter_map(|(group, cfg, generation)| {
                let st = sw.state(group).ok().flatten()?;
                let timer = match st.phase {
                    Phase::AwaitingRelease | Phase::Aborted
                        if matches!(cfg.role, Role::Intermediate { .. }) =>
                    {
                        Timer::Resend { attempt: 0 }
                    }
                    Phase::Collecting | Phase::Unknown
                        if cfg.fail_after_ns > 0 && !st.arrived.is_empty() =>
                    {
                        Timer::Deadline
                    }
                    _ => return None,
                };
                Some(Fired {
                    group,
                    seq: st.seq,
                    timer,
                    run: Run {
                        epoch: cfg.epoch,
                        generation,
                    },
                })
            })
            .collect();
        for f in missing {
            self.arm(sw, f, now_ns);
            self.counters.rearmed_after_loss += 1;
        }
    }

    /// Takes the program's timer records and arms them, then fires every timer due at
    /// `now_ns`: `nb_timer` decides, the frame goes out of its ports through `tx`, the re-send
    /// it asks for is armed. Returns how many timers fired. Fails only when the ring cannot be
    /// read; a timer whose `nb_timer` run fails is counted (`fire_failed`) and dropped, the
    /// others still fire.
    pub fn poll(
        &mut self,
        sw: &XdpSwitch,
        tx: &mut dyn FrameSink,
        now_ns: u64,
    ) -> Result<usize, XdpError> {
        let mut records = std::mem::take(&mut self.records);
        records.clear();
        self.ring
            .consume(|rec| records.extend(parse_arm_record(rec)))?;
        for &f in &records {
            self.arm(sw, f, now_ns);
        }
        self.records = records;
        if now_ns >= self.next_loss_check_ns {
            self.next_loss_check_ns = now_ns.saturating_add(LOSS_CHECK_NS);
            self.rearm_lost(sw, now_ns);
        }
        let mut fired = std::mem::take(&mut self.fired);
        fired.clear();
        self.wheel.advance(now_ns, &mut fired);
        for &f in &fired {
            self.counters.timers_fired += 1;
            let Ok(d) = sw.fire(f) else {
                self.counters.fire_failed += 1;
                continue;
            };
            if let Some((frame, ports)) = d.frame {
                for port in ports.iter() {
                    match tx.send(port, &frame) {
                        Ok(()) => self.counters.frames_out += 1,
                        Err(_) => self.counters.tx_failed += 1,
                    }
                }
            }
            if let Some(timer) = d.rearm {
                self.arm(sw, Fired { timer, ..f }, now_ns);
            }
        }
        let n = fired.len();
        self.fired = fired;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use barrier_protocol::backoff::Backoff;

    fn record(words: [u32; 6]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    #[test]
    fn a_ring_record_is_the_timer_on_event_armed() {
        let f = parse_arm_record(&record([7, 41, 3, 12, TIMER_DEADLINE, 0])).expect("record");
        assert_eq!(
            f,
            Fired {
                group: GroupId(7),
                seq: Seq(41),
                timer: Timer::Deadline,
                run: Run {
                    epoch: Epoch(3),
                    generation: 12
                },
            }
        );
        let f = parse_arm_record(&record([7, 41, 3, 12, TIMER_RESEND, 0])).expect("record");
        assert_eq!(f.timer, Timer::Resend { attempt: 0 });
        assert_eq!(parse_arm_record(&record([7, 41, 3, 12, 9, 0])), None);
        assert_eq!(parse_arm_record(&[0u8; 12]), None);
    }

    #[test]
    fn delays_come_from_the_group_registers() {
        let port = |i| PortIdx::new(i).expect("port");
        let backoff = Backoff {
            max_ns: 80_000_000,
            jitter_pct: 20,
        };
        let cfg = GroupConfig::intermediate(port(1), PortSet::single(port(0)), 10_000_000)
            .with_fail_after(50_000_000)
            .with_backoff(backoff);
        let g = GroupId(5);
        assert_eq!(delay_ns(&cfg, g, Seq(9), Timer::Deadline), 50_000_000);
        assert_eq!(
            delay_ns(&cfg, g, Seq(9), Timer::Resend { attempt: 0 }),
            10_000_000
        );
        assert_eq!(
            delay_ns(&cfg, g, Seq(9), Timer::Resend { attempt: 3 }),
            backoff.delay_ns(10_000_000, g, cfg.epoch, Seq(9), 3)
        );
    }
}
