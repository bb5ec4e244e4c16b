//! CME MDP 3.0: the market data of CME Globex, SBE-encoded messages in
//! packets of one UDP datagram each, one feed per channel, received live
//! (`run`, the snapshot lines joined on demand) and replayed from captures.
//!
//! The wire, pure and zero-copy (no state, no I/O, no allocation):
//!
//! - [`packet`]: the packet header, the messages and the validity walk
//!   ([`Packet::new_checked`]), then [`Message`]s with infallible getters.
//! - [`template`]: the table of offsets of every template read, and the
//!   typed views over a message's root and groups ([`Body`]).
//! - [`encode`]: builders of packets and messages (tests, fixtures, the
//!   generator).
//!
//! The channel's state, time passed in:
//!
//! - [`sequence`]: the incremental lines' MsgSeqNum (A/B, gaps, restarts);
//! - [`rptseq`], [`instrument`], [`book`]: each instrument's RptSeq, cache
//!   and books, visible at the end of an event;
//! - [`status`]: trading statuses and what they mean;
//! - [`feed`]: the channel, its snapshots, definitions and verdicts;
//! - [`engine`], [`summary`], [`config`]: the channel as the handler,
//!   replay and configuration see it (the engine also decides when the
//!   snapshot lines are wanted);
//! - [`publish`]: the instruments written into the shared table, live;
//! - [`synth`]: a seeded channel venue (fixtures, tests, benchmarks).
//!
//! # The wire
//!
//! A packet is `MsgSeqNum` (u32, +1 per packet per channel and service),
//! `SendingTime` (u64), then one or more messages to the end of the
//! datagram. A message is `MsgSize` (u16, the whole message *including*
//! these two bytes), the SBE header (`blockLength`, `templateId`,
//! `schemaId`, `version`, u16 each), the root block of `blockLength` bytes,
//! then the template's repeating groups in schema order, each a dimension
//! header (`groupSize`: blockLength u16 and numInGroup u8; `groupSize8Byte`:
//! blockLength u16, five bytes of padding, numInGroup u8) and numInGroup
//! entries of blockLength bytes each. An empty group still has its header,
//! so an empty 46 is 2 + 8 + 11 + 3 + 8 = 32 bytes. All integers are
//! little-endian.
//!
//! Roots and entries are stepped over by the blockLength *on the wire*,
//! which may exceed the schema's: a newer version appends fields, and the
//! bytes past those read are ignored, as are bytes after the last group
//! read. Every field read keeps its offset in schema versions 9 to 13, and a
//! version above 13 is read with the same offsets.
//!
//! Units: `SendingTime` and every `TransactTime` are ns since the Unix epoch
//! (UTC). Prices (`MDEntryPx`, `MinPriceIncrement`, `DisplayFactor`) are i64
//! mantissas with exponent −9, kept as integers (negative prices are
//! valid). Nulls read as `None`: `PRICENULL9` 2^63−1, i32 2^31−1, u32
//! 2^32−1, u64 2^64−1, u8 255, i8 127. `char[n]` fields come back as bytes
//! with their trailing NULs and spaces trimmed.
//!
//! # Packet validity
//!
//! A datagram is valid as a whole or not at all; [`Reject`] names why:
//!
//! - `short`: under 12 bytes, or no message after the header;
//! - `bad_size`: a `MsgSize` under 10, a message running past the datagram,
//!   a root block running past its message, or a single byte left after
//!   the last message (too few to hold a `MsgSize`);
//! - `bad_schema`: a `schemaId` other than 1;
//! - `old_version`: a version below 9 (older layouts are not read);
//! - `short_block`: for a template read, a root blockLength, or the entry
//!   blockLength of a group walked, below the least the table accepts
//!   (`min`, which covers every field read);
//! - `bad_group`: for a template read, a dimension header or its entries
//!   running past the message, for every group up to the last one read.
//!
//! A template not read (market by order, the other skipped ones, unknown
//! ids) is checked for its framing only and skipped by its `MsgSize`.
//!
//! ## Precedence (where several reasons apply)
//!
//! The walk stops at the first failure, so the reason is that of the
//! **first failing message**, in order. Within one message the checks run
//! from what the bytes are to what they say:
//!
//! 1. sizes: `MsgSize` readable, at least 10, inside the datagram, the root
//!    block inside the message (`bad_size`);
//! 2. `schemaId` (`bad_schema`);
//! 3. version (`old_version`);
//! 4. the root's blockLength against its min (`short_block`);
//! 5. each group in schema order: its header inside the message
//!    (`bad_group`), its entry blockLength against its min (`short_block`),
//!    its entries inside the message (`bad_group`).
//!
//! `short` is judged before any message. So a message with both another
//! schema and an old version is `bad_schema`, and one whose root runs past
//! it is `bad_size` whatever its schema.
//!
//! ## Decisions where the contract is silent
//!
//! - A group's entry blockLength is checked against its min even when the
//!   group is empty: the header states the entries' layout either way, and
//!   a wrong one means the message is not what it claims.
//! - 4 ChannelReset is root only: its group (ApplID entries) is neither read
//!   nor walked. NoEvents of the definitions is walked (it precedes
//!   NoMDFeedTypes) with any entry blockLength; NoOrderIDEntries of 46, 64,
//!   48 and 65 likewise, only its count is kept.
//! - The template id alone chooses the layout: a LongQty template (64–69)
//!   under a version before 12 is read the same (the version gates only
//!   `old_version`).
//! - A size that no quantity can be (a negative `Int32` MDEntrySize) and a
//!   level no book has (a negative `Int8` MDPriceLevel of 52) read as `None`
//!   like a null, so one type serves both the 32-bit and the 64-bit forms
//!   (`Option<u64>` sizes, `Option<u8>` levels).
//! - `MinPriceIncrement` reads as `None` at 2^63−1 only where the schema
//!   makes it nullable (55, 56, 57).
//! - The sniffer ([`sniff`]) asks only the framing part of the walk: that
//!   tells MDP3 from other protocols; a bad block inside good framing is
//!   still an MDP3 datagram, just an invalid one.

