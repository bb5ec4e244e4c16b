//! The receive → decode → apply → publish path allocates nothing after
//! start-up: a counting global allocator around the handler and the live
//! receiver's duty cycle.
//!
//! The allocator is the whole test binary's: every other test's
//! allocations go through it too, so it counts only on the thread under
//! measurement (a thread-local flag that thread sets), at the cost of a
//! relaxed load and a thread-local read per allocation elsewhere. A test
//! that must count the threads the code under test starts as well runs in
//! a process of its own ([`alone`]), where no other test allocates.

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use tickguard::config::Config;
use tickguard::handler::Handler;
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::symbol::Symbol;

struct Counting;

thread_local! {
    /// Whether this thread is being measured, and its count: tests run in
    /// parallel threads, and only the thread under test may count.
    static MEASURED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static ALLOCATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// While set, every thread's allocations count in [`EVERY_THREAD`] too:
/// for a feed whose book levels are applied on a thread of their own. Set
/// only in a process that runs one test ([`alone`]).
static COUNT_EVERY_THREAD: AtomicBool = AtomicBool::new(false);
static EVERY_THREAD: AtomicU64 = AtomicU64::new(0);

/// Held by every test of this module for its whole run: one measurement at
/// a time, whichever harness runs them (nextest runs one test a process;
/// `cargo test`, one a thread).
static SERIAL: Mutex<()> = Mutex::new(());

/// Names the one test a child process of [`alone`] runs.
const ALONE: &str = "TICKGUARD_ALLOC_ALONE";

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn count() {
    if COUNT_EVERY_THREAD.load(Ordering::Relaxed) {
        EVERY_THREAD.fetch_add(1, Ordering::Relaxed);
    }
    // `try_with`: the allocator may run while thread-locals are torn down.
    let _ = MEASURED.try_with(|m| {
        if m.get() {
            let _ = ALLOCATIONS.try_with(|a| a.set(a.get() + 1));
        }
    });
}

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(|a| a.get());
    MEASURED.with(|m| m.set(true));
    f();
    MEASURED.with(|m| m.set(false));
    ALLOCATIONS.with(|a| a.get()) - before
}

/// Allocations made by `f`, on any thread. Only in a process of [`alone`]:
/// elsewhere the other tests' threads would count too.
fn allocations_on_any_thread(f: impl FnOnce()) -> u64 {
    assert!(
        std::env::var_os(ALONE).is_some(),
        "counting every thread's allocations needs a process of its own (alone)"
    );
    let before = EVERY_THREAD.load(Ordering::Relaxed);
    COUNT_EVERY_THREAD.store(true, Ordering::SeqCst);
    f();
    COUNT_EVERY_THREAD.store(false, Ordering::SeqCst);
    EVERY_THREAD.load(Ordering::Relaxed) - before
}

/// Whether the test `name` (of this module) runs here, alone in its
/// process. Called in the harness's process, it runs `name` in a child
/// process of this test binary that runs no other test, demands that it
/// ran there and passed, and returns false; in that child it returns true.
fn alone(name: &str) -> bool {
    // The harness's name of the test: the module path without the crate.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let test = format!("{module}::{name}");
    if std::env::var(ALONE).as_deref() == Ok(test.as_str()) {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test.as_str(), "--exact", "--test-threads=1", "--nocapture"])
        .env(ALONE, &test)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed;"),
        "{test} in a process of its own: {}\n{stdout}\n{stderr}",
        out.status
    );
    false
}

fn config(extra: &str, kind: &str, lines: &str) -> Config {
    Config::parse(
        &format!(
            "[state]\ncapacity = 2048\n{extra}\n[[feed]]\nname = \"f\"\nkind = \"{kind}\"\nlines = [{lines}]\n\
             stale_threshold_ms = 500\nsource_threshold_ms = 2000\nclock_offset = \"auto\"\noffset_window_ms = 1000\n"
        ),
        "t",
    )
    .unwrap()
}

