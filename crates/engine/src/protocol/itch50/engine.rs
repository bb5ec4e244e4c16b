//! An ITCH 5.0 feed as the handler drives it: the feed's own stream, books
//! and symbols ([`feed::Feed`]), what it publishes into the shared table
//! ([`Publisher`]), and the logs it owes operators (a new session, an end
//! of session, lines that disagree), each rate-limited.

use super::client::Client;
use super::config::{read_password, GlimpseConfig, ItchConfig, RECOVERY_LINE};
use super::connection::{Connection, Target};
use super::driver::Driver;
use super::feed::{self, FileBatch, Settings};
use super::glimpse::Failure;
use super::publish::Publisher;
use super::recovery::Requester;
use super::snapshot::{self, SpinSettings};
use super::{mold, sequencer, Reject};
use crate::clock::OffsetMode;
use crate::engine::{Cx, FeedCounters, FeedEngine, Reason, Segment, View};
use crate::shm::{counter, Publication};
use crate::symbol::Symbol;
use crate::verdict::Reasons;

/// At most one session or mismatch log line per feed per this interval, ns
/// of arrival time.
const LOG_INTERVAL_NS: u64 = 1_000_000_000;

impl Reason for Reject {
    const ALL: &'static [Reject] = &Reject::ALL;
    fn index(self) -> usize {
        Reject::index(self)
    }
    fn as_str(self) -> &'static str {
        Reject::as_str(self)
    }
    fn hint(self) -> &'static str {
        // A framing that does not hold is what another protocol's
        // datagrams (SQF on the group, say) look like; a bad message
        // inside good framing is not.
        match self {
            Reject::Short
            | Reject::ControlWithBody
            | Reject::BlockHeaderOverrun
            | Reject::BlockOverrun
            | Reject::EmptyBlock
            | Reject::TrailingBytes => " (not MoldUDP64?)",
            Reject::TooShortForType | Reject::BadStock => "",
        }
    }
}

/// One ITCH feed's engine.
#[derive(Debug)]
pub struct Engine {
    /// The stream, books and symbols.
    feed: feed::Feed,
    /// The writer into a shared table (`None` when the table is the
    /// handler's own, as in replay).
    publisher: Option<Box<Publisher>>,
    /// Arrival time of the last A/B mismatch logged, ns.
    last_mismatch_log: Option<u64>,
    /// When the last session line was logged (receive time, ns).
    last_session_log: Option<u64>,
    /// The session whose start was logged and whose end is not yet.
    logged_session: Option<mold::Session>,
    /// The end of the current session is logged.
    session_ended: bool,
    /// A new session came when no line was due: the session in force is
    /// logged once one is (at the next catch-up), so that the last line
    /// names it.
    session_unlogged: bool,
    /// The re-request client, with a recovery server.
    client: Option<Client>,
    /// The recovery server, and the gap timeout (ns): a silence of the
    /// server as long is told.
    recovery: Option<(std::net::SocketAddrV4, u64)>,
    /// The server's silences told at most once a minute (a server that
    /// answers now and then, with a gap timeout of a few ms, would start
    /// and end one every few ms; one that starts within the minute is told
    /// when it is up, if it lasts). Its end is told only after a silence
    /// was ([`Client::on_answer`]).
    silence_log: crate::ratelimit::Limiter,
    /// GLIMPSE snapshots, with a snapshot server.
    snapshot: Option<Box<Driver>>,
    /// The snapshot server's settings (to go live).
    glimpse: Option<GlimpseConfig>,
    /// The feed's settings (to size a live connection's staging states).
    settings: Settings,
}

impl Engine {
    /// An engine for an `itch50` feed with settings `c`, its clock offset
    /// by `offset`, offset queues of at most `offset_queue` entries;
    /// `shared`: the table lives in shared memory, so what the messages
    /// change is published, once per receive cycle and before each check.
    pub fn new(c: &ItchConfig, offset: OffsetMode, offset_queue: usize, shared: bool) -> Engine {
        let timezone = jiff::tz::db()
            .get(&c.timezone)
            .unwrap_or(jiff::tz::TimeZone::UTC);
        let settings = Settings {
            sequencing: sequencer::Settings {
                gap_timeout_ns: c.gap_timeout_ns,
                max_held: c.max_held,
                join_gap_max: c.join_gap_max,
            },
            timezone,
            offset,
            offset_queue,
            orders: 1 << 16,
            max_orders: c.max_orders,
            max_symbols: c.max_symbols,
        };
        let mut feed = feed::Feed::new(settings.clone());
        let snapshot = c.glimpse.as_ref().map(|g| {
            feed.enable_snapshots(g.triggers);
            Box::new(Driver::new(
                snapshot::Settings {
                    max_attempts: g.max_attempts,
                    retry_ns: g.retry_ns,
                    retry_max_ns: g.retry_max_ns,
                },
                SpinSettings {
                    session_check: g.session_check,
                    max_messages: g.max_messages,
                    idle_ns: g.idle_ns,
                    timeout_ns: g.timeout_ns,
                },
            ))
        });
        let publisher = shared.then(|| {
            feed.track_touched(true);
            Box::new(Publisher::new(c.max_symbols))
        });
        Engine {
            feed,
            publisher,
            last_mismatch_log: None,
            last_session_log: None,
            logged_session: None,
            session_ended: false,
            session_unlogged: false,
            client: c
                .recovery
                .map(|_| Client::new(Requester::from_config(c), c.request_interval_ns)),
            recovery: c.recovery.map(|r| (r, c.gap_timeout_ns)),
            silence_log: crate::ratelimit::Limiter::new(60_000_000_000),
            snapshot,
            glimpse: c.glimpse.clone(),
            settings,
        }
    }

