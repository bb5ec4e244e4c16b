//! Seeded generator of the replay fixtures in `fixtures/`.
//!
//! `cargo run --bin tickguard-fixtures -- fixtures` rewrites, byte for byte:
//! the scenario capture in every capture format the replay reads, the checks
//! file, the configuration, the golden outputs (`*.expected.jsonl`,
//! `*.summary.json`) produced by replaying each capture, and the golden
//! `replay --explain` outputs of the µs Ethernet capture (`*.explain-*.txt`,
//! `*.at-*.txt`). The scenario is
//! described in `fixtures/README.md`; the same seed always gives the same bytes.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::capture::CaptureReader;
use tickguard::config::Config;
use tickguard::explain::sqf::Forensics;
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::replay::{answer_json, parse_checks, replay, replay_with, Check};
use tickguard::symbol::Symbol;

const SEED: u64 = 0x5146_2d76_312d_6669; // "SQF-v1-fi"
/// 2026-01-05 09:00:00 UTC, ns since the Unix epoch (local clock).
const T0: u64 = 1_767_603_600_000_000_000;
const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000 * MS;
/// Scenario length, ns.
const DURATION: u64 = 6 * SECOND;

const CONFIG: &str = r#"# Fixture configuration: one full feed and one delta feed, each on lines A and B.
[state]
capacity = 64

[[feed]]
name = "fx"
kind = "full"
lines = ["239.1.1.1:30001", "239.1.1.2:30002"]
stale_threshold_ms = 500
source_threshold_ms = 1000
clock_offset = "auto"
offset_window_ms = 2000

[[feed.symbol]]
name = "XAUUSD"
stale_threshold_ms = 1500
source_threshold_ms = 2500

[[feed]]
name = "eq"
kind = "delta"
lines = ["239.2.2.1:31001", "239.2.2.2:31002"]
stale_threshold_ms = 400
source_threshold_ms = 800
clock_offset = -40000000
"#;

/// splitmix64: small, seedable, good enough for test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A datagram on the wire: local arrival time, destination, payload.
#[derive(Clone)]
struct Sent {
    arrival: u64,
    dst: SocketAddrV4,
    payload: Vec<u8>,
}

fn addr(s: &str) -> SocketAddrV4 {
    s.parse().expect("fixture address")
}

fn sym(s: &str) -> Symbol {
    Symbol::parse(s).expect("fixture symbol")
}

/// One provider feed being simulated: per-symbol sequence and price.
struct Provider {
    symbols: Vec<(Symbol, u64, f64)>,
    /// Provider clock minus local clock, ns.
    skew: i64,
    line_a: SocketAddrV4,
    line_b: SocketAddrV4,
}

impl Provider {
    fn provider_time(&self, local: u64) -> u64 {
        (local as i64 + self.skew) as u64
    }
}

/// Sends `payload` on both lines with independent loss, jitter, and the
/// odd duplicate and reordering on line B.
fn send_both(
    out: &mut Vec<Sent>,
    rng: &mut Rng,
    p: &Provider,
    local: u64,
    payload: Vec<u8>,
    loss_pct: u64,
) {
    for (i, line) in [p.line_a, p.line_b].into_iter().enumerate() {
        if rng.chance(loss_pct) {
            continue;
        }
        // 30–300 µs on line A, 200–900 µs on line B: B usually arrives second.
        let delay = if i == 0 {
            30_000 + rng.below(270_000)
        } else {
            200_000 + rng.below(700_000)
        };
        out.push(Sent {
            arrival: local + delay,
            dst: line,
            payload: payload.clone(),
        });
        if i == 1 && rng.chance(2) {
            out.push(Sent {
                arrival: local + delay + 50_000,
                dst: line,
                payload: payload.clone(),
            });
        }
    }
}

