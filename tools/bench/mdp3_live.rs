//! MDP3 live rows: a synthetic CME channel (`protocol::mdp3::synth`, 500
//! outright futures by default, skewed activity, events of a few book
//! entries each) received by the sidecar on loopback.
//!
//! - `mdp3-live-drain`: an mdp3 feed's two incremental line sockets
//!   pre-filled with the same packets, drained by `Sidecar::cycle`
//!   (decode, apply, publish the touched instruments), against a bare
//!   `recvmmsg` loop on two sockets set up the same way filled alike
//!   (`itch-live-drain`'s method, [`drain_pair`]).
//! - `mdp3-check`: `Reader::check` on an MDP3 instrument from this process
//!   while a writer process (this binary's hidden `mdp3-writer`: the
//!   sidecar's receive loop and a paced sender of the channel) applies
//!   and publishes its traffic; timed as `check-latency` times, the clock
//!   read included.
//! - `mdp3-heal-time`: a paced sender on both incremental lines drops one
//!   packet on both now and then and sends the snapshot loop every
//!   `--loop-ms`; per loss, from the sending of the first packet after it
//!   to the end of the first cycle after which every instrument the lost
//!   packet touched checks ok from the publication.

use crate::check_latency::{summary, timed_checks, timer_costs, wait_lookup};
use crate::harness::ShmFile;
use crate::harness::{
    distinct_ports, require, send_all, sockaddr, within, within_because, Proc, CPUS,
};
use crate::itch_live::{drain_pair, loopback, merge, QueueArgs};
use anyhow::{ensure, Context};
use serde_json::{json, Value};
use std::io::Read;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::config::Config;
use tickguard::protocol::mdp3::synth::{equity_channel, Channel, Product, Spec, US};
use tickguard::protocol::mdp3::{Body, Packet};
use tickguard::sidecar::Sidecar;
use tickguard::time::now_ns;
use tickguard::{Reader, WallClock};

/// Seed of the channel.
const SEED: u64 = 20_260_105;
/// Longest any run of these rows may take.
const STEP_LIMIT: Duration = Duration::from_secs(60);
/// 10⁹: prices are mantissas of exponent −9.
const E9: i64 = 1_000_000_000;
/// Most instruments of a channel (0: the equity channel's five): the
/// sidecar's table here has 4,096 slots.
const MAX_INSTRUMENTS: usize = 4_000;
/// Globex events/s a paced sender is offered (`simulate`'s MDP3 most).
const RATES: std::ops::RangeInclusive<f64> = 1.0..=tickguard::simulate::mdp3::MAX_RATE;

/// `n` outright futures (10-deep books, 2-deep implied), SecurityIDs
/// sparse, the first 40 times as busy as the last; 0: the equity channel
/// (ESZ6, ESH7, NQZ6, RTYZ6 and a calendar spread).
pub(crate) fn specs(n: usize) -> Vec<Spec> {
    if n == 0 {
        return equity_channel();
    }
    (0..n)
        .map(|k| Spec {
            security_id: 100_003 + k as i32 * 2_579,
            symbol: format!("G{k:05}Z6"),
            group: format!("G{}", k % 16),
            asset: format!("G{}", k % 16),
            product: Product::Future,
            depth: 10,
            implied_depth: 2,
            tick: E9 / 4,
            display_factor: E9,
            price: (1_000 + 7 * k as i64) * E9,
            weight: 1 + 39 * (n - k) as u64 / n as u64,
        })
        .collect()
}

/// The venue: the channel and its clock (the Globex events' times).
pub(crate) struct Venue {
    pub(crate) ch: Channel,
    t: u64,
}

impl Venue {
    /// The channel of `instruments` ([`specs`]) at the start of the week.
    pub(crate) fn new(instruments: usize) -> Venue {
        Venue {
            ch: Channel::new(SEED, specs(instruments)),
            t: now_ns(),
        }
    }

    /// The opening: every book filled (one event spanning packets).
    pub(crate) fn opening(&mut self) -> Vec<Vec<u8>> {
        let t = self.t;
        self.ch.fill_books(t).into_iter().map(|d| d.bytes).collect()
    }

