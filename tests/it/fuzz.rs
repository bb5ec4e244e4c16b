//! Seeded mutation fuzzing of the inputs a user hands over, capture bytes
//! (through the replay library path, with and without forensics) and
//! configuration text, and of what a hostile group sends an ITCH feed
//! (MoldUDP64 datagrams mutated, forged and reordered, through the handler;
//! with GLIMPSE, snapshot connections among them whose spins are mutated
//! and whose segments are split, lost and cut) or a CME MDP3 channel (captures of realistic channels mutated through
//! replay, field by field as well as byte by byte; their datagrams through
//! the handler on every service line). Each test runs a fixed number of inputs from a fixed
//! seed, so a failure names the input that reproduces it; a watchdog turns a
//! hang into a failure. `TICKGUARD_FUZZ_INPUTS` and `TICKGUARD_FUZZ_SEED`
//! run more, or others.

use crate::common::mdp3::{self as cme, Channel, Datagram};
use std::io::Cursor;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tickguard::capture::CaptureReader;
use tickguard::config::Config;
use tickguard::protocol::itch50::Session;
use tickguard::protocol::mdp3::template::{self, Fields};
use tickguard::protocol::mdp3::{encode, Body, Packet, Reject};
use tickguard::replay::Check;
use tickguard::verdict::Reasons;

/// xorshift64*: a deterministic stream from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Inputs each fuzzer runs: 10,000, or `TICKGUARD_FUZZ_INPUTS` (never
/// fewer under `CI`: a runner's environment cannot cut the gate's run).
fn inputs() -> usize {
    let n = env_or("TICKGUARD_FUZZ_INPUTS", INPUTS);
    match std::env::var_os("CI") {
        Some(_) => n.max(INPUTS),
        None => n,
    }
}

/// The inputs a fuzzer runs by default.
const INPUTS: usize = 10_000;

/// How many of a fuzzer's inputs got past the door (a capture that opens,
/// a file that replays), to be held to a share of them once it ends: a
/// change that had every input refused at once would otherwise pass.
#[derive(Clone, Default)]
struct Reached(Arc<AtomicUsize>);

