//! MDP3 packets: the binary packet header, SBE messages back to back, and
//! the validity walk that checks the whole datagram before anything is read.
//!
//! ```text
//! packet  | 0..4 MsgSeqNum u32 | 4..12 SendingTime u64 | message | message | ... (to the end)
//! message | 0..2 MsgSize u16 | 2..4 blockLength u16 | 4..6 templateId u16 | 6..8 schemaId u16 |
//!         | 8..10 version u16 | root block (blockLength bytes) | groups ... | (newer bytes) |
//! ```
//!
//! Integers are little-endian. `MsgSize` counts the whole message, its own
//! two bytes included. [`Packet::new_checked`] walks every message once (the
//! order of its checks is the module's precedence, see the parent module);
//! a packet it accepts hands out [`Message`]s whose getters cannot fail.

use super::template::{self, Body, Kind, MatchEventIndicator, Template};
use super::Reject;

/// Bytes of the packet header (MsgSeqNum and SendingTime).
pub const HEADER_LEN: usize = 12;
/// Bytes of `MsgSize` and the SBE message header.
pub const MESSAGE_HEADER_LEN: usize = 10;
/// CME's schema id.
pub const SCHEMA_ID: u16 = 1;
/// The oldest schema version read (older layouts differ).
pub const MIN_VERSION: u16 = 9;

/// Field offsets of the packet header and of a message's header.
mod field {
    use std::ops::Range;
    pub const MSG_SEQ_NUM: Range<usize> = 0..4;
    pub const SENDING_TIME: Range<usize> = 4..12;
}

/// The MsgSeqNum of a datagram, read from its header alone (the datagram not
/// validated); `None` when it is shorter than the header.
#[inline]
pub fn seq_num(datagram: &[u8]) -> Option<u32> {
    header_field(datagram, field::MSG_SEQ_NUM).map(u32::from_le_bytes)
}

/// The `SendingTime` of a datagram (ns since the Unix epoch), read from its
/// header alone as [`seq_num`].
#[inline]
pub fn sending_time(datagram: &[u8]) -> Option<u64> {
    header_field(datagram, field::SENDING_TIME).map(u64::from_le_bytes)
}

/// The bytes `at` of a datagram's packet header.
#[inline]
fn header_field<const N: usize>(datagram: &[u8], at: std::ops::Range<usize>) -> Option<[u8; N]> {
    datagram
        .first_chunk::<HEADER_LEN>()?
        .get(at)?
        .try_into()
        .ok()
}

/// A message's SBE header (after its `MsgSize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    /// Bytes of the root block on the wire (the schema's, or more in a newer
    /// version).
    pub block_length: u16,
    /// The template.
    pub template_id: u16,
    /// The schema (1 for CME's).
    pub schema_id: u16,
    /// The schema version the sender encoded.
    pub version: u16,
}

impl Header {
    /// The header of the message starting `m`.
    #[inline]
    fn read(m: &[u8; MESSAGE_HEADER_LEN]) -> Header {
        Header {
            block_length: u16::from_le_bytes([m[2], m[3]]),
            template_id: u16::from_le_bytes([m[4], m[5]]),
            schema_id: u16::from_le_bytes([m[6], m[7]]),
            version: u16::from_le_bytes([m[8], m[9]]),
        }
    }
}

/// A validated MDP3 packet over any byte buffer.
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
    count: usize,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Validates the whole datagram — framing, schema, version and the
    /// blocks and groups of every template read — and wraps it; the first
    /// failing check rejects the datagram whole. Never panics, never
    /// allocates.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Reject> {
        let count = walk::<true>(buffer.as_ref(), |_, _| {})?;
        Ok(Packet { buffer, count })
    }

    /// `MsgSeqNum`: +1 per packet, per channel and service.
    #[inline]
    pub fn seq_num(&self) -> u32 {
        seq_num(self.buffer.as_ref()).unwrap_or(0)
    }

    /// `SendingTime`: ns since the Unix epoch (UTC), when the gateway sent
    /// the packet.
    #[inline]
    pub fn sending_time(&self) -> u64 {
        sending_time(self.buffer.as_ref()).unwrap_or(0)
    }

    /// Messages in the packet (at least one).
    #[inline]
    pub fn message_count(&self) -> usize {
        self.count
    }

    /// The messages in order.
    #[inline]
    pub fn messages(&self) -> Messages<'_> {
        Messages {
            rest: self.buffer.as_ref().get(HEADER_LEN..).unwrap_or_default(),
            left: self.count,
        }
    }

    /// The whole datagram.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

