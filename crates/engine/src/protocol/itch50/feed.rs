//! One ITCH feed: the stream's sequencing, then each message applied in
//! sequence order to symbols and books (spec §3.3), and the verdict's
//! inputs (spec §4).
//!
//! Time is passed in: `t` is a datagram's local arrival time (ns since the
//! Unix epoch), `now` a check's. Source times are the session date's
//! midnight in the feed's time zone (DST-correct) plus the message's
//! timestamp; the session date is the zone's date at the arrival of the
//! session's first packet.

use super::book::{Books, Full, Order, Top};
use super::config::RECOVERY_LINE;
use super::event::{self, Event, Log, OrderChange, Outcome, PacketInfo};
use super::ladder::Levels;
use super::linecheck::LineCheck;
use super::map::U64Map;
use super::message::{fixed, msg_type, Body, Message, Side, HEADER_LEN};
use super::mold::{Kind, Packet, Session, SESSION_LEN};
use super::sequencer::{self, Apply, Sequencer, SessionOf};
use super::Reject;
use crate::clock::{OffsetEstimator, OffsetMode};
use crate::symbol::Symbol;
use crate::sys::memory::prefetch;
use crate::verdict::{reasons, Inputs, Reasons, Thresholds};

/// A feed's settings (spec §6).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Sequencing: gap timeout, held-message bound, join threshold.
    pub sequencing: sequencer::Settings,
    /// The exchange's time zone (midnight of the session date).
    pub timezone: jiff::tz::TimeZone,
    /// Clock offset: fixed or estimated over a window.
    pub offset: OffsetMode,
    /// Capacity of the clock-offset queue ([`crate::clock::UNBOUNDED`] in replay).
    pub offset_queue: usize,
    /// Live orders to make room for up front.
    pub orders: usize,
    /// Most live orders (`max_orders`): an add beyond is refused, counted
    /// and makes the feed [`suspect`](Feed::suspect) until the session
    /// changes or a snapshot merges.
    pub max_orders: usize,
    /// Most symbols a session holds (`max_symbols`): a message that would
    /// make one more is refused a symbol, counted, and makes the feed
    /// [`suspect`](Feed::suspect) until the session changes or a snapshot
    /// merges.
    pub max_symbols: usize,
}

/// A timestamp (ns since midnight) at or past this, 25 hours (the longest
/// day, when clocks go back), is no time of the session: it neither
/// raises the watermark nor times its packet (not in the contract:
/// docs/itch.md). The 48-bit field reaches 78 hours, so one such
/// timestamp, corrupt or forged, would otherwise hold the watermark up to
/// three days ahead, `stale_at_source` silent the while.
pub const DAY_END_NS: u64 = 25 * 3_600 * 1_000_000_000;

impl Settings {
    /// The smallest of every bound, UTC, a fixed offset of 0: for tests of
    /// what runs a feed (its connection thread, its driver) where the
    /// feed's own behaviour does not matter.
    #[cfg(test)]
    pub(super) fn smallest() -> Settings {
        Settings {
            sequencing: sequencer::Settings {
                gap_timeout_ns: 1,
                max_held: 1,
                join_gap_max: 1,
            },
            timezone: jiff::tz::TimeZone::UTC,
            offset: OffsetMode::Fixed(0),
            offset_queue: 1,
            orders: 1,
            max_orders: 1,
            max_symbols: 1,
        }
    }
}

/// Trading hours, from system events and the end of session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hours {
    /// Trading hours (the state at the start of a session).
    Open,
    /// Before the start or after the end of system hours, or after the end
    /// of session.
    Closed,
}

/// Counters of what the messages meant (the stream's own are in
/// [`sequencer::Counters`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    /// Orders referenced but not live.
    pub unknown_orders: u64,
    /// BinaryFILE records that failed validation (not applied).
    pub invalid_records: u64,
    /// An add (or a replace's new reference) on a live reference, or an
    /// add with a side that is neither `B` nor `S`.
    pub anomalies: u64,
    /// Adds refused because the books held `max_orders` live orders.
    pub orders_refused: u64,
    /// Recovery answers not of the current session, ignored
    /// ([`Feed::on_datagram_line`]).
    pub recovery_wrong_session: u64,
    /// Messages refused a new symbol because the session held
    /// `max_symbols` (a directory message, or a first message of an
    /// unmapped locate, naming a stock not seen this session).
    pub symbols_refused: u64,
    /// Applied messages by type letter.
    pub by_type: [u64; 256],
}

impl Default for Counters {
    fn default() -> Counters {
        Counters {
            unknown_orders: 0,
            invalid_records: 0,
            anomalies: 0,
            orders_refused: 0,
            recovery_wrong_session: 0,
            symbols_refused: 0,
            by_type: [0; 256],
        }
    }
}

/// One symbol of the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SymbolState {
    /// The stock.
    pub stock: Symbol,
    /// The locate code that last mapped to it.
    pub locate: u16,
    /// The last trading state byte (`H`, `P`, `Q`, `T`, or whatever the
    /// last `H` carried), `None` before any.
    pub trading_state: Option<u8>,
    /// Nasdaq (market `Q`) operational halt in force.
    pub operational_halt: bool,
    /// The last message's raw 48-bit timestamp, `None` before any.
    pub last_timestamp: Option<u64>,
}

impl SymbolState {
    /// Halted, paused or quotation-only, or under an operational halt.
    pub fn halted(&self) -> bool {
        matches!(self.trading_state, Some(b'H' | b'P' | b'Q')) || self.operational_halt
    }
}

/// [`Feed::drain_touched`] loads a symbol's state and book entry this many
/// symbols ahead…
const TOUCHED_ENTRY_AHEAD: usize = 16;
/// …and its best levels this many (and hands the symbol this many ahead
/// to its caller).
pub const TOUCHED_AHEAD: usize = 8;

/// Locate codes (u16).
const LOCATES: usize = 1 << 16;
/// No symbol: an unmapped locate.
const NONE: u32 = u32::MAX;
/// No timestamp (they are 48-bit).
const NO_TIME: u64 = u64::MAX;
/// Locate codes per bit of [`State::mapped`].
const LOCATE_CHUNK: usize = 64;

/// Everything a message changes, apart from the sequencing.
#[derive(Debug)]
struct State {
    books: Books,
    symbols: Vec<SymbolState>,
    by_stock: U64Map<u32>,
    /// Symbol index by locate code.
    locates: Box<[u32; LOCATES]>,
    /// A bit per [`LOCATE_CHUNK`] locate codes: set when one of them was
    /// mapped since the last clear, which resets only those.
    mapped: [u64; LOCATES / LOCATE_CHUNK / 64],
    /// Most symbols a session holds.
    max_symbols: usize,
    /// A symbol was refused this session (`max_symbols`): messages of its
    /// locate change no book, so the feed is suspect until the session
    /// changes or a snapshot merges.
    symbols_full: bool,
    hours: Hours,
    /// An add was refused this session (`max_orders`): the books miss an
    /// order, so the feed is suspect until the session changes or a
    /// snapshot (whose books are whole) merges.
    refused: bool,
    counters: Counters,
    /// Epoch ns of the session date's midnight in the feed's zone.
    midnight: i128,
    /// Raw timestamp (ns since `midnight`) of the last message applied by
    /// the current call, [`NO_TIME`] before any: its source time is worked
    /// out once per call, by [`Feed::raise_watermark`].
    last_ts: u64,
    /// The same, of the last message applied by the current call whose
    /// time lies within the day ([`DAY_END_NS`]): the one the watermark
    /// rises to ([`NO_TIME`] before any). One past the day raises nothing,
    /// but does not cancel the rise to the messages before it.
    day_ts: u64,
    /// Symbols whose book top or trading state a message may have changed
    /// since the last [`Feed::drain_touched`], each once; kept only while
    /// `tracking` (a live feed publishes them).
    touched: Vec<u32>,
    /// Per symbol: listed in `touched`.
    is_touched: Vec<bool>,
    /// Per symbol: the stream sequence of the last message that named or
    /// changed it (kept while `tracking`, as `touched`).
    last_seq: Vec<u64>,
    /// The stream sequence of the message being applied.
    seq: u64,
    tracking: bool,
    /// What `--explain` records ([`Feed::watch`]), else `None`.
    log: Option<Box<Log>>,
}

impl State {
    /// An empty state, sized by `settings`.
    fn new(settings: &Settings) -> State {
        State {
            books: {
                let mut b = Books::with_capacity(settings.orders, 1024);
                b.set_max_orders(settings.max_orders);
                b
            },
            symbols: Vec::with_capacity(1024),
            by_stock: U64Map::with_capacity(1024, NONE),
            locates: Box::new([NONE; LOCATES]),
            mapped: [0; LOCATES / LOCATE_CHUNK / 64],
            max_symbols: settings.max_symbols,
            symbols_full: false,
            hours: Hours::Open,
            refused: false,
            counters: Counters::default(),
            midnight: 0,
            last_ts: NO_TIME,
            day_ts: NO_TIME,
            touched: Vec::with_capacity(1024),
            is_touched: Vec::with_capacity(1024),
            last_seq: Vec::with_capacity(1024),
            seq: 0,
            tracking: false,
            log: None,
        }
    }

    /// Takes a snapshot's books, symbols and locates from `staging`
    /// (glimpse G3.4 step 1), leaving it what this state had: symbols the
    /// spin lacks come back with their locate and name only (refused past
    /// `max_symbols`, as any new symbol), and locates the spin did not map
    /// keep their symbol. The hours are the spin's if it had a system event.
    fn adopt(&mut self, staging: &mut Staging) {
        let new = self;
        let old = &mut staging.state;
        std::mem::swap(&mut new.books, &mut old.books);
        std::mem::swap(&mut new.symbols, &mut old.symbols);
        std::mem::swap(&mut new.by_stock, &mut old.by_stock);
        std::mem::swap(&mut new.locates, &mut old.locates);
        std::mem::swap(&mut new.mapped, &mut old.mapped);
        std::mem::swap(&mut new.symbols_full, &mut old.symbols_full);
        std::mem::swap(&mut new.refused, &mut old.refused);
        if staging.system_event {
            std::mem::swap(&mut new.hours, &mut old.hours);
        }
        for s in &old.symbols {
            if new.by_stock.get(s.stock.key()).is_none() {
                new.symbol(s.stock, s.locate);
            }
        }
        for (w, &bits) in old.mapped.iter().enumerate() {
            let mut bits = bits;
            while bits != 0 {
                let chunk = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                for l in chunk * LOCATE_CHUNK..(chunk + 1) * LOCATE_CHUNK {
                    let o = old.locates[l];
                    if o == NONE || new.locates[l] != NONE {
                        continue;
                    }
                    let stock = old.symbols[o as usize].stock;
                    if let Some(i) = new.by_stock.get(stock.key()) {
                        new.map(l as u16, i);
                    }
                }
            }
        }
    }

    /// Drops the session's books and symbols (a new session). Costs what
    /// the session used (its orders, symbols and locate codes), not the
    /// tables' sizes: a sender starting a session per datagram pays for
    /// each only what its datagram added.
    fn clear(&mut self) {
        self.books.clear();
        self.symbols.clear();
        self.by_stock.clear();
        for (w, bits) in self.mapped.iter_mut().enumerate() {
            while *bits != 0 {
                let chunk = w * 64 + bits.trailing_zeros() as usize;
                *bits &= *bits - 1;
                #[cfg(test)]
                crate::test_work::add(LOCATE_CHUNK as u64);
                self.locates[chunk * LOCATE_CHUNK..][..LOCATE_CHUNK].fill(NONE);
            }
        }
        self.hours = Hours::Open;
        self.refused = false;
        self.symbols_full = false;
        self.touched.clear();
        self.is_touched.clear();
        self.last_seq.clear();
    }

    /// Notes that symbol `sym` may have changed, by the message being
    /// applied (a no-op unless tracking).
    #[inline(always)]
    fn touch(&mut self, sym: u32) {
        if !self.tracking || sym == NONE {
            return;
        }
        let i = sym as usize;
        if i >= self.is_touched.len() {
            // Amortised: grows with the session's symbols, not per message.
            self.is_touched.resize(i + 1, false);
            self.last_seq.resize(i + 1, 0);
        }
        self.last_seq[i] = self.seq;
        if !self.is_touched[i] {
            self.is_touched[i] = true;
            self.touched.push(sym);
        }
    }

    /// The symbol of `stock`, now mapped from `locate` (made if new);
    /// `NONE` when new and the session holds `max_symbols` already.
    fn symbol(&mut self, stock: Symbol, locate: u16) -> u32 {
        let i = match self.by_stock.get(stock.key()) {
            Some(i) => i,
            None if self.symbols.len() >= self.max_symbols => return self.refuse_symbol(),
            None => {
                let i = self.symbols.len() as u32;
                self.symbols.push(SymbolState {
                    stock,
                    locate,
                    trading_state: None,
                    operational_halt: false,
                    last_timestamp: None,
                });
                self.by_stock.insert(stock.key(), i);
                i
            }
        };
        self.symbols[i as usize].locate = locate;
        i
    }

    /// A new symbol refused for room: counted, and the feed suspect until
    /// the session changes or a snapshot merges. Returns `NONE`.
    #[cold]
    fn refuse_symbol(&mut self) -> u32 {
        self.counters.symbols_refused += 1;
        self.symbols_full = true;
        NONE
    }

    /// Maps `locate` to `sym` (`NONE`: unmapped).
    #[inline]
    fn map(&mut self, locate: u16, sym: u32) {
        let chunk = usize::from(locate) / LOCATE_CHUNK;
        self.mapped[chunk / 64] |= 1 << (chunk % 64);
        self.locates[usize::from(locate)] = sym;
    }