/// Packets touching every rule: in order, gaps, duplicates, heartbeats with
/// gaps, snapshots going back, invalid prices, unknown types, rejected ones.
fn traffic(symbols: &[Symbol], rounds: u64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for r in 0..rounds {
        let mut b = PacketBuilder::new(r * 1_000);
        for (i, s) in symbols.iter().enumerate() {
            let seq = r * 3 + (i as u64 % 2);
            b.quote(*s, seq, r, 1.0, if r % 7 == 0 { 0.5 } else { 1.1 });
            if r % 5 == 0 {
                b.heartbeat(*s, seq + 4);
            }
            if r % 11 == 0 {
                b.snapshot(*s, seq / 2, r, 1.0, 1.1);
            }
        }
        b.message(b'Z', &[1, 2, 3]);
        out.push(b.finish());
        if r % 13 == 0 {
            let mut bad = out.last().cloned().unwrap_or_default();
            bad.push(0);
            out.push(bad);
        }
    }
    out
}

#[test]
fn the_counter_counts() {
    let _serial = serial();
    assert_eq!(allocations(|| drop(std::hint::black_box(vec![1u8; 10]))), 1);
}

/// Another thread's allocations, as another test's in the same process,
/// do not count: a thread allocating all along while this one measures
/// code that allocates nothing.
#[test]
fn other_threads_allocations_do_not_count() {
    let _serial = serial();
    let stop = AtomicBool::new(false);
    let made = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                drop(std::hint::black_box(vec![1u8; 10]));
                made.fetch_add(1, Ordering::Relaxed);
            }
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let waited = |n: u64| {
            while made.load(Ordering::Relaxed) < n {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the other thread allocates"
                );
                std::thread::yield_now();
            }
        };
        waited(1);
        let from = made.load(Ordering::Relaxed);
        let n = allocations(|| waited(from + 10_000));
        stop.store(true, Ordering::Relaxed);
        assert_eq!(n, 0, "allocations counted while another thread made 10,000");
    });
}

#[test]
fn handler_path_allocates_nothing_after_start() {
    let _serial = serial();
    let cfg = config("", "delta", "\"127.0.0.1:9\"");
    let symbols: Vec<Symbol> = (0..200)
        .map(|i| Symbol::parse(&format!("S{i}")).unwrap())
        .collect();
    let packets = traffic(&symbols, 400);
    // A finite offset queue: preallocated, as the live receiver uses it.
    let mut h = Handler::with_offset_queue(&cfg, 4096);
    // Start-up: first sight of every symbol (slot creation) happens here.
    for (i, p) in packets.iter().take(2).enumerate() {
        let _ = h.on_datagram(0, p, i as u64 * 1_000_000);
    }
    let n = allocations(|| {
        for (i, p) in packets.iter().enumerate() {
            let _ = h.on_datagram(0, p, 2_000_000 + i as u64 * 1_000_000);
        }
    });
    assert!(h.feeds()[0].counters.rejected > 0 && h.feeds()[0].counters.ticks_lost > 0);
    assert_eq!(n, 0, "allocations on the handler path");
}

#[test]
fn live_duty_cycle_allocates_nothing_after_start() {
    live_duty_cycle(false);
}

/// Recording too (`run --record`): its buffers are sized for the largest
/// record from the start, so datagrams larger than any before allocate
/// nothing either.
#[test]
fn live_duty_cycle_allocates_nothing_after_start_while_recording() {
    live_duty_cycle(true);
}