impl<'a> Packet<&'a [u8]> {
    /// [`new_checked`](Packet::new_checked), handing each message's body
    /// (with its template id) to `visit` as the walk reads it, so that a caller reads a packet in
    /// one walk. A datagram the walk then rejects was visited in
    /// part: nothing visited may be used before this returns `Ok`.
    #[inline]
    pub fn new_checked_with(
        buffer: &'a [u8],
        visit: impl FnMut(u16, Body<'a>),
    ) -> Result<Packet<&'a [u8]>, Reject> {
        let count = walk::<true>(buffer, visit)?;
        Ok(Packet { buffer, count })
    }
}

/// The framing part of the validity walk: what tells an MDP3 datagram from
/// other bytes (`short`, `bad_size`, `bad_schema`, `old_version`), without
/// the templates' blocks and groups. Returns the number of messages.
#[inline]
pub fn check_framing(datagram: &[u8]) -> Result<usize, Reject> {
    walk::<false>(datagram, |_, _| {})
}

/// The validity walk (the parent module lists the checks and their order);
/// `BODIES`: also check the blocks and groups of the templates read (as
/// [`Body::checked`] reads them), handing each message's body to `visit`.
/// Returns the number of messages.
#[inline]
fn walk<'a, const BODIES: bool>(
    b: &'a [u8],
    mut visit: impl FnMut(u16, Body<'a>),
) -> Result<usize, Reject> {
    let mut rest = match b.get(HEADER_LEN..) {
        Some(rest) if !rest.is_empty() => rest,
        _ => return Err(Reject::Short),
    };
    let mut count = 0;
    while !rest.is_empty() {
        let (header, message, after) = frame(rest)?;
        if header.schema_id != SCHEMA_ID {
            return Err(Reject::BadSchema);
        }
        if header.version < MIN_VERSION {
            return Err(Reject::OldVersion);
        }
        if BODIES {
            let (root, groups) = Message { bytes: message }.split();
            let id = header.template_id;
            visit(id, Body::checked(id, root, groups)?);
        }
        count += 1;
        rest = after;
    }
    Ok(count)
}

/// The message at the start of `rest` (its header, its bytes) and the bytes
/// after it, if its sizes hold: a readable `MsgSize` of at least the
/// headers, inside the datagram, with the root block inside the message.
#[inline]
fn frame(rest: &[u8]) -> Result<(Header, &[u8], &[u8]), Reject> {
    let size = rest.first_chunk::<2>().map(|s| u16::from_le_bytes(*s));
    let size = usize::from(size.ok_or(Reject::BadSize)?);
    let (message, after) = rest.split_at_checked(size).ok_or(Reject::BadSize)?;
    let header = message
        .first_chunk::<MESSAGE_HEADER_LEN>()
        .map(Header::read)
        .ok_or(Reject::BadSize)?;
    if MESSAGE_HEADER_LEN + usize::from(header.block_length) > size {
        return Err(Reject::BadSize);
    }
    Ok((header, message, after))
}

/// Iterator over the messages of a checked packet.
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    rest: &'a [u8],
    left: usize,
}

impl<'a> Iterator for Messages<'a> {
    type Item = Message<'a>;

    #[inline]
    fn next(&mut self) -> Option<Message<'a>> {
        // The packet was checked, so each step succeeds; the `?`s keep the
        // iterator panic-free (and finite) by construction.
        self.left = self.left.checked_sub(1)?;
        let size = usize::from(u16::from_le_bytes(*self.rest.first_chunk::<2>()?));
        if size < MESSAGE_HEADER_LEN {
            return None;
        }
        let (bytes, rest) = self.rest.split_at_checked(size)?;
        self.rest = rest;
        Some(Message { bytes })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

/// One message of a checked packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    bytes: &'a [u8],
}

impl<'a> Message<'a> {
    /// `MsgSize`: bytes of the whole message, these two included.
    #[inline]
    pub fn size(&self) -> u16 {
        template::u16_at(self.bytes, 0).unwrap_or(0)
    }

