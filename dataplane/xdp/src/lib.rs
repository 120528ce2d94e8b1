//! # barrier-xdp: the switch's per-group logic as an XDP program
//!
//! `bpf/switch.bpf.c` runs claim 6 and the restart rules of `docs/protocol.md` on every switch
//! port's receive path; [`XdpSwitch`] loads it through `barrier-bpf` (libbpf), maps the
//! protocol crate's port indexes to interfaces, writes [`GroupConfig`]s into the group map,
//! reads [`GroupState`]s back, and sums the per-CPU counters. What the program does and what
//! it leaves to a userspace side (timers) is in `docs/offload.md`; the differential test
//! (`tests/differential.rs`) holds the program to `barrier_protocol::switch::on_event`.
//!
//! The timers the program cannot run (claim 3's re-send, the failure deadline) are
//! [`timers::TimerSide`]'s: it reads the timer records the program writes, keeps the timers, and
//! when one fires has the program's second entry point (`nb_timer`) decide `on_timer`'s row
//! under the group's lock, then sends the frame it hands back on a packet socket.
//!
//! | module | role |
//! | --- | --- |
//! | (root) | [`XdpSwitch`]: load, ports, configure/remove/state, counters |
//! | `config` | the daemon's configuration file: barrier-switch's, ports as interfaces |
//! | `dataplane` | [`XdpDataplane`]: the switch behind `barrier_mgmt::Dataplane` |
//! | `timers` | [`timers::TimerSide`]: the re-send timer and the failure deadline |
//! | `steer` | barrier-switch's AF_XDP ports' steering program (not the XDP switch's) |
//!
//! The daemon, `barrier-xdp check|run --config FILE`, is `src/main.rs`.

pub mod config;
pub mod dataplane;
pub mod steer;
pub mod timers;

pub use dataplane::XdpDataplane;

use std::collections::HashMap;

use barrier_bpf::{
    flags, map_type, BpfError, Object, OwnedMap, Program, XdpAttachment, XdpMode, XdpRun,
};
use barrier_protocol::switch::{ConfigError, GroupConfig, GroupState, Outcome, Reject, Role};
use barrier_protocol::table::GroupCounts;
use barrier_protocol::wire::MacAddr;
use barrier_protocol::{GroupId, PortIdx, PortSet};

/// The program, as `build.rs` compiled it.
pub const SWITCH_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/switch.bpf.o"));

/// The same program built with `-DNB_BROKEN_NO_EPOCH_CHECK` (frames of another epoch are taken
/// as the group's own): only for the differential test's check that it can fail.
#[doc(hidden)]
pub const BROKEN_NO_EPOCH_CHECK_OBJECT: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/switch_broken_epoch.bpf.o"));

/// The same program built with `-DNB_BROKEN_NO_LOCK` (the group's state changed without its
/// spin lock): only for the concurrency test's check that it can fail.
#[doc(hidden)]
pub const BROKEN_NO_LOCK_OBJECT: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/switch_broken_lock.bpf.o"));

/// The same program built with `-DNB_BROKEN_STALE_TIMER` (the timer entry point acts on a
/// timer armed for another barrier): only for the timer tests' check that they can fail.
#[doc(hidden)]
pub const BROKEN_STALE_TIMER_OBJECT: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/switch_broken_timer.bpf.o"));

/// The performance suite's XDP baseline (`bpf/reflector.bpf.c`): [`REFLECTOR_PROGRAM`] and the
/// leaves' stand-in [`LEAF_PROGRAM`] (`barrier-perf xdp`, perf/README.md).
pub const REFLECTOR_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/reflector.bpf.o"));

/// In [`REFLECTOR_OBJECT`]: swaps the MAC addresses and sends the frame back (`XDP_TX`).
pub const REFLECTOR_PROGRAM: &str = "nb_reflect";

/// In [`REFLECTOR_OBJECT`]: rewrites every frame it receives into the leaves' next reduce
/// (map `nb_leaf_cfg`: groups as a power of two, epoch, source MAC) and drops it.
pub const LEAF_PROGRAM: &str = "nb_leaf";

/// In [`REFLECTOR_OBJECT`]: [`LEAF_PROGRAM`]'s rewrite, sent back out (`XDP_TX`) instead of
/// dropped: starts `barrier-perf xdp`'s closed loop through barrier-switch.
pub const KICK_PROGRAM: &str = "nb_kick";

/// In [`REFLECTOR_OBJECT`]: turns every release it receives into the same group's next reduce
/// and sends it back (`XDP_TX`), counting them (map `nb_pong_count`); passes anything else.
pub const PONG_PROGRAM: &str = "nb_pong";

/// The program's name in the object.
pub const PROGRAM: &str = "nb_switch";

