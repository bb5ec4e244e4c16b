//! A seeded synthetic CME MDP 3.0 channel: the venue side of one channel,
//! for the fixture generator (`tools/gen_mdp3.rs`), tests, and a live
//! simulator. The same seed and the same calls always give the same bytes.
//!
//! [`Channel`] keeps what the exchange knows: each instrument's *true*
//! books (the outright book to its MarketDepth, with a few resting levels
//! below it that refill the book when a level goes, and the implied book
//! to its implied depth), its RptSeq, its statistics, and the trading
//! statuses of instruments and security groups. Each call is handed the
//! time (ns since the Unix epoch, the Globex event's TransactTime) and
//! returns the datagrams a gateway would send for it:
//!
//! - [`Channel::next_event`] (or [`Channel::event`] for a chosen
//!   instrument and [`Activity`]): one Globex event on the incremental
//!   feed. Book updates use every MDUpdateAction the way CME does — a new
//!   price level is a New at its level, a level whose quantity moved a
//!   Change, a level re-priced in place an Overlay, a level gone a Delete
//!   followed by a New at the bottom level for the resting level that
//!   moves into view, an aggressive order that takes several levels a
//!   DeleteFrom, one that takes the whole side a DeleteThru — on bid and
//!   offer (`0`, `1`) and implied bid and offer (`E`, `F`). Trades come as
//!   TradeSummary 48 entries first, then Volume 37, SessionStatistics 51
//!   (open, high, low) and the book; rarely DailyStatistics 49 or
//!   LimitsBanding 50. Every entry takes its instrument's next RptSeq.
//!   A trade in a calendar spread also prints its legs (trades without a
//!   book change in the outrights). An event's messages are packed into
//!   packets of at most [`Channel::max_packet`] bytes, so a large event
//!   spans packets; only its last message carries EndOfEvent (0x80), and
//!   each message carries the "last trade/volume/quote/statistics/implied"
//!   bit of the kinds it is the last of.
//! - [`Channel::status`]: SecurityStatus 30 for one instrument or a whole
//!   security group (pre-open 21, ready to trade 17, halt 2, close 4, …).
//!   Pre-open takes orders without matching them (and [`Channel::cross`]
//!   lets a bid rest above the best offer, as a pre-open book may); the
//!   status that opens an instrument uncrosses its book with trades.
//!   Halted and closed instruments have no activity.
//! - [`Channel::idle`]: AdminHeartbeat 12 packets when nothing was sent for
//!   [`Channel::heartbeat_ns`].
//! - [`Channel::channel_reset`]: a ChannelReset 4; every book, statistic
//!   and status is emptied and RptSeq starts again at 1 (and, with
//!   [`Channel::restart_seq_on_reset`], MsgSeqNum too).
//! - [`Channel::snapshot_loop`]: the market recovery loop — one
//!   SnapshotFullRefresh 52 per instrument with book activity since the
//!   week (or the last reset) began, each its own packet, MsgSeqNum from
//!   1, with TotNumReports, LastMsgSeqNumProcessed (the last incremental
//!   packet sent), the instrument's RptSeq and whole books.
//! - [`Channel::definition_loop`]: one definition per instrument (54
//!   Future, 56 Spread), MsgSeqNum from 1, with MarketDepth for `GBX`
//!   and `GBI`, SecurityGroup, Asset, MinPriceIncrement and DisplayFactor.
//!
//! Incremental packets take MsgSeqNum +1 each; SendingTime is a few µs
//! after the event's time and never goes back. [`Channel::book`] and
//! [`Channel::rpt_seq`] tell what a receiver that saw everything must hold
//! once an event has ended.
//!
//! Tool code: it allocates freely, but no input makes it panic (an
//! unknown instrument, an empty channel and odd specs give no datagram or
//! are clamped).

use super::book::Level;
use super::encode::{self, BookEntry, FeedType, Shape, SnapshotEntry, SnapshotRoot};
use super::template::{EntryType, UpdateAction};

/// One second, ns.
pub const SECOND: u64 = 1_000_000_000;
/// One millisecond, ns.
pub const MS: u64 = 1_000_000;
/// One microsecond, ns.
pub const US: u64 = 1_000;

/// MatchEventIndicator bits.
pub mod mei {
    /// Last trade message of the event.
    pub const LAST_TRADE: u8 = 0x01;
    /// Last volume message.
    pub const LAST_VOLUME: u8 = 0x02;
    /// Last (outright) quote message.
    pub const LAST_QUOTE: u8 = 0x04;
    /// Last statistics message.
    pub const LAST_STATS: u8 = 0x08;
    /// Last implied quote message.
    pub const LAST_IMPLIED: u8 = 0x10;
    /// Last message of the event.
    pub const END_OF_EVENT: u8 = 0x80;
}

/// SecurityTradingStatus codes the channel sends.
pub mod status {
    /// 2 TradingHalt.
    pub const HALT: u8 = 2;
    /// 4 Close.
    pub const CLOSE: u8 = 4;
    /// 17 ReadyToTrade (open).
    pub const OPEN: u8 = 17;
    /// 21 PreOpen.
    pub const PRE_OPEN: u8 = 21;
}

/// Deepest MarketDepth a [`Spec`] keeps (deeper is clamped): a snapshot
/// of both books then stays under 255 entries.
pub const MAX_DEPTH: u8 = 60;

/// Resting levels an outright side keeps below its published depth.
const HIDDEN: usize = 5;
/// Most entries in one message.
const MAX_ENTRIES: usize = 20;
/// Largest quantity of a level.
const MAX_SIZE: u64 = 1_000_000;

/// splitmix64: small, seedable, good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`; 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        match n {
            0 => 0,
            n => self.next_u64() % n,
        }
    }

    /// True with probability `per_mille` / 1000.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// An index drawn by `weights` (`None` when they sum to 0).
    pub fn weighted(&mut self, weights: &[u64]) -> Option<usize> {
        let total = weights.iter().fold(0u64, |a, &w| a.saturating_add(w));
        if total == 0 {
            return None;
        }
        let mut x = self.below(total);
        for (i, &w) in weights.iter().enumerate() {
            if x < w {
                return Some(i);
            }
            x -= w;
        }
        None
    }
}

/// What an instrument is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Product {
    /// An outright future (definition 54).
    Future,
    /// A calendar spread, first leg bought, second sold (definition 56).
    Spread {
        /// SecurityIDs of the legs.
        legs: [i32; 2],
    },
}

/// One instrument of the channel, as its definition says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// SecurityID.
    pub security_id: i32,
    /// Symbol (up to 20 bytes on the wire).
    pub symbol: String,
    /// SecurityGroup (up to 6 bytes).
    pub group: String,
    /// Asset (up to 6 bytes).
    pub asset: String,
    /// Future or spread.
    pub product: Product,
    /// MarketDepth of the outright book (`GBX`), 1 to [`MAX_DEPTH`].
    pub depth: u8,
    /// MarketDepth of the implied book (`GBI`), 1 to [`MAX_DEPTH`].
    pub implied_depth: u8,
    /// MinPriceIncrement, a mantissa of exponent −9 (at least 1).
    pub tick: i64,
    /// DisplayFactor, a mantissa of exponent −9.
    pub display_factor: i64,
    /// A price to start from, mantissa of exponent −9 (may be negative).
    pub price: i64,
    /// Relative share of the channel's activity.
    pub weight: u64,
}

/// An equity-futures channel: ES December and March (MarketDepth 10),
/// NQ December (5), Russell 2000 December (3), and the ES calendar spread
/// December–March (10), each with a two-deep implied book.
pub fn equity_channel() -> Vec<Spec> {
    const E9: i64 = 1_000_000_000;
    let future = |id, symbol: &str, group: &str, depth, tick, price, weight| Spec {
        security_id: id,
        symbol: symbol.into(),
        group: group.into(),
        asset: group.into(),
        product: Product::Future,
        depth,
        implied_depth: 2,
        tick,
        display_factor: E9,
        price,
        weight,
    };
    vec![
        future(294_973, "ESZ6", "ES", 10, E9 / 4, 6_850 * E9, 40),
        future(118_061, "ESH7", "ES", 10, E9 / 4, 6_905 * E9 + E9 / 4, 12),
        future(206_323, "NQZ6", "NQ", 5, E9 / 4, 25_410 * E9 + E9 / 2, 24),
        future(
            309_877,
            "RTYZ6",
            "RTY",
            3,
            E9 / 10,
            2_484 * E9 + 3 * E9 / 10,
            12,
        ),
        Spec {
            security_id: 442_811,
            symbol: "ESZ6-ESH7".into(),
            group: "ES".into(),
            asset: "ES".into(),
            product: Product::Spread {
                legs: [294_973, 118_061],
            },
            depth: 10,
            implied_depth: 2,
            tick: E9 / 20,
            display_factor: E9,
            price: -55 * E9 - E9 / 4,
            weight: 12,
        },
    ]
}

/// What happens in one Globex event ([`Channel::event`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Resting orders come, change and go: one to three level updates.
    Quote,
    /// An order trades against the best level (part of it or all).
    Trade,
    /// An order takes two or three levels and part of the next.
    Sweep,
    /// An order takes the whole side (DeleteThru); what it has left rests
    /// on its side and new orders come back on the side it took.
    Clear,
    /// The implied book changes.
    Implied,
    /// Daily statistics (cleared volume, open interest) or price limits.
    Statistics,
}

/// Whom a SecurityStatus is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// One instrument, by SecurityID.
    Instrument(i32),
    /// Every instrument of a SecurityGroup (SecurityID null, Asset blank).
    Group(&'a str),
}

/// What an instrument may do under its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Orders rest and trade.
    Trading,
    /// Orders rest, nothing matches (pre-open, new price indication).
    PreOpen,
    /// Nothing happens (halted, paused, unknown).
    Halted,
    /// Nothing happens (closed, post-close).
    Closed,
}

/// The phase of SecurityTradingStatus `code` (`None`: no status sent,
/// trading; a code not listed: halted, the safe side).
pub fn phase(code: Option<u8>) -> Phase {
    match code {
        None | Some(17 | 24 | 25 | 201 | 202) => Phase::Trading,
        Some(15 | 21) => Phase::PreOpen,
        Some(4 | 26) => Phase::Closed,
        Some(_) => Phase::Halted,
    }
}

