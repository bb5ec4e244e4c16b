//! `itch-glimpse-restart`: an itch50 sidecar (in this process, on this
//! thread, spinning) started mid-session against a GLIMPSE server on
//! loopback, restarting to `ok` for a book of `--orders` live orders.
//!
//! A deterministic day: System Event `O`, a Stock Directory `R` for each of
//! `--stocks` stocks, `S`, a Trading Action `H` `T` for each, `Q`, then
//! `--orders` adds (no deletes): the book at sequence N − 1, where N is the
//! first sequence the snapshot does not reflect. From N on the flow
//! alternates an add of a new order with a delete of one of the
//! snapshot's orders (so a merge that lost any order shows as
//! `unknown_orders`).
//!
//! - The spin is that day as GLIMPSE sends it: Login Accepted (session,
//!   1), one Sequenced Data packet per message (sequences 1 to N − 1, the
//!   very messages the multicast carried), End of Snapshot `G` N. A server
//!   thread on 127.0.0.1:0 reads the 49-byte Login Request, writes the
//!   spin in one `write_all` and reads to the client's Logout and EOF,
//!   stamping each step.
//! - A sender thread sends the multicast (loopback unicast, one line) from
//!   N − `--before` on at `--rate` messages/s in packets of
//!   `--per-packet`, built as they are due (new messages stamped with the
//!   time of day), so the sidecar's first packet is a mid-session join:
//!   it awaits, holds, connects, merges at N and applies what it held.
//! - Restart to `ok`: from just before `Sidecar::start` to the end of the
//!   first cycle after which the feed is not suspect and `Reader::check`
//!   on a sample symbol reads ok; split into the start, the first packet
//!   (trigger), trigger → the server read the login, the spin (login read
//!   → Logout read: the connection thread reading and staging every
//!   message), Logout → the merge cycle's start, the merge cycle, and the
//!   merge cycle's end → ok.
//! - Reference in the same run (after the restart, so that the first run's
//!   restart finds the process's memory as a restarted one would): the
//!   same N − 1 messages applied through an ITCH `Feed::on_datagram` in
//!   this thread, in packets of `--per-packet`, the multicast apply rate
//!   the spin is set against; then messages of the flow after N on those
//!   books, the kind the merge applies from its held queue.
//! - The receive thread: every `Sidecar::cycle` timed, from the trigger to
//!   the end of the merge cycle (the snapshot arriving and merging) and,
//!   after `--settle-ms`, over `--normal-ms` of the same multicast with no
//!   snapshot pending; with its involuntary context switches in each
//!   window, and the merge cycle's CPU time (this thread's, read only for
//!   the cycles after the server wrote the spin: it is a system call).

use crate::check_latency::{histogram, summary};
use crate::harness::ShmFile;
use crate::harness::{distinct_ports, median, proc_udp, require, within, RmemMax, CPUS, RUNS};
use crate::itch_live::loopback;
use anyhow::{bail, ensure, Context};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tickguard::clock::OffsetMode;
use tickguard::config::Config;
use tickguard::protocol::itch50::feed::{midnight, Feed, Settings};
use tickguard::protocol::itch50::message::encode;
use tickguard::protocol::itch50::{sequencer, soup, PacketBuilder, Session, Side};
use tickguard::shm::counter;
use tickguard::sidecar::Sidecar;
use tickguard::symbol::Symbol;
use tickguard::time::now_ns;
use tickguard::Reader;

/// The session of the multicast and of the snapshot's login.
const SESSION: Session = Session(*b"TGGLIMPSE1");
/// The feed's name.
const FEED: &str = "nasdaq";
/// The snapshot login.
const USER: &str = "tgbnch";
const PASSWORD: &str = "benchpw01";
/// Steps the snapshot's orders are deleted in (prime, so coprime with any
/// order count that is a product of 2s and 5s; checked).
const STRIDE: u64 = 7_919;
/// Longest any one run may take.
const RUN_LIMIT: Duration = Duration::from_secs(60);
/// SO_RCVBUF of the line socket, bytes.
const RCVBUF: usize = 32 << 20;
/// The exchange's zone.
const ZONE: &str = "America/New_York";
/// Restart-to-ok target, ms.
const TARGET_RESTART_MS: f64 = 2_000.0;
/// The receive thread's p99.9 while a snapshot arrives, at most this many
/// times its normal p99.9.
const TARGET_CYCLE_RATIO: f64 = 2.0;

