//! The feed handler: datagrams in, state table updated. One code path for
//! replay and live: the caller passes each datagram's local arrival time.
//!
//! The handler routes each datagram to its feed's engine (one per protocol,
//! listed in [`crate::protocol::Engine`]) and keeps what is the same for
//! every protocol: packet counters, rejections and their logs. No
//! allocation, no lock, no clock read but a log line's: a rejected packet
//! costs a counter bump and at most one log line a second (formatted,
//! stamped with the wall clock and copied into the log's queue, an
//! allocation: see the log section of docs/operations.md).

use crate::config::Protocol;
use crate::config::{Config, FeedConfig};
use crate::engine::{Cx, Segment, View, WireSegment};
pub use crate::engine::{FeedCounters, MAX_REJECT_REASONS};
use crate::protocol::{Engine, Rejected, Summary};
use crate::shm::Publication;
use crate::state::{Record, StateTable, TableReader};
use crate::symbol::Symbol;
use crate::verdict::Reasons;
use std::collections::BTreeMap;
use std::sync::Arc;

/// At most one rejected-packet log line per feed per this interval, ns of arrival time.
const REJECT_LOG_INTERVAL_NS: u64 = 1_000_000_000;
/// While a feed has every packet rejected, the warning repeats at most this
/// often, ns of arrival time.
const ALL_REJECTED_LOG_INTERVAL_NS: u64 = 10_000_000_000;
/// Rejected packets in a row that make a feed "all rejected", over at
/// least [`ALL_REJECTED_MIN_RUN_NS`]...
pub const ALL_REJECTED_MIN_PACKETS: u64 = 32;
/// ... ns, first to last: runs of garbage between the valid packets of a
/// feed flooded by a neighbour (a few ms each) are not the feed's every
/// packet rejected...
pub const ALL_REJECTED_MIN_RUN_NS: u64 = 100_000_000;
/// ... or a run of at least two this long, first to last, ns (a slow feed);
/// either way over at least the feed's longest stale threshold (its own
/// or a symbol's), within which a healthy feed delivers a packet (a quiet
/// feed's heartbeats a second apart, a flood of garbage between them, are
/// not every packet rejected).
pub const ALL_REJECTED_MIN_NS: u64 = 1_000_000_000;

/// One feed at run time.
pub struct Feed {
    /// Its configuration.
    pub config: FeedConfig,
    /// Counters.
    pub counters: FeedCounters,
    /// Arrival time of the last rejected-packet log line, ns.
    last_reject_log: Option<u64>,
    /// Rejections not logged since the last line.
    reject_log_held: u64,
    /// Rejected-packet lines this feed may still log (replay: a few; live:
    /// no limit, one a second).
    reject_lines_left: u64,
    /// The packets rejected in a row up to now.
    run: RejectRun,
    /// The config's longest stale threshold, ns
    /// ([`FeedConfig::longest_stale_ns`], taken once: its overrides may be
    /// thousands, and every rejected packet asks).
    longest_stale_ns: u64,
    /// Arrival times as the feed takes them in a replay ([`Arrivals`]).
    arrivals: Arrivals,
    /// What decodes the feed's datagrams and keeps its state.
    engine: Engine,
}

/// In a replay ([`Handler::count_steps_back`]), a feed's arrivals stamped
/// earlier than one it already took, or than a check of it already
/// answered (a capture out of time order, a record stamped 1970), are
/// counted, with the largest step: each is still applied at its own
/// stamp, as the contract's "timestamps are arrival times" says (and as
/// live applied a recording's), so the state never depends on which
/// checks are asked, and a warning tells the operator to sort the capture.
#[derive(Debug, Clone, Copy, Default)]
pub struct Arrivals {
    /// Whether steps back are counted (a replay).
    on: bool,
    /// The latest arrival taken, or check answered, ns since the Unix epoch.
    latest: u64,
    /// Arrivals stamped before it, and the largest step back, ns.
    pub stepped_back: u64,
    pub largest_step_back_ns: u64,
}

