//! Row "Live receive": datagrams/s the sidecar drains on loopback with zero
//! lost ticks, side by side in one run with
//!
//! - a bare `recvmmsg` loop that only counts, on a second socket set up
//!   exactly like the sidecar's (`LineSocket` + `Batch`), and
//! - the straightforward tokio implementation kept in
//!   `benches/naive_tokio.rs` (`recv_from` in a task, `Mutex<HashMap>`).
//!
//! On loopback the sender is the bottleneck (its `send` also runs the
//! kernel's receive path), so the receivers' own speed is measured on a
//! pre-filled receive queue: the three sockets are filled with the same
//! datagrams while nobody reads, then each is drained and timed. A paced
//! stream at a few rates then shows the sidecar keeps up with zero loss.

use anyhow::Context;
use serde_json::json;
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickguard::config::Config;
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::shm::counter;
use tickguard::sidecar::Sidecar;
use tickguard::symbol::Symbol;
use tickguard::sys::udp::{Batch, LineSocket};
use tickguard::time::now_ns;

use crate::harness::{
    distinct_ports, median, proc_udp, require, send_all, sockaddr, within, Queue, RmemMax,
    RCVBUF_BYTES, RMEM_MAX, RUNS,
};

#[path = "../../benches/naive_tokio.rs"]
mod naive_tokio;

/// Flags.
#[derive(clap::Args)]
pub struct Args {
    /// Symbols the quotes are spread over (in-order sequences, full feed;
    /// 1 to 1,000,000).
    #[arg(long, default_value_t = 10_000)]
    symbols: usize,
    /// SO_RCVBUF requested per socket, bytes (4,096 to 2^30 − 1). As root,
    /// net.core.rmem_max is raised to this while the sockets are opened,
    /// then restored.
    #[arg(long, default_value_t = 64 << 20)]
    rcvbuf: usize,
    /// Never touch net.core.rmem_max: work within its cap.
    #[arg(long)]
    no_sysctl: bool,
    /// Fraction of the granted receive buffer to fill (kernel accounting;
    /// 0.01 to 0.99).
    #[arg(long, default_value_t = 0.8)]
    fill: f64,
    /// Most datagrams per fill (1,000 to 2,000,000).
    #[arg(long, default_value_t = 200_000)]
    max_datagrams: u64,
    /// Fill-and-drain rounds (1 to 100); the median of each side is kept.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Paced sender rates, datagrams/s (at most 10 rates, each 0 to
    /// 10,000,000); 0 = as fast as the sender can.
    #[arg(long, value_delimiter = ',', default_value = "100000,200000,400000,0")]
    rates: Vec<u64>,
    /// Seconds of sending per paced rate (0.1 to 10).
    #[arg(long, default_value_t = 2.0)]
    paced_seconds: f64,
}

impl Args {
    /// Refuses a flag out of its range.
    fn check(&self) -> anyhow::Result<()> {
        within("--symbols", self.symbols, 1..=1_000_000)?;
        within("--rcvbuf", self.rcvbuf, RCVBUF_BYTES)?;
        within("--fill", self.fill, 0.01..=0.99)?;
        within("--max-datagrams", self.max_datagrams, 1_000..=2_000_000)?;
        within("--runs", self.runs, RUNS)?;
        require((1..=10).contains(&self.rates.len()), || {
            format!("--rates takes from 1 to 10 rates, not {}", self.rates.len())
        })?;
        for &r in &self.rates {
            within("--rates", r, 0..=10_000_000)?;
        }
        within("--paced-seconds", self.paced_seconds, 0.1..=10.0)
    }
}

const PER_DATAGRAM: usize = 10;
/// Datagrams per `sendmmsg` of the paced sender.
const PACED_BURST: usize = 8;
/// Longest any single drain or wait may take.
const STEP_LIMIT: Duration = Duration::from_secs(15);

/// The provider: in-order per-symbol sequences over `symbols`, 10 quotes a
/// datagram, symbols picked pseudo-randomly.
struct Gen {
    names: Vec<Symbol>,
    seq: Vec<u64>,
    x: u64,
}

impl Gen {
    fn new(symbols: usize) -> anyhow::Result<Gen> {
        Ok(Gen {
            names: (0..symbols.max(1))
                .map(|i| Symbol::parse(&format!("S{i:07}")).context("a symbol name"))
                .collect::<anyhow::Result<_>>()?,
            seq: vec![0; symbols.max(1)],
            x: 0x2545_f491_4f6c_dd1d,
        })
    }

