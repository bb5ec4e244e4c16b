//! ITCH live rows, the sidecar in this process on loopback:
//!
//! - `itch-live-drain`: an itch50 feed's two line sockets pre-filled with
//!   the same MoldUDP64 packets of a synthetic day (10–30 messages each),
//!   drained by `Sidecar::cycle`, against a bare `recvmmsg` loop on two
//!   sockets set up the same way (`LineSocket` + `Batch`) filled alike.
//! - `itch-recovery-latency`: a paced sender on both lines drops every
//!   `--drop-every`th packet on both; a minimal re-request server answers
//!   each request at once with the packet it names. Per gap: the cycle
//!   that first shows it open, the cycle that sent its first request, the
//!   server's receipt of it, the cycle that shows it closed; and the
//!   receive thread's time after a cycle's data is applied (re-requests
//!   included) against its time receiving and applying.

use crate::check_latency::{histogram, summary};
use crate::harness::{
    distinct_ports, median, proc_udp, require, send_all, sockaddr, within, RmemMax, ShmFile,
    RCVBUF_BYTES, RUNS,
};
use anyhow::{ensure, Context};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tickguard::config::{Config, ProtocolSettings};
use tickguard::protocol::itch50::mold::{message_count, Request};
use tickguard::protocol::itch50::synth::{mold_packets, synthetic_day};
use tickguard::protocol::itch50::{PacketBuilder, Session};
use tickguard::sidecar::Sidecar;
use tickguard::simulate::itch50::MAX_DATAGRAM;
use tickguard::sys::udp::{Batch, LineSocket};
use tickguard::time::now_ns;

/// Fewest and most messages per packet (as the capture row).
const PER_PACKET: (usize, usize) = (10, 30);
/// Seed of the synthetic day.
const SEED: u64 = 20_260_105;
/// The session of the packets.
const SESSION: Session = Session(*b"TGBENCH001");
/// Longest any single fill, drain or run may take.
const STEP_LIMIT: Duration = Duration::from_secs(30);

/// MoldUDP64 data packets of a synthetic day of `messages` over `stocks`,
/// sequences from 1: (packets, first sequence of each).
fn packets(messages: u64, stocks: usize) -> anyhow::Result<(Vec<Vec<u8>>, Vec<u64>)> {
    let mut day = Vec::new();
    synthetic_day(&mut day, messages, stocks, SEED)?;
    let (mut out, mut starts, mut next) = (Vec::new(), Vec::new(), 1u64);
    mold_packets(&day[..], SESSION, PER_PACKET, SEED, |_, p| {
        starts.push(next);
        next += u64::from(message_count(p));
        out.push(p.to_vec());
        Ok(())
    })?;
    Ok((out, starts))
}

/// An itch50 feed on two loopback lines (and a recovery server if given).
fn config(
    shm: &str,
    lines: [u16; 2],
    rcvbuf: usize,
    recovery: Option<u16>,
) -> anyhow::Result<Config> {
    let recovery = recovery.map_or(String::new(), |p| {
        format!("recovery = \"127.0.0.1:{p}\"\nrecovery_listen = \"127.0.0.1:0\"\ngap_timeout_ms = 1000\n")
    });
    Config::parse(
        &format!(
            "[state]\ncapacity = 65536\n[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{shm}\"\n\
             idle = \"spin\"\nrcvbuf_bytes = {rcvbuf}\n[[feed]]\nname = \"nasdaq\"\nprotocol = \"itch50\"\n\
             lines = [\"127.0.0.1:{}\", \"127.0.0.1:{}\"]\n{recovery}stale_threshold_ms = 60000\n\
             source_threshold_ms = 60000\n",
            lines[0], lines[1]
        ),
        "itch-live-bench",
    )
    .map_err(anyhow::Error::msg)
}

pub(crate) fn loopback(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new([127, 0, 0, 1].into(), port)
}

// ---------------------------------------------------------------- drain

