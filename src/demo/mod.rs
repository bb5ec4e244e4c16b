//! `tickguard demo`: the simulator and the sidecar together on loopback,
//! with a live table of every symbol read back from the shared memory the
//! way a gateway would read it.
//!
//! The simulated provider runs a delta feed on two lines with loss on both,
//! duplicates, reordering, invalid prices, periodic snapshots, a pause every
//! 12 s and a reset after 20 s, so gaps, `suspect`, `stale` and recovery all
//! show within a minute. With `--protocol itch50` it is an ITCH venue
//! instead ([`itch50`]).

mod itch50;

use crate::config::Config;
use crate::reader::Reader;
use crate::shm::counter;
use crate::sidecar::Sidecar;
use crate::simulate::SimKind;
use crate::time::now_ns;
use crate::verdict::{evaluate, Reasons};
use anyhow::Context;
use std::io::{IsTerminal, Write};
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const FEED: &str = "demo";

/// What `tickguard demo` runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Symbols to simulate (at least 1 is used).
    pub symbols: usize,
    /// Quotes per second over all symbols, finite and above 0.
    pub rate: f64,
    /// Stop after this many seconds (0: until Ctrl-C).
    pub duration_s: f64,
    /// Shared-memory file for the demo's sidecar.
    pub shm: std::path::PathBuf,
    /// Seed of the simulator.
    pub seed: u64,
    /// The simulated feed's protocol.
    pub protocol: crate::config::Protocol,
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Runs the demo until Ctrl-C or `--duration-s`.
pub fn run(args: &Params) -> anyhow::Result<()> {
    if args.protocol == crate::config::Protocol::Itch50 {
        return itch50::run(args);
    }
    let (a, b) = (free_port()?, free_port()?);
    let line_a = SocketAddrV4::new([127, 0, 0, 1].into(), a);
    let line_b = SocketAddrV4::new([127, 0, 0, 1].into(), b);
    let config = Config::parse(
        &format!(
            r#"
[state]
capacity = 1024
[sidecar]
shm_path = "{}"
idle = "sleep"
idle_sleep_us = 100
[[feed]]
name = "{FEED}"
kind = "delta"
lines = ["{line_a}", "{line_b}"]
stale_threshold_ms = 500
source_threshold_ms = 2000
clock_offset = "auto"
offset_window_ms = 10000
"#,
            args.shm.display()
        ),
        "demo",
    )?;
    let sim_args = crate::simulate::Params {
        line_a,
        line_b: Some(line_b),
        source: std::net::Ipv4Addr::LOCALHOST,
        symbols: args.symbols.max(1),
        names: Vec::new(),
        rate: args.rate,
        batch: 4,
        kind: SimKind::Delta,
        loss_a: 2.0,
        loss_b: 2.0,
        duplicate: 1.0,
        reorder: 0.5,
        invalid: 0.3,
        heartbeat_ms: 200,
        snapshot_ms: 3000,
        pause_every_s: 12,
        pause_ms: 1500,
        reset_after_s: 20,
        clock_skew_ms: -35,
        duration_s: 0.0,
        count: 0,
        seed: args.seed,
        report: false,
    };
    crate::simulate::Simulator::new(&sim_args).context("demo: simulator")?;

    let (report, stats) = show(
        &config,
        args,
        "provider",
        move |stop| crate::simulate::publish(&sim_args, &stop),
        render,
        |_, _| false,
    )?;
    let report = report?;
    writeln!(
        std::io::stdout().lock(),
        "demo ended: provider sent {} quotes in {} datagrams, receiver took {} datagrams in {} cycles",
        report.quotes, report.datagrams, stats.datagrams, stats.cycles
    )
    .context("writing to stdout")?;
    Ok(())
}

