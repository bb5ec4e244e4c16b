//! What a replay reports of an ITCH feed at its end (the summary file's
//! entry for the feed): the stream's counters, the session, and each
//! symbol's book top, orders and trading state.

use super::feed::{Feed, Hours};
use super::Reject;
use crate::engine::{rejected_by_reason, FeedCounters};
use serde::Serialize;
use std::collections::BTreeMap;

/// An ITCH feed at the end (spec itch50 §5).
#[derive(Debug, Serialize)]
pub struct FeedSummary {
    /// Datagrams routed to the feed from its lines and recovery channel.
    pub packets: u64,
    /// Of those, rejected whole.
    pub rejected: u64,
    /// Rejections by reason.
    pub rejected_by_reason: BTreeMap<&'static str, u64>,
    /// Blocks in accepted data packets of the current session at their
    /// arrival, duplicates included.
    pub messages: u64,
    /// The session's 10 bytes (escaped where not printable); null before any packet.
    pub session: Option<String>,
    /// The next sequence to apply; null before any packet.
    pub next: Option<u64>,
    /// Messages given up.
    pub ticks_lost: u64,
    /// Messages received again.
    pub duplicates: u64,
    /// Messages that filled a gap.
    pub recovered: u64,
    /// Gaps open at the end.
    pub gaps_open: u64,
    /// A gap open or given up, or a mid-session join.
    pub suspect: bool,
    /// Joined mid-session (or gave up the session's first gap).
    pub joined: bool,
    /// "open" or "closed".
    pub hours: &'static str,
    /// Accepted heartbeats (count 0), all lines.
    pub heartbeats: u64,
    /// New sessions after the first.
    pub session_changes: u64,
    /// Packets of an earlier session.
    pub stale_session: u64,
    /// References to orders not live.
    pub unknown_orders: u64,
    /// Adds on a live reference (and adds with no valid side).
    pub anomalies: u64,
    /// Adds refused because the books held `max_orders` live orders.
    pub orders_refused: u64,
    /// Messages refused a new symbol because the session held
    /// `max_symbols` symbols (left out when none).
    #[serde(skip_serializing_if = "crate::capture::is_zero")]
    pub symbols_refused: u64,
    /// Recovery answers of another session than the lines', ignored
    /// (left out when none).
    #[serde(skip_serializing_if = "crate::capture::is_zero")]
    pub recovery_wrong_session: u64,
    /// Applied messages by type letter.
    pub messages_by_type: BTreeMap<String, u64>,
    /// BinaryFILE records that failed validation (only in a BinaryFILE replay).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid_records: Option<u64>,
    /// Snapshots, for a feed with `glimpse` (glimpse G4; absent otherwise).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<Box<SnapshotSummary>>,
    /// Per symbol, by stock.
    pub symbols: BTreeMap<String, SymbolSummary>,
    /// Messages held behind an open gap at the end (told on the replay's
    /// last line, not written to the file).
    #[serde(skip)]
    pub held: u64,
}

/// A feed's GLIMPSE snapshots at the end (spec glimpse G4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SnapshotSummary {
    /// `"idle"` or `"awaiting"`.
    pub snapshot_state: &'static str,
    /// Snapshots merged.
    pub snapshots: u64,
    /// Connections started.
    pub snapshot_attempts: u64,
    /// Failures by class.
    pub snapshot_failures: BTreeMap<&'static str, u64>,
    /// Waits given up.
    pub snapshot_gave_up: u64,
    /// Held messages below a merged snapshot's N, discarded.
    pub snapshot_discarded: u64,
    /// Held messages discarded for room while awaiting.
    pub snapshot_overflow: u64,
    /// N of the last merged snapshot; null before any.
    pub snapshot_next: Option<u64>,
    /// The last merged snapshot's session, trimmed; null before any.
    pub snapshot_session: Option<String>,
    /// `S` packets of the last merged spin.
    pub snapshot_messages: u64,
}

