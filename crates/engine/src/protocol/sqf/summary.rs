//! What a replay reports of an SQF feed at its end (SQF section 6: the
//! summary file's entry for the feed): its counters, its clock offset and
//! each symbol's final state.

use super::Reject;
use crate::engine::{rejected_by_reason, FeedCounters, View};
use serde::Serialize;
use std::collections::BTreeMap;

/// One feed's counters and symbols.
#[derive(Debug, Serialize)]
pub struct FeedSummary {
    /// Datagrams routed to the feed (all lines).
    pub packets: u64,
    /// Of those, rejected whole.
    pub rejected: u64,
    /// Messages in accepted packets, unknown types included.
    pub messages: u64,
    /// Rejections by reason.
    pub rejected_by_reason: BTreeMap<&'static str, u64>,
    /// Quotes.
    pub quotes: u64,
    /// Snapshots.
    pub snapshots: u64,
    /// Heartbeats.
    pub heartbeats: u64,
    /// Unknown message types, skipped.
    pub unknown_messages: u64,
    /// Duplicates over all symbols: Quotes at or below a symbol's
    /// sequence, and messages the two lines' arbitration dropped as sent
    /// before a reset or as a line's copy (Quotes, Snapshots, Heartbeats).
    pub duplicates: u64,
    /// Ticks lost over all symbols.
    pub ticks_lost: u64,
    /// Messages dropped because the state table was full.
    pub table_full_drops: u64,
    /// Clock offset (local − provider) at the end, ns.
    pub clock_offset_ns: i128,
    /// Per symbol, by name.
    pub symbols: BTreeMap<String, SymbolSummary>,
}

/// One symbol's final state.
#[derive(Debug, Serialize)]
pub struct SymbolSummary {
    /// Last sequence accepted.
    pub last_seq: u64,
    /// Ticks lost.
    pub ticks_lost: u64,
    /// Duplicates (as the feed's [`FeedSummary::duplicates`] counts them).
    pub duplicates: u64,
    /// Suspect flag.
    pub suspect: bool,
    /// Last price message invalid.
    pub invalid: bool,
    /// Last valid bid, if any.
    pub bid: Option<f64>,
    /// Last valid ask, if any.
    pub ask: Option<f64>,
    /// Source time of the last valid price, ns (provider clock).
    pub source_time: Option<u64>,
    /// Last arrival that proved the symbol alive, ns (capture clock); 0 if none.
    pub last_alive: u64,
}

impl FeedSummary {
    /// The summary of feed `view.id`, which counted `c` and ended with
    /// clock offset `offset` (ns): its symbols read from the table.
    pub fn new(view: View<'_>, c: &FeedCounters, offset: i128) -> FeedSummary {
        let symbols = view
            .table
            .records()
            .filter(|r| r.feed == view.id)
            .filter_map(|r| {
                let symbol = r.symbol?;
                let s = &r.state;
                Some((
                    symbol.to_string(),
                    SymbolSummary {
                        last_seq: s.seq.last_seq,
                        ticks_lost: s.seq.ticks_lost,
                        duplicates: s.seq.duplicates,
                        suspect: s.suspect,
                        invalid: s.invalid,
                        bid: s.price.map(|p| p.bid),
                        ask: s.price.map(|p| p.ask),
                        source_time: s.price.map(|p| p.source_time),
                        last_alive: s.last_alive,
                    },
                ))
            })
            .collect();
        FeedSummary {
            packets: c.packets,
            rejected: c.rejected,
            messages: c.messages,
            rejected_by_reason: rejected_by_reason::<Reject>(c),
            quotes: c.quotes,
            snapshots: c.snapshots,
            heartbeats: c.heartbeats,
            unknown_messages: c.unknown,
            duplicates: c.duplicates,
            ticks_lost: c.ticks_lost,
            table_full_drops: c.table_full,
            clock_offset_ns: offset,
            symbols,
        }
    }
}
