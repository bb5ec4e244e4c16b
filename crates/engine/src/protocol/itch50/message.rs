//! One TotalView-ITCH 5.0 message: a view over a MoldUDP64 block.
//!
//! ```text
//! header  | 0 type | 1..3 stock_locate u16 | 3..5 tracking u16 | 5..11 timestamp u48 (ns since midnight, exchange time) |
//! A       | 11..19 order ref u64 | 19 side | 20..24 shares u32 | 24..32 stock | 32..36 price u32 (1/10,000 $) |
//! ```
//!
//! (every type's layout is in [`layout`] and spec §2). Integers are
//! big-endian. [`check`] validates a block (length for its type, the stock
//! field); a [`Message`] made from a checked block has infallible getters.

use super::Reject;
use crate::symbol::{Symbol, SYMBOL_LEN};

/// Bytes of the header every message starts with.
pub const HEADER_LEN: usize = 11;

/// Message type letters.
pub mod msg_type {
    pub const SYSTEM_EVENT: u8 = b'S';
    pub const STOCK_DIRECTORY: u8 = b'R';
    pub const TRADING_ACTION: u8 = b'H';
    pub const REG_SHO: u8 = b'Y';
    pub const PARTICIPANT_POSITION: u8 = b'L';
    pub const MWCB_DECLINE: u8 = b'V';
    pub const MWCB_STATUS: u8 = b'W';
    pub const IPO_QUOTING: u8 = b'K';
    pub const LULD_COLLAR: u8 = b'J';
    pub const OPERATIONAL_HALT: u8 = b'h';
    pub const ADD_ORDER: u8 = b'A';
    pub const ADD_ORDER_MPID: u8 = b'F';
    pub const EXECUTED: u8 = b'E';
    pub const EXECUTED_WITH_PRICE: u8 = b'C';
    pub const CANCEL: u8 = b'X';
    pub const DELETE: u8 = b'D';
    pub const REPLACE: u8 = b'U';
    pub const TRADE: u8 = b'P';
    pub const CROSS_TRADE: u8 = b'Q';
    pub const BROKEN_TRADE: u8 = b'B';
    pub const NOII: u8 = b'I';
    pub const RETAIL_INTEREST: u8 = b'N';
    pub const PRICE_DISCOVERY: u8 = b'O';
}

/// Lengths and `stock` offsets per type (spec §2), in bytes from the start
/// of the message.
pub mod layout {
    use super::msg_type::*;

    /// Every known type: (type, length, offset of its `stock` field).
    pub const TYPES: [(u8, usize, Option<usize>); 23] = [
        (SYSTEM_EVENT, 12, None),
        (STOCK_DIRECTORY, 39, Some(11)),
        (TRADING_ACTION, 25, Some(11)),
        (REG_SHO, 20, Some(11)),
        (PARTICIPANT_POSITION, 26, Some(15)),
        (MWCB_DECLINE, 35, None),
        (MWCB_STATUS, 12, None),
        (IPO_QUOTING, 28, Some(11)),
        (LULD_COLLAR, 35, Some(11)),
        (OPERATIONAL_HALT, 21, Some(11)),
        (ADD_ORDER, 36, Some(24)),
        (ADD_ORDER_MPID, 40, Some(24)),
        (EXECUTED, 31, None),
        (EXECUTED_WITH_PRICE, 36, None),
        (CANCEL, 23, None),
        (DELETE, 19, None),
        (REPLACE, 35, None),
        (TRADE, 44, Some(24)),
        (CROSS_TRADE, 40, Some(19)),
        (BROKEN_TRADE, 19, None),
        (NOII, 50, Some(28)),
        (RETAIL_INTEREST, 20, Some(11)),
        (PRICE_DISCOVERY, 48, Some(11)),
    ];

    /// (length, stock offset) of each type letter; length 0 = unknown type.
    pub const BY_TYPE: [(u8, u8); 256] = {
        let mut t = [(0u8, 0u8); 256];
        let mut i = 0;
        while i < TYPES.len() {
            let (code, len, stock) = TYPES[i];
            t[code as usize] = (
                len as u8,
                match stock {
                    Some(at) => at as u8,
                    None => 0,
                },
            );
            i += 1;
        }
        t
    };
}