    fn datagram(&mut self) -> Vec<u8> {
        let t = now_ns();
        let mut b = PacketBuilder::new(t);
        for _ in 0..PER_DATAGRAM {
            self.x ^= self.x << 13;
            self.x ^= self.x >> 7;
            self.x ^= self.x << 17;
            let k = (self.x % self.names.len() as u64) as usize;
            self.seq[k] += 1;
            b.quote(self.names[k], self.seq[k], t, 1.0850, 1.0851);
        }
        b.finish()
    }
}

/// The three receivers, the sender socket and the provider.
struct Rig {
    sidecar: Sidecar,
    /// Removed after the sidecar is dropped (fields drop in order).
    shm: crate::harness::ShmFile,
    bare: LineSocket,
    bare_batch: Batch,
    bare_kernel_drops: u64,
    naive_rcvbuf: usize,
    rt: tokio::runtime::Runtime,
    naive_socket: Arc<tokio::net::UdpSocket>,
    naive: Option<naive_tokio::Feed>,
    ports: [u16; 3],
    tx: UdpSocket,
    gen: Gen,
}

fn open(a: &Args) -> anyhow::Result<(Rig, serde_json::Value)> {
    let ports = distinct_ports()?;
    // Removed on any error from here on, or by the rig.
    let shm = crate::harness::ShmFile(format!(
        "/dev/shm/tickguard-bench-live-{}",
        std::process::id()
    ));
    let config = Config::parse(
        &format!(
            "[state]\ncapacity = {}\n[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{}\"\n\
             idle = \"spin\"\nrcvbuf_bytes = {}\n[[feed]]\nname = \"live\"\nkind = \"full\"\n\
             lines = [\"127.0.0.1:{}\"]\nstale_threshold_ms = 500\nsource_threshold_ms = 2000\n",
            (a.symbols * 2).next_power_of_two().max(16),
            shm.0,
            a.rcvbuf,
            ports[0]
        ),
        "live-bench",
    )?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Every socket is opened while rmem_max is raised; restored right after.
    let rmem = RmemMax::raise(a.rcvbuf, !a.no_sysctl);
    let sidecar = Sidecar::start(&config)?;
    let bare_addr = SocketAddrV4::new([127, 0, 0, 1].into(), ports[1]);
    let bare = LineSocket::open(bare_addr, None, config.sidecar.interface, a.rcvbuf)
        .with_context(|| format!("bare socket {bare_addr}"))?;
    let naive_std =
        naive_tokio::bind(SocketAddrV4::new([127, 0, 0, 1].into(), ports[2]), a.rcvbuf)?;
    let (original, raised_to) = (rmem.original, rmem.raised_to);
    drop(rmem);
    let now_max: Option<u64> = std::fs::read_to_string(RMEM_MAX)
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let rmem_info = json!({
        "original": original,
        "raised_to": raised_to,
        "restored": raised_to.is_none() || now_max == Some(original),
    });
    let naive_rcvbuf = socket2::SockRef::from(&naive_std).recv_buffer_size()?;
    let naive_socket = {
        let _guard = rt.enter();
        Arc::new(tokio::net::UdpSocket::from_std(naive_std)?)
    };
    let tx = UdpSocket::bind("127.0.0.1:0")?;
    let bare_batch = Batch::new(config.sidecar.batch);
    let granted = json!({
        "bare": bare.info.rcvbuf,
        "naive": naive_rcvbuf,
    });
    let rig = Rig {
        sidecar,
        shm,
        bare,
        bare_batch,
        bare_kernel_drops: 0,
        naive_rcvbuf,
        rt,
        naive_socket,
        naive: Some(naive_tokio::Feed::new(naive_tokio::Kind::Full)),
        ports,
        tx,
        gen: Gen::new(a.symbols)?,
    };
    Ok((
        rig,
        json!({ "rmem_max": rmem_info, "requested": a.rcvbuf, "granted": granted }),
    ))
}

impl Rig {
    fn dst(&self, i: usize) -> libc::sockaddr_in {
        sockaddr(SocketAddrV4::new([127, 0, 0, 1].into(), self.ports[i]))
    }

    fn queues(&self) -> anyhow::Result<[Queue; 3]> {
        Ok([
            proc_udp(self.ports[0])?,
            proc_udp(self.ports[1])?,
            proc_udp(self.ports[2])?,
        ])
    }