    /// The SBE header.
    #[inline]
    pub fn header(&self) -> Header {
        self.bytes
            .first_chunk::<MESSAGE_HEADER_LEN>()
            .map(Header::read)
            .unwrap_or_default()
    }

    /// The template id.
    #[inline]
    pub fn template_id(&self) -> u16 {
        self.header().template_id
    }

    /// The schema version the sender encoded (9 or later).
    #[inline]
    pub fn version(&self) -> u16 {
        self.header().version
    }

    /// How the template is treated.
    #[inline]
    pub fn kind(&self) -> Kind {
        Kind::of(self.template_id())
    }

    /// The template's layout, for a template this version reads.
    #[inline]
    pub fn template(&self) -> Option<&'static Template> {
        template::template(self.template_id())
    }

    /// The root block as on the wire (`blockLength` bytes).
    #[inline]
    pub fn root(&self) -> &'a [u8] {
        self.split().0
    }

    /// The typed view of the body.
    #[inline]
    pub fn body(&self) -> Body<'a> {
        let (root, groups) = self.split();
        Body::checked(self.template_id(), root, groups).unwrap_or(Body::NotRead)
    }

    /// `TransactTime` (ns since the Unix epoch, UTC) of the templates read
    /// that carry one: the incremental ones, 30, 52 and 69.
    #[inline]
    pub fn transact_time(&self) -> Option<u64> {
        match self.body() {
            Body::ChannelReset(m) | Body::Incremental(m) => Some(m.transact_time()),
            Body::SecurityStatus(s) => Some(s.transact_time()),
            Body::Snapshot(s) => Some(s.transact_time()),
            Body::Heartbeat | Body::Definition(_) | Body::NotRead => None,
        }
    }

    /// `MatchEventIndicator` of the templates read that carry one: the
    /// incremental ones, 30 and the definitions.
    #[inline]
    pub fn match_event_indicator(&self) -> Option<MatchEventIndicator> {
        match self.body() {
            Body::ChannelReset(m) | Body::Incremental(m) => Some(m.match_event_indicator()),
            Body::SecurityStatus(s) => Some(s.match_event_indicator()),
            Body::Definition(d) => Some(d.match_event_indicator()),
            Body::Heartbeat | Body::Snapshot(_) | Body::NotRead => None,
        }
    }

    /// The whole message, `MsgSize` first.
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// (root block, the bytes after it).
    #[inline]
    fn split(&self) -> (&'a [u8], &'a [u8]) {
        let body = self.bytes.get(MESSAGE_HEADER_LEN..).unwrap_or_default();
        let root = usize::from(self.header().block_length);
        body.split_at_checked(root).unwrap_or((body, &[]))
    }
}

#[cfg(test)]
mod tests {
    use super::super::encode::{self, Len, Shape};
    use super::super::template::{Dimension, ALL, BOOK};
    use super::super::testing::{describe, sample, Rng, T0};
    use super::*;

    fn verdict(b: &[u8]) -> Result<usize, Reject> {
        Packet::new_checked(b).map(|p| p.message_count())
    }

    fn packet(messages: &[Vec<u8>]) -> Vec<u8> {
        encode::packet(7, T0, messages)
    }

    fn heartbeat() -> Vec<u8> {
        encode::heartbeat(Shape::new(13))
    }

    /// `m` with its u16 at `at` set to `v`.
    fn set16(mut m: Vec<u8>, at: usize, v: u16) -> Vec<u8> {
        m[at..at + 2].copy_from_slice(&v.to_le_bytes());
        m
    }

    /// `m` cut or extended (with 0xee) to `len`, its MsgSize saying so.
    fn resized(mut m: Vec<u8>, len: usize) -> Vec<u8> {
        m.resize(len, 0xee);
        set16(m, 0, len as u16)
    }

