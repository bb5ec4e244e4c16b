//! What hostile input costs an ITCH feed: order references and held
//! sequences crafted to collide in a hash with a fixed multiplier (the
//! Fibonacci multiplier, which is public), a new session on every datagram,
//! and a Stock Directory of ever new symbols. Each against ordinary input
//! of the same size, in one run.
//!
//!     itch_hostile [N]     # default 50,000
//!
//! Prints the least time of three runs (a new feed each, in turn) of N
//! crafted Add Orders and of N random ones, of N held datagrams with
//! crafted and with random sequences, of N datagrams each starting a
//! session and of N of one session, and the memory N distinct Stock
//! Directory messages leave.

use std::time::Instant;
use tickguard::clock::OffsetMode;
use tickguard::protocol::itch50::feed::{Feed, Settings};
use tickguard::protocol::itch50::message::encode;
use tickguard::protocol::itch50::mold::{PacketBuilder, Session};
use tickguard::protocol::itch50::{sequencer, Side};
use tickguard::symbol::Symbol;

/// The Fibonacci multiplier a fixed hash uses.
const FIB: u64 = 0x9E37_79B9_7F4A_7C15;

/// `FIB`'s inverse modulo 2^64: `j * INV` hashes to `j`, so the first
/// 2^40 values of `j` share the home of every table up to 2^24 slots.
fn inverse(c: u64) -> u64 {
    let mut x = c;
    for _ in 0..6 {
        x = x.wrapping_mul(2u64.wrapping_sub(c.wrapping_mul(x)));
    }
    x
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn feed(max_held: usize) -> Feed {
    Feed::new(Settings {
        sequencing: sequencer::Settings {
            gap_timeout_ns: 3_600_000_000_000,
            max_held,
            join_gap_max: u64::MAX,
        },
        timezone: jiff::tz::TimeZone::UTC,
        offset: OffsetMode::Fixed(0),
        offset_queue: 16,
        orders: 1 << 16,
        max_orders: 1 << 24,
        max_symbols: 1 << 16,
    })
}

const S1: Session = Session(*b"SESSION001");

fn packet(session: Session, seq: u64, m: &[Vec<u8>]) -> Vec<u8> {
    let mut b = PacketBuilder::new(session, seq);
    for m in m {
        b.message(m);
    }
    b.finish()
}

/// The least of three runs of [`time`] on `a` and on `b`, a new feed
/// each, taken in turn (so that neither pays alone for a first run).
fn least(max_held: usize, a: &[Vec<u8>], b: &[Vec<u8>]) -> (f64, f64) {
    (0..3).fold((f64::MAX, f64::MAX), |(ta, tb), _| {
        let ta = ta.min(time(&mut feed(max_held), a));
        (ta, tb.min(time(&mut feed(max_held), b)))
    })
}

/// Seconds to feed `datagrams` to `f`.
fn time(f: &mut Feed, datagrams: &[Vec<u8>]) -> f64 {
    let t = Instant::now();
    for (i, d) in datagrams.iter().enumerate() {
        let _ = f.on_datagram(d, 1_000 + i as u64);
    }
    t.elapsed().as_secs_f64()
}

fn orders(n: u64, key: impl Fn(u64) -> u64) -> Vec<Vec<u8>> {
    let aapl = Symbol::parse("AAPL").unwrap();
    let mut out = vec![packet(S1, 1, &[encode::stock_directory(1, 1, aapl)])];
    for (k, chunk) in (1..=n).collect::<Vec<_>>().chunks(20).enumerate() {
        let m: Vec<Vec<u8>> = chunk
            .iter()
            .map(|&j| encode::add_order(1, 2, key(j), Side::Buy, 1, aapl, 1 + j as u32, None))
            .collect();
        out.push(packet(S1, 2 + 20 * k as u64, &m));
    }
    out
}

fn held(n: u64, seq: impl Fn(u64) -> u64) -> Vec<Vec<u8>> {
    let e = encode::system_event(1, b'Q');
    let mut out = vec![
        packet(S1, 1, std::slice::from_ref(&e)),
        packet(S1, u64::MAX - 1, std::slice::from_ref(&e)),
    ];
    out.extend(
        (1..=n)
            .map(&seq)
            .filter(|q| (2..u64::MAX - 1).contains(q))
            .map(|q| packet(S1, q, std::slice::from_ref(&e))),
    );
    out
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50_000)
        .clamp(1, 10_000_000);
    let inv = inverse(FIB);
    assert_eq!(inv.wrapping_mul(FIB), 1);
    let aapl = Symbol::parse("AAPL").unwrap();

    let (crafted, random) = least(
        1 << 20,
        &orders(n, |j| j.wrapping_mul(inv)),
        &orders(n, splitmix),
    );
    println!(
        "orders: {n} crafted {:.3} s, random {:.3} s, ratio {:.1}",
        crafted,
        random,
        crafted / random
    );

    let max = n as usize + 16;
    let (crafted, random) = least(max, &held(n, |j| j.wrapping_mul(inv)), &held(n, splitmix));
    println!(
        "held: {n} crafted {:.3} s, random {:.3} s, ratio {:.1}",
        crafted,
        random,
        crafted / random
    );

    let add = |j: u64| encode::add_order(1, 2, j, Side::Buy, 1, aapl, 1, None);
    let dir = encode::stock_directory(1, 1, aapl);
    let sessions: Vec<Vec<u8>> = (0..n)
        .map(|j| {
            let mut s = *b"S000000000";
            s[1..].copy_from_slice(format!("{j:09}").as_bytes());
            packet(Session(s), 1, &[dir.clone(), add(j + 1)])
        })
        .collect();
    let same: Vec<Vec<u8>> = (0..n)
        .map(|j| packet(S1, 1 + 2 * j, &[dir.clone(), add(j + 1)]))
        .collect();
    let (changes, ordinary) = least(1 << 20, &sessions, &same);
    println!(
        "sessions: {n} changes {:.1} us each, ordinary {:.2} us each, ratio {:.1}",
        changes * 1e6 / n as f64,
        ordinary * 1e6 / n as f64,
        changes / ordinary
    );

    let mut f = feed(1 << 20);
    let before = rss_kib();
    let stocks: Vec<Vec<u8>> = (0..n)
        .map(|j| {
            let mut name = [b'A'; 8];
            let mut x = j;
            for c in name.iter_mut().rev() {
                *c = b'A' + (x % 26) as u8;
                x /= 26;
            }
            let stock = Symbol::parse(std::str::from_utf8(&name).unwrap()).unwrap();
            encode::stock_directory(1 + (j % 65_535) as u16, 1, stock)
        })
        .collect();
    let datagrams: Vec<Vec<u8>> = stocks
        .chunks(30)
        .enumerate()
        .map(|(k, c)| packet(S1, 1 + 30 * k as u64, c))
        .collect();
    drop(stocks);
    let t = time(&mut f, &datagrams);
    println!(
        "directory: {n} distinct stocks in {:.3} s, {} symbols kept, RSS +{} KiB",
        t,
        f.settled().symbols().count(),
        rss_kib().saturating_sub(before)
    );
}
