//! Wire formats: zero-copy views over received datagrams.
//!
//! A decoder's only job is to turn bytes into [`Message`]s — a protocol-neutral
//! vocabulary of sequenced price updates, heartbeats and snapshots — or to
//! reject the datagram whole. What a message *means* for a symbol's state is
//! decided in [`crate::rules`], which never sees bytes.
//!
//! SQF numbers its messages per symbol. A framing that numbers per stream
//! (MoldUDP64: one sequence per session, heartbeats carrying the session's
//! next expected number) plugs in beside [`sqf`]: its decoder yields the
//! same price and heartbeat views without a per-symbol sequence, and the
//! handler runs the same [`crate::rules::SeqTrack`] once per stream instead of
//! once per symbol, marking the stream's symbols suspect on a gap.

pub mod sqf;

pub use sqf::{
    HeartbeatView, Known, Message, Packet, PacketBuilder, PriceView, Reject, MAX_MESSAGES,
};
