//! What a replay reports of an MDP3 feed at its end (the summary file's
//! entry for the feed): the channel's counters, then each instrument under
//! `symbols`, keyed `#<SecurityID>`.
//!
//! Prices are the wire's mantissas (exponent −9) as JSON integers; a key
//! of an empty book side is left out, as the check lines leave out `bid`
//! and `ask`.

use super::book::{Level, Side};
use super::feed::{Entry, Feed};
use super::status::{self, Meaning, State};
use super::Reject;
use crate::engine::{rejected_by_reason, FeedCounters};
use serde::Serialize;
use std::collections::BTreeMap;

/// An MDP3 feed at the end.
#[derive(Debug, Serialize)]
pub struct FeedSummary {
    /// Datagrams routed to the feed, every service (the `definitions`
    /// file's not counted).
    pub packets: u64,
    /// Of those, rejected whole.
    pub rejected: u64,
    /// Rejections by reason.
    pub rejected_by_reason: BTreeMap<&'static str, u64>,
    /// Messages in accepted incremental datagrams, duplicates included.
    pub messages: u64,
    /// Messages processed, by template id (only ids seen).
    pub messages_by_template: BTreeMap<String, u64>,
    /// Messages of a template not read, skipped.
    pub unknown_templates: u64,
    /// One past the highest incremental MsgSeqNum of the current
    /// sequence (a restart starts it again); null before any packet.
    pub next: Option<u64>,
    /// Packet gaps open at the end.
    pub gaps_open: u64,
    /// Packet gaps opened.
    pub packet_gaps: u64,
    /// Packets of gaps given up.
    pub packets_lost: u64,
    /// Incremental packets received again (A/B copies).
    pub duplicates: u64,
    /// Packets that filled a gap.
    pub recovered: u64,
    /// AdminHeartbeats processed on the incremental lines.
    pub heartbeats: u64,
    /// ChannelResets processed.
    pub channel_resets: u64,
    /// Restarts of the incremental sequence (weekly, or after a reset).
    pub sequence_restarts: u64,
    /// Late copies of a sequence before its restart, ignored.
    pub stale_sequence: u64,
    /// Snapshot datagrams accepted.
    pub snapshot_packets: u64,
    /// Snapshots applied.
    pub snapshots_applied: u64,
    /// Snapshots ignored (no newer than what their instrument had).
    pub snapshots_ignored: u64,
    /// Definition messages processed (lines, file and incremental feed).
    pub definitions: u64,
    /// Times an instrument's cache overflowed.
    pub cache_overflows: u64,
    /// Entries cached at the end, every instrument.
    pub cached: u64,
    /// RptSeq values skipped for good by snapshots, every instrument.
    pub ticks_lost: u64,
    /// Entries and statuses with an odd value.
    pub anomalies: u64,
    /// Market-by-order messages skipped.
    pub mbo_messages: u64,
    /// Order entries of book and trade messages, skipped.
    pub mbo_order_entries: u64,
    /// Messages, or their entries, naming a SecurityID past `max_instruments`,
    /// ignored for it (left out when none).
    #[serde(skip_serializing_if = "crate::capture::is_zero")]
    pub instruments_refused: u64,
    /// Each instrument, keyed `#<SecurityID>`.
    pub symbols: BTreeMap<String, InstrumentSummary>,
}

/// One instrument at the end.
#[derive(Debug, Serialize)]
pub struct InstrumentSummary {
    /// SecurityID.
    pub security_id: i32,
    /// Symbol; null without a definition.
    pub symbol: Option<String>,
    /// SecurityGroup; null without a definition.
    pub group: Option<String>,
    /// Asset; null without a definition.
    pub asset: Option<String>,
    /// Outright levels kept.
    pub depth: u8,
    /// Implied levels kept.
    pub implied_depth: u8,
    /// Last RptSeq applied; null without a baseline.
    pub rpt_seq: Option<u32>,
    /// No baseline, or a hole in its RptSeq.
    pub suspect: bool,
    /// A packet gap was given up since its last entry applied.
    pub unverified: bool,
    /// Its cache overflowed; nothing applies until a snapshot.
    pub overflowed: bool,
    /// RptSeq values after `rpt_seq` up to the highest seen neither
    /// applied nor cached.
    pub missing: u64,
    /// Entries cached.
    pub cached: u64,
    /// RptSeq values skipped for good by snapshots.
    pub ticks_lost: u64,
    /// Entries received again.
    pub duplicates: u64,
    /// Snapshots applied.
    pub snapshots_applied: u64,
    /// Snapshots ignored.
    pub snapshots_ignored: u64,
    /// Visible outright best bid, mantissa.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bid: Option<i64>,
    /// Its size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bid_size: Option<u64>,
    /// Its orders: present with the side, null when NumberOfOrders was
    /// null.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bid_orders: Option<Option<i32>>,
    /// Visible outright best offer, mantissa.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask: Option<i64>,
    /// Its size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask_size: Option<u64>,
    /// Its orders: present with the side, null when NumberOfOrders was
    /// null.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask_orders: Option<Option<i32>>,
    /// Visible implied best bid, mantissa.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub implied_bid: Option<i64>,
    /// Its size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub implied_bid_size: Option<u64>,
    /// Visible implied best offer, mantissa.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub implied_ask: Option<i64>,
    /// Its size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub implied_ask_size: Option<u64>,
    /// What the effective status means: "trading", "halted", "closed";
    /// null when none is known or it changes nothing. A deleted
    /// instrument (a `D` definition) is "closed", whatever its codes.
    pub status: Option<&'static str>,
    /// The effective SecurityTradingStatus code.
    pub trading_status: Option<u8>,
    /// TransactTime of the last entry applied, ns UTC.
    pub last_transact_time: Option<u64>,
    /// DisplayFactor mantissa (exponent −9); null without a definition.
    pub display_factor: Option<i64>,
    /// MinPriceIncrement mantissa (exponent −9); null when unknown.
    pub min_price_increment: Option<i64>,
}

