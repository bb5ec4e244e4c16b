//! Protocols, one folder each: the bytes of a venue's feed and what they
//! mean. Everything a protocol does not own (capture, sockets, the state
//! table, the verdict, the publication) is shared and names no protocol.
//!
//! - [`sqf`]: SQF v1, the Simple Quote Feed.
//! - [`itch50`]: Nasdaq TotalView-ITCH 5.0 over MoldUDP64.

pub mod itch50;
pub mod sqf;
