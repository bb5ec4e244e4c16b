//! The re-request client of a feed with a recovery server (spec itch50
//! §3.2): which requests are due for the stream's open gaps, and the time
//! each gap took to fill. The bytes go to whatever `send` the caller gives
//! (the sidecar's socket connected to the server, whose answers come back
//! as the feed's recovery line).
//!
//! Polled once per receive cycle, after the cycle's datagrams are applied,
//! so a request never delays applying data that is already in hand. Which
//! requests are due is [`Requester`]'s business; this side only collects
//! the missing ranges (bounded: [`RANGES`] per poll) and hands them out.
//! No allocation after construction.

use super::mold::Session;
use super::recovery::{Missing, Requester};
use super::sequencer::Sequencer;
use crate::shm::counter::{recovery_bucket_bound_ns as bucket_bound_ns, RECOVERY_BUCKETS};

/// Missing ranges handed to the requester per poll; the rest waits.
pub(crate) const RANGES: usize = 256;

/// After the rate held requests back, the soonest next look, ns.
const DEFERRED_POLL_NS: u64 = 1_000_000;

/// Open gaps whose opening time is remembered for the fill latency.
const TRACKED: usize = 64;

/// The bucket a fill latency of `ns` counts in.
fn bucket(ns: u64) -> usize {
    (0..RECOVERY_BUCKETS - 1)
        .find(|&i| ns <= bucket_bound_ns(i))
        .unwrap_or(RECOVERY_BUCKETS - 1)
}

/// One feed's re-request client.
#[derive(Debug)]
pub struct Client {
    requester: Requester,
    gap_timeout_ns: u64,
    /// `request_interval_ms`, ns: re-sends fall due this long after a request.
    interval_ns: u64,
    ranges: Vec<Missing>,
    session: Option<Session>,
    /// What the last poll saw: the stream's `high`, open gaps, gaps given up.
    seen: (u64, usize, u64),
    /// Next time to poll even if nothing changed (re-sends), ns.
    next_poll: u64,
    /// Open gaps: (lo, opened at ns).
    open: Vec<(u64, u64)>,
    /// Requests sent, and sends that failed.
    pub sent: u64,
    pub send_errors: u64,
    /// Gaps filled in time, by fill latency ([`bucket_bound_ns`]).
    pub latency: [u64; RECOVERY_BUCKETS],
}

impl Client {
    /// A client asking with `requester`, for gaps given up after
    /// `gap_timeout_ns`, re-sending after `interval_ns`.
    pub fn new(requester: Requester, gap_timeout_ns: u64, interval_ns: u64) -> Client {
        Client {
            requester,
            gap_timeout_ns,
            interval_ns,
            ranges: Vec::with_capacity(RANGES),
            session: None,
            seen: (0, 0, 0),
            next_poll: 0,
            open: Vec::with_capacity(TRACKED),
            sent: 0,
            send_errors: 0,
            latency: [0; RECOVERY_BUCKETS],
        }
    }

    /// Hands the requests due at `now` (ns since the Unix epoch) for the
    /// stream's open gaps to `send` (true when it went out), and notes gaps
    /// that closed. Returns the requests handed out.
    pub fn poll(
        &mut self,
        seq: &Sequencer,
        session: Option<Session>,
        now: u64,
        mut send: impl FnMut(&[u8]) -> bool,
    ) -> usize {
        if session != self.session {
            self.session = session;
            self.requester.reset();
            self.open.clear();
        }
        let seen = (seq.high(), seq.gaps_open(), seq.counters().gaps_given_up);
        let changed = seen != self.seen;
        let given_up = seen.2 != self.seen.2;
        self.seen = seen;
        if changed {
            self.track(seq, given_up, now);
        }
        let Some(session) = session else { return 0 };
        if seen.1 == 0 || (!changed && now < self.next_poll) {
            return 0;
        }
        // Re-sends fall due one interval after a request: look again at a
        // quarter of it.
        self.next_poll = now.saturating_add((self.interval_ns / 4).max(1));
        self.ranges.clear();
        let ranges = &mut self.ranges;
        seq.missing(|lo, hi, deadline| {
            ranges.push(Missing { lo, hi, deadline });
            ranges.len() < RANGES
        });
        let Client {
            requester,
            ranges,
            sent,
            send_errors,
            ..
        } = self;
        let deferred = requester.deferred();
        let n = requester.poll(session, now, ranges.iter().copied(), |r| {
            if send(&r.encode()) {
                *sent += 1;
            } else {
                *send_errors += 1;
            }
        });
        if requester.deferred() != deferred {
            // Held back by the rate: look again once a request's credit is
            // earned (a millisecond at least, so that a high rate is not
            // polled for every request), not a quarter interval later (up to
            // 15 s, past most deadlines).
            let credit = now.saturating_add(requester.credit_in().max(DEFERRED_POLL_NS));
            self.next_poll = self.next_poll.min(credit);
        }
        n
    }

    /// Times the rate held requests back for a later poll.
    pub fn deferred(&self) -> u64 {
        self.requester.deferred()
    }

    /// Follows the open gaps: a gap no longer open that was not given up
    /// was filled, and its latency (from the arrival of the packet that
    /// revealed it, its deadline less the timeout) is counted.
    fn track(&mut self, seq: &Sequencer, given_up: bool, now: u64) {
        let timeout = self.gap_timeout_ns;
        let mut i = 0;
        while i < self.open.len() {
            let (lo, opened) = self.open[i];
            if seq.has_gap_at(lo) {
                i += 1;
                continue;
            }
            // Gone: filled, unless gaps were given up since the last look
            // (then it may have been one of them, and is not counted).
            if !given_up {
                self.latency[bucket(now.saturating_sub(opened))] += 1;
            }
            self.open.swap_remove(i);
        }
        for (lo, _, _, deadline) in seq.gaps() {
            if self.open.len() == TRACKED {
                break;
            }
            if !self.open.iter().any(|&(l, _)| l == lo) {
                self.open.push((lo, deadline.saturating_sub(timeout)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_double_from_16_us_and_the_last_is_open() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(16_000), 0);
        assert_eq!(bucket(16_001), 1);
        assert_eq!(bucket(32_000), 1);
        assert_eq!(bucket(u64::MAX), RECOVERY_BUCKETS - 1);
        assert_eq!(
            bucket(bucket_bound_ns(RECOVERY_BUCKETS - 2) + 1),
            RECOVERY_BUCKETS - 1
        );
    }
}
