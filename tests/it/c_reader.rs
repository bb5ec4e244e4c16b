//! The header-only C reader (`include/tickguard.h`), driven through
//! `examples/c/check.c` in separate processes, against `tickguard::Reader`
//! on the same shared-memory publication written in this process.
//!
//! Thresholds are tens of seconds and the heartbeat bound minutes, so only
//! the cases built with arrival or source times in the past are stale.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickguard::config::Config;
use tickguard::handler::Handler;
use tickguard::protocol::publication_feeds;
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::reader::{ReaderOptions, DEFAULT_DEAD_AFTER_NS};
use tickguard::shm::Publication;
use tickguard::state::StateTable;
use tickguard::symbol::Symbol;
use tickguard::time::now_ns;
use tickguard::Reader;

const S: u64 = 1_000_000_000;
/// Heartbeat bound for every case that is not about a dead writer, ms.
const LONG_BOUND_MS: u64 = 600_000;
/// Longest any child process (compiler or check) may run.
const CHILD_LIMIT: Duration = Duration::from_secs(60);

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A scratch directory on tmpfs if there is one (as in production), removed on drop.
fn scratch() -> tempfile::TempDir {
    let prefix = format!("tickguard-ctest-{}-", std::process::id());
    let mut b = tempfile::Builder::new();
    b.prefix(&prefix);
    if Path::new("/dev/shm").is_dir() {
        if let Ok(d) = b.tempdir_in("/dev/shm") {
            return d;
        }
    }
    b.tempdir().expect("temp dir")
}

