//! One (feed, symbol) record behind a seqlock: a single writer, any number of
//! lock-free readers, no read-modify-write atomics.
//!
//! Layout (`#[repr(C)]`, 128 bytes, aligned to 128 so no two slots share a
//! cache line or an adjacent-line prefetch pair):
//!
//! | word | field | notes |
//! |---|---|---|
//! | stamp | seqlock stamp | odd while a write is in progress; +2 per update, so it also counts changes |
//! | 0 | symbol | wire bytes as little-endian u64; 0 = empty slot |
//! | 1 | meta | bits 0..16 feed id, 16 baseline, 17 suspect, 18 invalid, 19 has_price, 20 halted, 21 has_bid, 22 has_ask, 23 closed, 24..32 price_format (0 f64 bits, 1 decimal), 32..40 decimal exponent (i8) |
//! | 2 | last_seq | SQF: the symbol's last applied sequence; ITCH: the stream sequence of the last message that named the symbol or changed its book; MDP3: the instrument's RptSeq |
//! | 3 | bid | f64 bits, or the decimal's i64 mantissa |
//! | 4 | ask | as bid |
//! | 5 | source_time | ns since the Unix epoch, provider clock; 0 = none |
//! | 6 | last_alive | ns since the Unix epoch, local clock; 0 = none |
//! | 7 | ticks_lost | |
//! | 8 | duplicates | |
//! | 9 | stale_ns | stale threshold, ns |
//! | 10 | source_ns | source threshold, ns |
//! | 11 | bid_size | u64, 0 = unknown |
//! | 12 | ask_size | u64, 0 = unknown |
//! | 13 | names_left | names that left the slot: entered later for another slot, or withdrawn (an MDP3 Symbol); a handle found by a movable name keeps the count it saw |
//! | 14 | reserved | zero |
//!
//! SQF sets has_price, has_bid and has_ask together (format 0, sizes 0); an
//! exchange feed publishes its book top with [`Slot::write_top`] (format 1).

use crate::price::Price as Exact;
use crate::quote::{Price, RuleState, SeqTrack, Sequence, SymbolState};
use crate::seqlock::SeqLock;
use crate::symbol::Symbol;
use crate::verdict::Thresholds;
use std::sync::atomic::{AtomicU64, Ordering};

/// Payload words per slot (the layout's size).
pub const WORDS: usize = 15;
/// Payload words in use; the rest are reserved and stay zero.
const USED: usize = 14;

/// Word and bit positions, pinned by `layout_is_pinned` (and repeated in
/// `include/tickguard.h`).
pub mod word {
    pub const SYMBOL: usize = 0;
    pub const META: usize = 1;
    pub const LAST_SEQ: usize = 2;
    pub const BID: usize = 3;
    pub const ASK: usize = 4;
    pub const SOURCE_TIME: usize = 5;
    pub const LAST_ALIVE: usize = 6;
    pub const TICKS_LOST: usize = 7;
    pub const DUPLICATES: usize = 8;
    pub const STALE_NS: usize = 9;
    pub const SOURCE_NS: usize = 10;
    pub const BID_SIZE: usize = 11;
    pub const ASK_SIZE: usize = 12;
    pub const NAMES_LEFT: usize = 13;
}

/// Bits of the `meta` word.
pub mod meta {
    pub const FEED_MASK: u64 = 0xffff;
    pub const BASELINE: u64 = 1 << 16;
    pub const SUSPECT: u64 = 1 << 17;
    pub const INVALID: u64 = 1 << 18;
    pub const HAS_PRICE: u64 = 1 << 19;
    pub const HALTED: u64 = 1 << 20;
    pub const HAS_BID: u64 = 1 << 21;
    pub const HAS_ASK: u64 = 1 << 22;
    /// The instrument's market is closed (an exchange feed that keeps
    /// trading state per instrument; SQF and ITCH never set it).
    pub const CLOSED: u64 = 1 << 23;
    /// Bits 24..32: how bid and ask are stored.
    pub const PRICE_FORMAT_SHIFT: u32 = 24;
    pub const PRICE_FORMAT_MASK: u64 = 0xff << PRICE_FORMAT_SHIFT;
    /// Bits 32..40: the decimal exponent, an `i8`.
    pub const EXPONENT_SHIFT: u32 = 32;
    pub const EXPONENT_MASK: u64 = 0xff << EXPONENT_SHIFT;
    /// `price_format`: f64 bits.
    pub const FORMAT_F64: u64 = 0;
    /// `price_format`: an i64 mantissa scaled by the exponent.
    pub const FORMAT_DECIMAL: u64 = 1;
    /// Every bit [`Slot::write_top`] sets (the rest of meta it keeps).
    pub const TOP: u64 = BASELINE
        | SUSPECT
        | CLOSED
        | INVALID
        | HAS_PRICE
        | HALTED
        | HAS_BID
        | HAS_ASK
        | PRICE_FORMAT_MASK
        | EXPONENT_MASK;
}

/// One side of a book top a protocol maintains itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    /// Price mantissa, scaled by [`Top::exponent`].
    pub price: i64,
    /// Size, in the protocol's unit; 0 unknown.
    pub size: u64,
}

