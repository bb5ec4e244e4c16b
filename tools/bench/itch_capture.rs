//! The `itch-capture` row: messages/s of replaying a MoldUDP64 capture of a
//! synthetic ITCH day (two lines, both carrying every packet) through
//! `replay`, against the floor of only reading the same capture with the
//! same reader, both from the page cache, in one run.

use crate::harness::{within, RUNS};
use crate::itch_binfile::{self, CONFIG, DATE, SEED};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;
use tickguard::capture::CaptureReader;
use tickguard::config::Config;
use tickguard::protocol::itch50::synth::{two_line_capture, CAPTURE_PER_PACKET};

/// Flags.
#[derive(clap::Args)]
pub struct Args {
    /// Messages in the synthetic day (1 to 50,000,000: about 3.5 GB of
    /// capture).
    #[arg(long, default_value_t = 5_000_000)]
    messages: u64,
    /// Stocks in its directory (1 to 65,535).
    #[arg(long, default_value_t = 8_000)]
    stocks: usize,
    /// Runs of each side, interleaved (1 to 100): the best of each is the
    /// row's figure, and every run is recorded.
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

/// Most `--messages` (ten times the default).
const MAX_MESSAGES: u64 = 50_000_000;

/// Writes the capture of the day at `day`; returns (messages, packets per line).
fn generate(day: &Path, capture: &Path, config: &Config) -> anyhow::Result<(u64, u64)> {
    let midnight = DATE.in_tz("America/New_York")?.timestamp().as_nanosecond();
    let lines = &config.feeds[0].lines;
    let out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(capture)?);
    let input = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(day)?);
    Ok(two_line_capture(
        input,
        out,
        u64::try_from(midnight)?,
        [lines[0], lines[1]],
        SEED,
    )?)
}

/// Runs the row.
pub fn run(a: &Args) -> anyhow::Result<Value> {
    let day_args = itch_binfile::Args {
        messages: a.messages,
        stocks: a.stocks,
    };
    day_args.check(MAX_MESSAGES)?;
    within("--runs", a.runs, RUNS)?;
    let (dir, day, _) = itch_binfile::day(&day_args)?;
    let config = Config::parse(CONFIG, "itch-bench")?;
    let capture = dir.path().join("day.pcap");
    let (messages, packets) = generate(&day, &capture, &config)?;
    std::fs::remove_file(&day)?;
    let bytes = std::fs::metadata(&capture)?.len();
    // The replay with its book levels on its own thread too first, as a
    // reference in the same run, then as a user runs it.
    let timed = |one_thread: bool| -> anyhow::Result<_> {
        let mut reader = CaptureReader::open(&capture)?;
        let mut observer = itch_binfile::OneThread(one_thread);
        let start = Instant::now();
        let outcome =
            tickguard::replay::replay_with(&config, &mut reader, &[], |_| {}, &mut observer);
        Ok((start.elapsed().as_secs_f64(), outcome))
    };
    let mut datagrams = 0;
    let (floors, ones, replays, outcome) = itch_binfile::interleaved(
        a.runs,
        || {
            let (floor_s, read) = crate::replay_throughput::ceiling(&capture)?;
            anyhow::ensure!(
                read == 2 * packets,
                "read {read} of {} datagrams",
                2 * packets
            );
            datagrams = read;
            Ok(floor_s)
        },
        |one_thread| {
            let (secs, outcome) = timed(one_thread)?;
            anyhow::ensure!(outcome.input_error.is_none(), "replay stopped early");
            Ok((secs, outcome))
        },
        |outcome| Ok(serde_json::to_value(&outcome.summary.feeds)?),
    )?;
    let Some(tickguard::replay::FeedSummary::Itch50(feed)) = outcome.summary.feeds.get("nasdaq")
    else {
        anyhow::bail!("no itch50 feed in the summary");
    };
    anyhow::ensure!(
        feed.next == Some(messages + 1) && feed.ticks_lost == 0 && feed.rejected == 0,
        "replay did not apply the whole day: next {:?}, lost {}, rejected {}",
        feed.next,
        feed.ticks_lost,
        feed.rejected
    );
    let rate = |secs: f64| messages as f64 / secs;
    let target = 20_000_000u64;
    let (floor_s, one_s, replay_s) = (floors.best(), ones.best(), replays.best());
    Ok(json!({
        "row": "itch_capture",
        "messages": messages,
        "stocks": a.stocks,
        "packets_per_line": packets,
        "datagrams": datagrams,
        "messages_per_packet": [CAPTURE_PER_PACKET.0, CAPTURE_PER_PACKET.1],
        "capture_bytes": bytes,
        "runs": a.runs.max(1),
        "floor_seconds": floor_s,
        "replay_seconds": replay_s,
        "floor_messages_per_s": rate(floor_s),
        "replay_messages_per_s": rate(replay_s),
        "replay_messages_per_s_each": replays.rates(messages),
        "ratio": floor_s / replay_s,
        "one_thread_seconds": one_s,
        "one_thread_messages_per_s": rate(one_s),
        "one_thread_messages_per_s_each": ones.rates(messages),
        "duplicates": feed.duplicates,
        "live_orders_at_end": itch_binfile::live_orders(feed),
        "target_messages_per_s": target,
        "target_met": rate(replay_s) >= target as f64,
    }))
}
