//! A blocking client of the switch's control socket: connect, one request, one answer line.

use crate::proto::{Reply, Request, Response, MAX_RESPONSE_LINE};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the client waits for an answer.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Why a client could not connect.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// No socket at the path, or nobody listening on it.
    #[error("{}: no switch is running there ({source}); is barrier-switch running with [control] socket = \"{}\"?", path.display(), path.display())]
    NotRunning {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The socket exists but this user may not open it (mode 0600, owned by the switch's user).
    #[error("{}: permission denied: the control socket is for root and the switch's owner", path.display())]
    PermissionDenied { path: PathBuf },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Why one request got no answer, or a refusal.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("control socket: {0}")]
    Io(#[source] io::Error),
    #[error("the switch closed the connection without answering")]
    Closed,
    #[error("the switch's answer is longer than {MAX_RESPONSE_LINE} bytes")]
    TooLong,
    #[error("the switch's answer is not a response: {0}")]
    BadResponse(#[source] serde_json::Error),
    /// The switch answered `ok: false`: why, and the refusal's stable code when it has one (a
    /// group specification's, [`crate::group::GroupErrorKind::code`]).
    #[error("refused{}: {error}", code.as_ref().map(|c| format!(" ({c})")).unwrap_or_default())]
    Refused { code: Option<String>, error: String },
}

impl RequestError {
    /// A refusal without a code.
    pub fn refused(error: impl Into<String>) -> RequestError {
        RequestError::Refused {
            code: None,
            error: error.into(),
        }
    }

    /// The switch's reason, for a refusal.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            RequestError::Refused { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// One connection to a switch.
pub struct Client {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Client {
    /// Connects to the socket at `path`.
    pub fn connect(path: &Path) -> Result<Client, ConnectError> {
        let stream = UnixStream::connect(path).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
                ConnectError::NotRunning {
                    path: path.to_path_buf(),
                    source,
                }
            }
            io::ErrorKind::PermissionDenied => ConnectError::PermissionDenied {
                path: path.to_path_buf(),
            },
            _ => ConnectError::Io {
                path: path.to_path_buf(),
                source,
            },
        })?;
        let io_err = |source| ConnectError::Io {
            path: path.to_path_buf(),
            source,
        };
        stream.set_read_timeout(Some(TIMEOUT)).map_err(io_err)?;
        stream.set_write_timeout(Some(TIMEOUT)).map_err(io_err)?;
        let reader = BufReader::new(stream.try_clone().map_err(io_err)?);
        Ok(Client { stream, reader })
    }

    /// Sends `req`, returns the result of an `ok` answer; a refusal is `RequestError::Refused`,
    /// with the switch's code when it gives one.
    pub fn request(&mut self, req: &Request) -> Result<Reply, RequestError> {
        let resp = self.raw(req.to_line().as_bytes())?;
        match (resp.ok, resp.result, resp.error) {
            (true, Some(r), _) => Ok(r),
            (_, _, Some(error)) => Err(RequestError::Refused {
                code: resp.code,
                error,
            }),
            _ => Err(RequestError::refused(
                "an answer with neither result nor error",
            )),
        }
    }

    /// Sends raw bytes (a line, or anything: the tests' hostile requests) and reads one answer.
    pub fn raw(&mut self, bytes: &[u8]) -> Result<Response, RequestError> {
        if let Err(e) = self.stream.write_all(bytes) {
            // A switch that refuses the connection (a peer it does not serve) answers and
            // closes before reading: its answer is still there to read.
            return self.read_response().map_err(|_| RequestError::Io(e));
        }
        self.read_response()
    }

    /// Reads one answer line.
    pub fn read_response(&mut self) -> Result<Response, RequestError> {
        let mut line = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_RESPONSE_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(RequestError::Io)?;
        if n == 0 {
            return Err(RequestError::Closed);
        }
        if !line.ends_with(b"\n") {
            return Err(if n > MAX_RESPONSE_LINE {
                RequestError::TooLong
            } else {
                RequestError::Closed
            });
        }
        serde_json::from_slice(&line).map_err(RequestError::BadResponse)
    }
}

#[cfg(test)]
mod tests {
    use super::RequestError;

    #[test]
    fn a_refusal_shows_its_code_when_it_has_one() {
        let e = RequestError::Refused {
            code: Some("unknown_port".into()),
            error: "children[1]: unknown port \"d9\"".into(),
        };
        assert_eq!(
            e.to_string(),
            "refused (unknown_port): children[1]: unknown port \"d9\""
        );
        assert_eq!(e.refusal(), Some("children[1]: unknown port \"d9\""));
        let e = RequestError::refused("group 9 is not configured");
        assert_eq!(e.to_string(), "refused: group 9 is not configured");
        assert_eq!(e.refusal(), Some("group 9 is not configured"));
        assert_eq!(RequestError::Closed.refusal(), None);
    }
}
