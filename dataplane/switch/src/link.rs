//! The handoff from an RX poller to the scheduler: the actions of one received burst travel as
//! one batch, one ring operation per burst (not one per action), and the batch's vector comes
//! back on a second ring to be filled again, so the steady state allocates nothing.
//!
//! A send may carry its frame already built, in the buffer of the frame that caused it
//! (`Out::frame`): the release in the reduce that completed the barrier. The scheduler sends
//! that buffer as it is when the port is not backed up, and drops it otherwise (a send waiting
//! for a backed-up port holds no buffer: the mempool need not cover the deepest backlog).
//!
//! What a batch holds is owned by the batch: at shutdown the scheduler's `finish` takes every
//! batch still in the ring (its sends are flushed or dropped, its buffers freed), and an RX
//! poller's batch the ring did not take is dropped by the poller's `drain`; so no buffer
//! outlives the ports.

use barrier_protocol::switch::{Action, Run};
use barrier_protocol::GroupId;
use barrier_runtime::io::BURST;
use crossbeam_queue::ArrayQueue;

/// Batches in flight from one RX poller to the scheduler. With at most one built frame per
/// received frame, this bounds the received buffers a poller holds outside its RX queue to
/// `LINK_BATCHES * BURST` (512): part of the mempool's sizing (docs/configuration.md).
pub const LINK_BATCHES: usize = 16;

/// One action of one group, as the RX poller hands it to the scheduler.
#[derive(Debug)]
pub struct Out<F> {
    pub group: GroupId,
    /// The run of the group the action was decided in
    /// ([`barrier_protocol::switch::Actions::run`]): a frame carries its epoch, a timer the
    /// whole run (it fires only into that run).
    pub run: Run,
    pub action: Action,
    /// The frame of a send, built in place for the action's first port (the only port of a
    /// `SendReduce`; the lowest of a `SendRelease`'s or `SendAbort`'s ports): byte for byte
    /// what the scheduler would build for that port from its template. `None`: the scheduler
    /// builds every frame of the action.
    pub frame: Option<F>,
}

impl<F> Out<F> {
    /// An action with no frame built for it.
    pub fn new(group: GroupId, run: Run, action: Action) -> Self {
        Out {
            group,
            run,
            action,
            frame: None,
        }
    }
}

/// One burst's actions, in the order they were decided.
pub type Batch<F> = Vec<Out<F>>;

/// The two rings between one RX poller and the scheduler: batches to the scheduler, emptied
/// vectors back. Single producer and single consumer each way.
pub struct Link<F> {
    full: ArrayQueue<Batch<F>>,
    empty: ArrayQueue<Batch<F>>,
}

impl<F> Default for Link<F> {
    fn default() -> Self {
        Link::new(LINK_BATCHES)
    }
}

impl<F> Link<F> {
    /// A link holding up to `batches` batches in flight.
    pub fn new(batches: usize) -> Self {
        Link {
            full: ArrayQueue::new(batches),
            // One more than can be in flight, and one the poller is filling.
            empty: ArrayQueue::new(batches + 2),
        }
    }

    /// An empty vector to fill (one the scheduler gave back, else a new one).
    pub fn take_empty(&self) -> Batch<F> {
        self.empty
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(2 * BURST))
    }

    /// Hand a batch to the scheduler; a full ring hands it back.
    pub fn send(&self, batch: Batch<F>) -> Result<(), Batch<F>> {
        self.full.push(batch)
    }

    /// The oldest batch in flight.
    pub fn recv(&self) -> Option<Batch<F>> {
        self.full.pop()
    }

    /// Give an emptied vector back for reuse (dropped when the ring of empty ones is full).
    pub fn give_back(&self, mut batch: Batch<F>) {
        batch.clear();
        let _ = self.empty.push(batch);
    }

    /// True when no batch is in flight.
    pub fn is_empty(&self) -> bool {
        self.full.is_empty()
    }

    /// Every action in flight, in order, each batch's vector given back: for tests and
    /// harnesses that play the scheduler's part.
    pub fn drain_actions(&self) -> Vec<Out<F>> {
        let mut all = Vec::new();
        while let Some(mut b) = self.recv() {
            all.append(&mut b);
            self.give_back(b);
        }
        all
    }
}
