//! Ethernet ports: lookup, configuration, start/stop/close, statistics and the burst calls.
//! A `Port` is the owner (control path); `RxQueue`/`TxQueue` handles let other lcores own one
//! queue each (data path) without locks, which is how DPDK expects queues to be used.

use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use dpdk_sys as sys;

use crate::eal::Eal;
use crate::error::{check, DpdkError};
use crate::ids::{PortId, QueueId};
use crate::mbuf::MbufBatch;
use crate::mempool::Mempool;

const MAX_PORTS: usize = sys::RTE_MAX_ETHPORTS as usize;
const MAX_QUEUES: usize = sys::RTE_MAX_QUEUES_PER_PORT as usize;

/// One `Port` per port id per process: two owners could start/stop under each other.
static PORT_OWNED: [AtomicBool; MAX_PORTS] = [const { AtomicBool::new(false) }; MAX_PORTS];

/// Basic counters (`struct rte_eth_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Packets received.
    pub ipackets: u64,
    /// Packets sent.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Packets dropped by the device because RX queues were full.
    pub imissed: u64,
    /// Receive errors.
    pub ierrors: u64,
    /// Transmit errors.
    pub oerrors: u64,
    /// RX mbuf allocation failures.
    pub rx_nombuf: u64,
}

/// Link state from `rte_eth_link_get_nowait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkStatus {
    /// Link up.
    pub up: bool,
    /// Speed in Mb/s (0 when unknown).
    pub speed_mbps: u32,
    /// Full duplex.
    pub full_duplex: bool,
    /// Autonegotiated.
    pub autoneg: bool,
}

/// Shared between a `Port` and its queue handles; the port is closed when the last one drops.
struct PortInner {
    id: PortId,
    name: String,
    /// Set by `Port::start`, cleared by `Port::stop`; read by the final close.
    started: AtomicBool,
    /// Queues handed out as `RxQueue`/`TxQueue` (one owner each).
    rx_claimed: Box<[AtomicBool]>,
    tx_claimed: Box<[AtomicBool]>,
    /// Rings under a `ring_pair` port (shared with its peer); declared before `pools` so the
    /// mbufs still in them go back to pools that are still alive.
    rings: Option<Arc<RingSet>>,
    /// Pools backing the RX queues: dropped only after the port is closed and its rings freed.
    pools: Mutex<Vec<Mempool>>,
    /// The vdev this port was created from by `attach_vdev`, removed after close.
    vdev: Option<CString>,
    /// A `net_pcap` vdev that reads its RX frames from a file (`rx_pcap=`): what it "receives"
    /// is the file, read on demand, not traffic that arrived before the port started.
    replays_file: bool,
    _eal: Eal,
}

/// An Ethernet port owned by this process.
///
/// Closing: `close()` stops and closes it explicitly and reports errors; dropping the `Port`
/// does the same silently. While `RxQueue`/`TxQueue` handles are alive the close is deferred to
/// the last of them (a handle must never poll a closed port).
pub struct Port {
    inner: Arc<PortInner>,
    nb_rx: u16,
    nb_tx: u16,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("id", &self.inner.id)
            .field("name", &self.inner.name)
            .field("rx_queues", &self.nb_rx)
            .field("tx_queues", &self.nb_tx)
            .finish()
    }
}

impl Port {
    /// Number of ports usable by the application.
    pub fn count_avail(_eal: &Eal) -> u16 {
        // SAFETY: EAL is initialised (an `Eal` exists).
        unsafe { sys::rte_eth_dev_count_avail() }
    }

    /// Ids of all usable ports, ascending.
    pub fn list(_eal: &Eal) -> Vec<PortId> {
        let mut out = Vec::new();
        // SAFETY: EAL is initialised; rte_eth_find_next returns RTE_MAX_ETHPORTS past the end.
        let mut p = unsafe { sys::rte_eth_find_next(0) };
        while (p as usize) < MAX_PORTS {
            out.push(PortId(p));
            // SAFETY: as above.
            p = unsafe { sys::rte_eth_find_next(p + 1) };
        }
        out
    }

    /// The port id of the device called `name` (e.g. `net_ring0`, `0000:02:00.0`).
    pub fn id_by_name(_eal: &Eal, name: &str) -> Result<PortId, DpdkError> {
        const OP: &str = "rte_eth_dev_get_port_by_name";
        let c = CString::new(name).map_err(|_| DpdkError::invalid(OP, "name contains NUL"))?;
        let mut id = 0u16;
        // SAFETY: EAL is initialised; c is a valid C string; id is a valid out-pointer.
        check(OP, unsafe {
            sys::rte_eth_dev_get_port_by_name(c.as_ptr(), &mut id)
        })
        .map_err(|e| match e {
            DpdkError::Call { errno, message, .. } => DpdkError::Call {
                op: OP,
                errno,
                message: match crate::eal::vdev_spec(name) {
                    Some(spec) => format!(
                        "{message}: no port named {name:?}: EAL was given --vdev {spec:?} but its \
                         driver did not create the device{}",
                        vdev_cause(&spec)
                    ),
                    None => format!("{message}: no port named {name:?}"),
                },
            },
            other => other,
        })?;
        Ok(PortId(id))
    }

