//! An SQF feed: per-symbol state in the handler's state table, written in
//! place by the rules as each datagram is applied.
//!
//! Per datagram: validate the whole packet in one walk that also notes each
//! message and starts loading its index bucket; feed the clock-offset
//! estimator (every accepted packet is a sample); then for each message
//! find the (feed, symbol) slot and apply the rules in place on it under
//! its seqlock, the offset published on the side of those writes that
//! never shows a slot fresher at the source than before or after. No
//! allocation, no lock, no clock read.

use super::rules::{self, Applied, FeedKind, Lag, Price, RuleState, Sequence};
use super::wire::{msg_type, HEARTBEAT_LEN};
use super::{Known, Message, Packet, Reject, MAX_MESSAGES};
use crate::clock::OffsetEstimator;
use crate::engine::{shared_counters, Cx, FeedCounters, FeedEngine, Reason, View};
use crate::shm::{counter, traits, Descriptor, Publication};
use crate::state::{prefetch, Probe, SlotId, StateTable};
use crate::symbol::Symbol;
use crate::verdict::{evaluate, Reasons};

/// In a slot's byte of `Feed::last_line`: its sequence was last applied
/// from line B.
const FROM_B: u8 = 1;
/// ... and the other line's copy of that sequence has come.
const COPY_SEEN: u8 = 2;
/// The last Snapshot applied to the slot came from line B.
const SNAPSHOT_FROM_B: u8 = 4;
/// A Snapshot was applied to the slot (`Feed::last_snapshot` holds it).
const SNAPSHOT_SEEN: u8 = 8;
/// ... and the other line's copy of it has come.
const SNAPSHOT_COPY_SEEN: u8 = 16;
/// The bits about the slot's last Snapshot, kept as Quotes come.
const SNAPSHOT_BITS: u8 = SNAPSHOT_FROM_B | SNAPSHOT_SEEN | SNAPSHOT_COPY_SEEN;
/// A Snapshot reset the symbol (applied behind its sequence) and the
/// other line has brought neither its copy of it nor anything newer at its
/// source: that line lags behind the reset (`Feed::open_reset`).
const RESET_OPEN: u8 = 32;
/// ... that Snapshot came on line B.
const RESET_FROM_B: u8 = 64;
/// The bits about the slot's open reset, kept until it closes.
const RESET_BITS: u8 = RESET_OPEN | RESET_FROM_B;
/// What an applied Quote keeps of a slot's byte.
const KEPT: u8 = SNAPSHOT_BITS | RESET_BITS;
/// Messages whose memory loads are started together.
const BATCH: usize = 16;
/// No slot: the table was full.
const NO_SLOT: SlotId = SlotId::MAX;
/// The largest UDP payload, bytes.
pub(crate) const UDP_MAX_PAYLOAD: usize = 65_507;

impl Reason for Reject {
    const ALL: &'static [Reject] = &Reject::ALL;
    fn index(self) -> usize {
        Reject::index(self)
    }
    fn as_str(self) -> &'static str {
        Reject::as_str(self)
    }
    fn hint(self) -> &'static str {
        match self {
            Reject::Short | Reject::Magic | Reject::Version => " (not SQF?)",
            _ => "",
        }
    }
}

/// One SQF feed's engine.
pub struct Feed {
    /// Full or delta, from configuration.
    kind: FeedKind,
    /// Clock-offset estimate, from the send time of every accepted packet
    /// (spec sqf §4): one of duplicates only, an empty one, one of unknown
    /// types or of symbols the full table refused included. Within a
    /// window more samples only lower its minimum (a line copy carries the
    /// first copy's send time and arrives after it); a line copy alone in
    /// the window raises the estimate by its line's delay (docs).
    clock: OffsetEstimator,
    /// Per slot of the table, one byte: [`FROM_B`], the line its sequence
    /// was last applied from, and [`COPY_SEEN`], the other line's copy of
    /// that sequence has come (and [`SNAPSHOT_BITS`], of its last
    /// Snapshot: see `last_snapshot`). A duplicate quote is a line copy when it
    /// comes on the other line, and is either the other line's first copy
    /// of the last sequence or a sequence before it (a lagging line); the
    /// rest came twice on the same line. An applied Quote or Snapshot costs
    /// one byte store (64 KiB for 65,536 slots, beside 8 MiB of slots):
    /// about 10 instructions a message in all; a window of datagram hashes
    /// would instead hash every byte of every datagram. Blind spot: a
    /// lagging line's own repeat of an older sequence counts as a line copy.
    last_line: Vec<u8>,
    /// Per slot of the table: the sequence and source time of the last
    /// Snapshot applied to it. Its first copy on the other line is that
    /// line's copy (line arbitration, spec sqf §1): once newer messages
    /// moved the symbol on (that line lagging) it is dropped, not taken for
    /// a provider reset, which as §3 says ("always applied") would put the
    /// symbol back on the older price, alive and not suspect, until that
    /// line's copies of the newer messages came. Any other arrival of it
    /// (again on its first line, a second time on the other, or on the
    /// other once that line brought the symbol's latest sequence past it: a
    /// provider re-sending it after a failover) is applied, as is a
    /// Snapshot with a new source time but a late copy of one the other
    /// line lost (see the Snapshot rules). 16 bytes a slot (1 MiB for
    /// 65,536).
    last_snapshot: Vec<(u64, u64)>,
    /// Per slot of the table, the Snapshot applied before the last one (as
    /// `last_snapshot`): a re-send after a failover may be of it, and is
    /// then no late copy (see the Snapshot rules). 16 bytes a slot.
    earlier_snapshot: Vec<(u64, u64)>,
    /// Per slot of the table: the sequence and source time of the Snapshot
    /// that last reset the symbol, while the reset is open ([`RESET_OPEN`]:
    /// the other line has brought neither its copy of it nor anything
    /// newer at its source). That line lags behind the reset: what it
    /// brings no newer at its source than the Snapshot was sent before it
    /// ([`Lag`]), and taken by the letter it would put the symbol back on
    /// the price from before the reset (a Quote ahead of the reset's
    /// sequence read as a gap: on a full feed alive and not suspect, every
    /// newer Quote up to its old sequence then dropped as a duplicate; an
    /// older Snapshot; a Heartbeat naming the old sequence, a gap that kept
    /// the symbol suspect until the new sequence got there). Closed by
    /// that line's copy of the Snapshot, or by anything newer it brings.
    /// 16 bytes a slot (1 MiB for 65,536).
    open_reset: Vec<(u64, u64)>,
    /// Per slot of the table: the source time of the last price message
    /// (Quote or Snapshot) applied, valid or not (0: none). What a late
    /// copy is judged older than: the stored price's own time stays that
    /// of the last valid one, so an invalid Quote newer than a Snapshot
    /// the other line lost would let that Snapshot through as a reset,
    /// clearing `invalid_price` onto the older price. 8 bytes a slot.
    newest_source: Vec<u64>,
    /// The messages of the datagram being applied, as the validity walk met
    /// them: room for the most a UDP datagram can carry, allocated once
    /// (grown only for a larger capture record, see `on_datagram`).
    pending: Vec<Pending>,
}

/// Bytes a feed keeps for each slot of the table, for its line
/// arbitration: `last_line`, `last_snapshot`, `earlier_snapshot`,
/// `open_reset`, `newest_source` (the configuration guide gives it).
pub const BYTES_A_SLOT: usize = 1 + 3 * std::mem::size_of::<(u64, u64)>() + 8;

impl Feed {
    /// A feed of `kind` over a table of `capacity` slots, its clock-offset
    /// estimator in `clock`. Everything is allocated now.
    pub fn new(kind: FeedKind, clock: OffsetEstimator, capacity: usize) -> Feed {
        Feed {
            kind,
            clock,
            last_line: vec![0; capacity],
            last_snapshot: vec![(0, 0); capacity],
            earlier_snapshot: vec![(0, 0); capacity],
            open_reset: vec![(0, 0); capacity],
            newest_source: vec![0; capacity],
            pending: vec![Pending::EMPTY; room_for(UDP_MAX_PAYLOAD)],
        }
    }
}

