//! Safe AF_PACKET raw sockets for one EtherType on one Linux interface, plus the monotonic clock
//! and network-namespace entry a barrier leaf needs. This is the only place the leaf stack
//! touches libc: every `unsafe` block carries a `// SAFETY:` comment, the API above it is safe.
//!
//! A socket is created with protocol 0 (it receives nothing) and only then bound to the
//! interface and EtherType, so no frame of another interface slips in between `socket` and
//! `bind`. Frames the socket itself (or anyone on this host) sends out of the interface are
//! looped back to packet sockets by the kernel; `recv` drops them (`PACKET_IGNORE_OUTGOING`
//! where the kernel has it, and a `sll_pkttype` check always).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::mem;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// `PACKET_OUTGOING` from `<linux/if_packet.h>`: the frame was sent by this host.
const PACKET_OUTGOING: u8 = 4;
/// `PACKET_IGNORE_OUTGOING` socket option (Linux 4.20+).
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// An AF_PACKET `SOCK_RAW` socket bound to one interface and one EtherType. Frames sent and
/// received are whole Ethernet frames without FCS.
#[derive(Debug)]
pub struct RawSocket {
    fd: OwnedFd,
    ifindex: i32,
    ifname: String,
    mac: [u8; 6],
    ethertype: u16,
}

impl RawSocket {
    /// Opens a socket on interface `ifname` (in the caller's network namespace) that receives
    /// only frames of `ethertype`. Needs CAP_NET_RAW.
    pub fn open(ifname: &str, ethertype: u16) -> io::Result<RawSocket> {
        let name = ifname_c(ifname)?;
        // SAFETY: plain syscall with constant arguments; the result is checked before use.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let ifindex = ioctl_ifindex(fd.as_fd(), &name)?;
        let mac = ioctl_hwaddr(fd.as_fd(), &name)?;

        // Best effort: older kernels lack the option; recv filters by packet type anyway.
        let one: libc::c_int = 1;
        // SAFETY: `one` outlives the call and its size is passed; the fd is valid.
        let _ = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                PACKET_IGNORE_OUTGOING,
                (&one as *const libc::c_int).cast(),
                mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };

        let addr = sockaddr_ll(ifindex, ethertype);
        // SAFETY: `addr` is a fully initialised sockaddr_ll and its exact size is passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RawSocket {
            fd,
            ifindex,
            ifname: ifname.to_owned(),
            mac,
            ethertype,
        })
    }

    /// Opens the socket inside the named network namespace (`/run/netns/<netns>`, as made by
    /// `ip netns add`) without moving the calling thread: a helper thread enters the namespace,
    /// opens the socket and ends. The socket stays bound to that namespace's interface.
    pub fn open_in_netns(netns: &str, ifname: &str, ethertype: u16) -> io::Result<RawSocket> {
        let path = format!("/run/netns/{netns}");
        let ns = File::open(&path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
        let ifname = ifname.to_owned();
        std::thread::spawn(move || -> io::Result<RawSocket> {
            // SAFETY: `ns` is an open namespace file; setns changes only this short-lived
            // thread's network namespace, which no other code observes.
            let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            RawSocket::open(&ifname, ethertype)
        })
        .join()
        .map_err(|_| io::Error::other("netns helper thread panicked"))?
    }

    /// Sends one whole Ethernet frame (destination MAC first, no FCS).
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        let addr = sockaddr_ll(self.ifindex, self.ethertype);
        loop {
            // SAFETY: `frame` is a valid readable slice of the given length; `addr` is a
            // fully initialised sockaddr_ll of the given size.
            let n = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    frame.as_ptr().cast(),
                    frame.len(),
                    0,
                    (&addr as *const libc::sockaddr_ll).cast(),
                    mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                )
            };
            if n >= 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                // The socket is non-blocking; a full TX queue is rare: wait until writable.
                io::ErrorKind::WouldBlock => {
                    wait_fd(
                        self.fd.as_fd(),
                        libc::POLLOUT,
                        Some(Duration::from_millis(100)),
                    )?;
                }
                _ => return Err(err),
            }
        }
    }

    /// Receives one frame of this socket's EtherType into `buf`, waiting at most `timeout`
    /// (`None`: wait forever; `Some(ZERO)`: do not wait). Returns the frame length (a frame
    /// longer than `buf` is truncated to it), or `None` when the time ran out or a signal
    /// handler ran meanwhile (so callers see flags their handlers set). Frames sent by this
    /// host are skipped.
    pub fn recv(&self, buf: &mut [u8], timeout: Option<Duration>) -> io::Result<Option<usize>> {
        let deadline = timeout.map(|t| monotonic_now() + t);
        loop {
            // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
            let mut from: libc::sockaddr_ll = unsafe { mem::zeroed() };
            let mut fromlen = mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: `buf` is a valid writable slice of the given length; `from`/`fromlen`
            // describe a writable sockaddr_ll the kernel fills.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut fromlen,
                )
            };
            if n >= 0 {
                if from.sll_pkttype == PACKET_OUTGOING {
                    continue;
                }
                return Ok(Some(n as usize));
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {}
                _ => return Err(err),
            }
            let left = match deadline {
                None => None,
                Some(d) => {
                    let now = monotonic_now();
                    if now >= d {
                        return Ok(None);
                    }
                    Some(d - now)
                }
            };
            if !wait_fd(self.fd.as_fd(), libc::POLLIN, left)? {
                // A signal: return early so the caller can look at what its handler set.
                return Ok(None);
            }
        }
    }

    /// Sets `SO_BUSY_POLL` on the socket: a blocking receive (and `poll`) busy-polls the
    /// device's receive queue in the kernel for up to `usecs` µs before sleeping, on devices
    /// whose driver supports it (NAPI; frames must carry a NAPI id). 0 turns it off. Raising it
    /// above `net.core.busy_read` needs CAP_NET_ADMIN.
    pub fn set_busy_poll(&self, usecs: u32) -> io::Result<()> {
        let v: libc::c_int = usecs.min(i32::MAX as u32) as libc::c_int;
        // SAFETY: `v` outlives the call and its size is passed; the fd is valid.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_BUSY_POLL,
                (&v as *const libc::c_int).cast(),
                mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The socket's `SO_BUSY_POLL` value, µs.
    pub fn busy_poll(&self) -> io::Result<u32> {
        let mut v: libc::c_int = 0;
        let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `v` and `len` are writable and outlive the call; `len` holds v's size.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_BUSY_POLL,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(v.max(0) as u32)
    }

    /// The interface's hardware (MAC) address, read when the socket was opened.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The interface's index in its network namespace.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// The interface name the socket was opened on.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The EtherType the socket is bound to.
    pub fn ethertype(&self) -> u16 {
        self.ethertype
    }
}

