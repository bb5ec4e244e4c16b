//! The merge of a feed's lines by arrival time: which received datagram the
//! receiver applies next.
//!
//! Line B's copy of a tick that line A lost must be applied before A's later
//! ticks, as it arrived, or the per-symbol sequence filter reports a false
//! gap. So datagrams of all lines are applied earliest arrival first, but
//! only up to the *horizon*: the time up to which no line can still hold an
//! earlier datagram in the kernel.
//!
//! The merge must make progress whatever the timestamps do. Kernel
//! timestamps of one socket are not always in queue order (the stamp is
//! taken on the receiving CPU, before the queue), may be equal, missing
//! (then the receive's clock reading stands in) or ahead of the receiver's
//! clock after a clock step. Two rules guarantee it:
//!
//! - a line's horizon is the *latest* arrival it holds, not its last one, so
//!   every datagram it holds is at or before its own horizon;
//! - arrivals are clamped to `now` (nothing arrived after the clock read
//!   that precedes the receive), and so is the horizon.
//!
//! Then the line with the lowest horizon can apply everything it holds:
//! every cycle empties at least one line that holds datagrams, and a line is
//! never starved by one datagram stamped later than its neighbours.
//! Within a line, datagrams are applied in queue order.

/// One line's received datagrams, as the merge sees them.
pub(crate) trait Queue {
    /// Arrival time of the next datagram not yet applied (ns since the Unix
    /// epoch, local clock), or `None` when all are applied.
    fn next_arrival(&self) -> Option<u64>;

    /// The time up to which this line's datagrams are all in hand: `now`
    /// when the kernel held nothing more at the last receive, else the latest
    /// arrival among the datagrams it holds.
    fn complete_until(&self, now: u64) -> u64;
}

/// The time up to which every line's datagrams are all in hand, at most
/// `now`.
#[inline]
pub(crate) fn horizon<Q: Queue>(lines: &[Q], now: u64) -> u64 {
    lines
        .iter()
        .fold(now, |h, line| h.min(line.complete_until(now)))
}