/// A compiler from `var` (or `default`) that answers `--version`.
fn compiler(var: &str, default: &str) -> Option<String> {
    let cc = std::env::var(var)
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| default.to_string());
    let works = Command::new(&cc)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    works.then_some(cc)
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs a command to completion within [`CHILD_LIMIT`], killing it after.
fn run(cmd: &mut Command) -> Run {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + CHILD_LIMIT;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still running after {CHILD_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    Run {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Says a test is skipped for want of `what` (a compiler), or fails it
/// under CI, which must have one: a missing compiler there would let every
/// test of the C reader pass without running.
fn skipped_without(what: &str) {
    crate::common::skip(&format!("the C reader's tests need {what}"));
}

/// Compiles examples/c/check.c into `dir`; `None` (test skipped, failed
/// under CI) without a C compiler.
fn compile_check(dir: &Path) -> Option<PathBuf> {
    let Some(cc) = compiler("CC", "cc") else {
        skipped_without("a working C compiler (cc or $CC)");
        return None;
    };
    let bin = dir.join("check");
    let r = run(Command::new(&cc)
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2"])
        .arg(format!("-I{}", crate_dir().join("include").display()))
        .arg("-o")
        .arg(&bin)
        .arg(crate_dir().join("examples/c/check.c")));
    assert_eq!(
        r.code,
        Some(0),
        "{cc} failed on examples/c/check.c:\n{}",
        r.stderr
    );
    Some(bin)
}

/// What the C program answered.
#[derive(Debug)]
struct CAnswer {
    code: Option<i32>,
    /// First line: "ok" or "rejected: a|b".
    line: String,
    /// From "version: N", 0 when absent.
    version: u64,
    /// The book top lines ("bid: PRICE SIZE", "ask: PRICE SIZE", "halted",
    /// "closed").
    quote: Vec<String>,
    stderr: String,
}

fn c_check(bin: &Path, shm: &Path, feed: &str, symbol: &str, bound_ms: Option<u64>) -> CAnswer {
    c_check_owned(bin, shm, feed, symbol, bound_ms, None)
}

/// As [`c_check`], naming the uid that must own the file (needs a bound).
fn c_check_owned(
    bin: &Path,
    shm: &Path,
    feed: &str,
    symbol: &str,
    bound_ms: Option<u64>,
    owner: Option<u32>,
) -> CAnswer {
    let mut cmd = Command::new(bin);
    cmd.arg(shm).arg(feed).arg(symbol);
    if let Some(ms) = bound_ms {
        cmd.arg(ms.to_string());
    }
    if let Some(uid) = owner {
        assert!(bound_ms.is_some(), "the owner comes after the bound");
        cmd.arg(uid.to_string());
    }
    let r = run(&mut cmd);
    let mut lines = r.stdout.lines();
    let line = lines.next().unwrap_or_default().to_string();
    let mut version = 0;
    let mut quote = Vec::new();
    for l in lines {
        if l.starts_with("bid: ") || l.starts_with("ask: ") || l == "halted" || l == "closed" {
            quote.push(l.to_string());
            continue;
        }
        let v = l
            .strip_prefix("version: ")
            .unwrap_or_else(|| panic!("unexpected output line {l:?} in {:?}", r.stdout));
        version = v.parse().expect("version number");
    }
    CAnswer {
        code: r.code,
        line,
        version,
        quote,
        stderr: r.stderr,
    }
}

fn options(bound_ms: Option<u64>, owner: Option<u32>) -> ReaderOptions {
    ReaderOptions {
        dead_after_ns: bound_ms.map_or(DEFAULT_DEAD_AFTER_NS, |ms| ms * 1_000_000),
        owner,
    }
}

/// What the Rust reader says, in the C program's words: (line, exit code, version).
fn rust_check(
    shm: &Path,
    feed: &str,
    symbol: &str,
    bound_ms: Option<u64>,
    owner: Option<u32>,
) -> (String, i32, u64) {
    let v = Reader::open_with(shm, options(bound_ms, owner)).check_symbol(feed, symbol, now_ns());
    if v.is_ok() {
        ("ok".into(), 0, v.version)
    } else {
        (format!("rejected: {}", v.reasons), 1, v.version)
    }
}

/// Asserts C and Rust agree on (feed, symbol) and that the answer is `expected`
/// ("ok" or reason names joined by '|'). Returns the C answer.
fn same(
    bin: &Path,
    shm: &Path,
    feed: &str,
    symbol: &str,
    bound_ms: Option<u64>,
    expected: &str,
) -> CAnswer {
    same_owned(bin, shm, feed, symbol, bound_ms, None, expected)
}

/// As [`same`], with the uid that must own the file (`None`: this user).
fn same_owned(
    bin: &Path,
    shm: &Path,
    feed: &str,
    symbol: &str,
    bound_ms: Option<u64>,
    owner: Option<u32>,
    expected: &str,
) -> CAnswer {
    let c = c_check_owned(bin, shm, feed, symbol, bound_ms, owner);
    let (line, code, version) = rust_check(shm, feed, symbol, bound_ms, owner);
    let what = format!("{feed}/{symbol:?} in {}: {c:?}", shm.display());
    let healthy = Reader::open_with(shm, options(bound_ms, owner))
        .health(now_ns())
        .is_ok();
    assert_eq!(
        c.stderr.is_empty(),
        healthy,
        "C reports an unhealthy writer iff Rust does, {what}"
    );
    assert_eq!(c.line, line, "C vs Rust line, {what}");
    assert_eq!(c.code, Some(code), "C exit code vs Rust, {what}");
    assert_eq!(c.version, version, "C vs Rust version, {what}");
    let want = if expected == "ok" {
        "ok".to_string()
    } else {
        format!("rejected: {expected}")
    };
    assert_eq!(c.line, want, "expected answer, {what}");
    c
}

fn sym(s: &str) -> Symbol {
    Symbol::parse(s).unwrap()
}

fn config(shm: &Path) -> Config {
    let text = format!(
        r#"
[state]
capacity = 64

[sidecar]
shm_path = '{}'

[[feed]]
name = "lp1"
kind = "full"
lines = ["239.1.1.1:30001"]
stale_threshold_ms = 30000
source_threshold_ms = 30000
clock_offset = -2000000000   # provider clock 2 s ahead of local

[[feed.symbol]]
name = "SLOWSYM"
stale_threshold_ms = 1000000
source_threshold_ms = 1000000

[[feed]]
name = "lp2-delta"
kind = "delta"
lines = ["239.1.1.2:30002"]
stale_threshold_ms = 30000
source_threshold_ms = 30000
clock_offset = 0

[[feed]]
name = "wild"
kind = "full"
lines = ["239.1.1.3:30003"]
stale_threshold_ms = 30000
source_threshold_ms = 30000
clock_offset = "auto"
"#,
        shm.display()
    );
    Config::parse(&text, "c_reader.toml").expect("config")
}

/// The publication `run` would make at `shm` for [`config`], at `now`.
fn published(shm: &Path, now: u64) -> (Config, Arc<Publication>) {
    let config = config(shm);
    let p = Publication::create(
        shm,
        0o640,
        config.capacity,
        &publication_feeds(&config),
        now,
        1_000_000,
    )
    .expect("publication");
    (config, Arc::new(p))
}

/// Feeds the handler one packet.
fn feed(
    h: &mut Handler,
    feed: u16,
    t: u64,
    send_time: u64,
    build: impl FnOnce(&mut PacketBuilder),
) {
    let mut p = PacketBuilder::new(send_time);
    build(&mut p);
    h.on_datagram(feed, &p.finish(), t).expect("valid packet");
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn put(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn c_reader_agrees_with_rust_reader() {
    let dir = scratch();
    let Some(bin) = compile_check(dir.path()) else {
        return;
    };
    let shm = dir.path().join("tickguard");
    let now = now_ns();
    let past = now - 120 * S;
    let (config, p) = published(&shm, now);
    let table = StateTable::shared(p.clone());
    let mut h = Handler::with_table(&config, table, 1024);
    p.ready();
    p.heartbeat(now);

    // lp1: full feed, offset −2 s (a fresh source time reads 2 s ahead).
    // The older packet first: a feed takes no arrival before its latest.
    feed(&mut h, 0, past, past + 2 * S, |b| {
        b.quote(sym("OLDQ"), 1, past + 2 * S, 1.0, 1.1);
        b.quote(sym("SLOWSYM"), 1, past + 2 * S, 1.0, 1.1);
    });
    feed(&mut h, 0, now, now + 2 * S, |b| {
        b.quote(sym("EURUSD"), 1, now + 2 * S, 1.0850, 1.0851);
        b.quote(sym("SRCOLD"), 1, now - 300 * S, 1.0, 1.1);
        b.quote(sym("BADPX"), 1, now + 2 * S, 1.0, 1.1);
        b.quote(sym("BADPX"), 2, now + 2 * S, 2.0, 1.0); // bid > ask
        b.heartbeat(sym("NOPRICE"), 5);
        b.quote(sym("ONLYBAD"), 1, now + 2 * S, f64::NAN, 1.0);
    });
    // lp2-delta: suspect until a snapshot, and after a gap.
    feed(&mut h, 1, past, past, |b| {
        b.snapshot(sym("ALLBAD"), 1, past, 1.0, 1.1);
        b.quote(sym("ALLBAD"), 5, past, -1.0, 1.1);
    });
    feed(&mut h, 1, now, now, |b| {
        b.quote(sym("EURUSD"), 1, now, 1.0850, 1.0851);
        b.snapshot(sym("GBPUSD"), 10, now, 1.25, 1.26);
        b.quote(sym("GBPUSD"), 11, now, 1.25, 1.27);
        b.snapshot(sym("GAPPY"), 5, now, 1.0, 1.1);
        b.quote(sym("GAPPY"), 9, now, 1.0, 1.1);
    });
    // wild: send times at the end of u64, so the automatic offset
    // (arrival − send_time) needs more than 64 bits.
    feed(&mut h, 2, now, u64::MAX, |b| {
        b.quote(sym("FUTURE"), 1, u64::MAX - S, 1.0, 1.1);
        b.quote(sym("ZERO"), 1, 0, 1.0, 1.1);
    });
    let wild = Reader::open(&shm).offset(2).expect("offset");
    assert!(wild < i64::MIN as i128, "offset {wild} needs 128 bits");

    let long = Some(LONG_BOUND_MS);
    let cases: &[(&str, &str, &str)] = &[
        ("lp1", "EURUSD", "ok"),
        ("lp1", "SLOWSYM", "ok"),
        ("lp1", "OLDQ", "stale|stale_at_source"),
        ("lp1", "SRCOLD", "stale_at_source"),
        ("lp1", "BADPX", "invalid_price"),
        ("lp1", "NOPRICE", "no_quote"),
        ("lp1", "ONLYBAD", "no_quote"),
        ("lp2-delta", "EURUSD", "suspect"),
        ("lp2-delta", "GBPUSD", "ok"),
        ("lp2-delta", "GAPPY", "suspect"),
        (
            "lp2-delta",
            "ALLBAD",
            "stale|stale_at_source|suspect|invalid_price",
        ),
        ("wild", "FUTURE", "ok"),
        ("wild", "ZERO", "stale_at_source"),
        // Unknown: symbol, symbol on another feed, feed, invalid names.
        ("lp1", "NOSUCH", "no_quote"),
        ("lp1", "GBPUSD", "no_quote"),
        ("wild", "EURUSD", "no_quote"),
        ("nofeed", "EURUSD", "no_quote"),
        ("", "EURUSD", "no_quote"),
        ("lp1", "", "no_quote"),
        ("lp1", "EUR USD", "no_quote"),
        ("lp1", "EURUSD ", "no_quote"),
        ("lp1", "TOOLONGSYM", "no_quote"),
        ("lp1", "EURUSD\u{7f}", "no_quote"),
    ];
    for &(f, s, expected) in cases {
        let c = same(&bin, &shm, f, s, long, expected);
        assert_eq!(c.stderr, "", "{f}/{s}: writer healthy, nothing on stderr");
        if expected != "no_quote" {
            assert!(
                c.version >= 4 && c.version.is_multiple_of(2),
                "{f}/{s}: version {}",
                c.version
            );
        }
    }
    assert_eq!(
        c_check(&bin, &shm, "lp1", "BADPX", long).version,
        6,
        "init + two updates"
    );

    // A heartbeat older than the bound: a dead writer, whatever the symbol.
    p.heartbeat(now_ns() - 10 * S);
    for (f, s) in [
        ("lp1", "EURUSD"),
        ("lp1", "NOSUCH"),
        ("lp2-delta", "GBPUSD"),
    ] {
        let c = same(&bin, &shm, f, s, Some(1000), "stale");
        assert!(c.stderr.contains("writer dead"), "{}", c.stderr);
        same(&bin, &shm, f, s, None, "stale"); // the default bound, 100 ms
    }
    // Alive again.
    p.heartbeat(now_ns());
    same(&bin, &shm, "lp1", "EURUSD", long, "ok");

    layout_checks(&bin, dir.path(), &shm);

    // A file that is not ready yet (version not stored).
    let unready = dir.path().join("unready");
    let _p2 = Publication::create(
        &unready,
        0o640,
        config.capacity,
        &publication_feeds(&config),
        now,
        1_000_000,
    )
    .expect("publication");
    let c = same(&bin, &unready, "lp1", "EURUSD", long, "stale");
    assert!(c.stderr.contains("unusable publication"), "{}", c.stderr);

    // No file at all.
    let missing = dir.path().join("missing");
    let c = same(&bin, &missing, "lp1", "EURUSD", long, "stale");
    assert!(c.stderr.contains("No such file"), "{}", c.stderr);

    // The writer closed the publication.
    p.close();
    for (f, s) in [
        ("lp1", "EURUSD"),
        ("lp2-delta", "GBPUSD"),
        ("lp1", "NOSUCH"),
    ] {
        let c = same(&bin, &shm, f, s, long, "stale");
        assert!(c.stderr.contains("closed"), "{}", c.stderr);
    }

    // Usage errors.
    assert_eq!(run(&mut Command::new(&bin)).code, Some(2));
    let bad_bound = run(Command::new(&bin).arg(&shm).args(["lp1", "EURUSD", "soon"]));
    assert_eq!(bad_bound.code, Some(2), "{}", bad_bound.stderr);

    drop(h);
    drop(p);
    std::fs::remove_file(&shm).expect("remove the publication");
    let path = dir.path().to_path_buf();
    dir.close().expect("remove the scratch dir");
    assert!(!path.exists());
}

/// Byte offsets of lp1/EURUSD's directory entry and slot in a publication.
fn eurusd(file: &[u8]) -> (usize, usize) {
    let (dir_off, slots_off, cap) = (
        u64_at(file, 88) as usize,
        u64_at(file, 96) as usize,
        u64_at(file, 56) as usize,
    );
    let key = sym("EURUSD").key();
    let entry = (0..cap)
        .map(|i| dir_off + 48 * i)
        .find(|&e| u64_at(file, e) == key && u64_at(file, e + 8) >> 32 == 0)
        .expect("lp1/EURUSD in the directory");
    (
        entry,
        slots_off + 128 * (u64_at(file, entry + 8) as u32 as usize),
    )
}

/// Copies of the (running, healthy) publication with one thing changed: the
/// C reader must refuse what the Rust reader refuses and accept what it
/// accepts, without crashing.
fn layout_checks(bin: &Path, dir: &Path, shm: &Path) {
    let original = std::fs::read(shm).expect("read publication");
    let (dir_off, slots_off, cap) = (
        u64_at(&original, 88) as usize,
        u64_at(&original, 96) as usize,
        u64_at(&original, 56),
    );
    let (entry, slot) = eurusd(&original);
    let feed0 = 128;

    type Edit = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        ("unchanged", Box::new(|_| {}), "ok"),
        ("bad magic", Box::new(|b| b[0] ^= 1), "stale"),
        ("version 0", Box::new(|b| put(b, 8, 0)), "stale"),
        ("version 2", Box::new(|b| put(b, 8, 2)), "stale"),
        ("version 3", Box::new(|b| put(b, 8, 3)), "stale"),
        ("version 5", Box::new(|b| put(b, 8, 5)), "stale"),
        ("closed", Box::new(|b| put(b, 16, 2)), "stale"),
        ("state word 0", Box::new(|b| put(b, 16, 0)), "stale"),
        ("state word forged", Box::new(|b| put(b, 16, 7)), "stale"),
        (
            "capacity + 1",
            Box::new(move |b| put(b, 56, cap + 1)),
            "stale",
        ),
        (
            "huge capacity",
            Box::new(|b| put(b, 56, u64::MAX / 2)),
            "stale",
        ),
        (
            "feed_count + 1",
            Box::new(|b| {
                let n = u64_at(b, 64);
                put(b, 64, n + 1)
            }),
            "stale",
        ),
        ("feeds_offset", Box::new(|b| put(b, 80, 256)), "stale"),
        (
            "directory_offset",
            Box::new(move |b| put(b, 88, dir_off as u64 + 128)),
            "stale",
        ),
        (
            "slots_offset",
            Box::new(move |b| put(b, 96, slots_off as u64 + 4096)),
            "stale",
        ),
        (
            "file_len",
            Box::new(|b| {
                let n = u64_at(b, 104);
                put(b, 104, n + 4096)
            }),
            "stale",
        ),
        (
            "truncated",
            Box::new(|b| b.truncate(b.len() - 4096)),
            "stale",
        ),
        ("tiny", Box::new(|b| b.truncate(100)), "stale"),
        ("empty", Box::new(|b| b.clear()), "stale"),
        (
            "longer than file_len",
            Box::new(|b| b.extend_from_slice(&[0; 4096])),
            "ok",
        ),
        (
            "directory_len huge",
            Box::new(|b| put(b, 72, u64::MAX)),
            "ok",
        ),
        ("directory_len 0", Box::new(|b| put(b, 72, 0)), "no_quote"),
        (
            "entry points past the slots",
            Box::new(move |b| put(b, entry + 8, cap + 5)),
            "stale",
        ),
        (
            "entry withdrawn (key 0)",
            Box::new(move |b| put(b, entry, 0)),
            "no_quote",
        ),
        // A movable name: the slot's count read at the lookup is the
        // one the check finds.
        (
            "entry movable",
            Box::new(move |b| {
                let fs = u64_at(b, entry + 8);
                put(b, entry + 8, fs | 1 << 63)
            }),
            "ok",
        ),
        // No slot to read a count from: no handle.
        (
            "movable entry points past the slots",
            Box::new(move |b| put(b, entry + 8, 1 << 63 | (cap + 5))),
            "no_quote",
        ),
        (
            "slot holds another symbol",
            Box::new(move |b| put(b, slot + 8, sym("OTHER").key())),
            "no_quote",
        ),
        (
            "slot holds another feed",
            Box::new(move |b| {
                let m = u64_at(b, slot + 16);
                put(b, slot + 16, m | 1)
            }),
            "no_quote",
        ),
    ];
    let copy = dir.join("copy");
    for (name, edit, expected) in cases {
        let mut b = original.clone();
        edit(&mut b);
        std::fs::write(&copy, &b).unwrap();
        let c = same(bin, &copy, "lp1", "EURUSD", Some(LONG_BOUND_MS), expected);
        // Only the writer's own close reads as one, in both readers.
        let closed = name == "closed";
        assert_eq!(
            c.stderr.contains("writer closed the publication"),
            closed,
            "{name}: {}",
            c.stderr
        );
        if name.starts_with("state word") {
            assert!(
                c.stderr.contains("unusable publication"),
                "{name}: {}",
                c.stderr
            );
            let rust = Reader::open(&copy).health(now_ns());
            assert!(
                rust.is_unusable() && rust.to_string().contains("state word"),
                "{rust}"
            );
        }
        assert!(
            expected != "stale" || !c.stderr.is_empty() || name == "entry points past the slots",
            "{name}: C says why on stderr"
        );
    }

    // A shape whose size arithmetic would wrap 64 bits (a sparse file some
    // 2^63 bytes long, its offsets and file_len set to the wrapped
    // values): both readers refuse it, neither reads past what it mapped.
    // (Its slot count is past the bound on slots, which now refuses it
    // first: within the bounds on each count no sum wraps.)
    let mut b = original[..0x7000.min(original.len())].to_vec();
    for (at, v) in [
        (56, 0x00ff_ffff_ffff_ffe0),
        (64, 0x3e0f_83e0_f83f),
        (72, 1),
        (88, 0x2000_0000_0000_7c80),
        (96, 0x8000_0000_0000_8000),
        (104, 0x7000),
    ] {
        put(&mut b, at, v);
    }
    std::fs::write(&copy, &b).unwrap();
    let sparse = std::fs::OpenOptions::new().write(true).open(&copy).unwrap();
    match sparse.set_len(0x7fff_ffff_ffff_f000) {
        Ok(()) => {
            drop(sparse);
            same(bin, &copy, "lp1", "EURUSD", Some(LONG_BOUND_MS), "stale");
        }
        // A filesystem that cannot hold so long a file: no such file to
        // forge (the scratch directory off tmpfs).
        Err(e) => crate::common::skip(&format!("the wrapping shape's sparse file: {e}")),
    }

    // A consistent shape no writer makes: 2^28 feeds (ids are 16 bits) in
    // a sparse file of some 9 TB that holds it. Both readers refuse it
    // (the Rust one listed its feeds first: 26 GB, and an abort).
    let mut b = original[..0x7000.min(original.len())].to_vec();
    for (at, v) in [
        (56, 1),
        (64, 1 << 28),
        (72, 0),
        (88, 0x840_0000_0080),
        (96, 0x840_0000_1000),
        (104, 0x840_0000_2000),
    ] {
        put(&mut b, at, v);
    }
    std::fs::write(&copy, &b).unwrap();
    let sparse = std::fs::OpenOptions::new().write(true).open(&copy).unwrap();
    match sparse.set_len(0x840_0000_2000) {
        Ok(()) => {
            drop(sparse);
            same(bin, &copy, "lp1", "EURUSD", Some(LONG_BOUND_MS), "stale");
            let rust = Reader::open(&copy).health(now_ns());
            assert!(rust.to_string().contains("header inconsistent"), "{rust}");
        }
        Err(e) => crate::common::skip(&format!("the sparse file of 2^28 feeds: {e}")),
    }

    // A feed named with a byte no configuration gives (a forged file): the
    // Rust reader shows it escaped (`lp\x01`), so asked for by its raw
    // bytes neither reader finds it.
    let mut b = original.clone();
    b[feed0 + 2] = 0x01;
    std::fs::write(&copy, &b).unwrap();
    same(
        bin,
        &copy,
        "lp\u{1}",
        "EURUSD",
        Some(LONG_BOUND_MS),
        "no_quote",
    );

    // A directory_len past the directory: the scan for an unknown symbol
    // stops at the capacity instead of running off the mapping.
    let mut b = original.clone();
    put(&mut b, 72, u64::MAX);
    std::fs::write(&copy, &b).unwrap();
    same(bin, &copy, "lp1", "NOSUCH", Some(LONG_BOUND_MS), "no_quote");

    // A seqlock stamp left odd (a writer killed mid-update): both readers
    // give up after a bounded number of reads and answer stale.
    for (name, at) in [
        ("slot stamp", slot),
        ("offset stamp", feed0 + 128),
        ("feed state stamp", feed0 + 512),
    ] {
        let mut b = original.clone();
        let s = u64_at(&b, at);
        put(&mut b, at, s | 1);
        std::fs::write(&copy, &b).unwrap();
        let t = Instant::now();
        let c = c_check(bin, &copy, "lp1", "EURUSD", Some(LONG_BOUND_MS));
        assert_eq!(
            (c.code, c.line.as_str(), c.version),
            (Some(1), "rejected: stale", 0),
            "odd {name}"
        );
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "odd {name}: {:?}",
            t.elapsed()
        );
        let rust = tickguard::Reader::open_with(&copy, LONG_BOUND_MS * 1_000_000);
        let v = rust.check_symbol("lp1", "EURUSD", tickguard::time::now_ns());
        assert_eq!(v.health, tickguard::Health::Busy, "odd {name}");
        assert_eq!(
            v.reasons.names().collect::<Vec<_>>(),
            ["stale"],
            "odd {name}"
        );
    }
    std::fs::remove_file(&copy).unwrap();
}

/// The book top the Rust reader reads, in the C program's words.
fn rust_quote(shm: &Path, feed: &str, symbol: &str) -> Vec<String> {
    let r = Reader::open_with(shm, options(Some(LONG_BOUND_MS), None));
    let Some(rec) = r.lookup(feed, symbol).and_then(|h| r.record(&h)) else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    for (name, side) in [("bid", rec.bid), ("ask", rec.ask)] {
        if let Some(s) = side {
            lines.push(format!("{name}: {} {}", s.price, s.size));
        }
    }
    if rec.halted {
        lines.push("halted".into());
    }
    if rec.closed {
        lines.push("closed".into());
    }
    lines
}

/// An exchange feed's publication: decimal prices with sizes, one-sided
/// books, halted symbols, and the feed's own suspect, closed, liveness and
/// source watermark. C and Rust agree case by case on the verdict and on
/// the book top, prices exact.
#[test]
fn c_reader_agrees_on_exchange_feeds() {
    use tickguard::config::Protocol;
    use tickguard::protocol::sqf::rules::FeedKind;
    use tickguard::shm::FeedInfo;
    use tickguard::state::{FeedStatus, Level, Top};
    use tickguard::verdict::Thresholds;
    let dir = scratch();
    let Some(bin) = compile_check(dir.path()) else {
        return;
    };
    let shm = dir.path().join("tickguard");
    let now = now_ns();
    let feed_info = |name: &str, port: u16| {
        FeedInfo::new(
            name,
            FeedKind::Delta,
            vec![format!("239.1.1.1:{port}").parse().unwrap()],
            Protocol::Itch50,
        )
    };
    let feeds = [
        feed_info("itch", 30001),
        feed_info("itch-shut", 30002),
        feed_info("itch-gap", 30003),
    ];
    let p = Arc::new(Publication::create(&shm, 0o640, 64, &feeds, now, 1_000_000).unwrap());
    let mut table = StateTable::shared(p.clone());
    p.ready();
    p.heartbeat(now);
    let th = Thresholds {
        stale_ns: 30 * S,
        source_ns: 30 * S,
    };
    let level = |price, size| Some(Level { price, size });
    let top = |bid, ask| Top {
        bid,
        ask,
        exponent: -4,
        last_seq: 7,
        ..Top::default()
    };
    let mut put_top = |feed: u16, name: &str, t: Top| {
        let id = table.insert(feed, sym(name), th).unwrap();
        table.slots()[id as usize].write_top(&t);
    };
    put_top(0, "AAPL", top(level(1_234_500, 300), level(1_235_000, 100)));
    put_top(0, "BIDONLY", top(level(995_000, 10), None));
    put_top(0, "ASKONLY", top(None, level(-5, 0)));
    put_top(0, "EMPTY", top(None, None));
    put_top(
        0,
        "HALTED",
        Top {
            halted: true,
            ..top(level(1, 1), level(2, 1))
        },
    );
    put_top(
        0,
        "CROSSED",
        Top {
            invalid: true,
            ..top(level(20_000, 5), level(10_000, 5))
        },
    );
    put_top(
        0,
        "CLOSED",
        Top {
            closed: true,
            ..top(level(1, 1), level(2, 1))
        },
    );
    put_top(
        0,
        "SUSPECT",
        Top {
            suspect: true,
            ..top(level(1, 1), level(2, 1))
        },
    );
    put_top(
        0,
        "OWNSRC",
        Top {
            source_time: now - 100 * S,
            ..top(level(10_000, 1), None)
        },
    );
    put_top(1, "MSFT", top(level(4_000_000, 2), level(4_000_100, 3)));
    put_top(2, "MSFT", top(level(4_000_000, 2), level(4_000_100, 3)));
    // An instrument keyed by a venue's id and published under two names
    // (as MDP3 does: `#SecurityID`, then its Symbol, longer than 8).
    let key = tickguard::protocol::mdp3::publish::key(118_061);
    let id = table.insert_named(0, key, b"#118061", th).unwrap();
    assert!(table.alias(0, key, b"ESZ6-ESH7", id, None));
    table.slots()[id as usize].write_top(&top(level(30_000, 4), level(30_500, 2)));
    let alive = FeedStatus {
        joined: true,
        last_alive: now,
        source_watermark: now,
        ..FeedStatus::default()
    };
    table.set_feed_status(0, &alive);
    table.set_feed_status(
        1,
        &FeedStatus {
            closed: true,
            ..alive
        },
    );
    // Silent and behind at the source for two minutes, with a gap open.
    table.set_feed_status(
        2,
        &FeedStatus {
            suspect: true,
            last_alive: now - 120 * S,
            source_watermark: now - 120 * S,
            joined: true,
            closed: false,
            orders_refused: false,
        },
    );
    let long = Some(LONG_BOUND_MS);
    let cases: &[(&str, &str, &str, &[&str])] = &[
        ("itch", "AAPL", "ok", &["bid: 123.45 300", "ask: 123.5 100"]),
        ("itch", "BIDONLY", "ok", &["bid: 99.5 10"]),
        ("itch", "ASKONLY", "ok", &["ask: -0.0005 0"]),
        ("itch", "EMPTY", "no_quote", &[]),
        (
            "itch",
            "HALTED",
            "halted",
            &["bid: 0.0001 1", "ask: 0.0002 1", "halted"],
        ),
        (
            "itch",
            "CROSSED",
            "invalid_price",
            &["bid: 2 5", "ask: 1 5"],
        ),
        // The feed's watermark is later than the symbol's own source time.
        ("itch", "OWNSRC", "ok", &["bid: 1 1"]),
        // Closed and suspect by the slot's own flags, the feed healthy.
        (
            "itch",
            "CLOSED",
            "closed",
            &["bid: 0.0001 1", "ask: 0.0002 1", "closed"],
        ),
        (
            "itch",
            "SUSPECT",
            "suspect",
            &["bid: 0.0001 1", "ask: 0.0002 1"],
        ),
        // One slot by either of its names.
        ("itch", "#118061", "ok", &["bid: 3 4", "ask: 3.05 2"]),
        ("itch", "ESZ6-ESH7", "ok", &["bid: 3 4", "ask: 3.05 2"]),
        (
            "itch-shut",
            "MSFT",
            "closed",
            &["bid: 400 2", "ask: 400.01 3"],
        ),
        (
            "itch-gap",
            "MSFT",
            "stale|stale_at_source|suspect",
            &["bid: 400 2", "ask: 400.01 3"],
        ),
        ("itch", "MSFT", "no_quote", &[]),
    ];
    for &(f, s, expected, quote) in cases {
        let c = same(&bin, &shm, f, s, long, expected);
        assert_eq!(c.stderr, "", "{f}/{s}");
        assert_eq!(c.quote, quote, "C book top, {f}/{s}");
        assert_eq!(rust_quote(&shm, f, s), quote, "Rust book top, {f}/{s}");
    }
    // The name directory as a venue moves a Symbol: the later entry of a
    // name is the one found (the Symbol given to another instrument, here
    // halted), each id name keeps its own slot, and an entry whose key is
    // no symbol withdraws the name (the Symbol deleted) while the older
    // entries stay behind it in the directory.
    let key2 = tickguard::protocol::mdp3::publish::key(118_062);
    let id2 = table.insert_named(0, key2, b"#118062", th).unwrap();
    table.slots()[id2 as usize].write_top(&Top {
        halted: true,
        ..top(level(40_000, 1), level(40_100, 1))
    });
    assert!(table.alias(0, key2, b"ESZ6-ESH7", id2, Some(id)));
    let halted = ["bid: 4 1", "ask: 4.01 1", "halted"];
    for (name, expected, quote) in [
        ("ESZ6-ESH7", "halted", &halted[..]),
        ("#118062", "halted", &halted[..]),
        ("#118061", "ok", &["bid: 3 4", "ask: 3.05 2"][..]),
    ] {
        let c = same(&bin, &shm, "itch", name, long, expected);
        assert_eq!(c.quote, quote, "C book top, moved, {name}");
    }
    assert!(table.withdraw(0, b"ESZ6-ESH7", Some(id2)));
    let c = same(&bin, &shm, "itch", "ESZ6-ESH7", long, "no_quote");
    assert_eq!(c.quote, [] as [&str; 0], "withdrawn");
    same(&bin, &shm, "itch", "#118061", long, "ok");
    same(&bin, &shm, "itch", "#118062", long, "halted");
    // A name of the most bytes an entry holds (32) is found whole.
    let longest = "N".repeat(32);
    assert!(table.alias(0, key2, longest.as_bytes(), id2, None));
    same(&bin, &shm, "itch", &longest, long, "halted");
    // The feed's liveness is what keeps these symbols fresh: without it,
    // stale and stale at the source.
    table.set_feed_status(0, &FeedStatus::default());
    same(&bin, &shm, "itch", "AAPL", long, "stale|stale_at_source");
    same(&bin, &shm, "itch", "OWNSRC", long, "stale|stale_at_source");
    drop(table);
    drop(p);
}

/// Header words of a hand-made publication of layout `version` with the
/// shape that layout had: (feed block, directory entry) bytes.
fn hand_made(version: u64, feed_len: usize, dir_len: usize) -> Vec<u8> {
    // Enough slots that layout 1's file length differs from layout 2's
    // for the same header: a reader must look at the version first.
    let (feeds, cap) = (1usize, 256usize);
    let align = |n: usize, to: usize| n.div_ceil(to) * to;
    let dir_off = align(128 + feed_len * feeds, 128);
    let slots_off = align(dir_off + dir_len * cap, 4096);
    let file_len = align(slots_off + 128 * cap, 4096);
    let mut b = vec![0u8; file_len];
    let now = now_ns();
    let words = [
        u64::from_le_bytes(*b"TKGUARD1"),
        version,
        1,
        std::process::id() as u64,
        now,
        now,
        1_000_000,
        cap as u64,
        feeds as u64,
        0,
        128,
        dir_off as u64,
        slots_off as u64,
        file_len as u64,
    ];
    for (i, w) in words.iter().enumerate() {
        put(&mut b, 8 * i, *w);
    }
    b[128..131].copy_from_slice(b"lp1");
    b
}

/// A file of layout version 1 to 3 (as an older writer made it) or 5 (a
/// newer one) is refused by both readers, saying which version it has and which
/// they expect; `check` exits 2.
#[test]
fn readers_refuse_other_layout_versions() {
    let dir = scratch();
    let Some(bin) = compile_check(dir.path()) else {
        return;
    };
    for (version, file) in [
        (1, hand_made(1, 512, 16)),
        (2, hand_made(2, 1024, 48)),
        (3, hand_made(3, 1024, 48)),
        (5, hand_made(5, 1024, 96)),
    ] {
        let path = dir.path().join(format!("v{version}"));
        std::fs::write(&path, &file).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let c = same(&bin, &path, "lp1", "EURUSD", Some(LONG_BOUND_MS), "stale");
        let text = format!("layout version {version}, expected 4");
        assert!(c.stderr.contains(&text), "C: {}", c.stderr);
        let health = Reader::open(&path).health(now_ns());
        assert_eq!(health.name(), "bad_layout", "{health}");
        assert!(health.to_string().contains(&text), "Rust: {health}");
        let out = run(Command::new(env!("CARGO_BIN_EXE_tickguard"))
            .args(["check", "lp1", "EURUSD", "--shm"])
            .arg(&path));
        assert_eq!(out.code, Some(2), "{}", out.stderr);
        assert_eq!(
            out.stderr.trim(),
            format!(
                "tickguard: unusable publication: {}: {text}",
                path.display()
            )
        );
    }
}

/// Writes `source` to `dir/name` and compiles it against the header with
/// `compiler` in language standard `std`, every warning an error,
/// pedantic: the binary, `dir/name` without its extension.
/// The C99 program `name` of `source`, built in a scratch directory
/// (returned with it); `None`, said skipped, without a C compiler.
fn c99(name: &str, source: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    let Some(cc) = compiler("CC", "cc") else {
        skipped_without("a working C compiler (cc or $CC)");
        return None;
    };
    let dir = scratch();
    let bin = c_program(dir.path(), &cc, "-std=c99", name, source);
    Some((dir, bin))
}

/// A program spawned to talk with over pipes: its stdin (if piped) and
/// its stdout, read a line at a time.
struct Talk {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Talk {
    /// Spawns `cmd` with stdout piped, and stdin too if `stdin`.
    fn spawn(cmd: &mut Command, stdin: bool) -> Talk {
        if stdin {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        Talk { child, stdin, out }
    }

    /// Its next line of output, without the line end ("" at its end).
    fn line(&mut self) -> String {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut self.out, &mut line).unwrap();
        line.trim_end_matches('\n').to_string()
    }

    /// Writes `s` to its stdin.
    fn say(&mut self, s: &[u8]) {
        use std::io::Write as _;
        self.stdin.as_mut().unwrap().write_all(s).unwrap();
    }

    /// Closes its stdin, reads the rest of its output and waits for it:
    /// (exit code, the rest).
    fn finish(mut self) -> (Option<i32>, String) {
        drop(self.stdin.take());
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).unwrap();
        (self.child.wait().unwrap().code(), rest)
    }
}

fn c_program(dir: &Path, compiler: &str, std: &str, name: &str, source: &str) -> PathBuf {
    let src = dir.join(name);
    std::fs::write(&src, source).unwrap();
    let bin = src.with_extension("");
    let r = run(Command::new(compiler)
        .args([std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-O2"])
        .arg(format!("-I{}", crate_dir().join("include").display()))
        .arg("-o")
        .arg(&bin)
        .arg(&src));
    assert_eq!(
        r.code,
        Some(0),
        "{compiler} failed on {name}:\n{}",
        r.stderr
    );
    bin
}

/// The C header enumerates every counter of every feed from the
/// publication's descriptors, and reads the same values and text as the
/// Rust reader's `readings`: the SQF feed's and the ITCH feed's own.
#[test]
fn c_reader_prints_every_counter_as_described() {
    use tickguard::config::Protocol;
    use tickguard::shm::{counter, FeedInfo};
    use tickguard::state::FeedKind;
    let Some((dir, bin)) = c99(
        "counters.c",
        r#"#include "tickguard.h"
#include <inttypes.h>
#include <stdio.h>

int main(int argc, char **argv) {
    tg_reader r;
    uint32_t f, i;
    if (argc < 2 || tg_open(&r, argv[1], TG_DEFAULT_DEAD_AFTER_NS) != 0) return 2;
    for (f = 0; f < r.feed_count; f++) {
        uint64_t values[TG_COUNTER_IDS], flags;
        if (tg_read_counters(&r, f, values, &flags) != 0) return 3;
        for (i = 0; i < tg_counter_count(&r, f); i++) {
            tg_counter c;
            char text[64];
            if (tg_counter_describe(&r, f, i, &c) != 0) return 4;
            printf("%u %s{%s=%s} kind=%u id=%u param=%" PRIu64 " metric=%s note=%s = ", f, c.name, c.key, c.value,
                   c.kind, c.id, c.param, c.metric, c.note);
            if (c.kind == TG_KIND_TEXT) {
                tg_counter_text(&c, values, text, sizeof text);
                printf("'%s'\n", text);
            } else {
                printf("%" PRIu64 "\n", tg_counter_value(&c, values, flags));
            }
        }
    }
    tg_close(&r);
    return 0;
}
"#,
    ) else {
        return;
    };

    let shm = dir.path().join("tickguard");
    let now = now_ns();
    let info = |name: &str, protocol| {
        FeedInfo::new(
            name,
            FeedKind::Delta,
            vec!["239.1.1.1:30001".parse().unwrap()],
            protocol,
        )
    };
    let feeds = [info("lp1", Protocol::Sqf), info("nq", Protocol::Itch50)];
    let p = Publication::create(&shm, 0o640, 16, &feeds, now, 1_000_000).unwrap();
    p.write_counters(|| {
        p.set_counter(0, counter::QUOTES, 11);
        p.set_counter(0, counter::LINE_PACKETS, 12);
        p.set_counter(0, counter::REJECTED_BY_REASON + 1, 13);
        p.set_counter(1, counter::GAPS_OPEN, 14);
        p.set_counter(1, counter::RECOVERY_LATENCY + 2, 15);
        p.set_counter(1, counter::SESSION_LO, u64::from_le_bytes(*b"000000AB"));
        p.set_counter(
            1,
            counter::SESSION_HI,
            // Trailing whitespace, not only spaces, dropped by both.
            u64::from_le_bytes(*b"CD\t\x0c\n\r \0"),
        );
    });
    let table = StateTable::shared(Arc::new(p));
    table.set_feed_status(
        1,
        &tickguard::state::FeedStatus {
            closed: true,
            ..Default::default()
        },
    );
    let p = Publication::of(&table).unwrap();
    p.ready();
    p.heartbeat(now);

    let reader = Reader::open_with(&shm, options(Some(LONG_BOUND_MS), None));
    let mut expected = String::new();
    for f in 0..reader.feeds().len() as u16 {
        for r in reader.readings(f).unwrap() {
            let d = r.descriptor;
            expected.push_str(&format!(
                "{f} {}{{{}={}}} kind={} id={} param={} metric={} note={} = ",
                d.name,
                d.key,
                d.value,
                d.kind.code(),
                d.id,
                d.param,
                d.metric,
                d.note
            ));
            if d.kind == tickguard::shm::CounterKind::Text {
                expected.push_str(&format!("'{}'\n", r.text));
            } else {
                expected.push_str(&format!("{}\n", r.value));
            }
        }
    }
    let out = run(Command::new(&bin).arg(&shm));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, expected);
    for line in [
        "0 quotes{=} kind=1 id=3 param=0 metric=quotes_total note= = 11",
        "0 packets{line=A} kind=1 id=26 param=0 metric=packets_total note= = 12",
        "0 rejected{reason=bad_magic} kind=1 id=17 param=1 metric=rejected_packets_total note= (not SQF?) = 13",
        "1 gaps_open{=} kind=2 id=67 param=0 metric=feed_gaps_open note= = 14",
        "1 recovery_latency{=} kind=5 id=82 param=64000 metric=feed_recovery_latency_seconds note= = 15",
        "1 session{=} kind=4 id=76 param=0 metric= note= = '000000ABCD'",
        "1 closed{=} kind=7 id=0 param=1 metric=feed_closed note= = 1",
    ] {
        assert!(out.stdout.lines().any(|l| l == line), "{line} in:\n{}", out.stdout);
    }
    drop(table);
}

/// The header compiles as C++ (extern "C" guards, casts), and the result runs.
#[test]
fn header_compiles_as_cpp() {
    let Some(cxx) = compiler("CXX", "c++") else {
        return skipped_without("a working C++ compiler (c++ or $CXX)");
    };
    let dir = scratch();
    let bin = c_program(
        dir.path(),
        &cxx,
        "-std=c++11",
        "t.cpp",
        r#"#include "tickguard.h"
int main(int argc, char **argv) {
    tg_reader r;
    tg_open(&r, argc > 1 ? argv[1] : "", TG_DEFAULT_DEAD_AFTER_NS);
    uint32_t reasons = tg_check_symbol(&r, "lp1", "EURUSD", tg_now_ns());
    tg_close(&r);
    return reasons == TG_STALE ? 0 : 1;
}
"#,
    );
    let missing = dir.path().join("missing");
    let r = run(Command::new(&bin).arg(&missing));
    assert_eq!(r.code, Some(0), "a missing publication reads as stale");
}

/// The C seqlock read never returns a mix of two writes: a C process reads
/// one slot in a loop while this process keeps publishing states whose every
/// field is derived from the sequence number.
#[test]
fn c_slot_reads_are_not_torn() {
    let Some((dir, bin)) = c99(
        "torn.c",
        r#"#include "tickguard.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
/* torn SHM BASE: reads lp1/TORN until 5000 changes were seen or 3 s passed. */
int main(int argc, char **argv) {
    tg_reader r;
    tg_handle h;
    uint64_t w[TG_S_USED], base, last = 0, reads = 0, changes = 0, busy = 0, deadline;
    (void)argc;
    base = strtoull(argv[2], NULL, 10);
    deadline = tg_now_ns() + 3000000000ull;
    if (tg_open(&r, argv[1], 600000000000ull) != 0) return 2;
    if (tg_lookup(&r, "lp1", "TORN", &h) != 0) return 3;
    while (changes < 5000 && tg_now_ns() < deadline) {
        uint64_t seq, want_bid, want_ask;
        double bid, ask;
        /* Gave up on a slot left odd too long (the writer preempted mid-write
           on a loaded machine): the fail-closed path, not a torn read. */
        uint32_t budget = TG_MAX_RETRIES;
        if (tg__read_slot(&r, h.slot, w, &budget) != 0) { busy++; continue; }
        seq = w[3];
        bid = (double)seq;
        ask = (double)(seq + 1);
        memcpy(&want_bid, &bid, 8);
        memcpy(&want_ask, &ask, 8);
        if ((w[TG_S_STAMP] & 1) || w[4] != want_bid || w[5] != want_ask ||
            w[TG_S_SOURCE_TIME] != 7 * seq || w[TG_S_LAST_ALIVE] != base + seq || seq < last) {
            printf("torn: stamp %" PRIu64 " seq %" PRIu64 " last %" PRIu64 "\n", w[0], seq, last);
            return 1;
        }
        changes += seq != last;
        last = seq;
        reads++;
    }
    printf("%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", reads, changes, busy);
    tg_close(&r);
    return 0;
}
"#,
    ) else {
        return;
    };

    let shm = dir.path().join("tickguard");
    let base = now_ns();
    let (config, p) = published(&shm, base);
    let mut h = Handler::with_table(&config, StateTable::shared(p.clone()), 1024);
    p.ready();
    p.heartbeat(base);
    let torn = sym("TORN");
    let quote = |h: &mut Handler, seq: u64| {
        feed(h, 0, base + seq, 7 * seq, |b| {
            b.quote(torn, seq, 7 * seq, seq as f64, (seq + 1) as f64);
        })
    };
    quote(&mut h, 1);

    let mut child = Command::new(&bin)
        .arg(&shm)
        .arg(base.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + CHILD_LIMIT;
    let mut seq = 1;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("torn reader still running after {CHILD_LIMIT:?}");
        }
        for _ in 0..64 {
            seq += 1;
            quote(&mut h, seq);
        }
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(status.code(), Some(0), "C reader: {out}");
    let counts: Vec<u64> = out.split_whitespace().map(|n| n.parse().unwrap()).collect();
    assert!(
        counts.len() == 3 && counts[1] >= 100,
        "the reader saw the writer at work: {out} (writer reached {seq})"
    );
    eprintln!("torn: reads, changes seen = {out}");
    drop(h);
    drop(p);
    dir.close().expect("remove the scratch dir");
}

/// (case, contents, uid to give the file to, mode, expected owner, answer,
/// a word of the health both readers give).
type TrustCase<'a> = (
    &'a str,
    &'a [u8],
    Option<u32>,
    u32,
    Option<u32>,
    &'a str,
    &'a str,
);

/// A file someone else could have written, or a writer clock in the
/// reader's future, is refused by both readers alike: `stale`, and a health
/// that says why. The forged file is the attack: an unprivileged user creates
/// the path first with a heartbeat, last-alive and source time of 2^63.
#[test]
fn readers_refuse_files_they_cannot_trust() {
    let dir = scratch();
    let Some(bin) = compile_check(dir.path()) else {
        return;
    };
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        crate::common::skip("c_reader: the other-owner cases need root");
    }
    let shm = dir.path().join("tickguard");
    let now = now_ns();
    let (config, p) = published(&shm, now);
    let mut h = Handler::with_table(&config, StateTable::shared(p.clone()), 1024);
    p.ready();
    p.heartbeat(now);
    feed(&mut h, 0, now, now + 2 * S, |b| {
        b.quote(sym("EURUSD"), 1, now + 2 * S, 1.0850, 1.0851);
    });
    let original = std::fs::read(&shm).expect("read publication");
    let (_, slot) = eurusd(&original);
    let mut forged = original.clone();
    for at in [40, slot + 48, slot + 56] {
        put(&mut forged, at, 1 << 63);
    }
    put(&mut forged, slot + 32, 0.5f64.to_bits());
    let mut started_later = original.clone();
    put(&mut started_later, 32, now + 10 * S);
    let mut just_ahead = original.clone();
    put(&mut just_ahead, 40, now_ns() + 50_000_000);
    // A sign of life far ahead with the writer's heartbeat left alone: the
    // symbol's (slot word 7), then its feed's (feed block word 66).
    let mut symbol_ahead = original.clone();
    put(&mut symbol_ahead, slot + 56, now + 10 * S);
    let mut feed_ahead = original.clone();
    put(
        &mut feed_ahead,
        u64_at(&original, 80) as usize + 528,
        now + 10 * S,
    );

    const NOBODY: u32 = 65534;
    let long = Some(LONG_BOUND_MS);
    let cases: Vec<TrustCase> = vec![
        ("honest copy", &original, None, 0o640, None, "ok", ""),
        ("owner only", &original, None, 0o600, None, "ok", ""),
        (
            "forged, heartbeat 2^63",
            &forged,
            None,
            0o640,
            None,
            "stale",
            "ahead",
        ),
        (
            "start time in the future",
            &started_later,
            None,
            0o640,
            None,
            "stale",
            "ahead",
        ),
        (
            "heartbeat 50 ms ahead",
            &just_ahead,
            None,
            0o640,
            None,
            "ok",
            "",
        ),
        (
            "symbol alive 10 s ahead",
            &symbol_ahead,
            None,
            0o640,
            None,
            "stale",
            "",
        ),
        (
            "feed alive 10 s ahead",
            &feed_ahead,
            None,
            0o640,
            None,
            "stale",
            "",
        ),
        (
            "group-writable",
            &original,
            None,
            0o660,
            None,
            "stale",
            "untrusted",
        ),
        (
            "others-writable",
            &original,
            None,
            0o642,
            None,
            "stale",
            "untrusted",
        ),
        (
            "forged by another user",
            &forged,
            Some(NOBODY),
            0o644,
            None,
            "stale",
            "untrusted",
        ),
        (
            "another owner",
            &original,
            Some(NOBODY),
            0o640,
            None,
            "stale",
            "untrusted",
        ),
        (
            "another owner, named",
            &original,
            Some(NOBODY),
            0o640,
            Some(NOBODY),
            "ok",
            "",
        ),
        (
            "named owner, ours is not it",
            &original,
            None,
            0o640,
            Some(NOBODY),
            "ok",
            "",
        ),
        (
            "named owner, group-writable",
            &original,
            Some(NOBODY),
            0o664,
            Some(NOBODY),
            "stale",
            "untrusted",
        ),
    ];
    for (i, (name, bytes, chown, mode, owner, expected, word)) in cases.into_iter().enumerate() {
        if chown.is_some() && !root {
            continue;
        }
        let copy = dir.path().join(format!("case{i}"));
        std::fs::write(&copy, bytes).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(mode)).unwrap();
        if let Some(uid) = chown {
            std::os::unix::fs::chown(&copy, Some(uid), None).unwrap();
        }
        let c = same_owned(&bin, &copy, "lp1", "EURUSD", long, owner, expected);
        let health = Reader::open_with(&copy, options(long, owner)).health(now_ns());
        assert!(
            c.stderr.contains(word) && health.to_string().contains(word),
            "{name}: C said {:?}, Rust {health}",
            c.stderr
        );
        // An untrusted file is no publication at all; a writer ahead is a verdict.
        assert_eq!(
            health.is_unusable(),
            word == "untrusted",
            "{name}: {health}"
        );
    }

    // Not a regular file: a symbolic link to a good copy, a directory, and a
    // FIFO (which must not block the open).
    let good = dir.path().join("good");
    std::fs::write(&good, &original).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let sub = dir.path().join("subdir");
    std::fs::create_dir(&sub).unwrap();
    let fifo = dir.path().join("fifo");
    let made = run(Command::new("mkfifo").arg(&fifo));
    assert_eq!(made.code, Some(0), "mkfifo: {}", made.stderr);
    for path in [&link, &sub, &fifo] {
        let c = same(&bin, path, "lp1", "EURUSD", long, "stale");
        let health = Reader::open(path).health(now_ns());
        assert!(
            c.stderr.contains("untrusted") && matches!(health, tickguard::Health::Untrusted(_)),
            "{}: C said {:?}, Rust {health}",
            path.display(),
            c.stderr
        );
    }
    drop(h);
    drop(p);
}

/// A handle belongs to the writer whose file it was looked up in. A
/// restarted writer lists its feeds in another order, so the old handle's
/// slot and feed number now hold another feed's EURUSD, healthy: after
/// `refresh`, both readers answer the old handle `stale` (Rust: health
/// `foreign_handle`), while a fresh lookup finds the feed's own. On the
/// new writer's file: a feed gone suspect is in the reasons (the version
/// is the slot's), and a forged clock offset overflows nothing; and a
/// zeroed `tg_reader` is not healthy.
#[test]
fn a_handle_from_a_replaced_writer_answers_stale() {
    use tickguard::config::Protocol;
    use tickguard::shm::FeedInfo;
    use tickguard::state::{FeedKind, FeedStatus};
    use tickguard::verdict::Thresholds;
    let dir = scratch();
    let Some(cc) = compiler("CC", "cc") else {
        return skipped_without("a working C compiler (cc or $CC)");
    };
    let bin = c_program(
        dir.path(),
        &cc,
        "-std=c99",
        "handle.c",
        r#"#include "tickguard.h"
#include <stdio.h>
#include <string.h>
/* Looks up lp1 EURUSD, checks; waits for a line on stdin; refreshes and
 * checks the old handle, then a fresh one. */
int main(int argc, char **argv) {
    tg_reader r, zeroed;
    tg_handle old, fresh;
    char line[8];
    (void)argc;
    /* A reader tg_open never saw is not healthy. */
    memset(&zeroed, 0, sizeof zeroed);
    if (tg_health(&zeroed, tg_now_ns()) != TG_HEALTH_MISSING) return 7;
    if (tg_open(&r, argv[1], 600000000000ull) != 0) return 2;
    if (tg_lookup(&r, "lp1", "EURUSD", &old) != 0) return 3;
    printf("%u\n", tg_check(&r, &old, tg_now_ns(), NULL));
    fflush(stdout);
    if (fgets(line, sizeof line, stdin) == NULL) return 4;
    if (tg_refresh(&r, argv[1]) != 1) return 5;
    printf("%u\n", tg_check(&r, &old, tg_now_ns(), NULL));
    {
        tg_quote q;
        if (tg_read_quote(&r, &old, &q) != -1) return 8;
    }
    if (tg_lookup(&r, "lp1", "EURUSD", &fresh) != 0) return 6;
    printf("%u %u\n", tg_check(&r, &fresh, tg_now_ns(), NULL), fresh.feed);
    tg_close(&r);
    return 0;
}
"#,
    );

    let shm = dir.path().join("tickguard");
    let th = Thresholds {
        stale_ns: 30 * S,
        source_ns: 30 * S,
    };
    let info = |name: &str| {
        FeedInfo::new(
            name,
            FeedKind::Delta,
            vec!["239.1.1.1:30001".parse().unwrap()],
            Protocol::Itch50,
        )
    };
    // A writer of `feeds`, EURUSD quoted and healthy on each, in order.
    let writer = |feeds: [&str; 2]| {
        let infos = feeds.map(info);
        let p =
            Arc::new(Publication::create(&shm, 0o640, 16, &infos, now_ns(), 1_000_000).unwrap());
        let table = eurusd_quoted(&p, 0..2, th);
        (p, table)
    };
    let first = writer(["lp1", "lp2"]);
    let mut reader = Reader::open_with(&shm, options(Some(LONG_BOUND_MS), None));
    let old = reader.lookup("lp1", "EURUSD").unwrap();
    assert!(reader.check(&old, now_ns()).is_ok());
    let mut c = Talk::spawn(Command::new(&bin).arg(&shm), true);
    assert_eq!(c.line(), "0", "C, before the restart");

    drop(first);
    let _second = writer(["lp2", "lp1"]);
    assert!(reader.refresh());
    let v = reader.check(&old, now_ns());
    assert_eq!(v.health, tickguard::Health::ForeignHandle);
    assert_eq!(v.reasons.names().collect::<Vec<_>>(), ["stale"]);
    assert_eq!(reader.record(&old), None);
    let fresh = reader.lookup("lp1", "EURUSD").unwrap();
    assert_eq!(fresh.feed(), 1);
    assert!(reader.check(&fresh, now_ns()).is_ok());

    c.say(b"go\n");
    let (code, rest) = c.finish();
    assert_eq!(code, Some(0), "{rest}");
    // TG_STALE (2); then the fresh handle's ok on feed 1.
    assert_eq!(rest, "2\n0 1\n", "C, after the restart");

    let Some(check) = compile_check(dir.path()) else {
        return;
    };
    // The feed going suspect is in a second check's reasons, its version
    // the slot's (a feed's every packet rewrites its status with its times).
    let before = reader.check(&fresh, now_ns()).version;
    _second.1.set_feed_status(
        1,
        &FeedStatus {
            suspect: true,
            last_alive: now_ns(),
            source_watermark: now_ns(),
            ..FeedStatus::default()
        },
    );
    let after = reader.check(&fresh, now_ns());
    assert_eq!(after.reasons.to_string(), "suspect");
    assert_eq!(after.version, before);
    same(
        &check,
        &shm,
        "lp1",
        "EURUSD",
        Some(LONG_BOUND_MS),
        "suspect",
    );
    let healthy = FeedStatus {
        last_alive: now_ns(),
        source_watermark: now_ns(),
        ..FeedStatus::default()
    };
    _second.1.set_feed_status(1, &healthy);
    // A forged clock offset at either end of i128: no arithmetic overflows
    // (the Rust reader's, in this test's build, would panic), and both
    // readers take it as ±2^64 ns, the most any pair of u64 clocks gives.
    let p = Publication::of(&_second.1).unwrap();
    for (offset, want) in [(i128::MIN, "stale_at_source"), (i128::MAX, "ok")] {
        p.publish_offset(1, offset);
        let v = reader.check(&fresh, now_ns());
        assert_eq!(v.reasons.to_string(), want, "{offset}");
        same(&check, &shm, "lp1", "EURUSD", Some(LONG_BOUND_MS), want);
    }
}

/// The writer's own recreation of its file (`Publication::recreate`, as
/// after a clock step back or a cut file) under a C reader holding the old
/// mapping: the old file, closed, answers `stale` with `writer_closed`;
/// `tg_refresh` maps the new one, where the old handle answers `stale` and
/// a fresh lookup `ok`. Then another writer's header written in place (its
/// pid, then its start time): `stale` with `writer_restarted`, the one
/// guard a mapped file has against that.
#[test]
fn a_c_reader_follows_a_recreation_and_refuses_another_writers_header() {
    use std::os::unix::fs::FileExt;
    use tickguard::verdict::Thresholds;
    let Some((dir, bin)) = c99(
        "recreated.c",
        r#"#include "tickguard.h"
#include <stdio.h>
/* recreated SHM: "reasons health" of lp1 EURUSD at each step, a step
   taken at each line read on stdin: the old handle; after tg_refresh
   (its answer), the old handle and a fresh one; then the fresh one. */
static void show(const tg_reader *r, const tg_handle *h) {
    uint64_t now = tg_now_ns();
    printf("%u %u\n", tg_check(r, h, now, NULL), tg_health(r, now));
    fflush(stdout);
}
int main(int argc, char **argv) {
    tg_reader r;
    tg_handle old, fresh;
    char line[8];
    (void)argc;
    if (tg_open(&r, argv[1], 600000000000ull) != 0) return 2;
    if (tg_lookup(&r, "lp1", "EURUSD", &old) != 0) return 3;
    show(&r, &old);
    if (fgets(line, sizeof line, stdin) == NULL) return 4;
    show(&r, &old);
    printf("%d\n", tg_refresh(&r, argv[1]));
    show(&r, &old);
    if (tg_lookup(&r, "lp1", "EURUSD", &fresh) != 0) return 5;
    show(&r, &fresh);
    while (fgets(line, sizeof line, stdin) != NULL) show(&r, &fresh);
    tg_close(&r);
    return 0;
}
"#,
    ) else {
        return;
    };
    let shm = dir.path().join("tickguard");
    let th = Thresholds {
        stale_ns: 600 * S,
        source_ns: 600 * S,
    };
    // EURUSD of lp1 quoted and its feed alive, the publication ready.
    let fill = |p: &Arc<Publication>| eurusd_quoted(p, 0..1, th);
    let (_, first) = published(&shm, now_ns());
    let _first_table = fill(&first);
    let mut c = Talk::spawn(Command::new(&bin).arg(&shm), true);
    assert_eq!(c.line(), "0 0", "ok, before");

    let second = Arc::new(first.recreate(now_ns(), first.lock(), |_| {}).unwrap());
    let _second_table = fill(&second);
    first.close();
    c.say(b"go\n");
    assert_eq!(c.line(), "2 4", "the old file closed: stale, writer_closed");
    assert_eq!(c.line(), "1", "refreshed to the new file");
    assert_eq!(c.line(), "2 0", "the old handle on the new file: stale");
    assert_eq!(c.line(), "0 0", "a fresh lookup: ok");

    // Another writer's header in place: its pid, then its start time.
    let file = std::fs::OpenOptions::new().write(true).open(&shm).unwrap();
    let pid = u64::from(std::process::id());
    for (at, word) in [(24u64, pid + 1), (32, now_ns() - S)] {
        let mut was = [0u8; 8];
        std::fs::File::open(&shm)
            .unwrap()
            .read_exact_at(&mut was, at)
            .unwrap();
        file.write_all_at(&word.to_le_bytes(), at).unwrap();
        c.say(b"go\n");
        assert_eq!(c.line(), "2 5", "another writer's header (word at {at})");
        file.write_all_at(&was, at).unwrap();
        c.say(b"go\n");
        assert_eq!(c.line(), "0 0", "ours again (word at {at})");
    }
    assert_eq!(c.finish().0, Some(0));
    drop(_second_table);
    drop(second);
    drop(_first_table);
    drop(first);
    dir.close().expect("remove the scratch dir");
}

/// A check reads the slot, then its feed's status, then the slot's stamp
/// again; end to end, neither reader ever answers `ok` for a book the
/// feed's status did not vouch for. The writer keeps turning one slot
/// over: the feed made suspect and a poisoned book, held 2 µs; a good book
/// and the feed cleared, held 2 µs. The slot is written twice a turn, so a
/// version `v` is a good book exactly when `(v - v0) % 4 == 0` (`v0`: the
/// first good book's). A check that paired the poisoned book with the
/// status of the next half turn would answer `ok` with a poisoned version:
/// a reader preempted between its reads does (without the re-check, this
/// test failed in each of its runs). Two Rust readers run on threads here,
/// the C reader in its own process; each for 2 s.
#[test]
fn no_check_pairs_a_book_with_a_later_feed_status() {
    use tickguard::state::{FeedStatus, Level, Top};
    let Some((dir, bin)) = c99(
        "pairs.c",
        r#"#include "tickguard.h"
#include <inttypes.h>
#include <stdio.h>
/* pairs SHM: checks lp1/PAIR for 2 s; prints "oks suspects busy", or the
   version of an ok answer given for a poisoned book and exits 1. `busy`:
   answers `stale` because the slot stayed mid-update through the whole
   retry budget (the writer preempted inside a write), the fail-closed path. */
int main(int argc, char **argv) {
    tg_reader r;
    tg_handle h;
    uint64_t v0, v, oks = 0, suspects = 0, busy = 0, deadline;
    (void)argc;
    if (tg_open(&r, argv[1], 600000000000ull) != 0) return 2;
    if (tg_lookup(&r, "lp1", "PAIR", &h) != 0) return 3;
    if (tg_check(&r, &h, tg_now_ns(), &v0) != 0) return 4;
    printf("ready\n");
    fflush(stdout);
    deadline = tg_now_ns() + 2000000000ull;
    while (tg_now_ns() < deadline) {
        uint32_t reasons = tg_check(&r, &h, tg_now_ns(), &v);
        if (reasons == 0) {
            if ((v - v0) % 4 != 0) {
                printf("poisoned ok: version %" PRIu64 " first %" PRIu64 "\n", v, v0);
                return 1;
            }
            oks++;
        } else if (reasons == TG_SUSPECT) {
            suspects++;
        } else if (reasons == TG_STALE && v == 0) {
            busy++;
        } else {
            printf("unexpected reasons %" PRIu32 "\n", reasons);
            return 5;
        }
    }
    printf("%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", oks, suspects, busy);
    tg_close(&r);
    return 0;
}
"#,
    ) else {
        return;
    };

    let shm = dir.path().join("tickguard");
    let now = now_ns();
    let (p, table, id) = pair_table(&shm, now, 600 * S);
    let top = |price| Top {
        bid: Some(Level { price, size: 1 }),
        ask: Some(Level {
            price: price + 1,
            size: 1,
        }),
        exponent: -2,
        source_time: now,
        ..Top::default()
    };
    let status = |suspect| FeedStatus {
        suspect,
        last_alive: now,
        source_watermark: now,
        ..FeedStatus::default()
    };
    let slot = &table.slots()[id as usize];
    slot.write_top(&top(100));
    table.set_feed_status(0, &status(false));
    p.ready();
    p.heartbeat(now);

    let reader = Reader::open_with(&shm, options(Some(LONG_BOUND_MS), None));
    let handle = reader.lookup("lp1", "PAIR").unwrap();
    let first = reader.check(&handle, now_ns());
    assert!(first.is_ok(), "{first:?}");
    // Each state held about 2 µs, the change between them quick.
    let (rust, turns, status_code, c) = race(
        &bin,
        &shm,
        || {
            let v = reader.check(&handle, now_ns());
            if v.is_ok() {
                assert_eq!(
                    (v.version - first.version) % 4,
                    0,
                    "ok for a poisoned book: {v:?}"
                );
                0
            } else if v.health == tickguard::Health::Busy {
                2
            } else {
                assert_eq!(v.reasons.names().collect::<Vec<_>>(), ["suspect"]);
                1
            }
        },
        |turn| {
            table.set_feed_status(0, &status(true));
            slot.write_top(&top(666));
            hold();
            slot.write_top(&top(200 + (turn % 64) as i64));
            table.set_feed_status(0, &status(false));
            hold();
        },
    );
    assert_eq!(status_code, Some(0), "C reader: {c}");
    let c: Vec<u64> = c.split_whitespace().map(|n| n.parse().unwrap()).collect();
    eprintln!("pairs: writer turns {turns}; oks, suspects, busy: Rust {rust:?}, C {c:?}");
    // Both readers saw the writer at work: each answer came up many times.
    assert!(rust[0] > 100 && rust[1] > 100, "Rust reader: {rust:?}");
    assert!(c.len() == 3 && c[0] > 100 && c[1] > 100, "C reader: {c:?}");
    drop(table);
    drop(p);
    dir.close().expect("remove the scratch dir");
}

/// `examples/c/check.c` prints a book top only of the version its verdict
/// judged: the writer here turns a good book into a crossed one (answered
/// `invalid_price`) and back, and a top read after the check without
/// comparing versions was printed crossed beside `ok` (tens of thousands
/// of times in 2 s). The example itself is compiled, its `main` renamed,
/// and its check called over and over for 2 s.
#[test]
fn the_c_example_prints_only_the_top_its_verdict_judged() {
    use tickguard::state::{Level, Top};
    let example = crate_dir().join("examples/c/check.c");
    let Some((dir, bin)) = c99(
        "example_pairs.c",
        &format!(
            r#"#define main check_main
#include "{}"
#undef main
/* example_pairs SHM: check_with_top of lp1/PAIR for 2 s; prints "oks
   invalids busy", or the first top of another version than its verdict's,
   or crossed beside ok, and exits 1. `busy`: no slot read, or no top
   alike in the tries (stale, or ok without a top). */
int main(int argc, char **argv) {{
    tg_reader r;
    tg_handle h;
    tg_quote q;
    uint64_t v, oks = 0, invalids = 0, busy = 0, deadline;
    int have;
    (void)argc;
    if (tg_open(&r, argv[1], 600000000000ull) != 0) return 2;
    if (tg_lookup(&r, "lp1", "PAIR", &h) != 0) return 3;
    printf("ready\n");
    fflush(stdout);
    deadline = tg_now_ns() + 2000000000ull;
    while (tg_now_ns() < deadline) {{
        uint32_t reasons = check_with_top(&r, &h, tg_now_ns(), &v, &q, &have);
        if (have && q.version != v) {{
            printf("top of version %" PRIu64 " beside a verdict of %" PRIu64 "\n", q.version, v);
            return 1;
        }}
        if (reasons == 0 && have) {{
            if (q.has_bid && q.has_ask && q.bid.mantissa > q.ask.mantissa) {{
                printf("ok beside a crossed top at version %" PRIu64 "\n", v);
                return 1;
            }}
            oks++;
        }} else if (reasons == TG_INVALID_PRICE) {{
            invalids++;
        }} else if (reasons == 0 || (reasons == TG_STALE && v == 0)) {{
            busy++;
        }} else {{
            printf("unexpected reasons %" PRIu32 "\n", reasons);
            return 5;
        }}
    }}
    printf("%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", oks, invalids, busy);
    tg_close(&r);
    return 0;
}}
"#,
            example.display()
        ),
    ) else {
        return;
    };

    let shm = dir.path().join("tickguard");
    let now = now_ns();
    let (p, table, id) = pair_table(&shm, now, 600 * S);
    let top = |bid, ask, invalid| Top {
        bid: Some(Level {
            price: bid,
            size: 1,
        }),
        ask: Some(Level {
            price: ask,
            size: 1,
        }),
        exponent: -2,
        invalid,
        source_time: now,
        ..Top::default()
    };
    let slot = &table.slots()[id as usize];
    slot.write_top(&top(100, 101, false));
    table.set_feed_status(
        0,
        &tickguard::state::FeedStatus {
            last_alive: now,
            source_watermark: now,
            ..Default::default()
        },
    );
    p.ready();
    p.heartbeat(now);

    let reader = Reader::open_with(&shm, options(Some(LONG_BOUND_MS), None));
    let handle = reader.lookup("lp1", "PAIR").unwrap();
    // Each book held about 2 µs.
    let (rust, turns, code, c) = race(
        &bin,
        &shm,
        || {
            let v = reader.check(&handle, now_ns());
            if v.is_ok() {
                0
            } else if v.health == tickguard::Health::Busy {
                2
            } else {
                assert_eq!(v.reasons.names().collect::<Vec<_>>(), ["invalid_price"]);
                1
            }
        },
        |turn| {
            let price = 200 + (turn % 64) as i64;
            slot.write_top(&top(price, price + 1, false));
            hold();
            slot.write_top(&top(price + 5, price, true));
            hold();
        },
    );
    assert_eq!(code, Some(0), "the example: {c}");
    let c: Vec<u64> = c.split_whitespace().map(|n| n.parse().unwrap()).collect();
    eprintln!("example pairs: writer turns {turns}; oks, invalids, busy: Rust {rust:?}, C {c:?}");
    assert!(
        c.len() == 3 && c[0] > 100 && c[1] > 100,
        "the example: {c:?}"
    );
    drop(table);
    drop(p);
    dir.close().expect("remove the scratch dir");
}

/// The publication at `shm` (as [`published`]) and its table with lp1's
/// `PAIR` in it, stale after 600 s, stale at the source after `source_ns`.
fn pair_table(shm: &Path, now: u64, source_ns: u64) -> (Arc<Publication>, StateTable, u32) {
    let (_, p) = published(shm, now);
    let mut table = StateTable::shared(p.clone());
    let th = tickguard::verdict::Thresholds {
        stale_ns: 600 * S,
        source_ns,
    };
    let id = table.insert(0, sym("PAIR"), th).unwrap();
    (p, table, id)
}

/// A table over `p` with EURUSD quoted (0.0100 × 0.0101) on each of
/// `feeds`, each feed alive now; the publication ready, its heartbeat now.
fn eurusd_quoted(
    p: &Arc<Publication>,
    feeds: std::ops::Range<u16>,
    th: tickguard::verdict::Thresholds,
) -> StateTable {
    use tickguard::state::{FeedStatus, Level, Top};
    let now = now_ns();
    let mut table = StateTable::shared(p.clone());
    let level = |price| Some(Level { price, size: 1 });
    for feed in feeds {
        let id = table.insert(feed, sym("EURUSD"), th).unwrap();
        table.slots()[id as usize].write_top(&Top {
            bid: level(100),
            ask: level(101),
            exponent: -4,
            ..Top::default()
        });
        let alive = FeedStatus {
            last_alive: now,
            source_watermark: now,
            ..FeedStatus::default()
        };
        table.set_feed_status(feed, &alive);
    }
    p.ready();
    p.heartbeat(now);
    table
}

/// A writer's state held about 2 µs by a [`race`]'s turn (spinning: a
/// sleep would hold it far longer).
fn hold() {
    let from = Instant::now();
    while from.elapsed() < Duration::from_micros(2) {
        std::hint::spin_loop();
    }
}

/// Readers racing a writer: two Rust threads calling `check` for 2 s each
/// (it returns which of three counts its answer adds to) and the C program
/// `bin` on `shm` in its own process (it prints `ready`, checks for 2 s,
/// then prints its counts), while `turn` (given its count) runs over and
/// over until all of them are done. With the writer, more busy threads
/// than cores: readers are preempted between their reads. Returns the
/// Rust readers' counts, the turns, the C program's exit code and the
/// rest of its output.
fn race(
    bin: &Path,
    shm: &Path,
    check: impl Fn() -> usize + Sync,
    mut turn: impl FnMut(u64),
) -> ([u64; 3], u64, Option<i32>, String) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const RUST_READERS: usize = 2;
    let mut child = Command::new(bin)
        .arg(shm)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "ready", "C reader did not start");
    let running = AtomicUsize::new(RUST_READERS);
    let (rust, turns, code) = std::thread::scope(|s| {
        let readers: Vec<_> = (0..RUST_READERS)
            .map(|_| {
                s.spawn(|| {
                    // Counts this reader out however it ends.
                    struct Out<'a>(&'a AtomicUsize);
                    impl Drop for Out<'_> {
                        fn drop(&mut self) {
                            self.0.fetch_sub(1, Ordering::Relaxed);
                        }
                    }
                    let _out = Out(&running);
                    let mut counts = [0u64; 3];
                    let end = Instant::now() + Duration::from_secs(2);
                    while Instant::now() < end {
                        counts[check()] += 1;
                    }
                    counts
                })
            })
            .collect();
        let deadline = Instant::now() + CHILD_LIMIT;
        let mut turns = 0u64;
        let code = loop {
            for _ in 0..64 {
                turn(turns);
                turns += 1;
            }
            let exited = child.try_wait().expect("wait");
            if let (Some(s), 0) = (exited, running.load(Ordering::Relaxed)) {
                break s.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("C reader still running after {CHILD_LIMIT:?}");
            }
        };
        let rust = readers
            .into_iter()
            .map(|r| r.join().expect("a Rust reader"))
            .fold([0; 3], |a, r| [a[0] + r[0], a[1] + r[1], a[2] + r[2]]);
        (rust, turns, code)
    });
    let mut c = String::new();
    out.read_to_string(&mut c).unwrap();
    (rust, turns, code, c)
}