    /// Takes ownership of an existing port.
    #[cold]
    pub fn open(eal: &Eal, id: PortId) -> Result<Port, DpdkError> {
        Self::open_inner(eal, id, None)
    }

    /// Takes ownership of the port called `name`.
    #[cold]
    pub fn open_by_name(eal: &Eal, name: &str) -> Result<Port, DpdkError> {
        let id = Self::id_by_name(eal, name)?;
        Self::open(eal, id)
    }

    /// Creates a virtual device at run time (`rte_vdev_init`) and opens its port. `spec` is
    /// written as for `--vdev`: `net_ring0`, `net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap`. The
    /// device is removed again when the port is closed. (A `net_ring` vdev keeps its internal
    /// rings after removal; attaching the same name again reuses them, and DPDK logs "RING:
    /// Cannot reserve memory" on the way: harmless.)
    #[cold]
    pub fn attach_vdev(eal: &Eal, spec: &str) -> Result<Port, DpdkError> {
        const OP: &str = "rte_vdev_init";
        let (name, args) = match spec.split_once(',') {
            Some((n, a)) => (n, a),
            None => (spec, ""),
        };
        let c_name = CString::new(name).map_err(|_| DpdkError::invalid(OP, "name contains NUL"))?;
        let c_args = CString::new(args).map_err(|_| DpdkError::invalid(OP, "args contain NUL"))?;
        // SAFETY: EAL is initialised; both strings are valid C strings that DPDK copies.
        let ret = unsafe { sys::rte_vdev_init(c_name.as_ptr(), c_args.as_ptr()) };
        if ret < 0 {
            // rte_vdev_init returns -1 for "no such driver" and sets nothing better (and so
            // does many a driver that failed); a cause found here that is a permission is
            // reported as one.
            let cause = vdev_cause(spec);
            let errno = if ret != -1 {
                -ret
            } else if cause.contains("lacks CAP_NET_RAW") {
                1 /* EPERM */
            } else {
                19 /* ENODEV */
            };
            return Err(DpdkError::Call {
                op: OP,
                errno,
                message: format!(
                    "{}: cannot create virtual device {spec:?}{cause}",
                    crate::error::strerror(errno),
                ),
            });
        }
        let id = match Self::id_by_name(eal, name) {
            Ok(id) => id,
            Err(e) => {
                // SAFETY: we created this vdev just above and nothing else references it.
                unsafe { sys::rte_vdev_uninit(c_name.as_ptr()) };
                return Err(e);
            }
        };
        Self::open_inner(eal, id, Some(c_name))
    }

    /// Two ports joined back to back by rings, like a cable: what one sends on TX queue i the
    /// other receives on RX queue i. Both get `queues` RX and TX queues; each ring holds
    /// `ring_size - 1` mbufs (`ring_size` a power of two). The ring driver names the ports
    /// `net_ring_<name_a>` and `net_ring_<name_b>`; names must be unique. The rings are freed,
    /// and the mbufs left in them returned to their pools, when both ports are closed.
    #[cold]
    pub fn ring_pair(
        eal: &Eal,
        name_a: &str,
        name_b: &str,
        queues: u16,
        ring_size: u32,
    ) -> Result<(Port, Port), DpdkError> {
        const OP: &str = "Port::ring_pair";
        if queues == 0 {
            return Err(DpdkError::invalid(OP, "needs at least one queue"));
        }
        // a_to_b[i] carries A's TX queue i to B's RX queue i; b_to_a the other way.
        let mut set = RingSet {
            rings: Vec::new(),
            _eal: eal.clone(),
        };
        let mut make = |tag: &str, i: u16| -> Result<*mut sys::rte_ring, DpdkError> {
            let c = CString::new(format!("{tag}{i}"))
                .map_err(|_| DpdkError::invalid(OP, "name contains NUL"))?;
            // SAFETY: EAL is live; the name is copied; single producer (one TX queue owner) and
            // single consumer (one RX queue owner) match how ports use queues.
            let r = unsafe {
                sys::rte_ring_create(
                    c.as_ptr(),
                    ring_size,
                    sys::SOCKET_ID_ANY,
                    sys::RING_F_SP_ENQ | sys::RING_F_SC_DEQ,
                )
            };
            let r = NonNull::new(r).ok_or_else(|| DpdkError::from_rte_errno("rte_ring_create"))?;
            set.rings.push(r);
            Ok(r.as_ptr())
        };
        // Ring names are limited to 29 bytes and must be unique process-wide.
        let short = |n: &str| n.chars().take(12).collect::<String>();
        let (ta, tb) = (
            format!("nbr{}>", short(name_a)),
            format!("nbr{}<", short(name_b)),
        );
        let mut a_to_b = Vec::new();
        let mut b_to_a = Vec::new();
        for i in 0..queues {
            a_to_b.push(make(&ta, i)?);
            b_to_a.push(make(&tb, i)?);
        }
        let set = Arc::new(set);
        let make_port = |name: &str,
                         rx: &[*mut sys::rte_ring],
                         tx: &[*mut sys::rte_ring]|
         -> Result<Port, DpdkError> {
            let c = CString::new(name).map_err(|_| DpdkError::invalid(OP, "name contains NUL"))?;
            // SAFETY: EAL is live; both arrays hold `queues` valid rings that outlive the port
            // (the RingSet is kept by it); the name is copied.
            let ret = unsafe {
                sys::rte_eth_from_rings(
                    c.as_ptr(),
                    rx.as_ptr(),
                    rx.len() as u32,
                    tx.as_ptr(),
                    tx.len() as u32,
                    0,
                )
            };
            crate::error::check_rte_errno("rte_eth_from_rings", ret)?;
            let mut p = Self::open_inner(eal, PortId(ret as u16), None)?;
            let inner = Arc::get_mut(&mut p.inner).expect("fresh port");
            inner.rings = Some(set.clone());
            // The driver registered the port as the vdev `net_ring_<name>`: remove it on close.
            inner.vdev = CString::new(inner.name.clone()).ok();
            Ok(p)
        };
        let a = make_port(name_a, &b_to_a, &a_to_b)?;
        let b = make_port(name_b, &a_to_b, &b_to_a)?;
        Ok((a, b))
    }