    /// Applies one message in sequence order (spec §3.3). The order
    /// messages, nearly all of a day, read their few fields straight from
    /// the bytes ([`fixed`]), and the types that change no state only their
    /// header; the rest (system events, the directory, trading actions and
    /// operational halts) are decoded whole ([`Body`]).
    #[inline(always)]
    fn apply(&mut self, m: Message<'_>) {
        if self.log.is_some() {
            return self.apply_logged(m);
        }
        let code = m.code();
        self.counters.by_type[code as usize] += 1;
        match code {
            msg_type::ADD_ORDER | msg_type::ADD_ORDER_MPID => {
                if let Some(b) = m.fixed::<36>() {
                    let Some(sym) = self.message_symbol(m, b) else {
                        return;
                    };
                    if sym != NONE {
                        let side = b[19];
                        let (shares, price) = (fixed::u32::<20, 36>(b), fixed::u32::<32, 36>(b));
                        self.add_order(sym, fixed::u64::<11, 36>(b), side, shares, price);
                    }
                    return self.applied(sym);
                }
            }
            msg_type::EXECUTED | msg_type::EXECUTED_WITH_PRICE | msg_type::CANCEL => {
                // The order and the shares lie at the same offsets in the three.
                if let Some(b) = m.fixed::<23>() {
                    let Some(sym) = self.message_symbol(m, b) else {
                        return;
                    };
                    self.reduce(fixed::u64::<11, 23>(b), fixed::u32::<19, 23>(b));
                    return self.applied(sym);
                }
            }
            msg_type::DELETE => {
                if let Some(b) = m.fixed::<19>() {
                    let Some(sym) = self.message_symbol(m, b) else {
                        return;
                    };
                    self.delete(fixed::u64::<11, 19>(b));
                    return self.applied(sym);
                }
            }
            msg_type::REPLACE => {
                if let Some(b) = m.fixed::<35>() {
                    let Some(sym) = self.message_symbol(m, b) else {
                        return;
                    };
                    let (original, new) = (fixed::u64::<11, 35>(b), fixed::u64::<19, 35>(b));
                    let (shares, price) = (fixed::u32::<27, 35>(b), fixed::u32::<31, 35>(b));
                    self.replace(original, new, shares, price);
                    return self.applied(sym);
                }
            }
            msg_type::TRADE
            | msg_type::CROSS_TRADE
            | msg_type::BROKEN_TRADE
            | msg_type::NOII
            | msg_type::RETAIL_INTEREST
            | msg_type::PRICE_DISCOVERY
            | msg_type::REG_SHO
            | msg_type::PARTICIPANT_POSITION
            | msg_type::MWCB_DECLINE
            | msg_type::MWCB_STATUS
            | msg_type::IPO_QUOTING
            | msg_type::LULD_COLLAR => {
                // Nothing changes but the symbol's time (and a first mapping).
                if let Some(b) = m.fixed::<HEADER_LEN>() {
                    let Some(sym) = self.message_symbol(m, b) else {
                        return;
                    };
                    return self.applied(sym);
                }
            }
            _ => {}
        }
        self.apply_decoded(m);
    }

    /// Notes the time of message `m`, whose first `N` bytes are `b`, and
    /// returns its symbol: its locate's, mapped from its stock when not
    /// mapped yet (a type with a stock), else `NONE`. `None` for locate 0:
    /// the message changes nothing more.
    #[inline(always)]
    fn message_symbol<const N: usize>(&mut self, m: Message<'_>, b: &[u8; N]) -> Option<u32> {
        self.note_time(fixed::u48::<5, N>(b));
        let locate = fixed::u16::<1, N>(b);
        if locate == 0 {
            return None;
        }
        let sym = self.locates[locate as usize];
        if sym != NONE {
            return Some(sym);
        }
        Some(self.map_locate(m, locate))
    }

    /// The raw timestamp of the message being applied.
    #[inline(always)]
    fn note_time(&mut self, ts: u64) {
        self.last_ts = ts;
        if ts < DAY_END_NS {
            self.day_ts = ts;
        }
    }

    /// After a message of symbol `sym`: the symbol's last timestamp (the
    /// message's, noted by [`message_symbol`](Self::message_symbol)), and
    /// its change noted.
    #[inline(always)]
    fn applied(&mut self, sym: u32) {
        if sym != NONE {
            self.symbols[sym as usize].last_timestamp = Some(self.last_ts);
            self.touch(sym);
        }
    }

    /// Maps `locate` to `m`'s stock when it has one; the symbol, `NONE`
    /// without a stock.
    #[cold]
    fn map_locate(&mut self, m: Message<'_>, locate: u16) -> u32 {
        let Some(stock) = m.stock() else {
            return NONE;
        };
        let sym = self.symbol(stock, locate);
        self.map(locate, sym);
        sym
    }

    /// Applies a message of any type, decoded whole (after its type was
    /// counted).
    fn apply_decoded(&mut self, m: Message<'_>) {
        if let Some(ts) = m.timestamp() {
            self.note_time(ts);
        }
        let locate = m.locate();
        let body = m.body();
        if let Body::SystemEvent { code } = body {
            match code {
                b'O' | b'E' | b'C' => self.hours = Hours::Closed,
                b'S' => self.hours = Hours::Open,
                _ => {}
            }
        }
        if locate == 0 || !m.is_known() {
            return;
        }
        // The directory always maps; a message with a stock maps a locate
        // not mapped yet.
        let mut sym = self.locates[locate as usize];
        if m.code() == msg_type::STOCK_DIRECTORY || sym == NONE {
            if let Some(stock) = m.stock() {
                sym = self.symbol(stock, locate);
                self.map(locate, sym);
            }
        }
        match body {
            Body::AddOrder {
                order,
                side,
                shares,
                price,
                ..
            } if sym != NONE => self.add_order(sym, order, side, shares, price),
            Body::Executed { order, shares, .. }
            | Body::ExecutedWithPrice { order, shares, .. }
            | Body::Cancel { order, shares } => self.reduce(order, shares),
            Body::Delete { order } => self.delete(order),
            Body::Replace {
                original,
                new,
                shares,
                price,
            } => self.replace(original, new, shares, price),
            Body::TradingAction { state, .. } if sym != NONE => {
                self.symbols[sym as usize].trading_state = Some(state);
            }
            Body::OperationalHalt { market, action, .. } if sym != NONE && market == b'Q' => {
                self.symbols[sym as usize].operational_halt = action == b'H';
            }
            _ => {}
        }
        if sym != NONE {
            self.symbols[sym as usize].last_timestamp = m.timestamp();
            self.touch(sym);
        }
    }

    /// Add Order (`A`, `F`) to the book of symbol `sym`.
    #[inline(always)]
    fn add_order(&mut self, sym: u32, order: u64, side: u8, shares: u32, price: u32) {
        match Side::from_code(side) {
            Some(side) => {
                let o = Order {
                    book: sym,
                    price,
                    shares,
                    side,
                };
                match self.books.add(order, o) {
                    Ok(None) => {}
                    Ok(Some(old)) => {
                        self.counters.anomalies += 1;
                        self.touch(old.book);
                    }
                    Err(Full) => self.refuse(),
                }
            }
            None => self.counters.anomalies += 1,
        }
    }

    /// An add refused for room: counted, and the feed suspect from here
    /// until the session changes or a snapshot merges (the first refusal
    /// is an event).
    #[cold]
    fn refuse(&mut self) {
        self.counters.orders_refused += 1;
        self.refused = true;
    }

    /// Executed (`E`, `C`) or Cancel (`X`): `shares` fewer.
    #[inline(always)]
    fn reduce(&mut self, order: u64, shares: u32) {
        let o = self.books.reduce(order, shares);
        self.counters.unknown_orders += o.is_none() as u64;
        if let Some(o) = o {
            self.touch(o.book);
        }
    }

    /// Delete (`D`).
    #[inline(always)]
    fn delete(&mut self, order: u64) {
        let o = self.books.delete(order);
        self.counters.unknown_orders += o.is_none() as u64;
        if let Some(o) = o {
            self.touch(o.book);
        }
    }

    /// Replace (`U`).
    #[inline(always)]
    fn replace(&mut self, original: u64, new: u64, shares: u32, price: u32) {
        match self.books.replace(original, new, shares, price) {
            None => self.counters.unknown_orders += 1,
            Some((o, replaced)) => {
                self.counters.anomalies += replaced.is_some() as u64;
                self.touch(o.book);
                if let Some(r) = replaced {
                    self.touch(r.book);
                }
            }
        }
    }
}

impl State {
    /// [`file_timestamp`], where an Add Order whose stock field holds the
    /// stock its locate maps to passes without the symbol check: that stock
    /// passed it when it was mapped.
    #[inline(always)]
    fn record_timestamp(&self, record: &[u8]) -> Option<u64> {
        if let Some(b) = record.first_chunk::<36>() {
            if b[0] == msg_type::ADD_ORDER {
                let sym = self.locates[fixed::u16::<1, 36>(b) as usize];
                let stock = u64::from_le_bytes(fixed::array::<24, 8, 36>(b));
                if self
                    .symbols
                    .get(sym as usize)
                    .is_some_and(|s| s.stock.key() == stock)
                {
                    return Some(fixed::u48::<5, 36>(b));
                }
            }
        }
        file_timestamp(record)
    }
}

/// The sequencer hands the state each message in sequence order.
impl Apply for State {
    #[inline(always)]
    fn apply(&mut self, seq: u64, m: Message<'_>) {
        self.seq = seq;
        State::apply(self, m)
    }
}

impl State {
    /// Starts loading what message `bytes` will touch when it is applied, a
    /// few messages from now, so that the cache misses of consecutive
    /// messages overlap. `far`: the first stage (the named order's slot, the
    /// symbol's and the book's entries); else the second (the book's best levels, whose
    /// address the entry holds). Any bytes are safe here: a message that is
    /// short or unchecked prefetches something harmless or nothing.
    #[inline]
    fn prefetch(&self, bytes: &[u8], far: bool) {
        let (Some(&code), Some(locate)) = (bytes.first(), bytes.get(1..3)) else {
            return;
        };
        let sym = self.locates[usize::from(u16::from_be_bytes([locate[0], locate[1]]))];
        if sym == NONE {
            return;
        }
        if !far {
            self.books.prefetch_levels(sym);
            return;
        }
        // Every message with a symbol notes its time there.
        if let Some(s) = self.symbols.get(sym as usize) {
            prefetch(s);
        }
        if let (
            msg_type::ADD_ORDER
            | msg_type::ADD_ORDER_MPID
            | msg_type::EXECUTED
            | msg_type::EXECUTED_WITH_PRICE
            | msg_type::CANCEL
            | msg_type::DELETE
            | msg_type::REPLACE,
            Some(order),
        ) = (code, bytes.get(11..19))
        {
            let order = u64::from_be_bytes(order.try_into().unwrap_or([0; 8]));
            self.books.prefetch_order(order, sym);
        }
    }

    /// [`apply`](Self::apply), recording what it did to the log: system
    /// events, and the watched symbol's halts and the order messages that
    /// crossed, uncrossed, emptied or first filled its book.
    #[cold]
    fn apply_logged(&mut self, m: Message<'_>) {
        let Some(mut log) = self.log.take() else {
            return;
        };
        let book = |s: &State| log.watch.and_then(|w| s.by_stock.get(w.key()));
        let before = book(self).map(|i| self.books.settled().top(i));
        let body = m.body();
        let reference = match body {
            Body::Executed { order, .. }
            | Body::ExecutedWithPrice { order, .. }
            | Body::Cancel { order, .. }
            | Body::Delete { order } => Some(order),
            Body::Replace { original, .. } => Some(original),
            _ => None,
        };
        let was = reference.and_then(|r| self.books.order(r));
        let (refused, symbols_full) = (self.refused, self.symbols_full);
        self.apply(m);
        if let (false, true, Body::AddOrder { order, .. }) = (refused, self.refused, body) {
            log.events.push(Event::OrdersRefused {
                order,
                live: self.books.len() as u64,
            });
        }
        if let (false, true, Some(stock)) = (symbols_full, self.symbols_full, m.stock()) {
            log.events.push(Event::SymbolsRefused {
                stock,
                symbols: self.symbols.len() as u64,
            });
        }
        let timestamp = m.timestamp().unwrap_or(0);
        // The symbol the message was applied to: its locate's (mapped by
        // now if it ever will be), whatever its `stock` field names.
        let target = match m.locate() {
            0 => NONE,
            l => self.locates[usize::from(l)],
        };
        let watched = target != NONE && Some(target) == book(self);
        let e = match body {
            Body::SystemEvent { code } => Some(Event::SystemEvent { code, timestamp }),
            Body::TradingAction {
                stock,
                state,
                reason,
            } if watched => Some(Event::TradingAction {
                stock,
                state,
                reason,
                timestamp,
            }),
            Body::OperationalHalt {
                stock,
                market,
                action,
            } if watched => Some(Event::OperationalHalt {
                stock,
                market,
                action,
                timestamp,
            }),
            _ => None,
        };
        log.events.extend(e);
        if let (Some(i), Some(stock)) = (book(self), log.watch) {
            let before = before.unwrap_or_default();
            let after = self.books.settled().top(i);
            let moved = event::crossed(&before) != event::crossed(&after)
                || event::empty(&before) != event::empty(&after);
            let order = match body {
                Body::AddOrder {
                    order,
                    shares,
                    price,
                    ..
                }
                | Body::Replace {
                    new: order,
                    shares,
                    price,
                    ..
                }
                | Body::ExecutedWithPrice {
                    order,
                    shares,
                    price,
                    ..
                } => Some((order, shares, Some(price))),
                Body::Executed { order, shares, .. } | Body::Cancel { order, shares } => {
                    Some((order, shares, None))
                }
                Body::Delete { order } => Some((order, 0, None)),
                _ => None,
            };
            if let (true, Some((order, shares, price))) = (moved, order) {
                let change = OrderChange {
                    code: m.code(),
                    order,
                    resting: self.books.order(order).or(was),
                    shares,
                    price,
                };
                log.events.push(Event::Book {
                    stock,
                    change,
                    before,
                    after,
                    timestamp,
                });
            }
        }
        self.log = Some(log);
    }
}

/// One ITCH feed.
#[derive(Debug)]
pub struct Feed {
    settings: Settings,
    seq: Sequencer,
    state: State,
    clock: OffsetEstimator,
    /// Local arrival of the last proof of life, ns since the Unix epoch.
    last_alive: Option<u64>,
    /// Latest source time known to be complete from the messages
    /// applied, epoch ns.
    watermark: Option<i128>,
    /// Arrival of the latest heartbeat that proved the feed alive, ns since
    /// the Unix epoch: its part of the source watermark, `t − offset`, is
    /// taken with the offset in force when the watermark is read
    /// ([`crate::clock::heartbeat_watermark`]).
    heartbeat_at: Option<u64>,
    /// Line A's and line B's copies of each packet compared.
    lines: LineCheck,
    /// An end of session came while awaiting a snapshot: the hours stay
    /// closed through the merge (glimpse G7.3).
    closed_awaiting: bool,
    /// A BinaryFILE's first valid record's raw timestamp within the day,
    /// and the latest such (ns since midnight): the time it spans.
    file_span: Option<(u64, u64)>,
    /// A BinaryFILE's latest valid record's raw timestamp so far, and the
    /// records stamped before it (each applied at its stamp: checks
    /// between answered from the state then) with the largest step, ns.
    file_order: (u64, u64, u64),
}

impl Feed {
    /// A feed before its first packet.
    pub fn new(settings: Settings) -> Feed {
        Feed {
            seq: Sequencer::new(settings.sequencing),
            state: State::new(&settings),
            clock: OffsetEstimator::new(settings.offset, settings.offset_queue),
            last_alive: None,
            watermark: None,
            file_span: None,
            file_order: (0, 0, 0),
            heartbeat_at: None,
            lines: LineCheck::default(),
            closed_awaiting: false,
            settings,
        }
    }

    /// Lets GLIMPSE snapshots cure the stream (glimpse G3): `triggers`
    /// may start one by themselves, an operator's request always may.
    pub fn enable_snapshots(&mut self, triggers: sequencer::Triggers) {
        self.seq.enable_snapshots(triggers);
    }

