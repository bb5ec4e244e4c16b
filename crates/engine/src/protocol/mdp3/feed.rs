//! One CME channel: the incremental lines' packets sequenced
//! ([`Sequence`]), each entry judged by its instrument's RptSeq and
//! applied to its books ([`Instrument`]), books made visible at the end of
//! their event, snapshots from the recovery loop, statuses, definitions
//! and channel resets; and each instrument's verdict.
//!
//! Time is passed in: `t` is a datagram's local arrival (ns since the Unix
//! epoch), `now` a check's. TransactTime (the start of a Globex event, ns
//! UTC) is the source time; SendingTime feeds the clock offset.
//!
//! The source watermark rises, after a processed packet with no gap open,
//! to the TransactTime of the packet's last message that carries one:
//! every template with the incremental root (book, trade, volume,
//! statistics and limits messages, and ChannelReset) and SecurityStatus.
//! A packet with none (heartbeats, definitions) proves it up to its
//! arrival less the clock offset, the offset in force when the watermark
//! is read ([`crate::clock::heartbeat_watermark`]).

use super::book::{Books, Level, UndoLog, Update};
use super::groups::{self, Groups};
use super::index::IdIndex;
use super::instrument::{Cached, Ends, Instrument};
use super::loops::Loops;
use super::name::SymbolKey;
use super::packet::Packet;
use super::rptseq::{Next, Snapshot as Matched, Took};
use super::sequence::{self, Packet as Seen, Restart, Sequence};
use super::status::{self, Position, State, Status};
use super::template::{trim, Body, Incremental, Kind, BOOK};
use super::Reject;
use crate::clock::{OffsetEstimator, OffsetMode};
use crate::verdict::{reasons, Inputs, Reasons, Thresholds};
use std::borrow::Cow;
use std::collections::HashMap;

/// Snapshot loops begun (packets numbered 1 on the snapshot lines, either
/// line) after which a ChannelReset's TransactTime no longer screens
/// snapshots ([`Feed::on_snapshot`]).
const RESET_FLOOR_LOOPS: u8 = 4;

/// How long after a restart of MsgSeqNum (ns, the loop's clock) a loop
/// taken before it is still looked for, however few loops were read
/// ([`Feed::since_restart`]): a minute, far past any loop's delay.
const RESTART_WINDOW_NS: u64 = 60_000_000_000;

/// A feed's settings (its configuration's keys).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Packet gaps and restarts.
    pub sequencing: sequence::Settings,
    /// Most entries cached over every instrument.
    pub max_cached: usize,
    /// Most instruments kept; a message naming another SecurityID is
    /// ignored for it (counted in `instruments_refused`).
    pub max_instruments: usize,
    /// Outright depth without a definition.
    pub default_depth: u8,
    /// Implied depth without a definition.
    pub default_implied_depth: u8,
    /// Clock offset: fixed or estimated.
    pub offset: OffsetMode,
    /// Capacity of the offset estimator's queue.
    pub offset_queue: usize,
}

/// Template ids counted one by one; every template CME's schema has lies
/// below.
pub const TEMPLATE_IDS: usize = 128;

/// What the feed counted (the summary's keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    /// Messages in accepted incremental datagrams, duplicates included.
    pub messages: u64,
    /// Messages processed, by template id, of the templates the schema
    /// has (all below [`TEMPLATE_IDS`]; the others count in
    /// `unknown_templates`): an array, so that counting costs an index and
    /// a flood of made-up ids grows nothing.
    pub by_template: Box<[u64; TEMPLATE_IDS]>,
    /// Messages of a template not known, skipped.
    pub unknown_templates: u64,
    /// AdminHeartbeats processed on the incremental lines.
    pub heartbeats: u64,
    /// ChannelResets processed.
    pub channel_resets: u64,
    /// ChannelResets inferred: an instrument's RptSeq went back in the
    /// newest packet, as only a reset lost on both lines makes it, or the
    /// snapshots applied before the first packet were taken well past it
    /// (see [`Feed::infer_reset`]).
    pub resets_inferred: u64,
    /// Datagrams of the snapshot lines accepted.
    pub snapshot_packets: u64,
    /// Snapshots applied.
    pub snapshots_applied: u64,
    /// Snapshots older than what their instrument had.
    pub snapshots_ignored: u64,
    /// Definition messages processed.
    pub definitions: u64,
    /// Entries and statuses with an odd value (changed nothing else).
    pub anomalies: u64,
    /// Market-by-order messages skipped.
    pub mbo_messages: u64,
    /// Order entries of the second group of book and trade messages.
    pub mbo_order_entries: u64,
    /// Times an instrument's cache overflowed (the feed's cache full: its
    /// cached entries dropped, the instrument overflowed until a
    /// snapshot), once each time, not per entry dropped.
    pub cache_overflows: u64,
    /// RptSeq values skipped for good by snapshots, every instrument.
    pub ticks_lost: u64,
    /// Messages, entries and snapshots ignored because they named a new
    /// instrument when `max_instruments` were kept.
    pub instruments_refused: u64,
}

impl Default for Counters {
    fn default() -> Counters {
        Counters {
            messages: 0,
            by_template: Box::new([0; TEMPLATE_IDS]),
            unknown_templates: 0,
            heartbeats: 0,
            channel_resets: 0,
            resets_inferred: 0,
            snapshot_packets: 0,
            snapshots_applied: 0,
            snapshots_ignored: 0,
            definitions: 0,
            anomalies: 0,
            mbo_messages: 0,
            mbo_order_entries: 0,
            cache_overflows: 0,
            ticks_lost: 0,
            instruments_refused: 0,
        }
    }
}

/// What a definition says of an instrument.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Definition {
    /// Symbol, trimmed.
    pub symbol: String,
    /// SecurityGroup, trimmed.
    pub group: String,
    /// Asset, trimmed.
    pub asset: String,
    /// SecurityGroup and Asset as sent (trimmed bytes, not text): the key
    /// its group statuses are found under.
    pub key: groups::Key,
    /// MarketDepth of the outright book (`GBX`), if sent.
    pub depth: Option<u8>,
    /// MarketDepth of the implied book (`GBI`), if sent.
    pub implied_depth: Option<u8>,
    /// MDSecurityTradingStatus, if sent.
    pub status: Option<u8>,
    /// DisplayFactor mantissa (exponent −9).
    pub display_factor: i64,
    /// MinPriceIncrement mantissa (exponent −9), if known.
    pub min_price_increment: Option<i64>,
    /// The last definition was a `D`: the venue deleted the instrument,
    /// which answers `closed` until a definition lists it again (not in
    /// the contract: docs/mdp3.md, "A deleted instrument").
    pub deleted: bool,
}

/// Bodies of a packet kept from its validity walk for the pass that
/// applies them (a packet of more messages has the rest parsed again):
/// 46s of one book entry each fill 1,400 bytes with 22.
const WALKED: usize = 32;

/// One instrument as the feed keeps it. Its sequencing and book
/// pointers come first and it starts a cache line (`repr(C)`,
/// `align(64)`), so that an entry applied touches the fewest lines.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct Entry {
    /// Its sequencing and books.
    pub instrument: Instrument,
    /// SecurityID.
    pub security_id: i32,
    /// The feed's count of deferred ends of event when an entry of it
    /// last came (and it was looked at if due): an end came since unless
    /// they are equal (see `Feed::cover`).
    changed: u64,
    /// Listed in [`Feed::blocked`].
    blocked: bool,
    /// Listed in [`Feed::verified`].
    listed_verified: bool,
    /// Its definition, once one came.
    pub definition: Option<Definition>,
    /// Its own status (a SecurityStatus naming it, or a snapshot's).
    pub status: Option<Status>,
    /// Snapshots applied and ignored.
    pub snapshots_applied: u64,
    /// Snapshots ignored (older than what it had).
    pub snapshots_ignored: u64,
    /// The last snapshot applied to it: (RptSeq,
    /// LastMsgSeqNumProcessed), as sent (for explanations: which one of a
    /// datagram's applied, whatever screened the others).
    pub last_snapshot: Option<(u32, u32)>,
    /// The highest LastMsgSeqNumProcessed of the snapshots applied to it
    /// since the channel was last emptied (0: none): up to that packet the
    /// lines may still bring entries its RptSeq has passed, without
    /// anything lost. Kept across the restart after a ChannelReset (a
    /// snapshot then may be numbered in either sequence: the test errs
    /// to seeing no reset).
    snapshot_at: u32,
    /// Listed in [`Feed::holders`].
    holds: bool,
}

/// One CME channel.
///
/// Its stores grow only with what the channel names, and keep their
/// capacity: once every instrument was seen, every Symbol mapped, every
/// status group named and the caches, the gaps and the pending list have
/// met their largest need, processing allocates nothing (a definition the
/// loop repeats included), but for entries cached out of RptSeq order
/// ([`Cache`](super::cache::Cache)).
#[derive(Debug)]
pub struct Feed {
    settings: Settings,
    seq: Sequence,
    /// One per SecurityID a message named, in order of first appearance;
    /// never removed. Grows amortised (doubling) with a new instrument;
    /// an instrument's books are allocated once with it (again only when a
    /// definition changes a depth).
    entries: Vec<Entry>,
    /// SecurityID → index in `entries`: an open-addressing index kept at
    /// most a quarter full, grown (doubling, amortised) with it.
    by_id: IdIndex,
    /// Symbol → index in `entries` (keys inline: a Symbol moved, dropped
    /// or taken allocates nothing once the map has its room).
    by_symbol: HashMap<SymbolKey, u32>,
    /// Symbols whose mapping changed since the last
    /// [`drain_renamed`](Self::drain_renamed), each with the instrument it
    /// left (if it named one), kept only while touched instruments are
    /// tracked (live: the publisher enters them again).
    renamed: Vec<(SymbolKey, Option<u32>)>,
    /// Entries cached over every instrument (at most `max_cached`).
    cached: usize,
    /// Book entries an instrument took while only a snapshot could make it
    /// whole (no baseline, or overflowed), cached or dropped, ever: an
    /// instrument needy and quiet that starts trading has one in the loop
    /// from then on. (Not those waiting in a RptSeq hole, which the other
    /// line's copy of a packet may fill.)
    waiting_book_entries: u64,
    /// The ends of event processed (what coverage needs of them).
    ends: Ends,
    /// Instruments with changes not visible yet, but those
    /// [`blocked`](Self::blocked), each once ([`Instrument::list`]): at
    /// most one per instrument, grown amortised to the most pending at
    /// once, its capacity kept when it empties.
    dirty: Vec<u32>,
    /// An end of event came in this datagram while a packet was missing,
    /// or in a datagram that filled a gap: `dirty` is then examined once,
    /// at the datagram's end, and an instrument in it before its next
    /// entry if one came since, not at every end (see
    /// [`cover`](Self::cover)).
    deferred: bool,
    /// Instruments with changes waiting that no end of event still to
    /// come can cover while the packets missing now stay missing: a
    /// change of theirs lies below a missing packet, and every end to come
    /// lies above the highest packet received. Each listed once
    /// ([`Entry::blocked`]; one with a change of its own since, or a
    /// snapshot, is back in `dirty` too, once each), and looked at again
    /// only for such a change of its own, or when a packet missing arrives
    /// or is given up, the sequence restarts or the channel is reset
    /// ([`unblock`](Self::unblock)), so that a datagram's look costs what
    /// changed in it, not every instrument a gap keeps waiting. Grown
    /// amortised to the most at once, its capacity kept.
    blocked: Vec<u32>,
    /// Ends of event processed while a packet was missing (64 bits: never
    /// wraps back onto an instrument's [`Entry::changed`]): an instrument
    /// whose `changed` differs had one since its last change.
    deferred_ends: u64,
    /// Instruments examined by the passes over `dirty` so far (tests bound
    /// the work).
    #[cfg(test)]
    examined: u64,
    /// Instruments gone over by [`fold_pending`](Self::fold_pending) so far.
    #[cfg(test)]
    fold_examined: u64,
    /// Entries processed since the last [`fold_pending`](Self::fold_pending)
    /// pass: the next waits until they are as many as the instruments it
    /// goes over, so that its cost is paid by entries (instruments left
    /// waiting for an end of event never sent cost a flood of datagrams
    /// nothing).
    since_fold: usize,
    /// What reverts those changes, for every instrument.
    undo: UndoLog,
    /// `dirty` sorted, for a compaction of `undo`.
    compacting: Vec<u32>,
    /// The instruments whose snapshots applied in the snapshot datagram at
    /// hand, looked at (alone) at its end; capacity kept.
    snapshots_now: Vec<u32>,
    /// Group statuses, by (SecurityGroup, Asset): one per pair a status
    /// named, at most [`max_groups`](Self::max_groups) (a new pair may
    /// rehash, amortised), which a ChannelReset empties; and the
    /// instruments each pair's definitions name, which it keeps.
    groups: Groups,
    /// Sequence restarts so far: the first part of a status's
    /// [`Stamp`](status::Stamp).
    restarts: u32,
    /// The TransactTime of the latest ChannelReset processed, the latest
    /// time an inferred one is known not to be later than, or the sending
    /// time of the packet that restarted the sequence weekly (venue
    /// clock, ns since the Unix epoch), and the snapshot loops begun since (a
    /// packet numbered 1 on either snapshot line): a snapshot whose
    /// instrument's last event is no later, yet past RptSeq 0, shows the
    /// books before it, while a loop from before the reset may still come.
    /// Dropped at the fourth loop begun (two on each line at least: the
    /// second begun after the reset), so that a forged reset dated in the
    /// future holds back healing for two loops, as a real one empties the
    /// books for one.
    reset_floor: Option<(u64, u8)>,
    /// Where the screen of [`reset_floor`](Self::reset_floor) was set: the
    /// restarts so far and the newest packet processed then. A snapshot
    /// taken at or past that packet, in the same sequence, was taken
    /// after the reset, whatever its instrument's last TransactTime.
    reset_place: Option<(u32, u32)>,
    /// The highest LastMsgSeqNumProcessed of the snapshots applied since
    /// the sequence began (0: none), for the first packet of the lines
    /// ([`before_snapshots`](Self::before_snapshots)).
    snapshot_reach: u32,
    /// The newest packet processed when the channel was last emptied
    /// without its place known: a ChannelReset inferred
    /// ([`infer_reset`](Self::infer_reset)) or one arriving late. A packet
    /// below it filling a gap has its entries not applied: they may be of
    /// the sequence before the reset, or come after a late one while
    /// later packets of the same instruments were taken and then
    /// forgotten, so that its RptSeq 1 would start a history missing
    /// them. A restart clears it.
    unplaced_below: Option<u32>,
    /// Every instrument is unverified but those in `verified`, so that a
    /// gap given up unverifies only those; false until the first give-up
    /// and after a reset (a give-up then goes over every instrument).
    all_unverified: bool,
    /// The instruments made, or verified again, since every instrument
    /// was last unverified, each once (at most one per instrument; grown
    /// amortised, its capacity kept).
    verified: Vec<u32>,
    clock: OffsetEstimator,
    last_alive: Option<u64>,
    /// The latest TransactTime a processed packet carried, the channel
    /// then complete (epoch ns, venue clock).
    watermark: Option<i128>,
    /// Arrival of the latest packet without a TransactTime (a heartbeat)
    /// that proved the channel alive: its part of the watermark is taken
    /// with the offset in force when read
    /// ([`crate::clock::heartbeat_watermark`]).
    heartbeat_at: Option<u64>,
    counters: Counters,
    /// What changed for a live publication: see [`Touched`].
    touched: Touched,
    /// Instruments that may differ from what a ChannelReset leaves.
    since_reset: SinceReset,
    /// The instruments with a status of their own, each once: what a reset
    /// empties of them ([`reset_channel`](Self::reset_channel)) costs
    /// those, not every instrument (grown amortised, its capacity kept).
    holders: Vec<u32>,
    /// Set by a ChannelReset inferred ([`infer_reset`](Self::infer_reset)):
    /// statuses sent before this place that say trading no longer count
    /// (those that halt or close still do), so that a definition's status
    /// counts again where the lost reset emptied them all.
    void_trading_before: Option<status::Stamp>,
    /// The packet (restarts, MsgSeqNum) a reset was last inferred in from
    /// an entry: once a packet at most, so that a packet repeating a
    /// ChannelReset and an entry that goes back costs one pass over the
    /// instruments, not two per pair.
    inferred_in: Option<(u32, u32)>,
    /// Where the last reset that emptied statuses fell (a ChannelReset,
    /// in order or late; the weekly restart): a snapshot's status stamped
    /// before it is of what the reset emptied and is not taken.
    statuses_emptied: Option<status::Stamp>,
    /// The last ChannelReset processed came late (in a packet filling a
    /// gap, after packets that follow it): what it did differs, and so
    /// does its log line.
    last_reset_late: bool,
    /// Snapshot loops begun (packets numbered 1, either line) since the
    /// last restart of MsgSeqNum, and the arrival time (ns, the loop's
    /// clock) it ends at anyway, until [`RESET_FLOOR_LOOPS`] or then ([`RESTART_WINDOW_NS`]):
    /// a loop taken before the restart may still come, and its
    /// LastMsgSeqNumProcessed, of the old numbering, cannot be told from
    /// the new one's; meanwhile the status of a snapshot not applied
    /// stands as of the old sequence (below every status of the new one).
    since_restart: Option<(u8, u64)>,
    /// The snapshot loops begun on each snapshot line: what ends the
    /// screens above (a line's copy sent again, or stamped no later than
    /// its last beginning, begins none: copies cannot end a screen while
    /// the loop from before the reset still comes).
    loops: Loops,
    /// Changes of the Symbol → instrument mapping so far.
    symbol_moves: u64,
    /// Times the channel was emptied (ChannelResets and weekly restarts).
    emptied: u64,
}

/// The instruments whose visible book, sequencing flags or status may have
/// changed since the publisher last looked (a live feed's; a replay
/// tracks nothing): each listed once, or all of them at once after a
/// change to every instrument (a gap given up, a reset); a group status
/// lists its group's members ([`Groups::drain_changed`]).
#[derive(Debug, Default)]
struct Touched {
    on: bool,
    all: bool,
    list: Vec<u32>,
    /// By instrument: listed in `list`.
    marked: Vec<bool>,
}

impl Touched {
    #[inline]
    fn one(&mut self, i: u32) {
        if self.on && !self.all {
            let m = &mut self.marked[i as usize];
            if !*m {
                *m = true;
                self.list.push(i);
            }
        }
    }

    fn all(&mut self) {
        self.all = self.on;
    }
}

/// The statuses a reset empties.
#[derive(Debug, Clone, Copy)]
enum Statuses {
    /// Every one (a ChannelReset in order, the weekly restart).
    All,
    /// Those sent before this place (a ChannelReset arriving late: the
    /// packets after it, processed first, are of the new sequence).
    Before(status::Stamp),
    /// None (a ChannelReset inferred: where it fell is not known; see
    /// [`Feed::void_trading_before`]).
    Kept,
}

/// The instruments changed since the last ChannelReset (or weekly
/// restart), each once, or all of them: what the next one has to reset.
/// A flood of ChannelResets (thousands fit in a datagram) then costs each
/// what the instruments changed since the one before it cost, not every
/// instrument, as long as each forgets baselines as the one before did: a
/// switch between a reset that forgets them (come late, or inferred) and
/// one that does not goes over every instrument (docs/security.md, "Known
/// limits"). An instrument is listed by the look-ups that may change it
/// (an entry off the fast path, a status, a snapshot, a definition, its
/// making): after a reset no instrument is on the fast path, so the first
/// entry to each takes the slow one.
#[derive(Debug, Default)]
struct SinceReset {
    all: bool,
    list: Vec<u32>,
    /// By instrument: listed in `list`.
    marked: Vec<bool>,
    /// The last reset also forgot every baseline (it came in a packet
    /// filling a gap): the instruments not listed have none.
    forgotten: bool,
}

impl SinceReset {
    fn one(&mut self, i: u32) {
        if self.all {
            return;
        }
        if let Some(m) = self.marked.get_mut(i as usize) {
            if !*m {
                *m = true;
                self.list.push(i);
            }
        }
    }

    /// Hands `f` each instrument listed (every one when `all`).
    fn each(&self, instruments: usize, mut f: impl FnMut(u32)) {
        if self.all {
            (0..instruments as u32).for_each(f);
        } else {
            self.list.iter().for_each(|&i| f(i));
        }
    }

    /// Hands over the instruments a reset forgetting baselines
    /// (`forget`) or not has to go over: those listed, or every one when
    /// `all` or when the instruments not listed are not left as this
    /// reset leaves them. Starts listing again.
    fn take(&mut self, instruments: usize, forget: bool, mut f: impl FnMut(u32)) {
        let all = self.all || self.forgotten != forget;
        self.forgotten = forget;
        #[cfg(test)]
        crate::test_work::add(if all { instruments } else { self.list.len() } as u64);
        if all {
            (0..instruments as u32).for_each(&mut f);
            self.marked.fill(false);
        } else {
            for &i in &self.list {
                self.marked[i as usize] = false;
                f(i);
            }
        }
        self.list.clear();
        self.all = false;
    }
}

impl Feed {
    /// A channel before its first packet.
    pub fn new(settings: Settings) -> Feed {
        Feed {
            seq: Sequence::new(settings.sequencing),
            clock: OffsetEstimator::new(settings.offset, settings.offset_queue),
            settings,
            entries: Vec::new(),
            by_id: IdIndex::new(),
            by_symbol: HashMap::new(),
            renamed: Vec::new(),
            cached: 0,
            waiting_book_entries: 0,
            ends: Ends::default(),
            dirty: Vec::new(),
            blocked: Vec::new(),
            deferred: false,
            deferred_ends: 0,
            #[cfg(test)]
            examined: 0,
            #[cfg(test)]
            fold_examined: 0,
            since_fold: 0,
            undo: UndoLog::default(),
            compacting: Vec::new(),
            snapshots_now: Vec::new(),
            groups: Groups::default(),
            restarts: 0,
            reset_floor: None,
            reset_place: None,
            snapshot_reach: 0,
            unplaced_below: None,
            all_unverified: false,
            verified: Vec::new(),
            last_alive: None,
            watermark: None,
            heartbeat_at: None,
            counters: Counters::default(),
            touched: Touched::default(),
            since_reset: SinceReset::default(),
            holders: Vec::new(),
            void_trading_before: None,
            inferred_in: None,
            statuses_emptied: None,
            last_reset_late: false,
            since_restart: None,
            loops: Loops::default(),
            symbol_moves: 0,
            emptied: 0,
        }
    }

    /// Lists the instruments whose publication may have to change (a live
    /// feed; see [`drain_touched`](Self::drain_touched)).
    pub fn track_touched(&mut self, on: bool) {
        self.touched.on = on;
        self.touched.all = on;
        self.touched.marked.resize(self.entries.len(), false);
    }

    /// Hands `f` each instrument whose visible book, flags or status may
    /// have changed since the last call (every instrument after a change to
    /// all), each once, with the channel for the status in force; then
    /// forgets them. Allocates nothing.
    pub fn drain_touched(&mut self, mut f: impl FnMut(&Feed, u32, &Entry)) {
        let mut t = std::mem::take(&mut self.touched);
        self.groups.drain_changed(|i| t.one(i));
        if t.all {
            for (i, e) in self.entries.iter().enumerate() {
                f(self, i as u32, e);
            }
        } else {
            for &i in &t.list {
                f(self, i, &self.entries[i as usize]);
            }
        }
        for &i in &t.list {
            t.marked[i as usize] = false;
        }
        t.list.clear();
        t.all = false;
        self.touched = t;
    }

    /// Trading statuses sent before a ChannelReset inferred at a place no
    /// longer count (halts and closes do).
    pub fn trading_voided(&self) -> bool {
        self.void_trading_before.is_some()
    }

    /// Times the channel was emptied: by a ChannelReset or the weekly
    /// restart (not the restart of the sequence after a ChannelReset,
    /// which empties nothing more).
    pub fn emptied(&self) -> u64 {
        self.emptied
    }

    /// The packet sequence.
    pub fn sequence(&self) -> &Sequence {
        &self.seq
    }