/// [`race`] of readers that must answer `stale_at_source` at every check
/// of `handle` (or spend the retry budget), the C one [`OFFSETS_C`]'s
/// `bin`; `what` names the race in the line it prints.
fn always_stale_at_source(
    bin: &Path,
    shm: &Path,
    reader: &Reader,
    handle: &tickguard::reader::Handle,
    what: &str,
    turn: impl FnMut(u64),
) {
    let check = || {
        let v = reader.check(handle, now_ns());
        if v.health == tickguard::Health::Busy {
            return 2;
        }
        assert_eq!(v.reasons.to_string(), "stale_at_source", "{v:?}");
        1
    };
    let (rust, turns, code, c) = race(bin, shm, check, turn);
    assert_eq!(code, Some(0), "C reader: {c}");
    let c: Vec<u64> = c.split_whitespace().map(|n| n.parse().unwrap()).collect();
    eprintln!("{what}: writer turns {turns}; oks, stale_at_source, busy: Rust {rust:?}, C {c:?}");
    assert!(rust[1] > 100, "Rust reader: {rust:?}");
    assert!(c.len() == 3 && c[1] > 100, "C reader: {c:?}");
}

/// `offsets SHM`: checks lp1/PAIR for 2 s, every answer
/// `stale_at_source` (or the retry budget spent); prints
/// "0 stale_at_source busy", or exits 1 at the first other answer.
const OFFSETS_C: &str = r#"#include "tickguard.h"
#include <inttypes.h>
#include <stdio.h>
/* offsets SHM: checks lp1/PAIR for 2 s; prints "oks stale_at_source busy",
   or exits 1 at the first ok. */