/// The timer entry point's name in the object: run by [`timers`] with `BPF_PROG_TEST_RUN`,
/// never attached.
pub const TIMER_PROGRAM: &str = "nb_timer";

/// A program in the same object that passes every frame: what the far end of a veth pair
/// needs attached for redirects into it to arrive (tests, a namespace test bed).
pub const PASS_PROGRAM: &str = "nb_pass";

/// Port indexes the program can name: `0..MAX_PORT` (the state word keeps the phase in its
/// top two bits, so 62 of the protocol's 64).
pub const MAX_PORT: u8 = 62;

/// Port-set devmaps the program can hold (distinct child sets and member sets together).
pub const MAX_PORT_SETS: u32 = 1024;

/// Bytes of one group's slot in `nb_groups`: 16 of state (spin lock, seq, word) and 32 of
/// configuration (children, epoch, parent, port sets, the `fail_after` register in whole
/// microseconds, the configuration generation).
pub const GROUP_SLOT_BYTES: usize = 48;

/// Bytes per group of `nb_group_counts` beside the slot: completions and re-sends (u32 each).
pub const GROUP_COUNTS_BYTES: usize = 8;

/// Of [`GROUP_SLOT_BYTES`], the group's state: spin lock (4), seq (4), word (8).
pub const GROUP_STATE_BYTES: usize = 16;

const NO_PARENT: u8 = 0xff;
/// `nb_counters`'s row for frames on an interface that is no port, and for the timer entry
/// point's decisions (`NO_PORT_ROW` in the program); rows `0..MAX_PORT` are the ports'.
const NO_PORT_ROW: u32 = MAX_PORT as u32;
/// `nb_sent`: cells per row, the rows of port-set slots and of left-out ingress ports.
const SENT_CELLS: usize = 6;
const SENT_SET: u32 = 64;
const SENT_EXCLUDED: u32 = SENT_SET + MAX_PORT_SETS;
const PHASE_SHIFT: u32 = 62;
const ARRIVED_MASK: u64 = (1 << PHASE_SHIFT) - 1;

/// What went wrong loading or configuring the XDP switch.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// A libbpf call or bpf syscall failed.
    #[error(transparent)]
    Bpf(#[from] BpfError),
    /// The group configuration is invalid.
    #[error("group {group:?}: {source}")]
    Config {
        /// The group.
        group: GroupId,
        /// Why.
        #[source]
        source: ConfigError,
    },
    /// A port index the program cannot name.
    #[error("port {0:?} is beyond what the XDP switch can name (0..{MAX_PORT})")]
    PortOutOfRange(PortIdx),
    /// A group names a port that has no interface yet ([`XdpSwitch::add_port`]).
    #[error("group {group:?} names {port:?}, which has no interface")]
    PortWithoutInterface {
        /// The group.
        group: GroupId,
        /// The port.
        port: PortIdx,
    },
    /// The group number is beyond the group map's size.
    #[error("group {0:?} is beyond the group map ({1} groups)")]
    GroupOutOfRange(GroupId, u32),
    /// Every port-set slot is taken.
    #[error("more than {MAX_PORT_SETS} distinct port sets in use at once")]
    TooManyPortSets,
    /// [`XdpSwitch::last_decision`] on a program loaded without
    /// [`LoadOptions::record_last_decision`].
    #[error("the program was loaded without recording its last decision (LoadOptions)")]
    NotRecording,
    /// The object's `.rodata` is not the one global the loader sets.
    #[error("the switch object's .rodata holds {0} bytes, expected 4 (nb_record_last only)")]
    Rodata(usize),
}

/// What [`XdpSwitch::load_object`] sets in the program before the verifier sees it (`const
/// volatile` globals in `.rodata`: the verifier takes them as constants and removes what they
/// switch off).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Record each frame's decision in the per-CPU map `nb_last`
    /// ([`XdpSwitch::last_decision`]): one more map write per frame, for the tests that check
    /// where a redirect went. Off in the daemon and the perf bed.
    pub record_last_decision: bool,
}

impl LoadOptions {
    /// The tests' options: the last decision recorded.
    pub const RECORDING: LoadOptions = LoadOptions {
        record_last_decision: true,
    };
}