    /// An operator's request for a snapshot (glimpse G3.1): the feed
    /// starts awaiting one unless it has no session yet, snapshots are not
    /// enabled, or it awaits one already. Returns whether it started.
    pub fn request_snapshot(&mut self) -> bool {
        self.seq.request_snapshot()
    }

    /// An empty staging state for a snapshot spin, sized as this feed's.
    pub fn staging(&self) -> Staging {
        Staging::new(&self.settings)
    }

    /// Merges a finished snapshot (glimpse G3.4) at `t`, the arrival of
    /// the bytes that completed it (ns since the Unix epoch, local clock):
    /// every symbol takes the staging's book, trading state, halt and last
    /// timestamp; a symbol the spin lacks keeps its name and locate with an
    /// empty book and no state; locates the spin did not map keep their
    /// mapping; the hours are the spin's if it had a system event. Then
    /// the stream goes on from `n`, the first message the snapshot does
    /// not reflect. `staging` is left holding what the feed held before
    /// (to be dropped off the receive thread).
    /// Returns what the bounds (`max_orders`, `max_symbols`) refused, the
    /// feed suspect for it.
    pub fn merge_snapshot(&mut self, staging: &mut Staging, n: u64, t: u64) -> Refused {
        let pipelined = self.state.books.pipelined();
        self.state.books.pipeline(false);
        let by_spin = staging.refused();
        self.state.adopt(staging);
        let kept = self.state.refused || self.state.symbols_full;
        // What the spin refused for room is counted as the stream's own
        // refusals are (the spin counts nothing else: glimpse G3.4): the
        // feed stays suspect for it, and an operator sees why.
        let spun = &mut staging.state.counters;
        let counters = &mut self.state.counters;
        counters.orders_refused += std::mem::take(&mut spun.orders_refused);
        counters.symbols_refused += std::mem::take(&mut spun.symbols_refused);
        let (orders, symbols) = (self.state.refused, self.state.symbols_full);
        if let (Some(log), true) = (&mut self.state.log, orders || symbols) {
            log.events.push(Event::SnapshotRefused { orders, symbols });
        }
        if self.closed_awaiting {
            self.state.hours = Hours::Closed;
        }
        self.closed_awaiting = false;
        // Every symbol is published again.
        if self.state.tracking {
            self.state.touched.clear();
            self.state.is_touched.clear();
            self.state.last_seq.clear();
            self.state.seq = n.saturating_sub(1);
            for i in 0..self.state.symbols.len() as u32 {
                self.state.touch(i);
            }
        }
        let Feed { seq, state, .. } = self;
        state.last_ts = NO_TIME;
        state.day_ts = NO_TIME;
        seq.merge(n, t, state);
        self.raise_watermark();
        self.state.books.pipeline(pipelined);
        match () {
            _ if by_spin => Refused::Spin,
            _ if kept => Refused::Kept,
            _ if self.state.refused || self.state.symbols_full => Refused::Held,
            _ => Refused::No,
        }
    }

    /// Ends a wait for a snapshot that will not come (glimpse G3.3, giving
    /// up) at `t`: held messages are released as after a merge from the
    /// stream's `next`, no state replaced ([`Sequencer::release`]: what the
    /// wait skipped for room is lost, and the feed suspect for it).
    pub fn release_snapshot(&mut self, t: u64) {
        self.closed_awaiting = false;
        let Feed { seq, state, .. } = self;
        state.last_ts = NO_TIME;
        state.day_ts = NO_TIME;
        seq.release(t, state);
        self.raise_watermark();
    }

    /// Stops (or lets again) triggers starting snapshots by themselves.
    pub fn set_snapshot_auto(&mut self, on: bool) {
        self.seq.set_auto(on);
    }

    /// The trigger that started a wait for a snapshot since the last call.
    pub fn take_trigger(&mut self) -> Option<sequencer::Trigger> {
        self.seq.take_trigger()
    }

    /// Gives up gaps whose deadline is strictly before `t` (ns since the
    /// Unix epoch, local clock), applying what they unblock. Called by
    /// [`on_datagram`](Self::on_datagram); call it before every check.
    pub fn expire(&mut self, t: u64) {
        let Feed { seq, state, .. } = self;
        state.last_ts = NO_TIME;
        state.day_ts = NO_TIME;
        if seq.expire_into(t, state) > 0 {
            self.raise_watermark();
        }
    }

    /// One datagram routed to the feed (a line or the recovery channel),
    /// arrived at `t` (ns since the Unix epoch, local clock). Gaps past
    /// their deadline are given up first, whether or not it is valid.
    pub fn on_datagram(&mut self, payload: &[u8], t: u64) -> Result<Outcome, Reject> {
        self.expire(t);
        let packet = self.checked(payload)?;
        Ok(self.on_packet(&packet, t))
    }

    /// Validates `payload` ([`Packet::new_checked`]). A data packet that
    /// carries news (not line B's copy of one applied) has the memory its
    /// messages will touch loaded in the same walk, in two stages: every
    /// message's first during the validity walk, then every message's
    /// second, so that the loads of each stage overlap and all are on
    /// their way before any message is applied.
    #[inline]
    fn checked<'a>(&self, payload: &'a [u8]) -> Result<Packet<&'a [u8]>, Reject> {
        let news = super::mold::data_end(payload)
            .is_some_and(|end| self.seq.next().is_none_or(|next| end > next));
        if !news {
            return Packet::new_checked(payload);
        }
        let state = &self.state;
        let packet = Packet::new_checked_with(payload, |m| state.prefetch(m, true))?;
        // The second stage loads only levels, which a level thread loads
        // itself.
        if !state.books.pipelined() {
            for (_, m) in packet.messages() {
                state.prefetch(m.bytes(), false);
            }
        }
        Ok(packet)
    }

    /// [`on_datagram`](Self::on_datagram) for a datagram that came on
    /// `line` (0 = A, 1 = B, 2 = the recovery channel): a data packet's
    /// second copy on the other line is also compared with the first
    /// ([`LineCheck`]). Returns whether it differed, with the outcome.
    ///
    /// The lines alone decide the session. An answer on the recovery
    /// channel whose session is not the current one is counted
    /// (`recovery_wrong_session`) and has no other effect: one forged (or
    /// misdirected) answer naming another session must not drop the books
    /// and turn the real session's packets stale. One of an earlier session
    /// (the server still on yesterday's, or a late answer) also counts in
    /// `stale_session`, as spec §3.1 says; one of a session the lines have
    /// not reached yet is ignored until they have.
    pub fn on_datagram_line(
        &mut self,
        payload: &[u8],
        line: usize,
        t: u64,
    ) -> Result<(Outcome, bool), Reject> {
        self.expire(t);
        let packet = self.checked(payload)?;
        if line == RECOVERY_LINE && self.seq.session() != Some(packet.session()) {
            return Ok((self.wrong_session_answer(&packet, t), false));
        }
        self.lines.prefetch(line, &packet);
        let out = self.on_packet(&packet, t);
        // A packet of an earlier session has no effect but its count
        // (spec §3.1): not compared, not a line copy. Nor is one that
        // starts a session (the check's entries may hold a session too old
        // to be remembered, with the same name).
        let mismatch =
            !out.stale_session && !out.new_session && self.lines.on_packet(line, &packet);
        Ok((out, mismatch))
    }

    /// A recovery answer of another session than the current one (see
    /// [`on_datagram_line`](Self::on_datagram_line)).
    #[cold]
    fn wrong_session_answer(&mut self, packet: &Packet<&[u8]>, t: u64) -> Outcome {
        self.state.counters.recovery_wrong_session += 1;
        if self.seq.classify(packet.session()) == SessionOf::Past {
            return self.on_packet(packet, t);
        }
        Outcome::default()
    }

    /// Whether `datagram` would start a new session (every book and symbol
    /// dropped) if it is valid: judged from its header alone.
    #[inline]
    pub fn starts_session(&self, datagram: &[u8]) -> bool {
        datagram.first_chunk::<SESSION_LEN>().is_some_and(|s| {
            matches!(
                self.seq.classify(Session(*s)),
                SessionOf::First | SessionOf::Next
            )
        })
    }

    /// The A/B content check's findings.
    pub fn line_check(&self) -> &LineCheck {
        &self.lines
    }

    fn on_packet(&mut self, p: &Packet<&[u8]>, t: u64) -> Outcome {
        let session = p.session();
        let of = self.seq.classify(session);
        if matches!(of, SessionOf::First | SessionOf::Next) {
            if let Some(log) = &mut self.state.log {
                log.events.push(Event::NewSession { session });
            }
            self.state.clear();
            self.state.midnight = midnight(&self.settings.timezone, t);
        }
        let Feed { seq, state, .. } = self;
        state.last_ts = NO_TIME;
        state.day_ts = NO_TIME;
        let out = seq.on_packet_of(p, of, t, state);
        if let Some(log) = &mut state.log {
            let packet = PacketInfo {
                session,
                sequence: p.sequence(),
                count: p.count(),
            };
            log.events.push(Event::Packet {
                packet,
                outcome: out,
            });
        }
        self.time_packet(p, &out, t);
        if out.stale_session {
            return out;
        }
        crate::clock::forget_beat_ahead(&mut self.heartbeat_at, t);
        self.raise_watermark();
        // A new session forgets the old one's end first: its own end, in
        // the same packet (one that starts a wait), closes the hours
        // through the merge.
        if out.new_session {
            self.closed_awaiting = false;
        }
        if out.end_of_session {
            self.state.hours = Hours::Closed;
            self.closed_awaiting |= self.seq.awaiting();
        }
        if out.alive {
            self.last_alive = Some(t);
            if p.kind() == Kind::Heartbeat {
                self.heartbeat_at = Some(self.heartbeat_at.map_or(t, |h| h.max(t)));
            }
        }
        out
    }

    /// Feeds the clock offset with a data packet's send time (the source
    /// time of its last message with a timestamp, spec itch50 §3.1): every
    /// data packet of the current session is a sample, recovery answers
    /// and packets of duplicates only (line B's copy, a late answer)
    /// included; a packet of an earlier session has no effect. A packet
    /// held behind a gap counts at its arrival, when its delay is measured
    /// (waiting for the fill would add the wait to it). Within a window
    /// more samples only lower its minimum; a late copy alone in one
    /// raises it by its delay (docs/itch.md).
    #[inline]
    fn time_packet(&mut self, p: &Packet<&[u8]>, out: &Outcome, t: u64) {
        let accepted = matches!(p.kind(), Kind::Data(_)) && !out.stale_session;
        let ts = p.last_timestamp().filter(|&ts| ts < DAY_END_NS);
        if let (true, Some(ts)) = (accepted, ts) {
            let send = self.state.midnight + ts as i128;
            self.clock
                .on_packet(t, send.clamp(0, u64::MAX as i128) as u64);
        }
    }

    /// Starts a BinaryFILE replay of the session on `date` (midnight in the
    /// feed's zone is where source times count from).
    pub fn start_file(&mut self, date: jiff::civil::Date) {
        self.state.clear();
        self.state.midnight = date
            .to_zoned_datetime(self.settings.timezone.clone())
            .map(|z| z.timestamp().as_nanosecond())
            .unwrap_or(0);
    }

    /// The source times (ns since the Unix epoch) of a BinaryFILE's first
    /// valid record and its latest, of those within the day; `None` before
    /// any.
    pub fn file_span(&self) -> Option<(u64, u64)> {
        self.file_span
            .map(|(first, last)| (self.source_time(first), self.source_time(last)))
    }

    /// A BinaryFILE's valid records stamped before one applied earlier,
    /// and the largest such step back, ns (a replay counts and tells them
    /// as a capture's datagrams out of time order).
    pub fn file_steps_back(&self) -> (u64, u64) {
        (self.file_order.1, self.file_order.2)
    }

    /// Record `index` (0-based) of a BinaryFILE (spec §5): sequence
    /// `index + 1`. A valid record is applied at its own source time, which
    /// is also its arrival (the offset is 0); returns that time, ns since the
    /// Unix epoch. An invalid one (shorter than the 11-byte header, or
    /// failing a message check) is counted and stepped over: `None`.
    pub fn on_file_record(&mut self, index: u64, record: &[u8]) -> Option<u64> {
        let valid = self.file_batch().record(index, record);
        valid.then_some(self.last_alive).flatten()
    }

    /// Applies BinaryFILE records back to back, each as
    /// [`on_file_record`](Self::on_file_record) would: the sequencer's
    /// position, the source watermark and the last proof of life are
    /// brought up to date once, when the batch is dropped (nothing can read
    /// the feed in between).
    pub fn file_batch(&mut self) -> FileBatch<'_> {
        self.state.last_ts = NO_TIME;
        self.state.day_ts = NO_TIME;
        FileBatch {
            feed: self,
            records: 0,
            last_index: 0,
            max_ts: None,
            last_in_day: None,
        }
    }

    /// A BinaryFILE record's source time (its arrival), ns since the Unix
    /// epoch; `None` when it is shorter than the 11-byte header, fails a
    /// message check, or is stamped past the day (no time of the session).
    pub fn record_time(&self, record: &[u8]) -> Option<u64> {
        // (A stamp past the day is no time of the session: none.)
        file_timestamp(record)
            .filter(|&ts| ts < DAY_END_NS)
            .map(|ts| self.source_time(ts))
    }

    /// Epoch ns of raw timestamp `ts` (ns since the session's midnight),
    /// clamped to `u64`.
    fn source_time(&self, ts: u64) -> u64 {
        (self.state.midnight + ts as i128).clamp(0, u64::MAX as i128) as u64
    }

    /// Raises the watermark to the source time of the last message the
    /// call applied with a time within the day, if any.
    fn raise_watermark(&mut self) {
        self.state.last_ts = NO_TIME;
        let ts = std::mem::replace(&mut self.state.day_ts, NO_TIME);
        if ts != NO_TIME {
            self.raise_watermark_to(ts);
        }
    }

    /// Raises the watermark to raw timestamp `ts`'s source time; one past
    /// the day ([`DAY_END_NS`]) raises nothing.
    fn raise_watermark_to(&mut self, ts: u64) {
        if ts >= DAY_END_NS {
            return;
        }
        let s = self.state.midnight + ts as i128;
        self.watermark = Some(self.watermark.map_or(s, |w| w.max(s)));
    }

    /// The feed, to read its books (verdicts, symbols, tops): every change
    /// queued on the books' thread applied first
    /// ([`pipeline_books`](Self::pipeline_books)). The only way to read
    /// them, so that reading books not yet settled does not compile, and
    /// nothing can apply a message while the view lives:
    ///
    /// ```compile_fail,E0599
    /// # use tickguard_engine::protocol::itch50::feed::Feed;
    /// # use tickguard_engine::symbol::Symbol;
    /// fn book(feed: &Feed, stock: Symbol) {
    ///     let _ = feed.symbol(stock); // no: only `settled` reads books
    /// }
    /// ```
    ///
    /// ```compile_fail,E0499
    /// # use tickguard_engine::protocol::itch50::feed::Feed;
    /// # use tickguard_engine::symbol::Symbol;
    /// fn book(feed: &mut Feed, stock: Symbol, datagram: &[u8], t: u64) {
    ///     let settled = feed.settled();
    ///     let _ = feed.on_datagram(datagram, t); // no: the view borrows the feed
    ///     let _ = settled.symbol(stock);
    /// }
    /// ```
    ///
    /// ```
    /// # use tickguard_engine::protocol::itch50::feed::Feed;
    /// # use tickguard_engine::symbol::Symbol;
    /// fn book(feed: &mut Feed, stock: Symbol, datagram: &[u8], t: u64) {
    ///     let _ = feed.on_datagram(datagram, t);
    ///     let _ = feed.settled().symbol(stock);
    /// }
    /// ```
    pub fn settled(&mut self) -> Settled<'_> {
        let Feed {
            seq,
            state,
            clock,
            last_alive,
            watermark,
            heartbeat_at,
            ..
        } = self;
        let State {
            books,
            symbols,
            by_stock,
            hours,
            refused,
            symbols_full,
            ..
        } = state;
        Settled {
            levels: books.settled(),
            symbols,
            by_stock,
            seq,
            clock,
            hours: *hours,
            refused: *refused || *symbols_full,
            last_alive: *last_alive,
            watermark: crate::clock::heartbeat_watermark(*watermark, *heartbeat_at, clock.offset()),
        }
    }

    /// Applies the books' price levels on a second thread from now on
    /// (`on`; a replay), or on the calling thread again ([`Books::pipeline`]).
    /// Between the two, the books are read through
    /// [`settled`](Self::settled), which brings the levels back. Stays off
    /// for a feed that reads its tops as it applies: one that tracks
    /// touched symbols (a live feed, publishing) or is watched
    /// (`--explain`).
    pub fn pipeline_books(&mut self, on: bool) {
        let reads_as_it_goes = self.state.tracking || self.state.log.is_some();
        self.state.books.pipeline(on && !reads_as_it_goes);
    }

    /// True while the books' levels are applied on their own thread
    /// ([`pipeline_books`](Self::pipeline_books) asked for it and it
    /// started).
    pub fn books_pipelined(&self) -> bool {
        self.state.books.pipelined()
    }

    /// Brings the books' levels back from their thread, every change
    /// applied (a no-op unless [pipelined](Self::pipeline_books)).
    pub fn settle(&mut self) {
        self.state.books.settle();
    }

    /// Keeps (or stops keeping) the list of symbols messages change, for
    /// [`drain_touched`](Self::drain_touched). Off by default (replay).
    /// Tracking applies the books on the calling thread.
    pub fn track_touched(&mut self, on: bool) {
        if on {
            self.state.books.pipeline(false);
        }
        self.state.tracking = on;
        self.state.touched.clear();
        self.state.is_touched.clear();
        self.state.last_seq.clear();
    }

    /// The symbols [`drain_touched`](Self::drain_touched) would call back
    /// now, in its order (their indices in [`Settled::symbols`]).
    pub fn touched(&self) -> &[u32] {
        &self.state.touched
    }

    /// Calls `f` with each symbol that messages may have changed since the
    /// last call (its index in [`Settled::symbols`], state, top of
    /// book, and the stream sequence of the last message that named or
    /// changed it), each once, and forgets them; and with the symbol it
    /// will be called with a few calls later, if any, so that it can start
    /// loading what it will write then. A new session forgets the old
    /// session's symbols without calling `f`.
    pub fn drain_touched(&mut self, mut f: impl FnMut(u32, &SymbolState, Top, u64, Option<u32>)) {
        let State {
            touched,
            is_touched,
            last_seq,
            symbols,
            books,
            ..
        } = &mut self.state;
        // A cycle's symbols are read long after their last message: each
        // one's state, book entry and best levels are loaded some symbols
        // ahead, as a run of messages loads them.
        for (k, &i) in touched.iter().enumerate() {
            if let Some(&a) = touched.get(k + TOUCHED_ENTRY_AHEAD) {
                if let Some(s) = symbols.get(a as usize) {
                    prefetch(s);
                }
                books.prefetch_book(a);
            }
            let ahead = touched.get(k + TOUCHED_AHEAD).copied();
            if let Some(a) = ahead {
                books.prefetch_levels(a);
            }
            is_touched[i as usize] = false;
            // Tracking keeps the levels on this thread: settled already.
            let top = books.settled().top(i);
            f(i, &symbols[i as usize], top, last_seq[i as usize], ahead);
        }
        touched.clear();
    }

    /// Starts recording what the feed does ([`event`]): the stream's gaps,
    /// sessions, packets and system events, and `stock`'s halts and the
    /// order messages that cross, uncross, empty or first fill its book.
    /// Watching applies the books on the calling thread.
    pub fn watch(&mut self, stock: Symbol) {
        self.state.books.pipeline(false);
        self.state.log = Some(Box::new(Log {
            watch: Some(stock),
            events: Vec::new(),
        }));
        self.seq.record(true);
    }

    /// Moves the events recorded since the last call to the end of `into`:
    /// the stream's gap events first, then the rest in order.
    pub fn take_events(&mut self, into: &mut Vec<Event>) {
        self.seq.take_events(into);
        if let Some(log) = &mut self.state.log {
            into.append(&mut log.events);
        }
    }

    /// The clock stepped back to `now` (live: the receive loop's; replay:
    /// the feed's capture stamps): see [`Sequencer::on_clock_stepped_back`].
    pub fn on_clock_stepped_back(&mut self, now: u64) {
        self.seq.on_clock_stepped_back(now);
    }

    /// The stream's sequencing.
    pub fn sequencer(&self) -> &Sequencer {
        &self.seq
    }

    /// The feed's books cannot be trusted: the stream is suspect (a gap
    /// open or given up, or a mid-session join; spec §3.2), or an add was
    /// refused this session for room (`max_orders`).
    pub fn suspect(&self) -> bool {
        self.seq.suspect() || self.state.refused || self.state.symbols_full
    }

    /// A symbol was refused this session because the session held
    /// `max_symbols` symbols.
    pub fn symbols_refused(&self) -> bool {
        self.state.symbols_full
    }

    /// An add was refused this session because the books held
    /// `max_orders` live orders.
    pub fn orders_refused(&self) -> bool {
        self.state.refused
    }

    /// What the messages meant.
    pub fn counters(&self) -> &Counters {
        &self.state.counters
    }

    /// Trading hours.
    pub fn hours(&self) -> Hours {
        self.state.hours
    }

    /// The current session.
    pub fn session(&self) -> Option<Session> {
        self.seq.session()
    }

    /// Local arrival of the last proof of life.
    pub fn last_alive(&self) -> Option<u64> {
        self.last_alive
    }

    /// Latest source time known to be complete, epoch ns.
    pub fn source_watermark(&self) -> Option<i128> {
        crate::clock::heartbeat_watermark(self.watermark, self.heartbeat_at, self.clock.offset())
    }

    /// The clock offset (local − exchange), ns.
    pub fn offset(&self) -> i128 {
        self.clock.offset()
    }

    /// Samples the clock-offset estimator merged for room.
    pub fn offset_merges(&self) -> u64 {
        self.clock.merges()
    }
}

