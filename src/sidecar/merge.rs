//! The merge of a feed's lines by arrival time: which received datagram the
//! receiver applies next.
//!
//! Each feed has its own horizon: feeds share no sequence, so one feed's
//! backlog (a burst, a flood on its lines) holds back no other feed's
//! datagrams. The horizon is also the time its feed's gaps are given up at
//! ([`Sidecar::cycle`](super::Sidecar::cycle)): every datagram stamped up to
//! it has been applied, so a gap's deadline passed before it passed with
//! every copy that came in time applied first, as replay sees it.
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
//! - the horizon is at most `now`, the clock read before the receives: a
//!   datagram stamped after it arrived during this cycle's receives, while
//!   another line's earlier copy may still be on its way into the kernel, so
//!   it waits for the next cycle — unless it is more than [`AHEAD_NS`] ahead,
//!   which only a clock stepped back explains (a receive held up after the
//!   clock read, the thread preempted or a softirq on its core, stamps a
//!   few ms after it at most): then it counts as arriving at `now`.
//!
//! Then the line with the lowest horizon can apply everything it holds
//! stamped up to `now`: a line is never starved by one datagram stamped
//! later than its neighbours, and nothing waits for the clock longer than
//! [`AHEAD_NS`] (a datagram can wait longer behind another line of its
//! feed with a backlog stamped earlier, which is applied first, as it
//! should be). Within a line, datagrams are applied in queue order.
//!
//! What the merge cannot see: a datagram the kernel stamped before `now`
//! but had not yet queued to its socket when that socket was read (its
//! receive processing deferred, as on a machine whose cores are all busy).
//! Its line then looks complete up to `now`, and the other line's later
//! datagrams are applied first. An SQF feed, which by its spec has no
//! hold-back, counts the ticks in between as lost (and a delta feed turns
//! suspect) and the late copy as a duplicate; an ITCH feed holds the later
//! messages and the late copy fills the gap. Holding every datagram back a
//! margin would close this at the cost of that margin's latency on every
//! tick, so it is not done; losses are over-counted, never hidden.
//!
//! A receive that failed (an error other than an empty queue, such as
//! `ENOMEM`) tells nothing of what waits in its kernel queue: its line
//! claims no more than its last receive that drained the queue showed
//! ([`Told`]), so that a copy waiting there is applied in its place and a
//! gap it fills is not given up meanwhile, as replay of the recording
//! would see it. Receives that go on failing hold the feed back
//! [`FAILING_HOLD_NS`] at most.

/// Furthest a kernel timestamp may be ahead of the receiver's clock before
/// it counts as a clock step and the datagram as arriving at `now`, ns:
/// past what a receive held up after the clock read stamps (taken at 1 ms,
/// a datagram received 2 ms late jumped ahead of the other line's earlier
/// copy: a false loss), and the longest a datagram waits for the clock
/// after a smaller step back.
pub(crate) const AHEAD_NS: u64 = 10_000_000;

/// The longest a line whose receives keep failing holds its feed's
/// horizon back, ns: its datagrams cannot be had meanwhile, and the other
/// lines' are applied (and the feed's gaps given up) this much late.
pub(crate) const FAILING_HOLD_NS: u64 = 1_000_000;

/// What a line's receives told of its kernel queue (loop clock, ns).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Told {
    /// Every datagram that arrived before this was received: the clock of
    /// the last receive that drained the queue.
    until: u64,
    /// The last receive failed.
    failing: bool,
}

impl Told {
    /// A receive at `now` returned; `drained`: fewer than a full batch
    /// (the kernel held nothing more).
    #[inline]
    pub(crate) fn received(&mut self, now: u64, drained: bool) {
        if drained {
            self.until = now;
        }
        self.failing = false;
    }

    /// A receive failed.
    #[inline]
    pub(crate) fn failed(&mut self) {
        self.failing = true;
    }

    /// The time up to which a line holding nothing has every datagram in
    /// hand at `now`: `now`, unless its last receive failed.
    #[inline]
    pub(crate) fn horizon(&self, now: u64) -> u64 {
        if self.failing {
            self.until.max(now.saturating_sub(FAILING_HOLD_NS)).min(now)
        } else {
            now
        }
    }
}

/// The arrival the merge orders by: `t`, or `now` when `t` is more than
/// [`AHEAD_NS`] ahead of it.
#[inline]
fn key(t: u64, now: u64) -> u64 {
    if t > now.saturating_add(AHEAD_NS) {
        now
    } else {
        t
    }
}