    /// A sender thread sends `n` datagrams to all three receivers while
    /// none reads. Returns the queues afterwards and the sender's rate
    /// (datagrams sent per second, all three copies counted).
    fn fill(&mut self, n: u64) -> anyhow::Result<([Queue; 3], f64)> {
        let dsts = [self.dst(0), self.dst(1), self.dst(2)];
        let (tx, gen) = (&self.tx, &mut self.gen);
        let secs = std::thread::scope(|s| {
            s.spawn(|| -> anyhow::Result<f64> {
                let start = Instant::now();
                let mut sent = 0;
                while sent < n {
                    anyhow::ensure!(start.elapsed() < STEP_LIMIT, "fill did not finish");
                    let k = (n - sent).min(32) as usize;
                    let chunk: Vec<Vec<u8>> = (0..k).map(|_| gen.datagram()).collect();
                    send_all(tx, &chunk, &dsts)?;
                    sent += k as u64;
                }
                Ok(start.elapsed().as_secs_f64())
            })
            .join()
            .map_err(|_| anyhow::anyhow!("fill sender panicked"))?
        })?;
        // Loopback delivery happens inside the send; settle anyway.
        std::thread::sleep(Duration::from_millis(20));
        Ok((self.queues()?, (n * dsts.len() as u64) as f64 / secs))
    }

    /// Runs sidecar duty cycles until it has applied `n` more datagrams.
    fn drain_sidecar(&mut self, n: u64) -> anyhow::Result<f64> {
        let target = self.sidecar.handler().feeds()[0].counters.packets + n;
        let start = Instant::now();
        let deadline = start + STEP_LIMIT;
        while self.sidecar.handler().feeds()[0].counters.packets < target {
            self.sidecar.cycle(now_ns());
            anyhow::ensure!(Instant::now() < deadline, "sidecar drain did not finish");
        }
        Ok(start.elapsed().as_secs_f64())
    }

    /// `Batch::recv` in a loop, counting.
    fn drain_bare(&mut self, n: u64) -> anyhow::Result<f64> {
        let start = Instant::now();
        let deadline = start + STEP_LIMIT;
        let mut got = 0u64;
        while got < n {
            let k = self.bare_batch.recv(&self.bare, 0)?;
            if k > 0 {
                got += k as u64;
                if let Some((_, m)) = self.bare_batch.get(k - 1) {
                    self.bare_kernel_drops = m.drops.map_or(self.bare_kernel_drops, u64::from);
                }
            }
            anyhow::ensure!(Instant::now() < deadline, "bare drain did not finish");
        }
        let secs = start.elapsed().as_secs_f64();
        anyhow::ensure!(got == n, "bare loop received {got} of {n}");
        Ok(secs)
    }

    /// The tokio task until it has seen `n` more datagrams.
    fn drain_naive(&mut self, n: u64) -> anyhow::Result<f64> {
        let feed = self.naive.take().context("naive feed lost")?;
        let until = feed.counters.packets + n;
        let socket = self.naive_socket.clone();
        let start = Instant::now();
        let feed = self.rt.block_on(async move {
            let task = tokio::spawn(naive_tokio::receive(socket, feed, until));
            tokio::time::timeout(STEP_LIMIT, task).await
        });
        let secs = start.elapsed().as_secs_f64();
        let feed = feed.context("naive drain did not finish")???;
        self.naive = Some(feed);
        Ok(secs)
    }

    /// Lets the sidecar publish its counters (every heartbeat period) and
    /// reads its kernel drop counter (SO_RXQ_OVFL) from the publication.
    fn sidecar_kernel_drops(&mut self) -> u64 {
        std::thread::sleep(Duration::from_millis(3));
        self.sidecar.cycle(now_ns());
        tickguard::Reader::open(&self.shm.0)
            .counter(0, counter::KERNEL_DROPS)
            .unwrap_or(u64::MAX)
    }
}