/// How a drain row fills and drains its queues (the flags every drain row
/// shares).
#[derive(clap::Args)]
pub(crate) struct QueueArgs {
    /// SO_RCVBUF requested per socket, bytes (4,096 to 2^30 − 1; as root,
    /// net.core.rmem_max is raised to it while the sockets are opened,
    /// then restored).
    #[arg(long, default_value_t = 64 << 20)]
    rcvbuf: usize,
    /// Never touch net.core.rmem_max.
    #[arg(long)]
    no_sysctl: bool,
    /// Fraction of the granted receive buffer to fill (kernel accounting;
    /// 0.01 to 0.99).
    #[arg(long, default_value_t = 0.8)]
    fill: f64,
    /// Most packets per fill (each goes to both lines; 1 to 1,000,000, and
    /// --runs × --max-packets at most 1,000,000).
    #[arg(long, default_value_t = 100_000)]
    max_packets: usize,
    /// Fill-and-drain rounds (1 to 100); the median of each side is kept.
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

/// Packets sent once to size the fill (and warm both sides) before anything
/// is timed.
const PROBE: usize = 1000;

/// Most packets of all runs' fills, which are built in memory first.
const MAX_PACKETS_WANTED: usize = 1_000_000;

impl QueueArgs {
    /// Refuses a flag out of its range, and more packets than
    /// [`MAX_PACKETS_WANTED`].
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        within("--rcvbuf", self.rcvbuf, RCVBUF_BYTES)?;
        within("--fill", self.fill, 0.01..=0.99)?;
        within("--max-packets", self.max_packets, 1..=MAX_PACKETS_WANTED)?;
        within("--runs", self.runs, RUNS)?;
        let wanted = self.runs * self.max_packets;
        require(wanted <= MAX_PACKETS_WANTED, || {
            format!(
                "--runs × --max-packets must be at most {MAX_PACKETS_WANTED} packets (all built in memory first), not {} × {} = {wanted}",
                self.runs, self.max_packets
            )
        })
    }

    /// Packets a drain uses at most: the probe, then every run's fill.
    pub(crate) fn packets_wanted(&self) -> usize {
        PROBE + self.runs.max(1) * self.max_packets
    }
}

/// Flags of `itch-live-drain`.
#[derive(clap::Args)]
pub struct DrainArgs {
    /// Stocks in the synthetic day's directory (1 to 65,535).
    #[arg(long, default_value_t = 8_000)]
    stocks: usize,
    #[command(flatten)]
    queue: QueueArgs,
}

impl DrainArgs {
    /// Refuses a flag out of its range.
    fn check(&self) -> anyhow::Result<()> {
        within("--stocks", self.stocks, 1..=65_535)?;
        self.queue.check()
    }
}

/// Sends `packets` to both sockets of a pair, none reading.
fn fill(tx: &UdpSocket, packets: &[Vec<u8>], ports: [u16; 2]) -> anyhow::Result<()> {
    let dsts = [sockaddr(loopback(ports[0])), sockaddr(loopback(ports[1]))];
    let start = Instant::now();
    for chunk in packets.chunks(32) {
        ensure!(start.elapsed() < STEP_LIMIT, "fill did not finish");
        send_all(tx, chunk, &dsts)?;
    }
    // Loopback delivery happens inside the send; settle anyway.
    std::thread::sleep(Duration::from_millis(20));
    Ok(())
}

fn drops(ports: [u16; 2]) -> anyhow::Result<u64> {
    Ok(proc_udp(ports[0])?.drops + proc_udp(ports[1])?.drops)
}

/// `Sidecar::cycle` until its feed counted `n` more datagrams: seconds.
fn drain_sidecar(sidecar: &mut Sidecar, n: u64) -> anyhow::Result<f64> {
    let packets = |s: &Sidecar| s.handler().feeds()[0].counters.packets;
    let target = packets(sidecar) + n;
    let start = Instant::now();
    while packets(sidecar) < target {
        sidecar.cycle(now_ns());
        ensure!(start.elapsed() < STEP_LIMIT, "sidecar drain did not finish");
    }
    Ok(start.elapsed().as_secs_f64())
}