fn live_duty_cycle(record: bool) {
    let _serial = serial();
    let port = crate::common::free_port();
    let shm = format!("/dev/shm/tickguard-alloc-{}", std::process::id());
    let cfg = config(
        &format!(
            "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{shm}\"\noffset_queue = 4096\n"
        ),
        "full",
        &format!("\"127.0.0.1:{port}\""),
    );
    let mut sidecar = tickguard::sidecar::Sidecar::start(&cfg).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("r.pcap");
    if record {
        sidecar.record(&recording, None).unwrap();
    }
    let _changes = sidecar.subscribe(1 << 16);
    let symbols: Vec<Symbol> = (0..50)
        .map(|i| Symbol::parse(&format!("L{i}")).unwrap())
        .collect();
    // Start-up: the first packets create the slots, half of the symbols
    // each (datagrams half as large as those after).
    let mut packets = traffic(&symbols[..25], 1);
    packets.extend(traffic(&symbols[25..], 1));
    let first = packets.len();
    let largest_first = packets.iter().map(Vec::len).max().unwrap();
    packets.extend(traffic(&symbols, 300));
    let largest = packets[first..].iter().map(Vec::len).max().unwrap();
    assert!(
        largest > largest_first + 1_000,
        "{largest_first} then {largest}"
    );
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    for p in packets.iter().take(first) {
        tx.send_to(p, ("127.0.0.1", port)).unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while sidecar.handler().feeds()[0].counters.packets < first as u64 {
        sidecar.cycle(tickguard::time::now_ns());
        assert!(std::time::Instant::now() < deadline);
    }
    for p in &packets[first..] {
        tx.send_to(p, ("127.0.0.1", port)).unwrap();
    }
    let want = packets.len() as u64;
    let mut cycles = 0u64;
    let n = allocations(|| {
        while sidecar.handler().feeds()[0].counters.packets < want && cycles < 10_000_000 {
            sidecar.cycle(tickguard::time::now_ns());
            cycles += 1;
        }
    });
    assert_eq!(
        sidecar.handler().feeds()[0].counters.packets,
        want,
        "all datagrams received"
    );
    assert_eq!(n, 0, "allocations in {cycles} duty cycles");
    drop(sidecar);
    if record {
        let bytes = std::fs::metadata(&recording).unwrap().len();
        let sent: usize = packets.iter().map(Vec::len).sum();
        assert!(bytes > sent as u64, "recorded: {bytes} bytes");
    }
    crate::common::remove_publication(&shm);
}

/// The ITCH path — sequencing, hold-back behind a gap, books, symbols —
/// allocates nothing once its stores have grown to a day's shape: a
/// synthetic day replayed a second time (a new session keeps the memory)
/// allocates nothing, from BinaryFILE records and from MoldUDP64 packets
/// with a gap filled late.
#[test]
fn the_itch_path_allocates_nothing_after_warm_up() {
    let _serial = serial();
    itch_path(false);
}

/// The same with the books' levels applied on a thread of their own (as a
/// replay does), counting that thread's allocations too: the batches of
/// level changes are reused, and the levels allocate no more there. In a
/// process of its own, so that no other test's thread counts.
#[test]
fn the_pipelined_itch_path_allocates_nothing_after_warm_up() {
    if !alone("the_pipelined_itch_path_allocates_nothing_after_warm_up") {
        return;
    }
    // With one CPU the levels stay on the calling thread: the other test.
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        crate::common::skip("a second CPU for the books' levels thread");
        return;
    }
    let _serial = serial();
    itch_path(true);
}

