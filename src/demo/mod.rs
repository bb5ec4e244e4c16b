//! `tickguard demo`: the simulator and the sidecar together on loopback,
//! with a live table of every symbol read back from the shared memory the
//! way a gateway would read it.
//!
//! The simulated provider runs a delta feed on two lines with loss on both,
//! duplicates, reordering, invalid prices, periodic snapshots, a pause every
//! 12 s and a reset after 20 s, so gaps, `suspect`, `stale` and recovery all
//! show within a minute. With `--protocol itch50` it is an ITCH venue
//! instead ([`itch50`]), and part way through the session the demo stops
//! its sidecar and starts another on the same shared memory, which catches
//! up from the venue's GLIMPSE snapshot; with `--protocol mdp3` a CME
//! channel ([`mdp3`]) that now and then loses a packet on both lines, the
//! instruments it touched suspect until the snapshot loop (joined only
//! while needed) heals them; [`sqf`] is the provider's.
//!
//! The sidecar receives on its own thread, stopped by its own flag; the
//! source runs on another, and the main thread looks at the publication
//! every few milliseconds through a [`Reader`] (re-opened when the writer
//! is not healthy, as a gateway does after a restart) and draws a frame
//! four times a second on a terminal, once a second otherwise. A restart
//! stops the running sidecar (its publication marked closed and its file
//! left in place, its sockets and the path's writer lock let go), then
//! starts a new one, whose publication replaces the file.

pub mod itch50;
pub mod mdp3;
pub mod sqf;

use crate::config::Config;
use crate::reader::Reader;
use crate::shm::Publication;
use crate::sidecar::{RunStats, Sidecar};
use crate::state::price::Price;
use crate::state::slot::Side;
use crate::time::now_ns;
use crate::verdict::Reasons;
use anyhow::Context;
use std::io::{IsTerminal, Write};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
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

/// A free UDP port on loopback, for tests (released before it returns:
/// two calls may give the same one, [`free_ports`] does not).
#[cfg(test)]
pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `N` free UDP ports on loopback, each a different one (all held until
/// every one is chosen).
pub(crate) fn free_ports<const N: usize>() -> anyhow::Result<[SocketAddrV4; N]> {
    let held = (0..N)
        .map(|_| UdpSocket::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    let mut ports = [SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0); N];
    for (p, s) in ports.iter_mut().zip(&held) {
        p.set_port(s.local_addr()?.port());
    }
    Ok(ports)
}

/// Prints a demo's closing `text` (a line is added): whole to a reader
/// that reads, given up on one that stopped reading once Ctrl-C or
/// SIGTERM came (a full pipe cannot hold the demo's end off).
fn say(text: &str) -> anyhow::Result<()> {
    let stop = crate::sys::shutdown_on_signals().context("installing signal handlers")?;
    crate::sys::write_stdout_until(format!("{text}\n").as_bytes(), stop)
        .context("writing to stdout")?;
    Ok(())
}

/// What a demo shows of the publication, and when it is over.
trait Screen {
    /// Looks at the publication at local time `now`, every few
    /// milliseconds between frames: true when the demo is over.
    fn watch(&mut self, _reader: &Reader, _now: u64) -> bool {
        false
    }

    /// The sidecar was just restarted, at local time `now`, `elapsed_ns`
    /// into the demo.
    fn restarted(&mut self, _now: u64, _elapsed_ns: u64) {}

    /// One frame of the publication at local time `now`, `elapsed_ns` into
    /// the demo, with colors on a terminal.
    fn render(&mut self, reader: &Reader, now: u64, elapsed_ns: u64, color: bool) -> String;
}

/// A venue's session when the demo runs until Ctrl-C, s.
const SESSION_S: f64 = 60.0;

/// A venue's demo shows the closed market this long after the close, s.
const AFTER_CLOSE_S: f64 = 5.0;

/// A venue's session: [`SESSION_S`] until Ctrl-C, else `--duration-s` less
/// [`AFTER_CLOSE_S`] (at least 1 s).
fn session_s(args: &Params) -> f64 {
    if args.duration_s > 0.0 {
        (args.duration_s - AFTER_CLOSE_S).max(1.0)
    } else {
        SESSION_S
    }
}

/// State table slots for a demo of `symbols`: at least `least`, and room
/// for every symbol with the table at most half full.
fn table_slots(symbols: usize, least: usize) -> usize {
    symbols.saturating_mul(2).next_power_of_two().max(least)
}

/// The demo's sidecar: a table of `capacity` slots published at
/// `args.shm` (the path as given, where the demo's reader opens it: not
/// through TOML, whose escapes would change it), a receiver that sleeps
/// when idle, and `feed` (one `[[feed]]` table, as TOML).
fn config(args: &Params, capacity: usize, feed: &str) -> anyhow::Result<Config> {
    anyhow::ensure!(!args.shm.as_os_str().is_empty(), "--shm must name a file");
    let mut config = Config::parse(
        &format!("[state]\ncapacity = {capacity}\n[sidecar]\nidle = \"sleep\"\nidle_sleep_us = 100\n{feed}"),
        "demo",
    )?;
    config.sidecar.shm_path = args.shm.clone();
    Ok(config)
}

/// A sidecar receiving on its own thread, stopped by its own flag.
struct Running {
    stop: Arc<AtomicBool>,
    rx: std::thread::JoinHandle<RunStats>,
    /// Holds the path's writer lock as long as it lives.
    publication: Arc<Publication>,
}

impl Running {
    /// Starts `config`'s sidecar: its publication is at the path when this
    /// returns.
    fn start(config: &Config) -> anyhow::Result<Running> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut sidecar = Sidecar::start(config)?;
        let publication = sidecar.publication();
        let flag = stop.clone();
        let rx = std::thread::Builder::new()
            .name("tickguard-rx".into())
            .spawn(move || sidecar.run(&flag))?;
        Ok(Running {
            stop,
            rx,
            publication,
        })
    }

    /// Stops the receiver (the publication marked closed) and lets go of
    /// everything it held, the path's writer lock included; the file
    /// stays, as a stopped or crashed writer leaves it.
    fn stop(self) -> anyhow::Result<RunStats> {
        self.stop.store(true, Ordering::Relaxed);
        self.rx
            .join()
            .map_err(|_| anyhow::anyhow!("demo: receiver thread panicked"))
    }

    /// [`stop`](Self::stop)s, then removes the file, still under the lock.
    fn finish(self) -> anyhow::Result<RunStats> {
        let publication = self.publication.clone();
        let stats = self.stop();
        // Only the demo's own file, still under its lock.
        let _ = publication.remove();
        drop(publication);
        stats
    }
}

