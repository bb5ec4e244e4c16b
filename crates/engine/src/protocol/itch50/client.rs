//! The re-request client of a feed with a recovery server (spec itch50
//! §3.2): which requests are due for the stream's open gaps (the time each
//! took to fill is the sequencer's, `fill_latency`). The bytes go to whatever `send` the caller gives
//! (the sidecar's channel socket, which sends to the server unconnected
//! and takes its answers, by their sender, as the feed's recovery line).
//!
//! Polled once per receive cycle, after the cycle's datagrams are applied,
//! so a request never delays applying data that is already in hand. Which
//! requests are due is [`Requester`]'s business; this side only collects
//! the missing ranges (bounded: [`RANGES`] per poll) and hands them out.
//! No allocation after construction.

use super::mold::Session;
use super::recovery::{Missing, Requester};
use super::sequencer::Sequencer;

/// Missing ranges handed to the requester per poll; the rest waits.
pub(crate) const RANGES: usize = 256;

/// After the rate held requests back, the soonest next look, ns.
const DEFERRED_POLL_NS: u64 = 1_000_000;

/// One feed's re-request client.
#[derive(Debug)]
pub struct Client {
    requester: Requester,
    /// `request_interval_ms`, ns: re-sends fall due this long after a request.
    interval_ns: u64,
    ranges: Vec<Missing>,
    session: Option<Session>,
    /// What the last poll saw: the stream's `high`, open gaps, gaps given up.
    seen: (u64, usize, u64),
    /// Next time to poll even if nothing changed (re-sends), ns.
    next_poll: u64,
    /// Requests sent, and sends that failed.
    pub sent: u64,
    pub send_errors: u64,
    /// Since the server last answered (in this session): when the first
    /// and the second request went (ns), and the requests sent.
    unanswered: Option<(u64, Option<u64>, u64)>,
    /// The server's silence was told, not its answering again yet.
    silence_told: bool,
    /// The first sequence of each request the last poll handed out, in
    /// order (room for a poll's most), and `unanswered` before it: what
    /// [`unsent`](Self::unsent) takes back.
    polled: Vec<u64>,
    unanswered_before: Option<(u64, Option<u64>, u64)>,
}

impl Client {
    /// A client asking with `requester`, for gaps given up after
    /// re-sending after `interval_ns`.
    pub fn new(requester: Requester, interval_ns: u64) -> Client {
        Client {
            polled: Vec::with_capacity(requester.capacity()),
            unanswered_before: None,
            requester,
            interval_ns,
            ranges: Vec::with_capacity(RANGES),
            session: None,
            seen: (0, 0, 0),
            next_poll: 0,
            sent: 0,
            send_errors: 0,
            unanswered: None,
            silence_told: false,
        }
    }

    /// The server answered (a datagram from it on the channel): true when
    /// its silence had been told.
    pub fn on_answer(&mut self) -> bool {
        self.unanswered = None;
        std::mem::take(&mut self.silence_told)
    }

    /// Once per silence of the server: the requests it left unanswered and
    /// for how long (ns, from the first), once two of them each went
    /// unanswered for `after_ns` at `now` (a gap's deadline: one answer
    /// lost on the way is no silence). A server that never answers is
    /// otherwise told by nothing but gaps given up, which look like the
    /// network's loss: every send succeeds (the socket is not connected,
    /// so an ICMP unreachable is lost).
    pub fn silence(&mut self, now: u64, after_ns: u64) -> Option<(u64, u64)> {
        let (first, second, n) = self.unanswered?;
        let silent = now.saturating_sub(first);
        let long = second.is_some_and(|s| now.saturating_sub(s) >= after_ns);
        if self.silence_told || !long {
            return None;
        }
        self.silence_told = true;
        Some((n, silent))
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
        // A new session's gaps are its own: none was asked yet, however
        // like the last session's its sequences look.
        let new_session = session != self.session;
        if new_session {
            self.session = session;
            self.requester.reset();
            // The last session's requests are not this one's to answer.
            self.unanswered = None;
        }
        let seen = (seq.high(), seq.gaps_open(), seq.counters().gaps_given_up);
        let changed = new_session || seen != self.seen;
        self.seen = seen;
        let Some(session) = session else { return 0 };
        // Not due before `next_poll`, unless the clock stepped back to
        // before the last poll (it would wait for the whole step).
        let quarter = (self.interval_ns / 4).max(1);
        let due = crate::time::retry_due(now, self.next_poll, quarter);
        if seen.1 == 0 || (!changed && !due) {
            return 0;
        }
        // Re-sends fall due one interval after a request: look again at a
        // quarter of it.
        self.next_poll = now.saturating_add(quarter);
        self.ranges.clear();
        let ranges = &mut self.ranges;
        seq.missing(|lo, hi, deadline| {
            ranges.push(Missing { lo, hi, deadline });
            ranges.len() < RANGES
        });
        self.polled.clear();
        self.unanswered_before = self.unanswered;
        let Client {
            requester,
            ranges,
            sent,
            send_errors,
            unanswered,
            polled,
            ..
        } = self;
        let deferred = requester.deferred();
        let mut failed = false;
        let n = requester.poll(session, now, ranges.iter().copied(), |r| {
            let went = send(&r.encode());
            if went {
                *sent += 1;
                polled.push(r.sequence);
                note_sent(unanswered, now);
            } else {
                *send_errors += 1;
                failed = true;
            }
            went
        });
        if failed {
            // Not taken as asked: asked again soon, not a quarter
            // interval later.
            self.next_poll = self.next_poll.min(now.saturating_add(DEFERRED_POLL_NS));
        }
        if requester.deferred() != deferred && requester.credit_in() > 0 {
            // Held back by the rate: look again once a request's credit is
            // earned (a millisecond at least, so that a high rate is not
            // polled for every request), not a quarter interval later (up to
            // 15 s, past most deadlines). (Held by a full table, a quarter
            // interval: its requests age out no sooner.)
            let credit = now.saturating_add(requester.credit_in().max(DEFERRED_POLL_NS));
            self.next_poll = self.next_poll.min(credit);
        }
        n
    }

