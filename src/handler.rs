//! The feed handler: datagrams in, state table updated. One code path for
//! replay and live: the caller passes each datagram's local arrival time.
//!
//! Per datagram: validate the whole packet in one walk that also notes each
//! message and starts loading its index bucket, feed the clock-offset
//! estimator, then for each message find the (feed, symbol) slot and apply
//! the rules in place on it under its seqlock. No allocation, no lock, no
//! clock read; a rejected packet costs a counter bump and at most one log
//! line a second.

use crate::clock::OffsetEstimator;
use crate::config::Protocol;
use crate::config::{Config, FeedConfig};
use crate::protocol::itch50;
use crate::protocol::sqf::rules::{self, Applied, Price, Sequence};
use crate::protocol::sqf::wire::msg_type;
use crate::protocol::sqf::wire::HEARTBEAT_LEN;
use crate::protocol::sqf::{Known, Message, Packet, MAX_MESSAGES};
use crate::protocol::{Rejected, MAX_REJECT_REASONS};
use crate::shm::Publication;
use crate::state::{prefetch, Probe, Record, SlotId, StateTable, TableReader};
use crate::symbol::Symbol;
use crate::verdict::{evaluate, Reasons};
use std::sync::Arc;

/// In a slot's byte of `Handler::last_line`: its sequence was last applied
/// from line B.
const FROM_B: u8 = 1;
/// ... and the other line's copy of that sequence has come.
const COPY_SEEN: u8 = 2;
/// Messages whose memory loads are started together.
const BATCH: usize = 16;
/// No slot: the table was full.
const NO_SLOT: SlotId = SlotId::MAX;
/// At most one rejected-packet log line per feed per this interval, ns of arrival time.
const REJECT_LOG_INTERVAL_NS: u64 = 1_000_000_000;
/// While a feed has every packet rejected, the warning repeats at most this
/// often, ns of arrival time.
const ALL_REJECTED_LOG_INTERVAL_NS: u64 = 10_000_000_000;
/// Rejected packets in a row that make a feed "all rejected"...
pub const ALL_REJECTED_MIN_PACKETS: u64 = 32;
/// ... or a run of at least two this long, first to last, ns (a slow feed).
pub const ALL_REJECTED_MIN_NS: u64 = 1_000_000_000;

/// Counters of one feed, all lines together. Plain integers: only the
/// handler's thread writes them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeedCounters {
    /// Datagrams routed to the feed.
    pub packets: u64,
    /// Of those, rejected whole.
    pub rejected: u64,
    /// Rejections by reason, indexed by [`Rejected::index`] in the feed's protocol.
    pub rejected_by_reason: [u64; MAX_REJECT_REASONS],
    /// Messages in accepted packets, unknown types included.
    pub messages: u64,
    /// Quote messages.
    pub quotes: u64,
    /// Snapshot messages.
    pub snapshots: u64,
    /// Heartbeat messages.
    pub heartbeats: u64,
    /// Messages of unknown type, skipped.
    pub unknown: u64,
    /// Quotes at or below a symbol's last sequence.
    pub duplicates: u64,
    /// Of `duplicates`, those on one line whose symbol's sequence was last
    /// applied from the other line: the copies A/B arbitration exists to
    /// drop. The rest came twice on the same line. ITCH: the messages of
    /// the other line's copy of a packet, as the A/B content check pairs
    /// them.
    pub line_copies: u64,
    /// Ticks found missing (by Quotes and Heartbeats).
    pub ticks_lost: u64,
    /// Messages for a new symbol dropped because the table was full.
    pub table_full: u64,
    /// Snapshots that moved a symbol's sequence backwards (provider resets).
    pub resets: u64,
}

/// One feed at run time.
pub struct Feed {
    /// Its configuration.
    pub config: FeedConfig,
    /// Clock-offset estimate.
    pub clock: OffsetEstimator,
    /// Counters.
    pub counters: FeedCounters,
    /// Arrival time of the last rejected-packet log line, ns.
    last_reject_log: Option<u64>,
    /// Arrival time of the last A/B mismatch logged (ITCH), ns.
    last_mismatch_log: Option<u64>,
    /// When the last session line was logged (receive time, ns).
    last_session_log: Option<u64>,
    /// The session whose start was logged and whose end is not yet.
    logged_session: Option<itch50::Session>,
    /// The end of the current session is logged (ITCH).
    session_ended: bool,
    /// Rejections not logged since the last line.
    reject_log_held: u64,
    /// The packets rejected in a row up to now.
    run: RejectRun,
    /// What decodes the feed's datagrams and keeps its state.
    engine: Engine,
    /// An exchange feed's writer into a shared table (`None` when the
    /// table is the handler's own, as in replay).
    publisher: Option<Box<itch50::publish::Publisher>>,
    /// The publication an exchange feed with a publisher writes its clock
    /// offset to.
    publication: Option<Arc<Publication>>,
}