impl AsFd for RawSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// CLOCK_MONOTONIC now, as a duration since the clock's (boot-time) epoch. Unlike
/// `std::time::Instant` the value itself is exposed, so records written by different processes
/// on one host compare directly.
pub fn monotonic_now() -> Duration {
    // SAFETY: timespec is plain data; all-zero is a valid value.
    let mut ts: libc::timespec = unsafe { mem::zeroed() };
    // SAFETY: `ts` is a valid writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// True when the process runs with effective user id 0 (raw sockets, namespaces).
pub fn effective_uid_is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Waits until `fd` has one of `events`, or `timeout` passed (`None`: forever). Nanosecond
/// resolution (ppoll), because leaf re-send timers are tens of microseconds. Returns false when
/// a signal handler interrupted the wait (ppoll is never restarted after one).
fn wait_fd(
    fd: BorrowedFd<'_>,
    events: libc::c_short,
    timeout: Option<Duration>,
) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `pfd` is one valid pollfd; `tsp` is null or points at `ts`, alive for the call;
    // a null signal mask leaves the mask unchanged.
    let rc = unsafe { libc::ppoll(&mut pfd, 1, tsp, std::ptr::null()) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
        return Ok(false);
    }
    Ok(true)
}

fn ifname_c(ifname: &str) -> io::Result<CString> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "interface name {ifname:?} must be 1..{} bytes",
                libc::IFNAMSIZ - 1
            ),
        ));
    }
    CString::new(ifname)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name contains NUL"))
}

fn ifreq_for(name: &CString) -> libc::ifreq {
    // SAFETY: ifreq is plain data (a name and a union of plain fields); all-zero is valid.
    let mut req: libc::ifreq = unsafe { mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = *src as libc::c_char;
    }
    req
}

fn ioctl_ifindex(fd: BorrowedFd<'_>, name: &CString) -> io::Result<i32> {
    let mut req = ifreq_for(name);
    // SAFETY: SIOCGIFINDEX reads ifr_name (NUL-terminated: the name is shorter than IFNAMSIZ
    // and the rest is zero) and writes ifr_ifindex inside `req`, which is valid and writable.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFINDEX as _, &mut req) };
    if rc < 0 {
        // The bare OS error (ENODEV for a missing interface): callers map the errno and add
        // the interface name themselves.
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled the ifindex member of the union on success.
    Ok(unsafe { req.ifr_ifru.ifru_ifindex })
}

fn ioctl_hwaddr(fd: BorrowedFd<'_>, name: &CString) -> io::Result<[u8; 6]> {
    let mut req = ifreq_for(name);
    // SAFETY: as in ioctl_ifindex; SIOCGIFHWADDR writes ifr_hwaddr inside `req`.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR as _, &mut req) };
    if rc < 0 {
        // The bare OS error (ENODEV for a missing interface): callers map the errno and add
        // the interface name themselves.
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled the hwaddr member of the union on success.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (dst, src) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *dst = *src as u8;
    }
    Ok(mac)
}

fn sockaddr_ll(ifindex: i32, ethertype: u16) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_ll = unsafe { mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as libc::c_ushort;
    addr.sll_protocol = ethertype.to_be();
    addr.sll_ifindex = ifindex;
    addr
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_moves_forward() {
        let a = monotonic_now();
        std::thread::sleep(Duration::from_millis(2));
        let b = monotonic_now();
        assert!(b > a, "{b:?} <= {a:?}");
        assert!(b - a >= Duration::from_millis(2));
    }

    #[test]
    fn bad_interface_names_are_rejected_before_any_syscall() {
        let e = RawSocket::open("", 0x88B5).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = RawSocket::open("a-name-much-too-long", 0x88B5).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = RawSocket::open("a\0b", 0x88B5).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn missing_interface_is_enodev() {
        match RawSocket::open("nbnosuchif0", 0x88B5) {
            // Without CAP_NET_RAW the socket call itself fails first.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {}
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{e}"),
            Ok(_) => panic!("opened a socket on an interface that does not exist"),
        }
    }

    #[test]
    fn missing_netns_is_an_error_naming_it() {
        let e = RawSocket::open_in_netns("nb-no-such-netns", "lo", 0x88B5).unwrap_err();
        assert!(e.to_string().contains("nb-no-such-netns"), "{e}");
    }
}
