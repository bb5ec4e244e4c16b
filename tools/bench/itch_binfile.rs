//! The `itch-binfile` row: messages/s of replaying a synthetic Nasdaq
//! BinaryFILE day with full order books (`replay_file`), against the floor
//! of only walking its records with the same `BinFile` reader, against the
//! same replay with its book levels on its own thread, and against what
//! any book reaches on the same day (`examples/itch_ceiling.rs`: its
//! `split` pass keeps orders and levels in two threads as the replay does,
//! with none of a feed handler's other work), all from the page cache, in
//! one run.

use crate::harness::{within, RUNS};
use crate::replay_throughput::Runs;
use anyhow::Context;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tickguard::config::Config;
use tickguard::protocol::itch50::binfile::BinFile;
use tickguard::protocol::itch50::summary::FeedSummary as ItchFeedSummary;
use tickguard::protocol::itch50::synth::synthetic_day;

/// Flags shared by `itch-binfile` and `itch-memory`.
#[derive(clap::Args)]
pub struct Args {
    /// Messages in the synthetic day (1 to 200,000,000: about 6.2 GB).
    #[arg(long, default_value_t = 20_000_000)]
    pub messages: u64,
    /// Stocks in its directory (1 to 65,535).
    #[arg(long, default_value_t = 8_000)]
    pub stocks: usize,
}

impl Args {
    /// Refuses a flag out of its range, `--messages` from 1 to `max` (a
    /// row's disk use grows with it).
    pub fn check(&self, max: u64) -> anyhow::Result<()> {
        within("--messages", self.messages, 1..=max)?;
        within("--stocks", self.stocks, 1..=65_535)
    }
}

/// Most `--messages` of the BinaryFILE day (ten times the default).
pub const MAX_MESSAGES: u64 = 200_000_000;

/// Flags of `itch-binfile`.
#[derive(clap::Args)]
pub struct RowArgs {
    #[command(flatten)]
    pub day: Args,
    /// Rounds of the row's runs, interleaved (1 to 100): the best of each
    /// side is the row's figure, as in the replay-throughput row, and
    /// every run is recorded.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// `itch_ceiling`, run on the same day in each round (`tools/bench/run`
    /// builds it); where it is missing the row goes without it.
    #[arg(long, default_value = "target/release/examples/itch_ceiling")]
    pub ceiling: PathBuf,
}

/// The one itch50 feed the ITCH rows replay into.
pub const CONFIG: &str =
    "[state]\ncapacity = 65536\n[[feed]]\nname = \"nasdaq\"\nprotocol = \"itch50\"\n\
    lines = [\"239.2.1.1:26477\", \"239.2.1.2:26477\"]\nstale_threshold_ms = 1500\n\
    source_threshold_ms = 2000\nclock_offset = 0\n";

/// The session date of the synthetic day.
pub const DATE: jiff::civil::Date = jiff::civil::date(2026, 1, 5);

/// Seed of the synthetic day.
pub const SEED: u64 = 20_260_105;

/// Writes the synthetic day to `path`; returns its record count.
pub fn generate(path: &Path, a: &Args) -> anyhow::Result<u64> {
    let file = std::fs::File::create(path)?;
    Ok(synthetic_day(file, a.messages, a.stocks, SEED)?)
}

/// Reads every record and touches its type byte: what any replay must do.
fn walk(path: &Path) -> anyhow::Result<(f64, u64)> {
    let start = Instant::now();
    let mut file = BinFile::open(path)?;
    let (mut n, mut sum) = (0u64, 0u64);
    while let Some((_, record)) = file.next_record()? {
        sum = sum.wrapping_add(u64::from(record.first().copied().unwrap_or(0)));
        n += 1;
    }
    std::hint::black_box(sum);
    Ok((start.elapsed().as_secs_f64(), n))
}

/// With `true`, keeps the books' price levels on the replay's own thread:
/// the replay as it was before they moved to a second one, a reference in
/// the same run; with `false`, the replay as a user runs it.
pub struct OneThread(pub bool);

impl tickguard::replay::Observer for OneThread {
    fn books_on_one_thread(&self) -> bool {
        self.0
    }
}

/// The full replay with books (`one_thread`: its levels on its own
/// thread too); returns its seconds and the feed's summary.
pub fn replay(path: &Path, one_thread: bool) -> anyhow::Result<(f64, ItchFeedSummary)> {
    let config = Config::parse(CONFIG, "itch-bench")?;
    let start = Instant::now();
    let mut observer = OneThread(one_thread);
    let outcome = tickguard::replay::itch50::replay_file_with(
        &config,
        "nasdaq",
        DATE,
        path,
        &[],
        |_| {},
        &mut observer,
    )
    .map_err(anyhow::Error::msg)?;
    let secs = start.elapsed().as_secs_f64();
    anyhow::ensure!(outcome.input_error.is_none(), "replay stopped early");
    match outcome
        .summary
        .feeds
        .into_iter()
        .find(|(n, _)| n == "nasdaq")
    {
        Some((_, tickguard::replay::FeedSummary::Itch50(feed))) => Ok((secs, feed)),
        _ => anyhow::bail!("no itch50 feed in the summary"),
    }
}

