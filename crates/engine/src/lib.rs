//! tickguard's engine: everything between a datagram (or a capture's
//! record) and the published verdict, with no user interface.
//!
//! Data flows one way through the modules:
//!
//! ```text
//! capture (pcap/pcapng) ─┐                                       ┌─> state (seqlock slots) ─> shm (publication)
//!                        ├─> protocol (decode, rules) ─> handler ┤
//! sockets (sys::udp) ────┘                                       └─> verdict
//! ```
//!
//! I/O lives at the edges (`capture`, `sys`, `replay`, `shm`); `protocol`,
//! `handler` and `state` are pure logic that is handed the time instead of
//! reading a clock, so replay and live produce the same answers. Each
//! protocol lives in its own folder under [`protocol`], behind the
//! interface of [`engine`]. The layout readers share, the slot record and
//! the verdict function come from the reader crate, re-exported here
//! under their usual paths ([`symbol`], [`verdict`], `state::slot`, ...).
#![deny(unsafe_code)]

pub use tickguard_reader::{reader, symbol, verdict};

pub mod capture;
pub mod clock;
pub mod config;
pub mod engine;
pub mod filled;
pub mod handler;
pub mod protocol;
pub mod ratelimit;
mod readahead;
pub mod replay;
pub mod shm;
pub mod state;
pub mod sys;
#[cfg(test)]
mod test_alloc;
#[cfg(test)]
mod test_log;
#[cfg(test)]
mod test_rng;
#[cfg(test)]
mod test_work;
pub mod time;
