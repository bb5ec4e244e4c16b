//! The `soak` row: a bounded run with injected loss, the sidecar's RSS
//! sampled every second, its counters checked against the simulator's
//! report.

use crate::harness::{
    counters, free_port, proc_status, rss_json, start_sidecar, wait_quiet, within, SidecarSpec, Sim,
};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tickguard::time::now_ns;
use tickguard::Reader;

/// Flags of `soak`.
#[derive(clap::Args)]
pub struct SoakArgs {
    /// The tickguard binary (sidecar and simulator).
    #[arg(long, default_value = "target/release/tickguard")]
    tickguard: PathBuf,
    /// Length of the run, s (1 to 86,400).
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// The sustained rate, quotes/s (1 to 10,000,000); the run goes at
    /// --fraction of it.
    #[arg(long, default_value_t = 200_000.0)]
    rate: f64,
    /// Fraction of --rate sent (0.01 to 1).
    #[arg(long, default_value_t = 0.5)]
    fraction: f64,
    /// Symbols quoted (1 to 100,000: the simulator's generated names).
    #[arg(long, default_value_t = 1_000)]
    symbols: usize,
    /// Quotes per datagram (1 to 100).
    #[arg(long, default_value_t = 8)]
    batch: usize,
    /// Percent of datagrams dropped on line A (0 to 100).
    #[arg(long, default_value_t = 2.0)]
    loss_a: f64,
    /// Percent of datagrams dropped on line B (0 to 100).
    #[arg(long, default_value_t = 2.0)]
    loss_b: f64,
    /// Simulator heartbeat interval per symbol, ms (1 to 60,000: above 0
    /// for exact ticks_lost).
    #[arg(long, default_value_t = 250)]
    heartbeat_ms: u64,
    /// Receiver idle strategy: spin, yield or sleep.
    #[arg(long, default_value = "sleep", value_parser = crate::harness::IDLES)]
    idle: String,
}

/// The `soak` row.
pub fn soak(a: &SoakArgs) -> anyhow::Result<Value> {
    within("--seconds", a.seconds, 1..=86_400)?;
    within("--rate", a.rate, 1.0..=10_000_000.0)?;
    within("--fraction", a.fraction, 0.01..=1.0)?;
    // (The simulator makes at most 100,000 names, SYM00000 on.)
    within("--symbols", a.symbols, 1..=100_000)?;
    within("--batch", a.batch, 1..=100)?;
    within("--loss-a", a.loss_a, 0.0..=100.0)?;
    within("--loss-b", a.loss_b, 0.0..=100.0)?;
    within("--heartbeat-ms", a.heartbeat_ms, 1..=60_000)?;
    let dir = tempfile::tempdir()?;
    let ports = [free_port()?, free_port()?];
    let sidecar = start_sidecar(
        &a.tickguard,
        dir.path(),
        &SidecarSpec {
            capacity: (a.symbols * 2).max(1024),
            ports: &ports,
            idle: &a.idle,
            cpu: None,
            stale_ms: 500,
            source_ms: 2_000,
        },
    )?;
    let pid = sidecar.pid();
    let rate = a.rate * a.fraction;
    let rss = |pid| proc_status(pid).get("VmRSS").copied().unwrap_or(0);
    let rss_start = rss(pid);
    let status_start = rss_json(pid);
    let mut sim = Sim::spawn(
        &a.tickguard,
        dir.path(),
        "soak",
        &[
            "--line-a".to_string(),
            format!("127.0.0.1:{}", ports[0]),
            "--line-b".into(),
            format!("127.0.0.1:{}", ports[1]),
            "--symbols".into(),
            a.symbols.to_string(),
            "--rate".into(),
            format!("{rate}"),
            "--batch".into(),
            a.batch.to_string(),
            "--loss-a".into(),
            format!("{}", a.loss_a),
            "--loss-b".into(),
            format!("{}", a.loss_b),
            "--heartbeat-ms".into(),
            a.heartbeat_ms.to_string(),
            "--duration-s".into(),
            a.seconds.to_string(),
        ],
    )?;
    // One sample a second while the simulator runs (bounded by its duration).
    let t0 = Instant::now();
    let mut samples = Vec::new();
    let mut next = t0 + Duration::from_secs(1);
    let limit = t0 + Duration::from_secs(a.seconds + 30);
    while sim.running() && Instant::now() < limit {
        if Instant::now() >= next {
            samples.push(rss(pid));
            next += Duration::from_secs(1);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (report, wall) = sim.finish(Duration::from_secs(30))?;
    let packets = wait_quiet(
        &sidecar.shm,
        Duration::from_millis(500),
        Duration::from_secs(20),
    );
    let rss_end = rss(pid);
    let status = rss_json(pid);
    let reader = Reader::open(&sidecar.shm);
    let c = counters(&reader);
    let health = reader.health(now_ns()).to_string();
    drop(sidecar);

    let sent: u64 = report["lines"]
        .as_array()
        .map(|l| l.iter().filter_map(|x| x["datagrams_sent"].as_u64()).sum())
        .unwrap_or(0);
    let lost_sim = report["ticks_lost_on_both_lines"].as_u64().unwrap_or(0);
    let lost_sidecar = c["ticks_lost"].as_u64().unwrap_or(0);
    let max = samples.iter().copied().chain([rss_end]).max().unwrap_or(0);
    // After the first few seconds every symbol has been seen and every
    // buffer touched: growth from there is what a leak would show.
    let warm = samples.get(4).copied().unwrap_or(rss_start);
    Ok(json!({
        "row": "soak",
        "seconds": a.seconds,
        "simulator_wall_s": wall,
        "rate": rate,
        "symbols": a.symbols,
        "loss_a_pct": a.loss_a,
        "loss_b_pct": a.loss_b,
        "heartbeat_ms": a.heartbeat_ms,
        "rss_start_bytes": rss_start,
        "rss_after_5s_bytes": warm,
        "rss_end_bytes": rss_end,
        "rss_max_bytes": max,
        "rss_growth_max_minus_start_bytes": max.saturating_sub(rss_start),
        "rss_growth_max_minus_5s_bytes": max.saturating_sub(warm),
        "rss_samples_bytes": samples,
        "sidecar_status_at_start": status_start,
        "sidecar_status_at_end": status,
        "kernel_drops": c["kernel_drops"],
        "kernel_drops_zero": c["kernel_drops"].as_u64() == Some(0),
        "quotes_sent": report["quotes"],
        "simulator_datagrams_sent": sent,
        "sidecar_packets": packets,
        "packets_equal_datagrams_sent": packets == sent,
        "simulator_ticks_lost_on_both_lines": lost_sim,
        "sidecar_ticks_lost": lost_sidecar,
        "ticks_lost_equal": lost_sim == lost_sidecar,
        "sidecar_counters": c,
        "simulator_lines": report["lines"],
        "writer_health_at_end": health,
        "sidecar_idle": a.idle,
    }))
}