/// Flags of `itch-glimpse-restart`.
#[derive(clap::Args)]
pub struct Args {
    /// Stocks in the directory (1 to 65,535).
    #[arg(long, default_value_t = 8_000)]
    stocks: usize,
    /// Live orders in the snapshot (the day's adds before N; 1 to
    /// 10,000,000, above --before, not a multiple of 7,919).
    #[arg(long, default_value_t = 1_000_000)]
    orders: u64,
    /// The multicast starts this many messages before N (above 1,000,
    /// below --orders).
    #[arg(long, default_value_t = 5_000)]
    before: u64,
    /// Multicast messages a second (1,000 to 2,000,000).
    #[arg(long, default_value_t = 200_000)]
    rate: u64,
    /// Messages per multicast packet (1 to 100).
    #[arg(long, default_value_t = 20)]
    per_packet: usize,
    /// After the merge, ms before the normal window (0 to 58,000, and
    /// --settle-ms + --normal-ms at most 58,000).
    #[arg(long, default_value_t = 200)]
    settle_ms: u64,
    /// The normal window, ms (1 to 58,000).
    #[arg(long, default_value_t = 1_000)]
    normal_ms: u64,
    /// Runs (a new sidecar each, after its own apply reference; 1 to 100);
    /// the median restart is reported with each run's.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Pin the receive thread (this one) to this CPU from `Sidecar::start`
    /// on, and the server and sender threads to every other CPU (the
    /// connection thread, started inside `Sidecar::start`, is left to the
    /// scheduler, as `[sidecar] cpu` leaves it; 0 to 1,023).
    #[arg(long)]
    cpu: Option<usize>,
}

/// Most `--orders`: the spin (about 40 bytes a message) and the
/// reference's packets are built in memory.
const MAX_ORDERS: u64 = 10_000_000;
/// Most `--settle-ms` + `--normal-ms`: a run stops at [`RUN_LIMIT`], the
/// restart's target of it first.
const MAX_WINDOWS_MS: u64 = RUN_LIMIT.as_millis() as u64 - TARGET_RESTART_MS as u64;

impl Args {
    /// Refuses a flag out of its range, and windows after the merge
    /// longer than a run leaves them.
    fn check(&self) -> anyhow::Result<()> {
        within("--stocks", self.stocks, 1..=65_535)?;
        within("--orders", self.orders, 1..=MAX_ORDERS)?;
        require(!self.orders.is_multiple_of(STRIDE), || {
            format!(
                "--orders must not be a multiple of {STRIDE} (the stride of its deletes), not {}",
                self.orders
            )
        })?;
        require(self.before > 1_000 && self.before < self.orders, || {
            format!(
                "--before must be above join_gap_max (1000) and below --orders ({}), not {}",
                self.orders, self.before
            )
        })?;
        within("--rate", self.rate, 1_000..=2_000_000)?;
        within("--per-packet", self.per_packet, 1..=100)?;
        within("--settle-ms", self.settle_ms, 0..=MAX_WINDOWS_MS)?;
        within("--normal-ms", self.normal_ms, 1..=MAX_WINDOWS_MS)?;
        let windows = self.settle_ms + self.normal_ms;
        require(windows <= MAX_WINDOWS_MS, || {
            format!(
                "--settle-ms + --normal-ms must be at most {MAX_WINDOWS_MS} ms (a run stops at {} s, {} s of it for the restart), not {windows}",
                RUN_LIMIT.as_secs(),
                TARGET_RESTART_MS / 1e3
            )
        })?;
        within("--runs", self.runs, RUNS)?;
        if let Some(c) = self.cpu {
            within("--cpu", c, CPUS)?;
        }
        Ok(())
    }
}

/// Pins the calling thread to every CPU but `cpu`.
fn pin_away(cpu: usize) -> std::io::Result<()> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set; CPU_SET
    // is given indices below the machine's count.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in (0..n.min(libc::CPU_SETSIZE as usize)).filter(|&c| c != cpu) {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- the day

/// The deterministic day (see the module doc).
struct Day {
    stocks: Vec<Symbol>,
    orders: u64,
    /// Time of day of message N − 1, ns since midnight; the day's earlier
    /// messages 1 µs apart before it.
    base: u64,
}

/// A four-letter name for stock `i` (`AAAA`, `AAAB`, …).
fn name(i: usize) -> String {
    let mut b = [b'A'; 4];
    let mut k = i;
    for c in b.iter_mut().rev() {
        *c = b'A' + (k % 26) as u8;
        k /= 26;
    }
    String::from_utf8_lossy(&b).into_owned()
}