/// Length of a known type, `None` for a type letter this decoder does not know.
#[inline]
pub fn known_len(code: u8) -> Option<usize> {
    match layout::BY_TYPE[code as usize].0 {
        0 => None,
        n => Some(n as usize),
    }
}

/// Validates one block: a known type must be at least its length and its
/// `stock` field (where it has one) a valid symbol. An unknown type, of any
/// length ≥ 1, is valid. `block` is never empty here (the framing rejects
/// empty blocks first).
#[inline]
pub fn check(block: &[u8]) -> Result<(), Reject> {
    let Some(&code) = block.first() else {
        return Err(Reject::EmptyBlock);
    };
    let (len, stock) = layout::BY_TYPE[code as usize];
    if len == 0 {
        return Ok(());
    }
    if block.len() < len as usize {
        return Err(Reject::TooShortForType);
    }
    if stock != 0 && stock_at(block, stock as usize).is_none() {
        return Err(Reject::BadStock);
    }
    Ok(())
}

/// Big-endian fields at fixed offsets of a block known to be at least `N`
/// bytes long ([`Message::fixed`]): each range is checked when compiling,
/// so a read is one load, with no bounds check and no way to fail.
pub mod fixed {
    /// The `u16` at `AT`.
    #[inline(always)]
    pub fn u16<const AT: usize, const N: usize>(b: &[u8; N]) -> u16 {
        u16::from_be_bytes(array::<AT, 2, N>(b))
    }

    /// The `u32` at `AT`.
    #[inline(always)]
    pub fn u32<const AT: usize, const N: usize>(b: &[u8; N]) -> u32 {
        u32::from_be_bytes(array::<AT, 4, N>(b))
    }

    /// The 48-bit integer at `AT` (a timestamp).
    #[inline(always)]
    pub fn u48<const AT: usize, const N: usize>(b: &[u8; N]) -> u64 {
        let [a, b, c, d, e, f] = array::<AT, 6, N>(b);
        (u16::from_be_bytes([a, b]) as u64) << 32 | u32::from_be_bytes([c, d, e, f]) as u64
    }

    /// The `u64` at `AT`.
    #[inline(always)]
    pub fn u64<const AT: usize, const N: usize>(b: &[u8; N]) -> u64 {
        u64::from_be_bytes(array::<AT, 8, N>(b))
    }

    /// The `W` bytes at `AT`.
    #[inline(always)]
    pub fn array<const AT: usize, const W: usize, const N: usize>(b: &[u8; N]) -> [u8; W] {
        const { assert!(AT + W <= N) };
        let mut out = [0u8; W];
        out.copy_from_slice(&b[AT..AT + W]);
        out
    }
}

#[inline]
fn be<const N: usize>(b: &[u8], at: usize) -> u64 {
    match b.get(at..at + N) {
        Some(s) => s.iter().fold(0u64, |v, &x| v << 8 | x as u64),
        None => 0,
    }
}

#[inline]
fn byte(b: &[u8], at: usize) -> u8 {
    b.get(at).copied().unwrap_or(0)
}

#[inline]
fn bytes<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(s) = b.get(at..at + N) {
        out.copy_from_slice(s);
    }
    out
}

#[inline]
fn stock_at(b: &[u8], at: usize) -> Option<Symbol> {
    Symbol::from_wire(bytes::<SYMBOL_LEN>(b, at))
}

/// A side of the book.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// `B`.
    Buy,
    /// `S`.
    Sell,
}

impl Side {
    /// `B` → buy, `S` → sell, anything else → `None`.
    #[inline]
    pub fn from_code(code: u8) -> Option<Side> {
        match code {
            b'B' => Some(Side::Buy),
            b'S' => Some(Side::Sell),
            _ => None,
        }
    }

    /// The wire letter.
    pub fn code(self) -> u8 {
        match self {
            Side::Buy => b'B',
            Side::Sell => b'S',
        }
    }
}

/// One message of a checked packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    bytes: &'a [u8],
}

impl<'a> Message<'a> {
    /// Wraps a block that [`check`] accepted (or any bytes: getters of a
    /// block too short read zeros, never panic).
    #[inline]
    pub fn new(bytes: &'a [u8]) -> Message<'a> {
        Message { bytes }
    }

    /// The first `N` bytes as an array for [`fixed`]'s readers; `None`
    /// when the block is shorter (never for a checked message of a type at
    /// least `N` bytes long).
    #[inline]
    pub fn fixed<const N: usize>(&self) -> Option<&'a [u8; N]> {
        self.bytes.first_chunk()
    }

