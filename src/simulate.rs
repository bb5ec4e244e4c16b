//! A provider simulator: publishes SQF on one or two lines.

use crate::cli::SimulateArgs;

/// Runs `tickguard simulate`.
pub fn run(args: &SimulateArgs) -> anyhow::Result<()> {
    let _ = args;
    anyhow::bail!("simulate: not built yet")
}