fn itch_path(pipelined: bool) {
    let measure = |f: &mut dyn FnMut()| match pipelined {
        false => allocations(f),
        true => allocations_on_any_thread(f),
    };
    use tickguard::protocol::itch50::{binfile::BinFile, feed, mold, sequencer, Session};
    let mut day = Vec::new();
    tickguard::protocol::itch50::synth::synthetic_day(&mut day, 60_000, 300, 7).unwrap();
    let mut records = Vec::new();
    let mut file = BinFile::new(std::io::Cursor::new(day));
    while let Some((_, r)) = file.next_record().unwrap() {
        records.push(r.to_vec());
    }
    let settings = feed::Settings {
        sequencing: sequencer::Settings {
            gap_timeout_ns: 5_000_000,
            max_held: 1_000_000,
            join_gap_max: 10_000,
        },
        timezone: jiff::tz::TimeZone::UTC,
        offset: tickguard::clock::OffsetMode::Auto {
            window_ns: 1_000_000_000,
        },
        offset_queue: 4096,
        orders: 16,
        max_orders: 1 << 24,
        max_symbols: 1 << 16,
    };
    let date = jiff::civil::date(2026, 1, 5);

    // BinaryFILE records.
    let mut f = feed::Feed::new(settings.clone());
    f.pipeline_books(pipelined);
    assert_eq!(f.books_pipelined(), pipelined);
    let pass = |f: &mut feed::Feed| {
        f.start_file(date);
        for (i, r) in records.iter().enumerate() {
            f.on_file_record(i as u64, r);
        }
        f.settle();
    };
    pass(&mut f);
    assert_eq!(measure(&mut || pass(&mut f)), 0, "BinaryFILE path");

    // Packets of 10 messages; every 50th packet arrives one packet late,
    // so the one after it is held behind a gap until it comes.
    let packets = |session: &[u8; 10]| -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for (k, chunk) in records.chunks(10).enumerate() {
            let mut b = mold::PacketBuilder::new(Session(*session), k as u64 * 10 + 1);
            for r in chunk {
                b.message(r);
            }
            out.push(b.finish());
        }
        for k in (0..out.len() - 1).step_by(50) {
            out.swap(k, k + 1);
        }
        out
    };
    let day1 = packets(b"DAY0000001");
    let day2 = packets(b"DAY0000002");
    let mut f = feed::Feed::new(settings);
    f.pipeline_books(pipelined);
    assert_eq!(f.books_pipelined(), pipelined);
    let t0 = 1_767_600_000_000_000_000u64;
    let replay = |f: &mut feed::Feed, day: &[Vec<u8>]| {
        for (k, p) in day.iter().enumerate() {
            f.on_datagram(p, t0 + k as u64 * 1_000).unwrap();
        }
        f.settle();
    };
    replay(&mut f, &day1);
    assert!(f.sequencer().counters().recovered > 0, "gaps were filled");
    assert_eq!(measure(&mut || replay(&mut f, &day2)), 0, "MoldUDP64 path");
    assert_eq!(f.sequencer().counters().ticks_lost, 0);
    assert_eq!(f.books_pipelined(), pipelined);
}

