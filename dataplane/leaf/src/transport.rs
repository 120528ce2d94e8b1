//! How a leaf's frames reach its parent switch: a small [`Transport`] trait (send one frame,
//! receive one frame with a timeout) with two implementations here, an AF_PACKET raw socket on
//! any Linux interface ([`rawsock::RawSocket`]) and an in-memory [`loopback`] star for tests.
//! The DPDK port transport (`DpdkPort`, feature `dpdk`) lives in `dpdk_transport.rs`.

use barrier_protocol::wire::MacAddr;
use rawsock::RawSocket;
use std::io;
use std::time::Duration;

/// A link to the parent switch that carries whole Ethernet frames (no FCS).
pub trait Transport {
    /// Sends one frame.
    fn send(&mut self, frame: &[u8]) -> io::Result<()>;
    /// Receives one frame into `buf`, waiting at most `timeout` (`Duration::ZERO`: only what
    /// is already there). `Ok(None)` when nothing came in time. A longer frame is truncated.
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>>;
    /// The source MAC address this leaf's frames carry.
    fn mac(&self) -> MacAddr;
}

/// Opens an AF_PACKET socket on `ifname` bound to the barrier EtherType (needs CAP_NET_RAW).
pub fn af_packet(ifname: &str) -> Result<RawSocket, crate::Error> {
    RawSocket::open(ifname, barrier_protocol::wire::ETHERTYPE).map_err(|source| {
        crate::Error::Open {
            ifname: ifname.to_owned(),
            source,
        }
    })
}

impl Transport for RawSocket {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        RawSocket::send(self, frame)
    }
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        RawSocket::recv(self, buf, Some(timeout))
    }
    fn mac(&self) -> MacAddr {
        MacAddr(RawSocket::mac(self))
    }
}

impl<T: Transport + ?Sized> Transport for Box<T> {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        (**self).send(frame)
    }
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        (**self).recv(buf, timeout)
    }
    fn mac(&self) -> MacAddr {
        (**self).mac()
    }
}

/// An in-memory star for tests: `n` leaf ports, each a [`Transport`], all wired to one
/// [`loopback::Hub`] that plays the switch's side (it sees which port a frame came from, as a
/// switch does). Frames travel through channels, so leaves and the hub may run on different
/// threads. A per-port filter drops chosen outgoing frames to model loss.
pub mod loopback {
    use super::Transport;
    use barrier_protocol::wire::MacAddr;
    use std::io;
    use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
    use std::time::Duration;

    /// Decides per outgoing frame whether it is delivered (`true`) or lost (`false`).
    pub type Filter = Box<dyn FnMut(&[u8]) -> bool + Send>;

    /// One leaf's end of the star.
    pub struct Port {
        index: u8,
        mac: MacAddr,
        to_hub: Sender<(u8, Vec<u8>)>,
        from_hub: Receiver<Vec<u8>>,
        filter: Option<Filter>,
    }

    /// The switch's end of the star.
    pub struct Hub {
        from_ports: Receiver<(u8, Vec<u8>)>,
        to_ports: Vec<Sender<Vec<u8>>>,
    }

    /// Builds a star of `n` ports (n ≤ 64). Port `i` has MAC 02:00:00:00:00:<i+1>.
    pub fn star(n: usize) -> (Vec<Port>, Hub) {
        assert!(
            n <= barrier_protocol::MAX_PORTS,
            "at most {} ports",
            barrier_protocol::MAX_PORTS
        );
        let (to_hub, from_ports) = channel();
        let mut ports = Vec::with_capacity(n);
        let mut to_ports = Vec::with_capacity(n);
        for i in 0..n {
            let (tx, rx) = channel();
            to_ports.push(tx);
            ports.push(Port {
                index: i as u8,
                mac: MacAddr([0x02, 0, 0, 0, 0, i as u8 + 1]),
                to_hub: to_hub.clone(),
                from_hub: rx,
                filter: None,
            });
        }
        (
            ports,
            Hub {
                from_ports,
                to_ports,
            },
        )
    }

    impl Port {
        /// Index of this port at the hub.
        pub fn index(&self) -> u8 {
            self.index
        }
        /// Installs a loss model on frames this port sends.
        pub fn set_filter(&mut self, filter: Filter) {
            self.filter = Some(filter);
        }
    }

    impl Transport for Port {
        fn send(&mut self, frame: &[u8]) -> io::Result<()> {
            if let Some(f) = self.filter.as_mut() {
                if !f(frame) {
                    return Ok(());
                }
            }
            self.to_hub
                .send((self.index, frame.to_vec()))
                .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "loopback hub is gone"))
        }

        fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
            let got = if timeout.is_zero() {
                match self.from_hub.try_recv() {
                    Ok(f) => Some(f),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => return Err(gone()),
                }
            } else {
                match self.from_hub.recv_timeout(timeout) {
                    Ok(f) => Some(f),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return Err(gone()),
                }
            };
            Ok(got.map(|f| {
                let n = f.len().min(buf.len());
                buf[..n].copy_from_slice(&f[..n]);
                n
            }))
        }

        fn mac(&self) -> MacAddr {
            self.mac
        }
    }

    fn gone() -> io::Error {
        io::Error::new(io::ErrorKind::BrokenPipe, "loopback hub is gone")
    }

    impl Hub {
        /// Number of ports.
        pub fn ports(&self) -> usize {
            self.to_ports.len()
        }
        /// The next frame from any port, with the port it came from; `None` after `timeout`
        /// or when every port is gone.
        pub fn recv(&self, timeout: Duration) -> Option<(u8, Vec<u8>)> {
            self.from_ports.recv_timeout(timeout).ok()
        }
        /// Delivers `frame` to port `port`; false if that port is gone.
        pub fn send(&self, port: u8, frame: &[u8]) -> bool {
            self.to_ports
                .get(port as usize)
                .is_some_and(|tx| tx.send(frame.to_vec()).is_ok())
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn frames_travel_both_ways_and_carry_their_port() {
            let (mut ports, hub) = star(3);
            ports[2].send(b"up").unwrap();
            assert_eq!(hub.recv(Duration::from_secs(1)), Some((2, b"up".to_vec())));
            assert!(hub.send(1, b"down"));
            let mut buf = [0u8; 16];
            assert_eq!(ports[0].recv(&mut buf, Duration::ZERO).unwrap(), None);
            assert_eq!(
                ports[1].recv(&mut buf, Duration::from_secs(1)).unwrap(),
                Some(4)
            );
            assert_eq!(&buf[..4], b"down");
            assert_ne!(ports[0].mac(), ports[1].mac());
        }

        #[test]
        fn filter_drops_frames_and_a_gone_hub_is_an_error() {
            let (mut ports, hub) = star(1);
            let mut n = 0;
            ports[0].set_filter(Box::new(move |_| {
                n += 1;
                n > 1
            }));
            ports[0].send(b"lost").unwrap();
            ports[0].send(b"kept").unwrap();
            assert_eq!(
                hub.recv(Duration::from_secs(1)),
                Some((0, b"kept".to_vec()))
            );
            assert_eq!(hub.recv(Duration::ZERO), None);
            drop(hub);
            let mut buf = [0u8; 4];
            assert!(ports[0].recv(&mut buf, Duration::ZERO).is_err());
            assert!(ports[0].send(b"x").is_err());
        }
    }
}
