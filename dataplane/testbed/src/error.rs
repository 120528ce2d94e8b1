//! Why a demo tree (or a measurement built on one) could not run.

use barrier_runtime::launch::CloseError;
#[cfg(feature = "dpdk")]
use barrier_runtime::launch::LaunchError;
use barrier_switch::engine::BuildTableError;
#[cfg(feature = "dpdk")]
use dpdk::DpdkError;

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A tree, wiring or option the demo cannot build (the reason says which).
    #[error("{0}")]
    Shape(String),
    #[cfg(feature = "dpdk")]
    #[error("EAL: {0}")]
    Eal(#[source] DpdkError),
    #[cfg(feature = "dpdk")]
    #[error("mempool: {0}")]
    Mempool(#[source] DpdkError),
    #[cfg(feature = "dpdk")]
    #[error("queue: {0}")]
    Queue(#[source] DpdkError),
    #[cfg(feature = "dpdk")]
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error(transparent)]
    Table(#[from] BuildTableError),
    /// The run ended, but shutdown found a problem; the switches' report comes with it.
    #[error("{report}{source}")]
    Close {
        report: String,
        #[source]
        source: CloseError,
    },
    /// The emulated leaves did not hand their report back (a panicked poller).
    #[error("the emulated leaves did not report")]
    NoReport,
}

impl From<&str> for DemoError {
    fn from(s: &str) -> Self {
        DemoError::Shape(s.to_string())
    }
}

impl From<String> for DemoError {
    fn from(s: String) -> Self {
        DemoError::Shape(s)
    }
}