/// The per-CPU counters the program keeps, in its order (`enum` in `bpf/switch.bpf.c`): the
/// switch's RX counter names (`dataplane/switch/src/counters.rs`) where the meaning is the
/// same. Differences: `pass_not_barrier` counts frames of other EtherTypes handed to the
/// kernel (`XDP_PASS`), not dropped; `tx_failed` counts decided frames the program could not
/// send (no devmap entry, tail adjust refused). The last three are the timer side's decisions,
/// made in the program under the group's lock (`nb_timer`): `timer_resends` (reduces re-sent
/// to the parent, as barrier-switch's scheduler counts them), `declared` (failure declarations)
/// and `timers_lost` (timer records the ring buffer had no room for).
pub const COUNTERS: [&str; 30] = [
    "frames",
    "reduce_in",
    "release_in",
    "abort_in",
    "recorded",
    "completions",
    "released_down",
    "duplicates",
    "stale_reduce",
    "stale_release",
    "ahead_reduce",
    "ahead_release",
    "aborted",
    "after_abort",
    "drop_too_short",
    "pass_not_barrier",
    "drop_bad_magic",
    "drop_bad_version",
    "drop_bad_kind",
    "drop_reserved_flags",
    "drop_group_out_of_range",
    "drop_bad_checksum",
    "drop_unknown_group",
    "drop_not_a_child",
    "drop_not_the_parent",
    "drop_other_epoch",
    "tx_failed",
    "timer_resends",
    "declared",
    "timers_lost",
];

/// The per-port TX counters the program keeps (`nb_sent`, summed in userspace per egress
/// port): barrier-switch's TX counter names (`TxCounters`) for what the XDP switch can count.
/// A frame is counted when the program hands it to the kernel (`XDP_TX`, a redirect the kernel
/// took) or the timer entry point decides it (the timer side then sends it): a frame the veth
/// or NIC drops after that is still counted. `retransmits_out` counts the frames among them
/// with the RETRANSMIT flag (the releases again for stale or ahead reduces, the timer's
/// re-sent reduces).
pub const TX_COUNTERS: [&str; 5] = [
    "frames_out",
    "reduce_out",
    "release_out",
    "abort_out",
    "retransmits_out",
];

/// The outcome a counter index stands for, for the counters that count [`Outcome`]s.
pub fn counter_outcome(index: usize) -> Option<Outcome> {
    Some(match COUNTERS.get(index).copied()? {
        "recorded" => Outcome::Recorded,
        "completions" => Outcome::Completed,
        "released_down" => Outcome::Released,
        "duplicates" => Outcome::Duplicate,
        "stale_reduce" => Outcome::StaleReduce,
        "stale_release" => Outcome::StaleRelease,
        "ahead_reduce" => Outcome::AheadReduce,
        "ahead_release" => Outcome::AheadRelease,
        "aborted" => Outcome::Aborted,
        "after_abort" => Outcome::AfterAbort,
        "drop_not_a_child" => Outcome::Rejected(Reject::NotAChild),
        "drop_not_the_parent" => Outcome::Rejected(Reject::NotTheParent),
        "drop_other_epoch" => Outcome::Rejected(Reject::OtherEpoch),
        _ => return None,
    })
}

/// Counter totals over every CPU, in [`COUNTERS`] order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters(pub [u64; COUNTERS.len()]);

impl Counters {
    fn add(&mut self, other: &Counters) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    /// The counter called `name`, if there is one.
    pub fn get(&self, name: &str) -> Option<u64> {
        COUNTERS.iter().position(|n| *n == name).map(|i| self.0[i])
    }

    /// `(name, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        COUNTERS.iter().copied().zip(self.0.iter().copied())
    }
}

/// One port's TX counters, in [`TX_COUNTERS`] order.
pub type SentCounters = [u64; TX_COUNTERS.len()];

/// Where the program's last decision on a CPU sent the frame (`nb_last`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Egress {
    /// Dropped or passed: nothing sent.
    None,
    /// `XDP_TX`: back out of the port it came in on.
    Ingress,
    /// A redirect to one port (the parent).
    Port(u8),
    /// A broadcast redirect over a port-set devmap (`nb_port_sets` slot), excluding the
    /// ingress port when `exclude_ingress`.
    Set {
        /// The slot.
        slot: u32,
        /// `BPF_F_EXCLUDE_INGRESS` was set.
        exclude_ingress: bool,
    },
}

/// The program's last decision on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastDecision {
    /// Where the frame went.
    pub egress: Egress,
    /// The counter index of the outcome ([`COUNTERS`]).
    pub counter: u32,
}

/// One `nb_port_sets` slot in use: its devmap and the configured groups' references to it (a
/// group's children and its members are one reference each, to the same slot where the two
/// sets are equal).
#[derive(Debug)]
struct SetSlot {
    slot: u32,
    _map: OwnedMap,
    refs: u32,
}