    /// The next Globex event's packets, 1–9 µs after the last (or at `t`
    /// when given, a live sender's clock).
    pub(crate) fn event(&mut self, t: Option<u64>) -> Vec<Vec<u8>> {
        self.t = t.unwrap_or(self.t + (1 + self.t % 9) * US).max(self.t);
        let t = self.t;
        self.ch.next_event(t).into_iter().map(|d| d.bytes).collect()
    }

    /// The definitions file: one definition packet per instrument.
    pub(crate) fn write_definitions(&self, path: &Path) -> anyhow::Result<()> {
        let file = std::io::BufWriter::new(std::fs::File::create(path)?);
        let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::Ethernet)?;
        let (src, dst) = (loopback(9), loopback(9));
        for d in self.ch.definition_loop(self.t) {
            w.write_udp(self.t, src, dst, &d.bytes)?;
        }
        w.finish()?;
        Ok(())
    }

    /// The instruments' Symbols and SecurityIDs, busiest first.
    pub(crate) fn instruments(&self) -> Vec<(String, i32)> {
        self.ch
            .specs()
            .map(|s| (s.symbol.clone(), s.security_id))
            .collect()
    }
}

/// Book entries (of 46 messages) in an incremental packet; the
/// SecurityIDs of its entries (any template), each with its highest
/// RptSeq there, into `ids`.
fn entries(packet: &[u8], ids: Option<&mut Vec<(i32, u32)>>) -> u64 {
    let Ok(p) = Packet::new_checked(packet) else {
        return 0;
    };
    let mut book = 0;
    let mut ids = ids;
    for m in p.messages() {
        if let Body::Incremental(inc) = m.body() {
            if m.template_id() == 46 {
                book += u64::from(inc.entry_count());
            }
            if let Some(ids) = ids.as_mut() {
                for e in inc.entries() {
                    match ids.iter_mut().find(|x| x.0 == e.security_id()) {
                        Some(x) => x.1 = x.1.max(e.rpt_seq()),
                        None => ids.push((e.security_id(), e.rpt_seq())),
                    }
                }
            }
        }
    }
    book
}

/// An mdp3 feed (named as every row's, `lp1`) on two loopback incremental
/// lines, its `definitions` file given, a snapshot line if `snapshot`,
/// and `sidecar` keys added to the sidecar's table.
fn config(
    shm: &str,
    lines: [u16; 2],
    rcvbuf: usize,
    definitions: &Path,
    snapshot: Option<u16>,
    sidecar: &str,
) -> anyhow::Result<Config> {
    let snapshot = snapshot.map_or(String::new(), |p| {
        format!("snapshot_lines = [\"127.0.0.1:{p}\"]\n")
    });
    Config::parse(
        &format!(
            "[state]\ncapacity = 4096\n[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{shm}\"\n\
             idle = \"spin\"\nrcvbuf_bytes = {rcvbuf}\n{sidecar}\n[[feed]]\nname = \"{}\"\n\
             protocol = \"mdp3\"\nlines = [\"127.0.0.1:{}\", \"127.0.0.1:{}\"]\n{snapshot}\
             definitions = \"{}\"\nstale_threshold_ms = 60000\nsource_threshold_ms = 60000\n\
             clock_offset = 0\ngap_timeout_ms = 5\n",
            crate::harness::FEED,
            lines[0],
            lines[1],
            definitions.display()
        ),
        "mdp3-live-bench",
    )
    .map_err(anyhow::Error::msg)
}

/// The verdict's reasons for `#id` (empty: ok; `unknown`: not published).
fn reasons(reader: &Reader, id: i32, now: u64) -> String {
    reader
        .lookup(crate::harness::FEED, &format!("#{id}"))
        .map_or("unknown".into(), |h| {
            reader
                .check(&h, now)
                .reasons
                .names()
                .collect::<Vec<_>>()
                .join(",")
        })
}