/// Runs `config`'s sidecar and a `source` thread (`provide`, stopped by its
/// flag) and shows `render`'s frame of the publication, refreshed, until
/// Ctrl-C, `args.duration_s` or `done(reader, now)`; then stops both and
/// removes the demo's file. Returns what the source returned and the
/// receiver's statistics.
fn show<R: Send + 'static>(
    config: &Config,
    args: &Params,
    source: &str,
    provide: impl FnOnce(Arc<AtomicBool>) -> R + Send + 'static,
    render: fn(&Reader, u64, u64, bool) -> String,
    mut done: impl FnMut(&Reader, u64) -> bool,
) -> anyhow::Result<(R, crate::sidecar::RunStats)> {
    let shutdown = crate::sys::shutdown_on_signals().context("installing signal handlers")?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut sidecar = Sidecar::start(config)?;
    // Held to the end: the path's writer lock lives as long as the publication.
    let publication = sidecar.publication();
    let sidecar_stop = stop.clone();
    let rx = std::thread::Builder::new()
        .name("tickguard-rx".into())
        .spawn(move || sidecar.run(&sidecar_stop))?;
    let source_stop = stop.clone();
    let provider = std::thread::Builder::new()
        .name(source.into())
        .spawn(move || provide(source_stop))?;

    let tty = std::io::stdout().is_terminal();
    let started = now_ns();
    let deadline = (args.duration_s > 0.0).then(|| started + (args.duration_s * 1e9) as u64);
    let mut out = std::io::stdout().lock();
    if tty {
        // Best effort, as restoring it below: the threads run already.
        let _ = write!(out, "\x1b[?25l"); // hide the cursor
    }
    let result = (|| -> anyhow::Result<()> {
        let reader = Reader::open(&args.shm);
        loop {
            let now = now_ns();
            if shutdown.load(Ordering::Relaxed)
                || deadline.is_some_and(|d| now >= d)
                || done(&reader, now)
            {
                return Ok(());
            }
            let frame = render(&reader, now, now.saturating_sub(started), tty);
            let written = if tty {
                write!(out, "\x1b[H\x1b[2J{frame}")
            } else {
                writeln!(out, "{frame}")
            };
            written
                .and_then(|()| out.flush())
                .context("writing to stdout")?;
            std::thread::sleep(Duration::from_millis(if tty { 250 } else { 1000 }));
        }
    })();
    if tty {
        // Best effort: the threads are stopped whatever stdout does.
        let _ = write!(out, "\x1b[?25h").and_then(|()| out.flush());
    }
    stop.store(true, Ordering::Relaxed);
    let provided = provider
        .join()
        .map_err(|_| anyhow::anyhow!("demo: {source} thread panicked"))?;
    let stats = rx
        .join()
        .map_err(|_| anyhow::anyhow!("demo: receiver thread panicked"))?;
    // Only the demo's own file, still under its lock.
    let _ = publication.remove();
    drop(publication);
    result?;
    Ok((provided, stats))
}

/// A verdict as the demo shows it: `ok` or `REJECT reasons`, green, red
/// (stale) or yellow on a terminal.
fn verdict_cell(reasons: Reasons, color: bool) -> String {
    let text = if reasons.is_ok() {
        "ok".to_string()
    } else {
        format!("REJECT {reasons}")
    };
    let on = match (color, reasons.is_ok(), reasons.contains(Reasons::STALE)) {
        (false, ..) => return text,
        (true, true, _) => "\x1b[32m",
        (true, false, true) => "\x1b[31m",
        (true, false, false) => "\x1b[33m",
    };
    format!("{on}{text}\x1b[0m")
}

/// One screen: feed counters, then one row per symbol, worst first.
fn render(reader: &Reader, now: u64, elapsed_ns: u64, color: bool) -> String {
    let c = |id| reader.counter(0, id).unwrap_or(0);
    let offset_ms = reader.offset(0).unwrap_or(0) as f64 / 1e6;
    let mut s = format!(
        "tickguard demo — feed '{FEED}' (delta, lines A+B on loopback) — {:.0} s — {}\n\
         packets {}  rejected {}  ticks lost {}  duplicates {}  line copies {}  kernel drops {}  clock offset {:+.3} ms\n\n",
        elapsed_ns as f64 / 1e9,
        reader.health(now),
        c(counter::PACKETS),
        c(counter::REJECTED),
        c(counter::TICKS_LOST),
        c(counter::DUPLICATES).saturating_sub(c(counter::LINE_COPIES)),
        c(counter::LINE_COPIES),
        c(counter::KERNEL_DROPS),
        offset_ms,
    );
    s.push_str(&format!(
        "{:<9} {:>11} {:>11} {:>8} {:>6} {:>9} {:>10}  {}\n",
        "symbol", "bid", "ask", "last seq", "lost", "silence", "src age", "verdict"
    ));
    let offset = reader.offset(0).unwrap_or(0);
    let healthy = reader.health(now).is_ok();
    let mut rows: Vec<_> = reader
        .records()
        .into_iter()
        .filter_map(|r| {
            let reasons = if healthy {
                evaluate(Some(&r.state), r.thresholds, offset, now)
            } else {
                Reasons::STALE
            };
            Some((r.symbol?, r, reasons))
        })
        .collect();
    rows.sort_by_cached_key(|(sym, _, reasons)| {
        (
            std::cmp::Reverse(reasons.bits().count_ones()),
            sym.to_string(),
        )
    });
    for (sym, r, reasons) in rows {
        let st = &r.state;
        let (bid, ask, age) = match st.price {
            Some(p) => (
                format!("{:.5}", p.bid),
                format!("{:.5}", p.ask),
                format!(
                    "{:.0} ms",
                    (now as i128 - p.source_time as i128 - offset) as f64 / 1e6
                ),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let silence = format!("{:.0} ms", now.saturating_sub(st.last_alive) as f64 / 1e6);
        let verdict = verdict_cell(reasons, color);
        s.push_str(&format!(
            "{:<9} {:>11} {:>11} {:>8} {:>6} {:>9} {:>10}  {verdict}\n",
            sym.to_string(),
            bid,
            ask,
            st.seq.last_seq,
            st.seq.ticks_lost,
            silence,
            age
        ));
    }
    s.push_str("\nCtrl-C to stop.");
    s
}
