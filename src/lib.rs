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
//!
//! ```
//! use tickguard::{config::Config, handler::Handler, protocol::sqf::PacketBuilder, symbol::Symbol};
//!
//! let config = Config::parse(
//!     r#"
//! [[feed]]
//! name = "lp1"
//! kind = "full"
//! lines = ["239.1.1.1:30001"]
//! stale_threshold_ms = 500
//! source_threshold_ms = 2000
//! clock_offset = 0
//! "#,
//!     "example.toml",
//! )?;
//! let mut handler = Handler::new(&config);
//! let eurusd = Symbol::parse("EURUSD").unwrap();
//!
//! // A quote arrives at t (ns since the Unix epoch, local clock).
//! let t = 1_767_603_600_000_000_000;
//! let mut packet = PacketBuilder::new(t);
//! packet.quote(eurusd, 1, t, 1.0850, 1.0851);
//! handler.on_datagram(0, &packet.finish(), t).unwrap();
//!
//! // Fresh for 500 ms, then stale.
//! assert!(handler.verdict(0, eurusd, t + 500_000_000).is_ok());
//! let reasons: Vec<_> = handler.verdict(0, eurusd, t + 500_000_001).names().collect();
//! assert_eq!(reasons, ["stale"]);
//! # Ok::<(), tickguard::config::ConfigError>(())
//! ```
#![deny(unsafe_code)]

pub use tickguard_engine::{
    capture, clock, config, engine, handler, protocol, reader, replay, shm, state, symbol, sys,
    time, verdict,
};
pub use tickguard_reader::{Handle, Health, Reader, Verdict, WallClock};

pub mod demo;
pub mod explain;
pub mod metrics;
pub mod sidecar;
pub mod simulate;
pub mod stat;
