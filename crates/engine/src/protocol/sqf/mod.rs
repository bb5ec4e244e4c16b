//! SQF v1, the Simple Quote Feed (`../shared/spec/sqf-v1.md`): one UDP
//! datagram per packet, sequences per symbol, full or delta quotes.
//!
//! [`wire`] turns bytes into checked views (or rejects the datagram whole);
//! [`rules`] says what each message means for a symbol's state (spec §3),
//! as pure functions that never see bytes.

pub mod config;
pub mod feed;
pub mod rules;
pub mod summary;
pub mod wire;

pub use wire::{
    HeartbeatView, Known, Message, Packet, PacketBuilder, PriceView, Reject, MAX_MESSAGES,
};