impl Reached {
    fn one(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// At least `percent` of `n` inputs got through (from 100 inputs on:
    /// a share of a few is chance).
    fn assert_at_least(&self, name: &str, percent: usize, n: usize) {
        let got = self.0.load(Ordering::Relaxed);
        eprintln!("{name}: {got} of {n} inputs got past the door");
        if n < 100 {
            return;
        }
        assert!(
            got * 100 >= percent * n,
            "{name}: {got} of {n} inputs got past the door, fewer than {percent}%"
        );
    }
}

fn seed() -> u64 {
    env_or("TICKGUARD_FUZZ_SEED", 0x7ac4_9a2d) as u64
}

fn env_or(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `one(i)` for every input on a thread of its own; fails naming the
/// input when one panics, or when the whole run takes over `limit`.
fn fuzz(name: &str, limit: Duration, one: impl Fn(usize) + Send + Sync + 'static) {
    fuzz_n(name, inputs(), limit, one)
}

/// [`fuzz`] over `n` inputs.
fn fuzz_n(name: &str, n: usize, limit: Duration, one: impl Fn(usize) + Send + Sync + 'static) {
    let current = Arc::new(AtomicUsize::new(0));
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let at = current.clone();
    let worker = std::thread::spawn(move || {
        for i in 0..n {
            at.store(i, Ordering::Relaxed);
            one(i);
        }
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(limit) {
        Ok(()) => worker.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            let i = current.load(Ordering::Relaxed);
            panic!("{name}: input {i} of seed {:#x} panicked", seed());
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            let i = current.load(Ordering::Relaxed);
            panic!(
                "{name}: input {i} of seed {:#x} still running after {limit:?}",
                seed()
            );
        }
    }
}

/// Byte-level mutations: flips, interesting values, cuts, repeats, inserts.
fn mutate(rng: &mut Rng, data: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(8) {
        let len = data.len().max(1);
        match rng.below(7) {
            0 if !data.is_empty() => {
                let at = rng.below(data.len());
                data[at] ^= 1 << rng.below(8);
            }
            1 if !data.is_empty() => {
                let at = rng.below(data.len());
                data[at] = *rng.pick(&[0, 0xff, 0x7f, 0x80, 1, 0xfe]);
            }
            2 => data.truncate(rng.below(len)),
            3 if data.len() >= 4 => {
                // A 16- or 32-bit field set to an extreme: lengths, counts, times.
                let at = rng.below(data.len() - 3);
                let v: u32 = *rng.pick(&[0, 1, 0xffff, 0xffff_ffff, 0x8000_0000, 0x7fff_ffff]);
                data[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            4 if !data.is_empty() => {
                let from = rng.below(data.len());
                let to = (from + 1 + rng.below(64)).min(data.len());
                let chunk = data[from..to].to_vec();
                let at = rng.below(data.len());
                data.splice(at..at, chunk);
            }
            5 => {
                let at = rng.below(len).min(data.len());
                let junk: Vec<u8> = (0..1 + rng.below(16)).map(|_| rng.next() as u8).collect();
                data.splice(at..at, junk);
            }
            _ => {}
        }
    }
}

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Capture bytes: a committed fixture (its first few KiB, so every input
/// stays cheap) mutated, or random bytes behind a capture magic, or random
/// bytes alone.
fn capture_input(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    match rng.below(10) {
        0 => (0..rng.below(4096)).map(|_| rng.next() as u8).collect(),
        1 => {
            let magic: [u8; 4] = *rng.pick(&[
                [0xd4, 0xc3, 0xb2, 0xa1],
                [0x4d, 0x3c, 0xb2, 0xa1],
                [0xa1, 0xb2, 0xc3, 0xd4],
                [0x0a, 0x0d, 0x0d, 0x0a],
            ]);
            let mut d = magic.to_vec();
            d.extend((0..rng.below(4096)).map(|_| rng.next() as u8));
            d
        }
        _ => {
            let source = rng.pick(corpus);
            let keep = (256 + rng.below(8192)).min(source.len());
            let mut d = source[..keep].to_vec();
            mutate(rng, &mut d);
            d
        }
    }
}

/// Checks of `feed` `symbol` at time 0, at `mid` and at the end of time.
fn edge_checks(feed: &str, symbol: &str, mid: u64) -> Vec<Check> {
    [0, mid, u64::MAX]
        .iter()
        .map(|&time_ns| Check {
            time_ns,
            feed: feed.into(),
            symbol: symbol.into(),
        })
        .collect()
}

#[test]
fn replay_survives_mutated_and_random_captures() {
    let dir = fixtures();
    let corpus: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert!(corpus.len() >= 6, "the fixture captures");
    let config = Config::load(&dir.join("config.toml")).unwrap();
    let checks = edge_checks("fx", "EURUSD", 1_767_603_600_000_000_000);
    let seed = seed();
    let reached = Reached::default();
    let opened = reached.clone();
    fuzz("replay", Duration::from_secs(300), move |i| {
        let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let bytes = capture_input(&mut rng, &corpus);
        let Ok(mut capture) = CaptureReader::from_reader("fuzz", Box::new(Cursor::new(bytes)))
        else {
            return;
        };
        opened.one();
        if i % 8 == 0 {
            // The forensics observer too: one symbol's history and the timeline.
            let target = config
                .feed_id("fx")
                .zip(tickguard::symbol::Symbol::parse("EURUSD"));
            let mut f = tickguard::explain::sqf::Forensics::new(
                &config.feeds,
                target,
                true,
                Some(u64::MAX / 2),
            );
            let out =
                tickguard::replay::replay_with(&config, &mut capture, &checks, |_| {}, &mut f);
            f.finish();
            let _ = f.explanation(true);
            let _ = f.timeline_svg("fuzz");
            if let Some(a) = out.answers.last() {
                let _ = f.answer_at(u64::MAX / 2, a.reasons);
            }
        } else {
            let out = tickguard::replay::replay(&config, &mut capture, &checks, |_| {});
            assert_eq!(out.answers.len(), checks.len());
            let _ = serde_json::to_string(&out.summary).unwrap();
        }
    });
    reached.assert_at_least("replay", PERCENT_REPLAYED, inputs());
}

/// The share of the capture fuzzer's inputs that must open as captures
/// and be replayed (8 in 10 are mutated fixtures, most of which open:
/// 76% at the default seed).
const PERCENT_REPLAYED: usize = 60;

/// Values that have broken parsers: extremes, wrong types, control bytes,
/// long strings, deep nesting.
const VALUES: &[&str] = &[
    "0",
    "-1",
    "1",
    "3",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "4294967296",
    "18446744073710",
    "1e400",
    "nan",
    "-inf",
    "1.5",
    "true",
    "\"\"",
    "\"auto\"",
    "\"0640\"",
    "\"999\"",
    "\"\\u0000\\u001b[2J\"",
    "\"239.1.1.1:30001\"",
    "\"127.0.0.1\"",
    "\"itch50\"",
    "\"Europe/Nowhere\"",
    "\"0.0.0.0:18000\"",
    "[]",
    "[\"239.1.1.1:1\", \"239.1.1.1:1\"]",
    "[\"239.1.1.9:1\", \"239.1.1.8:2\", \"239.1.1.7:3\"]",
    "{ a = 1 }",
    "1979-05-27T07:32:00Z",
];

const KEYS: &[&str] = &[
    "capacity",
    "shm_path",
    "shm_mode",
    "cpu",
    "idle",
    "idle_sleep_us",
    "rcvbuf_bytes",
    "batch",
    "heartbeat_ms",
    "dead_after_ms",
    "offset_queue",
    "interface",
    "enabled",
    "listen",
    "interval_ms",
    "format",
    "name",
    "kind",
    "lines",
    "stale_threshold_ms",
    "source_threshold_ms",
    "clock_offset",
    "offset_window_ms",
    "price_decimals",
    "source",
    "protocol",
    "timezone",
    "recovery",
    "recovery_listen",
    "gap_timeout_ms",
    "max_held",
    "max_orders",
    "max_symbols",
    "join_gap_max",
    "request_max",
    "request_interval_ms",
    "request_rate",
    "glimpse",
    "glimpse_user",
    "glimpse_password_env",
    "glimpse_password_file",
    "glimpse_session_check",
    "snapshot_triggers",
    "snapshot_timeout_ms",
    "snapshot_idle_ms",
    "snapshot_retry_ms",
    "snapshot_retry_max_ms",
    "snapshot_max_attempts",
    "snapshot_max_messages",
    "colour",
];

const TABLES: &[&str] = &[
    "[state]",
    "[sidecar]",
    "[metrics]",
    "[log]",
    "[[feed]]",
    "[[feed.symbol]]",
    "[feed]",
    "[[state]]",
];

/// Configuration text: a valid file with lines mutated (values swapped for
/// hostile ones, lines dropped, repeated or swapped), the same bytes
/// mutated, or random TOML-ish lines from the keys and values above.
fn config_input(rng: &mut Rng, corpus: &[String]) -> String {
    let mut lines: Vec<String> = rng.pick(corpus).lines().map(String::from).collect();
    match rng.below(16) {
        0 | 1 => {
            let mut d = lines.join("\n").into_bytes();
            mutate(rng, &mut d);
            return String::from_utf8_lossy(&d).into_owned();
        }
        4..=6 => {
            lines.clear();
            for _ in 0..rng.below(30) {
                lines.push(match rng.below(4) {
                    0 => rng.pick(TABLES).to_string(),
                    _ => format!("{} = {}", rng.pick(KEYS), rng.pick(VALUES)),
                });
            }
        }
        2 => {
            let deep = if rng.below(64) == 0 { 100_000 } else { 3000 };
            let depth = *rng.pick(&[2, 64, 200, deep]);
            lines.push(format!("x = {}{}", "[".repeat(depth), "]".repeat(depth)));
        }
        3 => {
            let long = "y".repeat(*rng.pick(&[65, 1000, 20_000]));
            let at = rng.below(lines.len().max(1)).min(lines.len());
            lines.insert(at, format!("name = \"{long}\""));
        }
        _ => {}
    }
    for _ in 0..rng.below(6) {
        if lines.is_empty() {
            break;
        }
        let at = rng.below(lines.len());
        match rng.below(4) {
            0 => {
                if let Some((key, _)) = lines[at].split_once(" = ") {
                    lines[at] = format!("{key} = {}", rng.pick(VALUES));
                }
            }
            1 => {
                lines.remove(at);
            }
            2 => {
                let l = lines[at].clone();
                lines.insert(rng.below(lines.len()), l);
            }
            _ => {
                let other = rng.below(lines.len());
                lines.swap(at, other);
            }
        }
    }
    lines.join("\n")
}

#[test]
fn config_parser_survives_mutated_and_random_text() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let corpus: Vec<String> = [
        root.join("config.toml"),
        root.join("itch.toml"),
        fixtures().join("config.toml"),
    ]
    .iter()
    .map(|p| std::fs::read_to_string(p).unwrap())
    .collect();
    for c in &corpus {
        Config::parse(c, "corpus").expect("the corpus is valid");
    }
    let seed = seed();
    let reached = Reached::default();
    let accepted = reached.clone();
    fuzz("config", Duration::from_secs(300), move |i| {
        let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let text = config_input(&mut rng, &corpus);
        match Config::parse(&text, "fuzz.toml") {
            Ok(c) => {
                accepted.one();
                accepted_config_is_in_range(&c)
            }
            Err(e) => {
                let e = e.to_string();
                assert!(e.starts_with("config fuzz.toml: "), "{e}");
                assert!(!e.chars().any(char::is_control), "{e:?}");
                assert!(e.chars().count() <= 400, "{} characters", e.len());
            }
        }
    });
    // Enough accepted for the ranges' checks to mean something.
    reached.assert_at_least("config", PERCENT_CONFIG_ACCEPTED, inputs());
}

/// Mutated configurations the parser accepts, at least, percent.
const PERCENT_CONFIG_ACCEPTED: usize = 7;

/// What an accepted configuration promises, whatever the text was.
fn accepted_config_is_in_range(c: &Config) {
    use tickguard::config::*;
    use tickguard::protocol::itch50::config::*;
    let within = |r: &Range, v: u64| (r.min as u64..=r.max as u64).contains(&v);
    let s = &c.sidecar;
    assert!(within(&CAPACITY, c.capacity as u64));
    assert!(within(&IDLE_SLEEP_US, s.idle_sleep_us));
    assert!(within(&RCVBUF_BYTES, s.rcvbuf_bytes as u64));
    assert!(within(&BATCH, s.batch as u64));
    assert!(within(&OFFSET_QUEUE, s.offset_queue as u64));
    assert!(within(&HEARTBEAT_MS, s.heartbeat_ns / 1_000_000));
    assert!(s.dead_after_ns >= DEAD_AFTER_HEARTBEATS * s.heartbeat_ns);
    assert!(within(&INTERVAL_MS, c.metrics.interval_ns / 1_000_000));
    for f in &c.feeds {
        assert!((1..=FEED_NAME_MAX).contains(&f.name.len()), "{:?}", f.name);
        assert!(f.name.bytes().all(|b| b.is_ascii_graphic()), "{:?}", f.name);
        for t in std::iter::once(&f.thresholds).chain(f.overrides.iter().map(|(_, t)| t)) {
            assert!(within(&STALE_THRESHOLD_MS, t.stale_ns / 1_000_000));
            assert!(within(&SOURCE_THRESHOLD_MS, t.source_ns / 1_000_000));
        }
        assert!(within(&PRICE_DECIMALS, u64::from(f.price_decimals)));
        match f.offset {
            tickguard::clock::OffsetMode::Auto { window_ns } => {
                assert!(within(&OFFSET_WINDOW_MS, window_ns / 1_000_000))
            }
            tickguard::clock::OffsetMode::Fixed(ns) => {
                assert!((CLOCK_OFFSET.min..=CLOCK_OFFSET.max).contains(&ns))
            }
        }
        let itch = match &f.settings {
            ProtocolSettings::Itch50(c) => Some(c),
            _ => None,
        };
        assert_eq!(itch.is_some(), f.protocol == Protocol::Itch50);
        if let Some(i) = itch {
            assert!(within(&GAP_TIMEOUT_MS, i.gap_timeout_ns / 1_000_000));
            assert!(i.gap_timeout_ns % 1_000_000 == 0);
            assert!(within(&MAX_HELD, i.max_held as u64));
            assert!(within(&MAX_ORDERS, i.max_orders as u64));
            assert!(within(&MAX_SYMBOLS, i.max_symbols as u64));
            assert!(within(&JOIN_GAP_MAX, i.join_gap_max));
            assert!(within(&REQUEST_MAX, u64::from(i.request_max)));
            assert!(within(
                &REQUEST_INTERVAL_MS,
                i.request_interval_ns / 1_000_000
            ));
            assert!(within(&REQUEST_RATE, u64::from(i.request_rate)));
            assert!(i.recovery.is_none_or(|r| r.port() != 0
                && !r.ip().is_unspecified()
                && !r.ip().is_multicast()));
            if let Some(g) = &i.glimpse {
                let ms = |ns: u64| ns / 1_000_000;
                assert!(g.server.port() != 0 && !g.server.ip().is_multicast());
                assert!(!g.server.ip().is_unspecified() && !g.server.ip().is_broadcast());
                assert!((1..=GLIMPSE_USER_MAX).contains(&g.user.len()));
                assert!(g.user.bytes().all(|b| b.is_ascii_graphic()), "{:?}", g.user);
                assert!(within(&SNAPSHOT_TIMEOUT_MS, ms(g.timeout_ns)));
                assert!(within(&SNAPSHOT_IDLE_MS, ms(g.idle_ns)));
                assert!(g.idle_ns <= g.timeout_ns);
                assert!(within(&SNAPSHOT_RETRY_MS, ms(g.retry_ns)));
                assert!(within(&SNAPSHOT_RETRY_MAX_MS, ms(g.retry_max_ns)));
                assert!(g.retry_ns <= g.retry_max_ns);
                assert!(within(&SNAPSHOT_MAX_ATTEMPTS, u64::from(g.max_attempts)));
                assert!(within(&SNAPSHOT_MAX_MESSAGES, g.max_messages));
            }
        }
    }
}

/// One datagram of a feed: (line: 0 = A, 1 = B, 2 = recovery; arrival ns;
/// payload).
type Arrival = (usize, u64, Vec<u8>);

/// The datagrams of the committed ITCH captures, routed as their config
/// routes them.
fn itch_streams() -> Vec<Vec<Arrival>> {
    let dir = fixtures().join("itch");
    ["session.pcap", "join.pcap"]
        .iter()
        .map(|name| {
            let mut out = Vec::new();
            let mut capture = CaptureReader::open(&dir.join(name)).unwrap();
            capture
                .for_each(|d| {
                    let line = match (d.dst.ip().octets(), d.dst.port()) {
                        ([239, 2, 1, 1], 26477) => 0,
                        ([239, 2, 1, 2], 26477) => 1,
                        (_, 17000) => tickguard::protocol::itch50::config::RECOVERY_LINE,
                        _ => return,
                    };
                    out.push((line, d.time_ns, d.payload.to_vec()));
                })
                .unwrap();
            out
        })
        .collect()
}

/// A MoldUDP64 stream with the mutations a hostile group or a broken venue
/// produces: bytes mutated, sequences and counts set to extremes or far
/// away, sessions changed, datagrams repeated, dropped, swapped between
/// lines and moved in time.
fn itch_input(rng: &mut Rng, streams: &[Vec<Arrival>]) -> Vec<Arrival> {
    let source = rng.pick(streams);
    let from = rng.below(source.len());
    let take = (1 + rng.below(200)).min(source.len() - from);
    let mut out: Vec<Arrival> = Vec::with_capacity(take + 8);
    for a in &source[from..from + take] {
        let (mut line, mut t, mut p) = a.clone();
        match rng.below(16) {
            0 => mutate(rng, &mut p),
            1 if p.len() >= 18 => {
                let random = rng.next();
                let ahead = u64::from_be_bytes(p[10..18].try_into().unwrap()).wrapping_add(1 << 20);
                let far: u64 = *rng.pick(&[0, 1, u64::MAX, u64::MAX - 1, 1 << 40, random, ahead]);
                p[10..18].copy_from_slice(&far.to_be_bytes());
            }
            2 if p.len() >= 20 => {
                let random = rng.next() as u16;
                let count: u16 = *rng.pick(&[0, 1, 0xffff, 0xfffe, random]);
                p[18..20].copy_from_slice(&count.to_be_bytes());
            }
            3 if p.len() >= 10 => p[rng.below(10)] ^= 1 << rng.below(8),
            4 => continue,
            5 => out.push((line, t, p.clone())),
            6 => line = rng.below(3),
            7 => t = *rng.pick(&[0, u64::MAX, t.saturating_sub(1 << 30), t + (1 << 33)]),
            _ => {}
        }
        out.push((line, t, p));
    }
    if out.len() > 1 && rng.below(4) == 0 {
        let (i, j) = (rng.below(out.len()), rng.below(out.len()));
        out.swap(i, j);
    }
    out
}

/// What a re-request poll would ask of `seq`: ascending, disjoint runs,
/// as many sequences in all as the gaps count missing.
fn missing_runs_agree_with_the_gaps(seq: &tickguard::protocol::itch50::sequencer::Sequencer) {
    let (mut last, mut total) = (None, 0u128);
    seq.missing(|lo, hi, _| {
        assert!(
            lo < hi && last.is_none_or(|l| l <= lo),
            "{last:?} {lo} {hi}"
        );
        last = Some(hi);
        total += u128::from(hi - lo);
        true
    });
    let counted: u128 = seq.gaps().map(|g| u128::from(g.2)).sum();
    assert_eq!(total, counted, "missing runs against the gaps' counts");
}

#[test]
fn itch_feed_survives_mutated_and_forged_datagrams() {
    use tickguard::handler::Handler;
    use tickguard::symbol::Symbol;
    let streams = itch_streams();
    assert!(
        streams.iter().all(|s| s.len() > 50),
        "the ITCH fixture captures"
    );
    let config = Config::load(&fixtures().join("itch/config.toml")).unwrap();
    let symbols: Vec<Symbol> = ["AAPL", "MSFT", "NVDA", "TSLA", "ZZZZ"]
        .iter()
        .map(|s| Symbol::parse(s).unwrap())
        .collect();
    let seed = seed();
    // A feed holds a 16 MiB order window: one handler serves 64 inputs in a
    // row (state carried from one to the next, as a live feed's would be),
    // so a failure reproduces by running the test again with its seed.
    let handler = std::sync::Mutex::new(None::<Handler>);
    // What the inputs reached, at most: rejected packets, fills, session
    // changes, gaps given up (the run must reach each, or it tests little).
    let reached = Arc::new([const { AtomicUsize::new(0) }; 4]);
    let seen = reached.clone();
    // A quarter of the inputs: each is up to 200 datagrams through the
    // whole ITCH path (about 4 ms each in a debug build).
    fuzz_n("itch", inputs() / 4, Duration::from_secs(300), move |i| {
        let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let input = itch_input(&mut rng, &streams);
        let mut guard = handler.lock().unwrap_or_else(|e| e.into_inner());
        if i % 64 == 0 {
            *guard = None;
        }
        let h = guard.get_or_insert_with(|| Handler::new(&config));
        for (k, (line, t, p)) in input.iter().enumerate() {
            h.upkeep(*t);
            let _ = h.on_datagram_line(0, *line, p, *t);
            if k % 16 == 0 {
                h.before_check(0, *t);
                for &s in &symbols {
                    let _ = h.verdict(0, s, *t);
                }
            }
        }
        let it = h.feeds()[0].engine().itch().expect("an itch50 feed");
        let c = it.sequencer().counters();
        let now = [
            h.feeds()[0].counters.rejected,
            c.recovered,
            c.session_changes,
            c.gaps_given_up,
        ];
        for (r, v) in seen.iter().zip(now) {
            r.fetch_max(v as usize, Ordering::Relaxed);
        }
        missing_runs_agree_with_the_gaps(it.sequencer());
    });
    let reached: Vec<usize> = reached.iter().map(|r| r.load(Ordering::Relaxed)).collect();
    assert!(
        reached.iter().all(|&n| n > 0),
        "rejected, recovered, sessions, given up: {reached:?}"
    );
}

// ---------------------------------------------------------------------------
// ITCH with GLIMPSE: the snapshot paths (awaiting, holding, the merge and
// the gap it opens, retries, give-ups) under mutated datagrams and spins.

/// The ITCH fixture feed with `glimpse`, both triggers on: at most
/// `max_held` messages held, `attempts` failures before a wait is given
/// up, the snapshot's session checked or not; attempts spaced by the
/// shortest delay, and at most 1,000 messages a spin, so that the bound
/// is reached.
fn glimpse_config(max_held: u64, attempts: u32, session_check: bool) -> Config {
    let text = std::fs::read_to_string(fixtures().join("itch/config.toml")).unwrap();
    let text = format!(
        "{text}max_held = {max_held}\n\
         glimpse = \"127.0.0.1:18100\"\nglimpse_user = \"tgsim\"\n\
         glimpse_password_env = \"TG_TEST_NEVER_READ\"\n\
         glimpse_session_check = {session_check}\n\
         snapshot_triggers = [\"join\", \"gap\"]\nsnapshot_retry_ms = 10\n\
         snapshot_max_attempts = {attempts}\nsnapshot_max_messages = 1000\n"
    );
    Config::parse(&text, "glimpse.toml").unwrap()
}

/// One session's messages by sequence.
type Day = std::collections::BTreeMap<u64, Vec<u8>>;

/// Each session of the fixture captures, its messages as their valid
/// datagrams carry them: what a GLIMPSE server's state comes from.
fn itch_days(streams: &[Vec<Arrival>]) -> Vec<(Session, Day)> {
    let mut days: Vec<(Session, Day)> = Vec::new();
    for (_, _, p) in streams.iter().flatten() {
        let Ok(packet) = tickguard::protocol::itch50::Packet::new_checked(&p[..]) else {
            continue;
        };
        let s = packet.session();
        let at = match days.iter().position(|d| d.0 == s) {
            Some(at) => at,
            None => {
                days.push((s, Day::new()));
                days.len() - 1
            }
        };
        for (q, m) in packet.messages() {
            days[at].1.entry(q).or_insert_with(|| m.bytes().to_vec());
        }
    }
    days
}

/// The spin of a GLIMPSE server holding messages `1..n` of `day`: the
/// system events, directory, trading actions, Reg SHO states and halts,
/// then the orders added and not deleted or replaced since (executions
/// and partial cancels are not followed: the books are near the venue's,
/// which is all a fuzz needs).
fn glimpse_spin(day: &Day, n: u64) -> Vec<&[u8]> {
    let mut state = Vec::new();
    let mut orders = std::collections::BTreeMap::new();
    for m in day.range(..n).map(|(_, m)| &m[..]) {
        let order = m
            .get(11..19)
            .map(|r| u64::from_be_bytes(r.try_into().unwrap()));
        match (m.first(), order) {
            (Some(b'S' | b'R' | b'H' | b'Y' | b'h'), _) => state.push(m),
            (Some(b'A' | b'F'), Some(r)) => {
                orders.insert(r, m);
            }
            (Some(b'D' | b'U'), Some(r)) => {
                orders.remove(&r);
            }
            _ => {}
        }
    }
    state.extend(orders.into_values());
    state
}

/// Where the feed stands when a snapshot connection starts: its session,
/// `high` and `next`, and its `max_held`.
struct Standing {
    session: Option<Session>,
    high: u64,
    next: u64,
    max_held: u64,
}

impl Standing {
    /// Where the ITCH feed of `h` (whose `max_held` is `max_held`) stands.
    fn of(h: &tickguard::handler::Handler, max_held: u64) -> Standing {
        let it = h.feeds()[0].engine().itch().expect("an itch50 feed");
        Standing {
            session: it.session(),
            high: it.sequencer().high(),
            next: it.sequencer().next().unwrap_or(0),
            max_held,
        }
    }
}

/// A GLIMPSE server's bytes as a broken or hostile venue sends them: a
/// spin (Login Accepted, the state as `S` packets, End of Snapshot with its
/// N) for N at, behind or ahead of the stream, far ahead, 0, 1 or
/// `u64::MAX`; or nothing, Login Rejected with any reason, random bytes;
/// Login Accepted for another session or sequence, heartbeats, debug and
/// unsequenced packets among the messages, more messages than allowed,
/// End of Session or nothing in place of End of Snapshot, bytes after it;
/// then bytes flipped, cut, repeated and inserted, or a length of 0 or
/// 65,535 put in.
fn glimpse_stream(rng: &mut Rng, days: &[(Session, Day)], at: &Standing) -> Vec<u8> {
    use tickguard::protocol::itch50::soup;
    let mut s = Vec::new();
    if rng.below(8) == 0 {
        soup::debug(b"welcome", &mut s);
    }
    match rng.below(24) {
        0 => return s,
        1 | 2 => {
            let random = rng.next() as u8;
            let reason = *rng.pick(&[
                Some(soup::NOT_AUTHORIZED),
                Some(soup::SESSION_NOT_AVAILABLE),
                Some(soup::SESSION_NOT_AVAILABLE),
                Some(random),
                Some(random),
                None,
            ]);
            soup::packet(soup::kind::LOGIN_REJECTED, reason.as_slice(), &mut s);
            return s;
        }
        3 => {
            s.extend((0..1 + rng.below(300)).map(|_| rng.next() as u8));
            return s;
        }
        _ => {}
    }
    let day = match days.iter().find(|d| Some(d.0) == at.session) {
        Some(d) => d,
        None => rng.pick(days),
    };
    let mut random = [0u8; 10];
    random.fill_with(|| rng.next() as u8);
    let other = rng.pick(days).0 .0;
    let session = match rng.below(16) {
        0 => random,
        1 => other,
        2 => *b"          ",
        _ => at.session.unwrap_or(day.0).0,
    };
    let sequence = match rng.below(32) {
        0 => *rng.pick(&[0, 2, u64::MAX]),
        _ => 1,
    };
    s.extend(soup::login_accepted(&session, sequence));
    let ahead = at.high.saturating_add(at.max_held);
    let n = match rng.below(16) {
        0..=5 => at.high,
        6 => at.high.saturating_sub(1 + rng.below(64) as u64),
        7 => at
            .high
            .saturating_add(1 + rng.below(at.max_held as usize) as u64),
        8 => at.next,
        9 => at.high.saturating_sub(at.max_held),
        10 => 0,
        11 => 1,
        12 => u64::MAX,
        13 => ahead.saturating_add(1 + rng.below(1 << 20) as u64),
        14 => ahead,
        _ => rng.next(),
    };
    let chatty = rng.below(4) == 0;
    for m in glimpse_spin(&day.1, n) {
        if chatty {
            match rng.below(8) {
                0 => s.extend(soup::SERVER_HEARTBEAT),
                1 => soup::unsequenced(m, &mut s),
                2 => soup::debug(b"", &mut s),
                _ => {}
            }
        }
        soup::sequenced(m, &mut s);
    }
    if rng.below(32) == 0 {
        // One more than `snapshot_max_messages`, of an unknown type.
        for _ in 0..1001 {
            soup::sequenced(b"z", &mut s);
        }
    }
    match rng.below(24) {
        0 => s.extend(soup::END_OF_SESSION),
        1 => {}
        _ => soup::sequenced(format!("G{n:>20}").as_bytes(), &mut s),
    }
    if rng.below(16) == 0 {
        s.extend((0..1 + rng.below(40)).map(|_| rng.next() as u8));
    }
    match rng.below(8) {
        0 | 1 => mutate(rng, &mut s),
        2 => {
            let at = rng.below(s.len() + 1);
            let length: [u8; 2] = *rng.pick(&[[0, 0], [0xff, 0xff], [0, 1], [0xff, 0xfe]]);
            s.splice(at..at, length);
        }
        _ => {}
    }
    s
}

/// One TCP segment of a snapshot connection: its local port, from the
/// server (else ours), flags, sequence number, payload.
type Seg = (u16, bool, u8, u32, Vec<u8>);

/// A snapshot connection from local port `port` carrying the server's
/// `bytes` as a capture holds it: our SYN (now and then missing: the
/// server's first segment starts it), the bytes in segments split at
/// random points (one, many, or a byte each) from any initial sequence
/// (wrapping too), now and then one lost (a hole), repeated, overlapping
/// the one before or swapped with it, or a segment of ours with bytes;
/// then the server's FIN or RST, our FIN or RST, a server segment to an
/// earlier local port, or nothing (left open).
fn glimpse_segments(rng: &mut Rng, bytes: &[u8], port: u16) -> std::collections::VecDeque<Seg> {
    use tickguard::capture::link::Tcp;
    let mut out = std::collections::VecDeque::new();
    if rng.below(10) != 0 {
        out.push_back((port, false, Tcp::SYN, rng.next() as u32, Vec::new()));
    }
    let random = rng.next() as u32;
    let isn = *rng.pick(&[random, u32::MAX - 20, 0]);
    let mut cuts: Vec<usize> = match rng.below(4) {
        0 => Vec::new(),
        1 if bytes.len() <= 512 => (1..bytes.len()).collect(),
        _ => (0..rng.below(12))
            .map(|_| rng.below(bytes.len() + 1))
            .collect(),
    };
    cuts.extend([0, bytes.len()]);
    cuts.sort_unstable();
    cuts.dedup();
    let data = Tcp::ACK | Tcp::PSH;
    for w in cuts.windows(2) {
        let (mut from, to) = (w[0], w[1]);
        match rng.below(48) {
            0 => continue,
            1 => from = from.saturating_sub(1 + rng.below(16)),
            2 => out.push_back((
                port,
                true,
                data,
                isn.wrapping_add(from as u32),
                bytes[from..to].to_vec(),
            )),
            3 => out.push_back((port, false, data, 7, bytes[from..to].to_vec())),
            4 if out.len() > 1 => {
                let last = out.len() - 1;
                out.swap(last, last - 1);
            }
            _ => {}
        }
        out.push_back((
            port,
            true,
            data,
            isn.wrapping_add(from as u32),
            bytes[from..to].to_vec(),
        ));
    }
    let end = isn.wrapping_add(bytes.len() as u32);
    match rng.below(10) {
        0..=3 => out.push_back((port, true, Tcp::FIN | Tcp::ACK, end, Vec::new())),
        4 => out.push_back((port, true, Tcp::RST, end, Vec::new())),
        5 => out.push_back((port, false, Tcp::FIN | Tcp::ACK, 8, Vec::new())),
        6 => out.push_back((port, false, Tcp::RST, 8, Vec::new())),
        7 => out.push_back((port.wrapping_sub(1), true, data, end, b"\0\x01H".to_vec())),
        _ => {}
    }
    out
}

/// What a feed with `glimpse` counted of its snapshots, and its stream.
fn glimpse_counters(
    h: &mut tickguard::handler::Handler,
) -> (
    tickguard::protocol::itch50::snapshot::Counters,
    tickguard::protocol::itch50::sequencer::Counters,
) {
    let e = h.feeds_mut()[0].engine_mut().itch_engine_mut();
    let e = e.expect("an itch50 feed");
    let s = *e.snapshots().expect("a feed with glimpse");
    (s, *e.feed().sequencer().counters())
}

/// What must hold after every datagram and segment: at most twice
/// `max_held` held (a merge's gap may keep that many), and while a
/// snapshot is awaited no gap open and the feed suspect.
fn glimpse_feed_is_bounded(h: &tickguard::handler::Handler, max_held: u64) {
    let it = h.feeds()[0].engine().itch().expect("an itch50 feed");
    let q = it.sequencer();
    assert!(q.held() as u64 <= 2 * max_held, "{} held", q.held());
    if q.awaiting() {
        assert_eq!(q.gaps_open(), 0, "a gap open while awaiting");
        assert!(it.suspect(), "awaiting and not suspect");
    }
}

#[test]
fn itch_glimpse_survives_mutated_datagrams_and_spins() {
    use std::net::{Ipv4Addr, SocketAddrV4};
    use tickguard::engine::Segment;
    use tickguard::handler::Handler;
    use tickguard::protocol::itch50::glimpse::Failure;
    use tickguard::symbol::Symbol;
    let streams = itch_streams();
    let days = itch_days(&streams);
    assert!(
        days.len() >= 2 && days.iter().all(|d| d.1.len() > 100),
        "the fixture sessions"
    );
    let symbols: Vec<Symbol> = ["AAPL", "MSFT", "NVDA", "TSLA", "ZZZZ"]
        .iter()
        .map(|s| Symbol::parse(s).unwrap())
        .collect();
    let seed = seed();
    /// One handler and what goes with it: its `max_held`, the last local
    /// port, the time of the last thing it took, and its counters when
    /// last added to the totals.
    struct Run {
        h: Handler,
        max_held: u64,
        port: u16,
        clock: u64,
        counted: [u64; 12],
    }
    // One handler serves 64 inputs in a row, state carried from one to the
    // next (a snapshot awaited, a connection left open), so a failure
    // reproduces by running the test again with its seed. Each 64 take a
    // `max_held`, attempts and session check of their own.
    let run = std::sync::Mutex::new(None::<Run>);
    // What the inputs reached, summed over the handlers: attempts, merges,
    // failures by class, waits given up, held discarded for room while
    // awaiting and below a merged N (the run must reach merges, give-ups,
    // both discards and failures of several classes, or it tests little).
    let reached = Arc::new(std::sync::Mutex::new([0u64; 12]));
    let seen = reached.clone();
    // An eighth of the inputs: each is up to 200 datagrams and a few
    // snapshot connections through the whole ITCH path.
    fuzz_n(
        "itch_glimpse",
        inputs() / 8,
        Duration::from_secs(300),
        move |i| {
            let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0xa076_1d64_78bd_642f));
            let input = itch_input(&mut rng, &streams);
            let mut guard = run.lock().unwrap_or_else(|e| e.into_inner());
            if i % 64 == 0 {
                *guard = None;
            }
            let r = guard.get_or_insert_with(|| {
                let mut g = Rng(seed ^ (i as u64 / 64 + 1).wrapping_mul(0xe703_7ed1_a0b4_28db));
                let max_held = *g.pick(&[8, 64, 512]);
                let attempts = *g.pick(&[1, 2, 3, 8]);
                let config = glimpse_config(max_held, attempts, g.below(4) != 0);
                Run {
                    h: Handler::new(&config),
                    max_held,
                    port: 40_000,
                    clock: input.first().map_or(0, |a| a.1),
                    counted: [0; 12],
                }
            });
            let max_held = r.max_held;
            // One segment at the clock (advanced 10 µs, or now and then
            // past the gap timeout), with what it must change checked.
            let deliver =
                |r: &mut Run, rng: &mut Rng, (port, from_server, flags, seq, payload): Seg| {
                    let step = *rng.pick(&[10_000, 10_000, 10_000, 150_000_000]);
                    r.clock = r.clock.saturating_add(step);
                    let segment = Segment {
                        local: SocketAddrV4::new(Ipv4Addr::LOCALHOST, port),
                        from_server,
                        seq,
                        flags,
                        payload: &payload,
                    };
                    let (s0, q0) = glimpse_counters(&mut r.h);
                    let high = r.h.feeds()[0].engine().itch().unwrap().sequencer().high();
                    r.h.on_segment(0, &segment, r.clock);
                    let (s1, q1) = glimpse_counters(&mut r.h);
                    glimpse_feed_is_bounded(&r.h, max_held);
                    let q = r.h.feeds()[0].engine().itch().unwrap().sequencer();
                    assert!(s1.attempts - s0.attempts <= 1, "one connection a segment");
                    if q1.snapshots > q0.snapshots {
                        // Merged: from N on, N within reach of the stream.
                        let n = s1.next.expect("a merge's N");
                        assert!(!q.awaiting(), "awaiting after a merge");
                        assert!(n <= high.saturating_add(max_held), "N {n} past high {high}");
                        assert!(
                            q.next() >= Some(n) && q.high() >= n,
                            "N {n}: {:?}",
                            q.next()
                        );
                    }
                    if s1.gave_up > s0.gave_up && s1.attempts == s0.attempts {
                        // (A connection starting ends the one open, which may
                        // give the wait up, then starts one of its own.)
                        assert!(!q.awaiting(), "awaiting after a give-up");
                    }
                };
            let one_in = *rng.pick(&[4, 16, 64]);
            let mut pending = std::collections::VecDeque::new();
            for (k, (line, t, p)) in input.iter().enumerate() {
                if pending.is_empty() && rng.below(one_in) == 0 {
                    let at = Standing::of(&r.h, max_held);
                    let bytes = glimpse_stream(&mut rng, &days, &at);
                    r.port = r.port.wrapping_add(1).max(1024);
                    pending = glimpse_segments(&mut rng, &bytes, r.port);
                }
                for _ in 0..rng.below(4) {
                    if let Some(s) = pending.pop_front() {
                        deliver(r, &mut rng, s);
                    }
                }
                r.clock = *t;
                r.h.upkeep(*t);
                let _ = r.h.on_datagram_line(0, *line, p, *t);
                glimpse_feed_is_bounded(&r.h, max_held);
                if k % 16 == 0 {
                    r.h.before_check(0, *t);
                    for &s in &symbols {
                        let _ = r.h.verdict(0, s, *t);
                    }
                }
            }
            // The rest of the connection (now and then left open), and
            // now and then one more after the datagrams.
            if rng.below(5) != 0 {
                while let Some(s) = pending.pop_front() {
                    deliver(r, &mut rng, s);
                }
            }
            if rng.below(2) == 0 {
                let at = Standing::of(&r.h, max_held);
                let bytes = glimpse_stream(&mut rng, &days, &at);
                r.port = r.port.wrapping_add(1).max(1024);
                for s in glimpse_segments(&mut rng, &bytes, r.port) {
                    deliver(r, &mut rng, s);
                }
            }
            // Verdicts: computable, and suspect (or no quote) while a
            // snapshot is awaited.
            let now = r.clock;
            r.h.before_check(0, now);
            let awaiting = {
                let it = r.h.feeds()[0].engine().itch().unwrap();
                it.sequencer().awaiting()
            };
            for &s in &symbols {
                let v = r.h.verdict(0, s, now);
                assert!(
                    !awaiting || v == Reasons::NO_QUOTE || v.contains(Reasons::SUSPECT),
                    "{v:?} while awaiting"
                );
            }
            let (s, q) = glimpse_counters(&mut r.h);
            let it = r.h.feeds()[0].engine().itch().unwrap();
            // Each connection started ended once at most: merged, failed,
            // abandoned with its wait, or still open.
            let failed: u64 = Failure::ALL
                .iter()
                .filter(|&&f| f != Failure::Abandoned)
                .map(|f| s.failures[f.index()])
                .sum();
            let abandoned = s.failures[Failure::Abandoned.index()];
            assert!(q.snapshots + failed <= s.attempts, "{s:?} {q:?}");
            assert!(
                s.attempts <= q.snapshots + failed + abandoned + 1,
                "{s:?} {q:?}"
            );
            assert!(s.gave_up <= failed, "{s:?}");
            missing_runs_agree_with_the_gaps(it.sequencer());
            if i % 8 == 0 {
                let summaries = r.h.summaries();
                let Some(tickguard::protocol::Summary::Itch50(f)) = summaries.get("nasdaq") else {
                    panic!("no itch50 summary");
                };
                let snap = f.snapshot.as_deref().expect("a feed with glimpse");
                let state = if awaiting { "awaiting" } else { "idle" };
                assert_eq!(snap.snapshot_state, state);
                let _ = serde_json::to_string(&summaries).unwrap();
            }
            let mut counts = [0u64; 12];
            counts[0] = s.attempts;
            counts[1] = q.snapshots;
            counts[2..9].copy_from_slice(&s.failures);
            counts[9] = s.gave_up;
            counts[10] = q.snapshot_overflow;
            counts[11] = q.snapshot_discarded;
            let mut sum = seen.lock().unwrap_or_else(|e| e.into_inner());
            for ((total, v), was) in sum.iter_mut().zip(counts).zip(&mut r.counted) {
                *total += v - *was;
                *was = v;
            }
        },
    );
    let reached = *reached.lock().unwrap();
    let classes = reached[2..9].iter().filter(|&&n| n > 0).count();
    assert!(
        reached[1] > 0 && classes >= 3 && reached[9..].iter().all(|&n| n > 0),
        "attempts, merges, failures by class {:?}, given up, overflow, discarded: {reached:?}",
        Failure::ALL.map(Failure::as_str)
    );
}

#[test]
fn binary_file_replay_survives_mutated_files() {
    let dir = fixtures().join("itch");
    let corpus: Vec<Vec<u8>> = ["session.itch", "session.itch.gz"]
        .iter()
        .map(|n| std::fs::read(dir.join(n)).unwrap())
        .collect();
    let config = Config::load(&dir.join("config.toml")).unwrap();
    let date = jiff::civil::date(2026, 1, 5);
    let checks = edge_checks("nasdaq", "AAPL", 1_767_623_400_000_000_000);
    let scratch = tempfile::tempdir().unwrap();
    let seed = seed();
    let reached = Reached::default();
    let replayed = reached.clone();
    // A twentieth of the inputs: each replay sets a feed up (its 16 MiB
    // order window) and reads a file.
    fuzz_n(
        "binfile",
        inputs() / 20,
        Duration::from_secs(300),
        move |i| {
            let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut bytes = rng.pick(&corpus).clone();
            mutate(&mut rng, &mut bytes);
            let path = scratch.path().join("day.itch");
            std::fs::write(&path, &bytes).unwrap();
            let out = tickguard::replay::itch50::replay_file(
                &config,
                "nasdaq",
                date,
                &path,
                &checks,
                |_| {},
            );
            if let Ok(out) = out {
                replayed.one();
                assert_eq!(out.answers.len(), checks.len());
                let _ = serde_json::to_string(&out.summary).unwrap();
            }
        },
    );
    reached.assert_at_least("binfile", PERCENT_BINFILE, inputs() / 20);
}

/// The share of the BinaryFILE fuzzer's inputs that must replay (all of
/// them at the default seed: a broken record ends the replay with its
/// results, not as an error).
const PERCENT_BINFILE: usize = 80;

/// Every protocol's sniffer (`tickguard inspect`) on mutated datagrams of
/// the shipped captures and on MDP3-framed bytes: no panic, and what it
/// answers is consistent (a sequence range in order).
#[test]
fn sniffers_survive_mutated_datagrams() {
    let mut corpus: Vec<Vec<u8>> = Vec::new();
    for dir in [fixtures(), fixtures().join("itch")] {
        for path in std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()) {
            if !path
                .extension()
                .is_some_and(|x| x == "pcap" || x == "pcapng")
            {
                continue;
            }
            let mut capture = CaptureReader::open(&path).unwrap();
            capture
                .for_each(|d| {
                    if corpus.len() < 4096 {
                        corpus.push(d.payload.to_vec())
                    }
                })
                .unwrap();
        }
    }
    // An MDP3 packet: sequence, sending time, one message of CME's schema.
    let mut mdp3 = 7u32.to_le_bytes().to_vec();
    mdp3.extend_from_slice(&1_767_603_600_000_000_000u64.to_le_bytes());
    for v in [21u16, 11, 46, 1, 13] {
        mdp3.extend_from_slice(&v.to_le_bytes());
    }
    mdp3.resize(mdp3.len() + 11, 0);
    corpus.push(mdp3);
    assert!(corpus.len() > 1000, "the fixtures' datagrams");
    let seed = seed();
    let reached = Reached::default();
    let recognised = reached.clone();
    fuzz("sniff", Duration::from_secs(120), move |i| {
        let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0xd1b5_4a32_d192_ed03));
        let mut bytes = rng.pick(&corpus).clone();
        mutate(&mut rng, &mut bytes);
        let mut symbols = 0usize;
        if let Some(s) = tickguard::protocol::sniff(&bytes, |_| symbols += 1) {
            recognised.one();
            if let Some((lo, hi)) = s.sequences {
                assert!(lo <= hi, "{s:?}");
            }
            assert!(symbols <= bytes.len(), "{s:?}");
        }
    });
    reached.assert_at_least("sniff", PERCENT_SNIFFED, inputs());
}