impl FeedSummary {
    /// The summary of `feed`, whose shared counters are `c`.
    pub fn new(c: &FeedCounters, feed: &Feed) -> FeedSummary {
        let n = feed.counters();
        let s = feed.sequence();
        let q = s.counters();
        let symbols = feed
            .instruments()
            .iter()
            .map(|e| {
                (
                    format!("#{}", e.security_id),
                    InstrumentSummary::new(feed, e),
                )
            })
            .collect();
        FeedSummary {
            packets: c.packets,
            rejected: c.rejected,
            rejected_by_reason: rejected_by_reason::<Reject>(c),
            messages: n.messages,
            messages_by_template: n
                .by_template
                .iter()
                .enumerate()
                .filter(|(_, &k)| k > 0)
                .map(|(id, &k)| (id.to_string(), k))
                .collect(),
            unknown_templates: n.unknown_templates,
            next: s.high(),
            gaps_open: s.gaps_open() as u64,
            packet_gaps: q.packet_gaps,
            packets_lost: q.packets_lost,
            duplicates: q.duplicates,
            recovered: q.recovered,
            heartbeats: n.heartbeats,
            channel_resets: n.channel_resets,
            sequence_restarts: q.sequence_restarts,
            stale_sequence: q.stale_sequence,
            snapshot_packets: n.snapshot_packets,
            snapshots_applied: n.snapshots_applied,
            snapshots_ignored: n.snapshots_ignored,
            definitions: n.definitions,
            cache_overflows: n.cache_overflows,
            cached: feed.cached() as u64,
            ticks_lost: feed.ticks_lost(),
            anomalies: n.anomalies,
            mbo_messages: n.mbo_messages,
            mbo_order_entries: n.mbo_order_entries,
            instruments_refused: n.instruments_refused,
            symbols,
        }
    }
}

impl InstrumentSummary {
    fn new(feed: &Feed, e: &Entry) -> InstrumentSummary {
        let seq = &e.instrument.seq;
        let books = feed.visible(e);
        let top = |s: &Side| s.top();
        let (bid, ask) = (top(&books.outright.bid), top(&books.outright.offer));
        let (ibid, iask) = (top(&books.implied.bid), top(&books.implied.offer));
        let price = |l: Option<Level>| l.map(|l| l.price);
        let size = |l: Option<Level>| l.map(|l| l.size);
        let orders = |l: Option<Level>| l.map(|l| l.orders);
        let def = e.definition.as_ref();
        let code = feed.status(e);
        InstrumentSummary {
            security_id: e.security_id,
            symbol: def.map(|d| d.symbol.clone()),
            group: def.map(|d| d.group.clone()),
            asset: def.map(|d| d.asset.clone()),
            depth: books.outright.bid.depth(),
            implied_depth: books.implied.bid.depth(),
            rpt_seq: seq.rpt_seq(),
            suspect: seq.suspect(),
            unverified: seq.unverified(),
            overflowed: seq.overflowed(),
            missing: seq.missing(),
            cached: seq.cached() as u64,
            ticks_lost: seq.ticks_lost(),
            duplicates: seq.duplicates(),
            snapshots_applied: e.snapshots_applied,
            snapshots_ignored: e.snapshots_ignored,
            bid: price(bid),
            bid_size: size(bid),
            bid_orders: orders(bid),
            ask: price(ask),
            ask_size: size(ask),
            ask_orders: orders(ask),
            implied_bid: price(ibid),
            implied_bid_size: size(ibid),
            implied_ask: price(iask),
            implied_ask_size: size(iask),
            // A deleted instrument is closed, as its checks answer.
            status: match def.is_some_and(|d| d.deleted) {
                true => Some(State::Closed.as_str()),
                false => code.and_then(|c| match status::meaning(c) {
                    Meaning::Is(s) => Some(s.as_str()),
                    _ => None,
                }),
            },
            trading_status: code,
            last_transact_time: e.instrument.last_transact_time(),
            display_factor: def.map(|d| d.display_factor),
            min_price_increment: def.and_then(|d| d.min_price_increment),
        }
    }
}