/// A datagram the channel sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// Its MsgSeqNum (per service).
    pub seq_num: u32,
    /// Its SendingTime, ns since the Unix epoch.
    pub sending_time: u64,
    /// The whole UDP payload.
    pub bytes: Vec<u8>,
}

/// An instrument's published books, level 1 first: what a receiver that
/// missed nothing holds once an event has ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrueBook {
    /// Outright bids (`0`), at most MarketDepth.
    pub bids: Vec<Level>,
    /// Outright offers (`1`).
    pub offers: Vec<Level>,
    /// Implied bids (`E`), at most the implied depth.
    pub implied_bids: Vec<Level>,
    /// Implied offers (`F`).
    pub implied_offers: Vec<Level>,
}

impl TrueBook {
    /// Best bid above best offer.
    pub fn crossed(&self) -> bool {
        matches!((self.bids.first(), self.offers.first()), (Some(b), Some(o)) if b.price > o.price)
    }
}

/// Sides, in the order of [`ENTRY_TYPES`].
const BID: usize = 0;
const OFFER: usize = 1;
const ENTRY_TYPES: [EntryType; 4] = [
    EntryType::Bid,
    EntryType::Offer,
    EntryType::ImpliedBid,
    EntryType::ImpliedOffer,
];

/// `a` is a better price than `b` on side `s` (bids: higher).
fn better(s: usize, a: i64, b: i64) -> bool {
    if s.is_multiple_of(2) {
        a > b
    } else {
        a < b
    }
}

/// `n` ticks worse than `p` on side `s` (bids: lower).
fn worse_by(s: usize, p: i64, n: i64, tick: i64) -> i64 {
    let d = n.saturating_mul(tick);
    if s.is_multiple_of(2) {
        p.saturating_sub(d)
    } else {
        p.saturating_add(d)
    }
}

/// One entry of an event, in the order it takes its RptSeq.
#[derive(Debug, Clone, Copy)]
enum Part {
    Book(BookEntry),
    Trade {
        id: i32,
        rpt: u32,
        price: i64,
        size: u64,
        orders: i32,
        aggressor: u8,
        trade_id: u32,
    },
    Volume {
        id: i32,
        rpt: u32,
        size: u64,
    },
    Session {
        id: i32,
        rpt: u32,
        price: i64,
        kind: u8,
    },
    Daily {
        id: i32,
        rpt: u32,
        price: Option<i64>,
        size: Option<u64>,
        kind: u8,
        date: u16,
    },
    Limits {
        id: i32,
        rpt: u32,
        high: i64,
        low: i64,
        variation: i64,
    },
}

impl Part {
    fn template(&self) -> u16 {
        match self {
            Part::Book(_) => 46,
            Part::Trade { .. } => 48,
            Part::Volume { .. } => 37,
            Part::Session { .. } => 51,
            Part::Daily { .. } => 49,
            Part::Limits { .. } => 50,
        }
    }

    /// The MatchEventIndicator bit of its kind.
    fn class(&self) -> u8 {
        match self {
            Part::Book(e) => match e.entry_type {
                EntryType::ImpliedBid | EntryType::ImpliedOffer => mei::LAST_IMPLIED,
                _ => mei::LAST_QUOTE,
            },
            Part::Trade { .. } => mei::LAST_TRADE,
            Part::Volume { .. } => mei::LAST_VOLUME,
            Part::Session { .. } | Part::Daily { .. } | Part::Limits { .. } => mei::LAST_STATS,
        }
    }

    fn key(&self) -> (i32, u32) {
        match *self {
            Part::Book(e) => (e.security_id, e.rpt_seq),
            Part::Trade { id, rpt, .. }
            | Part::Volume { id, rpt, .. }
            | Part::Session { id, rpt, .. }
            | Part::Daily { id, rpt, .. }
            | Part::Limits { id, rpt, .. } => (id, rpt),
        }
    }
}

/// The entries of one event being built.
#[derive(Debug, Default)]
struct Event {
    parts: Vec<Part>,
}

/// One instrument as the venue keeps it.
#[derive(Debug, Clone)]
struct Inst {
    spec: Spec,
    /// Bid, offer, implied bid, implied offer: best first; outright sides
    /// hold up to [`HIDDEN`] levels below the published depth.
    sides: [Vec<Level>; 4],
    /// Last RptSeq sent (0: none since the week or the reset began).
    rpt_seq: u32,
    /// Its own status: code and the order it was set in.
    status: Option<(u8, u64)>,
    /// Book activity since the week or the last reset (snapshot loop).
    active: bool,
    /// TransactTime of its last event.
    transact_time: u64,
    last: Option<i64>,
    open: Option<i64>,
    high: Option<i64>,
    low: Option<i64>,
    volume: u64,
}

impl Inst {
    fn new(spec: Spec) -> Inst {
        Inst {
            spec,
            sides: Default::default(),
            rpt_seq: 0,
            status: None,
            active: false,
            transact_time: 0,
            last: None,
            open: None,
            high: None,
            low: None,
            volume: 0,
        }
    }

    fn depth(&self, s: usize) -> usize {
        usize::from(if s < 2 {
            self.spec.depth
        } else {
            self.spec.implied_depth
        })
    }

    /// Levels side `s` may hold (published and resting below).
    fn room(&self, s: usize) -> usize {
        self.depth(s) + if s < 2 { HIDDEN } else { 0 }
    }

    fn side(&self, s: usize) -> &[Level] {
        self.sides.get(s).map_or(&[], Vec::as_slice)
    }

    fn top(&self, s: usize) -> Option<Level> {
        self.side(s).first().copied()
    }

    /// The published part of side `s`.
    fn published(&self, s: usize) -> Vec<Level> {
        let side = self.side(s);
        side[..side.len().min(self.depth(s))].to_vec()
    }

    /// A price to quote around: mid of the outright book, else a side, the
    /// last trade, or the spec's.
    fn reference(&self) -> i64 {
        match (self.top(BID), self.top(OFFER)) {
            (Some(b), Some(o)) => b.price / 2 + o.price / 2,
            (Some(l), None) | (None, Some(l)) => l.price,
            (None, None) => self.last.unwrap_or(self.spec.price),
        }
    }

    fn next_rpt(&mut self) -> u32 {
        self.rpt_seq = self.rpt_seq.wrapping_add(1).max(1);
        self.rpt_seq
    }

    /// A book entry for side `s` at 1-based `level`.
    fn emit(
        &mut self,
        ev: &mut Event,
        s: usize,
        action: UpdateAction,
        level: usize,
        l: Option<Level>,
    ) {
        let rpt_seq = self.next_rpt();
        let entry_type = ENTRY_TYPES.get(s).copied().unwrap_or(EntryType::Bid);
        ev.parts.push(Part::Book(BookEntry {
            price: l.map(|l| l.price),
            size: l.map(|l| l.size),
            security_id: self.spec.security_id,
            rpt_seq,
            orders: l.and_then(|l| l.orders),
            level: u8::try_from(level).unwrap_or(u8::MAX),
            action,
            entry_type,
        }));
        self.active = true;
    }

    /// A new price level; false if the price is there already.
    fn add(&mut self, ev: &mut Event, s: usize, l: Level) -> bool {
        let (depth, room) = (self.depth(s), self.room(s));
        let Some(side) = self.sides.get_mut(s) else {
            return false;
        };
        if side.iter().any(|x| x.price == l.price) {
            return false;
        }
        let i = side.partition_point(|x| better(s, x.price, l.price));
        side.insert(i, l);
        side.truncate(room);
        if i < depth {
            self.emit(ev, s, UpdateAction::New, i + 1, Some(l));
        }
        true
    }

    /// Level `i` (0-based) takes a new quantity and order count.
    fn change(&mut self, ev: &mut Event, s: usize, i: usize, size: u64, orders: i32) {
        let depth = self.depth(s);
        let Some(l) = self.sides.get_mut(s).and_then(|x| x.get_mut(i)) else {
            return;
        };
        l.size = size.clamp(1, MAX_SIZE);
        l.orders = Some(orders.clamp(1, i32::try_from(l.size).unwrap_or(i32::MAX)));
        let l = *l;
        if i < depth {
            self.emit(ev, s, UpdateAction::Change, i + 1, Some(l));
        }
    }

    /// Level `i` is re-priced in place (the caller keeps the order).
    fn overlay(&mut self, ev: &mut Event, s: usize, i: usize, l: Level) {
        let depth = self.depth(s);
        let Some(x) = self.sides.get_mut(s).and_then(|x| x.get_mut(i)) else {
            return;
        };
        *x = l;
        if i < depth {
            self.emit(ev, s, UpdateAction::Overlay, i + 1, Some(l));
        }
    }

    /// Level `i` goes; the resting level moving into view is sent as a New
    /// at the bottom level.
    fn delete(&mut self, ev: &mut Event, s: usize, i: usize) {
        let depth = self.depth(s);
        let Some(side) = self.sides.get_mut(s) else {
            return;
        };
        if i >= side.len() {
            return;
        }
        let gone = side.remove(i);
        let refill = side.get(depth.wrapping_sub(1)).copied();
        if i < depth {
            self.emit(ev, s, UpdateAction::Delete, i + 1, Some(gone));
            if let Some(l) = refill {
                self.emit(ev, s, UpdateAction::New, depth, Some(l));
            }
        }
    }

    /// Levels 1 to `n` go (a DeleteFrom); the resting levels moving into
    /// view are sent as New at the bottom levels.
    fn delete_from(&mut self, ev: &mut Event, s: usize, n: usize) {
        let depth = self.depth(s);
        let Some(side) = self.sides.get_mut(s) else {
            return;
        };
        let n = n.min(side.len()).min(depth);
        if n == 0 {
            return;
        }
        let last = side.get(n - 1).copied();
        side.drain(..n);
        let refill: Vec<(usize, Level)> = side
            .iter()
            .enumerate()
            .take(depth)
            .skip(depth - n)
            .map(|(j, l)| (j + 1, *l))
            .collect();
        self.emit(ev, s, UpdateAction::DeleteFrom, n, last);
        for (level, l) in refill {
            self.emit(ev, s, UpdateAction::New, level, Some(l));
        }
    }