/// Mutated datagrams a sniffer still recognises, at least, percent.
const PERCENT_SNIFFED: usize = 5;

// ---------------------------------------------------------------------------
// CME MDP3: captures of realistic channels, and their datagrams, mutated.

/// `max_cached` of the fuzzed feeds: small, so that the bound is reached.
const MDP3_MAX_CACHED: u64 = 8;

/// An MDP3 feed with every service on A and B; `definitions` names a file
/// beside the configuration.
const MDP3_CONFIG: &str = r##"
[state]
capacity = 64

[[feed]]
name = "cme"
protocol = "mdp3"
lines = ["239.3.1.1:14310", "239.3.1.2:15310"]
snapshot_lines = ["239.3.1.3:14311", "239.3.1.4:15311"]
definition_lines = ["239.3.1.5:14312", "239.3.1.6:15312"]
definitions = "defs.pcap"
stale_threshold_ms = 32000
source_threshold_ms = 32000
clock_offset = "auto"
offset_window_ms = 1000
gap_timeout_ms = 5
max_cached = 8
default_depth = 4
restart_margin = 10000

[[feed.symbol]]
name = "ESZ6-ESH7-ESM7-ESU7S"
stale_threshold_ms = 2

[[feed.symbol]]
name = "#1003"
stale_threshold_ms = 5
"##;

