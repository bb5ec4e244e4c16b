//! The re-request client's logic (spec itch50 §1 re-request, §3.2): which
//! MoldUDP64 requests to send for the feed's open gaps at a given time.
//! Pure: no socket, the time is passed in, and [`Requester::poll`] allocates
//! nothing (its table is sized at construction).
//!
//! Rules, per call with the missing ranges of the open gaps and `now`:
//!
//! - a range whose deadline is strictly before `now` is not asked for (the
//!   gap is given up at the next event; a range at its deadline still is);
//! - each request asks for at most `request_max` consecutive sequences, all
//!   inside one missing range: never beyond it, never a filled sequence;
//! - a sequence is asked for at most once per `request_interval`: a request
//!   sent less than that long ago covers it, and the next request starts
//!   after it; once the interval has passed it is asked for again, and so
//!   on until the deadline;
//! - at most `in_flight` requests are remembered per interval; when the
//!   table is full the call stops and the rest waits for a later call (a
//!   gap of a million messages is not asked for in one burst);
//! - at most `rate` requests a second leave in all, however many gaps are
//!   open (a token bucket holding at most a hundredth of a second's worth,
//!   at least one): when the credit runs out the call stops, the rest waits
//!   and counts in [`Requester::deferred`]. One forged packet naming a far
//!   sequence opens a gap of millions; without this cap the venue's server
//!   would be asked for all of it every interval.

use super::mold::Request;
use super::Session;

/// Requests remembered per interval by [`Requester::from_config`]: 1,024
/// requests of 40 messages (the default `request_max`) cover 40,960
/// missing messages per interval.
pub const IN_FLIGHT: usize = 1024;

/// ns in a second: the token bucket's unit of account.
const SECOND: u64 = 1_000_000_000;

/// Sequences `lo..hi` are missing, and their gap is given up after `deadline` (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Missing {
    /// First missing sequence.
    pub lo: u64,
    /// One past the last missing sequence.
    pub hi: u64,
    /// The gap's deadline, ns (local time).
    pub deadline: u64,
}

/// A request sent: sequences `lo..hi` at `at` (ns).
#[derive(Debug, Clone, Copy)]
struct Sent {
    lo: u64,
    hi: u64,
    at: u64,
}

/// Decides the re-requests of one feed.
#[derive(Debug, Clone)]
pub struct Requester {
    max: u64,
    interval: u64,
    capacity: usize,
    /// Requests sent less than `interval` ago, sorted by `lo`. They never
    /// overlap (a request starts where none covers and ends before the
    /// next one), so the one covering a sequence, and the next one above
    /// it, are found by a binary search: a huge gap walked against a full
    /// table costs a logarithm a request, not a scan of the table.
    recent: Vec<Sent>,
    /// One request's cost in credit (ns of time: a second over the rate).
    cost: u64,
    /// Credit, in ns of time: one earned per ns, at most `burst`.
    credit: u64,
    /// The most credit kept: a hundredth of a second, at least one request.
    burst: u64,
    /// When credit was last earned, ns; `None` before the first poll.
    earned_at: Option<u64>,
    /// Polls that stopped for want of credit, or of room in the table.
    deferred: u64,
}

impl Requester {
    /// At most `request_max` messages a request (1 to 65,535; 0 counts as
    /// 1), a sequence at most once per `interval_ns`, at most `in_flight`
    /// (at least 1) requests per interval.
    pub fn new(request_max: u16, interval_ns: u64, in_flight: usize) -> Requester {
        let capacity = in_flight.max(1);
        Requester {
            max: u64::from(request_max.max(1)),
            interval: interval_ns,
            capacity,
            recent: Vec::with_capacity(capacity),
            cost: 0,
            credit: 0,
            burst: 0,
            earned_at: None,
            deferred: 0,
        }
        .with_rate(u32::MAX)
    }

    /// At most `per_second` requests a second in all (1 to 1,000,000,000;
    /// 0 counts as 1), in bursts of at most a hundredth of that (at least
    /// one). [`new`](Self::new) allows 1,000,000,000, which no poll reaches.
    pub fn with_rate(mut self, per_second: u32) -> Requester {
        self.cost = SECOND / u64::from(per_second.clamp(1, 1_000_000_000));
        self.burst = (SECOND / 100).max(self.cost);
        self.credit = self.burst;
        self
    }

    /// The feed's `request_max`, `request_interval_ms` and `request_rate`,
    /// [`IN_FLIGHT`] requests per interval.
    pub fn from_config(c: &super::config::ItchConfig) -> Requester {
        Requester::new(c.request_max, c.request_interval_ns, IN_FLIGHT).with_rate(c.request_rate)
    }