    /// The message's bytes (the whole block, extra bytes included).
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The type letter.
    #[inline]
    pub fn code(&self) -> u8 {
        byte(self.bytes, 0)
    }

    /// True for a type this decoder knows.
    #[inline]
    pub fn is_known(&self) -> bool {
        known_len(self.code()).is_some()
    }

    /// The session's locate code of the stock (0 = none).
    #[inline]
    pub fn locate(&self) -> u16 {
        be::<2>(self.bytes, 1) as u16
    }

    /// The venue's tracking number.
    #[inline]
    pub fn tracking(&self) -> u16 {
        be::<2>(self.bytes, 3) as u16
    }

    /// Nanoseconds since midnight of the session's date, exchange local
    /// time (u48); `None` for a block shorter than the 11-byte header (only
    /// an unknown type can be).
    #[inline]
    pub fn timestamp(&self) -> Option<u64> {
        (self.bytes.len() >= HEADER_LEN).then(|| be::<6>(self.bytes, 5))
    }

    /// The `stock` field, for types that have one.
    #[inline]
    pub fn stock(&self) -> Option<Symbol> {
        match layout::BY_TYPE[self.code() as usize] {
            (0, _) | (_, 0) => None,
            (_, at) => stock_at(self.bytes, at as usize),
        }
    }

    /// The body, decoded by type.
    #[inline]
    pub fn body(&self) -> Body {
        use msg_type::*;
        let b = self.bytes;
        let stock = |at| stock_at(b, at).unwrap_or(Symbol::PLACEHOLDER);
        match self.code() {
            SYSTEM_EVENT => Body::SystemEvent { code: byte(b, 11) },
            STOCK_DIRECTORY => Body::StockDirectory {
                stock: stock(11),
                market_category: byte(b, 19),
                financial_status: byte(b, 20),
                round_lot_size: be::<4>(b, 21) as u32,
                round_lots_only: byte(b, 25),
                issue_classification: byte(b, 26),
                issue_sub_type: bytes(b, 27),
                authenticity: byte(b, 29),
                short_sale_threshold: byte(b, 30),
                ipo_flag: byte(b, 31),
                luld_tier: byte(b, 32),
                etp_flag: byte(b, 33),
                etp_leverage: be::<4>(b, 34) as u32,
                inverse: byte(b, 38),
            },
            TRADING_ACTION => Body::TradingAction {
                stock: stock(11),
                state: byte(b, 19),
                reason: bytes(b, 21),
            },
            REG_SHO => Body::RegSho {
                stock: stock(11),
                action: byte(b, 19),
            },
            PARTICIPANT_POSITION => Body::ParticipantPosition {
                mpid: bytes(b, 11),
                stock: stock(15),
                primary: byte(b, 23),
                mode: byte(b, 24),
                state: byte(b, 25),
            },
            MWCB_DECLINE => Body::MwcbDecline {
                levels: [be::<8>(b, 11), be::<8>(b, 19), be::<8>(b, 27)],
            },
            MWCB_STATUS => Body::MwcbStatus { level: byte(b, 11) },
            IPO_QUOTING => Body::IpoQuoting {
                stock: stock(11),
                release_time: be::<4>(b, 19) as u32,
                qualifier: byte(b, 23),
                price: be::<4>(b, 24) as u32,
            },
            LULD_COLLAR => Body::LuldCollar {
                stock: stock(11),
                reference: be::<4>(b, 19) as u32,
                upper: be::<4>(b, 23) as u32,
                lower: be::<4>(b, 27) as u32,
                extension: be::<4>(b, 31) as u32,
            },
            OPERATIONAL_HALT => Body::OperationalHalt {
                stock: stock(11),
                market: byte(b, 19),
                action: byte(b, 20),
            },
            ADD_ORDER | ADD_ORDER_MPID => Body::AddOrder {
                order: be::<8>(b, 11),
                side: byte(b, 19),
                shares: be::<4>(b, 20) as u32,
                stock: stock(24),
                price: be::<4>(b, 32) as u32,
                attribution: (self.code() == ADD_ORDER_MPID).then(|| bytes(b, 36)),
            },
            EXECUTED => Body::Executed {
                order: be::<8>(b, 11),
                shares: be::<4>(b, 19) as u32,
                match_number: be::<8>(b, 23),
            },
            EXECUTED_WITH_PRICE => Body::ExecutedWithPrice {
                order: be::<8>(b, 11),
                shares: be::<4>(b, 19) as u32,
                match_number: be::<8>(b, 23),
                printable: byte(b, 31),
                price: be::<4>(b, 32) as u32,
            },
            CANCEL => Body::Cancel {
                order: be::<8>(b, 11),
                shares: be::<4>(b, 19) as u32,
            },
            DELETE => Body::Delete {
                order: be::<8>(b, 11),
            },
            REPLACE => Body::Replace {
                original: be::<8>(b, 11),
                new: be::<8>(b, 19),
                shares: be::<4>(b, 27) as u32,
                price: be::<4>(b, 31) as u32,
            },
            TRADE => Body::Trade {
                order: be::<8>(b, 11),
                side: byte(b, 19),
                shares: be::<4>(b, 20) as u32,
                stock: stock(24),
                price: be::<4>(b, 32) as u32,
                match_number: be::<8>(b, 36),
            },
            CROSS_TRADE => Body::CrossTrade {
                shares: be::<8>(b, 11),
                stock: stock(19),
                price: be::<4>(b, 27) as u32,
                match_number: be::<8>(b, 31),
                cross_type: byte(b, 39),
            },
            BROKEN_TRADE => Body::BrokenTrade {
                match_number: be::<8>(b, 11),
            },
            NOII => Body::Noii {
                paired: be::<8>(b, 11),
                imbalance: be::<8>(b, 19),
                direction: byte(b, 27),
                stock: stock(28),
                far: be::<4>(b, 36) as u32,
                near: be::<4>(b, 40) as u32,
                reference: be::<4>(b, 44) as u32,
                cross_type: byte(b, 48),
                variation: byte(b, 49),
            },
            RETAIL_INTEREST => Body::RetailInterest {
                stock: stock(11),
                flag: byte(b, 19),
            },
            PRICE_DISCOVERY => Body::PriceDiscovery { stock: stock(11) },
            code => Body::Unknown { code },
        }
    }
}

