//! Runs MDP3 decode + apply over line A of the `mdp3-capture` row's
//! synthetic channel (`tools/bench/mdp3_gen.rs`), for profilers, and
//! prints this thread's CPU time per book entry (steadier than wall time
//! on a shared machine):
//!
//! ```text
//! cargo build --release --example mdp3_profile
//! target/release/examples/mdp3_profile 500 1000000
//! valgrind --tool=callgrind --toggle-collect='mdp3_profile::process' \
//!     target/release/examples/mdp3_profile 500 200000
//! ```
//!
//! Arguments: instruments (500), book entries (1,000,000), passes
//! (3; each into a fresh channel, the least time printed), then a mode:
//! `touch` (only read the packets: the memory reference), `walk` (the
//! validity walk alone), `floor` (the least work any handler does:
//! `tools/bench/mdp3_floor.rs`), `warm` (decode + apply as without a mode,
//! but each batch of 16 packets timed right after every byte of it was
//! read: the packets in cache, as a receive leaves them; wall time, so a
//! quiet machine's) or `ab` (each packet given twice, as lines A and B
//! deliver it).

use tickguard::clock::OffsetMode;
use tickguard::protocol::mdp3::feed::{Feed, Settings};
use tickguard::protocol::mdp3::sequence;

#[path = "../tools/bench/mdp3_floor.rs"]
mod mdp3_floor;
#[path = "../tools/bench/mdp3_gen.rs"]
mod mdp3_gen;

fn arg<T: std::str::FromStr>(n: usize, default: T) -> T {
    std::env::args()
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
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
        f.on_definitions(d).expect("a definition");
    }
    f
}

/// The timed part: every packet into the channel, `copies` times each
/// (2: also the other line's copy, as a channel's two lines deliver it).
#[inline(never)]
fn process(f: &mut Feed, packets: &[(u64, Vec<u8>)], copies: usize) {
    for (t, p) in packets {
        for _ in 0..copies {
            let _ = f.on_incremental(std::hint::black_box(p), *t);
        }
    }
}

/// The validity walk alone (what a copy of the other line costs).
#[inline(never)]
fn walk(packets: &[(u64, Vec<u8>)]) {
    for (_, p) in packets {
        let _ = std::hint::black_box(tickguard::protocol::mdp3::Packet::new_checked(
            std::hint::black_box(&p[..]),
        ));
    }
}

/// This thread's CPU time, ns.
fn cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes only the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn main() {
    let instruments: usize = arg(1, 500);
    let entries: u64 = arg(2, 1_000_000);
    let passes: usize = arg(3, 3);
    let mut channel = mdp3_gen::Channel::new(mdp3_gen::Params::line_a(entries, instruments));
    let defs = channel.definitions();
    let mut packets = Vec::new();
    let stats = channel
        .run(|t, _, p| {
            packets.push((t, p.to_vec()));
            Ok(())
        })
        .expect("generated");
    if std::env::args().nth(4).as_deref() == Some("touch") {
        let bytes: usize = packets.iter().map(|(_, p)| p.len()).sum();
        let mut best = u64::MAX;
        for _ in 0..passes.max(1) {
            let start = cpu_ns();
            let mut sum = 0u64;
            for (_, p) in &packets {
                for c in std::hint::black_box(p).chunks(64) {
                    sum = sum.wrapping_add(u64::from(c[0]));
                }
            }
            std::hint::black_box(sum);
            best = best.min(cpu_ns() - start);
        }
        println!(
            "touch: {bytes} bytes, {:.1} ns CPU per book entry",
            best as f64 / stats.book_entries as f64
        );
        return;
    }
    if std::env::args().nth(4).as_deref() == Some("floor") {
        let index = mdp3_floor::index(&feed(&defs));
        let mut best = u64::MAX;
        let mut odd = 0;
        for _ in 0..passes.max(1) {
            let mut books = mdp3_floor::books(instruments);
            let start = cpu_ns();
            odd = mdp3_floor::floor(&packets, &index, &mut books);
            best = best.min(cpu_ns() - start);
        }
        println!(
            "floor: {:.1} ns CPU per book entry ({odd} out of order)",
            best as f64 / stats.book_entries as f64
        );
        return;
    }
    if std::env::args().nth(4).as_deref() == Some("walk") {
        let mut best = u64::MAX;
        for _ in 0..passes.max(1) {
            let start = cpu_ns();
            walk(&packets);
            best = best.min(cpu_ns() - start);
        }
        println!(
            "walk: {:.1} ns CPU per book entry",
            best as f64 / stats.book_entries as f64
        );
        return;
    }
    if std::env::args().nth(4).as_deref() == Some("warm") {
        let mut best = u64::MAX;
        for _ in 0..passes.max(1) {
            let mut f = feed(&defs);
            let mut total = 0u64;
            for batch in packets.chunks(16) {
                let mut sum = 0u64;
                for (_, p) in batch {
                    for b in p.iter() {
                        sum = sum.wrapping_add(u64::from(*b));
                    }
                }
                std::hint::black_box(sum);
                let start = std::time::Instant::now();
                process(&mut f, batch, 1);
                total += start.elapsed().as_nanos() as u64;
            }
            best = best.min(total);
        }
        println!(
            "warm: {:.1} ns per book entry (packets in cache)",
            best as f64 / stats.book_entries as f64
        );
        return;
    }
    let copies = if std::env::args().nth(4).as_deref() == Some("ab") {
        2
    } else {
        1
    };
    let mut best = u64::MAX;
    for _ in 0..passes.max(1) {
        let mut f = feed(&defs);
        let start = cpu_ns();
        process(&mut f, &packets, copies);
        best = best.min(cpu_ns() - start);
        assert_eq!(f.instruments().len(), instruments);
    }
    println!(
        "{instruments} instruments, {} book entries in {} packets: {:.1} ns CPU per book entry",
        stats.book_entries,
        stats.packets,
        best as f64 / stats.book_entries as f64
    );
}
