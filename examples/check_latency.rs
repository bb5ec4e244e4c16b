//! Measures `Reader::check` from this process against a running sidecar:
//! `cargo run --release --example check_latency -- SHM FEED SYMBOL [CHECKS]`.
//!
//! Each sample times one check including its clock read (the `now` a gateway
//! passes, from a `WallClock`), with the same clock around it; prints median,
//! p99, p99.9, max, the timer's own cost and the seqlock retry rate. Run it
//! while the writer updates the symbol.

use tickguard::time::now_ns;
use tickguard::{Reader, WallClock};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    const USAGE: &str =
        "usage: check_latency SHM FEED SYMBOL [CHECKS] (CHECKS 1 to 100000000, default 1000000)";
    if !(4..=5).contains(&args.len()) {
        eprintln!("{USAGE}");
        std::process::exit(2);
    }
    let n: usize = match args.get(4).map(|s| s.parse::<usize>()) {
        None => 1_000_000,
        Some(Ok(n)) if (1..=100_000_000).contains(&n) => n,
        Some(_) => {
            eprintln!(
                "CHECKS {:?} is not a count from 1 to 100000000; {USAGE}",
                args[4]
            );
            std::process::exit(2);
        }
    };
    let reader = Reader::open(&args[1]);
    let Some(handle) = reader.lookup(&args[2], &args[3]) else {
        eprintln!(
            "{} {} not published ({})",
            args[2],
            args[3],
            reader.health(now_ns())
        );
        std::process::exit(2);
    };
    let clock = WallClock::new();
    std::thread::sleep(std::time::Duration::from_millis(5));
    // The cost of the timer itself, to report alongside.
    let mut empty = Vec::with_capacity(10_000);
    for _ in 0..10_000 {
        let t0 = clock.now_ns();
        empty.push(clock.now_ns().saturating_sub(t0));
    }
    empty.sort_unstable();
    let mut samples = Vec::with_capacity(n);
    let (mut retries, mut ok, mut versions) = (0u64, 0u64, 0u64);
    let mut last_version = 0;
    for _ in 0..n {
        let t0 = clock.now_ns();
        let (v, r) = reader.check_counting(&handle, clock.now_ns());
        let dt = clock.now_ns().saturating_sub(t0);
        samples.push(dt);
        retries += r as u64;
        ok += v.is_ok() as u64;
        if v.version != last_version {
            versions += 1;
            last_version = v.version;
        }
    }
    samples.sort_unstable();
    let pct = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)];
    println!(
        "{{\"checks\":{n},\"median_ns\":{},\"p99_ns\":{},\"p999_ns\":{},\"max_ns\":{},\"retries\":{retries},\"retry_rate\":{:.6},\"ok\":{ok},\"versions_seen\":{versions},\"timer_median_ns\":{}}}",
        pct(0.5),
        pct(0.99),
        pct(0.999),
        samples[samples.len() - 1],
        retries as f64 / n as f64,
        empty[empty.len() / 2]
    );
}
