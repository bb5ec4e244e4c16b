//! `tickguard demo --protocol itch50`: an ITCH venue on two loopback lines
//! with loss on both and a re-request server that drops a share of the
//! requests, the sidecar recovering from it, and the books read back from
//! the shared memory: gaps open and fill, a stock halts every 10 s, a pause
//! shows `stale`, and at the end of the session every symbol reads `closed`.

use super::{free_port, verdict_cell, Params};
use crate::config::Config;
use crate::reader::Reader;
use crate::shm::counter;
use crate::state::slot::Side;
use crate::verdict::Reasons;
use anyhow::Context;
use std::io::Write;
use std::net::SocketAddrV4;

const FEED: &str = "nasdaq";

/// The venue's session when the demo runs until Ctrl-C, s.
const SESSION_S: f64 = 60.0;

/// The demo shows the closed market this long after the end of session, s.
const AFTER_CLOSE_S: f64 = 5.0;

pub fn run(args: &Params) -> anyhow::Result<()> {
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
    let args_forever = args.duration_s <= 0.0;

    let mut closed_at = None;
    let (report, stats) = super::show(
        &config,
        args,
        "venue",
        move |stop| crate::simulate::itch50::publish(&venue, &stop),
        render,
        move |reader, now| {
            // Until Ctrl-C: the session, then a few seconds of the close.
            if reader.feed_status(0).is_some_and(|s| s.closed) {
                closed_at.get_or_insert(now);
            }
            args_forever
                && closed_at.is_some_and(|c| now.saturating_sub(c) >= (AFTER_CLOSE_S * 1e9) as u64)
        },
    )?;
    let report = report?;
    writeln!(
        std::io::stdout().lock(),
        "demo ended: the venue sent {} messages in {} datagrams ({} lost on both lines), receiver took {} datagrams in {} cycles",
        report.messages, report.datagrams, report.lost_on_both_lines, stats.datagrams, stats.cycles
    )
    .context("writing to stdout")?;
    Ok(())
}

/// A book side as `size × price` (bid) or `price × size` (ask), the price
/// with the feed's `decimals`.
fn side(s: Option<Side>, bid: bool, decimals: Option<u8>) -> String {
    match s {
        None => "-".into(),
        Some(Side { price, size }) if bid => format!("{size} × {}", price.show(decimals)),
        Some(Side { price, size }) => format!("{} × {size}", price.show(decimals)),
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
        reader
            .readings(0)
            .and_then(|r| r.into_iter().find(|r| r.descriptor.name == "session"))
            .map_or(String::new(), |r| r.text),
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
    let decimals = reader.feeds().first().and_then(|f| f.price_decimals());
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
        let verdict = verdict_cell(reasons, color);
        s.push_str(&format!(
            "{:<9} {:>20} {:>20}  {verdict}\n",
            sym.to_string(),
            side(r.bid, true, decimals),
            side(r.ask, false, decimals),
        ));
    }
    s.push_str("\nCtrl-C to stop.");
    s
}
