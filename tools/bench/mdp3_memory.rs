//! The `mdp3-memory` row: memory per instrument of an MDP3 channel. Two
//! replays of the `mdp3-capture` channel (without its two-line losses),
//! each in its own process (so
//! neither finds the other's freed memory): `instruments` (500) and
//! `--large` (50,000) instruments. Each child measures its resident set
//! (VmRSS) just before the replay and at its end with the handler and
//! every instrument still alive; bytes per instrument are the difference
//! of the two growths over the difference of the instrument counts, which
//! cancels what does not grow with instruments (the capture reader's
//! buffers, the handler). Also the instrument's own structure as the
//! types say (entry, its four book sides, their undo records, its
//! definition's strings), for comparison.

use crate::harness::{proc_status, require, within};
use crate::mdp3_capture::{replay, write};
use crate::mdp3_gen::Params;
use serde_json::{json, Value};
use tickguard::handler::Handler;
use tickguard::protocol::mdp3::book::Level;
use tickguard::protocol::mdp3::feed::Entry;

/// Flags.
#[derive(clap::Args)]
pub struct Args {
    /// Instruments of the small replay (1 to 100,000, below --large).
    #[arg(long, default_value_t = 500)]
    instruments: usize,
    /// Instruments of the large replay (1 to 100,000).
    #[arg(long, default_value_t = 50_000)]
    large: usize,
    /// Book entries of each replay (1 to 30,000,000: about 4 GB of
    /// capture; every instrument's first event builds 24 levels, so the
    /// large replay needs over 1.2 M).
    #[arg(long, default_value_t = 3_000_000)]
    book_entries: u64,
    /// Only this many instruments, in this process (what the row runs
    /// in each child).
    #[arg(long, hide = true)]
    only: Option<usize>,
}

/// Most instruments of a replay.
const MAX_INSTRUMENTS: usize = 100_000;

impl Args {
    /// Refuses a flag out of its range, and `--large` not above
    /// `--instruments` (the growth per instrument divides by their
    /// difference).
    fn check(&self) -> anyhow::Result<()> {
        within("--instruments", self.instruments, 1..=MAX_INSTRUMENTS)?;
        within("--large", self.large, 1..=MAX_INSTRUMENTS)?;
        within("--book-entries", self.book_entries, 1..=30_000_000)?;
        if let Some(n) = self.only {
            within("--only", n, 1..=MAX_INSTRUMENTS)?;
        }
        require(self.large > self.instruments, || {
            format!(
                "--large must be above --instruments ({}), not {}",
                self.instruments, self.large
            )
        })
    }
}

fn rss() -> (u64, u64) {
    let s = proc_status(std::process::id());
    let g = |k: &str| s.get(k).copied().unwrap_or(0);
    (g("VmRSS"), g("VmHWM"))
}

/// The instrument's structure: its entry and the heap its books, their
/// undo records and its definition hold (the maps by SecurityID and
/// Symbol not counted).
fn structure(e: &Entry) -> u64 {
    let slot = std::mem::size_of::<Option<Level>>() as u64;
    let b = e.instrument.working();
    let slots = b.slots() as u64;
    let strings = e.definition.as_ref().map_or(0, |d| {
        (d.symbol.capacity() + d.group.capacity() + d.asset.capacity()) as u64
    });
    let undo = e.instrument.undo().heap_bytes() as u64;
    std::mem::size_of::<Entry>() as u64 + slots * slot + undo + strings
}

/// One replay of `instruments` in this process.
fn one(instruments: usize, book_entries: u64) -> anyhow::Result<Value> {
    let dir = tempfile::tempdir()?;
    // No packet lost on both lines: with 50,000 instruments the quietest
    // see no entry after a late give-up, and would end unverified (which
    // the replay's comparison refuses); memory does not depend on it.
    let params = Params {
        lost_both: 0,
        ..Params::capture(book_entries, instruments)
    };
    let w = write(dir.path(), params)?;
    let before = rss();
    let mut at_end = (0, 0);
    let mut per_instrument = 0;
    let mut look = |h: &Handler| {
        at_end = rss();
        if let Some(feed) = h.feeds().first().and_then(|f| f.engine().mdp3()) {
            let all = feed.instruments();
            per_instrument = all.iter().map(structure).sum::<u64>() / all.len().max(1) as u64;
        }
    };
    let (secs, _) = replay(&w, Some(&mut look))?;
    Ok(json!({
        "instruments": instruments,
        "book_entries": w.stats.book_entries,
        "replay_seconds": secs,
        "vm_rss_before_bytes": before.0,
        "vm_rss_at_end_bytes": at_end.0,
        "vm_hwm_at_end_bytes": at_end.1,
        "growth_bytes": at_end.0.saturating_sub(before.0),
        "structure_bytes_per_instrument": per_instrument,
    }))
}

/// Runs the row.
pub fn run(a: &Args) -> anyhow::Result<Value> {
    a.check()?;
    if let Some(n) = a.only {
        return one(n, a.book_entries);
    }
    let child = |n: usize| -> anyhow::Result<Value> {
        let out = std::process::Command::new(std::env::current_exe()?)
            .args(["mdp3-memory", "--only", &n.to_string()])
            .args(["--book-entries", &a.book_entries.to_string()])
            .stderr(std::process::Stdio::inherit())
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "mdp3-memory --only {n}: {}",
            out.status
        );
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(serde_json::from_str(text.lines().last().unwrap_or(""))?)
    };
    let (small, large) = (child(a.instruments)?, child(a.large)?);
    let growth = |v: &Value| v["growth_bytes"].as_f64().unwrap_or(0.0);
    let per = (growth(&large) - growth(&small)) / (a.large as f64 - a.instruments as f64);
    Ok(json!({
        "row": "mdp3_memory",
        "small": small,
        "large": large,
        "rss_bytes_per_instrument": per,
        "structure_bytes_per_instrument": large["structure_bytes_per_instrument"],
        "entry_bytes": std::mem::size_of::<Entry>(),
        "level_slot_bytes": std::mem::size_of::<Option<Level>>(),
    }))
}
