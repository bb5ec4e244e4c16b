//! The `memory` row: the sidecar's resident memory once 100,000 symbols are
//! in its table.

use crate::harness::{
    counters, free_port, require, rss_json, start_sidecar, wait_quiet, within, SidecarSpec, Sim,
};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;
use tickguard::Reader;

/// Flags of `memory`.
#[derive(clap::Args)]
pub struct MemoryArgs {
    /// The tickguard binary (sidecar and simulator).
    #[arg(long, default_value = "target/release/tickguard")]
    tickguard: PathBuf,
    /// Symbols quoted (1 to 100,000: the simulator generates at most
    /// 100,000 names).
    #[arg(long, default_value_t = 100_000)]
    symbols: usize,
    /// `[state] capacity` of the sidecar (1 to 16,777,216).
    #[arg(long, default_value_t = 100_000)]
    capacity: usize,
    /// Quotes per second (1 to 10,000,000).
    #[arg(long, default_value_t = 400_000.0)]
    rate: f64,
    /// Quotes in all (1 to 3,000,000, sent within 300 s at --rate).
    #[arg(long, default_value_t = 300_000)]
    count: u64,
    /// Receiver idle strategy: spin, yield or sleep.
    #[arg(long, default_value = "sleep", value_parser = crate::harness::IDLES)]
    idle: String,
}

/// Longest the simulator may send for (`--count / --rate`), s.
const SEND_SECONDS: f64 = 300.0;

impl MemoryArgs {
    /// Refuses a flag out of its range, and a send longer than
    /// [`SEND_SECONDS`].
    fn check(&self) -> anyhow::Result<()> {
        let capacity = tickguard::config::CAPACITY;
        within("--symbols", self.symbols, 1..=100_000)?;
        within(
            "--capacity",
            self.capacity,
            capacity.min as usize..=capacity.max as usize,
        )?;
        within("--rate", self.rate, 1.0..=tickguard::simulate::MAX_RATE)?;
        within("--count", self.count, 1..=3_000_000)?;
        let secs = self.count as f64 / self.rate;
        require(secs <= SEND_SECONDS, || {
            format!(
                "--count {} at --rate {} takes {secs:.1} s: at most {SEND_SECONDS} s",
                self.count, self.rate
            )
        })
    }
}

/// The `memory` row.
pub fn memory(a: &MemoryArgs) -> anyhow::Result<Value> {
    a.check()?;
    let dir = tempfile::tempdir()?;
    let ports = [free_port()?, free_port()?];
    let sidecar = start_sidecar(
        &a.tickguard,
        dir.path(),
        &SidecarSpec {
            capacity: a.capacity,
            ports: &ports,
            idle: &a.idle,
            cpu: None,
            stale_ms: 500,
            source_ms: 2_000,
        },
    )?;
    let pid = sidecar.pid();
    let before = rss_json(pid);
    let secs = a.count as f64 / a.rate + 10.0;
    let sim = Sim::spawn(
        &a.tickguard,
        dir.path(),
        "memory",
        &[
            "--line-a".to_string(),
            format!("127.0.0.1:{}", ports[0]),
            "--line-b".into(),
            format!("127.0.0.1:{}", ports[1]),
            "--symbols".into(),
            a.symbols.to_string(),
            "--rate".into(),
            format!("{}", a.rate),
            "--count".into(),
            a.count.to_string(),
            "--duration-s".into(),
            format!("{secs}"),
        ],
    )?;
    let (report, _) = sim.finish(Duration::from_secs_f64(secs + 30.0))?;
    let packets = wait_quiet(
        &sidecar.shm,
        Duration::from_millis(500),
        Duration::from_secs(20),
    );
    let after = rss_json(pid);
    let reader = Reader::open(&sidecar.shm);
    let symbols_in_table = reader.records().len();
    let shm_bytes = std::fs::metadata(&sidecar.shm)?.len();
    let sent: u64 = report["lines"]
        .as_array()
        .map(|l| l.iter().filter_map(|x| x["datagrams_sent"].as_u64()).sum())
        .unwrap_or(0);
    let rss = after["vm_rss_bytes"].as_u64().unwrap_or(0);
    let rss0 = before["vm_rss_bytes"].as_u64().unwrap_or(0);
    let n = symbols_in_table.max(1) as f64;
    let c = counters(&reader);
    drop(sidecar);
    Ok(json!({
        "row": "memory",
        "capacity": a.capacity,
        "symbols_sent": a.symbols,
        "symbols_in_table": symbols_in_table,
        "quotes_sent": report["quotes"],
        "datagrams_sent": sent,
        "datagrams_received": packets,
        "table_full_drops": c["table_full_drops"],
        "kernel_drops": c["kernel_drops"],
        "before_traffic": before,
        "after_traffic": after,
        "rss_bytes": rss,
        "hwm_bytes": after["vm_hwm_bytes"],
        "rss_bytes_per_symbol": rss as f64 / n,
        "rss_growth_bytes_per_symbol": rss.saturating_sub(rss0) as f64 / n,
        "shm_file_bytes": shm_bytes,
        "shm_bytes_per_slot": shm_bytes as f64 / a.capacity.max(1) as f64,
        "sidecar_idle": a.idle,
    }))
}