/// The line whose next datagram arrived first among those at or before
/// `horizon` (the first line on a tie), and that datagram's arrival clamped
/// to `now`; `None` when no line has one.
#[inline]
pub(crate) fn pick<Q: Queue>(lines: &[Q], now: u64, horizon: u64) -> Option<(usize, u64)> {
    let mut pick: Option<(usize, u64)> = None;
    for (i, line) in lines.iter().enumerate() {
        if let Some(t) = line.next_arrival() {
            let t = t.min(now);
            if t <= horizon && pick.is_none_or(|(_, best)| t < best) {
                pick = Some((i, t));
            }
        }
    }
    pick
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A line fed from a list of arrivals, `capacity` per receive.
    struct TestLine {
        /// Everything the line will carry, in queue order.
        arrivals: Vec<u64>,
        /// How many of them the kernel has queued so far.
        queued: usize,
        /// Taken from the kernel: `taken..taken + held` is in hand.
        taken: usize,
        held: usize,
        next: usize,
        fresh: bool,
        capacity: usize,
    }

    impl Queue for TestLine {
        fn next_arrival(&self) -> Option<u64> {
            (self.next < self.held).then(|| self.arrivals[self.taken + self.next])
        }
        fn complete_until(&self, now: u64) -> u64 {
            let maybe_more = !self.fresh || self.held == self.capacity;
            if maybe_more && self.next < self.held {
                self.arrivals[self.taken..self.taken + self.held]
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(now)
            } else {
                now
            }
        }
    }

    impl TestLine {
        fn new(arrivals: Vec<u64>, capacity: usize) -> TestLine {
            TestLine {
                arrivals,
                queued: 0,
                taken: 0,
                held: 0,
                next: 0,
                fresh: true,
                capacity,
            }
        }
        fn receive(&mut self) {
            self.fresh = self.next >= self.held;
            if self.fresh {
                self.taken += self.held;
                self.held = (self.queued - self.taken).min(self.capacity);
                self.next = 0;
            }
        }
    }

    /// Runs the receiver's cycle until every line is drained: per cycle the
    /// kernel queues `per_cycle` more datagrams on each line, then every
    /// line receives, then the merge applies. Returns the applied
    /// (line, index, time) in order, or `None` if a cycle with datagrams
    /// pending applied nothing for 3 cycles in a row.
    fn run(
        lines: &mut [TestLine],
        per_cycle: usize,
        now_of: impl Fn(u64) -> u64,
    ) -> Option<Vec<(usize, usize, u64)>> {
        let mut out = Vec::new();
        let mut idle = 0;
        for cycle in 0u64.. {
            for l in lines.iter_mut() {
                l.queued = (l.queued + per_cycle).min(l.arrivals.len());
                l.receive();
            }
            let now = now_of(cycle);
            let h = horizon(lines, now);
            let before = out.len();
            while let Some((i, t)) = pick(lines, now, h) {
                let l = &mut lines[i];
                out.push((i, l.taken + l.next, t));
                l.next += 1;
            }
            let pending = lines.iter().any(|l| {
                l.next < l.held || l.queued < l.arrivals.len() || l.taken + l.held < l.queued
            });
            if !pending {
                return Some(out);
            }
            idle = if out.len() == before { idle + 1 } else { 0 };
            if idle >= 3 {
                return None;
            }
        }
        unreachable!()
    }

    #[test]
    fn a_late_stamped_datagram_does_not_stall_its_line() {
        // Line A's batch is full and its first datagram is stamped after
        // its last: once line A only held [30, 10] with the horizon taken
        // from the last datagram (10), 30 waited forever and so did every
        // later datagram of both lines.
        let mut lines = [
            TestLine::new(vec![30, 10, 40, 50], 2),
            TestLine::new(vec![20, 35, 45, 55], 2),
        ];
        let out = run(&mut lines, 4, |_| 1_000).expect("no stall");
        assert_eq!(out.len(), 8);
        for (line, arrivals) in [(0, [30, 10, 40, 50]), (1, [20, 35, 45, 55])] {
            let seen: Vec<usize> = out.iter().filter(|o| o.0 == line).map(|o| o.1).collect();
            assert_eq!(
                seen,
                [0, 1, 2, 3],
                "line {line} {arrivals:?} in queue order"
            );
        }
    }

    #[test]
    fn arrivals_ahead_of_the_clock_are_applied_at_the_clock() {
        // The clock stepped back below every stamp: applied anyway, at `now`.
        let mut lines = [
            TestLine::new(vec![500, 600], 8),
            TestLine::new(vec![550], 8),
        ];
        let out = run(&mut lines, 2, |_| 100).expect("no stall");
        assert_eq!(out.len(), 3);
        assert!(out.iter().all(|o| o.2 == 100));
    }

    #[test]
    fn b_copy_of_a_lost_tick_comes_before_a_later_tick() {
        // A lost its tick at 20; B's copy (21) is applied before A's 30
        // even though A's batch is drained first in line order.
        let mut lines = [
            TestLine::new(vec![10, 30], 8),
            TestLine::new(vec![11, 21, 31], 8),
        ];
        let out = run(&mut lines, 3, |_| 1_000).unwrap();
        let times: Vec<u64> = out.iter().map(|o| o.2).collect();
        assert_eq!(times, [10, 11, 21, 30, 31]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever the stamps (out of order, equal, ahead of the clock),
        /// batch sizes and arrival pace: everything is applied, each line in
        /// queue order, at most at the clock, and never a cycle with work
        /// pending goes by without progress for long.
        #[test]
        fn always_drains_in_queue_order(
            a in proptest::collection::vec(0u64..200, 0..60),
            b in proptest::collection::vec(0u64..200, 0..60),
            cap_a in 1usize..9,
            cap_b in 1usize..9,
            per_cycle in 1usize..12,
            clock in 0u64..250,
        ) {
            let mut lines = [TestLine::new(a.clone(), cap_a), TestLine::new(b.clone(), cap_b)];
            let out = run(&mut lines, per_cycle, |c| clock + c).expect("stalled");
            prop_assert_eq!(out.len(), a.len() + b.len());
            for line in 0..2 {
                let idx: Vec<usize> = out.iter().filter(|o| o.0 == line).map(|o| o.1).collect();
                prop_assert_eq!(idx, (0..[a.len(), b.len()][line]).collect::<Vec<_>>());
            }
        }

        /// With each line's stamps in order (the usual case) the merged
        /// order is the global arrival order: the A/B arbitration.
        #[test]
        fn in_order_stamps_merge_sorted(
            mut a in proptest::collection::vec(0u64..1_000, 0..60),
            mut b in proptest::collection::vec(0u64..1_000, 0..60),
            cap in 1usize..9,
        ) {
            a.sort_unstable();
            b.sort_unstable();
            // Everything is queued before the first receive.
            let mut lines = [TestLine::new(a, cap), TestLine::new(b, cap)];
            let out = run(&mut lines, usize::MAX / 4, |_| 10_000).expect("stalled");
            let times: Vec<u64> = out.iter().map(|o| o.2).collect();
            let mut sorted = times.clone();
            sorted.sort_unstable();
            prop_assert_eq!(times, sorted);
        }
    }
}