    fn open_inner(eal: &Eal, id: PortId, vdev: Option<CString>) -> Result<Port, DpdkError> {
        const OP: &str = "Port::open";
        if id.0 as usize >= MAX_PORTS {
            return Err(DpdkError::invalid(
                OP,
                format!("{id:?} is beyond RTE_MAX_ETHPORTS ({MAX_PORTS})"),
            ));
        }
        // SAFETY: EAL is initialised; the call only checks the port table.
        if unsafe { sys::rte_eth_dev_is_valid_port(id.0) } == 0 {
            return Err(DpdkError::invalid(
                OP,
                format!(
                    "{id:?} does not exist ({} ports available)",
                    Self::count_avail(eal)
                ),
            ));
        }
        if PORT_OWNED[id.0 as usize].swap(true, Ordering::AcqRel) {
            return Err(DpdkError::invalid(
                OP,
                format!("{id:?} is already owned by another Port"),
            ));
        }
        let mut buf = [0 as c_char; sys::RTE_ETH_NAME_MAX_LEN as usize];
        // SAFETY: buf has RTE_ETH_NAME_MAX_LEN bytes as the call requires; the port is valid.
        let name = match check("rte_eth_dev_get_name_by_port", unsafe {
            sys::rte_eth_dev_get_name_by_port(id.0, buf.as_mut_ptr())
        }) {
            // SAFETY: DPDK wrote a NUL-terminated name into buf.
            Ok(_) => unsafe { CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned(),
            Err(_) => format!("{id:?}"),
        };
        let replays_file = name.starts_with("net_pcap") && devargs_replay_file(id);
        Ok(Port {
            inner: Arc::new(PortInner {
                id,
                name,
                started: AtomicBool::new(false),
                rx_claimed: (0..MAX_QUEUES).map(|_| AtomicBool::new(false)).collect(),
                tx_claimed: (0..MAX_QUEUES).map(|_| AtomicBool::new(false)).collect(),
                rings: None,
                pools: Mutex::new(Vec::new()),
                replays_file,
                vdev,
                _eal: eal.clone(),
            }),
            nb_rx: 0,
            nb_tx: 0,
        })
    }

    /// The port id.
    pub fn id(&self) -> PortId {
        self.inner.id
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Configured RX queues.
    pub fn rx_queues(&self) -> u16 {
        self.nb_rx
    }

    /// Configured TX queues.
    pub fn tx_queues(&self) -> u16 {
        self.nb_tx
    }

    fn handles_alive(&self) -> bool {
        Arc::strong_count(&self.inner) > 1
    }

    /// Configures `rx_queues` RX queues of `rx_desc` descriptors filled from `pool`, and
    /// `tx_queues` TX queues of `tx_desc` descriptors (descriptor counts are adjusted to the
    /// device's limits). The port must be stopped.
    #[cold]
    pub fn configure(
        &mut self,
        rx_queues: u16,
        tx_queues: u16,
        rx_desc: u16,
        tx_desc: u16,
        pool: &Mempool,
    ) -> Result<(), DpdkError> {
        const OP: &str = "Port::configure";
        if self.inner.started.load(Ordering::Acquire) {
            return Err(DpdkError::invalid(
                OP,
                format!("{:?} is started: stop it first", self.id()),
            ));
        }
        if self.handles_alive() {
            return Err(DpdkError::invalid(OP, "queue handles are alive"));
        }
        let id = self.id().0;
        let conf = sys::rte_eth_conf::default();
        // SAFETY: the port is valid and stopped; conf is a zeroed (all defaults) rte_eth_conf.
        check("rte_eth_dev_configure", unsafe {
            sys::rte_eth_dev_configure(id, rx_queues, tx_queues, &conf)
        })?;
        let (mut nrx, mut ntx) = (rx_desc, tx_desc);
        // SAFETY: valid port; both pointers are to live locals.
        check("rte_eth_dev_adjust_nb_rx_tx_desc", unsafe {
            sys::rte_eth_dev_adjust_nb_rx_tx_desc(id, &mut nrx, &mut ntx)
        })?;
        // SAFETY: valid port.
        let socket = unsafe { sys::rte_eth_dev_socket_id(id) };
        let socket = if socket < 0 {
            sys::SOCKET_ID_ANY as u32
        } else {
            socket as u32
        };
        for q in 0..rx_queues {
            // SAFETY: configured port, queue index below the configured count; NULL rxconf means
            // driver defaults; the pool outlives the port (kept in `pools`).
            check("rte_eth_rx_queue_setup", unsafe {
                sys::rte_eth_rx_queue_setup(id, q, nrx, socket, std::ptr::null(), pool.as_ptr())
            })?;
        }
        for q in 0..tx_queues {
            // SAFETY: as above, NULL txconf means driver defaults.
            check("rte_eth_tx_queue_setup", unsafe {
                sys::rte_eth_tx_queue_setup(id, q, ntx, socket, std::ptr::null())
            })?;
        }
        self.inner.pools.lock().unwrap().push(pool.clone());
        self.nb_rx = rx_queues;
        self.nb_tx = tx_queues;
        Ok(())
    }

    /// Starts the port (after `configure`).
    #[cold]
    pub fn start(&mut self) -> Result<(), DpdkError> {
        if self.nb_rx == 0 && self.nb_tx == 0 {
            return Err(DpdkError::invalid(
                "Port::start",
                format!("{:?} is not configured", self.id()),
            ));
        }
        // SAFETY: configured, valid port owned by this Port.
        check("rte_eth_dev_start", unsafe {
            sys::rte_eth_dev_start(self.id().0)
        })?;
        self.inner.started.store(true, Ordering::Release);
        Ok(())
    }

    /// Frees everything the started port holds in its RX queues now, and returns how many
    /// frames that was. Call it after `start` and before anything trusts the port as a frame's
    /// ingress.
    ///
    /// Why: `net_af_packet` opens each queue's socket for every interface of the namespace
    /// (`socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL))`), sets up its ring, and only then binds
    /// it to its own interface (DPDK 22.11 `rte_eth_af_packet.c`, `rte_pmd_init_internals`);
    /// frames of other interfaces that arrive in between sit in this port's ring and come out
    /// of the first `rx_burst` as if received here. The bind has returned once the port
    /// exists (the kernel's bind waits for in-flight deliveries), so after one pass over what
    /// the ring held, every frame is this interface's. Only net_af_packet was shown to misplace
    /// frames; every live port is drained the same way (a frame that waited in a queue since
    /// before the program was ready is stale anyway), so the defence does not depend on what
    /// other drivers do at set-up.
    ///
    /// A `net_pcap` port that replays a file (`rx_pcap=` in its device arguments, given to
    /// `--vdev` or `attach_vdev`) is left alone: its RX frames are the file, read on demand.
    /// Queues already handed out as `RxQueue`s are skipped (their owner polls them). Draining
    /// stops at the first empty burst, or after 65,536 frames per queue when a sender on the
    /// port's own link keeps it busy: by then whatever the ring held at the call is gone (rings
    /// hold far fewer).
    #[cold]
    pub fn discard_received(&mut self) -> Result<u64, DpdkError> {
        if !self.inner.started.load(Ordering::Acquire) {
            return Err(DpdkError::invalid(
                "Port::discard_received",
                format!("{:?} is not started", self.id()),
            ));
        }
        if self.inner.replays_file {
            return Ok(0);
        }
        const CAP: u64 = 65536;
        let mut total = 0u64;
        let mut batch = MbufBatch::<64>::default();
        for q in 0..self.nb_rx {
            if self.inner.rx_claimed[q as usize].load(Ordering::Acquire) {
                continue;
            }
            let mut n = 0u64;
            loop {
                let got = self.rx_burst(QueueId(q), &mut batch) as u64;
                batch.clear();
                n += got;
                if got == 0 || n >= CAP {
                    break;
                }
            }
            total += n;
        }
        Ok(total)
    }

    /// Starts every port, then frees what each already holds in its RX queues
    /// (`discard_received`), and returns the count per port. This is how a program that trusts
    /// a frame's ingress port brings its ports up: no port is polled before all of them are
    /// bound, started and drained. On error, the name of the port that failed.
    #[cold]
    pub fn start_all(ports: &mut [Port]) -> Result<Vec<u64>, (String, DpdkError)> {
        for p in ports.iter_mut() {
            p.start().map_err(|e| (p.name().to_string(), e))?;
        }
        ports
            .iter_mut()
            .map(|p| p.discard_received().map_err(|e| (p.name().to_string(), e)))
            .collect()
    }

    /// Whether this is a `net_pcap` port that replays a file (see `discard_received`).
    pub fn replays_file(&self) -> bool {
        self.inner.replays_file
    }

    /// Stops the port. Refused while queue handles are alive (they may be polling).
    #[cold]
    pub fn stop(&mut self) -> Result<(), DpdkError> {
        if self.handles_alive() {
            return Err(DpdkError::invalid(
                "Port::stop",
                "queue handles are alive: drop them first",
            ));
        }
        if !self.inner.started.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        // SAFETY: valid started port; no queue handle exists, so no burst call is in flight.
        check("rte_eth_dev_stop", unsafe {
            sys::rte_eth_dev_stop(self.id().0)
        })?;
        Ok(())
    }

    /// Stops (if started) and closes the port, releasing its queues; a vdev made by
    /// `attach_vdev` is removed. With queue handles alive it returns an error and the close
    /// happens when the last handle drops.
    #[cold]
    pub fn close(mut self) -> Result<(), DpdkError> {
        if self.handles_alive() {
            return Err(DpdkError::invalid(
                "Port::close",
                "queue handles are alive: the port closes when the last one drops",
            ));
        }
        let inner = Arc::get_mut(&mut self.inner)
            .ok_or_else(|| DpdkError::invalid("Port::close", "queue handles are alive"))?;
        inner.close_in_place()
    }

    /// The port's MAC address.
    pub fn mac_address(&self) -> Result<[u8; 6], DpdkError> {
        let mut a = sys::rte_ether_addr::default();
        // SAFETY: valid port; `a` is a valid out-pointer.
        check("rte_eth_macaddr_get", unsafe {
            sys::rte_eth_macaddr_get(self.id().0, &mut a)
        })?;
        Ok(a.addr_bytes)
    }

    /// Sets the link up (`rte_eth_dev_set_link_up`): for a TAP port, the kernel interface
    /// goes up, as `ip link set up` would.
    pub fn set_link_up(&mut self) -> Result<(), DpdkError> {
        // SAFETY: valid port.
        let ret = unsafe { sys::rte_eth_dev_set_link_up(self.id().0) };
        check("rte_eth_dev_set_link_up", ret)?;
        Ok(())
    }

    /// Turns promiscuous mode on or off.
    pub fn set_promiscuous(&mut self, on: bool) -> Result<(), DpdkError> {
        // SAFETY: valid port.
        let ret = unsafe {
            if on {
                sys::rte_eth_promiscuous_enable(self.id().0)
            } else {
                sys::rte_eth_promiscuous_disable(self.id().0)
            }
        };
        check(
            if on {
                "rte_eth_promiscuous_enable"
            } else {
                "rte_eth_promiscuous_disable"
            },
            ret,
        )?;
        Ok(())
    }

    /// Whether promiscuous mode is on.
    pub fn promiscuous(&self) -> Result<bool, DpdkError> {
        // SAFETY: valid port.
        let ret = check("rte_eth_promiscuous_get", unsafe {
            sys::rte_eth_promiscuous_get(self.id().0)
        })?;
        Ok(ret == 1)
    }

    /// Link state, without waiting for autonegotiation.
    pub fn link(&self) -> Result<LinkStatus, DpdkError> {
        let mut l = sys::rte_eth_link::default();
        // SAFETY: valid port; `l` is a valid out-pointer.
        check("rte_eth_link_get_nowait", unsafe {
            sys::rte_eth_link_get_nowait(self.id().0, &mut l)
        })?;
        Ok(LinkStatus {
            up: l.link_status() as u32 == sys::RTE_ETH_LINK_UP,
            speed_mbps: l.link_speed,
            full_duplex: l.link_duplex() as u32 == sys::RTE_ETH_LINK_FULL_DUPLEX,
            autoneg: l.link_autoneg() as u32 == sys::RTE_ETH_LINK_AUTONEG,
        })
    }

    /// Basic counters.
    pub fn stats(&self) -> Result<PortStats, DpdkError> {
        let mut s = sys::rte_eth_stats::default();
        // SAFETY: valid port; `s` is a valid out-pointer.
        check("rte_eth_stats_get", unsafe {
            sys::rte_eth_stats_get(self.id().0, &mut s)
        })?;
        Ok(PortStats {
            ipackets: s.ipackets,
            opackets: s.opackets,
            ibytes: s.ibytes,
            obytes: s.obytes,
            imissed: s.imissed,
            ierrors: s.ierrors,
            oerrors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
        })
    }

    /// Extended counters as (name, value), in the driver's order.
    pub fn xstats(&self) -> Result<Vec<(String, u64)>, DpdkError> {
        xstats_of(self.id())
    }

    /// Zeroes basic and extended counters.
    pub fn reset_stats(&mut self) -> Result<(), DpdkError> {
        // SAFETY: valid port.
        check("rte_eth_stats_reset", unsafe {
            sys::rte_eth_stats_reset(self.id().0)
        })?;
        // SAFETY: valid port.
        let ret = unsafe { sys::rte_eth_xstats_reset(self.id().0) };
        // Drivers without xstats of their own answer ENOTSUP after resetting the basic ones.
        if ret < 0 && ret != -95 {
            check("rte_eth_xstats_reset", ret)?;
        }
        Ok(())
    }

    /// Receives up to the batch's free slots from RX `queue`, appending; returns how many.
    ///
    /// # Panics
    /// If `queue` is not configured or is owned by an `RxQueue` handle.
    #[inline]
    pub fn rx_burst<const N: usize>(&mut self, queue: QueueId, batch: &mut MbufBatch<N>) -> usize {
        assert!(
            queue.0 < self.nb_rx,
            "{:?}: rx {queue:?} not configured",
            self.id()
        );
        assert!(
            !self.inner.rx_claimed[queue.0 as usize].load(Ordering::Acquire),
            "{:?}: rx {queue:?} is owned by an RxQueue",
            self.id()
        );
        // SAFETY: configured queue, polled only by this &mut Port (no handle owns it).
        unsafe { rx_burst_raw(self.id(), queue, batch, usize::MAX) }
    }

    /// Sends from the front of `batch` on TX `queue`; the mbufs the driver took leave the
    /// batch, the rest stay (in order) for the caller to retry or drop. Returns how many went.
    ///
    /// # Panics
    /// If `queue` is not configured or is owned by a `TxQueue` handle.
    #[inline]
    pub fn tx_burst<const N: usize>(&mut self, queue: QueueId, batch: &mut MbufBatch<N>) -> usize {
        assert!(
            queue.0 < self.nb_tx,
            "{:?}: tx {queue:?} not configured",
            self.id()
        );
        assert!(
            !self.inner.tx_claimed[queue.0 as usize].load(Ordering::Acquire),
            "{:?}: tx {queue:?} is owned by a TxQueue",
            self.id()
        );
        // SAFETY: configured queue, used only by this &mut Port (no handle owns it).
        unsafe { tx_burst_raw(self.id(), queue, batch) }
    }

    /// Hands RX `queue` to a handle that can move to another lcore. One handle per queue.
    pub fn rx_queue(&self, queue: QueueId) -> Result<RxQueue, DpdkError> {
        if queue.0 >= self.nb_rx {
            return Err(DpdkError::invalid(
                "Port::rx_queue",
                format!("{:?}: rx {queue:?} not configured", self.id()),
            ));
        }
        if self.inner.rx_claimed[queue.0 as usize].swap(true, Ordering::AcqRel) {
            return Err(DpdkError::invalid(
                "Port::rx_queue",
                format!("{:?}: rx {queue:?} already handed out", self.id()),
            ));
        }
        Ok(RxQueue {
            inner: self.inner.clone(),
            queue,
        })
    }

    /// Hands TX `queue` to a handle that can move to another lcore. One handle per queue.
    pub fn tx_queue(&self, queue: QueueId) -> Result<TxQueue, DpdkError> {
        if queue.0 >= self.nb_tx {
            return Err(DpdkError::invalid(
                "Port::tx_queue",
                format!("{:?}: tx {queue:?} not configured", self.id()),
            ));
        }
        if self.inner.tx_claimed[queue.0 as usize].swap(true, Ordering::AcqRel) {
            return Err(DpdkError::invalid(
                "Port::tx_queue",
                format!("{:?}: tx {queue:?} already handed out", self.id()),
            ));
        }
        Ok(TxQueue {
            inner: self.inner.clone(),
            queue,
        })
    }
}

/// # Safety
/// The queue must be configured and polled by no other thread during the call.
#[inline]
unsafe fn rx_burst_raw<const N: usize>(
    port: PortId,
    queue: QueueId,
    batch: &mut MbufBatch<N>,
    max: usize,
) -> usize {
    let (slots, free) = batch.free_slots();
    let free = free.min(max.min(u16::MAX as usize) as u16);
    if free == 0 {
        return 0;
    }
    // SAFETY: the caller guarantees exclusive use of a configured queue; `slots` has `free`
    // writable entries inside the batch.
    let n = unsafe { sys::rte_eth_rx_burst(port.0, queue.0, slots, free) } as usize;
    // SAFETY: the driver wrote n owned mbufs into the first n free slots.
    unsafe { batch.commit_filled(n) };
    n
}

/// # Safety
/// The queue must be configured and used by no other thread during the call.
#[inline]
unsafe fn tx_burst_raw<const N: usize>(
    port: PortId,
    queue: QueueId,
    batch: &mut MbufBatch<N>,
) -> usize {
    let (held, count) = batch.held();
    if count == 0 {
        return 0;
    }
    // SAFETY: the caller guarantees exclusive use of a configured queue; `held` has `count`
    // owned mbufs.
    let n = unsafe { sys::rte_eth_tx_burst(port.0, queue.0, held, count) } as usize;
    // The driver owns the first n now; the rest are still ours.
    batch.consume_front(n);
    n
}

/// Whether the port's device arguments (`--vdev` or `attach_vdev`) name an RX pcap file.
fn devargs_replay_file(id: PortId) -> bool {
    // SAFETY: EAL is initialised and the port valid (checked by the caller); the returned string
    // belongs to the device, which outlives this call.
    let args = unsafe { sys::dpdk_sys_port_devargs(id.0) };
    if args.is_null() {
        return false;
    }
    // SAFETY: non-NULL: a NUL-terminated string owned by DPDK (see above).
    let args = unsafe { CStr::from_ptr(args) }.to_string_lossy();
    args.split(',')
        .any(|kv| kv.trim_start().starts_with("rx_pcap="))
}

/// The exclusive right to poll one RX queue, movable to another lcore.
pub struct RxQueue {
    inner: Arc<PortInner>,
    queue: QueueId,
}

impl std::fmt::Debug for RxQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RxQueue({:?}, {:?})", self.inner.id, self.queue)
    }
}

