//! A Rust closure registered as a telemetry command answers over DPDK's telemetry socket, the
//! way `dpdk-telemetry.py` would ask it.

use std::os::raw::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dpdk::telemetry::register_dict;
use dpdk::{Eal, TelemetryValue};

/// One request/reply on the SOCK_SEQPACKET telemetry socket (std has no seqpacket sockets).
struct Client(i32);

impl Client {
    fn connect(path: &str) -> Client {
        // SAFETY: plain socket syscalls on a fresh descriptor and a zeroed sockaddr_un whose
        // path fits (checked).
        unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0);
            assert!(fd >= 0, "socket");
            let mut addr: libc::sockaddr_un = std::mem::zeroed();
            addr.sun_family = libc::AF_UNIX as u16;
            assert!(path.len() < addr.sun_path.len());
            for (d, s) in addr.sun_path.iter_mut().zip(path.bytes()) {
                *d = s as libc::c_char;
            }
            let len = std::mem::size_of::<libc::sockaddr_un>() as u32;
            let r = libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len);
            assert_eq!(r, 0, "connect {path}: {}", std::io::Error::last_os_error());
            // A reply that never comes fails the test instead of hanging it.
            let tv = libc::timeval {
                tv_sec: 10,
                tv_usec: 0,
            };
            let tvp = &tv as *const libc::timeval as *const c_void;
            let tvl = std::mem::size_of::<libc::timeval>() as u32;
            assert_eq!(
                libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, tvp, tvl),
                0
            );
            Client(fd)
        }
    }

    fn recv(&self) -> String {
        let mut buf = vec![0u8; 64 * 1024];
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::recv(self.0, buf.as_mut_ptr() as *mut c_void, buf.len(), 0) };
        assert!(n > 0, "recv: {}", std::io::Error::last_os_error());
        String::from_utf8(buf[..n as usize].to_vec()).unwrap()
    }

    fn ask(&self, request: &str) -> String {
        // SAFETY: the request bytes are readable for their length.
        let n = unsafe { libc::send(self.0, request.as_ptr() as *const c_void, request.len(), 0) };
        assert_eq!(n, request.len() as isize);
        self.recv()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // SAFETY: closing our own descriptor once.
        unsafe { libc::close(self.0) };
    }
}

#[test]
fn telemetry_command_answers_over_the_socket() {
    let args: Vec<String> = dpdk::test_args("telemetry", &[])
        .into_iter()
        .filter(|a| a != "--no-telemetry")
        .collect();
    let prefix = args[args.iter().position(|a| a == "--file-prefix").unwrap() + 1].clone();
    let (eal, _) = Eal::init(args).unwrap();

    let calls = Arc::new(AtomicU64::new(0));
    let c = calls.clone();
    register_dict(&eal, "/barrier/test", "Test dictionary", move |params| {
        let n = c.fetch_add(1, Ordering::SeqCst) + 1;
        vec![
            ("calls".to_string(), TelemetryValue::U64(n)),
            (
                "params".to_string(),
                TelemetryValue::Str(params.unwrap_or("none").to_string()),
            ),
        ]
    })
    .unwrap();
    let dup = register_dict(&eal, "/barrier/test", "again", |_| vec![]).unwrap_err();
    assert!(dup.to_string().contains("already registered"), "{dup}");
    assert!(register_dict(&eal, "no_slash", "", |_| vec![]).is_err());
    assert!(register_dict(&eal, "/bad-char", "", |_| vec![]).is_err());
    register_dict(&eal, "/barrier/panics", "Always panics", |_| {
        panic!("handler bug")
    })
    .unwrap();

    let path = format!("/var/run/dpdk/{prefix}/dpdk_telemetry.v2");
    let client = Client::connect(&path);
    let hello = client.recv();
    assert!(hello.contains("\"pid\""), "{hello}");

    let reply = client.ask("/barrier/test,abc");
    assert_eq!(reply, r#"{"/barrier/test":{"calls":1,"params":"abc"}}"#);
    let reply = client.ask("/barrier/test");
    assert_eq!(reply, r#"{"/barrier/test":{"calls":2,"params":"none"}}"#);
    let list = client.ask("/");
    assert!(
        list.contains("/barrier/test") && list.contains("/barrier/panics"),
        "{list}"
    );
    let help = client.ask("/help,/barrier/test");
    assert!(help.contains("Test dictionary"), "{help}");

    // A panicking handler is answered with null, and the process and socket carry on.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let reply = client.ask("/barrier/panics");
    std::panic::set_hook(hook);
    assert_eq!(reply, r#"{"/barrier/panics":null}"#);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(client.ask("/barrier/test").contains("\"calls\":3"));

    drop(client);
    drop(eal);
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
}