/// A book top as an exchange feed publishes it ([`Slot::write_top`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Top {
    pub bid: Option<Level>,
    pub ask: Option<Level>,
    /// Decimal exponent of the prices (ITCH −4).
    pub exponent: i8,
    /// Trading halted, paused or quotation-only.
    pub halted: bool,
    /// The book is crossed (or the price otherwise unusable).
    pub invalid: bool,
    /// The instrument's own state cannot be trusted (a protocol that
    /// judges sequence per instrument; ITCH keeps it per feed).
    pub suspect: bool,
    /// The instrument's market is closed (a protocol that keeps trading
    /// state per instrument; ITCH keeps it per feed).
    pub closed: bool,
    /// Stream sequence of the last message that named the symbol or
    /// changed its book (ITCH: its MoldUDP64 sequence, or a BinaryFILE
    /// record's index + 1) — the symbol's own, not the stream's position;
    /// MDP3: the instrument's RptSeq (its own count, not the channel's
    /// MsgSeqNum); 0 before any.
    pub last_seq: u64,
    /// Source time of the symbol's last change, ns since the Unix epoch
    /// (provider clock); 0 = none (ITCH keeps source time per feed).
    pub source_time: u64,
}

/// One side of a published quote, exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Side {
    pub price: Exact,
    /// As published: 0 on an SQF feed, which carries no sizes; an
    /// exchange feed's, 0 included ([`Side::known_size`]).
    pub size: u64,
}

impl Side {
    /// The size where the feed has sizes: an exchange feed's (a decimal
    /// price) as published, 0 included (ITCH keeps an order of 0 shares
    /// live at its price); `None` on an SQF feed (an `f64` price).
    pub fn known_size(&self) -> Option<u64> {
        let exchange = matches!(self.price, Exact::Decimal { .. });
        (exchange || self.size != 0).then_some(self.size)
    }
}

/// A seqlock-protected slot.
#[repr(C, align(128))]
#[derive(Default)]
pub struct Slot {
    stamp: SeqLock,
    words: [AtomicU64; WORDS],
}

/// A consistent copy of a slot's contents.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Record {
    /// Which feed (index in configuration order).
    pub feed: u16,
    /// The symbol; `None` for an empty slot.
    pub symbol: Option<Symbol>,
    /// The rules' state.
    pub state: SymbolState,
    /// Thresholds in force for this symbol.
    pub thresholds: Thresholds,
    /// Seqlock stamp at the read: even, grows by 2 on every change.
    pub version: u64,
    /// The bid as published, exactly; `None` when the book has none.
    pub bid: Option<Side>,
    /// The ask, as `bid`.
    pub ask: Option<Side>,
    /// Trading in the instrument is halted (never set by SQF).
    pub halted: bool,
    /// The instrument's own market is closed (set only by protocols that
    /// keep trading state per instrument; others close the feed).
    pub closed: bool,
    /// Names that left the slot so far ([`word::NAMES_LEFT`]).
    pub names_left: u64,
}

impl Record {
    /// Neither side has a price: the verdict is `no_quote` (for SQF the
    /// same as no valid price stored).
    pub fn no_quote(&self) -> bool {
        self.bid.is_none() && self.ask.is_none()
    }

    /// What a verdict reads of it ([`Slot::try_read_facts`] of the same
    /// words, but for `key`: 0 here for a word that is no symbol, the word
    /// itself there; neither equals a handle's symbol).
    pub fn facts(&self) -> Facts {
        Facts {
            feed: self.feed,
            key: self.symbol.map_or(0, Symbol::key),
            quoted: !self.no_quote(),
            halted: self.halted,
            closed: self.closed,
            names_left: self.names_left,
            suspect: self.state.suspect,
            invalid: self.state.invalid,
            source_time: self.state.price.map(|p| p.source_time),
            last_alive: self.state.last_alive,
            thresholds: self.thresholds,
            version: self.version,
        }
    }
}

/// What a check reads of a slot: what it must hold, its flags, times and
/// thresholds; no prices (a [`Record`] has them, decoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// Which feed (index in configuration order).
    pub feed: u16,
    /// The slot's symbol word, compared with a handle's [`Symbol::key`]
    /// (0 for an empty slot; not validated).
    pub key: u64,
    /// A price on at least one side.
    pub quoted: bool,
    /// Trading in the instrument is halted.
    pub halted: bool,
    /// The instrument's own market is closed.
    pub closed: bool,
    /// Names that left the slot so far: a handle found by a name that
    /// may move answers for the name only while this is the count it saw.
    pub names_left: u64,
    /// The symbol's state may have missed ticks.
    pub suspect: bool,
    /// The price shown is invalid.
    pub invalid: bool,
    /// Source time of the price shown (provider's clock, ns); `None`
    /// without one.
    pub source_time: Option<u64>,
    /// The symbol's last sign of life (local clock, ns since the epoch).
    pub last_alive: u64,
    /// Thresholds in force for this symbol.
    pub thresholds: Thresholds,
    /// Seqlock stamp at the read: even, grows by 2 on every change.
    pub version: u64,
}

impl Slot {
    /// Reads a consistent copy, retrying while a write is in progress.
    /// Returns the copy and the number of retries. Tests only: a stamp a
    /// killed writer or a copied file left odd would keep it spinning,
    /// where [`try_read`](Self::try_read) in a bounded loop answers.
    #[cfg(test)]
    pub fn read(&self) -> (Record, u32) {
        let (w, stamp, retries) = self.stamp.read(|| self.load_words());
        (decode(&w, stamp), retries)
    }

    /// One attempt at a consistent copy; `None` if a write overlapped.
    #[inline]
    pub fn try_read(&self) -> Option<Record> {
        let (w, stamp) = self.stamp.try_read(|| self.load_words())?;
        Some(decode(&w, stamp))
    }

