//! The comparison for the "Live receive" row: what a user would write
//! instead of tickguard — a `tokio::net::UdpSocket` read with `recv_from` in
//! an async task, SQF decoded straightforwardly into a `Vec` of messages
//! with `String` symbols, and the spec's section-3 rules applied to an
//! `Arc<Mutex<HashMap<String, State>>>` (sequence filter, gaps, duplicates,
//! suspect on a delta feed, heartbeat, snapshot, price validity).
//!
//! Faithful to the rules, naive in the machinery: it allocates per
//! datagram, hashes `String`s with the standard hasher, takes the lock once
//! per datagram, reads the clock per datagram (no kernel timestamps), and
//! publishes nothing (no shared memory, no clock-offset estimate), so it
//! does less than the sidecar does per datagram.
//!
//! Not a cargo bench target (the manifest turns bench auto-discovery off):
//! `tools/bench/live.rs` includes it as a module, and so does the test that
//! it counts as tickguard does (`tests/it/naive.rs`).

#![allow(dead_code)]

use std::collections::HashMap;
use std::io;
use std::net::SocketAddrV4;
use std::sync::{Arc, Mutex};

/// Full or delta feed (from configuration, as in the spec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Every Quote is a whole price.
    Full,
    /// Quotes are changes: a gap makes the symbol suspect until a Snapshot.
    Delta,
}

/// One decoded message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// 'Q'
    Quote {
        symbol: String,
        sequence: u64,
        source_time: u64,
        bid: f64,
        ask: f64,
    },
    /// 'S'
    Snapshot {
        symbol: String,
        sequence: u64,
        source_time: u64,
        bid: f64,
        ask: f64,
    },
    /// 'H'
    Heartbeat { symbol: String, next_expected: u64 },
    /// Any other type, skipped by its length.
    Unknown(u8),
}

/// One decoded packet.
#[derive(Debug, Clone, PartialEq)]
pub struct Packet {
    /// Provider clock when sent.
    pub send_time: u64,
    /// Its messages, in order.
    pub messages: Vec<Message>,
}

fn u16_le(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u64_le(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn symbol(b: &[u8]) -> Result<String, String> {
    let raw = &b[4..12];
    let name = std::str::from_utf8(raw)
        .map_err(|_| "symbol is not ASCII".to_string())?
        .trim_end_matches(' ');
    if name.is_empty() || !name.bytes().all(|c| (0x21..=0x7e).contains(&c)) {
        return Err(format!("bad symbol {raw:?}"));
    }
    Ok(name.to_string())
}

/// Decodes a datagram, all or nothing (the spec's packet validity rules).
pub fn decode(b: &[u8]) -> Result<Packet, String> {
    if b.len() < 16 {
        return Err("short".into());
    }
    if &b[0..2] != b"SQ" || b[2] != 1 {
        return Err("bad magic or version".into());
    }
    let count = u16_le(b, 4) as usize;
    let send_time = u64_le(b, 8);
    let mut messages = Vec::new();
    let mut at = 16;
    for _ in 0..count {
        if b.len() - at < 4 {
            return Err("message header overrun".into());
        }
        let len = u16_le(b, at) as usize;
        if len < 4 {
            return Err("message length < 4".into());
        }
        if b.len() - at < len {
            return Err("message length overrun".into());
        }
        let m = &b[at..at + len];
        let message = match m[2] {
            code @ (b'Q' | b'S') => {
                if len < 48 {
                    return Err("price message too short".into());
                }
                let (symbol, sequence, source_time) = (symbol(m)?, u64_le(m, 16), u64_le(m, 24));
                let (bid, ask) = (f64::from_bits(u64_le(m, 32)), f64::from_bits(u64_le(m, 40)));
                if code == b'Q' {
                    Message::Quote {
                        symbol,
                        sequence,
                        source_time,
                        bid,
                        ask,
                    }
                } else {
                    Message::Snapshot {
                        symbol,
                        sequence,
                        source_time,
                        bid,
                        ask,
                    }
                }
            }
            b'H' => {
                if len < 24 {
                    return Err("heartbeat too short".into());
                }
                Message::Heartbeat {
                    symbol: symbol(m)?,
                    next_expected: u64_le(m, 16),
                }
            }
            other => Message::Unknown(other),
        };
        messages.push(message);
        at += len;
    }
    if at != b.len() {
        return Err("trailing bytes".into());
    }
    Ok(Packet {
        send_time,
        messages,
    })
}

/// Everything known about one symbol (spec section 3).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    pub baseline: bool,
    pub last_seq: u64,
    pub suspect: bool,
    pub invalid: bool,
    /// Last valid (bid, ask, source_time).
    pub price: Option<(f64, f64, u64)>,
    pub last_alive: u64,
    pub ticks_lost: u64,
    pub duplicates: u64,
}

/// Feed counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub packets: u64,
    pub rejected: u64,
    pub messages: u64,
    pub ticks_lost: u64,
    pub duplicates: u64,
}

