//! The `tickguard` binary: flags → resolved configuration → run. Every
//! failure ends in one line on stderr and exit status 2.

use anyhow::{Context, Result};
use clap::Parser;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use tickguard::capture::CaptureReader;
use tickguard::cli::{Cli, Command, ReplayArgs};
use tickguard::config::Config;
use tickguard::replay::{answer_json, load_checks, replay};

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let result = match cli.command {
        Command::Replay(args) => run_replay(args),
        Command::Simulate(args) => tickguard::simulate::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("tickguard: {}", one_line(&e));
            ExitCode::from(2)
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// The error chain on one line.
fn one_line(e: &anyhow::Error) -> String {
    let mut s = String::new();
    for (i, cause) in e.chain().enumerate() {
        if i > 0 {
            s.push_str(": ");
        }
        s.push_str(&cause.to_string().replace('\n', " "));
    }
    s
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

fn run_replay(args: ReplayArgs) -> Result<()> {
    // Validate everything before reading the capture.
    let config = Config::load(&args.config)?;
    let checks = match &args.checks {
        Some(path) => load_checks(path)?,
        None => Vec::new(),
    };
    let mut capture = CaptureReader::open(&args.capture)?;

    let bar = (!args.no_progress && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(capture.len().unwrap_or(0));
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let outcome = replay(&config, &mut capture, &checks, |offset| {
        if let Some(b) = &bar {
            b.set_position(offset);
        }
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }

    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (check, answer) in checks.iter().zip(&outcome.answers) {
        writeln!(out, "{}", answer_json(check, *answer)).context("writing results")?;
    }
    out.flush().context("writing results")?;

    if let Some(path) = &args.summary {
        let mut json =
            serde_json::to_string_pretty(&outcome.summary).context("encoding summary")?;
        json.push('\n');
        std::fs::write(path, json)
            .with_context(|| format!("writing summary {}", path.display()))?;
    }
    match outcome.capture_error {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