/// A message's body by type. Prices are `Price(4)` (u32, 1/10,000 dollar)
/// unless said otherwise; shares are counts; `order` is the order reference
/// number; `stock` is the validated 8-byte symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Body {
    /// `S`: `O` start of messages, `S` start of system hours, `Q` start of
    /// market hours, `M` end of market hours, `E` end of system hours, `C`
    /// end of messages.
    SystemEvent { code: u8 },
    /// `R`: maps the locate code to the stock for the session.
    StockDirectory {
        stock: Symbol,
        market_category: u8,
        financial_status: u8,
        round_lot_size: u32,
        round_lots_only: u8,
        issue_classification: u8,
        issue_sub_type: [u8; 2],
        authenticity: u8,
        short_sale_threshold: u8,
        ipo_flag: u8,
        luld_tier: u8,
        etp_flag: u8,
        etp_leverage: u32,
        inverse: u8,
    },
    /// `H`: `state` is `H` halted, `P` paused, `Q` quotation only, `T` trading.
    TradingAction {
        stock: Symbol,
        state: u8,
        reason: [u8; 4],
    },
    /// `Y`.
    RegSho { stock: Symbol, action: u8 },
    /// `L`.
    ParticipantPosition {
        mpid: [u8; 4],
        stock: Symbol,
        primary: u8,
        mode: u8,
        state: u8,
    },
    /// `V`: levels 1 to 3, `Price(8)` (u64, 1/100,000,000 dollar).
    MwcbDecline { levels: [u64; 3] },
    /// `W`.
    MwcbStatus { level: u8 },
    /// `K`: release time in seconds since midnight.
    IpoQuoting {
        stock: Symbol,
        release_time: u32,
        qualifier: u8,
        price: u32,
    },
    /// `J`.
    LuldCollar {
        stock: Symbol,
        reference: u32,
        upper: u32,
        lower: u32,
        extension: u32,
    },
    /// `h`: `market` `Q` Nasdaq, `B` BX, `X` PSX; `action` `H` halted, `T` resumed.
    OperationalHalt {
        stock: Symbol,
        market: u8,
        action: u8,
    },
    /// `A`, and `F` with its `attribution` (MPID).
    AddOrder {
        order: u64,
        side: u8,
        shares: u32,
        stock: Symbol,
        price: u32,
        attribution: Option<[u8; 4]>,
    },
    /// `E`.
    Executed {
        order: u64,
        shares: u32,
        match_number: u64,
    },
    /// `C`.
    ExecutedWithPrice {
        order: u64,
        shares: u32,
        match_number: u64,
        printable: u8,
        price: u32,
    },
    /// `X`: cancels `shares` of the order.
    Cancel { order: u64, shares: u32 },
    /// `D`.
    Delete { order: u64 },
    /// `U`: the original order is removed; `new` takes its side and stock.
    Replace {
        original: u64,
        new: u64,
        shares: u32,
        price: u32,
    },
    /// `P`: a trade against a non-displayed order.
    Trade {
        order: u64,
        side: u8,
        shares: u32,
        stock: Symbol,
        price: u32,
        match_number: u64,
    },
    /// `Q`: `shares` is a u64 here.
    CrossTrade {
        shares: u64,
        stock: Symbol,
        price: u32,
        match_number: u64,
        cross_type: u8,
    },
    /// `B`.
    BrokenTrade { match_number: u64 },
    /// `I`: net order imbalance indicator.
    Noii {
        paired: u64,
        imbalance: u64,
        direction: u8,
        stock: Symbol,
        far: u32,
        near: u32,
        reference: u32,
        cross_type: u8,
        variation: u8,
    },
    /// `N`.
    RetailInterest { stock: Symbol, flag: u8 },
    /// `O`: fields after the stock are not read.
    PriceDiscovery { stock: Symbol },
    /// A type this decoder does not know: it occupies its sequence.
    Unknown { code: u8 },
}