/// Instruments of `ids` that check ok from the publication at `shm`.
fn checking_ok(reader: &Reader, ids: &[i32], now: u64) -> usize {
    ids.iter()
        .filter(|id| {
            reader
                .lookup(crate::harness::FEED, &format!("#{id}"))
                .is_some_and(|h| reader.check(&h, now).is_ok())
        })
        .count()
}

// ---------------------------------------------------------------- drain

/// Flags of `mdp3-live-drain`.
#[derive(clap::Args)]
pub struct DrainArgs {
    /// Instruments in the channel (0 to 4,000; 0: the five of the equity
    /// channel).
    #[arg(long, default_value_t = 500)]
    instruments: usize,
    #[command(flatten)]
    queue: QueueArgs,
}

impl DrainArgs {
    /// Refuses a flag out of its range.
    fn check(&self) -> anyhow::Result<()> {
        within("--instruments", self.instruments, 0..=MAX_INSTRUMENTS)?;
        self.queue.check()
    }
}

/// The `mdp3-live-drain` row.
pub fn drain(a: &DrainArgs) -> anyhow::Result<Value> {
    a.check()?;
    let dir = tempfile::tempdir()?;
    let defs = dir.path().join("defs.pcap");
    let mut venue = Venue::new(a.instruments);
    venue.write_definitions(&defs)?;
    let mut all = venue.opening();
    let opening = all.len();
    while all.len() < a.queue.packets_wanted() {
        all.extend(venue.event(None));
    }
    let mut d = drain_pair(&a.queue, "mdp3-drain", &all, |shm, lines, rcvbuf| {
        config(shm, lines, rcvbuf, &defs, None, "")
    })?;
    // The writer's heartbeat, not beaten while the bare loop drained.
    d.sidecar.cycle(now_ns());
    let timed: Vec<&Vec<u8>> = d.chunks(&all).flatten().collect();
    let book: u64 = timed.iter().map(|p| entries(p, None)).sum();
    let bytes: usize = timed.iter().map(|p| p.len()).sum();
    let per_packet = book as f64 / timed.len() as f64;
    let feed = &d.sidecar.handler().feeds()[0];
    let m = feed.engine().mdp3().context("not an mdp3 feed")?;
    let seq = m.sequence();
    let reader = Reader::open(&d.sidecar.config().sidecar.shm_path);
    let ids: Vec<i32> = venue.instruments().iter().map(|i| i.1).collect();
    let ok = checking_ok(&reader, &ids, now_ns());
    let (s, b) = d.rates();
    let mut v = json!({
        "row": "mdp3_live_drain",
        "tickguard_datagrams_per_s": s.round(),
        "bare_recvmmsg_datagrams_per_s": b.round(),
        "ratio": s / b,
        "tickguard_book_entries_per_s": (s * per_packet).round(),
        "bare_recvmmsg_book_entries_per_s": (b * per_packet).round(),
        "tickguard_unique_packets_per_s": (s / 2.0).round(),
        "tickguard_unique_book_entries_per_s": (s * per_packet / 2.0).round(),
        "rates_note": "datagrams/s and book entries/s count both lines' copies (each packet arrives on A and B); unique counts each packet once",
        "book_entries_per_packet": per_packet,
        "bytes_per_packet": bytes as f64 / timed.len() as f64,
        "instruments": ids.len(),
        "opening_packets": opening,
        "instruments_checking_ok_at_end": ok,
        "busiest_instrument_verdict_at_end": reasons(&reader, ids[0], now_ns()),
        "sidecar_packets": feed.counters.packets,
        "messages": m.counters().messages,
        "duplicates": seq.counters().duplicates,
        "packets_lost": seq.counters().packets_lost,
        "gaps_open": seq.gaps_open(),
        "highest_seq_num": seq.high(),
        "ticks_lost": m.ticks_lost(),
    });
    merge(&mut v, d.setup());
    Ok(v)
}

// ---------------------------------------------------------------- paced sender

