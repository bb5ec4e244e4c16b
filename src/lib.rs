//! tickguard: an SQF market-data feed handler.
//!
//! Data flows one way through the modules:
//!
//! ```text
//! capture (pcap file)  ─┐
//!                       ├─> wire (decode SQF) ─> feed (rules) ─> state (slot table) ─> verdict
//! socket (live, later) ─┘
//! ```
//!
//! I/O lives at the edges (`capture`, `replay`, the binary); `wire`, `feed`,
//! `state` and `verdict` are pure logic that is handed the time instead of
//! reading a clock, so replay and live produce the same answers.
#![deny(unsafe_code)]

pub mod capture;
pub mod cli;
pub mod clock;
pub mod config;
pub mod handler;
pub mod replay;
pub mod rules;
pub mod state;
pub mod symbol;
pub mod verdict;
pub mod wire;