/// Fill-and-drain rounds.
fn drain(a: &Args, rig: &mut Rig) -> anyhow::Result<serde_json::Value> {
    // Size the fill from the kernel's own accounting of a first chunk.
    let probe = 1000u64;
    let before = rig.queues()?;
    let (after, _) = rig.fill(probe)?;
    let truesize = after
        .iter()
        .zip(&before)
        .map(|(a, b)| a.rx_bytes - b.rx_bytes)
        .max()
        .unwrap_or(0)
        / probe;
    anyhow::ensure!(truesize > 0, "no receive-queue accounting in /proc/net/udp");
    // The granted size bounds all three (the sidecar's socket is set up
    // exactly like the bare one).
    let granted = rig.bare.info.rcvbuf.min(rig.naive_rcvbuf) as u64;
    let n = (((granted as f64 * a.fill) as u64) / truesize)
        .min(a.max_datagrams)
        .max(probe);
    // Drain the probe (not timed), then the timed rounds.
    rig.drain_sidecar(probe)?;
    rig.drain_bare(probe)?;
    rig.drain_naive(probe)?;
    let drops0: Vec<u64> = rig.queues()?.iter().map(|q| q.drops).collect();
    let (mut ts, mut tb, mut tn) = (Vec::new(), Vec::new(), Vec::new());
    let mut peak_queue = 0u64;
    let mut fill_rates = Vec::new();
    for r in 0..a.runs.max(1) {
        let (q, sends_per_s) = rig.fill(n)?;
        fill_rates.push(sends_per_s);
        for (i, q) in q.iter().enumerate() {
            anyhow::ensure!(
                q.drops == drops0[i],
                "kernel dropped while filling socket {i}: {q:?}; lower --fill"
            );
            peak_queue = peak_queue.max(q.rx_bytes);
        }
        // Rotate who goes first.
        for k in 0..3 {
            match (r + k) % 3 {
                0 => ts.push(rig.drain_sidecar(n)?),
                1 => tb.push(rig.drain_bare(n)?),
                _ => tn.push(rig.drain_naive(n)?),
            }
        }
    }
    let proc_drops: u64 = rig
        .queues()?
        .iter()
        .zip(&drops0)
        .map(|(q, d)| q.drops - d)
        .sum();
    let sidecar_ovfl = rig.sidecar_kernel_drops();
    let c = rig.sidecar.handler().feeds()[0].counters.clone();
    let naive = rig.naive.as_ref().context("naive feed")?.counters.clone();
    let total = probe + n * a.runs.max(1) as u64;
    anyhow::ensure!(
        c.packets == total && naive.packets == total,
        "sidecar {} naive {} of {total}",
        c.packets,
        naive.packets
    );
    let rate = |v: &[f64]| n as f64 / median(v);
    let (s, b, nv) = (rate(&ts), rate(&tb), rate(&tn));
    let kernel_drops = proc_drops + sidecar_ovfl + rig.bare_kernel_drops;
    Ok(json!({
        "tickguard_datagrams_per_s": s.round(),
        "bare_recvmmsg_datagrams_per_s": b.round(),
        "ratio": s / b,
        "naive_tokio_datagrams_per_s": nv.round(),
        "tickguard_vs_naive": s / nv,
        "tickguard_messages_per_s": (s * PER_DATAGRAM as f64).round(),
        "bare_recvmmsg_messages_per_s": (b * PER_DATAGRAM as f64).round(),
        "naive_tokio_messages_per_s": (nv * PER_DATAGRAM as f64).round(),
        "datagrams": n,
        "messages_per_datagram": PER_DATAGRAM,
        "datagram_bytes": 16 + PER_DATAGRAM * 48,
        "skb_truesize_bytes": truesize,
        "queue_bytes_at_start": peak_queue,
        "fill_sender_datagrams_per_s": median(&fill_rates).round(),
        "runs": a.runs.max(1),
        "seconds": {"tickguard": ts, "bare_recvmmsg": tb, "naive_tokio": tn},
        "kernel_drops": kernel_drops,
        "kernel_drops_by_source": {
            "proc_net_udp": proc_drops,
            "sidecar_so_rxq_ovfl": sidecar_ovfl,
            "bare_so_rxq_ovfl": rig.bare_kernel_drops,
        },
        "ticks_lost": c.ticks_lost,
        "duplicates": c.duplicates,
        "naive_ticks_lost": naive.ticks_lost,
        "sidecar_packets": c.packets,
        "naive_packets": naive.packets,
    }))
}