pub mod book;
pub mod cache;
pub mod config;
pub mod encode;
pub mod engine;
pub mod feed;
pub mod groups;
pub mod index;
pub mod instrument;
pub mod loops;
pub mod name;
pub mod packet;
pub mod publish;
pub mod rptseq;
pub mod sequence;
pub mod status;
pub mod summary;
pub mod synth;
pub mod template;
#[cfg(test)]
mod testing;

pub use packet::{Header, Message, Messages, Packet};
pub use template::{Body, Kind};

/// Why an MDP3 datagram was rejected whole (see the module's "Packet
/// validity" for each reason and their precedence).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reject {
    /// Under 12 bytes, or no message.
    Short,
    /// A MsgSize under 10, a message or root block running past the
    /// datagram or its message, or one byte left over.
    BadSize,
    /// A schemaId other than CME's (1).
    BadSchema,
    /// A version below 9.
    OldVersion,
    /// A root or entry blockLength below its template's min.
    ShortBlock,
    /// A dimension header or its entries running past the message.
    BadGroup,
}

impl Reject {
    /// Every reason, in a fixed order (counter arrays are indexed by it).
    pub const ALL: [Reject; 6] = [
        Reject::Short,
        Reject::BadSize,
        Reject::BadSchema,
        Reject::OldVersion,
        Reject::ShortBlock,
        Reject::BadGroup,
    ];

    /// Position in [`Reject::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Stable snake_case name used in counters, logs and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            Reject::Short => "short",
            Reject::BadSize => "bad_size",
            Reject::BadSchema => "bad_schema",
            Reject::OldVersion => "old_version",
            Reject::ShortBlock => "short_block",
            Reject::BadGroup => "bad_group",
        }
    }

    /// Appended to a warning when the reason means the datagrams are
    /// probably not MDP3 at all (another protocol on the group): framing
    /// that does not hold, or another schema. An old version or a bad block
    /// is MDP3 that this version does not accept.
    pub fn hint(self) -> &'static str {
        match self {
            Reject::Short | Reject::BadSize | Reject::BadSchema => " (not CME MDP3?)",
            Reject::OldVersion | Reject::ShortBlock | Reject::BadGroup => "",
        }
    }
}

/// The datagram as an MDP3 packet, if its framing holds (the framing part of
/// the validity walk, [`packet::check_framing`]): at least one message,
/// each at least its headers, with CME's schema id, a version of 9 or
/// later, and a root block inside the message, the last one ending exactly
/// at the end of the datagram.
///
/// A configuration drafted from it takes the address as a feed's
/// incremental `lines`, unless its messages say it is another service of a
/// channel: snapshots (52, 69) or definitions (54 to 58, 63) get a comment saying
/// which list the address belongs in (ranked above plain lines: one
/// snapshot datagram marks the address; definitions only an address that
/// carries nothing else, an incremental line carrying them too, mid-week).
pub fn sniff(payload: &[u8]) -> Option<super::Sniff> {
    packet::check_framing(payload).ok()?;
    let seq = packet::seq_num(payload)?;
    let (draft_keys, draft_rank, draft_alone) = match service_of(payload) {
        Service::Snapshot => (
            "# this address carries snapshots (52, 69): list it in the channel's \
             snapshot_lines, not as a feed of its own\n",
            2,
            true,
        ),
        Service::Definition => (
            "# this address carries definitions (54 to 58, 63): list it in the channel's \
             definition_lines, not as a feed of its own\n",
            1,
            false,
        ),
        Service::Incremental => ("", 0, true),
        // Every service sends heartbeats: they say nothing of which.
        Service::Heartbeat => ("", 0, false),
    };
    Some(super::Sniff {
        looks_like: "CME MDP3 (SBE)",
        protocol: Some(super::Protocol::Mdp3),
        session: None,
        sequences: Some((u64::from(seq), u64::from(seq))),
        draft_keys,
        draft_rank,
        draft_alone,
        recovery_keys: None,
    })
}