    /// The clock stepped back to `now` (live: the receive loop's; replay:
    /// the feed's capture stamps): see
    /// [`Sequence::on_clock_stepped_back`]; the window after a restart of
    /// MsgSeqNum ends within its length of `now`.
    pub fn on_clock_stepped_back(&mut self, now: u64) {
        self.seq.on_clock_stepped_back(now);
        if let Some((_, until)) = &mut self.since_restart {
            *until = (*until).min(now.saturating_add(RESTART_WINDOW_NS));
        }
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Book entries taken by instruments only a snapshot can make whole
    /// (no baseline, or overflowed), cached or dropped, ever.
    pub fn waiting_book_entries(&self) -> u64 {
        self.waiting_book_entries
    }

    /// Entries cached now.
    pub fn cached(&self) -> usize {
        self.cached
    }

    /// RptSeq values skipped for good by snapshots, every instrument.
    pub fn ticks_lost(&self) -> u64 {
        self.counters.ticks_lost
    }

    /// Arrival of the last incremental packet processed with no gap open
    /// (ns, local clock); `None` before the first.
    pub fn last_alive(&self) -> Option<u64> {
        self.last_alive
    }

    /// The source watermark (ns since the Unix epoch, venue clock): the
    /// latest source time the channel is known complete up to.
    pub fn source_watermark(&self) -> Option<i128> {
        crate::clock::heartbeat_watermark(self.watermark, self.heartbeat_at, self.clock.offset())
    }

    /// The clock offset in use (local − venue, ns), estimated from
    /// processed incremental packets only.
    pub fn offset(&self) -> i128 {
        self.clock.offset()
    }

    /// Samples the clock-offset estimator merged for room.
    pub fn offset_merges(&self) -> u64 {
        self.clock.merges()
    }

    /// Every instrument, in order of first appearance.
    pub fn instruments(&self) -> &[Entry] {
        &self.entries
    }

    /// The books a check reads for instrument `e` (the working books, or
    /// a copy with the changes of its unfinished event reverted).
    pub fn visible<'e>(&self, e: &'e Entry) -> Cow<'e, Books> {
        e.instrument.visible(&self.undo)
    }

    /// Level 1 of `e`'s visible outright bid and offer, without
    /// allocating.
    #[inline]
    pub fn visible_top(&self, e: &Entry) -> (Option<Level>, Option<Level>) {
        e.instrument.visible_top(&self.undo)
    }

    /// Records the undo log holds (dropped ones included).
    pub fn undo_records(&self) -> usize {
        self.undo.len()
    }

    /// How many times a definition changed which instrument a Symbol names
    /// (a new Symbol, a rename, a move, a delete) or an instrument's
    /// Symbol: a publisher re-checks names and limits only when it
    /// changed.
    pub fn symbol_moves(&self) -> u64 {
        self.symbol_moves
    }

    /// Hands `f` each Symbol whose mapping changed since the last call
    /// (an instrument's old and new Symbol at each add, rename, move or
    /// delete; one may come more than once), with the instrument it left
    /// then (its index; `None` when it named none), then forgets them
    /// (their room kept). Only while touched instruments are tracked.
    pub fn drain_renamed(&mut self, mut f: impl FnMut(&Feed, &str, Option<u32>)) {
        let mut renamed = std::mem::take(&mut self.renamed);
        for (s, left) in &renamed {
            f(self, s.as_str(), *left);
        }
        renamed.clear();
        self.renamed = renamed;
    }

    /// The index of the instrument Symbol `symbol` names, if one does.
    pub fn symbol_index(&self, symbol: &str) -> Option<u32> {
        self.by_symbol.get(symbol).copied()
    }

    /// The instrument named `name`: its Symbol, or `#SecurityID`.
    pub fn find(&self, name: &str) -> Option<&Entry> {
        self.entries.get(self.position(name)?)
    }

    /// Where the instrument named `name` (as [`find`](Self::find) takes
    /// it) stands in [`instruments`](Self::instruments).
    pub fn position(&self, name: &str) -> Option<usize> {
        let i = match name.strip_prefix('#') {
            Some(digits) => {
                // Only as the publication spells it (`#7`, not `#07` or
                // `#+7`): a replay answers for exactly the names a reader
                // of the live publication finds.
                let id = digits.parse::<i32>().ok()?;
                let mut buf = [0u8; 12];
                if id_name(id, &mut buf) != name {
                    return None;
                }
                self.by_id.get(id)?
            }
            None => *self.by_symbol.get(name)?,
        };
        Some(i as usize)
    }

    /// Thresholds for the instrument `name` names under `config`: an
    /// override of its `#SecurityID` first, then of its Symbol (whichever
    /// name the check used) while the Symbol names it, then the feed's;
    /// for a name nothing resolves, an override of that name, else the
    /// feed's. (A Symbol deleted, or moved to another instrument, takes
    /// its override with it: the instrument whose definition still says
    /// it is held to the feed's.)
    pub fn thresholds(&self, config: &crate::config::FeedConfig, name: &str) -> Thresholds {
        let Some(i) = self.position(name) else {
            return config.override_named(name).unwrap_or(config.thresholds);
        };
        let e = &self.entries[i];
        let mut buf = [0u8; 12];
        let id = id_name(e.security_id, &mut buf);
        let named = |s: &str| self.symbol_index(s) == Some(i as u32);
        config
            .override_named(id)
            .or_else(|| {
                e.definition
                    .as_ref()
                    .filter(|d| named(&d.symbol))
                    .and_then(|d| config.override_named(&d.symbol))
            })
            .unwrap_or(config.thresholds)
    }

    /// The instrument of `id`, made (no baseline, default depths) if new;
    /// `None` (counted) for a new one when `max_instruments` are kept: a
    /// flood of forged SecurityIDs must not grow the channel without
    /// bound.
    #[inline]
    fn instrument(&mut self, id: i32) -> Option<u32> {
        let i = match self.by_id.get(id) {
            Some(i) => i,
            None => self.new_instrument(id)?,
        };
        self.since_reset.one(i);
        Some(i)
    }

    #[cold]
    fn new_instrument(&mut self, id: i32) -> Option<u32> {
        if self.entries.len() >= self.settings.max_instruments {
            self.counters.instruments_refused += 1;
            return None;
        }
        let i = self.entries.len() as u32;
        self.entries.push(Entry {
            security_id: id,
            changed: self.deferred_ends,
            blocked: false,
            listed_verified: self.all_unverified,
            instrument: Instrument::new(
                self.settings.default_depth,
                self.settings.default_implied_depth,
            ),
            definition: None,
            status: None,
            snapshots_applied: 0,
            snapshots_ignored: 0,
            snapshot_at: 0,
            last_snapshot: None,
            holds: false,
        });
        self.by_id.insert(id, i);
        if self.touched.on {
            self.touched.marked.push(false);
        }
        self.since_reset.marked.push(false);
        if self.all_unverified {
            self.verified.push(i);
        }
        Some(i)
    }

    /// Gives up the packet gaps whose deadline is strictly before `t`:
    /// every instrument turns unverified, and what the lost packets held
    /// back may now be published. Call before every datagram (any line)
    /// and every check.
    pub fn expire(&mut self, t: u64) {
        if self.seq.expire(t) > 0 {
            self.given_up();
        }
    }

    /// Packet gaps were given up (their deadline passed, or the most gaps
    /// open were exceeded): the lost packets could hold anyone's update,
    /// so every instrument turns unverified, and what they held back may
    /// now be published.
    ///
    /// Every instrument but those verified since the last give-up already
    /// is unverified, so only those are gone over: a flood of packets
    /// each giving a gap up costs each what the instruments it verified
    /// again cost, not every instrument.
    fn given_up(&mut self) {
        if self.all_unverified {
            for &i in &self.verified {
                self.entries[i as usize].instrument.seq.unverify();
                self.touched.one(i);
                self.since_reset.one(i);
            }
        } else {
            for e in &mut self.entries {
                e.instrument.seq.unverify();
            }
            self.touched.all();
            self.since_reset.all = true;
            self.all_unverified = true;
        }
        self.clear_verified();
        debug_assert!(self.entries.iter().all(|e| e.instrument.seq.unverified()));
        self.unblock();
        self.cover();
    }

    /// A packet missing arrived or was given up, or the sequence
    /// restarted: the instruments [`blocked`](Self::blocked) are looked at
    /// again with the others.
    fn unblock(&mut self) {
        for i in self.blocked.drain(..) {
            let e = &mut self.entries[i as usize];
            e.blocked = false;
            if e.instrument.list() {
                self.dirty.push(i);
            }
        }
    }

    /// Lists instrument `i`, unverified while every instrument was, if it
    /// no longer is (see [`given_up`](Self::given_up)).
    #[cold]
    #[inline(never)]
    fn note_verified(&mut self, i: u32) {
        let e = &mut self.entries[i as usize];
        if !e.instrument.seq.unverified() && !e.listed_verified {
            e.listed_verified = true;
            self.verified.push(i);
        }
    }

    /// Empties [`verified`](Self::verified), each instrument no longer
    /// listed.
    fn clear_verified(&mut self) {
        for &i in &self.verified {
            self.entries[i as usize].listed_verified = false;
        }
        self.verified.clear();
    }

    /// Publishes the instruments whose pending changes the ends of event
    /// processed cover.
    ///
    /// What is visible is read only between datagrams, and within one
    /// datagram what the ends processed cover only grows (no packet is
    /// received or given up mid-datagram), so an instrument need be
    /// examined only at the datagram's end and, if an end came since its
    /// last entry, before its next (its changes are covered all together
    /// or not at all; with no end since, the contract has not looked). With no
    /// packet missing this runs at each end of event (usually over one
    /// instrument or none); with one missing, or in a datagram that filled
    /// one (the instruments that waited past it are all listed again),
    /// instruments may wait in numbers, and it runs once at the datagram's end
    /// ([`deferred`](Self::deferred), [`examine`]), so a
    /// datagram costs what waits once, not once per end of event.
    #[inline]
    fn cover(&mut self) {
        self.ends.settle(&self.seq);
        // The usual cases: nothing pending (an event whole in its
        // datagram records nothing), or one instrument, without the loop.
        if self.dirty.is_empty() {
            return;
        }
        if let [i] = self.dirty[..] {
            let inst = &mut self.entries[i as usize].instrument;
            let covered = inst.cover(&self.ends, &self.seq, &mut self.undo);
            if covered {
                self.touched.one(i);
            }
            if !inst.pending() {
                inst.unlist();
                self.dirty.clear();
            }
            return;
        }
        self.cover_each();
    }

    /// Folds each pending instrument's positions before the first missing
    /// packet ([`Instrument::fold_pending`]) once they have doubled since
    /// the last fold: however long an event stays unfinished, its
    /// instruments keep about a position per change past the first
    /// missing packet, not one per message for ever. Run once the entries
    /// since the last pass are as many as the instruments pending
    /// ([`since_fold`](Self::since_fold)): what grew meanwhile is at most
    /// those entries.
    fn fold_pending(&mut self) {
        #[cfg(test)]
        {
            self.fold_examined += self.dirty.len() as u64;
        }
        let (seq, entries) = (&self.seq, &mut self.entries);
        let mut m = None;
        for &i in &self.dirty {
            let inst = &mut entries[i as usize].instrument;
            if inst.wants_fold() {
                inst.fold_pending(*m.get_or_insert_with(|| seq.first_missing()));
            }
        }
    }

    /// [`cover`](Self::cover) over every instrument pending.
    #[inline(never)]
    fn cover_each(&mut self) {
        // The instruments still pending are kept in place, in order.
        #[cfg(test)]
        {
            self.examined += self.dirty.len() as u64;
        }
        // The highest MsgSeqNum received, while a packet is missing: a
        // change below a missing packet is blocked (`h` is at least 1 and
        // at most 2^32, `h − 1` a u32).
        let highest = self.seq.high().filter(|_| self.seq.gaps_open() != 0);
        let highest = highest.map(|h| (h - 1) as u32);
        let mut kept = 0;
        for k in 0..self.dirty.len() {
            let i = self.dirty[k];
            let e = &mut self.entries[i as usize];
            let inst = &mut e.instrument;
            if inst.cover(&self.ends, &self.seq, &mut self.undo) {
                self.touched.one(i);
                inst.unlist();
            } else if !inst.pending() {
                inst.unlist();
            } else if highest.is_some_and(|h| {
                inst.first_pending()
                    .is_some_and(|p| !self.seq.complete(p.0, h))
            }) {
                inst.unlist();
                if !e.blocked {
                    e.blocked = true;
                    self.blocked.push(i);
                }
            } else {
                self.dirty[kept] = i;
                kept += 1;
            }
        }
        self.dirty.truncate(kept);
    }

    /// Drops from the undo log the records of changes made visible since
    /// (an instrument waiting long for its event's end while others come
    /// and go): linear in the instruments pending and the records kept,
    /// and due only once the records dropped outnumber those kept.
    /// Only a pending instrument has records, and every one is in
    /// `dirty` or `blocked`: those are gone over, once each, in index
    /// order.
    #[cold]
    fn compact_undo(&mut self) {
        let order = &mut self.compacting;
        order.clear();
        order.extend_from_slice(&self.dirty);
        order.extend_from_slice(&self.blocked);
        order.sort_unstable();
        order.dedup();
        debug_assert!(self.entries.iter().enumerate().all(|(i, e)| {
            order.binary_search(&(i as u32)).is_ok() || e.instrument.undo().is_empty()
        }));
        let mut entries = self.entries.iter_mut();
        let mut next = 0;
        self.undo.compact(order.iter().filter_map(move |&i| {
            // Ascending and unique: each step skips to the next one listed.
            let e = entries.nth(i as usize - next)?;
            next = i as usize + 1;
            Some(e.instrument.undo_mut())
        }));
    }

    /// One datagram of the incremental lines, arrived at `t`.
    pub fn on_incremental(&mut self, payload: &[u8], t: u64) -> Result<(), Reject> {
        self.expire(t);
        // The other line's copy of a packet processed (or a late copy of
        // the sequence before a restart) is checked whole, as any
        // datagram, but nothing of it is kept for applying.
        let header = super::packet::seq_num(payload).zip(super::packet::sending_time(payload));
        if header.is_some_and(|(s, sent)| self.seq.ignores(s, t, sent)) {
            return self.on_ignored(payload, t);
        }
        // Each body is read once, by the validity walk: the first
        // `WALKED` kept for the pass that applies them (more, parsed again).
        let mut walked = [(0, Body::NotRead); WALKED];
        let (mut kept, mut seen) = (0, 0);
        // The last message ending an event: every change before it is
        // covered by the end of this datagram.
        let mut last_end = None;
        let packet = Packet::new_checked_with(payload, |id, body| {
            if body
                .match_event_indicator()
                .is_some_and(|e| e.end_of_event())
            {
                last_end = Some(seen);
            }
            seen += 1;
            if let Some(b) = walked.get_mut(kept) {
                *b = (id, body);
                kept += 1;
            }
        })?;
        let s = packet.seq_num();
        self.counters.messages += packet.message_count() as u64;
        let first = self.seq.high().is_none();
        let (seen, given_up) = self.seq.on_packet(s, t, packet.sending_time());
        if given_up > 0 {
            // Gaps given up for room, before this packet's entries.
            self.given_up();
        }
        let fill = match seen {
            Seen::Duplicate | Seen::Stale => return Ok(()),
            Seen::Process { fill, restart } => {
                if let Some(r) = restart {
                    self.restarts = self.restarts.wrapping_add(1);
                    self.since_restart = Some((0, t.saturating_add(RESTART_WINDOW_NS)));
                    self.snapshot_reach = 0;
                    self.unplaced_below = None;
                    match r {
                        Restart::Weekly => {
                            self.reset_channel(false, Statuses::All);
                            self.statuses_emptied = Some((self.restarts, (0, 0)));
                            // As after a ChannelReset: a loop taken before
                            // the restart may still come, its instruments'
                            // last events no later than this packet's
                            // sending. Its LastMsgSeqNumProcessed, of the
                            // old numbering, may be anywhere in the new
                            // one's: no place tells it apart.
                            self.screen_snapshots_to(packet.sending_time());
                            self.reset_place = None;
                        }
                        Restart::AfterReset => self.restart_positions(),
                    }
                }
                if fill {
                    // Before its ends: one may now cover them.
                    self.unblock();
                }
                if first && self.before_snapshots(s) {
                    self.infer_reset(packet.sending_time(), None);
                    self.snapshot_reach = 0;
                }
                if first {
                    self.unverify_not_continued_by(s);
                }
                fill
            }
        };
        // A packet filling a gap below the newest when the channel was
        // emptied without its place known: its entries are not applied.
        let mut unplaced = fill && self.unplaced_below.is_some_and(|b| s < b);
        let mut source = None;
        // Past the bodies kept, each message is read again.
        let mut more = packet.messages().skip(WALKED);
        for k in 0..packet.message_count() {
            let at = (s, k as u16);
            // The template, its counters and its end of event all come
            // from this body.
            let (id, body) = match walked.get(k) {
                Some(&b) => b,
                None => match more.next() {
                    Some(m) => (m.template_id(), m.body()),
                    None => break,
                },
            };
            // One dispatch on the body: its counters, what it does and its
            // MatchEventIndicator.
            if !matches!(body, Body::NotRead) || Kind::of(id) != Kind::Unknown {
                if let Some(n) = self.counters.by_template.get_mut(usize::from(id)) {
                    *n += 1;
                }
            }
            let mei = match body {
                Body::ChannelReset(reset) => {
                    self.statuses_emptied = Some((self.restarts, at));
                    self.last_reset_late = fill;
                    if fill {
                        // Packets after it were processed before it, on
                        // books it now empties: none is trusted until its
                        // snapshot, and what they set of the new sequence
                        // (statuses; the entries, forgotten) stays so.
                        self.reset_channel(true, Statuses::Before((self.restarts, at)));
                        self.unplace_below_newest();
                        unplaced = true;
                        self.void_lifted_by(s);
                    } else {
                        self.reset_channel(false, Statuses::All);
                    }
                    self.counters.channel_resets += 1;
                    self.seq.channel_reset(s, packet.sending_time());
                    source = Some(reset.transact_time());
                    self.screen_snapshots_to(reset.transact_time());
                    Some(reset.match_event_indicator())
                }
                Body::Heartbeat => {
                    self.counters.heartbeats += 1;
                    None
                }
                Body::SecurityStatus(st) => {
                    let code = st.trading_status().unwrap_or(255);
                    self.on_status(st.security_id(), st.security_group(), st.asset(), code, at);
                    source = Some(st.transact_time());
                    Some(st.match_event_indicator())
                }
                Body::Incremental(inc) => {
                    self.counters.mbo_order_entries += u64::from(inc.mbo_order_entries());
                    self.since_fold += usize::from(inc.entry_count());
                    let tt = inc.transact_time();
                    source = Some(tt);
                    if unplaced {
                        self.counters.anomalies += u64::from(inc.entry_count());
                    } else {
                        self.on_entries(&inc, at, tt, last_end.is_some_and(|e| k <= e));
                    }
                    Some(inc.match_event_indicator())
                }
                Body::Definition(d) => {
                    self.on_definition(&d);
                    Some(d.match_event_indicator())
                }
                Body::Snapshot(_) | Body::NotRead => {
                    self.count_unread(Kind::of(id));
                    None
                }
            };
            if mei.is_some_and(|e| e.end_of_event()) {
                self.ends.push(at, &self.seq);
                // A datagram that fills a gap defers too: it may end the
                // events of instruments waiting in numbers past the gap.
                if fill || self.seq.gaps_open() != 0 {
                    self.deferred = true;
                    self.deferred_ends += 1;
                } else if !self.dirty.is_empty() {
                    // (Nothing pending: the ends settle at the next look.)
                    self.cover();
                }
            }
        }
        if fill || self.deferred {
            self.deferred = false;
            self.cover();
        }
        if !self.dirty.is_empty() && self.since_fold >= self.dirty.len() {
            self.since_fold = 0;
            self.fold_pending();
        }
        if self.undo.wants_compaction() {
            self.compact_undo();
        }
        self.clock.on_packet(t, packet.sending_time());
        crate::clock::forget_beat_ahead(&mut self.heartbeat_at, t);
        if self.seq.gaps_open() == 0 {
            self.last_alive = Some(t);
            match source {
                Some(tt) => {
                    // Never past the packet's SendingTime (not in the
                    // contract: docs/mdp3.md): an event is sent after it
                    // happened, and a TransactTime corrupted far ahead
                    // would otherwise hold the watermark there for good.
                    let at = tt.min(packet.sending_time()) as i128;
                    self.watermark = Some(self.watermark.map_or(at, |w| w.max(at)));
                }
                None => self.heartbeat_at = Some(self.heartbeat_at.map_or(t, |h| h.max(t))),
            }
        }
        Ok(())
    }

    /// A datagram [`Sequence::ignores`]: checked, counted, no other
    /// effect.
    #[inline(never)]
    fn on_ignored(&mut self, payload: &[u8], t: u64) -> Result<(), Reject> {
        let packet = Packet::new_checked(payload)?;
        self.counters.messages += packet.message_count() as u64;
        let (seen, given_up) = self
            .seq
            .on_packet(packet.seq_num(), t, packet.sending_time());
        debug_assert!(matches!(seen, Seen::Duplicate | Seen::Stale) && given_up == 0);
        Ok(())
    }

    /// The entries of an incremental message at `at`, of TransactTime
    /// `tt`, each to its instrument; `ends_here`: an end of event at or
    /// after it comes in this datagram. Kept out of the packet's loop, so
    /// that the entries' loop holds its few values in registers.
    #[inline(never)]
    fn on_entries(&mut self, inc: &Incremental<'_>, at: Position, tt: u64, ends_here: bool) {
        // 46, the bulk of a channel, read at its fixed offsets.
        let is_46 = inc.template().id == BOOK.id;
        for e in inc.entries() {
            let (id, r, update) = match is_46.then(|| e.book_46()).flatten() {
                Some(b) => {
                    let u = Update {
                        action: b.action,
                        entry: b.entry_type,
                        level: b.level,
                        price: b.price,
                        size: b.size,
                        orders: b.orders,
                    };
                    // The usual case, the instrument's next RptSeq, applied
                    // at once.
                    if self.apply_next(b.security_id, b.rpt_seq, at, tt, &u, ends_here) {
                        continue;
                    }
                    (b.security_id, b.rpt_seq, Some(u))
                }
                None => (
                    e.security_id(),
                    e.rpt_seq(),
                    e.book().map(|b| Update {
                        action: b.action().code(),
                        entry: b.entry_type().code(),
                        level: b.level(),
                        price: b.price(),
                        size: b.size(),
                        orders: b.orders(),
                    }),
                ),
            };
            self.on_entry(
                id,
                r,
                Cached {
                    at,
                    transact_time: tt,
                    update,
                },
            );
        }
    }

    fn on_entry(&mut self, id: i32, r: u32, entry: Cached) {
        let Some(i) = self.instrument(id) else {
            return;
        };
        let packet = (self.restarts, entry.at.0);
        if self.inferred_in != Some(packet) && self.went_back(i, r, entry.at.0) {
            // The reset lies in a packet below this one: what this one
            // sent is the new sequence's. (Inferred once a packet: an entry
            // that goes back again after it in the same packet went back
            // from one of the packet's own, a duplicate as the contract
            // takes it.)
            self.inferred_in = Some(packet);
            self.infer_reset(entry.transact_time, Some((self.restarts, (entry.at.0, 0))));
            // Listed again: the entry changes it after the reset.
            self.since_reset.one(i);
        }
        self.touched.one(i);
        let max = self.settings.max_cached;
        if self.deferred {
            self.look_if_due(i);
        }
        let inst = &mut self.entries[i as usize].instrument;
        let anomalies = inst.anomalies();
        let was = inst.seq.overflowed();
        let unverified = self.all_unverified && inst.seq.unverified();
        // A book entry of an instrument that only a snapshot can make
        // whole (no baseline, or its cache overflowed): not one waiting
        // in a hole, which the other line's copy may fill.
        let for_a_snapshot = entry.update.is_some() && (inst.seq.rpt_seq().is_none() || was);
        let took = inst.on_entry(r, entry, &mut self.cached, max, &mut self.undo);
        if took == Took::Dropped && !was {
            self.counters.cache_overflows += 1;
        }
        if for_a_snapshot && matches!(took, Took::Cached | Took::Dropped) {
            self.waiting_book_entries += 1;
        }
        self.counters.anomalies += inst.anomalies() - anomalies;
        if inst.list() {
            self.dirty.push(i);
        }
        if unverified {
            self.note_verified(i);
        }
    }

    /// Whether entry `r` of instrument `i`, in the packet numbered `s`,
    /// shows its RptSeq gone back. Within one sequence an instrument's
    /// RptSeq only grows with MsgSeqNum, so the newest packet (no gap
    /// filled by it) carries values past every one received before, and
    /// past the last applied unless a snapshot taken at or after this
    /// packet set it. Only a ChannelReset restarts RptSeq without
    /// restarting MsgSeqNum: the contract takes such an entry for a
    /// duplicate.
    #[inline]
    fn went_back(&self, i: u32, r: u32, s: u32) -> bool {
        let e = &self.entries[i as usize];
        let seq = &e.instrument.seq;
        r != 0
            && self.seq.high() == Some(u64::from(s) + 1)
            && (seq.high_seen().is_some_and(|h| r <= h)
                || (s > e.snapshot_at && seq.rpt_seq().is_some_and(|q| r <= q)))
    }

    /// The lines' first packet, numbered `s`, came: the packets below it
    /// were never received, so an instrument whose snapshots (applied
    /// before it) were all taken before the last of them is unverified —
    /// one of them could hold its update, which the snapshot does not
    /// show. So is one whose snapshot was taken at or past `s` (less than
    /// `restart_margin` past it: [`before_snapshots`](Self::before_snapshots)
    /// takes further ones for an older sequence's): the lines behind the
    /// loop, whose entries up to it are duplicates, or the loop of a
    /// sequence before a restart the lines' first packets follow unseen,
    /// whose RptSeq the new values would read as duplicates of, the old
    /// book `ok`. Its next entry in order verifies it. Only a snapshot
    /// taken just before `s` vouches for what follows. (Not in the
    /// contract, which matches a snapshot by RptSeq alone: docs/mdp3.md,
    /// "A snapshot taken before a packet never received".)
    fn unverify_not_continued_by(&mut self, s: u32) {
        let u = self.seq.unseen_through();
        for (i, e) in self.entries.iter_mut().enumerate() {
            let taken_before_unseen = u.is_some_and(|u| e.snapshot_at < u);
            if e.instrument.seq.rpt_seq().is_some() && (taken_before_unseen || e.snapshot_at >= s) {
                e.instrument.seq.unverify();
                self.touched.one(i as u32);
                self.since_reset.one(i as u32);
            }
        }
    }

    /// Whether the window after a restart of MsgSeqNum is open at `now`
    /// (ns, the loop's clock): a snapshot not applied then gives its status
    /// as of the sequence before, so no status of this one
    /// ([`since_restart`](Self::since_restart)).
    pub fn restart_window_open(&self, now: u64) -> bool {
        self.since_restart.is_some_and(|(_, until)| now < until)
    }

    /// Whether the first packet of the lines, numbered `s`, comes
    /// `restart_margin` or more before the snapshots applied so far were
    /// taken: they are of a sequence before a restart this one follows
    /// (a ChannelReset, or the weekly restart, unseen), and show books it
    /// emptied. Matched by RptSeq alone, the new sequence's values would
    /// read as duplicates of theirs until one passed, to apply on them.
    fn before_snapshots(&self, s: u32) -> bool {
        let margin = u64::from(self.settings.sequencing.restart_margin);
        u64::from(s) + margin <= u64::from(self.snapshot_reach)
    }

    /// A ChannelReset lost on both lines, inferred from an entry whose
    /// RptSeq went back ([`went_back`](Self::went_back)) at TransactTime
    /// `tt`. Left alone, the new sequence's values read as duplicates of
    /// the old until one passes an instrument's old RptSeq, which would
    /// then apply in order, and verify it again, on a book mixing both
    /// sequences. Where the reset fell is unknown, so it is taken as one
    /// arriving late ([`reset_channel`](Self::reset_channel) forgetting
    /// baselines): every book emptied, no instrument trusted until its
    /// snapshot or its RptSeq 1 (the entry at hand may be one). Statuses
    /// are kept, those after the reset being the new sequence's; of
    /// those sent before `at` (its packet's start), the ones saying trading
    /// no longer count ([`void_trading_before`](Self::void_trading_before)):
    /// a halt or close kept errs to the safe side, a trading status would
    /// hide a definition's. With `at` `None` (the first packet, every
    /// status before it a snapshot's of the older sequence) every status
    /// is emptied. The reset
    /// may lie in a gap still open (late on both lines, not lost): a
    /// packet filling it has its entries not applied
    /// ([`unplaced_below`](Self::unplaced_below)); a ChannelReset in it
    /// is processed as any late one. Snapshots of the old books are
    /// screened as after a reset dated `tt`, which the reset is not later
    /// than.
    #[cold]
    #[inline(never)]
    fn infer_reset(&mut self, tt: u64, at: Option<status::Stamp>) {
        self.counters.resets_inferred += 1;
        self.counters.anomalies += 1;
        match at {
            Some(at) => {
                self.reset_channel(true, Statuses::Kept);
                self.void_trading_before = Some(self.void_trading_before.map_or(at, |v| v.max(at)));
            }
            None => self.reset_channel(true, Statuses::All),
        }
        self.unplace_below_newest();
        self.screen_snapshots_to(tt);
        if at.is_none() {
            // Inferred at the first packet from snapshots of a sequence
            // before it: their positions compare nothing with this one's.
            self.reset_place = None;
        }
    }

    /// Packets below the newest processed that fill a gap have their
    /// entries not applied from now on ([`unplaced_below`](Self::unplaced_below)).
    fn unplace_below_newest(&mut self) {
        if let Some(h) = self.seq.high() {
            // `h` is at least 1 and at most 2^32: `h − 1` is a u32.
            let newest = (h - 1) as u32;
            self.unplaced_below = Some(self.unplaced_below.map_or(newest, |b| b.max(newest)));
        }
    }

    /// Snapshots no later than TransactTime `tt` (a ChannelReset's, or a
    /// time an inferred one is not later than) and
    /// past RptSeq 0 are ignored for the next snapshot loops (see
    /// [`reset_floor`](Self::reset_floor)).
    fn screen_snapshots_to(&mut self, tt: u64) {
        // A screen set without a place (a weekly restart, a reset inferred
        // at the lines' first packet) still in force: snapshots from
        // before it carry another numbering, which a place in this one
        // cannot tell apart, so none is set while it lasts.
        let placeless = self.reset_floor.is_some() && self.reset_place.is_none();
        let floor = self.reset_floor.map_or(0, |(f, _)| f);
        self.reset_floor = Some((floor.max(tt), 0));
        // `high` is at least 1 and at most 2^32 here: `high − 1` is a u32.
        self.reset_place = match placeless {
            true => None,
            false => self.seq.high().map(|h| (self.restarts, (h - 1) as u32)),
        };
    }

    /// A book entry applied at once if it is its instrument's next
    /// RptSeq with nothing cached ([`Instrument::apply_next`]), with what
    /// [`on_entry`](Self::on_entry) counts then; false, changing nothing
    /// otherwise (a new instrument is left to `on_entry`).
    #[inline]
    fn apply_next(
        &mut self,
        id: i32,
        r: u32,
        at: Position,
        tt: u64,
        u: &Update,
        ends_here: bool,
    ) -> bool {
        let Some(i) = self.by_id.get(id) else {
            // New: made (or refused) by `on_entry`.
            return false;
        };
        if self.deferred {
            self.look_if_due(i);
        }
        self.touched.one(i);
        let inst = &mut self.entries[i as usize].instrument;
        if !inst.seq.is_fast(r) {
            self.since_reset.one(i);
        }
        let anomalies = inst.anomalies();
        let next = inst.apply_next(r, at, tt, u, &mut self.undo, ends_here);
        if next == Next::Left {
            return false;
        }
        self.counters.anomalies += inst.anomalies() - anomalies;
        if inst.list() {
            self.dirty.push(i);
        }
        if next == Next::Verified && self.all_unverified {
            self.note_verified(i);
        }
        true
    }

    fn on_status(&mut self, id: Option<i32>, group: &[u8], asset: &[u8], code: u8, at: Position) {
        if let Some(id) = id {
            let Some(i) = self.instrument(id) else {
                return;
            };
            self.touched.one(i);
            if self.record_status(i, code, (self.restarts, at)) {
                self.counters.anomalies += 1;
            }
            return;
        }
        self.on_group_status(group, asset, code, at);
    }

    /// Records `code` as instrument `i`'s own status at `at` (kept if no
    /// older than the one it has), listing it among the holders; whether
    /// the code is an odd one (not listed).
    fn record_status(&mut self, i: u32, code: u8, at: status::Stamp) -> bool {
        let e = &mut self.entries[i as usize];
        let odd = status::record(&mut e.status, code, at);
        if e.status.is_some() && !e.holds {
            e.holds = true;
            self.holders.push(i);
        }
        odd
    }

    /// A SecurityStatus without SecurityID: for a SecurityGroup, an Asset
    /// or both. Kept out of the packet's loop (rare, and its map work
    /// would crowd the loop's registers).
    #[inline(never)]
    fn on_group_status(&mut self, group: &[u8], asset: &[u8], code: u8, at: Position) {
        let (group, asset) = (trim(group), trim(asset));
        if group.is_empty() && asset.is_empty() {
            self.counters.anomalies += 1;
            return;
        }
        // The instruments it may change are published again: its
        // group's members, not every instrument.
        let max = self.max_groups();
        let r = self.groups.record(
            group,
            asset,
            code,
            (self.restarts, at),
            max,
            self.touched.on,
        );
        self.counters.anomalies += r.anomalies;
    }

    /// The (SecurityGroup, Asset) pairs kept: three for each instrument
    /// kept (its group, its asset, both), the most that can ever match
    /// one, so that statuses naming made-up groups cannot grow the map
    /// without bound.
    fn max_groups(&self) -> usize {
        self.settings.max_instruments.saturating_mul(3)
    }

    fn on_definition(&mut self, d: &super::template::Definition<'_>) {
        self.counters.definitions += 1;
        let raw = trim(d.symbol());
        // A Symbol spelled as a `#SecurityID` name (it would stand for
        // another instrument's), or with a byte no venue's Symbol holds
        // (its text would not be the bytes a reader's name compares, and
        // past 32 bytes two such Symbols would share one directory name):
        // no Symbol, counted (not in the contract: docs/mdp3.md).
        let odd = raw.first() == Some(&b'#') || !raw.iter().all(|b| (0x20..=0x7e).contains(b));
        if odd {
            self.counters.anomalies += 1;
        }
        let symbol = if odd {
            Cow::Borrowed("")
        } else {
            String::from_utf8_lossy(raw)
        };
        let mapped = d.security_update_action() != b'D' && !symbol.is_empty();
        let Some(i) = self.instrument(d.security_id()) else {
            // Refused (past `max_instruments`): the Symbol names an
            // instrument not kept, so it no longer finds the one it named.
            if mapped {
                self.unmap_symbol(&symbol);
            }
            return;
        };
        self.touched.one(i);
        let (mut depth, mut implied) = (None, None);
        for f in d.feed_types() {
            let md = u8::try_from(f.market_depth()).ok().filter(|&n| n > 0);
            match trim(f.md_feed_type()) {
                b"GBX" => depth = md,
                b"GBI" => implied = md,
                _ => {}
            }
        }
        let e = &mut self.entries[i as usize];
        e.instrument.set_depths(
            depth.unwrap_or(self.settings.default_depth),
            implied.unwrap_or(self.settings.default_implied_depth),
            &mut self.undo,
        );
        // `D` drops the Symbol's mapping, not the instrument's state. The
        // mapping moves only when it changes: the definition loop repeating
        // a definition allocates nothing. A Symbol another instrument took
        // since stays that instrument's.
        let old = e.definition.as_ref().map(|d| d.symbol.as_str());
        // The Symbol it held, dropped unless it stays; the new one, taken
        // unless it is already its own. Neither (a repeat, a `D` repeated):
        // nothing moves.
        let dropped = old
            .filter(|o| self.by_symbol.get(*o) == Some(&i))
            .filter(|o| !(mapped && *o == &*symbol));
        let taken = mapped && self.by_symbol.get(&*symbol) != Some(&i);
        // Its Symbol's text changed without a mapping moving (one another
        // instrument took meanwhile, left for none): its limits may have.
        let retitled = old.map_or(!symbol.is_empty(), |o| o != symbol);
        if dropped.is_some() || taken || retitled {
            self.symbol_moves += 1;
            if self.touched.on {
                self.renamed
                    .extend(dropped.map(|o| (SymbolKey::new(o), Some(i))));
                if taken {
                    let left = self.by_symbol.get(&*symbol).copied();
                    self.renamed.push((SymbolKey::new(&symbol), left));
                }
            }
            if let Some(old) = dropped {
                self.by_symbol.remove(old);
            }
            if taken {
                self.by_symbol.insert(SymbolKey::new(&symbol), i);
            }
        }
        // Its fields rewritten in place: a text's capacity is kept (grown
        // amortised by `String`), nothing allocated when it is the same.
        let def = e.definition.get_or_insert_with(Definition::default);
        set_text(&mut def.symbol, &symbol);
        set_lossy(&mut def.group, trim(d.security_group()));
        set_lossy(&mut def.asset, trim(d.asset()));
        def.key = groups::key(trim(d.security_group()), trim(d.asset()));
        self.groups.set_member(i, def.key);
        def.depth = depth;
        def.implied_depth = implied;
        // Its status read as a SecurityStatus's: no change (103, null)
        // keeps the one it had, an unlisted code too, counted.
        match d.trading_status().map(|c| (c, status::meaning(c))) {
            Some((c, status::Meaning::Is(_))) => def.status = Some(c),
            Some((_, status::Meaning::Unknown)) => self.counters.anomalies += 1,
            Some((_, status::Meaning::Unchanged)) | None => {}
        }
        def.display_factor = d.display_factor();
        def.min_price_increment = d.min_price_increment();
        def.deleted = d.security_update_action() == b'D';
    }

    /// `symbol` no longer names the instrument it named, if any (a
    /// definition gave it to one not kept): dropped from the mapping, a
    /// move the publisher settles (the directory's entry withdrawn).
    #[cold]
    fn unmap_symbol(&mut self, symbol: &str) {
        if let Some(left) = self.by_symbol.remove(symbol) {
            self.symbol_moves += 1;
            if self.touched.on {
                self.renamed.push((SymbolKey::new(symbol), Some(left)));
            }
        }
    }

    /// One datagram of the snapshot lines (the market recovery loop), as
    /// of snapshot line A ([`on_snapshot_from`](Self::on_snapshot_from)).
    pub fn on_snapshot(&mut self, payload: &[u8], t: u64) -> Result<(), Reject> {
        self.on_snapshot_from(0, payload, t)
    }

    /// Whether the last ChannelReset processed came late, in a packet
    /// filling a gap (docs/mdp3.md, "A late ChannelReset").
    pub fn last_reset_late(&self) -> bool {
        self.last_reset_late
    }

    /// The snapshot loops begun on the snapshot lines.
    pub fn loops(&self) -> &Loops {
        &self.loops
    }

    /// One datagram of snapshot line `line` (0: A, 1: B).
    pub fn on_snapshot_from(&mut self, line: usize, payload: &[u8], t: u64) -> Result<(), Reject> {
        self.expire(t);
        let packet = Packet::new_checked(payload)?;
        self.counters.snapshot_packets += 1;
        if self.since_restart.is_some_and(|(_, until)| t >= until) {
            self.since_restart = None;
        }
        if self
            .loops
            .on_packet(line, packet.seq_num(), packet.sending_time(), t)
        {
            if let Some((_, loops)) = &mut self.reset_floor {
                *loops += 1;
                if *loops >= RESET_FLOOR_LOOPS {
                    self.reset_floor = None;
                }
            }
            if let Some((loops, _)) = &mut self.since_restart {
                *loops += 1;
                if *loops >= RESET_FLOOR_LOOPS {
                    self.since_restart = None;
                }
            }
        }
        let mut applied = false;
        self.snapshots_now.clear();
        for m in packet.messages() {
            let Body::Snapshot(snap) = m.body() else {
                self.count_unread(m.kind());
                continue;
            };
            // What the loop under way holds of its TotNumReports, and
            // whether each snapshot said its instrument's status in this
            // sequence: a loop read whole ends a give-up's hold on the
            // lines ([`Loops::on_snapshot`]).
            let (total, last) = (snap.tot_num_reports(), snap.last_msg_seq_num_processed());
            let Some(i) = self.instrument(snap.security_id()) else {
                // (None of this channel's: nothing to say.)
                self.loops.on_snapshot(line, total, last, true);
                continue;
            };
            // Taken before the last ChannelReset (its instrument's last
            // event no later than the reset, yet RptSeq past 0: a loop
            // from before it, come late). Matched by RptSeq alone it would
            // roll a fresh instrument back to the emptied books and take
            // the new sequence's entries for duplicates of the old. So is
            // one taken before the newest packet processed when a reset
            // came late or was inferred: the entries of the packets
            // processed first were forgotten with the baseline, and it
            // would apply and read whole without them. And one taken far
            // past the lines ([`far_ahead`](Self::far_ahead)).
            let last = snap.last_msg_seq_num_processed();
            let taken_after = self
                .reset_place
                .is_some_and(|(epoch, place)| epoch == self.restarts && last >= place);
            let screened = snap.rpt_seq() > 0
                && self.reset_floor.is_some_and(|(r, _)| {
                    (snap.transact_time() <= r && !taken_after)
                        || self.unplaced_below.is_some_and(|b| last < b)
                });
            if screened || self.far_ahead(last) {
                let e = &mut self.entries[i as usize];
                e.snapshots_ignored += 1;
                self.counters.snapshots_ignored += 1;
                self.counters.anomalies += 1;
                self.loops.on_snapshot(line, total, last, false);
                continue;
            }
            self.touched.one(i);
            let e = &mut self.entries[i as usize];
            let anomalies = e.instrument.anomalies();
            // Pending changes put an instrument in `dirty` (until covered
            // or found without any).
            let unverified = self.all_unverified && e.instrument.seq.unverified();
            let unseen = self.seq.unseen_through();
            let matched = e.instrument.on_snapshot(
                snap.rpt_seq(),
                &mut self.cached,
                &mut self.undo,
                |books: &mut Books| {
                    for x in snap.entries() {
                        if let Some(level) = x.level() {
                            books.set(
                                x.entry_type().code(),
                                level,
                                x.price(),
                                x.size().unwrap_or(0),
                                x.orders(),
                            );
                        }
                    }
                },
            );
            // Cached entries the snapshot let apply may be odd ones.
            self.counters.anomalies += e.instrument.anomalies() - anomalies;
            let is_applied = matches!(matched, Matched::Applied { .. });
            match matched {
                Matched::Applied { lost } => {
                    applied = true;
                    // Taken before a packet never received (a gap given
                    // up, or below the lines' first): its books apply,
                    // but that packet could hold an update of it the
                    // snapshot does not show (not in the contract:
                    // docs/mdp3.md, "A snapshot taken before a packet
                    // never received").
                    if unseen.is_some_and(|u| last < u) {
                        e.instrument.seq.unverify();
                        self.since_reset.one(i);
                    }
                    e.snapshot_at = e.snapshot_at.max(last);
                    self.snapshot_reach = self.snapshot_reach.max(last);
                    e.snapshots_applied += 1;
                    e.last_snapshot = Some((snap.rpt_seq(), last));
                    self.counters.ticks_lost += lost;
                    self.counters.snapshots_applied += 1;
                    // Its changes were replaced: looked at again, even if
                    // it was blocked.
                    if e.instrument.list() {
                        self.dirty.push(i);
                    }
                    self.snapshots_now.push(i);
                }
                Matched::Ignored => {
                    e.snapshots_ignored += 1;
                    self.counters.snapshots_ignored += 1;
                }
            }
            // Its status counts at its place in the sequence whether its
            // books apply or not (not in the contract: docs/mdp3.md, "A
            // snapshot's status"): a status carries no RptSeq, so one lost
            // for good would otherwise go unseen on an instrument whose
            // RptSeq is whole. Not applied, only once the lines have
            // received past its place, and past RptSeq 0: one ahead of
            // them, or of an instrument without entries since a reset
            // (which the reset screen cannot date), may be of a sequence
            // before a restart, whose positions say nothing of this one's.
            // Stamped before the last reset, never: the reset emptied it.
            // Not applied soon after a restart, as of the sequence before
            // it (see [`since_restart`](Self::since_restart)). An odd code
            // counts once, when applied (one ignored repeats each loop).
            let epoch = match self.since_restart {
                Some(_) if !is_applied => self.restarts.wrapping_sub(1),
                _ => self.restarts,
            };
            let at = (epoch, (last, u16::MAX));
            let placed = is_applied
                || (snap.rpt_seq() > 0 && self.seq.high().is_some_and(|h| u64::from(last) < h));
            let counts = placed && self.statuses_emptied.is_none_or(|e| at > e);
            self.loops
                .on_snapshot(line, total, last, counts && epoch == self.restarts);
            if let Some(code) = snap.trading_status() {
                if counts {
                    self.record_status(i, code, at);
                }
                if is_applied && status::meaning(code) == status::Meaning::Unknown {
                    self.counters.anomalies += 1;
                }
            }
            if unverified {
                self.note_verified(i);
            }
        }
        // Coverage is examined again after an applied snapshot only
        // (clarification 4): one ignored changes nothing it depends on. And
        // only that snapshot's instrument: a snapshot changes neither the
        // ends of event processed nor the packets missing, only its own
        // instrument's changes (replaced, and the cached ones applied after
        // it), so the others pending are as covered as they were (a
        // sender leaving thousands with an event never ended made every
        // applied snapshot go over all of them).
        if applied {
            self.ends.settle(&self.seq);
            #[cfg(test)]
            {
                self.examined += self.snapshots_now.len() as u64;
            }
            for &i in &self.snapshots_now {
                let inst = &mut self.entries[i as usize].instrument;
                if inst.cover(&self.ends, &self.seq, &mut self.undo) {
                    self.touched.one(i);
                }
            }
        }
        Ok(())
    }

    /// One datagram of the definition lines (or the definitions file):
    /// not sequenced.
    pub fn on_definitions(&mut self, payload: &[u8]) -> Result<(), Reject> {
        let packet = Packet::new_checked(payload)?;
        for m in packet.messages() {
            match m.body() {
                Body::Definition(d) => self.on_definition(&d),
                _ => self.count_unread(m.kind()),
            }
        }
        Ok(())
    }

    /// Counts a message of a service skipped unread: market by order in
    /// `mbo_messages`, a template the schema does not have in
    /// `unknown_templates` (on every service); any other (known, not read,
    /// or not of this service) is not counted.
    fn count_unread(&mut self, kind: Kind) {
        match kind {
            Kind::Mbo => self.counters.mbo_messages += 1,
            Kind::Unknown => self.counters.unknown_templates += 1,
            _ => {}
        }
    }

    /// A ChannelReset (or the weekly restart): every book emptied, caches
    /// and pending changes dropped, RptSeq restarting, and the statuses
    /// `statuses` says; `forget`: and no instrument has a baseline (a
    /// ChannelReset that came after packets that follow it, or one
    /// inferred: none is trusted until its snapshot). Goes over the instruments changed
    /// since the last reset ([`SinceReset`]) and those holding a status
    /// it empties ([`holders`](Self::holders)) only.
    fn reset_channel(&mut self, forget: bool, statuses: Statuses) {
        self.emptied += 1;
        let (entries, touched) = (&mut self.entries, &mut self.touched);
        let (cached, undo) = (&mut self.cached, &mut self.undo);
        self.since_reset.take(entries.len(), forget, |i| {
            let e = &mut entries[i as usize];
            e.instrument.reset(cached, undo);
            if forget {
                e.instrument.forget_baseline();
            }
            e.snapshot_at = 0;
            touched.one(i);
        });
        debug_assert!(
            self.entries.iter().all(|e| e.instrument.is_reset(forget)),
            "an instrument changed since the last reset was not listed"
        );
        let before = match statuses {
            Statuses::Before(at) => Some(at),
            Statuses::All | Statuses::Kept => None,
        };
        if !matches!(statuses, Statuses::Kept) {
            let (entries, touched) = (&mut self.entries, &mut self.touched);
            self.holders.retain(|&i| {
                let e = &mut entries[i as usize];
                if e.status.is_some_and(|s| before.is_none_or(|b| s.at < b)) {
                    e.status = None;
                    touched.one(i);
                }
                e.holds = e.status.is_some();
                e.holds
            });
        }
        debug_assert!(
            !matches!(statuses, Statuses::All) || self.entries.iter().all(|e| e.status.is_none()),
            "an instrument with a status was not a holder"
        );
        self.all_unverified = false;
        self.clear_verified();
        match statuses {
            Statuses::All => {
                self.groups.clear_statuses(self.touched.on);
                self.void_trading_before = None;
            }
            Statuses::Before(at) => self.groups.clear_statuses_before(at, self.touched.on),
            Statuses::Kept => {}
        }
        self.unblock();
        for &i in &self.dirty {
            self.entries[i as usize].instrument.unlist();
        }
        self.dirty.clear();
        self.ends.clear();
    }

    /// Whether a snapshot taken after packet `l` (its
    /// LastMsgSeqNumProcessed) was taken more than `restart_margin` past
    /// the highest MsgSeqNum received: no line lags that far, so it is of a
    /// sequence before a restart (a loop from before a ChannelReset or
    /// the weekly restart, come late) or made up. Applied, it would set
    /// the books the restart emptied, and its status would outrank every
    /// real one until the sequence got there.
    fn far_ahead(&self, l: u32) -> bool {
        let margin = u64::from(self.settings.sequencing.restart_margin);
        self.seq.high().is_some_and(|h| u64::from(l) >= h + margin)
    }

    /// The sequence restarted after a ChannelReset: positions of the old
    /// sequence are not comparable with the new one's, so the changes the
    /// reset packet left after its ChannelReset (waiting for their event's
    /// end, or cached) now stand before the new sequence's first packet,
    /// and no end of event of the old sequence (the ChannelReset's own)
    /// covers a change of the new one. Statuses need nothing: their
    /// stamps count the restart.
    ///
    /// Only instruments changed since the reset can have any: those
    /// [`SinceReset`] lists.
    fn restart_positions(&mut self) {
        const BEFORE: Position = (0, 0);
        self.unblock();
        self.ends.clear();
        let entries = &mut self.entries;
        self.since_reset.each(entries.len(), |i| {
            entries[i as usize].instrument.restart_positions(BEFORE);
        });
    }

    /// A ChannelReset come late in packet `s`: if a RptSeq going back in a
    /// later packet made a reset inferred there, with no packet between
    /// the two missing (gaps are given up lowest first, and this one was
    /// still open, so none between was given up: none could hide another
    /// reset), this is that reset. Its place known, the trading statuses
    /// after it are the new sequence's (those before it just emptied):
    /// they count again.
    fn void_lifted_by(&mut self, s: u32) {
        let lifted = self.void_trading_before.is_some_and(|(epoch, (v, _))| {
            epoch == self.restarts && v > s && self.seq.complete(s, v - 1)
        });
        if lifted {
            self.void_trading_before = None;
        }
    }

    /// The status in force for instrument `e`.
    pub fn status(&self, e: &Entry) -> Option<u8> {
        let def = e.definition.as_ref();
        let groups = def.into_iter().flat_map(|d| self.groups.statuses(d.key));
        // A trading status from before a ChannelReset inferred: as if
        // emptied (its halts and closes still count).
        let counts = |s: &status::Status| {
            !(self.void_trading_before.is_some_and(|v| s.at < v)
                && matches!(status::meaning(s.code), status::Meaning::Is(State::Trading)))
        };
        status::effective(
            e.status.filter(counts),
            groups.filter(counts),
            def.and_then(|d| d.status),
        )
    }

    /// What the status in force for `e` means (`None`: no status known,
    /// or one that changes nothing).
    pub fn state(&self, e: &Entry) -> Option<State> {
        self.status(e).and_then(|c| match status::meaning(c) {
            status::Meaning::Is(s) => Some(s),
            _ => None,
        })
    }

    /// What a check reads of `e` besides the channel's clocks (spec mdp3
    /// §4), for a replay's answer and a live slot alike.
    pub fn shown(&self, e: &Entry) -> Shown {
        let (bid, ask) = self.visible_top(e);
        let state = self.state(e);
        Shown {
            bid,
            ask,
            // Locked is allowed: only crossed is invalid.
            invalid: matches!((bid, ask), (Some(b), Some(a)) if b.price > a.price),
            suspect: e.instrument.seq.suspect() || e.instrument.seq.unverified(),
            halted: state == Some(State::Halted),
            closed: state == Some(State::Closed)
                || e.definition.as_ref().is_some_and(|d| d.deleted),
        }
    }

    /// The verdict for the instrument named `name` (Symbol or
    /// `#SecurityID`) at `now`.
    pub fn verdict(&self, name: &str, th: Thresholds, now: u64) -> Reasons {
        let Some(e) = self.find(name) else {
            return Reasons::NO_QUOTE;
        };
        let shown = self.shown(e);
        let inputs = Inputs {
            quoted: shown.bid.is_some() || shown.ask.is_some(),
            alive: self.last_alive.map(i128::from),
            source: self.source_watermark(),
            offset: self.clock.offset(),
            suspect: shown.suspect,
            invalid: shown.invalid,
            halted: shown.halted,
            closed: shown.closed,
        };
        reasons(&inputs, th, now)
    }
}