/// What decodes a feed's datagrams and keeps its state, by protocol:
/// chosen once per feed, matched once per datagram (no dynamic call).
#[derive(Debug)]
enum Engine {
    /// SQF: per-symbol state in the handler's state table.
    Sqf,
    /// ITCH 5.0 over MoldUDP64: the feed keeps its stream, books and
    /// symbols itself (spec itch50 §3).
    Itch50(Box<itch50::feed::Feed>),
}

impl Engine {
    fn new(f: &FeedConfig, offset_queue: usize) -> Engine {
        match (&f.protocol, &f.itch) {
            (Protocol::Itch50, Some(c)) => {
                let timezone = jiff::tz::db()
                    .get(&c.timezone)
                    .unwrap_or(jiff::tz::TimeZone::UTC);
                Engine::Itch50(Box::new(itch50::feed::Feed::new(itch50::feed::Settings {
                    sequencing: itch50::sequencer::Settings {
                        gap_timeout_ns: c.gap_timeout_ns,
                        max_held: c.max_held,
                        join_gap_max: c.join_gap_max,
                    },
                    timezone,
                    offset: f.offset,
                    offset_queue,
                    orders: 1 << 16,
                    max_orders: c.max_orders,
                })))
            }
            _ => Engine::Sqf,
        }
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
    /// were all rejected: at least [`ALL_REJECTED_MIN_PACKETS`] in a row, or
    /// two or more over [`ALL_REJECTED_MIN_NS`]. Ends with the first
    /// accepted packet.
    pub fn all_rejected(&self, protocol: Protocol, feed_packets: u64) -> Option<AllRejected> {
        let ongoing = self.packets > 0 && self.at_packet == feed_packets;
        let long = self.packets >= ALL_REJECTED_MIN_PACKETS
            || (self.packets >= 2
                && self.last_ns.saturating_sub(self.first_ns) >= ALL_REJECTED_MIN_NS);
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
        self.run
            .all_rejected(self.config.protocol, self.counters.packets)
    }
}

/// The handler: feeds, their state table, and the rules between them.
pub struct Handler {
    table: StateTable,
    /// The publication the table lives in, if shared: each feed's clock
    /// offset and counters are written there too.
    publication: Option<Arc<Publication>>,
    feeds: Vec<Feed>,
    table_full_logged: bool,
    /// Per slot, one byte: [`FROM_B`], the line its sequence was last
    /// applied from, and [`COPY_SEEN`], the other line's copy of that
    /// sequence has come. A duplicate quote is a line copy when it comes on
    /// the other line, and is either the other line's first copy of the
    /// last sequence or a sequence before it (a lagging line); the rest came
    /// twice on the same line. An applied Quote or Snapshot costs one byte
    /// store (64 KiB for 65,536 slots, beside 8 MiB of slots): about 10
    /// instructions a message in all; a per-feed window of datagram hashes
    /// would instead hash every byte of every datagram. Blind spot: a lagging line's own repeat of an older
    /// sequence counts as a line copy.
    last_line: Vec<u8>,
    /// The messages of the datagram being applied, as the validity walk met
    /// them: room for the most a UDP datagram can carry, allocated once
    /// (grown only for a larger capture record, see `on_datagram`).
    pending: Vec<Pending>,
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
    /// clock-offset queues of at most `offset_queue` entries.
    pub fn with_table(config: &Config, table: StateTable, offset_queue: usize) -> Handler {
        let last_line = vec![0; table.capacity()];
        let publication = Publication::of(&table);
        let shared = publication.is_some();
        let mut handler = Handler {
            table,
            publication,
            feeds: config
                .feeds
                .iter()
                .map(|f| Feed {
                    config: f.clone(),
                    clock: OffsetEstimator::new(f.offset, offset_queue),
                    counters: FeedCounters::default(),
                    last_reject_log: None,
                    last_mismatch_log: None,
                    last_session_log: None,
                    logged_session: None,
                    session_ended: false,
                    reject_log_held: 0,
                    run: RejectRun::default(),
                    engine: Engine::new(f, offset_queue),
                    publisher: None,
                    publication: None,
                })
                .collect(),
            table_full_logged: false,
            last_line,
            pending: vec![Pending::EMPTY; room_for(UDP_MAX_PAYLOAD)],
        };
        if shared {
            // Exchange feeds publish what their messages change (SQF writes
            // its slots as it applies).
            for f in &mut handler.feeds {
                if let Engine::Itch50(it) = &mut f.engine {
                    it.track_touched(true);
                    f.publisher = Some(Box::default());
                    f.publication = handler.publication.clone();
                }
            }
        }
        handler
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
    /// of the feed (0 = A, 1 = B): a duplicate quote whose sequence was last
    /// applied from the other line counts as a line copy.
    #[inline]
    pub fn on_datagram_line(
        &mut self,
        feed: u16,
        line: usize,
        payload: &[u8],
        t: u64,
    ) -> Result<(), Rejected> {
        let Handler {
            table,
            feeds,
            table_full_logged,
            last_line,
            pending,
            ..
        } = self;
        let on_b = (line != 0) as u8;
        let Some(f) = feeds.get_mut(feed as usize) else {
            return Ok(());
        };
        f.counters.packets += 1;
        if let Engine::Itch50(_) = f.engine {
            return f.on_itch(feed, line, payload, t, table);
        }
        if pending.len() < room_for(payload.len()) {
            grow(pending, payload.len());
        }
        // One walk validates the whole packet and, for each message, starts
        // loading its index bucket. Nothing is applied unless all is valid.
        let mut n = 0;
        // Quotes, Snapshots and Heartbeats met, by `kind_index`, counted once
        // the packet is accepted.
        let mut kinds = [0u64; 4];
        let visit = |k: Known| {
            kinds[kind_index(k.code)] += 1;
            // Always room (`room_for`); `get_mut` only keeps this panic-free.
            if let Some(p) = pending.get_mut(n) {
                *p = Pending {
                    at: k.at as u32,
                    slot: NO_SLOT,
                    symbol: k.symbol,
                    probe: table.probe(feed, k.symbol),
                };
                n += 1;
            }
        };
        let packet = match Packet::new_checked_visiting(payload, visit) {
            Ok(p) => p,
            Err(reason) => {
                f.on_reject(reason.into(), t);
                return Err(reason.into());
            }
        };
        f.clock.on_packet(t, packet.send_time());
        if let Some(p) = &self.publication {
            p.publish_offset(feed, f.clock.offset());
        }
        let count = packet.message_count() as u64;
        f.counters.messages += count;
        f.counters.unknown += count - n as u64;
        f.counters.quotes += kinds[kind_index(msg_type::QUOTE)];
        f.counters.snapshots += kinds[kind_index(msg_type::SNAPSHOT)];
        f.counters.heartbeats += kinds[kind_index(msg_type::HEARTBEAT)];
        let kind = f.config.kind;
        // In batches: look the slots up and start loading them, then apply
        // the rules in place. The memory waits of a batch overlap instead of
        // queueing one after another.
        for batch in pending[..n].chunks_mut(BATCH) {
            let mut missed = false;
            let slots = table.slots();
            for p in batch.iter_mut() {
                p.slot = table.find_from(p.probe, feed, p.symbol).unwrap_or(NO_SLOT);
                match slots.get(p.slot as usize) {
                    Some(s) => prefetch(s),
                    None => missed = true,
                }
            }
            if missed {
                // New symbols get slots in message order (one met twice in a
                // batch is found the second time).
                for p in batch.iter_mut().filter(|p| p.slot == NO_SLOT) {
                    p.slot = match table.find(feed, p.symbol) {
                        Some(id) => id,
                        None => new_slot(table, f, table_full_logged, feed, p.symbol),
                    };
                }
            }
            let slots = table.slots();
            let c = &mut f.counters;
            for p in batch.iter() {
                let Some(slot) = slots.get(p.slot as usize) else {
                    continue;
                };
                // Quotes and Snapshots carry a sequence: they set the line.
                let applied = match packet.message_at(p.at as usize) {
                    Message::Quote(q) => {
                        // With a duplicate: whether its sequence is the last one.
                        let (applied, latest) = slot.update(|s| {
                            let a = rules::quote(s, kind, q.sequence(), price(q), t);
                            (a, q.sequence() == s.last_seq())
                        });
                        if let Some(bits) = last_line.get_mut(p.slot as usize) {
                            match applied {
                                Applied::Changed { .. } => *bits = on_b,
                                Applied::Duplicate => {
                                    c.line_copies += line_copy(bits, on_b, latest) as u64
                                }
                            }
                        }
                        applied
                    }
                    Message::Snapshot(q) => {
                        if let Some(bits) = last_line.get_mut(p.slot as usize) {
                            *bits = on_b;
                        }
                        slot.update(|s| {
                            if s.baseline() && q.sequence() < s.last_seq() {
                                c.resets += 1;
                            }
                            rules::snapshot(s, q.sequence(), price(q), t)
                        })
                    }
                    Message::Heartbeat(h) => {
                        slot.update(|s| rules::heartbeat(s, h.next_expected(), t))
                    }
                    Message::Unknown { .. } => continue,
                };
                match applied {
                    Applied::Duplicate => c.duplicates += 1,
                    Applied::Changed { lost } => c.ticks_lost = c.ticks_lost.saturating_add(lost),
                }
            }
        }
        Ok(())
    }

    /// `feed`'s clock offset (local − provider), ns: the estimate its
    /// protocol keeps; 0 for an unknown feed.
    pub fn offset(&self, feed: u16) -> i128 {
        match self.feeds.get(feed as usize) {
            Some(Feed {
                engine: Engine::Itch50(it),
                ..
            }) => it.offset(),
            Some(f) => f.clock.offset(),
            None => 0,
        }
    }

    /// Messages in `payload`, a datagram of `feed` the handler accepted
    /// (for per-line counters); 0 for an unknown feed.
    pub fn messages_in(&self, feed: u16, payload: &[u8]) -> u64 {
        match self.feeds.get(feed as usize).map(|f| &f.engine) {
            Some(Engine::Sqf) => crate::protocol::sqf::wire::message_count(payload) as u64,
            Some(Engine::Itch50(_)) => itch50::mold::message_count(payload) as u64,
            None => 0,
        }
    }

    /// Once per receive cycle at local time `now` (ns since the Unix
    /// epoch): exchange feeds give up the gaps whose deadline is strictly
    /// before it, as before a check (spec itch50 §3.2). SQF feeds have
    /// nothing to do.
    pub fn upkeep(&mut self, now: u64) {
        for id in 0..self.feeds.len() {
            if let Engine::Itch50(_) = self.feeds[id].engine {
                self.before_check(id as u16, now);
            }
        }
    }

    /// The verdict for `symbol` of `feed` at local time `now` (ns since the
    /// Unix epoch). An unknown feed or symbol is `no_quote`.
    pub fn verdict(&self, feed: u16, symbol: Symbol, now: u64) -> Reasons {
        let Some(f) = self.feeds.get(feed as usize) else {
            return Reasons::NO_QUOTE;
        };
        if let Engine::Itch50(it) = &f.engine {
            return it.verdict(symbol, f.config.thresholds_for(symbol), now);
        }
        let Some(slot) = self.table.find(feed, symbol) else {
            return Reasons::NO_QUOTE;
        };
        let r = self.table.record(slot);
        evaluate(Some(&r.state), r.thresholds, f.clock.offset(), now)
    }

    /// Brings `feed` up to a check at `now` (ns since the Unix epoch, local
    /// clock): an ITCH feed gives up the gaps whose deadline is strictly
    /// before it (spec itch50 §3.2). Call before [`verdict`](Self::verdict).
    pub fn before_check(&mut self, feed: u16, now: u64) {
        let Some(f) = self.feeds.get_mut(feed as usize) else {
            return;
        };
        if let Engine::Itch50(it) = &mut f.engine {
            it.expire(now);
            it.settle();
            copy_itch_counters(it, &mut f.counters);
            f.publish(feed, &mut self.table);
        }
    }

    /// Applies every ITCH feed's book levels on a second thread (`on`; a
    /// replay, where nothing reads a book between checks), or on the
    /// calling thread again ([`itch50::feed::Feed::pipeline_books`]).
    /// [`before_check`](Self::before_check) and [`settle`](Self::settle)
    /// make the books readable.
    pub fn pipeline_books(&mut self, on: bool) {
        for f in &mut self.feeds {
            if let Engine::Itch50(it) = &mut f.engine {
                it.pipeline_books(on);
            }
        }
    }

    /// Makes every feed's books readable (see
    /// [`pipeline_books`](Self::pipeline_books)): before reading the feeds
    /// other than through a check, as a summary does.
    pub fn settle(&mut self) {
        for f in &mut self.feeds {
            if let Engine::Itch50(it) = &mut f.engine {
                it.settle();
            }
        }
    }

    /// Starts a BinaryFILE replay into ITCH feed `feed`, for the session on
    /// `date`. False when `feed` is not an ITCH feed.
    pub fn start_file(&mut self, feed: u16, date: jiff::civil::Date) -> bool {
        match self.feeds.get_mut(feed as usize).map(|f| &mut f.engine) {
            Some(Engine::Itch50(it)) => {
                it.start_file(date);
                true
            }
            _ => false,
        }
    }

    /// The time record would be applied at in ITCH feed `feed` (its source
    /// time), `None` when it fails validation.
    pub fn file_record_time(&self, feed: u16, record: &[u8]) -> Option<u64> {
        self.feeds.get(feed as usize)?.itch()?.record_time(record)
    }

    /// Record `index` (0-based) of a BinaryFILE for ITCH feed `feed`: its
    /// source time when it was valid and applied (spec itch50 §5).
    pub fn on_file_record(&mut self, feed: u16, index: u64, record: &[u8]) -> Option<u64> {
        let f = self.feeds.get_mut(feed as usize)?;
        let Engine::Itch50(it) = &mut f.engine else {
            return None;
        };
        let t = it.on_file_record(index, record);
        copy_itch_counters(it, &mut f.counters);
        t
    }

    /// Applies BinaryFILE records to ITCH feed `feed` back to back: `f`
    /// hands them to the batch ([`itch50::feed::FileBatch::record`]), and
    /// the feed's counters are copied once at the end. `None` (and `f` not
    /// called) when `feed` is not an ITCH feed.
    pub fn file_batch<R>(
        &mut self,
        feed: u16,
        f: impl FnOnce(&mut itch50::feed::FileBatch<'_>) -> R,
    ) -> Option<R> {
        let fd = self.feeds.get_mut(feed as usize)?;
        let Engine::Itch50(it) = &mut fd.engine else {
            return None;
        };
        let r = f(&mut it.file_batch());
        copy_itch_counters(it, &mut fd.counters);
        Some(r)
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
            ] {
                p.set_counter(id, k, v);
            }
            for (r, v) in c.rejected_by_reason.iter().enumerate() {
                p.set_counter(id, counter::REJECTED_BY_REASON + r, *v);
            }
            let all = f.all_rejected();
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
            if let Some(it) = f.itch() {
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
                ] {
                    p.set_counter(id, k, v);
                }
            }
        }
    }

