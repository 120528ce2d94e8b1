//! How many barriers a closed loop keeps in flight. With every group in flight at once the
//! queueing delay is `in flight / throughput`; when the throughput drops (the switch's or the
//! generator's core is shared) that delay passes the leaves' re-send timer, every barrier is
//! re-sent, the re-sends take capacity from the barriers, and the rate collapses. The adaptive
//! window is TCP's answer: halve it when the timer says the path is congested (a leaf re-sent,
//! or a barrier took more than half the timer), at most once per timer period; grow it by one
//! barrier per barrier that completed within a quarter of the timer (the queue is short: double
//! per round trip), by one per window of them within half the timer. Only while the
//! generator keeps up: a re-send or a slow barrier right after a pause of the generator's own
//! loop says its core was taken away, which fewer barriers in flight would not cure (cut on
//! those as well, the window sinks to one barrier on a shared core and stays there). Pure: the
//! engine feeds it times and outcomes.

use serde::Serialize;

/// The window's figures for a trial's report.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WindowReport {
    /// The window adapts (else it is every group, always).
    pub adaptive: bool,
    /// Barriers allowed in flight at the end of the trial.
    pub end: u64,
    /// The smallest it was in the trial.
    pub min: u64,
    /// Times it was halved.
    pub cuts: u64,
}

#[derive(Clone, Debug)]
pub struct Window {
    max: u64,
    adaptive: bool,
    /// The leaves' re-send timer.
    period_ns: u64,
    w: f64,
    last_cut_ns: Option<u64>,
    min_seen: u64,
    cuts: u64,
}

impl Window {
    /// Every one of `max` groups in flight, always.
    pub fn fixed(max: u64) -> Window {
        Window::new(max, false, 1)
    }

    /// Starts at `max` (every group) and adapts to the leaves' timer `period_ns`.
    pub fn adaptive(max: u64, period_ns: u64) -> Window {
        Window::new(max, true, period_ns)
    }

    fn new(max: u64, adaptive: bool, period_ns: u64) -> Window {
        let max = max.max(1);
        Window {
            max,
            adaptive,
            period_ns: period_ns.max(1),
            w: max as f64,
            last_cut_ns: None,
            min_seen: max,
            cuts: 0,
        }
    }

    /// Barriers that may be in flight now.
    pub fn limit(&self) -> u64 {
        (self.w as u64).clamp(1, self.max)
    }

    /// A leaf's re-send timer ran out at `now`; `keeping_up`: the generator's loop did not
    /// pause within the timer before.
    pub fn on_resend(&mut self, now: u64, keeping_up: bool) {
        if keeping_up {
            self.congested(now);
        }
    }

    /// A barrier completed at `now`, `latency_ns` after its first reduce, re-sent or not
    /// (`keeping_up` as for `on_resend`).
    pub fn on_completed(&mut self, now: u64, latency_ns: u64, resent: bool, keeping_up: bool) {
        if resent || latency_ns > self.period_ns / 2 {
            if keeping_up {
                self.congested(now);
            }
        } else if self.adaptive {
            let step = if latency_ns <= self.period_ns / 4 {
                1.0
            } else {
                1.0 / self.w
            };
            self.w = (self.w + step).min(self.max as f64);
        }
    }

    fn congested(&mut self, now: u64) {
        if !self.adaptive
            || self
                .last_cut_ns
                .is_some_and(|t| now.saturating_sub(t) < self.period_ns)
        {
            return;
        }
        self.last_cut_ns = Some(now);
        self.w = (self.w / 2.0).max(1.0);
        self.cuts += 1;
        self.min_seen = self.min_seen.min(self.limit());
    }

    /// The report of the trial so far; `start_trial` starts the next one's figures.
    pub fn report(&self) -> WindowReport {
        WindowReport {
            adaptive: self.adaptive,
            end: self.limit(),
            min: self.min_seen,
            cuts: self.cuts,
        }
    }

    pub fn start_trial(&mut self) {
        self.min_seen = self.limit();
        self.cuts = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 10_000_000;

    #[test]
    fn fixed_never_moves() {
        let mut w = Window::fixed(1024);
        w.on_resend(0, true);
        w.on_completed(T, T, true, true);
        assert_eq!(w.limit(), 1024);
        assert_eq!(w.report().cuts, 0);
    }

    #[test]
    fn the_generators_own_pauses_do_not_cut() {
        let mut w = Window::adaptive(1024, T);
        w.on_resend(5 * T, false);
        w.on_completed(6 * T, 3 * T, true, false);
        assert_eq!((w.limit(), w.report().cuts), (1024, 0));
        w.on_completed(8 * T, 3 * T, false, true);
        assert_eq!(w.limit(), 512);
    }

    #[test]
    fn halves_at_most_once_per_timer_period() {
        let mut w = Window::adaptive(1024, T);
        w.on_resend(5 * T, true);
        w.on_resend(5 * T + 1, true);
        w.on_completed(5 * T + T / 2, T, false, true);
        assert_eq!(w.limit(), 512, "one cut within one period");
        w.on_resend(6 * T, true);
        assert_eq!(w.limit(), 256);
        for i in 0..20 {
            w.on_resend((7 + i) * T, true);
        }
        assert_eq!(w.limit(), 1, "never below one barrier");
        let r = w.report();
        assert_eq!((r.min, r.cuts, r.adaptive), (1, 22, true));
    }

    #[test]
    fn grows_one_per_window_of_fast_barriers_up_to_every_group() {
        let mut w = Window::adaptive(64, T);
        for i in 0..5 {
            w.on_resend(i * T, true);
        }
        assert_eq!(w.limit(), 2);
        // within half the timer: 1/window each: 2 + 1/2 + 1/2.5 = 2.9, then 3.24
        w.on_completed(10 * T, T / 3, false, true);
        w.on_completed(10 * T, T / 3, false, true);
        assert_eq!(w.limit(), 2);
        w.on_completed(10 * T, T / 3, false, true);
        assert_eq!(w.limit(), 3);
        // within a quarter: one each
        w.on_completed(10 * T, T / 10, false, true);
        w.on_completed(10 * T, T / 10, false, true);
        assert_eq!(w.limit(), 5);
        for _ in 0..100_000 {
            w.on_completed(10 * T, 1, false, true);
        }
        assert_eq!(w.limit(), 64);
        // a slow barrier is a congestion signal like a re-send
        w.on_completed(20 * T, T, false, true);
        assert_eq!(w.limit(), 32);
        w.start_trial();
        assert_eq!((w.report().min, w.report().cuts), (32, 0));
    }
}
