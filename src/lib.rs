//! tickguard: a market-data feed handler that tells a pre-trade check
//! whether a price can be trusted.
//!
//! Data flows one way through the modules:
//!
//! ```text
//! capture (pcap/pcapng) ─┐                                    ┌─> state (seqlock slots, /dev/shm) ─> Reader
//!                        ├─> protocol (decode, rules) ─> handler ┤
//! sockets (recvmmsg) ────┘                                    └─> verdict
//! ```
//!
//! I/O lives at the edges (`capture`, `sys`, `replay`, `sidecar`, the
//! binary); `protocol`, `handler`, `state` and `verdict` are pure logic that
//! is handed the time instead of reading a clock, so replay and live produce
//! the same answers. Each protocol lives in its own folder under
//! [`protocol`].
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

pub use reader::{Handle, Health, Reader, Verdict};
pub use time::WallClock;

pub mod capture;
pub mod clock;
pub mod config;
pub mod demo;
pub mod engine;
pub mod explain;
pub mod handler;
pub mod metrics;
pub mod protocol;
mod readahead;
pub mod reader;
pub mod replay;
pub mod shm;
pub mod sidecar;
pub mod simulate;
pub mod stat;
pub mod state;
pub mod symbol;
pub mod sys;
pub mod time;
pub mod verdict;
