//! `tickguard demo --protocol itch50`: an ITCH venue on two loopback lines
//! with loss on both, a re-request server that drops a share of the
//! requests and a GLIMPSE snapshot server, the sidecar recovering from
//! them, and the books read back from the shared memory: gaps open and
//! fill, a stock halts every 10 s, a pause shows `stale`, and at the end of
//! the session every symbol reads `closed`.
//!
//! A third of the way through the session (20 s of the 60 s one), the demo
//! stops its sidecar, as a deploy or a crash would, and starts another on
//! the same shared memory: the new one joins the session mid-way (its
//! feed has `join_gap_max = 0`, so it never replays the session from the
//! re-request server), awaits a snapshot (the feed `suspect`; its
//! publication holds no symbol until then, so every row reads `no_quote`,
//! as a gateway's check answers), logs in to the venue's GLIMPSE server on
//! its own thread, merges the snapshot and reads `ok` again. The venue holds
//! its first snapshot login a second before answering, so the wait shows
//! on the table. The status line says
//! where the restart is: due, awaiting, then merged with the snapshot's next
//! sequence N, its messages and the time from the restart to the merge.
//! The GLIMPSE password is made afresh for each run and handed to both
//! sides in an environment variable of this process only
//! ([`PASSWORD_ENV`]); it is never shown. When the session has ended, the
//! last line compares the books the sidecar published with the venue's.

use super::{
    config, exact, free_ports, say, session_s, side, table_slots, verdict_cell, Params, Screen,
    AFTER_CLOSE_S,
};
use crate::protocol::itch50::config::GLIMPSE_PASSWORD_MAX;
use crate::reader::Reader;
use crate::shm::counter;
use crate::simulate::itch50::glimpse;
use crate::verdict::Reasons;
use anyhow::Context;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::net::SocketAddrV4;

const FEED: &str = "nasdaq";

/// The sidecar restarts this far into the session (a fraction of it).
const RESTART_AT: f64 = 1.0 / 3.0;

/// The venue's GLIMPSE server waits this long before answering its first
/// login, ms: the restarted sidecar's wait shows on the table.
const GLIMPSE_DELAY_MS: u64 = 1000;

/// The environment variable (of this process only) both sides read the
/// GLIMPSE password from.
pub const PASSWORD_ENV: &str = "TG_DEMO_GLIMPSE_PW";

pub fn run(args: &Params) -> anyhow::Result<()> {
    let [line_a, line_b, server, listen] = free_ports()?;
    let glimpse_at = SocketAddrV4::new([127, 0, 0, 1].into(), free_tcp_port()?);
    let config = config(
        args,
        table_slots(args.symbols, 4096),
        &format!(
            r#"
[[feed]]
name = "{FEED}"
protocol = "itch50"
lines = ["{line_a}", "{line_b}"]
recovery = "{server}"
recovery_listen = "{listen}"
gap_timeout_ms = 1000
stale_threshold_ms = 500
source_threshold_ms = 2000
join_gap_max = 0
glimpse = "{glimpse_at}"
glimpse_user = "{}"
glimpse_password_env = "{PASSWORD_ENV}"
"#,
            glimpse::DEFAULT_USER,
        ),
    )?;
    let session_s = session_s(args);
    let venue = crate::simulate::itch50::Params {
        line_a,
        line_b: Some(line_b),
        recovery: Some(server),
        symbols: args.symbols.max(1),
        rate: args.rate,
        batch: 4,
        loss_a: 2.0,
        loss_b: 2.0,
        duplicate: 1.0,
        reorder: 0.5,
        heartbeat_ms: 1000,
        pause_every_s: 15,
        pause_ms: 1500,
        halt_every_s: 10,
        request_drop: 20.0,
        linger_ms: 600_000,
        duration_s: session_s,
        seed: args.seed,
        report: false,
        glimpse: Some(glimpse::Params {
            password_env: PASSWORD_ENV.into(),
            fault: Some(glimpse::Fault::Delay(GLIMPSE_DELAY_MS)),
            fault_logins: 1,
            ..glimpse::Params::new(glimpse_at)
        }),
        ..crate::simulate::itch50::Params::default()
    };
    crate::simulate::itch50::Venue::new(&venue).context("demo: venue")?;
    let restart_s = session_s * RESTART_AT;
    let mut table = Table {
        forever: args.duration_s <= 0.0,
        closed_at: None,
        restart_s,
        restart: None,
        seen: BTreeSet::new(),
    };
    // Before any thread starts: the venue and each sidecar read it there.
    std::env::set_var(PASSWORD_ENV, random_password()?);
    let shown = super::show(
        &config,
        args,
        "venue",
        move |stop| crate::simulate::itch50::publish(&venue, &stop),
        Some((restart_s * 1e9) as u64),
        &mut table,
    );
    // Every thread that read it is gone.
    std::env::remove_var(PASSWORD_ENV);
    let (report, runs, reader) = shown?;
    let report = report?;
    let (datagrams, cycles) = runs
        .iter()
        .fold((0, 0), |(d, c), r| (d + r.datagrams, c + r.cycles));
    let g = report.glimpse.clone().unwrap_or_default();
    let ended = format!(
        "demo ended: the venue sent {} messages in {} datagrams ({} lost on both lines) and {} GLIMPSE snapshot{} ({} messages); {} receiver run{} took {} datagrams in {} cycles",
        report.messages,
        report.datagrams,
        report.lost_on_both_lines,
        g.snapshots_sent,
        if g.snapshots_sent == 1 { "" } else { "s" },
        g.messages_sent,
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        datagrams,
        cycles
    );
    say(&format!("{ended}\n{}", compare_books(&reader, &report)))
}