    /// The most requests one poll hands out (its table's room).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Polls that stopped because the rate's credit ran out, or the table
    /// of recent requests was full (requests due that waited for a later
    /// poll).
    pub fn deferred(&self) -> u64 {
        self.deferred
    }

    /// ns from the last poll until one request's credit is earned (0: it
    /// is there now): when a poll that was held back is worth repeating.
    pub fn credit_in(&self) -> u64 {
        self.cost.saturating_sub(self.credit)
    }

    /// Hands `send` the requests due at `now` (ns) for `session`, given
    /// its missing ranges (disjoint, any order). Returns how many went:
    /// a request `send` could not send (false: a full socket buffer, no
    /// route) is not taken as asked nor spends the rate's credit, so the
    /// next poll asks it again, and ends this poll (the next send would
    /// fail as well).
    pub fn poll(
        &mut self,
        session: Session,
        now: u64,
        missing: impl IntoIterator<Item = Missing>,
        mut send: impl FnMut(Request) -> bool,
    ) -> usize {
        let interval = self.interval;
        // A request made "after" now (the clock stepped back since) no
        // longer covers its sequences: kept, they were not asked for again
        // until the clock caught up with the step.
        self.recent
            .retain(|s| s.at <= now && now < s.at.saturating_add(interval));
        // Credit earned since the last poll (none for time going back,
        // which earns again from now on, not from before the step).
        if let Some(at) = self.earned_at {
            let earned = now.saturating_sub(at);
            self.credit = self.credit.saturating_add(earned).min(self.burst);
        }
        self.earned_at = Some(now);
        let mut sent = 0;
        for m in missing {
            if m.deadline < now {
                continue;
            }
            let mut a = m.lo;
            while a < m.hi {
                // Requests from `i` on start above `a`; the one before may
                // cover it.
                let i = self.recent.partition_point(|s| s.lo <= a);
                if let Some(s) = i
                    .checked_sub(1)
                    .map(|k| self.recent[k])
                    .filter(|s| a < s.hi)
                {
                    a = s.hi;
                    continue;
                }
                if self.recent.len() == self.capacity {
                    // Held back by the table of recent requests (each kept
                    // an interval): counted, as the rate's holds are.
                    self.deferred += 1;
                    return sent;
                }
                if self.credit < self.cost {
                    self.deferred += 1;
                    return sent;
                }
                self.credit -= self.cost;
                // Up to the range's end, the most a request holds, and the
                // next recent request above `a`.
                let mut end = m.hi.min(a.saturating_add(self.max));
                if let Some(next) = self.recent.get(i) {
                    end = end.min(next.lo);
                }
                let went = send(Request {
                    session,
                    sequence: a,
                    // end - a ≤ max ≤ 65,535.
                    count: (end - a) as u16,
                });
                if !went {
                    // Not sent: its credit kept for the next poll's try.
                    self.credit += self.cost;
                    return sent;
                }
                self.recent.insert(
                    i,
                    Sent {
                        lo: a,
                        hi: end,
                        at: now,
                    },
                );
                sent += 1;
                a = end;
            }
        }
        sent
    }

    /// Forgets the request from `lo` made at `now` (it did not go), giving
    /// its credit back: the next poll asks it again.
    pub fn forget(&mut self, lo: u64, now: u64) {
        if let Ok(i) = self.recent.binary_search_by_key(&lo, |s| s.lo) {
            if self.recent[i].at == now {
                self.recent.remove(i);
                self.credit = self.credit.saturating_add(self.cost).min(self.burst);
            }
        }
    }