    #[test]
    fn the_packet_header_and_messages() {
        let book = encode::book(46, Shape::new(9), T0, 0x80, &[], 0);
        let p = encode::packet(0xfeed_beef, T0 + 5, &[heartbeat(), book.clone()]);
        let packet = Packet::new_checked(&p[..]).unwrap();
        assert_eq!(packet.seq_num(), 0xfeed_beef);
        assert_eq!(seq_num(&p), Some(0xfeed_beef));
        assert_eq!(seq_num(&p[..11]), None);
        assert_eq!(packet.sending_time(), T0 + 5);
        assert_eq!(packet.message_count(), 2);
        assert_eq!(packet.as_bytes(), &p[..]);
        let m: Vec<Message> = packet.messages().collect();
        assert_eq!(m.len(), 2);
        let hb = Header {
            block_length: 0,
            template_id: 12,
            schema_id: 1,
            version: 13,
        };
        assert_eq!(
            (m[0].header(), m[0].size(), m[0].bytes().len()),
            (hb, 10, 10)
        );
        assert_eq!(
            (m[0].kind(), m[0].template().map(|t| t.id)),
            (Kind::Heartbeat, Some(12))
        );
        assert_eq!(
            (m[1].template_id(), m[1].version(), m[1].size()),
            (46, 9, 32)
        );
        assert_eq!((m[1].root().len(), m[1].bytes()), (11, &book[..]));
        assert_eq!(m[1].kind(), Kind::Book);
        let sizes: usize = m.iter().map(|m| usize::from(m.size())).sum();
        assert_eq!(HEADER_LEN + sizes, p.len());
        assert_eq!(check_framing(&p), Ok(2));
    }

    /// MsgSize counts the whole message, its own two bytes included: a
    /// heartbeat is 10 bytes, and a packet of one is 22.
    #[test]
    fn msg_size_includes_itself() {
        let hb = heartbeat();
        assert_eq!(hb, [10, 0, 0, 0, 12, 0, 1, 0, 13, 0]);
        let p = packet(&[hb]);
        assert_eq!(p.len(), 22);
        assert_eq!(verdict(&p), Ok(1));
    }

    #[test]
    fn short() {
        let ok = packet(&[heartbeat()]);
        assert_eq!(verdict(&ok), Ok(1));
        assert_eq!(
            verdict(&ok[..12]),
            Err(Reject::Short),
            "a header, no message"
        );
        assert_eq!(verdict(&ok[..11]), Err(Reject::Short));
        // One byte more than a header is a message, cut.
        assert_eq!(verdict(&ok[..13]), Err(Reject::BadSize));
        assert_eq!(verdict(&[]), Err(Reject::Short));
        assert_eq!(check_framing(&ok[..12]), Err(Reject::Short));
    }

    #[test]
    fn bad_size() {
        let ok = |m: Vec<u8>| packet(&[m]);
        // MsgSize below the 10 bytes of headers (a 0 does not loop).
        for size in [0, 1, 9] {
            let p = ok(set16(heartbeat(), 0, size));
            assert_eq!(verdict(&p), Err(Reject::BadSize), "{size}");
        }
        assert_eq!(verdict(&ok(set16(heartbeat(), 0, 10))), Ok(1));
        // A message running past the datagram; one byte more holds it (a
        // byte after the last group read is ignored).
        let mut p = ok(set16(heartbeat(), 0, 11));
        assert_eq!(verdict(&p), Err(Reject::BadSize));
        p.push(0);
        assert_eq!(verdict(&p), Ok(1));
        // A root block running past its message.
        let long_root = set16(heartbeat(), 2, 1);
        assert_eq!(verdict(&ok(long_root.clone())), Err(Reject::BadSize));
        let mut p = ok(set16(long_root, 0, 11));
        p.push(0xee);
        assert_eq!(verdict(&p), Ok(1));
        // Bytes left over: one cannot hold a MsgSize; more must hold a
        // message.
        let mut p = ok(heartbeat());
        p.push(10);
        assert_eq!(verdict(&p), Err(Reject::BadSize), "one byte left");
        p.push(0);
        assert_eq!(verdict(&p), Err(Reject::BadSize), "a MsgSize and nothing");
        p.extend_from_slice(&heartbeat()[2..]);
        assert_eq!(verdict(&p), Ok(2));
        // A message cut inside its SBE header.
        let p = ok(heartbeat());
        assert_eq!(verdict(&p[..p.len() - 1]), Err(Reject::BadSize));
    }