    /// The whole side goes (a DeleteThru).
    fn delete_thru(&mut self, ev: &mut Event, s: usize) {
        let Some(side) = self.sides.get_mut(s) else {
            return;
        };
        if side.is_empty() {
            return;
        }
        side.clear();
        self.emit(ev, s, UpdateAction::DeleteThru, 1, None);
    }

    /// What an order for `qty` on side `s` would trade: (price, quantity,
    /// orders) per level, best first.
    fn fills(&self, s: usize, qty: u64) -> Vec<(i64, u64, i32)> {
        let mut left = qty;
        let mut out = Vec::new();
        for l in self.side(s) {
            if left == 0 {
                break;
            }
            let q = left.min(l.size);
            let orders = l.orders.unwrap_or(1).max(1);
            out.push((l.price, q, orders.min(i32::try_from(q).unwrap_or(i32::MAX))));
            left -= q;
        }
        out
    }

    /// Takes `qty` from side `s`, best first: the levels taken whole go (a
    /// Delete for one, a DeleteFrom for several, a DeleteThru for all), the
    /// next one left smaller (a Change).
    fn take(&mut self, ev: &mut Event, s: usize, qty: u64) {
        let side = self.side(s);
        let mut left = qty;
        let mut whole = 0;
        for l in side {
            if left < l.size {
                break;
            }
            left -= l.size;
            whole += 1;
        }
        if whole > 0 && whole == side.len() {
            self.delete_thru(ev, s);
            return;
        }
        let depth = self.depth(s);
        while whole > 0 {
            let n = whole.min(depth);
            if n == 1 {
                self.delete(ev, s, 0);
            } else {
                self.delete_from(ev, s, n);
            }
            whole -= n;
        }
        if left > 0 {
            if let Some(l) = self.top(s) {
                let orders = l.orders.unwrap_or(1);
                let gone = i32::from(left * 2 >= l.size);
                self.change(ev, s, 0, l.size.saturating_sub(left), orders - gone);
            }
        }
    }
}

/// A level's quantity and orders.
fn level_size(rng: &mut Rng) -> (u64, i32) {
    let size = 1 + rng.below(4) * (1 + rng.below(40)) + rng.below(8);
    let orders = 1 + rng.below(size.min(25)) as i32;
    (size, orders)
}

/// One CME channel as the exchange sends it (see the module).
#[derive(Debug, Clone)]
pub struct Channel {
    rng: Rng,
    insts: Vec<Inst>,
    /// Group statuses: SecurityGroup, code, order set in.
    groups: Vec<(String, u8, u64)>,
    /// How many statuses were set: each takes the next number, and the
    /// highest in force wins.
    order: u64,
    /// MsgSeqNum of the next incremental packet.
    seq: u32,
    /// MsgSeqNum of the last incremental packet sent (0: none).
    last_seq: u32,
    /// SendingTime of the last incremental packet.
    last_sent: u64,
    trade_id: u32,
    /// Schema version written in every message header (13 by default).
    pub version: u16,
    /// ApplID of the channel (its number, 310 by default).
    pub appl_id: i16,
    /// Most bytes of an incremental packet (1,420 by default); a larger
    /// event spans packets.
    pub max_packet: usize,
    /// Silence on the incremental feed after which [`Channel::idle`] sends
    /// a heartbeat (CME: 30 s).
    pub heartbeat_ns: u64,
    /// SendingTime between the packets of a snapshot or definition loop.
    pub loop_spacing_ns: u64,
    /// Whether MsgSeqNum starts again at 1 after a ChannelReset (true by
    /// default).
    pub restart_seq_on_reset: bool,
}

impl Channel {
    /// The channel at the start of the week: instruments `specs` (depths
    /// clamped to 1..=[`MAX_DEPTH`], ticks to at least 1, a SecurityID
    /// listed twice kept once), empty books, RptSeq and MsgSeqNum about to
    /// start at 1, no status sent (instruments trade).
    pub fn new(seed: u64, specs: Vec<Spec>) -> Channel {
        let mut insts: Vec<Inst> = Vec::with_capacity(specs.len());
        for mut spec in specs {
            if insts.iter().any(|i| i.spec.security_id == spec.security_id) {
                continue;
            }
            spec.depth = spec.depth.clamp(1, MAX_DEPTH);
            spec.implied_depth = spec.implied_depth.clamp(1, MAX_DEPTH);
            spec.tick = spec.tick.max(1);
            insts.push(Inst::new(spec));
        }
        Channel {
            rng: Rng(seed),
            insts,
            groups: Vec::new(),
            order: 0,
            seq: 1,
            last_seq: 0,
            last_sent: 0,
            trade_id: 1,
            version: 13,
            appl_id: 310,
            max_packet: 1_420,
            heartbeat_ns: 30 * SECOND,
            loop_spacing_ns: 100 * US,
            restart_seq_on_reset: true,
        }
    }

    /// The channel in the middle of the week at `t`: MsgSeqNum in the
    /// millions, every instrument's RptSeq in the hundreds of thousands,
    /// books full, every group open (its status sent earlier in the week,
    /// so not on the wire from here), nothing sent since `t`.
    pub fn mid_week(seed: u64, specs: Vec<Spec>, t: u64) -> Channel {
        let mut c = Channel::new(seed, specs);
        c.seq = 1_000_000 + c.rng.below(9_000_000) as u32;
        c.last_seq = c.seq - 1;
        c.last_sent = t;
        let mut scratch = Event::default();
        for i in 0..c.insts.len() {
            c.fill(&mut scratch, i);
            let inst = &mut c.insts[i];
            inst.rpt_seq = 100_000 + c.rng.below(900_000) as u32;
            inst.transact_time = t.saturating_sub(c.rng.below(SECOND));
            let r = inst.reference();
            inst.last = Some(r);
            inst.open = Some(r);
            inst.high = Some(worse_by(OFFER, r, 20, inst.spec.tick));
            inst.low = Some(worse_by(BID, r, 20, inst.spec.tick));
            inst.volume = 50_000 + c.rng.below(500_000);
        }
        let groups: Vec<String> = c.insts.iter().map(|i| i.spec.group.clone()).collect();
        for g in groups {
            if !c.groups.iter().any(|(x, ..)| *x == g) {
                c.order += 1;
                c.groups.push((g, status::OPEN, c.order));
            }
        }
        c
    }

    /// The instruments, in the order given.
    pub fn specs(&self) -> impl Iterator<Item = &Spec> {
        self.insts.iter().map(|i| &i.spec)
    }

    /// MsgSeqNum the next incremental packet takes.
    pub fn next_seq_num(&self) -> u32 {
        self.seq
    }

    /// MsgSeqNum of the last incremental packet sent (0 before any).
    pub fn last_seq_num(&self) -> u32 {
        self.last_seq
    }

    /// Instrument `security_id`'s last RptSeq (0: none yet).
    pub fn rpt_seq(&self, security_id: i32) -> Option<u32> {
        self.find(security_id).map(|i| self.insts[i].rpt_seq)
    }

    /// Instrument `security_id`'s published books.
    pub fn book(&self, security_id: i32) -> Option<TrueBook> {
        let i = &self.insts[self.find(security_id)?];
        Some(TrueBook {
            bids: i.published(0),
            offers: i.published(1),
            implied_bids: i.published(2),
            implied_offers: i.published(3),
        })
    }

    /// The status in force for `security_id` (its own or its group's,
    /// whichever came last); `None` if none was sent.
    pub fn trading_status(&self, security_id: i32) -> Option<u8> {
        self.code(self.find(security_id)?)
    }

    fn find(&self, security_id: i32) -> Option<usize> {
        self.insts
            .iter()
            .position(|i| i.spec.security_id == security_id)
    }

    fn code(&self, i: usize) -> Option<u8> {
        let inst = self.insts.get(i)?;
        let group = self
            .groups
            .iter()
            .filter(|(g, ..)| *g == inst.spec.group)
            .map(|&(_, c, o)| (o, c))
            .max();
        let own = inst.status.map(|(c, o)| (o, c));
        own.max(group).map(|(_, c)| c)
    }

    fn phase_of(&self, i: usize) -> Phase {
        phase(self.code(i))
    }

    fn shape(&self) -> Shape {
        Shape::new(self.version)
    }

    /// A SendingTime for a packet of time `t`: a few µs later, never
    /// before the last.
    fn sending_time(&mut self, t: u64) -> u64 {
        let s = t
            .saturating_add(2 * US + self.rng.below(8 * US))
            .max(self.last_sent.saturating_add(1));
        self.last_sent = s;
        s
    }

    /// Packs `messages` (one event, or one message) into incremental
    /// packets of at most [`Channel::max_packet`] bytes.
    fn send(&mut self, t: u64, messages: Vec<Vec<u8>>) -> Vec<Datagram> {
        let mut packets: Vec<Vec<Vec<u8>>> = Vec::new();
        let mut len = 0;
        for m in messages {
            match packets.last_mut() {
                Some(p) if len + m.len() <= self.max_packet => {
                    len += m.len();
                    p.push(m);
                }
                _ => {
                    len = 12 + m.len();
                    packets.push(vec![m]);
                }
            }
        }
        packets
            .into_iter()
            .map(|p| {
                let seq_num = self.seq;
                self.last_seq = seq_num;
                self.seq = self.seq.wrapping_add(1).max(1);
                let sending_time = self.sending_time(t);
                Datagram {
                    seq_num,
                    sending_time,
                    bytes: encode::packet(seq_num, sending_time, &p),
                }
            })
            .collect()
    }

    /// Sends event `ev` of time `t` (nothing if it has no entry).
    fn finish(&mut self, t: u64, ev: Event) -> Vec<Datagram> {
        if ev.parts.is_empty() {
            return Vec::new();
        }
        for p in &ev.parts {
            let (id, _) = p.key();
            if let Some(i) = self.find(id) {
                self.insts[i].transact_time = t;
            }
        }
        let messages = self.messages(t, &ev.parts);
        self.send(t, messages)
    }