    /// Consistent copies of every occupied slot, in slot order.
    pub fn records(&self) -> impl Iterator<Item = Record> + '_ {
        self.table.records()
    }
}

/// Whether a duplicate quote that came on line `on_b` (1: B) is a line
/// copy, given its slot's `bits` (see `Handler::last_line`, updated here) and
/// whether its sequence is the symbol's last one. Not cold: with two lines,
/// about every other quote is a duplicate.
#[inline]
fn line_copy(bits: &mut u8, on_b: u8, latest: bool) -> bool {
    let b = *bits;
    if b & FROM_B == on_b || (latest && b & COPY_SEEN != 0) {
        return false;
    }
    *bits = b | (latest as u8 * COPY_SEEN);
    true
}

/// The largest UDP payload, bytes.
const UDP_MAX_PAYLOAD: usize = 65_507;

/// Most Quotes, Snapshots and Heartbeats a datagram of `len` bytes can hold:
/// each takes at least a Heartbeat's length, and a packet counts at most
/// `MAX_MESSAGES`.
#[inline]
fn room_for(len: usize) -> usize {
    (len / HEARTBEAT_LEN).min(MAX_MESSAGES)
}

/// Makes room for the messages of a datagram of `len` bytes: only a capture
/// record larger than any UDP datagram gets here.
#[cold]
fn grow(pending: &mut Vec<Pending>, len: usize) {
    pending.resize(room_for(len), Pending::EMPTY);
}