impl Day {
    fn new(stocks: usize, orders: u64, base: u64) -> anyhow::Result<Day> {
        let stocks = (0..stocks)
            .map(|i| Symbol::parse(&name(i)).context("stock name"))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Day {
            stocks,
            orders,
            base,
        })
    }

    fn s(&self) -> u64 {
        self.stocks.len() as u64
    }

    /// N: the first sequence after the snapshot's book.
    fn n(&self) -> u64 {
        2 * self.s() + 4 + self.orders
    }

    /// Add number `j` (order reference j + 1): stock j mod S, buys and
    /// sells in turn by round of the stocks, 1 to 32 cents away from the
    /// stock's mid (no book ever crosses).
    fn add(&self, j: u64, ts: u64) -> Vec<u8> {
        let locate = (j % self.s()) as u16 + 1;
        let round = j / self.s();
        let away = 100 * (1 + (round / 2) % 32) as u32;
        let mid = 1_000_000 + 100 * u32::from(locate);
        let (side, price) = match round % 2 {
            0 => (Side::Buy, mid - away),
            _ => (Side::Sell, mid + away),
        };
        let shares = 100 * (1 + (j % 7) as u32);
        let stock = self.stocks[usize::from(locate) - 1];
        encode::add_order(locate, ts, j + 1, side, shares, stock, price, None)
    }

    /// Message `seq`; those from N on are stamped `now_ts`.
    fn message(&self, seq: u64, now_ts: u64) -> Vec<u8> {
        let (s, n) = (self.s(), self.n());
        if seq >= n {
            let t = seq - n;
            let i = t / 2;
            if t % 2 == 1 && i < self.orders {
                let order = (i * STRIDE) % self.orders + 1;
                let locate = ((order - 1) % s) as u16 + 1;
                return encode::delete(locate, now_ts, order);
            }
            return self.add(self.orders + t, now_ts);
        }
        let ts = self.base.saturating_sub((n - 1 - seq) * 1_000);
        let stock = |locate: u64| self.stocks[locate as usize - 1];
        match seq {
            1 => encode::system_event(ts, b'O'),
            x if x <= s + 1 => encode::stock_directory((x - 1) as u16, ts, stock(x - 1)),
            x if x == s + 2 => encode::system_event(ts, b'S'),
            x if x <= 2 * s + 2 => {
                let locate = x - s - 2;
                encode::trading_action(locate as u16, ts, stock(locate), b'T')
            }
            x if x == 2 * s + 3 => encode::system_event(ts, b'Q'),
            x => self.add(x - (2 * s + 4), ts),
        }
    }

    /// A MoldUDP64 packet of messages `first..first + count`.
    fn packet(&self, first: u64, count: u64, now_ts: u64) -> Vec<u8> {
        let mut p = PacketBuilder::new(SESSION, first);
        for seq in first..first + count {
            p.message(&self.message(seq, now_ts));
        }
        p.finish()
    }

    /// The spin: Login Accepted, messages 1 to N − 1, End of Snapshot N.
    fn spin(&self) -> Vec<u8> {
        let n = self.n();
        let mut out = Vec::with_capacity((n as usize) * 40 + 64);
        out.extend_from_slice(&soup::login_accepted(&SESSION.0, 1));
        for seq in 1..n {
            soup::sequenced(&self.message(seq, 0), &mut out);
        }
        let mut g = vec![b'G'];
        g.extend_from_slice(format!("{n:>20}").as_bytes());
        soup::sequenced(&g, &mut out);
        out
    }
}

// ---------------------------------------------------------------- reference

/// Messages of the flow after N applied in the reference's second part.
const FLOW_REFERENCE: u64 = 200_000;

/// The reference's rates, messages/s.
struct Reference {
    /// Messages 1 to N − 1 (what the spin carries).
    day_per_s: f64,
    day_s: f64,
    /// The flow after N (adds and deletes of the snapshot's orders, as
    /// the held messages are), on the day's books.
    flow_per_s: f64,
}

/// Messages 1 to N − 1 applied through `Feed::on_datagram` in packets of
/// `per_packet`, then [`FLOW_REFERENCE`] messages of the flow after N.
fn apply_rate(day: &Day, per_packet: u64) -> anyhow::Result<Reference> {
    let n = day.n();
    let packets = |from: u64, to: u64| -> Vec<Vec<u8>> {
        (from..to)
            .step_by(per_packet as usize)
            .map(|first| day.packet(first, per_packet.min(to - first), 0))
            .collect()
    };
    let (packets, flow) = (packets(1, n), packets(n, n + FLOW_REFERENCE));
    let mut feed = Feed::new(Settings {
        sequencing: sequencer::Settings {
            gap_timeout_ns: 5_000_000,
            max_held: 1_000_000,
            join_gap_max: 10_000,
        },
        timezone: jiff::tz::db().get(ZONE)?,
        offset: OffsetMode::Fixed(0),
        offset_queue: 16,
        orders: 1 << 16,
        max_orders: 1 << 24,
        max_symbols: 1 << 16,
    });
    let t = now_ns();
    let start = Instant::now();
    for (i, p) in packets.iter().enumerate() {
        feed.on_datagram(p, t + i as u64)
            .map_err(|e| anyhow::anyhow!("reference packet {i} rejected: {e:?}"))?;
    }
    let day_s = start.elapsed().as_secs_f64();
    ensure!(
        feed.sequencer().next() == Some(n) && !feed.suspect(),
        "the reference feed ended at {:?}, suspect {}",
        feed.sequencer().next(),
        feed.suspect()
    );
    let t = t + packets.len() as u64;
    let start = Instant::now();
    for (i, p) in flow.iter().enumerate() {
        feed.on_datagram(p, t + i as u64)
            .map_err(|e| anyhow::anyhow!("reference flow packet {i} rejected: {e:?}"))?;
    }
    let flow_s = start.elapsed().as_secs_f64();
    ensure!(
        feed.sequencer().next() == Some(n + FLOW_REFERENCE) && feed.counters().unknown_orders == 0,
        "the reference flow ended at {:?}, {} unknown orders",
        feed.sequencer().next(),
        feed.counters().unknown_orders
    );
    // Freed after the clock stopped.
    drop(feed);
    Ok(Reference {
        day_per_s: (n - 1) as f64 / day_s,
        day_s,
        flow_per_s: FLOW_REFERENCE as f64 / flow_s,
    })
}