/// The destinations of the engine's lines 0 to 5 (as [`MDP3_CONFIG`]
/// lists them), then one no line uses.
const MDP3_ADDRESSES: [&str; 7] = [
    "239.3.1.1:14310",
    "239.3.1.2:15310",
    "239.3.1.3:14311",
    "239.3.1.4:15311",
    "239.3.1.5:14312",
    "239.3.1.6:15312",
    "239.3.1.9:14399",
];

/// Names checked: Symbols (one of 20 characters), SecurityIDs (the
/// extremes too), and names nothing defines.
const MDP3_NAMES: [&str; 12] = [
    "ESZ6",
    "ESZ6-ESH7",
    "ESZ6-ESH7-ESM7-ESU7S",
    "NQZ6",
    "6EZ6",
    "#1001",
    "#1002",
    "#1004",
    "#2147483647",
    "#-2147483648",
    "#0",
    "NOSUCH",
];

/// The base channels: a whole history at version 13 with losses, a
/// ChannelReset and a restart after it; joined mid-week at version 9 (no
/// baseline: caches overflow until the snapshots) with a weekly restart;
/// long quantities at 12; a newer version's longer blocks (14).
fn mdp3_channels() -> Vec<Vec<Datagram>> {
    let o = |version, first_seq, first_rpt, lose| cme::Options {
        version,
        first_seq,
        first_rpt,
        lose,
    };
    [
        (o(13, 1, 1, true), true),
        (o(9, 90_000, 500, true), true),
        (o(12, 7, 1, false), false),
        (o(14, 40_000, 1, true), true),
    ]
    .iter()
    .map(|&(o, restart)| Channel::build(o, 6, restart))
    .collect()
}