    /// The messages of an event: runs of one template (at most
    /// [`MAX_ENTRIES`] entries), each with the bits of the kinds it is the
    /// last of, the last with EndOfEvent.
    fn messages(&self, t: u64, parts: &[Part]) -> Vec<Vec<u8>> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for (k, p) in parts.iter().enumerate() {
            match runs.last_mut() {
                Some(r)
                    if parts.get(r.0).map(Part::template) == Some(p.template())
                        && k - r.0 < MAX_ENTRIES =>
                {
                    r.1 = k + 1;
                }
                _ => runs.push((k, k + 1)),
            }
        }
        let classes: Vec<u8> = runs
            .iter()
            .map(|&(a, b)| parts[a..b].iter().fold(0, |c, p| c | p.class()))
            .collect();
        let mut last_of = [usize::MAX; 5];
        for (j, c) in classes.iter().enumerate() {
            for (bit, last) in last_of.iter_mut().enumerate() {
                if c & (1 << bit) != 0 {
                    *last = j;
                }
            }
        }
        runs.iter()
            .enumerate()
            .map(|(j, &(a, b))| {
                let mut m = 0;
                for (bit, &last) in last_of.iter().enumerate() {
                    if last == j {
                        m |= 1 << bit;
                    }
                }
                if j + 1 == runs.len() {
                    m |= mei::END_OF_EVENT;
                }
                self.encode_run(t, m, &parts[a..b])
            })
            .collect()
    }

    /// One message of entries of one template.
    fn encode_run(&self, t: u64, m: u8, run: &[Part]) -> Vec<u8> {
        let shape = self.shape();
        let Some(first) = run.first() else {
            return Vec::new();
        };
        if let Part::Book(_) = first {
            let entries: Vec<BookEntry> = run
                .iter()
                .filter_map(|p| match p {
                    Part::Book(e) => Some(*e),
                    _ => None,
                })
                .collect();
            return encode::book(46, shape, t, m, &entries, 0);
        }
        let keys: Vec<(i32, u32)> = run.iter().map(Part::key).collect();
        let mut msg = encode::statistics(first.template(), shape, t, m, &keys, 0);
        for (k, p) in run.iter().enumerate() {
            let at = |off: usize, v: &[u8], msg: &mut Vec<u8>| patch(msg, k, off, v);
            match *p {
                Part::Trade {
                    price,
                    size,
                    orders,
                    aggressor,
                    trade_id,
                    ..
                } => {
                    at(0, &price.to_le_bytes(), &mut msg);
                    at(8, &int32(size).to_le_bytes(), &mut msg);
                    at(20, &orders.to_le_bytes(), &mut msg);
                    at(24, &[aggressor, 0], &mut msg);
                    at(26, &trade_id.to_le_bytes(), &mut msg);
                }
                Part::Volume { size, .. } => {
                    at(0, &int32(size).to_le_bytes(), &mut msg);
                }
                Part::Session { price, kind, .. } => {
                    at(0, &price.to_le_bytes(), &mut msg);
                    // OpenCloseSettlFlag null, MDUpdateAction New, the
                    // type, MDEntrySize null.
                    at(16, &[u8::MAX, 0, kind], &mut msg);
                    at(19, &i32::MAX.to_le_bytes(), &mut msg);
                }
                Part::Daily {
                    price,
                    size,
                    kind,
                    date,
                    ..
                } => {
                    at(0, &price.unwrap_or(i64::MAX).to_le_bytes(), &mut msg);
                    let size = size.map_or(i32::MAX, int32);
                    at(8, &size.to_le_bytes(), &mut msg);
                    at(20, &date.to_le_bytes(), &mut msg);
                    at(22, &[0, 0, kind], &mut msg);
                }
                Part::Limits {
                    high,
                    low,
                    variation,
                    ..
                } => {
                    at(0, &high.to_le_bytes(), &mut msg);
                    at(8, &low.to_le_bytes(), &mut msg);
                    at(16, &variation.to_le_bytes(), &mut msg);
                }
                Part::Book(_) => {}
            }
        }
        msg
    }

    /// An instrument drawn by weight among those that may act.
    fn pick(&mut self) -> Option<usize> {
        let weights: Vec<u64> = (0..self.insts.len())
            .map(|i| match self.phase_of(i) {
                Phase::Trading | Phase::PreOpen => self.insts[i].spec.weight.max(1),
                Phase::Halted | Phase::Closed => 0,
            })
            .collect();
        self.rng.weighted(&weights)
    }

    /// One Globex event at `t` (its TransactTime): an instrument drawn by
    /// weight among those trading or in pre-open, and an activity drawn
    /// as a busy futures channel mixes them (quotes most, then implied
    /// updates and trades, sweeps, rarely a side taken whole or
    /// statistics). Nothing when no instrument may act.
    pub fn next_event(&mut self, t: u64) -> Vec<Datagram> {
        let Some(i) = self.pick() else {
            return Vec::new();
        };
        let activity = match self.phase_of(i) {
            Phase::PreOpen => {
                if self.rng.chance(150) {
                    Activity::Implied
                } else {
                    Activity::Quote
                }
            }
            _ => {
                const MIX: [(Activity, u64); 6] = [
                    (Activity::Quote, 580),
                    (Activity::Implied, 170),
                    (Activity::Trade, 190),
                    (Activity::Sweep, 35),
                    (Activity::Clear, 5),
                    (Activity::Statistics, 20),
                ];
                let w: Vec<u64> = MIX.iter().map(|m| m.1).collect();
                let k = self.rng.weighted(&w).unwrap_or(0);
                MIX.get(k).map_or(Activity::Quote, |m| m.0)
            }
        };
        let id = self.insts[i].spec.security_id;
        self.event(t, id, activity)
    }

    /// One event of `activity` for instrument `security_id` at `t`.
    /// Nothing for an unknown, halted or closed instrument; in pre-open
    /// trades are not possible and quotes are sent instead.
    pub fn event(&mut self, t: u64, security_id: i32, activity: Activity) -> Vec<Datagram> {
        let Some(i) = self.find(security_id) else {
            return Vec::new();
        };
        let phase = self.phase_of(i);
        let activity = match (phase, activity) {
            (Phase::Halted | Phase::Closed, _) => return Vec::new(),
            (Phase::PreOpen, Activity::Implied) => Activity::Implied,
            (Phase::PreOpen, _) => Activity::Quote,
            (Phase::Trading, a) => a,
        };
        let mut ev = Event::default();
        match activity {
            Activity::Quote => self.quote(&mut ev, i),
            Activity::Implied => self.implied(&mut ev, i),
            Activity::Trade | Activity::Sweep | Activity::Clear => self.trade(&mut ev, i, activity),
            Activity::Statistics => self.statistics(&mut ev, t, i),
        }
        self.finish(t, ev)
    }

    /// One event at `t` filling every trading or pre-open instrument's
    /// books (outright to its depth and the levels resting below, implied
    /// to its implied depth): the books of an opening, or sent again
    /// after a ChannelReset. Spans packets.
    pub fn fill_books(&mut self, t: u64) -> Vec<Datagram> {
        let mut ev = Event::default();
        for i in 0..self.insts.len() {
            if matches!(self.phase_of(i), Phase::Trading | Phase::PreOpen) {
                self.fill(&mut ev, i);
            }
        }
        self.finish(t, ev)
    }

    fn fill(&mut self, ev: &mut Event, i: usize) {
        for s in 0..4 {
            let mut tries = 0;
            while self.insts[i].side(s).len() < self.insts[i].room(s) && tries < 100 {
                tries += 1;
                let tick = self.insts[i].spec.tick;
                let price = match self.insts[i].side(s).last().map(|l| l.price) {
                    Some(p) => worse_by(s, p, 1 + i64::from(self.rng.chance(150)), tick),
                    None => self.start_price(i, s),
                };
                let (size, orders) = level_size(&mut self.rng);
                let l = Level {
                    price,
                    size,
                    orders: Some(orders),
                };
                self.insts[i].add(ev, s, l);
            }
        }
    }

    /// Where an empty side starts: a tick off the other side, else off
    /// the reference; implied sides a tick or two off the outright side.
    fn start_price(&mut self, i: usize, s: usize) -> i64 {
        let inst = &self.insts[i];
        let tick = inst.spec.tick;
        if s >= 2 {
            let base = inst.top(s - 2).map_or(inst.reference(), |l| l.price);
            return worse_by(s, base, 1 + self.rng.below(2) as i64, tick);
        }
        match inst.top(s ^ 1) {
            Some(o) => worse_by(s, o.price, 1, tick),
            None => worse_by(s, inst.reference(), 1, tick),
        }
    }

    /// A price for a new level on side `s`: not there yet, not crossing
    /// the other side (an implied side stays off its outright top).
    fn new_price(&mut self, i: usize, s: usize) -> Option<i64> {
        let inst = &self.insts[i];
        let (tick, room) = (inst.spec.tick, inst.room(s));
        let opp = inst.top(s ^ 1).map(|l| l.price);
        let top = inst.top(s).map(|l| l.price);
        let (base, span) = if s >= 2 {
            let outright = inst.top(s - 2).map_or(inst.reference(), |l| l.price);
            (outright, 5)
        } else if let Some(top) = top {
            // From a tick better than the top down past the resting levels.
            (worse_by(s, top, -1, tick), room + 2)
        } else {
            (self.start_price(i, s), room)
        };
        for _ in 0..8 {
            let k = self.rng.below(span as u64) as i64;
            // Mostly near the top.
            let k = if self.rng.chance(600) { k / 3 } else { k };
            let p = worse_by(s, base, k, tick);
            // The other side's top must stay beyond the new price.
            let crosses = opp.is_some_and(|o| !better(s, o, p));
            if !crosses && !self.insts[i].side(s).iter().any(|l| l.price == p) {
                return Some(p);
            }
        }
        None
    }

    /// One to three changes of the outright book's resting orders.
    fn quote(&mut self, ev: &mut Event, i: usize) {
        let n = 1 + self.rng.below(3);
        for _ in 0..n {
            let s = self.rng.below(2) as usize;
            self.quote_op(ev, i, s);
        }
    }

    /// One change of side `s`: a market wider than a tick narrows (a New
    /// inside it); otherwise levels come and go so that the side stays
    /// about full (resting levels included), and most often a level's
    /// quantity changes.
    fn quote_op(&mut self, ev: &mut Event, i: usize, s: usize) {
        let inst = &self.insts[i];
        let tick = inst.spec.tick;
        let (len, room) = (inst.side(s).len(), inst.room(s));
        let shown = len.min(inst.depth(s));
        let gap = match (inst.top(BID), inst.top(OFFER)) {
            (Some(b), Some(o)) => o.price.saturating_sub(b.price) / tick,
            _ => 0,
        };
        if gap > 1 && self.rng.chance(700) {
            // A tick or more inside the market, short of the other side.
            let top = self.insts[i].top(s).map_or(0, |l| l.price);
            let k = 1 + self.rng.below((gap as u64 - 1).min(3)) as i64;
            let (size, orders) = level_size(&mut self.rng);
            let l = Level {
                price: worse_by(s, top, -k, tick),
                size,
                orders: Some(orders),
            };
            self.insts[i].add(ev, s, l);
            return;
        }
        let full = (len * 1000 / room.max(1)) as u64;
        let weights = [
            // New: more the emptier the side.
            150 + (1000 - full.min(1000)) * 6 / 10,
            // Change.
            450,
            // Delete: more the fuller.
            if len < 2 { 0 } else { full * 25 / 100 },
            // Overlay.
            if len < 2 { 0 } else { 70 },
        ];
        match self.rng.weighted(&weights).unwrap_or(0) {
            1 if shown > 0 => {
                let k = self.rng.below(shown as u64) as usize;
                if let Some(l) = self.insts[i].side(s).get(k).copied() {
                    let up = self.rng.chance(550);
                    let d = 1 + self.rng.below(l.size.min(20));
                    let size = if up {
                        l.size + d
                    } else {
                        l.size.saturating_sub(d)
                    };
                    let orders = l.orders.unwrap_or(1) + if up { 1 } else { -1 };
                    self.insts[i].change(ev, s, k, size.max(1), orders);
                }
            }
            2 => {
                // Deeper levels go more often than the top.
                let k = self
                    .rng
                    .below(shown as u64)
                    .max(self.rng.below(shown as u64));
                self.insts[i].delete(ev, s, k as usize);
            }
            3 => self.overlay_op(ev, i, s),
            _ => {
                if let Some(price) = self.new_price(i, s) {
                    let (size, orders) = level_size(&mut self.rng);
                    let l = Level {
                        price,
                        size,
                        orders: Some(orders),
                    };
                    self.insts[i].add(ev, s, l);
                }
            }
        }
    }

    /// Re-prices a published level of side `s` between its neighbours
    /// (the top not past the other side): an Overlay. Falls back to a
    /// quantity change when there is no room.
    fn overlay_op(&mut self, ev: &mut Event, i: usize, s: usize) {
        let inst = &self.insts[i];
        let tick = inst.spec.tick;
        let side = inst.side(s);
        let shown = side.len().min(inst.depth(s));
        let k = self.rng.below(shown as u64) as usize;
        let Some(cur) = side.get(k).copied() else {
            return;
        };
        // Bounds, exclusive: the better neighbour (or the other side's
        // top, which a price must stay off), and the worse one.
        let outer = match k {
            0 => inst.top(s ^ 1).map(|l| l.price),
            _ => side.get(k - 1).map(|l| l.price),
        };
        let inner = side.get(k + 1).map(|l| l.price);
        let mut choices = Vec::new();
        for n in -3i64..=3 {
            let p = worse_by(s, cur.price, n, tick);
            let ok = p != cur.price
                && outer.is_none_or(|o| better(s, o, p))
                && inner.is_none_or(|w| better(s, p, w));
            if ok {
                choices.push(p);
            }
        }
        let (size, orders) = level_size(&mut self.rng);
        match choices.get(self.rng.below(choices.len() as u64) as usize) {
            Some(&price) => {
                let l = Level {
                    price,
                    size,
                    orders: Some(orders),
                };
                self.insts[i].overlay(ev, s, k, l);
            }
            None => self.insts[i].change(ev, s, k, size, orders),
        }
    }

    /// The implied book changes: a level comes, changes, is re-priced,
    /// goes, or (rarely) the side empties.
    fn implied(&mut self, ev: &mut Event, i: usize) {
        let s = 2 + self.rng.below(2) as usize;
        let inst = &self.insts[i];
        let len = inst.side(s).len();
        let op = if len == 0 {
            0
        } else if len < inst.depth(s) {
            self.rng.weighted(&[50, 25, 15, 8, 2]).unwrap_or(0)
        } else {
            self.rng.weighted(&[20, 40, 25, 12, 3]).unwrap_or(0)
        };
        match op {
            1 => {
                let k = self.rng.below(len as u64) as usize;
                let (size, orders) = level_size(&mut self.rng);
                self.insts[i].change(ev, s, k, size, orders);
            }
            2 => {
                let k = self.rng.below(len as u64) as usize;
                self.insts[i].delete(ev, s, k);
            }
            3 => self.overlay_op(ev, i, s),
            4 => self.insts[i].delete_thru(ev, s),
            _ => {
                if let Some(price) = self.new_price(i, s) {
                    let (size, orders) = level_size(&mut self.rng);
                    let l = Level {
                        price,
                        size,
                        orders: Some(orders),
                    };
                    self.insts[i].add(ev, s, l);
                }
            }
        }
    }

    /// An aggressive order on instrument `i`: its trades (with the legs' of
    /// a spread), volume, session statistics, then the book.
    fn trade(&mut self, ev: &mut Event, i: usize, activity: Activity) {
        let buy = self.rng.chance(500);
        // A buyer takes the offers.
        let s = if buy { OFFER } else { BID };
        let side = self.insts[i].side(s).to_vec();
        let Some(top) = side.first().copied() else {
            self.quote_op(ev, i, s);
            return;
        };
        let qty = match activity {
            Activity::Sweep if side.len() >= 3 => {
                let k = 2 + self.rng.below(2) as usize;
                let k = k.min(side.len() - 1);
                let whole: u64 = side.iter().take(k).map(|l| l.size).sum();
                let next = side.get(k).map_or(1, |l| l.size);
                whole + self.rng.below(next)
            }
            Activity::Clear => side.iter().map(|l| l.size).sum::<u64>() + 1 + self.rng.below(30),
            _ if self.rng.chance(300) => top.size,
            _ => 1 + self.rng.below(top.size),
        };
        let fills = self.insts[i].fills(s, qty);
        let traded: u64 = fills.iter().map(|f| f.1).sum();
        let aggressor = if buy { 1 } else { 2 };
        for &(price, q, orders) in &fills {
            self.print(ev, i, price, q, orders + 1, aggressor);
        }
        let last = fills.last().map_or(top.price, |f| f.0);
        let mut legs = Vec::new();
        if let Product::Spread { legs: ids } = self.insts[i].spec.product {
            // The legs' prices: the first leg at its own reference, the
            // second at the first less the spread's price.
            let first = ids[0];
            if let Some(a) = self.find(first) {
                let pa = self.insts[a].last.unwrap_or(self.insts[a].reference());
                let pb = pa.saturating_sub(last);
                let b = self.find(ids[1]);
                for (leg, price) in [(Some(a), pa), (b, pb)] {
                    if let Some(l) = leg.filter(|&l| self.phase_of(l) == Phase::Trading) {
                        let tick = self.insts[l].spec.tick;
                        let price = price.saturating_sub(price.rem_euclid(tick));
                        self.print(ev, l, price, traded, 2, 0);
                        legs.push(l);
                    }
                }
            }
        }
        for k in std::iter::once(i).chain(legs.iter().copied()) {
            let inst = &mut self.insts[k];
            inst.volume = inst.volume.saturating_add(traded);
            let (id, rpt, size) = (inst.spec.security_id, inst.next_rpt(), inst.volume);
            ev.parts.push(Part::Volume { id, rpt, size });
        }
        for k in std::iter::once(i).chain(legs.iter().copied()) {
            self.session_statistics(ev, k);
        }
        self.insts[i].take(ev, s, traded);
        if activity == Activity::Clear {
            // What the order has left rests at the last price; new
            // orders come back on the side it took.
            let left = qty - traded;
            if left > 0 {
                let l = Level {
                    price: last,
                    size: left.min(MAX_SIZE),
                    orders: Some(1),
                };
                self.insts[i].add(ev, s ^ 1, l);
            }
            for _ in 0..2 + self.rng.below(3) {
                if let Some(price) = self.new_price(i, s) {
                    let (size, orders) = level_size(&mut self.rng);
                    let l = Level {
                        price,
                        size,
                        orders: Some(orders),
                    };
                    self.insts[i].add(ev, s, l);
                }
            }
        }
    }

    /// A trade entry of instrument `i`.
    fn print(&mut self, ev: &mut Event, i: usize, price: i64, size: u64, orders: i32, side: u8) {
        let trade_id = self.trade_id;
        self.trade_id = self.trade_id.wrapping_add(1);
        let inst = &mut self.insts[i];
        inst.last = Some(price);
        ev.parts.push(Part::Trade {
            id: inst.spec.security_id,
            rpt: inst.next_rpt(),
            price,
            size,
            orders,
            aggressor: side,
            trade_id,
        });
    }

    /// Open, high and low of instrument `i` after a trade.
    fn session_statistics(&mut self, ev: &mut Event, i: usize) {
        let inst = &mut self.insts[i];
        let Some(p) = inst.last else {
            return;
        };
        let id = inst.spec.security_id;
        if inst.open.is_none() {
            inst.open = Some(p);
            let rpt = inst.next_rpt();
            ev.parts.push(Part::Session {
                id,
                rpt,
                price: p,
                kind: b'4',
            });
        }
        if inst.high.is_none_or(|h| p > h) {
            inst.high = Some(p);
            let rpt = inst.next_rpt();
            ev.parts.push(Part::Session {
                id,
                rpt,
                price: p,
                kind: b'7',
            });
        }
        if inst.low.is_none_or(|l| p < l) {
            inst.low = Some(p);
            let rpt = inst.next_rpt();
            ev.parts.push(Part::Session {
                id,
                rpt,
                price: p,
                kind: b'8',
            });
        }
    }

    /// Daily statistics (cleared volume or open interest) or the price
    /// limits around the last price.
    fn statistics(&mut self, ev: &mut Event, t: u64, i: usize) {
        let date = u16::try_from(t / (86_400 * SECOND)).unwrap_or(u16::MAX);
        let pick = self.rng.below(3);
        let extra = self.rng.below(10_000);
        let inst = &mut self.insts[i];
        let (id, rpt) = (inst.spec.security_id, inst.next_rpt());
        let part = match pick {
            0 => Part::Daily {
                id,
                rpt,
                price: None,
                size: Some(inst.volume),
                kind: b'B',
                date,
            },
            1 => Part::Daily {
                id,
                rpt,
                price: None,
                size: Some(1_500_000 + extra),
                kind: b'C',
                date,
            },
            _ => {
                let p = inst.reference();
                let band = (p / 20).saturating_abs().max(inst.spec.tick);
                Part::Limits {
                    id,
                    rpt,
                    high: p.saturating_add(band),
                    low: p.saturating_sub(band),
                    variation: band / 2,
                }
            }
        };
        ev.parts.push(part);
    }

    /// A SecurityStatus at `t` for `scope` with `code`; an instrument that
    /// it opens with a crossed book (from pre-open) is uncrossed by an
    /// opening event right after. Nothing for an unknown instrument or
    /// group.
    pub fn status(&mut self, t: u64, scope: Scope<'_>, code: u8) -> Vec<Datagram> {
        let (group, id) = match scope {
            Scope::Instrument(id) => match self.find(id) {
                Some(i) => (String::new(), Some((i, id))),
                None => return Vec::new(),
            },
            Scope::Group(g) => {
                if !self.insts.iter().any(|i| i.spec.group == g) {
                    return Vec::new();
                }
                (g.to_string(), None)
            }
        };
        let s = encode::Status {
            transact_time: t,
            security_group: match id {
                Some((i, _)) => &self.insts[i].spec.group,
                None => &group,
            },
            asset: match id {
                Some((i, _)) => &self.insts[i].spec.asset,
                None => "",
            },
            security_id: id.map(|x| x.1),
            match_event_indicator: mei::END_OF_EVENT,
            trading_status: Some(code),
        };
        let m = encode::security_status(self.shape(), &s);
        let mut out = self.send(t, vec![m]);
        if !matches!(code, 103 | 255) {
            self.order += 1;
            match id {
                Some((i, _)) => self.insts[i].status = Some((code, self.order)),
                None => {
                    self.groups.retain(|(g, ..)| *g != group);
                    self.groups.push((group, code, self.order));
                }
            }
        }
        let mut ev = Event::default();
        for i in 0..self.insts.len() {
            if self.phase_of(i) == Phase::Trading && self.book_of(i).crossed() {
                self.uncross(&mut ev, i);
            }
        }
        out.extend(self.finish(t, ev));
        out
    }

    /// Instrument `i`'s outright books.
    fn book_of(&self, i: usize) -> TrueBook {
        let inst = &self.insts[i];
        TrueBook {
            bids: inst.published(0),
            offers: inst.published(1),
            implied_bids: Vec::new(),
            implied_offers: Vec::new(),
        }
    }

    /// The opening match of a crossed book: bids and offers trade best
    /// first while they cross.
    fn uncross(&mut self, ev: &mut Event, i: usize) {
        let mut bids = self.insts[i].side(BID).to_vec();
        let mut offers = self.insts[i].side(OFFER).to_vec();
        let mut total = 0;
        let mut fills = Vec::new();
        while let (Some(b), Some(o)) = (bids.first_mut(), offers.first_mut()) {
            if b.price < o.price {
                break;
            }
            let q = b.size.min(o.size);
            fills.push((o.price, q));
            total += q;
            b.size -= q;
            o.size -= q;
            let (b_gone, o_gone) = (b.size == 0, o.size == 0);
            if b_gone {
                bids.remove(0);
            }
            if o_gone {
                offers.remove(0);
            }
        }
        for (price, q) in fills {
            self.print(ev, i, price, q, 2, 1);
        }
        let inst = &mut self.insts[i];
        inst.volume = inst.volume.saturating_add(total);
        let (id, rpt, size) = (inst.spec.security_id, inst.next_rpt(), inst.volume);
        ev.parts.push(Part::Volume { id, rpt, size });
        self.session_statistics(ev, i);
        self.insts[i].take(ev, BID, total);
        self.insts[i].take(ev, OFFER, total);
    }

    /// In pre-open, a bid for instrument `security_id` resting a tick or
    /// two above its best offer (the book crossed until it opens). Nothing
    /// outside pre-open or without offers.
    pub fn cross(&mut self, t: u64, security_id: i32) -> Vec<Datagram> {
        let Some(i) = self.find(security_id) else {
            return Vec::new();
        };
        if self.phase_of(i) != Phase::PreOpen {
            return Vec::new();
        }
        let inst = &self.insts[i];
        let Some(o) = inst.top(OFFER) else {
            return Vec::new();
        };
        let price = worse_by(OFFER, o.price, 1 + self.rng.below(2) as i64, inst.spec.tick);
        let (size, orders) = level_size(&mut self.rng);
        let mut ev = Event::default();
        let l = Level {
            price,
            size,
            orders: Some(orders),
        };
        self.insts[i].add(&mut ev, BID, l);
        self.finish(t, ev)
    }

    /// An AdminHeartbeat at `t` (its own packet).
    pub fn heartbeat(&mut self, t: u64) -> Datagram {
        let m = encode::heartbeat(self.shape());
        let seq_num = self.seq;
        self.last_seq = seq_num;
        self.seq = self.seq.wrapping_add(1).max(1);
        let sending_time = t.max(self.last_sent.saturating_add(1));
        self.last_sent = sending_time;
        Datagram {
            seq_num,
            sending_time,
            bytes: encode::packet(seq_num, sending_time, &[m]),
        }
    }

    /// The heartbeats due up to `t`: one each [`Channel::heartbeat_ns`] of
    /// silence since the last incremental packet (none before the first).
    pub fn idle(&mut self, t: u64) -> Vec<Datagram> {
        let mut out = Vec::new();
        if self.last_seq == 0 || self.heartbeat_ns == 0 {
            return out;
        }
        while let Some(due) = self.last_sent.checked_add(self.heartbeat_ns) {
            if due > t {
                break;
            }
            out.push(self.heartbeat(due));
        }
        out
    }

    /// A packet at `t` holding one message of `template_id`, a template
    /// from a newer schema this channel's readers may not know (an
    /// incremental root with EndOfEvent): to be skipped by its MsgSize.
    pub fn unknown_template(&mut self, t: u64, template_id: u16) -> Vec<Datagram> {
        let mut root = [0u8; 11];
        root[..8].copy_from_slice(&t.to_le_bytes());
        root[8] = mei::END_OF_EVENT;
        let m = encode::raw(template_id, self.version, &root, &[]);
        self.send(t, vec![m])
    }

    /// A ChannelReset at `t`: books, statistics and statuses emptied,
    /// RptSeq starting again at 1; MsgSeqNum too after this packet if
    /// [`Channel::restart_seq_on_reset`].
    pub fn channel_reset(&mut self, t: u64) -> Vec<Datagram> {
        let m = encode::channel_reset(self.shape(), t, mei::END_OF_EVENT, self.appl_id);
        let out = self.send(t, vec![m]);
        for inst in &mut self.insts {
            inst.sides = Default::default();
            inst.rpt_seq = 0;
            inst.status = None;
            inst.active = false;
            inst.transact_time = t;
            inst.open = None;
            inst.high = None;
            inst.low = None;
            inst.volume = 0;
        }
        self.groups.clear();
        if self.restart_seq_on_reset {
            self.seq = 1;
        }
        out
    }

    /// The market recovery loop at `t`: one 52 per instrument with book
    /// activity, each in its own packet (MsgSeqNum 1, 2, …), reflecting
    /// the channel as of the last incremental packet.
    pub fn snapshot_loop(&self, t: u64) -> Vec<Datagram> {
        let active: Vec<usize> = (0..self.insts.len())
            .filter(|&i| self.insts[i].active)
            .collect();
        let total = active.len() as u32;
        let mut out = Vec::with_capacity(active.len());
        for (k, &i) in active.iter().enumerate() {
            let inst = &self.insts[i];
            let head = SnapshotRoot {
                last_msg_seq_num_processed: self.last_seq,
                tot_num_reports: total,
                security_id: inst.spec.security_id,
                rpt_seq: inst.rpt_seq,
                transact_time: inst.transact_time,
                trading_status: self.code(i),
            };
            let mut entries = Vec::new();
            for (s, &entry_type) in ENTRY_TYPES.iter().enumerate() {
                for (j, l) in inst.published(s).iter().enumerate() {
                    entries.push(SnapshotEntry {
                        price: Some(l.price),
                        size: Some(l.size),
                        orders: l.orders,
                        level: u8::try_from(j + 1).ok(),
                        entry_type,
                    });
                }
            }
            let m = encode::snapshot(52, self.shape(), &head, &entries);
            let seq_num = k as u32 + 1;
            let sending_time = t.saturating_add(k as u64 * self.loop_spacing_ns);
            out.push(Datagram {
                seq_num,
                sending_time,
                bytes: encode::packet(seq_num, sending_time, &[m]),
            });
        }
        out
    }

    /// The instrument definition loop at `t`: one definition per
    /// instrument (54 or 56), each in its own packet (MsgSeqNum 1, 2, …),
    /// with the status in force.
    pub fn definition_loop(&self, t: u64) -> Vec<Datagram> {
        let total = self.insts.len() as u32;
        let mut out = Vec::with_capacity(self.insts.len());
        for (k, inst) in self.insts.iter().enumerate() {
            let spec = &inst.spec;
            let d = encode::Instrument {
                match_event_indicator: mei::END_OF_EVENT,
                tot_num_reports: Some(total),
                security_update_action: b'A',
                trading_status: self.code(k),
                appl_id: self.appl_id,
                security_group: &spec.group,
                asset: &spec.asset,
                symbol: &spec.symbol,
                security_id: spec.security_id,
                min_price_increment: Some(spec.tick),
                display_factor: spec.display_factor,
            };
            let feeds = [
                FeedType {
                    md_feed_type: "GBX",
                    market_depth: i8::try_from(spec.depth).unwrap_or(i8::MAX),
                },
                FeedType {
                    md_feed_type: "GBI",
                    market_depth: i8::try_from(spec.implied_depth).unwrap_or(i8::MAX),
                },
            ];
            let template = match spec.product {
                Product::Future => 54,
                Product::Spread { .. } => 56,
            };
            let m = encode::definition(template, self.shape(), &d, 0, &feeds);
            let seq_num = k as u32 + 1;
            let sending_time = t.saturating_add(k as u64 * self.loop_spacing_ns);
            out.push(Datagram {
                seq_num,
                sending_time,
                bytes: encode::packet(seq_num, sending_time, &[m]),
            });
        }
        out
    }
}