/// An instrument as a check sees it ([`Feed::shown`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shown {
    /// The visible outright best bid, if any.
    pub bid: Option<Level>,
    /// The visible outright best offer, if any.
    pub ask: Option<Level>,
    /// Crossed: the best bid above the best offer (locked is allowed).
    pub invalid: bool,
    /// A RptSeq hole not yet healed, or unverified after a gap given up.
    pub suspect: bool,
    /// The status in force halts it.
    pub halted: bool,
    /// The status in force closes it, or its last definition deleted it.
    pub closed: bool,
}

/// `#` and the decimal SecurityID `id`, as a check names an instrument,
/// written into `buf` (no allocation).
impl Feed {
    /// Before an entry of instrument `i` once coverage was deferred in this
    /// datagram (an end of event came while a packet was missing, or in a
    /// datagram that filled one): with coverage deferred, it is looked at as the last end of event would
    /// have, if one came since its last entry and it has changes waiting
    /// ([`examine`]); its [`Entry::changed`] then says none came since.
    #[cold]
    #[inline(never)]
    fn look_if_due(&mut self, i: u32) {
        let e = &mut self.entries[i as usize];
        if self.deferred && e.changed != self.deferred_ends && e.instrument.pending() {
            let (ends, seq) = (&mut self.ends, &self.seq);
            examine(
                &mut e.instrument,
                i,
                ends,
                seq,
                &mut self.undo,
                &mut self.touched,
            );
        }
        e.changed = self.deferred_ends;
    }
}