int main(int argc, char **argv) {
    tg_reader r;
    tg_handle h;
    uint64_t v, late = 0, busy = 0, deadline;
    (void)argc;
    if (tg_open(&r, argv[1], 600000000000ull) != 0) return 2;
    if (tg_lookup(&r, "lp1", "PAIR", &h) != 0) return 3;
    printf("ready\n");
    fflush(stdout);
    deadline = tg_now_ns() + 2000000000ull;
    while (tg_now_ns() < deadline) {
        uint32_t reasons = tg_check(&r, &h, tg_now_ns(), &v);
        if (reasons == TG_STALE_AT_SOURCE) {
            late++;
        } else if (reasons == TG_STALE && v == 0) {
            busy++;
        } else {
            printf("reasons %" PRIu32 " at version %" PRIu64 "\n", reasons, v);
            return 1;
        }
    }
    printf("0 %" PRIu64 " %" PRIu64 "\n", late, busy);
    tg_close(&r);
    return 0;
}
"#;

/// An SQF slot's source time is its quote's, and its age is `now − source
/// − offset`: a packet lowering the offset published after its slots
/// would pair the new quote with the old, higher offset, fresher than
/// either state. The handler turns between two packets a window apart
/// (`offset_window_ms = 1`, so each one's sample alone is the offset): A
/// sent at its arrival, its quote 10 s old (offset 0); B sent 8 s before
/// its arrival, its quote 10 s older than that (offset 8 s). Each state
/// reads 10 s old against a 5 s threshold; A's quote with B's offset would
/// read 2 s, `ok`. Neither reader ever answers `ok` (with the offset
/// published after the slots, as before, this test failed).
#[test]
fn no_sqf_check_pairs_a_quote_with_an_offset_published_after_it() {
    let Some((dir, bin)) = c99("offsets.c", OFFSETS_C) else {
        return;
    };
    let shm = dir.path().join("tickguard");
    let text = "[state]\ncapacity = 16\n[[feed]]\nname = \"lp1\"\nkind = \"full\"\n\
                lines = [\"239.1.1.1:30001\"]\nstale_threshold_ms = 600000\n\
                source_threshold_ms = 5000\nclock_offset = \"auto\"\noffset_window_ms = 1\n";
    let config = Config::parse(text, "sqf.toml").unwrap();
    let now = now_ns();
    let p = Arc::new(
        Publication::create(&shm, 0o640, 16, &publication_feeds(&config), now, 1_000_000).unwrap(),
    );
    let mut h = Handler::with_table(&config, StateTable::shared(p.clone()), 1024);
    p.ready();
    let mut seq = 0u64;
    let mut send = |h: &mut Handler, late: bool| {
        let t = now_ns();
        let sent = if late { t - 8 * S } else { t };
        seq += 1;
        feed(h, 0, t, sent, |b| {
            b.quote(sym("PAIR"), seq, sent - 10 * S, 1.0, 1.1);
        });
    };
    send(&mut h, false);
    p.heartbeat(now_ns());
    let reader = Reader::open_with(&shm, options(Some(LONG_BOUND_MS), None));
    let handle = reader.lookup("lp1", "PAIR").unwrap();
    assert_eq!(
        reader.check(&handle, now_ns()).reasons.to_string(),
        "stale_at_source"
    );
    always_stale_at_source(&bin, &shm, &reader, &handle, "sqf offsets", |turn| {
        // Past the window: the last packet's sample has left it.
        let from = Instant::now();
        while from.elapsed() < Duration::from_micros(1_100) {
            std::hint::spin_loop();
        }
        send(&mut h, turn % 2 == 1);
        p.heartbeat(now_ns());
    });
    drop(h);
    drop(p);
    dir.close().expect("remove the scratch dir");
}