/// The live ITCH duty cycle — receive, sequence, books, publishing the
/// touched symbols and the feed status, re-requests for the open gaps —
/// allocates nothing once a first session has grown its stores: a second
/// session of the same shape, with gaps filled by late packets while
/// re-requests go out, allocates nothing.
#[test]
fn the_live_itch_cycle_allocates_nothing_after_a_first_session() {
    let _serial = serial();
    use tickguard::protocol::itch50::{binfile::BinFile, mold, Session};
    let line = std::net::SocketAddr::V4(crate::common::free_addr());
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    let shm = format!("/dev/shm/tickguard-alloc-itch-{}", std::process::id());
    let cfg = Config::parse(
        &format!(
            "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{shm}\"\noffset_queue = 4096\n\
             rcvbuf_bytes = 33554432\n\
             [[feed]]\nname = \"nq\"\nprotocol = \"itch50\"\nlines = [\"{line}\"]\n\
             recovery = \"{}\"\ngap_timeout_ms = 60000\nrequest_interval_ms = 1\n\
             stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n",
            server.local_addr().unwrap()
        ),
        "test",
    )
    .unwrap();
    let mut day = Vec::new();
    tickguard::protocol::itch50::synth::synthetic_day(&mut day, 20_000, 100, 7).unwrap();
    let mut records = Vec::new();
    let mut file = BinFile::new(std::io::Cursor::new(day));
    while let Some((_, r)) = file.next_record().unwrap() {
        records.push(r.to_vec());
    }
    // Packets of 10 messages; every 25th arrives one packet late.
    let packets = |session: &[u8; 10]| -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = records
            .chunks(10)
            .enumerate()
            .map(|(k, chunk)| {
                let mut b = mold::PacketBuilder::new(Session(*session), k as u64 * 10 + 1);
                for r in chunk {
                    b.message(r);
                }
                b.finish()
            })
            .collect();
        for k in (0..out.len() - 1).step_by(25) {
            out.swap(k, k + 1);
        }
        out
    };
    let mut sidecar = tickguard::sidecar::Sidecar::start(&cfg).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let session = |sidecar: &mut tickguard::sidecar::Sidecar, day: &[Vec<u8>]| -> u64 {
        let start = sidecar.handler().feeds()[0].counters.packets;
        for p in day {
            tx.send_to(p, line).unwrap();
        }
        let want = start + day.len() as u64;
        let mut cycles = 0u64;
        let n = allocations(|| {
            while sidecar.handler().feeds()[0].counters.packets < want && cycles < 10_000_000 {
                sidecar.cycle(tickguard::time::now_ns());
                cycles += 1;
            }
        });
        assert_eq!(sidecar.handler().feeds()[0].counters.packets, want);
        n
    };
    session(&mut sidecar, &packets(b"DAY0000001"));
    let n = session(&mut sidecar, &packets(b"DAY0000002"));
    let it = sidecar.handler().feeds()[0].engine().itch().unwrap();
    assert!(it.sequencer().counters().recovered > 0, "gaps were filled");
    assert_eq!(it.sequencer().counters().ticks_lost, 0);
    let mut buf = [0u8; 64];
    server.set_nonblocking(true).unwrap();
    assert!(server.recv(&mut buf).is_ok(), "re-requests went out");
    assert_eq!(n, 0, "allocations in the second session's duty cycles");
    drop(sidecar);
    crate::common::remove_publication(&shm);
}

/// The re-request client's decisions allocate nothing once built: many
/// gaps, fills, a full table, expiry and re-sending.
#[test]
fn recovery_requests_allocate_nothing() {
    let _serial = serial();
    use tickguard::protocol::itch50::recovery::{Missing, Requester};
    use tickguard::protocol::itch50::Session;
    const MS: u64 = 1_000_000;
    let session = Session(*b"ALLOC00001");
    let mut requester = Requester::new(64, 10 * MS, 256);
    let mut gaps = [Missing {
        lo: 0,
        hi: 0,
        deadline: 0,
    }; 8];
    for (i, g) in gaps.iter_mut().enumerate() {
        let lo = 1 + i as u64 * 10_000;
        *g = Missing {
            lo,
            hi: lo + 100 + 1_000 * i as u64,
            deadline: 500 * MS,
        };
    }
    let mut sent = 0u64;
    let n = allocations(|| {
        for step in 0..1_000u64 {
            // Fills shrink the gaps from below now and then.
            if step % 50 == 0 {
                for g in gaps.iter_mut().filter(|g| g.lo < g.hi) {
                    g.lo += 1;
                }
            }
            let n = requester.poll(session, step * MS, gaps.iter().copied(), |r| {
                sent += u64::from(r.count);
                true
            });
            std::hint::black_box(n);
        }
    });
    assert!(sent > 0);
    assert_eq!(n, 0, "allocations while deciding re-requests");
}