fn scenario() -> Vec<Sent> {
    let mut rng = Rng(SEED);
    let mut out = Vec::new();

    // Feed fx (full): provider clock 120 ms behind local.
    let mut fx = Provider {
        symbols: vec![
            (sym("EURUSD"), 0, 1.0850),
            (sym("GBPUSD"), 0, 1.2710),
            (sym("USDJPY"), 0, 148.20),
            (sym("XAUUSD"), 0, 2040.0),
        ],
        skew: -120 * MS as i64,
        line_a: addr("239.1.1.1:30001"),
        line_b: addr("239.1.1.2:30002"),
    };
    // Feed eq (delta): provider clock 40 ms ahead of local (configured as a fixed offset of -40 ms).
    let mut eq = Provider {
        symbols: vec![
            (sym("AAPL"), 100, 190.10),
            (sym("MSFT"), 500, 410.25),
            (sym("ES.H6"), 0, 4800.0),
        ],
        skew: 40 * MS as i64,
        line_a: addr("239.2.2.1:31001"),
        line_b: addr("239.2.2.2:31002"),
    };

    let step = 20 * MS;
    let mut local = T0;
    let mut tick = 0u64;
    while local < T0 + DURATION {
        let phase = local - T0;
        // ---- fx: one packet per 20 ms with quotes for the symbols that tick now.
        let pt = fx.provider_time(local);
        let mut b = PacketBuilder::new(pt);
        for (i, (s, seq, px)) in fx.symbols.iter_mut().enumerate() {
            let name = s.to_string();
            // GBPUSD goes completely silent from 2.0 s to 3.0 s: no quotes, no heartbeats.
            if name == "GBPUSD" && (2 * SECOND..3 * SECOND).contains(&phase) {
                continue;
            }
            // USDJPY quotes every 100 ms; heartbeats in between at 60 ms.
            if name == "USDJPY" && !tick.is_multiple_of(5) {
                if tick % 5 == 3 {
                    b.heartbeat(*s, *seq + 1);
                }
                continue;
            }
            // XAUUSD quotes every 200 ms.
            if name == "XAUUSD" && tick % 10 != i as u64 {
                continue;
            }
            *seq += 1;
            *px *= 1.0 + (rng.below(21) as f64 - 10.0) * 1e-5;
            let spread = *px * 1e-4;
            let mut source_time = pt - 200_000;
            // XAUUSD: from 3.5 s the provider re-sends a price made 3 s earlier (stale at source).
            if name == "XAUUSD" && (3_500 * MS..4_500 * MS).contains(&phase) {
                source_time -= 3 * SECOND;
            }
            let (bid, ask) = if name == "EURUSD" && (1_500 * MS..1_560 * MS).contains(&phase) {
                (*px + spread, *px - spread) // crossed: invalid price
            } else if name == "EURUSD" && phase == 4_000 * MS {
                (f64::NAN, *px)
            } else {
                (*px - spread / 2.0, *px + spread / 2.0)
            };
            b.quote(*s, *seq, source_time, bid, ask);
        }
        // A message type this decoder does not know, now and then.
        if tick % 50 == 7 {
            b.message(b'X', &[0xa5; 12]);
        }
        // USDJPY: at 2.5 s the provider sends 3 quotes that both lines lose;
        // the next heartbeat reveals the gap.
        if phase == 2_500 * MS {
            fx.symbols[2].1 += 3;
        }
        let loss = if (1_000 * MS..1_100 * MS).contains(&phase) {
            100
        } else {
            4
        };
        if !b.is_empty() {
            send_both(&mut out, &mut rng, &fx, local, b.finish(), loss);
        }

        // ---- eq: delta feed, one symbol per packet, round robin, every 20 ms.
        let pt = eq.provider_time(local);
        let k = (tick % 3) as usize;
        let (s, seq, px) = &mut eq.symbols[k];
        let mut b = PacketBuilder::new(pt);
        let name = s.to_string();
        // Snapshots for every symbol in the first 60 ms of every second from
        // 0.5 s on, so from 1.0 s (before that a delta feed is suspect: no
        // snapshot yet).
        let snapshot_due = phase >= 500 * MS && phase % SECOND < 60 * MS;
        // Provider reset at 3.2 s for MSFT: sequence restarts at 1 via a snapshot of 0.
        if name == "MSFT" && (3_200 * MS..3_260 * MS).contains(&phase) {
            *seq = 0;
            b.snapshot(*s, 0, pt - 100_000, *px - 0.05, *px + 0.05);
        } else if snapshot_due {
            b.snapshot(*s, *seq, pt - 100_000, *px - 0.05, *px + 0.05);
        } else {
            *seq += 1;
            *px += (rng.below(11) as f64 - 5.0) * 0.01;
            // ES.H6: an invalid (zero) bid at 2.2 s.
            let bid = if name == "ES.H6" && (2_200 * MS..2_260 * MS).contains(&phase) {
                0.0
            } else {
                *px - 0.05
            };
            b.quote(*s, *seq, pt - 100_000, bid, *px + 0.05);
            if tick.is_multiple_of(7) {
                b.heartbeat(*s, *seq + 1);
            }
        }
        // AAPL: both lines lose 4 s..4.2 s, then a heartbeat shows the gap.
        let loss = if name == "AAPL" && (4_000 * MS..4_200 * MS).contains(&phase) {
            100
        } else {
            3
        };
        send_both(&mut out, &mut rng, &eq, local, b.finish(), loss);

        tick += 1;
        local += step;
    }

    // Malformed datagrams on fx line A: each is rejected whole.
    let a = fx.line_a;
    let good = {
        let mut b = PacketBuilder::new(fx.provider_time(T0 + SECOND));
        b.quote(sym("EURUSD"), 999_999, 0, 1.0, 1.1);
        b.finish()
    };
    let mut bad_magic = good.clone();
    bad_magic[0] = b'X';
    let mut trailing = good.clone();
    trailing.push(0);
    let mut overrun = good.clone();
    overrun[16] = 200;
    let mut bad_symbol = good.clone();
    bad_symbol[20] = b' ';
    let mut bad_version = good.clone();
    bad_version[2] = 2;
    for (i, p) in [
        bad_magic,
        trailing,
        overrun,
        bad_symbol,
        bad_version,
        good[..10].to_vec(),
    ]
    .into_iter()
    .enumerate()
    {
        out.push(Sent {
            arrival: T0 + 1_234 * MS + i as u64 * MS,
            dst: a,
            payload: p,
        });
    }
    // A datagram to a port no feed listens on.
    out.push(Sent {
        arrival: T0 + 1_700 * MS,
        dst: addr("239.1.1.1:39999"),
        payload: good.clone(),
    });

    // Reorder: swap a few adjacent datagrams on line B (arrival times kept
    // in order, contents swapped), as a switch that reorders would.
    out.sort_by_key(|s| s.arrival);
    let b_lines = [fx.line_b, eq.line_b];
    let mut i = 0;
    while i + 1 < out.len() {
        if b_lines.contains(&out[i].dst) && out[i].dst == out[i + 1].dst && rng.chance(3) {
            let (x, y) = out.split_at_mut(i + 1);
            std::mem::swap(&mut x[i].payload, &mut y[0].payload);
            i += 2;
        } else {
            i += 1;
        }
    }
    out
}