/// Sends the channel's events at `rate` events/s on both lines of
/// `lines` (the opening first) for `secs` or until `stop`: what is due is
/// sent, then the thread sleeps 100 µs. `drop(k, packet)` says whether the
/// `k`th incremental packet is lost on both lines; `snapshot` (port,
/// period): the snapshot loop as a burst every period. Returns (events,
/// packets sent per line, packets dropped).
#[allow(clippy::too_many_arguments)]
fn send_paced(
    venue: &Mutex<Venue>,
    lines: [u16; 2],
    rate: f64,
    secs: f64,
    stop: &AtomicBool,
    mut drop: impl FnMut(u64, &[u8]) -> bool,
    snapshot: Option<(u16, Duration)>,
    sent: &AtomicU64,
) -> anyhow::Result<(u64, u64, u64)> {
    let tx = UdpSocket::bind("127.0.0.1:0")?;
    let dsts = [sockaddr(loopback(lines[0])), sockaddr(loopback(lines[1]))];
    let lock = || venue.lock().map_err(|_| anyhow::anyhow!("poisoned"));
    let (mut events, mut packets, mut dropped) = (0u64, 0u64, 0u64);
    let opening = lock()?.opening();
    send_all(&tx, &opening, &dsts)?;
    packets += opening.len() as u64;
    let start = Instant::now();
    let mut next_loop = start;
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(1024);
    while !stop.load(Ordering::Acquire) && start.elapsed().as_secs_f64() < secs {
        ensure!(start.elapsed() < STEP_LIMIT, "the sender did not finish");
        let due = (start.elapsed().as_secs_f64() * rate) as u64;
        {
            let mut v = lock()?;
            while events < due && out.len() < 4096 {
                for p in v.event(Some(now_ns())) {
                    if drop(packets + dropped, &p) {
                        dropped += 1;
                    } else {
                        packets += 1;
                        out.push(p);
                    }
                }
                events += 1;
            }
        }
        send_all(&tx, &out, &dsts)?;
        out.clear();
        sent.store(packets + dropped, Ordering::Release);
        if let Some((port, period)) = snapshot {
            if Instant::now() >= next_loop {
                let snaps: Vec<Vec<u8>> = lock()?
                    .ch
                    .snapshot_loop(now_ns())
                    .into_iter()
                    .map(|d| d.bytes)
                    .collect();
                send_all(&tx, &snaps, &[sockaddr(loopback(port))])?;
                next_loop += period;
            }
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    Ok((events, packets, dropped))
}

// ---------------------------------------------------------------- check

/// Flags of `mdp3-check`.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// Instruments in the channel of the first phase (its busiest is
    /// checked; 0 to 4,000, 0: the equity channel).
    #[arg(long, default_value_t = 500)]
    instruments: usize,
    /// Globex events/s of the first phase (1 to 1,000,000).
    #[arg(long, default_value_t = 100_000.0)]
    rate: f64,
    /// Events/s of the second phase, on the five-instrument equity channel
    /// (ESZ6, checked, has 40% of them; 1 to 1,000,000).
    #[arg(long, default_value_t = 100_000.0)]
    hot_rate: f64,
    /// Seconds of timed checks per phase (0.1 to 56: the writer runs 2 s
    /// longer and stops at 60 s).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// CPU the writer's receive thread is pinned to (0 to 1,023).
    #[arg(long, default_value_t = 1)]
    sidecar_cpu: usize,
    /// CPU this process's checking thread is pinned to (0 to 1,023).
    #[arg(long, default_value_t = 0)]
    reader_cpu: usize,
    /// Pin nothing.
    #[arg(long)]
    no_pin: bool,
    /// Percent of the time the checking thread spends checking (in 1 ms
    /// slices; the rest it sleeps, leaving the CPU to the sender; 1 to
    /// 100).
    #[arg(long, default_value_t = 50)]
    duty_pct: u32,
}

/// The writer's warm-up before the timed checks, and its tail after, s.
const WRITER_WARM_S: f64 = 1.0;

impl CheckArgs {
    /// Refuses a flag out of its range, and `--seconds` the writer (which
    /// stops at [`STEP_LIMIT`]) cannot serve.
    fn check(&self) -> anyhow::Result<()> {
        within("--instruments", self.instruments, 0..=MAX_INSTRUMENTS)?;
        within("--rate", self.rate, RATES)?;
        within("--hot-rate", self.hot_rate, RATES)?;
        within_because(
            "--seconds",
            self.seconds,
            0.1..=WRITER_SECONDS - 2.0 * WRITER_WARM_S,
            &format!(
                " (the writer runs {} s longer and stops at {} s)",
                2.0 * WRITER_WARM_S,
                STEP_LIMIT.as_secs()
            ),
        )?;
        within("--sidecar-cpu", self.sidecar_cpu, CPUS)?;
        within("--reader-cpu", self.reader_cpu, CPUS)?;
        within("--duty-pct", self.duty_pct, 1..=100)
    }
}

/// Flags of the hidden `mdp3-writer`.
#[derive(clap::Args)]
pub struct WriterArgs {
    /// The publication to write.
    #[arg(long)]
    shm: PathBuf,
    /// Instruments (0 to 4,000; 0: the equity channel).
    #[arg(long)]
    instruments: usize,
    /// Events/s (1 to 1,000,000).
    #[arg(long)]
    rate: f64,
    /// Seconds of traffic (0.1 to 58: its sender stops at 60 s).
    #[arg(long)]
    seconds: f64,
    /// CPU of the receive thread (0 to 1,023).
    #[arg(long)]
    cpu: Option<usize>,
    /// A directory for its files, the caller's (which removes it, also
    /// when it had to kill the writer); without it, one of its own.
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// The writer's longest `--seconds`: its sender stops at [`STEP_LIMIT`].
const WRITER_SECONDS: f64 = 58.0;

impl WriterArgs {
    /// Refuses a flag out of its range.
    fn check(&self) -> anyhow::Result<()> {
        within("--instruments", self.instruments, 0..=MAX_INSTRUMENTS)?;
        within("--rate", self.rate, RATES)?;
        within_because(
            "--seconds",
            self.seconds,
            0.1..=WRITER_SECONDS,
            &format!(" (its sender stops at {} s)", STEP_LIMIT.as_secs()),
        )?;
        if let Some(c) = self.cpu {
            within("--cpu", c, CPUS)?;
        }
        Ok(())
    }
}

/// The hidden `mdp3-writer`: the sidecar's receive loop on an mdp3 feed
/// and a paced sender of the channel, for `--seconds`.
pub fn writer(a: &WriterArgs) -> anyhow::Result<Value> {
    a.check()?;
    let own;
    let dir = match &a.dir {
        Some(d) => d.as_path(),
        None => {
            own = tempfile::tempdir()?;
            own.path()
        }
    };
    let defs = dir.join("defs.pcap");
    let venue = Venue::new(a.instruments);
    venue.write_definitions(&defs)?;
    let lines: [u16; 2] = distinct_ports()?;
    let cpu = a.cpu.map(|c| format!("cpu = {c}\n")).unwrap_or_default();
    let shm = a.shm.to_str().context("a UTF-8 path")?;
    let config = config(
        shm,
        lines,
        8 << 20,
        &defs,
        None,
        &format!("{cpu}heartbeat_ms = 1\ndead_after_ms = 100\n"),
    )?;
    let mut sidecar = Sidecar::start(&config)?;
    let (venue, stop, sent) = (Mutex::new(venue), AtomicBool::new(false), AtomicU64::new(0));
    let (sender, stats) = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let r = send_paced(
                &venue,
                lines,
                a.rate,
                a.seconds,
                &AtomicBool::new(false),
                |_, _| false,
                None,
                &sent,
            );
            // Let the receiver apply the last packets.
            std::thread::sleep(Duration::from_millis(100));
            stop.store(true, Ordering::Release);
            r
        });
        let stats = sidecar.run(&stop);
        (sender.join(), stats)
    });
    let (events, packets, _) = sender.map_err(|_| anyhow::anyhow!("sender panicked"))??;
    Ok(json!({
        "row": "mdp3_writer",
        "events": events,
        "packets_per_line": packets,
        "events_per_s": events as f64 / a.seconds,
        "sidecar_datagrams": stats.datagrams,
        "sidecar_cycles": stats.cycles,
        "sidecar_busy_cycles": stats.busy_cycles,
    }))
}

