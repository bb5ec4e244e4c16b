//! `tickguard-bench`: the measurements behind BENCHMARKS.md, each row taken
//! side by side with its reference in one run (these machines are shared and
//! noisy: ratios hold, absolute times drift).
//!
//! Every subcommand prints one JSON object on stdout; `tools/bench` runs
//! them all, builds the table and writes BENCHMARKS.json.

use clap::{Parser, Subcommand};

mod all;
mod check_latency;
mod decode_apply;
mod harness;
mod itch_apply;
mod itch_binfile;
mod itch_capture;
mod itch_check;
mod itch_glimpse;
mod itch_live;
mod itch_memory;
mod live;
mod mdp3_apply;
mod mdp3_capture;
mod mdp3_gen;
mod mdp3_live;
mod mdp3_memory;
mod memory;
mod replay_throughput;
mod soak;
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
    /// Live receive: sidecar drain of a pre-filled queue against a bare recvmmsg loop and a naive tokio receiver; paced stream.
    Live(live::Args),
    /// Reader::check latency from another process at 1M updates/s and full speed, against a Unix-socket query.
    CheckLatency(check_latency::LatencyArgs),
    /// Resident memory of the sidecar with 100,000 symbols in its table.
    Memory(memory::MemoryArgs),
    /// ITCH decode + apply ns/message from the itch_apply criterion bench.
    ItchApply(itch_apply::Args),
    /// ITCH BinaryFILE day replayed with order books, against walking its records.
    ItchBinfile(itch_binfile::RowArgs),
    /// ITCH MoldUDP64 capture (two lines) replayed, against reading the capture.
    ItchCapture(itch_capture::Args),
    /// Peak RSS and live orders at the end of the ITCH BinaryFILE replay.
    ItchMemory(itch_binfile::Args),
    /// ITCH live: sidecar drain of pre-filled line queues against a bare recvmmsg loop.
    ItchLiveDrain(itch_live::DrainArgs),
    /// ITCH live: gap seen → re-request sent → filled on loopback, and the receive thread's cost.
    ItchRecoveryLatency(itch_live::RecoveryArgs),
    /// Reader::check on an ITCH symbol from another process, next to an SQF symbol in the same run.
    ItchCheckLatency(check_latency::LatencyArgs),
    /// ITCH GLIMPSE: a sidecar started mid-session restarting to ok from a snapshot of 1M orders on loopback, against the multicast apply rate; its receive cycles while the snapshot arrives against normal.
    ItchGlimpseRestart(itch_glimpse::Args),
    /// MDP3 capture (two lines, snapshots) replayed, book entries/s against reading the capture.
    Mdp3Capture(mdp3_capture::Args),
    /// MDP3 decode + apply ns/book entry from the mdp3_apply criterion bench.
    Mdp3Apply(mdp3_apply::Args),
    /// MDP3 memory per instrument: resident growth of two replays, 500 and 50,000 instruments.
    Mdp3Memory(mdp3_memory::Args),
    /// MDP3 live: sidecar drain of pre-filled incremental line queues against a bare recvmmsg loop.
    Mdp3LiveDrain(mdp3_live::DrainArgs),
    /// Reader::check on an MDP3 instrument from another process while the sidecar receives the channel.
    Mdp3Check(mdp3_live::CheckArgs),
    /// MDP3 live: a packet lost on both lines to every instrument it touched checking ok, snapshot loop every P ms.
    Mdp3HealTime(mdp3_live::HealArgs),
    /// The writer `mdp3-check` checks against (internal).
    #[command(hide = true)]
    Mdp3Writer(mdp3_live::WriterArgs),
    /// Bounded run with injected loss: RSS flat, no kernel drops, counters match the simulator.
    Soak(soak::SoakArgs),
    /// Every row, each in its own process: BENCHMARKS.json and the Markdown table.
    All(all::Args),
    /// The Markdown table of an existing BENCHMARKS.json.
    Table(all::TableArgs),
    /// The verdict server `check-latency` compares against (internal).
    #[command(hide = true)]
    UnixServer(check_latency::ServerArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let json = match run(cli.row) {
        Ok(json) => json,
        Err(e) => match e.downcast_ref::<harness::BadFlag>() {
            Some(bad) => {
                eprintln!("error: {bad}");
                std::process::exit(2);
            }
            // One line with its causes, never a backtrace: a row that
            // failed (a sidecar that did not start, a write refused).
            None => {
                eprintln!("error: {e:#}");
                std::process::exit(1);
            }
        },
    };
    // `table` and `all` print a table instead.
    if !json.is_null() {
        println!("{json}");
    }
    Ok(())
}

/// Runs `row`: the JSON object it prints (null: none).
fn run(row: Row) -> anyhow::Result<serde_json::Value> {
    Ok(match row {
        Row::ReplayThroughput(a) => replay_throughput::run(&a)?,
        Row::DecodeApply(a) => decode_apply::run(&a)?,
        Row::TickToPublish(a) => tick_to_publish::run(&a)?,
        Row::Live(a) => live::run(&a)?,
        Row::CheckLatency(a) => check_latency::latency(&a)?,
        Row::Memory(a) => memory::memory(&a)?,
        Row::Soak(a) => soak::soak(&a)?,
        Row::ItchApply(a) => itch_apply::run(&a)?,
        Row::ItchBinfile(a) => itch_binfile::run(&a)?,
        Row::ItchCapture(a) => itch_capture::run(&a)?,
        Row::ItchMemory(a) => itch_memory::run(&a)?,
        Row::ItchLiveDrain(a) => itch_live::drain(&a)?,
        Row::ItchRecoveryLatency(a) => itch_live::recovery(&a)?,
        Row::ItchCheckLatency(a) => itch_check::run(&a)?,
        Row::ItchGlimpseRestart(a) => itch_glimpse::run(&a)?,
        Row::Mdp3Capture(a) => mdp3_capture::run(&a)?,
        Row::Mdp3Apply(a) => mdp3_apply::run(&a)?,
        Row::Mdp3Memory(a) => mdp3_memory::run(&a)?,
        Row::Mdp3LiveDrain(a) => mdp3_live::drain(&a)?,
        Row::Mdp3Check(a) => mdp3_live::check(&a)?,
        Row::Mdp3HealTime(a) => mdp3_live::heal(&a)?,
        Row::Mdp3Writer(a) => mdp3_live::writer(&a)?,
        Row::UnixServer(a) => check_latency::unix_server(&a)?,
        Row::All(a) => all::run(&a)?,
        Row::Table(a) => all::print_table(&a)?,
    })
}
