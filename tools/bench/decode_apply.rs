//! Row 2: ns per message of decode + apply at 10,000 and 100,000 symbols,
//! against the floor loop in the same criterion bench, read from the
//! estimates criterion saved (`cargo bench --bench decode_apply` first).

use serde_json::json;
use std::path::{Path, PathBuf};

/// Flags.
#[derive(clap::Args)]
pub struct Args {
    /// Criterion's output directory.
    #[arg(long, default_value = "target/criterion")]
    criterion: PathBuf,
}

/// Median ns per message of one benchmark (each iteration is 1,000,000 messages).
fn median_ns(dir: &Path, bench: &str, symbols: u32) -> anyhow::Result<f64> {
    group_median_ns(dir, "per_1M_messages", bench, symbols)
}

/// The oldest criterion estimate a row reports, as measured for this
/// run (`tools/bench/run` runs the benches right before the rows).
const MAX_ESTIMATE_AGE: std::time::Duration = std::time::Duration::from_secs(12 * 3600);

/// [`median_ns`] in criterion group `group`.
pub(crate) fn group_median_ns(
    dir: &Path,
    group: &str,
    bench: &str,
    symbols: u32,
) -> anyhow::Result<f64> {
    let path = dir
        .join(group)
        .join(bench)
        .join(symbols.to_string())
        .join("new/estimates.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| anyhow::anyhow!("{}: {e} (run `cargo bench` first)", path.display()))?;
    // Never an earlier session's numbers as this run's.
    let age = std::fs::metadata(&path)?
        .modified()?
        .elapsed()
        .unwrap_or_default();
    anyhow::ensure!(
        age <= MAX_ESTIMATE_AGE,
        "{}: measured {} h ago, more than {} h: run `cargo bench` first",
        path.display(),
        age.as_secs() / 3600,
        MAX_ESTIMATE_AGE.as_secs() / 3600
    );
    let v: serde_json::Value = serde_json::from_str(&text)?;
    let ns_per_iter = v["median"]["point_estimate"]
        .as_f64()
        .ok_or_else(|| anyhow::anyhow!("{}: no median", path.display()))?;
    Ok(ns_per_iter / 1_000_000.0)
}

/// Runs the row.
pub fn run(a: &Args) -> anyhow::Result<serde_json::Value> {
    let mut rows = Vec::new();
    for (symbols, target) in [(10_000u32, 10.0), (100_000, 20.0)] {
        let floor = median_ns(&a.criterion, "floor", symbols)?;
        let decode = median_ns(&a.criterion, "decode", symbols)?;
        let apply = median_ns(&a.criterion, "decode_apply", symbols)?;
        rows.push(json!({
            "symbols": symbols,
            "floor_ns": floor,
            "decode_ns": decode,
            "decode_apply_ns": apply,
            "decode_apply_over_floor": apply / floor,
            "target_ns": target,
            "met": apply <= target,
        }));
    }
    Ok(json!({ "row": "decode_apply", "per_message": rows }))
}