/// A counter index for a Quote, Snapshot or Heartbeat type code: its two
/// low bits, which differ between the three ('Q' 1, 'S' 3, 'H' 0).
#[inline(always)]
const fn kind_index(code: u8) -> usize {
    (code & 3) as usize
}

const _: () = assert!(
    kind_index(msg_type::QUOTE) != kind_index(msg_type::SNAPSHOT)
        && kind_index(msg_type::QUOTE) != kind_index(msg_type::HEARTBEAT)
        && kind_index(msg_type::SNAPSHOT) != kind_index(msg_type::HEARTBEAT)
);

/// A slot for (feed, symbol), seen for the first time; `NO_SLOT` (counted,
/// logged once) when the table is full.
#[cold]
fn new_slot(
    table: &mut StateTable,
    f: &mut Feed,
    logged: &mut bool,
    feed: u16,
    symbol: Symbol,
) -> SlotId {
    let th = f.config.thresholds_for(symbol);
    if let Some(id) = table.insert(feed, symbol, th) {
        return id;
    }
    f.counters.table_full += 1;
    if !*logged {
        *logged = true;
        tracing::error!(
            capacity = table.capacity(),
            feed = %f.config.name,
            %symbol,
            "state table full: messages for new symbols are dropped and counted (raise [state] capacity)"
        );
    }
    NO_SLOT
}