/// Session changes allocate nothing, however many: the earlier sessions'
/// memory is made with the stream, and forgetting the oldest past
/// [`sequencer::PAST_SESSIONS`] reuses it.
#[test]
fn many_session_changes_allocate_nothing() {
    let _serial = serial();
    use tickguard::protocol::itch50::mold::{Packet, PacketBuilder, Session};
    use tickguard::protocol::itch50::sequencer::{self, Sequencer, Settings};
    let mut seq = Sequencer::new(Settings {
        gap_timeout_ns: 1_000_000,
        max_held: 16,
        join_gap_max: 10,
    });
    let n = 3 * sequencer::PAST_SESSIONS;
    let packets: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            PacketBuilder::heartbeat(
                Session(*format!("S{i:09}").as_bytes().first_chunk().unwrap()),
                1,
            )
        })
        .collect();
    let mut apply = |_: u64, _: tickguard::protocol::itch50::message::Message<'_>| {};
    let mut changes = 0;
    let allocated = allocations(|| {
        for (i, p) in packets.iter().enumerate() {
            let p = Packet::new_checked(p.as_slice()).unwrap();
            changes += u64::from(seq.on_packet(&p, i as u64, &mut apply).new_session);
        }
    });
    assert_eq!(changes, n as u64 - 1);
    assert_eq!(allocated, 0);
}

/// The MDP3 path — a CME channel's datagrams on its six lines through the
/// handler, checks by Symbol and by `#SecurityID` between them — allocates
/// nothing once the channel's stores have grown to its shape: book
/// activity on known instruments with every action, copies on A and B, a
/// packet a round late on B (gaps filled), one lost on both lines every
/// third round (gaps given up, RptSeq holes whose entries wait in the
/// cache until a snapshot that lags the feed heals them, applying the
/// cached entries that continue it), statuses, heartbeats, the definition
/// loop repeating, a ChannelReset.
///
/// Instruments are made, and their caches and the feed's lists grow
/// (amortised), only in the warm-up: twelve rounds of the same shape as the
/// twenty-four measured, so that every store has met its largest need
/// before the measure (a first gap that makes an instrument cache entries
/// may grow its cache; later ones reuse it).
#[test]
fn the_mdp3_path_allocates_nothing_after_warm_up() {
    let _serial = serial();
    use crate::common::mdp3::{Channel, Datagram, Options, INSTRUMENTS};
    let cfg = Config::parse(
        r#"
[state]
capacity = 64
[[feed]]
name = "cme"
protocol = "mdp3"
lines = ["239.3.1.1:14310", "239.3.1.2:15310"]
snapshot_lines = ["239.3.1.3:14311", "239.3.1.4:15311"]
definition_lines = ["239.3.1.5:14312", "239.3.1.6:15312"]
stale_threshold_ms = 32000
source_threshold_ms = 32000
clock_offset = "auto"
offset_window_ms = 1000
gap_timeout_ms = 5
max_cached = 1000
"#,
        "t",
    )
    .unwrap();
    let mut c = Channel::new(Options {
        version: 13,
        first_seq: 1,
        first_rpt: 1,
        lose: true,
    });
    c.definitions();
    for r in 0..12 {
        if r == 6 {
            c.channel_reset();
        }
        c.round();
    }
    let warm = c.take();
    for r in 0..24 {
        if r == 12 {
            c.channel_reset();
        }
        c.round();
    }
    let steady = c.take();
    let names: Vec<String> = INSTRUMENTS
        .iter()
        .flat_map(|i| [i.symbol.to_string(), format!("#{}", i.id)])
        .chain(["#999".into(), "NOSUCH".into()])
        .collect();
    let symbols: Vec<Symbol> = names.iter().filter_map(|n| Symbol::parse(n)).collect();
    let run = |h: &mut Handler, datagrams: &[Datagram]| {
        for (k, (line, t, p)) in datagrams.iter().enumerate() {
            let _ = h.on_datagram_line(0, *line, p, *t);
            if k % 8 == 0 {
                h.before_check(0, *t);
                for &s in &symbols {
                    std::hint::black_box(h.verdict(0, s, *t));
                }
                for n in &names {
                    std::hint::black_box(h.verdict_named(0, n, *t));
                }
            }
        }
    };
    // A finite offset queue: preallocated, as the live receiver uses it.
    let mut h = Handler::with_offset_queue(&cfg, 4096);
    run(&mut h, &warm);
    let counts = |h: &Handler| {
        let f = h.feeds()[0].engine().mdp3().unwrap();
        let (n, q) = (f.counters(), f.sequence().counters());
        [
            q.recovered,
            q.packets_lost,
            n.snapshots_applied,
            n.definitions,
            n.heartbeats,
            n.channel_resets,
            n.by_template[30],
            f.instruments()
                .iter()
                .map(|e| e.instrument.seq.ticks_lost())
                .sum(),
        ]
    };
    let before = counts(&h);
    let allocated = allocations(|| run(&mut h, &steady));
    let after = counts(&h);
    assert!(
        before.iter().zip(&after).all(|(b, a)| a > b),
        "gaps filled and given up, snapshots, definitions, heartbeats, resets, statuses, ticks lost: {before:?} {after:?}"
    );
    let f = h.feeds()[0].engine().mdp3().unwrap();
    assert_eq!(f.instruments().len(), INSTRUMENTS.len());
    assert_eq!(h.feeds()[0].counters.rejected, 0);
    assert_eq!(allocated, 0, "allocations on the MDP3 path");
}