impl Arrivals {
    /// Notes an arrival (or, `answered`, a check) at `t`.
    #[inline]
    fn note(&mut self, t: u64, answered: bool) {
        if !self.on {
            return;
        }
        if t < self.latest && !answered {
            self.stepped_back += 1;
            self.largest_step_back_ns = self.largest_step_back_ns.max(self.latest - t);
        }
        self.latest = self.latest.max(t);
    }
}

/// Packets of one feed rejected in a row. Kept on the rejected (cold) path
/// only: an accepted packet ends the run without touching it, because the
/// run remembers the feed's packet count at its last rejection.
#[derive(Debug, Clone, Default)]
pub struct RejectRun {
    /// Arrival time of the first and of the last rejection, ns.
    first_ns: u64,
    last_ns: u64,
    /// Rejections in the run.
    packets: u64,
    /// The feed's packet count at the last rejection.
    at_packet: u64,
    by_reason: [u64; MAX_REJECT_REASONS],
    /// Arrival time of the last "every packet rejected" warning, ns.
    warned_ns: Option<u64>,
}

/// A feed all of whose packets are rejected, for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllRejected {
    /// Arrival time of the first packet of the run, ns since the Unix epoch.
    pub since_ns: u64,
    /// Packets rejected in a row.
    pub packets: u64,
    /// The most frequent reason in the run.
    pub top: Rejected,
}

impl RejectRun {
    /// Some while the feed's latest packets, `feed_packets` of them so far,
    /// were all rejected: at least [`ALL_REJECTED_MIN_PACKETS`] in a row
    /// over [`ALL_REJECTED_MIN_RUN_NS`], or two or more over
    /// [`ALL_REJECTED_MIN_NS`], and over `stale_ns` (the longest stale
    /// threshold of the feed's symbols) either way. Ends with the first
    /// accepted packet.
    pub fn all_rejected(
        &self,
        protocol: Protocol,
        feed_packets: u64,
        stale_ns: u64,
    ) -> Option<AllRejected> {
        let ongoing = self.packets > 0 && self.at_packet == feed_packets;
        let span = self.last_ns.saturating_sub(self.first_ns);
        let long = span >= stale_ns
            && ((self.packets >= ALL_REJECTED_MIN_PACKETS && span >= ALL_REJECTED_MIN_RUN_NS)
                || (self.packets >= 2 && span >= ALL_REJECTED_MIN_NS));
        if !(ongoing && long) {
            return None;
        }
        Some(AllRejected {
            since_ns: self.first_ns,
            packets: self.packets,
            top: top_reason(protocol, &self.by_reason)
                .or_else(|| Rejected::from_index(protocol, 0))?,
        })
    }
}

/// The reason counted most in `by_reason` (indexed by [`Rejected::index`]
/// in `protocol`); the first in its list on a tie, `None` when all are 0.
pub fn top_reason(protocol: Protocol, by_reason: &[u64]) -> Option<Rejected> {
    let mut top: Option<(Rejected, u64)> = None;
    for r in crate::protocol::reasons(protocol) {
        let n = by_reason.get(r.index()).copied().unwrap_or(0);
        if n > 0 && top.is_none_or(|(_, m)| n > m) {
            top = Some((r, n));
        }
    }
    top.map(|(r, _)| r)
}

impl Feed {
    /// Some while every packet of the feed is rejected (see [`RejectRun::all_rejected`]).
    pub fn all_rejected(&self) -> Option<AllRejected> {
        self.run.all_rejected(
            self.config.protocol,
            self.counters.packets,
            self.longest_stale_ns,
        )
    }

    /// The feed's protocol engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The same, to watch it (`--explain`).
    pub fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// The feed's clock offset (local − provider), ns: the estimate its
    /// protocol keeps.
    pub fn offset(&self) -> i128 {
        self.engine.offset()
    }
}