// ---------------------------------------------------------------- server

/// What the GLIMPSE server thread saw, ns since the Unix epoch.
#[derive(Debug, Clone, Copy, Default)]
struct ServerTimes {
    accepted: u64,
    /// The 49-byte Login Request read.
    login: u64,
    /// `write_all` of the spin returned (all but the socket buffers read).
    written: u64,
    /// The read holding the client's Logout returned.
    logout: u64,
    /// The client closed.
    eof: u64,
    /// Client heartbeats read.
    heartbeats: u64,
}

fn wait_readable(fd: i32, ms: i32) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, its count 1.
    unsafe { libc::poll(&mut p, 1, ms) };
}

/// Serves one connection: the login (checked), the spin, then reads to the
/// client's Logout and EOF.
fn serve(
    listener: &TcpListener,
    spin: &[u8],
    stop: &AtomicBool,
    written: &AtomicBool,
) -> anyhow::Result<ServerTimes> {
    listener.set_nonblocking(true)?;
    let start = Instant::now();
    let mut stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                ensure!(
                    !stop.load(Ordering::Acquire) && start.elapsed() < RUN_LIMIT,
                    "the sidecar never connected to the GLIMPSE server"
                );
                wait_readable(listener.as_raw_fd(), 5);
            }
            Err(e) => return Err(e).context("accept"),
        }
    };
    let mut t = ServerTimes {
        accepted: now_ns(),
        ..ServerTimes::default()
    };
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut login = [0u8; 49];
    stream
        .read_exact(&mut login)
        .context("reading the Login Request")?;
    t.login = now_ns();
    let l = soup::parse_login(&login[3..]).context("a malformed Login Request")?;
    let same = |field: &[u8], want: &str| soup::trim(field) == want.as_bytes();
    if login[2] != soup::kind::LOGIN_REQUEST || !same(&l.user, USER) || !same(&l.password, PASSWORD)
    {
        let _ = stream.write_all(&soup::login_rejected(soup::NOT_AUTHORIZED));
        bail!("the Login Request did not carry the configured user and password");
    }
    stream.write_all(spin).context("writing the spin")?;
    t.written = now_ns();
    written.store(true, Ordering::Release);
    let mut reader = soup::Reader::new();
    let mut buf = vec![0u8; 4096];
    loop {
        let n = match stream.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("reading after the spin"),
        };
        let now = now_ns();
        if n == 0 {
            t.eof = now;
            break;
        }
        let (mut logout, mut beats) = (false, 0);
        reader.push(&buf[..n], |f| {
            logout |= f.kind() == Some(soup::kind::LOGOUT);
            beats += u64::from(f.kind() == Some(soup::kind::CLIENT_HEARTBEAT));
            true
        });
        t.heartbeats += beats;
        if logout && t.logout == 0 {
            t.logout = now;
        }
    }
    Ok(t)
}

// ---------------------------------------------------------------- sender

