//! `tickguard-bench`: the measurements behind BENCHMARKS.md, each row taken
//! side by side with its reference in one run (these machines are shared and
//! noisy: ratios hold, absolute times drift).
//!
//! Every subcommand prints one JSON object on stdout; `tools/bench` runs
//! them all, builds the table and writes BENCHMARKS.json.

use clap::{Parser, Subcommand};

mod decode_apply;
mod replay_throughput;
mod tick_to_publish;

#[derive(Parser)]
#[command(
    name = "tickguard-bench",
    about = "tickguard measurements (see BENCHMARKS.md)"
)]
struct Cli {
    #[command(subcommand)]
    row: Row,
}

#[derive(Subcommand)]
enum Row {
    /// Replay throughput against the ceiling of only reading the capture.
    ReplayThroughput(replay_throughput::Args),
    /// Decode + apply ns/message from the criterion bench, against its floor.
    DecodeApply(decode_apply::Args),
    /// Kernel receive timestamp to published slot, at 10% and 80% of a sustained rate.
    TickToPublish(tick_to_publish::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let json = match cli.row {
        Row::ReplayThroughput(a) => replay_throughput::run(&a)?,
        Row::DecodeApply(a) => decode_apply::run(&a)?,
        Row::TickToPublish(a) => tick_to_publish::run(&a)?,
    };
    println!("{json}");
    Ok(())
}
