//! SQF v1 (Simple Quote Feed): one UDP datagram is one packet.
//!
//! ```text
//! packet  | 0..2 magic "SQ" | 2 version=1 | 3 flags | 4..6 message_count u16 | 6..8 reserved | 8..16 send_time u64 |
//! message | 0..2 length u16 (whole message, >= 4) | 2 type | 3 reserved | body ...
//! Quote 'Q' / Snapshot 'S' (>= 48 bytes)
//!         | 4..12 symbol | 12..16 reserved | 16..24 sequence u64 | 24..32 source_time u64 | 32..40 bid f64 | 40..48 ask f64 |
//! Heartbeat 'H' (>= 24 bytes)
//!         | 4..12 symbol | 12..16 reserved | 16..24 next_expected u64 |
//! ```
//!
//! All integers are little-endian; times are nanoseconds since the Unix epoch
//! on the provider's clock. A packet is valid as a whole or not at all:
//! [`Packet::new_checked`] walks every message once, and only a checked packet
//! hands out messages, whose getters then cannot fail.

use crate::symbol::{Symbol, SYMBOL_LEN};

/// Field offsets, in bytes from the start of the packet or of a message.
mod field {
    use std::ops::Range;

    pub const MAGIC: Range<usize> = 0..2;
    pub const VERSION: usize = 2;
    pub const COUNT: Range<usize> = 4..6;
    pub const SEND_TIME: Range<usize> = 8..16;

    pub const LENGTH: Range<usize> = 0..2;
    pub const TYPE: usize = 2;
    pub const SYMBOL: Range<usize> = 4..12;
    pub const SEQUENCE: Range<usize> = 16..24;
    pub const SOURCE_TIME: Range<usize> = 24..32;
    pub const BID: Range<usize> = 32..40;
    pub const ASK: Range<usize> = 40..48;
    pub const NEXT_EXPECTED: Range<usize> = 16..24;
}

/// The two magic bytes, "SQ".
pub const MAGIC: [u8; 2] = *b"SQ";

/// Messages in a datagram by its header's count (0 when too short to have
/// one). Meaningful for a datagram that passed [`Packet::new_checked`].
pub fn message_count(datagram: &[u8]) -> u16 {
    u16_at(datagram, field::COUNT.start).unwrap_or(0)
}
/// The only version this decoder reads.
pub const VERSION: u8 = 1;
/// Length of the packet header, in bytes.
pub const HEADER_LEN: usize = 16;
/// Length of a message header, in bytes.
pub const MESSAGE_HEADER_LEN: usize = 4;
/// Minimum length of a Quote or Snapshot message, in bytes.
pub const PRICE_LEN: usize = 48;
/// Minimum length of a Heartbeat message, in bytes.
pub const HEARTBEAT_LEN: usize = 24;

/// Message type codes.
pub mod msg_type {
    pub const QUOTE: u8 = b'Q';
    pub const SNAPSHOT: u8 = b'S';
    pub const HEARTBEAT: u8 = b'H';
}

/// Why a packet was rejected whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reject {
    /// Datagram shorter than the 16-byte header.
    Short,
    /// Magic is not "SQ".
    Magic,
    /// Version is not 1.
    Version,
    /// A message header (4 bytes) runs past the end of the datagram.
    HeaderOverrun,
    /// A message's length field is below 4.
    LengthTooSmall,
    /// A message's length runs past the end of the datagram.
    LengthOverrun,
    /// A Quote, Snapshot or Heartbeat shorter than its type's minimum.
    TooShortForType,
    /// A symbol that is not printable ASCII right-padded with spaces.
    BadSymbol,
    /// Bytes left after `message_count` messages.
    TrailingBytes,
}

impl Reject {
    /// Every reason, in a fixed order (counter arrays are indexed by it).
    pub const ALL: [Reject; 9] = [
        Reject::Short,
        Reject::Magic,
        Reject::Version,
        Reject::HeaderOverrun,
        Reject::LengthTooSmall,
        Reject::LengthOverrun,
        Reject::TooShortForType,
        Reject::BadSymbol,
        Reject::TrailingBytes,
    ];

