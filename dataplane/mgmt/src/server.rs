//! [`ControlServer`]: the control socket itself. Bound with mode 0600, peers checked with
//! SO_PEERCRED (root and the switch's own user), requests read as lines capped at
//! `MAX_REQUEST_LINE`, answers written without blocking; `serve` waits in `poll(2)` for at most
//! its timeout, so it can stand in for the management loop's sleep.

use crate::control::Control;
use barrier_ctl::proto::{Response, MAX_REQUEST_LINE};
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Connections served at once; one more is answered with an error and closed.
pub const MAX_CLIENTS: usize = 16;

/// Answers queued for one client before its further lines wait.
const OUTPUT_HIGH_WATER: usize = 1 << 20;

/// Why the control socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("{}: another process listens there (a switch already running with this socket?)", .0.display())]
    InUse(PathBuf),
    #[error("{}: exists and is not a socket; not replacing it", .0.display())]
    NotASocket(PathBuf),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// One client connection.
struct Conn {
    stream: UnixStream,
    input: Vec<u8>,
    output: Vec<u8>,
    /// Skipping the rest of a line that was too long.
    skipping: bool,
    /// The peer closed, or the connection is to be closed once its output is written.
    closing: bool,
}

/// The control socket, served by [`ControlServer::serve`] from the management loop.
pub struct ControlServer {
    listener: UnixListener,
    path: PathBuf,
    conns: Vec<Conn>,
    control: Control,
    /// Root and this user may connect.
    owner: rustix::process::Uid,
}