/// The checks: every symbol (and an unknown one, and an unknown feed) every
/// 100 ms, plus checks exactly at, and 1 ns before, a few arrivals.
fn checks(sent: &[Sent]) -> String {
    let symbols: &[(&str, &[&str])] = &[
        ("fx", &["EURUSD", "GBPUSD", "USDJPY", "XAUUSD", "NZDUSD"]),
        ("eq", &["AAPL", "MSFT", "ES.H6"]),
        ("nofeed", &["AAPL"]),
    ];
    let mut rows = vec!["time_ns,feed,symbol".to_string()];
    let mut t = T0 - 50 * MS;
    while t <= T0 + DURATION + 700 * MS {
        for (feed, syms) in symbols {
            for s in *syms {
                rows.push(format!("{t},{feed},{s}"));
            }
        }
        t += 100 * MS;
    }
    for s in sent.iter().step_by(97).take(40) {
        rows.push(format!("{},fx,EURUSD", s.arrival));
        rows.push(format!("{},eq,AAPL", s.arrival - 1));
    }
    // Rows in any order: put a late one first.
    rows.insert(1, format!("{},fx,USDJPY", T0 + 2_700 * MS));
    rows.join("\n") + "\n"
}

/// A capture variant: file name, format, link type, VLAN tag.
struct Variant {
    file: &'static str,
    format: Format,
    link: Link,
    vlan: Option<u16>,
}

const VARIANTS: &[Variant] = &[
    Variant {
        file: "scenario-eth-us.pcap",
        format: Format::PcapMicros,
        link: Link::Ethernet,
        vlan: None,
    },
    Variant {
        file: "scenario-vlan-ns.pcap",
        format: Format::PcapNanos,
        link: Link::Ethernet,
        vlan: Some(101),
    },
    Variant {
        file: "scenario-sll-ns.pcapng",
        format: Format::PcapNg { tsresol: 9 },
        link: Link::LinuxSll,
        vlan: None,
    },
    Variant {
        file: "scenario-sll2-us.pcapng",
        format: Format::PcapNg { tsresol: 6 },
        link: Link::LinuxSll2,
        vlan: None,
    },
    Variant {
        file: "scenario-raw-bin30.pcapng",
        format: Format::PcapNg { tsresol: 0x80 | 30 },
        link: Link::RawIp,
        vlan: None,
    },
    Variant {
        file: "scenario-rawip-ns.pcap",
        format: Format::PcapNanos,
        link: Link::RawIp,
        vlan: None,
    },
];

