//! Runs decode+apply once over a generated stream, for profilers that count
//! instructions (`valgrind --tool=callgrind target/release/examples/apply_profile 10000`).

use tickguard::config::Config;
use tickguard::handler::Handler;
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::symbol::Symbol;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let messages: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let cfg = Config::parse(
        &format!(
            "[state]\ncapacity = {n}\n[[feed]]\nname = \"b\"\nkind = \"delta\"\nlines = [\"127.0.0.1:9\"]\n\
             stale_threshold_ms = 500\nsource_threshold_ms = 2000\n"
        ),
        "profile",
    )
    .expect("config");
    let symbols: Vec<Symbol> = (0..n)
        .map(|i| Symbol::parse(&format!("S{i:07}")).expect("symbol"))
        .collect();
    let mut seq = vec![0u64; n];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut packets = Vec::new();
    let mut i = 0;
    while i < messages {
        let mut b = PacketBuilder::new(i as u64);
        for _ in 0..10 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = (x % n as u64) as usize;
            seq[k] += 1;
            b.quote(symbols[k], seq[k], 1, 1.0, 1.5);
            i += 1;
        }
        packets.push(b.finish());
    }
    // One contiguous buffer, as datagrams arrive in a receive batch or a capture.
    let mut bytes = Vec::new();
    let mut ranges = Vec::new();
    for p in &packets {
        ranges.push((bytes.len(), bytes.len() + p.len()));
        bytes.extend_from_slice(p);
    }
    let packets: Vec<&[u8]> = ranges.iter().map(|&(a, b)| &bytes[a..b]).collect();
    let mut h = Handler::new(&cfg);
    let passes = if std::env::var_os("TWICE").is_some() {
        2
    } else {
        1
    };
    for pass in 0..passes {
        let start = std::time::Instant::now();
        process(&mut h, &packets);
        let el = start.elapsed();
        println!(
            "{} messages, {:.1} ns/message ({})",
            messages,
            el.as_nanos() as f64 / messages as f64,
            ["first pass, symbols inserted", "second pass: duplicates"][pass]
        );
    }
}

/// Kept out of line so instruction counters can attribute it
/// (`--toggle-collect=apply_profile::process`).
#[inline(never)]
fn process(h: &mut Handler, packets: &[&[u8]]) {
    for (t, p) in packets.iter().enumerate() {
        let _ = h.on_datagram(0, p, t as u64);
    }
}