/// Writes ITCH messages (for the simulator, the fixture generator and
/// tests). Each function returns the message's bytes, with `locate`,
/// `tracking` 0 and `timestamp` (ns since midnight) in the header.
pub mod encode {
    use super::{msg_type::*, Side, Symbol};

    fn header(code: u8, locate: u16, timestamp: u64, len: usize) -> Vec<u8> {
        let mut m = Vec::with_capacity(len);
        m.push(code);
        m.extend_from_slice(&locate.to_be_bytes());
        m.extend_from_slice(&0u16.to_be_bytes());
        m.extend_from_slice(&timestamp.to_be_bytes()[2..]);
        m
    }

    fn finish(mut m: Vec<u8>, len: usize) -> Vec<u8> {
        debug_assert!(m.len() <= len);
        m.resize(len, b' ');
        m
    }

    /// `S`.
    pub fn system_event(timestamp: u64, code: u8) -> Vec<u8> {
        let mut m = header(SYSTEM_EVENT, 0, timestamp, 12);
        m.push(code);
        finish(m, 12)
    }

    /// `R`, with round lots of 100 and the other fields blank.
    pub fn stock_directory(locate: u16, timestamp: u64, stock: Symbol) -> Vec<u8> {
        let mut m = header(STOCK_DIRECTORY, locate, timestamp, 39);
        m.extend_from_slice(&stock.to_wire());
        m.extend_from_slice(b"QN");
        m.extend_from_slice(&100u32.to_be_bytes());
        m.extend_from_slice(b"NC  PNN1N");
        m.extend_from_slice(&0u32.to_be_bytes());
        m.push(b'N');
        finish(m, 39)
    }

    /// `H`.
    pub fn trading_action(locate: u16, timestamp: u64, stock: Symbol, state: u8) -> Vec<u8> {
        let mut m = header(TRADING_ACTION, locate, timestamp, 25);
        m.extend_from_slice(&stock.to_wire());
        m.push(state);
        m.push(b' ');
        finish(m, 25)
    }

    /// `h`.
    pub fn operational_halt(
        locate: u16,
        timestamp: u64,
        stock: Symbol,
        market: u8,
        action: u8,
    ) -> Vec<u8> {
        let mut m = header(OPERATIONAL_HALT, locate, timestamp, 21);
        m.extend_from_slice(&stock.to_wire());
        m.push(market);
        m.push(action);
        finish(m, 21)
    }