/// A message of the batch being applied, with its lookup under way.
#[derive(Clone, Copy)]
struct Pending {
    /// Where the message starts in the datagram, bytes.
    at: u32,
    /// Its slot, once looked up.
    slot: SlotId,
    symbol: Symbol,
    probe: Probe,
}

impl Pending {
    const EMPTY: Pending = Pending {
        at: 0,
        slot: NO_SLOT,
        symbol: Symbol::PLACEHOLDER,
        probe: Probe::NONE,
    };
}

#[inline]
fn price(p: crate::protocol::sqf::PriceView<'_>) -> Price {
    Price {
        bid: p.bid(),
        ask: p.ask(),
        source_time: p.source_time(),
    }
}

/// The stream's counters of an ITCH feed, in the handler's per-feed form.
fn copy_itch_counters(it: &itch50::feed::Feed, c: &mut FeedCounters) {
    let s = it.sequencer().counters();
    c.messages = s.messages;
    c.heartbeats = s.heartbeats;
    c.duplicates = s.duplicates;
    c.line_copies = it.line_check().copied_messages();
    c.ticks_lost = s.ticks_lost;
}

impl Feed {
    /// The ITCH feed, for an `itch50` feed.
    pub fn itch(&self) -> Option<&itch50::feed::Feed> {
        match &self.engine {
            Engine::Itch50(it) => Some(it),
            Engine::Sqf => None,
        }
    }