impl FeedEngine for Feed {
    type Reject = Reject;
    type Summary = super::summary::FeedSummary;

    /// Each slot counts its symbol's lost ticks and duplicates.
    const TRAITS: u64 = traits::SYMBOL_COUNTS;

    /// The shared counters, SQF's message kinds and provider resets, and
    /// the messages dropped for symbols the full table had no slot for.
    fn counters() -> Vec<Descriptor> {
        let c = Descriptor::counter;
        let mut v = shared_counters::<Reject>();
        v.extend([
            c(counter::QUOTES, "quotes").metric("quotes_total"),
            c(counter::SNAPSHOTS, "snapshots").metric("snapshots_total"),
            c(counter::UNKNOWN, "unknown_messages").metric("unknown_messages_total"),
            c(counter::RESETS, "resets").metric("provider_resets_total"),
            c(counter::TABLE_FULL, "table_full_drops").metric("table_full_drops_total"),
        ]);
        v
    }

    #[inline]
    fn on_datagram(
        &mut self,
        cx: Cx<'_>,
        line: usize,
        payload: &[u8],
        t: u64,
    ) -> Result<(), Reject> {
        let Cx {
            id: feed,
            config,
            counters: c,
            table,
            publication,
        } = cx;
        let Feed {
            kind,
            clock,
            last_line,
            last_snapshot,
            earlier_snapshot,
            open_reset,
            newest_source,
            pending,
        } = self;
        let on_b = (line != 0) as u8;
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
        let packet = Packet::new_checked_visiting(payload, visit)?;
        let count = packet.message_count() as u64;
        c.messages += count;
        c.unknown += count - n as u64;
        c.quotes += kinds[kind_index(msg_type::QUOTE)];
        c.snapshots += kinds[kind_index(msg_type::SNAPSHOT)];
        c.heartbeats += kinds[kind_index(msg_type::HEARTBEAT)];
        let kind = *kind;
        // Every accepted packet is a sample (spec sqf §4), taken before its
        // messages are applied: the offset it moves is published on the
        // side of their slots that leaves every state between at least as
        // old at the source as the last (a slot's age is `now − source −
        // offset`; see `publish_around_offset`).
        clock.on_packet(t, packet.send_time());
        crate::shm::publish_around_offset(publication, feed, clock.offset(), || {
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
                            None => {
                                let th = config.thresholds_for(p.symbol);
                                new_slot(table, c, feed, p.symbol, th)
                            }
                        };
                    }
                }
                let slots = table.slots();
                for p in batch.iter() {
                    let Some(slot) = slots.get(p.slot as usize) else {
                        continue;
                    };
                    // Quotes and Snapshots carry a sequence: they set the line.
                    let applied = match packet.message_at(p.at as usize) {
                        Message::Quote(q) => {
                            let i = p.slot as usize;
                            let b = last_line.get(i).copied().unwrap_or(0);
                            let lag = lag(b, on_b, open_reset.get(i), None, q.source_time());
                            // Older at its source than the last Snapshot
                            // (or stamped the same nanosecond, as a reset
                            // is taken), which came on the other line and
                            // whose copy this line has not brought: sent
                            // before it.
                            // Ahead of the sequence, that Snapshot was a
                            // reset this line lost (the other having lost
                            // what came before it, it looked in step).
                            // (So is one newer than an open reset, which
                            // it closes: the last Snapshot may be newer.)
                            let before_snapshot = matches!(lag, Lag::No | Lag::Past)
                                && awaits_snapshot_copy(b, on_b)
                                && last_snapshot
                                    .get(i)
                                    .is_some_and(|&(_, at)| q.source_time() <= at);
                            // With a duplicate: whether its sequence is the
                            // last one, or it came from before a reset
                            // (ahead of the sequence, not by the letter).
                            let (applied, latest, before) = slot.update(|s| {
                                let old = lag == Lag::Before || before_snapshot;
                                if old && q.sequence() > s.last_seq() {
                                    s.add_duplicate();
                                    // Told by its source time alone (not a
                                    // line lagging a reset it opened): a
                                    // provider whose stamps do not rise with
                                    // its sequence sends one newer than the
                                    // Snapshot, an invalid price perhaps.
                                    // Never trusted on a message dropped
                                    // that may have been the newest.
                                    if lag != Lag::Before {
                                        s.set_suspect(true);
                                    }
                                    return (Applied::Duplicate, false, true);
                                }
                                let a = rules::quote(s, kind, q.sequence(), price(q), t);
                                // (A duplicate, unchanged, is the latest's
                                // copy with its sequence and its source
                                // time, which a Quote of the same number
                                // from before a reset has not; the latest
                                // invalid one's too.)
                                let latest = a == Applied::Duplicate
                                    && q.sequence() == s.last_seq()
                                    && newest_source.get(i) == Some(&q.source_time());
                                (a, latest, false)
                            });
                            if let Some(bits) = last_line.get_mut(i) {
                                if lag == Lag::Past {
                                    *bits &= !RESET_OPEN;
                                }
                                match applied {
                                    Applied::Changed { .. } => *bits = (*bits & KEPT) | on_b,
                                    // Sent before the reset: not that line's
                                    // copy of the latest sequence, whatever
                                    // its number (it marks nothing passed).
                                    Applied::Duplicate if before || lag == Lag::Before => {
                                        c.line_copies += 1
                                    }
                                    Applied::Duplicate => {
                                        c.line_copies += line_copy(bits, on_b, latest) as u64
                                    }
                                }
                            }
                            if let (Applied::Changed { .. }, Some(at)) =
                                (applied, newest_source.get_mut(i))
                            {
                                *at = q.source_time();
                            }
                            applied
                        }
                        Message::Snapshot(q) => {
                            let i = p.slot as usize;
                            let key = (q.sequence(), q.source_time());
                            // The other line's first copy of the last one
                            // applied (see `Feed::last_snapshot`).
                            let b = last_line.get(i).copied().unwrap_or(0);
                            let candidate =
                                awaits_snapshot_copy(b, on_b) && last_snapshot.get(i) == Some(&key);
                            // This line already brought the symbol's latest
                            // sequence (applied from it, or its copy of it
                            // came): a line delivers in order, so its copy
                            // of an older Snapshot can no longer come, and
                            // this one is the provider's re-send (a
                            // failover, the line that lost the original
                            // bringing it first): a reset.
                            let passed = b & FROM_B == on_b || b & COPY_SEEN != 0;
                            let lag = lag(b, on_b, open_reset.get(i), Some(key.0), key.1);
                            // One of the last two applied (see below).
                            let applied_before = [&*last_snapshot, &*earlier_snapshot]
                                .iter()
                                .any(|v| v.get(i) == Some(&key));
                            let resets = c.resets;
                            let (applied, copy, lagging) = slot.update(|s| {
                                let behind = s.baseline() && q.sequence() < s.last_seq();
                                // The lagging line's, dropped: sent before
                                // the reset, or its copy of the reset once
                                // the symbol moved on (the last Snapshot
                                // another), or a routine one the other line
                                // lost: never applied (neither of the last
                                // two) and older at its source than the last
                                // price message the other line brought since,
                                // valid or not, or than the price held (an
                                // invalid one stamped older) (a reset is
                                // newer than all before it; a re-send after a
                                // failover is of a Snapshot applied).
                                let lagging = lag == Lag::Before
                                    || (lag == Lag::Copy && !candidate && behind && !passed)
                                    || (matches!(lag, Lag::No | Lag::Past)
                                        && behind
                                        && !passed
                                        && !applied_before
                                        && key.1 < newer(newest_source.get(i), s.source_time()));
                                let copy = candidate && !(behind && passed);
                                if lagging || (copy && behind) {
                                    s.add_duplicate();
                                    return (Applied::Duplicate, copy, lagging);
                                }
                                if behind {
                                    c.resets += 1;
                                }
                                (rules::snapshot(s, q.sequence(), price(q), t), copy, false)
                            });
                            if let Some(bits) = last_line.get_mut(i) {
                                if matches!(lag, Lag::Copy | Lag::Past) {
                                    *bits &= !RESET_OPEN;
                                }
                                if lagging {
                                    c.line_copies += 1;
                                } else if copy {
                                    // Arbitrated: whether dropped (behind)
                                    // or applied (the same state again), the
                                    // Snapshot stays its first line's.
                                    *bits |= SNAPSHOT_COPY_SEEN;
                                    match applied {
                                        Applied::Duplicate => c.line_copies += 1,
                                        Applied::Changed { .. } => *bits = (*bits & KEPT) | on_b,
                                    }
                                } else if let Some(last) = last_snapshot.get_mut(i) {
                                    let from_b = if on_b == 1 { SNAPSHOT_FROM_B } else { 0 };
                                    // A reset opens (this line's); any other
                                    // Snapshot leaves an open one as it is.
                                    let reset = match c.resets != resets {
                                        true => match open_reset.get_mut(i) {
                                            Some(r) => {
                                                *r = key;
                                                RESET_OPEN | (on_b * RESET_FROM_B)
                                            }
                                            None => 0,
                                        },
                                        false => *bits & RESET_BITS,
                                    };
                                    *bits = on_b | SNAPSHOT_SEEN | from_b | reset;
                                    if *last != key {
                                        if let Some(e) = earlier_snapshot.get_mut(i) {
                                            *e = *last;
                                        }
                                    }
                                    *last = key;
                                }
                            }
                            if let (Applied::Changed { .. }, Some(at)) =
                                (applied, newest_source.get_mut(i))
                            {
                                *at = key.1;
                            }
                            applied
                        }
                        Message::Heartbeat(h) => {
                            let b = last_line.get(p.slot as usize).copied().unwrap_or(0);
                            let lag = lagging(b, on_b);
                            let (applied, dropped) = slot.update(|s| {
                                // The lagging line's naming a sequence past
                                // the next: the old one's, from before the
                                // reset, or the new one's past a Quote both
                                // lines lost (that line having lost its copy
                                // of the reset): the numbers cannot tell.
                                // Dropped (a duplicate and a line copy as a
                                // Quote, the sequence kept), but the symbol
                                // is suspect: never trusted on a possible
                                // loss.
                                // (One naming the next is liveness as the
                                // letter has it: that line may have lost
                                // its copy of the reset.)
                                let next = h.next_expected();
                                if lag && s.baseline() && next > s.last_seq().saturating_add(1) {
                                    s.add_duplicate();
                                    s.set_suspect(true);
                                    return (Applied::Duplicate, true);
                                }
                                (rules::heartbeat(s, next, t), false)
                            });
                            c.line_copies += u64::from(dropped);
                            applied
                        }
                        Message::Unknown { .. } => continue,
                    };
                    match applied {
                        Applied::Duplicate => c.duplicates += 1,
                        Applied::Changed { lost } => {
                            c.ticks_lost = c.ticks_lost.saturating_add(lost);
                        }
                    }
                }
            }
        });
        Ok(())
    }

    fn messages_in(&self, payload: &[u8]) -> u64 {
        super::wire::message_count(payload) as u64
    }

    fn offset(&self) -> i128 {
        self.clock.offset()
    }

    fn offset_merges(&self) -> u64 {
        self.clock.merges()
    }

    /// SQF has no deadlines: every slot is written as it is applied.
    fn catch_up(&mut self, _: Cx<'_>, _: u64) {}

    fn summary(&mut self, cx: View<'_>, counters: &FeedCounters) -> Self::Summary {
        super::summary::FeedSummary::new(cx, counters, self.clock.offset())
    }

    fn verdict(&mut self, cx: View<'_>, symbol: Symbol, now: u64) -> Reasons {
        let Some(slot) = cx.table.find(cx.id, symbol) else {
            return Reasons::NO_QUOTE;
        };
        let r = cx.table.record(slot);
        evaluate(Some(&r.state), r.thresholds, self.clock.offset(), now)
    }

    /// SQF counts nothing beyond the common counters.
    fn write_counters(&self, _: &Publication, _: u16) {}
}