/// The messages of an MDP3 packet, `(start, MsgSize)`, as far as their
/// framing holds.
fn mdp3_frames(p: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 12;
    while at + 10 <= p.len() {
        let size = usize::from(u16::from_le_bytes([p[at], p[at + 1]]));
        if size < 10 || at + size > p.len() {
            break;
        }
        out.push((at, size));
        at += size;
    }
    out
}

/// Writes `v` at `at` of `p`, if it lies inside.
fn put(p: &mut [u8], at: usize, v: &[u8]) {
    if let Some(b) = at.checked_add(v.len()).and_then(|end| p.get_mut(at..end)) {
        b.copy_from_slice(v);
    }
}

/// One field of an MDP3 packet forged where its layout puts it: MsgSeqNum,
/// MsgSize, blockLength, templateId, schemaId, version, a group's
/// blockLength or numInGroup, or what a message names (SecurityID, RptSeq,
/// a level update, a Symbol, a status).
fn mdp3_forge(rng: &mut Rng, p: &mut [u8]) {
    let frames = mdp3_frames(p);
    let random = rng.next();
    if frames.is_empty() || rng.below(10) == 0 {
        if let Some(s) = p.first_chunk::<4>().map(|s| u32::from_le_bytes(*s)) {
            let v: u32 = *rng.pick(&[
                0,
                1,
                u32::MAX,
                u32::MAX - 1,
                s.wrapping_add(1 << 20),
                s.wrapping_sub(1),
                s.wrapping_add(2),
                s.wrapping_sub(20_000),
                random as u32,
            ]);
            put(p, 0, &v.to_le_bytes());
        }
        return;
    }
    let &(m, size) = rng.pick(&frames);
    let bl = usize::from(u16::from_le_bytes([p[m + 2], p[m + 3]]));
    let id = u16::from_le_bytes([p[m + 4], p[m + 5]]);
    let t = template::template(id);
    let root = m + 10;
    let u16s = |v: &[u16]| -> Vec<u8> { v[random as usize % v.len()].to_le_bytes().to_vec() };
    match rng.below(9) {
        0 => {
            let size = size as u16;
            let v = u16s(&[
                0,
                1,
                9,
                10,
                size - 1,
                size.wrapping_add(1),
                0xffff,
                random as u16,
            ]);
            put(p, m, &v);
        }
        1 => {
            let min = t.map_or(0, |t| t.root.min);
            let longer = (bl as u16).wrapping_add(1);
            let v = u16s(&[0, 1, min.saturating_sub(1), longer, 0xffff, random as u16]);
            put(p, m + 2, &v);
        }
        2 => {
            let v = u16s(&[
                0,
                4,
                12,
                30,
                37,
                46,
                47,
                48,
                52,
                54,
                56,
                57,
                63,
                64,
                65,
                69,
                99,
                127,
                128,
                0xffff,
                random as u16,
            ]);
            put(p, m + 4, &v);
        }
        3 => put(p, m + 6, &u16s(&[0, 2, 0xffff, random as u16])),
        4 => {
            let v = u16s(&[0, 1, 7, 8, 9, 12, 13, 14, 200, 0xffff, random as u16]);
            put(p, m + 8, &v);
        }
        5 => {
            // The first group's header: its blockLength or its count.
            let Some(g) = t.and_then(|t| t.groups.first()) else {
                return;
            };
            let at = root + bl;
            if rng.below(2) == 0 {
                let min = g.entry.min;
                put(
                    p,
                    at,
                    &u16s(&[0, 1, min.saturating_sub(1), g.entry.bl + 1, 0xffff]),
                );
            } else {
                let at = at + g.dimension.count_at();
                let n = p.get(at).copied().unwrap_or(0);
                let v: u8 = *rng.pick(&[0, 1, 2, 255, n.wrapping_add(1), random as u8]);
                put(p, at, &[v]);
            }
        }
        _ => mdp3_forge_names(rng, p, m, bl, id),
    }
}

