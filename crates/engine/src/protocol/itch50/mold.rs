//! MoldUDP64 downstream packets and re-requests (spec §1). The framing
//! knows nothing of ITCH but the one check it runs on every block
//! ([`super::message::check`]).
//!
//! ```text
//! packet  | 0..10 session | 10..18 sequence u64 | 18..20 count u16 | blocks ... |
//! block   | 0..2 length u16 | length bytes: one message |
//! request | 0..10 session | 10..18 sequence u64 | 18..20 count u16 |
//! ```
//!
//! Integers are big-endian. Count 0 is a heartbeat and `0xFFFF` the end of
//! the session; their `sequence` is the next message's. Message `i` of a
//! data packet has sequence `sequence + i`.

use super::message::{self, Message};
use super::Reject;

/// Bytes of the packet header (and the whole of a re-request).
pub const HEADER_LEN: usize = 20;
/// Bytes of the session field.
pub const SESSION_LEN: usize = 10;
/// `count` of a heartbeat.
pub const HEARTBEAT: u16 = 0;
/// `count` of an end-of-session packet.
pub const END_OF_SESSION: u16 = 0xFFFF;
/// Most message blocks a data packet can carry.
pub const MAX_BLOCKS: u16 = 0xFFFE;

/// Message blocks in a datagram by its header's count: 0 for a heartbeat,
/// an end of session or a datagram too short to have a count. Meaningful
/// for a datagram that passed [`Packet::new_checked`].
pub fn message_count(datagram: &[u8]) -> u16 {
    match be_u16(datagram, field::COUNT.start).unwrap_or(0) {
        END_OF_SESSION => 0,
        n => n,
    }
}

/// The sequence after the last message of a data packet, read from the
/// header alone (the datagram not validated yet): `None` for a heartbeat,
/// an end of session or a datagram too short to have a header.
#[inline]
pub fn data_end(datagram: &[u8]) -> Option<u64> {
    let header = datagram.first_chunk::<HEADER_LEN>()?;
    let count = u16::from_be_bytes([header[field::COUNT.start], header[field::COUNT.start + 1]]);
    if count == HEARTBEAT || count == END_OF_SESSION {
        return None;
    }
    let mut sequence = [0u8; 8];
    sequence.copy_from_slice(&header[field::SEQUENCE]);
    Some(u64::from_be_bytes(sequence).saturating_add(u64::from(count)))
}

/// A session: 10 raw bytes (usually ASCII, e.g. a trading day's name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Session(pub [u8; SESSION_LEN]);

impl Session {
    /// The bytes as text: printable ASCII as is, any other byte as `\xNN`.
    pub fn display(&self) -> String {
        self.to_string()
    }
}

/// As [`Session::display`], written without allocating.
impl std::fmt::Display for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|&b| write_byte(f, b))
    }
}

pub use tickguard_reader::layout::write_byte;

/// What a packet is, by its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Count 0: liveness; `sequence` is the next message's.
    Heartbeat,
    /// Count `0xFFFF`: no more messages in this session.
    EndOfSession,
    /// `count` messages, the first with `sequence`.
    Data(u16),
}

/// Field offsets in the packet header.
mod field {
    use std::ops::Range;
    pub const SESSION: Range<usize> = 0..10;
    pub const SEQUENCE: Range<usize> = 10..18;
    pub const COUNT: Range<usize> = 18..20;
}