/// A free TCP port on loopback (for the GLIMPSE server).
fn free_tcp_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A fresh GLIMPSE password: the longest a login takes, from the system's
/// random source, in letters, digits, `-` and `_`.
fn random_password() -> anyhow::Result<String> {
    const CHARS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bytes = [0u8; GLIMPSE_PASSWORD_MAX];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("demo: reading /dev/urandom for the GLIMPSE password")?;
    let password = bytes
        .iter()
        .map(|&b| char::from(CHARS[usize::from(b & 63)]))
        .collect();
    bytes.fill(0);
    Ok(password)
}

/// The books the sidecar published at the end against the venue's, once
/// the session ended and every gap is closed: one line.
fn compare_books(reader: &Reader, report: &crate::simulate::itch50::VenueReport) -> String {
    if !report.ended || !reader.feed_status(0).is_some_and(|s| s.closed) {
        return "books not compared: the session had not ended".into();
    }
    if reader.counter(0, counter::GAPS_OPEN) != Some(0) {
        return "books not compared: a gap was still open".into();
    }
    let side = |s| exact(s, -4);
    // By name, once: a venue of 65,535 stocks is compared in one pass.
    let mut records = std::collections::HashMap::new();
    for r in reader.records() {
        if let Some(s) = r.symbol {
            records.entry(s.to_string()).or_insert(r);
        }
    }
    let differ: Vec<&str> = report
        .books
        .iter()
        .filter(|(name, b)| {
            let published = records.get(name.as_str());
            let venue = (
                b.bid.map(|p| (Some(i64::from(p)), b.bid_size.unwrap_or(0))),
                b.ask.map(|p| (Some(i64::from(p)), b.ask_size.unwrap_or(0))),
                matches!(b.trading_state.as_deref(), Some("H" | "P" | "Q")),
            );
            published.map(|r| (side(r.bid), side(r.ask), r.halted)) != Some(venue)
        })
        .map(|(name, _)| name.as_str())
        .collect();
    let n = report.books.len();
    if differ.is_empty() {
        format!("books at the close: all {n} as the venue's")
    } else {
        format!(
            "books at the close: {} of {n} not as the venue's: {}",
            differ.len(),
            differ.join(" ")
        )
    }
}

/// The restart, once done.
struct Restart {
    /// When, s into the demo.
    at_s: f64,
    /// When, local time (ns since the Unix epoch).
    started: u64,
    /// From the restart to the merge, ns, once seen.
    merged_ns: Option<u64>,
}

/// The venue's table: it ends a few seconds after the close when the demo
/// runs until Ctrl-C, and follows the sidecar's restart.
struct Table {
    forever: bool,
    closed_at: Option<u64>,
    /// When the sidecar restarts, s into the demo.
    restart_s: f64,
    restart: Option<Restart>,
    /// Every symbol shown so far.
    seen: BTreeSet<String>,
}

impl Screen for Table {
    fn watch(&mut self, reader: &Reader, now: u64) -> bool {
        if let Some(r) = &mut self.restart {
            if r.merged_ns.is_none() && reader.counter(0, counter::SNAPSHOTS).unwrap_or(0) > 0 {
                r.merged_ns = Some(now.saturating_sub(r.started));
            }
        }
        // Until Ctrl-C: the session, then a few seconds of the close.
        if reader.feed_status(0).is_some_and(|s| s.closed) {
            self.closed_at.get_or_insert(now);
        }
        self.forever
            && self
                .closed_at
                .is_some_and(|c| now.saturating_sub(c) >= (AFTER_CLOSE_S * 1e9) as u64)
    }

    fn restarted(&mut self, now: u64, elapsed_ns: u64) {
        self.restart = Some(Restart {
            at_s: elapsed_ns as f64 / 1e9,
            started: now,
            merged_ns: None,
        });
    }

    fn render(&mut self, reader: &Reader, now: u64, elapsed_ns: u64, color: bool) -> String {
        let restart = self.restart_line(reader);
        render(reader, now, elapsed_ns, color, &restart, &mut self.seen)
    }
}