/// Whether a slot with `bits` has a reset open that a message on line
/// `on_b` (1: B) lags behind: the reset came on the other line.
#[inline]
fn lagging(bits: u8, on_b: u8) -> bool {
    bits & RESET_OPEN != 0 && (bits & RESET_FROM_B != 0) != (on_b == 1)
}

/// What a message on line `on_b` stamped `source` at its source (with
/// `seq`, a Snapshot's sequence) is to the reset `reset` (sequence, source
/// time) a slot with `bits` may keep open.
#[inline]
fn lag(bits: u8, on_b: u8, reset: Option<&(u64, u64)>, seq: Option<u64>, source: u64) -> Lag {
    match reset.filter(|_| lagging(bits, on_b)) {
        Some(&reset) => Lag::behind(reset, seq, source),
        None => Lag::No,
    }
}

/// Whether the slot's last Snapshot (see `Feed::last_snapshot`) came on
/// the other line than `on_b` (1: B) and that line's copy of it, on line
/// `on_b`, has not come yet.
#[inline(always)]
fn awaits_snapshot_copy(bits: u8, on_b: u8) -> bool {
    bits & (SNAPSHOT_SEEN | SNAPSHOT_COPY_SEEN) == SNAPSHOT_SEEN
        && (bits & SNAPSHOT_FROM_B != 0) != (on_b == 1)
}

/// The later of a slot's last price message's source time and its price
/// held's (0: neither), what a late Snapshot copy is judged older than.
#[inline]
fn newer(newest: Option<&u64>, held: Option<u64>) -> u64 {
    newest.copied().unwrap_or(0).max(held.unwrap_or(0))
}

/// Whether a duplicate quote that came on line `on_b` (1: B) is a line
/// copy, given its slot's `bits` (see `Feed::last_line`, updated here) and
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