/// With coverage deferred ([`Feed::cover`]), instrument `i` (pending)
/// examined before its next entry: what the ends so far cover of it is made
/// visible, as a look at each of those ends would have. It stays in
/// `dirty` (the datagram's pass drops it if nothing is left pending).
#[cold]
#[inline(never)]
fn examine(
    inst: &mut Instrument,
    i: u32,
    ends: &mut Ends,
    seq: &Sequence,
    undo: &mut UndoLog,
    touched: &mut Touched,
) {
    ends.settle(seq);
    if inst.cover(ends, seq, undo) {
        touched.one(i);
    }
}

pub fn id_name(id: i32, buf: &mut [u8; 12]) -> &str {
    use std::io::Write;
    let mut w = &mut buf[..];
    // "#" and an i32 fit 12 bytes.
    let _ = write!(w, "#{id}");
    let n = 12 - w.len();
    std::str::from_utf8(&buf[..n]).unwrap_or("#")
}

/// `to` made `text` (a `char[n]` field, trimmed, as text: bytes that are
/// not UTF-8 replaced), reusing its capacity.
fn set_text(to: &mut String, text: &str) {
    if to != text {
        to.clear();
        to.push_str(text);
    }
}

/// [`set_text`] of `bytes` read as [`String::from_utf8_lossy`] reads them
/// (each invalid sequence one U+FFFD), compared piece by piece: nothing
/// allocated when it is what `to` holds, whatever bytes a definition sends.
fn set_lossy(to: &mut String, bytes: &[u8]) {
    const BAD: char = char::REPLACEMENT_CHARACTER;
    let mut rest = to.as_str();
    let same = bytes.utf8_chunks().all(|c| {
        let Some(r) = rest.strip_prefix(c.valid()) else {
            return false;
        };
        rest = r;
        if !c.invalid().is_empty() {
            let Some(r) = rest.strip_prefix(BAD) else {
                return false;
            };
            rest = r;
        }
        true
    }) && rest.is_empty();
    if !same {
        to.clear();
        for c in bytes.utf8_chunks() {
            to.push_str(c.valid());
            if !c.invalid().is_empty() {
                to.push(BAD);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::encode::{self, BookEntry, FeedType, Shape, SnapshotEntry, SnapshotRoot};
    use super::super::instrument::FOLD_AT;
    use super::super::template::{EntryType, UpdateAction};
    use super::super::testing::{feed, settings};
    use super::*;

    const MS: u64 = 1_000_000;
    const T0: u64 = 1_767_623_400_000_000_000;
    const EOE: u8 = 0x80;
    const V: Shape = Shape::new(13);
    const TH: Thresholds = Thresholds {
        stale_ns: 30_000 * MS,
        source_ns: 30_000 * MS,
    };

    fn bid(id: i32, rpt: u32, level: u8, action: UpdateAction, price: i64) -> BookEntry {
        BookEntry {
            price: Some(price),
            size: Some(5),
            security_id: id,
            rpt_seq: rpt,
            orders: Some(1),
            level,
            action,
            entry_type: EntryType::Bid,
        }
    }

    fn offer(id: i32, rpt: u32, price: i64) -> BookEntry {
        BookEntry {
            entry_type: EntryType::Offer,
            ..bid(id, rpt, 1, UpdateAction::New, price)
        }
    }

    /// A packet `s` of one 46 with `entries`, ending its event when `eoe`.
    fn book(s: u32, eoe: bool, entries: &[BookEntry]) -> Vec<u8> {
        let mei = if eoe { EOE } else { 0 };
        encode::packet(s, T0, &[encode::book(46, V, T0, mei, entries, 0)])
    }

    fn top(f: &Feed, name: &str) -> (Option<i64>, Option<i64>) {
        let books = f.visible(f.find(name).unwrap());
        let b = &books.outright;
        (b.bid.top().map(|l| l.price), b.offer.top().map(|l| l.price))
    }

    fn define(f: &mut Feed, id: i32, symbol: &str, depth: i8) {
        define_as(f, id, symbol, depth, b'A');
    }

    /// The SecurityIDs [`Feed::drain_touched`] hands over, sorted.
    fn touched(f: &mut Feed) -> Vec<i32> {
        let mut ids = Vec::new();
        f.drain_touched(|_, _, e| ids.push(e.security_id));
        ids.sort();
        ids
    }

    /// A SecurityStatus 30 for SecurityGroup `group` and Asset `asset`
    /// (no SecurityID), ending its event.
    fn group_status(group: &str, asset: &str, code: u8) -> Vec<u8> {
        status_message(None, group, asset, code)
    }

    /// A SecurityStatus 30 for instrument `id`, ending its event.
    fn instrument_status(id: i32, code: u8) -> Vec<u8> {
        status_message(Some(id), "", "", code)
    }

    fn status_message(id: Option<i32>, group: &str, asset: &str, code: u8) -> Vec<u8> {
        let st = encode::Status {
            transact_time: T0,
            security_group: group,
            asset,
            security_id: id,
            match_event_indicator: EOE,
            trading_status: Some(code),
        };
        encode::security_status(V, &st)
    }

    /// Instruments 1 to `n`, each a bid at 100 (RptSeq 1), in one message.
    /// Packet `s` changing instruments 1 to `n` (a bid each), its event
    /// left unfinished.
    fn unfinished(f: &mut Feed, s: u32, n: i32) {
        let bids = bids_from_one(n);
        let changes: Vec<_> = bids
            .chunks(250)
            .map(|c| encode::book(46, V, T0, 0, c, 0))
            .collect();
        f.on_incremental(&encode::packet(s, T0, &changes), T0)
            .unwrap();
    }

    fn bids_from_one(n: i32) -> Vec<BookEntry> {
        (1..=n)
            .map(|id| bid(id, 1, 1, UpdateAction::New, 100))
            .collect()
    }

    /// ESZ6 (#1) of SecurityGroup `ES`, defined pre-open (21).
    fn pre_open_es() -> encode::Instrument<'static> {
        encode::Instrument {
            match_event_indicator: 0,
            tot_num_reports: Some(1),
            security_update_action: b'A',
            trading_status: Some(21),
            appl_id: 1,
            security_group: "ES",
            asset: "ES",
            symbol: "ESZ6",
            security_id: 1,
            min_price_increment: None,
            display_factor: 1,
        }
    }

    /// A 54 of SecurityGroup `ES`, no status, no feed types, to edit.
    fn bare_definition(id: i32, symbol: &str, asset: &str) -> Vec<u8> {
        let d = encode::Instrument {
            match_event_indicator: 0,
            tot_num_reports: None,
            security_update_action: b'A',
            trading_status: None,
            appl_id: 1,
            security_group: "ES",
            asset,
            symbol,
            security_id: id,
            min_price_increment: None,
            display_factor: 1,
        };
        encode::definition(54, V, &d, 0, &[])
    }

    /// A definition repeated by the loop rewrites nothing and allocates
    /// nothing, its SecurityGroup and Asset read as lossy text however
    /// their bytes are (one not UTF-8 included), and read as
    /// `String::from_utf8_lossy` reads them.
    #[test]
    fn a_repeated_definition_allocates_nothing_whatever_its_text_bytes() {
        let mut f = feed();
        let mut def = encode::packet(1, 0, &[bare_definition(7, "ESZ6", "E\u{7f}S")]);
        // The Asset's second byte made a lone continuation byte.
        let at = def.windows(3).position(|w| w == b"E\x7fS").unwrap();
        def[at + 1] = 0xA9;
        f.on_definitions(&def).unwrap();
        let seen = |f: &Feed| f.instruments()[0].definition.clone().unwrap();
        assert_eq!(seen(&f).asset, String::from_utf8_lossy(b"E\xA9S"));
        assert_eq!(seen(&f).group, "ES");
        let (peak, ()) = crate::test_alloc::peak_during(|| {
            for _ in 0..3 {
                f.on_definitions(&def).unwrap();
            }
        });
        assert_eq!(peak, 0);
        for (old, new) in [
            ("ab", &b"a\xffb"[..]),
            ("a\u{fffd}", b"a\xff\xfe"),
            ("", b"\xff"),
        ] {
            let mut to = old.to_string();
            set_lossy(&mut to, new);
            assert_eq!(to, String::from_utf8_lossy(new));
        }
    }

    fn define_as(f: &mut Feed, id: i32, symbol: &str, depth: i8, action: u8) {
        define_in(f, id, symbol, depth, action, "ES");
    }

    fn define_in(f: &mut Feed, id: i32, symbol: &str, depth: i8, action: u8, group: &str) {
        let d = encode::Instrument {
            match_event_indicator: 0,
            tot_num_reports: Some(1),
            security_update_action: action,
            trading_status: Some(17),
            appl_id: 1,
            security_group: group,
            asset: group,
            symbol,
            security_id: id,
            min_price_increment: Some(250_000_000),
            display_factor: 1_000_000_000,
        };
        let feed_types = [
            FeedType {
                md_feed_type: "GBX",
                market_depth: depth,
            },
            FeedType {
                md_feed_type: "GBI",
                market_depth: 2,
            },
        ];
        let m = encode::definition(54, V, &d, 0, &feed_types);
        f.on_definitions(&encode::packet(1, T0, &[m])).unwrap();
    }

    /// The messages past those the validity walk keeps are parsed again
    /// and applied like the others.
    #[test]
    fn a_packet_of_more_messages_than_the_walk_keeps_applies_each() {
        // Packet 1 holds WALKED + 8 46s of one bid each, New at level 1
        // (each a higher price), the last ending the event; packet 2 as
        // many Changes at level 1.
        let n = WALKED as u32 + 8;
        let mut f = feed();
        define(&mut f, 7, "ESZ6", 10);
        let packet = |s: u32, action: UpdateAction, base: i64| -> Vec<u8> {
            let messages: Vec<Vec<u8>> = (0..n)
                .map(|k| {
                    let mei = if k + 1 == n { EOE } else { 0 };
                    let e = bid(7, (s - 1) * n + k + 1, 1, action, base + i64::from(k));
                    encode::book(46, V, T0, mei, &[e], 0)
                })
                .collect();
            encode::packet(s, T0, &messages)
        };
        let prices = |f: &Feed| -> Vec<i64> {
            let books = f.visible(f.find("ESZ6").unwrap());
            let side = &books.outright.bid;
            (1..=10)
                .filter_map(|l| side.level(l))
                .map(|l| l.price)
                .collect()
        };
        let mut book: Vec<i64> = (0..10).map(|k| 100 + i64::from(n - 1 - k)).collect();
        assert_eq!(
            f.on_incremental(&packet(1, UpdateAction::New, 100), T0),
            Ok(())
        );
        assert_eq!(prices(&f), book);
        assert_eq!(
            f.on_incremental(&packet(2, UpdateAction::Change, 1000), T0),
            Ok(())
        );
        book[0] = 1000 + i64::from(n - 1);
        assert_eq!(prices(&f), book);
        let e = f.find("ESZ6").unwrap();
        assert_eq!(e.instrument.seq.rpt_seq(), Some(2 * n));
        assert_eq!(f.counters().by_template[46], 2 * u64::from(n));
    }

    /// A change whose event ends in its own datagram, on an instrument
    /// with nothing pending, is not recorded; one left open at the
    /// datagram's end is, and stays hidden until its end of event.
    #[test]
    fn only_changes_left_open_at_a_datagrams_end_are_recorded() {
        let mut f = feed();
        define(&mut f, 7, "ESZ6", 10);
        define(&mut f, 8, "NQZ6", 10);
        let msg =
            |eoe: bool, e: BookEntry| encode::book(46, V, T0, if eoe { EOE } else { 0 }, &[e], 0);
        let new = |id, rpt, price| bid(id, rpt, 1, UpdateAction::New, price);
        // 8's event is left open, and packet 2, which ends it, is late.
        let p1 = [msg(true, new(7, 1, 100)), msg(false, new(8, 1, 50))];
        f.on_incremental(&encode::packet(1, T0, &p1), T0).unwrap();
        assert_eq!(f.undo_records(), 1, "8's open change");
        // 7's next event, whole in packet 3: nothing recorded, visible.
        let p3 = [msg(false, new(7, 2, 101)), msg(true, new(7, 3, 102))];
        f.on_incremental(&encode::packet(3, T0, &p3), T0).unwrap();
        assert_eq!(f.undo_records(), 1, "none added behind 8's");
        assert_eq!((top(&f, "ESZ6").0, top(&f, "NQZ6").0), (Some(102), None));
        // Packet 2 fills the gap: 8's change behind its pending one is
        // recorded, then both are visible and the log empties.
        let p2 = [msg(true, new(8, 2, 51))];
        f.on_incremental(&encode::packet(2, T0, &p2), T0).unwrap();
        assert_eq!(f.undo_records(), 0);
        let books = f.visible(f.find("NQZ6").unwrap());
        let side = &books.outright.bid;
        assert_eq!(
            (
                side.level(1).map(|l| l.price),
                side.level(2).map(|l| l.price)
            ),
            (Some(51), Some(50))
        );
    }

    /// From RptSeq 1, an event over two packets is visible at its end;
    /// a check by Symbol or by `#SecurityID` reads `ok`.
    /// While a lost packet keeps one instrument's event unfinished, the
    /// events of another come and go: their records are dropped from the
    /// undo log as they are made visible (the log compacted, not grown
    /// with every packet), the first instrument's visible books stay
    /// those before its event, and the fill shows it and empties the log.
    #[test]
    fn the_undo_log_stays_bounded_while_a_gap_keeps_an_event_open() {
        let mut f = feed();
        define(&mut f, 7, "ESZ6", 10);
        define(&mut f, 8, "NQZ6", 10);
        let new = UpdateAction::New;
        f.on_incremental(&book(1, true, &[bid(7, 1, 1, new, 100)]), T0)
            .unwrap();
        // #7's event starts in packet 2; its end was in packet 3, lost.
        f.on_incremental(&book(2, false, &[bid(7, 2, 1, new, 101)]), T0)
            .unwrap();
        let mut most = 0;
        for s in 4..5_000u32 {
            let p = book(
                s,
                true,
                &[
                    bid(8, 2 * s - 7, 1, new, i64::from(s)),
                    bid(8, 2 * s - 6, 1, UpdateAction::Change, i64::from(s)),
                ],
            );
            f.on_incremental(&p, T0 + 1).unwrap();
            most = most.max(f.undo_records());
            assert_eq!(top(&f, "NQZ6").0, Some(i64::from(s)));
        }
        assert!(f.undo_records() > 0);
        assert!(most <= 4096 + 2, "{most} records");
        assert_eq!(top(&f, "ESZ6").0, Some(100));
        let working = f.find("ESZ6").unwrap().instrument.working();
        assert_eq!(working.outright.bid.top().map(|l| l.price), Some(101));
        // The fill ends #7's event.
        f.on_incremental(&book(3, true, &[]), T0 + 2).unwrap();
        assert_eq!(top(&f, "ESZ6").0, Some(101));
        assert_eq!(f.undo_records(), 0);
    }

    /// An instrument is listed once however its changes come: one whose
    /// changes a look before its next entry covers (a gap open below
    /// them), with another change after each datagram's end of event, is
    /// not listed again at every datagram.
    #[test]
    fn an_instrument_waiting_is_listed_once() {
        let mut f = feed();
        f.on_incremental(&book(1, true, &[bid(9, 1, 1, UpdateAction::New, 100)]), T0)
            .unwrap();
        let mut r = 1;
        let mut change = || {
            r += 1;
            encode::book(
                46,
                V,
                T0,
                0,
                &[bid(9, r, 1, UpdateAction::Change, 100 + i64::from(r))],
                0,
            )
        };
        // 2 is missing; each packet from 3: a change, an end, a change.
        for s in 3..53 {
            let (a, b) = (change(), change());
            let end = encode::book(46, V, T0, EOE, &[], 0);
            f.on_incremental(&encode::packet(s, T0, &[a, end, b]), T0 + 1)
                .unwrap();
        }
        assert_eq!(f.seq.gaps_open(), 1);
        assert_eq!(f.dirty, [f.by_id.get(9).unwrap()]);
    }

    /// Instruments set aside behind a missing packet are back with the
    /// others as soon as a packet that fills it comes, before its ends:
    /// an end of event in it covers their changes at once, and a change
    /// after that end in the same packet is not made visible with them.
    #[test]
    fn a_fill_brings_the_instruments_set_aside_back_before_its_ends() {
        let mut f = feed();
        let first = [
            bid(8, 1, 1, UpdateAction::New, 50),
            bid(9, 1, 1, UpdateAction::New, 100),
        ];
        f.on_incremental(&book(1, false, &first), T0).unwrap();
        // 2 and 3 missing; 3 comes, 2 still missing: both set aside.
        f.on_incremental(&book(4, false, &[]), T0).unwrap();
        f.on_incremental(&book(3, false, &[]), T0 + 1).unwrap();
        assert_eq!(f.blocked.len(), 2);
        // 2 ends the event, then changes #9's bid again, unfinished.
        let two = [
            encode::book(46, V, T0, EOE, &[], 0),
            encode::book(46, V, T0, 0, &[bid(9, 2, 1, UpdateAction::Change, 101)], 0),
        ];
        f.on_incremental(&encode::packet(2, T0, &two), T0 + 2)
            .unwrap();
        assert_eq!(top(&f, "#8").0, Some(50));
        assert_eq!(top(&f, "#9").0, Some(100));
    }

    /// Instruments set aside behind a missing packet are released when a
    /// ChannelReset empties the channel, or the sequence restarts (the
    /// weekly restart): nothing of theirs waits any more, and the new
    /// sequence's events are visible at their ends.
    #[test]
    fn a_channel_reset_or_a_restart_releases_the_instruments_set_aside() {
        for reset in [true, false] {
            let mut f = feed();
            let first = [
                bid(8, 1, 1, UpdateAction::New, 50),
                bid(9, 1, 1, UpdateAction::New, 100),
            ];
            f.on_incremental(&book(100_001, false, &first), T0).unwrap();
            // 100,002 and 100,003 missing; 100,003 comes: both set aside.
            f.on_incremental(&book(100_004, false, &[]), T0).unwrap();
            f.on_incremental(&book(100_003, false, &[]), T0 + 1)
                .unwrap();
            assert_eq!(f.blocked.len(), 2);
            if reset {
                let r = encode::channel_reset(V, T0, EOE, 310);
                f.on_incremental(&encode::packet(100_005, T0, &[r]), T0 + 2)
                    .unwrap();
                assert!(f.blocked.is_empty(), "the reset: {:?}", f.blocked);
            }
            // The new sequence (after the reset, or the weekly restart).
            f.on_incremental(
                &book(1, true, &[bid(8, 1, 1, UpdateAction::New, 70)]),
                T0 + 3,
            )
            .unwrap();
            assert!(f.blocked.is_empty(), "reset {reset}: {:?}", f.blocked);
            assert_eq!(top(&f, "#8").0, Some(70), "reset {reset}");
            assert_eq!(top(&f, "#9").0, None, "reset {reset}: emptied");
        }
    }

    /// An instrument set aside behind a missing packet is looked at again
    /// when a snapshot replaces its changes: the cached entry the snapshot
    /// lets apply, whose event ended after the gap, is visible at once,
    /// the gap still open.
    #[test]
    fn a_snapshot_brings_an_instrument_waiting_on_a_gap_back_into_view() {
        let mut f = feed();
        define(&mut f, 9, "ESZ6", 10);
        // Packet 1 changes #8 and #9, its event unfinished; 2 is lost; 3
        // brings #9's RptSeq 3 (cached behind the hole at 2) and ends its
        // event: both are set aside.
        let first = [
            bid(8, 1, 1, UpdateAction::New, 50),
            bid(9, 1, 1, UpdateAction::New, 100),
        ];
        f.on_incremental(&book(1, false, &first), T0).unwrap();
        f.on_incremental(&book(3, true, &[offer(9, 3, 120)]), T0 + 1)
            .unwrap();
        assert_eq!((top(&f, "#9"), f.cached()), ((None, None), 1));
        assert_eq!(f.blocked.len(), 2);
        let root = SnapshotRoot {
            last_msg_seq_num_processed: 2,
            tot_num_reports: 1,
            security_id: 9,
            rpt_seq: 2,
            transact_time: T0,
            trading_status: None,
        };
        let level = SnapshotEntry {
            price: Some(99),
            size: Some(1),
            orders: None,
            level: Some(1),
            entry_type: EntryType::Bid,
        };
        let snap = encode::packet(1, T0, &[encode::snapshot(52, V, &root, &[level])]);
        f.on_snapshot(&snap, T0 + 2).unwrap();
        assert_eq!(f.seq.gaps_open(), 1);
        assert_eq!(top(&f, "#9"), (Some(99), Some(120)));
        assert_eq!(top(&f, "#8"), (None, None));
    }

    /// Instruments waiting for a missing packet are examined once, not
    /// once per end of event, nor once a datagram: thousands of ends in
    /// each of the datagrams that keep the gap open cost what waits once
    /// in all, until the missing packet arrives.
    #[test]
    fn instruments_waiting_for_a_gap_are_examined_once() {
        let mut f = feed();
        let (waiting, ends, datagrams) = (2_000u32, 200u32, 20u32);
        // Packet 1 changes every instrument, its event unfinished; packet
        // 2, which ends it, is missing.
        unfinished(&mut f, 1, waiting as i32);
        let end = encode::book(46, V, T0, EOE, &[], 0);
        let before = f.examined;
        for s in 3..3 + datagrams {
            let p = encode::packet(s, T0, &vec![end.clone(); ends as usize]);
            f.on_incremental(&p, T0 + 1).unwrap();
        }
        let examined = f.examined - before;
        assert_eq!(
            examined,
            u64::from(waiting),
            "examinations for {datagrams} datagrams of {ends} ends"
        );
        // Set aside, an instrument is looked at again for a change of
        // its own (blocked again), the others not.
        let before = f.examined;
        for (k, s) in (3 + datagrams..).take(5).enumerate() {
            let rpt = 2 + k as u32;
            let changes = [
                bid(1, rpt, 1, UpdateAction::Change, 101),
                bid(2, rpt, 1, UpdateAction::Change, 101),
            ];
            let p = encode::packet(s, T0, &[encode::book(46, V, T0, EOE, &changes, 0)]);
            f.on_incremental(&p, T0 + 1).unwrap();
        }
        assert_eq!(f.examined - before, 2 * 5);
        assert_eq!(f.blocked.len(), waiting as usize);
        assert!(top(&f, "#1").0.is_none());
        // The fill ends the event: every book visible (#1 and #2 with
        // their later changes).
        f.on_incremental(&book(2, true, &[]), T0 + 2).unwrap();
        for (id, bid) in [(1, 101), (2, 101), (3, 100), (waiting as i32, 100)] {
            assert_eq!(top(&f, &format!("#{id}")).0, Some(bid), "#{id}");
        }
    }

    #[test]
    fn books_are_visible_at_the_end_of_their_event() {
        let mut f = feed();
        define(&mut f, 7, "ESZ6", 3);
        f.on_incremental(
            &book(100, false, &[bid(7, 1, 1, UpdateAction::New, 100)]),
            T0,
        )
        .unwrap();
        assert_eq!(top(&f, "ESZ6"), (None, None));
        assert_eq!(f.verdict("ESZ6", TH, T0), Reasons::NO_QUOTE);
        f.on_incremental(&book(101, true, &[offer(7, 2, 110)]), T0 + 1)
            .unwrap();
        assert_eq!(top(&f, "ESZ6"), (Some(100), Some(110)));
        assert_eq!(f.verdict("ESZ6", TH, T0 + 2), Reasons::empty());
        assert_eq!(f.verdict("#7", TH, T0 + 2), Reasons::empty());
        assert_eq!(f.verdict("#8", TH, T0 + 2), Reasons::NO_QUOTE);
        // `#SecurityID` only as the publication spells it.
        for other in ["#07", "#+7", "# 7", "#7 "] {
            assert!(f.find(other).is_none(), "{other}");
            assert_eq!(f.verdict(other, TH, T0 + 2), Reasons::NO_QUOTE, "{other}");
        }
        // The definition's depth: a New at level 4 of a 3-deep book is
        // ignored.
        assert_eq!(f.visible(f.find("#7").unwrap()).outright.bid.depth(), 3);
    }

    /// Joined mid-week (no baseline): suspect until a snapshot; the
    /// snapshot is visible at once, the cached entries that continue it
    /// applied; a healthy instrument is never rolled back.
    #[test]
    fn no_baseline_is_suspect_until_a_snapshot() {
        let mut f = feed();
        f.on_incremental(
            &book(
                500,
                true,
                &[bid(9, 40, 1, UpdateAction::New, 100), offer(9, 41, 120)],
            ),
            T0,
        )
        .unwrap();
        let v = f.verdict("#9", TH, T0);
        assert!(v.contains(Reasons::NO_QUOTE), "{v:?}");
        assert_eq!(f.cached(), 2);
        let root = SnapshotRoot {
            last_msg_seq_num_processed: 499,
            tot_num_reports: 1,
            security_id: 9,
            rpt_seq: 40,
            transact_time: T0,
            trading_status: Some(17),
        };
        let entries = [SnapshotEntry {
            price: Some(99),
            size: Some(1),
            orders: None,
            level: Some(1),
            entry_type: EntryType::Offer,
        }];
        let snap = encode::packet(1, T0, &[encode::snapshot(52, V, &root, &entries)]);
        f.on_snapshot(&snap, T0 + 1).unwrap();
        // 40 dropped (≤ r′), 41 applied at its own position, whose event
        // ended already: visible with the snapshot (the New offer at
        // level 1 pushes the snapshot's down).
        assert_eq!(top(&f, "#9"), (None, Some(120)));
        let books = f.visible(f.find("#9").unwrap());
        let offers = &books.outright.offer;
        assert_eq!(offers.level(2).map(|l| l.price), Some(99));
        assert_eq!((f.cached(), f.counters().snapshots_applied), (0, 1));
        f.on_incremental(
            &book(501, true, &[bid(9, 42, 1, UpdateAction::New, 101)]),
            T0 + 2,
        )
        .unwrap();
        assert_eq!(top(&f, "#9"), (Some(101), Some(120)));
        assert_eq!(f.verdict("#9", TH, T0 + 3), Reasons::empty());
        f.on_snapshot(&snap, T0 + 4).unwrap();
        assert_eq!(f.counters().snapshots_ignored, 1);
        assert_eq!(top(&f, "#9"), (Some(101), Some(120)));
    }

    /// A packet gap: instruments the lost packet did not touch keep
    /// updating; one that finds an RptSeq hole is suspect; the give-up
    /// makes every instrument unverified.
    #[test]
    fn a_lost_packet_makes_only_its_instruments_suspect_until_given_up() {
        let mut f = feed();
        f.on_incremental(
            &book(
                1,
                true,
                &[
                    bid(1, 1, 1, UpdateAction::New, 10),
                    bid(2, 1, 1, UpdateAction::New, 20),
                ],
            ),
            T0,
        )
        .unwrap();
        // Packet 2 (instrument 2's RptSeq 2) is lost.
        f.on_incremental(
            &book(
                3,
                true,
                &[
                    bid(1, 2, 1, UpdateAction::Change, 11),
                    bid(2, 3, 1, UpdateAction::Change, 23),
                ],
            ),
            T0 + 1,
        )
        .unwrap();
        assert_eq!(f.sequence().gaps_open(), 1);
        assert!(!f.verdict("#1", TH, T0 + 1).contains(Reasons::SUSPECT));
        assert!(f.verdict("#2", TH, T0 + 1).contains(Reasons::SUSPECT));
        // Packet 3's own event end covers its change: the gap is before it.
        assert_eq!(top(&f, "#1"), (Some(11), None));
        // An event from packet 4 whose end (packet 5) is lost: a later
        // event's end (packet 6) does not publish it while 5 is missing.
        let change = [bid(1, 3, 1, UpdateAction::Change, 13)];
        f.on_incremental(&book(4, false, &change), T0 + 1).unwrap();
        let other = [bid(3, 1, 1, UpdateAction::New, 30)];
        f.on_incremental(&book(6, true, &other), T0 + 2).unwrap();
        assert_eq!(top(&f, "#1"), (Some(11), None));
        assert_eq!(top(&f, "#3"), (Some(30), None));
        f.expire(T0 + 2 + 5 * MS + 1);
        assert_eq!(f.sequence().counters().packets_lost, 2);
        assert_eq!(top(&f, "#1"), (Some(13), None), "published at the give-up");
        assert!(
            f.verdict("#1", TH, T0 + 6 * MS).contains(Reasons::SUSPECT),
            "unverified"
        );
        // An entry in order verifies instrument 1 again.
        f.on_incremental(
            &book(7, true, &[bid(1, 4, 1, UpdateAction::Change, 12)]),
            T0 + 7 * MS,
        )
        .unwrap();
        assert_eq!(f.verdict("#1", TH, T0 + 7 * MS), Reasons::empty());
        // A late copy of packet 2 heals instrument 2 without a snapshot?
        // No: its gap was given up, the copy is a duplicate.
        assert!(f.verdict("#2", TH, T0 + 7 * MS).contains(Reasons::SUSPECT));
    }

    /// A crossed book is invalid (locked is not); statuses by instrument
    /// and by group map to halted and closed, the latest in force.
    #[test]
    fn crossed_books_and_statuses() {
        // The replay's verdict, and the live slot's flags agreeing with it.
        let shows = |f: &Feed, want: Reasons, why: &str| {
            assert_eq!(f.verdict("ESZ6", TH, T0), want, "{why}");
            let top = super::super::publish::slot_top(f, f.find("ESZ6").unwrap());
            let flags = [top.invalid, top.halted, top.closed, top.suspect];
            let wanted = [
                Reasons::INVALID_PRICE,
                Reasons::HALTED,
                Reasons::CLOSED,
                Reasons::SUSPECT,
            ]
            .map(|r| want.contains(r));
            assert_eq!(flags, wanted, "the slot, {why}");
        };
        let mut f = feed();
        define(&mut f, 7, "ESZ6", 10);
        f.on_incremental(
            &book(
                1,
                true,
                &[bid(7, 1, 1, UpdateAction::New, 100), offer(7, 2, 100)],
            ),
            T0,
        )
        .unwrap();
        shows(&f, Reasons::empty(), "locked");
        f.on_incremental(
            &book(2, true, &[bid(7, 3, 1, UpdateAction::Change, 101)]),
            T0,
        )
        .unwrap();
        shows(&f, Reasons::INVALID_PRICE, "crossed");
        f.on_incremental(
            &book(3, true, &[bid(7, 4, 1, UpdateAction::Change, 99)]),
            T0,
        )
        .unwrap();
        let group = encode::Status {
            transact_time: T0,
            security_group: "ES",
            asset: "",
            security_id: None,
            match_event_indicator: EOE,
            trading_status: Some(2),
        };
        f.on_incremental(
            &encode::packet(4, T0, &[encode::security_status(V, &group)]),
            T0,
        )
        .unwrap();
        shows(&f, Reasons::HALTED, "group halted");
        let own = encode::Status {
            security_id: Some(7),
            trading_status: Some(4),
            ..group
        };
        f.on_incremental(
            &encode::packet(5, T0, &[encode::security_status(V, &own)]),
            T0,
        )
        .unwrap();
        shows(&f, Reasons::CLOSED, "own status closed");
        let both_blank = encode::Status {
            security_group: "",
            ..group
        };
        f.on_incremental(
            &encode::packet(6, T0, &[encode::security_status(V, &both_blank)]),
            T0,
        )
        .unwrap();
        assert_eq!(f.counters().anomalies, 1);
    }

    /// Templates are counted by id, unknown ones (any id, however large)
    /// only as unknown; a group status by Asset alone reaches the
    /// instruments of that asset.
    #[test]
    fn template_counts_and_asset_statuses() {
        let mut f = feed();
        define(&mut f, 7, "ESZ6", 10);
        let ms = [
            encode::heartbeat(V),
            encode::raw(999, 13, &[0; 11], &[]),
            encode::raw(100, 13, &[0; 11], &[]),
        ];
        f.on_incremental(&encode::packet(1, T0, &ms), T0).unwrap();
        assert_eq!(f.counters().by_template[12], 1);
        assert_eq!(f.counters().by_template[100], 0);
        assert_eq!(f.counters().unknown_templates, 2);
        f.on_incremental(&book(2, true, &[bid(7, 1, 1, UpdateAction::New, 100)]), T0)
            .unwrap();
        let asset = encode::Status {
            transact_time: T0,
            security_group: "",
            asset: "ES",
            security_id: None,
            match_event_indicator: EOE,
            trading_status: Some(18),
        };
        f.on_incremental(
            &encode::packet(3, T0, &[encode::security_status(V, &asset)]),
            T0,
        )
        .unwrap();
        assert_eq!(f.verdict("ESZ6", TH, T0), Reasons::HALTED);
    }

    /// "`J` empties both books" (spec mdp3 §3.3): every level of the four
    /// sides, visible at its event's end and not before.
    #[test]
    fn a_book_reset_empties_every_level_at_its_events_end() {
        use EntryType::{Bid, ImpliedBid, ImpliedOffer, Offer};
        let mut f = feed();
        define(&mut f, 7, "ESZ6", 3);
        let new = |r, t, n, p| BookEntry {
            entry_type: t,
            ..bid(7, r, n, UpdateAction::New, p)
        };
        let full = [
            new(1, Bid, 1, 100),
            new(2, Bid, 2, 99),
            new(3, Bid, 3, 98),
            new(4, Offer, 1, 110),
            new(5, Offer, 2, 111),
            new(6, ImpliedBid, 1, 97),
            new(7, ImpliedBid, 2, 96),
            new(8, ImpliedOffer, 1, 112),
            new(9, ImpliedOffer, 2, 113),
        ];
        let levels = |f: &Feed| {
            let b = f.visible(f.find("ESZ6").unwrap());
            [
                &b.outright.bid,
                &b.outright.offer,
                &b.implied.bid,
                &b.implied.offer,
            ]
            .map(|s| (1..=s.depth()).filter(|&l| s.level(l).is_some()).count())
        };
        f.on_incremental(&book(1, true, &full), T0).unwrap();
        assert_eq!(levels(&f), [3, 2, 2, 2]);
        let reset = new(10, EntryType::BookReset, 0, 0);
        f.on_incremental(&book(2, false, &[reset]), T0).unwrap();
        assert_eq!(levels(&f), [3, 2, 2, 2], "before its end of event");
        // A bid at level 1 ends the event: had any level been left, it
        // would now sit below it.
        f.on_incremental(&book(3, true, &[new(11, Bid, 1, 90)]), T0)
            .unwrap();
        assert_eq!(levels(&f), [1, 0, 0, 0]);
        assert_eq!(top(&f, "ESZ6"), (Some(90), None));
        assert_eq!(f.counters().anomalies, 0);
    }

    /// An event left unfinished keeps its changes before the first
    /// missing packet folded into one position (once they doubled since
    /// the last fold), and those after it apart while that gap is open,
    /// not one per message for ever: its end still publishes them all.
    #[test]
    fn an_unfinished_event_keeps_positions_by_gap_not_by_message() {
        use UpdateAction::{Change, New};
        let mut f = feed();
        define(&mut f, 7, "ESZ6", 10);
        define(&mut f, 8, "NQZ6", 10);
        f.on_incremental(&book(1, true, &[bid(7, 1, 1, New, 100)]), T0)
            .unwrap();
        let positions = |f: &Feed| f.find("ESZ6").unwrap().instrument.pending_positions();
        // ESZ6's RptSeq follows its changes; packet `s` holds one.
        let mut r = 1;
        let mut change = |f: &mut Feed, s: u32| {
            r += 1;
            let c = bid(7, r, 1, Change, 100 + i64::from(s));
            f.on_incremental(&book(s, false, &[c]), T0).unwrap();
        };
        for s in 2..=1001 {
            change(&mut f, s);
        }
        assert!(positions(&f) <= 1 + FOLD_AT, "{}", positions(&f));
        // Packet 1002 (NQZ6's) lost: ESZ6's changes after it stand apart.
        for s in 1003..=1102 {
            change(&mut f, s);
        }
        assert!((100..=101 + FOLD_AT).contains(&positions(&f)));
        assert_eq!(top(&f, "ESZ6"), (Some(100), None));
        f.on_incremental(&book(1002, false, &[bid(8, 1, 1, New, 50)]), T0)
            .unwrap();
        for s in 1103..=1400 {
            change(&mut f, s);
        }
        assert!(positions(&f) <= 1 + FOLD_AT, "{}", positions(&f));
        let last = bid(7, r + 1, 1, Change, 99);
        f.on_incremental(&book(1401, true, &[last]), T0).unwrap();
        assert_eq!((positions(&f), top(&f, "ESZ6")), (0, (Some(99), None)));
        assert_eq!(top(&f, "NQZ6"), (Some(50), None));
    }

    /// A fill closing the last gap, of many ends, over many instruments
    /// waiting past it: they are examined once, not once per end.
    #[test]
    fn a_fill_of_many_ends_examines_the_waiting_once() {
        let mut f = feed();
        let (waiting, ends) = (2_000u32, 300u32);
        f.on_incremental(&book(1, true, &[]), T0).unwrap();
        // 2 missing; 3 changes every instrument, its event unfinished.
        unfinished(&mut f, 3, waiting as i32);
        assert_eq!(f.dirty.len(), waiting as usize);
        let end = encode::book(46, V, T0, EOE, &[], 0);
        let before = f.examined;
        let p = encode::packet(2, T0, &vec![end.clone(); ends as usize]);
        f.on_incremental(&p, T0 + 1).unwrap();
        assert_eq!(f.seq.gaps_open(), 0);
        let examined = f.examined - before;
        assert!(examined <= u64::from(waiting), "{examined}");
        assert_eq!(top(&f, "#1").0, None);
        f.on_incremental(&book(4, true, &[]), T0 + 2).unwrap();
        assert_eq!(top(&f, "#1").0, Some(100));
        assert_eq!(top(&f, &format!("#{waiting}")).0, Some(100));
    }

    /// Inside a fill closing the last gap, an end covers a change
    /// made before the gap (via the fill's own end): the contract publishes
    /// it at that end, before the instrument's next entry pulls in a cached
    /// change above every end. Needs a look before that next entry.
    #[test]
    fn a_fill_end_publishes_before_a_replayed_change() {
        let mut f = feed();
        let x = |r, p| bid(9, r, 1, UpdateAction::Change, p);
        let one = [
            encode::book(46, V, T0, EOE, &[bid(9, 1, 1, UpdateAction::New, 100)], 0),
            encode::book(46, V, T0, 0, &[x(2, 102)], 0),
        ];
        f.on_incremental(&encode::packet(1, T0, &one), T0).unwrap();
        assert_eq!(top(&f, "#9").0, Some(100));
        // 2 missing; 3: an end, then RptSeq 4 (cached, 3 is in 2).
        let three = [
            encode::book(46, V, T0, EOE, &[], 0),
            encode::book(46, V, T0, 0, &[x(4, 104)], 0),
        ];
        f.on_incremental(&encode::packet(3, T0, &three), T0 + 1)
            .unwrap();
        assert_eq!(top(&f, "#9").0, Some(100));
        // The fill: an end at (2,0) covers (1,1) (102 visible there), then
        // RptSeq 3 at (2,1) and 4 replayed at (3,1), above every end.
        let two = [
            encode::book(46, V, T0, EOE, &[], 0),
            encode::book(46, V, T0, 0, &[x(3, 103)], 0),
        ];
        f.on_incremental(&encode::packet(2, T0, &two), T0 + 2)
            .unwrap();
        assert_eq!(f.seq.gaps_open(), 0);
        assert_eq!(top(&f, "#9").0, Some(102));
    }

    /// A look with no end since the instrument's last entry is
    /// not the contract's: (2,1) is covered by (3,0), an end of a later
    /// packet, but the contract looks only at the fill's end, when (3,1)
    /// (replayed) is not covered.
    #[test]
    fn no_look_without_an_end_since_the_last_entry() {
        let mut f = feed();
        let x = |r, p| bid(9, r, 1, UpdateAction::Change, p);
        f.on_incremental(&book(1, true, &[bid(9, 1, 1, UpdateAction::New, 100)]), T0)
            .unwrap();
        let three = [
            encode::book(46, V, T0, EOE, &[], 0),
            encode::book(46, V, T0, 0, &[x(4, 104)], 0),
        ];
        f.on_incremental(&encode::packet(3, T0, &three), T0 + 1)
            .unwrap();
        let two = [
            encode::book(46, V, T0, EOE, &[], 0),
            encode::book(46, V, T0, 0, &[x(2, 102)], 0),
            encode::book(46, V, T0, 0, &[x(3, 103)], 0),
        ];
        f.on_incremental(&encode::packet(2, T0, &two), T0 + 2)
            .unwrap();
        assert_eq!(f.seq.gaps_open(), 0);
        assert_eq!(top(&f, "#9").0, Some(100));
    }

    /// A definition that makes a book deeper than it was kept, after its
    /// entries: the levels it never held are unknown (a Delete would
    /// shift an empty one up where the venue has a price), so the
    /// instrument is suspect until a snapshot fills it.
    #[test]
    fn a_definition_deeper_than_the_book_was_kept_waits_for_a_snapshot() {
        use UpdateAction::{Delete, New};
        let mut f = Feed::new(Settings {
            default_depth: 2,
            ..settings()
        });
        let first = [
            bid(7, 1, 1, New, 100),
            bid(7, 2, 2, New, 99),
            bid(7, 3, 3, New, 98),
            offer(7, 4, 101),
        ];
        f.on_incremental(&book(1, true, &first), T0).unwrap();
        assert_eq!(f.verdict("#7", TH, T0), Reasons::empty());
        define(&mut f, 7, "ESZ6", 10);
        assert!(f.verdict("ESZ6", TH, T0).contains(Reasons::SUSPECT));
        let deletes = [bid(7, 5, 1, Delete, 0), bid(7, 6, 1, Delete, 0)];
        f.on_incremental(&book(2, true, &deletes), T0 + MS).unwrap();
        assert!(
            f.verdict("ESZ6", TH, T0 + MS).contains(Reasons::SUSPECT),
            "never ok on levels it never held"
        );
        // A snapshot at the last RptSeq applied loses nothing; the two
        // Deletes cached past it are applied after it.
        let root = SnapshotRoot {
            last_msg_seq_num_processed: 2,
            tot_num_reports: 1,
            security_id: 7,
            rpt_seq: 4,
            transact_time: T0,
            trading_status: None,
        };
        let snap = encode::packet(1, T0, &[encode::snapshot(52, V, &root, &[])]);
        f.on_snapshot(&snap, T0 + 2 * MS).unwrap();
        let e = f.find("ESZ6").unwrap();
        assert_eq!(e.instrument.seq.ticks_lost(), 0);
        assert_eq!(e.instrument.seq.rpt_seq(), Some(6));
        // The same depth again changes nothing.
        let mut g = Feed::new(settings());
        g.on_incremental(&book(1, true, &first), T0).unwrap();
        define(&mut g, 7, "ESZ6", 10);
        define(&mut g, 7, "ESZ6", 10);
        assert_eq!(g.verdict("ESZ6", TH, T0), Reasons::empty());
    }

    /// Book entries of an instrument only a snapshot can make whole are
    /// counted (what joins the snapshot lines again after they were left
    /// idle); entries applied are not, nor those waiting in a RptSeq hole
    /// (the other line's copy may fill it).
    #[test]
    fn book_entries_waiting_for_a_snapshot_are_counted() {
        use UpdateAction::New;
        let mut f = Feed::new(settings());
        f.on_incremental(&book(1, true, &[bid(7, 1, 1, New, 100)]), T0)
            .unwrap();
        assert_eq!(f.waiting_book_entries(), 0, "applied");
        // #7's RptSeq 2 lost: 3 waits in the hole, not for a snapshot.
        f.on_incremental(&book(2, true, &[bid(7, 3, 1, New, 101)]), T0)
            .unwrap();
        assert_eq!(f.cached(), 1);
        assert_eq!(f.waiting_book_entries(), 0, "in a hole");
        // #8 first seen past RptSeq 1: no baseline, its entries wait.
        let waiting = [bid(8, 5, 1, New, 100), bid(8, 6, 2, New, 99)];
        f.on_incremental(&book(3, true, &waiting), T0 + MS).unwrap();
        assert_eq!(f.waiting_book_entries(), 2);
    }

    /// A definition that makes a book shallower than it was kept, after
    /// its entries: a New pushed a level past the venue's depth, which
    /// the venue dropped and the book kept; a Delete then shifted it up
    /// within the venue's depth, where the venue has no such level (and
    /// more Deletes would bring it to the top: a price no one quotes). The
    /// cut alone leaves it there: the instrument is suspect until a
    /// snapshot.
    #[test]
    fn a_definition_shallower_than_the_book_was_kept_waits_for_a_snapshot() {
        use UpdateAction::{Delete, New};
        let mut f = Feed::new(settings());
        // The venue's depth is 3: its 98 is dropped by the New at 101,
        // kept here (10 deep) at level 4; the Delete brings it to 3.
        let entries = [
            bid(7, 1, 1, New, 100),
            bid(7, 2, 2, New, 99),
            bid(7, 3, 3, New, 98),
            bid(7, 4, 1, New, 101),
            bid(7, 5, 1, Delete, 0),
            offer(7, 6, 102),
        ];
        f.on_incremental(&book(1, true, &entries), T0).unwrap();
        assert_eq!(f.verdict("#7", TH, T0), Reasons::empty());
        define(&mut f, 7, "ESZ6", 3);
        let books = f.visible(f.find("ESZ6").unwrap());
        let side = &books.outright.bid;
        let bids: Vec<_> = (1..=4).map(|n| side.level(n).map(|l| l.price)).collect();
        assert_eq!(bids, [Some(100), Some(99), Some(98), None], "cut to 3");
        assert!(
            f.verdict("ESZ6", TH, T0).contains(Reasons::SUSPECT),
            "never ok on a level the venue dropped"
        );
        // Before any entry, a definition's depth is taken as it comes.
        let mut g = Feed::new(settings());
        define(&mut g, 8, "NQZ6", 3);
        g.on_incremental(
            &book(1, true, &[bid(8, 1, 1, New, 100), offer(8, 2, 101)]),
            T0,
        )
        .unwrap();
        assert_eq!(g.verdict("NQZ6", TH, T0), Reasons::empty());
    }

    /// Instruments left with a change whose event never ends (no gap
    /// open) are gone over by the fold of pending positions as entries
    /// come, not once a datagram: a flood of heartbeats after them costs
    /// nothing per datagram.
    #[test]
    fn instruments_left_unfinished_cost_a_heartbeat_flood_nothing() {
        let mut f = feed();
        let waiting = 5_000u32;
        unfinished(&mut f, 1, waiting as i32);
        assert_eq!(f.dirty.len(), waiting as usize);
        let before = f.fold_examined;
        let datagrams = 1_000u32;
        for s in 2..2 + datagrams {
            f.on_incremental(&encode::packet(s, T0, &[encode::heartbeat(V)]), T0 + 1)
                .unwrap();
        }
        assert_eq!(f.fold_examined - before, 0, "{datagrams} heartbeats");
        // Entries pay for the pass: one per as many entries as wait.
        let before = f.fold_examined;
        let mut r = 1;
        for s in 2 + datagrams..2 + datagrams + 100 {
            r += 1;
            let c = [bid(1, r, 1, UpdateAction::Change, 100)];
            f.on_incremental(
                &encode::packet(s, T0, &[encode::book(46, V, T0, 0, &c, 0)]),
                T0 + 2,
            )
            .unwrap();
        }
        assert_eq!(
            f.fold_examined - before,
            0,
            "100 entries, {waiting} waiting"
        );
        // Their end still publishes every book.
        let end = encode::book(46, V, T0, EOE, &[], 0);
        f.on_incremental(&encode::packet(2 + datagrams + 100, T0, &[end]), T0 + 3)
            .unwrap();
        assert!(f.dirty.is_empty());
        assert_eq!(top(&f, &format!("#{waiting}")).0, Some(100));
    }

    /// Instruments left with an event never ended cost an applied snapshot
    /// of another instrument nothing: it is the only one looked at.
    #[test]
    fn instruments_left_unfinished_cost_a_snapshot_flood_nothing() {
        let mut f = feed();
        unfinished(&mut f, 1, 5_000);
        // Another instrument suspect, far ahead: each snapshot of it applies.
        let far = [bid(9_999, 1_000_000, 1, UpdateAction::New, 100)];
        f.on_incremental(&book(2, false, &far), T0).unwrap();
        assert!(f.dirty.len() >= 5_000);
        let before = f.examined;
        for r in 1..=1_000 {
            f.on_snapshot(&snapshot_of(9_999, r, 2, T0, 100), T0 + 1)
                .unwrap();
        }
        assert_eq!(f.counters.snapshots_applied, 1_000);
        assert!(f.examined - before <= 1_000, "{}", f.examined - before);
    }

    /// Positions folded give their room back: instrument after instrument
    /// given as many changes as there are instruments waiting, an event
    /// never ended, does not leave each holding room for them all.
    #[test]
    fn folded_positions_give_their_room_back() {
        let mut f = feed();
        let waiting = 200u32;
        let bids = bids_from_one(waiting as i32);
        f.on_incremental(
            &encode::packet(1, T0, &[encode::book(46, V, T0, 0, &bids, 0)]),
            T0,
        )
        .unwrap();
        let mut s = 1;
        for id in 1..=waiting as i32 {
            for r in 2..=waiting {
                s += 1;
                let c = [bid(id, r, 1, UpdateAction::Change, 100 + i64::from(r % 2))];
                f.on_incremental(
                    &encode::packet(s, T0, &[encode::book(46, V, T0, 0, &c, 0)]),
                    T0,
                )
                .unwrap();
            }
        }
        let room: usize = (1..=waiting)
            .map(|id| f.find(&format!("#{id}")).unwrap().instrument.pending_room())
            .sum();
        assert!(room <= 64 * waiting as usize, "{room}");
    }

    /// A gap given up unverifies every instrument; once all are, the next
    /// goes over (and republishes) only those verified again since.
    #[test]
    fn a_give_up_goes_over_only_the_instruments_verified_since_the_last() {
        use UpdateAction::{Change, New};
        let mut f = feed();
        f.track_touched(true);
        let all: Vec<BookEntry> = (1..=50).map(|id| bid(id, 1, 1, New, 100)).collect();
        f.on_incremental(&book(1, true, &all), T0).unwrap();
        assert_eq!(touched(&mut f).len(), 50);
        let unverified = |f: &Feed| {
            (1..=50)
                .filter(|id| {
                    f.find(&format!("#{id}"))
                        .unwrap()
                        .instrument
                        .seq
                        .unverified()
                })
                .count()
        };
        // Packet 2 lost, given up: every instrument unverified.
        f.on_incremental(&book(3, true, &[bid(7, 2, 1, Change, 101)]), T0)
            .unwrap();
        f.expire(T0 + 10 * MS);
        assert_eq!(unverified(&f), 50);
        assert_eq!(touched(&mut f).len(), 50);
        // #7 and #9 verified again by entries in order; packet 5 lost.
        let two = [bid(7, 3, 1, Change, 102), bid(9, 2, 1, Change, 99)];
        f.on_incremental(&book(4, true, &two), T0).unwrap();
        f.on_incremental(&book(6, true, &[]), T0 + 10 * MS).unwrap();
        let ids = touched(&mut f);
        assert_eq!(ids, [7, 9]);
        assert_eq!(unverified(&f), 48);
        f.expire(T0 + 20 * MS);
        assert_eq!(unverified(&f), 50);
        let ids = touched(&mut f);
        assert_eq!(ids, [7, 9], "only those verified since the last give-up");
        assert_eq!(f.sequence().counters().packets_lost, 2);
    }

    /// An instrument unverified and verified again and again between two
    /// give-ups (a snapshot taken before a packet never received, then its
    /// next entry, over and over) is listed once: the list grew by one at
    /// each turn, without bound until the next give-up.
    #[test]
    fn an_instrument_verified_again_and_again_is_listed_once() {
        use UpdateAction::{Change, New};
        let mut f = feed();
        f.on_incremental(&book(1, true, &[bid(7, 1, 1, New, 100)]), T0)
            .unwrap();
        // Packet 2 lost, given up: every instrument unverified.
        f.on_incremental(&book(3, true, &[]), T0).unwrap();
        f.expire(T0 + 10 * MS);
        for k in 0..100u32 {
            let i = f.by_id.get(7).unwrap();
            f.entries[i as usize].instrument.seq.unverify();
            let entry = bid(7, 2 + k, 1, Change, 101);
            f.on_incremental(&book(4 + k, true, &[entry]), T0 + 10 * MS)
                .unwrap();
            assert!(!f.entries[i as usize].instrument.seq.unverified());
        }
        assert_eq!(f.verified.len(), 1);
    }

    /// An instrument verified again by a snapshot while every instrument
    /// was unverified is listed like one verified by an entry: the next
    /// give-up unverifies (and republishes) it again.
    #[test]
    fn an_instrument_verified_by_a_snapshot_is_unverified_by_the_next_give_up() {
        let mut f = feed();
        f.track_touched(true);
        f.on_incremental(&book(1, true, &bids_from_one(5)), T0)
            .unwrap();
        touched(&mut f);
        let unverified = |f: &Feed, id: i32| {
            let e = f.find(&format!("#{id}")).unwrap();
            e.instrument.seq.unverified()
        };
        // Packet 2 lost, given up: all five unverified.
        f.on_incremental(&book(3, true, &[]), T0).unwrap();
        f.expire(T0 + 10 * MS);
        assert!((1..=5).all(|id| unverified(&f, id)));
        touched(&mut f);
        // A snapshot of #3 at its RptSeq verifies it.
        f.on_snapshot(&snapshot_of(3, 1, 3, T0, 100), T0 + 11 * MS)
            .unwrap();
        assert_eq!(f.counters().snapshots_applied, 1);
        assert!(!unverified(&f, 3));
        assert_eq!(touched(&mut f), [3]);
        // Packet 4 lost, given up: #3 unverified again, and only it
        // republished.
        f.on_incremental(&book(5, true, &[]), T0 + 12 * MS).unwrap();
        f.expire(T0 + 20 * MS);
        assert!(unverified(&f, 3), "verified by the snapshot, then given up");
        assert_eq!(touched(&mut f), [3]);
        assert_eq!(f.sequence().counters().packets_lost, 2);
    }

    /// A group status republishes its group's instruments only, each
    /// once however many statuses came; one that changes nothing
    /// republishes nobody; a redefinition moves an instrument between
    /// groups.
    #[test]
    fn a_group_status_republishes_only_its_groups_instruments() {
        let mut f = feed();
        for id in 1..=6 {
            let group = if id <= 2 { "ES" } else { "NQ" };
            define_in(&mut f, id, &format!("S{id}"), 10, b'A', group);
        }
        f.track_touched(true);
        assert_eq!(touched(&mut f).len(), 6);
        let status = |s: u32, group, code| encode::packet(s, T0, &[group_status(group, "", code)]);
        f.on_incremental(&status(1, "ES", 2), T0).unwrap();
        f.on_incremental(&status(2, "ES", 17), T0).unwrap();
        f.on_incremental(&status(3, "ES", 2), T0).unwrap();
        assert_eq!(touched(&mut f), [1, 2]);
        assert_eq!(f.state(f.find("S1").unwrap()), Some(State::Halted));
        f.on_incremental(&status(4, "NQ", 103), T0).unwrap();
        assert_eq!(touched(&mut f), [] as [i32; 0], "no change");
        define_in(&mut f, 3, "S3", 10, b'M', "ES");
        assert_eq!(touched(&mut f), [3]);
        f.on_incremental(&status(5, "ES", 4), T0).unwrap();
        assert_eq!(touched(&mut f), [1, 2, 3]);
        f.on_incremental(&status(6, "NQ", 2), T0).unwrap();
        assert_eq!(touched(&mut f), [4, 5, 6]);
        assert_eq!(f.state(f.find("S3").unwrap()), Some(State::Closed));
    }

    /// An instrument whose change waits alone for its event's end is
    /// listed for publication when a later packet's end of event (naming
    /// only another instrument) covers it.
    #[test]
    fn a_change_covered_by_a_later_packets_end_is_listed_for_publication() {
        use UpdateAction::{Change, New};
        let mut f = feed();
        f.on_incremental(
            &book(1, true, &[bid(7, 1, 1, New, 100), bid(8, 1, 1, New, 50)]),
            T0,
        )
        .unwrap();
        f.track_touched(true);
        touched(&mut f);
        f.on_incremental(&book(2, false, &[bid(7, 2, 1, Change, 101)]), T0)
            .unwrap();
        touched(&mut f);
        assert_eq!(top(&f, "#7"), (Some(100), None), "not visible yet");
        f.on_incremental(&book(3, true, &[bid(8, 2, 1, Change, 51)]), T0)
            .unwrap();
        assert_eq!(touched(&mut f), [7, 8]);
        assert_eq!(top(&f, "#7"), (Some(101), None));
    }

    /// A group status matches a definition by the SecurityGroup's bytes as
    /// sent, not by its text: a group that is not UTF-8 still matches.
    #[test]
    fn a_group_is_matched_by_its_bytes_not_its_text() {
        use super::super::template::{definition, status as security_status};
        let mut f = feed();
        let mut raw = bare_definition(9, "ESU7", "");
        raw[10 + definition::SECURITY_GROUP] = 0xff;
        f.on_definitions(&encode::packet(1, T0, &[raw])).unwrap();
        let mut raw = group_status("ES", "", 2);
        raw[10 + security_status::SECURITY_GROUP] = 0xff;
        f.on_incremental(&encode::packet(1, T0, &[raw]), T0)
            .unwrap();
        assert_eq!(f.state(f.find("ESU7").unwrap()), Some(State::Halted));
    }

    /// Statuses naming more (SecurityGroup, Asset) pairs than three for
    /// each instrument kept are refused and counted; a pair kept still
    /// changes.
    #[test]
    fn group_statuses_are_kept_for_three_pairs_an_instrument() {
        let mut f = Feed::new(Settings {
            max_instruments: 1,
            ..settings()
        });
        define(&mut f, 7, "ESZ6", 10);
        f.on_incremental(&book(1, true, &[bid(7, 1, 1, UpdateAction::New, 100)]), T0)
            .unwrap();
        let status =
            |s: u32, group, asset, code| encode::packet(s, T0, &[group_status(group, asset, code)]);
        for (s, group, asset) in [(2, "ES", ""), (3, "", "ES"), (4, "NQ", "NQ")] {
            f.on_incremental(&status(s, group, asset, 17), T0).unwrap();
        }
        assert_eq!((f.groups.len(), f.counters().anomalies), (3, 0));
        f.on_incremental(&status(5, "ZN", "", 2), T0).unwrap();
        assert_eq!((f.groups.len(), f.counters().anomalies), (3, 1));
        assert_eq!(f.groups.statuses(groups::key(b"ZN", b"")).count(), 0);
        f.on_incremental(&status(6, "ES", "", 2), T0).unwrap();
        assert_eq!(f.verdict("ESZ6", TH, T0), Reasons::HALTED);
        assert_eq!((f.groups.len(), f.counters().anomalies), (3, 1));
    }

    /// A packet holding only a ChannelReset raises the source watermark
    /// to the reset's TransactTime (its root carries one), not to its
    /// arrival as a heartbeat's would.
    #[test]
    fn a_channel_reset_raises_the_watermark_to_its_transact_time() {
        let mut f = feed();
        f.on_incremental(&book(1, true, &[bid(1, 1, 1, UpdateAction::New, 10)]), T0)
            .unwrap();
        let reset = encode::channel_reset(V, T0 + 5 * MS, EOE, 1);
        f.on_incremental(&encode::packet(2, T0 + 6 * MS, &[reset]), T0 + 9 * MS)
            .unwrap();
        assert_eq!(f.source_watermark(), Some(i128::from(T0 + 5 * MS)));
        assert_eq!(f.last_alive(), Some(T0 + 9 * MS));
    }

    /// The watermark never rises past the SendingTime of the packet that
    /// raises it: a TransactTime far ahead (corrupt, or forged) would
    /// otherwise keep `stale_at_source` from ever firing again.
    #[test]
    fn the_watermark_stops_at_the_packets_sending_time() {
        let mut f = feed();
        let ahead = encode::book(
            46,
            V,
            u64::MAX - 1,
            EOE,
            &[bid(1, 1, 1, UpdateAction::New, 10)],
            0,
        );
        f.on_incremental(&encode::packet(1, T0 + MS, &[ahead]), T0 + 2 * MS)
            .unwrap();
        assert_eq!(f.source_watermark(), Some(i128::from(T0 + MS)));
        let th = Thresholds {
            stale_ns: 30_000 * MS,
            source_ns: 10 * MS,
        };
        assert_eq!(f.verdict("#1", th, T0 + 20 * MS), Reasons::STALE_AT_SOURCE);
    }

    /// A cached entry with an odd value that a snapshot lets apply counts
    /// in the feed's anomalies.
    #[test]
    fn an_odd_entry_applied_after_a_snapshot_is_counted() {
        let mut f = feed();
        let odd = BookEntry {
            action: UpdateAction::Unknown(9),
            ..bid(9, 2, 1, UpdateAction::New, 100)
        };
        f.on_incremental(&book(1, true, &[odd]), T0).unwrap();
        assert_eq!((f.cached(), f.counters().anomalies), (1, 0));
        let root = SnapshotRoot {
            last_msg_seq_num_processed: 0,
            tot_num_reports: 1,
            security_id: 9,
            rpt_seq: 1,
            transact_time: T0,
            trading_status: None,
        };
        let snap = encode::packet(1, T0, &[encode::snapshot(52, V, &root, &[])]);
        f.on_snapshot(&snap, T0 + 1).unwrap();
        assert_eq!(f.counters().snapshots_applied, 1);
        assert_eq!((f.cached(), f.counters().anomalies), (0, 1));
    }

    /// After a ChannelReset that ends its event, the sequence restarts at
    /// 1 with an event over several packets: the reset's end of event
    /// (numbered in the old sequence) covers none of its changes, so a
    /// gap filled before the event's end publishes nothing.
    #[test]
    fn an_end_of_event_before_a_restart_covers_nothing_after_it() {
        let mut f = feed();
        f.on_incremental(&book(50, true, &[bid(1, 1, 1, UpdateAction::New, 10)]), T0)
            .unwrap();
        let reset = encode::channel_reset(V, T0, EOE, 1);
        f.on_incremental(&encode::packet(51, T0, &[reset]), T0)
            .unwrap();
        f.on_incremental(
            &book(1, false, &[bid(1, 1, 1, UpdateAction::New, 12)]),
            T0 + 1,
        )
        .unwrap();
        // Past the window of late copies of the old sequence: packet 3,
        // then 2 filling the gap, neither ending the event.
        let quiet = |s| encode::packet(s, T0, &[encode::heartbeat(V)]);
        f.on_incremental(&quiet(3), T0 + 6 * MS).unwrap();
        f.on_incremental(&quiet(2), T0 + 7 * MS).unwrap();
        assert_eq!(f.sequence().counters().recovered, 1);
        assert_eq!(top(&f, "#1"), (None, None), "half an event");
        f.on_incremental(
            &book(4, true, &[bid(1, 2, 1, UpdateAction::New, 13)]),
            T0 + 8 * MS,
        )
        .unwrap();
        assert_eq!(top(&f, "#1"), (Some(13), None));
    }

    /// A ChannelReset empties the group statuses: the members of each
    /// group that had one are republished, though nothing else of theirs
    /// changed since the reset before.
    #[test]
    fn a_channel_reset_republishes_the_members_of_groups_with_a_status() {
        let mut f = feed();
        for id in 1..=4 {
            let group = if id <= 2 { "GE" } else { "ZN" };
            define_in(&mut f, id, &format!("S{id}"), 10, b'A', group);
        }
        f.track_touched(true);
        let reset = || encode::channel_reset(V, T0, EOE, 1);
        f.on_incremental(&encode::packet(1, T0, &[reset()]), T0)
            .unwrap();
        assert_eq!(touched(&mut f).len(), 4);
        let halt = encode::packet(2, T0, &[group_status("GE", "", 2)]);
        f.on_incremental(&halt, T0 + 10 * MS).unwrap();
        assert_eq!(touched(&mut f), [1, 2]);
        assert_eq!(f.state(f.find("S1").unwrap()), Some(State::Halted));
        f.on_incremental(&encode::packet(3, T0, &[reset()]), T0 + 11 * MS)
            .unwrap();
        // Its definition's status in force again.
        assert_eq!(f.state(f.find("S1").unwrap()), Some(State::Trading));
        assert_eq!(touched(&mut f), [1, 2], "no longer halted");
    }

    /// A snapshot's status stands after the packet it says it was taken
    /// after, however late the feed gets there, unless that packet lies
    /// `restart_margin` (10,000 here) or more past the highest received:
    /// then the snapshot is of an older sequence or made up, and ignored,
    /// counted in `anomalies` (its status would outrank every real one
    /// until the sequence got there, its book be one a restart emptied).
    #[test]
    fn a_snapshot_taken_far_ahead_does_not_outrank_the_statuses_to_come() {
        let status = instrument_status;
        let snapshot = |id: i32, last: u32| {
            let root = SnapshotRoot {
                last_msg_seq_num_processed: last,
                tot_num_reports: 1,
                security_id: id,
                rpt_seq: 5,
                transact_time: T0,
                trading_status: Some(17),
            };
            encode::packet(1, T0, &[encode::snapshot(52, V, &root, &[])])
        };
        let mut f = feed();
        // #1 and #2 without a baseline (suspect): any snapshot applies.
        let first = [
            bid(1, 3, 1, UpdateAction::New, 9),
            bid(2, 3, 1, UpdateAction::New, 9),
        ];
        f.on_incremental(&book(100, true, &first), T0).unwrap();
        // Next expected: 101. #1's taken after 10,100 (as far as the
        // margin allows), #2's after 10,101 (one more).
        f.on_snapshot(&snapshot(1, 10_100), T0).unwrap();
        f.on_snapshot(&snapshot(2, 10_101), T0).unwrap();
        assert_eq!(f.counters().snapshots_applied, 1);
        assert_eq!(f.counters().snapshots_ignored, 1);
        assert_eq!(f.counters().anomalies, 1, "#2's only");
        assert_eq!(f.find("#2").unwrap().instrument.seq.rpt_seq(), None);
        // A halt of each in packet 101: older than #1's snapshot; #2 has
        // no other status.
        let halts = [status(1, 2), status(2, 2)];
        f.on_incremental(&encode::packet(101, T0, &halts), T0)
            .unwrap();
        assert_eq!(f.state(f.find("#1").unwrap()), Some(State::Trading));
        assert_eq!(f.state(f.find("#2").unwrap()), Some(State::Halted));
    }

    /// A ChannelReset goes over (and republishes) only the instruments
    /// changed since the one before it: a datagram of thousands costs
    /// each what changed in between, not the channel.
    #[test]
    fn a_channel_reset_goes_over_only_what_changed_since_the_last() {
        let mut f = feed();
        f.track_touched(true);
        f.on_incremental(&book(50, true, &bids_from_one(50)), T0)
            .unwrap();
        touched(&mut f);
        let reset = || encode::channel_reset(V, T0, EOE, 1);
        f.on_incremental(&encode::packet(51, T0, &[reset()]), T0)
            .unwrap();
        assert_eq!(touched(&mut f).len(), 50);
        // #7 changed between two resets of one packet: only it.
        let seven = encode::book(46, V, T0, EOE, &[bid(7, 1, 1, UpdateAction::New, 9)], 0);
        f.on_incremental(&encode::packet(1, T0, &[seven, reset()]), T0)
            .unwrap();
        assert_eq!(touched(&mut f), [7]);
        let e = f.find("#7").unwrap();
        assert!(e.instrument.is_reset(false) && top(&f, "#7") == (None, None));
        // Nothing changed since: nobody.
        let resets = [reset(), reset(), reset()];
        // (Past the window of late copies of the old sequence.)
        f.on_incremental(&encode::packet(2, T0, &resets), T0 + 10 * MS)
            .unwrap();
        assert_eq!(touched(&mut f), [] as [i32; 0]);
        assert_eq!(f.counters().channel_resets, 5);
        // A status, a snapshot-less entry out of order (cached): listed.
        let status = instrument_status(3, 2);
        let cached = encode::book(46, V, T0, EOE, &[bid(4, 3, 1, UpdateAction::New, 9)], 0);
        f.on_incremental(
            &encode::packet(3, T0, &[status, cached, reset()]),
            T0 + 11 * MS,
        )
        .unwrap();
        assert_eq!(touched(&mut f), [3, 4]);
        assert!((1..=50).all(|id| f
            .find(&format!("#{id}"))
            .unwrap()
            .instrument
            .is_reset(false)));
        assert_eq!((f.cached(), f.state(f.find("#3").unwrap())), (0, None));
    }

    /// A packet repeating a ChannelReset and an entry that goes back (its
    /// RptSeq again) infers a reset once, not at every pair: each inferred
    /// reset went over every instrument, and so did the ChannelReset after
    /// it (the baselines forgotten or not, the other way), so a datagram
    /// of such pairs went over the channel twice a pair.
    #[test]
    fn a_packet_infers_a_reset_once() {
        let mut f = feed();
        for k in 0..8 {
            let entries: Vec<BookEntry> = (1..=250)
                .map(|n| bid(k * 250 + n, 1, 1, UpdateAction::New, 100))
                .collect();
            f.on_incremental(&book(43 + k as u32, true, &entries), T0)
                .unwrap();
        }
        let again = || encode::book(46, V, T0, EOE, &[bid(1, 1, 1, UpdateAction::New, 9)], 0);
        let mut messages = Vec::new();
        for _ in 0..20 {
            messages.push(encode::channel_reset(V, T0, EOE, 1));
            messages.push(again());
            messages.push(again());
        }
        let (steps, out) =
            crate::test_work::during(|| f.on_incremental(&encode::packet(51, T0, &messages), T0));
        out.unwrap();
        assert_eq!(f.counters().resets_inferred, 1);
        // The first ChannelReset over all (none gone over since they were
        // made), the inferred reset and the ChannelReset after it once
        // each; the rest what changed: a few.
        assert!(steps <= 3 * 2_000 + 100, "{steps} instruments gone over");
        assert_eq!(top(&f, "#1"), (Some(9), None));
    }

    /// A ChannelReset empties every book and restarts RptSeq at 1; the
    /// incremental sequence restarts at 1 after it.
    #[test]
    fn a_channel_reset_empties_the_channel() {
        let mut f = feed();
        f.on_incremental(&book(50, true, &[bid(1, 1, 1, UpdateAction::New, 10)]), T0)
            .unwrap();
        let reset = encode::channel_reset(V, T0, EOE, 1);
        f.on_incremental(&encode::packet(51, T0, &[reset]), T0)
            .unwrap();
        assert_eq!(top(&f, "#1"), (None, None));
        assert_eq!(f.counters().channel_resets, 1);
        f.on_incremental(
            &book(1, true, &[bid(1, 1, 1, UpdateAction::New, 12)]),
            T0 + 1,
        )
        .unwrap();
        assert_eq!(f.sequence().counters().sequence_restarts, 1);
        assert_eq!(top(&f, "#1"), (Some(12), None));
        assert_eq!(f.verdict("#1", TH, T0 + 1), Reasons::empty());
    }

    /// The other line's copy of packet 1, come after a ChannelReset in
    /// packet 2 and sent before it, is a duplicate: the books stay empty
    /// (by the letter it was the new sequence's packet 1, and put the book
    /// from before the reset back, `ok`).
    #[test]
    fn a_copy_of_packet_1_after_a_channel_reset_is_a_duplicate() {
        let mut f = feed();
        let one = book(1, true, &[bid(1, 1, 1, UpdateAction::New, 10)]);
        f.on_incremental(&one, T0).unwrap();
        let reset = encode::channel_reset(V, T0 + 1, EOE, 1);
        f.on_incremental(&encode::packet(2, T0 + 1, &[reset]), T0 + 1)
            .unwrap();
        f.on_incremental(&one, T0 + 2).unwrap();
        assert_eq!(top(&f, "#1"), (None, None));
        assert_ne!(f.verdict("#1", TH, T0 + 2), Reasons::empty());
        let c = f.sequence().counters();
        assert_eq!((c.sequence_restarts, c.duplicates), (0, 1));
    }

    /// Packet `s` of one 46 at TransactTime `tt` with `entries`, ending
    /// its event.
    fn book_at(s: u32, tt: u64, entries: &[BookEntry]) -> Vec<u8> {
        encode::packet(s, tt, &[encode::book(46, V, tt, EOE, entries, 0)])
    }

    /// Packet `s` of one 46 at TransactTime `tt` with `entries`, ending
    /// its event, arriving at `tt`.
    fn send(f: &mut Feed, s: u32, tt: u64, entries: &[BookEntry]) {
        f.on_incremental(&book_at(s, tt, entries), tt).unwrap();
    }

    /// A 52 of instrument `id` at RptSeq `rpt`, taken after MsgSeqNum
    /// `last`, its last event at `tt`: a bid at `price`.
    fn snapshot_of(id: i32, rpt: u32, last: u32, tt: u64, price: i64) -> Vec<u8> {
        snapshot_saying(id, rpt, last, tt, price, None)
    }

    /// [`snapshot_of`] with MDSecurityTradingStatus `status`.
    fn snapshot_saying(
        id: i32,
        rpt: u32,
        last: u32,
        tt: u64,
        price: i64,
        status: Option<u8>,
    ) -> Vec<u8> {
        let root = SnapshotRoot {
            last_msg_seq_num_processed: last,
            tot_num_reports: 1,
            security_id: id,
            rpt_seq: rpt,
            transact_time: tt,
            trading_status: status,
        };
        let level = SnapshotEntry {
            price: Some(price),
            size: Some(1),
            orders: None,
            level: Some(1),
            entry_type: EntryType::Bid,
        };
        encode::packet(1, tt, &[encode::snapshot(52, V, &root, &[level])])
    }

    /// A ChannelReset lost on both lines (its gap given up), MsgSeqNum
    /// going on: the new sequence's first entry to an instrument whose
    /// RptSeq it does not pass, in the newest packet, shows the reset,
    /// and the channel is emptied as by a reset arriving late. Without it
    /// #2, whose new values passed its old RptSeq, applied them in order
    /// on its old offer and read `ok` at a book the venue never had.
    #[test]
    fn a_channel_reset_lost_on_both_lines_is_inferred_from_rpt_seq_going_back() {
        let mut f = feed();
        let change = |id, rpt, price| bid(id, rpt, 1, UpdateAction::Change, price);
        f.on_incremental(
            &book_at(
                1,
                T0,
                &[
                    bid(1, 1, 1, UpdateAction::New, 100),
                    bid(2, 1, 1, UpdateAction::New, 200),
                    offer(2, 2, 210),
                ],
            ),
            T0,
        )
        .unwrap();
        send(&mut f, 2, T0, &[change(1, 2, 101)]);
        // Packet 3, lost on both lines: the ChannelReset, then #2's new
        // RptSeq 1 and 2 (a bid at 300, an offer at 310).
        let t1 = T0 + MS;
        send(&mut f, 4, t1, &[change(2, 3, 301)]);
        f.expire(T0 + 10 * MS);
        assert_eq!(f.sequence().counters().packets_lost, 1);
        let t2 = T0 + 11 * MS;
        f.on_incremental(
            &book_at(
                5,
                t2,
                &[change(2, 4, 302), bid(1, 1, 1, UpdateAction::New, 110)],
            ),
            t2,
        )
        .unwrap();
        let c = f.counters();
        assert_eq!((c.resets_inferred, c.channel_resets), (1, 0));
        assert!(c.anomalies >= 1);
        // #2: emptied, no baseline (its new RptSeq 1 and 2 were lost).
        assert_eq!(top(&f, "#2"), (None, None));
        assert_eq!(f.find("#2").unwrap().instrument.seq.rpt_seq(), None);
        assert_ne!(f.verdict("#2", TH, t2), Reasons::empty());
        // #1: the entry that showed the reset starts its new history.
        assert_eq!(top(&f, "#1"), (Some(110), None));
        assert_eq!(f.verdict("#1", TH, t2), Reasons::empty());
        // A snapshot of #2's old books (its last event before the entry
        // that showed the reset) is screened; one of the new, applied.
        f.on_snapshot(&snapshot_of(2, 2, 2, T0, 200), t2).unwrap();
        assert_eq!(f.counters().snapshots_ignored, 1);
        assert_eq!(top(&f, "#2"), (None, None));
        f.on_snapshot(&snapshot_of(2, 4, 5, t2 + 1, 302), t2)
            .unwrap();
        assert_eq!(f.counters().snapshots_applied, 1);
        assert_eq!(top(&f, "#2"), (Some(302), None));
        assert_eq!(f.verdict("#2", TH, t2), Reasons::empty());
    }

    /// An RptSeq far ahead (forged, or corrupt behind a good checksum) in
    /// the newest packet makes its instrument's next real entry one that
    /// goes back: the channel is emptied as by a ChannelReset (as a forged
    /// ChannelReset would), and every instrument, the others included,
    /// waits for its snapshot or its RptSeq 1, none read `ok` on the
    /// book it had (docs/security.md says so).
    #[test]
    fn an_rpt_seq_far_ahead_then_the_real_one_is_taken_for_a_reset() {
        let mut f = feed();
        send(
            &mut f,
            1,
            T0,
            &[
                bid(1, 1, 1, UpdateAction::New, 100),
                bid(2, 1, 1, UpdateAction::New, 200),
            ],
        );
        send(
            &mut f,
            2,
            T0,
            &[bid(1, 1_000_000, 1, UpdateAction::Change, 9)],
        );
        assert_eq!(top(&f, "#1"), (Some(100), None));
        assert_ne!(f.verdict("#1", TH, T0), Reasons::empty());
        assert_eq!(f.verdict("#2", TH, T0), Reasons::empty());
        send(&mut f, 3, T0, &[bid(1, 2, 1, UpdateAction::Change, 101)]);
        assert_eq!(f.counters().resets_inferred, 1);
        for id in ["#1", "#2"] {
            assert_eq!(top(&f, id), (None, None), "{id}");
            assert!(f.verdict(id, TH, T0).contains(Reasons::NO_QUOTE), "{id}");
        }
        // #2's own snapshot, taken after, gives it back.
        f.on_snapshot(&snapshot_of(2, 1, 3, T0 + 1, 200), T0)
            .unwrap();
        assert_eq!(f.verdict("#2", TH, T0), Reasons::empty());
    }

    /// Each instrument's snapshot is measured against its own packet: one
    /// taken ahead of the lines (down a while) lets the lines' entries
    /// behind it be duplicates when they come back, and another
    /// instrument's snapshot taken later does not hide an RptSeq going
    /// back.
    #[test]
    fn rpt_seq_is_measured_against_the_instruments_own_snapshot() {
        let mut f = feed();
        send(&mut f, 1, T0, &[bid(1, 1, 1, UpdateAction::New, 100)]);
        send(&mut f, 3, T0, &[bid(1, 3, 1, UpdateAction::Change, 103)]);
        // #1's snapshot after packet 5,000, RptSeq 40, while the lines
        // were down.
        f.on_snapshot(&snapshot_of(1, 40, 5_000, T0, 140), T0)
            .unwrap();
        send(
            &mut f,
            4_990,
            T0,
            &[bid(1, 39, 1, UpdateAction::Change, 139)],
        );
        send(
            &mut f,
            5_001,
            T0,
            &[bid(1, 41, 1, UpdateAction::Change, 141)],
        );
        assert_eq!(f.counters().resets_inferred, 0);
        assert_eq!(top(&f, "#1"), (Some(141), None));
        // #2 at RptSeq 5 by its snapshot after 5,004; #3's taken later.
        send(&mut f, 5_002, T0, &[bid(2, 1, 1, UpdateAction::New, 200)]);
        send(
            &mut f,
            5_004,
            T0,
            &[bid(2, 3, 1, UpdateAction::Change, 203)],
        );
        f.on_snapshot(&snapshot_of(2, 5, 5_004, T0, 205), T0)
            .unwrap();
        f.on_snapshot(&snapshot_of(3, 1, 5_100, T0, 300), T0)
            .unwrap();
        assert_eq!(f.counters().snapshots_applied, 3);
        send(&mut f, 5_010, T0, &[bid(2, 4, 1, UpdateAction::Change, 9)]);
        assert_eq!(f.counters().resets_inferred, 1);
    }

    /// A ChannelReset inferred, then come late (filling its gap, nothing
    /// else missing up to the packet that showed it): the trading status
    /// the new sequence sent between the two counts again (it was voided,
    /// its place unknown), and the one sent before the reset stays
    /// emptied (the definition's pre-open in force when the new sequence
    /// sent none). With a packet still missing in between, another reset
    /// may lie there: the void stays.
    #[test]
    fn a_late_reset_lifts_the_void_of_the_one_inferred_for_it() {
        for (missing_between, reopened) in [(false, true), (true, true), (false, false)] {
            let mut f = feed();
            let d = pre_open_es();
            let def = encode::definition(54, V, &d, 0, &[]);
            f.on_definitions(&encode::packet(1, T0, &[def])).unwrap();
            let t = |k: u64| T0 + k * MS / 10;
            let book = |at, price| {
                encode::book(46, V, at, EOE, &[bid(1, 1, 1, UpdateAction::New, price)], 0)
            };
            let p1 = encode::packet(1, t(1), &[instrument_status(1, 17), book(t(1), 100)]);
            f.on_incremental(&p1, t(1)).unwrap();
            // 2, the reset, late on both lines; 3 (or 4, 3 missing too)
            // reopens #1; 5 sends its new RptSeq 1.
            let reopen = if missing_between { 4 } else { 3 };
            let status = match reopened {
                true => instrument_status(1, 17),
                false => encode::heartbeat(V),
            };
            let p = encode::packet(reopen, t(3), &[status]);
            f.on_incremental(&p, t(3)).unwrap();
            if !missing_between {
                let p4 = encode::packet(4, t(4), &[encode::heartbeat(V)]);
                f.on_incremental(&p4, t(4)).unwrap();
            }
            f.on_incremental(&encode::packet(5, t(5), &[book(t(5), 110)]), t(5))
                .unwrap();
            assert_eq!(f.counters().resets_inferred, 1);
            assert_eq!(f.state(f.find("ESZ6").unwrap()), Some(State::Closed));
            let reset = encode::channel_reset(V, t(2), EOE, 310);
            f.on_incremental(&encode::packet(2, t(2), &[reset]), t(6))
                .unwrap();
            assert_eq!(f.counters().channel_resets, 1);
            let want = match missing_between || !reopened {
                true => State::Closed,
                false => State::Trading,
            };
            assert_eq!(
                f.state(f.find("ESZ6").unwrap()),
                Some(want),
                "missing between: {missing_between}, reopened: {reopened}"
            );
        }
    }

    /// The statuses after a ChannelReset inferred: a halt sent after the
    /// reset stays (its place unknown, every status is kept), while a
    /// trading status from before the entry that showed it no longer
    /// counts, so that a definition's status counts again as after any
    /// reset; and a snapshot's status of an older sequence does not
    /// outrank the new sequence's halt when the first packet empties it.
    #[test]
    fn statuses_after_a_channel_reset_inferred() {
        let mut f = feed();
        // #1 defined pre-open (21), then trading by a SecurityStatus.
        let d = pre_open_es();
        let def = encode::definition(54, V, &d, 0, &[]);
        f.on_definitions(&encode::packet(1, T0, &[def])).unwrap();
        // #5 the same, its trading sent in the packet that shows the reset.
        let five = encode::Instrument {
            symbol: "ESH7",
            security_id: 5,
            ..d
        };
        let def = encode::definition(54, V, &five, 0, &[]);
        f.on_definitions(&encode::packet(2, T0, &[def])).unwrap();
        let one = encode::book(46, V, T0, EOE, &[bid(1, 1, 1, UpdateAction::New, 100)], 0);
        let p1 = encode::packet(1, T0, &[instrument_status(1, 17), one]);
        f.on_incremental(&p1, T0).unwrap();
        assert_eq!(f.state(f.find("ESZ6").unwrap()), Some(State::Trading));
        // Packet 2 (the reset) lost; packet 3: #2 halted, then #1's new
        // RptSeq 1.
        let t1 = T0 + MS;
        let three = encode::book(46, V, t1, EOE, &[bid(1, 1, 1, UpdateAction::New, 110)], 0);
        let p3 = encode::packet(
            3,
            t1,
            &[instrument_status(2, 2), instrument_status(5, 17), three],
        );
        f.on_incremental(&p3, t1).unwrap();
        assert_eq!(f.counters().resets_inferred, 1);
        assert_eq!(f.state(f.find("ESZ6").unwrap()), Some(State::Closed));
        assert_eq!(f.state(f.find("ESH7").unwrap()), Some(State::Trading));
        assert_eq!(f.state(f.find("#2").unwrap()), Some(State::Halted));

        // A snapshot of an older sequence, trading, before the first
        // packet; the first packet halts the instrument.
        let mut f = feed();
        let root = SnapshotRoot {
            last_msg_seq_num_processed: 50_000,
            tot_num_reports: 1,
            security_id: 1,
            rpt_seq: 7,
            transact_time: T0,
            trading_status: Some(17),
        };
        let snap = encode::packet(1, T0, &[encode::snapshot(52, V, &root, &[])]);
        f.on_snapshot(&snap, T0).unwrap();
        let one = encode::book(46, V, t1, EOE, &[bid(1, 8, 1, UpdateAction::New, 90)], 0);
        let p1 = encode::packet(1, t1, &[instrument_status(1, 2), one]);
        f.on_incremental(&p1, t1).unwrap();
        assert_eq!(f.counters().resets_inferred, 1);
        assert_eq!(f.state(f.find("#1").unwrap()), Some(State::Halted));
    }

    /// A ChannelReset late on both lines, not lost: its RptSeq going back
    /// in the next packet shows it first, with its packet still missing;
    /// when it arrives it is processed as a late ChannelReset (counted),
    /// not dropped as the copy of a packet given up. Neither empties the
    /// statuses the new sequence sent in the packets after the reset: #3's
    /// halt, which its new history from RptSeq 1 would otherwise read
    /// `ok` without. And the entries after the late reset in its packet
    /// start no history: #2's RptSeq 2 (510), in a packet taken first, was
    /// forgotten, and its RptSeq 1 (500) would read `ok` where the venue
    /// had 510.
    #[test]
    fn a_channel_reset_inferred_while_late_is_processed_when_it_comes() {
        let mut f = feed();
        send(&mut f, 1, T0, &[bid(1, 1, 1, UpdateAction::New, 100)]);
        // Packet 2 (the reset; #2's new RptSeq 1) late on both lines.
        let t1 = T0 + MS;
        let entries = [
            bid(1, 1, 1, UpdateAction::New, 110),
            bid(2, 2, 1, UpdateAction::Change, 510),
        ];
        let three = encode::book(46, V, t1, EOE, &entries, 0);
        let p3 = encode::packet(3, t1, &[instrument_status(3, 2), three]);
        f.on_incremental(&p3, t1).unwrap();
        assert_eq!(f.counters().resets_inferred, 1);
        assert_eq!(top(&f, "#1"), (Some(110), None));
        send(&mut f, 4, t1, &[bid(3, 1, 1, UpdateAction::New, 300)]);
        assert_eq!(f.state(f.find("#3").unwrap()), Some(State::Halted));
        let reset = encode::channel_reset(V, t1, 0, 1);
        let after = encode::book(46, V, t1, EOE, &[bid(2, 1, 1, UpdateAction::New, 500)], 0);
        let late = encode::packet(2, t1, &[reset, after]);
        f.on_incremental(&late, t1 + 1).unwrap();
        let c = f.counters();
        assert_eq!((c.channel_resets, c.resets_inferred), (1, 1));
        assert_eq!(f.sequence().counters().packets_lost, 0);
        assert_eq!(
            top(&f, "#2"),
            (None, None),
            "no history from the late packet"
        );
        assert_ne!(f.verdict("#2", TH, t1 + 1), Reasons::empty());
        assert_eq!(f.state(f.find("#3").unwrap()), Some(State::Halted));
        assert_eq!(f.find("#1").unwrap().instrument.seq.rpt_seq(), None);

        // A late ChannelReset with nothing inferred before it: the same.
        let mut f = feed();
        send(&mut f, 1, T0, &[bid(1, 1, 1, UpdateAction::New, 100)]);
        send(&mut f, 3, t1, &[bid(2, 2, 1, UpdateAction::Change, 510)]);
        assert_eq!(f.counters().resets_inferred, 0);
        let reset = encode::channel_reset(V, t1, 0, 1);
        let after = encode::book(46, V, t1, EOE, &[bid(2, 1, 1, UpdateAction::New, 500)], 0);
        f.on_incremental(&encode::packet(2, t1, &[reset, after]), t1 + 1)
            .unwrap();
        assert_eq!(f.counters().channel_resets, 1);
        assert_eq!(
            top(&f, "#2"),
            (None, None),
            "no history from the late packet"
        );
        // Nor from a later packet filling a gap below the newest then.
        let mut f = feed();
        send(&mut f, 1, T0, &[bid(1, 1, 1, UpdateAction::New, 100)]);
        send(&mut f, 4, t1, &[bid(2, 2, 1, UpdateAction::Change, 510)]);
        let reset = encode::channel_reset(V, t1, EOE, 1);
        f.on_incremental(&encode::packet(2, t1, &[reset]), t1)
            .unwrap();
        send(&mut f, 3, t1, &[bid(2, 1, 1, UpdateAction::New, 500)]);
        assert_eq!(f.sequence().counters().recovered, 2);
        assert_eq!(top(&f, "#2"), (None, None), "no history from a later fill");
    }

    /// A snapshot taken before the newest packet processed when a late
    /// ChannelReset comes is ignored: the reset forgot what those packets
    /// applied, so by RptSeq alone it would apply to an instrument with
    /// no baseline and leave it healthy at a book the venue had left (#7
    /// at 100 where packet 4 moved it to 105). One taken after that
    /// packet applies.
    #[test]
    fn a_snapshot_older_than_the_packets_a_late_reset_forgot_is_ignored() {
        let mut f = feed();
        send(&mut f, 1, T0, &[bid(1, 1, 1, UpdateAction::New, 100)]);
        // Packet 2 (the ChannelReset) late on line B.
        let (t1, t2, t3) = (T0 + MS, T0 + 2 * MS, T0 + 3 * MS);
        send(
            &mut f,
            3,
            t2,
            &[bid(7, 1, 1, UpdateAction::New, 100), offer(7, 2, 110)],
        );
        send(&mut f, 4, t3, &[bid(7, 3, 1, UpdateAction::Change, 105)]);
        assert_eq!(top(&f, "#7"), (Some(105), Some(110)));
        let reset = encode::channel_reset(V, t1, EOE, 1);
        f.on_incremental(&encode::packet(2, t1, &[reset]), t3)
            .unwrap();
        assert_eq!(f.counters().channel_resets, 1);
        // Taken after packet 3: older than packet 4.
        f.on_snapshot(&snapshot_of(7, 2, 3, t2, 100), t3).unwrap();
        assert_eq!(f.counters().snapshots_applied, 0);
        assert_ne!(f.verdict("#7", TH, t3), Reasons::empty());
        // Taken after packet 4: applied.
        f.on_snapshot(&snapshot_of(7, 3, 4, t3, 105), t3).unwrap();
        assert_eq!(f.counters().snapshots_applied, 1);
        assert_eq!(top(&f, "#7"), (Some(105), None));
        assert_eq!(f.verdict("#7", TH, t3), Reasons::empty());
    }

    /// A snapshot taken at or past the packet a ChannelReset was inferred
    /// in is of the books after it, though its instrument's last event is
    /// the entry that revealed the reset (TransactTime equal to the
    /// screen's): it is not screened, and its status is taken. Screened,
    /// #1 kept no status where the venue had closed it.
    #[test]
    fn a_snapshot_taken_after_an_inferred_reset_is_not_screened() {
        let mut f = feed();
        send(
            &mut f,
            1,
            T0,
            &[bid(1, 1, 1, UpdateAction::New, 100), offer(1, 2, 120)],
        );
        // Packet 2 (the ChannelReset) lost on both lines; packet 3: #1's
        // new RptSeq 1 shows it.
        let t1 = T0 + MS;
        send(&mut f, 3, t1, &[bid(1, 1, 1, UpdateAction::New, 110)]);
        assert_eq!(f.counters().resets_inferred, 1);
        let snap = snapshot_saying(1, 1, 3, t1, 110, Some(4));
        f.on_snapshot(&snap, t1).unwrap();
        assert_eq!(f.counters().anomalies, 1, "the inferred reset only");
        assert_eq!(f.state(f.find("#1").unwrap()), Some(State::Closed));
        // One taken before packet 3 (halted, it says): still screened.
        let snap = snapshot_saying(1, 1, 2, t1, 110, Some(2));
        f.on_snapshot(&snap, t1).unwrap();
        assert_eq!(f.counters().anomalies, 2, "screened");
        assert_eq!(f.state(f.find("#1").unwrap()), Some(State::Closed));
    }

    /// A packet filling a gap below the packet a ChannelReset was inferred
    /// in, with no ChannelReset in it, may be from before the reset (which
    /// then lies in another packet missing): its entries are not applied.
    /// #3's first RptSeq of the old sequence would otherwise start its
    /// history on the emptied books, and its new RptSeq 2 apply in order
    /// after it: `ok` at 300/310, where the venue had 290/310.
    #[test]
    fn entries_of_a_packet_from_before_a_reset_inferred_are_not_applied() {
        let mut f = feed();
        send(&mut f, 1, T0, &[bid(1, 1, 1, UpdateAction::New, 100)]);
        // Packet 2 (#3's old RptSeq 1, a bid at 300) late on line B;
        // packet 3 (the ChannelReset, #3's new RptSeq 1, a bid at 290)
        // lost on both lines.
        let t1 = T0 + MS;
        send(&mut f, 4, t1, &[bid(1, 1, 1, UpdateAction::New, 110)]);
        assert_eq!(f.counters().resets_inferred, 1);
        let anomalies = f.counters().anomalies;
        f.on_incremental(&book_at(2, T0, &[bid(3, 1, 1, UpdateAction::New, 300)]), t1)
            .unwrap();
        assert_eq!(f.counters().anomalies, anomalies + 1);
        assert_eq!(f.sequence().counters().recovered, 1);
        send(&mut f, 5, t1, &[offer(3, 2, 310)]);
        assert_eq!(top(&f, "#3"), (None, None));
        assert_ne!(f.verdict("#3", TH, t1), Reasons::empty());
        assert_eq!(f.counters().resets_inferred, 1);
    }

    /// A snapshot taken after packets the lines have not brought yet sets
    /// RptSeq past their entries: those are duplicates, not a reset. An
    /// entry whose RptSeq goes back in a packet filling a gap is not one
    /// either (an instrument's later values came first).
    #[test]
    fn rpt_seq_behind_a_snapshot_or_in_a_fill_is_no_reset() {
        let mut f = feed();
        send(&mut f, 1, T0, &[bid(1, 1, 1, UpdateAction::New, 100)]);
        // Packet 2 missing: #1's RptSeq 3 waits for 2.
        send(&mut f, 3, T0, &[bid(1, 3, 1, UpdateAction::Change, 103)]);
        // Taken after packet 5: #1 at RptSeq 5.
        f.on_snapshot(&snapshot_of(1, 5, 5, T0, 105), T0).unwrap();
        assert_eq!(f.counters().snapshots_applied, 1);
        send(&mut f, 2, T0, &[bid(1, 2, 1, UpdateAction::Change, 102)]);
        send(&mut f, 4, T0, &[bid(1, 4, 1, UpdateAction::Change, 104)]);
        send(&mut f, 5, T0, &[bid(1, 5, 1, UpdateAction::Change, 105)]);
        send(&mut f, 6, T0, &[bid(1, 6, 1, UpdateAction::Change, 106)]);
        assert_eq!(f.counters().resets_inferred, 0);
        assert_eq!(top(&f, "#1"), (Some(106), None));
        assert_eq!(f.verdict("#1", TH, T0), Reasons::empty());
        // Past what the snapshot reached, RptSeq going back is a reset.
        send(&mut f, 7, T0, &[bid(1, 6, 1, UpdateAction::Change, 99)]);
        assert_eq!(f.counters().resets_inferred, 1);
    }

    /// Snapshots applied before the first packet of the lines, taken
    /// `restart_margin` or more past it, are of a sequence before a
    /// restart: the books they set are emptied and the new sequence's
    /// values are not read as duplicates of theirs. Taken less far past it
    /// (the lines lagging), they stand.
    #[test]
    fn snapshots_of_a_sequence_before_the_first_packet_are_dropped() {
        let margin = settings().sequencing.restart_margin;
        for (first, inferred) in [(1, true), (50_000 - margin, true), (50_001 - margin, false)] {
            let mut f = feed();
            f.on_snapshot(&snapshot_of(1, 7, 50_000, T0, 100), T0)
                .unwrap();
            assert_eq!(top(&f, "#1"), (Some(100), None));
            // The new sequence's RptSeq 7 and 8.
            let t1 = T0 + MS;
            f.on_incremental(
                &book_at(
                    first,
                    t1,
                    &[
                        bid(1, 7, 1, UpdateAction::New, 90),
                        bid(1, 8, 1, UpdateAction::Change, 91),
                    ],
                ),
                t1,
            )
            .unwrap();
            let c = f.counters();
            assert_eq!(
                c.resets_inferred,
                u64::from(inferred),
                "first packet {first}"
            );
            if inferred {
                assert_eq!(top(&f, "#1"), (None, None), "first packet {first}");
                assert_ne!(f.verdict("#1", TH, t1), Reasons::empty());
                // Its snapshot again: screened.
                f.on_snapshot(&snapshot_of(1, 7, 50_000, T0, 100), t1)
                    .unwrap();
                assert_eq!(top(&f, "#1"), (None, None));
            } else {
                assert_eq!(top(&f, "#1"), (Some(91), None), "first packet {first}");
            }
        }
    }

    /// A snapshot taken past the lines' first packet, by less than
    /// `restart_margin`, vouches for nothing after it: a loop of the
    /// sequence before a restart the lines follow unseen (its RptSeq 300
    /// makes the new sequence's 1 a duplicate: the old book answered
    /// `ok`) or the lines behind the loop (its RptSeq 7 comes again as a
    /// duplicate). Unverified until its next entry in order.
    #[test]
    fn a_snapshot_taken_past_the_first_packet_leaves_its_instrument_unverified() {
        let mut f = feed();
        f.on_snapshot(&snapshot_of(1, 300, 5_000, T0, 100), T0)
            .unwrap();
        let t1 = T0 + MS;
        let new = bid(1, 1, 1, UpdateAction::New, 200);
        f.on_incremental(&book_at(3, t1, &[new]), t1).unwrap();
        assert_eq!(f.counters().resets_inferred, 0);
        assert!(f.verdict("#1", TH, t1).contains(Reasons::SUSPECT));
        // The new loop's snapshot is older by RptSeq: not applied.
        f.on_snapshot(&snapshot_of(1, 5, 4, t1, 200), t1).unwrap();
        assert!(f.verdict("#1", TH, t1).contains(Reasons::SUSPECT));

        let mut f = feed();
        f.on_snapshot(&snapshot_of(1, 7, 100, T0, 100), T0).unwrap();
        let again = bid(1, 7, 1, UpdateAction::Change, 100);
        f.on_incremental(&book_at(100, t1, &[again]), t1).unwrap();
        assert!(f.verdict("#1", TH, t1).contains(Reasons::SUSPECT));
        let next = bid(1, 8, 1, UpdateAction::Change, 101);
        f.on_incremental(&book_at(101, t1, &[next]), t1).unwrap();
        assert_eq!(f.verdict("#1", TH, t1), Reasons::empty());
        assert_eq!(top(&f, "#1"), (Some(101), None));

        // Taken just before the first packet: it continues it.
        let mut f = feed();
        f.on_snapshot(&snapshot_of(1, 7, 99, T0, 100), T0).unwrap();
        f.on_incremental(&book_at(100, t1, &[next]), t1).unwrap();
        assert_eq!(f.verdict("#1", TH, t1), Reasons::empty());
    }

    /// A ChannelReset in the packet of the last MsgSeqNum, 2^32 − 1: line
    /// B's copy is a duplicate, not a second reset, and a copy after the
    /// restart is of the old sequence (no gap, the new books kept).
    #[test]
    fn a_channel_reset_at_the_last_msg_seq_num_is_applied_once() {
        let last = u32::MAX;
        let mut f = feed();
        f.on_incremental(
            &book(last - 1, true, &[bid(1, 1, 1, UpdateAction::New, 10)]),
            T0,
        )
        .unwrap();
        let reset = encode::packet(last, T0, &[encode::channel_reset(V, T0, EOE, 1)]);
        f.on_incremental(&reset, T0).unwrap();
        f.on_incremental(&reset, T0).unwrap();
        assert_eq!(f.counters().channel_resets, 1);
        assert_eq!(f.sequence().counters().duplicates, 1);
        f.on_incremental(
            &book(1, true, &[bid(1, 1, 1, UpdateAction::New, 12)]),
            T0 + 1,
        )
        .unwrap();
        f.on_incremental(&reset, T0 + 2).unwrap();
        let c = f.sequence().counters();
        assert_eq!(
            (c.stale_sequence, c.packet_gaps, c.sequence_restarts),
            (1, 0, 1)
        );
        assert_eq!(f.counters().channel_resets, 1);
        assert_eq!(top(&f, "#1"), (Some(12), None));
    }

    /// Gaps given up because too many are open turn every instrument
    /// unverified, as a gap given up at its deadline does (spec mdp3
    /// §3.1: "every instrument becomes `unverified`").
    #[test]
    fn a_gap_given_up_for_room_unverifies_every_instrument() {
        let mut f = feed();
        f.on_incremental(&book(1, true, &[bid(1, 1, 1, UpdateAction::New, 10)]), T0)
            .unwrap();
        let heartbeat = |s: u32| encode::packet(s, T0, &[encode::heartbeat(V)]);
        let most = sequence::MAX_GAPS as u32;
        for k in 0..most {
            f.on_incremental(&heartbeat(3 + 2 * k), T0).unwrap();
        }
        assert_eq!(f.sequence().gaps_open(), sequence::MAX_GAPS);
        assert!(!f.find("#1").unwrap().instrument.seq.unverified());
        f.on_incremental(&heartbeat(3 + 2 * most), T0).unwrap();
        assert_eq!(f.sequence().counters().packets_lost, 1);
        assert!(f.find("#1").unwrap().instrument.seq.unverified());
        assert_eq!(f.verdict("#1", TH, T0), Reasons::SUSPECT);
    }

    /// The sequence restarts at 1 after a ChannelReset, and positions
    /// with it: the old sequence's last end of event covers no change of
    /// the new one, and a status sent after the reset in its packet yields
    /// to the new sequence's (spec mdp3 §3.4, §3.6, §9.1).
    #[test]
    fn positions_restart_with_the_sequence() {
        let mut f = feed();
        define(&mut f, 7, "ESZ6", 10);
        let group = |code, mei| {
            let s = encode::Status {
                transact_time: T0,
                security_group: "ES",
                asset: "",
                security_id: None,
                match_event_indicator: mei,
                trading_status: Some(code),
            };
            encode::security_status(V, &s)
        };
        f.on_incremental(
            &book(50_000, true, &[bid(1, 1, 1, UpdateAction::New, 10)]),
            T0,
        )
        .unwrap();
        // After the reset in its packet: a status, and instrument 8's
        // RptSeq 1 and 3 (cached), their event's end to come.
        let reset = encode::channel_reset(V, T0, EOE, 1);
        let pre_open = group(21, 0);
        let after = encode::book(
            46,
            V,
            T0,
            0,
            &[bid(8, 1, 1, UpdateAction::New, 90), offer(8, 3, 95)],
            0,
        );
        f.on_incremental(&encode::packet(50_001, T0, &[reset, pre_open, after]), T0)
            .unwrap();
        // The first part of an event; its end comes in MsgSeqNum 2.
        f.on_incremental(
            &book(1, false, &[bid(7, 1, 1, UpdateAction::New, 100)]),
            T0 + 1,
        )
        .unwrap();
        assert_eq!(f.sequence().counters().sequence_restarts, 1);
        // A snapshot of #8 at RptSeq 2 (taken after packet 1) closes its
        // hole: published at once, its cached RptSeq 3 applied behind it,
        // which no end of the new sequence covers yet.
        let root = SnapshotRoot {
            last_msg_seq_num_processed: 1,
            tot_num_reports: 1,
            security_id: 8,
            rpt_seq: 2,
            transact_time: T0 + 1,
            trading_status: None,
        };
        let level = SnapshotEntry {
            price: Some(91),
            size: Some(5),
            orders: Some(1),
            level: Some(1),
            entry_type: EntryType::Bid,
        };
        let snap = encode::packet(1, T0, &[encode::snapshot(52, V, &root, &[level])]);
        f.on_snapshot(&snap, T0 + 2).unwrap();
        assert_eq!(f.counters().snapshots_applied, 1);
        assert_eq!(top(&f, "ESZ6"), (None, None), "half an event");
        assert_eq!(top(&f, "#8"), (Some(91), None), "half an event");
        f.on_incremental(&encode::packet(2, T0, &[group(17, EOE)]), T0 + 3)
            .unwrap();
        assert_eq!(top(&f, "ESZ6"), (Some(100), None));
        assert_eq!(top(&f, "#8"), (Some(91), Some(95)));
        assert_eq!(f.verdict("ESZ6", TH, T0 + 3), Reasons::empty());
    }

    /// A packet sent "64 h ahead" (a heartbeat: SendingTime, no
    /// TransactTime) pulls the auto offset down while in the window; once
    /// it has left, a heartbeat's part of the watermark follows the
    /// offset back, so a channel whose TransactTimes lag past the source
    /// threshold reads `stale_at_source` again (taken at the offset of its
    /// arrival, the heartbeat's part stayed 64 h ahead and hid the delay).
    #[test]
    fn a_packet_sent_hours_ahead_leaves_nothing_once_out_of_the_window() {
        let mut f = Feed::new(Settings {
            offset: OffsetMode::Auto {
                window_ns: 5_000 * MS,
            },
            ..super::super::testing::settings()
        });
        let hb = |s: u32, sent: u64| encode::packet(s, sent, &[encode::heartbeat(V)]);
        f.on_incremental(&book(1, true, &[bid(1, 1, 1, UpdateAction::New, 10)]), T0)
            .unwrap();
        let ahead = 64 * 3_600_000 * MS;
        f.on_incremental(&hb(2, T0 + ahead), T0 + 1_000 * MS)
            .unwrap();
        assert_eq!(f.offset(), -((ahead - 1_000 * MS) as i128));
        f.on_incremental(&hb(3, T0 + 2_000 * MS), T0 + 2_000 * MS)
            .unwrap();
        // Out of the window: the channel sends and trades 3 s behind.
        let late = T0 + 8_000 * MS;
        let behind = T0 + 5_000 * MS;
        let entry = bid(1, 2, 1, UpdateAction::Change, 11);
        let p = encode::packet(4, behind, &[encode::book(46, V, behind, EOE, &[entry], 0)]);
        f.on_incremental(&p, late).unwrap();
        assert_eq!(f.offset(), (3_000 * MS) as i128);
        assert_eq!(f.source_watermark(), Some(behind as i128));
        let th = Thresholds {
            stale_ns: 60_000 * MS,
            source_ns: 2_000 * MS,
        };
        assert!(!f.verdict("#1", th, late).contains(Reasons::STALE_AT_SOURCE));
        assert!(f
            .verdict("#1", th, late + 2_000 * MS + 1)
            .contains(Reasons::STALE_AT_SOURCE));
    }

    /// The clock stepped back: the offset's window is anchored at the new
    /// time, and a sample from before the step leaves it a window later
    /// (anchored an hour ahead, it stayed for the hour).
    #[test]
    fn a_clock_stepped_back_anchors_the_offset_window_again() {
        let mut f = Feed::new(Settings {
            offset: OffsetMode::Auto {
                window_ns: 1_000 * MS,
            },
            ..super::super::testing::settings()
        });
        let hb = |s: u32, sent: u64| encode::packet(s, sent, &[encode::heartbeat(V)]);
        let hour = 3_600_000 * MS;
        f.on_incremental(&hb(1, T0 + hour - 1_000), T0 + hour)
            .unwrap();
        f.on_clock_stepped_back(T0);
        f.on_incremental(&hb(2, T0 - 5_000), T0).unwrap();
        assert_eq!(f.offset(), 1_000);
        let t = T0 + 1_500 * MS;
        f.on_incremental(&hb(3, t - 6_000), t).unwrap();
        assert_eq!(f.offset(), 6_000);
    }

    /// A heartbeat stamped at the largest SendingTime pulls the auto
    /// offset down by nearly 2^64 ns, so the heartbeat part of the
    /// watermark after it (an arrival less that offset) lies past the
    /// publication's word: read as published (the largest time), in
    /// process as by a reader, so a replay answers as the live readers do
    /// (`stale_at_source` once the source age, now − that − offset, passes
    /// the threshold).
    #[test]
    fn the_watermark_past_the_largest_time_reads_as_published() {
        let mut f = Feed::new(Settings {
            offset: OffsetMode::Auto {
                window_ns: 60_000 * MS,
            },
            ..super::super::testing::settings()
        });
        let hb = |s: u32, sent: u64| encode::packet(s, sent, &[encode::heartbeat(V)]);
        f.on_incremental(&book(1, true, &[bid(1, 1, 1, UpdateAction::New, 10)]), T0)
            .unwrap();
        f.on_incremental(&hb(2, u64::MAX), T0 + 1_000 * MS).unwrap();
        f.on_incremental(&hb(3, T0 + 5_000 * MS), T0 + 5_000 * MS)
            .unwrap();
        assert_eq!(f.source_watermark(), Some(i128::from(u64::MAX)));
        let th = Thresholds {
            stale_ns: 60_000 * MS,
            source_ns: 2_000 * MS,
        };
        let now = T0 + 5_001 * MS;
        let published = tickguard_reader::status::FeedStatus {
            last_alive: f.last_alive().unwrap(),
            source_watermark: u64::MAX,
            ..Default::default()
        };
        // The slot's part: quoted, no time of its own.
        let facts = tickguard_reader::slot::Facts {
            feed: 0,
            key: 1,
            quoted: true,
            halted: false,
            closed: false,
            names_left: 0,
            suspect: false,
            invalid: false,
            source_time: None,
            last_alive: 0,
            thresholds: th,
            version: 0,
        };
        let read = tickguard_reader::status::verdict(&facts, &published, f.offset(), now);
        assert_eq!(read, Reasons::STALE_AT_SOURCE);
        assert_eq!(f.verdict("#1", th, now), read);
    }

    /// Silence past the threshold is stale; a rejected datagram is
    /// counted by the caller and changes nothing.
    #[test]
    fn staleness_and_rejections() {
        let mut f = feed();
        f.on_incremental(&book(1, true, &[bid(1, 1, 1, UpdateAction::New, 10)]), T0)
            .unwrap();
        assert!(f
            .verdict("#1", TH, T0 + 30_001 * MS)
            .contains(Reasons::STALE));
        assert_eq!(f.on_incremental(&[0; 5], T0), Err(Reject::Short));
        assert_eq!(top(&f, "#1"), (Some(10), None));
        let hb = encode::packet(2, T0, &[encode::heartbeat(V)]);
        f.on_incremental(&hb, T0 + 30_000 * MS).unwrap();
        assert_eq!(f.counters().heartbeats, 1);
        assert!(!f
            .verdict("#1", TH, T0 + 30_001 * MS)
            .contains(Reasons::STALE));
    }

    /// A heartbeat left ahead of the clock by a step back is forgotten at
    /// the next packet processed: its part of the source watermark would
    /// hide the source delay of the events since for as long as the step.
    #[test]
    fn a_heartbeat_ahead_of_a_clock_stepped_back_is_forgotten() {
        let mut f = feed();
        f.on_incremental(&book(1, true, &[bid(1, 1, 1, UpdateAction::New, 10)]), T0)
            .unwrap();
        let hb = encode::packet(2, T0, &[encode::heartbeat(V)]);
        f.on_incremental(&hb, T0 + 60_000 * MS).unwrap();
        let change = bid(1, 2, 1, UpdateAction::Change, 11);
        f.on_incremental(&book(3, true, &[change]), T0 + 1_000 * MS)
            .unwrap();
        // The events' time, T0, is 31 s old: past the threshold.
        assert!(f
            .verdict("#1", TH, T0 + 31_000 * MS)
            .contains(Reasons::STALE_AT_SOURCE));
    }

    /// A definition repeated keeps its Symbol's mapping; a new Symbol
    /// moves it; `D` drops it (the instrument stays, by `#SecurityID`); a
    /// Symbol another instrument took since stays that instrument's.
    #[test]
    fn definitions_map_symbols_and_a_repeat_changes_nothing() {
        let id = |f: &Feed, name: &str| f.find(name).map(|e| e.security_id);
        let mut f = feed();
        define(&mut f, 7, "ESZ6", 10);
        define(&mut f, 7, "ESZ6", 10);
        assert_eq!((id(&f, "ESZ6"), f.counters().definitions), (Some(7), 2));
        define(&mut f, 7, "ESH7", 5);
        assert_eq!((id(&f, "ESZ6"), id(&f, "ESH7")), (None, Some(7)));
        let e = f.find("#7").unwrap();
        assert_eq!(e.definition.as_ref().map(|d| d.depth), Some(Some(5)));
        define_as(&mut f, 7, "ESH7", 5, b'D');
        assert_eq!((id(&f, "ESH7"), id(&f, "#7")), (None, Some(7)));
        define(&mut f, 7, "ESH7", 5);
        // Instrument 8 takes ESH7; 7 renamed leaves it to 8.
        define(&mut f, 8, "ESH7", 5);
        assert_eq!(id(&f, "ESH7"), Some(8));
        define(&mut f, 7, "ESM7", 5);
        assert_eq!((id(&f, "ESH7"), id(&f, "ESM7")), (Some(8), Some(7)));
        // A Symbol holding a byte outside printable ASCII is none (an
        // anomaly): the instrument is found by `#SecurityID` only.
        let anomalies = f.counters().anomalies;
        let mut raw = bare_definition(9, "ESU7", "ES");
        raw[10 + super::super::template::definition::SYMBOL] = 0xff;
        f.on_definitions(&encode::packet(1, T0, &[raw])).unwrap();
        assert_eq!((id(&f, "\u{fffd}SU7"), id(&f, "#9")), (None, Some(9)));
        assert_eq!(f.counters().anomalies, anomalies + 1);
    }
}