impl Table {
    /// Where the sidecar's restart is, as one line.
    fn restart_line(&self, reader: &Reader) -> String {
        let c = |id| reader.counter(0, id).unwrap_or(0);
        let Some(r) = &self.restart else {
            return format!(
                "sidecar restart due at {:.1} s (it will join mid-session and recover through a GLIMPSE snapshot)",
                self.restart_s
            );
        };
        let at = format!("sidecar restarted at {:.1} s", r.at_s);
        if let Some(ns) = r.merged_ns {
            return format!(
                "{at}: joined mid-session, merged a snapshot N={}, {} messages, in {} ms",
                c(counter::SNAPSHOT_NEXT),
                c(counter::SNAPSHOT_MESSAGES),
                ns / 1_000_000
            );
        }
        if c(counter::SNAPSHOT_GAVE_UP) > 0 {
            return format!(
                "{at}: snapshot given up after {} attempts: the feed stays suspect",
                c(counter::SNAPSHOT_ATTEMPTS)
            );
        }
        if c(counter::SNAPSHOT_AWAITING) > 0 {
            return format!(
                "{at}: joined mid-session, awaiting a snapshot (attempt {})…",
                c(counter::SNAPSHOT_ATTEMPTS)
            );
        }
        format!("{at}: waiting for the session's next packet…")
    }
}

/// One screen: the stream's state, the restart's, then one row per symbol,
/// every one shown before (`seen`, which takes this frame's) included.
fn render(
    reader: &Reader,
    now: u64,
    elapsed_ns: u64,
    color: bool,
    restart: &str,
    seen: &mut BTreeSet<String>,
) -> String {
    let c = |id| reader.counter(0, id).unwrap_or(0);
    let status = reader.feed_status(0).unwrap_or_default();
    let flags: Vec<&str> = [
        (status.suspect, "suspect"),
        (status.joined, "joined"),
        (status.closed, "closed"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    let mut s = format!(
        "tickguard demo — ITCH 5.0 venue '{FEED}' (MoldUDP64, lines A+B on loopback, re-request server dropping 20%, GLIMPSE) — {:.0} s — {}\n\
         session {}  next {}  held {}  gaps open {}  recovered {}  requests {}  gaps expired {}  ticks lost {}  snapshots {}  {}\n\
         {restart}\n\n",
        elapsed_ns as f64 / 1e9,
        reader.health(now),
        crate::stat::patiently(crate::stat::PATIENCE, || reader.readings(0))
            .and_then(|r| r.into_iter().find(|r| r.descriptor.name == "session"))
            .map_or(String::new(), |r| r.text),
        c(counter::NEXT),
        c(counter::HELD),
        c(counter::GAPS_OPEN),
        c(counter::RECOVERED),
        c(counter::REQUESTS_SENT),
        c(counter::GAPS_EXPIRED),
        c(counter::TICKS_LOST),
        c(counter::SNAPSHOTS),
        if flags.is_empty() { "in sequence".to_string() } else { flags.join(" ") },
    );
    s.push_str(&format!(
        "{:<9} {:>20} {:>20}  {}\n",
        "symbol", "bid", "ask", "verdict"
    ));
    let healthy = reader.health(now).is_ok();
    let decimals = reader.feeds().first().and_then(|f| f.price_decimals());
    // Each book judged with the status and offset read in force with it,
    // as a gateway's check reads them (read apart, a book written while
    // the feed was suspect could be shown with the status before).
    let mut rows: BTreeMap<String, (String, String, Reasons)> = reader
        .judged(now)
        .into_iter()
        .filter_map(|(r, reasons)| {
            let (bid, ask) = (side(r.bid, true, decimals), side(r.ask, false, decimals));
            Some((r.symbol?.to_string(), (bid, ask, reasons)))
        })
        .collect();
    // A symbol shown before and not in this publication (a restarted
    // sidecar's, until its snapshot): what a gateway's check answers.
    for name in seen.iter() {
        if !rows.contains_key(name) {
            let reasons = if healthy {
                Reasons::NO_QUOTE
            } else {
                Reasons::STALE
            };
            rows.insert(name.clone(), ("-".into(), "-".into(), reasons));
        }
    }
    for (sym, (bid, ask, reasons)) in &rows {
        let verdict = verdict_cell(*reasons, color);
        s.push_str(&format!("{sym:<9} {bid:>20} {ask:>20}  {verdict}\n"));
    }
    seen.extend(rows.into_keys());
    s.push_str("\nCtrl-C to stop.");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The longest password a login takes, of characters a password file
    /// or variable may hold, and a new one every time.
    #[test]
    fn each_run_has_its_own_password() {
        let (a, b) = (random_password().unwrap(), random_password().unwrap());
        assert_eq!(a.len(), GLIMPSE_PASSWORD_MAX);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert_ne!(a, b);
    }
}
