//! ITCH 5.0 decode + apply (books included) through `Feed::on_datagram`, on
//! MoldUDP64 packets of a synthetic day (10–30 messages each) built up
//! front in memory, at 1,000 and 8,000 stocks.
//!
//! Every timed iteration replays the whole day of 1,000,000 messages into a
//! fresh feed (made untimed), so the time criterion prints per iteration in
//! ms is the cost per message in ns.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::{Duration, Instant};
use tickguard::clock::OffsetMode;
use tickguard::protocol::itch50::feed::{Feed, Settings};
use tickguard::protocol::itch50::sequencer;
use tickguard::protocol::itch50::synth::{mold_packets, synthetic_day};
use tickguard::protocol::itch50::Session;

const MESSAGES: u64 = 1_000_000;
/// 2026-01-05 00:00 in New York, ns since the Unix epoch.
const MIDNIGHT: u64 = 1_767_589_200_000_000_000;

/// The day's packets, each with its arrival time (ns since the epoch).
fn packets(stocks: usize) -> Vec<(u64, Vec<u8>)> {
    let mut day = Vec::new();
    synthetic_day(&mut day, MESSAGES, stocks, 7).unwrap();
    let mut out = Vec::new();
    mold_packets(
        day.as_slice(),
        Session(*b"20260105BN"),
        (10, 30),
        7,
        |t, p| {
            out.push((MIDNIGHT + t, p.to_vec()));
            Ok(())
        },
    )
    .unwrap();
    out
}

fn feed() -> Feed {
    Feed::new(Settings {
        sequencing: sequencer::Settings {
            gap_timeout_ns: 5_000_000,
            max_held: 100_000,
            join_gap_max: 10_000,
        },
        timezone: jiff::tz::db().get("America/New_York").unwrap(),
        offset: OffsetMode::Fixed(0),
        offset_queue: 16,
        orders: 1 << 16,
        max_orders: 1 << 24,
        max_symbols: 1 << 16,
    })
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("itch_per_1M_messages");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Elements(MESSAGES));
    for stocks in [1_000usize, 8_000] {
        let day = packets(stocks);
        group.bench_with_input(BenchmarkId::new("decode_apply", stocks), &day, |b, day| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut f = feed();
                    let start = Instant::now();
                    for (t, p) in day {
                        let _ = f.on_datagram(black_box(p), *t);
                    }
                    total += start.elapsed();
                    assert_eq!(f.sequencer().next(), Some(MESSAGES + 1));
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