/// Sends the multicast from `first` at `rate` messages/s in packets of
/// `per_packet`, each built when due, until `stop`. Returns the messages
/// sent.
#[allow(clippy::too_many_arguments)]
fn send(
    day: &Day,
    tx: &UdpSocket,
    port: u16,
    first: u64,
    rate: u64,
    per_packet: u64,
    midnight: u64,
    stop: &AtomicBool,
    sent: &AtomicU64,
) -> anyhow::Result<u64> {
    let to = loopback(port);
    let start = Instant::now();
    let mut seq = first;
    while !stop.load(Ordering::Acquire) && start.elapsed() < RUN_LIMIT {
        let due = first + (start.elapsed().as_secs_f64() * rate as f64) as u64;
        while seq + per_packet <= due {
            let p = day.packet(seq, per_packet, now_ns().saturating_sub(midnight));
            tx.send_to(&p, to).context("sending a packet")?;
            seq += per_packet;
            sent.store(seq - first, Ordering::Release);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(seq - first)
}

// ---------------------------------------------------------------- one run

/// This thread's CPU time, ns (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// This thread's involuntary context switches so far.
fn preemptions() -> u64 {
    // SAFETY: rusage is plain data; getrusage writes it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid rusage to write.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    u.ru_nivcsw as u64
}

/// The receive thread's cycles in one window: all of them, and those that
/// received a datagram.
struct Window {
    all: Histogram<u64>,
    busy: Histogram<u64>,
    /// Involuntary context switches of the thread within the window.
    preempted: u64,
}

impl Window {
    fn new() -> Window {
        Window {
            all: histogram(),
            busy: histogram(),
            preempted: 0,
        }
    }

    fn record(&mut self, ns: u64, datagrams: usize) {
        self.all.saturating_record(ns);
        if datagrams > 0 {
            self.busy.saturating_record(ns);
        }
    }

    fn add(&mut self, o: &Window) -> anyhow::Result<()> {
        self.all.add(&o.all)?;
        self.busy.add(&o.busy)?;
        self.preempted += o.preempted;
        Ok(())
    }

    fn json(&self) -> Value {
        json!({
            "all": summary(&self.all),
            "busy": summary(&self.busy),
            "preempted": self.preempted,
        })
    }
}

/// One restart's measurements.
struct Run {
    reference: Reference,
    restart_ms: f64,
    legs_ms: Value,
    spin_per_s: f64,
    spin_mb_per_s: f64,
    merge_cycle_ns: u64,
    merge_cycle_cpu_ns: Option<u64>,
    held_at_merge: usize,
    /// Without the merge cycle.
    snapshot: Window,
    merge: Window,
    normal: Window,
    checks: Value,
}

fn ms(a: u64, b: u64) -> f64 {
    b.saturating_sub(a) as f64 / 1e6
}

fn config(
    shm: &str,
    line: u16,
    glimpse: u16,
    pw: &std::path::Path,
    capacity: usize,
) -> anyhow::Result<Config> {
    Config::parse(
        &format!(
            "[state]\ncapacity = {capacity}\n[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{shm}\"\n\
             idle = \"spin\"\nrcvbuf_bytes = {RCVBUF}\n[[feed]]\nname = \"{FEED}\"\nprotocol = \"itch50\"\n\
             lines = [\"127.0.0.1:{line}\"]\nstale_threshold_ms = 60000\nsource_threshold_ms = 60000\n\
             join_gap_max = 1000\nglimpse = \"127.0.0.1:{glimpse}\"\nglimpse_user = \"{USER}\"\n\
             glimpse_password_file = \"{}\"\nsnapshot_triggers = [\"join\"]\n",
            pw.display()
        ),
        "itch-glimpse-bench",
    )
    .map_err(anyhow::Error::msg)
}

#[derive(PartialEq)]
enum Phase {
    Join,
    Awaiting,
    Settling,
    Normal,
}

fn run_once(a: &Args, day: &Day, spin: &[u8], midnight: u64, r: usize) -> anyhow::Result<Run> {
    let dir = tempfile::tempdir()?;
    let pw = dir.path().join("glimpse.pw");
    std::fs::write(&pw, format!("{PASSWORD}\n"))?;
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600))?;
    let [line]: [u16; 1] = distinct_ports()?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let glimpse = listener.local_addr()?.port();
    let shm = ShmFile(format!(
        "/dev/shm/tickguard-bench-itch-glimpse-{}-{r}",
        std::process::id()
    ));
    let capacity = (2 * day.stocks.len()).next_power_of_two().max(1024);
    let config = config(&shm.0, line, glimpse, &pw, capacity)?;
    let tx = UdpSocket::bind("127.0.0.1:0")?;
    let (stop, sent) = (AtomicBool::new(false), AtomicU64::new(0));
    let written = AtomicBool::new(false);
    let n = day.n();
    let first = n - a.before;
    let sample = name(1);

    let rmem = RmemMax::raise(RCVBUF, true);
    let started = now_ns();
    let mut sidecar = Sidecar::start(&config)?;
    let ready = now_ns();
    drop(rmem);
    let reader = Reader::open(&shm.0);
    let drops0 = proc_udp(line)?.drops;

    let mut snapshot = Window::new();
    let mut merge = Window::new();
    let mut normal = Window::new();
    let (mut trigger, mut merge_at, mut ok_at) = (0u64, (0u64, 0u64), 0u64);
    let (mut held_at_merge, mut held_before, mut handle) = (0usize, 0usize, None);
    let mut phase = Phase::Join;
    let (mut preempted, mut merge_cpu) = (0u64, None);
    let mut last_verdict = String::new();
    let (server, sent_messages) = std::thread::scope(|s| -> anyhow::Result<_> {
        let (stop, sent, tx, written) = (&stop, &sent, &tx, &written);
        let cpu = a.cpu;
        let server = s.spawn(move || {
            if let Some(c) = cpu {
                pin_away(c)?;
            }
            serve(&listener, spin, stop, written)
        });
        let sender = s.spawn(move || {
            if let Some(c) = cpu {
                pin_away(c)?;
            }
            send(
                day,
                tx,
                line,
                first,
                a.rate,
                a.per_packet as u64,
                midnight,
                stop,
                sent,
            )
        });
        let result = (|| -> anyhow::Result<()> {
            if let Some(c) = a.cpu {
                tickguard::sys::pin_to_cpu(c).with_context(|| format!("pinning to CPU {c}"))?;
            }
            let begun = Instant::now();
            loop {
                // The thread's CPU time only once the spin is nearly read
                // (for the merge cycle's): the read is a system call.
                let timing_cpu = phase == Phase::Awaiting && written.load(Ordering::Acquire);
                let c0 = if timing_cpu { thread_cpu_ns() } else { 0 };
                let t0 = now_ns();
                let got = sidecar.cycle(t0);
                let t1 = now_ns();
                let cpu = if timing_cpu {
                    Some(thread_cpu_ns() - c0)
                } else {
                    None
                };
                let feed = sidecar.handler().feeds()[0]
                    .engine()
                    .itch()
                    .context("not an itch50 feed")?;
                let seq = feed.sequencer();
                let merged = seq.counters().snapshots > 0;
                match phase {
                    Phase::Join if seq.awaiting() => {
                        trigger = t0;
                        phase = Phase::Awaiting;
                        snapshot.record(t1 - t0, got);
                        preempted = preemptions();
                    }
                    Phase::Join => {}
                    Phase::Awaiting if merged => {
                        merge_at = (t0, t1);
                        merge_cpu = cpu;
                        held_at_merge = held_before;
                        // Busy whether or not a datagram came with it.
                        merge.record(t1 - t0, got.max(1));
                        snapshot.preempted = preemptions() - preempted;
                        phase = Phase::Settling;
                    }
                    Phase::Awaiting => snapshot.record(t1 - t0, got),
                    Phase::Settling if ok_at > 0 && t1 >= merge_at.1 + a.settle_ms * 1_000_000 => {
                        phase = Phase::Normal;
                        preempted = preemptions();
                    }
                    Phase::Settling => {}
                    Phase::Normal => {
                        normal.record(t1 - t0, got);
                        if t1 >= merge_at.1 + (a.settle_ms + a.normal_ms) * 1_000_000 {
                            normal.preempted = preemptions() - preempted;
                            break;
                        }
                    }
                }
                held_before = seq.held();
                if merged && ok_at == 0 && !feed.suspect() {
                    handle = handle.or_else(|| reader.lookup(FEED, &sample));
                    if let Some(h) = &handle {
                        let v = reader.check(h, now_ns());
                        if v.is_ok() {
                            ok_at = t1;
                        } else {
                            last_verdict = format!("{} / {}", v.reasons, v.health);
                        }
                    }
                }
                if begun.elapsed() > RUN_LIMIT {
                    bail!(
                        "the restart did not settle: awaiting {}, snapshots merged {}, suspect {}, held {}, next {:?}, sample {:?} ({last_verdict}), {} messages sent",
                        seq.awaiting(),
                        seq.counters().snapshots,
                        feed.suspect(),
                        seq.held(),
                        seq.next(),
                        handle.is_some(),
                        sent.load(Ordering::Acquire)
                    );
                }
            }
            Ok(())
        })();
        stop.store(true, Ordering::Release);
        if a.cpu.is_some() {
            // Every CPU again for what follows (the next run's reference
            // and start).
            let _ = pin_away(usize::MAX);
        }
        let sent_messages = sender
            .join()
            .map_err(|_| anyhow::anyhow!("sender panicked"))?;
        let server = server
            .join()
            .map_err(|_| anyhow::anyhow!("server panicked"))?;
        result?;
        Ok((server?, sent_messages?))
    })?;

    let f = &sidecar.handler().feeds()[0];
    let feed = f.engine().itch().context("not an itch50 feed")?;
    let seq = feed.sequencer();
    let c = seq.counters();
    let fc = feed.counters();
    let spin_messages = n - 1;
    let spin_s = server.logout.saturating_sub(server.login) as f64 / 1e9;
    let (mc0, mc1) = merge_at;
    let legs_ms = json!({
        "sidecar_start": ms(started, ready),
        "start_to_trigger": ms(ready, trigger),
        "trigger_to_accepted": ms(trigger, server.accepted),
        "trigger_to_login_read": ms(trigger, server.login),
        "spin_login_to_logout": ms(server.login, server.logout),
        "spin_write_returned": ms(server.login, server.written),
        "logout_to_merge_cycle": ms(server.logout, mc0),
        "merge_cycle": ms(mc0, mc1),
        "merge_to_ok": ms(mc1, ok_at),
    });
    let checks = json!({
        "snapshots_merged": c.snapshots,
        "snapshot_discarded": c.snapshot_discarded,
        "snapshot_overflow": c.snapshot_overflow,
        "gaps_given_up": c.gaps_given_up,
        "ticks_lost": c.ticks_lost,
        "unknown_orders": fc.unknown_orders,
        "anomalies": fc.anomalies,
        "orders_refused": fc.orders_refused,
        "next_sequence": seq.next(),
        "snapshot_next": n,
        "multicast_first_sequence": first,
        "multicast_messages_sent": sent_messages,
        "sidecar_packets": f.counters.packets,
        "published": {
            "snapshots": reader.counter(0, counter::SNAPSHOTS),
            "snapshot_awaiting": reader.counter(0, counter::SNAPSHOT_AWAITING),
            "snapshot_messages": reader.counter(0, counter::SNAPSHOT_MESSAGES),
            "snapshot_next": reader.counter(0, counter::SNAPSHOT_NEXT),
        },
        "kernel_drops": proc_udp(line)?.drops - drops0,
        "server_heartbeats_read": server.heartbeats,
        "server_eof_after_logout_ms": ms(server.logout, server.eof),
    });
    ensure!(
        c.snapshots == 1
            && fc.unknown_orders == 0
            && fc.anomalies == 0
            && !feed.suspect()
            && reader.counter(0, counter::SNAPSHOT_NEXT) == Some(n)
            && reader.counter(0, counter::SNAPSHOT_MESSAGES) == Some(spin_messages),
        "the restart went wrong: {checks}"
    );
    // The reference after the restart, so that the first run's restart
    // finds the process as a restarted one would (its memory not yet
    // faulted in and freed by a million-order book).
    drop(sidecar);
    let reference = apply_rate(day, a.per_packet as u64)?;
    Ok(Run {
        reference,
        restart_ms: ms(started, ok_at),
        legs_ms,
        spin_per_s: spin_messages as f64 / spin_s,
        spin_mb_per_s: spin.len() as f64 / spin_s / 1e6,
        merge_cycle_ns: mc1 - mc0,
        merge_cycle_cpu_ns: merge_cpu,
        held_at_merge,
        snapshot,
        merge,
        normal,
        checks,
    })
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `itch-glimpse-restart` row.
pub fn run(a: &Args) -> anyhow::Result<Value> {
    a.check()?;
    let load_start = loadavg();
    let tz = jiff::tz::db().get(ZONE)?;
    let now = now_ns();
    let midnight = u64::try_from(midnight(&tz, now)).unwrap_or(0);
    let day = Day::new(a.stocks, a.orders, now.saturating_sub(midnight))?;
    let spin = day.spin();
    let runs = (0..a.runs.max(1))
        .map(|r| run_once(a, &day, &spin, midnight, r))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (mut snapshot, mut merge, mut normal) = (Window::new(), Window::new(), Window::new());
    for r in &runs {
        snapshot.add(&r.snapshot)?;
        merge.add(&r.merge)?;
        normal.add(&r.normal)?;
    }
    let mut with_merge = Window::new();
    with_merge.add(&snapshot)?;
    with_merge.add(&merge)?;
    let each = |f: fn(&Run) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
    let restart = median(&each(|r| r.restart_ms));
    let restart_max = each(|r| r.restart_ms).into_iter().fold(0.0, f64::max);
    // Each leg's median over the runs.
    let mut legs_median = serde_json::Map::new();
    if let Some(keys) = runs[0].legs_ms.as_object() {
        for k in keys.keys() {
            let v: Vec<f64> = runs.iter().filter_map(|r| r.legs_ms[k].as_f64()).collect();
            legs_median.insert(k.clone(), json!(median(&v)));
        }
    }
    let spin_rate = median(&each(|r| r.spin_per_s));
    let apply = median(&each(|r| r.reference.day_per_s));
    let flow = median(&each(|r| r.reference.flow_per_s));
    let p999 = |h: &Histogram<u64>| h.value_at_quantile(0.999) as f64;
    let ratio_all = p999(&with_merge.all) / p999(&normal.all).max(1.0);
    let ratio_busy = p999(&with_merge.busy) / p999(&normal.busy).max(1.0);
    let ratio_without = p999(&snapshot.all) / p999(&normal.all).max(1.0);
    // Each run's own ratio (all cycles, the merge cycle included).
    let ratio_each = runs
        .iter()
        .map(|r| {
            let mut w = Window::new();
            w.add(&r.snapshot)?;
            w.add(&r.merge)?;
            Ok(p999(&w.all) / p999(&r.normal.all).max(1.0))
        })
        .collect::<anyhow::Result<Vec<f64>>>()?;
    let receive_thread = json!({
        "normal": normal.json(),
        "while_snapshot": with_merge.json(),
        "while_snapshot_without_merge_cycle": snapshot.json(),
        "merge_cycle_ns_each": runs.iter().map(|r| r.merge_cycle_ns).collect::<Vec<_>>(),
        "merge_cycle_cpu_ns_each": runs.iter().map(|r| r.merge_cycle_cpu_ns).collect::<Vec<_>>(),
        "held_at_merge_each": runs.iter().map(|r| r.held_at_merge).collect::<Vec<_>>(),
        // What applying the held messages from N would take at the
        // in-process rate of the same flow.
        "merge_held_apply_estimate_ns_each": runs.iter().map(|r| {
            (r.held_at_merge.saturating_sub(a.before as usize) as f64 / r.reference.flow_per_s * 1e9).round()
        }).collect::<Vec<_>>(),
        "p99_9_ratio": ratio_all,
        "p99_9_ratio_each": ratio_each,
        "p99_9_ratio_busy": ratio_busy,
        "p99_9_ratio_without_merge_cycle": ratio_without,
        "target_ratio": TARGET_CYCLE_RATIO,
        "target_met": ratio_all <= TARGET_CYCLE_RATIO,
        "note": "every Sidecar::cycle timed (clock read to clock read); while_snapshot: from the cycle that saw the join (trigger) to the end of the cycle that merged, that one included; normal: the same multicast after the merge and --settle-ms, no snapshot pending; busy: cycles that received a datagram, and the merging cycle",
    });
    Ok(json!({
        "row": "itch_glimpse_restart",
        "stocks": a.stocks,
        "live_orders": a.orders,
        "spin_messages": day.n() - 1,
        "spin_bytes": spin.len(),
        "snapshot_next": day.n(),
        "multicast_from_before_n": a.before,
        "rate_messages_per_s": a.rate,
        "messages_per_packet": a.per_packet,
        "runs": runs.len(),
        "restart_ms": restart,
        "restart_ms_each": each(|r| r.restart_ms),
        "restart_target_ms": TARGET_RESTART_MS,
        "restart_ms_first_run": runs[0].restart_ms,
        "restart_ms_max": restart_max,
        "restart_target_met": restart_max <= TARGET_RESTART_MS,
        "restart_note": "restart_ms is the median of the runs; the target is judged on the slowest (restart_ms_max). Runs share one process: the first finds its memory as a restarted process does, later ones reuse what earlier ones freed (the first run's trigger → login also holds the connection thread's first staging state: 16 MiB of order window advised onto huge pages)",
        "legs_ms_median": legs_median,
        "legs_ms_each": runs.iter().map(|r| r.legs_ms.clone()).collect::<Vec<_>>(),
        "spin_messages_per_s": spin_rate.round(),
        "spin_messages_per_s_each": each(|r| r.spin_per_s.round()),
        "spin_mb_per_s": median(&each(|r| r.spin_mb_per_s)),
        "multicast_apply_messages_per_s": apply.round(),
        "multicast_apply_messages_per_s_each": each(|r| r.reference.day_per_s.round()),
        "multicast_apply_seconds_each": each(|r| r.reference.day_s),
        "multicast_apply_flow_messages_per_s": flow.round(),
        "multicast_apply_flow_messages_per_s_each": each(|r| r.reference.flow_per_s.round()),
        "spin_over_apply": spin_rate / apply,
        "receive_thread": receive_thread,
        "checks_each": runs.iter().map(|r| r.checks.clone()).collect::<Vec<_>>(),
        "legs_note": "ns since the epoch on one clock: start = before Sidecar::start; trigger = start of the cycle that saw the join; login_read / logout = the server thread's clock after the read holding the Login Request / the client's Logout (the spin: the connection thread reading and staging every message); merge cycle = the cycle whose upkeep merged (held messages from N applied, every symbol republished); ok = end of the first cycle after which the feed is not suspect and Reader::check on a sample symbol reads ok",
        "receive_thread_cpu": a.cpu,
        "load_average": {"start": load_start, "end": loadavg()},
    }))
}
