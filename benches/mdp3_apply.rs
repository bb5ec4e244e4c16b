//! CME MDP3 decode + apply per book entry through the channel
//! (`Feed::on_incremental`), on line A of the `mdp3-capture` row's
//! synthetic channel (`tools/bench/mdp3_gen.rs`: events of 1–24 book
//! entries, packets of 200–1,400 bytes, events spanning packets; here
//! nothing lost), built up front in memory, at 500 and 5,000 instruments.
//!
//! Every timed iteration replays 1,000,000 book entries (and the trade and
//! volume entries between them) into a fresh channel whose definitions
//! were read untimed, so the time criterion prints per iteration in ms is
//! the cost per book entry in ns. `decode` is the reference in the same
//! run: the validity walk of every packet and every field of every entry
//! read, nothing applied; `floor`, the least work any handler does (the
//! validity walk, and each 46 entry's instrument found, RptSeq compared
//! and level written: `tools/bench/mdp3_floor.rs`); and `touch`, the floor
//! of any pass over the same packets: one byte of each 64 (each cache
//! line) of every packet read.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::{Duration, Instant};
use tickguard::clock::OffsetMode;
use tickguard::protocol::mdp3::feed::{Feed, Settings};
use tickguard::protocol::mdp3::{sequence, Body, Packet};

#[path = "../tools/bench/mdp3_floor.rs"]
mod mdp3_floor;
#[path = "../tools/bench/mdp3_gen.rs"]
mod mdp3_gen;

const BOOK_ENTRIES: u64 = 1_000_000;

/// Datagrams with their arrival times (ns since the epoch).
type Timed = Vec<(u64, Vec<u8>)>;

/// The definitions, and line A's packets with their arrival times.
fn channel(instruments: usize) -> (Vec<Vec<u8>>, Timed) {
    let mut c = mdp3_gen::Channel::new(mdp3_gen::Params::line_a(BOOK_ENTRIES, instruments));
    let defs = c.definitions();
    let mut packets = Vec::new();
    c.run(|t, _, p| {
        packets.push((t, p.to_vec()));
        Ok(())
    })
    .unwrap();
    (defs, packets)
}

fn feed(defs: &[Vec<u8>]) -> Feed {
    let mut f = Feed::new(Settings {
        sequencing: sequence::Settings {
            gap_timeout_ns: 5_000_000,
            restart_margin: 10_000,
        },
        max_cached: 1_000_000,
        max_instruments: 100_000,
        default_depth: 10,
        default_implied_depth: 2,
        offset: OffsetMode::Fixed(0),
        offset_queue: 16,
    });
    for d in defs {
        f.on_definitions(d).unwrap();
    }
    f
}

/// Every field of every entry, summed.
fn decode(p: &[u8]) -> u64 {
    let Ok(packet) = Packet::new_checked(p) else {
        return 0;
    };
    let mut sum = u64::from(packet.seq_num()) ^ packet.sending_time();
    for m in packet.messages() {
        if let Body::Incremental(inc) = m.body() {
            sum = sum.wrapping_add(inc.transact_time());
            sum ^= u64::from(inc.match_event_indicator().0);
            for e in inc.entries() {
                sum = sum.wrapping_add(e.security_id() as u64 ^ u64::from(e.rpt_seq()));
                if let Some(b) = e.book() {
                    sum = sum.wrapping_add(b.price().unwrap_or(0) as u64);
                    sum ^= b.size().unwrap_or(0) ^ b.orders().unwrap_or(0) as u64;
                    sum = sum.wrapping_add(u64::from(b.level()))
                        ^ u64::from(b.action().code())
                        ^ u64::from(b.entry_type().code());
                }
            }
        }
    }
    sum
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("mdp3_per_1M_book_entries");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Elements(BOOK_ENTRIES));
    for instruments in [500usize, 5_000] {
        let (defs, packets) = channel(instruments);
        let last = packets.len() as u32;
        group.bench_with_input(
            BenchmarkId::new("decode", instruments),
            &packets,
            |b, ps| {
                b.iter(|| {
                    let mut sum = 0u64;
                    for (_, p) in ps {
                        sum = sum.wrapping_add(decode(black_box(p)));
                    }
                    sum
                })
            },
        );
        let index = mdp3_floor::index(&feed(&defs));
        group.bench_with_input(BenchmarkId::new("floor", instruments), &packets, |b, ps| {
            b.iter_batched_ref(
                || mdp3_floor::books(instruments),
                |books| mdp3_floor::floor(ps, &index, books),
                criterion::BatchSize::LargeInput,
            )
        });
        group.bench_with_input(BenchmarkId::new("touch", instruments), &packets, |b, ps| {
            b.iter(|| {
                let mut sum = 0u64;
                for (_, p) in ps {
                    for line in black_box(p).chunks(64) {
                        sum = sum.wrapping_add(u64::from(line[0]));
                    }
                }
                sum
            })
        });
        group.bench_with_input(
            BenchmarkId::new("decode_apply", instruments),
            &packets,
            |b, ps| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let mut f = feed(&defs);
                        let start = Instant::now();
                        for (t, p) in ps {
                            let _ = f.on_incremental(black_box(p), *t);
                        }
                        total += start.elapsed();
                        assert_eq!(f.sequence().high(), Some(u64::from(last) + 1));
                        assert_eq!(f.instruments().len(), instruments);
                    }
                    total
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