impl RxQueue {
    /// The port.
    pub fn port(&self) -> PortId {
        self.inner.id
    }

    /// The queue.
    pub fn queue(&self) -> QueueId {
        self.queue
    }

    /// As `Port::rx_burst`.
    #[inline]
    pub fn rx_burst<const N: usize>(&mut self, batch: &mut MbufBatch<N>) -> usize {
        self.rx_burst_max(batch, usize::MAX)
    }

    /// As `rx_burst`, receiving at most `max` frames.
    #[inline]
    pub fn rx_burst_max<const N: usize>(&mut self, batch: &mut MbufBatch<N>, max: usize) -> usize {
        // SAFETY: this handle is the queue's only user (claimed in Port::rx_queue); the port
        // cannot be stopped or reconfigured while the handle lives.
        unsafe { rx_burst_raw(self.inner.id, self.queue, batch, max) }
    }
}

impl Drop for RxQueue {
    fn drop(&mut self) {
        self.inner.rx_claimed[self.queue.0 as usize].store(false, Ordering::Release);
    }
}

/// The exclusive right to send on one TX queue, movable to another lcore.
pub struct TxQueue {
    inner: Arc<PortInner>,
    queue: QueueId,
}

impl std::fmt::Debug for TxQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TxQueue({:?}, {:?})", self.inner.id, self.queue)
    }
}