/// A slot for (feed, symbol), seen for the first time; `NO_SLOT`, counted
/// in `table_full`, when the table is full or its free slots are held for
/// other feeds (the monitor logs the first, off this thread; a replay's
/// summary and warnings say so).
#[cold]
fn new_slot(
    table: &mut StateTable,
    c: &mut FeedCounters,
    feed: u16,
    symbol: Symbol,
    th: crate::verdict::Thresholds,
) -> SlotId {
    match table.insert(feed, symbol, th) {
        Some(id) => id,
        None => {
            c.table_full += 1;
            NO_SLOT
        }
    }
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
fn price(p: super::PriceView<'_>) -> Price {
    Price {
        bid: p.bid(),
        ask: p.ask(),
        source_time: p.source_time(),
    }
}

#[cfg(test)]
mod tests {
    use super::UDP_MAX_PAYLOAD;

    /// A feed keeps [`super::BYTES_A_SLOT`] for each slot of the table, as
    /// the configuration guide says, and nothing else grows with it.
    #[test]
    fn a_feed_keeps_its_bytes_a_slot() {
        use super::{Feed, BYTES_A_SLOT};
        use crate::clock::{OffsetEstimator, OffsetMode};
        let made = |capacity: usize| {
            let clock = OffsetEstimator::new(OffsetMode::Fixed(0), 2);
            crate::test_alloc::peak_during(|| {
                Feed::new(crate::state::FeedKind::Full, clock, capacity)
            })
            .0
        };
        let slots = 1 << 16;
        assert_eq!(made(slots) - made(0), slots * BYTES_A_SLOT);
    }
    use crate::config::Config;
    use crate::handler::{
        Handler, ALL_REJECTED_MIN_NS, ALL_REJECTED_MIN_PACKETS, ALL_REJECTED_MIN_RUN_NS,
    };
    use crate::protocol::sqf::{PacketBuilder, Reject};
    use crate::protocol::Rejected;
    use crate::symbol::Symbol;
    use crate::verdict::Reasons;

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

    /// Line B's copy of a Snapshot, lagging behind line A's newer Quote,
    /// is a line copy: the symbol stays on the newer price (applied, it
    /// went back to the Snapshot's, alive and not suspect, until B's copy
    /// of the Quote came). A provider reset (a new source time) is applied
    /// below the sequence, and so is the same Snapshot sent again (a
    /// failover) on either line, once the other line's copy of it came.
    #[test]
    fn a_lagging_copy_of_a_snapshot_is_a_line_copy_not_a_reset() {
        let mut h = Handler::new(&config("delta"));
        let snapshot = |seq: u64, source: u64, bid: f64| {
            let mut b = PacketBuilder::new(0);
            b.snapshot(sym("A"), seq, source, bid, bid + 1.0);
            b.finish()
        };
        let mut q = PacketBuilder::new(0);
        q.quote(sym("A"), 11, 2, 5.0, 6.0);
        let (s10, q11) = (snapshot(10, 1, 1.0), q.finish());
        h.on_datagram_line(0, 0, &s10, 1).unwrap();
        h.on_datagram_line(0, 0, &q11, 2).unwrap();
        h.on_datagram_line(0, 1, &s10, 3).unwrap();
        let bid = |h: &Handler| {
            let r = h.records().find(|r| r.symbol == Some(sym("A"))).unwrap();
            (r.state.seq.last_seq, r.state.price.map(|p| p.bid))
        };
        assert_eq!(bid(&h), (11, Some(5.0)));
        let c = &h.feeds()[0].counters;
        assert_eq!((c.duplicates, c.line_copies, c.resets), (1, 1, 0));
        h.on_datagram_line(0, 1, &q11, 4).unwrap();
        // Sent again on its own line before the other line's copy came (a
        // failover): a reset.
        let s20 = snapshot(20, 5, 2.0);
        let mut q = PacketBuilder::new(0);
        q.quote(sym("A"), 21, 6, 9.0, 9.5);
        for d in [&s20, &q.finish(), &s20] {
            h.on_datagram_line(0, 0, d, 4).unwrap();
        }
        assert_eq!(bid(&h), (20, Some(2.0)));
        assert_eq!(h.feeds()[0].counters.resets, 1);
        // A reset to 0: applied, though below; line B's copy of it right
        // after, the same state again.
        let s0 = snapshot(0, 9, 3.0);
        h.on_datagram_line(0, 0, &s0, 5).unwrap();
        h.on_datagram_line(0, 1, &s0, 6).unwrap();
        assert_eq!(bid(&h), (0, Some(3.0)));
        let mut q = PacketBuilder::new(0);
        q.quote(sym("A"), 1, 10, 7.0, 8.0);
        let q1 = q.finish();
        h.on_datagram_line(0, 0, &q1, 7).unwrap();
        assert_eq!(bid(&h), (1, Some(7.0)));
        let c = &h.feeds()[0].counters;
        assert_eq!((c.duplicates, c.line_copies, c.resets), (2, 2, 2));
        // The provider sends it again (a failover), on B only (A lost it):
        // a reset applied, though B's copy of the first already came.
        h.on_datagram_line(0, 1, &s0, 8).unwrap();
        assert_eq!(bid(&h), (0, Some(3.0)));
        // A's copy of that, late behind B's newer Quote: a line copy.
        h.on_datagram_line(0, 1, &q1, 9).unwrap();
        h.on_datagram_line(0, 0, &s0, 10).unwrap();
        assert_eq!(bid(&h), (1, Some(7.0)));
        let c = &h.feeds()[0].counters;
        assert_eq!((c.duplicates, c.line_copies, c.resets), (3, 3, 3));
        // Again on A (its copy come): a reset.
        h.on_datagram_line(0, 0, &s0, 11).unwrap();
        assert_eq!(bid(&h), (0, Some(3.0)));
    }

    /// A datagram of one Quote of symbol A, its bid `bid` (ask one above).
    fn quote_a(seq: u64, source: u64, bid: f64) -> Vec<u8> {
        let mut b = PacketBuilder::new(0);
        b.quote(sym("A"), seq, source, bid, bid + 1.0);
        b.finish()
    }

    /// A datagram of one Snapshot of symbol A.
    fn snapshot_a(seq: u64, source: u64, bid: f64) -> Vec<u8> {
        let mut b = PacketBuilder::new(0);
        b.snapshot(sym("A"), seq, source, bid, bid + 1.0);
        b.finish()
    }

    /// A datagram of one Heartbeat of symbol A.
    fn heartbeat_a(next: u64) -> Vec<u8> {
        let mut b = PacketBuilder::new(0);
        b.heartbeat(sym("A"), next);
        b.finish()
    }

    /// After a provider reset (a Snapshot behind the symbol's sequence,
    /// on line A), line B's late copy of a Quote from before it, ahead of
    /// the reset sequence, is that line's copy: dropped, not a gap that
    /// puts the symbol back on the old price (alive on a full feed) and
    /// drops every newer Quote up to its sequence as a duplicate. Once
    /// B's copy of the reset Snapshot came, B is past the reset.
    #[test]
    fn a_lagging_copy_of_a_quote_from_before_a_reset_is_dropped() {
        let mut h = Handler::new(&config("full"));
        let quote = quote_a;
        let s3 = snapshot_a(3, 200, 2.0);
        let q100 = quote(100, 100, 1.0);
        h.on_datagram_line(0, 0, &q100, 1).unwrap();
        h.on_datagram_line(0, 0, &s3, 2).unwrap();
        h.on_datagram_line(0, 1, &q100, 3).unwrap();
        h.on_datagram_line(0, 0, &quote(4, 300, 4.0), 4).unwrap();
        // Later still, B's copies of older Quotes: behind the reset too.
        h.on_datagram_line(0, 1, &quote(99, 99, 0.5), 5).unwrap();
        let state = |h: &Handler| {
            let r = h.records().find(|r| r.symbol == Some(sym("A"))).unwrap();
            (r.state.seq.last_seq, r.state.price.map(|p| p.bid))
        };
        assert_eq!(state(&h), (4, Some(4.0)));
        let c = &h.feeds()[0].counters;
        assert_eq!(
            (c.duplicates, c.line_copies, c.resets, c.ticks_lost),
            (2, 2, 1, 0)
        );
        // A Quote newer than the reset.
        h.on_datagram_line(0, 0, &quote(6, 400, 6.0), 6).unwrap();
        assert_eq!(state(&h), (6, Some(6.0)));
        assert_eq!(h.feeds()[0].counters.ticks_lost, 1);
        // B's copy of the Snapshot: B is past the reset, and a Quote
        // stamped before it is taken by the letter again (a gap).
        h.on_datagram_line(0, 1, &s3, 7).unwrap();
        h.on_datagram_line(0, 1, &quote(9, 150, 9.0), 8).unwrap();
        assert_eq!(state(&h), (9, Some(9.0)));
    }

    /// The reset stays open, whatever comes on its own line, until the
    /// lagging line brings its copy of the reset's Snapshot or anything
    /// newer: the reset's Snapshot repeated on its line, a routine
    /// Snapshot after it, the lagging line's copy of a Snapshot from
    /// before it, and its Heartbeat naming the old sequence change
    /// nothing of the reset.
    #[test]
    fn a_reset_stays_open_until_the_lagging_line_is_past_it() {
        let (quote, snapshot, heartbeat) = (quote_a, snapshot_a, heartbeat_a);
        let state = |h: &Handler| {
            let r = h.records().find(|r| r.symbol == Some(sym("A"))).unwrap();
            (
                r.state.seq.last_seq,
                r.state.price.map(|p| p.bid),
                r.state.suspect,
            )
        };
        let s3 = snapshot(3, 200, 2.0);
        // Each case ends line A on Quote 4.
        // (What, line A's datagrams, then line B's.)
        type Case<'a> = (&'a str, Vec<Vec<u8>>, Vec<Vec<u8>>);
        let cases: [Case; 3] = [
            (
                "the reset repeated on its line",
                vec![
                    quote(100, 100, 1.0),
                    s3.clone(),
                    s3.clone(),
                    quote(4, 300, 4.0),
                ],
                vec![quote(100, 100, 1.0), heartbeat(101), s3.clone()],
            ),
            (
                "a routine Snapshot after it",
                vec![
                    quote(100, 100, 1.0),
                    s3.clone(),
                    quote(4, 300, 4.0),
                    snapshot(4, 300, 4.0),
                ],
                vec![
                    quote(100, 100, 1.0),
                    heartbeat(101),
                    s3.clone(),
                    quote(4, 300, 4.0),
                ],
            ),
            (
                "a Snapshot from before it",
                vec![
                    snapshot(90, 90, 0.9),
                    quote(91, 100, 1.0),
                    s3.clone(),
                    quote(4, 300, 4.0),
                ],
                vec![
                    snapshot(90, 90, 0.9),
                    quote(91, 100, 1.0),
                    heartbeat(92),
                    s3.clone(),
                ],
            ),
        ];
        for (case, a, b) in cases {
            let mut h = Handler::new(&config("full"));
            let mut t = 0;
            for d in &a {
                t += 1;
                h.on_datagram_line(0, 0, d, t).unwrap();
            }
            // B's Heartbeat past the next sequence may be the old one's or
            // tell of a loss: dropped, the symbol suspect until a price.
            let mut beat = false;
            for d in &b {
                t += 1;
                h.on_datagram_line(0, 1, d, t).unwrap();
                beat |= *d == heartbeat(101) || *d == heartbeat(92);
                assert_eq!(state(&h), (4, Some(4.0), beat), "{case}");
            }
            let c = &h.feeds()[0].counters;
            assert_eq!((c.resets, c.ticks_lost), (1, 0), "{case}");
            assert!(c.line_copies <= c.duplicates, "{case}: {c:?}");
            // Past the reset: B's Heartbeat now counts (a gap).
            h.on_datagram_line(0, 1, &heartbeat(7), t + 1).unwrap();
            assert_eq!(state(&h), (6, Some(4.0), true), "{case}");
        }
    }

    /// A routine Snapshot line B lost, come late on line A behind B's
    /// newer Quote (older at its source than it): A's late copy, dropped,
    /// not a reset that puts the older price back (alive, not suspect)
    /// until A's copy of the Quote comes.
    #[test]
    fn a_late_snapshot_the_other_line_lost_is_no_reset() {
        let mut h = Handler::new(&config("full"));
        let datagrams = [
            (0, quote_a(1, 10, 1.0)),
            (1, quote_a(1, 10, 1.0)),
            (1, quote_a(2, 30, 3.0)),
            (0, snapshot_a(1, 20, 1.0)),
        ];
        for (t, (line, d)) in datagrams.iter().enumerate() {
            h.on_datagram_line(0, *line, d, t as u64 + 1).unwrap();
        }
        let r = h.records().find(|r| r.symbol == Some(sym("A"))).unwrap();
        let s = (r.state.seq.last_seq, r.state.price.map(|p| p.bid));
        assert_eq!((s, h.feeds()[0].counters.resets), ((2, Some(3.0)), 0));
    }

    /// The same late copy when the price that line brought since was
    /// invalid (bid above ask): older at its source than that Quote, it is
    /// dropped, not taken for a reset that would clear `invalid_price` and
    /// answer `ok` on the older price (the stored price's time is the last
    /// valid one's, older than the Snapshot), on a full feed and a delta
    /// one alike. The other line's copy of the invalid Quote is its line
    /// copy, a repeat of it on that line is not. An invalid Quote stamped
    /// older than the price held leaves a copy older than that price
    /// dropped too.
    #[test]
    fn a_late_snapshot_after_an_invalid_quote_is_no_reset() {
        let invalid = || {
            let mut b = PacketBuilder::new(0);
            b.quote(sym("A"), 2, 30, 3.0, 2.0);
            b.finish()
        };
        let mut h = Handler::new(&config("full"));
        let mut stale_stamp = PacketBuilder::new(0);
        stale_stamp.quote(sym("A"), 3, 15, 3.0, 2.0);
        let datagrams = [
            (0, quote_a(1, 10, 1.0)),
            (1, quote_a(1, 10, 1.0)),
            (1, quote_a(2, 30, 3.0)),
            (1, stale_stamp.finish()),
            (0, snapshot_a(1, 20, 1.0)),
        ];
        for (t, (line, d)) in datagrams.iter().enumerate() {
            h.on_datagram_line(0, *line, d, t as u64 + 1).unwrap();
        }
        let v = h.verdict(0, sym("A"), 5);
        assert!(v.contains(Reasons::INVALID_PRICE), "{v:?}");
        assert_eq!(h.feeds()[0].counters.resets, 0);
        for kind in ["full", "delta"] {
            let mut h = Handler::new(&config(kind));
            let datagrams = [
                (0, snapshot_a(1, 10, 1.0)),
                (1, snapshot_a(1, 10, 1.0)),
                (1, invalid()),
                (0, snapshot_a(1, 20, 1.0)),
                (0, invalid()),
                (0, invalid()),
            ];
            for (t, (line, d)) in datagrams.iter().enumerate() {
                h.on_datagram_line(0, *line, d, t as u64 + 1).unwrap();
            }
            let v = h.verdict(0, sym("A"), 6);
            assert!(v.contains(Reasons::INVALID_PRICE), "{kind}: {v:?}");
            let c = &h.feeds()[0].counters;
            assert_eq!(c.resets, 0, "{kind}");
            // The late Snapshot and line A's first copy of the Quote; its
            // second on the same line is no line copy.
            assert_eq!(c.line_copies, 2, "{kind}");
        }
    }

    /// A Quote ahead of the sequence, older at its source than the last
    /// Snapshot (come on the other line, whose copy this line has not
    /// brought), is dropped as sent before it, and the symbol is suspect:
    /// a provider whose stamps do not rise with its sequence sends such a
    /// Quote after the Snapshot, an invalid price perhaps, which the letter
    /// applies (it answered `ok` on the Snapshot's price).
    #[test]
    fn a_quote_stamped_before_the_other_lines_snapshot_is_dropped_suspect() {
        for (bid, ask) in [(2.0, 1.9), (2.0, 2.1)] {
            let mut h = Handler::new(&config("full"));
            let mut newer = PacketBuilder::new(0);
            newer.quote(sym("A"), 2, 250, bid, ask);
            let datagrams = [
                (0, quote_a(1, 100, 1.0)),
                (1, quote_a(1, 100, 1.0)),
                (0, snapshot_a(1, 300, 1.0)),
                (1, newer.finish()),
            ];
            for (t, (line, d)) in datagrams.iter().enumerate() {
                h.on_datagram_line(0, *line, d, t as u64 + 1).unwrap();
            }
            let v = h.verdict(0, sym("A"), 5);
            assert!(v.contains(Reasons::SUSPECT), "{bid}/{ask}: {v:?}");
            // Dropped: the sequence and the price are the Snapshot's.
            let r = h.records().find(|r| r.symbol == Some(sym("A"))).unwrap();
            assert_eq!(
                (r.state.seq.last_seq, r.state.price.map(|p| p.bid)),
                (1, Some(1.0))
            );
        }
        // As any suspect: the next Quote applied clears it on a full feed;
        // on a delta feed only a Snapshot does.
        for kind in ["full", "delta"] {
            let mut h = Handler::new(&config(kind));
            let mut newer = PacketBuilder::new(0);
            newer.quote(sym("A"), 2, 250, 2.0, 2.1);
            let datagrams = [
                (0, snapshot_a(1, 100, 1.0)),
                (1, snapshot_a(1, 100, 1.0)),
                (0, snapshot_a(1, 300, 1.0)),
                (1, newer.finish()),
                (0, quote_a(3, 400, 3.0)),
            ];
            for (t, (line, d)) in datagrams.iter().enumerate() {
                h.on_datagram_line(0, *line, d, t as u64 + 1).unwrap();
            }
            let suspect = h.verdict(0, sym("A"), 6).contains(Reasons::SUSPECT);
            assert_eq!(suspect, kind == "delta", "{kind}");
            h.on_datagram_line(0, 0, &snapshot_a(3, 500, 3.0), 7)
                .unwrap();
            assert!(h.verdict(0, sym("A"), 8).is_ok(), "{kind}");
        }
    }

    /// A message newer than an open reset closes it, and is still judged
    /// against the last Snapshot: a Quote older than it, ahead of the
    /// sequence, from the line that has not brought its copy, was sent
    /// before it (dropped, the symbol suspect: see
    /// `a_quote_stamped_before_the_other_lines_snapshot_is_dropped_suspect`);
    /// a routine Snapshot the other line lost, older
    /// than the price that line brought since, is a late copy (dropped).
    #[test]
    fn a_message_past_an_open_reset_is_still_judged_against_the_last_snapshot() {
        let run = |datagrams: &[(usize, Vec<u8>)]| {
            let mut h = Handler::new(&config("full"));
            for (t, (line, d)) in datagrams.iter().enumerate() {
                h.on_datagram_line(0, *line, d, t as u64 + 1).unwrap();
            }
            let r = h.records().find(|r| r.symbol == Some(sym("A"))).unwrap();
            let s = &r.state;
            (s.seq.last_seq, s.price.map(|p| p.bid), s.suspect)
        };
        let (q, s) = (quote_a, snapshot_a);
        let before = [
            (0, q(1, 1000, 1.0)),
            (1, q(1, 1000, 1.0)),
            (0, q(2, 2000, 2.0)),
            (1, q(2, 2000, 2.0)),
        ];
        let mut quote = before.to_vec();
        quote.extend([
            (0, s(1, 3000, 3.0)),
            (0, q(2, 4000, 4.0)),
            (0, q(3, 5000, 5.0)),
            (0, s(3, 8000, 8.0)),
            (1, q(5, 7000, 7.0)),
        ]);
        assert_eq!(run(&quote), (3, Some(8.0), true));
        let mut snapshot = before.to_vec();
        snapshot.extend([
            (1, s(1, 3000, 3.0)),
            (1, q(2, 4000, 4.0)),
            (1, q(3, 5000, 5.0)),
            (1, q(4, 9000, 9.0)),
            (0, s(3, 8000, 8.0)),
        ]);
        assert_eq!(run(&snapshot), (4, Some(9.0), false));
        // A routine Snapshot B lost, then a reset A brought in step (it had
        // lost what came before): B's late copy of the routine one, older
        // than the reset, is still dropped.
        let mut after_reset = before.to_vec();
        after_reset.extend([
            (0, s(2, 60, 6.0)),
            (0, q(3, 70, 7.0)),
            (0, q(4, 80, 8.0)),
            (1, s(3, 40, 3.0)),
        ]);
        assert_eq!(run(&after_reset), (4, Some(8.0), false));
        // A re-send of the Snapshot applied before the last (a failover),
        // on line A after B's copy of the last made B the line of the
        // latest (A not past it, as for a late copy): a reset, not a copy.
        let resend = [
            (0, s(10, 100, 1.0)),
            (1, s(10, 100, 1.0)),
            (0, q(11, 110, 2.0)),
            (1, q(11, 110, 2.0)),
            (0, s(11, 120, 2.0)),
            (1, s(11, 120, 2.0)),
            (0, s(10, 100, 1.0)),
        ];
        assert_eq!(run(&resend), (10, Some(1.0), false));
    }

    /// More of the open reset: a duplicate the lagging line brings from
    /// before it marks nothing (its copy of the reset is still dropped);
    /// a reset opened on line B holds line A; a second reset replaces the
    /// first (the first's copy is from before it); something newer than
    /// the reset on the lagging line closes it (that line lost its copy).
    #[test]
    fn the_open_reset_in_more_orderings() {
        let (quote, snapshot, heartbeat) = (quote_a, snapshot_a, heartbeat_a);
        // A full feed given `datagrams` (line, bytes) at 1, 2, … ns.
        let fed = |datagrams: &[(usize, Vec<u8>)]| {
            let mut h = Handler::new(&config("full"));
            for (t, (line, d)) in datagrams.iter().enumerate() {
                h.on_datagram_line(0, *line, d, t as u64 + 1).unwrap();
            }
            h
        };
        let run = |datagrams: &[(usize, Vec<u8>)]| {
            let h = fed(datagrams);
            let r = h.records().find(|r| r.symbol == Some(sym("A"))).unwrap();
            let state = (
                r.state.seq.last_seq,
                r.state.price.map(|p| p.bid),
                r.state.suspect,
            );
            let c = h.feeds()[0].counters.clone();
            assert!(c.line_copies <= c.duplicates, "{c:?}");
            (state, c.resets)
        };
        let s3 = snapshot(3, 200, 2.0);
        // B's old Quote 4 equals the sequence after the reset: a duplicate
        // that does not make B's copy of the reset a second reset.
        let got = run(&[
            (0, quote(4, 40, 0.4)),
            (0, quote(5, 50, 0.5)),
            (0, s3.clone()),
            (0, quote(4, 300, 4.0)),
            (1, quote(4, 40, 0.4)),
            (1, quote(5, 50, 0.5)),
            (1, s3.clone()),
        ]);
        assert_eq!(got, ((4, Some(4.0), false), 1));
        // Opened on line B: line A lags (its Heartbeat past the next
        // sequence dropped, suspect: it may tell of a loss).
        let got = run(&[
            (1, quote(100, 100, 1.0)),
            (1, s3.clone()),
            (1, quote(4, 300, 4.0)),
            (0, quote(100, 100, 1.0)),
            (0, heartbeat(101)),
        ]);
        assert_eq!(got, ((4, Some(4.0), true), 1));
        // A second reset replaces the first: B's copy of the first is
        // from before it, its copy of the second closes it.
        let got = run(&[
            (0, quote(100, 100, 1.0)),
            (0, s3.clone()),
            (0, snapshot(1, 250, 0.1)),
            (1, quote(100, 100, 1.0)),
            (1, s3.clone()),
            (1, snapshot(1, 250, 0.1)),
            (1, heartbeat(3)),
        ]);
        assert_eq!(got, ((2, Some(0.1), true), 2));
        // The lagging line lost its copy of the reset, the other went
        // quiet: its Heartbeat naming the next sequence is liveness.
        let h = fed(&[
            (0, quote(100, 100, 1.0)),
            (0, s3.clone()),
            (1, quote(100, 100, 1.0)),
            (1, heartbeat(4)),
        ]);
        let r = h.records().find(|r| r.symbol == Some(sym("A"))).unwrap();
        assert_eq!((r.state.last_alive, r.state.seq.duplicates), (4, 1));
        // Its next Heartbeat naming past the next sequence may be the old
        // sequence's (which passed 3 too) or tell of the Quote 4 neither
        // line brought: dropped, its sequence kept, but suspect.
        let got = run(&[
            (0, quote(100, 100, 1.0)),
            (0, s3.clone()),
            (1, quote(100, 100, 1.0)),
            (1, heartbeat(4)),
            (1, heartbeat(5)),
        ]);
        assert_eq!(got, ((3, Some(2.0), true), 1));
        // One loss on each line: B lost the Quotes before the reset (its
        // Snapshot looked in step there), A lost the Snapshot. A's Quotes
        // older than it, ahead of its sequence, are from before it.
        let got = run(&[
            (0, quote(1, 10, 1.0)),
            (1, quote(1, 10, 1.0)),
            (1, snapshot(1, 40, 1.5)),
            (0, quote(2, 20, 2.0)),
            (0, quote(3, 30, 3.0)),
            (0, quote(2, 50, 20.0)),
            (0, quote(3, 60, 30.0)),
            (0, heartbeat(4)),
            (1, quote(2, 50, 20.0)),
            (1, quote(3, 60, 30.0)),
            (1, heartbeat(4)),
        ]);
        assert_eq!(got, ((3, Some(30.0), false), 0));
        // The same with the Snapshot stamped as the price it carries, the
        // last Quote before it (3 at 30): that Quote, ahead of the
        // sequence on the line that lost the Snapshot, is from before it
        // too. (Taken as newer, it left the symbol on 3.0, not suspect,
        // and the new Quotes 2 and 3 counted as duplicates.)
        let got = run(&[
            (0, quote(1, 10, 1.0)),
            (1, quote(1, 10, 1.0)),
            (1, snapshot(1, 30, 3.0)),
            (0, quote(2, 20, 2.0)),
            (0, quote(3, 30, 3.0)),
            (0, quote(2, 50, 4.0)),
            (0, quote(3, 60, 5.0)),
            (0, heartbeat(4)),
            (1, quote(2, 50, 4.0)),
            (1, quote(3, 60, 5.0)),
            (1, heartbeat(4)),
        ]);
        assert_eq!(got, ((3, Some(5.0), false), 0));
        // Stamped the same nanosecond as an open reset, on the line that
        // lags it: from before it (taken as newer, the old Quote 100
        // closed the reset and put 9.0 back, not suspect).
        let got = run(&[
            (0, quote(100, 100, 1.0)),
            (0, s3.clone()),
            (1, quote(100, 200, 9.0)),
        ]);
        assert_eq!(got, ((3, Some(2.0), false), 1));
        // Newer on the lagging line (its copy of the reset lost): closed,
        // its Heartbeat counts again.
        let got = run(&[
            (0, quote(100, 100, 1.0)),
            (0, s3.clone()),
            (1, quote(5, 300, 5.0)),
            (1, heartbeat(7)),
        ]);
        assert_eq!(got, ((6, Some(5.0), true), 1));
    }

    /// A provider's re-send of its last Snapshot (a failover) that comes
    /// first on the line which lost the original is a reset, not that
    /// line's copy: the line had moved past the Snapshot's sequence, and a
    /// line delivers in order, so its copy could no longer come. (Dropped
    /// as the copy, it left the symbol on the older price, `ok`, and the
    /// backup's Quotes after it counted as duplicates.)
    #[test]
    fn a_resent_snapshot_on_the_line_that_lost_the_original_is_a_reset() {
        let mut h = Handler::new(&config("delta"));
        let message = |snapshot: bool, seq: u64, bid: f64| {
            let mut b = PacketBuilder::new(0);
            match snapshot {
                true => b.snapshot(sym("A"), seq, 1, bid, bid + 1.0),
                false => b.quote(sym("A"), seq, 2, bid, bid + 1.0),
            };
            b.finish()
        };
        let bid = |h: &Handler| {
            let r = h.records().find(|r| r.symbol == Some(sym("A"))).unwrap();
            (r.state.seq.last_seq, r.state.price.map(|p| p.bid))
        };
        // The original on A alone (B lost it), then two Quotes on both.
        let s10 = message(true, 10, 1.0);
        h.on_datagram_line(0, 0, &s10, 1).unwrap();
        for (seq, price) in [(11, 1.2), (12, 1.4)] {
            let q = message(false, seq, price);
            h.on_datagram_line(0, 0, &q, 2).unwrap();
            h.on_datagram_line(0, 1, &q, 3).unwrap();
        }
        assert_eq!(bid(&h), (12, Some(1.4)));
        // The backup re-sends it: A loses it, B brings it; then its Quotes.
        h.on_datagram_line(0, 1, &s10, 4).unwrap();
        assert_eq!(bid(&h), (10, Some(1.0)));
        assert_eq!(h.feeds()[0].counters.resets, 1);
        let q11 = message(false, 11, 2.0);
        h.on_datagram_line(0, 1, &q11, 5).unwrap();
        assert_eq!(bid(&h), (11, Some(2.0)));
        // Had A's copy of the re-send come, lagging behind B's Quote (as a
        // line delivers: before A's copy of that Quote), a line copy.
        h.on_datagram_line(0, 0, &s10, 6).unwrap();
        h.on_datagram_line(0, 0, &q11, 7).unwrap();
        assert_eq!(bid(&h), (11, Some(2.0)));
        let c = &h.feeds()[0].counters;
        assert_eq!((c.resets, c.line_copies), (1, 4));
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
        // Many in a row within a short time: garbage between the valid
        // packets of a flooded feed, not yet every packet rejected.
        for i in 0..ALL_REJECTED_MIN_PACKETS + 100 {
            let _ = h.on_datagram(0, &bad, 1_000 + i);
        }
        assert_eq!(h.feeds()[0].all_rejected(), None, "a burst");
        let _ = h.on_datagram(0, &bad, 1_000 + ALL_REJECTED_MIN_RUN_NS);
        let all = h.feeds()[0].all_rejected().unwrap();
        assert_eq!(
            (all.since_ns, all.packets, all.top),
            (1_000, 133, Rejected::Sqf(Reject::Magic))
        );
        let t = 2 * ALL_REJECTED_MIN_RUN_NS;
        h.on_datagram(0, &two_quotes(1), t).unwrap();
        assert_eq!(h.feeds()[0].all_rejected(), None);
        // A slow feed: two rejections a second apart, nothing in between.
        let t = t + ALL_REJECTED_MIN_NS * 5;
        let _ = h.on_datagram(0, &bad, t);
        assert_eq!(h.feeds()[0].all_rejected(), None);
        let _ = h.on_datagram(0, &bad, t + ALL_REJECTED_MIN_NS);
        assert_eq!(h.feeds()[0].all_rejected().unwrap().packets, 2);
        // The live clock steps back by half: the run ends, and a new run
        // grows on the new clock.
        let t = t + ALL_REJECTED_MIN_NS * 2;
        let _ = h.on_datagram(0, &bad, t);
        let back = t / 2;
        h.on_clock_stepped_back(back);
        for k in 1..=2 {
            let _ = h.on_datagram(0, &bad, back + k);
            assert_eq!(h.feeds()[0].all_rejected(), None);
        }
        let _ = h.on_datagram(0, &bad, back + 2 + ALL_REJECTED_MIN_NS);
        let all = h.feeds()[0].all_rejected().expect("a new run");
        assert_eq!((all.since_ns, all.packets), (back + 1, 3));
    }

    /// A quiet feed (a heartbeat a second for a symbol stale after 1.5 s,
    /// the feed's own threshold 500 ms) under a flood of garbage is not
    /// "every packet rejected" between its heartbeats; once nothing is
    /// accepted for its longest stale threshold, it is.
    #[test]
    fn a_quiet_feed_under_a_flood_is_not_every_packet_rejected() {
        let c = Config::parse(
            "[state]\ncapacity = 3\n[[feed]]\nname = \"f\"\nkind = \"full\"\n\
             lines = [\"127.0.0.1:9000\"]\nstale_threshold_ms = 500\n\
             source_threshold_ms = 1500\nclock_offset = 0\n\
             [[feed.symbol]]\nname = \"A\"\nstale_threshold_ms = 1500\n",
            "t",
        )
        .unwrap();
        let mut h = Handler::new(&c);
        let bad = b"MOLDUDP64 session".to_vec();
        const MS: u64 = 1_000_000;
        let heartbeat = |t: u64| {
            let mut hb = PacketBuilder::new(t);
            hb.heartbeat(sym("A"), 1);
            hb.finish()
        };
        let mut t = 1_000 * MS;
        for _ in 0..3 {
            h.on_datagram(0, &heartbeat(t), t).unwrap();
            // A thousand garbage datagrams in the second to the next one.
            for k in 1..1_000 {
                let _ = h.on_datagram(0, &bad, t + k * MS);
                assert_eq!(h.feeds()[0].all_rejected(), None, "at {k} ms");
            }
            t += 1_000 * MS;
        }
        // The heartbeats stop: every packet rejected once the garbage
        // since the last one (from 1 ms after it) spans the stale
        // threshold.
        for k in 0..1_000 {
            let _ = h.on_datagram(0, &bad, t + k * MS);
            let all = h.feeds()[0].all_rejected();
            assert_eq!(all.is_some(), k >= 501, "at {k} ms");
        }
    }

    /// A log sink for one test.
    #[test]
    fn the_every_packet_rejected_warning_repeats_every_10_s_while_it_lasts() {
        let s = 1_000_000_000u64;
        let text = crate::test_log::logs_of(|| {
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

    /// Live (no replay cap), a rejected packet is logged at most once a
    /// second of arrival time, each line saying how many were held back.
    #[test]
    fn rejected_packets_are_logged_at_most_once_a_second() {
        let ms = 1_000_000u64;
        let text = crate::test_log::logs_of(|| {
            let mut h = Handler::new(&config("full"));
            // One bad packet every 50 ms for 2.5 s.
            for i in 0..50 {
                let _ = h.on_datagram(0, b"MOLDUDP64 session", i * 50 * ms);
            }
        });
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("rejected malformed packet"))
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].contains("held_back=0 total=1"), "{text}");
        assert!(lines[1].contains("held_back=19 total=21"), "{text}");
        assert!(lines[2].contains("held_back=19 total=41"), "{text}");
    }

    /// The clock stepped back: the offset's window is anchored at the new
    /// time, so a sample from before the step leaves it a window later
    /// (anchored ahead, it stayed for as long as the step).
    #[test]
    fn a_clock_stepped_back_anchors_the_offset_window_again() {
        let mut cfg = config("full");
        cfg.feeds[0].offset = crate::clock::OffsetMode::Auto {
            window_ns: 1_000_000_000,
        };
        let s = 1_000_000_000;
        let packet = |send: u64| PacketBuilder::new(send).finish();
        // Live (told of the step at the loop's time, 0.5 ms after the
        // next datagram's arrival) and a replay of its recording (the
        // arrivals alone) anchor the window at the same arrival.
        for told in [Some(102 * s + 500_000), None] {
            let mut h = Handler::new(&cfg);
            // At a clock an hour ahead, then stepped back.
            h.on_datagram(0, &packet(3_700 * s - 1_000), 3_700 * s)
                .unwrap();
            if let Some(now) = told {
                h.on_clock_stepped_back(now);
            }
            h.on_datagram(0, &packet(102 * s - 5_000), 102 * s).unwrap();
            assert_eq!(h.feeds()[0].offset(), 1_000);
            // A window after the step's first arrival, the sample before
            // it is gone.
            let t = 103 * s;
            h.on_datagram(0, &packet(t - 6_000), t).unwrap();
            assert_eq!(h.feeds()[0].offset(), 6_000, "{told:?}");
        }
    }

    #[test]
    fn offset_comes_from_every_accepted_packet() {
        let mut cfg = config("full");
        cfg.feeds[0].offset = crate::clock::OffsetMode::Auto {
            window_ns: 1_000_000_000,
        };
        let mut h = Handler::new(&cfg);
        let mut bad = PacketBuilder::new(0).finish();
        bad[2] = 9;
        let _ = h.on_datagram(0, &bad, 1_000_000);
        assert_eq!(h.feeds()[0].offset(), 0, "a rejected packet is no sample");
        h.on_datagram(0, &PacketBuilder::new(400_000).finish(), 1_000_000)
            .unwrap();
        assert_eq!(h.feeds()[0].offset(), 600_000, "an empty packet is one");
        let quote = |send: u64| {
            let mut b = PacketBuilder::new(send);
            b.quote(sym("A"), 1, send, 1.0, 2.0);
            b.finish()
        };
        h.on_datagram(0, &quote(500_000), 1_000_000).unwrap();
        assert_eq!(h.feeds()[0].offset(), 500_000);
        // The same quote again, sent later: every quote a duplicate.
        h.on_datagram(0, &quote(800_000), 1_000_000).unwrap();
        assert_eq!(h.feeds()[0].counters.duplicates, 1);
        assert_eq!(h.feeds()[0].offset(), 200_000, "duplicates only: one too");
    }

    /// Line B's copy of a packet, 1.5 s after line A's: its quotes are
    /// duplicates, yet it is an accepted packet, so its send time is a
    /// sample (spec sqf §4), and with line A's out of the 1 s window the
    /// offset is the copy's delay. A forged copy stamped hours ahead is a
    /// sample too: the offset falls and every symbol reads
    /// `stale_at_source` until it leaves the window. (The copy alone in
    /// the window raised the offset: source ages read younger by its
    /// delay.)
    #[test]
    fn a_packet_of_duplicates_only_is_an_offset_sample() {
        const S: u64 = 1_000_000_000;
        let cfg = Config::parse(
            "[[feed]]\nname = \"f\"\nkind = \"full\"\nlines = [\"127.0.0.1:9000\"]\n\
             stale_threshold_ms = 5000\nsource_threshold_ms = 1000\n\
             clock_offset = \"auto\"\noffset_window_ms = 1000\n",
            "t",
        )
        .unwrap();
        let mut h = Handler::new(&cfg);
        let t0 = 1_700_000_000 * S;
        let packet = |send: u64, seq: u64| {
            let mut b = PacketBuilder::new(send);
            b.quote(sym("A"), seq, send, 1.0, 2.0)
                .quote(sym("B"), seq, send, 1.0, 2.0);
            b.finish()
        };
        let p = packet(t0 - S / 10, 1);
        h.on_datagram(0, &p, t0).unwrap();
        assert_eq!(h.feeds()[0].offset(), (S / 10) as i128);
        let late = t0 + 3 * S / 2;
        // Without the copy's sample: 1.5 s − 0.1 s > 1 s.
        h.on_datagram(0, &p, late).unwrap();
        assert_eq!(h.feeds()[0].counters.duplicates, 2);
        assert_eq!(h.feeds()[0].offset(), (16 * S / 10) as i128);
        for s in ["A", "B"] {
            assert_eq!(h.verdict(0, sym(s), late), Reasons::empty(), "{s}");
        }
        let now = late + 1;
        let hours = 4 * 3600 * S;
        h.on_datagram(0, &packet(now + hours, 1), now).unwrap();
        assert_eq!(h.feeds()[0].counters.duplicates, 4);
        assert_eq!(h.feeds()[0].offset(), -(hours as i128));
        for s in ["A", "B"] {
            assert_eq!(h.verdict(0, sym(s), now), Reasons::STALE_AT_SOURCE, "{s}");
        }
        // A real packet once the forged sample has left the window.
        let next = now + 11 * S / 10;
        h.on_datagram(0, &packet(next - S / 10, 2), next).unwrap();
        assert_eq!(h.feeds()[0].offset(), (S / 10) as i128);
        for s in ["A", "B"] {
            assert_eq!(h.verdict(0, sym(s), next), Reasons::empty(), "{s}");
        }
    }
}
