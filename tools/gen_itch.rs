//! Seeded generator of the ITCH fixtures in `fixtures/itch/`.
//!
//! `cargo run --bin tickguard-itch-fixtures -- fixtures/itch` writes, byte
//! for byte: a realistic session as a BinaryFILE (plain and gzip), the same
//! session sent as MoldUDP64 on two lines with loss, reordering, duplicates,
//! malformed datagrams, recovery answers and a session change (a pcap), the
//! mid-session join variant of that capture, a configuration and a checks
//! file. `fixtures/README.md` describes what each holds.

use std::io::Write;
use std::net::SocketAddrV4;
use std::path::Path;
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::protocol::itch50::binfile::write_record;
use tickguard::protocol::itch50::synth::{self, Rng, Timed, MARKET_OPEN, SECOND, SESSION_STOCKS};
use tickguard::protocol::itch50::{PacketBuilder, Session};

const SEED: u64 = 0x4954_4348_3530_7631; // "ITCH50v1"
/// 2026-01-05 00:00 America/New_York (05:00 UTC), ns since the Unix epoch.
const MIDNIGHT: u64 = 1_767_589_200 * SECOND;
const MS: u64 = 1_000_000;
const US: u64 = 1_000;
/// Order-flow messages of the main session.
const FLOW: usize = 1_600;
const SESSION_1: Session = Session(*b"2026010501");
const SESSION_2: Session = Session(*b"2026010502");
/// First sequence of the packet where the join variant starts.
const JOIN_AT: u64 = 1_000;
/// Most message bytes a packet carries (a 1,500-byte MTU less headers).
const PACKET_BYTES: usize = 1_400;

const CONFIG: &str = r#"# ITCH fixture configuration: one TotalView-ITCH feed on lines A and B,
# with a re-request server whose answers arrive on port 17000.
[state]
capacity = 64

[[feed]]
name = "nasdaq"
protocol = "itch50"
lines = ["239.2.1.1:26477", "239.2.1.2:26477"]
stale_threshold_ms = 1500
source_threshold_ms = 2000
timezone = "America/New_York"
gap_timeout_ms = 100
recovery = "127.0.0.1:18000"
recovery_listen = "0.0.0.0:17000"
join_gap_max = 500
"#;

fn addr(s: &str) -> SocketAddrV4 {
    s.parse().expect("fixture address")
}

/// A datagram on the wire: local arrival time, source, destination, payload.
#[derive(Clone)]
struct Sent {
    arrival: u64,
    src: SocketAddrV4,
    dst: SocketAddrV4,
    payload: Vec<u8>,
}

/// A downstream packet as the server sends it.
struct Packet {
    /// Send time, ns since the Unix epoch.
    send: u64,
    /// Sequence of its first message.
    sequence: u64,
    /// Sequence one past its last message.
    next: u64,
    bytes: Vec<u8>,
}

/// Groups messages into packets: a packet holds messages at most 20 µs
/// after its first and at most [`PACKET_BYTES`], and is sent 5 µs after
/// its last message.
fn packetize(messages: &[Timed], session: Session) -> Vec<Packet> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let sequence = i as u64 + 1;
        let mut b = PacketBuilder::new(session, sequence);
        let first = messages[i].timestamp;
        while i < messages.len()
            && messages[i].timestamp <= first + 20 * US
            && b.len() + 2 + messages[i].bytes.len() <= PACKET_BYTES
        {
            b.message(&messages[i].bytes);
            i += 1;
        }
        out.push(Packet {
            send: MIDNIGHT + messages[i - 1].timestamp + 5 * US,
            sequence,
            next: i as u64 + 1,
            bytes: b.finish(),
        });
    }
    out
}

/// The two lines and the recovery channel, and what happens to datagrams on them.
struct Wire {
    rng: Rng,
    out: Vec<Sent>,
    a: (SocketAddrV4, SocketAddrV4),
    b: (SocketAddrV4, SocketAddrV4),
}

impl Wire {
    fn line_a(&mut self, at: u64, payload: &[u8]) {
        let delay = 20 * US + self.rng.below(60 * US);
        self.push(at + delay, self.a, payload);
    }