impl TxQueue {
    /// The port.
    pub fn port(&self) -> PortId {
        self.inner.id
    }

    /// The queue.
    pub fn queue(&self) -> QueueId {
        self.queue
    }

    /// As `Port::tx_burst`.
    #[inline]
    pub fn tx_burst<const N: usize>(&mut self, batch: &mut MbufBatch<N>) -> usize {
        // SAFETY: this handle is the queue's only user (claimed in Port::tx_queue).
        unsafe { tx_burst_raw(self.inner.id, self.queue, batch) }
    }
}

impl Drop for TxQueue {
    fn drop(&mut self) {
        self.inner.tx_claimed[self.queue.0 as usize].store(false, Ordering::Release);
    }
}

impl PortInner {
    /// Stops and closes once; afterwards the id reads u16::MAX and Drop does nothing.
    fn close_in_place(&mut self) -> Result<(), DpdkError> {
        if self.id.0 == u16::MAX {
            return Ok(());
        }
        let id = self.id.0;
        let mut result = Ok(());
        if self.started.swap(false, Ordering::AcqRel) {
            // SAFETY: valid started port; this is the last reference, so no burst is in flight.
            result = check("rte_eth_dev_stop", unsafe { sys::rte_eth_dev_stop(id) }).map(|_| ());
        }
        // SAFETY: valid port with no other user; it is not touched after closing.
        let closed = check("rte_eth_dev_close", unsafe { sys::rte_eth_dev_close(id) }).map(|_| ());
        result = result.and(closed);
        if let Some(vdev) = &self.vdev {
            // SAFETY: we created this vdev in attach_vdev; its port is closed.
            unsafe { sys::rte_vdev_uninit(vdev.as_ptr()) };
        }
        PORT_OWNED[id as usize].store(false, Ordering::Release);
        self.id = PortId(u16::MAX);
        result
    }
}