impl SnapshotSummary {
    /// The snapshots of `it`, attempted as `s` counted.
    pub fn new(it: &Feed, s: &super::snapshot::Counters) -> SnapshotSummary {
        let sc = it.sequencer().counters();
        SnapshotSummary {
            snapshot_state: if it.sequencer().awaiting() {
                "awaiting"
            } else {
                "idle"
            },
            snapshots: sc.snapshots,
            snapshot_attempts: s.attempts,
            snapshot_failures: super::glimpse::Failure::ALL
                .iter()
                .map(|f| (f.as_str(), s.failures[f.index()]))
                .collect(),
            snapshot_gave_up: s.gave_up,
            snapshot_discarded: sc.snapshot_discarded,
            snapshot_overflow: sc.snapshot_overflow,
            snapshot_next: s.next,
            snapshot_session: s
                .session
                .map(|x| crate::shm::printable(super::soup::trim(&x))),
            snapshot_messages: s.messages,
        }
    }
}

/// One ITCH symbol at the end (spec itch50 §5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SymbolSummary {
    /// The locate code that last mapped to it.
    pub locate: u16,
    /// Best bid, 1/10,000 dollar (absent: no buy order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bid: Option<u32>,
    /// Shares at the best bid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bid_size: Option<u64>,
    /// Best ask, 1/10,000 dollar (absent: no sell order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask: Option<u32>,
    /// Shares at the best ask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask_size: Option<u64>,
    /// Live orders.
    pub orders: u64,
    /// The last trading state letter; null before any `H`.
    pub trading_state: Option<String>,
    /// The last message's raw 48-bit timestamp.
    pub last_timestamp: Option<u64>,
}

impl FeedSummary {
    /// The summary of `it`, whose handler counted `c`.
    pub fn new(c: &FeedCounters, it: &mut Feed) -> Self {
        // The books first: settled, every change applied.
        let symbols = it
            .settled()
            .symbols()
            .map(|(s, top, orders)| {
                (
                    s.stock.to_string(),
                    SymbolSummary {
                        locate: s.locate,
                        bid: top.bid.map(|b| b.0),
                        bid_size: top.bid.map(|b| b.1),
                        ask: top.ask.map(|a| a.0),
                        ask_size: top.ask.map(|a| a.1),
                        orders,
                        trading_state: s.trading_state.map(letter),
                        last_timestamp: s.last_timestamp,
                    },
                )
            })
            .collect();
        let seq = it.sequencer();
        let sc = seq.counters();
        let mc = it.counters();
        FeedSummary {
            packets: c.packets,
            rejected: c.rejected,
            rejected_by_reason: rejected_by_reason::<Reject>(c),
            messages: sc.messages,
            session: it.session().map(|s| s.display()),
            next: seq.next(),
            ticks_lost: sc.ticks_lost,
            duplicates: sc.duplicates,
            recovered: sc.recovered,
            gaps_open: seq.gaps_open() as u64,
            held: seq.held() as u64,
            suspect: it.suspect(),
            joined: seq.joined(),
            hours: match it.hours() {
                Hours::Open => "open",
                Hours::Closed => "closed",
            },
            heartbeats: sc.heartbeats,
            session_changes: sc.session_changes,
            stale_session: sc.stale_session,
            unknown_orders: mc.unknown_orders,
            anomalies: mc.anomalies,
            orders_refused: mc.orders_refused,
            symbols_refused: mc.symbols_refused,
            recovery_wrong_session: mc.recovery_wrong_session,
            messages_by_type: mc
                .by_type
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(code, n)| (letter(code as u8), *n))
                .collect(),
            invalid_records: None,
            snapshot: None,
            symbols,
        }
    }
}

/// An ITCH letter (a type or a trading state) as summary text: printable
/// as is, any other byte as `\xNN`.
fn letter(b: u8) -> String {
    crate::shm::printable(&[b])
}