    /// One attempt at what a check reads ([`Record::facts`] of a
    /// [`try_read`](Self::try_read)), without decoding the prices or
    /// validating the symbol; `None` if a write overlapped.
    #[inline]
    pub fn try_read_facts(&self) -> Option<Facts> {
        let (w, stamp) = self.stamp.try_read(|| self.load_words())?;
        Some(facts(&w, stamp))
    }

    /// True if the slot is as a [`try_read`](Self::try_read) of version
    /// `version` left it, after everything loaded before this call.
    #[inline]
    pub fn unchanged_since(&self, version: u64) -> bool {
        self.stamp.unchanged_since(version)
    }

    /// The writer's view of its own slot: no seqlock needed, since only the
    /// writer stores to it. Must only be called by the writer thread.
    #[inline]
    pub fn load_own(&self) -> Record {
        decode(&self.load_words(), self.stamp.writer_stamp())
    }

    /// The words in use, each loaded on its own.
    #[inline(always)]
    fn load_words(&self) -> [u64; USED] {
        let mut w = [0u64; USED];
        for (dst, src) in w.iter_mut().zip(&self.words) {
            // Relaxed: inside a read, ordered by the seqlock's stamp and
            // fences; in `load_own`, the writer reads back its own stores.
            *dst = src.load(Ordering::Relaxed);
        }
        w
    }

    /// Gives an empty slot its identity and a fresh state. Single writer only.
    pub fn init(&self, feed: u16, symbol: Symbol, th: Thresholds) {
        let w = encode(feed, symbol, &SymbolState::default(), th);
        self.stamp.write(|| {
            for (dst, src) in self.words.iter().zip(&w) {
                // Relaxed: published by the Release store of the stamp in `SeqLock::write`.
                dst.store(*src, Ordering::Relaxed);
            }
        });
    }

    /// Sets the thresholds in force; identity and state are kept. Single
    /// writer only.
    pub fn set_thresholds(&self, th: Thresholds) {
        // Relaxed: the writer reads back its own stores.
        let now = [word::STALE_NS, word::SOURCE_NS].map(|i| self.words[i].load(Ordering::Relaxed));
        if now == [th.stale_ns, th.source_ns] {
            return;
        }
        self.stamp.write(|| {
            // Relaxed: published by the Release store of the stamp in `SeqLock::write`.
            self.words[word::STALE_NS].store(th.stale_ns, Ordering::Relaxed);
            self.words[word::SOURCE_NS].store(th.source_ns, Ordering::Relaxed);
        });
    }

    /// Counts one more name that left the slot (entered for another slot,
    /// or withdrawn), after the directory entry that moved it is
    /// published: a handle found by that name answers `no_quote` from
    /// then on. Single writer only.
    pub fn name_left(&self) {
        // Relaxed: the writer reads back its own store.
        let n = self.words[word::NAMES_LEFT].load(Ordering::Relaxed);
        self.stamp.write(|| {
            // Relaxed, inside the write: the Release fence `SeqLock::write`
            // makes after the odd stamp orders the directory entry before
            // it for a reader that loads this word with Acquire
            // ([`names_left_acquire`](Self::names_left_acquire)).
            self.words[word::NAMES_LEFT].store(n.wrapping_add(1), Ordering::Relaxed);
        });
    }

    /// The count of names that left the slot, loaded on its own with
    /// Acquire: a reader that sees a count [`name_left`](Self::name_left)
    /// stored also sees the directory entry published before it.
    #[inline]
    pub fn names_left_acquire(&self) -> u64 {
        crate::memory::load_acquire(&self.words[word::NAMES_LEFT])
    }

    /// The writer's view of its own slot's state: no seqlock needed, since
    /// only the writer stores to it. Writer thread only (tests compare it).
    #[cfg(test)]
    fn own_state(&self) -> SymbolState {
        let mut w = [0u64; USED];
        for i in STATE_WORDS {
            // Relaxed: the writer reads back its own stores.
            w[i] = self.words[i].load(Ordering::Relaxed);
        }
        decode_state(&w)
    }

    /// Publishes a whole new state; identity and thresholds are left as
    /// `init` wrote them. Writer thread only (tests write states with it; the
    /// handler updates in place with [`Slot::update`]).
    #[cfg(test)]
    fn publish(&self, feed: u16, state: &SymbolState) {
        let w = encode_state(feed, state);
        self.stamp.write(|| {
            for i in STATE_WORDS {
                // Relaxed: published by the Release store of the stamp in `SeqLock::write`.
                self.words[i].store(w[i], Ordering::Relaxed);
            }
        });
    }

