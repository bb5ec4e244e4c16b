//! Row 1: messages/s of `tickguard replay` on a generated capture, against
//! the ceiling of only iterating the same capture's UDP payloads with the
//! same reader, both from the page cache, in one run.

use crate::harness::{within, RUNS};
use anyhow::Context;
use serde_json::json;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::capture::CaptureReader;
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::symbol::Symbol;

/// Flags.
#[derive(clap::Args)]
pub struct Args {
    /// Messages in the capture (1 to 50,000,000: about 2.7 GB of capture).
    #[arg(long, default_value_t = 5_000_000)]
    messages: u64,
    /// Symbols they are spread over (1 to 10,000,000: `S` and 7 digits).
    #[arg(long, default_value_t = 10_000)]
    symbols: usize,
    /// Messages per datagram (1 to 100).
    #[arg(long, default_value_t = 10)]
    per_packet: usize,
    /// Runs of each side (1 to 100); the best is kept (page cache warm
    /// after the first).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Also write the capture and config here, and keep them.
    #[arg(long)]
    keep: Option<PathBuf>,
    /// The tickguard binary to time end to end.
    #[arg(long, default_value = "target/release/tickguard")]
    tickguard: PathBuf,
}

/// The timed runs of one side of a row: seconds, each and the least.
#[derive(Default)]
pub struct Runs(Vec<f64>);

impl Runs {
    /// Records a run of `secs` seconds.
    pub fn add(&mut self, secs: f64) {
        self.0.push(secs);
    }

    /// The quickest run's seconds: the least disturbed by the machine's
    /// other work.
    pub fn best(&self) -> f64 {
        self.0.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// Every run's rate for `messages`, messages/s, in run order.
    pub fn rates(&self, messages: u64) -> Vec<f64> {
        self.0.iter().map(|s| messages as f64 / s).collect()
    }
}

impl Args {
    /// Refuses a flag out of its range.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        within("--messages", self.messages, 1..=50_000_000)?;
        within("--symbols", self.symbols, 1..=10_000_000)?;
        within("--per-packet", self.per_packet, 1..=100)?;
        within("--runs", self.runs, RUNS)
    }
}

const LINE: &str = "239.1.1.1:30001";

/// Writes the capture; returns its datagrams, its quotes and each
/// symbol's last sequence (what the replay must end on).
fn generate(path: &Path, a: &Args) -> anyhow::Result<(u64, u64, Vec<u64>)> {
    let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::Ethernet)?;
    let symbols: Vec<Symbol> = (0..a.symbols)
        .map(|i| Symbol::parse(&format!("S{i:07}")).context("a symbol name"))
        .collect::<anyhow::Result<_>>()?;
    let mut seq = vec![0u64; a.symbols];
    let src: SocketAddrV4 = "10.0.0.1:4000".parse()?;
    let dst: SocketAddrV4 = LINE.parse()?;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let t0 = 1_767_603_600_000_000_000u64;
    let (mut written, mut packets, mut quotes) = (0u64, 0u64, 0u64);
    while written < a.messages {
        let t = t0 + packets * 2_000;
        let mut b = PacketBuilder::new(t - 50_000);
        for _ in 0..a.per_packet.min((a.messages - written) as usize) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = (x % a.symbols as u64) as usize;
            if x.is_multiple_of(20) {
                b.heartbeat(symbols[k], seq[k] + 1);
            } else {
                seq[k] += 1;
                quotes += 1;
                b.quote(symbols[k], seq[k], t - 60_000, 1.0, 1.0001);
            }
            written += 1;
        }
        w.write_udp(t, src, dst, &b.finish())?;
        packets += 1;
    }
    w.finish()?;
    Ok((packets, quotes, seq))
}

fn config(dir: &Path, symbols: usize) -> anyhow::Result<PathBuf> {
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!(
            "[state]\ncapacity = {}\n[[feed]]\nname = \"b\"\nkind = \"full\"\nlines = [\"{LINE}\"]\n\
             stale_threshold_ms = 500\nsource_threshold_ms = 2000\n",
            symbols.max(16)
        ),
    )?;
    Ok(path)
}