    /// Position in [`Reject::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Stable snake_case name used in counters, logs and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            Reject::Short => "short",
            Reject::Magic => "bad_magic",
            Reject::Version => "bad_version",
            Reject::HeaderOverrun => "header_overrun",
            Reject::LengthTooSmall => "length_too_small",
            Reject::LengthOverrun => "length_overrun",
            Reject::TooShortForType => "too_short_for_type",
            Reject::BadSymbol => "bad_symbol",
            Reject::TrailingBytes => "trailing_bytes",
        }
    }
}

#[inline]
fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

#[inline]
fn u64_at<const N: usize>(b: &[u8; N], r: std::ops::Range<usize>) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[r]);
    u64::from_le_bytes(w)
}

#[inline]
fn symbol_bytes<const N: usize>(b: &[u8; N]) -> [u8; SYMBOL_LEN] {
    let mut s = [0u8; SYMBOL_LEN];
    s.copy_from_slice(&b[field::SYMBOL]);
    s
}

/// A validated SQF packet over any byte buffer.
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Validates the whole datagram (every rule of "packet validity") and
    /// wraps it. Never panics, never allocates.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Reject> {
        check(buffer.as_ref(), |_| {})?;
        Ok(Packet { buffer })
    }

    /// The provider's clock when the packet was sent: ns since the Unix epoch.
    #[inline]
    pub fn send_time(&self) -> u64 {
        let b = self.buffer.as_ref();
        b.get(field::SEND_TIME)
            .and_then(|s| s.try_into().ok())
            .map(u64::from_le_bytes)
            .unwrap_or(0)
    }

    /// Validates like [`new_checked`](Self::new_checked) and, in the same
    /// walk, calls `known` for each Quote, Snapshot and Heartbeat in order.
    /// The calls come before the verdict on the whole packet: act on them
    /// only if this returns `Ok`.
    #[inline]
    pub fn new_checked_visiting(buffer: T, known: impl FnMut(Known)) -> Result<Packet<T>, Reject> {
        check(buffer.as_ref(), known)?;
        Ok(Packet { buffer })
    }

    /// The message starting `at` bytes into the packet (an offset from
    /// [`Known::at`]). Any other offset reads whatever bytes are there
    /// (`Unknown` where they do not fit a message), never a panic.
    #[inline]
    pub fn message_at(&self, at: usize) -> Message<'_> {
        let msg = self.buffer.as_ref().get(at..).unwrap_or(&[]);
        let code = msg.get(field::TYPE).copied().unwrap_or(0);
        let m = match code {
            msg_type::QUOTE => PriceView::new(msg).map(Message::Quote),
            msg_type::SNAPSHOT => PriceView::new(msg).map(Message::Snapshot),
            msg_type::HEARTBEAT => HeartbeatView::new(msg).map(Message::Heartbeat),
            _ => None,
        };
        m.unwrap_or(Message::Unknown { code })
    }

    /// Number of messages in the packet.
    #[inline]
    pub fn message_count(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::COUNT.start).unwrap_or(0)
    }

    /// The messages, in order. Unknown types are yielded too.
    #[inline]
    pub fn messages(&self) -> Messages<'_> {
        Messages {
            rest: self.buffer.as_ref().get(HEADER_LEN..).unwrap_or(&[]),
            left: self.message_count(),
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

/// Most messages a packet can carry (`message_count` is a `u16`).
pub const MAX_MESSAGES: usize = u16::MAX as usize;

/// A Quote, Snapshot or Heartbeat met by the validity walk
/// ([`Packet::new_checked_visiting`]).
#[derive(Debug, Clone, Copy)]
pub struct Known {
    /// Where the message starts, in bytes from the start of the packet.
    pub at: usize,
    /// Its type code (see [`msg_type`]).
    pub code: u8,
    /// Its symbol, validated.
    pub symbol: Symbol,
}

/// The validity walk: header, then each message's framing, minimum length
/// and symbol, then no trailing bytes. `known` sees every Quote, Snapshot
/// and Heartbeat, in order.
#[inline(always)]
fn check(b: &[u8], mut known: impl FnMut(Known)) -> Result<(), Reject> {
    if b.len() < HEADER_LEN {
        return Err(Reject::Short);
    }
    if b[field::MAGIC] != MAGIC {
        return Err(Reject::Magic);
    }
    if b[field::VERSION] != VERSION {
        return Err(Reject::Version);
    }
    let count = u16_at(b, field::COUNT.start).unwrap_or(0);
    let mut rest = &b[HEADER_LEN..];
    let mut at = HEADER_LEN;
    for _ in 0..count {
        if rest.len() < MESSAGE_HEADER_LEN {
            return Err(Reject::HeaderOverrun);
        }
        let len = u16_at(rest, field::LENGTH.start).unwrap_or(0) as usize;
        if len < MESSAGE_HEADER_LEN {
            return Err(Reject::LengthTooSmall);
        }
        let Some(msg) = rest.get(..len) else {
            return Err(Reject::LengthOverrun);
        };
        let min = match msg[field::TYPE] {
            msg_type::QUOTE | msg_type::SNAPSHOT => PRICE_LEN,
            msg_type::HEARTBEAT => HEARTBEAT_LEN,
            _ => 0,
        };
        if len < min {
            return Err(Reject::TooShortForType);
        }
        if min != 0 {
            let mut s = [0u8; SYMBOL_LEN];
            s.copy_from_slice(&msg[field::SYMBOL]);
            let Some(symbol) = Symbol::from_wire(s) else {
                return Err(Reject::BadSymbol);
            };
            known(Known {
                at,
                code: msg[field::TYPE],
                symbol,
            });
        }
        rest = &rest[len..];
        at += len;
    }
    if !rest.is_empty() {
        return Err(Reject::TrailingBytes);
    }
    Ok(())
}

/// One message of a checked packet.
#[derive(Debug, Clone, Copy)]
pub enum Message<'a> {
    /// A price update carrying the symbol's next sequence number.
    Quote(PriceView<'a>),
    /// The provider's full state for a symbol; the stream continues at `sequence + 1`.
    Snapshot(PriceView<'a>),
    /// Liveness, with the sequence the symbol's next Quote will carry.
    Heartbeat(HeartbeatView<'a>),
    /// A type this decoder does not know: skipped by its length.
    Unknown {
        /// The type byte.
        code: u8,
    },
}

impl Message<'_> {
    /// The symbol the message is about; `None` for unknown types.
    #[inline]
    pub fn symbol(&self) -> Option<Symbol> {
        match self {
            Message::Quote(p) | Message::Snapshot(p) => Some(p.symbol()),
            Message::Heartbeat(h) => Some(h.symbol()),
            Message::Unknown { .. } => None,
        }
    }
}

/// Iterator over the messages of a checked packet.
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    rest: &'a [u8],
    left: u16,
}

impl<'a> Iterator for Messages<'a> {
    type Item = Message<'a>;

    #[inline]
    fn next(&mut self) -> Option<Message<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The packet was checked, so each step below succeeds; the `?`s only
        // keep this iterator panic-free by construction.
        let len = u16_at(self.rest, field::LENGTH.start)? as usize;
        let (msg, rest) = (self.rest.get(..len)?, self.rest.get(len..)?);
        self.rest = rest;
        Some(match msg[field::TYPE] {
            msg_type::QUOTE => Message::Quote(PriceView::new(msg)?),
            msg_type::SNAPSHOT => Message::Snapshot(PriceView::new(msg)?),
            msg_type::HEARTBEAT => Message::Heartbeat(HeartbeatView::new(msg)?),
            code => Message::Unknown { code },
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

/// A Quote or Snapshot: the first 48 bytes of the message (extra bytes are
/// ignored for forward compatibility).
#[derive(Debug, Clone, Copy)]
pub struct PriceView<'a> {
    bytes: &'a [u8; PRICE_LEN],
}

impl<'a> PriceView<'a> {
    fn new(msg: &'a [u8]) -> Option<Self> {
        Some(PriceView {
            bytes: msg.get(..PRICE_LEN)?.try_into().ok()?,
        })
    }

    /// The symbol (validated when the packet was checked).
    #[inline]
    pub fn symbol(&self) -> Symbol {
        Symbol::from_checked(symbol_bytes(self.bytes))
    }

    /// Quote: this message's sequence number. Snapshot: the last sequence
    /// assigned for the symbol.
    #[inline]
    pub fn sequence(&self) -> u64 {
        u64_at(self.bytes, field::SEQUENCE)
    }

    /// When the provider priced it: ns since the Unix epoch, provider clock.
    #[inline]
    pub fn source_time(&self) -> u64 {
        u64_at(self.bytes, field::SOURCE_TIME)
    }

    /// Bid price.
    #[inline]
    pub fn bid(&self) -> f64 {
        f64::from_bits(u64_at(self.bytes, field::BID))
    }

    /// Ask price.
    #[inline]
    pub fn ask(&self) -> f64 {
        f64::from_bits(u64_at(self.bytes, field::ASK))
    }
}

/// A Heartbeat: the first 24 bytes of the message.
#[derive(Debug, Clone, Copy)]
pub struct HeartbeatView<'a> {
    bytes: &'a [u8; HEARTBEAT_LEN],
}

impl<'a> HeartbeatView<'a> {
    fn new(msg: &'a [u8]) -> Option<Self> {
        Some(HeartbeatView {
            bytes: msg.get(..HEARTBEAT_LEN)?.try_into().ok()?,
        })
    }

    /// The symbol (validated when the packet was checked).
    #[inline]
    pub fn symbol(&self) -> Symbol {
        Symbol::from_checked(symbol_bytes(self.bytes))
    }

    /// The sequence the provider will give this symbol's next Quote.
    #[inline]
    pub fn next_expected(&self) -> u64 {
        u64_at(self.bytes, field::NEXT_EXPECTED)
    }
}

/// Builds SQF packets: for the simulator, fixtures, tests and benches (not
/// the receive path).
#[derive(Debug, Clone)]
pub struct PacketBuilder {
    buf: Vec<u8>,
    count: u16,
}

impl PacketBuilder {
    /// Starts a packet sent at `send_time` (ns since the Unix epoch, provider clock).
    pub fn new(send_time: u64) -> Self {
        let mut buf = Vec::with_capacity(1500);
        buf.extend_from_slice(&MAGIC);
        buf.push(VERSION);
        buf.push(0); // flags
        buf.extend_from_slice(&[0, 0]); // message_count, set by finish
        buf.extend_from_slice(&[0, 0]); // reserved
        buf.extend_from_slice(&send_time.to_le_bytes());
        PacketBuilder { buf, count: 0 }
    }

    /// Appends a Quote.
    pub fn quote(
        &mut self,
        symbol: Symbol,
        sequence: u64,
        source_time: u64,
        bid: f64,
        ask: f64,
    ) -> &mut Self {
        self.price(msg_type::QUOTE, symbol, sequence, source_time, bid, ask)
    }

    /// Appends a Snapshot (`sequence`: last sequence assigned for the symbol).
    pub fn snapshot(
        &mut self,
        symbol: Symbol,
        sequence: u64,
        source_time: u64,
        bid: f64,
        ask: f64,
    ) -> &mut Self {
        self.price(msg_type::SNAPSHOT, symbol, sequence, source_time, bid, ask)
    }

    fn price(
        &mut self,
        code: u8,
        symbol: Symbol,
        sequence: u64,
        source_time: u64,
        bid: f64,
        ask: f64,
    ) -> &mut Self {
        let mut body = [0u8; PRICE_LEN - MESSAGE_HEADER_LEN];
        body[0..8].copy_from_slice(&symbol.to_wire());
        body[12..20].copy_from_slice(&sequence.to_le_bytes());
        body[20..28].copy_from_slice(&source_time.to_le_bytes());
        body[28..36].copy_from_slice(&bid.to_bits().to_le_bytes());
        body[36..44].copy_from_slice(&ask.to_bits().to_le_bytes());
        self.message(code, &body)
    }

    /// Appends a Heartbeat.
    pub fn heartbeat(&mut self, symbol: Symbol, next_expected: u64) -> &mut Self {
        let mut body = [0u8; HEARTBEAT_LEN - MESSAGE_HEADER_LEN];
        body[0..8].copy_from_slice(&symbol.to_wire());
        body[12..20].copy_from_slice(&next_expected.to_le_bytes());
        self.message(msg_type::HEARTBEAT, &body)
    }

    /// Appends any message: a 4-byte header with `length = 4 + body.len()`
    /// (truncated to u16), then `body`.
    pub fn message(&mut self, code: u8, body: &[u8]) -> &mut Self {
        let len = (MESSAGE_HEADER_LEN + body.len()) as u16;
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.push(code);
        self.buf.push(0);
        self.buf.extend_from_slice(body);
        self.count = self.count.wrapping_add(1);
        self
    }

    /// Appends raw bytes after the messages (for malformed-packet tests).
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(bytes);
        self
    }

    /// Messages appended so far.
    pub fn count(&self) -> u16 {
        self.count
    }

    /// Bytes so far, header included.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when no message has been appended.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The datagram, with `message_count` set to the messages appended.
    pub fn finish(self) -> Vec<u8> {
        let count = self.count;
        self.finish_with_count(count)
    }

    /// The datagram with an arbitrary `message_count` (for malformed-packet tests).
    pub fn finish_with_count(mut self, count: u16) -> Vec<u8> {
        self.buf[field::COUNT].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(s: &str) -> Symbol {
        Symbol::parse(s).unwrap()
    }

    #[test]
    fn the_walk_visits_known_messages_in_order_and_finds_them_again() {
        let mut b = PacketBuilder::new(9);
        b.quote(sym("A"), 1, 2, 1.0, 2.0)
            .message(b'?', &[1, 2, 3])
            .heartbeat(sym("B"), 5)
            .snapshot(sym("C"), 7, 8, 3.0, 4.0);
        let bytes = b.finish();
        let mut seen = Vec::new();
        let p = Packet::new_checked_visiting(&bytes[..], |k| seen.push(k)).unwrap();
        let codes: Vec<u8> = seen.iter().map(|k| k.code).collect();
        assert_eq!(codes, b"QHS");
        let symbols: Vec<Symbol> = seen.iter().map(|k| k.symbol).collect();
        assert_eq!(symbols, [sym("A"), sym("B"), sym("C")]);
        assert_eq!(seen[0].at, HEADER_LEN);
        for (k, m) in seen
            .iter()
            .zip(p.messages().filter(|m| m.symbol().is_some()))
        {
            assert_eq!(
                format!("{:?}", p.message_at(k.at)),
                format!("{m:?}"),
                "offset {} gives the message the iterator gives",
                k.at
            );
        }
        // Offsets where no message fits are Unknown, never a panic.
        for at in [0, 1, 17, bytes.len() - 1, bytes.len(), usize::MAX] {
            assert!(matches!(p.message_at(at), Message::Unknown { .. }), "{at}");
        }
        // A rejected packet: the visits so far happened, the result says no.
        let mut bad = bytes.clone();
        bad.push(0);
        let mut visits = 0;
        let r = Packet::new_checked_visiting(&bad[..], |_| visits += 1);
        assert_eq!(r.err(), Some(Reject::TrailingBytes));
        assert_eq!(visits, 3);
    }

    /// A packet with one Quote, written out byte by byte from the spec tables.
    #[rustfmt::skip]
    static QUOTE_PACKET: [u8; 64] = [
        b'S', b'Q', 1, 0xff,            // magic, version, flags (ignored)
        1, 0, 0xa5, 0xa5,               // message_count = 1, reserved (ignored)
        0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0x0e, // send_time
        48, 0, b'Q', 0xa5,              // length 48, type Q, reserved
        b'E', b'U', b'R', b'U', b'S', b'D', b' ', b' ',
        0xa5, 0xa5, 0xa5, 0xa5,         // reserved
        7, 0, 0, 0, 0, 0, 0, 0,         // sequence 7
        0x00, 0x01, 0, 0, 0, 0, 0, 0,   // source_time 256
        0, 0, 0, 0, 0, 0, 0xf8, 0x3f,   // bid 1.5
        0, 0, 0, 0, 0, 0, 0x00, 0x40,   // ask 2.0
    ];

    #[test]
    fn decodes_quote_from_spec_layout() {
        let p = Packet::new_checked(&QUOTE_PACKET[..]).unwrap();
        assert_eq!(p.send_time(), 0x0edc_ba98_7654_3210);
        assert_eq!(p.message_count(), 1);
        let msgs: Vec<_> = p.messages().collect();
        assert_eq!(msgs.len(), 1);
        let Message::Quote(q) = msgs[0] else {
            panic!("not a quote: {:?}", msgs[0])
        };
        assert_eq!(q.symbol(), sym("EURUSD"));
        assert_eq!(q.sequence(), 7);
        assert_eq!(q.source_time(), 256);
        assert_eq!(q.bid(), 1.5);
        assert_eq!(q.ask(), 2.0);
    }

    #[test]
    fn builder_matches_spec_layout() {
        let mut b = PacketBuilder::new(0x0edc_ba98_7654_3210);
        b.quote(sym("EURUSD"), 7, 256, 1.5, 2.0);
        let bytes = b.finish();
        // Reserved and flag bytes differ (0xa5 / 0xff in the static packet): compare the rest.
        let mut expected = QUOTE_PACKET;
        expected[3] = 0;
        expected[6] = 0;
        expected[7] = 0;
        expected[19] = 0;
        expected[28..32].fill(0);
        assert_eq!(bytes, expected);
    }

    #[test]
    fn heartbeat_and_snapshot_and_unknown() {
        let mut b = PacketBuilder::new(5);
        b.heartbeat(sym("A"), 42)
            .snapshot(sym("B"), 9, 11, 1.0, 1.25)
            .message(b'Z', &[1, 2, 3]);
        let bytes = b.finish();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let msgs: Vec<_> = p.messages().collect();
        assert_eq!(msgs.len(), 3);
        match msgs[0] {
            Message::Heartbeat(h) => {
                assert_eq!(h.symbol(), sym("A"));
                assert_eq!(h.next_expected(), 42);
            }
            m => panic!("{m:?}"),
        }
        match msgs[1] {
            Message::Snapshot(s) => {
                assert_eq!(
                    (s.symbol(), s.sequence(), s.source_time()),
                    (sym("B"), 9, 11)
                );
                assert_eq!((s.bid(), s.ask()), (1.0, 1.25));
            }
            m => panic!("{m:?}"),
        }
        assert!(matches!(msgs[2], Message::Unknown { code: b'Z' }));
    }

    #[test]
    fn longer_messages_are_valid_and_extra_bytes_ignored() {
        let mut body = vec![0u8; 60];
        body[0..8].copy_from_slice(b"LONG    ");
        body[12..20].copy_from_slice(&3u64.to_le_bytes());
        body[28..36].copy_from_slice(&1.0f64.to_bits().to_le_bytes());
        body[36..44].copy_from_slice(&2.0f64.to_bits().to_le_bytes());
        body[44..].fill(0xa5);
        let mut b = PacketBuilder::new(0);
        b.message(b'Q', &body);
        let bytes = b.finish();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let Some(Message::Quote(q)) = p.messages().next() else {
            panic!()
        };
        assert_eq!((q.sequence(), q.bid(), q.ask()), (3, 1.0, 2.0));
    }

    #[test]
    fn empty_packet_is_valid() {
        let bytes = PacketBuilder::new(1).finish();
        assert_eq!(bytes.len(), HEADER_LEN);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.messages().count(), 0);
    }

    fn one_quote() -> Vec<u8> {
        let mut b = PacketBuilder::new(1);
        b.quote(sym("EURUSD"), 1, 1, 1.0, 1.1);
        b.finish()
    }

    /// Each reason's name, as the summary's `rejected_by_reason`, the
    /// metrics' `reason` label and the logs give it: operators' rules and
    /// dashboards name them, so a swap would count one under another.
    #[test]
    fn each_reason_is_counted_under_its_own_name() {
        let names = [
            (Reject::Short, "short"),
            (Reject::Magic, "bad_magic"),
            (Reject::Version, "bad_version"),
            (Reject::HeaderOverrun, "header_overrun"),
            (Reject::LengthTooSmall, "length_too_small"),
            (Reject::LengthOverrun, "length_overrun"),
            (Reject::TooShortForType, "too_short_for_type"),
            (Reject::BadSymbol, "bad_symbol"),
            (Reject::TrailingBytes, "trailing_bytes"),
        ];
        assert_eq!(names.len(), Reject::ALL.len());
        for (r, name) in names {
            assert_eq!(r.as_str(), name);
            assert_eq!(Reject::ALL[r.index()], r);
        }
    }

    #[test]
    fn rejects_each_validity_rule() {
        let ok = one_quote();
        let r = |b: &[u8]| Packet::new_checked(b).map(|_| ()).unwrap_err();

        assert_eq!(r(&ok[..15]), Reject::Short);
        assert_eq!(r(&[]), Reject::Short);

        let mut b = ok.clone();
        b[0] = b'X';
        assert_eq!(r(&b), Reject::Magic);
        let mut b = ok.clone();
        b[1] = b'X';
        assert_eq!(r(&b), Reject::Magic);
        // Any other version, below as above (0: a zeroed header).
        for v in [0u8, 2, 0xff] {
            let mut b = ok.clone();
            b[2] = v;
            assert_eq!(r(&b), Reject::Version, "{v}");
        }

        // message_count says 2 but nothing follows the first message
        let mut b = ok.clone();
        b[4] = 2;
        assert_eq!(r(&b), Reject::HeaderOverrun);
        // a partial header (3 bytes) after the first message
        let mut b = ok.clone();
        b[4] = 2;
        b.extend_from_slice(&[4, 0, b'Z']);
        assert_eq!(r(&b), Reject::HeaderOverrun);

        let mut b = ok.clone();
        b[16] = 3;
        assert_eq!(r(&b), Reject::LengthTooSmall);
        let mut b = ok.clone();
        b[16..18].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(r(&b), Reject::LengthTooSmall);

        let mut b = ok.clone();
        b[16] = 49;
        assert_eq!(r(&b), Reject::LengthOverrun);
        assert_eq!(r(&ok[..ok.len() - 1]), Reject::LengthOverrun);

        let mut b = PacketBuilder::new(0);
        b.message(b'Q', &[b'A'; 43]);
        assert_eq!(r(&b.finish()), Reject::TooShortForType);
        let mut b = PacketBuilder::new(0);
        b.message(b'S', &[b'A'; 43]);
        assert_eq!(r(&b.finish()), Reject::TooShortForType);
        let mut b = PacketBuilder::new(0);
        b.message(b'H', &[b'A'; 19]);
        assert_eq!(r(&b.finish()), Reject::TooShortForType);

        for bad in [*b"        ", *b" EURUSD ", *b"EUR USD ", *b"EURUSD\0\0"] {
            for code in [b'Q', b'S', b'H'] {
                let mut body = vec![0u8; 44];
                body[..8].copy_from_slice(&bad);
                let mut b = PacketBuilder::new(0);
                b.message(code, &body);
                assert_eq!(r(&b.finish()), Reject::BadSymbol, "{code} {bad:?}");
            }
        }

        let mut b = ok.clone();
        b.push(0);
        assert_eq!(r(&b), Reject::TrailingBytes);
        let b = PacketBuilder::new(0).finish_with_count(0);
        let mut b2 = b.clone();
        b2.extend_from_slice(&[4, 0, b'Z', 0]);
        assert_eq!(r(&b2), Reject::TrailingBytes);
    }

    #[test]
    fn unknown_type_needs_no_symbol_and_may_be_header_only() {
        let mut b = PacketBuilder::new(0);
        b.message(b'z', &[]).message(0, &[0xff; 7]);
        let bytes = b.finish();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.messages().count(), 2);
    }

    #[test]
    fn one_bad_message_rejects_the_whole_packet() {
        let mut b = PacketBuilder::new(0);
        b.quote(sym("GOOD"), 1, 1, 1.0, 1.1);
        b.message(b'H', &[b'x'; 10]);
        assert_eq!(
            Packet::new_checked(b.finish()).map(|_| ()).unwrap_err(),
            Reject::TooShortForType
        );
    }

    /// Framed packets (real messages of each type, an unknown type, then
    /// now and then a byte changed, the end cut or the count off by one):
    /// an accepted one holds its count of messages, each read back as it
    /// was written. Most are accepted, so the checks are reached.
    #[test]
    fn framed_packets_read_back_what_they_hold() {
        let mut next = crate::test_rng::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let (mut accepted, cases) = (0, 5_000);
        for _ in 0..cases {
            let n = next() % 6;
            let mut b = PacketBuilder::new(next() % 1_000_000);
            let mut written = Vec::new();
            for k in 0..n {
                let (seq, t) = (next() % 1_000, next() % 1_000_000);
                let px = (next() % 10_000) as f64;
                match next() % 4 {
                    0 => b.quote(sym("AB"), seq, t, px, px + 0.5),
                    1 => b.snapshot(sym("CD"), seq, t, px, px + 0.5),
                    2 => b.heartbeat(sym("EF"), seq),
                    _ => b.message(b'z', &[k as u8; 7]),
                };
                written.push((seq, t, px));
            }
            let mut bytes = b.finish();
            let whole = match next() % 8 {
                0 if bytes.len() > 16 => {
                    let i = 16 + (next() as usize) % (bytes.len() - 16);
                    bytes[i] = next() as u8;
                    false
                }
                1 => {
                    bytes.truncate(bytes.len().saturating_sub(1 + (next() as usize) % 4));
                    false
                }
                2 => {
                    bytes[4] = bytes[4].wrapping_add(1);
                    false
                }
                _ => true,
            };
            let Ok(p) = Packet::new_checked(&bytes[..]) else {
                continue;
            };
            accepted += 1;
            assert_eq!(p.messages().count(), p.message_count() as usize);
            for (m, &(seq, t, px)) in p.messages().zip(&written) {
                match m {
                    Message::Quote(q) | Message::Snapshot(q) => {
                        let read = (q.symbol(), q.sequence(), q.source_time(), q.bid(), q.ask());
                        if whole {
                            assert!(read.0 == sym("AB") || read.0 == sym("CD"));
                            assert_eq!((read.1, read.2, read.3, read.4), (seq, t, px, px + 0.5));
                        }
                    }
                    Message::Heartbeat(h) => {
                        let _ = h.symbol();
                    }
                    Message::Unknown { .. } => {}
                }
            }
        }
        assert!(accepted * 2 > cases, "{accepted} of {cases} accepted");
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let n = p.messages().count();
                proptest::prop_assert_eq!(n, p.message_count() as usize);
            }
        }

        #[test]
        fn arbitrary_header_with_valid_prefix_never_panics(
            count in 0u16..6,
            tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
        ) {
            let mut bytes = PacketBuilder::new(0).finish_with_count(count);
            bytes.extend_from_slice(&tail);
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                for m in p.messages() {
                    if let Message::Quote(q) | Message::Snapshot(q) = m {
                        let _ = (q.symbol(), q.sequence(), q.bid(), q.ask(), q.source_time());
                    }
                }
                proptest::prop_assert_eq!(p.messages().count(), count as usize);
            }
        }
    }
}