/// One phase: a writer process on `instruments` at `rate`, `symbol`
/// checked from this process meanwhile.
fn check_phase(
    a: &CheckArgs,
    instruments: usize,
    rate: f64,
    symbol: &str,
) -> anyhow::Result<Value> {
    let shm = ShmFile(format!(
        "/dev/shm/tickguard-bench-mdp3-check-{}",
        std::process::id()
    ));
    let warm = WRITER_WARM_S;
    // The writer's traffic: the warm-up, the timed checks, a tail as long.
    let secs = warm + a.seconds + warm;
    // The writer's files, removed whatever becomes of it.
    let work = tempfile::tempdir()?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["mdp3-writer", "--shm", &shm.0])
        .arg("--dir")
        .arg(work.path())
        .args(["--instruments", &instruments.to_string()])
        .args(["--rate", &rate.to_string(), "--seconds", &secs.to_string()]);
    if !a.no_pin {
        cmd.args(["--cpu", &a.sidecar_cpu.to_string()]);
    }
    let mut writer = Proc {
        child: cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting mdp3-writer")?,
        what: "mdp3-writer",
    };
    let (reader, handle) = wait_lookup(Path::new(&shm.0), symbol)?;
    let clock = WallClock::new();
    let _ = timed_checks(&clock, &reader, &handle, warm, a.duty_pct, || true);
    let run = timed_checks(&clock, &reader, &handle, a.seconds, a.duty_pct, || true);
    let mut out = String::new();
    writer
        .child
        .stdout
        .take()
        .context("no stdout")?
        .read_to_string(&mut out)?;
    let status = writer.child.wait()?;
    ensure!(status.success(), "mdp3-writer failed: {status}");
    let report: Value = serde_json::from_str(out.lines().last().unwrap_or(""))
        .with_context(|| format!("mdp3-writer printed {out}"))?;
    let mut v = run.json();
    merge(
        &mut v,
        json!({
            "symbol": symbol,
            "instruments": if instruments == 0 { 5 } else { instruments },
            "offered_events_per_s": rate,
            "writer": report,
        }),
    );
    Ok(v)
}

