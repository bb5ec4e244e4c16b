//! Seeded mutation fuzzing of the inputs a user hands over, capture bytes
//! (through the replay library path, with and without forensics) and
//! configuration text, and of what a hostile group sends an ITCH feed
//! (MoldUDP64 datagrams mutated, forged and reordered, through the handler). Each test runs a fixed number of inputs from a fixed
//! seed, so a failure names the input that reproduces it; a watchdog turns a
//! hang into a failure. `TICKGUARD_FUZZ_INPUTS` and `TICKGUARD_FUZZ_SEED`
//! run more, or others.

use std::io::Cursor;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tickguard::capture::CaptureReader;
use tickguard::config::Config;
use tickguard::replay::Check;

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

fn inputs() -> usize {
    env_or("TICKGUARD_FUZZ_INPUTS", 10_000)
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
    fuzz("replay", Duration::from_secs(300), move |i| {
        let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let bytes = capture_input(&mut rng, &corpus);
        let Ok(mut capture) = CaptureReader::from_reader("fuzz", Box::new(Cursor::new(bytes)))
        else {
            return;
        };
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
}

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
    fuzz("config", Duration::from_secs(300), move |i| {
        let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let text = config_input(&mut rng, &corpus);
        match Config::parse(&text, "fuzz.toml") {
            Ok(c) => accepted_config_is_in_range(&c),
            Err(e) => {
                let e = e.to_string();
                assert!(e.starts_with("config fuzz.toml: "), "{e}");
                assert!(!e.chars().any(char::is_control), "{e:?}");
                assert!(e.chars().count() <= 400, "{} characters", e.len());
            }
        }
    });
}

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
        // What a re-request poll would ask: ascending, disjoint runs, as
        // many sequences in all as the gaps count missing.
        let (mut last, mut total) = (None, 0u128);
        it.sequencer().missing(|lo, hi, _| {
            assert!(
                lo < hi && last.is_none_or(|l| l <= lo),
                "{last:?} {lo} {hi}"
            );
            last = Some(hi);
            total += u128::from(hi - lo);
            true
        });
        let counted: u128 = it.sequencer().gaps().map(|g| u128::from(g.2)).sum();
        assert_eq!(total, counted, "missing runs against the gaps' counts");
    });
    let reached: Vec<usize> = reached.iter().map(|r| r.load(Ordering::Relaxed)).collect();
    assert!(
        reached.iter().all(|&n| n > 0),
        "rejected, recovered, sessions, given up: {reached:?}"
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
                assert_eq!(out.answers.len(), checks.len());
                let _ = serde_json::to_string(&out.summary).unwrap();
            }
        },
    );
}

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
    fuzz("sniff", Duration::from_secs(120), move |i| {
        let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0xd1b5_4a32_d192_ed03));
        let mut bytes = rng.pick(&corpus).clone();
        mutate(&mut rng, &mut bytes);
        let mut symbols = 0usize;
        if let Some(s) = tickguard::protocol::sniff(&bytes, |_| symbols += 1) {
            if let Some((lo, hi)) = s.sequences {
                assert!(lo <= hi, "{s:?}");
            }
            assert!(symbols <= bytes.len(), "{s:?}");
        }
    });
}