    /// `A` (or `F` with an attribution).
    #[allow(clippy::too_many_arguments)]
    pub fn add_order(
        locate: u16,
        timestamp: u64,
        order: u64,
        side: Side,
        shares: u32,
        stock: Symbol,
        price: u32,
        attribution: Option<[u8; 4]>,
    ) -> Vec<u8> {
        let (code, len) = match attribution {
            Some(_) => (ADD_ORDER_MPID, 40),
            None => (ADD_ORDER, 36),
        };
        let mut m = header(code, locate, timestamp, len);
        m.extend_from_slice(&order.to_be_bytes());
        m.push(side.code());
        m.extend_from_slice(&shares.to_be_bytes());
        m.extend_from_slice(&stock.to_wire());
        m.extend_from_slice(&price.to_be_bytes());
        if let Some(a) = attribution {
            m.extend_from_slice(&a);
        }
        finish(m, len)
    }

    /// `E`.
    pub fn executed(locate: u16, timestamp: u64, order: u64, shares: u32, matched: u64) -> Vec<u8> {
        let mut m = header(EXECUTED, locate, timestamp, 31);
        m.extend_from_slice(&order.to_be_bytes());
        m.extend_from_slice(&shares.to_be_bytes());
        m.extend_from_slice(&matched.to_be_bytes());
        finish(m, 31)
    }

    /// `C`.
    pub fn executed_with_price(
        locate: u16,
        timestamp: u64,
        order: u64,
        shares: u32,
        matched: u64,
        price: u32,
    ) -> Vec<u8> {
        let mut m = header(EXECUTED_WITH_PRICE, locate, timestamp, 36);
        m.extend_from_slice(&order.to_be_bytes());
        m.extend_from_slice(&shares.to_be_bytes());
        m.extend_from_slice(&matched.to_be_bytes());
        m.push(b'Y');
        m.extend_from_slice(&price.to_be_bytes());
        finish(m, 36)
    }

    /// `X`.
    pub fn cancel(locate: u16, timestamp: u64, order: u64, shares: u32) -> Vec<u8> {
        let mut m = header(CANCEL, locate, timestamp, 23);
        m.extend_from_slice(&order.to_be_bytes());
        m.extend_from_slice(&shares.to_be_bytes());
        finish(m, 23)
    }

    /// `D`.
    pub fn delete(locate: u16, timestamp: u64, order: u64) -> Vec<u8> {
        let mut m = header(DELETE, locate, timestamp, 19);
        m.extend_from_slice(&order.to_be_bytes());
        finish(m, 19)
    }

    /// `U`.
    pub fn replace(
        locate: u16,
        timestamp: u64,
        original: u64,
        new: u64,
        shares: u32,
        price: u32,
    ) -> Vec<u8> {
        let mut m = header(REPLACE, locate, timestamp, 35);
        m.extend_from_slice(&original.to_be_bytes());
        m.extend_from_slice(&new.to_be_bytes());
        m.extend_from_slice(&shares.to_be_bytes());
        m.extend_from_slice(&price.to_be_bytes());
        finish(m, 35)
    }

    /// `P`.
    #[allow(clippy::too_many_arguments)]
    pub fn trade(
        locate: u16,
        timestamp: u64,
        order: u64,
        side: Side,
        shares: u32,
        stock: Symbol,
        price: u32,
        matched: u64,
    ) -> Vec<u8> {
        let mut m = header(TRADE, locate, timestamp, 44);
        m.extend_from_slice(&order.to_be_bytes());
        m.push(side.code());
        m.extend_from_slice(&shares.to_be_bytes());
        m.extend_from_slice(&stock.to_wire());
        m.extend_from_slice(&price.to_be_bytes());
        m.extend_from_slice(&matched.to_be_bytes());
        finish(m, 44)
    }