fn write_capture(path: &Path, v: &Variant, sent: &[Sent]) -> std::io::Result<()> {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut w = CaptureWriter::new(file, v.format, v.link)?;
    w.set_vlan(v.vlan);
    let src = SocketAddrV4::new(Ipv4Addr::new(10, 9, 8, 7), 40000);
    for (i, s) in sent.iter().enumerate() {
        w.write_udp(s.arrival, src, s.dst, &s.payload)?;
        if i == 100 && v.link == Link::Ethernet {
            // An ARP frame: not IPv4, counted and ignored.
            let mut arp = vec![0xffu8; 6];
            arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
            arp.extend_from_slice(&[0u8; 28]);
            w.write_frame(s.arrival, &arp)?;
        }
    }
    w.finish()?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let dir = tickguard::fixtures::output_dir("fixtures");
    std::fs::create_dir_all(&dir)?;
    let sent = scenario();
    std::fs::write(dir.join("config.toml"), CONFIG)?;
    let checks_text = checks(&sent);
    std::fs::write(dir.join("checks.csv"), &checks_text)?;
    let config = Config::parse(CONFIG, "config.toml")?;
    let checks = parse_checks(&checks_text).map_err(anyhow::Error::msg)?;
    for v in VARIANTS {
        let path = dir.join(v.file);
        write_capture(&path, v, &sent)?;
        let mut reader = CaptureReader::open(&path)?;
        let outcome = replay(&config, &mut reader, &checks, |_| {});
        if let Some(e) = outcome.input_error {
            anyhow::bail!("{e}");
        }
        let stem = v.file.rsplit_once('.').map(|(s, _)| s).unwrap_or(v.file);
        let mut lines = String::new();
        for (c, a) in checks.iter().zip(&outcome.answers) {
            lines.push_str(&answer_json(c, *a));
            lines.push('\n');
        }
        std::fs::write(dir.join(format!("{stem}.expected.jsonl")), lines)?;
        let summary = serde_json::to_string_pretty(&outcome.summary)? + "\n";
        std::fs::write(dir.join(format!("{stem}.summary.json")), summary)?;
        println!("{}: {} datagrams", path.display(), sent.len());
    }
    for &(feed, symbol, all, at_ms) in EXPLAINED {
        let text = explain(
            &config,
            &dir.join(EXPLAINED_CAPTURE),
            feed,
            symbol,
            all,
            at_ms,
        )?;
        std::fs::write(dir.join(explained_file(feed, symbol, all, at_ms)), text)?;
    }
    Ok(())
}

/// The capture the `--explain` goldens are made from.
const EXPLAINED_CAPTURE: &str = "scenario-eth-us.pcap";

/// `replay --explain FEED SYMBOL` goldens: (feed, symbol, `--explain-all`,
/// `--at` in ms after T0). tests/it/explain.rs holds the same table.
const EXPLAINED: &[(&str, &str, bool, Option<u64>)] = &[
    ("fx", "EURUSD", false, None),
    ("fx", "GBPUSD", false, None),
    ("fx", "USDJPY", false, None),
    ("fx", "XAUUSD", false, None),
    ("eq", "AAPL", false, None),
    ("eq", "MSFT", false, None),
    ("eq", "ES.H6", false, None),
    ("fx", "EURUSD", true, None),
    ("eq", "MSFT", true, None),
    ("fx", "GBPUSD", false, Some(2_600)),
    ("eq", "AAPL", false, Some(4_500)),
];

/// The golden's file name, e.g. `scenario-eth-us.explain-all-eq-MSFT.txt`.
fn explained_file(feed: &str, symbol: &str, all: bool, at_ms: Option<u64>) -> String {
    let stem = EXPLAINED_CAPTURE
        .rsplit_once('.')
        .map_or(EXPLAINED_CAPTURE, |(s, _)| s);
    match (all, at_ms) {
        (_, Some(ms)) => format!("{stem}.at-{ms}ms-{feed}-{symbol}.txt"),
        (true, None) => format!("{stem}.explain-all-{feed}-{symbol}.txt"),
        (false, None) => format!("{stem}.explain-{feed}-{symbol}.txt"),
    }
}

/// What `tickguard replay CAPTURE --config config.toml --explain FEED SYMBOL
/// [--explain-all] [--at T]` prints.
fn explain(
    config: &Config,
    capture: &Path,
    feed: &str,
    symbol: &str,
    all: bool,
    at_ms: Option<u64>,
) -> anyhow::Result<String> {
    let id = config
        .feed_id(feed)
        .ok_or_else(|| anyhow::anyhow!("no feed {feed}"))?;
    let target = Some((id, sym(symbol)));
    let at = at_ms.map(|ms| T0 + ms * MS);
    let checks: Vec<Check> = at
        .map(|t| Check {
            time_ns: t,
            feed: feed.into(),
            symbol: symbol.into(),
        })
        .into_iter()
        .collect();
    let mut forensics = Forensics::new(&config.feeds, target, false, at);
    let mut reader = CaptureReader::open(capture)?;
    let outcome = replay_with(config, &mut reader, &checks, |_| {}, &mut forensics);
    forensics.finish();
    Ok(match (at, outcome.answers.first()) {
        (Some(t), Some(a)) => forensics.answer_at(t, a.reasons),
        _ => forensics.explanation(all),
    })
}