/// What the message at `m` (root of `bl` bytes, template `id`) names or
/// says, forged: an entry's SecurityID, RptSeq or level update, a
/// snapshot's, a definition's Symbol, action or depth, a status.
fn mdp3_forge_names(rng: &mut Rng, p: &mut [u8], m: usize, bl: usize, id: u16) {
    let random = rng.next();
    let ids = [
        i32::MAX,
        i32::MIN,
        -1,
        0,
        1001 + rng.below(6) as i32,
        random as i32,
    ];
    let security_id = rng.pick(&ids).to_le_bytes();
    let rpt: u32 = *rng.pick(&[0, 1, 2, 3, u32::MAX, u32::MAX - 1, 1 << 31, random as u32]);
    let root = m + 10;
    let Some(t) = template::template(id) else {
        return;
    };
    match t.fields {
        Fields::Entries(f) => {
            let g = t.groups[0];
            let at = root + bl;
            let Some(&[b0, b1]) = p.get(at..at + 2) else {
                return;
            };
            let n = p.get(at + g.dimension.count_at()).copied().unwrap_or(0);
            if n == 0 {
                return;
            }
            let entry = usize::from(u16::from_le_bytes([b0, b1]));
            let e = at + g.dimension.header_len() + rng.below(usize::from(n)) * entry;
            match (rng.below(4), f.book) {
                (0, _) => put(p, e + f.security_id, &security_id),
                (1, _) => put(p, e + f.rpt_seq, &rpt.to_le_bytes()),
                (2, Some(b)) => {
                    let v: u8 = *rng.pick(&[0, 1, 6, 127, 128, 255, random as u8]);
                    let at = *rng.pick(&[b.level, b.action, b.entry_type]);
                    put(p, e + at, &[v]);
                }
                (_, Some(b)) => {
                    let v: i64 =
                        *rng.pick(&[i64::MIN, i64::MAX, i64::MAX - 1, -1, 0, random as i64]);
                    put(p, e + b.price, &v.to_le_bytes());
                    put(p, e + b.orders, &(random as i32).to_le_bytes());
                }
                _ => put(p, e + f.rpt_seq, &rpt.to_le_bytes()),
            }
        }
        Fields::Snapshot(_) => {
            use template::snapshot as s;
            match rng.below(4) {
                0 => put(p, root + s::SECURITY_ID, &security_id),
                1 => put(p, root + s::RPT_SEQ, &rpt.to_le_bytes()),
                2 => put(p, root + s::LAST_MSG_SEQ_NUM_PROCESSED, &rpt.to_le_bytes()),
                _ => put(p, root + s::MD_SECURITY_TRADING_STATUS, &[random as u8]),
            }
        }
        Fields::Definition(_) => {
            use template::definition as d;
            match rng.below(4) {
                0 => put(p, root + d::SECURITY_ID, &security_id),
                1 => {
                    // A Symbol of 20 characters, of spaces, or not UTF-8.
                    let mut symbol = [b'Z'; 20];
                    match rng.below(4) {
                        0 => {}
                        1 => symbol[4..].fill(b' '),
                        2 => symbol.fill(0xff),
                        _ => symbol.fill_with(|| rng.next() as u8),
                    }
                    put(p, root + d::SYMBOL, &symbol);
                }
                2 => put(
                    p,
                    root + d::SECURITY_UPDATE_ACTION,
                    &[*rng.pick(&[b'D', b'M', b'A', 0])],
                ),
                _ => put(p, root + d::SECURITY_GROUP, &random.to_le_bytes()),
            }
        }
        Fields::Status => {
            use template::status as s;
            match rng.below(3) {
                0 => put(p, root + s::SECURITY_ID, &security_id),
                1 => put(p, root + s::SECURITY_TRADING_STATUS, &[random as u8]),
                _ => put(p, root + s::SECURITY_GROUP, &random.to_le_bytes()),
            }
        }
        Fields::Root => put(p, root, &random.to_le_bytes()),
    }
}