/// `Batch::recv` on both sockets in turn, counting, until `n`: seconds.
fn drain_bare(sockets: &[LineSocket; 2], batches: &mut [Batch; 2], n: u64) -> anyhow::Result<f64> {
    let start = Instant::now();
    let mut got = 0u64;
    while got < n {
        for (s, b) in sockets.iter().zip(batches.iter_mut()) {
            got += b.recv(s, 0)? as u64;
        }
        ensure!(start.elapsed() < STEP_LIMIT, "bare drain did not finish");
    }
    ensure!(got == n, "bare loop received {got} of {n}");
    Ok(start.elapsed().as_secs_f64())
}

/// What [`drain_pair`] measured, and the sidecar it drained with.
pub(crate) struct Drained {
    /// The sidecar, as the last run left it.
    pub(crate) sidecar: Sidecar,
    /// Seconds of each sidecar drain, and of each bare drain.
    pub(crate) ts: Vec<f64>,
    pub(crate) tb: Vec<f64>,
    /// Packets per fill (each sent to both lines).
    pub(crate) n: usize,
    pub(crate) runs: usize,
    truesize: u64,
    granted: u64,
    raised: bool,
    kernel_drops: u64,
    _shm: ShmFile,
}

impl Drained {
    /// The packets of each timed fill, in the order sent.
    pub(crate) fn chunks<'a>(&self, all: &'a [Vec<u8>]) -> impl Iterator<Item = &'a [Vec<u8>]> {
        let n = self.n;
        (0..self.runs).map(move |r| &all[PROBE + r * n..PROBE + (r + 1) * n])
    }

    /// Datagrams/s of the median sidecar drain and the median bare drain.
    pub(crate) fn rates(&self) -> (f64, f64) {
        let datagrams = 2.0 * self.n as f64;
        (datagrams / median(&self.ts), datagrams / median(&self.tb))
    }

    /// What every drain row reports of its queues and runs.
    pub(crate) fn setup(&self) -> Value {
        json!({
            "packets_per_fill": self.n,
            "datagrams_per_fill": 2 * self.n,
            "skb_truesize_bytes": self.truesize,
            "rcvbuf_granted_bytes": self.granted,
            "rmem_max_raised": self.raised,
            "runs": self.runs,
            "seconds": {"tickguard": self.ts, "bare_recvmmsg": self.tb},
            "kernel_drops": self.kernel_drops,
        })
    }
}

/// A feed's two line sockets, in a sidecar `config(shm, ports, rcvbuf)`
/// makes, and two bare sockets set up the same way, each pre-filled with
/// the same consecutive packets of `all` (both lines alike) and drained:
/// by `Sidecar::cycle`, and by `Batch::recv` alone. The first [`PROBE`]
/// packets size the fill from the kernel's accounting; then `runs`
/// rounds, who goes first rotating.
pub(crate) fn drain_pair(
    q: &QueueArgs,
    tag: &str,
    all: &[Vec<u8>],
    config: impl FnOnce(&str, [u16; 2], usize) -> anyhow::Result<Config>,
) -> anyhow::Result<Drained> {
    q.check()?;
    let ports: [u16; 4] = distinct_ports()?;
    let (side, bare_ports) = ([ports[0], ports[1]], [ports[2], ports[3]]);
    let shm = ShmFile(format!(
        "/dev/shm/tickguard-bench-{tag}-{}",
        std::process::id()
    ));
    let config = config(&shm.0, side, q.rcvbuf)?;
    let rmem = RmemMax::raise(q.rcvbuf, !q.no_sysctl);
    let mut sidecar = Sidecar::start(&config)?;
    let open = |p| LineSocket::open(loopback(p), None, config.sidecar.interface, q.rcvbuf);
    let bare = [open(bare_ports[0])?, open(bare_ports[1])?];
    let raised = rmem.raised_to.is_some();
    drop(rmem);
    let mut batches = [
        Batch::new(config.sidecar.batch),
        Batch::new(config.sidecar.batch),
    ];
    let tx = UdpSocket::bind("127.0.0.1:0")?;

    // Size the fill from the kernel's accounting of the probe.
    let granted = bare[0].info.rcvbuf as u64;
    ensure!(all.len() > PROBE, "only {} packets", all.len());
    let before = proc_udp(bare_ports[0])?.rx_bytes;
    fill(&tx, &all[..PROBE], bare_ports)?;
    let truesize = (proc_udp(bare_ports[0])?.rx_bytes - before) / PROBE as u64;
    ensure!(truesize > 0, "no receive-queue accounting in /proc/net/udp");
    drain_bare(&bare, &mut batches, 2 * PROBE as u64)?;
    fill(&tx, &all[..PROBE], side)?;
    drain_sidecar(&mut sidecar, 2 * PROBE as u64)?;
    let runs = q.runs.max(1);
    let n = (((granted as f64 * q.fill) as u64 / truesize) as usize)
        .min(q.max_packets)
        .min((all.len() - PROBE) / runs);
    let drops0 = drops(side)? + drops(bare_ports)?;
    let (mut ts, mut tb) = (Vec::new(), Vec::new());
    for r in 0..runs {
        let chunk = &all[PROBE + r * n..PROBE + (r + 1) * n];
        // Rotate who goes first.
        for k in 0..2 {
            let ours = (r + k) % 2 == 0;
            fill(&tx, chunk, if ours { side } else { bare_ports })?;
            ensure!(
                drops(side)? + drops(bare_ports)? == drops0,
                "kernel dropped while filling; lower --fill"
            );
            if ours {
                ts.push(drain_sidecar(&mut sidecar, 2 * n as u64)?);
            } else {
                tb.push(drain_bare(&bare, &mut batches, 2 * n as u64)?);
            }
        }
    }
    let kernel_drops = drops(side)? + drops(bare_ports)? - drops0;
    Ok(Drained {
        sidecar,
        ts,
        tb,
        n,
        runs,
        truesize,
        granted,
        raised,
        kernel_drops,
        _shm: shm,
    })
}