/// `v` as an Int32 field (clamped below its null).
fn int32(v: u64) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX - 1)
}

/// Writes `v` at offset `at` of entry `k` of message `m`'s first group, if
/// it lies inside the entry.
fn patch(m: &mut [u8], k: usize, at: usize, v: &[u8]) {
    let word = |m: &[u8], o: usize| {
        m.get(o..o + 2)
            .and_then(|b| b.try_into().ok())
            .map(|b| usize::from(u16::from_le_bytes(b)))
    };
    let Some(root) = word(m, 2) else {
        return;
    };
    let group = 10 + root;
    let Some(bl) = word(m, group) else {
        return;
    };
    if at + v.len() > bl {
        return;
    }
    let start = group + 3 + k * bl + at;
    if let Some(dst) = m.get_mut(start..start + v.len()) {
        dst.copy_from_slice(v);
    }
}

#[cfg(test)]
mod tests {
    use super::super::book::Side;
    use super::super::feed::{Feed, Settings};
    use super::super::packet::Packet;
    use super::super::sequence;
    use super::super::template::Body;
    use super::*;
    use crate::clock::OffsetMode;
    use std::collections::BTreeSet;

    /// 2026-01-04 23:00 UTC, the Sunday open.
    const T0: u64 = 1_767_567_600 * SECOND;
    const RTY: i32 = 309_877;
    const NQ: i32 = 206_323;
    const GROUPS: [&str; 3] = ["ES", "NQ", "RTY"];