/// One paced rate: a sender thread, the sidecar spinning on this thread.
fn paced(rig: &mut Rig, rate: u64, seconds: f64) -> anyhow::Result<serde_json::Value> {
    let before = rig.sidecar.handler().feeds()[0].counters.clone();
    let drops_before = proc_udp(rig.ports[0])?.drops;
    let total = if rate == 0 {
        u64::MAX
    } else {
        (rate as f64 * seconds) as u64
    };
    let dst = [rig.dst(0)];
    let done = AtomicBool::new(false);
    let sent = AtomicU64::new(0);
    let (tx, gen, sidecar) = (&rig.tx, &mut rig.gen, &mut rig.sidecar);
    let mut received = 0;
    let mut cycles = 0u64;
    let sender_secs = std::thread::scope(|s| -> anyhow::Result<f64> {
        let h = s.spawn(|| -> anyhow::Result<f64> {
            let start = Instant::now();
            // Sending may run behind the schedule: it catches up for at
            // most half the duration again, then stops.
            let stop =
                start + Duration::from_secs_f64(if rate == 0 { seconds } else { seconds * 1.5 });
            let mut n = 0u64;
            let r = (|| {
                while n < total && Instant::now() < stop {
                    if rate > 0 {
                        let due = start + Duration::from_secs_f64(n as f64 / rate as f64);
                        while Instant::now() < due {
                            std::hint::spin_loop();
                        }
                    }
                    let k = (total - n).min(PACED_BURST as u64) as usize;
                    let chunk: Vec<Vec<u8>> = (0..k).map(|_| gen.datagram()).collect();
                    send_all(tx, &chunk, &dst)?;
                    n += k as u64;
                    sent.store(n, Ordering::Release);
                }
                Ok(())
            })();
            let secs = start.elapsed().as_secs_f64();
            done.store(true, Ordering::Release);
            r.map(|()| secs)
        });
        let deadline = Instant::now() + Duration::from_secs_f64(seconds * 1.5) + STEP_LIMIT;
        let mut done_at: Option<Instant> = None;
        let target = before.packets;
        loop {
            let now = now_ns();
            cycles += 1;
            if sidecar.cycle(now) == 0 {
                std::hint::spin_loop();
            }
            received = sidecar.handler().feeds()[0].counters.packets - target;
            if done.load(Ordering::Acquire) {
                let t = *done_at.get_or_insert_with(Instant::now);
                if received >= sent.load(Ordering::Acquire)
                    || t.elapsed() > Duration::from_millis(500)
                {
                    break;
                }
            }
            if Instant::now() > deadline {
                break;
            }
        }
        h.join()
            .map_err(|_| anyhow::anyhow!("paced sender panicked"))?
    })?;
    let sent = sent.load(Ordering::Acquire);
    let c = &rig.sidecar.handler().feeds()[0].counters;
    let kernel_drops = proc_udp(rig.ports[0])?.drops - drops_before;
    let achieved = sent as f64 / sender_secs;
    let ticks_lost = c.ticks_lost - before.ticks_lost;
    Ok(json!({
        "rate": rate,
        "sent": sent,
        "received": received,
        "kernel_drops": kernel_drops,
        "ticks_lost": ticks_lost,
        "all_arrived": received == sent && kernel_drops == 0 && ticks_lost == 0,
        "sender_achieved_per_s": achieved.round(),
        "sender_bound": rate == 0 || achieved < 0.97 * rate as f64,
        "sender_seconds": sender_secs,
        "receiver_cycles": cycles,
    }))
}

/// Runs the row.
pub fn run(a: &Args) -> anyhow::Result<serde_json::Value> {
    a.check()?;
    let (mut rig, mut sockets) = open(a)?;
    let drain = drain(a, &mut rig)?;
    // Published by the sidecar with its counters (every heartbeat period).
    sockets["granted"]["sidecar"] =
        json!(tickguard::Reader::open(&rig.shm.0).counter(0, counter::LINE_RCVBUF));
    let mut rows = Vec::new();
    for &rate in &a.rates {
        rows.push(paced(&mut rig, rate, a.paced_seconds)?);
    }
    let stats = rig.sidecar.stats();
    Ok(json!({
        "row": "live_receive",
        "drain": drain,
        "paced": rows,
        "paced_note": "loopback: the sender's sendmmsg also runs the kernel's whole receive path, so one sender thread is the bottleneck (sender_bound); rate 0 = as fast as it can. The sidecar spins on this thread.",
        "symbols": a.symbols,
        "feed_kind": "full",
        "sockets_rcvbuf_bytes": sockets,
        "sidecar_stats": {
            "datagrams": stats.datagrams,
            "cycles": stats.cycles,
            "busy_cycles": stats.busy_cycles,
            "batch_sizes_log2": stats.batch_sizes,
            "socket_errors": stats.socket_errors,
            "oversized": stats.oversized,
        },
        "target_ratio": 0.9,
    }))
}