/// Whole messages of an MDP3 packet repeated, removed, moved to the end,
/// or one of a random template (any id, version and bytes) inserted.
fn mdp3_messages(rng: &mut Rng, p: &mut Vec<u8>) {
    let frames = mdp3_frames(p);
    let Some(&(m, size)) = (!frames.is_empty()).then(|| rng.pick(&frames)) else {
        return;
    };
    match rng.below(4) {
        0 => {
            let copy = p[m..m + size].to_vec();
            p.splice(m..m, copy);
        }
        1 if frames.len() > 1 => {
            p.drain(m..m + size);
        }
        2 => {
            let random = rng.next() as u16;
            let id: u16 = *rng.pick(&[4, 12, 30, 46, 52, 54, 64, 69, 127, 200, random]);
            let version: u16 = *rng.pick(&[9, 13, 14, random]);
            let root: Vec<u8> = (0..rng.below(80)).map(|_| rng.next() as u8).collect();
            let groups: Vec<u8> = (0..rng.below(80)).map(|_| rng.next() as u8).collect();
            p.splice(m..m, encode::raw(id, version, &root, &groups));
        }
        _ => {
            let message: Vec<u8> = p.drain(m..m + size).collect();
            p.extend_from_slice(&message);
        }
    }
}

/// An MDP3 stream as a broken venue, a lossy network or a hostile sender
/// makes it: a base channel from its start (definitions first) or a
/// window of it, some datagrams mutated at byte level or forged field by
/// field, cut, dropped, repeated, moved to another line or in time, whole
/// messages repeated, removed or made up; some pairs swapped.
fn mdp3_input(rng: &mut Rng, channels: &[Vec<Datagram>]) -> Vec<Datagram> {
    let source = rng.pick(channels);
    let from = match rng.below(2) {
        0 => 0,
        _ => rng.below(source.len()),
    };
    let take = (1 + rng.below(source.len())).min(source.len() - from);
    let one_in = *rng.pick(&[2, 4, 8, 32]);
    let mut out: Vec<Datagram> = Vec::with_capacity(take + 8);
    for d in &source[from..from + take] {
        let (mut line, mut t, mut p) = d.clone();
        if rng.below(one_in) == 0 {
            match rng.below(12) {
                0 | 1 => mutate(rng, &mut p),
                2..=5 => mdp3_forge(rng, &mut p),
                6 => p.truncate(rng.below(p.len().max(1))),
                7 => continue,
                8 => out.push((line, t, p.clone())),
                9 => line = rng.below(MDP3_ADDRESSES.len()),
                10 => {
                    let late = t.saturating_add(6 * cme::MS);
                    t = *rng.pick(&[0, u64::MAX, t.saturating_sub(1 << 30), t + (1 << 33), late]);
                }
                _ => mdp3_messages(rng, &mut p),
            }
        }
        out.push((line, t, p));
    }
    for _ in 0..rng.below(3) {
        if out.len() > 1 {
            let (i, j) = (rng.below(out.len()), rng.below(out.len()));
            out.swap(i, j);
        }
    }
    out
}

/// What the datagrams read could create at most: instruments (each
/// needs a message or an entry naming it), snapshot and definition
/// messages, messages skipped unread (unknown or market by order, on any
/// service); and how many datagrams there were.
#[derive(Debug, Default)]
struct Mdp3Bound {
    datagrams: u64,
    named: u64,
    snapshots: u64,
    definitions: u64,
    unread: u64,
}

impl Mdp3Bound {
    fn add(&mut self, payload: &[u8]) {
        self.datagrams += 1;
        let Ok(p) = Packet::new_checked(payload) else {
            return;
        };
        for m in p.messages() {
            match m.body() {
                Body::Incremental(i) | Body::ChannelReset(i) => {
                    self.named += u64::from(i.entry_count())
                }
                Body::SecurityStatus(_) => self.named += 1,
                Body::Snapshot(_) => {
                    self.named += 1;
                    self.snapshots += 1;
                }
                Body::Definition(_) => {
                    self.named += 1;
                    self.definitions += 1;
                }
                Body::NotRead
                    if matches!(m.kind(), template::Kind::Unknown | template::Kind::Mbo) =>
                {
                    self.unread += 1
                }
                Body::Heartbeat | Body::NotRead => {}
            }
        }
    }

    /// Every UDP payload of the capture `bytes`, as far as it reads.
    fn add_capture(&mut self, bytes: &[u8]) {
        let reader = Box::new(Cursor::new(bytes.to_vec()));
        if let Ok(mut c) = CaptureReader::from_reader("bound", reader) {
            let _ = c.for_each(|d| self.add(d.payload));
        }
    }
}

/// A capture of `input`, in one of the formats (times past 2106 fit only
/// pcapng; a datagram a format cannot hold is left out).
fn mdp3_capture(rng: &mut Rng, input: &[Datagram]) -> Vec<u8> {
    use tickguard::capture::link::Link;
    use tickguard::capture::write::{CaptureWriter, Format};
    let format = *rng.pick(&[
        Format::PcapNanos,
        Format::PcapMicros,
        Format::PcapNg { tsresol: 9 },
    ]);
    let mut w = CaptureWriter::new(Vec::new(), format, Link::Ethernet).unwrap();
    let src = "10.3.3.3:5000".parse().unwrap();
    for (line, t, p) in input {
        let dst = MDP3_ADDRESSES[(*line).min(MDP3_ADDRESSES.len() - 1)];
        let _ = w.write_udp(*t, src, dst.parse().unwrap(), p);
    }
    w.finish().unwrap()
}

/// The definitions file: every instrument's definition, one a packet.
fn mdp3_definitions_file() -> Vec<u8> {
    let c = Channel::new(cme::Options {
        version: 13,
        first_seq: 1,
        first_rpt: 1,
        lose: false,
    });
    let datagrams: Vec<Datagram> = (0..cme::INSTRUMENTS.len())
        .map(|i| {
            let p = encode::packet(i as u32 + 1, cme::T0, &[c.definition(i)]);
            (MDP3_ADDRESSES.len() - 1, cme::T0, p)
        })
        .collect();
    mdp3_capture(&mut Rng(1), &datagrams)
}

/// What a check's answer promises whatever the input: `no_quote` alone or
/// not at all, and only when the visible book is empty (or the name
/// unknown); `invalid_price` exactly when the visible book is crossed.
fn mdp3_answer_is_consistent(a: &tickguard::replay::Answer) {
    let no_quote = a.reasons.contains(Reasons::NO_QUOTE);
    if no_quote {
        assert_eq!(a.reasons, Reasons::NO_QUOTE);
    }
    if let Some(d) = &a.detail {
        let quoted = d.bid.is_some() || d.ask.is_some();
        assert_eq!(quoted, !no_quote, "{d:?} {:?}", a.reasons);
        assert!(d.id.is_some() || !quoted, "{d:?}");
        if let (Some(b), Some(x)) = (d.bid, d.ask) {
            assert_eq!(b > x, a.reasons.contains(Reasons::INVALID_PRICE), "{d:?}");
        }
    }
}