/// What a snapshot merge's bounds (`max_orders`, `max_symbols`) refused
/// ([`Feed::merge_snapshot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Nothing.
    No,
    /// Some of the spin's orders or symbols: it held more than the bounds.
    Spin,
    /// Some of the feed's own symbols the spin lacked, kept with empty
    /// books (glimpse G3.4): with the spin's, more than `max_symbols`.
    Kept,
    /// Some orders or symbols of the messages held while awaiting, applied
    /// after the merge: the stream's own, as any message's.
    Held,
}

/// The books and symbols a GLIMPSE spin builds, apart from the feed
/// (glimpse G3): each spin message applied as the stream's would be
/// (spec itch50 §3.3), in any order of types. Built on the snapshot
/// connection's thread, merged on the receive thread
/// ([`Feed::merge_snapshot`]).
#[derive(Debug)]
pub struct Staging {
    state: State,
    /// The spin had a system event: its hours replace the feed's.
    system_event: bool,
}

impl Staging {
    /// An empty staging state, sized by `settings`.
    pub fn new(settings: &Settings) -> Staging {
        Staging {
            state: State::new(settings),
            system_event: false,
        }
    }

    /// The spin held more orders or symbols than the feed's bounds
    /// (`max_orders`, `max_symbols`): some were refused.
    pub fn refused(&self) -> bool {
        self.state.refused || self.state.symbols_full
    }

    /// Applies one spin message (valid: a known type checked by
    /// [`message::check`](super::message::check), or any unknown type).
    /// A symbol's last timestamp is the latest of its messages', so that
    /// the order of the spin does not matter (glimpse G7.12).
    pub fn apply(&mut self, m: Message<'_>) {
        self.system_event |= m.code() == msg_type::SYSTEM_EVENT;
        let locate = usize::from(m.locate());
        let state = &mut self.state;
        let before = state.locates[locate];
        let prev = state
            .symbols
            .get(before as usize)
            .and_then(|s| s.last_timestamp);
        state.apply(m);
        if state.locates[locate] == before {
            if let Some(s) = state.symbols.get_mut(before as usize) {
                s.last_timestamp = s.last_timestamp.max(prev);
            }
        }
    }

    /// Live orders in its books.
    pub fn orders(&self) -> usize {
        self.state.books.len()
    }

    /// Symbols it holds.
    pub fn symbols(&self) -> usize {
        self.state.symbols.len()
    }

    /// Empties it for the next spin, keeping its memory (its counters
    /// zeroed: a spin that never merged counts nothing).
    pub fn clear(&mut self) {
        self.state.clear();
        self.state.counters = Counters::default();
        self.system_event = false;
    }
}

/// An ITCH feed whose books can be read ([`Feed::settled`]): every level
/// change applied, and no message applied while it lives.
#[derive(Debug)]
pub struct Settled<'a> {
    levels: &'a Levels,
    symbols: &'a [SymbolState],
    by_stock: &'a U64Map<u32>,
    seq: &'a Sequencer,
    clock: &'a OffsetEstimator,
    hours: Hours,
    /// An add or a new symbol was refused for room this session.
    refused: bool,
    last_alive: Option<u64>,
    watermark: Option<i128>,
}

impl<'a> Settled<'a> {
    /// The verdict for `stock` at `now` (ns since the Unix epoch, local
    /// clock), reasons in spec §4 order. Expire gaps up to `now` first.
    pub fn verdict(&self, stock: Symbol, th: Thresholds, now: u64) -> Reasons {
        let Some(i) = self.by_stock.get(stock.key()) else {
            return Reasons::NO_QUOTE;
        };
        let top = self.levels.top(i);

        let inputs = Inputs {
            quoted: top.bid.is_some() || top.ask.is_some(),
            alive: self.last_alive.map(i128::from),
            source: self.watermark,
            offset: self.clock.offset(),
            // As Feed::suspect.
            suspect: self.seq.suspect() || self.refused,
            invalid: matches!((top.bid, top.ask), (Some((bid, _)), Some((ask, _))) if bid > ask),
            halted: self.symbols[i as usize].halted(),
            closed: self.hours == Hours::Closed,
        };
        reasons(&inputs, th, now)
    }

    /// The symbol's state and top of book.
    pub fn symbol(&self, stock: Symbol) -> Option<(SymbolState, Top, u64)> {
        let i = self.by_stock.get(stock.key())?;
        Some((
            self.symbols[i as usize],
            self.levels.top(i),
            self.levels.orders_in(i),
        ))
    }

    /// Every symbol of the session, in order of first appearance (its
    /// index there is the one [`Feed::touched`] gives), with its top of
    /// book and live orders.
    pub fn symbols(&self) -> impl Iterator<Item = (SymbolState, Top, u64)> + 'a {
        let (symbols, levels) = (self.symbols, self.levels);
        (0..symbols.len() as u32)
            .map(move |i| (symbols[i as usize], levels.top(i), levels.orders_in(i)))
    }
}

/// BinaryFILE records applied back to back ([`Feed::file_batch`]).
pub struct FileBatch<'a> {
    feed: &'a mut Feed,
    /// Records seen, valid or not.
    records: u64,
    /// The index of the last record seen.
    last_index: u64,
    /// The highest raw timestamp of a valid record within the day
    /// ([`DAY_END_NS`]), if any; the last one's is the state's `last_ts`.
    max_ts: Option<u64>,
    /// The raw timestamp of the last valid record within the day: its
    /// arrival, the proof of life (a stamp past the day is no time of
    /// the session: it proves nothing alive, and no check waits on it).
    last_in_day: Option<u64>,
}

impl FileBatch<'_> {
    /// Starts loading what `record`, a few records from its turn, will
    /// touch (see [`super::binfile::Lookahead`]): `far` the first stage, else
    /// the second.
    #[inline]
    pub fn prefetch(&self, record: &[u8], far: bool) {
        self.feed.state.prefetch(record, far);
    }

    /// False when the second prefetch stage loads nothing: the books'
    /// levels are on their own thread, which loads them itself.
    pub fn two_stage(&self) -> bool {
        !self.feed.state.books.pipelined()
    }

    /// Record `index` (0-based) of the file: applied when valid, counted
    /// and stepped over otherwise (see [`Feed::on_file_record`]). True when
    /// it was valid.
    #[inline]
    pub fn record(&mut self, index: u64, record: &[u8]) -> bool {
        self.records += 1;
        self.last_index = index;
        let Some(ts) = self.feed.state.record_timestamp(record) else {
            self.feed.state.counters.invalid_records += 1;
            return false;
        };
        self.apply(index, record, ts);
        true
    }

    /// [`record`](Self::record), unless the record is valid and its source
    /// time is later than `until` (ns since the Unix epoch): then nothing
    /// is done, and the result is `None` (a check at `until` comes first).
    #[inline]
    pub fn record_until(&mut self, index: u64, record: &[u8], until: u64) -> Option<bool> {
        let Some(ts) = self.feed.state.record_timestamp(record) else {
            self.records += 1;
            self.last_index = index;
            self.feed.state.counters.invalid_records += 1;
            return Some(false);
        };
        if ts < DAY_END_NS && self.feed.source_time(ts) > until {
            return None;
        }
        self.records += 1;
        self.last_index = index;
        self.apply(index, record, ts);
        Some(true)
    }

    /// Applies valid record `index`, whose raw timestamp is `ts`.
    #[inline(always)]
    fn apply(&mut self, index: u64, record: &[u8], ts: u64) {
        // (The file's order is told by its stamps within the day.)
        let order = &mut self.feed.file_order;
        if ts < order.0 && ts < DAY_END_NS {
            order.1 += 1;
            order.2 = order.2.max(order.0 - ts);
        }
        if ts < DAY_END_NS {
            order.0 = order.0.max(ts);
        }
        self.feed.state.seq = index.saturating_add(1);
        // Sets the state's `last_ts` to `ts`.
        self.feed.state.apply(Message::new(record));
        if ts < DAY_END_NS {
            self.last_in_day = Some(ts);
            self.max_ts = Some(self.max_ts.map_or(ts, |m| m.max(ts)));
            if self.feed.file_span.is_none() {
                self.feed.file_span = Some((ts, ts));
            }
        }
    }
}