/// Which service of a channel a datagram (framing checked) looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Service {
    Incremental,
    Snapshot,
    Definition,
    /// Only heartbeats (12): any service's.
    Heartbeat,
}

/// The service the templates of `payload` belong to: a snapshot or a
/// definition anywhere in it decides; a packet of heartbeats alone is
/// any service's.
fn service_of(payload: &[u8]) -> Service {
    let mut at = packet::HEADER_LEN;
    let mut service = Service::Heartbeat;
    while let (Some(size), Some(template)) = (u16_at(payload, at), u16_at(payload, at + 4)) {
        match template {
            52 | 69 => return Service::Snapshot,
            54..=58 | 63 => service = Service::Definition,
            12 => {}
            _ if service == Service::Heartbeat => service = Service::Incremental,
            _ => {}
        }
        at += usize::from(size.max(1));
    }
    service
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet of `messages`, each (blockLength, templateId, schemaId,
    /// version) with a zeroed root block.
    fn packet(seq: u32, messages: &[(u16, u16, u16, u16)]) -> Vec<u8> {
        let mut p = seq.to_le_bytes().to_vec();
        p.extend_from_slice(&1_767_603_600_000_000_000u64.to_le_bytes());
        for &(block, template, schema, version) in messages {
            let size = packet::MESSAGE_HEADER_LEN as u16 + block;
            for v in [size, block, template, schema, version] {
                p.extend_from_slice(&v.to_le_bytes());
            }
            p.resize(p.len() + usize::from(block), 0);
        }
        p
    }

    #[test]
    fn framing_is_recognised_and_its_sequence_read() {
        let p = packet(41, &[(11, 46, 1, 13), (32, 46, 1, 9)]);
        let s = sniff(&p).unwrap();
        assert_eq!(
            (s.looks_like, s.sequences),
            ("CME MDP3 (SBE)", Some((41, 41)))
        );
        // Framing only: these 46s have no groups, which the full walk
        // rejects.
        assert_eq!(Packet::new_checked(&p).err(), Some(Reject::BadGroup));
    }

    /// A draft puts a snapshot or definition address in its channel's
    /// list, not in a feed of its own.
    #[test]
    fn snapshots_and_definitions_are_told_apart_for_a_draft() {
        let keys = |m: &[(u16, u16, u16, u16)]| sniff(&packet(1, m)).unwrap().draft_keys;
        assert_eq!(keys(&[(11, 46, 1, 13)]), "");
        assert!(keys(&[(11, 46, 1, 13), (59, 52, 1, 13)]).contains("snapshot_lines"));
        assert!(keys(&[(213, 54, 1, 13)]).contains("definition_lines"));
        assert!(keys(&[(213, 54, 1, 13), (59, 69, 1, 13)]).contains("snapshot_lines"));
        // The definitions are 54 to 58 and 63 (spec mdp3 §2); 59 to 62
        // are skipped templates, no definition.
        for t in [55, 56, 57, 58, 63] {
            assert!(keys(&[(213, t, 1, 13)]).contains("definition_lines"), "{t}");
        }
        for t in [59, 60, 61, 62] {
            assert!(
                !keys(&[(213, t, 1, 13)]).contains("definition_lines"),
                "{t}"
            );
        }
    }

    #[test]
    fn anything_else_is_not_mdp3() {
        let good = packet(1, &[(11, 46, 1, 13)]);
        assert!(sniff(&good[..good.len() - 1]).is_none(), "cut short");
        let mut extra = good.clone();
        extra.push(0);
        assert!(sniff(&extra).is_none(), "a byte left over");
        assert!(
            sniff(&packet(1, &[(11, 46, 2, 13)])).is_none(),
            "another schema"
        );
        assert!(sniff(&packet(1, &[(11, 46, 1, 8)])).is_none(), "too old");
        assert!(sniff(&packet(1, &[])).is_none(), "no message");
        assert!(sniff(&[]).is_none());
        let mut small = good.clone();
        small[12..14].copy_from_slice(&4u16.to_le_bytes());
        assert!(sniff(&small).is_none(), "MsgSize below its header");
    }

    #[test]
    fn reasons_are_listed_once_in_order() {
        for (i, r) in Reject::ALL.into_iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        let names: Vec<&str> = Reject::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            names,
            [
                "short",
                "bad_size",
                "bad_schema",
                "old_version",
                "short_block",
                "bad_group"
            ]
        );
        assert_eq!(Reject::BadSchema.hint(), " (not CME MDP3?)");
        assert_eq!(Reject::ShortBlock.hint(), "");
    }
}