    /// Runs the rules on the slot in place: the stamp goes odd, `rules`
    /// reads and stores the words directly (no copy of the state in or
    /// out), then the stamp goes even. Writer thread only.
    #[inline(always)]
    pub fn update<R>(&self, rules: impl FnOnce(&mut InPlace<'_>) -> R) -> R {
        self.stamp.write(|| {
            // Relaxed loads: the writer reads back its own stores.
            let mut w = InPlace {
                words: &self.words,
                meta: self.words[word::META].load(Ordering::Relaxed),
                last_seq: self.words[word::LAST_SEQ].load(Ordering::Relaxed),
            };
            let r = rules(&mut w);
            // Relaxed: published by the Release store of the stamp in `SeqLock::write`.
            self.words[word::META].store(w.meta, Ordering::Relaxed);
            self.words[word::LAST_SEQ].store(w.last_seq, Ordering::Relaxed);
            r
        })
    }

    /// Starts loading both of the slot's cache lines, so that a write a
    /// little later does not wait on memory (a writer touching many slots
    /// at once loads them together).
    #[inline]
    pub fn prefetch(&self) {
        crate::memory::prefetch(&self.stamp);
        crate::memory::prefetch(&self.words[WORDS - 1]);
    }

    /// Publishes a book top (decimal prices) in one seqlocked write; the
    /// symbol, feed, last_alive, thresholds and counters words are kept.
    /// Single writer only.
    #[inline]
    pub fn write_top(&self, top: &Top) {
        // Relaxed: the writer reads back its own store.
        let kept = self.words[word::META].load(Ordering::Relaxed) & !meta::TOP;
        let mut m = kept
            | meta::BASELINE
            | meta::FORMAT_DECIMAL << meta::PRICE_FORMAT_SHIFT
            | (top.exponent as u8 as u64) << meta::EXPONENT_SHIFT;
        let side = |l: Option<Level>, bit: u64, m: &mut u64| match l {
            Some(l) => {
                *m |= bit | meta::HAS_PRICE;
                (l.price as u64, l.size)
            }
            None => (0, 0),
        };
        let (bid, bid_size) = side(top.bid, meta::HAS_BID, &mut m);
        let (ask, ask_size) = side(top.ask, meta::HAS_ASK, &mut m);
        if top.halted {
            m |= meta::HALTED;
        }
        if top.invalid {
            m |= meta::INVALID;
        }
        if top.suspect {
            m |= meta::SUSPECT;
        }
        if top.closed {
            m |= meta::CLOSED;
        }
        self.stamp.write(|| {
            for (i, v) in [
                (word::META, m),
                (word::LAST_SEQ, top.last_seq),
                (word::BID, bid),
                (word::ASK, ask),
                (word::SOURCE_TIME, top.source_time),
                (word::BID_SIZE, bid_size),
                (word::ASK_SIZE, ask_size),
            ] {
                // Relaxed: published by the Release store of the stamp in `SeqLock::write`.
                self.words[i].store(v, Ordering::Relaxed);
            }
        });
    }
}

/// A slot open for writing (see [`Slot::update`]): the flags and the last
/// sequence are held in registers and stored once at the end; every other
/// word the rules set is stored as it is set.
pub struct InPlace<'a> {
    words: &'a [AtomicU64; WORDS],
    meta: u64,
    last_seq: u64,
}

impl InPlace<'_> {
    /// Adds `n` to a counter word, saturating.
    #[inline(always)]
    fn add(&self, i: usize, n: u64) {
        // Relaxed: single writer, published by the stamp.
        let w = &self.words[i];
        w.store(
            w.load(Ordering::Relaxed).saturating_add(n),
            Ordering::Relaxed,
        );
    }

    /// Stores one word.
    #[inline(always)]
    fn set(&self, i: usize, v: u64) {
        // Relaxed: published by the Release store of the stamp.
        self.words[i].store(v, Ordering::Relaxed);
    }

    /// The source time of the price held (ns since the Unix epoch, the
    /// provider's clock), `None` before the first.
    #[inline(always)]
    pub fn source_time(&self) -> Option<u64> {
        // Relaxed: this writer's own store.
        (self.meta & meta::HAS_PRICE != 0)
            .then(|| self.words[word::SOURCE_TIME].load(Ordering::Relaxed))
    }
}

impl Sequence for InPlace<'_> {
    #[inline(always)]
    fn baseline(&self) -> bool {
        self.meta & meta::BASELINE != 0
    }
    #[inline(always)]
    fn last_seq(&self) -> u64 {
        self.last_seq
    }
    #[inline(always)]
    fn set_last_seq(&mut self, seq: u64) {
        self.meta |= meta::BASELINE;
        self.last_seq = seq;
    }
    #[inline(always)]
    fn add_lost(&mut self, lost: u64) {
        self.add(word::TICKS_LOST, lost);
    }
    #[inline(always)]
    fn add_duplicate(&mut self) {
        self.add(word::DUPLICATES, 1);
    }
}

impl RuleState for InPlace<'_> {
    #[inline(always)]
    fn set_suspect(&mut self, suspect: bool) {
        self.meta = (self.meta & !meta::SUSPECT) | if suspect { meta::SUSPECT } else { 0 };
    }
    #[inline(always)]
    fn set_alive(&mut self, t: u64) {
        self.set(word::LAST_ALIVE, t);
    }
    #[inline(always)]
    fn set_price(&mut self, price: Price) {
        self.set(word::BID, price.bid.to_bits());
        self.set(word::ASK, price.ask.to_bits());
        self.set(word::SOURCE_TIME, price.source_time);
        self.meta = (self.meta & !meta::INVALID) | WHOLE_PRICE;
    }
    #[inline(always)]
    fn set_invalid(&mut self) {
        self.meta |= meta::INVALID;
    }
}

/// The meta bits of a valid whole price (as the rules state it): has_price
/// and both sides.
const WHOLE_PRICE: u64 = meta::HAS_PRICE | meta::HAS_BID | meta::HAS_ASK;

/// Words that change after `init`: meta (flags) through duplicates.
#[cfg(test)]
const STATE_WORDS: std::ops::RangeInclusive<usize> = word::META..=word::DUPLICATES;

