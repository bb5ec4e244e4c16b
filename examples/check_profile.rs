//! Runs `Reader::check` round-robin over 1,000 symbols of a quiet
//! publication in /dev/shm (a fixed `now`: the clock read is not in it),
//! for profilers, and prints the time per check:
//!
//! ```text
//! cargo build --release --example check_profile
//! target/release/examples/check_profile 20000000
//! valgrind --tool=callgrind --toggle-collect='check_profile::run_checks' \
//!     target/release/examples/check_profile 200000 cg
//! ```
//!
//! Arguments: checks (20,000,000), then `cg` to print no time (under a
//! profiler). The timed loop also runs once before, 10 checks a symbol,
//! as a warm-up that asserts every answer is ok.
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;
use tickguard::config::Protocol;
use tickguard::reader::ReaderOptions;
use tickguard::shm::{FeedInfo, Publication};
use tickguard::state::{FeedKind, FeedStatus, Level, StateTable, Top};
use tickguard::symbol::Symbol;
use tickguard::time::now_ns;
use tickguard::verdict::Thresholds;
use tickguard::{Handle, Reader};

const S: u64 = 1_000_000_000;
const SYMBOLS: usize = 1_000;

#[inline(never)]
fn run_checks(reader: &Reader, handles: &[Handle], now: u64, n: usize) -> (u64, u64) {
    let (mut ok, mut vsum) = (0u64, 0u64);
    let mut i = 0usize;
    for _ in 0..n {
        let v = reader.check(black_box(&handles[i]), now);
        ok += v.is_ok() as u64;
        vsum = vsum.wrapping_add(v.version);
        i += 1;
        if i == handles.len() {
            i = 0;
        }
    }
    (ok, vsum)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000_000);
    let mode = args.get(2).map(String::as_str).unwrap_or("time");
    let shm = std::path::PathBuf::from(format!("/dev/shm/tg-checkcost-{}", std::process::id()));
    let now = now_ns();
    let feeds = [FeedInfo::new(
        "itch",
        FeedKind::Delta,
        vec!["239.1.1.1:30001".parse().unwrap()],
        Protocol::Itch50,
    )];
    let p = Arc::new(Publication::create(&shm, 0o640, SYMBOLS, &feeds, now, 1_000_000).unwrap());
    let mut table = StateTable::shared(p.clone());
    let th = Thresholds {
        stale_ns: 3600 * S,
        source_ns: 3600 * S,
    };
    let names: Vec<String> = (0..SYMBOLS).map(|i| format!("S{i:04}")).collect();
    for (k, name) in names.iter().enumerate() {
        let id = table.insert(0, Symbol::parse(name).unwrap(), th).unwrap();
        table.slots()[id as usize].write_top(&Top {
            bid: Some(Level {
                price: 100 + k as i64,
                size: 1,
            }),
            ask: Some(Level {
                price: 101 + k as i64,
                size: 1,
            }),
            exponent: -4,
            ..Top::default()
        });
    }
    table.set_feed_status(
        0,
        &FeedStatus {
            last_alive: now,
            source_watermark: now,
            ..FeedStatus::default()
        },
    );
    p.ready();
    p.heartbeat(now);

    let reader = Reader::open_with(
        &shm,
        ReaderOptions {
            dead_after_ns: 600_000_000_000,
            owner: None,
        },
    );
    let handles: Vec<Handle> = names
        .iter()
        .map(|s| reader.lookup("itch", s).unwrap())
        .collect();
    let t = black_box(now + 1_000_000);
    // Warm-up (and a sanity check: every check answers ok).
    let (ok, _) = run_checks(&reader, &handles, t, handles.len() * 10);
    assert_eq!(
        ok as usize,
        handles.len() * 10,
        "not all ok: {}",
        reader.check(&handles[0], t).reasons
    );
    let t0 = Instant::now();
    let (ok, vsum) = run_checks(&reader, &handles, t, n);
    let dt = t0.elapsed();
    assert_eq!(ok as usize, n);
    if mode == "time" {
        println!(
            "{:.3} ns/check  (n={n}, {:.3} s, vsum={vsum})",
            dt.as_nanos() as f64 / n as f64,
            dt.as_secs_f64()
        );
    } else {
        println!("n={n} vsum={vsum}");
    }
    drop(reader);
    drop(table);
    drop(p);
    let _ = std::fs::remove_file(&shm);
}