/// What an MDP3 feed's summary promises whatever the input, against what
/// the input could create (`bound`).
fn mdp3_summary_is_bounded(s: &tickguard::protocol::mdp3::summary::FeedSummary, bound: &Mdp3Bound) {
    assert!(
        s.rejected <= s.packets && s.packets <= bound.datagrams,
        "{s:?}"
    );
    assert_eq!(s.rejected_by_reason.values().sum::<u64>(), s.rejected);
    assert!(
        s.duplicates + s.recovered + s.stale_sequence <= s.packets,
        "{s:?}"
    );
    assert!(s.snapshot_packets <= s.packets);
    assert!(s.snapshots_applied + s.snapshots_ignored <= bound.snapshots);
    assert!(s.definitions <= bound.definitions, "{s:?} {bound:?}");
    assert!(s.heartbeats <= s.messages);
    assert!(s.messages_by_template.values().sum::<u64>() <= s.messages);
    assert!(
        s.unknown_templates + s.mbo_messages <= bound.unread,
        "{s:?} {bound:?}"
    );
    // Packet gaps: only while a sequence runs, at most those opened.
    assert!(s.gaps_open <= s.packet_gaps && s.gaps_open <= 4096, "{s:?}");
    if s.next.is_none() {
        assert_eq!(s.gaps_open, 0);
    }
    // Memory: instruments only as the input named them, caches bounded.
    assert!(
        s.symbols.len() as u64 <= bound.named,
        "{} {bound:?}",
        s.symbols.len()
    );
    assert!(s.cached <= MDP3_MAX_CACHED, "{s:?}");
    assert_eq!(s.symbols.values().map(|x| x.cached).sum::<u64>(), s.cached);
    for (key, x) in &s.symbols {
        assert_eq!(key, &format!("#{}", x.security_id));
        assert!(x.rpt_seq.is_some() || x.suspect, "{x:?}");
        assert!(!x.overflowed || x.cached == 0, "{x:?}");
        assert!(
            x.cached == 0 || x.suspect,
            "entries wait only behind a hole: {x:?}"
        );
        assert!((1..=127).contains(&x.depth) && (1..=127).contains(&x.implied_depth));
        assert!(x.symbol.as_ref().is_none_or(|s| s.chars().count() <= 20));
    }
}

#[test]
fn mdp3_replay_survives_mutated_captures() {
    let dir = tempfile::tempdir().unwrap();
    let channels = mdp3_channels();
    assert!(channels.iter().all(|c| c.len() > 100), "the base channels");
    let defs = mdp3_definitions_file();
    std::fs::write(dir.path().join("defs.pcap"), &defs).unwrap();
    let path = dir.path().join("cme.toml");
    std::fs::write(&path, MDP3_CONFIG).unwrap();
    let config = Config::load(&path).unwrap();
    // The same feed with a definitions file each input may replace, and
    // with none (most inputs: reading a file costs more than the capture;
    // the channels send their definitions on the definition lines too).
    let fuzzed_defs = dir.path().join("fuzzed.pcap");
    std::fs::write(&fuzzed_defs, &defs).unwrap();
    let path = dir.path().join("fuzzed.toml");
    std::fs::write(&path, MDP3_CONFIG.replace("defs.pcap", "fuzzed.pcap")).unwrap();
    let fuzzed = Config::load(&path).unwrap();
    let text = MDP3_CONFIG.replace("definitions = \"defs.pcap\"\n", "");
    let without = Config::parse(&text, "cme.toml").unwrap();
    let mut from_defs = Mdp3Bound::default();
    from_defs.add_capture(&defs);
    assert_eq!(from_defs.definitions, cme::INSTRUMENTS.len() as u64);
    // Each name before the capture, at its first datagram, early, later and
    // at the end of time.
    let times = [
        0,
        cme::T0,
        cme::T0 + 5 * cme::MS,
        cme::T0 + 30 * cme::MS,
        u64::MAX,
    ];
    let checks: Vec<Check> = MDP3_NAMES
        .iter()
        .flat_map(|name| {
            times.map(|time_ns| Check {
                time_ns,
                feed: "cme".into(),
                symbol: name.to_string(),
            })
        })
        .collect();
    let seed = seed();
    let reached = Reached::default();
    let opened = reached.clone();
    // Every input a replay of its own (about 1.5 ms each in a debug build).
    fuzz("mdp3_replay", Duration::from_secs(300), move |i| {
        let _keep = &dir;
        let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let input = mdp3_input(&mut rng, &channels);
        let mut bytes = mdp3_capture(&mut rng, &input);
        // What the input could create: its datagrams (all of them: one a
        // format cannot hold only adds to the bound), or those the bytes
        // hold once mutated too.
        let mut bound = Mdp3Bound::default();
        if rng.below(10) == 0 {
            mutate(&mut rng, &mut bytes);
            bound.add_capture(&bytes);
        } else {
            input.iter().for_each(|d| bound.add(&d.2));
        }
        let config = match rng.below(8) {
            0 => {
                let mut d = defs.clone();
                mutate(&mut rng, &mut d);
                std::fs::write(&fuzzed_defs, &d).unwrap();
                let mut b = Mdp3Bound::default();
                b.add_capture(&d);
                bound.named += b.named;
                bound.definitions += b.definitions;
                bound.unread += b.unread;
                &fuzzed
            }
            1 => {
                bound.named += from_defs.named;
                bound.definitions += from_defs.definitions;
                bound.unread += from_defs.unread;
                &config
            }
            _ => &without,
        };
        let Ok(mut capture) = CaptureReader::from_reader("fuzz", Box::new(Cursor::new(bytes)))
        else {
            return;
        };
        opened.one();
        let out = tickguard::replay::replay(config, &mut capture, &checks, |_| {});
        assert_eq!(out.answers.len(), checks.len());
        out.answers.iter().for_each(mdp3_answer_is_consistent);
        let Some(tickguard::replay::FeedSummary::Mdp3(s)) = out.summary.feeds.get("cme") else {
            panic!("no mdp3 summary");
        };
        mdp3_summary_is_bounded(s, &bound);
        if i % 8 == 0 {
            for (c, a) in checks.iter().zip(&out.answers) {
                let _ = tickguard::replay::answer_json(c, *a);
            }
            let _ = serde_json::to_string(&out.summary).unwrap();
        }
    });
    // (Nearly all: a tenth of them mutated as bytes, the rest as datagrams.)
    reached.assert_at_least("mdp3_replay", 90, inputs());
}

#[test]
fn mdp3_feed_survives_mutated_and_forged_datagrams() {
    use tickguard::handler::Handler;
    use tickguard::symbol::Symbol;
    let channels = mdp3_channels();
    let text = MDP3_CONFIG.replace("definitions = \"defs.pcap\"\n", "");
    let config = Config::parse(&text, "cme.toml").unwrap();
    let symbols: Vec<Symbol> = ["ESZ6", "NQZ6", "6EZ6", "ZZZZ"]
        .iter()
        .map(|s| Symbol::parse(s).unwrap())
        .collect();
    let seed = seed();
    // One handler serves 64 inputs in a row, state carried from one to the
    // next as a live feed's would be (with what those inputs could create
    // as its bound).
    let handler = std::sync::Mutex::new(None::<(Handler, u64)>);
    // What the inputs reached, at most: rejections by each reason, then
    // gaps filled and given up, restarts, ChannelResets, snapshots applied,
    // cache overflows and ticks lost (the run must reach each, or it tests
    // little).
    let reached = Arc::new([const { AtomicUsize::new(0) }; 13]);
    let seen = reached.clone();
    // A quarter of the inputs, as for ITCH: each is up to the ~200
    // datagrams of a base channel through the whole MDP3 path.
    fuzz_n("mdp3", inputs() / 4, Duration::from_secs(300), move |i| {
        let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0xd1b5_4a32_d192_ed03));
        let input = mdp3_input(&mut rng, &channels);
        let mut guard = handler.lock().unwrap_or_else(|e| e.into_inner());
        if i % 64 == 0 {
            *guard = None;
        }
        let (h, named) = guard.get_or_insert_with(|| (Handler::new(&config), 0));
        for (k, (line, t, p)) in input.iter().enumerate() {
            let mut b = Mdp3Bound::default();
            b.add(p);
            *named += b.named;
            h.upkeep(*t);
            let _ = h.on_datagram_line(0, *line, p, *t);
            if k % 16 == 0 {
                h.before_check(0, *t);
                for &s in &symbols {
                    let _ = h.verdict(0, s, *t);
                }
                for name in MDP3_NAMES {
                    let _ = h.verdict_named(0, name, *t);
                }
            }
        }
        let c = &h.feeds()[0].counters;
        assert!(c.rejected <= c.packets);
        assert_eq!(c.rejected_by_reason.iter().sum::<u64>(), c.rejected);
        let f = h.feeds()[0].engine().mdp3().expect("an mdp3 feed");
        let cached: usize = f
            .instruments()
            .iter()
            .map(|e| e.instrument.seq.cached())
            .sum();
        assert_eq!(cached, f.cached());
        for e in f.instruments() {
            // Entries wait only behind a hole (or for a baseline); an
            // overflowed instrument waits for a snapshot, caching nothing.
            let seq = &e.instrument.seq;
            assert!(seq.cached() == 0 || seq.suspect(), "{}", e.security_id);
            assert!(!seq.overflowed() || (seq.cached() == 0 && seq.suspect()));
            // With nothing pending, a check reads every change applied.
            let i = &e.instrument;
            assert!(
                i.pending() || *f.visible(e) == *i.working(),
                "{}",
                e.security_id
            );
        }
        assert!(f.cached() as u64 <= MDP3_MAX_CACHED);
        assert!(f.instruments().len() as u64 <= *named);
        assert!(f.sequence().gaps_open() <= 4096);
        let q = f.sequence().counters();
        let n = f.counters();
        let mut now: Vec<u64> = Reject::ALL
            .iter()
            .map(|r| c.rejected_by_reason[r.index()])
            .collect();
        now.extend([
            q.recovered,
            q.packets_lost,
            q.sequence_restarts,
            n.channel_resets,
            n.snapshots_applied,
            n.cache_overflows,
            n.ticks_lost,
        ]);
        for (r, v) in seen.iter().zip(now) {
            r.fetch_max(v as usize, Ordering::Relaxed);
        }
    });
    let reached: Vec<usize> = reached.iter().map(|r| r.load(Ordering::Relaxed)).collect();
    assert!(
        reached.iter().all(|&n| n > 0),
        "rejected by reason {:?}, recovered, lost, restarts, resets, snapshots, overflows, ticks lost: {reached:?}",
        Reject::ALL.map(Reject::as_str)
    );
}