    fn feed() -> Feed {
        Feed::new(Settings {
            sequencing: sequence::Settings {
                gap_timeout_ns: 5 * MS,
                restart_margin: 10_000,
            },
            max_cached: 1_000_000,
            max_instruments: 100_000,
            default_depth: 10,
            default_implied_depth: 2,
            offset: OffsetMode::Fixed(0),
            offset_queue: 16,
        })
    }

    /// Pre-open with books and a crossed RTY, then the open: the channel
    /// and the incremental datagrams, event by event, at time `T0 + 0.1 s`.
    fn opening(ch: &mut Channel, on: &mut impl FnMut(&Channel, &[Datagram])) -> u64 {
        let mut t = T0;
        for g in GROUPS {
            let d = ch.status(t, Scope::Group(g), status::PRE_OPEN);
            on(ch, &d);
        }
        let d = ch.fill_books(t + MS);
        on(ch, &d);
        for _ in 0..40 {
            t += 2 * MS;
            let d = ch.next_event(t);
            on(ch, &d);
        }
        let d = ch.cross(t + MS, RTY);
        on(ch, &d);
        t += 2 * MS;
        for g in GROUPS {
            let d = ch.status(t, Scope::Group(g), status::OPEN);
            on(ch, &d);
        }
        t
    }