/// The reference without sockets: a second sidecar of the same feed,
/// its sockets never read, handed the probe's packets and then each timed
/// fill's directly, as its cycle would apply them from two full batches
/// (line A's copy of each packet, then line B's, as they arrived; the
/// per-cycle upkeep after each `batch` packets). Seconds of each fill.
fn apply_only(q: &QueueArgs, d: &Drained, all: &[Vec<u8>]) -> anyhow::Result<Vec<f64>> {
    let ports: [u16; 2] = distinct_ports()?;
    let shm = ShmFile(format!(
        "/dev/shm/tickguard-bench-itch-apply-{}",
        std::process::id()
    ));
    let mut sidecar = Sidecar::start(&config(&shm.0, ports, q.rcvbuf, None)?)?;
    let batch = sidecar.config().sidecar.batch;
    let mut apply = |packets: &[Vec<u8>]| -> anyhow::Result<f64> {
        let h = sidecar.handler_mut();
        let start = Instant::now();
        for cycle in packets.chunks(batch) {
            let now = now_ns();
            for p in cycle {
                for line in 0..2 {
                    ensure!(
                        h.on_datagram_line(0, line, p, now).is_ok(),
                        "a packet rejected"
                    );
                    std::hint::black_box(h.messages_in(0, p));
                }
            }
            h.upkeep(now);
        }
        Ok(start.elapsed().as_secs_f64())
    };
    apply(&all[..PROBE])?;
    d.chunks(all).map(&mut apply).collect()
}