/// The handler: feeds, their state table, and the rules between them.
pub struct Handler {
    table: StateTable,
    /// The publication the table lives in, if shared: each feed's clock
    /// offset and counters are written there too.
    publication: Option<Arc<Publication>>,
    feeds: Vec<Feed>,
}

impl Handler {
    /// A handler for replay: everything allocated now, except that the
    /// clock-offset queues may grow with the window to stay exact.
    pub fn new(config: &Config) -> Handler {
        Handler::with_offset_queue(config, crate::clock::UNBOUNDED)
    }

    /// A handler whose clock-offset queues hold at most `offset_queue`
    /// entries each: with a finite cap it never allocates after this call.
    pub fn with_offset_queue(config: &Config, offset_queue: usize) -> Handler {
        Handler::with_table(
            config,
            StateTable::with_feeds(config.capacity, config.feeds.len()),
            offset_queue,
        )
    }

    /// A handler over a given table (e.g. one in shared memory), with
    /// clock-offset queues of at most `offset_queue` entries; the table
    /// holds each feed's reservation ([`Config::reservations`]).
    pub fn with_table(config: &Config, mut table: StateTable, offset_queue: usize) -> Handler {
        table.reserve(&config.reservations());
        table.reserve_names(&config.name_reservations());
        let publication = Publication::of(&table);
        let shared = publication.is_some();
        let capacity = table.capacity();
        Handler {
            publication,
            feeds: config
                .feeds
                .iter()
                .map(|f| Feed {
                    config: f.clone(),
                    counters: FeedCounters::default(),
                    last_reject_log: None,
                    reject_log_held: 0,
                    reject_lines_left: u64::MAX,
                    run: RejectRun::default(),
                    longest_stale_ns: f.longest_stale_ns(),
                    arrivals: Arrivals::default(),
                    engine: Engine::new(f, capacity, offset_queue, shared),
                })
                .collect(),
            table,
        }
    }

    /// Logs at most `lines` rejected-packet lines per feed (a replay: a
    /// capture of the wrong protocol would log one a second of capture
    /// time); the counters and the summary still count every one.
    pub fn limit_reject_logs(&mut self, lines: u64) {
        for f in &mut self.feeds {
            f.reject_lines_left = lines;
        }
    }

    /// The feeds, by id.
    pub fn feeds(&self) -> &[Feed] {
        &self.feeds
    }

    /// The feeds, by id, to watch one (`--explain`).
    pub fn feeds_mut(&mut self) -> &mut [Feed] {
        &mut self.feeds
    }

    /// The state table.
    pub fn table(&self) -> &StateTable {
        &self.table
    }

    /// A reader sharing the table's slots.
    pub fn reader(&self) -> TableReader {
        self.table.reader()
    }

    /// Applies one datagram routed to `feed`, arrived at `t` (local clock,
    /// ns since the Unix epoch), as if on line A. Returns why it was
    /// rejected, if it was.
    #[inline]
    pub fn on_datagram(&mut self, feed: u16, payload: &[u8], t: u64) -> Result<(), Rejected> {
        self.on_datagram_line(feed, 0, payload, t)
    }

    /// [`on_datagram`](Self::on_datagram) for a datagram that came on `line`
    /// of the feed (0 = A, 1 = B): its protocol tells the other line's
    /// copies from the rest.
    #[inline]
    pub fn on_datagram_line(
        &mut self,
        feed: u16,
        line: usize,
        payload: &[u8],
        t: u64,
    ) -> Result<(), Rejected> {
        let Some(f) = self.feeds.get_mut(feed as usize) else {
            return Ok(());
        };
        f.arrivals.note(t, false);
        f.counters.packets += 1;
        let cx = Cx {
            id: feed,
            config: &f.config,
            counters: &mut f.counters,
            table: &mut self.table,
            publication: self.publication.as_deref(),
        };
        let result = f.engine.on_datagram(cx, line, payload, t);
        if let Err(reason) = result {
            f.on_reject(reason, t);
        }
        result
    }