/// A heartbeat's part of a watermark is its arrival less the offset, so
/// an offset paired with a watermark published with another could read
/// fresher than both. The writer turns between offsets 0 and +8 s, the
/// heartbeat's part (its only part) 10 s old, the source threshold 5 s:
/// both states are `stale_at_source`, and so is every state the writer
/// passes through (`publish_around_offset`); the new offset with the old
/// watermark would read 2 s old, `ok`. A check reads the offset, then the
/// status, then the offset's stamp again: neither reader ever answers
/// `ok` (without the re-check, or with the offset on the other side of
/// the status, this test failed).
#[test]
fn no_check_pairs_an_offset_with_a_watermark_of_another() {
    use tickguard::state::{FeedStatus, Level, Top};
    let Some((dir, bin)) = c99("offsets.c", OFFSETS_C) else {
        return;
    };
    let shm = dir.path().join("tickguard");
    let now = now_ns();
    let (p, table, id) = pair_table(&shm, now, 5 * S);
    // The book's own source time far behind: the watermark decides.
    table.slots()[id as usize].write_top(&Top {
        bid: Some(Level {
            price: 100,
            size: 1,
        }),
        ask: Some(Level {
            price: 101,
            size: 1,
        }),
        exponent: -2,
        source_time: now - 3600 * S,
        ..Top::default()
    });
    // The heartbeat, 10 s before each publish (local clock), its part of
    // the watermark at each offset: however long the race runs, each state
    // reads 10 s old at the source, a mixed pair 2 s.
    let state = |offset: i128| FeedStatus {
        last_alive: now,
        source_watermark: (i128::from(now_ns() - 10 * S) - offset) as u64,
        ..FeedStatus::default()
    };
    let offsets = [0i128, 8 * S as i128];
    let publish = |offset: i128| {
        tickguard::shm::publish_around_offset(Some(&p), 0, offset, || {
            table.set_feed_status(0, &state(offset))
        })
    };
    publish(offsets[0]);
    p.ready();
    p.heartbeat(now);
    let reader = Reader::open_with(&shm, options(Some(LONG_BOUND_MS), None));
    let handle = reader.lookup("lp1", "PAIR").unwrap();
    for offset in offsets.into_iter().chain([offsets[0]]) {
        publish(offset);
        let v = reader.check(&handle, now_ns());
        assert_eq!(v.reasons.to_string(), "stale_at_source", "offset {offset}");
    }
    always_stale_at_source(&bin, &shm, &reader, &handle, "offsets", |turn| {
        publish(offsets[(turn % 2) as usize]);
        hold();
    });
    drop(table);
    drop(p);
    dir.close().expect("remove the scratch dir");
}