#[inline]
fn be_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// A validated MoldUDP64 packet over any byte buffer.
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
    /// Offset of the last block that carries a timestamp (its message
    /// starts here), 0 for none: found by the validity walk.
    last_timed: usize,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Validates the whole datagram — framing and every block's message —
    /// and wraps it. Never panics, never allocates.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Reject> {
        Packet::new_checked_with(buffer, |_| {})
    }

    /// [`new_checked`](Self::new_checked), handing each block's message to
    /// `visit` as soon as the walk has found it valid, in order: a caller
    /// with work to do on every message before any is applied does it in
    /// the validity walk instead of a second one. A datagram rejected part
    /// way has had the blocks before the bad one visited.
    #[inline]
    pub fn new_checked_with(buffer: T, visit: impl FnMut(&[u8])) -> Result<Packet<T>, Reject> {
        let last_timed = check(buffer.as_ref(), visit)?;
        Ok(Packet { buffer, last_timed })
    }

    /// The session.
    #[inline]
    pub fn session(&self) -> Session {
        let mut s = [0u8; SESSION_LEN];
        if let Some(b) = self.buffer.as_ref().get(field::SESSION) {
            s.copy_from_slice(b);
        }
        Session(s)
    }

    /// Sequence of the first message (data), or of the next message
    /// (heartbeat, end of session).
    #[inline]
    pub fn sequence(&self) -> u64 {
        self.buffer
            .as_ref()
            .get(field::SEQUENCE)
            .and_then(|s| s.try_into().ok())
            .map_or(0, u64::from_be_bytes)
    }

    /// The whole datagram.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The raw count field.
    #[inline]
    pub fn count(&self) -> u16 {
        be_u16(self.buffer.as_ref(), field::COUNT.start).unwrap_or(0)
    }

    /// Heartbeat, end of session or data.
    #[inline]
    pub fn kind(&self) -> Kind {
        match self.count() {
            HEARTBEAT => Kind::Heartbeat,
            END_OF_SESSION => Kind::EndOfSession,
            n => Kind::Data(n),
        }
    }

    /// The timestamp of the last message that has one (any message but an
    /// unknown type shorter than the 11-byte header): ns since midnight.
    /// O(1): the validity walk found it.
    #[inline]
    pub fn last_timestamp(&self) -> Option<u64> {
        match self.last_timed {
            0 => None,
            at => Message::new(self.buffer.as_ref().get(at..)?).timestamp(),
        }
    }

    /// The messages with their sequences, in order (none for a heartbeat or
    /// an end of session). The last sequence is 2^64 − 1: the messages
    /// past it are not read (their numbers would wrap to 0, 1, …).
    #[inline]
    pub fn messages(&self) -> Messages<'_> {
        let left = match self.kind() {
            Kind::Data(n) => n,
            _ => 0,
        };
        Messages {
            rest: self.buffer.as_ref().get(HEADER_LEN..).unwrap_or(&[]),
            left,
            sequence: self.sequence(),
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

/// The validity walk of spec §1: header, then each block's framing and
/// message (handed to `visit` once valid), then no trailing bytes. Returns
/// where the last message with a timestamp starts (0: none).
#[inline]
fn check(b: &[u8], mut visit: impl FnMut(&[u8])) -> Result<usize, Reject> {
    if b.len() < HEADER_LEN {
        return Err(Reject::Short);
    }
    let count = be_u16(b, field::COUNT.start).unwrap_or(0);
    let mut rest = &b[HEADER_LEN..];
    let mut last_timed = 0;
    if count == HEARTBEAT || count == END_OF_SESSION {
        return if rest.is_empty() {
            Ok(0)
        } else {
            Err(Reject::ControlWithBody)
        };
    }
    for _ in 0..count {
        let Some(len) = be_u16(rest, 0) else {
            return Err(Reject::BlockHeaderOverrun);
        };
        let len = len as usize;
        if len == 0 {
            return Err(Reject::EmptyBlock);
        }
        let Some(block) = rest.get(2..2 + len) else {
            return Err(Reject::BlockOverrun);
        };
        message::check(block)?;
        visit(block);
        if len >= message::HEADER_LEN {
            last_timed = b.len() - rest.len() + 2;
        }
        rest = &rest[2 + len..];
    }
    if !rest.is_empty() {
        return Err(Reject::TrailingBytes);
    }
    Ok(last_timed)
}

/// Iterator over the (sequence, message) pairs of a checked packet.
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    rest: &'a [u8],
    left: u16,
    sequence: u64,
}