    #[test]
    fn bad_schema_and_old_version() {
        for (schema, expected) in [
            (1, Ok(1)),
            (0, Err(Reject::BadSchema)),
            (2, Err(Reject::BadSchema)),
        ] {
            let p = packet(&[set16(heartbeat(), 6, schema)]);
            assert_eq!(verdict(&p), expected, "schema {schema}");
        }
        let versions = [
            (0, Err(Reject::OldVersion)),
            (8, Err(Reject::OldVersion)),
            (9, Ok(1)),
            (13, Ok(1)),
            (14, Ok(1)),
            (u16::MAX, Ok(1)),
        ];
        for (version, expected) in versions {
            let p = packet(&[set16(heartbeat(), 8, version)]);
            assert_eq!(verdict(&p), expected, "version {version}");
            // Templates not read are judged by their framing too.
            let p = packet(&[encode::raw(999, version, &[1, 2, 3], &[4])]);
            assert_eq!(verdict(&p), expected, "unknown, version {version}");
        }
    }

    /// For every template read: a root, and each group entry that has a
    /// min, one byte below it is rejected, at it is read. An empty group
    /// states its entries' blockLength too.
    #[test]
    fn short_block() {
        for t in ALL {
            let k = 2;
            if t.root.min > 0 {
                let below = sample(t, Shape::new(13).root(Len::Exactly(t.root.min - 1)), k);
                let at = sample(t, Shape::new(13).root(Len::Exactly(t.root.min)), k);
                assert_eq!(
                    verdict(&packet(&[below])),
                    Err(Reject::ShortBlock),
                    "{}",
                    t.id
                );
                assert_eq!(verdict(&packet(&[at])), Ok(1), "{}", t.id);
            }
            for g in t.groups.iter().filter(|g| g.entry.min > 0) {
                let min = g.entry.min;
                let below = sample(t, Shape::new(13).entries(Len::Exactly(min - 1)), k);
                let at = sample(t, Shape::new(13).entries(Len::Exactly(min)), k);
                assert_eq!(
                    verdict(&packet(&[below])),
                    Err(Reject::ShortBlock),
                    "{}",
                    t.id
                );
                assert_eq!(verdict(&packet(&[at])), Ok(1), "{}", t.id);
            }
        }
        let empty = |bl| encode::book(46, Shape::new(13).entries(Len::Exactly(bl)), 0, 0, &[], 0);
        assert_eq!(verdict(&packet(&[empty(26)])), Err(Reject::ShortBlock));
        assert_eq!(verdict(&packet(&[empty(27)])), Ok(1));
    }

    /// For every template read with groups, every sample cut by one byte
    /// (its MsgSize saying so) runs a group past the message; the whole
    /// sample is read; and bytes after the last group walked are ignored.
    #[test]
    fn bad_group() {
        for t in ALL.iter().filter(|t| !t.groups.is_empty()) {
            for k in 0..6 {
                let m = sample(t, Shape::new(13), k);
                let len = m.len();
                assert_eq!(
                    verdict(&packet(std::slice::from_ref(&m))),
                    Ok(1),
                    "{} {k}",
                    t.id
                );
                let cut = resized(m.clone(), len - 1);
                assert_eq!(
                    verdict(&packet(&[cut])),
                    Err(Reject::BadGroup),
                    "{} {k}",
                    t.id
                );
                let root_only = resized(m.clone(), MESSAGE_HEADER_LEN + usize::from(t.root.bl));
                assert_eq!(
                    verdict(&packet(&[root_only])),
                    Err(Reject::BadGroup),
                    "{}",
                    t.id
                );
                let longer = resized(m, len + 5);
                assert_eq!(verdict(&packet(&[longer])), Ok(1), "{} {k}", t.id);
            }
        }
        // A numInGroup one too many, of the first group then of the second.
        let book = encode::book(46, Shape::new(13), 0, 0, &[], 0);
        let mut m = book.clone();
        m[10 + 11 + 2] = 1;
        assert_eq!(verdict(&packet(&[m])), Err(Reject::BadGroup));
        let mut m = book.clone();
        m[10 + 11 + 3 + Dimension::GroupSize8Byte.count_at()] = 1;
        assert_eq!(verdict(&packet(&[m])), Err(Reject::BadGroup));
        let mut m = resized(book.clone(), 32 + 24);
        m[10 + 11 + 3 + 7] = 1;
        assert_eq!(verdict(&packet(&[m])), Ok(1), "the entry is there");
        // An empty group keeps its header (§1): the message ending right
        // after its first group, the second's header missing whole.
        let cut = resized(book, 10 + 11 + 3);
        assert_eq!(verdict(&packet(&[cut])), Err(Reject::BadGroup));
        // ChannelReset's group is not walked.
        let reset = encode::channel_reset(Shape::new(13), 0, 0, 1);
        let root_only = resized(reset, MESSAGE_HEADER_LEN + 9);
        assert_eq!(verdict(&packet(&[root_only])), Ok(1));
    }

