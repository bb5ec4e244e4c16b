//! What an ITCH feed did, reported as it applies: each packet's
//! [`Outcome`] (which the sequencer returns, and the feed acts on), and the
//! events behind `replay --explain` for ITCH feeds. Nothing is recorded
//! unless a log is attached ([`Feed::watch`](super::feed::Feed::watch)); the
//! plain path pays one untaken branch per message.

use super::book::{Order, Price, Top};
use super::mold::Session;
use crate::symbol::Symbol;

/// What one packet did to the stream (the sequencer's answer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// A new session began: the caller drops books and symbols first.
    pub new_session: bool,
    /// A packet of an earlier session: nothing else happened.
    pub stale_session: bool,
    /// Proof of life: set `last_alive` to the packet's time (and, for a
    /// heartbeat, raise the source watermark).
    pub alive: bool,
    /// An end-of-session packet: the feed's hours are now closed.
    pub end_of_session: bool,
    /// The gap this packet revealed, `[lo, hi)`.
    pub gap: Option<(u64, u64)>,
    /// Messages applied.
    pub applied: u32,
    /// Messages that filled a gap.
    pub fills: u32,
    /// Duplicates dropped.
    pub duplicates: u32,
    /// Gaps given up for room (`max_held`,
    /// [`MAX_GAPS`](super::sequencer::MAX_GAPS)).
    pub given_up: u32,
    /// A new session ended a wait for a snapshot (glimpse G3.2).
    pub abandoned: bool,
}

/// A MoldUDP64 packet as the feed read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketInfo {
    /// Its session.
    pub session: Session,
    /// Its first sequence (the next one for a heartbeat or end of session).
    pub sequence: u64,
    /// Its message count (0 heartbeat, 0xFFFF end of session).
    pub count: u16,
}

/// The order message that changed a book's top, as applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderChange {
    /// The message type letter (`A`, `F`, `E`, `C`, `X`, `D`, `U`).
    pub code: u8,
    /// The order reference (the new one for a replace).
    pub order: u64,
    /// The order as it rests after the message, or as it was before when the
    /// message removed it; `None` for an unknown reference.
    pub resting: Option<Order>,
    /// Shares the message names (added, executed, cancelled, the replace's new shares).
    pub shares: u32,
    /// The price the message names (add, replace, execution with price), else the order's.
    pub price: Option<Price>,
}

/// One thing the feed did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// An accepted packet and what it did to the stream.
    Packet {
        /// Its header.
        packet: PacketInfo,
        /// The sequencer's outcome.
        outcome: Outcome,
    },
    /// A packet revealed the gap `[lo, hi)`, given up after `deadline` (ns).
    GapOpened {
        /// First missing sequence.
        lo: u64,
        /// One past the last missing sequence.
        hi: u64,
        /// Given up at the first event strictly after this, ns.
        deadline: u64,
    },
    /// The last missing message of `[lo, hi)` came.
    GapFilled {
        /// First sequence of the gap.
        lo: u64,
        /// One past its last.
        hi: u64,
    },
    /// The gap `[lo, hi)` was given up with `missing` messages lost.
    GapGivenUp {
        /// First sequence of the gap.
        lo: u64,
        /// One past its last.
        hi: u64,
        /// Messages never received (lost, unless `first`).
        missing: u64,
        /// Its deadline, ns.
        deadline: u64,
        /// The session's first gap: the stream counts as joined mid-session.
        first: bool,
        /// Given up for room (`max_held` or too many gaps), not by time.
        room: bool,
    },
    /// The session's first packet started beyond the join bound at `first`.
    Joined {
        /// The packet's first sequence.
        first: u64,
    },
    /// The books held `max_orders` live orders and refused an add: the
    /// first this session (the feed is suspect from here until the session
    /// changes or a snapshot merges).
    OrdersRefused {
        /// The refused order's reference.
        order: u64,
        /// Live orders at the time.
        live: u64,
    },
    /// The session held `max_symbols` symbols and refused a new one: the
    /// first this session (the feed is suspect from here until the session
    /// changes or a snapshot merges).
    SymbolsRefused {
        /// The stock refused a symbol.
        stock: Symbol,
        /// Symbols the session held.
        symbols: u64,
    },
    /// A merged snapshot's spin refused adds under `max_orders` or symbols
    /// under `max_symbols` (its books are not whole: the feed is suspect
    /// until the session changes or another snapshot merges).
    SnapshotRefused {
        /// Adds were refused.
        orders: bool,
        /// Symbols were refused.
        symbols: bool,
    },
    /// A new session began: books and symbols were dropped.
    NewSession {
        /// The new session.
        session: Session,
    },
    /// A System Event message (`S`).
    SystemEvent {
        /// Its event code.
        code: u8,
        /// Its timestamp, ns since midnight.
        timestamp: u64,
    },
    /// A Stock Trading Action (`H`) applied to the watched symbol (the one
    /// its locate maps to, whatever its `stock` field names).
    TradingAction {
        /// The message's `stock` field.
        stock: Symbol,
        /// `H`, `P`, `Q` or `T`.
        state: u8,
        /// The reason code.
        reason: [u8; 4],
        /// Its timestamp, ns since midnight.
        timestamp: u64,
    },
    /// An Operational Halt (`h`) applied to the watched symbol (by its
    /// locate, as a trading action).
    OperationalHalt {
        /// The message's `stock` field.
        stock: Symbol,
        /// Market code (`Q` is Nasdaq's).
        market: u8,
        /// `H` halted, `T` resumed.
        action: u8,
        /// Its timestamp, ns since midnight.
        timestamp: u64,
    },
    /// An order message crossed or uncrossed the watched symbol's book, or
    /// emptied or first filled it.
    Book {
        /// The stock.
        stock: Symbol,
        /// The message.
        change: OrderChange,
        /// Top of book before.
        before: Top,
        /// Top of book after.
        after: Top,
        /// Its timestamp, ns since midnight.
        timestamp: u64,
    },
}

/// The events recorded since they were last taken, and what to record.
#[derive(Debug, Clone, Default)]
pub struct Log {
    /// The symbol whose halts and book changes are recorded (feed-wide
    /// events are always recorded).
    pub watch: Option<Symbol>,
    /// Recorded, oldest first.
    pub events: Vec<Event>,
}

/// True when `top` has a crossed book (best bid above best ask).
pub fn crossed(top: &Top) -> bool {
    matches!((top.bid, top.ask), (Some((b, _)), Some((a, _))) if b > a)
}

/// True when neither side has an order.
pub fn empty(top: &Top) -> bool {
    top.bid.is_none() && top.ask.is_none()
}