    /// A session handed to `on` event by event (a status, a heartbeat
    /// and an unknown template count as events): the opening, `events`
    /// events with NQ halted and resumed, idle stretches with
    /// heartbeats, and a channel reset halfway followed by the books sent
    /// again.
    fn session(seed: u64, events: usize, mut on: impl FnMut(&Channel, &[Datagram])) -> Channel {
        let mut ch = Channel::new(seed, equity_channel());
        ch.heartbeat_ns = SECOND;
        let mut t = opening(&mut ch, &mut on);
        for k in 0..events {
            t += 1 + (k as u64 * 7_919 % 3_000) * US;
            if k == events / 5 {
                let d = ch.status(t, Scope::Instrument(NQ), status::HALT);
                on(&ch, &d);
            }
            if k == events / 4 {
                let d = ch.status(t, Scope::Instrument(NQ), status::OPEN);
                on(&ch, &d);
            }
            if k == events / 3 {
                let d = ch.unknown_template(t, 99);
                on(&ch, &d);
            }
            if k % 200 == 199 {
                t += 3 * SECOND + 500 * MS;
                for hb in ch.idle(t) {
                    on(&ch, &[hb]);
                }
            }
            if k == events / 2 {
                let d = ch.channel_reset(t);
                on(&ch, &d);
                // MsgSeqNum 1 restarts the receiver's sequence; the next
                // packets come after its gap timeout (5 ms), inside which
                // a MsgSeqNum below the old one reads as a late copy.
                for (n, g) in GROUPS.into_iter().enumerate() {
                    t += if n == 1 { 10 * MS } else { MS };
                    let d = ch.status(t, Scope::Group(g), status::OPEN);
                    on(&ch, &d);
                }
                let d = ch.fill_books(t + 1);
                on(&ch, &d);
            }
            let d = ch.next_event(t);
            on(&ch, &d);
        }
        ch
    }

    /// Each level of `s` to `depth`.
    fn levels(s: &Side, depth: u8) -> Vec<Option<Level>> {
        (1..=depth).map(|n| s.level(n)).collect()
    }

    fn padded(l: &[Level], depth: u8) -> Vec<Option<Level>> {
        (0..usize::from(depth)).map(|n| l.get(n).copied()).collect()
    }

    /// The feed's visible books are the channel's for every instrument,
    /// and those the channel sent entries for are healthy at its RptSeq.
    fn assert_same(f: &Feed, ch: &Channel, when: &str) {
        for spec in ch.specs() {
            let id = spec.security_id;
            let want = ch.book(id).unwrap();
            let Some(e) = f.find(&format!("#{id}")) else {
                assert_eq!(
                    want,
                    TrueBook::default(),
                    "{when}: #{id} unknown to the feed"
                );
                continue;
            };
            let v = f.visible(e);
            let (d, i) = (spec.depth, spec.implied_depth);
            let what = format!("{when}: #{id} {}", spec.symbol);
            assert_eq!(
                levels(&v.outright.bid, d),
                padded(&want.bids, d),
                "{what} bids"
            );
            assert_eq!(
                levels(&v.outright.offer, d),
                padded(&want.offers, d),
                "{what} offers"
            );
            assert_eq!(
                levels(&v.implied.bid, i),
                padded(&want.implied_bids, i),
                "{what} E"
            );
            assert_eq!(
                levels(&v.implied.offer, i),
                padded(&want.implied_offers, i),
                "{what} F"
            );
            let r = ch.rpt_seq(id).unwrap();
            if r > 0 {
                assert_eq!(e.instrument.seq.rpt_seq(), Some(r), "{what} RptSeq");
                assert!(!e.instrument.seq.suspect(), "{what} suspect");
                assert!(!e.instrument.seq.unverified(), "{what} unverified");
            }
        }
    }

    /// Every side strictly ordered, best first; implied never crossed; the
    /// outright book neither crossed nor locked unless in pre-open.
    fn assert_sane(ch: &Channel, when: &str) {
        let ordered =
            |l: &[Level], s: usize| l.windows(2).all(|w| better(s, w[0].price, w[1].price));
        for spec in ch.specs() {
            let id = spec.security_id;
            let b = ch.book(id).unwrap();
            let what = format!("{when}: {}", spec.symbol);
            assert!(ordered(&b.bids, 0) && ordered(&b.implied_bids, 0), "{what}");
            assert!(
                ordered(&b.offers, 1) && ordered(&b.implied_offers, 1),
                "{what}"
            );
            let top = |l: &[Level]| l.first().map(|l| l.price);
            if let (Some(x), Some(y)) = (top(&b.implied_bids), top(&b.implied_offers)) {
                assert!(x < y, "{what}: implied {x} {y}");
            }
            if phase(ch.trading_status(id)) != Phase::PreOpen {
                if let (Some(x), Some(y)) = (top(&b.bids), top(&b.offers)) {
                    assert!(x < y, "{what}: {x} {y}");
                }
            }
            for l in b.bids.iter().chain(&b.offers) {
                assert!(l.size > 0 && l.orders.is_some_and(|o| o >= 1 && o as u64 <= l.size));
            }
        }
    }

    fn define(f: &mut Feed, ch: &Channel) {
        for d in ch.definition_loop(T0) {
            f.on_definitions(&d.bytes).unwrap();
        }
    }

    /// The incremental datagrams of a session, event by event.
    fn events(seed: u64, n: usize) -> (Channel, Vec<Vec<Datagram>>) {
        let mut out = Vec::new();
        let ch = session(seed, n, |_, d| {
            if !d.is_empty() {
                out.push(d.to_vec());
            }
        });
        (ch, out)
    }

    #[test]
    fn every_datagram_is_valid_and_each_event_ends_on_its_last_message() {
        let (ch, events) = events(1, 1_500);
        let mut next: Option<u32> = None;
        let mut spanning = 0;
        for ev in &events {
            let mut ends = Vec::new();
            let mut count = 0;
            for d in ev {
                let p = Packet::new_checked(d.bytes.as_slice()).expect("valid packet");
                assert_eq!(p.seq_num(), d.seq_num);
                assert_eq!(p.sending_time(), d.sending_time);
                assert!(d.bytes.len() <= ch.max_packet, "{}", d.bytes.len());
                if let Some(n) = next {
                    // +1 per packet, or 1 again right after a reset.
                    assert!(d.seq_num == n || d.seq_num == 1, "{} after {n}", d.seq_num);
                }
                next = Some(d.seq_num + 1);
                for m in p.messages() {
                    if m.match_event_indicator().is_some_and(|x| x.end_of_event()) {
                        ends.push((count, m.template_id()));
                    }
                    count += 1;
                }
            }
            let heartbeat = ev.len() == 1 && count == 1 && ends.is_empty();
            if !heartbeat {
                // A status that opens a crossed book is an event of its
                // own before the opening match.
                let (last, before) = ends.split_last().unwrap();
                assert_eq!(last.0, count - 1, "EndOfEvent on the last message");
                assert!(before.iter().all(|e| e.1 == 30), "{ends:?}");
            }
            spanning += usize::from(ev.len() > 1);
        }
        assert!(spanning >= 3, "events over several packets: {spanning}");
        for l in [ch.snapshot_loop(T0), ch.definition_loop(T0)] {
            let seqs: Vec<u32> = l.iter().map(|d| d.seq_num).collect();
            assert_eq!(seqs, (1..=5).collect::<Vec<u32>>());
            for d in &l {
                assert!(Packet::new_checked(d.bytes.as_slice()).is_ok());
            }
        }
    }