/// The XDP switch: the loaded program, its maps, and the port and port-set bookkeeping.
#[derive(Debug)]
pub struct XdpSwitch {
    obj: Object,
    groups: u32,
    ports: [Option<u32>; MAX_PORT as usize],
    /// Port sets in use, by mask.
    sets: HashMap<u64, SetSlot>,
    /// Slots never used yet: `next_slot..MAX_PORT_SETS`.
    next_slot: u32,
    /// Published sets no configured group names (`refs` 0), the longest idle first: taken
    /// back at no cost if named again, reclaimed for a new set when no slot is free.
    idle: std::collections::VecDeque<u64>,
    /// Slots reclaimed and not yet given to a set (a set whose devmap could not be made).
    free_slots: Vec<u32>,
    /// Per port index, the frames sent through port-set slots since freed (`nb_sent` cells).
    retired_sent: [[u64; SENT_CELLS]; MAX_PORT as usize],
    /// Every configured group's registers and the generation written with them: what the
    /// timer side needs (delays, backoff) and the program does not keep.
    configs: HashMap<u32, (GroupConfig, u32)>,
    /// Configurations written so far: the next one's generation.
    generation: u32,
    /// Loaded with [`LoadOptions::record_last_decision`].
    record_last: bool,
}

impl XdpSwitch {
    /// Loads [`SWITCH_OBJECT`] with room for group numbers `0..groups`, as the daemon runs it
    /// (no last-decision record).
    pub fn load(groups: u32) -> Result<XdpSwitch, XdpError> {
        XdpSwitch::load_object(SWITCH_OBJECT, groups, LoadOptions::default())
    }

    /// Loads a build of the program ([`SWITCH_OBJECT`] or a tests' broken variant) with
    /// `opts`.
    pub fn load_object(
        bytes: &[u8],
        groups: u32,
        opts: LoadOptions,
    ) -> Result<XdpSwitch, XdpError> {
        let mut obj = Object::open(bytes, "barrier_xdp_switch")?;
        obj.set_max_entries("nb_groups", groups.max(1))?;
        obj.set_max_entries("nb_group_counts", groups.max(1))?;
        let rodata = obj.initial_value(".rodata")?;
        if rodata.len() != 4 {
            return Err(XdpError::Rodata(rodata.len()));
        }
        let record = u32::from(opts.record_last_decision);
        obj.set_initial_value(".rodata", &record.to_ne_bytes())?;
        obj.load()?;
        Ok(XdpSwitch {
            obj,
            groups: groups.max(1),
            ports: [None; MAX_PORT as usize],
            sets: HashMap::new(),
            next_slot: 0,
            idle: std::collections::VecDeque::new(),
            free_slots: Vec::new(),
            retired_sent: [[0; SENT_CELLS]; MAX_PORT as usize],
            configs: HashMap::new(),
            generation: 0,
            record_last: opts.record_last_decision,
        })
    }