    /// Starts the snapshot connection's thread, for a feed with `glimpse`
    /// (live only: a replay reads the recorded connections). Reads the
    /// password; an error names the key and its variable or file only.
    pub fn start_snapshots(&mut self, name: &str) -> Result<(), String> {
        let (Some(driver), Some(g)) = (&mut self.snapshot, &self.glimpse) else {
            return Ok(());
        };
        let password = read_password(&g.password)?;
        let target = Target {
            server: g.server,
            user: g.user.clone(),
            idle_ns: g.idle_ns,
            timeout_ns: g.timeout_ns,
        };
        let connection = Connection::spawn(name, target, password, self.settings.clone())
            .map_err(|e| format!("feed {name}: the snapshot connection's thread: {e}"))?;
        driver.go_live(connection);
        Ok(())
    }

    /// The snapshots' counters, for a feed with `glimpse`.
    pub fn snapshots(&self) -> Option<&snapshot::Counters> {
        self.snapshot.as_ref().map(|d| d.snapshots().counters())
    }

    /// The feed's stream, books and symbols.
    pub fn feed(&self) -> &feed::Feed {
        &self.feed
    }

    /// The same, to watch it (`--explain`) or replay a BinaryFILE into it.
    pub fn feed_mut(&mut self) -> &mut feed::Feed {
        &mut self.feed
    }

    /// Applies BinaryFILE records back to back: `f` hands them to the batch
    /// ([`FileBatch::record`]), and the counters are copied once at the end.
    pub fn file_batch<R>(
        &mut self,
        counters: &mut FeedCounters,
        f: impl FnOnce(&mut FileBatch<'_>) -> R,
    ) -> R {
        let r = f(&mut self.feed.file_batch());
        copy_counters(&self.feed, counters);
        r
    }

    /// Record `index` (0-based) of a BinaryFILE: its source time when it
    /// was valid and applied (spec itch50 §5).
    pub fn on_file_record(
        &mut self,
        counters: &mut FeedCounters,
        index: u64,
        record: &[u8],
    ) -> Option<u64> {
        let t = self.feed.on_file_record(index, record);
        copy_counters(&self.feed, counters);
        t
    }

    /// Writes what the messages changed into the shared table, and the
    /// clock offset into the publication (nothing without a publisher).
    fn publish(&mut self, cx: &mut Cx<'_>) {
        let Some(p) = &mut self.publisher else {
            return;
        };
        let (config, id, offset) = (cx.config, cx.id, self.feed.offset());
        crate::shm::publish_around_offset(cx.publication, id, offset, || {
            p.publish(id, &mut self.feed, cx.table, |s| config.thresholds_for(s))
        });
        cx.counters.table_full = p.table_full;
    }

    /// Whether a session line may be logged at `t`: none for a
    /// [`LOG_INTERVAL_NS`] (or the clock stepped back).
    fn session_log_due(&self, t: u64) -> bool {
        self.last_session_log
            .is_none_or(|last| t.saturating_sub(last) >= LOG_INTERVAL_NS || t < last)
    }

    /// Logs the session in force after new sessions that came while no
    /// line was due (a flood of forged ones, say): the log's last word on
    /// sessions is the one the feed follows.
    #[cold]
    fn session_settled(&mut self, name: &str, t: u64) {
        self.session_unlogged = false;
        self.last_session_log = Some(t);
        let session = self.feed.session().unwrap_or_default();
        self.logged_session = Some(session);
        let changes = self.feed.sequencer().counters().session_changes;
        tracing::info!(feed = %name, %session, changes, "sessions changed since the last line: this one now");
    }

    /// Logs a new session or an end of session, once each per session
    /// and at most one line per interval, but for the end of a session
    /// whose start was logged: packets naming a new session each (forged
    /// or not), with or without an end, must not flood the log.
    #[cold]
    fn session_event(&mut self, name: &str, new: bool, t: u64) {
        self.session_ended = !new;
        let session = self.feed.session().unwrap_or_default();
        let changes = self.feed.sequencer().counters().session_changes;
        let paired = !new && self.logged_session == Some(session);
        if !(paired || self.session_log_due(t)) {
            self.session_unlogged |= new;
            return;
        }
        self.session_unlogged = false;
        self.last_session_log = Some(t);
        if new {
            self.logged_session = Some(session);
            tracing::info!(feed = %name, %session, changes, "new session: books start empty");
        } else {
            self.logged_session = None;
            tracing::info!(feed = %name, %session, "end of session: the market is closed");
        }
    }

    /// Logs (at most once per interval) that line A's and line B's copies
    /// of a packet differed; the feed counts them.
    #[cold]
    fn line_mismatch(&mut self, name: &str, t: u64) {
        let due = self
            .last_mismatch_log
            .is_none_or(|last| t.saturating_sub(last) >= LOG_INTERVAL_NS || t < last);
        if due {
            let total = self.feed.line_check().mismatches();
            tracing::warn!(
                feed = %name,
                total,
                "line A and line B carried different messages under the same sequence: the venue or the network corrupted one"
            );
            self.last_mismatch_log = Some(t);
        }
    }
}

impl FeedEngine for Engine {
    type Reject = Reject;
    type Summary = super::summary::FeedSummary;