fn encode(feed: u16, symbol: Symbol, s: &SymbolState, th: Thresholds) -> [u64; USED] {
    let mut w = encode_state(feed, s);
    w[word::SYMBOL] = symbol.key();
    w[word::STALE_NS] = th.stale_ns;
    w[word::SOURCE_NS] = th.source_ns;
    w
}

#[inline]
fn encode_state(feed: u16, s: &SymbolState) -> [u64; USED] {
    let mut w = [0u64; USED];
    let mut m = feed as u64;
    if s.seq.baseline {
        m |= meta::BASELINE;
    }
    if s.suspect {
        m |= meta::SUSPECT;
    }
    if s.invalid {
        m |= meta::INVALID;
    }
    if let Some(p) = s.price {
        m |= WHOLE_PRICE;
        w[word::BID] = p.bid.to_bits();
        w[word::ASK] = p.ask.to_bits();
        w[word::SOURCE_TIME] = p.source_time;
    }
    w[word::META] = m;
    w[word::LAST_SEQ] = s.seq.last_seq;
    w[word::LAST_ALIVE] = s.last_alive;
    w[word::TICKS_LOST] = s.seq.ticks_lost;
    w[word::DUPLICATES] = s.seq.duplicates;
    w
}

#[inline]
fn decode(w: &[u64; USED], stamp: u64) -> Record {
    let m = w[word::META];
    let side = |bit: u64, price: usize, size: usize| {
        (m & bit != 0).then(|| Side {
            price: exact(m, w[price]),
            size: w[size],
        })
    };
    Record {
        bid: side(meta::HAS_BID, word::BID, word::BID_SIZE),
        ask: side(meta::HAS_ASK, word::ASK, word::ASK_SIZE),
        halted: m & meta::HALTED != 0,
        closed: m & meta::CLOSED != 0,
        names_left: w[word::NAMES_LEFT],
        feed: (w[word::META] & meta::FEED_MASK) as u16,
        symbol: Symbol::from_key(w[word::SYMBOL]),
        state: decode_state(w),
        thresholds: Thresholds {
            stale_ns: w[word::STALE_NS],
            source_ns: w[word::SOURCE_NS],
        },
        version: stamp,
    }
}

/// What a check reads of a slot's words ([`decode`]`(w, stamp).facts()`
/// but for `key`, the word as it is).
#[inline]
fn facts(w: &[u64; USED], stamp: u64) -> Facts {
    let m = w[word::META];
    Facts {
        feed: (m & meta::FEED_MASK) as u16,
        key: w[word::SYMBOL],
        quoted: m & (meta::HAS_BID | meta::HAS_ASK) != 0,
        halted: m & meta::HALTED != 0,
        closed: m & meta::CLOSED != 0,
        names_left: w[word::NAMES_LEFT],
        suspect: m & meta::SUSPECT != 0,
        invalid: m & meta::INVALID != 0,
        source_time: (m & meta::HAS_PRICE != 0).then_some(w[word::SOURCE_TIME]),
        last_alive: w[word::LAST_ALIVE],
        thresholds: Thresholds {
            stale_ns: w[word::STALE_NS],
            source_ns: w[word::SOURCE_NS],
        },
        version: stamp,
    }
}

/// A bid or ask word as `meta`'s price format says.
#[inline]
fn exact(m: u64, v: u64) -> Exact {
    if (m & meta::PRICE_FORMAT_MASK) >> meta::PRICE_FORMAT_SHIFT == meta::FORMAT_DECIMAL {
        Exact::Decimal {
            mantissa: v as i64,
            exponent: ((m & meta::EXPONENT_MASK) >> meta::EXPONENT_SHIFT) as u8 as i8,
        }
    } else {
        Exact::F64(f64::from_bits(v))
    }
}

/// A side as the SQF state shows it: the price as an `f64`, NaN when the
/// book has no such side.
#[inline]
fn as_f64(m: u64, has: u64, v: u64) -> f64 {
    if m & has != 0 {
        exact(m, v).as_f64()
    } else {
        f64::NAN
    }
}

