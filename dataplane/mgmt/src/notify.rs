//! systemd's readiness protocol (`sd_notify`, `Type=notify`): a datagram such as `READY=1` sent
//! to the Unix socket `$NOTIFY_SOCKET` names. Without the variable (not under systemd) nothing
//! is sent. The socket is a path, or an abstract name written with a leading `@`.
//! `scripts/systemd/barrier-switch@.service` is the unit that waits for it.

use std::os::unix::net::UnixDatagram;

/// Sends `state` (`READY=1`, `STOPPING=1`, `STATUS=...`; several separated by newlines) to
/// `$NOTIFY_SOCKET`. `Ok(false)` when the variable is not set or empty.
pub fn notify(state: &str) -> std::io::Result<bool> {
    match std::env::var_os("NOTIFY_SOCKET") {
        Some(path) if !path.is_empty() => {
            send_to(&path.to_string_lossy(), state)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Sends `state` to the socket `path` (a filesystem path, or `@name` for an abstract one).
pub fn send_to(path: &str, state: &str) -> std::io::Result<()> {
    let sock = UnixDatagram::unbound()?;
    if let Some(name) = path.strip_prefix('@') {
        #[cfg(target_os = "linux")]
        {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
            sock.send_to_addr(state.as_bytes(), &addr)?;
            return Ok(());
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = name;
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "abstract socket names exist on Linux only",
            ));
        }
    }
    sock.send_to(state.as_bytes(), path)?;
    Ok(())
}

/// `notify`, with a failure logged rather than returned: readiness is a courtesy to the service
/// manager, never a reason to stop the switch.
pub fn notify_logged(state: &str) {
    if let Err(e) = notify(state) {
        tracing::warn!("sd_notify {state:?} to $NOTIFY_SOCKET: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::send_to;
    use std::os::unix::net::UnixDatagram;

    #[test]
    fn a_path_socket_gets_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let rx = UnixDatagram::bind(&path).unwrap();
        send_to(path.to_str().unwrap(), "READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_abstract_socket_is_written_with_an_at() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("nb-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        send_to(&format!("@{name}"), "READY=1\nSTATUS=x").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=x");
    }

    #[test]
    fn no_listener_is_an_error() {
        assert!(send_to("/nonexistent/nb-notify", "READY=1").is_err());
    }
}