    /// What the datagram changes is published by the next
    /// [`catch_up`](FeedEngine::catch_up) (once per receive cycle, and
    /// before each check), each symbol once however many of the cycle's
    /// datagrams touched it; but a datagram that starts a new session
    /// first has what the old one changed published, as it would have
    /// been before its books are dropped.
    #[inline]
    fn on_datagram(
        &mut self,
        mut cx: Cx<'_>,
        line: usize,
        payload: &[u8],
        t: u64,
    ) -> Result<(), Reject> {
        if self.publisher.is_some()
            && !self.feed.touched().is_empty()
            && line != RECOVERY_LINE
            && self.feed.starts_session(payload)
        {
            self.publish(&mut cx);
        }
        // (The recovery line's answers only: read for none else.)
        let wrong_session =
            (line == RECOVERY_LINE).then(|| self.feed.counters().recovery_wrong_session);
        let result = self
            .feed
            .on_datagram_line(payload, line, t)
            .map(|(out, mismatch)| {
                if mismatch {
                    self.line_mismatch(&cx.config.name, t);
                }
                if out.new_session || (out.end_of_session && !self.session_ended) {
                    self.session_event(&cx.config.name, out.new_session, t);
                }
                out.abandoned
            });
        // An answer: valid, and of the session in force (a datagram from
        // the server's address that is neither says nothing of it).
        let answered = wrong_session
            .is_some_and(|w| result.is_ok() && self.feed.counters().recovery_wrong_session == w);
        if let Some(c) = self.client.as_mut().filter(|_| answered) {
            if c.on_answer() {
                tracing::info!(
                    feed = %cx.config.name,
                    requests_sent = c.sent,
                    "the recovery server answers again"
                );
            }
        }
        if let Some(d) = &mut self.snapshot {
            // An expiry before the datagram may have triggered one too.
            let abandoned = result.unwrap_or(false);
            d.after(&mut self.feed, abandoned, t, &cx.config.name);
        }
        let result = result.map(|_| ());
        // A live feed's counters are read after the cycle's catch_up (the
        // heartbeat's publish_counters), which copies them; a replay's are
        // read between datagrams (its progress), so copied after each.
        if self.publisher.is_none() {
            copy_counters(&self.feed, cx.counters);
        }
        result
    }

    fn messages_in(&self, payload: &[u8]) -> u64 {
        mold::message_count(payload) as u64
    }

    fn offset(&self) -> i128 {
        self.feed.offset()
    }

    fn offset_merges(&self) -> u64 {
        self.feed.offset_merges()
    }

    /// Gives up the gaps whose deadline is strictly before `now` (spec
    /// itch50 §3.2) and publishes what that changed.
    fn catch_up(&mut self, mut cx: Cx<'_>, now: u64) {
        if self.session_unlogged && self.session_log_due(now) {
            self.session_settled(&cx.config.name, now);
        }
        self.feed.expire(now);
        if let (Some(c), Some((server, after))) = (&mut self.client, self.recovery) {
            // Asked only once a line is due: a silence that starts within
            // the minute is told when the minute is up, if it lasts.
            let silence = self
                .silence_log
                .is_due(now)
                .then(|| c.silence(now, after))
                .flatten();
            if let Some((unanswered, for_ns)) = silence {
                self.silence_log.due(now, true);
                tracing::warn!(
                    feed = %cx.config.name,
                    recovery = %server,
                    unanswered,
                    silent_ms = for_ns / 1_000_000,
                    "re-requests got no answer from the recovery server: the gaps they ask for are given up at their deadline (check `recovery`: the server's address and port, the server running, a firewall on the way back)"
                );
            }
        }
        if let Some(d) = &mut self.snapshot {
            d.after(&mut self.feed, false, now, &cx.config.name);
            d.poll(&mut self.feed, now, &cx.config.name);
        }
        self.feed.settle();
        copy_counters(&self.feed, cx.counters);
        self.publish(&mut cx);
    }

    fn summary(&mut self, _: View<'_>, counters: &FeedCounters) -> Self::Summary {
        let mut s = super::summary::FeedSummary::new(counters, &mut self.feed);
        s.snapshot = self
            .snapshots()
            .map(|c| Box::new(super::summary::SnapshotSummary::new(&self.feed, c)));
        s
    }

    fn on_segment(&mut self, cx: Cx<'_>, segment: &Segment<'_>, t: u64) {
        if let Some(d) = &mut self.snapshot {
            // As a live cycle: deadlines first (a gap given up is a
            // trigger), then the connection.
            self.feed.expire(t);
            d.after(&mut self.feed, false, t, &cx.config.name);
            d.on_segment(&mut self.feed, segment, t, &cx.config.name);
            if self.publisher.is_none() {
                copy_counters(&self.feed, cx.counters);
            }
        }
    }

    /// A snapshot for a feed with `glimpse` and a session, `auto` or not
    /// (glimpse G3.1).
    /// The feed starts awaiting when the connection starts, as a replay
    /// of the recording starts it at its SYN: what arrives until then is
    /// applied in both (awaiting from the request, live held it, and the
    /// replay applied it).
    fn resync(&mut self, _cx: View<'_>, now: u64) -> bool {
        let Some(d) = &mut self.snapshot else {
            return false;
        };
        self.feed.sequencer().may_request() && d.request(&self.feed, now)
    }

    fn record_wire(&mut self) {
        if let (Some(d), Some(g)) = (&mut self.snapshot, &self.glimpse) {
            d.record(g.server);
        }
    }