    #[test]
    fn every_update_action_entry_type_and_template_is_sent() {
        let (_, events) = events(2, 3_000);
        let mut book = BTreeSet::new();
        let mut templates = BTreeSet::new();
        let mut bits = 0u8;
        for d in events.iter().flatten() {
            let p = Packet::new_checked(d.bytes.as_slice()).unwrap();
            for m in p.messages() {
                templates.insert(m.template_id());
                bits |= m.match_event_indicator().map_or(0, |x| x.0);
                if let Body::Incremental(inc) = m.body() {
                    for e in inc.entries() {
                        if let Some(b) = e.book() {
                            book.insert((b.entry_type().code(), b.action().code()));
                        }
                    }
                }
            }
        }
        for entry in [b'0', b'1'] {
            for action in 0..=5 {
                assert!(
                    book.contains(&(entry, action)),
                    "{} {action}",
                    entry as char
                );
            }
        }
        for entry in [b'E', b'F'] {
            for action in [0, 1, 2, 3, 5] {
                assert!(
                    book.contains(&(entry, action)),
                    "{} {action}",
                    entry as char
                );
            }
        }
        for t in [4, 12, 30, 37, 46, 48, 49, 50, 51, 99] {
            assert!(templates.contains(&t), "template {t}");
        }
        assert_eq!(bits, 0x9f, "every MatchEventIndicator bit used");
    }

    #[test]
    fn a_receiver_missing_nothing_holds_the_true_books_at_each_event_end() {
        for seed in 30..36 {
            let mut f = feed();
            define(&mut f, &Channel::new(seed, equity_channel()));
            let (mut at, mut k, mut crossed) = (T0, 0, false);
            let ch = session(seed, 1_500, |ch, ev| {
                for d in ev {
                    at = at.max(d.sending_time);
                    f.on_incremental(&d.bytes, at).unwrap();
                }
                let when = format!("seed {seed} event {k}");
                assert_same(&f, ch, &when);
                assert_sane(ch, &when);
                crossed |= ch.book(RTY).is_some_and(|b| b.crossed());
                k += 1;
            });
            assert!(crossed, "RTY crossed in pre-open");
            assert!(
                !ch.book(RTY).unwrap().crossed(),
                "and uncrossed at the open"
            );
            let c = f.counters();
            assert_eq!(
                (c.channel_resets, c.unknown_templates, c.anomalies),
                (1, 1, 0)
            );
            let seq = f.sequence().counters();
            assert_eq!((seq.sequence_restarts, seq.packet_gaps), (1, 0));
            assert!(c.heartbeats >= 3, "{}", c.heartbeats);
        }
    }

    /// Loss on both lines: the instruments whose entries were lost are
    /// suspect, every one unverified once the gap is given up; the
    /// snapshot loop, taken before the later packets are received, heals
    /// every one.
    #[test]
    fn the_snapshot_loop_heals_every_instrument_after_loss_on_both_lines() {
        let mut ch = Channel::new(4, equity_channel());
        let mut f = feed();
        define(&mut f, &ch);
        let mut t = opening(&mut ch, &mut |_, ev| {
            for d in ev {
                f.on_incremental(&d.bytes, d.sending_time).unwrap();
            }
        });
        assert_same(&f, &ch, "open");
        for k in 0..400 {
            t += 300 * US;
            let lost = (100..130).contains(&k);
            for d in ch.next_event(t) {
                if !lost {
                    f.on_incremental(&d.bytes, t).unwrap();
                }
            }
        }
        t += 10 * MS;
        f.expire(t);
        let ids: Vec<i32> = ch.specs().map(|s| s.security_id).collect();
        let seq = |f: &Feed, id: i32| {
            let e = f.find(&format!("#{id}")).unwrap();
            (e.instrument.seq.suspect(), e.instrument.seq.unverified())
        };
        assert!(ids.iter().any(|&id| seq(&f, id).0), "some suspect");
        assert!(ids.iter().all(|&id| seq(&f, id) != (false, false)));
        assert!(f.sequence().counters().packets_lost > 0);
        let snapshots = ch.snapshot_loop(t);
        // Events after the loop's time reach the receiver first.
        for _ in 0..30 {
            t += 300 * US;
            for d in ch.next_event(t) {
                f.on_incremental(&d.bytes, t).unwrap();
            }
        }
        for d in &snapshots {
            f.on_snapshot(&d.bytes, t).unwrap();
        }
        assert_same(&f, &ch, "after the loop");
        assert!(f.counters().snapshots_applied >= 1);
    }

    /// Joined mid-week: no instrument has a baseline until its snapshot;
    /// RptSeq far from 1; the loop heals every one.
    #[test]
    fn a_mid_week_join_heals_from_the_snapshot_loop() {
        let mut ch = Channel::mid_week(5, equity_channel(), T0);
        ch.version = 9;
        let mut f = feed();
        define(&mut f, &ch);
        let mut t = T0;
        let run = |ch: &mut Channel, f: &mut Feed, n: usize, t: &mut u64| {
            for _ in 0..n {
                *t += 500 * US;
                for d in ch.next_event(*t) {
                    f.on_incremental(&d.bytes, *t).unwrap();
                }
            }
        };
        run(&mut ch, &mut f, 50, &mut t);
        assert!(ch.last_seq_num() > 1_000_000);
        for s in ch.specs() {
            assert!(ch.rpt_seq(s.security_id).unwrap() > 100_000);
            if let Some(e) = f.find(&format!("#{}", s.security_id)) {
                assert!(
                    e.instrument.seq.suspect(),
                    "{} without a baseline",
                    s.symbol
                );
            }
        }
        let snapshots = ch.snapshot_loop(t);
        assert_eq!(snapshots.len(), 5);
        run(&mut ch, &mut f, 20, &mut t);
        for d in &snapshots {
            f.on_snapshot(&d.bytes, t).unwrap();
        }
        assert_same(&f, &ch, "healed");
        run(&mut ch, &mut f, 200, &mut t);
        assert_same(&f, &ch, "later");
        assert_eq!(f.counters().snapshots_applied, 5);
    }

    #[test]
    fn a_channel_reset_empties_the_books_and_restarts_rpt_seq_and_msg_seq_num() {
        let mut ch = Channel::new(6, equity_channel());
        ch.fill_books(T0);
        for k in 0..50 {
            ch.next_event(T0 + k * MS);
        }
        let reset = ch.channel_reset(T0 + SECOND);
        assert_eq!(reset.len(), 1);
        assert!(reset[0].seq_num > 1);
        for s in ch.specs() {
            assert_eq!(ch.book(s.security_id), Some(TrueBook::default()));
            assert_eq!(ch.rpt_seq(s.security_id), Some(0));
            assert_eq!(ch.trading_status(s.security_id), None);
        }
        assert!(ch.snapshot_loop(T0 + SECOND).is_empty(), "no activity yet");
        let d = ch.fill_books(T0 + SECOND + 1);
        assert_eq!(d[0].seq_num, 1);
        // Ten levels a side and two implied are sent; five rest below.
        assert_eq!(ch.rpt_seq(294_973), Some(24));
    }

    #[test]
    fn the_same_seed_sends_the_same_bytes() {
        let (_, a) = events(7, 500);
        let (_, b) = events(7, 500);
        let (_, c) = events(8, 500);
        assert!(a == b);
        assert!(a != c);
    }

    #[test]
    fn odd_inputs_send_nothing_or_are_clamped() {
        let mut empty = Channel::new(1, Vec::new());
        assert!(empty.next_event(T0).is_empty());
        assert!(empty.fill_books(T0).is_empty());
        assert!(empty.status(T0, Scope::Group("ES"), 2).is_empty());
        assert!(empty.status(T0, Scope::Instrument(1), 2).is_empty());
        assert!(empty.event(T0, 1, Activity::Trade).is_empty());
        assert!(empty.cross(T0, 1).is_empty());
        assert!(empty.idle(u64::MAX).is_empty());
        assert!(empty.snapshot_loop(T0).is_empty());
        assert!(empty.definition_loop(T0).is_empty());
        assert_eq!(empty.book(1), None);
        let odd = Spec {
            security_id: -1,
            symbol: "A-VERY-LONG-SYMBOL-NAME-INDEED".into(),
            group: "GROUPTOOLONG".into(),
            asset: String::new(),
            product: Product::Spread { legs: [-1, 77] },
            depth: 0,
            implied_depth: 255,
            tick: 0,
            display_factor: -5,
            price: i64::MIN + 3,
            weight: u64::MAX,
        };
        let high = Spec {
            security_id: 12,
            product: Product::Future,
            price: i64::MAX - 3,
            ..odd.clone()
        };
        let mut specs = vec![odd.clone(), odd, high];
        specs.extend(equity_channel());
        let mut ch = Channel::new(9, specs);
        ch.max_packet = 0;
        ch.heartbeat_ns = 1;
        ch.version = 0;
        assert_eq!(ch.specs().count(), 7);
        let s = ch.specs().next().unwrap();
        assert_eq!((s.depth, s.implied_depth, s.tick), (1, MAX_DEPTH, 1));
        ch.fill_books(u64::MAX - SECOND);
        for a in [
            Activity::Quote,
            Activity::Trade,
            Activity::Sweep,
            Activity::Clear,
            Activity::Implied,
            Activity::Statistics,
        ] {
            for _ in 0..200 {
                for id in [-1, 294_973, 442_811, 12] {
                    ch.event(u64::MAX, id, a);
                }
                ch.next_event(0);
            }
        }
        ch.status(0, Scope::Group("GROUPTOOLONG"), 21);
        ch.cross(0, -1);
        ch.status(0, Scope::Group("GROUPTOOLONG"), 17);
        ch.status(0, Scope::Instrument(-1), 103);
        assert!(ch.idle(u64::MAX).len() <= 1);
        let snapshots = ch.snapshot_loop(u64::MAX);
        assert_eq!(snapshots.len(), 7);
        for d in snapshots.iter().chain(&ch.definition_loop(0)) {
            // Version 0: every message is refused as old, whole.
            assert!(Packet::new_checked(d.bytes.as_slice()).is_err());
        }
        ch.channel_reset(u64::MAX);
        ch.unknown_template(0, 46);
    }
}
