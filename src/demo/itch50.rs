//! `tickguard demo --protocol itch50`: an ITCH venue on two loopback lines
//! with loss on both and a re-request server that drops a share of the
//! requests, the sidecar recovering from it, and the books read back from
//! the shared memory: gaps open and fill, a stock halts every 10 s, a pause
//! shows `stale`, and at the end of the session every symbol reads `closed`.

use super::{free_port, Params};
use crate::config::Config;
use crate::reader::Reader;
use crate::shm::counter;
use crate::sidecar::Sidecar;
use crate::state::slot::Side;
use crate::time::now_ns;
use crate::verdict::Reasons;
use anyhow::Context;
use std::io::{IsTerminal, Write};
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const FEED: &str = "nasdaq";

/// The venue's session when the demo runs until Ctrl-C, s.
const SESSION_S: f64 = 60.0;

/// The demo shows the closed market this long after the end of session, s.
const AFTER_CLOSE_S: f64 = 5.0;

pub(super) fn run(args: &Params) -> anyhow::Result<()> {
    let local = |port| SocketAddrV4::new([127, 0, 0, 1].into(), port);
    let (line_a, line_b) = (local(free_port()?), local(free_port()?));
    let (server, listen) = (local(free_port()?), local(free_port()?));
    let config = Config::parse(
        &format!(
            r#"
[state]
capacity = 4096
[sidecar]
shm_path = "{}"
idle = "sleep"
idle_sleep_us = 100
[[feed]]
name = "{FEED}"
protocol = "itch50"
lines = ["{line_a}", "{line_b}"]
recovery = "{server}"
recovery_listen = "{listen}"
gap_timeout_ms = 1000
stale_threshold_ms = 500
source_threshold_ms = 2000
"#,
            args.shm.display()
        ),
        "demo",
    )?;
    let session_s = if args.duration_s > 0.0 {
        (args.duration_s - AFTER_CLOSE_S).max(1.0)
    } else {
        SESSION_S
    };
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
        ..crate::simulate::itch50::Params::default()
    };
    crate::simulate::itch50::Venue::new(&venue).context("demo: venue")?;

    let shutdown = crate::sys::shutdown_on_signals().context("installing signal handlers")?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut sidecar = Sidecar::start(&config)?;
    // Held to the end: the path's writer lock lives as long as the publication.
    let publication = sidecar.publication();
    let sidecar_stop = stop.clone();
    let rx = std::thread::Builder::new()
        .name("tickguard-rx".into())
        .spawn(move || sidecar.run(&sidecar_stop))?;
    let venue_stop = stop.clone();
    let venue_thread = std::thread::Builder::new()
        .name("venue".into())
        .spawn(move || crate::simulate::itch50::publish(&venue, &venue_stop))?;

    let tty = std::io::stdout().is_terminal();
    let started = now_ns();
    let deadline = (args.duration_s > 0.0).then(|| started + (args.duration_s * 1e9) as u64);
    let mut out = std::io::stdout().lock();
    if tty {
        write!(out, "\x1b[?25l")?; // hide the cursor
    }
    let result = (|| -> anyhow::Result<()> {
        let reader = Reader::open(&args.shm);
        let mut closed_at = None;
        loop {
            let now = now_ns();
            let closed = reader.feed_status(0).is_some_and(|s| s.closed);
            if closed && closed_at.is_none() {
                closed_at = Some(now);
            }
            let shown_closed =
                closed_at.is_some_and(|c| now.saturating_sub(c) >= (AFTER_CLOSE_S * 1e9) as u64);
            if shutdown.load(Ordering::Relaxed)
                || deadline.is_some_and(|d| now >= d)
                || (deadline.is_none() && shown_closed)
            {
                return Ok(());
            }
            let frame = render(&reader, now, now.saturating_sub(started), tty);
            if tty {
                write!(out, "\x1b[H\x1b[2J{frame}")?;
            } else {
                writeln!(out, "{frame}")?;
            }
            out.flush()?;
            std::thread::sleep(Duration::from_millis(if tty { 250 } else { 1000 }));
        }
    })();
    if tty {
        write!(out, "\x1b[?25h")?;
        out.flush()?;
    }
    stop.store(true, Ordering::Relaxed);
    let report = venue_thread
        .join()
        .map_err(|_| anyhow::anyhow!("demo: venue thread panicked"))?;
    let stats = rx
        .join()
        .map_err(|_| anyhow::anyhow!("demo: receiver thread panicked"))?;
    // Only the demo's own file, still under its lock.
    let _ = publication.remove();
    drop(publication);
    result?;
    let report = report?;
    writeln!(
        out,
        "demo ended: the venue sent {} messages in {} datagrams ({} lost on both lines), receiver took {} datagrams in {} cycles",
        report.messages, report.datagrams, report.lost_on_both_lines, stats.datagrams, stats.cycles
    )?;
    Ok(())
}

/// A book side as `size × price` (bid) or `price × size` (ask).
fn side(s: Option<Side>, bid: bool) -> String {
    match s {
        None => "-".into(),
        Some(Side { price, size }) if bid => format!("{size} × {price}"),
        Some(Side { price, size }) => format!("{price} × {size}"),
    }
}

/// One screen: the stream's state, then one row per symbol, worst first.
fn render(reader: &Reader, now: u64, elapsed_ns: u64, color: bool) -> String {
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
        "tickguard demo — ITCH 5.0 venue '{FEED}' (MoldUDP64, lines A+B on loopback, re-request server dropping 20%) — {:.0} s — {}\n\
         session {}  next {}  held {}  gaps open {}  recovered {}  requests {}  gaps expired {}  ticks lost {}  {}\n\n",
        elapsed_ns as f64 / 1e9,
        reader.health(now),
        counter::session(c(counter::SESSION_LO), c(counter::SESSION_HI)),
        c(counter::NEXT),
        c(counter::HELD),
        c(counter::GAPS_OPEN),
        c(counter::RECOVERED),
        c(counter::REQUESTS_SENT),
        c(counter::GAPS_EXPIRED),
        c(counter::TICKS_LOST),
        if flags.is_empty() { "in sequence".to_string() } else { flags.join(" ") },
    );
    s.push_str(&format!(
        "{:<9} {:>20} {:>20}  {}\n",
        "symbol", "bid", "ask", "verdict"
    ));
    let healthy = reader.health(now).is_ok();
    let offset = reader.offset(0).unwrap_or(0);
    let mut rows: Vec<_> = reader
        .records()
        .into_iter()
        .filter_map(|r| {
            let reasons = if healthy {
                crate::state::verdict(&r, &status, offset, now)
            } else {
                Reasons::STALE
            };
            Some((r.symbol?, r, reasons))
        })
        .collect();
    rows.sort_by_cached_key(|(sym, _, _)| sym.to_string());
    for (sym, r, reasons) in rows {
        let verdict = if reasons.is_ok() {
            "ok".to_string()
        } else {
            format!("REJECT {reasons}")
        };
        let (on, off) = match (color, reasons.is_ok(), reasons.contains(Reasons::STALE)) {
            (false, ..) => ("", ""),
            (true, true, _) => ("\x1b[32m", "\x1b[0m"),
            (true, false, true) => ("\x1b[31m", "\x1b[0m"),
            (true, false, false) => ("\x1b[33m", "\x1b[0m"),
        };
        s.push_str(&format!(
            "{:<9} {:>20} {:>20}  {on}{verdict}{off}\n",
            sym.to_string(),
            side(r.bid, true),
            side(r.ask, false),
        ));
    }
    s.push_str("\nCtrl-C to stop.");
    s
}