#[inline]
fn decode_state(w: &[u64; USED]) -> SymbolState {
    let m = w[word::META];
    SymbolState {
        seq: SeqTrack {
            baseline: m & meta::BASELINE != 0,
            last_seq: w[word::LAST_SEQ],
            ticks_lost: w[word::TICKS_LOST],
            duplicates: w[word::DUPLICATES],
        },
        suspect: m & meta::SUSPECT != 0,
        invalid: m & meta::INVALID != 0,
        price: (m & meta::HAS_PRICE != 0).then(|| Price {
            bid: as_f64(m, meta::HAS_BID, w[word::BID]),
            ask: as_f64(m, meta::HAS_ASK, w[word::ASK]),
            source_time: w[word::SOURCE_TIME],
        }),
        last_alive: w[word::LAST_ALIVE],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// One write through the [`Sequence`] and [`RuleState`] interface.
    #[derive(Debug, Clone, Copy)]
    enum Op {
        LastSeq(u64),
        Lost(u64),
        Duplicate,
        Suspect(bool),
        Alive(u64),
        Price(u64),
        Invalid,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (0u64..40).prop_map(Op::LastSeq),
            prop_oneof![0u64..5, Just(u64::MAX)].prop_map(Op::Lost),
            Just(Op::Duplicate),
            any::<bool>().prop_map(Op::Suspect),
            (0u64..1_000).prop_map(Op::Alive),
            (0u64..1_000).prop_map(Op::Price),
            Just(Op::Invalid),
        ]
    }

    fn apply(s: &mut impl RuleState, op: Op, i: usize) {
        match op {
            Op::LastSeq(q) => s.set_last_seq(q),
            Op::Lost(n) => s.add_lost(n),
            Op::Duplicate => s.add_duplicate(),
            Op::Suspect(on) => s.set_suspect(on),
            Op::Alive(t) => s.set_alive(t),
            // The rules store valid prices only (an invalid one is `Invalid`).
            Op::Price(t) => s.set_price(Price {
                bid: 1.0 + i as f64,
                ask: 2.0 + i as f64,
                source_time: t / 2,
            }),
            Op::Invalid => s.set_invalid(),
        }
    }

    proptest::proptest! {
        /// What a check reads of any words, forged ones too, is what a
        /// whole decode gives, but for `key`: the word as it is, equal to a
        /// valid symbol's key exactly when the decode's symbol is it.
        #[test]
        fn facts_are_the_decoded_records(
            w in proptest::array::uniform14(proptest::prelude::any::<u64>()),
            bits in proptest::prelude::any::<u64>(),
            stamp in proptest::prelude::any::<u64>(),
        ) {
            let mut w = w;
            // Meta words with every flag combination, not only random ones.
            w[word::META] = (w[word::META] & !0xff_ffff) | (bits & 0xff_ffff);
            let (f, d) = (facts(&w, stamp), decode(&w, stamp).facts());
            proptest::prop_assert_eq!(Facts { key: d.key, ..f }, d);
            proptest::prop_assert_eq!(f.key, w[word::SYMBOL]);
            let valid = Symbol::from_key(w[word::SYMBOL]);
            proptest::prop_assert_eq!(d.key, valid.map_or(0, Symbol::key));
        }

        /// Every write of the rules' interface, made in place on a slot's
        /// words, gives exactly what it gives on a plain `SymbolState`,
        /// write after write (one update per write, and several in one).
        #[test]
        fn in_place_writes_match_the_plain_state(
            steps in proptest::collection::vec((op(), 1usize..4), 1..200),
        ) {
            let slot = Slot::default();
            slot.init(7, Symbol::parse("EURUSD").unwrap(), Thresholds { stale_ns: 1, source_ns: 2 });
            let mut plain = SymbolState::default();
            for (i, &(op, n)) in steps.iter().enumerate() {
                for _ in 0..n {
                    apply(&mut plain, op, i);
                }
                let read_back = slot.update(|s| {
                    for _ in 0..n {
                        apply(s, op, i);
                    }
                    (s.baseline(), s.last_seq())
                });
                proptest::prop_assert_eq!(read_back, (plain.seq.baseline, plain.seq.last_seq));
                proptest::prop_assert_eq!(slot.own_state(), plain);
                let r = slot.read().0;
                proptest::prop_assert_eq!(r.state, plain);
                proptest::prop_assert_eq!(r.feed, 7);
                proptest::prop_assert_eq!(slot.try_read_facts(), Some(r.facts()));
            }
        }
    }

    #[test]
    fn layout_is_pinned() {
        assert_eq!(size_of::<Slot>(), 128);
        assert_eq!(align_of::<Slot>(), 128);
        assert_eq!(offset_of!(Slot, stamp), 0);
        assert_eq!(offset_of!(Slot, words), 8);
        let words = [
            word::SYMBOL,
            word::META,
            word::LAST_SEQ,
            word::BID,
            word::ASK,
            word::SOURCE_TIME,
            word::LAST_ALIVE,
            word::TICKS_LOST,
            word::DUPLICATES,
            word::STALE_NS,
            word::SOURCE_NS,
            word::BID_SIZE,
            word::ASK_SIZE,
            word::NAMES_LEFT,
        ];
        assert_eq!(words, std::array::from_fn(|i| i));
        assert_eq!((USED, WORDS), (14, 15));
        let bits = [
            meta::BASELINE,
            meta::SUSPECT,
            meta::INVALID,
            meta::HAS_PRICE,
            meta::HALTED,
            meta::HAS_BID,
            meta::HAS_ASK,
            meta::CLOSED,
        ];
        assert_eq!(bits, std::array::from_fn(|i| 1 << (16 + i)));
        assert_eq!(meta::FEED_MASK, 0xffff);
        assert_eq!(meta::PRICE_FORMAT_MASK, 0xff << 24);
        assert_eq!(meta::EXPONENT_MASK, 0xff << 32);
        assert_eq!((meta::FORMAT_F64, meta::FORMAT_DECIMAL), (0, 1));
    }

    /// A float price sets has_bid and has_ask with has_price, format 0.
    #[test]
    fn a_float_price_sets_both_sides() {
        let slot = Slot::default();
        slot.init(
            1,
            Symbol::parse("EURUSD").unwrap(),
            Thresholds {
                stale_ns: 1,
                source_ns: 2,
            },
        );
        assert!(slot.read().0.no_quote());
        let price = Price {
            bid: 1.5,
            ask: 1.75,
            source_time: 3,
        };
        slot.update(|s| {
            s.set_last_seq(1);
            s.set_price(price);
            s.set_alive(4);
        });
        let r = slot.read().0;
        let side = |p: f64| {
            Some(Side {
                price: Exact::F64(p),
                size: 0,
            })
        };
        assert_eq!((r.bid, r.ask, r.halted), (side(1.5), side(1.75), false));
        // Relaxed: this thread wrote it.
        let m = slot.words[word::META].load(Ordering::Relaxed);
        assert_eq!(
            m & (meta::HAS_PRICE | meta::HAS_BID | meta::HAS_ASK),
            meta::HAS_PRICE | meta::HAS_BID | meta::HAS_ASK
        );
        assert_eq!(
            m & (meta::PRICE_FORMAT_MASK | meta::EXPONENT_MASK | meta::HALTED),
            0
        );
        assert_eq!(r.state.price, Some(price));
    }

    /// `write_top` publishes decimal prices, sizes, halted and invalid in
    /// one write, keeping identity, thresholds, liveness and counters.
    #[test]
    fn write_top_keeps_identity_and_counters() {
        let slot = Slot::default();
        let sym = Symbol::parse("AAPL").unwrap();
        let th = Thresholds {
            stale_ns: 5,
            source_ns: 6,
        };
        slot.init(3, sym, th);
        // Counters and liveness from earlier messages stay.
        let p = Price {
            bid: 1.0,
            ask: 2.0,
            source_time: 1,
        };
        slot.update(|s| {
            s.set_last_seq(1);
            s.set_price(p);
            s.set_alive(70);
        });
        slot.update(|s| {
            s.set_last_seq(4);
            s.add_lost(2);
            s.set_price(p);
            s.set_alive(71);
        });
        let top = Top {
            bid: Some(Level {
                price: 1_234_500,
                size: 300,
            }),
            ask: None,
            exponent: -4,
            halted: true,
            invalid: false,
            suspect: false,
            closed: true,
            last_seq: 99,
            source_time: 42,
        };
        slot.write_top(&top);
        let r = slot.read().0;
        assert_eq!((r.feed, r.symbol, r.thresholds), (3, Some(sym), th));
        assert!(r.halted && r.closed && !r.state.suspect);
        let bid = r.bid.unwrap();
        assert_eq!(
            bid.price,
            Exact::Decimal {
                mantissa: 1_234_500,
                exponent: -4
            }
        );
        assert_eq!(bid.price.to_string(), "123.45");
        assert_eq!(bid.size, 300);
        assert_eq!(r.ask, None);
        assert!(r.halted && !r.state.invalid && !r.no_quote());
        assert_eq!(r.state.seq.last_seq, 99);
        assert_eq!(r.state.seq.ticks_lost, 2);
        assert_eq!(r.state.last_alive, 71);
        let sp = r.state.price.unwrap();
        assert_eq!((sp.bid, sp.source_time), (123.45, 42));
        assert!(sp.ask.is_nan());
        // Negative mantissas and the other side; halted cleared; crossed.
        slot.write_top(&Top {
            bid: None,
            ask: Some(Level { price: -5, size: 0 }),
            exponent: -2,
            invalid: true,
            ..Top::default()
        });
        let r = slot.read().0;
        assert_eq!(r.bid, None);
        assert_eq!(r.ask.unwrap().price.to_string(), "-0.05");
        assert!(!r.halted && r.state.invalid);
        assert_eq!((r.feed, r.symbol), (3, Some(sym)));
        slot.write_top(&Top::default());
        assert!(slot.read().0.no_quote());
        assert_eq!(slot.read().0.state.price, None);
    }

    #[test]
    fn round_trip() {
        let slot = Slot::default();
        let sym = Symbol::parse("EURUSD").unwrap();
        let th = Thresholds {
            stale_ns: 7,
            source_ns: 9,
        };
        let s = SymbolState {
            seq: SeqTrack {
                baseline: true,
                last_seq: 8,
                ticks_lost: 3,
                duplicates: 0,
            },
            suspect: true,
            invalid: false,
            price: Some(Price {
                bid: 1.5,
                ask: 1.75,
                source_time: 33,
            }),
            last_alive: 50,
        };
        let mut s = s;
        s.seq.duplicates = 3;
        s.invalid = true;
        slot.init(513, sym, th);
        assert_eq!(slot.read().0.version, 2);
        slot.publish(513, &s);
        let (r, retries) = slot.read();
        assert_eq!(retries, 0);
        assert_eq!(r.feed, 513);
        assert_eq!(r.symbol, Some(sym));
        assert_eq!(r.state, s);
        assert_eq!(r.thresholds, th);
        assert_eq!(r.version, 4, "stamp counts changes");
        assert_eq!(slot.own_state(), s);
        assert_eq!(slot.load_own().state, s);
    }

    #[test]
    fn empty_slot_reads_as_empty() {
        let (r, _) = Slot::default().read();
        assert_eq!(r.symbol, None);
        assert_eq!(r.state.price, None);
    }

    /// One writer publishes states whose every field is derived from one
    /// counter; readers on other threads must never see a mix of two writes.
    #[test]
    fn no_torn_reads() {
        let slot = Arc::new(Slot::default());
        let sym = Symbol::parse("TORN").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let state = |i: u64| SymbolState {
            seq: SeqTrack {
                baseline: true,
                last_seq: i,
                ticks_lost: i * 3,
                duplicates: i * 5,
            },
            suspect: i.is_multiple_of(2),
            invalid: i.is_multiple_of(3),
            price: Some(Price {
                bid: i as f64,
                ask: i as f64 + 1.0,
                source_time: i * 7,
            }),
            last_alive: i * 11,
        };
        let th = |i: u64| Thresholds {
            stale_ns: i * 13,
            source_ns: i * 17,
        };
        slot.init(1, sym, th(7));
        slot.publish(1, &state(0));
        let started = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (slot, stop, started) = (slot.clone(), stop.clone(), started.clone());
                std::thread::spawn(move || {
                    let (mut reads, mut changes) = (0u64, 0u64);
                    let mut last_version = 0;
                    let mut last = None;
                    while !stop.load(Ordering::Relaxed) || reads < 1000 {
                        let (r, _) = slot.read();
                        let i = r.state.seq.last_seq;
                        assert_eq!(r.state, state(i), "torn read at {i}");
                        assert_eq!(r.thresholds, th(7));
                        assert_eq!(r.symbol, Some(sym));
                        assert_eq!(r.version % 2, 0);
                        assert!(r.version >= last_version, "versions go forward");
                        last_version = r.version;
                        changes += u64::from(last.is_some_and(|l| l != i));
                        if last.replace(i).is_none() {
                            started.fetch_add(1, Ordering::Relaxed);
                        }
                        reads += 1;
                    }
                    (reads, changes)
                })
            })
            .collect();
        wait_for_readers(&started, 3);
        for i in 1..=300_000u64 {
            slot.publish(1, &state(i));
            if i.is_multiple_of(1_000) {
                // Readers on a busy machine get their turns meanwhile.
                std::thread::yield_now();
            }
        }
        stop.store(true, Ordering::Relaxed);
        let mut changes = 0;
        for r in readers {
            let (reads, seen) = r.join().unwrap();
            assert!(reads >= 1000);
            changes += seen;
        }
        // Copies taken while the writer wrote: the seqlock was raced.
        assert!(changes >= 100, "{changes} changes seen");
    }

    /// Until `n` readers counted in `started` took their first copy.
    fn wait_for_readers(started: &AtomicU64, n: u64) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while started.load(Ordering::Relaxed) < n {
            assert!(
                std::time::Instant::now() < deadline,
                "readers never started"
            );
            std::thread::yield_now();
        }
    }

    /// The real write path: one writer thread runs the rules in place
    /// (`Slot::update`) over quotes, snapshots and heartbeats with gaps,
    /// duplicates and invalid prices; readers on other threads check every
    /// copy against the state the same messages give on a plain
    /// `SymbolState` after as many updates as its stamp counts, so a copy
    /// mixing two updates' words never passes.
    #[test]
    fn no_torn_reads_through_update() {
        const UPDATES: usize = 200_000;
        /// Update `k`: what a heartbeat, a snapshot or a quote writes;
        /// sequences with gaps and duplicates, every 13th price invalid
        /// (flagged, never stored: the rules store valid prices only, and
        /// a NaN would never compare equal).
        fn step(s: &mut impl RuleState, k: u64) {
            let seq = k + k / 7 - k / 11;
            let price = Price {
                bid: if k.is_multiple_of(13) {
                    f64::NAN
                } else {
                    k as f64
                },
                ask: k as f64 + 0.5,
                source_time: k * 3,
            };
            s.set_alive(k * 5);
            match k % 10 {
                0 => {
                    s.add_lost(seq % 3);
                    s.set_suspect(true);
                }
                1 => {
                    s.set_last_seq(seq);
                    s.set_suspect(false);
                    s.set_invalid();
                }
                2 => s.add_duplicate(),
                _ if price.is_valid() => {
                    s.set_last_seq(seq);
                    s.set_price(price);
                }
                _ => {
                    s.set_last_seq(seq);
                    s.set_invalid();
                }
            };
        }
        let mut plain = SymbolState::default();
        let mut expected = vec![plain];
        for k in 1..=UPDATES as u64 {
            step(&mut plain, k);
            expected.push(plain);
        }
        let distinct = expected.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(distinct > UPDATES / 2, "the messages change the state");

        let slot = Arc::new(Slot::default());
        let sym = Symbol::parse("TORN").unwrap();
        let th = Thresholds {
            stale_ns: 3,
            source_ns: 4,
        };
        slot.init(2, sym, th);
        let base = slot.load_own().version;
        let expected = Arc::new(expected);
        let stop = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (slot, stop, expected) = (slot.clone(), stop.clone(), expected.clone());
                let started = started.clone();
                std::thread::spawn(move || {
                    let (mut reads, mut changes) = (0u64, 0u64);
                    let mut last = None;
                    while !stop.load(Ordering::Relaxed) || reads < 1000 {
                        let (r, _) = slot.read();
                        let k = ((r.version - base) / 2) as usize;
                        assert_eq!(r.state, expected[k], "torn read after {k} updates");
                        assert_eq!((r.feed, r.symbol, r.thresholds), (2, Some(sym), th));
                        changes += u64::from(last.is_some_and(|l| l != k));
                        if last.replace(k).is_none() {
                            started.fetch_add(1, Ordering::Relaxed);
                        }
                        reads += 1;
                    }
                    (reads, changes)
                })
            })
            .collect();
        wait_for_readers(&started, 3);
        for k in 1..=UPDATES as u64 {
            slot.update(|s| step(s, k));
            if k.is_multiple_of(1_000) {
                std::thread::yield_now();
            }
        }
        stop.store(true, Ordering::Relaxed);
        let mut changes = 0;
        for r in readers {
            let (reads, seen) = r.join().unwrap();
            assert!(reads >= 1000);
            changes += seen;
        }
        assert!(
            changes >= 100,
            "{changes} changes seen: no read raced the writer"
        );
        assert_eq!(slot.load_own().state, expected[UPDATES]);
    }
}
