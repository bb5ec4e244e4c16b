//! Nasdaq TotalView-ITCH 5.0 over MoldUDP64.
//!
//! Two layers, as the venue defines them: [`mold`] frames a UDP datagram
//! into a session, a sequence and message blocks and knows nothing of ITCH;
//! [`message`] reads one ITCH message. A datagram is valid as a whole or not
//! at all ([`mold::Packet::new_checked`] checks both layers in one walk), and
//! only a checked packet hands out messages, whose getters then cannot fail.
//! Snapshots come over TCP: [`soup`] frames SoupBinTCP and [`glimpse`] is
//! the GLIMPSE 5.0 client's protocol logic over it.

pub mod binfile;
pub mod book;
pub mod client;
pub mod config;
pub mod connection;
pub mod driver;
pub mod engine;
pub mod event;
pub mod feed;
pub mod glimpse;
pub mod ladder;
pub mod levels;
pub mod linecheck;
pub mod map;
pub mod message;
pub mod mold;
pub mod publish;
pub mod recovery;
pub mod sequencer;
pub mod snapshot;
pub mod soup;
pub mod summary;
pub mod synth;

pub use message::{Body, Message, Side};
pub use mold::{Packet, PacketBuilder, Session};

/// Why a MoldUDP64 datagram was rejected whole (spec §1, packet validity).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reject {
    /// Shorter than the 20-byte header.
    Short,
    /// A heartbeat (count 0) or end of session (count 0xFFFF) with bytes
    /// after the header.
    ControlWithBody,
    /// A block's 2-byte length runs past the end of the datagram.
    BlockHeaderOverrun,
    /// A block runs past the end of the datagram.
    BlockOverrun,
    /// A block of length 0.
    EmptyBlock,
    /// Bytes left after `count` blocks.
    TrailingBytes,
    /// A known message type shorter than its length.
    TooShortForType,
    /// A `stock` field that is not printable ASCII, left-justified and
    /// space-padded, with at least one non-space byte.
    BadStock,
}

impl Reject {
    /// Every reason, in a fixed order (counter arrays are indexed by it).
    pub const ALL: [Reject; 8] = [
        Reject::Short,
        Reject::ControlWithBody,
        Reject::BlockHeaderOverrun,
        Reject::BlockOverrun,
        Reject::EmptyBlock,
        Reject::TrailingBytes,
        Reject::TooShortForType,
        Reject::BadStock,
    ];

    /// Position in [`Reject::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Stable snake_case name used in counters, logs and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            Reject::Short => "short",
            Reject::ControlWithBody => "control_with_body",
            Reject::BlockHeaderOverrun => "block_header_overrun",
            Reject::BlockOverrun => "block_overrun",
            Reject::EmptyBlock => "empty_block",
            Reject::TrailingBytes => "trailing_bytes",
            Reject::TooShortForType => "too_short_for_type",
            Reject::BadStock => "bad_stock",
        }
    }
}

/// What a MoldUDP64 datagram of ITCH 5.0 messages shows (`tickguard
/// inspect`): its session, the sequences of its messages (a heartbeat's
/// next one), and the stocks its messages name.
pub fn sniff(
    payload: &[u8],
    symbol: &mut impl FnMut(crate::symbol::Symbol),
) -> Option<super::Sniff> {
    let packet = Packet::new_checked(payload).ok()?;
    let first = packet.sequence();
    let sequences = match packet.kind() {
        // A range past the end of the sequence space is not one.
        mold::Kind::Data(n) => first
            .checked_add(u64::from(n) - 1)
            .map(|last| (first, last)),
        mold::Kind::Heartbeat | mold::Kind::EndOfSession => None,
    };
    for (_, m) in packet.messages() {
        if let Some(s) = m.stock() {
            symbol(s);
        }
    }
    Some(super::Sniff {
        looks_like: "MoldUDP64/ITCH 5.0",
        protocol: Some(super::Protocol::Itch50),
        session: Some(packet.session().display()),
        sequences,
        draft_keys: "",
        draft_rank: 0,
        draft_alone: true,
        recovery_keys: Some(["recovery", "recovery_listen"]),
    })
}
