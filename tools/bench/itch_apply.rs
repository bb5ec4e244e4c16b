//! The `itch-apply` row: ITCH decode + apply ns per message through
//! `Feed::on_datagram` at 1,000 and 8,000 stocks, read from the estimates
//! criterion saved (`cargo bench --bench itch_apply` first).

use crate::decode_apply::group_median_ns;
use serde_json::{json, Value};
use std::path::PathBuf;

/// Flags.
#[derive(clap::Args)]
pub struct Args {
    /// Criterion's output directory.
    #[arg(long, default_value = "target/criterion")]
    criterion: PathBuf,
}

/// Runs the row.
pub fn run(a: &Args) -> anyhow::Result<Value> {
    let mut rows = Vec::new();
    for stocks in [1_000u32, 8_000] {
        let ns = group_median_ns(&a.criterion, "itch_per_1M_messages", "decode_apply", stocks)?;
        rows.push(json!({ "stocks": stocks, "decode_apply_ns": ns }));
    }
    Ok(json!({ "row": "itch_apply", "per_message": rows }))
}