    /// Makes every feed ready to run live (see
    /// [`FeedEngine::go_live`](crate::engine::FeedEngine::go_live)): the
    /// first problem, as one line.
    pub fn go_live(&mut self) -> Result<(), String> {
        self.views()
            .try_for_each(|(engine, view)| engine.go_live(view))
    }

    /// Takes over what only live feeds hold from `old`, the handler of
    /// the same configuration before the state started over (see
    /// [`FeedEngine::carry_over`](crate::engine::FeedEngine::carry_over)).
    pub fn carry_over(&mut self, old: &mut Handler) {
        for (f, o) in self.feeds.iter_mut().zip(&mut old.feeds) {
            f.engine.carry_over(&mut o.engine);
        }
    }

    /// An operator's request that every feed resynchronise from its
    /// venue's snapshot at `now` (see
    /// [`FeedEngine::resync`](crate::engine::FeedEngine::resync)); returns
    /// how many started to.
    pub fn resync(&mut self, now: u64) -> usize {
        self.views()
            .map(|(engine, view)| usize::from(engine.resync(view, now)))
            .sum()
    }

    /// Each feed's engine with its read-only view.
    fn views(&mut self) -> impl Iterator<Item = (&mut Engine, View<'_>)> {
        let table = &self.table;
        self.feeds.iter_mut().enumerate().map(move |(id, f)| {
            let view = View {
                id: id as u16,
                config: &f.config,
                table,
            };
            (&mut f.engine, view)
        })
    }

    /// `feed`'s engine with its context, `None` for an unknown feed.
    fn cx(&mut self, feed: u16) -> Option<(&mut Engine, Cx<'_>)> {
        let f = self.feeds.get_mut(feed as usize)?;
        let cx = Cx {
            id: feed,
            config: &f.config,
            counters: &mut f.counters,
            table: &mut self.table,
            publication: self.publication.as_deref(),
        };
        Some((&mut f.engine, cx))
    }

    /// Records what every feed's streams exchange from now on (`run
    /// --record`).
    pub fn record_wire(&mut self) {
        for f in &mut self.feeds {
            f.engine.record_wire();
        }
    }