impl Drop for PortInner {
    fn drop(&mut self) {
        if let Err(e) = self.close_in_place() {
            tracing::warn!("dpdk: closing port {}: {e}", self.name);
        }
        // `pools` drop after this: the RX rings' mbufs went back to them on close.
    }
}

/// Rings created by `Port::ring_pair`, freed when both ports are gone.
struct RingSet {
    rings: Vec<NonNull<sys::rte_ring>>,
    _eal: Eal,
}

// SAFETY: rte_ring is a thread-safe structure; the set only frees the rings at the end, when no
// port uses them.
unsafe impl Send for RingSet {}
// SAFETY: as above; nothing reads through a shared RingSet.
unsafe impl Sync for RingSet {}

impl Drop for RingSet {
    fn drop(&mut self) {
        for r in &self.rings {
            let mut buf = [std::ptr::null_mut::<std::os::raw::c_void>(); 64];
            loop {
                // SAFETY: the ring is valid and unused (both ports closed); dequeued entries are
                // mbufs a TX queue enqueued and nobody received, so we own them.
                let n = unsafe {
                    sys::rte_ring_dequeue_burst(
                        r.as_ptr(),
                        buf.as_mut_ptr(),
                        buf.len() as u32,
                        std::ptr::null_mut(),
                    )
                };
                if n == 0 {
                    break;
                }
                for p in &buf[..n as usize] {
                    // SAFETY: each entry is an owned mbuf (see above).
                    unsafe { sys::rte_pktmbuf_free(*p as *mut sys::rte_mbuf) };
                }
            }
            // SAFETY: the ring is empty and no port refers to it any more.
            unsafe { sys::rte_ring_free(r.as_ptr()) };
        }
    }
}