/// The `itch-live-drain` row.
pub fn drain(a: &DrainArgs) -> anyhow::Result<Value> {
    a.check()?;
    // ~20 messages a packet on average.
    let (all, _) = packets(a.queue.packets_wanted() as u64 * 20, a.stocks)?;
    let d = drain_pair(&a.queue, "itch-drain", &all, |shm, lines, rcvbuf| {
        config(shm, lines, rcvbuf, None)
    })?;
    let ta = apply_only(&a.queue, &d, &all)?;
    let messages: u64 = d
        .chunks(&all)
        .flatten()
        .map(|p| u64::from(message_count(p)))
        .sum();
    let feed = &d.sidecar.handler().feeds()[0];
    let it = feed.engine().itch().context("not an itch50 feed")?;
    let seq = it.sequencer();
    let c = feed.counters.clone();
    let per_packet = messages as f64 / (d.runs * d.n) as f64;
    let (s, b) = d.rates();
    let mut v = json!({
        "row": "itch_live_drain",
        "tickguard_datagrams_per_s": s.round(),
        "bare_recvmmsg_datagrams_per_s": b.round(),
        "ratio": s / b,
        "tickguard_messages_per_s": (s * per_packet).round(),
        "bare_recvmmsg_messages_per_s": (b * per_packet).round(),
        "tickguard_unique_messages_per_s": (s * per_packet / 2.0).round(),
        "apply_only_seconds": ta,
        "apply_only_datagrams_per_s": (2.0 * d.n as f64 / median(&ta)).round(),
        "ceiling_ratio": median(&d.tb) / (median(&d.tb) + median(&ta)),
        "ceiling_note": "apply_only: the same fills handed to a second sidecar's handler without sockets; ceiling_ratio = bare / (bare + apply_only), the most the drain could reach if receiving cost no more than the bare loop",
        "messages_note": "messages/s count every datagram's messages (each packet arrives on both lines); unique counts each once",
        "messages_per_packet": per_packet,
        "messages_per_packet_range": [PER_PACKET.0, PER_PACKET.1],
        "stocks": a.stocks,
        "sidecar_packets": c.packets,
        "gaps_open": seq.gaps_open(),
        "gaps_given_up": seq.counters().gaps_given_up,
        "next_sequence": seq.next(),
    });
    merge(&mut v, d.setup());
    Ok(v)
}

/// Adds `more`'s keys to the object `v`.
pub(crate) fn merge(v: &mut Value, more: Value) {
    if let (Some(o), Value::Object(m)) = (v.as_object_mut(), more) {
        o.extend(m);
    }
}

// ---------------------------------------------------------------- recovery

/// Flags of `itch-recovery-latency`.
#[derive(clap::Args)]
pub struct RecoveryArgs {
    /// Gaps to make (one packet dropped on both lines each; 1 to 100,000,
    /// and --gaps × --drop-every at most 300,000).
    #[arg(long, default_value_t = 3_000)]
    gaps: usize,
    /// One packet in this many is dropped on both lines (2 to 1,000).
    #[arg(long, default_value_t = 10)]
    drop_every: usize,
    /// Packets sent per second, each on both lines (1 to 1,000,000; all of
    /// them sent within 27 s).
    #[arg(long, default_value_t = 5_000)]
    rate: u64,
    /// Stocks in the synthetic day's directory (1 to 65,535).
    #[arg(long, default_value_t = 1_000)]
    stocks: usize,
}

/// Packets of the opening (directory, trading actions), never dropped.
const WARM: usize = 200;
/// Most packets of the gaps' part (`--gaps × --drop-every`), built in
/// memory first: ten times the default's.
const MAX_GAP_PACKETS: usize = 300_000;
/// Longest the sender may need for every packet at `--rate` (it stops at
/// [`STEP_LIMIT`]).
const SEND_SECONDS: u64 = 27;

impl RecoveryArgs {
    /// Refuses a flag out of its range, and a run too large to build or
    /// too long for the sender.
    fn check(&self) -> anyhow::Result<()> {
        within("--gaps", self.gaps, 1..=100_000)?;
        within("--drop-every", self.drop_every, 2..=1000)?;
        within("--rate", self.rate, 1..=1_000_000)?;
        within("--stocks", self.stocks, 1..=65_535)?;
        let gap_packets = self.gaps * self.drop_every;
        require(gap_packets <= MAX_GAP_PACKETS, || {
            format!(
                "--gaps × --drop-every must be at most {MAX_GAP_PACKETS} packets (all built in memory first), not {} × {} = {gap_packets}",
                self.gaps, self.drop_every
            )
        })?;
        let packets = (WARM + gap_packets) as u64;
        require(packets <= self.rate * SEND_SECONDS, || {
            format!(
                "--gaps × --drop-every + {WARM} = {packets} packets at --rate {} take {:.1} s: at most {SEND_SECONDS} s (the sender stops at {} s)",
                self.rate,
                packets as f64 / self.rate as f64,
                STEP_LIMIT.as_secs()
            )
        })
    }
}

