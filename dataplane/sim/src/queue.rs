//! The event queue: a binary heap ordered by (modelled time, insertion counter). The counter
//! breaks ties first-in first-out, which keeps runs deterministic when events share a time.

use barrier_protocol::Time;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry<E> {
    at: Time,
    tie: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at && self.tie == other.tie
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed: BinaryHeap is a max-heap and we want the earliest (then first-pushed) event.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.tie).cmp(&(self.at, self.tie))
    }
}

pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    counter: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            counter: 0,
        }
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, at: Time, event: E) {
        let tie = self.counter;
        self.counter += 1;
        self.heap.push(Entry { at, tie, event });
    }

    pub fn pop(&mut self) -> Option<(Time, E)> {
        self.heap.pop().map(|e| (e.at, e.event))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Events pushed since creation: the size of the run.
    pub fn pushed(&self) -> u64 {
        self.counter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_order_then_fifo() {
        let mut q = EventQueue::new();
        q.push(Time(30), "c");
        q.push(Time(10), "a1");
        q.push(Time(20), "b");
        q.push(Time(10), "a2");
        q.push(Time(10), "a3");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, ["a1", "a2", "a3", "b", "c"]);
        assert!(q.is_empty());
        assert_eq!(q.pushed(), 5);
    }
}
