//! tickguard: a market-data feed handler that tells a pre-trade check
//! whether a price can be trusted.
//!
//! Three crates, each above the one before:
//!
//! - `tickguard-reader` (`crates/reader`): the read side a gateway links —
//!   the publication's layout, the seqlock, the verdict, [`Reader`];
//! - `tickguard-engine` (`crates/engine`): protocols, state, the handler,
//!   the publication's writer, capture reading and replay;
//! - this crate: the programs — the live receive loop ([`sidecar`]),
//!   `stat`, the Prometheus exporter ([`metrics`]), `demo`, `simulate`,
//!   `explain` and the command line.
//!
//! The engine's and reader's modules are re-exported here under the paths
//! they have in their own crates, so `tickguard::config`,
//! `tickguard::handler` and the rest name the same items everywhere.

#![deny(unsafe_code)]

pub use tickguard_engine::{
    capture, clock, config, engine, handler, protocol, ratelimit, reader, replay, shm, state,
    symbol, sys, time, verdict,
};
pub use tickguard_reader::{Handle, Health, Reader, Verdict, WallClock};

pub mod demo;
pub mod explain;
pub mod fixtures;
pub mod metrics;
pub mod sidecar;
pub mod simulate;
pub mod stat;
#[cfg(test)]
#[path = "../crates/engine/src/test_log.rs"]
mod test_log;