/// What is known of one gap, ns since the Unix epoch.
#[derive(Debug, Clone, Copy, Default)]
struct GapTimes {
    lo: u64,
    /// Kernel arrival of the packet that revealed it (deadline − timeout).
    revealed: u64,
    /// Start (clock read) of the first cycle after which it is open.
    seen: u64,
    /// End of the cycle that sent its first request.
    sent: Option<u64>,
    /// End of the first cycle after which it is closed.
    filled: Option<u64>,
}

/// The server's receipts: (requested sequence, clock read after `recv`).
type Receipts = Mutex<Vec<(u64, u64)>>;

/// The message blocks of a MoldUDP64 data packet built here, in order.
fn blocks(packet: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = packet.get(20..).unwrap_or(&[]);
    std::iter::from_fn(move || {
        let len = usize::from(u16::from_be_bytes([*rest.first()?, *rest.get(1)?]));
        let block = rest.get(2..2 + len)?;
        rest = &rest[2 + len..];
        Some(block)
    })
}

/// Answers each request at once, as the venue's server does, with one data
/// packet from its sequence: at most its count of `messages` (sequence 1
/// first) and what fits 1,472 bytes; until `stop`. Returns (answered,
/// unanswerable).
fn serve(
    socket: &UdpSocket,
    messages: &[&[u8]],
    receipts: &Receipts,
    stop: &AtomicBool,
) -> anyhow::Result<(u64, u64)> {
    socket.set_read_timeout(Some(Duration::from_millis(20)))?;
    let mut buf = [0u8; 64];
    let (mut answered, mut unanswerable) = (0, 0);
    let start = Instant::now();
    while !stop.load(Ordering::Acquire) && start.elapsed() < STEP_LIMIT * 2 {
        let Ok((n, from)) = socket.recv_from(&mut buf) else {
            continue;
        };
        let t = now_ns();
        let Some(r) = Request::decode(&buf[..n]) else {
            unanswerable += 1;
            continue;
        };
        if let Ok(mut v) = receipts.lock() {
            v.push((r.sequence, t));
        }
        let first = usize::try_from(r.sequence).unwrap_or(0);
        if r.session != SESSION || r.count == 0 || first == 0 || first > messages.len() {
            unanswerable += 1;
            continue;
        }
        let mut p = PacketBuilder::new(SESSION, r.sequence);
        for m in messages[first - 1..].iter().take(usize::from(r.count)) {
            if p.len() + 2 + m.len() > MAX_DATAGRAM {
                break;
            }
            p.message(m);
        }
        socket.send_to(&p.finish(), from)?;
        answered += 1;
    }
    Ok((answered, unanswerable))
}

