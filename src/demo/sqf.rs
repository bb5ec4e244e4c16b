//! The demo with an SQF provider: a delta feed on two lines with loss on
//! both, duplicates, reordering, invalid prices, periodic snapshots, a
//! pause every 12 s and a reset after 20 s.

use super::{config, free_ports, say, show, table_slots, verdict_cell, Params, Screen, FEED};
use crate::reader::Reader;
use crate::shm::counter;
use crate::simulate::sqf::SimKind;
use anyhow::Context;
use std::net::SocketAddrV4;

/// Runs the SQF demo until Ctrl-C or `--duration-s`.
pub fn run(args: &Params) -> anyhow::Result<()> {
    let [line_a, line_b] = free_ports()?;
    let config = config(
        args,
        table_slots(args.symbols, 1024),
        &format!(
            r#"
[[feed]]
name = "{FEED}"
kind = "delta"
lines = ["{line_a}", "{line_b}"]
stale_threshold_ms = 500
source_threshold_ms = 2000
clock_offset = "auto"
offset_window_ms = 10000
"#
        ),
    )?;
    let sim_args = provider(args, line_a, line_b);
    crate::simulate::sqf::Simulator::new(&sim_args).context("demo: simulator")?;

    let (report, runs, _) = show(
        &config,
        args,
        "provider",
        move |stop| crate::simulate::sqf::publish(&sim_args, &stop),
        None,
        &mut Table,
    )?;
    let report = report?;
    let (datagrams, cycles) = runs
        .iter()
        .fold((0, 0), |(d, c), r| (d + r.datagrams, c + r.cycles));
    say(&format!(
        "demo ended: provider sent {} quotes in {} datagrams, receiver took {} datagrams in {} cycles",
        report.quotes, report.datagrams, datagrams, cycles
    ))
}

/// The provider's table: it runs to the end.
struct Table;

impl Screen for Table {
    fn render(&mut self, reader: &Reader, now: u64, elapsed_ns: u64, color: bool) -> String {
        render(reader, now, elapsed_ns, color)
    }
}

/// One screen: feed counters, then one row per symbol, worst first.
fn render(reader: &Reader, now: u64, elapsed_ns: u64, color: bool) -> String {
    let c = |id| reader.counter(0, id).unwrap_or(0);
    let offset_ms = reader.offset(0).unwrap_or(0) as f64 / 1e6;
    let mut s = format!(
        "tickguard demo — feed '{FEED}' (delta, lines A+B on loopback) — {:.0} s — {}\n\
         packets {}  rejected {}  ticks lost {}  duplicates {}  line copies {}  kernel drops {}  clock offset {:+.3} ms\n\n",
        elapsed_ns as f64 / 1e9,
        reader.health(now),
        c(counter::PACKETS),
        c(counter::REJECTED),
        c(counter::TICKS_LOST),
        c(counter::DUPLICATES).saturating_sub(c(counter::LINE_COPIES)),
        c(counter::LINE_COPIES),
        c(counter::KERNEL_DROPS),
        offset_ms,
    );
    s.push_str(&format!(
        "{:<9} {:>11} {:>11} {:>8} {:>6} {:>9} {:>10}  {}\n",
        "symbol", "bid", "ask", "last seq", "lost", "silence", "src age", "verdict"
    ));
    let offset = reader.offset(0).unwrap_or(0);
    let decimals = reader.feeds().first().and_then(|f| f.price_decimals());
    // Each slot judged with the offset and status read in force with it,
    // as a gateway's check reads them.
    let mut rows: Vec<_> = reader
        .judged(now)
        .into_iter()
        .filter_map(|(r, reasons)| Some((r.symbol?, r, reasons)))
        .collect();
    rows.sort_by_cached_key(|(sym, _, reasons)| {
        (
            std::cmp::Reverse(reasons.bits().count_ones()),
            sym.to_string(),
        )
    });
    for (sym, r, reasons) in rows {
        let st = &r.state;
        let (bid, ask, age) = match st.price {
            Some(p) => (
                crate::state::Price::F64(p.bid).show(decimals),
                crate::state::Price::F64(p.ask).show(decimals),
                format!(
                    "{:.0} ms",
                    (now as i128 - p.source_time as i128 - offset) as f64 / 1e6
                ),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let silence = format!("{:.0} ms", now.saturating_sub(st.last_alive) as f64 / 1e6);
        let verdict = verdict_cell(reasons, color);
        s.push_str(&format!(
            "{:<9} {:>11} {:>11} {:>8} {:>6} {:>9} {:>10}  {verdict}\n",
            sym.to_string(),
            bid,
            ask,
            st.seq.last_seq,
            st.seq.ticks_lost,
            silence,
            age
        ));
    }
    s.push_str("\nCtrl-C to stop.");
    s
}

/// The provider the SQF demo runs: lines `line_a` and `line_b`, for as
/// long as the demo (`--duration-s`; 0, until Ctrl-C).
fn provider(
    args: &Params,
    line_a: SocketAddrV4,
    line_b: SocketAddrV4,
) -> crate::simulate::sqf::Params {
    crate::simulate::sqf::Params {
        line_a,
        line_b: Some(line_b),
        source: std::net::Ipv4Addr::LOCALHOST,
        symbols: args.symbols.max(1),
        names: Vec::new(),
        rate: args.rate,
        batch: 4,
        kind: SimKind::Delta,
        loss_a: 2.0,
        loss_b: 2.0,
        duplicate: 1.0,
        reorder: 0.5,
        invalid: 0.3,
        heartbeat_ms: 200,
        snapshot_ms: 3000,
        pause_every_s: 12,
        pause_ms: 1500,
        reset_after_s: 20,
        clock_skew_ms: -35,
        duration_s: args.duration_s,
        count: 0,
        seed: args.seed,
        report: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The provider runs as long as the demo: a `--duration-s` past the
    /// simulator's own bound for a run until Ctrl-C (a week) is not cut
    /// there, and 0 stays "until Ctrl-C".
    #[test]
    fn the_provider_runs_as_long_as_the_demo() {
        let [a, b] = free_ports().unwrap();
        for duration_s in [0.0, 5.0, 1_000_000.0] {
            let args = Params {
                symbols: 4,
                rate: 100.0,
                duration_s,
                shm: "unused".into(),
                seed: 1,
            };
            let p = provider(&args, a, b);
            assert_eq!(p.duration_s, duration_s);
            assert_eq!((p.line_a, p.line_b), (a, Some(b)));
        }
    }
}