    fn line_b(&mut self, at: u64, payload: &[u8]) {
        let delay = 150 * US + self.rng.below(450 * US);
        self.push(at + delay, self.b, payload);
    }

    fn push(&mut self, arrival: u64, (src, dst): (SocketAddrV4, SocketAddrV4), payload: &[u8]) {
        self.out.push(Sent {
            arrival,
            src,
            dst,
            payload: payload.to_vec(),
        });
    }

    /// Both lines, each losing about 2% (never both), line B repeating about
    /// 2% and holding about 3% back by 1 ms (so they arrive after the next).
    fn both(&mut self, at: u64, payload: &[u8]) {
        let lose_a = self.rng.chance(20);
        if !lose_a {
            self.line_a(at, payload);
        }
        if lose_a || !self.rng.chance(20) {
            let held = if self.rng.chance(30) { MS } else { 0 };
            self.line_b(at + held, payload);
            if self.rng.chance(20) {
                self.line_b(at + held + 5 * US, payload);
            }
        }
    }
}

/// Sends `packets` with heartbeats once a second when idle.
fn send_session(
    w: &mut Wire,
    packets: &[Packet],
    session: Session,
    special: &mut dyn FnMut(&mut Wire, usize, &Packet) -> bool,
) {
    let mut last = packets.first().map_or(0, |p| p.send);
    for (k, p) in packets.iter().enumerate() {
        while last + SECOND <= p.send {
            last += SECOND;
            let hb = PacketBuilder::heartbeat(session, p.sequence);
            w.both(last, &hb);
        }
        if !special(w, k, p) {
            w.both(p.send, &p.bytes);
        }
        last = p.send;
    }
}

/// Datagrams every check of the feed rejects whole, one per reason (spec
/// §1), made from a valid packet holding one Add Order.
fn malformed(add: &Packet) -> Vec<Vec<u8>> {
    let good = &add.bytes;
    let mut control = PacketBuilder::heartbeat(SESSION_1, add.sequence);
    control.push(0);
    let mut overrun = good.clone();
    overrun[21] += 1; // block length one past the end
    let mut empty = good[..20].to_vec();
    empty[19] = 1;
    empty.extend_from_slice(&[0, 0]);
    let mut trailing = good.clone();
    trailing.push(0);
    let mut short_type = good[..20].to_vec();
    short_type.extend_from_slice(&[0, 18]);
    short_type.extend_from_slice(&good[22..40]);
    let mut bad_stock = good.clone();
    bad_stock[22 + 24..22 + 28].copy_from_slice(b"A PL");
    vec![
        good[..10].to_vec(),
        control,
        overrun,
        empty,
        trailing,
        short_type,
        bad_stock,
    ]
}