    /// Hands `f` what every feed's streams exchanged since the last call
    /// (see [`record_wire`](Self::record_wire)), each segment with the
    /// time the receive loop took it.
    pub fn drain_wire(&mut self, f: &mut dyn FnMut(u64, &WireSegment<'_>)) {
        for feed in &mut self.feeds {
            feed.engine.drain_wire(f);
        }
    }

    /// A captured TCP segment of `feed`'s stream, at `t` (replay).
    pub fn on_segment(&mut self, feed: u16, segment: &Segment<'_>, t: u64) {
        let Some(f) = self.feeds.get_mut(feed as usize) else {
            return;
        };
        f.arrivals.note(t, false);
        if let Some((engine, cx)) = self.cx(feed) {
            engine.on_segment(cx, segment, t);
        }
    }

    /// Counts every feed's arrivals that step back from now on
    /// ([`Arrivals`]): a replay's.
    pub fn count_steps_back(&mut self) {
        for f in &mut self.feeds {
            f.arrivals.on = true;
        }
    }

    /// A check of `feed` was answered at `now` (a replay's): what arrives
    /// stamped before it is counted as a step back.
    pub fn answered(&mut self, feed: u16, now: u64) {
        if let Some(f) = self.feeds.get_mut(feed as usize) {
            f.arrivals.note(now, true);
        }
    }

    /// How `feed` takes arrival times ([`Arrivals`]); none for an unknown
    /// feed.
    pub fn arrivals(&self, feed: u16) -> Arrivals {
        self.feeds
            .get(feed as usize)
            .map_or_else(Arrivals::default, |f| f.arrivals)
    }

    /// `feed`'s clock offset (local − provider), ns: the estimate its
    /// protocol keeps; 0 for an unknown feed.
    pub fn offset(&self, feed: u16) -> i128 {
        self.feeds.get(feed as usize).map_or(0, Feed::offset)
    }

    /// Messages in `payload`, a datagram of `feed` the handler accepted
    /// (for per-line counters); 0 for an unknown feed.
    pub fn messages_in(&self, feed: u16, payload: &[u8]) -> u64 {
        self.feeds
            .get(feed as usize)
            .map_or(0, |f| f.engine.messages_in(payload))
    }

    /// Once per receive cycle at local time `now` (ns since the Unix
    /// epoch): every feed catches up to it, as before a check (a protocol
    /// with deadlines gives up the gaps whose deadline is strictly before
    /// it).
    pub fn upkeep(&mut self, now: u64) {
        for id in 0..self.feeds.len() {
            self.before_check(id as u16, now);
        }
    }

    /// Whether feed `feed` wants the datagrams of its line `line` now
    /// ([`FeedEngine::wants`](crate::engine::FeedEngine::wants)); true for
    /// an unknown feed.
    #[inline]
    pub fn wants(&self, feed: u16, line: usize) -> bool {
        self.feeds
            .get(feed as usize)
            .is_none_or(|f| f.engine.wants(line))
    }

    /// Each feed's summary, by name, as a replay reports it at its end
    /// ([`crate::engine::FeedEngine::summary`]).
    pub fn summaries(&mut self) -> BTreeMap<String, Summary> {
        self.feeds
            .iter_mut()
            .enumerate()
            .map(|(id, f)| {
                let view = View {
                    id: id as u16,
                    config: &f.config,
                    table: &self.table,
                };
                let s = f.engine.summary(view, &f.counters);
                (f.config.name.clone(), s)
            })
            .collect()
    }

    /// The verdict for `symbol` of `feed` at local time `now` (ns since the
    /// Unix epoch). An unknown feed or symbol is `no_quote`.
    pub fn verdict(&mut self, feed: u16, symbol: Symbol, now: u64) -> Reasons {
        match self.view(feed) {
            Some((engine, view)) => engine.verdict(view, symbol, now),
            None => Reasons::NO_QUOTE,
        }
    }

    /// The verdict for the instrument named `name` (as a check writes it,
    /// any length its protocol takes) of `feed` at `now`.
    pub fn verdict_named(&mut self, feed: u16, name: &str, now: u64) -> Reasons {
        match self.view(feed) {
            Some((engine, view)) => engine.verdict_named(view, name, now),
            None => Reasons::NO_QUOTE,
        }
    }

    /// What a check's JSON line adds for `name` of `feed`, if its protocol
    /// adds anything ([`crate::engine::FeedEngine::detail`]).
    pub fn detail(&mut self, feed: u16, name: &str) -> Option<crate::engine::CheckDetail> {
        let (engine, view) = self.view(feed)?;
        engine.detail(view, name)
    }

    /// Reads what each feed takes before any datagram (its files): the
    /// first problem, as one line naming the feed.
    pub fn preload(&mut self) -> Result<(), String> {
        for feed in 0..self.feeds.len() as u16 {
            if let Some((engine, cx)) = self.cx(feed) {
                let name = cx.config.name.clone();
                engine
                    .preload(cx)
                    .map_err(|e| format!("feed {name}: {e}"))?;
            }
        }
        Ok(())
    }

    /// `feed`'s engine with its read-only view, `None` for an unknown feed.
    fn view(&mut self, feed: u16) -> Option<(&mut Engine, View<'_>)> {
        self.views().nth(feed as usize)
    }

    /// Brings `feed` up to a check at `now` (ns since the Unix epoch, local
    /// clock): a protocol with deadlines gives up the gaps whose deadline
    /// is strictly before it (spec itch50 §3.2). Call before
    /// [`verdict`](Self::verdict).
    pub fn before_check(&mut self, feed: u16, now: u64) {
        if let Some((engine, cx)) = self.cx(feed) {
            engine.catch_up(cx, now);
        }
    }

    /// The receive loop's clock stepped back to `now` (live): every
    /// feed's deadlines are brought within their own length of it
    /// ([`FeedEngine::on_clock_stepped_back`]).
    pub fn on_clock_stepped_back(&mut self, now: u64) {
        for id in 0..self.feeds.len() as u16 {
            self.on_feed_clock_stepped_back(id, now);
        }
    }

    /// [`on_clock_stepped_back`](Self::on_clock_stepped_back) for `feed`
    /// alone (a replay: a capture's stamps of one feed stepped back; feeds
    /// share nothing, so another's order says nothing of this one's).
    pub fn on_feed_clock_stepped_back(&mut self, feed: u16, now: u64) {
        if let Some(f) = self.feeds.get_mut(feed as usize) {
            f.on_clock_stepped_back(now);
            f.engine.on_clock_stepped_back(now);
        }
    }

    /// Lets every feed apply part of its work on a second thread (`on`; a
    /// replay, where nothing reads the feeds between checks), or all of it
    /// on the calling thread again. [`before_check`](Self::before_check)
    /// and [`settle`](Self::settle) make the feeds readable.
    pub fn pipeline_books(&mut self, on: bool) {
        for f in &mut self.feeds {
            f.engine.pipeline(on);
        }
    }

    /// Makes every feed readable (see [`pipeline_books`](Self::pipeline_books)):
    /// before reading the feeds other than through a check, as a summary does.
    pub fn settle(&mut self) {
        for f in &mut self.feeds {
            f.engine.settle();
        }
    }

    /// `feed`'s engine and counters, to drive it other than by datagrams
    /// (a venue's historical file).
    pub fn engine_mut(&mut self, feed: u16) -> Option<(&mut Engine, &mut FeedCounters)> {
        let f = self.feeds.get_mut(feed as usize)?;
        Some((&mut f.engine, &mut f.counters))
    }

    /// Hands the requests due at `now` on `feed`'s channel to `send` (see
    /// [`FeedEngine::poll_requests`](crate::engine::FeedEngine::poll_requests)).
    pub fn poll_requests(&mut self, feed: u16, now: u64, send: impl FnMut(&[u8]) -> bool) -> usize {
        self.feeds
            .get_mut(feed as usize)
            .map_or(0, |f| f.engine.poll_requests(now, send))
    }

    /// The last `n` requests `feed`'s [`poll_requests`](Self::poll_requests)
    /// handed out at `now` did not go (see
    /// [`FeedEngine::requests_unsent`](crate::engine::FeedEngine::requests_unsent)).
    pub fn requests_unsent(&mut self, feed: u16, n: usize, now: u64) {
        if let Some(f) = self.feeds.get_mut(feed as usize) {
            f.engine.requests_unsent(n, now);
        }
    }

    /// Copies the feeds' counters into the shared-memory publication, if the
    /// table lives in one (the receiver calls this once per heartbeat).
    pub fn publish_counters(&self) {
        use crate::shm::counter;
        let Some(p) = self.publication.as_deref() else {
            return;
        };
        for (id, f) in self.feeds.iter().enumerate() {
            let id = id as u16;
            let c = &f.counters;
            for (k, v) in [
                (counter::PACKETS, c.packets),
                (counter::REJECTED, c.rejected),
                (counter::MESSAGES, c.messages),
                (counter::QUOTES, c.quotes),
                (counter::SNAPSHOTS, c.snapshots),
                (counter::HEARTBEATS, c.heartbeats),
                (counter::UNKNOWN, c.unknown),
                (counter::DUPLICATES, c.duplicates),
                (counter::TICKS_LOST, c.ticks_lost),
                (counter::TABLE_FULL, c.table_full),
                (counter::RESETS, c.resets),
                (counter::LINE_COPIES, c.line_copies),
                (counter::OFFSET_MERGES, f.engine.offset_merges()),
                (
                    counter::SAME_LINE_DUPLICATES,
                    c.duplicates.saturating_sub(c.line_copies),
                ),
            ] {
                p.set_counter(id, k, v);
            }
            for (r, v) in c.rejected_by_reason.iter().enumerate() {
                p.set_counter(id, counter::REJECTED_BY_REASON + r, *v);
            }
            let all = f.all_rejected();
            p.set_counter(id, counter::ALL_REJECTED, all.is_some() as u64);
            p.set_counter(
                id,
                counter::ALL_REJECTED_SINCE,
                all.map_or(0, |a| a.since_ns),
            );
            p.set_counter(
                id,
                counter::ALL_REJECTED_PACKETS,
                all.map_or(0, |a| a.packets),
            );
            p.set_counter(
                id,
                counter::ALL_REJECTED_REASON,
                all.map_or(0, |a| a.top.index() as u64 + 1),
            );
            f.engine.write_counters(p, id);
        }
    }

    /// Consistent copies of every occupied slot, in slot order.
    pub fn records(&self) -> impl Iterator<Item = Record> + '_ {
        self.table.records()
    }
}

