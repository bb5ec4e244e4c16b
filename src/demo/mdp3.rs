//! `tickguard demo --protocol mdp3`: a simulated CME channel
//! ([`crate::simulate::mdp3`]) on loopback — incremental lines A and B,
//! snapshot (market recovery) lines A and B looping every second, a
//! definition line — and the sidecar's `mdp3` feed reading it, with the
//! instruments read back from the shared memory by Symbol, as a gateway
//! reads them.
//!
//! Each incremental line loses packets of its own, which the other fills;
//! now and then a packet is lost on both lines, and the instruments it
//! touched turn `suspect` until the snapshot loop heals them. The feed
//! joins the snapshot lines only while an instrument needs them
//! (`snapshot_join = "on_demand"`), so the status line shows them joined
//! and left. An instrument halts every 10 s (for 5 s), the venue pauses
//! 1.5 s every 15 s (`stale`), and at the end of the session every group
//! closes: every instrument reads `closed`. After the close the venue's
//! loops go on, so an instrument that lost the last packets heals before
//! the last line compares the books the sidecar published with the
//! venue's.
//!
//! The frame's last lines are the latest changes the demo saw: verdicts
//! that changed (instruments changing together on one line), packets
//! given up as lost on both lines, the snapshot lines joined and left.

use super::{
    config, exact, free_ports, say, session_s, show, side, verdict_cell, Params, Screen,
    AFTER_CLOSE_S,
};
use crate::reader::Reader;
use crate::simulate::mdp3::{BookReport, VenueReport};
use crate::verdict::Reasons;
use anyhow::Context;
use std::collections::{BTreeMap, VecDeque};

const FEED: &str = "cme";

/// Period of the venue's snapshot loop, ms.
const LOOP_MS: u64 = 1000;

/// Latest changes the frame shows.
const EVENTS: usize = 8;

/// A trading status: the close (SecurityTradingStatus 4).
const CLOSE: u8 = 4;

pub fn run(args: &Params) -> anyhow::Result<()> {
    let [a, b, snap_a, snap_b, defs] = free_ports()?;
    let config = config(
        args,
        1024,
        &format!(
            r#"
[[feed]]
name = "{FEED}"
protocol = "mdp3"
lines = ["{a}", "{b}"]
snapshot_lines = ["{snap_a}", "{snap_b}"]
definition_lines = ["{defs}"]
snapshot_join = "on_demand"
gap_timeout_ms = 10
stale_threshold_ms = 500
source_threshold_ms = 2000
price_decimals = 2
"#
        ),
    )?;
    let session_s = session_s(args);
    let venue = crate::simulate::mdp3::Params {
        lines: vec![a, b],
        snapshot_lines: vec![snap_a, snap_b],
        definition_lines: vec![defs],
        rate: args.rate,
        loss_a: 2.0,
        loss_b: 2.0,
        loss_both: 0.1,
        duplicate: 1.0,
        reorder: 0.5,
        heartbeat_ms: 200,
        loop_ms: LOOP_MS,
        definition_loop_ms: 2000,
        halt_every_s: 10,
        pause_every_s: 15,
        pause_ms: 1500,
        duration_s: session_s,
        // Until the demo stops it.
        linger_ms: 3_600_000,
        seed: args.seed,
        ..crate::simulate::mdp3::Params::default()
    };
    let instruments: Vec<(String, String)> = crate::simulate::mdp3::Venue::new(&venue)
        .context("demo: venue")?
        .report()
        .books
        .into_iter()
        .map(|(id, b)| (id, b.symbol))
        .collect();
    let mut table = Table {
        instruments,
        forever: args.duration_s <= 0.0,
        session_s,
        started: None,
        closed_at: None,
        last: BTreeMap::new(),
        joined: None,
        lost: 0,
        events: VecDeque::new(),
    };
    let (report, runs, reader) = show(
        &config,
        args,
        "venue",
        move |stop| crate::simulate::mdp3::publish(&venue, &stop, None),
        None,
        &mut table,
    )?;
    let report = report?;
    let (datagrams, cycles) = runs
        .iter()
        .fold((0, 0), |(d, c), r| (d + r.datagrams, c + r.cycles));
    let ended = format!(
        "demo ended: the venue sent {} events in {} incremental packets ({} lost on both lines), {} halts, {} snapshot loops; the receiver took {} datagrams in {} cycles",
        report.events,
        report.incremental_packets,
        report.lost_on_both_lines,
        report.halts,
        report.snapshot_loops,
        datagrams,
        cycles
    );
    say(&format!("{ended}\n{}", compare_books(&reader, &report)))
}