/// Reads every datagram and touches its payload: what any replay must do.
pub(crate) fn ceiling(path: &Path) -> anyhow::Result<(f64, u64)> {
    let start = Instant::now();
    let mut reader = CaptureReader::open(path)?;
    let mut sum = 0u64;
    reader.for_each(|d| {
        sum = sum
            .wrapping_add(d.payload.len() as u64 + d.payload.first().copied().unwrap_or(0) as u64);
    })?;
    std::hint::black_box(sum);
    Ok((start.elapsed().as_secs_f64(), reader.stats().datagrams))
}

/// `tickguard replay` as a user runs it, with a summary file.
fn end_to_end(a: &Args, capture: &Path, config: &Path, dir: &Path) -> anyhow::Result<f64> {
    let start = Instant::now();
    let status = std::process::Command::new(&a.tickguard)
        .arg("replay")
        .arg(capture)
        .arg("--config")
        .arg(config)
        .arg("--summary")
        .arg(dir.join("summary.json"))
        .arg("--no-progress")
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("running {}", a.tickguard.display()))?;
    anyhow::ensure!(status.success(), "tickguard replay failed: {status}");
    Ok(start.elapsed().as_secs_f64())
}

/// Runs the row.
pub fn run(a: &Args) -> anyhow::Result<serde_json::Value> {
    a.check()?;
    let dir = tempfile::tempdir()?;
    let capture = dir.path().join("bench.pcap");
    let (packets, quotes, last_seq) = generate(&capture, a)?;
    let bytes = std::fs::metadata(&capture)?.len();
    let cfg = config(dir.path(), a.symbols)?;
    if let Some(keep) = &a.keep {
        std::fs::create_dir_all(keep)?;
        std::fs::copy(&capture, keep.join("bench.pcap"))?;
        std::fs::copy(&cfg, keep.join("config.toml"))?;
    }
    let (mut ceilings, mut replays) = (Runs::default(), Runs::default());
    for _ in 0..a.runs.max(1) {
        let (t, datagrams) = ceiling(&capture)?;
        anyhow::ensure!(
            datagrams == packets,
            "read {datagrams} of {packets} datagrams"
        );
        ceilings.add(t);
        replays.add(end_to_end(a, &capture, &cfg, dir.path())?);
    }
    let (best_ceiling, best_replay) = (ceilings.best(), replays.best());
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("summary.json"))?)?;
    // What the replay applied, not only read: every quote taken, none
    // lost or duplicated, and every symbol on its last sequence.
    let feed = &summary["feeds"]["b"];
    let count = |k: &str| feed[k].as_u64().unwrap_or(u64::MAX);
    anyhow::ensure!(
        count("messages") == a.messages && count("quotes") == quotes,
        "replay applied {} of {} messages, {} of {quotes} quotes",
        count("messages"),
        a.messages,
        count("quotes")
    );
    anyhow::ensure!(
        count("ticks_lost") == 0 && count("duplicates") == 0 && count("rejected") == 0,
        "replay lost {}, duplicated {}, rejected {}",
        count("ticks_lost"),
        count("duplicates"),
        count("rejected")
    );
    for (k, &want) in last_seq.iter().enumerate() {
        let got = feed["symbols"][format!("S{k:07}")]["last_seq"].as_u64();
        anyhow::ensure!(
            want == 0 || got == Some(want),
            "symbol S{k:07} ended on sequence {got:?}, not {want}"
        );
    }
    let rate = |secs: f64| a.messages as f64 / secs;
    Ok(json!({
        "row": "replay_throughput",
        "messages": a.messages,
        "symbols": a.symbols,
        "datagrams": packets,
        "capture_bytes": bytes,
        "ceiling_seconds": best_ceiling,
        "replay_seconds": best_replay,
        "ceiling_messages_per_s": rate(best_ceiling),
        "replay_messages_per_s": rate(best_replay),
        "ratio": best_ceiling / best_replay,
        "target_ratio": 0.7,
        "target_messages_per_s": 50_000_000u64,
    }))
}
