//! `tickguard demo`: the simulator and the sidecar together on loopback,
//! with a live table of every symbol read back from the shared memory the
//! way a gateway would read it.
//!
//! The simulated provider runs a delta feed on two lines with loss on both,
//! duplicates, reordering, invalid prices, periodic snapshots, a pause every
//! 12 s and a reset after 20 s, so gaps, `suspect`, `stale` and recovery all
//! show within a minute. With `--protocol itch50` it is an ITCH venue
//! instead ([`itch50`]); [`sqf`] is the provider's.

pub mod itch50;
pub mod sqf;

use crate::config::Config;
use crate::reader::Reader;
use crate::sidecar::Sidecar;
use crate::time::now_ns;
use crate::verdict::Reasons;
use anyhow::Context;
use std::io::{IsTerminal, Write};
use std::net::UdpSocket;
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
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
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