/// Formats each (mantissa, exponent) pair of its arguments as a decimal
/// price, one line each, and checks the text never needs more than
/// `TG_PRICE_TEXT_LEN` bytes.
const PRICES_C: &str = r#"#include "tickguard.h"
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int i;
    for (i = 1; i + 1 < argc; i += 2) {
        char text[TG_PRICE_TEXT_LEN];
        tg_price p;
        size_t n;
        p.format = TG_PRICE_DECIMAL;
        p.mantissa = strtoll(argv[i], NULL, 10);
        p.exponent = (int32_t)strtol(argv[i + 1], NULL, 10);
        p.value = 0;
        n = tg_price_format(&p, text, sizeof text);
        if (n >= sizeof text) return 3;
        printf("%s\n", text);
    }
    return 0;
}
"#;

/// `tg_price_format` prints a decimal as `Price`'s `Display` does, over
/// the whole range of the file's mantissa and exponent; an exponent only a
/// caller can build (outside the file's int8) prints `nan` within the
/// buffer (it wrote past the buffer before).
#[test]
fn c_decimal_prices_print_as_rust_prints_them() {
    use tickguard::state::price::Price;
    let Some((dir, bin)) = c99("prices.c", PRICES_C) else {
        return;
    };
    let mut cases: Vec<(i64, i32)> = Vec::new();
    for mantissa in [0, 1, -1, 7, 10, 1_234_500, -1_234_500, i64::MAX, i64::MIN] {
        for exponent in [-128, -19, -18, -4, -1, 0, 1, 4, 127] {
            cases.push((mantissa, exponent));
        }
    }
    let wild = [(1, 300), (-5, -300), (1, 128), (1, -129), (0, i32::MIN)];
    cases.extend(wild);
    let mut cmd = Command::new(&bin);
    for (m, e) in &cases {
        cmd.arg(m.to_string()).arg(e.to_string());
    }
    let r = run(&mut cmd);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), cases.len());
    for ((mantissa, exponent), line) in cases.iter().zip(lines) {
        let want = match i8::try_from(*exponent) {
            Ok(exponent) => Price::Decimal {
                mantissa: *mantissa,
                exponent,
            }
            .to_string(),
            Err(_) => "nan".to_string(),
        };
        assert_eq!(line, want, "mantissa {mantissa}, exponent {exponent}");
    }
    dir.close().expect("remove the scratch dir");
}