    /// The last `n` requests the last poll (at `now`) handed out did not
    /// go (queued by the caller, then refused by the socket): taken back,
    /// counted as send errors, and asked again at the next poll, a
    /// millisecond on.
    pub fn unsent(&mut self, n: usize, now: u64) {
        let n = n.min(self.polled.len());
        let kept = self.polled.len() - n;
        // From the highest: each removal shifts only what lies above it.
        for &lo in self.polled[kept..].iter().rev() {
            self.requester.forget(lo, now);
        }
        self.polled.truncate(kept);
        self.sent -= n as u64;
        self.send_errors += n as u64;
        // As if only the requests that went had been sent.
        self.unanswered = self.unanswered_before;
        for _ in 0..kept {
            note_sent(&mut self.unanswered, now);
        }
        self.next_poll = self.next_poll.min(now.saturating_add(DEFERRED_POLL_NS));
    }

    /// Times the rate, or a full table of recent requests, held requests
    /// back for a later poll.
    pub fn deferred(&self) -> u64 {
        self.requester.deferred()
    }
}

/// A request sent at `now`, into the record of those unanswered since
/// the server last answered: (first, second, count).
fn note_sent(unanswered: &mut Option<(u64, Option<u64>, u64)>, now: u64) {
    *unanswered = Some(match *unanswered {
        None => (now, None, 1),
        Some((first, second, n)) => (first, second.or(Some(now)), n + 1),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::itch50::message::encode;
    use crate::protocol::itch50::mold::{Packet, PacketBuilder};
    use crate::protocol::itch50::sequencer::Settings;

    const MS: u64 = 1_000_000;
    const S1: Session = Session(*b"20260105XA");

    /// A stream with gap timeout `gap_timeout_ns` that received, at `t`,
    /// one message packets of `session` at each of `firsts`.
    fn with_packets(gap_timeout_ns: u64, session: Session, firsts: &[u64], t: u64) -> Sequencer {
        let mut seq = Sequencer::new(Settings {
            gap_timeout_ns,
            max_held: 1_000,
            join_gap_max: 10_000,
        });
        for &first in firsts {
            let mut b = PacketBuilder::new(session, first);
            b.message(&encode::delete(0, first, first));
            let p = Packet::new_checked(b.finish()).unwrap();
            seq.on_packet(&p, t, &mut |_, _| {});
        }
        seq
    }

    /// Re-sends fall due a quarter interval after a poll, and at once
    /// after the clock stepped back to before it (not once it caught up
    /// with the step).
    #[test]
    fn a_clock_stepped_back_polls_again() {
        let t = 60_000 * MS;
        let seq = with_packets(1_000_000 * MS, S1, &[1, 5], t);
        assert_eq!(seq.gaps_open(), 1);
        let mut c = Client::new(Requester::new(64, 100 * MS, 100), 100 * MS);
        let poll = |c: &mut Client, now| c.poll(&seq, Some(S1), now, |_| true);
        assert_eq!(poll(&mut c, t), 1, "the gap [2, 5)");
        assert_eq!(poll(&mut c, t + 10 * MS), 0, "within a quarter interval");
        assert_eq!(poll(&mut c, t + 100 * MS), 1, "re-sent after the interval");
        assert_eq!(poll(&mut c, 1_000 * MS), 1, "a minute back: at once");
        assert_eq!(poll(&mut c, 1_010 * MS), 0);
    }

    /// A request that could not be sent (a full socket buffer) is asked
    /// again at the next poll a millisecond on, not an interval later;
    /// the poll it failed in sends nothing after it.
    #[test]
    fn a_request_not_sent_is_asked_again_soon() {
        let t = 60_000 * MS;
        // Gaps at 2 and 4.
        let seq = with_packets(60_000 * MS, S1, &[1, 3, 5], t);
        // A rate of 10 a second, a burst of one: the failed send keeps its
        // credit.
        let requester = Requester::new(64, 60_000 * MS, 100).with_rate(10);
        let mut c = Client::new(requester, 60_000 * MS);
        let mut tries = 0;
        assert_eq!(
            c.poll(&seq, Some(S1), t, |_| {
                tries += 1;
                false
            }),
            0
        );
        assert_eq!(
            (tries, c.sent, c.send_errors),
            (1, 0, 1),
            "the rest not tried"
        );
        assert_eq!(c.poll(&seq, Some(S1), t + MS / 2, |_| true), 0, "not yet");
        let mut asked = Vec::new();
        let n = c.poll(&seq, Some(S1), t + MS, |r| {
            asked.push(r[10..18].to_vec());
            true
        });
        assert_eq!((n, c.sent), (1, 1), "the failed one again");
        assert_eq!(asked[0], 2u64.to_be_bytes());
    }

    /// Requests handed out and then refused by the socket (sent in a
    /// batch after the poll) are taken back: counted as send errors, not
    /// sent, and asked again at the next poll a millisecond on, their
    /// credit given back.
    #[test]
    fn requests_the_batch_could_not_send_are_asked_again() {
        let t = 60_000 * MS;
        let seq = with_packets(60_000 * MS, S1, &[1, 3, 5, 7], t);
        // A burst of three: the gaps 2, 4 and 6, all handed out.
        let requester = Requester::new(64, 60_000 * MS, 100).with_rate(300);
        let mut c = Client::new(requester, 60_000 * MS);
        assert_eq!(c.poll(&seq, Some(S1), t, |_| true), 3);
        // The last two did not go.
        c.unsent(2, t);
        assert_eq!((c.sent, c.send_errors), (1, 2));
        let mut asked = Vec::new();
        let n = c.poll(&seq, Some(S1), t + MS, |r| {
            asked.push(u64::from_be_bytes(r[10..18].try_into().unwrap()));
            true
        });
        assert_eq!(
            (n, asked),
            (2, vec![4, 6]),
            "the two again, with their credit"
        );
        assert_eq!(c.sent, 3);
        // The one that went at `t` counts alone among those unanswered:
        // one request, no silence however long.
        let requester = Requester::new(64, 60_000 * MS, 100).with_rate(300);
        let mut c = Client::new(requester, 60_000 * MS);
        assert_eq!(c.poll(&seq, Some(S1), t, |_| true), 3);
        c.unsent(2, t);
        assert_eq!(c.silence(t + 10_000 * MS, 10 * MS), None);
    }

    /// A session change asks for the new session's gaps at once, though
    /// they lie where the last session's were asked for within the
    /// interval: the requests of one session do not cover another's.
    #[test]
    fn a_new_sessions_gaps_are_asked_at_once() {
        let sequencer = |session| with_packets(1_000 * MS, session, &[1, 5], 60_000 * MS);
        let s2 = Session(*b"20260105XB");
        let (one, two) = (sequencer(S1), sequencer(s2));
        let mut c = Client::new(Requester::new(64, 60_000 * MS, 100), 60_000 * MS);
        let mut asked = Vec::new();
        let t = 60_000 * MS;
        let mut poll = |c: &mut Client, seq, session, now| {
            c.poll(seq, Some(session), now, |r| {
                asked.push(r.to_vec());
                true
            })
        };
        assert_eq!(poll(&mut c, &one, S1, t), 1, "[2, 5) of the first");
        assert_eq!(poll(&mut c, &two, s2, t + MS), 1, "[2, 5) of the second");
        assert_eq!(poll(&mut c, &two, s2, t + 2 * MS), 0);
        assert_eq!(&asked[1][..10], b"20260105XB", "{:?}", asked[1]);
        assert_eq!(asked[0][10..], asked[1][10..], "the same sequences");
    }

    /// Requests held back by the rate are looked at again once a
    /// request's credit is earned (here 10 ms), not a quarter interval
    /// (15 s) later; those held by a full table of recent requests wait
    /// for the quarter interval (they age out no sooner).
    #[test]
    fn a_rate_hold_looks_again_once_credit_is_earned() {
        let t = 60_000 * MS;
        // Five gaps: 2, 4, 6, 8, 10.
        let seq = with_packets(1_000_000 * MS, S1, &[1, 3, 5, 7, 9, 11], t);
        assert_eq!(seq.gaps_open(), 5);
        let requester = Requester::new(64, 60_000 * MS, 100).with_rate(100);
        let mut c = Client::new(requester, 60_000 * MS);
        let poll = |c: &mut Client, now| c.poll(&seq, Some(S1), now, |_| true);
        assert_eq!(poll(&mut c, t), 1, "a burst of one");
        assert_eq!(c.deferred(), 1);
        assert_eq!(poll(&mut c, t + 5 * MS), 0, "before the credit");
        assert_eq!(poll(&mut c, t + 11 * MS), 1, "once it is earned");
        // A table of two, full: not looked at again before a quarter.
        let requester = Requester::new(64, 60_000 * MS, 2);
        let mut c = Client::new(requester, 60_000 * MS);
        assert_eq!(poll(&mut c, t), 2);
        assert_eq!(c.deferred(), 1, "held by the table");
        assert_eq!(poll(&mut c, t + 11 * MS), 0);
        assert_eq!(c.deferred(), 1, "not looked at again");
    }
}