/// Between two looks at the publication, ms.
const WATCH_MS: u64 = 10;

/// How long the screen goes on after the source ended on its own (a
/// venue's close, which the screen shows [`AFTER_CLOSE_S`] and ends on; or
/// a failure, which is then said rather than left behind a table of
/// symbols going stale until Ctrl-C), ns.
const SOURCE_ENDED_NS: u64 = (AFTER_CLOSE_S as u64 + 2) * 1_000_000_000;

/// Runs `config`'s sidecar and a `source` thread (`provide`, stopped by its
/// flag) and shows `screen`'s frames of the publication, refreshed, until
/// Ctrl-C, `args.duration_s` or the screen says it is over (or the source
/// ended on its own [`SOURCE_ENDED_NS`] ago, or the receiver ended: what
/// they returned or why they ended is then said); `restart_after_ns`
/// into the demo, stops the sidecar and starts another on the same path
/// (as a deploy would). Then stops both and removes the demo's file.
/// Returns what the source returned, the statistics of each receiver run in
/// order, and the reader (still mapping the publication as it ended).
fn show<R: Send + 'static>(
    config: &Config,
    args: &Params,
    source: &str,
    provide: impl FnOnce(Arc<AtomicBool>) -> R + Send + 'static,
    restart_after_ns: Option<u64>,
    screen: &mut impl Screen,
) -> anyhow::Result<(R, Vec<RunStats>, Reader)> {
    let shutdown = crate::sys::shutdown_on_signals().context("installing signal handlers")?;
    let mut running = Some(Running::start(config)?);
    let stop = Arc::new(AtomicBool::new(false));
    let source_stop = stop.clone();
    let provider = std::thread::Builder::new()
        .name(source.into())
        .spawn(move || provide(source_stop))?;

    let tty = std::io::stdout().is_terminal();
    let started = now_ns();
    // `as` saturates: a huge duration is "very long".
    let deadline =
        (args.duration_s > 0.0).then(|| started.saturating_add((args.duration_s * 1e9) as u64));
    let restart_at = restart_after_ns.map(|r| started.saturating_add(r));
    let frame_ns = if tty { 250 } else { 1000 } * 1_000_000;
    let mut runs = Vec::new();
    let mut reader = Reader::open(&args.shm);
    let mut out = std::io::stdout().lock();
    if tty {
        // Best effort, as restoring it below: the threads run already.
        let _ = write!(out, "\x1b[?25l"); // hide the cursor
    }
    let result = (|| -> anyhow::Result<()> {
        let mut next_frame = started;
        let mut restarted = false;
        let mut source_ended = None;
        loop {
            let now = now_ns();
            if provider.is_finished() {
                source_ended.get_or_insert(now);
            }
            if shutdown.load(Ordering::Relaxed)
                || deadline.is_some_and(|d| now >= d)
                || screen.watch(&reader, now)
                || source_ended.is_some_and(|e| now.saturating_sub(e) >= SOURCE_ENDED_NS)
                || running.as_ref().is_some_and(|r| r.rx.is_finished())
            {
                return Ok(());
            }
            if !restarted && restart_at.is_some_and(|r| now >= r) {
                restarted = true;
                if let Some(old) = running.take() {
                    runs.push(old.stop()?);
                }
                running = Some(Running::start(config).context("demo: restarting the sidecar")?);
                let now = now_ns();
                screen.restarted(now, now.saturating_sub(started));
            }
            if !reader.health(now).is_ok() {
                // A restarted writer's new file, as a gateway reopens it.
                reader.refresh();
            }
            if now >= next_frame {
                let frame = screen.render(&reader, now, now.saturating_sub(started), tty);
                let frame = match tty {
                    true => format!("\x1b[H\x1b[2J{frame}"),
                    false => format!("{frame}\n"),
                };
                // A reader that stopped reading does not hold Ctrl-C off.
                if !crate::sys::write_stdout_until(frame.as_bytes(), shutdown)
                    .context("writing to stdout")?
                {
                    return Ok(());
                }
                next_frame = now.saturating_add(frame_ns);
            }
            std::thread::sleep(Duration::from_millis(WATCH_MS));
        }
    })();
    if tty {
        // Best effort: the threads are stopped whatever stdout does.
        let _ = write!(out, "\x1b[?25h").and_then(|()| out.flush());
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(r) = &running {
        r.stop.store(true, Ordering::Relaxed);
    }
    let provided = provider
        .join()
        .map_err(|_| anyhow::anyhow!("demo: {source} thread panicked"));
    let finished = running.map(Running::finish).transpose();
    result?;
    let provided = provided?;
    runs.extend(finished?);
    Ok((provided, runs, reader))
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

/// A book side as `size × price` (bid) or `price × size` (ask), the price
/// with the feed's `decimals`.
fn side(s: Option<Side>, bid: bool, decimals: Option<u8>) -> String {
    match s {
        None => "-".into(),
        Some(Side { price, size }) if bid => format!("{size} × {}", price.show(decimals)),
        Some(Side { price, size }) => format!("{} × {size}", price.show(decimals)),
    }
}

/// A published side as (mantissa, size) when its price is a decimal of
/// `exponent`, as (`None`, 0) when it is any other price; `None` for an
/// empty side: what a venue's book compares with.
fn exact(s: Option<Side>, exponent: i8) -> Option<(Option<i64>, u64)> {
    match s? {
        Side {
            price:
                Price::Decimal {
                    mantissa,
                    exponent: e,
                },
            size,
        } if e == exponent => Some((Some(mantissa), size)),
        _ => Some((None, 0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Blank;

    impl Screen for Blank {
        fn render(&mut self, _: &Reader, _: u64, _: u64, _: bool) -> String {
            String::new()
        }
    }

    /// A source that fails at once ends the demo soon after, with what it
    /// returned, rather than leaving a table going stale until Ctrl-C.
    #[test]
    fn a_source_that_fails_ends_the_demo() {
        let dir = tempfile::tempdir().unwrap();
        let args = Params {
            symbols: 1,
            rate: 1.0,
            duration_s: 600.0,
            shm: dir.path().join("demo"),
            seed: 1,
        };
        let line = SocketAddrV4::new(Ipv4Addr::LOCALHOST, free_port().unwrap());
        let feed = format!(
            "[[feed]]\nname = \"{FEED}\"\nkind = \"full\"\nlines = [\"{line}\"]\nstale_threshold_ms = 500\nsource_threshold_ms = 500\n"
        );
        let config = config(&args, 16, &feed).unwrap();
        let started = std::time::Instant::now();
        let (provided, _, _) = show(
            &config,
            &args,
            "provider",
            |_| Err::<(), _>("no route"),
            None,
            &mut Blank,
        )
        .unwrap();
        assert_eq!(provided, Err("no route"));
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(60), "{waited:?}");
    }
}