/// `tg_reasons_format` prints every set of reasons as the Rust reader's
/// `Display` does, and within `TG_REASONS_TEXT_LEN` whatever the bits
/// (every one set, unknown ones too: the bound the header once gave, 64
/// bytes, was short of it).
#[test]
fn c_reasons_print_as_rust_prints_them_within_their_bound() {
    let Some((dir, bin)) = c99(
        "reasons.c",
        r#"#include "tickguard.h"
#include <stdio.h>
#include <stdlib.h>
/* reasons MASK...: each mask's text, or exit 3 when it needs more than
   TG_REASONS_TEXT_LEN bytes. */
int main(int argc, char **argv) {
    int i;
    for (i = 1; i < argc; i++) {
        char text[TG_REASONS_TEXT_LEN];
        size_t n = tg_reasons_format((uint32_t)strtoul(argv[i], NULL, 10), text, sizeof text);
        if (n >= sizeof text) return 3;
        printf("%s\n", text);
    }
    return 0;
}
"#,
    ) else {
        return;
    };
    let masks: Vec<u32> = (0..=0x7f).chain([u32::MAX]).collect();
    let mut cmd = Command::new(&bin);
    cmd.args(masks.iter().map(u32::to_string));
    let r = run(&mut cmd);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), masks.len());
    for (mask, line) in masks.iter().zip(&lines) {
        let known = tickguard::verdict::Reasons::from_bits(*mask & 0x7f).unwrap();
        let want = match tickguard::verdict::Reasons::from_bits(*mask) {
            Some(r) => r.to_string(),
            None => format!("{known}|unknown"),
        };
        assert_eq!(*line, want, "mask {mask:#x}");
    }
    dir.close().expect("remove the scratch dir");
}

/// The C reader's comparisons at their exact bounds, against the Rust
/// reader's: strict (`>`) for silence and source age (spec sqf §5), and a
/// last sign of life more than `TG_MAX_AHEAD_NS` ahead of now read as
/// `stale`, not one exactly that far.
#[test]
fn c_and_rust_readers_agree_at_every_bound() {
    use tickguard::state::{FeedStatus, Level, Top};
    use tickguard::verdict::Thresholds;
    let Some((dir, bin)) = c99(
        "bounds.c",
        r#"#include "tickguard.h"
#include <stdio.h>
#include <stdlib.h>
/* bounds SHM NOW...: the reasons (a bit mask) of lp2-delta EDGE at each NOW. */
int main(int argc, char **argv) {
    tg_reader r;
    tg_handle h;
    int i;
    if (tg_open(&r, argv[1], 600000000000ull) != 0) return 2;
    if (tg_lookup(&r, "lp2-delta", "EDGE", &h) != 0) return 3;
    for (i = 2; i < argc; i++) {
        printf("%u\n", tg_check(&r, &h, strtoull(argv[i], NULL, 10), NULL));
    }
    tg_close(&r);
    return 0;
}
"#,
    ) else {
        return;
    };
    let shm = dir.path().join("tickguard");
    let t = now_ns();
    let (_, p) = published(&shm, t);
    let mut table = StateTable::shared(p.clone());
    let th = Thresholds {
        stale_ns: 5 * S,
        source_ns: 2 * S,
    };
    let id = table.insert(1, sym("EDGE"), th).unwrap();
    let level = |price| Some(Level { price, size: 1 });
    table.slots()[id as usize].write_top(&Top {
        bid: level(100),
        ask: level(101),
        exponent: -2,
        source_time: t - S,
        ..Top::default()
    });
    let status = FeedStatus {
        last_alive: t,
        ..FeedStatus::default()
    };
    table.set_feed_status(1, &status);
    p.ready();
    p.heartbeat(t);
    let ahead = tickguard::verdict::MAX_AHEAD_NS;
    // Source age 2 s (the bound) and past it; silence 5 s and past it;
    // alive exactly the most ahead allowed, and past it.
    let nows = [
        t + S,
        t + S + 1,
        t + 5 * S,
        t + 5 * S + 1,
        t - ahead,
        t - ahead - 1,
    ];
    let r = run(Command::new(&bin)
        .arg(&shm)
        .args(nows.iter().map(|n| n.to_string())));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let c: Vec<u32> = r.stdout.lines().map(|l| l.parse().unwrap()).collect();
    let reader = Reader::open_with(&shm, options(Some(LONG_BOUND_MS), None));
    let handle = reader.lookup("lp2-delta", "EDGE").unwrap();
    let rust: Vec<u32> = nows
        .iter()
        .map(|&n| u32::from(reader.check(&handle, n).reasons.bits()))
        .collect();
    assert_eq!(c, rust);
    let (stale, source) = (2, 4);
    assert_eq!(rust, [0, source, source, stale | source, 0, stale]);
    drop(table);
    drop(p);
    dir.close().expect("remove the scratch dir");
}

