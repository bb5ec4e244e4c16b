//! Command-line flags, parsed into plain structs; `main` resolves them.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// SQF feed handler: per-symbol freshness verdicts for pre-trade checks.
#[derive(Debug, Parser)]
#[command(name = "tickguard", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay a packet capture and answer checks as the live handler would have.
    Replay(ReplayArgs),
}

/// `tickguard replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// Capture file: pcap (µs or ns) or pcapng.
    pub capture: PathBuf,
    /// Configuration file (TOML).
    #[arg(long)]
    pub config: PathBuf,
    /// Checks file: CSV with header time_ns,feed,symbol. Results go to stdout as JSON lines.
    #[arg(long)]
    pub checks: Option<PathBuf>,
    /// Where to write the summary JSON.
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// Never show a progress bar (it is shown only when stderr is a terminal).
    #[arg(long)]
    pub no_progress: bool,
}