/// The feed's counter `name` (the feed-wide one), as its descriptor names
/// it; 0 when the publication has none.
fn counter(reader: &Reader, name: &str) -> u64 {
    crate::stat::patiently(crate::stat::PATIENCE, || reader.readings(0))
        .and_then(|r| {
            r.into_iter()
                .find(|c| c.descriptor.name == name && c.descriptor.key.is_empty())
        })
        .map_or(0, |c| c.value)
}

/// An instrument as the publication holds it: found by Symbol (what a
/// gateway asks by), with its verdict at `now`; `None` while no entry
/// names it (before its definition).
fn published(reader: &Reader, symbol: &str, now: u64) -> Option<(crate::state::Record, Reasons)> {
    let handle = reader.lookup(FEED, symbol)?;
    let record = reader.record(&handle)?;
    Some((record, reader.check(&handle, now).reasons))
}

/// A verdict in a few words: `ok`, or its reasons.
fn reasons_text(r: Reasons) -> String {
    if r.is_ok() {
        "ok".into()
    } else {
        r.to_string()
    }
}

/// The books the sidecar published at the end against the venue's, once
/// the session closed and no gap is open: one line. An instrument is as
/// the venue's when its level 1 (prices and sizes, exact), its RptSeq and
/// the close all are.
fn compare_books(reader: &Reader, report: &VenueReport) -> String {
    if !report.ended {
        return "books not compared: the session had not ended".into();
    }
    if counter(reader, "gaps_open") != 0 {
        return "books not compared: a gap was still open".into();
    }
    let side = |s| exact(s, -9);
    let level = |b: &BookReport, bid: bool| {
        let levels = if bid { &b.bids } else { &b.asks };
        levels.first().map(|l| (Some(l.price), l.size))
    };
    let now = crate::time::now_ns();
    let mut differ = Vec::new();
    let mut suspect = Vec::new();
    for b in report.books.values() {
        let found = published(reader, &b.symbol, now);
        if found
            .as_ref()
            .is_some_and(|(_, r)| r.contains(Reasons::SUSPECT))
        {
            suspect.push(b.symbol.as_str());
        }
        let ours = found.map(|(r, _)| (side(r.bid), side(r.ask), r.state.seq.last_seq, r.closed));
        let venue = (
            level(b, true),
            level(b, false),
            u64::from(b.rpt_seq),
            b.trading_status == Some(CLOSE),
        );
        if ours != Some(venue) {
            differ.push(b.symbol.as_str());
        }
    }
    let n = report.books.len();
    let mut line = if differ.is_empty() {
        format!("books at the close: all {n} as the venue's")
    } else {
        format!(
            "books at the close: {} of {n} not as the venue's: {}",
            differ.len(),
            differ.join(" ")
        )
    };
    if !suspect.is_empty() {
        line.push_str(&format!(" (still suspect: {})", suspect.join(" ")));
    }
    line
}

/// The channel's table: the instruments by Symbol, the channel's counters,
/// the latest changes; it ends a few seconds after the close when the demo
/// runs until Ctrl-C.
struct Table {
    /// `#SecurityID` and Symbol of each instrument, by SecurityID.
    instruments: Vec<(String, String)>,
    forever: bool,
    session_s: f64,
    /// Local time of the first look.
    started: Option<u64>,
    /// Local time every instrument was first seen closed.
    closed_at: Option<u64>,
    /// Each instrument's verdict at the last look.
    last: BTreeMap<String, Reasons>,
    /// `snapshot_joined` at the last look.
    joined: Option<u64>,
    /// `packets_lost` at the last look.
    lost: u64,
    /// The latest changes, oldest first.
    events: VecDeque<String>,
}

impl Table {
    fn event(&mut self, now: u64, what: String) {
        let at = now.saturating_sub(self.started.unwrap_or(now)) as f64 / 1e9;
        if self.events.len() == EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(format!("{at:6.1} s  {what}"));
    }
}