    /// Templates not read are skipped by MsgSize, whatever their body.
    #[test]
    fn templates_not_read_are_skipped_whole() {
        for id in [47, 53, 39, 59, 60, 61, 62, 68, 15, 16, 0, 999, u16::MAX] {
            let m = encode::raw(id, 13, &[], &[0xff; 3]);
            let p = packet(&[m, heartbeat()]);
            let packet = Packet::new_checked(&p[..]).unwrap();
            let kinds: Vec<Kind> = packet.messages().map(|m| m.kind()).collect();
            assert_eq!(kinds[1], Kind::Heartbeat, "{id}");
            let m = packet.messages().next().unwrap();
            assert!(matches!(m.body(), template::Body::NotRead), "{id}");
            assert_eq!((m.transact_time(), m.match_event_indicator()), (None, None));
        }
    }

    /// The first failing message decides; within one, sizes, then schema,
    /// then version, then the root, then the groups in order.
    #[test]
    fn precedence() {
        let hb = heartbeat();
        let bad_schema = set16(hb.clone(), 6, 2);
        let old = set16(hb.clone(), 8, 8);
        let short_root = sample(&BOOK, Shape::new(13).root(Len::Exactly(8)), 1);
        let cut = |m: Vec<u8>| {
            let len = m.len() - 1;
            resized(m, len)
        };
        let bad_group = cut(sample(&BOOK, Shape::new(13), 1));
        // The first failing message, whatever comes after.
        let cases = [
            (
                vec![hb.clone(), bad_schema.clone(), old.clone()],
                Reject::BadSchema,
            ),
            (vec![old.clone(), bad_schema.clone()], Reject::OldVersion),
            (
                vec![short_root.clone(), bad_schema.clone()],
                Reject::ShortBlock,
            ),
            (
                vec![bad_group.clone(), short_root.clone()],
                Reject::BadGroup,
            ),
            (
                vec![hb.clone(), short_root.clone(), vec![1]],
                Reject::ShortBlock,
            ),
        ];
        for (messages, expected) in cases {
            assert_eq!(verdict(&packet(&messages)), Err(expected), "{messages:?}");
        }
        // Within one message.
        let both = set16(bad_schema.clone(), 8, 8);
        assert_eq!(verdict(&packet(&[both])), Err(Reject::BadSchema));
        let past = set16(bad_schema, 2, 1);
        assert_eq!(verdict(&packet(&[past])), Err(Reject::BadSize));
        let old_short = set16(short_root.clone(), 8, 8);
        assert_eq!(verdict(&packet(&[old_short])), Err(Reject::OldVersion));
        // A short root before its missing groups.
        let short_alone = resized(short_root, MESSAGE_HEADER_LEN + 8);
        assert_eq!(verdict(&packet(&[short_alone])), Err(Reject::ShortBlock));
        // The first group's short entries before the second group's
        // missing header; its overrun before anything of the second.
        let e = sample(&BOOK, Shape::new(13).entries(Len::Exactly(20)), 1);
        let len = e.len();
        let no_second = resized(e, len - 8);
        assert_eq!(verdict(&packet(&[no_second])), Err(Reject::ShortBlock));
        let mut over = sample(&BOOK, Shape::new(13), 1);
        over[10 + 11 + 2] = 3;
        let len = over.len();
        let over = resized(over, len - 3);
        assert_eq!(verdict(&packet(&[over])), Err(Reject::BadGroup));
        // The framing walk sees only framing.
        let p = packet(&[hb, sample(&BOOK, Shape::new(13).root(Len::Exactly(8)), 1)]);
        assert_eq!(
            (verdict(&p), check_framing(&p)),
            (Err(Reject::ShortBlock), Ok(2))
        );
    }

    // -----------------------------------------------------------------------
    // Fuzz