    /// The loaded program (for BPF_PROG_TEST_RUN, attaching, its figures).
    pub fn program(&self) -> Result<Program<'_>, XdpError> {
        Ok(self.obj.program(PROGRAM)?)
    }

    /// Sets this switch's id: the source MAC of every frame it sends.
    pub fn set_switch_mac(&self, mac: MacAddr) -> Result<(), XdpError> {
        let mut v = [0u8; 8];
        v[..6].copy_from_slice(&mac.0);
        self.obj
            .map("nb_self")?
            .update(&0u32.to_ne_bytes(), &v, flags::ANY)?;
        Ok(())
    }

    /// Makes interface `ifindex` port `port`: frames arriving on it are that port's, and
    /// frames for that port leave by it. Call before configuring groups that name it.
    pub fn add_port(&mut self, port: PortIdx, ifindex: u32) -> Result<(), XdpError> {
        let i = port.get();
        if i >= MAX_PORT {
            return Err(XdpError::PortOutOfRange(port));
        }
        let key = u32::from(i).to_ne_bytes();
        self.obj
            .map("nb_ports")?
            .update(&ifindex.to_ne_bytes(), &key, flags::ANY)?;
        self.obj
            .map("nb_tx")?
            .update(&key, &ifindex.to_ne_bytes(), flags::ANY)?;
        self.ports[i as usize] = Some(ifindex);
        Ok(())
    }

    /// Takes a reference to the `nb_port_sets` slot holding a devmap of exactly `set`: the
    /// published one (idle or not), else a new one in a free slot, a slot never used, or the
    /// slot of the set idle longest, reclaimed ([`XdpSwitch::release_port_set`] gives the
    /// reference back).
    fn port_set(&mut self, group: GroupId, set: PortSet) -> Result<u32, XdpError> {
        if let Some(s) = self.sets.get_mut(&set.0) {
            if s.refs == 0 {
                self.idle.retain(|&m| m != set.0);
            }
            s.refs += 1;
            return Ok(s.slot);
        }
        let slot = if let Some(slot) = self.free_slots.pop() {
            slot
        } else if self.next_slot < MAX_PORT_SETS {
            self.next_slot += 1;
            self.next_slot - 1
        } else if let Some(mask) = self.idle.pop_front() {
            self.reclaim(mask)?
        } else {
            return Err(XdpError::TooManyPortSets);
        };
        match self.fill_port_set(group, set, slot) {
            Ok(map) => {
                self.sets.insert(
                    set.0,
                    SetSlot {
                        slot,
                        _map: map,
                        refs: 1,
                    },
                );
                Ok(slot)
            }
            Err(e) => {
                self.free_slots.push(slot);
                Err(e)
            }
        }
    }

    /// A devmap of `set`'s interfaces, published in `slot`.
    fn fill_port_set(&self, group: GroupId, set: PortSet, slot: u32) -> Result<OwnedMap, XdpError> {
        let inner = OwnedMap::create(map_type::DEVMAP_HASH, "nb_port_set", 4, 4, 64, 0)?;
        for port in set.iter() {
            let ifindex = self
                .ports
                .get(port.get() as usize)
                .copied()
                .flatten()
                .ok_or(XdpError::PortWithoutInterface { group, port })?;
            inner.as_map().update(
                &u32::from(port.get()).to_ne_bytes(),
                &ifindex.to_ne_bytes(),
                flags::ANY,
            )?;
        }
        let fd = inner.as_map().fd() as u32;
        self.obj
            .map("nb_port_sets")?
            .update(&slot.to_ne_bytes(), &fd.to_ne_bytes(), flags::ANY)?;
        Ok(inner)
    }

    /// Gives back a reference [`XdpSwitch::port_set`] took. A set no group names any more
    /// stays published, idle, until its slot is needed ([`XdpSwitch::reclaim`]).
    fn release_port_set(&mut self, set: PortSet) -> Result<(), XdpError> {
        let Some(s) = self.sets.get_mut(&set.0) else {
            return Ok(());
        };
        s.refs -= 1;
        if s.refs == 0 {
            self.idle.push_back(set.0);
        }
        Ok(())
    }

    /// Unpublishes the idle set `mask` and returns its slot: its `nb_port_sets` entry is
    /// deleted (the kernel waits an RCU grace period there, so no program still holds the
    /// devmap or counts in the slot's row when it returns), the frames sent through it are
    /// added to its ports' totals ([`XdpSwitch::sent`]) and its `nb_sent` row zeroed, and its
    /// devmap is closed.
    fn reclaim(&mut self, mask: u64) -> Result<u32, XdpError> {
        let s = self.sets.remove(&mask).expect("an idle set is published");
        self.obj
            .map("nb_port_sets")?
            .delete(&s.slot.to_ne_bytes())?;
        let sent = self.obj.map("nb_sent")?;
        let row = SENT_SET + s.slot;
        let cells = Self::sent_row(&sent, row)?;
        for port in PortSet(mask).iter() {
            if let Some(r) = self.retired_sent.get_mut(port.get() as usize) {
                for (a, b) in r.iter_mut().zip(cells) {
                    *a += b;
                }
            }
        }
        let zero = vec![0u8; 8 * SENT_CELLS * barrier_bpf::possible_cpus()?];
        sent.update_percpu(&row.to_ne_bytes(), &zero)?;
        Ok(s.slot)
    }

    /// Reclaims every idle port set now (see [`XdpSwitch::reclaim`]); returns how many. A
    /// switch does this by itself, one set at a time, when a new set finds no free slot.
    pub fn reclaim_idle_port_sets(&mut self) -> Result<usize, XdpError> {
        let mut n = 0;
        while let Some(mask) = self.idle.pop_front() {
            let slot = self.reclaim(mask)?;
            self.free_slots.push(slot);
            n += 1;
        }
        Ok(n)
    }

    /// Gives back the port-set references of `group`'s configuration, if it has one.
    fn release_config(&mut self, cfg: Option<GroupConfig>) -> Result<(), XdpError> {
        if let Some(cfg) = cfg {
            self.release_port_set(cfg.children)?;
            self.release_port_set(cfg.members())?;
        }
        Ok(())
    }

    fn check_group(&self, group: GroupId) -> Result<[u8; 4], XdpError> {
        if group.0 >= self.groups {
            return Err(XdpError::GroupOutOfRange(group, self.groups));
        }
        Ok(group.0.to_ne_bytes())
    }

    /// Configures `group` (create, reset or set): its configuration and a fresh state
    /// (`Unknown`), written together under the group's lock.
    pub fn configure(&mut self, group: GroupId, cfg: &GroupConfig) -> Result<(), XdpError> {
        let key = self.check_group(group)?;
        cfg.validate()
            .map_err(|source| XdpError::Config { group, source })?;
        for port in cfg.members().iter() {
            if port.get() >= MAX_PORT {
                return Err(XdpError::PortOutOfRange(port));
            }
        }
        let children_set = self.port_set(group, cfg.children)?;
        let members_set = match self.port_set(group, cfg.members()) {
            Ok(slot) => slot,
            Err(e) => {
                self.release_port_set(cfg.children)?;
                return Err(e);
            }
        };
        let parent = match cfg.role {
            Role::Root => NO_PARENT,
            Role::Intermediate { parent } => parent.get(),
        };
        let mut v = [0u8; GROUP_SLOT_BYTES];
        v[16..24].copy_from_slice(&cfg.children.0.to_ne_bytes());
        v[24..28].copy_from_slice(&cfg.epoch.0.to_ne_bytes());
        v[28] = 1;
        v[29] = parent;
        v[32..36].copy_from_slice(&children_set.to_ne_bytes());
        v[36..40].copy_from_slice(&members_set.to_ne_bytes());
        // Whole microseconds, rounded up, as the group table keeps it (validate() bounds it).
        let fail_after_us = cfg.fail_after_ns.div_ceil(1_000) as u32;
        v[40..44].copy_from_slice(&fail_after_us.to_ne_bytes());
        self.generation = self.generation.wrapping_add(1);
        v[44..48].copy_from_slice(&self.generation.to_ne_bytes());
        if let Err(e) = self.obj.map("nb_groups")?.update(&key, &v, flags::LOCK) {
            self.release_config(Some(*cfg))?;
            return Err(e.into());
        }
        // The previous configuration's sets: freed if no other group has them.
        let old = self.configs.insert(group.0, (*cfg, self.generation));
        self.release_config(old.map(|(c, _)| c))?;
        Ok(())
    }

    /// `group`'s configuration and the generation it was written in (the run its timers
    /// belong to); `None` when not configured.
    pub fn config(&self, group: GroupId) -> Option<(GroupConfig, u32)> {
        self.configs.get(&group.0).copied()
    }

    /// Every configured group with its configuration and generation, in no particular order.
    pub fn configured(&self) -> impl Iterator<Item = (GroupId, GroupConfig, u32)> + '_ {
        self.configs
            .iter()
            .map(|(&g, &(cfg, generation))| (GroupId(g), cfg, generation))
    }

    /// Removes `group`: its frames are `drop_unknown_group` from now on.
    pub fn remove(&mut self, group: GroupId) -> Result<(), XdpError> {
        let key = self.check_group(group)?;
        let v = [0u8; GROUP_SLOT_BYTES];
        self.obj.map("nb_groups")?.update(&key, &v, flags::LOCK)?;
        let old = self.configs.remove(&group.0);
        self.release_config(old.map(|(c, _)| c))?;
        Ok(())
    }

    /// `group`'s state, read under its lock; `None` when not configured.
    pub fn state(&self, group: GroupId) -> Result<Option<GroupState>, XdpError> {
        let key = self.check_group(group)?;
        let Some(v) = self.obj.map("nb_groups")?.lookup(&key, flags::LOCK)? else {
            return Ok(None);
        };
        if v[28] == 0 {
            return Ok(None);
        }
        let seq = u32::from_ne_bytes(v[4..8].try_into().expect("4 bytes"));
        let word = u64::from_ne_bytes(v[8..16].try_into().expect("8 bytes"));
        Ok(Some(state_from_word(seq, word)))
    }

    /// Overwrites `group`'s state (a test's starting point). The configuration is read and
    /// written back with it; a frame between the two is overwritten.
    pub fn set_state(&self, group: GroupId, st: GroupState) -> Result<(), XdpError> {
        let key = self.check_group(group)?;
        let map = self.obj.map("nb_groups")?;
        let Some(mut v) = map.lookup(&key, flags::LOCK)? else {
            return Ok(());
        };
        let (seq, word) = state_to_word(st);
        v[4..8].copy_from_slice(&seq.to_ne_bytes());
        v[8..16].copy_from_slice(&word.to_ne_bytes());
        map.update(&key, &v, flags::LOCK)?;
        Ok(())
    }

    /// Every counter, summed over the CPUs and the ports.
    pub fn counters(&self) -> Result<Counters, XdpError> {
        let mut total = Counters([0; COUNTERS.len()]);
        for (_, c) in self.port_counters()? {
            total.add(&c);
        }
        Ok(total)
    }

    /// The counters per port, summed over the CPUs: one entry per port that has an interface,
    /// in port order, then `None`: frames on an interface that is no port of this switch, and
    /// the timer side's decisions (`timer_resends`, `declared`).
    pub fn port_counters(&self) -> Result<Vec<(Option<PortIdx>, Counters)>, XdpError> {
        let map = self.obj.map("nb_counters")?;
        let rows = (0..MAX_PORT)
            .filter(|&i| self.ports[i as usize].is_some())
            .map(|i| (PortIdx::new(i), u32::from(i)))
            .chain(std::iter::once((None, NO_PORT_ROW)));
        let mut out = Vec::new();
        for (port, row) in rows {
            let mut c = [0u64; COUNTERS.len()];
            for cpu in map.lookup_percpu(&row.to_ne_bytes())?.unwrap_or_default() {
                for (i, v) in c.iter_mut().enumerate() {
                    *v += u64::from_ne_bytes(cpu[8 * i..8 * i + 8].try_into().expect("8 bytes"));
                }
            }
            out.push((port, Counters(c)));
        }
        Ok(out)
    }

    /// One `nb_sent` row's cells summed over the CPUs.
    fn sent_row(map: &barrier_bpf::Map<'_>, row: u32) -> Result<[u64; SENT_CELLS], XdpError> {
        let mut c = [0u64; SENT_CELLS];
        for cpu in map.lookup_percpu(&row.to_ne_bytes())?.unwrap_or_default() {
            for (i, v) in c.iter_mut().enumerate() {
                *v += u64::from_ne_bytes(cpu[8 * i..8 * i + 8].try_into().expect("8 bytes"));
            }
        }
        Ok(c)
    }

    /// Frames sent per port (see [`TX_COUNTERS`]), one entry per port that has an interface,
    /// in port order: what the program sent to that port alone, plus each broadcast over a
    /// port set that holds it, less the broadcasts that left it out as their ingress port.
    pub fn sent(&self) -> Result<Vec<(PortIdx, SentCounters)>, XdpError> {
        let map = self.obj.map("nb_sent")?;
        let mut cells: Vec<(PortIdx, [i128; SENT_CELLS])> = Vec::new();
        for i in (0..MAX_PORT).filter(|&i| self.ports[i as usize].is_some()) {
            let mut c = [0i128; SENT_CELLS];
            let direct = Self::sent_row(&map, u32::from(i))?;
            let left_out = Self::sent_row(&map, SENT_EXCLUDED + u32::from(i))?;
            for k in 0..SENT_CELLS {
                c[k] = i128::from(direct[k]) - i128::from(left_out[k]);
            }
            cells.push((PortIdx::new(i).expect("below MAX_PORT"), c));
        }
        for (port, c) in cells.iter_mut() {
            for (a, b) in c.iter_mut().zip(self.retired_sent[port.get() as usize]) {
                *a += i128::from(b);
            }
        }
        for (&mask, s) in &self.sets {
            let row = Self::sent_row(&map, SENT_SET + s.slot)?;
            for (port, c) in cells.iter_mut() {
                if PortSet(mask).contains(*port) {
                    for k in 0..SENT_CELLS {
                        c[k] += i128::from(row[k]);
                    }
                }
            }
        }
        Ok(cells
            .into_iter()
            .map(|(port, c)| {
                let c = c.map(|v| u64::try_from(v).unwrap_or(0));
                let (reduce, release, abort) = (c[0] + c[3], c[1] + c[4], c[2] + c[5]);
                (
                    port,
                    [
                        reduce + release + abort,
                        reduce,
                        release,
                        abort,
                        c[3] + c[4] + c[5],
                    ],
                )
            })
            .collect())
    }

    /// `group`'s completions and re-sends at this switch (`nb_group_counts`), as barrier-switch's
    /// group table counts them: since the program was loaded, across reconfigurations, resets
    /// and removal of the group.
    pub fn group_counts(&self, group: GroupId) -> Result<GroupCounts, XdpError> {
        let key = self.check_group(group)?;
        let v = self
            .obj
            .map("nb_group_counts")?
            .lookup(&key, 0)?
            .unwrap_or_else(|| vec![0; 8]);
        let w = |i: usize| u32::from_ne_bytes(v[i..i + 4].try_into().expect("4 bytes"));
        Ok(GroupCounts {
            completions: w(0),
            resends: w(4),
        })
    }

    /// Every group's completions and re-sends, indexed by group number (`nb_group_counts` read
    /// in batches: `stats` over a million groups in a thousand syscalls, not a million).
    pub fn all_group_counts(&self) -> Result<Vec<GroupCounts>, XdpError> {
        let v = self.obj.map("nb_group_counts")?.array_values(1024)?;
        let w = |b: &[u8]| u32::from_ne_bytes(b.try_into().expect("4 bytes"));
        Ok(v.chunks_exact(GROUP_COUNTS_BYTES)
            .map(|c| GroupCounts {
                completions: w(&c[0..4]),
                resends: w(&c[4..8]),
            })
            .collect())
    }

    /// Clears the last-decision record on every CPU (before a run whose decision a test
    /// reads with [`XdpSwitch::last_decision`]). [`XdpError::NotRecording`] unless loaded with
    /// [`LoadOptions::record_last_decision`].
    pub fn clear_last_decision(&self) -> Result<(), XdpError> {
        if !self.record_last {
            return Err(XdpError::NotRecording);
        }
        let map = self.obj.map("nb_last")?;
        let cpus = barrier_bpf::possible_cpus()?;
        let mut v = Vec::with_capacity(16 * cpus);
        for _ in 0..cpus {
            v.extend_from_slice(&[0u8; 12]);
            v.extend_from_slice(&u32::MAX.to_ne_bytes());
        }
        map.update_percpu(&0u32.to_ne_bytes(), &v)?;
        Ok(())
    }

    /// The decision recorded since [`XdpSwitch::clear_last_decision`], on whichever CPU ran it.
    /// [`XdpError::NotRecording`] unless loaded with [`LoadOptions::record_last_decision`].
    pub fn last_decision(&self) -> Result<Option<LastDecision>, XdpError> {
        if !self.record_last {
            return Err(XdpError::NotRecording);
        }
        let map = self.obj.map("nb_last")?;
        let Some(all) = map.lookup_percpu(&0u32.to_ne_bytes())? else {
            return Ok(None);
        };
        for v in all {
            let w = |i: usize| u32::from_ne_bytes(v[4 * i..4 * i + 4].try_into().expect("4"));
            let (egress, target, fl, counter) = (w(0), w(1), w(2), w(3));
            if counter == u32::MAX {
                continue;
            }
            let egress = match egress {
                1 => Egress::Ingress,
                2 => Egress::Port(target as u8),
                3 => Egress::Set {
                    slot: target,
                    exclude_ingress: fl & (1 << 4) != 0,
                },
                _ => Egress::None,
            };
            return Ok(Some(LastDecision { egress, counter }));
        }
        Ok(None)
    }

    /// Port sets some configured group names (of [`MAX_PORT_SETS`] slots).
    pub fn port_sets_in_use(&self) -> usize {
        self.sets.values().filter(|s| s.refs > 0).count()
    }

    /// Port sets published in `nb_port_sets`: those in use and the idle ones not reclaimed yet.
    pub fn port_sets_published(&self) -> usize {
        self.sets.len()
    }

    /// The port set a [`Egress::Set`] slot holds.
    pub fn port_set_of_slot(&self, slot: u32) -> Option<PortSet> {
        self.sets
            .iter()
            .find(|(_, s)| s.slot == slot)
            .map(|(mask, _)| PortSet(*mask))
    }

    /// Runs the program once on `frame` arriving on `ingress_ifindex` (BPF_PROG_TEST_RUN).
    pub fn run_frame(&self, frame: &[u8], ingress_ifindex: u32) -> Result<XdpRun, XdpError> {
        Ok(self.program()?.test_run_xdp(frame, ingress_ifindex)?)
    }

    /// Attaches [`PASS_PROGRAM`] to interface `ifindex` (natively); detached when the result
    /// drops.
    pub fn attach_pass(&self, ifindex: u32) -> Result<XdpAttachment, XdpError> {
        Ok(self
            .obj
            .program(PASS_PROGRAM)?
            .attach_xdp(ifindex, XdpMode::Native)?)
    }

    /// Attaches the program to interface `ifindex`; detached when the result drops.
    pub fn attach(&self, ifindex: u32, mode: XdpMode) -> Result<XdpAttachment, XdpError> {
        Ok(self.program()?.attach_xdp(ifindex, mode)?)
    }
}

/// The protocol's state for the program's `(seq, word)`: phase in bits 62..63, below them the
/// arrivals (or, aborted, the failure as [`GroupState::aborted`] keeps it).
pub fn state_from_word(seq: u32, word: u64) -> GroupState {
    let phase = u128::from(word >> PHASE_SHIFT);
    GroupState::from_bits(u128::from(seq) | phase << 32 | u128::from(word & ARRIVED_MASK) << 64)
}

/// The program's `(seq, word)` for a protocol state (ports 0..62 only).
pub fn state_to_word(st: GroupState) -> (u32, u64) {
    let bits = st.to_bits();
    let phase = ((bits >> 32) & 0b11) as u64;
    let arrived = (bits >> 64) as u64 & ARRIVED_MASK;
    (st.seq.0, phase << PHASE_SHIFT | arrived)
}
