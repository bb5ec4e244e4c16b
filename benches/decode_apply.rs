//! Decode and decode+apply over a generated in-memory stream of 1,000,000
//! messages, at 1,000, 10,000 and 100,000 symbols.
//!
//! Every timed iteration processes exactly 1,000,000 messages, so the time
//! criterion prints per iteration in ms is the cost per message in ns.
//!
//! - `floor`: walks the message headers and writes one word per symbol into a
//!   direct-mapped array: what any handler must at least do.
//! - `decode`: full packet validation plus reading every field.
//! - `decode_apply`: the handler's real path — validate, clock offset, slot
//!   lookup, rules, seqlock publish — on a table already holding every symbol
//!   (a warm-up stream with earlier sequences runs first, untimed).

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::{Duration, Instant};
use tickguard::config::Config;
use tickguard::handler::Handler;
use tickguard::protocol::sqf::{Message, Packet, PacketBuilder};
use tickguard::symbol::Symbol;

const MESSAGES: usize = 1_000_000;
const PER_PACKET: usize = 10;

/// Packets laid end to end in one buffer, with their ranges.
struct Stream {
    bytes: Vec<u8>,
    packets: Vec<(usize, usize)>,
    /// Quotes in it (the rest are heartbeats).
    quotes: u64,
}

impl Stream {
    fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.packets.iter().map(|&(a, b)| &self.bytes[a..b])
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Two streams over `n` symbols: a warm-up that gives every symbol its first
/// sequences, then the timed stream continuing them (95% quotes, 5% heartbeats,
/// symbols drawn uniformly at random).
fn streams(n: usize) -> (Stream, Stream) {
    let symbols: Vec<Symbol> = (0..n)
        .map(|i| Symbol::parse(&format!("S{i:07}")).unwrap())
        .collect();
    let mut seq = vec![0u64; n];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut build = |messages: usize, sequential: bool| {
        let mut s = Stream {
            bytes: Vec::new(),
            packets: Vec::new(),
            quotes: 0,
        };
        let mut i = 0;
        while i < messages {
            let mut b = PacketBuilder::new(1_000 + i as u64);
            for _ in 0..PER_PACKET.min(messages - i) {
                let k = if sequential {
                    i % n
                } else {
                    (rng.next() % n as u64) as usize
                };
                if rng.next().is_multiple_of(20) {
                    b.heartbeat(symbols[k], seq[k] + 1);
                } else {
                    seq[k] += 1;
                    s.quotes += 1;
                    b.quote(
                        symbols[k],
                        seq[k],
                        1_000,
                        1.0 + k as f64 * 1e-6,
                        1.0001 + k as f64 * 1e-6,
                    );
                }
                i += 1;
            }
            let p = b.finish();
            let start = s.bytes.len();
            s.bytes.extend_from_slice(&p);
            s.packets.push((start, s.bytes.len()));
        }
        s
    };
    let warm = build(n.max(PER_PACKET), true);
    let timed = build(MESSAGES, false);
    (warm, timed)
}

fn config(capacity: usize) -> Config {
    Config::parse(
        &format!(
            "[state]\ncapacity = {capacity}\n[[feed]]\nname = \"b\"\nkind = \"delta\"\nlines = [\"127.0.0.1:9\"]\n\
             stale_threshold_ms = 500\nsource_threshold_ms = 2000\nclock_offset = \"auto\"\n"
        ),
        "bench",
    )
    .unwrap()
}

fn floor(stream: &Stream, table: &mut [u64]) {
    let mask = table.len() - 1;
    for p in stream.iter() {
        let mut at = 16;
        while at + 4 <= p.len() {
            let len = u16::from_le_bytes([p[at], p[at + 1]]) as usize;
            if len < 4 || at + 24 > p.len() {
                break;
            }
            let key = u64::from_le_bytes(p[at + 4..at + 12].try_into().unwrap());
            let seq = u64::from_le_bytes(p[at + 16..at + 24].try_into().unwrap());
            table[(key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize & mask] = seq;
            at += len;
        }
    }
}

fn decode(stream: &Stream) -> u64 {
    let mut acc = 0u64;
    for p in stream.iter() {
        let Ok(packet) = Packet::new_checked(p) else {
            continue;
        };
        acc = acc.wrapping_add(packet.send_time());
        for m in packet.messages() {
            acc = acc.wrapping_add(match m {
                Message::Quote(q) | Message::Snapshot(q) => {
                    q.symbol().key()
                        ^ q.sequence()
                        ^ q.source_time()
                        ^ q.bid().to_bits()
                        ^ q.ask().to_bits()
                }
                Message::Heartbeat(h) => h.symbol().key() ^ h.next_expected(),
                Message::Unknown { code } => code as u64,
            });
        }
    }
    acc
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("per_1M_messages");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8))
        .warm_up_time(Duration::from_secs(2));
    group.throughput(Throughput::Elements(MESSAGES as u64));
    for n in [1_000usize, 10_000, 100_000] {
        let (warm, timed) = streams(n);
        let cfg = config(n);

        group.bench_with_input(BenchmarkId::new("floor", n), &timed, |b, s| {
            let mut table = vec![0u64; (2 * n).next_power_of_two()];
            b.iter(|| {
                floor(s, &mut table);
                black_box(table[0])
            })
        });

        group.bench_with_input(BenchmarkId::new("decode", n), &timed, |b, s| {
            b.iter(|| black_box(decode(s)))
        });

        group.bench_with_input(BenchmarkId::new("decode_apply", n), &timed, |b, s| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut h = Handler::new(&cfg);
                    for (i, p) in warm.iter().enumerate() {
                        let _ = h.on_datagram(0, p, i as u64);
                    }
                    let start = Instant::now();
                    for (i, p) in s.iter().enumerate() {
                        let _ = h.on_datagram(0, black_box(p), 1_000_000 + i as u64);
                    }
                    total += start.elapsed();
                    // Applied, not only read: every quote taken in order.
                    let c = &h.feeds()[0].counters;
                    assert_eq!(c.quotes, warm.quotes + s.quotes);
                    assert_eq!((c.ticks_lost, c.duplicates, c.rejected), (0, 0, 0));
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