/// Live orders at the end of a replay: the sum over the feed's symbols.
pub fn live_orders(feed: &ItchFeedSummary) -> u64 {
    feed.symbols.values().map(|s| s.orders).sum()
}

/// A row's three sides timed `runs` times (at least once), interleaved: its
/// floor, the replay with the book levels on its own thread too, and the
/// replay as a user runs it, whose summaries (as `json` writes them) must
/// be equal every time. Returns each side's runs and the last replay.
pub fn interleaved<T>(
    runs: usize,
    mut floor: impl FnMut() -> anyhow::Result<f64>,
    mut replay: impl FnMut(bool) -> anyhow::Result<(f64, T)>,
    json: impl Fn(&T) -> anyhow::Result<Value>,
) -> anyhow::Result<(Runs, Runs, Runs, T)> {
    let (mut floors, mut ones, mut replays) = (Runs::default(), Runs::default(), Runs::default());
    let mut round = || -> anyhow::Result<T> {
        floors.add(floor()?);
        let (one_s, one) = replay(true)?;
        let (replay_s, last) = replay(false)?;
        anyhow::ensure!(
            json(&one)? == json(&last)?,
            "the two replays' summaries differ"
        );
        ones.add(one_s);
        replays.add(replay_s);
        Ok(last)
    };
    let mut last = round()?;
    for _ in 1..runs {
        last = round()?;
    }
    Ok((floors, ones, replays, last))
}

/// A temporary directory holding the generated day.
pub fn day(a: &Args) -> anyhow::Result<(tempfile::TempDir, PathBuf, u64)> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("day.itch");
    let n = generate(&path, a)?;
    Ok((dir, path, n))
}

/// `itch_ceiling`'s passes over the day at `day` (M messages/s, as it
/// prints them), `None` where `bin` is not there.
fn ceiling(bin: &Path, day: &Path) -> anyhow::Result<Option<Value>> {
    if !bin.exists() {
        return Ok(None);
    }
    let out = std::process::Command::new(bin)
        .arg(day)
        .arg("--json")
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    anyhow::ensure!(out.status.success(), "{}: {}", bin.display(), out.status);
    let passes: Value = serde_json::from_slice(&out.stdout)?;
    anyhow::ensure!(
        passes["same_books"] == true,
        "the ceiling's two-thread books differ from its one-thread books"
    );
    Ok(Some(passes))
}

/// Runs the row.
pub fn run(a: &RowArgs) -> anyhow::Result<Value> {
    a.day.check(MAX_MESSAGES)?;
    within("--runs", a.runs, RUNS)?;
    let (_dir, path, messages) = day(&a.day)?;
    let bytes = std::fs::metadata(&path)?.len();
    let mut ceilings = Vec::new();
    let (walks, ones, replays, feed) = interleaved(
        a.runs,
        || {
            let (walk_s, walked) = walk(&path)?;
            anyhow::ensure!(walked == messages, "walked {walked} of {messages} records");
            ceilings.extend(ceiling(&a.ceiling, &path)?);
            Ok(walk_s)
        },
        |one_thread| replay(&path, one_thread),
        |feed| Ok(serde_json::to_value(feed)?),
    )?;
    let invalid = feed.invalid_records.unwrap_or(0);
    anyhow::ensure!(invalid == 0, "{invalid} records failed validation");
    let rate = |secs: f64| messages as f64 / secs;
    let target = 30_000_000u64;
    let (walk_s, one_s, replay_s) = (walks.best(), ones.best(), replays.best());
    // The ceiling's quickest runs, messages/s.
    let best = |pass: &str| {
        let rates = ceilings.iter().filter_map(|c| c[pass].as_f64());
        rates
            .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))))
            .map(|r| r * 1e6)
    };
    let split = best("split");
    Ok(json!({
        "row": "itch_binfile",
        "messages": messages,
        "stocks": a.day.stocks,
        "file_bytes": bytes,
        "runs": a.runs.max(1),
        "walk_seconds": walk_s,
        "replay_seconds": replay_s,
        "walk_messages_per_s": rate(walk_s),
        "replay_messages_per_s": rate(replay_s),
        "replay_messages_per_s_each": replays.rates(messages),
        "ratio": walk_s / replay_s,
        "one_thread_seconds": one_s,
        "one_thread_messages_per_s": rate(one_s),
        "one_thread_messages_per_s_each": ones.rates(messages),
        "ceiling_split_messages_per_s": split,
        "ceiling_books_messages_per_s": best("books"),
        "ceiling_split_messages_per_s_each": ceilings.iter().map(|c| c["split"].as_f64().map(|r| r * 1e6)).collect::<Vec<_>>(),
        "ratio_to_ceiling_split": split.map(|c| rate(replay_s) / c),
        "live_orders_at_end": live_orders(&feed),
        "unknown_orders": feed.unknown_orders,
        "target_messages_per_s": target,
        "target_met": rate(replay_s) >= target as f64,
    }))
}