impl<'a> Iterator for Messages<'a> {
    type Item = (u64, Message<'a>);

    #[inline]
    fn next(&mut self) -> Option<(u64, Message<'a>)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The packet was checked, so each step succeeds; the `?`s keep the
        // iterator panic-free by construction.
        let (len, rest) = self.rest.split_first_chunk::<2>()?;
        let (block, rest) = rest.split_at_checked(u16::from_be_bytes(*len) as usize)?;
        self.rest = rest;
        let q = self.sequence;
        // No sequence follows 2^64 − 1: blocks past it have none and are
        // not read (wrapped, they would pass for the session's first).
        match q.checked_add(1) {
            Some(next) => self.sequence = next,
            None => self.left = 0,
        }
        Some((q, Message::new(block)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

/// A re-request: `count` messages from `sequence` of `session`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The session asked about.
    pub session: Session,
    /// First sequence wanted.
    pub sequence: u64,
    /// Messages wanted.
    pub count: u16,
}

impl Request {
    /// The 20 bytes sent to the re-request server.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[field::SESSION].copy_from_slice(&self.session.0);
        b[field::SEQUENCE].copy_from_slice(&self.sequence.to_be_bytes());
        b[field::COUNT].copy_from_slice(&self.count.to_be_bytes());
        b
    }

    /// Reads a request (a server's side); `None` unless exactly 20 bytes.
    pub fn decode(b: &[u8]) -> Option<Request> {
        if b.len() != HEADER_LEN {
            return None;
        }
        let mut s = [0u8; SESSION_LEN];
        s.copy_from_slice(&b[field::SESSION]);
        Some(Request {
            session: Session(s),
            sequence: u64::from_be_bytes(b[field::SEQUENCE].try_into().ok()?),
            count: be_u16(b, field::COUNT.start)?,
        })
    }
}

/// Builds downstream packets (for the simulator, the fixture generator and
/// tests).
#[derive(Debug, Clone)]
pub struct PacketBuilder {
    buf: Vec<u8>,
    count: u16,
}

impl PacketBuilder {
    /// A data packet whose first message has `sequence`.
    pub fn new(session: Session, sequence: u64) -> PacketBuilder {
        let mut buf = Vec::with_capacity(1500);
        buf.extend_from_slice(&session.0);
        buf.extend_from_slice(&sequence.to_be_bytes());
        buf.extend_from_slice(&0u16.to_be_bytes());
        PacketBuilder { buf, count: 0 }
    }

    /// Appends one message block. Panics past [`MAX_BLOCKS`] blocks or a
    /// message over 65,535 bytes (a programming error in the caller).
    pub fn message(&mut self, m: &[u8]) -> &mut PacketBuilder {
        assert!(self.count < MAX_BLOCKS, "too many blocks");
        let len = u16::try_from(m.len()).expect("message over 65,535 bytes");
        self.buf.extend_from_slice(&len.to_be_bytes());
        self.buf.extend_from_slice(m);
        self.count += 1;
        self
    }

    /// Message blocks so far.
    pub fn count(&self) -> u16 {
        self.count
    }

    /// Bytes so far, header included.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True before the first message.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The datagram.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf[field::COUNT].copy_from_slice(&self.count.to_be_bytes());
        self.buf
    }

    /// A heartbeat: the next message will be `next`.
    pub fn heartbeat(session: Session, next: u64) -> Vec<u8> {
        Self::control(session, next, HEARTBEAT)
    }

    /// An end of session: the next message would have been `next`.
    pub fn end_of_session(session: Session, next: u64) -> Vec<u8> {
        Self::control(session, next, END_OF_SESSION)
    }

    fn control(session: Session, next: u64, count: u16) -> Vec<u8> {
        Request {
            session,
            sequence: next,
            count,
        }
        .encode()
        .to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::super::message::{encode, Body, Side};
    use super::*;
    use crate::symbol::Symbol;

    /// "The 10 bytes as a string": printable ASCII as is (quotes and
    /// backslash included), any other byte as `\xNN`.
    #[test]
    fn a_session_shows_its_printable_bytes_as_they_are() {
        assert_eq!(Session(*b"a'b\"c\\d\x01 g").display(), "a'b\"c\\d\\x01 g");
        assert_eq!(Session(*b"20260105BN").to_string(), "20260105BN");
    }

    const SESSION: Session = Session(*b"000123456A");

    /// Session "000123456A", sequence 5, two blocks: a System Event `O`
    /// and an unknown type `z` of 3 bytes.
    const PACKET: [u8; 42] = [
        b'0', b'0', b'0', b'1', b'2', b'3', b'4', b'5', b'6', b'A', // session
        0, 0, 0, 0, 0, 0, 0, 5, // sequence
        0, 2, // count
        0, 12, b'S', 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'O', // system event, ts 1
        0, 3, b'z', 1, 2, // unknown
        // (padding to the array's length is not part of the packet)
        0, 0, 0,
    ];

    #[test]
    fn data_packet_fields_and_messages() {
        let p = Packet::new_checked(&PACKET[..39]).unwrap();
        assert_eq!(p.session(), SESSION);
        assert_eq!(p.sequence(), 5);
        assert_eq!(p.kind(), Kind::Data(2));
        let m: Vec<(u64, Message)> = p.messages().collect();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].0, 5);
        assert_eq!(m[0].1.body(), Body::SystemEvent { code: b'O' });
        assert_eq!(m[0].1.timestamp(), Some(1));
        assert_eq!(m[1].0, 6);
        assert_eq!(m[1].1.body(), Body::Unknown { code: b'z' });
        assert_eq!(m[1].1.timestamp(), None);
        assert_eq!(p.last_timestamp(), Some(1), "the last message with one");
    }

    /// Blocks past sequence 2^64 − 1 have no sequence: the iterator ends
    /// there, never wrapping to 0, 1, …
    #[test]
    fn no_message_follows_the_last_sequence() {
        let mut b = PACKET[..39].to_vec();
        b[10..18].copy_from_slice(&u64::MAX.to_be_bytes());
        let p = Packet::new_checked(&b[..]).unwrap();
        let m: Vec<u64> = p.messages().map(|(q, _)| q).collect();
        assert_eq!(m, [u64::MAX]);
        b[10..18].copy_from_slice(&(u64::MAX - 1).to_be_bytes());
        let p = Packet::new_checked(&b[..]).unwrap();
        let m: Vec<u64> = p.messages().map(|(q, _)| q).collect();
        assert_eq!(m, [u64::MAX - 1, u64::MAX]);
    }

    #[test]
    fn every_reject_reason() {
        let ok = &PACKET[..39];
        assert_eq!(Packet::new_checked(&ok[..19]).err(), Some(Reject::Short));
        assert_eq!(
            Packet::new_checked(&PACKET[..]).err(),
            Some(Reject::TrailingBytes)
        );
        // Block header cut: count says 3.
        let mut p = ok.to_vec();
        p[19] = 3;
        assert_eq!(
            Packet::new_checked(&p).err(),
            Some(Reject::BlockHeaderOverrun)
        );
        p.push(0);
        assert_eq!(
            Packet::new_checked(&p).err(),
            Some(Reject::BlockHeaderOverrun)
        );
        p.push(0);
        assert_eq!(Packet::new_checked(&p).err(), Some(Reject::EmptyBlock));
        p.pop();
        p.push(4);
        p.extend_from_slice(b"zz");
        assert_eq!(Packet::new_checked(&p).err(), Some(Reject::BlockOverrun));
        // A known type too short for its length.
        let mut p = ok.to_vec();
        p[21] = 11;
        p.remove(32);
        assert_eq!(Packet::new_checked(&p).err(), Some(Reject::TooShortForType));
        // A bad stock.
        let mut b = PacketBuilder::new(SESSION, 1);
        let mut add =
            encode::add_order(1, 0, 1, Side::Buy, 1, Symbol::parse("X").unwrap(), 1, None);
        add[25] = b'\t';
        b.message(&add);
        assert_eq!(
            Packet::new_checked(b.finish()).err(),
            Some(Reject::BadStock)
        );
        // Heartbeat and end of session: header only.
        for control in [
            PacketBuilder::heartbeat(SESSION, 9),
            PacketBuilder::end_of_session(SESSION, 9),
        ] {
            let p = Packet::new_checked(&control).unwrap();
            assert_eq!(p.sequence(), 9);
            assert_eq!(p.messages().count(), 0);
            let mut longer = control.clone();
            longer.push(0);
            assert_eq!(
                Packet::new_checked(&longer).err(),
                Some(Reject::ControlWithBody)
            );
        }
        assert_eq!(
            Packet::new_checked(PacketBuilder::heartbeat(SESSION, 9))
                .unwrap()
                .kind(),
            Kind::Heartbeat
        );
        assert_eq!(
            Packet::new_checked(PacketBuilder::end_of_session(SESSION, 9))
                .unwrap()
                .kind(),
            Kind::EndOfSession
        );
    }

    #[test]
    fn builder_and_request_round_trip() {
        let s = Symbol::parse("AAPL").unwrap();
        let mut b = PacketBuilder::new(SESSION, u64::MAX);
        b.message(&encode::delete(1, 2, 3));
        b.message(&encode::add_order(1, 2, 4, Side::Sell, 5, s, 6, None));
        let bytes = b.finish();
        let p = Packet::new_checked(&bytes).unwrap();
        let seqs: Vec<u64> = p.messages().map(|(q, _)| q).collect();
        assert_eq!(seqs, [u64::MAX], "no sequence after the last, no panic");
        let r = Request {
            session: SESSION,
            sequence: 77,
            count: 12,
        };
        assert_eq!(Request::decode(&r.encode()), Some(r));
        assert_eq!(Request::decode(&r.encode()[..19]), None);
        // The bytes as MoldUDP64 lays them (spec itch50 §1): session,
        // sequence and count big-endian, written out.
        let mut want = SESSION.0.to_vec();
        want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 77, 0, 12]);
        assert_eq!(r.encode().to_vec(), want);
        assert_eq!(
            Session(*b"ab\x00\xffcdefgh").display(),
            "ab\\x00\\xffcdefgh"
        );
    }

    /// Framed packets (real messages, then now and then a byte changed,
    /// a block cut or the count off by one): an accepted one's messages
    /// are exactly `count` blocks, and its last timestamp is the last
    /// stamped message's, the value the watermark takes in O(1). Most are
    /// accepted, so the checks are reached.
    #[test]
    fn framed_packets_keep_their_count_and_last_timestamp() {
        let mut next = crate::test_rng::xorshift(0x2545_f491_4f6c_dd1du64);
        let (mut accepted, cases) = (0, 5_000);
        for _ in 0..cases {
            let n = next() % 5;
            let mut b = PacketBuilder::new(SESSION, 1 + next() % 1_000);
            for k in 0..n {
                let t = next() % 100_000;
                let m = match next() % 3 {
                    0 => encode::system_event(t, b'Q'),
                    1 => encode::delete(1, t, k),
                    _ => encode::add_order(
                        2,
                        t,
                        k,
                        Side::Buy,
                        100,
                        Symbol::parse("AB").unwrap(),
                        1_000,
                        None,
                    ),
                };
                b.message(&m);
            }
            let mut bytes = b.finish().to_vec();
            match next() % 8 {
                0 if bytes.len() > 20 => {
                    let i = 20 + (next() as usize) % (bytes.len() - 20);
                    bytes[i] = next() as u8;
                }
                1 => bytes.truncate(bytes.len().saturating_sub(1 + (next() as usize) % 4)),
                2 => bytes[19] = bytes[19].wrapping_add(1),
                _ => {}
            }
            let Ok(p) = Packet::new_checked(&bytes) else {
                continue;
            };
            accepted += 1;
            let count = p
                .messages()
                .inspect(|(_, m)| {
                    let _ = m.body();
                })
                .count();
            let last = p.messages().filter_map(|(_, m)| m.timestamp()).last();
            assert_eq!(p.last_timestamp(), last);
            match p.kind() {
                Kind::Data(c) => assert_eq!(count, c as usize),
                _ => assert_eq!(count, 0),
            }
        }
        assert!(accepted * 2 > cases, "{accepted} of {cases} accepted");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]
        /// Any bytes: a verdict, never a panic; an accepted packet's
        /// messages are exactly `count` checked blocks.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            if let Ok(p) = Packet::new_checked(&bytes) {
                let n = p.messages().inspect(|(_, m)| { let _ = m.body(); }).count();
                let last = p.messages().filter_map(|(_, m)| m.timestamp()).last();
                proptest::prop_assert_eq!(p.last_timestamp(), last);
                match p.kind() {
                    Kind::Data(c) => proptest::prop_assert_eq!(n, c as usize),
                    _ => proptest::prop_assert_eq!(n, 0),
                }
            }
        }
    }
}
