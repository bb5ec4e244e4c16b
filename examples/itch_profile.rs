//! Replays a synthetic ITCH day once, for profilers that count instructions:
//!
//!     itch_profile gen  DAY MESSAGES STOCKS   # write the day (BinaryFILE)
//!     itch_profile file DAY                   # replay_file into one feed
//!     itch_profile mold DAY                   # its MoldUDP64 packets through Feed::on_datagram
//!     itch_profile pcap DAY CAPTURE           # write its two-line capture (as itch-capture)
//!     itch_profile capture CAPTURE            # replay that capture (tickguard::replay::replay)
//!     itch_profile live DAY                   # its packets, both lines, into a live sidecar's handler
//!     itch_profile handler DAY                # the same into a replay's handler (no publication)
//!
//! e.g. `valgrind --tool=callgrind target/release/examples/itch_profile file /tmp/day.itch`.
//! `mold` packs the packets in memory before it replays them (10–30
//! messages each, one line). Both print the replay's own wall time to
//! stderr.

use std::path::Path;
use tickguard::clock::OffsetMode;
use tickguard::config::Config;
use tickguard::protocol::itch50::feed::{Feed, Settings};
use tickguard::protocol::itch50::sequencer;
use tickguard::protocol::itch50::synth::{mold_packets, synthetic_day, two_line_capture};
use tickguard::protocol::itch50::Session;

/// 2026-01-05 00:00 in New York, ns since the Unix epoch.
const MIDNIGHT: u64 = 1_767_589_200_000_000_000;
const CONFIG: &str =
    "[state]\ncapacity = 65536\n[[feed]]\nname = \"nasdaq\"\nprotocol = \"itch50\"\n\
    lines = [\"239.2.1.1:26477\", \"239.2.1.2:26477\"]\nstale_threshold_ms = 1500\n\
    source_threshold_ms = 2000\nclock_offset = 0\n";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    let usage = "usage: itch_profile gen DAY MESSAGES STOCKS | file DAY | mold DAY \
        | pcap DAY CAPTURE | capture CAPTURE | live DAY | handler DAY";
    let (Some(mode), Some(day)) = (arg(0), arg(1)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let day = Path::new(day);
    match mode {
        "gen" => {
            let n = arg(2).and_then(|a| a.parse().ok()).unwrap_or(3_000_000);
            let stocks = arg(3).and_then(|a| a.parse().ok()).unwrap_or(8_000);
            let out = std::io::BufWriter::new(std::fs::File::create(day).expect("create"));
            synthetic_day(out, n, stocks, 20_260_105).expect("generate");
        }
        "file" => {
            let config = Config::parse(CONFIG, "profile").expect("config");
            let date = jiff::civil::date(2026, 1, 5);
            let start = std::time::Instant::now();
            let out =
                tickguard::replay::itch50::replay_file(&config, "nasdaq", date, day, &[], |_| {})
                    .expect("replay");
            eprintln!("replayed in {:.3} s", start.elapsed().as_secs_f64());
            let feed = itch(&out.summary);
            println!("next {:?}, unknown {}", feed.next, feed.unknown_orders);
        }
        "pcap" => {
            let config = Config::parse(CONFIG, "profile").expect("config");
            let lines = &config.feeds[0].lines;
            let out = arg(2).expect("a capture path");
            let out = std::io::BufWriter::new(std::fs::File::create(out).expect("create"));
            let input = std::io::BufReader::new(std::fs::File::open(day).expect("open"));
            two_line_capture(input, out, MIDNIGHT, [lines[0], lines[1]], 20_260_105)
                .expect("capture");
        }
        "capture" => {
            let config = Config::parse(CONFIG, "profile").expect("config");
            let mut reader = tickguard::capture::CaptureReader::open(day).expect("open");
            let start = std::time::Instant::now();
            let out = tickguard::replay::replay(&config, &mut reader, &[], |_| {});
            eprintln!("replayed in {:.3} s", start.elapsed().as_secs_f64());
            let feed = itch(&out.summary);
            println!("next {:?}, duplicates {}", feed.next, feed.duplicates);
        }
        "live" | "handler" => {
            let packets = packets(day);
            let shm = format!("/dev/shm/tickguard-itch-profile-{}", std::process::id());
            // Loopback ports free now (never read: the packets are handed
            // over directly), so that two profiles or another user's
            // socket do not collide.
            let bind = || std::net::UdpSocket::bind("127.0.0.1:0").expect("a loopback port");
            let held = [bind(), bind()];
            let [a, b] = held
                .each_ref()
                .map(|s| s.local_addr().expect("its port").port());
            drop(held);
            let config = Config::parse(
                &format!(
                    "[state]\ncapacity = 65536\n[metrics]\nenabled = false\n[sidecar]\n\
                     shm_path = \"{shm}\"\n[[feed]]\nname = \"nasdaq\"\nprotocol = \"itch50\"\n\
                     lines = [\"127.0.0.1:{a}\", \"127.0.0.1:{b}\"]\n\
                     stale_threshold_ms = 60000\nsource_threshold_ms = 60000\n"
                ),
                "profile",
            )
            .expect("config");
            let mut sidecar;
            let mut replay;
            let h = if mode == "live" {
                sidecar = tickguard::sidecar::Sidecar::start(&config).expect("sidecar");
                sidecar.handler_mut()
            } else {
                replay = tickguard::handler::Handler::new(&config);
                &mut replay
            };
            let start = std::time::Instant::now();
            for cycle in packets.chunks(64) {
                let now = cycle[0].0;
                for (t, p) in cycle {
                    for line in 0..2 {
                        let _ = h.on_datagram_line(0, line, p, *t);
                    }
                }
                h.upkeep(now);
            }
            eprintln!("applied in {:.3} s", start.elapsed().as_secs_f64());
            let _ = std::fs::remove_file(&shm);
        }
        "mold" => {
            let packets = packets(day);
            let mut f = Feed::new(Settings {
                sequencing: sequencer::Settings {
                    gap_timeout_ns: 5_000_000,
                    max_held: 100_000,
                    join_gap_max: 10_000,
                },
                timezone: jiff::tz::db().get("America/New_York").expect("zone"),
                offset: OffsetMode::Fixed(0),
                offset_queue: 16,
                orders: 1 << 16,
                max_orders: 1 << 24,
                max_symbols: 1 << 16,
            });
            let start = std::time::Instant::now();
            for (t, p) in &packets {
                let _ = f.on_datagram(p, *t);
            }
            eprintln!("replayed in {:.3} s", start.elapsed().as_secs_f64());
            println!("next {:?}", f.sequencer().next());
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}

/// The day's MoldUDP64 packets (10–30 messages each) with their times.
fn packets(day: &Path) -> Vec<(u64, Vec<u8>)> {
    let input = std::io::BufReader::new(std::fs::File::open(day).expect("open"));
    let mut packets = Vec::new();
    mold_packets(input, Session(*b"20260105BN"), (10, 30), 7, |t, p| {
        packets.push((MIDNIGHT + t, p.to_vec()));
        Ok(())
    })
    .expect("packets");
    packets
}

/// The summary of the `nasdaq` feed.
fn itch(
    summary: &tickguard::replay::Summary,
) -> &tickguard::protocol::itch50::summary::FeedSummary {
    match summary.feeds.get("nasdaq") {
        Some(tickguard::replay::FeedSummary::Itch50(f)) => f,
        _ => panic!("no itch50 feed 'nasdaq' in the summary"),
    }
}