impl Feed {
    /// The clock stepped back to `now` (live; in a replay, the feed's
    /// capture stamps, where only the log lines' cadence changes): a run of rejected packets
    /// ends (its times and those to come are not of one clock: kept, the
    /// run read as no time at all, "every packet rejected" quiet, until
    /// the clock came back to where it was; the live merge stamps a
    /// datagram queued before the step at `now`), and the log lines' last
    /// times are brought to `now` at the latest (due again within their
    /// interval).
    fn on_clock_stepped_back(&mut self, now: u64) {
        self.run = RejectRun {
            warned_ns: self.run.warned_ns.map(|w| w.min(now)),
            ..RejectRun::default()
        };
        self.last_reject_log = self.last_reject_log.map(|l| l.min(now));
    }

    /// Counts a rejected packet and logs at most once per interval, saying
    /// how many were held back.
    #[cold]
    fn on_reject(&mut self, reason: Rejected, t: u64) {
        self.counters.rejected += 1;
        self.counters.rejected_by_reason[reason.index()] += 1;
        let due = match self.last_reject_log {
            None => true,
            // A time behind the last line's (a capture stepping back) counts
            // as that time: not due, like any other within the interval.
            Some(last) => t.saturating_sub(last) >= REJECT_LOG_INTERVAL_NS,
        };
        if due && self.reject_lines_left > 0 {
            self.reject_lines_left -= 1;
            let last = if self.reject_lines_left == 0 {
                "; the next are only counted"
            } else {
                ""
            };
            tracing::warn!(
                feed = %self.config.name,
                reason = reason.as_str(),
                held_back = self.reject_log_held,
                total = self.counters.rejected,
                "rejected malformed packet{}{last}",
                reason.hint()
            );
            self.last_reject_log = Some(t);
            self.reject_log_held = 0;
        } else {
            self.reject_log_held += 1;
        }
        let run = &mut self.run;
        if run.packets == 0 || run.at_packet + 1 != self.counters.packets {
            *run = RejectRun {
                first_ns: t,
                warned_ns: run.warned_ns,
                ..RejectRun::default()
            };
        }
        run.packets += 1;
        run.last_ns = t;
        run.at_packet = self.counters.packets;
        run.by_reason[reason.index()] += 1;
        if let Some(all) = self.all_rejected() {
            // As for the lines above: a time behind the last warning's (a
            // capture stepping back) is not due, and a replay's lines
            // about rejected packets are few in all.
            let due = self
                .run
                .warned_ns
                .is_none_or(|w| t.saturating_sub(w) >= ALL_REJECTED_LOG_INTERVAL_NS);
            if due && self.reject_lines_left > 0 {
                self.reject_lines_left -= 1;
                self.run.warned_ns = Some(t);
                tracing::warn!(
                    feed = %self.config.name,
                    reason = all.top.as_str(),
                    packets = all.packets,
                    for_s = t.saturating_sub(all.since_ns) / 1_000_000_000,
                    "every packet of the feed is rejected{}",
                    all.top.hint()
                );
            }
        }
    }
}
