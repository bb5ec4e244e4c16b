//! The `itch-check-latency` row: `Reader::check` from this process on an
//! ITCH symbol while `tickguard run` applies a simulated ITCH venue's order
//! flow for it, next to the same measurement on an SQF symbol in the same
//! run (`check-latency`'s method and phases, without its Unix-socket
//! reference). An ITCH check reads two seqlocks: the symbol's slot and the
//! feed's status (suspect, closed, liveness, watermark).
//!
//! An ITCH slot is written once per datagram for each symbol its messages
//! touched, so with one symbol slot updates/s are datagrams/s: the first
//! phase offers `--rate` messages/s at `--batch` a packet, the full-speed
//! phase sends one message a packet as fast as the venue goes (offered
//! [`ITCH_FULL_RATE`]; SQF's full speed is calibrated as in `check-latency`).

use crate::check_latency::{
    calibrate, loaded_phase, sim_args, summary, timer_costs, wait_lookup, LatencyArgs,
};
use crate::harness::{counters, free_port, start_sidecar_with, SidecarSpec, Sim};
use serde_json::{json, Value};
use std::time::Duration;
use tickguard::WallClock;

/// Messages/s offered to the ITCH full-speed phase (one a datagram), and
/// the most its first phase is offered: about what one venue process
/// generates and sends here (it makes every message owed in one poll, so
/// offering more only makes its polls longer).
const ITCH_FULL_RATE: f64 = 200_000.0;

/// One protocol's two phases against its own sidecar.
fn phases(a: &LatencyArgs, itch: bool) -> anyhow::Result<Value> {
    let dir = tempfile::tempdir()?;
    let port = free_port()?;
    let keys = if itch {
        "protocol = \"itch50\""
    } else {
        "kind = \"full\""
    };
    let sidecar = start_sidecar_with(
        &a.tickguard,
        dir.path(),
        &SidecarSpec {
            capacity: 1024,
            ports: &[port],
            idle: &a.idle,
            cpu: (!a.no_pin).then_some(a.sidecar_cpu),
            stale_ms: 60_000,
            source_ms: 60_000,
        },
        keys,
    )?;
    let shm = sidecar.shm.clone();
    // The calibration symbol, published once before anything is timed.
    let name = if itch { "ICALIB" } else { "CALIB" };
    let sim = Sim::spawn(
        &a.tickguard,
        dir.path(),
        "first",
        &sim_args(itch, port, name, 1_000.0, 1, 5.0, 10),
    )?;
    sim.finish(Duration::from_secs(15))?;
    let (reader, handle) = wait_lookup(&shm, name)?;
    let (tag_1m, tag_full) = if itch {
        ("IONEM", "IFULL")
    } else {
        ("ONEM", "FULLSPD")
    };
    let (at_1m, _) = loaded_phase(
        itch,
        a,
        dir.path(),
        &shm,
        port,
        tag_1m,
        if itch {
            a.rate.min(ITCH_FULL_RATE)
        } else {
            a.rate
        },
        a.batch,
        None,
    )?;
    let full_batch = if itch { 1 } else { a.full_batch };
    let full_rate = match (a.full_rate > 0.0, itch) {
        (true, _) => a.full_rate,
        // One message a datagram: offered faster than one venue sends.
        (false, true) => ITCH_FULL_RATE,
        (false, false) => calibrate(false, full_batch, a, dir.path(), port, &reader, &handle)?,
    };
    let (full, _) = loaded_phase(
        itch,
        a,
        dir.path(),
        &shm,
        port,
        tag_full,
        full_rate,
        full_batch,
        None,
    )?;
    let c = counters(&reader);
    drop(sidecar);
    Ok(json!({
        "at_1m": at_1m,
        "full_speed": full,
        "full_speed_batch": full_batch,
        "sidecar_counters": c,
    }))
}

/// Runs the row.
pub fn run(a: &LatencyArgs) -> anyhow::Result<Value> {
    a.check()?;
    let pinned = !a.no_pin && tickguard::sys::pin_to_cpu(a.reader_cpu).is_ok();
    let clock = WallClock::new();
    std::thread::sleep(Duration::from_millis(5));
    let _ = clock.now_ns();
    let [timer, _, _] = timer_costs(&clock, 1_000_000);
    let sqf = phases(a, false)?;
    let itch = phases(a, true)?;
    Ok(json!({
        "row": "itch_check_latency",
        "timing": "as check-latency: WallClock::now_ns() around reader.check_counting(&h, clock.now_ns()); timer_median_ns is two readings back to back",
        "timer_median_ns": timer.value_at_quantile(0.5),
        "timer": summary(&timer),
        "itch": itch,
        "sqf": sqf,
        "setup": {
            "sidecar_idle": a.idle,
            "pinned": pinned,
            "duty_pct": a.duty_pct,
        },
    }))
}