/// The `mdp3-check` row.
pub fn check(a: &CheckArgs) -> anyhow::Result<Value> {
    a.check()?;
    let pinned = !a.no_pin && tickguard::sys::pin_to_cpu(a.reader_cpu).is_ok();
    let clock = WallClock::new();
    std::thread::sleep(Duration::from_millis(5));
    let _ = clock.now_ns();
    let [timer, _, _] = timer_costs(&clock, 1_000_000);
    let busiest = specs(a.instruments)[0].symbol.clone();
    let channel = check_phase(a, a.instruments, a.rate, &busiest)?;
    let hot = check_phase(a, 0, a.hot_rate, "ESZ6")?;
    let get = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    Ok(json!({
        "row": "mdp3_check",
        "timing": "as check-latency: WallClock::now_ns() around reader.check_counting(&h, clock.now_ns()), nothing subtracted; timer_median_ns is two readings back to back",
        "timer_median_ns": timer.value_at_quantile(0.5),
        "timer": summary(&timer),
        "channel": channel,
        "hot": hot,
        "setup": {
            "writer": "this binary's mdp3-writer: Sidecar::run (idle spin) and a paced sender thread on loopback lines A and B",
            "pinned": pinned,
            "sidecar_cpu": (!a.no_pin).then_some(a.sidecar_cpu),
            "reader_cpu": (!a.no_pin).then_some(a.reader_cpu),
            "duty_pct": a.duty_pct,
        },
        "targets": {
            "median_ns": 45,
            "p99_ns": 100,
            "median_met": get(&channel, "median_ns") <= 45.0 && get(&hot, "median_ns") <= 45.0,
            "p99_met": get(&channel, "p99_ns") <= 100.0 && get(&hot, "p99_ns") <= 100.0,
        },
    }))
}

// ---------------------------------------------------------------- heal time

