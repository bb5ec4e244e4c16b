//! `tickguard demo`: simulator and sidecar together on loopback.

use crate::cli::DemoArgs;

/// Runs the demo.
pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let _ = args;
    anyhow::bail!("demo: not built yet")
}