    fn drain_wire(&mut self, f: &mut dyn FnMut(u64, &crate::engine::WireSegment<'_>)) {
        if let Some(d) = &mut self.snapshot {
            d.drain_wire(f);
        }
    }

    fn carry_over(&mut self, old: &mut Self) {
        if let (Some(d), Some(o)) = (&mut self.snapshot, &mut old.snapshot) {
            d.carry_over(o);
        }
    }

    fn go_live(&mut self, cx: View<'_>) -> Result<(), String> {
        self.start_snapshots(&cx.config.name)
    }

    fn verdict(&mut self, cx: View<'_>, symbol: Symbol, now: u64) -> Reasons {
        let th = cx.config.thresholds_for(symbol);
        self.feed.settled().verdict(symbol, th, now)
    }

    /// Applies the books' price levels on a second thread
    /// ([`feed::Feed::pipeline_books`]).
    fn pipeline(&mut self, on: bool) {
        self.feed.pipeline_books(on);
    }

    fn settle(&mut self) {
        self.feed.settle();
    }

    fn poll_requests(&mut self, now: u64, send: impl FnMut(&[u8]) -> bool) -> usize {
        let Some(client) = &mut self.client else {
            return 0;
        };
        client.poll(self.feed.sequencer(), self.feed.session(), now, send)
    }

    fn requests_unsent(&mut self, n: usize, now: u64) {
        if let Some(c) = &mut self.client {
            c.unsent(n, now);
        }
    }

    fn requests_sent(&self) -> u64 {
        self.client.as_ref().map_or(0, |c| c.sent)
    }

    fn on_clock_stepped_back(&mut self, now: u64) {
        self.feed.on_clock_stepped_back(now);
    }

    /// The shared counters, the symbols the full table refused, the feed
    /// status flags, then the stream's (spec itch50 §3): its sequence,
    /// gaps and their recovery, sessions, books.
    fn counters() -> Vec<crate::shm::Descriptor> {
        use crate::engine::{shared_counters, status_flags};
        use crate::shm::{CounterKind, Descriptor};
        let (c, g) = (Descriptor::counter, Descriptor::gauge);
        let mut v = shared_counters::<Reject>();
        v.push(c(counter::TABLE_FULL, "table_full_symbols").metric("table_full_symbols_total"));
        v.extend(status_flags());
        v.extend([
            g(counter::NEXT, "next").metric("feed_next_sequence"),
            g(counter::HIGH, "high").metric("feed_high_sequence"),
            g(counter::HELD, "held").metric("feed_held_messages"),
            g(counter::GAPS_OPEN, "gaps_open"),
            c(counter::RECOVERED, "recovered").metric("feed_recovered_messages_total"),
            c(counter::REQUESTS_SENT, "requests_sent"),
            c(counter::REQUESTS_DEFERRED, "requests_deferred"),
            c(counter::REQUEST_ERRORS, "request_errors"),
            c(counter::GAPS_EXPIRED, "gaps_expired"),
            c(counter::LINE_MISMATCHES, "line_mismatches"),
            c(counter::SESSION_CHANGES, "session_changes"),
            c(counter::STALE_SESSION, "stale_session").metric("feed_stale_session_packets_total"),
            Descriptor::new(counter::SESSION_LO, CounterKind::Text, "session").width(2),
            c(counter::UNKNOWN_ORDERS, "unknown_orders"),
            c(counter::ANOMALIES, "anomalies"),
            c(counter::INVALID_RECORDS, "invalid_records"),
            c(counter::ORDERS_REFUSED, "orders_refused"),
            c(counter::RECOVERY_WRONG_SESSION, "recovery_wrong_session"),
            c(counter::CHANNEL_WRONG_SOURCE, "recovery_wrong_source"),
            c(counter::SYMBOLS_REFUSED, "symbols_refused"),
            // Snapshots (glimpse G4, G7.1): zero and empty for a feed
            // without them.
            Descriptor::new(counter::SNAPSHOT_STATE, CounterKind::Text, "snapshot_state"),
            g(counter::SNAPSHOT_AWAITING, "snapshot_awaiting").metric("feed_snapshot_awaiting"),
            c(counter::SNAPSHOTS, "snapshots"),
            c(counter::SNAPSHOT_ATTEMPTS, "snapshot_attempts"),
        ]);
        v.extend(Failure::ALL.iter().map(|f| {
            c(counter::SNAPSHOT_FAILURES + f.index(), "snapshot_failures").attr("class", f.as_str())
        }));
        v.extend([
            c(counter::SNAPSHOT_GAVE_UP, "snapshot_gave_up"),
            c(counter::SNAPSHOT_DISCARDED, "snapshot_discarded"),
            c(counter::SNAPSHOT_OVERFLOW, "snapshot_overflow"),
            g(counter::SNAPSHOT_NEXT, "snapshot_next")
                .metric("feed_snapshot_next")
                .param(crate::shm::ZERO_IS_NONE),
            Descriptor::new(
                counter::SNAPSHOT_SESSION,
                CounterKind::Text,
                "snapshot_session",
            )
            .width(2),
            // The last merged spin's, a level: exported as a counter it
            // would keep the largest spin's.
            g(counter::SNAPSHOT_MESSAGES, "snapshot_messages").metric("feed_snapshot_messages"),
        ]);
        v.extend((0..counter::SNAPSHOT_BUCKETS).map(|i| {
            Descriptor::new(
                counter::SNAPSHOT_LATENCY + i,
                CounterKind::Bucket,
                "snapshot_latency",
            )
            .metric("feed_snapshot_latency_seconds")
            .param(counter::snapshot_bucket_bound_ns(i))
        }));
        v.extend((0..counter::RECOVERY_BUCKETS).map(|i| {
            let last = i + 1 == counter::RECOVERY_BUCKETS;
            Descriptor::new(
                counter::RECOVERY_LATENCY + i,
                CounterKind::Bucket,
                "recovery_latency",
            )
            .metric("feed_recovery_latency_seconds")
            .param(if last {
                u64::MAX
            } else {
                counter::recovery_bucket_bound_ns(i)
            })
        }));
        v
    }

    fn write_counters(&self, p: &Publication, id: u16) {
        let it = &self.feed;
        let q = it.sequencer();
        let s = q.counters();
        let session = it.session().map_or([0; 10], |s| s.0);
        let mut lo = [0u8; 8];
        let mut hi = [0u8; 8];
        lo.copy_from_slice(&session[..8]);
        hi[..2].copy_from_slice(&session[8..]);
        for (k, v) in [
            (counter::NEXT, q.next().unwrap_or(0)),
            (counter::HIGH, q.high()),
            (counter::HELD, q.held() as u64),
            (counter::GAPS_OPEN, q.gaps_open() as u64),
            (counter::RECOVERED, s.recovered),
            (counter::SESSION_CHANGES, s.session_changes),
            (counter::STALE_SESSION, s.stale_session),
            (counter::UNKNOWN_ORDERS, it.counters().unknown_orders),
            (counter::ANOMALIES, it.counters().anomalies),
            (counter::GAPS_EXPIRED, s.gaps_given_up),
            (counter::LINE_MISMATCHES, it.line_check().mismatches()),
            (counter::SESSION_LO, u64::from_le_bytes(lo)),
            (counter::SESSION_HI, u64::from_le_bytes(hi)),
            (counter::INVALID_RECORDS, it.counters().invalid_records),
            (counter::ORDERS_REFUSED, it.counters().orders_refused),
            (
                counter::RECOVERY_WRONG_SESSION,
                it.counters().recovery_wrong_session,
            ),
            (counter::SYMBOLS_REFUSED, it.counters().symbols_refused),
        ] {
            p.set_counter(id, k, v);
        }
        if let Some(d) = &self.snapshot {
            let s = d.snapshots().counters();
            let q = it.sequencer();
            let state: &[u8] = if q.awaiting() { b"awaiting" } else { b"idle" };
            let mut text = [0u8; 8];
            text[..state.len()].copy_from_slice(state);
            let session = s.session.map_or([0; 10], |x| {
                let mut t = [0u8; 10];
                let trimmed = super::soup::trim(&x);
                t[..trimmed.len()].copy_from_slice(trimmed);
                t
            });
            let mut lo = [0u8; 8];
            let mut hi = [0u8; 8];
            lo.copy_from_slice(&session[..8]);
            hi[..2].copy_from_slice(&session[8..]);
            for (k, v) in [
                (counter::SNAPSHOT_STATE, u64::from_le_bytes(text)),
                (counter::SNAPSHOT_AWAITING, u64::from(q.awaiting())),
                (counter::SNAPSHOT_ATTEMPTS, s.attempts),
                (counter::SNAPSHOT_GAVE_UP, s.gave_up),
                (counter::SNAPSHOT_DISCARDED, q.counters().snapshot_discarded),
                (counter::SNAPSHOT_OVERFLOW, q.counters().snapshot_overflow),
                (counter::SNAPSHOT_NEXT, s.next.unwrap_or(0)),
                (counter::SNAPSHOT_SESSION, u64::from_le_bytes(lo)),
                (counter::SNAPSHOT_SESSION + 1, u64::from_le_bytes(hi)),
                (counter::SNAPSHOT_MESSAGES, s.messages),
            ] {
                p.set_counter(id, k, v);
            }
            for (i, n) in s.failures.iter().enumerate() {
                p.set_counter(id, counter::SNAPSHOT_FAILURES + i, *n);
            }
            for (i, n) in s.latency.iter().enumerate() {
                p.set_counter(id, counter::SNAPSHOT_LATENCY + i, *n);
            }
        }
        if let Some(r) = &self.client {
            p.set_counter(id, counter::REQUESTS_SENT, r.sent);
            p.set_counter(id, counter::REQUEST_ERRORS, r.send_errors);
            p.set_counter(id, counter::REQUESTS_DEFERRED, r.deferred());
        }
        // Every gap filled, by its other line or the recovery server.
        for (i, n) in q.counters().fill_latency.iter().enumerate() {
            p.set_counter(id, counter::RECOVERY_LATENCY + i, *n);
        }
    }
}

/// The stream's counters of the feed, in the handler's per-feed form.
fn copy_counters(it: &feed::Feed, c: &mut FeedCounters) {
    let s = it.sequencer().counters();
    c.messages = s.messages;
    c.heartbeats = s.heartbeats;
    c.duplicates = s.duplicates;
    c.line_copies = it.line_check().copied_messages();
    c.ticks_lost = s.ticks_lost;
    c.snapshots = s.snapshots;
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::handler::Handler;
    use crate::protocol::itch50::message::encode;
    use crate::protocol::itch50::mold::PacketBuilder;
    use crate::protocol::itch50::{Session, Side};
    use crate::shm::Publication;
    use crate::state::{Record, StateTable};
    use crate::symbol::Symbol;
    use std::sync::Arc;

    /// A configuration of one ITCH feed on two lines, after `head`.
    fn config(head: &str) -> Config {
        let feed = r#"
[[feed]]
name = "nq"
protocol = "itch50"
lines = ["239.9.9.1:9000", "239.9.9.2:9000"]
stale_threshold_ms = 1000
source_threshold_ms = 1000
"#;
        Config::parse(&format!("{head}{feed}"), "t").unwrap()
    }

    /// A recovery server that answers nothing is told once its silence
    /// outlasts a gap's deadline with two requests or more unanswered
    /// (every send succeeds: nothing else says so), and its answering
    /// again is told too; a server that answers is never told silent.
    #[test]
    fn a_silent_recovery_server_is_told_once() {
        const MS: u64 = 1_000_000;
        // A feed re-requesting from a server on loopback, a second's gaps.
        let recovering = || {
            Handler::new(
                &Config::parse(
                    "[[feed]]\nname = \"nq\"\nprotocol = \"itch50\"\nlines = [\"239.9.9.1:9000\"]\n\
                     recovery = \"127.0.0.1:18000\"\ngap_timeout_ms = 1000\n\
                     request_interval_ms = 100\nstale_threshold_ms = 1000\n\
                     source_threshold_ms = 1000\n",
                    "t",
                )
                .unwrap(),
            )
        };
        let mut h = recovering();
        let packet = |seq: u64| {
            let mut b = PacketBuilder::new(Session(*b"SESSION001"), seq);
            b.message(&encode::system_event(seq, b'Q'));
            b.finish()
        };
        let t = 1_000 * MS;
        let log = crate::test_log::logs_of(|| {
            h.on_datagram_line(0, 0, &packet(1), t).unwrap();
            h.on_datagram_line(0, 0, &packet(3), t).unwrap();
            // A request every 100 ms, for 1.5 s: the gap given up at 1 s,
            // another opened and asked for at once.
            for k in 0..15 {
                let now = t + k * 100 * MS;
                if k == 11 {
                    h.on_datagram_line(0, 0, &packet(5 + k), now).unwrap();
                }
                h.poll_requests(0, now, |_| true);
                h.before_check(0, now);
            }
        });
        let told: Vec<&str> = log.lines().filter(|l| l.contains("no answer")).collect();
        assert_eq!(told.len(), 1, "{log}");
        assert!(told[0].contains("recovery=127.0.0.1:18000"), "{log}");
        // The second request (at 100 ms) unanswered for the gap's second.
        assert!(told[0].contains("silent_ms=1100"), "{log}");
        // Garbage from the server's address, and a packet of another
        // session, are no answer.
        let log = crate::test_log::logs_of(|| {
            let at = t + 1_990 * MS;
            let line = super::RECOVERY_LINE;
            assert!(h.on_datagram_line(0, line, b"garbage", at).is_err());
            let mut other = PacketBuilder::new(Session(*b"SESSION002"), 4);
            other.message(&encode::system_event(4, b'Q'));
            h.on_datagram_line(0, line, &other.finish(), at).unwrap();
        });
        assert!(!log.contains("answers again"), "{log}");
        // An answer (here the server's copy of 4, on the recovery line).
        let log = crate::test_log::logs_of(|| {
            h.on_datagram_line(0, super::RECOVERY_LINE, &packet(4), t + 2_000 * MS)
                .unwrap();
        });
        assert!(log.contains("answers again"), "{log}");
        // Silent again within the minute and answered within it: not told
        // (nor, then, its end); silent past the minute: told once it is up.
        let silent_again = |h: &mut Handler, from: u64, seq: u64| {
            crate::test_log::logs_of(|| {
                h.on_datagram_line(0, 0, &packet(seq + 2), from).unwrap();
                for k in 0..15 {
                    h.poll_requests(0, from + k * 100 * MS, |_| true);
                    h.before_check(0, from + k * 100 * MS);
                }
                h.on_datagram_line(0, super::RECOVERY_LINE, &packet(seq + 1), from + 1_500 * MS)
                    .unwrap();
            })
        };
        let log = silent_again(&mut h, t + 3_000 * MS, 16);
        assert!(
            !log.contains("no answer") && !log.contains("answers again"),
            "{log}"
        );
        let log = silent_again(&mut h, t + 70_000 * MS, 18);
        assert!(
            log.contains("no answer") && log.contains("answers again"),
            "{log}"
        );
        // Silent again within the minute, and for good: told once the
        // minute since the last line is up.
        let log = crate::test_log::logs_of(|| {
            let from = t + 75_000 * MS;
            h.on_datagram_line(0, 0, &packet(22), from).unwrap();
            for k in 0..700 {
                h.poll_requests(0, from + k * 100 * MS, |_| true);
                h.before_check(0, from + k * 100 * MS);
            }
        });
        let told: Vec<&str> = log.lines().filter(|l| l.contains("no answer")).collect();
        assert_eq!(told.len(), 1, "{log}");
        // Answered within the gap's time: never told.
        let mut h = recovering();
        let log = crate::test_log::logs_of(|| {
            h.on_datagram_line(0, 0, &packet(1), t).unwrap();
            for k in 0..30 {
                let now = t + k * 100 * MS;
                // A new gap each time, the last one answered.
                h.on_datagram_line(0, 0, &packet(3 + 2 * k), now).unwrap();
                h.poll_requests(0, now, |_| true);
                h.on_datagram_line(0, super::RECOVERY_LINE, &packet(2 + 2 * k), now + MS)
                    .unwrap();
                h.before_check(0, now + MS);
            }
        });
        assert!(!log.contains("no answer"), "{log}");
        // One answer lost (its gap filled by the line), then another
        // request an hour later: no silence told before that one too went
        // unanswered for the gap's second.
        let mut h = recovering();
        let hour = 3_600_000 * MS;
        let log = crate::test_log::logs_of(|| {
            h.on_datagram_line(0, 0, &packet(1), t).unwrap();
            h.on_datagram_line(0, 0, &packet(3), t).unwrap();
            assert_eq!(h.poll_requests(0, t, |_| true), 1);
            h.on_datagram_line(0, 0, &packet(2), t + MS).unwrap();
            h.on_datagram_line(0, 0, &packet(5), t + hour).unwrap();
            assert_eq!(h.poll_requests(0, t + hour, |_| true), 1);
            h.before_check(0, t + hour + MS);
            h.before_check(0, t + hour + 999 * MS);
        });
        assert!(!log.contains("no answer"), "{log}");
        let log = crate::test_log::logs_of(|| h.before_check(0, t + hour + 1_000 * MS));
        assert!(log.contains("no answer"), "{log}");
    }

    /// An ITCH feed's duplicates split as SQF's do: the other line's copy
    /// of a packet is a line copy, a packet twice on one line is not.
    #[test]
    fn itch_line_copies_are_the_other_lines_copies() {
        let mut h = Handler::new(&config(""));
        let packet_of = |session: [u8; 10], seq: u64| {
            let mut b = PacketBuilder::new(Session(session), seq);
            b.message(&encode::system_event(seq, b'Q'));
            b.message(&encode::system_event(seq + 1, b'Q'));
            b.finish()
        };
        let packet = |seq: u64| packet_of(*b"SESSION001", seq);
        for seq in (1..=20).step_by(2) {
            // B is sometimes ahead of A, sometimes behind.
            let lines = if seq % 3 == 0 { [1, 0] } else { [0, 1] };
            for line in lines {
                h.on_datagram_line(0, line, &packet(seq), seq).unwrap();
            }
        }
        let c = &h.feeds()[0].counters;
        assert_eq!((c.duplicates, c.line_copies, c.ticks_lost), (20, 20, 0));
        // The same packet again on line A, then on B: duplicates, not line
        // copies.
        h.on_datagram_line(0, 0, &packet(19), 30).unwrap();
        h.on_datagram_line(0, 1, &packet(19), 30).unwrap();
        let c = &h.feeds()[0].counters;
        assert_eq!((c.duplicates, c.line_copies), (24, 20));
        // A new session on A; then B's late copy of the old session's
        // packet has no effect but its count (spec §3.1).
        let old = packet_of(*b"SESSION001", 21);
        h.on_datagram_line(0, 0, &old, 31).unwrap();
        h.on_datagram_line(0, 0, &packet_of(*b"SESSION002", 1), 32)
            .unwrap();
        h.on_datagram_line(0, 1, &old, 33).unwrap();
        let c = &h.feeds()[0].counters;
        assert_eq!((c.duplicates, c.line_copies), (24, 20));
        // A packet running past 2^64 − 1 on both lines: only its numbered
        // messages are copies (the rest are not read), so the duplicates
        // that were not line copies never fall.
        let mut b = PacketBuilder::new(Session(*b"SESSION002"), u64::MAX - 1);
        for _ in 0..5 {
            b.message(&encode::system_event(0, b'Q'));
        }
        let end = b.finish();
        h.on_datagram_line(0, 0, &end, 34).unwrap();
        h.on_datagram_line(0, 1, &end, 35).unwrap();
        let c = &h.feeds()[0].counters;
        assert_eq!((c.duplicates, c.line_copies), (26, 22));
    }

    /// A handler whose table lives in a publication under `dir`.
    fn shared_handler(config: &Config, dir: &std::path::Path) -> Handler {
        let feeds = crate::protocol::publication_feeds(config);
        let p =
            Publication::create(&dir.join("tickguard"), 0o600, 4, &feeds, 0, 1_000_000).unwrap();
        Handler::with_table(config, StateTable::shared(Arc::new(p)), 1024)
    }

    /// What readers of a handler's publication and counters see: every
    /// slot (but its write count), the feed's status and its counters
    /// (as text: a side without a price holds a NaN).
    fn seen(h: &Handler) -> String {
        let records: Vec<Record> = h.records().map(|r| Record { version: 0, ..r }).collect();
        let status = h.table().feed_status(0);
        format!("{records:?}\n{status:?}\n{:?}", h.feeds()[0].counters)
    }

    /// A live feed publishes once per receive cycle, and its counters are
    /// read after the cycle: at each cycle's end, readers see what they saw
    /// when every datagram was published and counted as it came, though a
    /// session starts in the middle of a cycle, just after a stock new to
    /// the table, and the table is too small for the next session's.
    #[test]
    fn a_cycle_publishes_what_each_datagram_would_have() {
        let config = config("[state]\ncapacity = 4\n");
        let stocks = ["AAPL", "MSFT", "NVDA", "TSLA", "QQQ"].map(|s| Symbol::parse(s).unwrap());
        let packet = |session: &[u8; 10], seq: u64, messages: &[Vec<u8>]| {
            let mut b = PacketBuilder::new(Session(*session), seq);
            for m in messages {
                b.message(m);
            }
            b.finish()
        };
        let add = |locate: u16, order: u64, side, price| {
            let stock = stocks[usize::from(locate) - 1];
            encode::add_order(locate, order, order, side, 100, stock, price, None)
        };
        let s1 = b"SESSION001";
        let s2 = b"SESSION002";
        let datagrams: Vec<(usize, Vec<u8>)> = vec![
            (
                0,
                packet(s1, 1, &[encode::stock_directory(1, 1, stocks[0])]),
            ),
            (
                0,
                packet(
                    s1,
                    2,
                    &[
                        add(1, 1, Side::Buy, 100_000),
                        add(2, 2, Side::Sell, 200_000),
                    ],
                ),
            ),
            (
                1,
                packet(s1, 1, &[encode::stock_directory(1, 1, stocks[0])]),
            ),
            (
                0,
                packet(
                    s1,
                    4,
                    &[add(1, 3, Side::Sell, 101_000), add(3, 4, Side::Buy, 1_000)],
                ),
            ),
            (
                1,
                packet(
                    s1,
                    2,
                    &[
                        add(1, 1, Side::Buy, 100_000),
                        add(2, 2, Side::Sell, 200_000),
                    ],
                ),
            ),
            (
                0,
                packet(
                    s1,
                    6,
                    &[encode::delete(1, 6, 1), add(2, 5, Side::Buy, 199_000)],
                ),
            ),
            // A stock new to the table, then a new session, in one cycle.
            (0, packet(s1, 8, &[add(4, 6, Side::Buy, 5_000)])),
            (
                0,
                packet(
                    s2,
                    1,
                    &[add(5, 1, Side::Buy, 7_000), add(1, 2, Side::Sell, 9_000)],
                ),
            ),
            (1, packet(s1, 8, &[add(4, 6, Side::Buy, 5_000)])),
            (0, packet(s2, 3, &[add(2, 3, Side::Buy, 150_000)])),
            (
                1,
                packet(
                    s2,
                    1,
                    &[add(5, 1, Side::Buy, 7_000), add(1, 2, Side::Sell, 9_000)],
                ),
            ),
            (0, packet(s2, 4, &[encode::executed(2, 4, 3, 50, 1)])),
        ];
        let dirs = [(); 2].map(|_| {
            tempfile::Builder::new()
                .prefix("tickguard-itch-cycle-")
                .tempdir_in("/dev/shm")
                .unwrap()
        });
        let mut each = shared_handler(&config, dirs[0].path());
        let mut cycles = shared_handler(&config, dirs[1].path());
        for (cycle, chunk) in datagrams.chunks(4).enumerate() {
            for (k, (line, datagram)) in chunk.iter().enumerate() {
                let t = (cycle * 4 + k) as u64 + 1;
                each.on_datagram_line(0, *line, datagram, t).unwrap();
                each.upkeep(t);
                cycles.on_datagram_line(0, *line, datagram, t).unwrap();
            }
            let now = (cycle * 4 + chunk.len()) as u64;
            each.upkeep(now);
            cycles.upkeep(now);
            assert_eq!(seen(&cycles), seen(&each), "after cycle {cycle}");
        }
        assert_eq!(cycles.table().len(), 4, "the table is full");
        assert_eq!(cycles.feeds()[0].counters.table_full, 1);
    }

    /// Forged Stock Directory messages, in a new session each time, do
    /// not take the table shared by every feed: the ITCH feed holds at
    /// most its `max_symbols` slots over the run (slots are never freed,
    /// so a session's own bound is not enough), and the SQF feed beside it
    /// still places its symbol.
    #[test]
    fn forged_sessions_take_no_more_than_max_symbols_slots() {
        let config = Config::parse(
            "[state]\ncapacity = 4\n\
             [[feed]]\nname = \"nq\"\nprotocol = \"itch50\"\nlines = [\"239.9.9.1:9000\"]\n\
             stale_threshold_ms = 1000\nsource_threshold_ms = 1000\nmax_symbols = 3\n\
             [[feed]]\nname = \"lp\"\nkind = \"full\"\nlines = [\"239.9.9.3:9000\"]\n\
             stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n",
            "t",
        )
        .unwrap();
        let dir = tempfile::Builder::new()
            .prefix("tickguard-itch-forged-")
            .tempdir_in("/dev/shm")
            .unwrap();
        let mut h = shared_handler(&config, dir.path());
        for j in 0..5u64 {
            let session = format!("FORGED{j:04}");
            let mut b = PacketBuilder::new(Session(*session.as_bytes().first_chunk().unwrap()), 1);
            for k in 0..3u16 {
                let stock = Symbol::parse(&format!("F{j}{k}")).unwrap();
                b.message(&encode::stock_directory(k + 1, 1, stock));
            }
            h.on_datagram_line(0, 0, &b.finish(), j + 1).unwrap();
            h.upkeep(j + 1);
        }
        assert_eq!(h.table().len(), 3, "the first session's three");
        assert_eq!(h.feeds()[0].counters.table_full, 12);
        let mut b = crate::protocol::sqf::PacketBuilder::new(0);
        b.quote(Symbol::parse("XAU").unwrap(), 1, 1, 1.0, 2.0);
        h.on_datagram_line(1, 0, &b.finish(), 10).unwrap();
        h.upkeep(10);
        assert_eq!(h.table().len(), 4);
        assert_eq!(h.feeds()[1].counters.table_full, 0);
    }

    /// A session change empties the slots the ended session published,
    /// once: a slot a later session leaves alone is not written again at
    /// each of its changes (a session per datagram would rewrite every
    /// slot the feed ever wrote, each time).
    #[test]
    fn a_session_change_writes_only_the_ended_sessions_slots() {
        let config = config("[state]\ncapacity = 4\n");
        let dir = tempfile::Builder::new()
            .prefix("tickguard-itch-sessions-")
            .tempdir_in("/dev/shm")
            .unwrap();
        let mut h = shared_handler(&config, dir.path());
        let stocks: Vec<Symbol> = (0..4)
            .map(|i| Symbol::parse(&format!("S{i:03}")).unwrap())
            .collect();
        let packet = |j: u64, symbols: &[Symbol]| {
            let mut b = PacketBuilder::new(
                Session(*format!("S{j:09}").as_bytes().first_chunk().unwrap()),
                1,
            );
            for (k, s) in symbols.iter().enumerate() {
                let locate = k as u16 + 1;
                b.message(&encode::add_order(
                    locate,
                    1,
                    k as u64 + 1,
                    Side::Buy,
                    1,
                    *s,
                    10,
                    None,
                ));
            }
            b.finish()
        };
        let versions = |h: &Handler| -> Vec<u64> {
            let mut v: Vec<(String, u64)> = h
                .records()
                .filter_map(|r| Some((r.symbol?.to_string(), r.version)))
                .collect();
            v.sort();
            v.into_iter().map(|(_, n)| n).collect()
        };
        h.on_datagram_line(0, 0, &packet(0, &stocks), 1).unwrap();
        h.upkeep(1);
        let published = versions(&h);
        assert_eq!(published.len(), 4);
        // A new session with the first stock only: the others emptied.
        h.on_datagram_line(0, 0, &packet(1, &stocks[..1]), 2)
            .unwrap();
        h.upkeep(2);
        let emptied = versions(&h);
        assert!(emptied[1..].iter().zip(&published[1..]).all(|(e, p)| e > p));
        for j in 2..12 {
            h.on_datagram_line(0, 0, &packet(j, &stocks[..1]), j + 1)
                .unwrap();
            h.upkeep(j + 1);
        }
        assert_eq!(
            versions(&h)[1..],
            emptied[1..],
            "slots of no later session are not written again"
        );
    }
}
