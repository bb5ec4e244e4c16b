//! Row 4: from the kernel receive timestamp to the slot being visible in
//! shared memory, at 10% and 80% of a sustained rate: median / p99 / p99.9 /
//! max. The receiver is the real sidecar duty cycle (spinning) on this
//! thread; a paced sender on loopback feeds it. Every symbol is quoted once
//! untimed first, so the histogram holds no symbol's first quote (its slot
//! claimed, its lines first brought into cache).

use hdrhistogram::Histogram;
use serde_json::json;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickguard::config::Config;
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::sidecar::Sidecar;
use tickguard::symbol::Symbol;
use tickguard::time::now_ns;

/// Flags.
#[derive(clap::Args)]
pub struct Args {
    /// The sustained rate the percentages are of, datagrams/s (1 to
    /// 10,000,000).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    sustained: u64,
    /// Seconds per load level (1 to 600).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=600))]
    seconds: u64,
    /// Symbols the quotes are spread over (1 to 1,000,000).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    symbols: u32,
}

fn level(a: &Args, percent: u64) -> anyhow::Result<serde_json::Value> {
    let port = UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port();
    let shm = crate::harness::ShmFile(format!(
        "/dev/shm/tickguard-bench-t2p-{}",
        std::process::id()
    ));
    let config = Config::parse(
        &format!(
            "[state]\ncapacity = {}\n[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{}\"\nidle = \"spin\"\n\
             rcvbuf_bytes = 33554432\n[[feed]]\nname = \"b\"\nkind = \"full\"\nlines = [\"127.0.0.1:{port}\"]\n\
             stale_threshold_ms = 500\nsource_threshold_ms = 2000\n",
            a.symbols.max(16) as usize,
            shm.0
        ),
        "bench",
    )?;
    let mut sidecar = Sidecar::start(&config)?;
    let rate = a.sustained * percent / 100;
    let stop = Arc::new(AtomicBool::new(false));
    let timing = Arc::new(AtomicBool::new(false));
    let (symbols, seconds) = (a.symbols as usize, a.seconds);
    let (stop_tx, timing_tx) = (stop.clone(), timing.clone());
    let sender = std::thread::spawn(move || -> anyhow::Result<u64> {
        let tx = UdpSocket::bind("127.0.0.1:0")?;
        let names: Vec<Symbol> = (0..symbols)
            .map(|i| Symbol::parse(&format!("S{i:07}")).unwrap())
            .collect();
        let mut seq = vec![0u64; symbols];
        // The warm-up: one quote per symbol, then time for the receiver to
        // drain them before anything is recorded.
        for (k, name) in names.iter().enumerate() {
            seq[k] += 1;
            let t = now_ns();
            let mut b = PacketBuilder::new(t);
            b.quote(*name, seq[k], t, 1.0, 1.0001);
            tx.send_to(&b.finish(), ("127.0.0.1", port))?;
        }
        std::thread::sleep(Duration::from_millis(300));
        timing_tx.store(true, Ordering::Release);
        let start = Instant::now();
        let end = start + Duration::from_secs(seconds);
        let mut sent = 0u64;
        while Instant::now() < end {
            let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
            // At most a thousand at a time, the clock read between: a rate
            // the sender cannot reach ends at its time all the same.
            let mut burst = 0;
            while sent < due && burst < 1_000 {
                burst += 1;
                let k = (sent as usize * 7919) % symbols;
                seq[k] += 1;
                let t = now_ns();
                let mut b = PacketBuilder::new(t);
                b.quote(names[k], seq[k], t, 1.0, 1.0001);
                tx.send_to(&b.finish(), ("127.0.0.1", port))?;
                sent += 1;
            }
            std::hint::spin_loop();
        }
        stop_tx.store(true, Ordering::Relaxed);
        Ok(sent)
    });
    let mut hist = Histogram::<u64>::new(3)?;
    let deadline = Instant::now() + Duration::from_secs(a.seconds + 10);
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let timed = timing.load(Ordering::Acquire);
        sidecar.cycle_with(now_ns(), |arrival| {
            if timed {
                let _ = hist.record(now_ns().saturating_sub(arrival));
            }
        });
    }
    let sent = sender
        .join()
        .map_err(|_| anyhow::anyhow!("sender panicked"))??;
    // Drain what is still queued.
    let drain_until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < drain_until {
        sidecar.cycle_with(now_ns(), |arrival| {
            let _ = hist.record(now_ns().saturating_sub(arrival));
        });
    }
    let c = &sidecar.handler().feeds()[0].counters;
    let out = json!({
        "percent_of_sustained": percent,
        "rate_per_s": rate,
        "sent": sent + symbols as u64,
        "warm_up_quotes": symbols,
        "received": c.packets,
        "ticks_lost": c.ticks_lost,
        "median_ns": hist.value_at_quantile(0.5),
        "p99_ns": hist.value_at_quantile(0.99),
        "p999_ns": hist.value_at_quantile(0.999),
        "max_ns": hist.max(),
        "samples": hist.len(),
    });
    drop(sidecar);
    Ok(out)
}

/// Runs the row.
pub fn run(a: &Args) -> anyhow::Result<serde_json::Value> {
    let low = level(a, 10)?;
    let high = level(a, 80)?;
    Ok(json!({
        "row": "tick_to_publish",
        "sustained_per_s": a.sustained,
        "levels": [low, high],
        "note": "kernel receive timestamp (SO_TIMESTAMPNS) to the seqlock publish returning, on the receiver thread",
    }))
}