/// One line's received datagrams, as the merge sees them.
pub(crate) trait Queue {
    /// Arrival time of the next datagram not yet applied (ns since the Unix
    /// epoch, local clock), or `None` when all are applied.
    fn next_arrival(&self) -> Option<u64>;

    /// The time up to which this line's datagrams are all in hand: `now`
    /// when the kernel held nothing more at the last receive, else the latest
    /// arrival among the datagrams it holds.
    fn complete_until(&self, now: u64) -> u64;

    /// The feed it is a line of (an index into the horizons).
    fn feed(&self) -> usize;
}

/// Each feed's horizon into `horizons` (one per feed): the time up to which
/// every line of the feed has its datagrams all in hand, at most `now`.
#[inline]
pub(crate) fn horizons<Q: Queue>(lines: &[Q], now: u64, horizons: &mut [u64]) {
    horizons.fill(now);
    for line in lines {
        if let Some(h) = horizons.get_mut(line.feed()) {
            *h = (*h).min(key(line.complete_until(now), now));
        }
    }
}

/// The line whose next datagram arrived first among those at or before
/// its feed's horizon (the first line on a tie), and that datagram's
/// arrival (`now` for one stamped more than [`AHEAD_NS`] ahead); `None`
/// when no line has one.
#[inline]
pub(crate) fn pick<Q: Queue>(lines: &[Q], now: u64, horizons: &[u64]) -> Option<(usize, u64)> {
    let mut pick: Option<(usize, u64)> = None;
    for (i, line) in lines.iter().enumerate() {
        if let Some(t) = line.next_arrival() {
            let t = key(t, now);
            let horizon = horizons.get(line.feed()).copied().unwrap_or(now);
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
        feed: usize,
        told: Told,
    }

    impl Queue for TestLine {
        fn feed(&self) -> usize {
            self.feed
        }
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
                self.told.horizon(now)
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
                feed: 0,
                told: Told::default(),
            }
        }

        /// [`new`](Self::new), a line of feed `feed`.
        fn of(feed: usize, arrivals: Vec<u64>, capacity: usize) -> TestLine {
            TestLine {
                feed,
                ..TestLine::new(arrivals, capacity)
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
    /// (line, index, time) in order, or `None` if cycles with datagrams
    /// pending applied nothing 8 times in a row.
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
            let mut h = [0; 2];
            horizons(lines, now, &mut h);
            let before = out.len();
            while let Some((i, t)) = pick(lines, now, &h) {
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
            if idle >= 8 {
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
    fn arrivals_far_ahead_of_the_clock_are_applied_at_the_clock() {
        // The clock stepped back below every stamp: applied anyway, at `now`.
        let far = 100 + AHEAD_NS + 1;
        let mut lines = [
            TestLine::new(vec![far, far + 100], 8),
            TestLine::new(vec![far + 50], 8),
        ];
        let out = run(&mut lines, 2, |_| 100).expect("no stall");
        assert_eq!(out.len(), 3);
        assert!(out.iter().all(|o| o.2 == 100));
    }

    /// A receive held up 2 ms after the clock read (the thread preempted,
    /// a softirq on its core): line A's tick stamped 2 ms after the clock
    /// is no clock step, and waits with line B's earlier copy (0.5 ms)
    /// rather than jump ahead of it as arriving at the clock (a false
    /// loss on an SQF feed, taken at a 1 ms bound).
    #[test]
    fn a_receive_held_up_a_few_ms_is_no_clock_step() {
        let now = 100;
        let mut lines = [
            TestLine::new(vec![now + 2_000_000], 8),
            TestLine::new(vec![now + 500_000], 8),
        ];
        for line in &mut lines {
            line.queued = 1;
            line.receive();
        }
        let mut h = [0];
        horizons(&lines, now, &mut h);
        assert_eq!(pick(&lines, now, &h), None, "both wait for the clock");
        // The next cycle: B's copy first.
        let later = now + 3_000_000;
        horizons(&lines, later, &mut h);
        assert_eq!(pick(&lines, later, &h), Some((1, now + 500_000)));
    }

    #[test]
    fn a_datagram_stamped_after_the_clock_waits_for_the_other_line() {
        // Cycle 0 (clock 100): line A holds its tick stamped 105, received
        // after the clock was read; line B's copy of the earlier tick (102)
        // reaches the kernel only after B's receive. A's 105 must wait, or
        // B's 102 would come after it (a false gap on a full feed).
        let mut lines = [TestLine::new(vec![105], 8), TestLine::new(vec![102], 8)];
        lines[0].queued = 1;
        lines[0].receive();
        lines[1].receive();
        let mut h = [0];
        horizons(&lines, 100, &mut h);
        assert_eq!(pick(&lines, 100, &h), None, "105 waits past clock 100");
        lines[1].queued = 1;
        lines[1].receive();
        horizons(&lines, 110, &mut h);
        assert_eq!(pick(&lines, 110, &h), Some((1, 102)));
    }

    #[test]
    fn a_backlogged_feed_holds_back_no_other_feed() {
        // Feed 0's line holds a full batch of old datagrams (more wait in
        // the kernel): its horizon is its latest in hand, 20. Feed 1's
        // line, drained, has its datagrams up to the clock applied at once,
        // past feed 0's horizon; once feed 0 is past them too, by arrival.
        let mut lines = [
            TestLine::of(0, vec![10, 20, 30, 40], 2),
            TestLine::of(1, vec![25, 35], 8),
        ];
        lines[0].queued = 4;
        lines[1].queued = 2;
        for l in &mut lines {
            l.receive();
        }
        let mut h = [0; 2];
        horizons(&lines, 100, &mut h);
        assert_eq!(h, [20, 100]);
        let mut applied = Vec::new();
        while let Some((i, t)) = pick(&lines, 100, &h) {
            applied.push((i, t));
            lines[i].next += 1;
        }
        assert_eq!(applied, [(0, 10), (0, 20), (1, 25), (1, 35)]);
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

    /// Line B's receive fails while its kernel holds the copy of a tick
    /// (150) stamped before line A's next (200): A's waits, and once B
    /// receives again its copy comes first, as replay of what was
    /// received orders them. Receives that keep failing hold the feed
    /// back `FAILING_HOLD_NS` at most.
    #[test]
    fn a_failed_receive_claims_no_more_than_the_last_good_one() {
        let mut lines = [TestLine::new(vec![10, 200], 8), TestLine::new(vec![150], 8)];
        let mut h = [0];
        // Cycle at 100: A holds 10, B's queue is empty.
        lines[0].queued = 1;
        for l in &mut lines {
            l.receive();
        }
        lines[1].told.received(100, true);
        horizons(&lines, 100, &mut h);
        assert_eq!(pick(&lines, 100, &h), Some((0, 10)));
        lines[0].next += 1;
        // Cycle at 300: A holds 200; B's kernel holds 150, its receive fails.
        lines[0].queued = 2;
        lines[0].receive();
        lines[1].queued = 1;
        lines[1].told.failed();
        horizons(&lines, 300, &mut h);
        assert_eq!(h, [100]);
        assert_eq!(pick(&lines, 300, &h), None, "200 waits for B's queue");
        // Cycle at 400: B receives its copy, applied first.
        lines[1].receive();
        lines[1].told.received(400, true);
        horizons(&lines, 400, &mut h);
        assert_eq!(pick(&lines, 400, &h), Some((1, 150)));
        // Failing for good: the feed moves on, FAILING_HOLD_NS behind.
        let mut t = Told::default();
        t.received(100, true);
        t.failed();
        assert_eq!(t.horizon(100 + FAILING_HOLD_NS / 2), 100);
        let later = 100 + 3 * FAILING_HOLD_NS;
        assert_eq!(t.horizon(later), later - FAILING_HOLD_NS);
        // A full batch tells nothing past the last drain.
        t.received(later, false);
        t.failed();
        assert_eq!(t.horizon(later + 10), later - FAILING_HOLD_NS + 10);
        assert_eq!(t.horizon(50), 50, "at most the clock");
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
            let out = run(&mut lines, per_cycle, |c| clock + 50 * c).expect("stalled");
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
            let all = a.len() + b.len();
            let mut lines = [TestLine::new(a, cap), TestLine::new(b, cap)];
            let out = run(&mut lines, usize::MAX / 4, |_| 10_000).expect("stalled");
            prop_assert_eq!(out.len(), all);
            let times: Vec<u64> = out.iter().map(|o| o.2).collect();
            let mut sorted = times.clone();
            sorted.sort_unstable();
            prop_assert_eq!(times, sorted);
        }
    }
}
