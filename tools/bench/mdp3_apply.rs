//! The `mdp3-apply` row: MDP3 decode + apply ns per book entry through the
//! channel at 500 and 5,000 instruments, against decoding alone, the least
//! work any handler does (`mdp3_floor.rs`) and the touch of every cache
//! line of the packets in the same bench, read from
//! the estimates criterion saved (`cargo bench --bench mdp3_apply` first).

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
    let group = "mdp3_per_1M_book_entries";
    let target = 15.0;
    let mut rows = Vec::new();
    for instruments in [500u32, 5_000] {
        let apply = group_median_ns(&a.criterion, group, "decode_apply", instruments)?;
        let decode = group_median_ns(&a.criterion, group, "decode", instruments)?;
        let touch = group_median_ns(&a.criterion, group, "touch", instruments)?;
        let floor = group_median_ns(&a.criterion, group, "floor", instruments)?;
        rows.push(json!({
            "instruments": instruments,
            "decode_apply_ns": apply,
            "decode_ns": decode,
            "decode_apply_over_decode": apply / decode,
            "touch_ns": touch,
            "floor_ns": floor,
            "decode_apply_over_floor": apply / floor,
            "decode_apply_over_touch": apply / touch,
            "target_ns": target,
            "met": apply <= target,
        }));
    }
    Ok(json!({ "row": "mdp3_apply", "per_book_entry": rows }))
}