/// Sends `packets` to both lines at `rate` packets/s, skipping those whose
/// index `drop` says. Returns the packets sent.
fn send_paced(
    tx: &UdpSocket,
    packets: &[Vec<u8>],
    lines: [u16; 2],
    rate: u64,
    drop: impl Fn(usize) -> bool,
    sent: &AtomicU64,
) -> anyhow::Result<u64> {
    let dsts = [sockaddr(loopback(lines[0])), sockaddr(loopback(lines[1]))];
    let start = Instant::now();
    let (mut n, mut i) = (0u64, 0usize);
    // What is due is sent, then the thread sleeps: the receive thread and
    // the server keep the CPU time they need.
    while i < packets.len() {
        ensure!(start.elapsed() < STEP_LIMIT, "the sender did not finish");
        let due = ((start.elapsed().as_secs_f64() * rate as f64) as usize).min(packets.len());
        while i < due {
            if !drop(i) {
                send_all(tx, std::slice::from_ref(&packets[i]), &dsts)?;
                n += 1;
            }
            i += 1;
            sent.store(i as u64, Ordering::Release);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(n)
}

/// SO_RCVBUF of the recovery row's line sockets, bytes.
const RCVBUF: usize = 32 << 20;

/// ns `b − a`, recorded.
fn record(h: &mut Histogram<u64>, a: u64, b: u64) {
    h.saturating_record(b.saturating_sub(a));
}

/// The `itch-recovery-latency` row.
pub fn recovery(a: &RecoveryArgs) -> anyhow::Result<Value> {
    a.check()?;
    let ports: [u16; 3] = distinct_ports()?;
    let server = UdpSocket::bind(loopback(ports[2]))?;
    let shm = ShmFile(format!(
        "/dev/shm/tickguard-bench-itch-recovery-{}",
        std::process::id()
    ));
    let config = config(&shm.0, [ports[0], ports[1]], RCVBUF, Some(ports[2]))?;
    let timeout = match &config.feeds[0].settings {
        ProtocolSettings::Itch50(c) => c.gap_timeout_ns,
        _ => 0,
    };
    let rmem = RmemMax::raise(RCVBUF, true);
    let mut sidecar = Sidecar::start(&config)?;
    drop(rmem);
    let drops0 = drops([ports[0], ports[1]])?;
    let count = WARM + a.gaps * a.drop_every;
    let (mut all, mut starts) = packets(count as u64 * 22, a.stocks)?;
    ensure!(
        all.len() >= count,
        "the synthetic day made {} of {count} packets",
        all.len()
    );
    all.truncate(count);
    starts.truncate(count);
    let dropped = |i: usize| i >= WARM && (i - WARM) % a.drop_every == a.drop_every / 2;
    let receipts = Receipts::default();
    let stop = AtomicBool::new(false);
    let progress = AtomicU64::new(0);
    let tx = UdpSocket::bind("127.0.0.1:0")?;

    let mut gaps: Vec<GapTimes> = Vec::with_capacity(a.gaps + 16);
    let mut open: Vec<usize> = Vec::with_capacity(64);
    let [mut apply, mut tail_sending, mut tail_other] = [histogram(), histogram(), histogram()];
    let (mut cycles, mut sending_cycles, mut requests_without_data) = (0u64, 0u64, 0u64);
    let (sent, served) = std::thread::scope(|s| -> anyhow::Result<_> {
        let messages: Vec<&[u8]> = all.iter().flat_map(|p| blocks(p)).collect();
        let (receipts, stop) = (&receipts, &stop);
        let server_thread = s.spawn(move || serve(&server, &messages, receipts, stop));
        let sender =
            s.spawn(|| send_paced(&tx, &all, [ports[0], ports[1]], a.rate, dropped, &progress));
        let start = Instant::now();
        let mut requests = sidecar.requests_sent();
        let mut sender_done = None;
        let last_start = starts[starts.len() - 1];
        loop {
            let t0 = now_ns();
            let (mut first, mut last) = (0u64, 0u64);
            let n = sidecar.cycle_with(t0, |_| {
                last = now_ns();
                if first == 0 {
                    first = last;
                }
            });
            let t1 = now_ns();
            cycles += 1;
            let now_requests = sidecar.requests_sent();
            let sending = now_requests > requests;
            requests = now_requests;
            if n > 0 && last > 0 {
                record(&mut apply, t0, last);
                record(
                    if sending {
                        &mut tail_sending
                    } else {
                        &mut tail_other
                    },
                    last,
                    t1,
                );
            } else if sending {
                requests_without_data += 1;
            }
            sending_cycles += u64::from(sending);
            let seq = sidecar.handler().feeds()[0]
                .engine()
                .itch()
                .context("not an itch50 feed")?
                .sequencer();
            // Closed since the last cycle.
            open.retain(|&k| {
                let g = &mut gaps[k];
                let still = seq.gaps().any(|(lo, ..)| lo == g.lo);
                if !still {
                    g.filled = Some(t1);
                }
                still
            });
            for (lo, _, _, deadline) in seq.gaps() {
                if !open.iter().any(|&k| gaps[k].lo == lo) {
                    open.push(gaps.len());
                    gaps.push(GapTimes {
                        lo,
                        revealed: deadline.saturating_sub(timeout),
                        seen: t0,
                        ..GapTimes::default()
                    });
                }
            }
            if sending {
                for &k in &open {
                    gaps[k].sent.get_or_insert(t1);
                }
            }
            // Done when everything is sent and applied, or (lost in the
            // kernel: counted below) nothing more came for a second.
            if progress.load(Ordering::Acquire) == all.len() as u64 && open.is_empty() {
                let at = *sender_done.get_or_insert_with(Instant::now);
                if seq.next().unwrap_or(0) > last_start || at.elapsed() > Duration::from_secs(1) {
                    break;
                }
            }
            ensure!(
                start.elapsed() < STEP_LIMIT * 2,
                "the run did not settle: {} gaps open, next {:?} of {}, {} given up, {} of {} packets sent",
                open.len(),
                seq.next(),
                starts[starts.len() - 1],
                seq.counters().gaps_given_up,
                progress.load(Ordering::Acquire),
                all.len()
            );
        }
        stop.store(true, Ordering::Release);
        let sent = sender
            .join()
            .map_err(|_| anyhow::anyhow!("sender panicked"))??;
        let served = server_thread
            .join()
            .map_err(|_| anyhow::anyhow!("server panicked"))??;
        Ok((sent, served))
    })?;
    let receipts = receipts
        .into_inner()
        .map_err(|_| anyhow::anyhow!("poisoned"))?;
    let [mut seen_sent, mut sent_server, mut sent_filled, mut revealed_sent, mut revealed_filled, mut seen_filled] = [
        histogram(),
        histogram(),
        histogram(),
        histogram(),
        histogram(),
        histogram(),
    ];
    let mut unfilled = 0;
    for g in &gaps {
        let (Some(sent), Some(filled)) = (g.sent, g.filled) else {
            unfilled += 1;
            continue;
        };
        record(&mut seen_sent, g.seen, sent);
        record(&mut revealed_sent, g.revealed, sent);
        record(&mut sent_filled, sent, filled);
        record(&mut revealed_filled, g.revealed, filled);
        record(&mut seen_filled, g.seen, filled);
        if let Some(&(_, t)) = receipts.iter().find(|(q, _)| *q == g.lo) {
            record(&mut sent_server, sent, t);
        }
    }
    let expected = (0..all.len()).filter(|&i| dropped(i)).count();
    let c = &sidecar.handler().feeds()[0].counters;
    let given_up = sidecar.handler().feeds()[0]
        .engine()
        .itch()
        .map_or(0, |it| it.sequencer().counters().gaps_given_up);
    Ok(json!({
        "row": "itch_recovery_latency",
        "gaps_made": expected,
        "gaps_seen": gaps.len(),
        "gaps_without_request_or_fill": unfilled,
        "gaps_given_up": given_up,
        "packets": all.len(),
        "packets_sent_per_line": sent,
        "rate_packets_per_s": a.rate,
        "drop_every": a.drop_every,
        "requests_sent": sidecar.requests_sent(),
        "server_requests_received": receipts.len(),
        "server_answered": served.0,
        "server_unanswerable": served.1,
        "sidecar_packets": c.packets,
        "kernel_drops": drops([ports[0], ports[1]])? - drops0,
        "legs": {
            "seen_to_sent": summary(&seen_sent),
            "sent_to_server_received": summary(&sent_server),
            "sent_to_filled": summary(&sent_filled),
            "seen_to_filled": summary(&seen_filled),
            "revealed_to_sent": summary(&revealed_sent),
            "revealed_to_filled": summary(&revealed_filled),
        },
        "legs_note": "seen: start of the first cycle after which the gap is open; sent: end of the cycle that sent its first request; server_received: the server thread's clock read after recv; filled: end of the first cycle after which it is closed; revealed: kernel arrival of the packet that showed it",
        "receive_thread": {
            "cycles": cycles,
            "cycles_that_sent": sending_cycles,
            "sending_cycles_without_data": requests_without_data,
            "apply": summary(&apply),
            "after_apply_sending": summary(&tail_sending),
            "after_apply_not_sending": summary(&tail_other),
            "note": "apply: cycle start to the last datagram applied (receive + apply); after_apply: from there to the cycle's end (the cycle's tops published, expiry, re-requests when sending, heartbeat)",
        },
    }))
}