    /// The contract's minimums, written out again for the reference
    /// checker: (root min, [(dimension header bytes, entry min)]) of each
    /// template read.
    fn contract(template_id: u16) -> Option<(usize, &'static [(usize, usize)])> {
        const DEF: &[(usize, usize)] = &[(3, 0), (3, 4)];
        Some(match template_id {
            4 => (9, &[]),
            12 => (0, &[]),
            30 => (28, &[]),
            46 => (9, &[(3, 27), (8, 0)]),
            64 => (9, &[(3, 31), (8, 0)]),
            48 => (9, &[(3, 20), (8, 0)]),
            65 => (9, &[(3, 24), (8, 0)]),
            37 => (9, &[(3, 12)]),
            66 => (9, &[(3, 16)]),
            49 => (9, &[(3, 20)]),
            50 => (9, &[(3, 32)]),
            51 => (9, &[(3, 16)]),
            67 => (9, &[(3, 24)]),
            52 => (35, &[(3, 22)]),
            69 => (35, &[(3, 23)]),
            54 => (107, DEF),
            55 => (135, DEF),
            56 => (110, DEF),
            57 | 58 => (102, DEF),
            63 => (105, DEF),
            _ => return None,
        })
    }

    /// Where the fuzzer lies: offsets of the u16 and u8 fields that frame a
    /// packet.
    #[derive(Debug, Default)]
    struct Marks {
        sizes: Vec<usize>,
        counts: Vec<usize>,
    }

    /// A second checker, written from the contract by position arithmetic
    /// over the whole datagram, recording the framing fields it passes.
    fn reference(b: &[u8], marks: &mut Marks) -> Result<usize, Reject> {
        let word = |at: usize| usize::from(b[at]) | usize::from(b[at + 1]) << 8;
        if b.len() <= 12 {
            return Err(Reject::Short);
        }
        let mut pos = 12;
        let mut n = 0;
        while pos != b.len() {
            let left = b.len() - pos;
            if left < 2 {
                return Err(Reject::BadSize);
            }
            let size = word(pos);
            if size < 10 || size > left {
                return Err(Reject::BadSize);
            }
            let root = word(pos + 2);
            if 10 + root > size {
                return Err(Reject::BadSize);
            }
            marks
                .sizes
                .extend([pos, pos + 2, pos + 4, pos + 6, pos + 8]);
            if word(pos + 6) != 1 {
                return Err(Reject::BadSchema);
            }
            if word(pos + 8) < 9 {
                return Err(Reject::OldVersion);
            }
            if let Some((root_min, groups)) = contract(word(pos + 4) as u16) {
                if root < root_min {
                    return Err(Reject::ShortBlock);
                }
                let end = pos + size;
                let mut g = pos + 10 + root;
                for &(header, entry_min) in groups {
                    if g + header > end {
                        return Err(Reject::BadGroup);
                    }
                    marks.sizes.push(g);
                    marks.counts.push(g + header - 1);
                    let entry = word(g);
                    if entry < entry_min {
                        return Err(Reject::ShortBlock);
                    }
                    g += header + entry * usize::from(b[g + header - 1]);
                    if g > end {
                        return Err(Reject::BadGroup);
                    }
                }
            }
            pos += size;
            n += 1;
        }
        Ok(n)
    }

    /// Valid packets of several messages: every template read in several
    /// shapes and values, and templates not read.
    fn corpus() -> Vec<Vec<u8>> {
        let shapes = [
            Shape::new(9),
            Shape::new(13),
            Shape::new(14).longer(3, 2),
            Shape::new(13).root(Len::Exactly(7)),
        ];
        let mut out = Vec::new();
        for (i, chunk) in ALL.chunks(4).enumerate() {
            for (j, shape) in shapes.iter().enumerate() {
                let messages: Vec<Vec<u8>> = chunk
                    .iter()
                    .enumerate()
                    .map(|(n, t)| {
                        let shape = match shape.root {
                            Len::Exactly(_) => shape.root(Len::Exactly(t.root.min)),
                            _ => *shape,
                        };
                        sample(t, shape, (i + j + n) as u32)
                    })
                    .chain([
                        encode::raw([47, 53, 39, 999][j], 13, &[1; 11], &[2; 5]),
                        heartbeat(),
                    ])
                    .collect();
                out.push(encode::packet(i as u32, T0, &messages));
            }
        }
        out.push(packet(&[heartbeat()]));
        let empty = encode::book(46, Shape::new(9), 0, 0x80, &[], 0);
        out.push(packet(&[empty.clone(), empty.clone(), empty]));
        out
    }