fn valid(bid: f64, ask: f64) -> bool {
    bid.is_finite() && ask.is_finite() && bid > 0.0 && ask > 0.0 && bid <= ask
}

fn store_price(s: &mut State, bid: f64, ask: f64, source_time: u64) {
    if valid(bid, ask) {
        s.price = Some((bid, ask, source_time));
        s.invalid = false;
    } else {
        s.invalid = true;
    }
}

/// One feed: its kind, the shared table, its counters.
pub struct Feed {
    pub kind: Kind,
    pub table: Arc<Mutex<HashMap<String, State>>>,
    pub counters: Counters,
}

impl Feed {
    /// An empty feed.
    pub fn new(kind: Kind) -> Feed {
        Feed {
            kind,
            table: Arc::new(Mutex::new(HashMap::new())),
            counters: Counters::default(),
        }
    }

    /// Applies one datagram that arrived at `t` (ns, local clock).
    pub fn on_datagram(&mut self, datagram: &[u8], t: u64) {
        self.counters.packets += 1;
        let packet = match decode(datagram) {
            Ok(p) => p,
            Err(_) => {
                self.counters.rejected += 1;
                return;
            }
        };
        self.counters.messages += packet.messages.len() as u64;
        let mut table = self.table.lock().unwrap();
        for m in packet.messages {
            match m {
                Message::Quote {
                    symbol,
                    sequence,
                    source_time,
                    bid,
                    ask,
                } => {
                    let s = table.entry(symbol).or_default();
                    if s.baseline && sequence <= s.last_seq {
                        s.duplicates += 1;
                        self.counters.duplicates += 1;
                        continue;
                    }
                    if s.baseline && sequence > s.last_seq + 1 {
                        let lost = sequence - s.last_seq - 1;
                        s.ticks_lost += lost;
                        self.counters.ticks_lost += lost;
                        if self.kind == Kind::Delta {
                            s.suspect = true;
                        }
                    }
                    if !s.baseline {
                        s.baseline = true;
                        if self.kind == Kind::Delta {
                            s.suspect = true;
                        }
                    }
                    if self.kind == Kind::Full {
                        s.suspect = false;
                    }
                    s.last_seq = sequence;
                    s.last_alive = t;
                    store_price(s, bid, ask, source_time);
                }
                Message::Snapshot {
                    symbol,
                    sequence,
                    source_time,
                    bid,
                    ask,
                } => {
                    let s = table.entry(symbol).or_default();
                    s.baseline = true;
                    s.last_seq = sequence;
                    s.suspect = false;
                    s.last_alive = t;
                    store_price(s, bid, ask, source_time);
                }
                Message::Heartbeat {
                    symbol,
                    next_expected,
                } => {
                    let s = table.entry(symbol).or_default();
                    if !s.baseline {
                        s.baseline = true;
                        s.last_seq = next_expected.saturating_sub(1);
                        s.suspect = true;
                    } else if next_expected > s.last_seq && next_expected - s.last_seq > 1 {
                        let lost = next_expected - s.last_seq - 1;
                        s.ticks_lost += lost;
                        self.counters.ticks_lost += lost;
                        s.last_seq = next_expected - 1;
                        s.suspect = true;
                    } else {
                        s.last_alive = t;
                    }
                }
                Message::Unknown(_) => {}
            }
        }
    }
}

/// The socket a user would open: SO_RCVBUF set (through socket2, as tokio
/// has no setter), bound, non-blocking, ready for `UdpSocket::from_std`.
pub fn bind(addr: SocketAddrV4, rcvbuf: usize) -> io::Result<std::net::UdpSocket> {
    let s = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    s.set_reuse_address(true)?;
    let _ = s.set_recv_buffer_size(rcvbuf);
    s.bind(&addr.into())?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The receive task: `recv_from` in a loop, each datagram applied as it
/// comes, until the feed has seen `until` datagrams in all.
pub async fn receive(
    socket: Arc<tokio::net::UdpSocket>,
    mut feed: Feed,
    until: u64,
) -> io::Result<Feed> {
    let mut buf = vec![0u8; 65_536];
    while feed.counters.packets < until {
        let (n, _from) = socket.recv_from(&mut buf).await?;
        feed.on_datagram(&buf[..n], now_ns());
    }
    Ok(feed)
}