    /// Writes what an exchange feed's messages changed into the shared
    /// table, and its clock offset into the publication (nothing for SQF,
    /// or without a publisher).
    fn publish(&mut self, id: u16, table: &mut StateTable) {
        let Feed {
            engine: Engine::Itch50(it),
            publisher: Some(p),
            publication,
            config,
            ..
        } = self
        else {
            return;
        };
        if let Some(pb) = publication {
            // Unchanged offsets cost a compare, not a write.
            pb.publish_offset(id, it.offset());
        }
        p.publish(id, it, table, |s| config.thresholds_for(s));
        self.counters.table_full = p.table_full;
    }

    /// The ITCH feed, for an `itch50` feed, to watch it (`--explain`).
    pub fn itch_mut(&mut self) -> Option<&mut itch50::feed::Feed> {
        match &mut self.engine {
            Engine::Itch50(it) => Some(it),
            Engine::Sqf => None,
        }
    }

    /// One datagram of an ITCH feed (its packet already counted).
    #[cold]
    fn on_itch(
        &mut self,
        id: u16,
        line: usize,
        payload: &[u8],
        t: u64,
        table: &mut StateTable,
    ) -> Result<(), Rejected> {
        let result = self.apply_itch(line, payload, t);
        self.publish(id, table);
        result
    }

    /// [`on_itch`](Self::on_itch) before publishing.
    fn apply_itch(&mut self, line: usize, payload: &[u8], t: u64) -> Result<(), Rejected> {
        let Engine::Itch50(it) = &mut self.engine else {
            return Ok(());
        };
        let result = it
            .on_datagram_line(payload, line, t)
            .map(|(out, mismatch)| {
                if mismatch {
                    self.line_mismatch(t);
                }
                if out.new_session || (out.end_of_session && !self.session_ended) {
                    self.session_event(out.new_session, t);
                }
            });
        let Engine::Itch50(it) = &mut self.engine else {
            return Ok(());
        };
        copy_itch_counters(it, &mut self.counters);
        result.map_err(|r| {
            self.on_reject(r.into(), t);
            r.into()
        })
    }

    /// Logs a new session or an end of session, once each per session
    /// and at most one line per interval, but for the end of a session
    /// whose start was logged: packets naming a new session each (forged
    /// or not), with or without an end, must not flood the log.
    #[cold]
    fn session_event(&mut self, new: bool, t: u64) {
        self.session_ended = !new;
        let Some(it) = self.itch() else { return };
        let session = it.session().unwrap_or_default();
        let changes = it.sequencer().counters().session_changes;
        let paired = !new && self.logged_session == Some(session);
        let due = paired
            || self
                .last_session_log
                .is_none_or(|last| t.saturating_sub(last) >= REJECT_LOG_INTERVAL_NS || t < last);
        if !due {
            return;
        }
        self.last_session_log = Some(t);
        if new {
            self.logged_session = Some(session);
            tracing::info!(feed = %self.config.name, %session, changes, "new session: books start empty");
        } else {
            self.logged_session = None;
            tracing::info!(feed = %self.config.name, %session, "end of session: the market is closed");
        }
    }