/// Flags of `mdp3-heal-time`.
#[derive(clap::Args)]
pub struct HealArgs {
    /// Instruments in the channel (0 to 4,000; 0: the equity channel).
    #[arg(long, default_value_t = 500)]
    instruments: usize,
    /// Globex events/s (1 to 1,000,000).
    #[arg(long, default_value_t = 20_000.0)]
    rate: f64,
    /// Period of the snapshot loop, ms (each loop sent as a burst; 10 to
    /// 10,000).
    #[arg(long, default_value_t = 100)]
    loop_ms: u64,
    /// Losses to make (one packet dropped on both lines each; 1 to 1,000).
    /// The run takes 2 + 3 × --losses loop periods and 0.5 s, at most 58 s.
    #[arg(long, default_value_t = 30)]
    losses: u64,
}

/// Longest run of `mdp3-heal-time`, ms: it stops at [`STEP_LIMIT`].
const HEAL_RUN_MS: u64 = 58_000;

impl HealArgs {
    /// Refuses a flag out of its range, and a run longer than
    /// [`HEAL_RUN_MS`].
    fn check(&self) -> anyhow::Result<()> {
        within("--instruments", self.instruments, 0..=MAX_INSTRUMENTS)?;
        within("--rate", self.rate, RATES)?;
        within("--loop-ms", self.loop_ms, 10..=10_000)?;
        within("--losses", self.losses, 1..=1_000)?;
        let run_ms = (2 + 3 * self.losses) * self.loop_ms + 500;
        require(run_ms <= HEAL_RUN_MS, || {
            format!(
                "--losses {} at --loop-ms {} make a {:.1} s run (2 + 3 × losses periods + 0.5 s): at most {} s (a run stops at {} s); --losses at most {} at that --loop-ms",
                self.losses,
                self.loop_ms,
                run_ms as f64 / 1e3,
                HEAL_RUN_MS / 1000,
                STEP_LIMIT.as_secs(),
                ((HEAL_RUN_MS - 500) / self.loop_ms).saturating_sub(2) / 3
            )
        })
    }
}

/// One loss: what it touched, when it was lost and when it healed.
#[derive(Debug, Clone)]
struct Loss {
    /// The SecurityIDs of the lost packet's entries, each with its highest
    /// RptSeq there.
    ids: Vec<(i32, u32)>,
    /// Whether one of them was seen not ok after the loss.
    seen_bad: bool,
    /// The sender's clock when the packet was made and dropped: the next
    /// packet goes out in the same send (or the next, 100 µs on).
    lost: u64,
    /// End of the first cycle after which every id checks ok.
    healed: Option<u64>,
}