impl ControlServer {
    /// Listens at `path`, mode 0600: the socket is bound in a private directory (mode 0700)
    /// beside it, set to 0600 and renamed into place, so it is never reachable with a wider
    /// mode. A stale socket (nobody listening) is replaced; a live one is refused. A missing
    /// directory is created, mode 0755 (the shipped files name `/run/netbarrier/`, and /run
    /// is emptied at every boot); the socket's own mode is the access check.
    pub fn bind(path: &Path, control: Control) -> Result<ControlServer, BindError> {
        let io_err = |source| BindError::Io {
            path: path.to_path_buf(),
            source,
        };
        match std::fs::symlink_metadata(path) {
            Ok(m) => {
                use std::os::unix::fs::FileTypeExt;
                if !m.file_type().is_socket() {
                    return Err(BindError::NotASocket(path.to_path_buf()));
                }
                if UnixStream::connect(path).is_ok() {
                    return Err(BindError::InUse(path.to_path_buf()));
                }
                std::fs::remove_file(path).map_err(io_err)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(e)),
        }
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !dir.exists() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)
                .and_then(|()| {
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
                })
                .map_err(io_err)?;
            tracing::info!(dir = %dir.display(), "control socket: directory created");
        }
        let file = path.file_name().ok_or_else(|| {
            io_err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a file path",
            ))
        })?;
        let private = dir.join(format!(
            ".{}.{}.d",
            file.to_string_lossy(),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&private);
        std::fs::create_dir(&private).map_err(io_err)?;
        let bound = (|| {
            std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700))?;
            let inner = private.join("s");
            let l = UnixListener::bind(&inner)?;
            std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o600))?;
            std::fs::rename(&inner, path)?;
            l.set_nonblocking(true)?;
            Ok(l)
        })();
        let _ = std::fs::remove_dir_all(&private);
        let listener = bound.map_err(io_err)?;
        tracing::info!(path = %path.display(), "control socket listening (mode 0600)");
        Ok(ControlServer {
            listener,
            path: path.to_path_buf(),
            conns: Vec::new(),
            control,
            owner: rustix::process::geteuid(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Waits up to `timeout` for something to do, then does it: accepts, reads, answers,
    /// writes. Never blocks longer than `timeout`.
    pub fn serve(&mut self, timeout: Duration) {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let ts = Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        // A connection with whole lines waiting and nothing to write is served now.
        let pending = |c: &Conn| c.output.is_empty() && !c.closing && c.input.contains(&b'\n');
        let ts = if self.conns.iter().any(pending) {
            Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            }
        } else {
            ts
        };
        let (listen_ready, ready) = {
            let mut fds = Vec::with_capacity(self.conns.len() + 1);
            fds.push(PollFd::new(&self.listener, PollFlags::IN));
            for c in &self.conns {
                let mut f = PollFlags::empty();
                if c.output.is_empty() && !c.closing {
                    f |= PollFlags::IN;
                }
                if !c.output.is_empty() {
                    f |= PollFlags::OUT;
                }
                fds.push(PollFd::new(&c.stream, f));
            }
            if poll(&mut fds, Some(&ts)).is_err() {
                // EINTR (a signal: SIGUSR1) or similar: the caller loops anyway.
                return;
            }
            let ready: Vec<bool> = fds[1..].iter().map(|f| !f.revents().is_empty()).collect();
            (!fds[0].revents().is_empty(), ready)
        };
        for (c, r) in self.conns.iter_mut().zip(ready) {
            if r || pending(c) {
                Self::service(&mut self.control, c);
            }
        }
        self.conns.retain(|c| !(c.closing && c.output.is_empty()));
        if listen_ready {
            self.accept();
        }
    }

    fn accept(&mut self) {
        loop {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    tracing::warn!("control socket: accept: {e}");
                    return;
                }
            };
            let refusal = match rustix::net::sockopt::socket_peercred(stream.as_fd()) {
                Ok(cred) if cred.uid.is_root() || cred.uid == self.owner => None,
                Ok(cred) => Some(format!(
                    "uid {} may not manage this switch (root and uid {} only)",
                    cred.uid.as_raw(),
                    self.owner.as_raw()
                )),
                Err(e) => Some(format!("peer credentials: {e}")),
            };
            if let Some(why) = refusal {
                tracing::warn!("control socket: refused a connection: {why}");
                // Best effort: a short line fits the socket buffer; then close.
                let _ = stream.set_nonblocking(true);
                let _ = (&stream).write_all(Response::error(why).to_line().as_bytes());
                continue;
            }
            if self.conns.len() >= MAX_CLIENTS {
                let _ = stream.set_nonblocking(true);
                let _ = (&stream).write_all(
                    Response::error(format!("too many connections (at most {MAX_CLIENTS})"))
                        .to_line()
                        .as_bytes(),
                );
                continue;
            }
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            self.conns.push(Conn {
                stream,
                input: Vec::new(),
                output: Vec::new(),
                skipping: false,
                closing: false,
            });
        }
    }

    /// Reads what the client sent, answers every whole line, writes what it can.
    fn service(control: &mut Control, c: &mut Conn) {
        if c.output.is_empty() && !c.closing {
            let mut buf = [0u8; 4096];
            loop {
                match c.stream.read(&mut buf) {
                    Ok(0) => {
                        c.closing = true;
                        break;
                    }
                    Ok(n) => {
                        c.input.extend_from_slice(&buf[..n]);
                        if c.input.len() > MAX_REQUEST_LINE {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        c.closing = true;
                        c.output.clear();
                        return;
                    }
                }
            }
            Self::lines(control, c);
        }
        while !c.output.is_empty() {
            match c.stream.write(&c.output) {
                Ok(0) => {
                    c.output.clear();
                    c.closing = true;
                }
                Ok(n) => {
                    c.output.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    c.output.clear();
                    c.closing = true;
                }
            }
        }
    }

    /// Answers the whole lines in `c.input`; a line over the cap gets an error and is skipped
    /// to its newline.
    fn lines(control: &mut Control, c: &mut Conn) {
        loop {
            // Answers wait to be written before more lines are read: one client cannot make
            // the switch hold more than about one answer for it.
            if c.output.len() >= OUTPUT_HIGH_WATER {
                return;
            }
            match c.input.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    let line: Vec<u8> = c.input.drain(..=i).collect();
                    if c.skipping {
                        c.skipping = false;
                        continue;
                    }
                    let line = &line[..line.len() - 1];
                    let resp = if line.len() > MAX_REQUEST_LINE {
                        Response::error(format!(
                            "request line longer than {MAX_REQUEST_LINE} bytes: skipped"
                        ))
                    } else {
                        control.handle_line(line)
                    };
                    c.output.extend_from_slice(resp.to_line().as_bytes());
                }
                None => {
                    if c.input.len() > MAX_REQUEST_LINE {
                        if !c.skipping {
                            c.output.extend_from_slice(
                                Response::error(format!(
                                    "request line longer than {MAX_REQUEST_LINE} bytes: skipped to its end"
                                ))
                                .to_line()
                                .as_bytes(),
                            );
                        }
                        c.skipping = true;
                        c.input.clear();
                    }
                    return;
                }
            }
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