/// Why a virtual device could not be created, as far as this process can tell: for a spec with
/// `iface=NAME` (net_af_packet, net_pcap's live interfaces, ...), whether that interface exists
/// in this network namespace, with the OS error (`No such device`) that the driver met and left
/// in DPDK's log, and whether this process may open it at all (`CAP_NET_RAW`); for a device
/// whose name starts with no driver DPDK ships, that the name is likely misspelt (DPDK logs
/// nothing for a driver it does not have). Empty when nothing is known.
fn vdev_cause(spec: &str) -> String {
    let name = spec.split(',').next().unwrap_or(spec);
    let Some(iface) = spec
        .split(',')
        .skip(1)
        .find_map(|kv| kv.strip_prefix("iface="))
    else {
        return match known_vdev_driver(name) {
            Some(_) => " (the driver's reason, if it gave one, is in DPDK's log above)".into(),
            None => format!(
                ": no DPDK driver is called like {name:?} (misspelt? a virtual device is a \
                 driver's name and a number: net_ring0, net_pcap0, net_af_packet0, net_tap0, \
                 net_null0, ...)"
            ),
        };
    };
    let Ok(c) = CString::new(iface) else {
        return String::new();
    };
    // SAFETY: c is a valid NUL-terminated string; if_nametoindex only reads it.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        let err = std::io::Error::last_os_error();
        format!(": interface {iface:?}: {err}")
    } else if !has_net_raw() {
        format!(
            ": no permission: interface {iface:?} exists (index {index}) but this process \
             lacks CAP_NET_RAW (it is not root), which opening it needs; run as root, or grant \
             the program CAP_NET_RAW (and DPDK's other needs: docs/operations.md)"
        )
    } else {
        format!(
            " (interface {iface:?} exists, index {index}; the driver's reason is in DPDK's log above)"
        )
    }
}