/// The live MDP3 duty cycle — receive on the incremental, snapshot and
/// definition lines, sequence, books, publishing the touched instruments
/// (by `#SecurityID` and Symbol) and the feed status, the snapshot lines
/// joined for good (`snapshot_join = "always"`: joining and leaving them
/// on demand is not measured here) — allocates nothing once a first run of the channel
/// has grown its stores: a second run of the same shape (losses on both
/// lines healed from the loop, a ChannelReset, two instruments trading
/// Symbols and one changing group, and the loop's definitions putting
/// them back) allocates nothing (12
/// allocations a run when names were `String` keys).
#[test]
fn the_live_mdp3_cycle_allocates_nothing_after_warm_up() {
    let _serial = serial();
    use crate::common::mdp3::{Channel, Datagram, Options};
    // Six free loopback ports, each a different one.
    let lines: Vec<std::net::SocketAddrV4> = (0..6).map(|_| crate::common::free_addr()).collect();
    let shm = format!("/dev/shm/tickguard-alloc-mdp3-{}", std::process::id());
    let cfg = Config::parse(
        &format!(
            "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{shm}\"\noffset_queue = 4096\n\
             rcvbuf_bytes = 33554432\n[state]\ncapacity = 64\n\
             [[feed]]\nname = \"cme\"\nprotocol = \"mdp3\"\nlines = [\"{}\", \"{}\"]\n\
             snapshot_lines = [\"{}\", \"{}\"]\ndefinition_lines = [\"{}\", \"{}\"]\n\
             gap_timeout_ms = 5\nmax_cached = 1000\nsnapshot_join = \"always\"\n\
             stale_threshold_ms = 32000\nsource_threshold_ms = 32000\n",
            lines[0], lines[1], lines[2], lines[3], lines[4], lines[5]
        ),
        "test",
    )
    .unwrap();
    let mut c = Channel::new(Options {
        version: 13,
        first_seq: 1,
        first_rpt: 1,
        lose: true,
    });
    c.definitions();
    // Runs of the same shape. The live clock decides when gaps are given
    // up, so how much the caches and gap lists need varies a little from
    // run to run: two runs warm up, then runs are measured until one
    // allocates nothing (amortised growth ends; a path that allocates on
    // every join, publish or reset never gets there).
    let mut runs = Vec::new();
    for _ in 0..7 {
        for r in 0..24 {
            if r == 12 {
                c.channel_reset();
            }
            // Two instruments trade Symbols and one changes group (the
            // definition loop, every fourth round, puts them back): names
            // and members move without allocating once warmed up.
            if r == 6 {
                c.swap_names();
            }
            c.round();
        }
        runs.push(c.take());
    }
    let measured = runs.split_off(2);
    let mut sidecar = tickguard::sidecar::Sidecar::start(&cfg).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let packets = |s: &tickguard::sidecar::Sidecar| -> u64 {
        let f = &s.handler().feeds()[0];
        f.counters.packets
    };
    // Each datagram to its line; the run is cycled until the feed has
    // taken them all (what arrives on a snapshot line while it is not
    // wanted is dropped, so those are waited for by the socket).
    let run = |sidecar: &mut tickguard::sidecar::Sidecar, datagrams: &[Datagram]| -> u64 {
        let mut n = 0;
        for chunk in datagrams.chunks(64) {
            for (line, _, p) in chunk {
                tx.send_to(p, lines[*line]).unwrap();
            }
            let mut idle = 0;
            n += allocations(|| {
                while idle < 50 {
                    if sidecar.cycle(tickguard::time::now_ns()) == 0 {
                        idle += 1;
                    } else {
                        idle = 0;
                    }
                }
            });
        }
        n
    };
    for warm in &runs {
        run(&mut sidecar, warm);
    }
    let before = packets(&sidecar);
    let mut counts = Vec::new();
    for r in &measured {
        counts.push(run(&mut sidecar, r));
        if counts.last() == Some(&0) {
            break;
        }
    }
    assert!(packets(&sidecar) > before, "the second run was received");
    let f = sidecar.handler().feeds()[0].engine().mdp3().unwrap();
    assert!(f.counters().snapshots_applied > 0 && f.counters().channel_resets > 1);
    let reader = tickguard::Reader::open(&shm);
    assert!(
        reader.lookup("cme", "ESZ6").is_some(),
        "published by Symbol"
    );
    assert_eq!(
        counts.last(),
        Some(&0),
        "allocations in the live MDP3 duty cycle, run by run: {counts:?}"
    );
    drop(sidecar);
    crate::common::remove_publication(&shm);
}