impl Drop for FileBatch<'_> {
    /// What each record would have done after it, done once: the
    /// sequencer's counts and position, the watermark, the proof of life.
    fn drop(&mut self) {
        let f = &mut *self.feed;
        if self.records > 0 {
            let q = self.last_index.saturating_add(1);
            f.seq.on_file_records(q, self.records);
        }
        let last = std::mem::replace(&mut f.state.last_ts, NO_TIME);
        f.state.day_ts = NO_TIME;
        if last != NO_TIME {
            if let Some(ts) = self.max_ts {
                f.raise_watermark_to(ts);
                if let Some((_, latest)) = &mut f.file_span {
                    *latest = (*latest).max(ts);
                }
            }
            if let Some(at) = self.last_in_day {
                f.last_alive = Some(f.source_time(at));
            }
        }
    }
}

/// A BinaryFILE record's raw timestamp (ns since midnight); `None` when it
/// is shorter than the 11-byte header or fails a message check.
#[inline]
fn file_timestamp(record: &[u8]) -> Option<u64> {
    if super::message::check(record).is_err() {
        return None;
    }
    let header = Message::new(record).fixed::<HEADER_LEN>()?;
    Some(fixed::u48::<5, HEADER_LEN>(header))
}

/// Epoch ns of midnight, in `tz`, of the date there at `t` (epoch ns).
pub fn midnight(tz: &jiff::tz::TimeZone, t: u64) -> i128 {
    let at = jiff::Timestamp::from_nanosecond(t as i128).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let date = at.to_zoned_datetime(tz.clone()).date();
    date.to_zoned_datetime(tz.clone())
        .map(|z| z.timestamp().as_nanosecond())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::super::message::encode;
    use super::super::mold::PacketBuilder;
    use super::*;

    const S1: Session = Session(*b"20260105XA");
    const MS: u64 = 1_000_000;
    /// 2026-01-05 14:30:00 UTC = 09:30 in New York (EST, UTC−5).
    const T0: u64 = 1_767_623_400_000_000_000;
    /// 09:30 as ns since midnight.
    const OPEN: u64 = 34_200_000_000_000;

    fn feed() -> Feed {
        Feed::new(settings())
    }

    fn settings() -> Settings {
        Settings {
            sequencing: sequencer::Settings {
                gap_timeout_ns: 5 * MS,
                max_held: 1000,
                join_gap_max: 10_000,
            },
            timezone: jiff::tz::db().get("America/New_York").unwrap(),
            offset: OffsetMode::Fixed(0),
            offset_queue: 16,
            orders: 16,
            max_orders: 1 << 24,
            max_symbols: 1 << 16,
        }
    }

    fn sym(s: &str) -> Symbol {
        Symbol::parse(s).unwrap()
    }

    fn th() -> Thresholds {
        Thresholds {
            stale_ns: 1_500 * MS,
            source_ns: 2_000 * MS,
        }
    }

    fn packet(first: u64, messages: &[Vec<u8>]) -> Vec<u8> {
        let mut b = PacketBuilder::new(S1, first);
        for m in messages {
            b.message(m);
        }
        b.finish()
    }

    /// Two gaps given up by one expiry, the messages they release stamped
    /// falling (the first run's last at 2 s, the second's at 1 s): the
    /// watermark rises to the last message the whole give-up applied, not
    /// to each run's last in turn (docs/itch.md, "Several gaps given up at
    /// once"), which would leave it at 2 s.
    #[test]
    fn several_gaps_given_up_at_once_raise_the_watermark_to_the_last_message() {
        let mut f = feed();
        let event = |ts| encode::system_event(ts, b'Q');
        f.on_datagram(&packet(1, &[event(OPEN)]), T0).unwrap();
        // 2 and 4 missing; 3 and 5 held.
        f.on_datagram(&packet(3, &[event(OPEN + 2_000 * MS)]), T0 + MS)
            .unwrap();
        f.on_datagram(&packet(5, &[event(OPEN + 1_000 * MS)]), T0 + MS)
            .unwrap();
        assert_eq!(f.source_watermark(), Some(T0 as i128), "held: no rise");
        f.expire(T0 + 60_000 * MS);
        assert_eq!(f.sequencer().counters().gaps_given_up, 2);
        assert_eq!(f.source_watermark(), Some((T0 + 1_000 * MS) as i128));
    }

    /// A heartbeat left ahead of the clock by a step back is forgotten at
    /// the next packet taken: its part of the source watermark would hide
    /// the source delay of the messages since for as long as the step.
    #[test]
    fn a_heartbeat_ahead_of_a_clock_stepped_back_is_forgotten() {
        let mut f = feed();
        let event = |ts| encode::system_event(ts, b'Q');
        f.on_datagram(&packet(1, &[event(OPEN)]), T0).unwrap();
        f.on_datagram(&PacketBuilder::heartbeat(S1, 2), T0 + 60_000 * MS)
            .unwrap();
        assert_eq!(f.source_watermark(), Some((T0 + 60_000 * MS) as i128));
        // A minute back: the message's own time is the watermark.
        f.on_datagram(&packet(2, &[event(OPEN + 1_000 * MS)]), T0 + 1_000 * MS)
            .unwrap();
        assert_eq!(f.source_watermark(), Some((T0 + 1_000 * MS) as i128));
        // Within the bound, a heartbeat stays (kernel stamps out of order).
        f.on_datagram(&PacketBuilder::heartbeat(S1, 3), T0 + 1_050 * MS)
            .unwrap();
        f.on_datagram(&packet(3, &[event(OPEN + 1_000 * MS)]), T0 + 1_000 * MS)
            .unwrap();
        assert_eq!(f.source_watermark(), Some((T0 + 1_050 * MS) as i128));
    }

    /// A packet stamped hours ahead (a duplicate: anyone's copy, its time
    /// changed) pulls the auto offset down while it is in the window, and
    /// a heartbeat then proves the source fresh as of its arrival; once
    /// the packet has left the window, the heartbeat's part of the
    /// watermark follows the offset back, so data lagging behind the
    /// source threshold reads `stale_at_source` again (taken at the
    /// heartbeat's offset, it stayed hours ahead and hid the delay).
    #[test]
    fn a_packet_stamped_hours_ahead_leaves_nothing_once_out_of_the_window() {
        let (mut f, event) = open_with_auto_offset();
        assert_eq!(f.offset(), 0);
        // Seq 1 again, stamped 14 h ahead (still within the day).
        let ahead = OPEN + 14 * 3_600_000 * MS;
        f.on_datagram(&packet(1, &[event(ahead)]), T0 + 1_000 * MS)
            .unwrap();
        assert_eq!(f.offset(), -(((14 * 3_600_000 - 1_000) * MS) as i128));
        f.on_datagram(&PacketBuilder::heartbeat(S1, 2), T0 + 2_000 * MS)
            .unwrap();
        // Out of the window: the source 3 s behind.
        let late = T0 + 8_000 * MS;
        f.on_datagram(&packet(2, &[event(OPEN + 5_000 * MS)]), late)
            .unwrap();
        assert_eq!(f.offset(), (3_000 * MS) as i128);
        // The heartbeat proves the source up to its arrival less the offset
        // now, below the data's own time.
        assert_eq!(f.source_watermark(), Some((T0 + 5_000 * MS) as i128));
        let aapl = sym("AAPL");
        let add = encode::add_order(
            1,
            OPEN + 5_000 * MS,
            1,
            Side::Buy,
            100,
            aapl,
            1_000_000,
            None,
        );
        f.on_datagram(
            &packet(3, &[encode::stock_directory(1, OPEN, aapl), add]),
            late,
        )
        .unwrap();
        let th = Thresholds {
            stale_ns: 60_000 * MS,
            source_ns: 2_000 * MS,
        };
        let at = |t: u64, f: &mut Feed| f.settled().verdict(aapl, th, t);
        assert!(!at(late, &mut f).contains(Reasons::STALE_AT_SOURCE));
        assert!(at(late + 2_000 * MS + 1, &mut f).contains(Reasons::STALE_AT_SOURCE));
    }

    /// A feed with an auto offset (5 s window) whose packet 1, the
    /// opening's system event, came at T0; and that event at other times.
    fn open_with_auto_offset() -> (Feed, fn(u64) -> Vec<u8>) {
        let mut f = Feed::new(Settings {
            offset: OffsetMode::Auto {
                window_ns: 5_000 * MS,
            },
            ..settings()
        });
        fn event(ts: u64) -> Vec<u8> {
            encode::system_event(ts, b'Q')
        }
        f.on_datagram(&packet(1, &[event(OPEN)]), T0).unwrap();
        (f, event)
    }

    /// A message stamped past the day (the 48-bit field reaches 78 h; 25
    /// h is the longest day) is applied, but its time neither raises the
    /// watermark nor times its packet: held there, `stale_at_source`
    /// would stay silent for up to three days.
    #[test]
    fn a_timestamp_past_the_day_neither_raises_the_watermark_nor_times_its_packet() {
        let (mut f, event) = open_with_auto_offset();
        let (offset, watermark) = (f.offset(), f.source_watermark());
        f.on_datagram(&packet(2, &[event((1 << 48) - 1)]), T0 + MS)
            .unwrap();
        assert_eq!(f.sequencer().next(), Some(3), "applied");
        assert_eq!((f.offset(), f.source_watermark()), (offset, watermark));
        // 25 h exactly is past the day.
        f.on_datagram(&packet(3, &[event(DAY_END_NS)]), T0 + MS)
            .unwrap();
        assert_eq!((f.offset(), f.source_watermark()), (offset, watermark));
        // The last day's last nanosecond is a time.
        f.on_datagram(&packet(4, &[event(DAY_END_NS - 1)]), T0 + 2 * MS)
            .unwrap();
        assert_ne!(f.source_watermark(), watermark);
    }

    /// A message stamped past the day ignores only its own time: the
    /// watermark still rises to the message before it in the packet.
    #[test]
    fn a_timestamp_past_the_day_leaves_the_messages_before_it_their_time() {
        let (mut f, event) = open_with_auto_offset();
        let before = f.source_watermark();
        let at = OPEN + 5_000 * MS;
        f.on_datagram(&packet(2, &[event(at), event((1 << 48) - 1)]), T0 + MS)
            .unwrap();
        assert_eq!(f.sequencer().next(), Some(4), "both applied");
        let s = f.source_watermark();
        assert!(s > before, "{s:?} {before:?}");
        assert_eq!(s, Some(f.source_time(at) as i128));
    }

    /// Everything a reader of the feed can see.
    fn seen(f: &mut Feed) -> String {
        let symbols: Vec<_> = f.settled().symbols().collect();
        let q = f.sequencer();
        format!(
            "{:?} {:?} {} {:?} {:?} {:?} {:?} {symbols:?}",
            q.counters(),
            q.next(),
            q.high(),
            f.counters(),
            f.source_watermark(),
            f.last_alive(),
            f.hours(),
        )
    }

    #[test]
    fn a_file_batch_leaves_what_record_by_record_leaves() {
        let mut day = Vec::new();
        super::super::synth::synthetic_day(&mut day, 20_000, 40, 7).unwrap();
        let mut reader = super::super::binfile::BinFile::new(day.as_slice());
        let mut records = Vec::new();
        while let Some((_, r)) = reader.next_record().unwrap() {
            records.push(r.to_vec());
        }
        // Invalid records, an unknown type shorter than a header, a
        // message earlier than the ones before it, and one stamped past
        // the day (its time raises nothing).
        let mut bad_stock = encode::add_order(3, OPEN, 9, Side::Buy, 1, sym("X"), 1, None);
        bad_stock[24] = b' ';
        let late = encode::delete(1, 5, 1);
        for (at, r) in [
            (10, Vec::new()),
            (500, encode::delete(1, OPEN, 2)[..18].to_vec()),
            (900, bad_stock),
            (901, b"z".to_vec()),
            (5_000, late.clone()),
            (6_000, encode::delete(1, (1 << 48) - 1, 999_999)),
        ] {
            records.insert(at, r);
        }
        records.push(late);
        let date = jiff::civil::date(2026, 1, 5);
        let mut one = feed();
        one.start_file(date);
        let mut times = Vec::new();
        for (i, r) in records.iter().enumerate() {
            times.push(one.on_file_record(i as u64, r));
        }
        assert_eq!(one.counters().invalid_records, 4);
        for cuts in [
            vec![records.len()],
            vec![1, 2, 901, 902, 7_000, records.len()],
        ] {
            let mut batched = feed();
            batched.start_file(date);
            let mut from = 0;
            for to in cuts {
                let mut batch = batched.file_batch();
                for (i, r) in records.iter().enumerate().take(to).skip(from) {
                    batch.record(i as u64, r);
                }
                drop(batch);
                assert_eq!(
                    batched.last_alive(),
                    times[..to].iter().rev().find_map(|t| *t)
                );
                from = to;
            }
            assert_eq!(seen(&mut batched), seen(&mut one));
        }
        assert_eq!(one.record_time(&records[1]), times[1]);
    }

    /// A feed with locate 7 mapped to AAPL by a BinaryFILE record.
    fn aapl_on_7() -> Feed {
        let mut f = feed();
        f.start_file(jiff::civil::date(2026, 1, 5));
        f.on_file_record(0, &encode::stock_directory(7, OPEN, sym("AAPL")));
        f
    }

    #[test]
    fn an_add_order_on_its_mapped_stock_is_valid_as_the_message_check_says() {
        let f = aapl_on_7();
        let add = |locate, stock: &[u8; 8]| {
            let mut m = encode::add_order(locate, OPEN, 1, Side::Buy, 1, sym("X"), 1, None);
            m[24..32].copy_from_slice(stock);
            m
        };
        let mut longer = add(7, b"AAPL    ");
        longer.extend_from_slice(b"more");
        let mut mpid = encode::add_order(7, OPEN, 1, Side::Buy, 1, sym("AAPL"), 1, Some(*b"MPID"));
        let cases = [
            (add(7, b"AAPL    "), true),
            (longer, true),
            (add(7, b"MSFT    "), true),
            (add(9, b"AAPL    "), true),
            (add(0, b"AAPL    "), true),
            (add(7, b"AA PL   "), false),
            (add(7, b"AAPL\0\0\0\0"), false),
            (add(7, b"AAPL    ")[..35].to_vec(), false),
            (mpid.clone(), true),
            (
                {
                    mpid.truncate(39);
                    mpid
                },
                false,
            ),
        ];
        for (r, valid) in cases {
            assert_eq!(file_timestamp(&r).is_some(), valid, "{r:?}");
            assert_eq!(f.state.record_timestamp(&r), file_timestamp(&r), "{r:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn record_timestamp_agrees_with_the_message_check(
            changes in proptest::collection::vec((0usize..40, proptest::num::u8::ANY), 0..4),
            len in 0usize..40,
        ) {
            let f = aapl_on_7();
            let mut r = encode::add_order(7, OPEN, 1, Side::Buy, 1, sym("AAPL"), 1, None);
            r.resize(len.max(1), b' ');
            for (at, byte) in changes {
                if let Some(b) = r.get_mut(at) {
                    *b = byte;
                }
            }
            proptest::prop_assert_eq!(f.state.record_timestamp(&r), file_timestamp(&r));
        }
    }

    #[test]
    fn midnight_is_dst_correct() {
        let ny = jiff::tz::db().get("America/New_York").unwrap();
        assert_eq!(midnight(&ny, T0), (T0 - OPEN) as i128);
        // 2026-03-08 is 23 hours long in New York: midnight is 05:00 UTC,
        // and a timestamp of 09:30 elapsed is 10:30 on the wall clock.
        let t = 1_772_983_800_000_000_000; // 2026-03-08 15:30 UTC
        assert_eq!(midnight(&ny, t), 1_772_946_000_000_000_000);
        // 2026-11-01 is 25 hours long: midnight is 04:00 UTC (EDT), and a
        // timestamp of 24.5 h elapsed (23:30 on the wall clock) is a time
        // of the day (below DAY_END_NS).
        let t = 1_793_545_200_000_000_000; // 2026-11-01 15:00 UTC
        assert_eq!(midnight(&ny, t), 1_793_505_600_000_000_000);
        // The date is the zone's, not UTC's: 2026-03-08 04:30 UTC is
        // 23:30 on the 7th in New York, whose midnight is 05:00 UTC on
        // the 7th.
        let t = 1_772_944_200_000_000_000; // 2026-03-08 04:30 UTC
        assert_eq!(midnight(&ny, t), 1_772_859_600_000_000_000);
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
            ..settings()
        });
        let aapl = sym("AAPL");
        let hour = 3_600_000 * MS;
        // Sent at `T0 + sent`, the session's clock (T0 is OPEN's time).
        let directory =
            |s: u64, sent: u64| packet(s, &[encode::stock_directory(7, OPEN + sent, aapl)]);
        // At a clock an hour ahead, 1 µs after it was sent; then stepped back.
        f.on_datagram(&directory(1, hour), T0 + hour + 1_000)
            .unwrap();
        f.on_clock_stepped_back(T0);
        f.on_datagram(&directory(2, 0), T0 + 5_000).unwrap();
        assert_eq!(f.offset(), 1_000);
        let t = 1_500 * MS;
        f.on_datagram(&directory(3, t), T0 + t + 6_000).unwrap();
        assert_eq!(f.offset(), 6_000);
    }

    /// A packet held behind a gap is timed at its arrival; a packet of
    /// duplicates only (here a forged copy of an old one, its timestamps
    /// four hours ahead) is an accepted data packet, so it is timed too
    /// (spec itch50 §3.1): the offset falls, and the symbol reads
    /// `stale_at_source` while the sample is in the window.
    #[test]
    fn every_data_packet_of_the_session_is_timed_duplicates_included() {
        let mut f = Feed::new(Settings {
            offset: OffsetMode::Auto {
                window_ns: 60_000 * MS,
            },
            ..settings()
        });
        let aapl = sym("AAPL");
        let delay = 250_000;
        let add = |k: u64, side| {
            let price = if side == Side::Buy {
                1_900_000
            } else {
                1_901_000
            };
            encode::add_order(7, OPEN + k * 100 * MS, k, side, 100, aapl, price, None)
        };
        let at = |k: u64| T0 + k * 100 * MS + delay;
        f.on_datagram(
            &packet(
                1,
                &[encode::stock_directory(7, OPEN, aapl), add(0, Side::Buy)],
            ),
            at(0),
        )
        .unwrap();
        for k in 1..10 {
            f.on_datagram(&packet(k + 2, &[add(k, Side::Sell)]), at(k))
                .unwrap();
        }
        assert_eq!(f.offset(), delay as i128);
        assert_eq!(f.settled().verdict(aapl, th(), at(10)), Reasons::empty());
        // Held behind a gap, sent 1 ms late: taken at its arrival, before the
        // gap is filled.
        f.on_datagram(&packet(13, &[add(12, Side::Sell)]), at(12) - MS)
            .unwrap();
        assert_eq!(f.sequencer().held(), 1);
        assert_eq!(f.offset(), delay as i128 - MS as i128);
        let now = at(12);
        let hours = 4 * 3_600_000 * MS;
        let forged = |k: u64| encode::add_order(7, OPEN + hours, k, Side::Buy, 1, aapl, 1, None);
        f.on_datagram(&packet(2, &[forged(1)]), now).unwrap();
        assert_eq!(f.sequencer().counters().duplicates, 1);
        assert_eq!(f.offset(), (12 * 100 * MS + delay) as i128 - hours as i128);
        assert!(f
            .settled()
            .verdict(aapl, th(), now)
            .contains(Reasons::STALE_AT_SOURCE));
    }

    /// A recovery answer naming another session than the lines' is
    /// counted and ignored: the books stay, the session stays, and the
    /// line's next packet is applied; one of an earlier session is stale
    /// too.
    #[test]
    fn a_recovery_answer_of_another_session_is_counted_and_ignored() {
        let mut f = feed();
        let aapl = sym("AAPL");
        let book = [
            encode::stock_directory(7, OPEN, aapl),
            encode::add_order(7, OPEN, 1, Side::Buy, 100, aapl, 1_900_000, None),
            encode::add_order(7, OPEN, 2, Side::Sell, 200, aapl, 1_901_000, None),
        ];
        f.on_datagram_line(&packet(1, &book), 0, T0).unwrap();
        let other = |session: &[u8; 10], seq: u64| {
            let mut b = PacketBuilder::new(Session(*session), seq);
            b.message(&encode::system_event(OPEN, b'C'));
            b.finish()
        };
        f.on_datagram_line(&other(b"20260106XA", 1), RECOVERY_LINE, T0 + 1)
            .unwrap();
        assert_eq!(f.session(), Some(S1));
        assert_eq!(f.sequencer().counters().session_changes, 0);
        assert_eq!(f.settled().verdict(aapl, th(), T0 + 2), Reasons::empty());
        assert_eq!(f.counters().recovery_wrong_session, 1);
        let more = [encode::add_order(
            7,
            OPEN + 1,
            3,
            Side::Buy,
            5,
            aapl,
            1_899_000,
            None,
        )];
        f.on_datagram_line(&packet(4, &more), 0, T0 + 3).unwrap();
        assert_eq!(f.sequencer().next(), Some(5));
        assert_eq!(f.sequencer().counters().stale_session, 0);
        // The lines move to the next session; an answer of the old one is
        // of an earlier session: stale as well.
        let next = |seq: u64| {
            let mut b = PacketBuilder::new(Session(*b"20260106XA"), seq);
            b.message(&encode::system_event(OPEN, b'O'));
            b.finish()
        };
        f.on_datagram_line(&next(1), 0, T0 + 4).unwrap();
        f.on_datagram_line(&packet(2, &book[1..2]), RECOVERY_LINE, T0 + 5)
            .unwrap();
        assert_eq!(f.counters().recovery_wrong_session, 2);
        assert_eq!(f.sequencer().counters().stale_session, 1);
        assert_eq!(f.sequencer().counters().session_changes, 1);
        // An answer of the current session is taken.
        f.on_datagram_line(&next(1), RECOVERY_LINE, T0 + 6).unwrap();
        assert_eq!(f.sequencer().counters().duplicates, 1);
        assert_eq!(f.counters().recovery_wrong_session, 2);
        // A replay's summary says so too.
        let s = super::super::summary::FeedSummary::new(&Default::default(), &mut f);
        assert_eq!(s.recovery_wrong_session, 2);
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"recovery_wrong_session\":2"), "{json}");
    }

    /// Gaps expire before every datagram routed to the feed (spec itch50
    /// §3.2), a recovery answer of another session included, though it is
    /// otherwise ignored.
    #[test]
    fn a_recovery_answer_of_another_session_still_expires_gaps() {
        let mut f = feed();
        let aapl = sym("AAPL");
        let book = [
            encode::stock_directory(7, OPEN, aapl),
            encode::add_order(7, OPEN, 1, Side::Buy, 100, aapl, 1_900_000, None),
        ];
        f.on_datagram_line(&packet(1, &book), 0, T0).unwrap();
        let later = [encode::system_event(OPEN, b'O')];
        f.on_datagram_line(&packet(5, &later), 0, T0 + 1).unwrap();
        assert_eq!(f.sequencer().gaps_open(), 1);
        let mut b = PacketBuilder::new(Session(*b"20260106XA"), 1);
        b.message(&encode::system_event(OPEN, b'C'));
        f.on_datagram_line(&b.finish(), RECOVERY_LINE, T0 + 7 * MS)
            .unwrap();
        assert_eq!(f.counters().recovery_wrong_session, 1);
        assert_eq!(f.sequencer().gaps_open(), 0);
        assert_eq!(f.sequencer().counters().gaps_given_up, 1);
    }

    /// A `U` whose new reference is a live order's: that order is
    /// replaced (counted in `anomalies`), and the new one takes the
    /// original's side, with its own shares and price.
    #[test]
    fn a_replace_onto_a_live_reference_replaces_it_and_counts() {
        let (mut f, aapl) = aapl_quoted(&[encode::replace(7, OPEN + 1, 1, 2, 50, 1_899_000)]);
        assert_eq!(f.counters().anomalies, 1);
        assert_eq!(f.counters().unknown_orders, 0);
        let (_, top, orders) = f.settled().symbol(aapl).unwrap();
        assert_eq!(orders, 1);
        assert_eq!(top.bid, Some((1_899_000, 50)));
        assert_eq!(top.ask, None);
    }

    /// A feed after one packet at `T0`: AAPL (locate 7) listed, order 1
    /// bids 100 at 190.0000, order 2 offers 200 at 190.1000, then `more`.
    fn aapl_quoted(more: &[Vec<u8>]) -> (Feed, Symbol) {
        let mut f = feed();
        let aapl = sym("AAPL");
        let mut msgs = vec![
            encode::system_event(OPEN - 10, b'S'),
            encode::stock_directory(7, OPEN - 5, aapl),
            encode::add_order(7, OPEN, 1, Side::Buy, 100, aapl, 1_900_000, None),
            encode::add_order(7, OPEN, 2, Side::Sell, 200, aapl, 1_901_000, None),
        ];
        msgs.extend_from_slice(more);
        f.on_datagram(&packet(1, &msgs), T0).unwrap();
        (f, aapl)
    }

    #[test]
    fn a_book_a_halt_and_the_close() {
        let (mut f, aapl) = aapl_quoted(&[]);
        assert_eq!(f.settled().verdict(aapl, th(), T0), Reasons::empty());
        let (s, top, orders) = f.settled().symbol(aapl).unwrap();
        assert_eq!((s.locate, orders), (7, 2));
        assert_eq!(top.bid, Some((1_900_000, 100)));
        assert_eq!(top.ask, Some((1_901_000, 200)));
        // Crossed, then halted, then closed.
        f.on_datagram(
            &packet(5, &[encode::replace(7, OPEN + 1, 1, 3, 100, 1_902_000)]),
            T0 + 1,
        )
        .unwrap();
        assert_eq!(
            f.settled().verdict(aapl, th(), T0 + 1),
            Reasons::INVALID_PRICE
        );
        f.on_datagram(
            &packet(6, &[encode::trading_action(7, OPEN + 2, aapl, b'H')]),
            T0 + 2,
        )
        .unwrap();
        assert_eq!(
            f.settled().verdict(aapl, th(), T0 + 2),
            Reasons::INVALID_PRICE | Reasons::HALTED
        );
        f.on_datagram(&PacketBuilder::end_of_session(S1, 7), T0 + 3)
            .unwrap();
        assert!(f
            .settled()
            .verdict(aapl, th(), T0 + 3)
            .contains(Reasons::CLOSED));
        assert_eq!(f.counters().by_type[b'A' as usize], 2);
    }

    /// A known message in a block longer than its type is applied as
    /// usual, its extra bytes ignored (itch50 §1: a later version may
    /// append fields).
    #[test]
    fn a_longer_block_is_applied_and_its_extra_bytes_ignored() {
        let mut f = feed();
        let aapl = sym("AAPL");
        let longer = |mut m: Vec<u8>, extra: usize| {
            m.extend(std::iter::repeat_n(0xee, extra));
            m
        };
        let msgs = [
            encode::system_event(OPEN - 10, b'S'),
            encode::stock_directory(7, OPEN - 5, aapl),
            longer(
                encode::add_order(7, OPEN, 1, Side::Buy, 100, aapl, 1_900_000, None),
                5,
            ),
            longer(encode::executed(7, OPEN + 1, 1, 40, 9), 3),
        ];
        f.on_datagram(&packet(1, &msgs), T0).unwrap();
        let (_, top, orders) = f.settled().symbol(aapl).unwrap();
        assert_eq!((top.bid, orders), (Some((1_900_000, 60)), 1));
        let c = f.counters();
        assert_eq!((c.by_type[b'A' as usize], c.by_type[b'E' as usize]), (1, 1));
        assert_eq!(
            (c.anomalies, c.unknown_orders, c.invalid_records),
            (0, 0, 0)
        );
    }

    #[test]
    fn staleness_suspect_and_unknown_orders() {
        let mut f = feed();
        let msft = sym("MSFT");
        f.on_datagram(
            &packet(
                1,
                &[encode::add_order(
                    3,
                    OPEN,
                    9,
                    Side::Sell,
                    10,
                    msft,
                    4_000_000,
                    None,
                )],
            ),
            T0,
        )
        .unwrap();
        assert_eq!(
            f.settled().verdict(msft, th(), T0 + 1_500 * MS),
            Reasons::empty()
        );
        assert_eq!(
            f.settled().verdict(msft, th(), T0 + 1_500 * MS + 1),
            Reasons::STALE
        );
        // A gap: suspect until filled.
        f.on_datagram(&packet(3, &[encode::delete(3, OPEN + 2, 77)]), T0 + MS)
            .unwrap();
        assert!(f
            .settled()
            .verdict(msft, th(), T0 + MS)
            .contains(Reasons::SUSPECT));
        f.on_datagram(
            &packet(2, &[encode::cancel(3, OPEN + 1, 9, 4)]),
            T0 + 2 * MS,
        )
        .unwrap();
        assert_eq!(
            f.settled().verdict(msft, th(), T0 + 2 * MS),
            Reasons::empty()
        );
        assert_eq!(
            f.settled().symbol(msft).unwrap().1.ask,
            Some((4_000_000, 6))
        );
        assert_eq!(f.counters().unknown_orders, 1);
        // The source clock: 2 s after the last message's source time.
        assert_eq!(f.source_watermark(), Some((T0 + 2) as i128));
        assert!(!f
            .settled()
            .verdict(msft, th(), T0 + 2_000 * MS + 2)
            .contains(Reasons::STALE_AT_SOURCE));
        assert!(f
            .settled()
            .verdict(msft, th(), T0 + 2_000 * MS + 3)
            .contains(Reasons::STALE_AT_SOURCE));
        assert_eq!(
            f.settled().verdict(sym("NOPE"), th(), T0),
            Reasons::NO_QUOTE
        );
    }

    /// A feed given an AAPL buy order in session `S1` at `T0`, then, at
    /// `t`, a packet of the next session carrying `m`.
    fn after_a_new_session(m: Vec<u8>, t: u64) -> Feed {
        let mut f = feed();
        let add = encode::add_order(7, OPEN, 1, Side::Buy, 100, sym("AAPL"), 1, None);
        f.on_datagram(&packet(1, &[add]), T0).unwrap();
        let mut b = PacketBuilder::new(Session(*b"20260106XA"), 1);
        b.message(&m);
        f.on_datagram(&b.finish(), t).unwrap();
        f
    }

    #[test]
    fn a_new_session_drops_books_and_symbols() {
        let aapl = sym("AAPL");
        let mut f = after_a_new_session(encode::system_event(1, b'O'), T0 + 86_400_000 * MS);
        assert_eq!(f.settled().verdict(aapl, th(), T0), Reasons::NO_QUOTE);
        assert_eq!(f.sequencer().counters().session_changes, 1);
        assert_eq!(f.hours(), Hours::Closed);
    }

    #[test]
    fn every_type_with_a_stock_maps_an_unmapped_locate_and_the_rest_none() {
        // Spec §2's table (`message::the_layout_is_the_specs_table` holds
        // the decoder's to it): the types with a stock but the directory and
        // the adds (an add maps its locate in
        // `staleness_suspect_and_unknown_orders`).
        let with_stock = super::super::message::layout::TYPES
            .into_iter()
            .filter_map(|(code, len, at)| Some((code, len, at?)))
            .filter(|(code, ..)| !b"RAF".contains(code));
        let xyz = sym("XYZ");
        let message = |code: u8, len: usize, at: Option<usize>| {
            let mut m = vec![0u8; len];
            m[0] = code;
            m[1..3].copy_from_slice(&9u16.to_be_bytes());
            m[5..11].copy_from_slice(&(OPEN + 7).to_be_bytes()[2..]);
            if let Some(at) = at {
                m[at..at + 8].copy_from_slice(b"XYZ     ");
            }
            m
        };
        for (code, len, at) in with_stock {
            let mut f = feed();
            f.on_datagram(&packet(1, &[message(code, len, Some(at))]), T0)
                .unwrap();
            let (s, _, _) = f
                .settled()
                .symbol(xyz)
                .unwrap_or_else(|| panic!("{}: locate 9 not mapped", code as char));
            assert_eq!(
                (s.locate, s.last_timestamp),
                (9, Some(OPEN + 7)),
                "{}",
                code as char
            );
            // Mapped: an add on locate 9 naming another stock goes to XYZ.
            let add = encode::add_order(9, OPEN + 8, 1, Side::Buy, 5, sym("ABC"), 100, None);
            f.on_datagram(&packet(2, &[add]), T0).unwrap();
            assert_eq!(
                f.settled().symbol(xyz).map(|(.., n)| n),
                Some(1),
                "{}",
                code as char
            );
        }
        // Types without a stock map nothing.
        let without = super::super::message::layout::TYPES
            .into_iter()
            .filter(|&(code, _, at)| at.is_none() && !b"SECXDU".contains(&code));
        for (code, len, _) in without {
            let mut f = feed();
            f.on_datagram(&packet(1, &[message(code, len, None)]), T0)
                .unwrap();
            assert_eq!(f.settled().symbols().count(), 0, "{}", code as char);
        }
    }

    #[test]
    fn other_known_types_change_nothing_but_the_symbols_time_and_their_count() {
        // Spec §3.3: every known type not named there (and `h` of another
        // market, `S` of another code) leaves the books, states, hours and
        // counters as they were; only `last_timestamp` and
        // `messages_by_type` move. Their bytes past the header are filled
        // with letters a careless decoder could take for a side, a
        // trading state or an event code.
        let xyz = sym("XYZ");
        // (type, length, stock at): spec §2's table (which
        // `message::the_layout_is_the_specs_table` holds the decoder's to),
        // but for the types §3.3 names.
        let others: Vec<_> = super::super::message::layout::TYPES
            .into_iter()
            .filter(|(code, ..)| !b"SRHhAFECXDU".contains(code))
            .collect();
        assert_eq!(others.len(), 12);
        let stamp = OPEN + 20;
        for fill in [b'H', b'B', b'S', b'C', b'Q', 0xff] {
            let mut f = feed();
            let setup = [
                encode::stock_directory(9, OPEN, xyz),
                encode::trading_action(9, OPEN, xyz, b'T'),
                encode::add_order(9, OPEN, 1, Side::Buy, 100, xyz, 1_000_000, None),
                encode::add_order(9, OPEN, 2, Side::Sell, 200, xyz, 1_010_000, None),
                encode::system_event(OPEN, b'Q'),
            ];
            f.on_datagram(&packet(1, &setup), T0).unwrap();
            let (state, top, orders) = f.settled().symbol(xyz).unwrap();
            let counters = f.counters().clone();
            let verdict = f.settled().verdict(xyz, th(), T0 + MS);
            assert_eq!((f.hours(), verdict), (Hours::Open, Reasons::empty()));
            let mut messages: Vec<Vec<u8>> = others
                .iter()
                .map(|&(code, len, at)| {
                    let mut m = vec![fill; len];
                    m[0] = code;
                    m[1..3].copy_from_slice(&9u16.to_be_bytes());
                    m[5..11].copy_from_slice(&stamp.to_be_bytes()[2..]);
                    if let Some(at) = at {
                        m[at..at + 8].copy_from_slice(&xyz.to_wire());
                    }
                    m
                })
                .collect();
            messages.push(encode::operational_halt(9, stamp, xyz, b'N', b'H'));
            for code in [b'A', b'M', b'R', fill] {
                if !matches!(code, b'O' | b'E' | b'C' | b'S') {
                    messages.push(encode::system_event(stamp, code));
                }
            }
            f.on_datagram(&packet(6, &messages), T0 + MS).unwrap();
            let what = format!("fill {fill:#x}");
            let (after, after_top, after_orders) = f.settled().symbol(xyz).unwrap();
            assert_eq!(after.last_timestamp, Some(stamp), "{what}");
            let after = SymbolState {
                last_timestamp: state.last_timestamp,
                ..after
            };
            assert_eq!(
                format!("{after:?} {after_top:?} {after_orders}"),
                format!("{state:?} {top:?} {orders}"),
                "{what}"
            );
            let mut by_type = counters.by_type;
            for m in &messages {
                by_type[usize::from(m[0])] += 1;
            }
            let want = Counters {
                by_type,
                ..counters
            };
            assert_eq!(format!("{:?}", f.counters()), format!("{want:?}"), "{what}");
            assert_eq!(f.settled().symbols().count(), 1, "{what}");
            assert_eq!(f.hours(), Hours::Open, "{what}");
            assert!(!f.suspect(), "{what}");
            assert_eq!(
                f.settled().verdict(xyz, th(), T0 + MS),
                Reasons::empty(),
                "{what}"
            );
        }
    }

    /// A System Event whose locate maps to a stock moves that stock's
    /// `last_timestamp` as any message does (spec §3.3: every message whose
    /// locate maps to a symbol), besides setting the hours; one on locate
    /// 0 moves none.
    #[test]
    fn a_system_event_on_a_mapped_locate_moves_its_stocks_time() {
        let xyz = sym("XYZ");
        let mut f = feed();
        f.on_datagram(&packet(1, &[encode::stock_directory(9, OPEN, xyz)]), T0)
            .unwrap();
        let on = |locate: u16, stamp: u64| {
            let mut m = encode::system_event(stamp, b'Q');
            m[1..3].copy_from_slice(&locate.to_be_bytes());
            m
        };
        f.on_datagram(&packet(2, &[on(0, OPEN + 5)]), T0).unwrap();
        assert_eq!(
            f.settled().symbol(xyz).unwrap().0.last_timestamp,
            Some(OPEN)
        );
        f.on_datagram(&packet(3, &[on(9, OPEN + 7)]), T0).unwrap();
        assert_eq!(
            f.settled().symbol(xyz).unwrap().0.last_timestamp,
            Some(OPEN + 7)
        );
        assert_eq!(f.hours(), Hours::Open);
    }

    /// Prices are taken as sent (docs/itch.md: `invalid_price` is a
    /// crossed book only): an order at 0, and one at the most a price
    /// field holds (above ITCH's 199,999.9900), are kept and are the
    /// sides' best prices, `ok`.
    #[test]
    fn prices_are_taken_as_sent() {
        let aapl = sym("AAPL");
        let mut f = feed();
        let orders = [
            encode::add_order(7, OPEN, 1, Side::Buy, 5, aapl, 0, None),
            encode::add_order(7, OPEN, 2, Side::Sell, 5, aapl, u32::MAX, None),
        ];
        f.on_datagram(&packet(1, &orders), T0).unwrap();
        let (_, top, orders) = f.settled().symbol(aapl).unwrap();
        assert_eq!(orders, 2);
        assert_eq!(
            (top.bid.map(|(p, _)| p), top.ask.map(|(p, _)| p)),
            (Some(0), Some(u32::MAX))
        );
        assert_eq!(f.settled().verdict(aapl, th(), T0), Reasons::empty());
    }

    /// A packet is "rejected whole (... nothing applied ...)" (spec itch50
    /// §1): one whose valid first block would cross AAPL's book and whose
    /// second names a stock no venue spells applies neither, moves no
    /// sequence, proves nothing alive; the valid packet of the same
    /// number after it is applied.
    #[test]
    fn a_packet_rejected_for_a_later_block_applies_none_of_its_blocks() {
        let aapl = sym("AAPL");
        let mut f = feed();
        let book = [
            encode::add_order(7, OPEN, 1, Side::Buy, 5, aapl, 100, None),
            encode::add_order(7, OPEN, 2, Side::Sell, 5, aapl, 110, None),
        ];
        f.on_datagram(&packet(1, &book), T0).unwrap();
        let state = |f: &mut Feed| {
            (
                f.sequencer().next(),
                f.sequencer().counters().messages,
                f.last_alive(),
                format!("{:?}", f.settled().symbol(aapl)),
            )
        };
        let before = state(&mut f);
        let crossing = encode::add_order(7, OPEN, 3, Side::Sell, 5, aapl, 90, None);
        let mut bad = encode::add_order(7, OPEN, 4, Side::Buy, 5, aapl, 95, None);
        // The stock (bytes 24..32 of an `A`): a space inside it.
        assert_eq!(&bad[24..32], b"AAPL    ");
        bad[24..32].copy_from_slice(b"A PL    ");
        assert!(f
            .on_datagram(&packet(3, &[crossing.clone(), bad]), T0 + MS)
            .is_err());
        assert_eq!(state(&mut f), before, "nothing applied");
        assert_eq!(f.settled().verdict(aapl, th(), T0 + MS), Reasons::empty());
        f.on_datagram(&packet(3, &[crossing]), T0 + 2 * MS).unwrap();
        assert_eq!(f.sequencer().next(), Some(4));
        assert!(f
            .settled()
            .verdict(aapl, th(), T0 + 2 * MS)
            .contains(Reasons::INVALID_PRICE));
    }

    #[test]
    fn a_session_of_any_ten_bytes_is_taken_as_it_comes() {
        // Spec §1: the session is 10 raw bytes, printable or not; the
        // same bytes again are the same session.
        let odd = Session(*b"ab\x00\xffcdefgh");
        let aapl = sym("AAPL");
        let p = |first: u64, m: Vec<u8>| {
            let mut b = PacketBuilder::new(odd, first);
            b.message(&m);
            b.finish()
        };
        let mut f = feed();
        let bid = encode::add_order(7, OPEN, 1, Side::Buy, 5, aapl, 9, None);
        f.on_datagram(&p(1, bid), T0).unwrap();
        assert_eq!(f.session(), Some(odd));
        let changes = f.sequencer().counters().session_changes;
        let ask = encode::add_order(7, OPEN, 2, Side::Sell, 5, aapl, 19, None);
        f.on_datagram(&p(2, ask), T0 + MS).unwrap();
        assert_eq!(f.sequencer().counters().session_changes, changes);
        assert_eq!((f.session(), f.sequencer().next()), (Some(odd), Some(3)));
        assert_eq!(f.settled().symbol(aapl).map(|(.., n)| n), Some(2));
        assert_eq!(f.settled().verdict(aapl, th(), T0 + MS), Reasons::empty());
    }

    #[test]
    fn an_earlier_sessions_packets_change_nothing_but_their_count() {
        // Spec §3.1: a packet of an earlier session counts in `packets` and
        // `stale_session` only: its end of session does not close, its
        // heartbeat does not count or prove the feed alive, its data is not
        // applied.
        let aapl = sym("AAPL");
        let ask = encode::add_order(7, OPEN, 1, Side::Sell, 5, aapl, 9, None);
        let mut f = after_a_new_session(ask, T0 + MS);
        let before = seen(&mut f);
        let late = [
            PacketBuilder::end_of_session(S1, 2),
            PacketBuilder::heartbeat(S1, 2),
            packet(2, &[encode::delete(7, OPEN + 1, 1)]),
            packet(3, &[encode::system_event(OPEN + 2, b'C')]),
        ];
        for (k, p) in late.iter().enumerate() {
            f.on_datagram(p, T0 + (2 + k as u64) * MS).unwrap();
        }
        let q = f.sequencer().counters();
        assert_eq!((q.stale_session, q.heartbeats, q.messages), (4, 0, 2));
        assert_eq!(f.hours(), Hours::Open);
        assert_eq!(f.last_alive(), Some(T0 + MS));
        assert_eq!(
            f.settled().verdict(aapl, th(), T0 + 6 * MS),
            Reasons::empty()
        );
        // Everything else as it was: the same view with the count put back.
        let after = seen(&mut f).replace("stale_session: 4", "stale_session: 0");
        assert_eq!(after, before);
    }

    #[test]
    fn an_add_refused_for_room_makes_the_feed_suspect_until_the_session_changes() {
        let mut f = Feed::new(Settings {
            max_orders: 2,
            max_symbols: 1 << 16,
            ..feed().settings
        });
        let aapl = sym("AAPL");
        f.watch(aapl);
        let add = |order: u64, price: u32| {
            encode::add_order(7, OPEN, order, Side::Buy, 100, aapl, price, None)
        };
        f.on_datagram(&packet(1, &[add(1, 10), add(2, 11)]), T0)
            .unwrap();
        assert_eq!(f.settled().verdict(aapl, th(), T0), Reasons::empty());
        // Two live: the third and fourth are refused, the books unchanged.
        f.on_datagram(&packet(3, &[add(3, 12), add(4, 13)]), T0 + MS)
            .unwrap();
        assert_eq!(f.counters().orders_refused, 2);
        assert!(f.suspect() && f.orders_refused() && !f.sequencer().suspect());
        assert_eq!(f.settled().verdict(aapl, th(), T0 + MS), Reasons::SUSPECT);
        assert_eq!(f.settled().symbol(aapl).unwrap().1.bid, Some((11, 100)));
        let mut events = Vec::new();
        f.take_events(&mut events);
        let refused: Vec<_> = events
            .iter()
            .filter(|e| matches!(e, Event::OrdersRefused { .. }))
            .collect();
        assert_eq!(
            refused,
            [&Event::OrdersRefused { order: 3, live: 2 }],
            "the first refusal of the session is the event"
        );
        // Room again, but an order is missing: still suspect.
        f.on_datagram(
            &packet(5, &[encode::delete(7, OPEN, 1), add(5, 9)]),
            T0 + 2 * MS,
        )
        .unwrap();
        assert_eq!(f.settled().symbol(aapl).unwrap().1.bid, Some((11, 100)));
        assert_eq!(
            f.settled().verdict(aapl, th(), T0 + 2 * MS),
            Reasons::SUSPECT
        );
        // A new session starts with empty books: trusted again.
        let mut b = PacketBuilder::new(Session(*b"20260106XA"), 1);
        b.message(&add(1, 10));
        let t = T0 + 86_400_000 * MS;
        f.on_datagram(&b.finish(), t).unwrap();
        assert!(!f.suspect());
        assert_eq!(f.settled().verdict(aapl, th(), t), Reasons::empty());
        assert_eq!(
            f.counters().orders_refused,
            2,
            "counters run across sessions"
        );
    }

    /// A merged snapshot's books are whole: it ends the suspicion an add
    /// or a symbol refused for room left, unless the spin itself refused
    /// one (glimpse G3.4: the feed's books are the snapshot's).
    #[test]
    fn a_merged_snapshot_ends_a_refusal_unless_it_refused_too() {
        let aapl = sym("AAPL");
        let add = |order: u64| encode::add_order(7, OPEN, order, Side::Buy, 100, aapl, 10, None);
        for spin_orders in [2u64, 3] {
            let mut f = Feed::new(Settings {
                max_orders: 2,
                ..feed().settings
            });
            f.on_datagram(&packet(1, &[add(1), add(2), add(3)]), T0)
                .unwrap();
            assert!(f.suspect() && f.orders_refused());
            let mut staging = f.staging();
            let spin: Vec<Vec<u8>> = (1..=spin_orders).map(add).collect();
            for m in &spin {
                staging.apply(Message::new(m));
            }
            f.merge_snapshot(&mut staging, 4, T0 + MS);
            let refused = spin_orders > 2;
            assert_eq!(f.orders_refused(), refused, "spin of {spin_orders}");
            // The stream's refusal, and the spin's own if it refused one.
            assert_eq!(
                f.counters().orders_refused,
                1 + u64::from(refused),
                "spin of {spin_orders}"
            );
            assert_eq!(f.suspect(), refused, "spin of {spin_orders}");
            let want = if refused {
                Reasons::SUSPECT
            } else {
                Reasons::empty()
            };
            assert_eq!(f.settled().verdict(aapl, th(), T0 + MS), want);
        }
    }

    /// Symbols a spin refused for room (`max_symbols`) are counted in
    /// `symbols_refused` when it merges, the feed suspect for them; a spin
    /// that never merged (its staging emptied for the next) counts none.
    #[test]
    fn a_spins_refused_symbols_are_counted_when_it_merges() {
        let mut f = Feed::new(Settings {
            max_symbols: 1,
            ..feed().settings
        });
        let directory = |locate: u16, s: &str| encode::stock_directory(locate, OPEN, sym(s));
        let spin = |staging: &mut Staging| {
            for (locate, s) in [(1, "AAPL"), (2, "MSFT"), (3, "IBM")] {
                staging.apply(Message::new(&directory(locate, s)));
            }
        };
        // A spin abandoned (its connection dropped), then one merged.
        let mut staging = f.staging();
        spin(&mut staging);
        staging.clear();
        spin(&mut staging);
        f.merge_snapshot(&mut staging, 1, T0);
        assert_eq!(f.counters().symbols_refused, 2);
        assert!(f.suspect() && f.symbols_refused());
        // The staging given back counts nothing of it again.
        staging.clear();
        f.merge_snapshot(&mut staging, 1, T0 + MS);
        assert_eq!(f.counters().symbols_refused, 2);
    }

    proptest::proptest! {
        // Each case builds a feed (its 16 MiB order window): few cases.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Prefetching reads whatever bytes it is shown (a record not yet
        /// validated) without a panic, and changes nothing.
        #[test]
        fn prefetching_any_bytes_is_harmless(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..48),
            code in proptest::sample::select(b"AFECXDUSR".to_vec()),
            locate in 0u16..3,
        ) {
            let mut f = feed();
            let dir = encode::stock_directory(1, 0, sym("AAPL"));
            let add = encode::add_order(1, 1, 7, Side::Buy, 100, sym("AAPL"), 1_000_000, None);
            f.on_datagram(&packet(1, &[dir, add]), T0).unwrap();
            let before = (f.settled().symbols().collect::<Vec<_>>(), f.state.books.len());
            let mut m = bytes;
            if m.len() >= 3 {
                m[0] = code;
                m[1..3].copy_from_slice(&locate.to_be_bytes());
            }
            for far in [true, false] {
                f.state.prefetch(&m, far);
            }
            proptest::prop_assert_eq!((f.settled().symbols().collect::<Vec<_>>(), f.state.books.len()), before);
        }
    }

    #[test]
    fn rejected_datagrams_still_expire_gaps() {
        let mut f = feed();
        let x = sym("X");
        f.on_datagram(
            &packet(
                1,
                &[encode::add_order(1, OPEN, 1, Side::Buy, 1, x, 1, None)],
            ),
            T0,
        )
        .unwrap();
        f.on_datagram(&packet(3, &[encode::delete(1, OPEN, 5)]), T0 + MS)
            .unwrap();
        assert_eq!(f.sequencer().gaps_open(), 1);
        assert_eq!(
            f.on_datagram(b"short", T0 + 7 * MS).err(),
            Some(Reject::Short)
        );
        assert_eq!(f.sequencer().gaps_open(), 0);
        assert_eq!(f.sequencer().counters().ticks_lost, 1);
    }

    /// The multiplier the order map and the held store once hashed with
    /// (fixed, so public), and its inverse modulo 2^64: keys `j × INV`
    /// hash to `j` under it, so for small `j` they all shared one home, in
    /// a table of any size, and each insert walked all the others.
    fn crafted(j: u64) -> u64 {
        const FIB: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut inv = FIB;
        for _ in 0..6 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(FIB.wrapping_mul(inv)));
        }
        assert_eq!(inv.wrapping_mul(FIB), 1);
        j.wrapping_mul(inv)
    }

    /// Keys a sender cannot aim: SplitMix64 of `j`.
    fn random(j: u64) -> u64 {
        let mut z = j.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The steps (table probes and slots emptied: [`crate::test_work`])
    /// a fresh feed (`settings`) takes fed `a`, and another fed `b`:
    /// counted, never timed.
    fn cost(settings: &Settings, a: &[Vec<u8>], b: &[Vec<u8>]) -> (u64, u64) {
        let run = |datagrams: &[Vec<u8>]| {
            let mut f = Feed::new(settings.clone());
            crate::test_work::during(|| {
                for (i, d) in datagrams.iter().enumerate() {
                    let _ = f.on_datagram(d, T0 + i as u64);
                }
            })
            .0
        };
        (run(a), run(b))
    }

    /// Order references and held sequences chosen to collide under the
    /// old fixed hash cost what random ones do (within 3× in table steps):
    /// with it, 20,000 of either cost over 40 times as much as random
    /// ones, each insert walking one probe run of them all.
    #[test]
    fn keys_crafted_against_a_fixed_hash_cost_what_random_ones_do() {
        const N: u64 = 20_000;
        let aapl = sym("AAPL");
        let orders = |key: fn(u64) -> u64| -> Vec<Vec<u8>> {
            let adds: Vec<Vec<u8>> = (1..=N)
                .map(|j| encode::add_order(7, OPEN, key(j), Side::Buy, 1, aapl, j as u32, None))
                .collect();
            adds.chunks(20)
                .enumerate()
                .map(|(k, c)| packet(1 + 20 * k as u64, c))
                .collect()
        };
        let settings = feed().settings;
        let (bad, good) = cost(&settings, &orders(crafted), &orders(random));
        eprintln!("{N} orders: crafted {bad:?}, random {good:?}");
        assert!(bad < good * 3, "orders: crafted {bad:?}, random {good:?}");

        // Held messages: a gap from 2 to nearly the last sequence, then
        // one datagram per sequence inside it, each held.
        let held = |key: fn(u64) -> u64| -> Vec<Vec<u8>> {
            let e = encode::system_event(OPEN, b'Q');
            let mut v = vec![packet(1, std::slice::from_ref(&e))];
            v.push(packet(u64::MAX - 1, std::slice::from_ref(&e)));
            v.extend(
                (1..=N)
                    .map(key)
                    .filter(|q| (2..u64::MAX - 1).contains(q))
                    .map(|q| packet(q, std::slice::from_ref(&e))),
            );
            v
        };
        let mut settings = feed().settings;
        settings.sequencing.max_held = 2 * N as usize;
        settings.sequencing.gap_timeout_ns = 3_600_000 * MS;
        let (bad, good) = cost(&settings, &held(crafted), &held(random));
        eprintln!("{N} held: crafted {bad:?}, random {good:?}");
        assert!(bad < good * 3, "held: crafted {bad:?}, random {good:?}");
    }

    /// A new session on every datagram costs about what a datagram of one
    /// session does (within 30× in table steps): a session change empties
    /// only what the session used. Emptying whole tables (the order
    /// window's 16 MiB, the locate map) made it thousands of times dearer.
    /// (The orders' tables are counted; the price levels' own clearing,
    /// one `Clear` change to the level store, is not.)
    #[test]
    fn a_session_per_datagram_costs_about_what_ordinary_datagrams_do() {
        const N: u64 = 300;
        let aapl = sym("AAPL");
        let body = |j: u64| {
            [
                encode::stock_directory(7, OPEN, aapl),
                encode::add_order(7, OPEN, j, Side::Buy, 1, aapl, 10, None),
                encode::add_order(7, OPEN, 1 << 40 | j, Side::Sell, 1, aapl, 11, None),
            ]
        };
        let changes: Vec<Vec<u8>> = (0..N)
            .map(|j| {
                let mut b = PacketBuilder::new(
                    Session(*format!("S{j:09}").as_bytes().first_chunk().unwrap()),
                    1,
                );
                for m in body(j) {
                    b.message(&m);
                }
                b.finish()
            })
            .collect();
        let ordinary: Vec<Vec<u8>> = (0..N).map(|j| packet(1 + 3 * j, &body(j))).collect();
        let settings = feed().settings;
        let (changes, ordinary) = cost(&settings, &changes, &ordinary);
        eprintln!("{N} session changes {changes:?}, {N} ordinary datagrams {ordinary:?}");
        assert!(
            changes < ordinary * 30,
            "{N} session changes {changes:?}, {N} ordinary datagrams {ordinary:?}"
        );
    }

    /// A trading action or operational halt is the watched symbol's event
    /// when it applies to it: by its locate, whatever its `stock` field
    /// names (§3.3), as the feed applies it.
    #[test]
    fn a_halt_is_the_event_of_the_symbol_its_locate_maps_to() {
        let (aapl, msft) = (sym("AAPL"), sym("MSFT"));
        for (watch, halted) in [(aapl, true), (msft, false)] {
            let mut f = feed();
            f.watch(watch);
            let messages = [
                encode::stock_directory(1, OPEN, aapl),
                encode::stock_directory(2, OPEN, msft),
                encode::add_order(1, OPEN, 1, Side::Buy, 100, aapl, 10, None),
                encode::trading_action(1, OPEN + 1, msft, b'H'),
                encode::operational_halt(1, OPEN + 2, msft, b'Q', b'H'),
            ];
            f.on_datagram(&packet(1, &messages), T0).unwrap();
            assert_eq!(f.settled().verdict(aapl, th(), T0), Reasons::HALTED);
            assert_eq!(f.settled().verdict(msft, th(), T0), Reasons::NO_QUOTE);
            let mut events = Vec::new();
            f.take_events(&mut events);
            let halts = events
                .iter()
                .filter(|e| {
                    matches!(
                        e,
                        Event::TradingAction { state: b'H', .. }
                            | Event::OperationalHalt { action: b'H', .. }
                    )
                })
                .count();
            assert_eq!(halts, if halted { 2 } else { 0 }, "watching {watch}");
        }
    }

    /// A session holds at most `max_symbols` symbols: a directory of ever
    /// new stocks is refused past it (each refusal counted), the refused
    /// stocks' orders change no book, and the feed is suspect until the
    /// session changes.
    #[test]
    fn symbols_beyond_max_symbols_are_refused_and_make_the_feed_suspect() {
        let mut f = Feed::new(Settings {
            max_symbols: 100,
            ..feed().settings
        });
        let stock = |j: u64| sym(&format!("S{j:05}"));
        f.watch(stock(0));
        let directory: Vec<Vec<u8>> = (0..300)
            .map(|j| encode::stock_directory(1 + j as u16, OPEN, stock(j)))
            .collect();
        for (k, c) in directory.chunks(30).enumerate() {
            f.on_datagram(&packet(1 + 30 * k as u64, c), T0).unwrap();
        }
        assert_eq!(f.settled().symbols().count(), 100);
        assert_eq!(f.counters().symbols_refused, 200);
        assert!(f.suspect() && f.symbols_refused() && !f.sequencer().suspect());
        let mut events = Vec::new();
        f.take_events(&mut events);
        let refused: Vec<_> = events
            .iter()
            .filter(|e| matches!(e, Event::SymbolsRefused { .. }))
            .collect();
        assert_eq!(
            refused,
            [&Event::SymbolsRefused {
                stock: stock(100),
                symbols: 100
            }],
            "the first refusal of the session is the event"
        );
        // A known stock maps again; an order on a refused one is dropped.
        let add = |locate: u16, order: u64| {
            encode::add_order(
                locate,
                OPEN,
                order,
                Side::Buy,
                1,
                stock(u64::from(locate) - 1),
                5,
                None,
            )
        };
        f.on_datagram(&packet(301, &[add(1, 1), add(200, 2)]), T0)
            .unwrap();
        assert_eq!(f.state.books.len(), 1);
        assert_eq!(f.counters().symbols_refused, 201);
        assert_eq!(
            f.settled().verdict(stock(0), th(), T0),
            Reasons::SUSPECT,
            "a book that is right is suspect too: the feed misses symbols"
        );
        // A new session starts with room again.
        let mut b = PacketBuilder::new(Session(*b"20260106XA"), 1);
        b.message(&encode::stock_directory(200, OPEN, stock(199)));
        f.on_datagram(&b.finish(), T0 + MS).unwrap();
        assert!(!f.suspect());
        assert_eq!(f.settled().symbols().count(), 1);
    }
}