/// The C header's seqlock reads order their loads as the Rust reader's
/// do: x86 keeps loads in order whatever the source says, so the stress
/// tests above would pass without the fences; this reads them off the
/// source. In `tg__seqlock_read`, the stamp loaded Acquire, the words
/// Relaxed, an Acquire fence, then the stamp again; in `tg_check`, the
/// three reads, an Acquire fence, then both stamps again.
#[test]
fn the_c_readers_seqlock_loads_are_fenced() {
    let src = std::fs::read_to_string(crate_dir().join("include/tickguard.h")).unwrap();
    // The body of the function defined by `start`, to its closing brace.
    let body = |start: &str| -> String {
        let from = src.find(start).unwrap_or_else(|| panic!("no {start}"));
        let rest = &src[from..];
        rest[..rest.find("\n}\n").unwrap()]
            .lines()
            .map(|l| l.split("/*").next().unwrap_or(""))
            .collect()
    };
    // Each of `steps` found after the one before it.
    let in_order = |name: &str, code: &str, steps: &[&str]| {
        let mut at = 0;
        for step in steps {
            let found = code[at..]
                .find(step)
                .unwrap_or_else(|| panic!("{name}: no {step} after {at} in {code}"));
            at += found + step.len();
        }
    };
    let read = body("static inline uint64_t tg__seqlock_read(");
    in_order(
        "tg__seqlock_read",
        &read,
        &[
            "s1 = __atomic_load_n(stamp, __ATOMIC_ACQUIRE);",
            "out[i] = __atomic_load_n(words + i, __ATOMIC_RELAXED);",
            "__atomic_thread_fence(__ATOMIC_ACQUIRE);",
            "s2 = __atomic_load_n(stamp, __ATOMIC_RELAXED);",
            "if (s1 == s2) return s1;",
        ],
    );
    let check = body("static inline uint32_t tg_check(");
    in_order(
        "tg_check",
        &check,
        &[
            "tg__read_slot(",
            "tg__read_offset(",
            "tg__read_feed_status(",
            "__atomic_thread_fence(__ATOMIC_ACQUIRE);",
            "__atomic_load_n(stamp + TG_S_STAMP, __ATOMIC_RELAXED) == w[TG_S_STAMP]",
            "__atomic_load_n(offset_words + TG_F_OFFSET_STAMP, __ATOMIC_RELAXED) == offset_stamp",
        ],
    );
}

/// A publication at `shm` of one MDP3 feed, `cme`, alive, holding an
/// instrument for each of `ids` named `#SecurityID` and quoted (halted
/// where `halted` says): the publication, its table and the slots, in
/// the order of `ids`.
fn quoted_instruments(
    shm: &Path,
    capacity: usize,
    ids: &[i32],
    halted: impl Fn(i32) -> bool,
) -> (Arc<Publication>, StateTable, Vec<u32>) {
    use tickguard::config::Protocol;
    use tickguard::protocol::mdp3::publish::key;
    use tickguard::protocol::sqf::rules::FeedKind;
    use tickguard::shm::FeedInfo;
    use tickguard::state::{FeedStatus, Level, Top};
    use tickguard::verdict::Thresholds;
    let now = now_ns();
    let info = FeedInfo::new(
        "cme",
        FeedKind::Delta,
        vec!["239.1.1.1:30001".parse().unwrap()],
        Protocol::Mdp3,
    );
    let p = Arc::new(Publication::create(shm, 0o640, capacity, &[info], now, 1_000_000).unwrap());
    let mut table = StateTable::shared(p.clone());
    let th = Thresholds {
        stale_ns: 600 * S,
        source_ns: 600 * S,
    };
    let level = |price| Some(Level { price, size: 1 });
    let slots = ids
        .iter()
        .map(|&id| {
            let name = format!("#{id}");
            let slot = table.insert_named(0, key(id), name.as_bytes(), th).unwrap();
            table.slots()[slot as usize].write_top(&Top {
                bid: level(100),
                ask: level(101),
                exponent: -9,
                halted: halted(id),
                ..Top::default()
            });
            slot
        })
        .collect();
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
    (p, table, slots)
}

/// Handles held while a venue moves a Symbol (as an MDP3 definition
/// does), in C and Rust alike: the handle found by the Symbol answers
/// `no_quote` once the name is entered for another instrument (and reads
/// no quote), where a fresh lookup follows the name; the handles found by
/// `#SecurityID` names, and by a Symbol that did not move, keep answering
/// for their slots; once the Symbol is withdrawn, the handle found at its
/// second instrument answers `no_quote` too and the name finds nothing.
#[test]
fn a_handle_found_by_a_symbol_that_moved_answers_no_quote() {
    use tickguard::protocol::mdp3::publish::key;
    let Some((dir, bin)) = c99(
        "moved.c",
        r##"#include "tickguard.h"
#include <stdio.h>
/* Looks names up once, then after each line on stdin checks the handles
 * it holds again: one line of answers (reason bits) a round. */
static const char *names[] = {"ESZ6", "#118061", "#118062", "NQZ6"};
int main(int argc, char **argv) {
    tg_reader r;
    tg_handle h[4], fresh;
    tg_quote q;
    char line[8];
    int i, round;
    (void)argc;
    if (tg_open(&r, argv[1], 600000000000ull) != 0) return 2;
    for (i = 0; i < 4; i++)
        if (tg_lookup(&r, "cme", names[i], &h[i]) != 0) return 3;
    for (round = 0;; round++) {
        for (i = 0; i < 4; i++) printf("%u ", tg_check(&r, &h[i], tg_now_ns(), NULL));
        printf("%d ", tg_read_quote(&r, &h[0], &q));
        if (tg_lookup(&r, "cme", "ESZ6", &fresh) == 0)
            printf("%u %u\n", tg_check(&r, &fresh, tg_now_ns(), NULL), fresh.slot);
        else
            printf("none\n");
        fflush(stdout);
        if (fgets(line, sizeof line, stdin) == NULL) break;
    }
    tg_close(&r);
    return 0;
}
"##,
    ) else {
        return;
    };
    let shm = dir.path().join("tickguard");
    let ids = [118_061, 118_062, 118_063];
    let (_p, mut table, slots) = quoted_instruments(&shm, 16, &ids, |id| id == 118_062);
    let [a, b, c] = [slots[0], slots[1], slots[2]];
    assert!(table.alias(0, key(118_061), b"ESZ6", a, None));
    assert!(table.alias(0, key(118_063), b"NQZ6", c, None));

    let reader = Reader::open_with(&shm, options(Some(LONG_BOUND_MS), None));
    let names = ["ESZ6", "#118061", "#118062", "NQZ6"];
    let held = names.map(|n| reader.lookup("cme", n).unwrap());
    // What the Rust reader says, in the C program's words.
    let rust = || {
        let mut words: Vec<String> = held
            .iter()
            .map(|h| reader.check(h, now_ns()).reasons.bits().to_string())
            .collect();
        words.push(
            if reader.record(&held[0]).is_some() {
                "0"
            } else {
                "-1"
            }
            .into(),
        );
        match reader.lookup("cme", "ESZ6") {
            Some(h) => words.push(format!(
                "{} {}",
                reader.check(&h, now_ns()).reasons.bits(),
                h.slot()
            )),
            None => words.push("none".into()),
        }
        words.join(" ")
    };
    let mut c = Talk::spawn(Command::new(&bin).arg(&shm), true);
    let round = |c: &mut Talk, want: String| {
        assert_eq!(c.line(), want, "C");
        assert_eq!(rust(), want, "Rust");
    };
    // TG_NO_QUOTE 1, TG_HALTED 32.
    round(&mut c, format!("0 0 32 0 0 0 {a}"));
    // ESZ6 moves to the halted instrument.
    assert!(table.alias(0, key(118_062), b"ESZ6", b, Some(a)));
    c.say(b"next\n");
    round(&mut c, format!("1 0 32 0 -1 32 {b}"));
    // Withdrawn (deleted there): the handle found at the second
    // instrument answers no_quote too; its `#SecurityID` still halted.
    let at_b = reader.lookup("cme", "ESZ6").unwrap();
    assert!(table.withdraw(0, b"ESZ6", Some(b)));
    assert_eq!(reader.check(&at_b, now_ns()).reasons.bits(), 1);
    assert_eq!(reader.record(&at_b), None);
    c.say(b"next\n");
    round(&mut c, "1 0 32 0 -1 none".into());
    assert_eq!(c.finish().0, Some(0));
}

/// A lookup racing a writer that moves a Symbol from slot to slot (each
/// slot once, bounded: 50,000 moves) never keeps a count from after the
/// name left the slot it found: once the name has reached the last slot,
/// every handle the reader found at another answers `no_quote` (each
/// quoted). A lookup that read the count without looking at the
/// directory again could pair a slot with the count the name's leaving
/// it made, and answer for that slot for good. The C reader races it from
/// another process, as a gateway would.
#[test]
fn a_lookup_racing_moves_never_keeps_a_count_from_after_the_name_left() {
    use tickguard::protocol::mdp3::publish::key;
    const SLOTS: usize = 50_000;
    let dir = scratch();
    let shm = dir.path().join("tickguard");
    let ids: Vec<i32> = (0..SLOTS as i32).map(|k| 100_000 + k).collect();
    let (_p, mut table, slots) = quoted_instruments(&shm, SLOTS, &ids, |_| false);
    assert!(table.alias(0, key(ids[0]), b"ESZ6", slots[0], None));
    let reader = Reader::open_with(&shm, options(Some(LONG_BOUND_MS), None));
    // The C reader races the same moves from another process.
    let last = slots[SLOTS - 1];
    let c = compiler("CC", "cc").map(|cc| {
        let bin = c_program(dir.path(), &cc, "-std=c99", "race.c", RACE_C);
        let mut c = Talk::spawn(Command::new(&bin).arg(&shm).arg(last.to_string()), false);
        assert_eq!(c.line(), "looking");
        c
    });
    let done = std::sync::atomic::AtomicBool::new(false);
    let found = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            // Stops the reader whatever happens.
            let moved = (1..SLOTS)
                .all(|k| table.alias(0, key(ids[k]), b"ESZ6", slots[k], Some(slots[k - 1])));
            done.store(true, std::sync::atomic::Ordering::Release);
            moved
        });
        let mut found = Vec::new();
        while !done.load(std::sync::atomic::Ordering::Acquire) {
            found.extend(reader.lookup("cme", "ESZ6"));
        }
        assert!(writer.join().unwrap(), "every move entered");
        found
    });
    assert_eq!(reader.lookup("cme", "ESZ6").unwrap().slot(), last);
    let left: Vec<_> = found.iter().filter(|h| h.slot() != last).collect();
    assert!(!left.is_empty(), "the lookups raced no move");
    for h in &left {
        assert_eq!(
            reader.check(h, now_ns()).reasons.to_string(),
            "no_quote",
            "{h:?}"
        );
    }
    eprintln!(
        "Rust: {} lookups, {} at slots the name left",
        found.len(),
        left.len()
    );
    let Some(c) = c else {
        return skipped_without("a working C compiler (cc or $CC)");
    };
    let (code, rest) = c.finish();
    assert_eq!(code, Some(0), "{rest}");
    eprintln!("C: {rest}");
    assert!(rest.ends_with(" 0 wrong\n"), "C: {rest}");
    assert!(
        !rest.contains(" 0 elsewhere"),
        "the C lookups raced no move: {rest}"
    );
}

/// Looks `ESZ6` up until it finds it at slot argv[2] (the last the name
/// moves to), keeping what it found; then checks each handle found at
/// another slot: "N lookups, M elsewhere, K wrong" (K answering other
/// than TG_NO_QUOTE). Gives up (exit 4) after 60 s.
const RACE_C: &str = r##"#include "tickguard.h"
#include <stdio.h>
#include <stdlib.h>
#define KEEP 1000000
int main(int argc, char **argv) {
    tg_reader r;
    tg_handle h, *kept;
    unsigned long last, n = 0, lookups = 0, wrong = 0, i;
    uint64_t start;
    if (argc < 3 || tg_open(&r, argv[1], 600000000000ull) != 0) return 2;
    last = strtoul(argv[2], NULL, 10);
    kept = malloc(KEEP * sizeof *kept);
    if (kept == NULL) return 3;
    printf("looking\n");
    fflush(stdout);
    for (start = tg_now_ns();;) {
        if (tg_now_ns() - start > 60000000000ull) return 4; /* the writer never got there */
        if (tg_lookup(&r, "cme", "ESZ6", &h) != 0) continue;
        lookups++;
        if (h.slot == last) break;
        if (n < KEEP) kept[n++] = h;
    }
    for (i = 0; i < n; i++)
        if (tg_check(&r, &kept[i], tg_now_ns(), NULL) != TG_NO_QUOTE) wrong++;
    printf("%lu lookups, %lu elsewhere, %lu wrong\n", lookups, n, wrong);
    free(kept);
    tg_close(&r);
    return 0;
}
"##;