    /// Logs (at most once per interval) that line A's and line B's copies
    /// of a packet differed; the feed counts them.
    #[cold]
    fn line_mismatch(&mut self, t: u64) {
        let due = self
            .last_mismatch_log
            .is_none_or(|last| t.saturating_sub(last) >= REJECT_LOG_INTERVAL_NS || t < last);
        if due {
            let total = self.itch().map_or(0, |it| it.line_check().mismatches());
            tracing::warn!(
                feed = %self.config.name,
                total,
                "line A and line B carried different messages under the same sequence: the venue or the network corrupted one"
            );
            self.last_mismatch_log = Some(t);
        }
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
        if due {
            tracing::warn!(
                feed = %self.config.name,
                reason = reason.as_str(),
                held_back = self.reject_log_held,
                total = self.counters.rejected,
                "rejected malformed packet"
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
            let due = self
                .run
                .warned_ns
                .is_none_or(|w| t.saturating_sub(w) >= ALL_REJECTED_LOG_INTERVAL_NS || t < w);
            if due {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::sqf::{PacketBuilder, Reject};

    fn config(kind: &str) -> Config {
        Config::parse(
            &format!(
                r#"
[state]
capacity = 3
[[feed]]
name = "f"
kind = "{kind}"
lines = ["127.0.0.1:9000"]
stale_threshold_ms = 1
source_threshold_ms = 1
clock_offset = 0
"#
            ),
            "t",
        )
        .unwrap()
    }

    fn sym(s: &str) -> Symbol {
        Symbol::parse(s).unwrap()
    }

    #[test]
    fn rejected_packet_changes_no_state() {
        let mut h = Handler::new(&config("full"));
        let mut b = PacketBuilder::new(0);
        b.quote(sym("A"), 1, 1, 1.0, 2.0)
            .heartbeat(sym("B"), 3)
            .raw(&[0]);
        assert_eq!(
            h.on_datagram(0, &b.finish(), 1),
            Err(Reject::TrailingBytes.into())
        );
        let c = &h.feeds()[0].counters;
        assert_eq!((c.packets, c.rejected, c.messages, c.quotes), (1, 1, 0, 0));
        assert_eq!(c.rejected_by_reason[Reject::TrailingBytes.index()], 1);
        assert_eq!(h.records().count(), 0);
        assert_eq!(h.verdict(0, sym("A"), 1), Reasons::NO_QUOTE);
    }

    #[test]
    fn counts_messages_and_kinds() {
        let mut h = Handler::new(&config("delta"));
        let mut b = PacketBuilder::new(0);
        b.snapshot(sym("A"), 5, 1, 1.0, 2.0)
            .quote(sym("A"), 6, 1, 1.0, 2.0)
            .quote(sym("A"), 6, 1, 1.0, 2.0)
            .quote(sym("A"), 9, 1, 1.0, 2.0)
            .heartbeat(sym("A"), 12)
            .message(b'?', &[]);
        h.on_datagram(0, &b.finish(), 10).unwrap();
        let c = &h.feeds()[0].counters;
        assert_eq!(
            (c.messages, c.quotes, c.snapshots, c.heartbeats, c.unknown),
            (6, 3, 1, 1, 1)
        );
        assert_eq!((c.duplicates, c.ticks_lost), (1, 4));
        let r = h.records().next().unwrap();
        assert_eq!(r.state.seq.last_seq, 11);
        assert!(r.state.suspect);
    }

    #[test]
    fn a_record_larger_than_any_udp_datagram_is_applied_whole() {
        let mut h = Handler::new(&config("full"));
        let mut b = PacketBuilder::new(0);
        for i in 0..4_000u64 {
            b.heartbeat(sym(["A", "B", "C"][i as usize % 3]), i + 1);
        }
        let bytes = b.finish();
        assert!(bytes.len() > UDP_MAX_PAYLOAD);
        h.on_datagram(0, &bytes, 1).unwrap();
        let c = &h.feeds()[0].counters;
        assert_eq!((c.messages, c.heartbeats), (4_000, 4_000));
        let last: Vec<u64> = h.records().map(|r| r.state.seq.last_seq).collect();
        assert_eq!(
            last,
            [3_999, 3_997, 3_998],
            "the last heartbeats were applied"
        );
    }

    #[test]
    fn full_table_drops_new_symbols_and_counts() {
        let mut h = Handler::new(&config("full"));
        for (i, s) in ["A", "B", "C", "D", "A"].iter().enumerate() {
            let mut b = PacketBuilder::new(0);
            b.quote(sym(s), i as u64, 1, 1.0, 2.0);
            h.on_datagram(0, &b.finish(), 1).unwrap();
        }
        assert_eq!(h.feeds()[0].counters.table_full, 1);
        assert_eq!(h.records().count(), 3);
        assert_eq!(h.verdict(0, sym("D"), 1), Reasons::NO_QUOTE);
        assert!(h.verdict(0, sym("A"), 1).is_ok());
    }

    /// Quotes for A and B, seq `seq`, in one datagram.
    fn two_quotes(seq: u64) -> Vec<u8> {
        let mut b = PacketBuilder::new(0);
        b.quote(sym("A"), seq, 1, 1.0, 2.0)
            .quote(sym("B"), seq, 1, 1.0, 2.0);
        b.finish()
    }

    #[test]
    fn line_b_copies_of_everything_are_line_copies_not_duplicates() {
        let mut h = Handler::new(&config("full"));
        for seq in 1..=100 {
            let d = two_quotes(seq);
            // B is sometimes ahead of A, sometimes behind.
            let lines = if seq % 3 == 0 { [1, 0] } else { [0, 1] };
            for line in lines {
                h.on_datagram_line(0, line, &d, seq).unwrap();
            }
        }
        let c = &h.feeds()[0].counters;
        assert_eq!((c.duplicates, c.line_copies, c.ticks_lost), (200, 200, 0));
    }

    /// An ITCH feed's duplicates split as SQF's do: the other line's copy
    /// of a packet is a line copy, a packet twice on one line is not.
    #[test]
    fn itch_line_copies_are_the_other_lines_copies() {
        use crate::protocol::itch50::message::encode;
        use crate::protocol::itch50::mold::PacketBuilder;
        use crate::protocol::itch50::Session;
        let config = Config::parse(
            r#"
[[feed]]
name = "nq"
protocol = "itch50"
lines = ["239.9.9.1:9000", "239.9.9.2:9000"]
stale_threshold_ms = 1000
source_threshold_ms = 1000
"#,
            "t",
        )
        .unwrap();
        let mut h = Handler::new(&config);
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
    }

    #[test]
    fn a_datagram_twice_on_the_same_line_is_a_duplicate() {
        let mut h = Handler::new(&config("full"));
        for seq in 1..=10 {
            let d = two_quotes(seq);
            h.on_datagram_line(0, 0, &d, seq).unwrap();
            h.on_datagram_line(0, 1, &d, seq).unwrap();
            if seq % 5 == 0 {
                h.on_datagram_line(0, 0, &d, seq).unwrap();
                h.on_datagram_line(0, 1, &d, seq).unwrap();
            }
        }
        let c = &h.feeds()[0].counters;
        // Each line's second copy of seq 5 and 10, 2 symbols each: 8.
        assert_eq!((c.duplicates, c.line_copies), (28, 20));
        // A line lagging by two: its copies are line copies, and its repeat
        // of the last sequence a duplicate.
        for d in [two_quotes(11), two_quotes(12)] {
            h.on_datagram_line(0, 0, &d, 12).unwrap();
        }
        for seq in [11, 12, 12] {
            h.on_datagram_line(0, 1, &two_quotes(seq), 13).unwrap();
        }
        let c = &h.feeds()[0].counters;
        assert_eq!((c.duplicates, c.line_copies), (34, 24));
        // A heartbeat on B carries no sequence: B's copy of A's tick after
        // it is still a line copy.
        h.on_datagram_line(0, 0, &two_quotes(13), 14).unwrap();
        let mut hb = PacketBuilder::new(0);
        hb.heartbeat(sym("A"), 14).heartbeat(sym("B"), 14);
        h.on_datagram_line(0, 1, &hb.finish(), 14).unwrap();
        h.on_datagram_line(0, 1, &two_quotes(13), 14).unwrap();
        let c = &h.feeds()[0].counters;
        assert_eq!((c.duplicates, c.line_copies), (36, 26));
    }

    #[test]
    fn every_packet_rejected_is_a_state_that_an_accepted_packet_ends() {
        let mut h = Handler::new(&config("full"));
        let bad = b"MOLDUDP64 session".to_vec();
        for i in 0..ALL_REJECTED_MIN_PACKETS - 1 {
            let _ = h.on_datagram(0, &bad, 1_000 + i);
        }
        assert_eq!(h.feeds()[0].all_rejected(), None, "not yet");
        let _ = h.on_datagram(0, &bad, 5_000);
        let all = h.feeds()[0].all_rejected().unwrap();
        assert_eq!(
            (all.since_ns, all.packets, all.top),
            (1_000, 32, Rejected::Sqf(Reject::Magic))
        );
        h.on_datagram(0, &two_quotes(1), 6_000).unwrap();
        assert_eq!(h.feeds()[0].all_rejected(), None);
        // A slow feed: two rejections a second apart, nothing in between.
        let _ = h.on_datagram(0, &bad, 7_000);
        assert_eq!(h.feeds()[0].all_rejected(), None);
        let _ = h.on_datagram(0, &bad, 7_000 + ALL_REJECTED_MIN_NS);
        assert_eq!(h.feeds()[0].all_rejected().unwrap().packets, 2);
    }

    /// A log sink for one test.
    #[derive(Clone, Default)]
    struct Log(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Log {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_every_packet_rejected_warning_repeats_every_10_s_while_it_lasts() {
        let log = Log::default();
        let sink = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .finish();
        let s = 1_000_000_000u64;
        tracing::subscriber::with_default(subscriber, || {
            let mut h = Handler::new(&config("full"));
            // One bad packet every 100 ms for 25 s: a run of 1 s by the
            // 11th, warned then (1 s), at 11 s and at 21 s.
            for i in 0..250 {
                let _ = h.on_datagram(0, b"MOLDUDP64 session", i * s / 10);
            }
            // Accepted: over. Bad again: a new run, still rate-limited.
            h.on_datagram(0, &two_quotes(1), 25 * s).unwrap();
            for i in 0..40 {
                let _ = h.on_datagram(0, b"MOLDUDP64 session", 25 * s + i);
            }
        });
        let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        let warnings: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("every packet of the feed is rejected (not SQF?)"))
            .collect();
        assert_eq!(warnings.len(), 3, "{text}");
        assert!(warnings
            .iter()
            .all(|l| l.contains("feed=f") && l.contains("reason=\"bad_magic\"")));
        assert!(warnings[2].contains("packets=211 for_s=21"), "{text}");
    }

    #[test]
    fn offset_comes_from_accepted_packets_only() {
        let mut cfg = config("full");
        cfg.feeds[0].offset = crate::clock::OffsetMode::Auto {
            window_ns: 1_000_000_000,
        };
        let mut h = Handler::new(&cfg);
        let mut bad = PacketBuilder::new(0).finish();
        bad[2] = 9;
        let _ = h.on_datagram(0, &bad, 1_000_000);
        assert_eq!(h.feeds()[0].clock.offset(), 0);
        h.on_datagram(0, &PacketBuilder::new(400_000).finish(), 1_000_000)
            .unwrap();
        assert_eq!(
            h.feeds()[0].clock.offset(),
            600_000,
            "an empty packet is accepted and counts"
        );
    }
}