    /// Forgets every request (a new session: its sequences are new). The
    /// rate's credit stays: a new session does not buy a burst.
    pub fn reset(&mut self) {
        self.recent.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: Session = Session(*b"TESTSESS01");
    const MS: u64 = 1_000_000;

    fn poll(r: &mut Requester, now: u64, missing: &[Missing]) -> Vec<(u64, u16)> {
        let mut out = Vec::new();
        let n = r.poll(S, now, missing.iter().copied(), |q| {
            assert_eq!(q.session, S);
            out.push((q.sequence, q.count));
            true
        });
        assert_eq!(n, out.len());
        out
    }

    fn gap(lo: u64, hi: u64, deadline: u64) -> Missing {
        Missing { lo, hi, deadline }
    }

    /// A feed's `request_max`, `request_rate` and `request_interval_ms`
    /// reach its requester: 8 sequences a request, 100 requests a second
    /// (a burst of one), a range asked again after 50 ms.
    #[test]
    fn the_configured_keys_shape_the_requests() {
        let text = "[[feed]]\nname = \"n\"\nprotocol = \"itch50\"\nlines = [\"127.0.0.1:4000\"]\n\
                    stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n\
                    recovery = \"127.0.0.1:18000\"\nrequest_max = 8\nrequest_rate = 100\n\
                    request_interval_ms = 50\n";
        let config = crate::config::Config::parse(text, "t").unwrap();
        let crate::config::ProtocolSettings::Itch50(c) = &config.feeds[0].settings else {
            panic!("not an itch50 feed");
        };
        let mut r = Requester::from_config(c);
        let missing = [gap(1, 1_000, 10_000 * MS)];
        assert_eq!(poll(&mut r, 0, &missing), [(1, 8)]);
        assert_eq!(poll(&mut r, 5 * MS, &missing), []);
        assert_eq!(poll(&mut r, 10 * MS, &missing), [(9, 8)]);
        // The first request's interval over: its range asked again.
        assert_eq!(poll(&mut r, 50 * MS, &missing), [(1, 8)]);
    }

    #[test]
    fn splits_to_the_maximum_and_stays_inside_the_range() {
        let mut r = Requester::new(64, 10 * MS, 100);
        let got = poll(&mut r, 0, &[gap(100, 250, 1000 * MS), gap(300, 301, 5)]);
        assert_eq!(got, [(100, 64), (164, 64), (228, 22), (300, 1)]);
    }

    #[test]
    fn rate_limited_then_resent_until_the_deadline() {
        let mut r = Requester::new(64, 10 * MS, 100);
        let g = [gap(10, 20, 25 * MS)];
        assert_eq!(poll(&mut r, 0, &g), [(10, 10)]);
        assert!(poll(&mut r, 9 * MS, &g).is_empty(), "within the interval");
        assert_eq!(poll(&mut r, 10 * MS, &g), [(10, 10)], "interval passed");
        assert!(poll(&mut r, 19 * MS, &g).is_empty(), "covered again");
        assert_eq!(poll(&mut r, 25 * MS, &g), [(10, 10)], "at the deadline");
        assert!(poll(&mut r, 26 * MS, &g).is_empty(), "past the deadline");
        let mut r = Requester::new(64, 10 * MS, 100);
        assert_eq!(poll(&mut r, 25 * MS, &g), [(10, 10)], "at the deadline");
        assert!(poll(&mut r, 40 * MS, &g).is_empty(), "past the deadline");
    }

    /// A request made "after" now (the clock stepped back since) covers
    /// nothing: its sequences are asked for again at once, not once the
    /// clock caught up with the step.
    #[test]
    fn a_clock_stepped_back_asks_again() {
        let mut r = Requester::new(64, 10 * MS, 100);
        let g = [gap(10, 20, 100_000 * MS)];
        assert_eq!(poll(&mut r, 60_000 * MS, &g), [(10, 10)]);
        assert!(
            poll(&mut r, 60_005 * MS, &g).is_empty(),
            "within the interval"
        );
        assert_eq!(poll(&mut r, 1_000 * MS, &g), [(10, 10)], "a minute back");
        assert!(
            poll(&mut r, 1_005 * MS, &g).is_empty(),
            "within the interval"
        );
    }

    #[test]
    fn a_fill_splits_the_range_and_nothing_filled_is_asked() {
        let mut r = Requester::new(4, 10 * MS, 100);
        assert_eq!(poll(&mut r, 0, &[gap(1, 9, MS * 100)]), [(1, 4), (5, 4)]);
        // 3..6 filled; the rest is still covered by the requests at 0.
        let left = [gap(1, 3, MS * 100), gap(6, 9, MS * 100)];
        assert!(poll(&mut r, 5 * MS, &left).is_empty());
        assert_eq!(poll(&mut r, 10 * MS, &left), [(1, 2), (6, 3)]);
        // A new gap next to a recent request starts after it.
        assert_eq!(poll(&mut r, 11 * MS, &[gap(8, 12, MS * 100)]), [(9, 3)]);
    }

    #[test]
    fn a_full_table_defers_the_rest() {
        let mut r = Requester::new(10, 10 * MS, 3);
        let g = [gap(0, 100, 1000 * MS)];
        assert_eq!(poll(&mut r, 0, &g), [(0, 10), (10, 10), (20, 10)]);
        assert_eq!(r.deferred(), 1, "held by the table");
        assert!(poll(&mut r, MS, &g).is_empty());
        assert_eq!(r.deferred(), 2);
        assert_eq!(poll(&mut r, 10 * MS, &g), [(0, 10), (10, 10), (20, 10)]);
        r.reset();
        assert_eq!(poll(&mut r, 11 * MS, &g).len(), 3);
    }

    #[test]
    fn the_rate_caps_requests_across_every_gap() {
        // 1,000 a second: a burst of ten (a hundredth of a second's worth),
        // then one a millisecond, whichever gap they are for.
        let mut r = Requester::new(1, 1_000 * MS, 1_000).with_rate(1_000);
        let g = [gap(0, 100, 10_000 * MS), gap(200, 300, 10_000 * MS)];
        let burst: Vec<_> = (0..10).map(|q| (q, 1)).collect();
        assert_eq!(poll(&mut r, 0, &g), burst);
        assert_eq!(r.deferred(), 1, "the eleventh waits");
        assert_eq!(r.credit_in(), MS);
        assert!(poll(&mut r, MS / 2, &g).is_empty(), "half a request earned");
        assert_eq!(r.credit_in(), MS / 2);
        assert_eq!(poll(&mut r, 3 * MS, &g), [(10, 1), (11, 1), (12, 1)]);
        // A quiet spell earns a burst at most; a new session buys nothing.
        r.reset();
        assert_eq!(poll(&mut r, 900 * MS, &g).len(), 10);
        assert!(poll(&mut r, 900 * MS, &g).is_empty());
        assert_eq!(r.deferred(), 5);
        // Time going back earns nothing then, and earns from there on (not
        // from before the step, which would hold every request back for
        // as long as the step).
        assert!(poll(&mut r, 500 * MS, &g).is_empty());
        assert_eq!(poll(&mut r, 501 * MS, &g).len(), 1);
        // A rate below a hundred a second still sends one at a time.
        let mut r = Requester::new(1, 1_000 * MS, 1_000).with_rate(2);
        assert_eq!(poll(&mut r, 0, &g), [(0, 1)]);
        assert!(poll(&mut r, 499 * MS, &g).is_empty());
        assert_eq!(poll(&mut r, 500 * MS, &g), [(1, 1)]);
    }

    proptest! {
        /// However the polls fall and whatever is missing, no more than a
        /// burst plus the rate times the elapsed time ever leaves.
        #[test]
        fn no_more_than_the_rate_ever_leaves(
            rate in 1u32..5_000,
            polls in prop::collection::vec(0u64..5 * MS, 1..60),
            gaps in prop::collection::vec((0u64..1_000, 1u64..200), 1..8),
        ) {
            let mut r = Requester::new(4, 2 * MS, 64).with_rate(rate);
            let cost = SECOND / u64::from(rate);
            let burst = (SECOND / 100 / cost).max(1);
            let missing: Vec<Missing> = gaps
                .iter()
                .map(|&(k, len)| gap(k * 1_000, k * 1_000 + len, u64::MAX))
                .collect();
            let (mut now, mut sent) = (0, 0u64);
            for step in polls {
                now += step;
                sent += poll(&mut r, now, &missing).len() as u64;
                // Credit is counted in whole ns: the burst and the time
                // earned may each leave a part of a request over.
                prop_assert!(sent <= burst + now / cost + 1, "{sent} by {now} ns");
            }
        }
    }

    /// A random run: disjoint gaps with deadlines, polls at increasing
    /// times, sequences filled at random between polls.
    #[derive(Debug, Clone)]
    struct Run {
        max: u16,
        interval: u64,
        gaps: Vec<(u64, u64, u64)>,
        steps: Vec<(u64, Vec<u64>)>,
    }

    fn run() -> impl Strategy<Value = Run> {
        (
            1u16..20,
            1u64..50,
            prop::collection::vec((1u64..40, 0u64..20, 0u64..200), 1..6),
            prop::collection::vec((0u64..15, prop::collection::vec(0u64..300, 0..10)), 1..40),
        )
            .prop_map(|(max, interval, raw, steps)| {
                let mut gaps = Vec::new();
                let mut lo = 1;
                for (len, space, deadline) in raw {
                    gaps.push((lo, lo + len, deadline));
                    lo += len + space;
                }
                let mut t = 0;
                let steps = steps
                    .into_iter()
                    .map(|(dt, fills)| {
                        t += dt;
                        (t, fills)
                    })
                    .collect();
                Run {
                    max,
                    interval,
                    gaps,
                    steps,
                }
            })
    }

    /// The requester as first written: requests kept in sending order,
    /// each lookup a scan of them. The sorted table must decide the same.
    fn scanned(
        (max, interval, capacity): (u64, u64, usize),
        recent: &mut Vec<Sent>,
        now: u64,
        missing: &[Missing],
    ) -> Vec<(u64, u16)> {
        recent.retain(|s| s.at.saturating_add(interval) > now || s.at > now);
        let mut out = Vec::new();
        for m in missing.iter().filter(|m| m.deadline >= now) {
            let mut a = m.lo;
            while a < m.hi {
                if let Some(s) = recent.iter().find(|s| s.lo <= a && a < s.hi) {
                    a = s.hi;
                    continue;
                }
                if recent.len() == capacity {
                    return out;
                }
                let mut end = m.hi.min(a.saturating_add(max));
                for s in recent.iter() {
                    if s.lo > a && s.lo < end {
                        end = s.lo;
                    }
                }
                out.push((a, (end - a) as u16));
                recent.push(Sent {
                    lo: a,
                    hi: end,
                    at: now,
                });
                a = end;
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn requests_cover_every_missing_sequence_within_limits(run in run()) {
            let mut r = Requester::new(run.max, run.interval, 10_000);
            let mut filled = std::collections::BTreeSet::new();
            let deadline_of = |q: u64| run.gaps.iter().find(|g| g.0 <= q && q < g.1).map(|g| g.2);
            // Last time each sequence was asked for.
            let mut asked: std::collections::BTreeMap<u64, u64> = Default::default();
            for (now, fills) in &run.steps {
                let now = *now;
                // The missing ranges now: each gap minus what was filled.
                let mut missing = Vec::new();
                for &(lo, hi, deadline) in &run.gaps {
                    let mut q = lo;
                    while q < hi {
                        if filled.contains(&q) { q += 1; continue; }
                        let start = q;
                        while q < hi && !filled.contains(&q) { q += 1; }
                        missing.push(Missing { lo: start, hi: q, deadline });
                    }
                }
                let mut reqs = Vec::new();
                r.poll(S, now, missing.iter().copied(), |q| {
                    reqs.push(q);
                    true
                });
                for q in &reqs {
                    prop_assert!(q.count >= 1 && q.count <= run.max, "{q:?}");
                    let (a, b) = (q.sequence, q.sequence + u64::from(q.count));
                    // Inside one missing range, whose gap is not past its deadline.
                    let inside = missing.iter().any(|m| m.lo <= a && b <= m.hi);
                    prop_assert!(inside, "{q:?} outside {missing:?}");
                    prop_assert!(deadline_of(a).unwrap() >= now);
                    for s in a..b {
                        if let Some(&at) = asked.get(&s) {
                            prop_assert!(now >= at + run.interval, "{s} asked at {at} and {now}");
                        }
                        asked.insert(s, now);
                    }
                }
                // Every missing sequence of a live gap has been asked for
                // within the last interval (by this poll or a recent one).
                for m in &missing {
                    if m.deadline < now { continue; }
                    for s in m.lo..m.hi {
                        let at = asked.get(&s).copied();
                        prop_assert!(at.is_some_and(|at| at + run.interval > now || at == now), "{s} not asked by {now}");
                    }
                }
                filled.extend(fills.iter().copied());
            }
        }

        /// The same requests, in the same order, as the scanning version:
        /// each poll draws its own missing ranges (so a range may span a
        /// request still recent above one that expired), in any order, with
        /// a table that fills up.
        #[test]
        fn the_sorted_table_decides_as_a_scan_does(
            max in 1u16..6,
            interval in 1u64..20,
            capacity in 1usize..12,
            steps in prop::collection::vec(
                (0u64..12, prop::collection::vec((0u64..4, 1u64..12, 0u64..3), 0..6), any::<bool>()),
                1..30,
            ),
        ) {
            let mut r = Requester::new(max, interval, capacity);
            let mut model = Vec::new();
            let mut now = 0;
            for (dt, ranges, reverse) in steps {
                now += dt;
                let mut missing = Vec::new();
                let mut lo = 1;
                for (space, len, late) in ranges {
                    lo += space;
                    // Now and then a range already past its deadline.
                    let deadline = if late == 0 { now.saturating_sub(1) } else { now + 100 };
                    missing.push(Missing { lo, hi: lo + len, deadline });
                    lo += len;
                }
                if reverse {
                    missing.reverse();
                }
                let got = poll(&mut r, now, &missing);
                let want = scanned((u64::from(max), interval, capacity), &mut model, now, &missing);
                prop_assert_eq!(got, want);
            }
        }
    }
}