impl Screen for Table {
    fn watch(&mut self, reader: &Reader, now: u64) -> bool {
        self.started.get_or_insert(now);
        if !reader.health(now).is_ok() {
            return false;
        }
        let lost = counter(reader, "packets_lost");
        if lost > self.lost {
            let n = lost - self.lost;
            let s = if n == 1 { "" } else { "s" };
            self.event(
                now,
                format!("{n} packet{s} lost on both lines: the gap given up"),
            );
            self.lost = lost;
        }
        // Verdicts that changed, the instruments changing alike on one line.
        let mut changed: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        let mut closed = 0;
        for (_, symbol) in &self.instruments {
            let Some((record, reasons)) = published(reader, symbol, now) else {
                continue;
            };
            closed += usize::from(record.closed);
            let before = self.last.insert(symbol.clone(), reasons);
            if before.is_some_and(|b| b != reasons) {
                let key = (
                    reasons_text(before.unwrap_or_default()),
                    reasons_text(reasons),
                );
                changed.entry(key).or_default().push(symbol.clone());
            }
        }
        for ((from, to), symbols) in changed {
            self.event(now, format!("{}: {from} → {to}", symbols.join(" ")));
        }
        let joined = counter(reader, "snapshot_joined");
        if self.joined.is_some_and(|j| j != joined) {
            let what = if joined > 0 {
                "snapshot lines joined".to_string()
            } else {
                format!(
                    "snapshot lines left ({} snapshots applied so far)",
                    counter(reader, "snapshots_applied")
                )
            };
            self.event(now, what);
        }
        self.joined = Some(joined);
        if closed == self.instruments.len() && closed > 0 && self.closed_at.is_none() {
            self.closed_at = Some(now);
            self.event(now, "every group closed".into());
        }
        // Until Ctrl-C: the session, then a few seconds of the close.
        self.forever
            && self
                .closed_at
                .is_some_and(|c| now.saturating_sub(c) >= (AFTER_CLOSE_S * 1e9) as u64)
    }

    fn render(&mut self, reader: &Reader, now: u64, elapsed_ns: u64, color: bool) -> String {
        let c = |name| counter(reader, name);
        let joined = if c("snapshot_joined") > 0 {
            "joined"
        } else {
            "left"
        };
        let session = match self.closed_at {
            Some(_) => "the session is closed; the loops go on".to_string(),
            None => format!("the session closes at {:.0} s", self.session_s),
        };
        let mut s = format!(
            "tickguard demo — CME MDP3 channel '{FEED}' (incremental A+B, snapshot A+B on demand, definitions; loopback) — {:.0} s — {}\n\
             next {}  packet gaps {}  packets lost {}  gaps open {}  suspect {}  unverified {}  snapshot lines {joined} (joins {}, leaves {})  snapshots applied {}  channel resets {}\n\
             {session}\n\n",
            elapsed_ns as f64 / 1e9,
            reader.health(now),
            c("next"),
            c("packet_gaps"),
            c("packets_lost"),
            c("gaps_open"),
            c("instruments_suspect"),
            c("instruments_unverified"),
            c("snapshot_joins"),
            c("snapshot_leaves"),
            c("snapshots_applied"),
            c("channel_resets"),
        );
        s.push_str(&format!(
            "{:<10} {:>12} {:>18} {:>18} {:>8}  {}\n",
            "symbol", "security_id", "bid", "ask", "RptSeq", "verdict"
        ));
        let decimals = reader.feeds().first().and_then(|f| f.price_decimals());
        let healthy = reader.health(now).is_ok();
        for (id, symbol) in &self.instruments {
            let row = match published(reader, symbol, now) {
                Some((r, reasons)) => (
                    side(r.bid, true, decimals),
                    side(r.ask, false, decimals),
                    r.state.seq.last_seq.to_string(),
                    reasons,
                ),
                // Before its definition a gateway asking by Symbol finds
                // nothing.
                None => (
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    if healthy {
                        Reasons::NO_QUOTE
                    } else {
                        Reasons::STALE
                    },
                ),
            };
            let (bid, ask, rpt_seq, reasons) = row;
            let verdict = verdict_cell(reasons, color);
            s.push_str(&format!(
                "{symbol:<10} {id:>12} {bid:>18} {ask:>18} {rpt_seq:>8}  {verdict}\n"
            ));
        }
        s.push_str("\nlatest:\n");
        for e in &self.events {
            s.push_str(&format!("{e}\n"));
        }
        s.push_str("\nCtrl-C to stop.");
        s
    }
}