/// A gateway's check allocates nothing, whether the publication is usable
/// or gone (the reason a missing file gives is shared, not copied into
/// each answer).
#[test]
fn a_check_allocates_nothing_even_without_a_publication() {
    use std::hint::black_box;
    use std::sync::Arc;
    use tickguard::protocol::publication_feeds;
    use tickguard::shm::Publication;
    use tickguard::state::StateTable;

    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let shm = dir.path().join("publication");
    let cfg = config("", "delta", "\"127.0.0.1:9\"");
    let now = 1_767_603_600_000_000_000u64;
    let p = Publication::create(
        &shm,
        0o600,
        cfg.capacity,
        &publication_feeds(&cfg),
        now,
        1_000_000,
    );
    let p = Arc::new(p.unwrap());
    let mut h = Handler::with_table(&cfg, StateTable::shared(p.clone()), 4096);
    let s = Symbol::parse("S0").unwrap();
    let mut b = PacketBuilder::new(now);
    b.snapshot(s, 1, now, 1.0, 1.1);
    let _ = h.on_datagram(0, &b.finish(), now);
    h.publish_counters();
    p.heartbeat(now);
    p.ready();
    let mut reader = tickguard::Reader::open(&shm);
    let handle = reader.lookup("f", "S0").expect("published");
    let v = reader.check(&handle, now);
    assert!(v.is_ok(), "{v:?}");
    let n = allocations(|| {
        black_box(reader.check(black_box(&handle), now));
    });
    assert_eq!(n, 0, "allocations in a check of a live publication");
    drop((h, p));
    std::fs::remove_file(&shm).unwrap();
    reader.refresh();
    assert!(matches!(reader.health(now), tickguard::Health::Missing(_)));
    let n = allocations(|| {
        black_box(reader.check(black_box(&handle), now));
        black_box(reader.health(now));
    });
    assert!(!reader.check(&handle, now).is_ok());
    assert_eq!(n, 0, "allocations in a check without a publication");
}