/// The DPDK virtual-device driver whose name `device` starts with (DPDK matches a device to the
/// driver whose name or alias is a prefix of the device's name), among the ones DPDK 22.11
/// ships; `None` when there is none, e.g. `net_rnig1`.
fn known_vdev_driver(device: &str) -> Option<&'static str> {
    const DRIVERS: &[&str] = &[
        "net_af_packet",
        "net_af_xdp",
        "net_bonding",
        "net_failsafe",
        "net_kni",
        "net_memif",
        "net_null",
        "net_pcap",
        "net_ring",
        "net_tap",
        "net_tun",
        "net_vdev_netvsc",
        "net_vhost",
        "net_virtio_user",
        "eth_af_packet",
        "eth_bond",
        "eth_null",
        "eth_pcap",
        "eth_ring",
        "eth_vhost",
        "virtio_user",
        "baseband_",
        "crypto_",
        "dma_",
        "event_",
        "raw_",
        "compress_",
        "regex_",
        "gpu_",
    ];
    DRIVERS.iter().copied().find(|d| device.starts_with(d))
}

/// Whether this process has `CAP_NET_RAW` in its effective set (packet sockets need it):
/// read from `/proc/self/status`; assumed yes when that cannot be read.
fn has_net_raw() -> bool {
    const CAP_NET_RAW: u32 = 13;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return true;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_none_or(|caps| caps & (1 << CAP_NET_RAW) != 0)
}

/// Extended counters of port `id` as (name, value) under the driver's names, read without owning
/// the port: for readers off the lcores (a telemetry callback) while the owner polls it. DPDK
/// checks the id: a port that is not (or no longer) attached gives an error (`ENODEV`). The
/// values of one call are what the driver reports, not one atomic snapshot across counters.
pub fn xstats_of(port: PortId) -> Result<Vec<(String, u64)>, DpdkError> {
    let id = port.0;
    // The count can change between calls (queues reconfigured): retry until stable.
    for _ in 0..4 {
        // SAFETY: DPDK validates the port id (-ENODEV otherwise); NULL/0 asks for the count.
        let n = check("rte_eth_xstats_get_names", unsafe {
            sys::rte_eth_xstats_get_names(id, std::ptr::null_mut(), 0)
        })? as usize;
        let mut names = vec![sys::rte_eth_xstat_name::default(); n];
        let mut values = vec![sys::rte_eth_xstat::default(); n];
        // SAFETY: names has n elements.
        let got_names = check("rte_eth_xstats_get_names", unsafe {
            sys::rte_eth_xstats_get_names(id, names.as_mut_ptr(), n as u32)
        })? as usize;
        // SAFETY: values has n elements.
        let got_values = check("rte_eth_xstats_get", unsafe {
            sys::rte_eth_xstats_get(id, values.as_mut_ptr(), n as u32)
        })? as usize;
        if got_names > n || got_values > n || got_names != got_values {
            continue;
        }
        return Ok(values[..got_values]
            .iter()
            .map(|v| {
                let name = names
                    .get(v.id as usize)
                    // SAFETY: DPDK NUL-terminates names within RTE_ETH_XSTATS_NAME_SIZE.
                    .map(|nm| {
                        unsafe { CStr::from_ptr(nm.name.as_ptr()) }
                            .to_string_lossy()
                            .into_owned()
                    })
                    .unwrap_or_else(|| format!("xstat{}", v.id));
                (name, v.value)
            })
            .collect());
    }
    Err(DpdkError::invalid(
        "xstats_of",
        "xstats count kept changing",
    ))
}

#[cfg(test)]
mod vdev_cause_tests {
    use super::{known_vdev_driver, vdev_cause};

    #[test]
    fn a_misspelt_driver_is_called_misspelt() {
        assert_eq!(known_vdev_driver("net_ring1"), Some("net_ring"));
        assert_eq!(known_vdev_driver("eth_pcap0"), Some("eth_pcap"));
        assert_eq!(known_vdev_driver("net_rnig1"), None);
        let c = vdev_cause("net_rnig1");
        assert!(
            c.contains("no DPDK driver is called like \"net_rnig1\""),
            "{c}"
        );
        assert!(!c.contains("log above"), "{c}");
        let c = vdev_cause("net_ring1");
        assert!(c.contains("log above"), "{c}");
    }
}