    /// Seeded mutations of valid packets (bytes flipped, replaced,
    /// inserted, deleted; MsgSize, blockLength and numInGroup lying; cut
    /// and grown datagrams): the validity walk agrees with the reference
    /// checker on every one (verdict and reason), never panics, and every
    /// getter of every message of an accepted packet runs.
    #[test]
    fn fuzz_agrees_with_a_reference_checker() {
        let corpus = corpus();
        for p in &corpus {
            assert_eq!(reference(p, &mut Marks::default()), verdict(p), "{p:?}");
            assert!(verdict(p).is_ok());
        }
        let mut rng = Rng(0x6d64_7033_7769_7265);
        let mut seen = [0usize; 7];
        const CASES: usize = 50_000;
        for case in 0..CASES {
            let original = &corpus[rng.below(corpus.len())];
            let mut marks = Marks::default();
            reference(original, &mut marks).unwrap();
            let mut b = original.clone();
            for _ in 0..1 + rng.below(3) {
                mutate(&mut rng, &mut b, &marks);
            }
            let expected = reference(&b, &mut Marks::default());
            let got = verdict(&b);
            assert_eq!(got, expected, "case {case}: {b:?}");
            let framing = check_framing(&b);
            match expected {
                // A later message's framing may fail after a bad body.
                Err(Reject::ShortBlock | Reject::BadGroup) => assert!(!matches!(
                    framing,
                    Err(Reject::ShortBlock | Reject::BadGroup)
                )),
                other => assert_eq!(framing, other, "case {case}"),
            }
            seen[match got {
                Ok(_) => 6,
                Err(r) => r.index(),
            }] += 1;
            if let Ok(packet) = Packet::new_checked(&b[..]) {
                std::hint::black_box((packet.seq_num(), packet.sending_time()));
                let mut n = 0;
                let mut bytes = HEADER_LEN;
                for m in packet.messages() {
                    std::hint::black_box(describe(&m));
                    n += 1;
                    bytes += usize::from(m.size());
                }
                assert_eq!((n, bytes), (packet.message_count(), b.len()), "case {case}");
            }
        }
        // Every outcome is reached, accepted packets a good share.
        assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
        assert!(seen[6] > CASES / 10, "{seen:?}");
    }

    fn mutate(rng: &mut Rng, b: &mut Vec<u8>, marks: &Marks) {
        let len = b.len().max(1);
        match rng.below(11) {
            0 => {
                let at = rng.below(len).min(b.len().saturating_sub(1));
                if let Some(x) = b.get_mut(at) {
                    *x ^= 1 << rng.below(8);
                }
            }
            1 => {
                let at = rng.below(len);
                if let Some(x) = b.get_mut(at) {
                    *x = rng.byte();
                }
            }
            2 => b.insert(rng.below(b.len() + 1), rng.byte()),
            3 if !b.is_empty() => drop(b.remove(rng.below(b.len()))),
            4 => b.truncate(rng.below(b.len() + 1)),
            5 => b.extend((0..1 + rng.below(12)).map(|_| rng.byte())),
            // A framing u16 (MsgSize, blockLength, templateId, schemaId,
            // version, a group's blockLength) near its value or anywhere.
            6 | 7 if !marks.sizes.is_empty() => {
                let at = marks.sizes[rng.below(marks.sizes.len())];
                if at + 2 <= b.len() {
                    let v = u16::from_le_bytes([b[at], b[at + 1]]);
                    let v = match rng.below(3) {
                        0 => v.wrapping_add(1 + rng.below(3) as u16),
                        1 => v.wrapping_sub(1 + rng.below(3) as u16),
                        _ => rng.next() as u16,
                    };
                    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
                }
            }
            // A numInGroup.
            8 | 9 if !marks.counts.is_empty() => {
                let at = marks.counts[rng.below(marks.counts.len())];
                if let Some(x) = b.get_mut(at) {
                    *x = match rng.below(3) {
                        0 => x.wrapping_add(1),
                        1 => x.wrapping_sub(1),
                        _ => rng.byte(),
                    };
                }
            }
            // A message repeated.
            _ => {
                let at = HEADER_LEN;
                if let Some(&[lo, hi]) = b.get(at..at + 2) {
                    let size = usize::from(u16::from_le_bytes([lo, hi]));
                    if let Some(m) = b.get(at..at + size).map(<[u8]>::to_vec) {
                        b.extend_from_slice(&m);
                    }
                }
            }
        }
    }
}