fn scenario() -> (Vec<Timed>, Vec<Sent>) {
    let s1 = synth::session(SEED, FLOW);
    let at = |s: f64| MIDNIGHT + MARKET_OPEN + (s * SECOND as f64) as u64;
    let s2 = synth::restart(SEED + 1, at(10.0) - MIDNIGHT, 300);
    let mut w = Wire {
        rng: Rng(SEED),
        out: Vec::new(),
        a: (addr("10.0.1.1:26400"), addr("239.2.1.1:26477")),
        b: (addr("10.0.1.2:26400"), addr("239.2.1.2:26477")),
    };
    let recovery = (addr("127.0.0.1:18000"), addr("127.0.0.1:17000"));
    let p1 = packetize(&s1, SESSION_1);
    // Both lines lose three packets from 09:30:03.5: the recovery server's
    // answers fill the gap 8 ms after it shows (the first answer twice).
    let lost_from = p1
        .iter()
        .position(|p| p.send >= at(3.5))
        .expect("packets after 3.5 s");
    let lost = lost_from..lost_from + 3;
    // Both lines lose one packet from 09:30:08.0 that no one resends.
    let given_up = p1
        .iter()
        .position(|p| p.send >= at(8.0))
        .expect("packets after 8 s");
    let add = p1
        .iter()
        .find(|p| p.send >= at(1.5) && p.next == p.sequence + 1 && p.bytes[22] == b'A')
        .expect("a lone Add Order after 1.5 s");
    let bad = malformed(add);
    let mut bad_sent = false;
    send_session(&mut w, &p1, SESSION_1, &mut |w, k, p| {
        if p.send >= at(1.5) && !bad_sent {
            bad_sent = true;
            for (i, d) in bad.iter().enumerate() {
                w.push(at(1.5) + i as u64 * 10 * US, w.a, d);
            }
        }
        if lost.contains(&k) || k == given_up {
            return true;
        }
        if k == lost.end {
            w.line_a(p.send, &p.bytes);
            w.line_b(p.send, &p.bytes);
            let answer = p.send + 8 * MS;
            for (j, q) in p1[lost.clone()].iter().enumerate() {
                w.push(answer + j as u64 * 20 * US, recovery, &q.bytes);
            }
            w.push(answer + MS, recovery, &p1[lost.start].bytes);
            return true;
        }
        // 09:30:01.0–01.2: line B 20 ms late (inside the 100 ms gap timeout)
        // while line A loses every fifth packet.
        if (at(1.0)..at(1.2)).contains(&p.send) {
            if k % 5 != 0 {
                w.line_a(p.send, &p.bytes);
            }
            w.line_b(p.send + 20 * MS, &p.bytes);
            return true;
        }
        false
    });
    let last = p1.last().expect("session 1 has packets");
    let eos = PacketBuilder::end_of_session(SESSION_1, last.next);
    w.line_a(last.send + MS, &eos);
    w.line_b(last.send + MS, &eos);
    // Session 2, then a late line-B copy of session 1's last packet.
    let p2 = packetize(&s2, SESSION_2);
    send_session(&mut w, &p2, SESSION_2, &mut |_, _, _| false);
    w.line_b(at(10.7), &last.bytes);
    // Idle after the flow of session 2: heartbeats until 09:30:14.
    let end2 = p2.last().expect("session 2 has packets");
    let mut t = end2.send + SECOND;
    while t <= at(14.0) {
        w.both(t, &PacketBuilder::heartbeat(SESSION_2, end2.next));
        t += SECOND;
    }
    let mut sent = w.out;
    sent.sort_by_key(|s| s.arrival);
    (s1, sent)
}

/// Checks every 250 ms from 1.25 s before market hours to 14 s after,
/// for each stock and one unknown symbol.
fn checks() -> String {
    let mut out = String::from("time_ns,feed,symbol\n");
    let start = MIDNIGHT + MARKET_OPEN - 1_250 * MS;
    for k in 0..=61u64 {
        for s in SESSION_STOCKS.iter().chain(&["ZZZZ"]) {
            out.push_str(&format!("{},nasdaq,{s}\n", start + k * 250 * MS));
        }
    }
    out
}

fn write_capture(path: &Path, sent: &[Sent]) -> std::io::Result<()> {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::Ethernet)?;
    for s in sent {
        w.write_udp(s.arrival, s.src, s.dst, &s.payload)?;
    }
    w.finish()?.flush()
}

/// True for a session-1 data packet whose first sequence is at least `JOIN_AT`.
fn joins_here(s: &Sent) -> bool {
    let p = &s.payload;
    p.len() > 20
        && p[..10] == SESSION_1.0
        && u64::from_be_bytes(p[10..18].try_into().expect("8 bytes")) >= JOIN_AT
}

fn main() -> anyhow::Result<()> {
    let dir = tickguard::fixtures::output_dir("fixtures/itch");
    std::fs::create_dir_all(&dir)?;
    let (session, sent) = scenario();
    let mut file = Vec::new();
    for m in &session {
        write_record(&mut file, &m.bytes)?;
    }
    std::fs::write(dir.join("session.itch"), &file)?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&file)?;
    std::fs::write(dir.join("session.itch.gz"), gz.finish()?)?;
    write_capture(&dir.join("session.pcap"), &sent)?;
    let join = sent
        .iter()
        .position(joins_here)
        .expect("a packet to join at");
    write_capture(&dir.join("join.pcap"), &sent[join..])?;
    std::fs::write(dir.join("config.toml"), CONFIG)?;
    std::fs::write(dir.join("checks.csv"), checks())?;
    Ok(())
}