/// The `mdp3-heal-time` row.
pub fn heal(a: &HealArgs) -> anyhow::Result<Value> {
    a.check()?;
    let dir = tempfile::tempdir()?;
    let defs = dir.path().join("defs.pcap");
    let venue = Venue::new(a.instruments);
    venue.write_definitions(&defs)?;
    let ports: [u16; 3] = distinct_ports()?;
    let shm = ShmFile(format!(
        "/dev/shm/tickguard-bench-mdp3-heal-{}",
        std::process::id()
    ));
    let config = config(
        &shm.0,
        [ports[0], ports[1]],
        16 << 20,
        &defs,
        Some(ports[2]),
        "",
    )?;
    let mut sidecar = Sidecar::start(&config)?;
    let reader = Reader::open(&shm.0);
    // A loss every 3 loop periods, after 2 periods of warm-up.
    let period = Duration::from_millis(a.loop_ms);
    let every = (3.0 * a.rate * period.as_secs_f64()).max(10.0) as u64;
    let secs = (2 + 3 * a.losses) as f64 * period.as_secs_f64() + 0.5;
    // The sender hands each loss over a channel: a lock the receive loop
    // took every cycle would starve the sender (and delay its snapshot
    // bursts) on a 2-core machine.
    let (made_tx, made_rx) = std::sync::mpsc::channel::<Loss>();
    let mut losses: Vec<Loss> = Vec::new();
    let (venue, stop, sent) = (Mutex::new(venue), AtomicBool::new(false), AtomicU64::new(0));
    let first_loss = (2.0 * a.rate * period.as_secs_f64()) as u64;
    let (mut next_drop, mut made) = (first_loss, 0);
    let drop = move |k: u64, p: &[u8]| {
        if k < next_drop || made >= a.losses {
            return false;
        }
        let mut ids = Vec::new();
        if entries(p, Some(&mut ids)) == 0 && ids.is_empty() {
            return false;
        }
        next_drop = k + every;
        made += 1;
        let _ = made_tx.send(Loss {
            ids,
            seen_bad: false,
            lost: now_ns(),
            healed: None,
        });
        true
    };
    let mut cycles = 0u64;
    let sender = std::thread::scope(|s| -> anyhow::Result<_> {
        let sender = s.spawn(|| {
            let r = send_paced(
                &venue,
                [ports[0], ports[1]],
                a.rate,
                secs,
                &stop,
                drop,
                Some((ports[2], period)),
                &sent,
            );
            stop.store(true, Ordering::Release);
            r
        });
        let start = Instant::now();
        while !stop.load(Ordering::Acquire) {
            ensure!(start.elapsed() < STEP_LIMIT, "the run did not finish");
            sidecar.cycle(now_ns());
            cycles += 1;
            let t1 = now_ns();
            let m = sidecar.handler().feeds()[0]
                .engine()
                .mdp3()
                .context("not an mdp3 feed")?;
            losses.extend(made_rx.try_iter());
            for loss in losses.iter_mut().filter(|l| l.healed.is_none()) {
                // Healed: the lost entries are in its state (RptSeq at or
                // past them, from the snapshot) and the publication says ok.
                let past = loss.ids.iter().all(|&(id, rpt)| {
                    m.find(&format!("#{id}"))
                        .and_then(|e| e.instrument.seq.rpt_seq())
                        .is_some_and(|r| r >= rpt)
                });
                let ids: Vec<i32> = loss.ids.iter().map(|x| x.0).collect();
                let ok = checking_ok(&reader, &ids, t1) == ids.len();
                loss.seen_bad |= !ok;
                if past && ok {
                    loss.healed = Some(t1);
                }
            }
        }
        sender
            .join()
            .map_err(|_| anyhow::anyhow!("sender panicked"))?
    })?;
    let (events, packets, dropped) = sender;
    // Losses made after the last cycle: counted, unhealed.
    losses.extend(made_rx.try_iter());
    let mut h = crate::check_latency::histogram();
    let mut unhealed = 0;
    for l in &losses {
        match (l.lost, l.healed) {
            (r, Some(e)) => h.saturating_record(e.saturating_sub(r)),
            (_, None) => unhealed += 1,
        }
    }
    let m = sidecar.handler().feeds()[0]
        .engine()
        .mdp3()
        .context("not an mdp3 feed")?;
    let target = period.as_nanos() as u64 + 10_000_000;
    Ok(json!({
        "row": "mdp3_heal_time",
        "losses_made": dropped,
        "losses_measured": h.len(),
        "losses_unhealed_at_end": unhealed,
        "losses_seen_not_ok": losses.iter().filter(|l| l.seen_bad).count(),
        "loop_ms": a.loop_ms,
        "rate_events_per_s": a.rate,
        "events": events,
        "packets_per_line": packets,
        "instruments": a.instruments,
        "heal": summary(&h),
        "heal_note": "from the sender's clock when the lost packet was due (the packet after it is sent in the same sendmmsg, or the next one 100 µs on) to the end of the first receive cycle after which every instrument the lost packet touched holds an RptSeq at or past the lost entries' (from its snapshot) and checks ok from the publication (Reader::check from the receive thread)",
        "snapshot_loop": "every instrument's 52 sent as a burst every loop_ms on one unicast snapshot line (joined on demand: dropped unapplied while no instrument needs it)",
        "cycles": cycles,
        "snapshots_applied": m.counters().snapshots_applied,
        "packets_lost": m.sequence().counters().packets_lost,
        "ticks_lost": m.ticks_lost(),
        "target_ns": target,
        "target_met": !h.is_empty() && unhealed == 0 && h.max() <= target,
    }))
}