    /// `I`, with the cross type `O` (opening) and no price variation.
    #[allow(clippy::too_many_arguments)]
    pub fn noii(
        locate: u16,
        timestamp: u64,
        stock: Symbol,
        paired: u64,
        imbalance: u64,
        direction: u8,
        reference: u32,
    ) -> Vec<u8> {
        let mut m = header(NOII, locate, timestamp, 50);
        m.extend_from_slice(&paired.to_be_bytes());
        m.extend_from_slice(&imbalance.to_be_bytes());
        m.push(direction);
        m.extend_from_slice(&stock.to_wire());
        for p in [reference, reference, reference] {
            m.extend_from_slice(&p.to_be_bytes());
        }
        m.push(b'O');
        m.push(b' ');
        finish(m, 50)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(s: &str) -> Symbol {
        Symbol::parse(s).unwrap()
    }

    /// An Add Order as Nasdaq lays it out: locate 0x0102, tracking 3,
    /// timestamp 34,200 s after midnight, order 0x0a0b, buy 100 AAPL at
    /// $190.5000.
    const ADD: [u8; 36] = [
        b'A', 0x01, 0x02, 0x00, 0x03, 0x1f, 0x1a, 0xce, 0xd9, 0xf0, 0x00, // header
        0, 0, 0, 0, 0, 0, 0x0a, 0x0b, // order ref
        b'B', 0, 0, 0, 100, // side, shares
        b'A', b'A', b'P', b'L', b' ', b' ', b' ', b' ', // stock
        0x00, 0x1d, 0x11, 0x68, // price 1,905,000
    ];

    #[test]
    fn add_order_fields() {
        assert_eq!(check(&ADD), Ok(()));
        let m = Message::new(&ADD);
        assert_eq!(m.code(), b'A');
        assert_eq!(m.locate(), 0x0102);
        assert_eq!(m.tracking(), 3);
        assert_eq!(m.timestamp(), Some(34_200_000_000_000));
        assert_eq!(m.stock(), Some(sym("AAPL")));
        assert_eq!(
            m.body(),
            Body::AddOrder {
                order: 0x0a0b,
                side: b'B',
                shares: 100,
                stock: sym("AAPL"),
                price: 1_905_000,
                attribution: None,
            }
        );
    }

    #[test]
    fn lengths_and_stock_rules() {
        assert_eq!(check(&ADD[..35]), Err(Reject::TooShortForType));
        let mut longer = ADD.to_vec();
        longer.extend_from_slice(b"extra");
        assert_eq!(check(&longer), Ok(()), "extra bytes are ignored");
        for bad in [
            *b"        ",
            *b" AAPL   ",
            *b"AA PL   ",
            *b"AAPL\x7f   ",
            *b"AAPL\0\0\0\0",
        ] {
            let mut m = ADD;
            m[24..32].copy_from_slice(&bad);
            assert_eq!(check(&m), Err(Reject::BadStock), "{bad:?}");
        }
        // Unknown types are valid at any length, even shorter than a header.
        assert_eq!(check(b"z"), Ok(()));
        assert_eq!(Message::new(b"z").timestamp(), None);
        assert_eq!(Message::new(b"z").body(), Body::Unknown { code: b'z' });
        // Types without a stock field accept any bytes there.
        let mut d = [0xffu8; 19];
        d[0] = b'D';
        assert_eq!(check(&d), Ok(()));
    }

    /// The table of spec §2, written out by letter (not from the
    /// constants it checks): type, length, offset of `stock`.
    #[test]
    fn the_layout_is_the_specs_table() {
        let spec: [(u8, usize, Option<usize>); 23] = [
            (b'S', 12, None),
            (b'R', 39, Some(11)),
            (b'H', 25, Some(11)),
            (b'Y', 20, Some(11)),
            (b'L', 26, Some(15)),
            (b'V', 35, None),
            (b'W', 12, None),
            (b'K', 28, Some(11)),
            (b'J', 35, Some(11)),
            (b'h', 21, Some(11)),
            (b'A', 36, Some(24)),
            (b'F', 40, Some(24)),
            (b'E', 31, None),
            (b'C', 36, None),
            (b'X', 23, None),
            (b'D', 19, None),
            (b'U', 35, None),
            (b'P', 44, Some(24)),
            (b'Q', 40, Some(19)),
            (b'B', 19, None),
            (b'I', 50, Some(28)),
            (b'N', 20, Some(11)),
            (b'O', 48, Some(11)),
        ];
        assert_eq!(layout::TYPES, spec);
        // One `L` by hand: its stock is after the 4-byte MPID.
        let mut l = vec![0u8; 26];
        l[0] = b'L';
        l[11..15].copy_from_slice(b"AB  ");
        l[15..23].copy_from_slice(b"MSFT    ");
        assert_eq!(check(&l), Ok(()));
        let stock = Message::new(&l).stock().map(|s| s.to_string());
        assert_eq!(stock, Some("MSFT".into()));
    }

    #[test]
    fn every_known_type_is_checked_for_length_and_stock() {
        for (code, len, stock) in layout::TYPES {
            let mut m = vec![b' '; len];
            m[0] = code;
            if let Some(at) = stock {
                m[at..at + 8].copy_from_slice(b"MSFT    ");
            }
            assert_eq!(check(&m), Ok(()), "{}", code as char);
            assert_eq!(known_len(code), Some(len));
            assert_eq!(
                check(&m[..len - 1]),
                Err(Reject::TooShortForType),
                "{}",
                code as char
            );
            assert_eq!(Message::new(&m).stock(), stock.map(|_| sym("MSFT")));
            assert_ne!(Message::new(&m).body(), Body::Unknown { code });
            if let Some(at) = stock {
                m[at] = b' ';
                assert_eq!(check(&m), Err(Reject::BadStock), "{}", code as char);
            }
        }
    }

    #[test]
    fn encoders_round_trip() {
        let s = sym("MSFT");
        let cases: Vec<(Vec<u8>, Body)> = vec![
            (
                encode::system_event(5, b'Q'),
                Body::SystemEvent { code: b'Q' },
            ),
            (
                encode::trading_action(7, 5, s, b'H'),
                Body::TradingAction {
                    stock: s,
                    state: b'H',
                    reason: *b"    ",
                },
            ),
            (
                encode::operational_halt(7, 5, s, b'Q', b'H'),
                Body::OperationalHalt {
                    stock: s,
                    market: b'Q',
                    action: b'H',
                },
            ),
            (
                encode::add_order(7, 5, 99, Side::Sell, 300, s, 4_100_000, Some(*b"MPID")),
                Body::AddOrder {
                    order: 99,
                    side: b'S',
                    shares: 300,
                    stock: s,
                    price: 4_100_000,
                    attribution: Some(*b"MPID"),
                },
            ),
            (
                encode::executed(7, 5, 99, 10, 1234),
                Body::Executed {
                    order: 99,
                    shares: 10,
                    match_number: 1234,
                },
            ),
            (
                encode::executed_with_price(7, 5, 99, 10, 1234, 4_000_000),
                Body::ExecutedWithPrice {
                    order: 99,
                    shares: 10,
                    match_number: 1234,
                    printable: b'Y',
                    price: 4_000_000,
                },
            ),
            (
                encode::cancel(7, 5, 99, 10),
                Body::Cancel {
                    order: 99,
                    shares: 10,
                },
            ),
            (encode::delete(7, 5, 99), Body::Delete { order: 99 }),
            (
                encode::replace(7, 5, 99, 100, 50, 4_200_000),
                Body::Replace {
                    original: 99,
                    new: 100,
                    shares: 50,
                    price: 4_200_000,
                },
            ),
            (
                encode::trade(7, 5, 0, Side::Buy, 10, s, 4_000_000, 77),
                Body::Trade {
                    order: 0,
                    side: b'B',
                    shares: 10,
                    stock: s,
                    price: 4_000_000,
                    match_number: 77,
                },
            ),
        ];
        for (bytes, body) in cases {
            assert_eq!(check(&bytes), Ok(()), "{body:?}");
            assert_eq!(Some(bytes.len()), known_len(bytes[0]));
            let m = Message::new(&bytes);
            assert_eq!(m.body(), body);
            assert_eq!(m.timestamp(), Some(5));
        }
        let r = encode::stock_directory(7, 5, s);
        assert_eq!(check(&r), Ok(()));
        assert!(matches!(
            Message::new(&r).body(),
            Body::StockDirectory { stock, round_lot_size: 100, .. } if stock == s
        ));
        let i = encode::noii(7, 5, s, 1000, 200, b'B', 4_000_000);
        assert_eq!(check(&i), Ok(()));
        assert!(matches!(
            Message::new(&i).body(),
            Body::Noii { stock, paired: 1000, imbalance: 200, direction: b'B', near: 4_000_000, .. } if stock == s
        ));
    }

    #[test]
    fn getters_on_short_bytes_read_zeros() {
        let m = Message::new(b"A\x01");
        assert_eq!(m.locate(), 0);
        assert!(matches!(
            m.body(),
            Body::AddOrder {
                order: 0,
                price: 0,
                ..
            }
        ));
    }
}
