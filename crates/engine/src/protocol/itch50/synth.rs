//! Seeded synthetic ITCH 5.0 sessions: for the fixture generator
//! (`tools/gen_itch.rs`), tests and benchmarks. The same seed always gives
//! the same messages.
//!
//! Order flow follows the mix of a real TotalView day: about 46% adds,
//! 40% deletes, 8% replaces, 3% executions, 1.5% cancels and the rest
//! trades and imbalances. Prices cluster within a few cents of a mid that
//! wanders; no add or replace ever crosses the stock's book, executions take
//! the best order, and every delete, cancel, replace and execution names a
//! live order.

use super::binfile::write_record;
use super::message::encode;
use super::Side;
use crate::symbol::Symbol;
use std::io::{self, Write};

/// One nanosecond-since-midnight timestamp, ns.
pub const SECOND: u64 = 1_000_000_000;
/// 09:30:00, the start of market hours, ns since midnight.
pub const MARKET_OPEN: u64 = (9 * 3600 + 30 * 60) * SECOND;
/// One cent in `Price(4)` units.
const TICK: u32 = 100;

/// splitmix64: small, seedable, good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `per_mille` / 1000.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Geometric count: how many times a `per_mille` chance came up in a row, capped.
    fn run(&mut self, per_mille: u64, cap: u32) -> u32 {
        let mut k = 0;
        while k < cap && self.chance(per_mille) {
            k += 1;
        }
        k
    }
}

/// Zipf(1) sampler over `0..n`: rank `k` is drawn with weight `1 / (k + 1)`.
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// A sampler over `n ≥ 1` ranks.
    pub fn new(n: usize) -> Zipf {
        let mut total = 0.0;
        let mut cdf: Vec<f64> = (0..n)
            .map(|k| {
                total += 1.0 / (k + 1) as f64;
                total
            })
            .collect();
        cdf.iter_mut().for_each(|c| *c /= total);
        Zipf { cdf }
    }

    /// A rank.
    pub fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }
}

/// A live order of the simulated book, as a snapshot (GLIMPSE) would send it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Live {
    /// Its order reference.
    pub order: u64,
    /// Its side.
    pub side: Side,
    /// Shares left (executions and cancels take from it).
    pub shares: u32,
    /// `Price(4)`.
    pub price: u32,
    /// The MPID of an `F` add (kept by replaces, as the spec says).
    pub attribution: Option<[u8; 4]>,
    /// Timestamp of the add or replace that made it (ns since midnight).
    pub entered: u64,
}

/// A side's best price (`Price(4)`) and the shares at it; `None` when the side is empty.
pub type Level = Option<(u32, u64)>;

/// One stock of the simulated book.
#[derive(Debug, Clone)]
pub struct Stock {
    /// Its symbol.
    pub symbol: Symbol,
    /// Its locate code (1-based; 0 is reserved).
    pub locate: u16,
    /// Mid price, `Price(4)`.
    mid: u32,
    orders: Vec<Live>,
}

/// The order flow of a set of stocks.
#[derive(Debug, Clone)]
pub struct Flow {
    rng: Rng,
    /// The stocks, locate `i + 1` at index `i`.
    pub stocks: Vec<Stock>,
    next_order: u64,
    next_match: u64,
    /// Live orders a stock may hold; above it adds turn into deletes.
    max_orders: usize,
}

impl Flow {
    /// Stocks named `symbols` (locates 1, 2, …), mids between $10 and $500.
    pub fn new(seed: u64, symbols: &[Symbol], max_orders: usize) -> Flow {
        let mut rng = Rng(seed);
        let stocks = symbols
            .iter()
            .enumerate()
            .map(|(i, &symbol)| Stock {
                symbol,
                locate: u16::try_from(i + 1).expect("at most 65,535 stocks"),
                mid: (10 + rng.below(490) as u32) * 10_000,
                orders: Vec::new(),
            })
            .collect();
        Flow {
            rng,
            stocks,
            next_order: 1,
            next_match: 1,
            max_orders,
        }
    }

    /// The stock directory (`R`) of every stock, at `timestamp`.
    pub fn directory(&self, timestamp: u64) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.stocks
            .iter()
            .map(move |s| encode::stock_directory(s.locate, timestamp, s.symbol))
    }

    /// A trading action (`H`) of every stock, at `timestamp`.
    pub fn trading_actions(&self, timestamp: u64, state: u8) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.stocks
            .iter()
            .map(move |s| encode::trading_action(s.locate, timestamp, s.symbol, state))
    }

    /// Stock `i`'s live orders, in no particular order.
    pub fn orders(&self, i: usize) -> &[Live] {
        &self.stocks[i].orders
    }

    /// Stock `i`'s top of book as the flow holds it: best bid and best ask
    /// (price in `Price(4)`, shares at that price), and its live orders.
    pub fn top(&self, i: usize) -> (Level, Level, u64) {
        let orders = &self.stocks[i].orders;
        let best = |side: Side, better: fn(u32, u32) -> bool| {
            orders
                .iter()
                .filter(|o| o.side == side)
                .fold(None, |best: Level, o| match best {
                    Some((p, n)) if p == o.price => Some((p, n + u64::from(o.shares))),
                    Some((p, _)) if !better(o.price, p) => best,
                    _ => Some((o.price, u64::from(o.shares))),
                })
        };
        (
            best(Side::Buy, |a, b| a > b),
            best(Side::Sell, |a, b| a < b),
            orders.len() as u64,
        )
    }

    /// One order-flow message for stock `i` at `timestamp`.
    pub fn event(&mut self, i: usize, timestamp: u64) -> Vec<u8> {
        if self.rng.chance(50) {
            let step = TICK * (1 + self.rng.below(2) as u32);
            let mid = &mut self.stocks[i].mid;
            *mid = if self.rng.chance(500) {
                *mid + step
            } else {
                mid.saturating_sub(step).max(20 * TICK)
            };
        }
        let roll = self.rng.below(1000);
        let live = self.stocks[i].orders.len();
        let full = live >= self.max_orders;
        match roll {
            _ if live == 0 => self.add(i, timestamp),
            0..460 if !full => self.add(i, timestamp),
            0..860 => self.delete(i, timestamp),
            860..940 => self.replace(i, timestamp),
            940..970 => self.execute(i, timestamp),
            970..985 => self.cancel(i, timestamp),
            985..993 => self.trade(i, timestamp),
            _ => self.imbalance(i, timestamp),
        }
    }

    fn shares(&mut self) -> u32 {
        if self.rng.chance(100) {
            1 + self.rng.below(99) as u32
        } else {
            100 * (1 + self.rng.run(500, 20))
        }
    }

    /// A price near the mid on `side` that does not cross the stock's book.
    fn price(&mut self, i: usize, side: Side) -> u32 {
        let away = TICK * self.rng.run(550, 30);
        let s = &self.stocks[i];
        match side {
            Side::Buy => {
                let ask = s
                    .orders
                    .iter()
                    .filter(|o| o.side == Side::Sell)
                    .map(|o| o.price)
                    .min();
                let p = s.mid.saturating_sub(TICK + away);
                ask.map_or(p, |a| p.min(a.saturating_sub(TICK))).max(TICK)
            }
            Side::Sell => {
                let bid = s
                    .orders
                    .iter()
                    .filter(|o| o.side == Side::Buy)
                    .map(|o| o.price)
                    .max();
                let p = s.mid + TICK + away;
                bid.map_or(p, |b| p.max(b + TICK))
            }
        }
    }

    fn side(&mut self) -> Side {
        if self.rng.chance(500) {
            Side::Buy
        } else {
            Side::Sell
        }
    }

    fn add(&mut self, i: usize, ts: u64) -> Vec<u8> {
        let side = self.side();
        let (shares, price) = (self.shares(), self.price(i, side));
        // No draw comes between the price and this one, wherever the MPID
        // is stored: the draws, and every fixture, are the same.
        let mpid = self.rng.chance(60).then_some(*b"NSDQ");
        let order = self.next_order;
        self.next_order += 1;
        self.stocks[i].orders.push(Live {
            order,
            side,
            shares,
            price,
            attribution: mpid,
            entered: ts,
        });
        let s = &self.stocks[i];
        encode::add_order(s.locate, ts, order, side, shares, s.symbol, price, mpid)
    }

    /// Index of a random live order of stock `i` (there is one).
    fn pick(&mut self, i: usize) -> usize {
        self.rng.below(self.stocks[i].orders.len() as u64) as usize
    }

    fn delete(&mut self, i: usize, ts: u64) -> Vec<u8> {
        let k = self.pick(i);
        let s = &mut self.stocks[i];
        let o = s.orders.swap_remove(k);
        encode::delete(s.locate, ts, o.order)
    }

    fn replace(&mut self, i: usize, ts: u64) -> Vec<u8> {
        let k = self.pick(i);
        let old = self.stocks[i].orders.swap_remove(k);
        let (shares, price) = (self.shares(), self.price(i, old.side));
        let order = self.next_order;
        self.next_order += 1;
        let s = &mut self.stocks[i];
        s.orders.push(Live {
            order,
            side: old.side,
            shares,
            price,
            attribution: old.attribution,
            entered: ts,
        });
        encode::replace(s.locate, ts, old.order, order, shares, price)
    }

    /// Executes part or all of the best order of a random side.
    fn execute(&mut self, i: usize, ts: u64) -> Vec<u8> {
        let side = self.side();
        let s = &self.stocks[i];
        let best = (0..s.orders.len())
            .filter(|&k| s.orders[k].side == side)
            .max_by_key(|&k| match side {
                Side::Buy => s.orders[k].price,
                Side::Sell => u32::MAX - s.orders[k].price,
            });
        let k = match best {
            Some(k) => k,
            None => self.pick(i),
        };
        let matched = self.next_match;
        self.next_match += 1;
        let all = self.rng.chance(600);
        let s = &mut self.stocks[i];
        let o = s.orders[k];
        let shares = if all || o.shares < 2 {
            o.shares
        } else {
            o.shares / 2
        };
        if shares == o.shares {
            s.orders.swap_remove(k);
        } else {
            s.orders[k].shares -= shares;
        }
        encode::executed(s.locate, ts, o.order, shares, matched)
    }

    fn cancel(&mut self, i: usize, ts: u64) -> Vec<u8> {
        let k = self.pick(i);
        let s = &mut self.stocks[i];
        let o = s.orders[k];
        let shares = (o.shares / 2).max(1);
        if shares == o.shares {
            s.orders.swap_remove(k);
        } else {
            s.orders[k].shares -= shares;
        }
        encode::cancel(s.locate, ts, o.order, shares)
    }

    /// A non-displayed trade at the mid (order ref 0, as Nasdaq sends them).
    fn trade(&mut self, i: usize, ts: u64) -> Vec<u8> {
        let (side, shares) = (self.side(), self.shares());
        let matched = self.next_match;
        self.next_match += 1;
        let s = &self.stocks[i];
        encode::trade(s.locate, ts, 0, side, shares, s.symbol, s.mid, matched)
    }

    fn imbalance(&mut self, i: usize, ts: u64) -> Vec<u8> {
        let paired = 100 * self.rng.below(10_000);
        let imbalance = 100 * self.rng.below(1_000);
        let direction = [b'B', b'S', b'N', b'O'][self.rng.below(4) as usize];
        let s = &self.stocks[i];
        encode::noii(s.locate, ts, s.symbol, paired, imbalance, direction, s.mid)
    }
}

/// A message and its timestamp (ns since midnight).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timed {
    /// ns since midnight, as in the message header.
    pub timestamp: u64,
    /// The message.
    pub bytes: Vec<u8>,
}

/// The stocks of [`session`].
pub const SESSION_STOCKS: [&str; 8] = [
    "AAPL", "MSFT", "NVDA", "AMZN", "GOOGL", "META", "TSLA", "QQQ",
];

fn symbol(name: &str) -> Symbol {
    Symbol::parse(name).expect("valid symbol")
}

/// Pushes `flow` order-flow messages between `start` and `end` (ns since
/// midnight), in bursts (gaps mostly 1–30 µs, now and then 1–25 ms, scaled
/// to fit), stocks drawn by Zipf rank; a stock in `halted` gets none.
fn burst(
    out: &mut Vec<Timed>,
    f: &mut Flow,
    rng: &mut Rng,
    (start, end): (u64, u64),
    flow: usize,
    halted: &[usize],
) {
    let zipf = Zipf::new(f.stocks.len());
    let gaps: Vec<u64> = (0..flow)
        .map(|_| {
            if rng.chance(800) {
                1_000 + rng.below(29_000)
            } else {
                1_000_000 + rng.below(24_000_000)
            }
        })
        .collect();
    let total = gaps.iter().sum::<u64>().max(1) as u128;
    let span = (end - start) as u128;
    let mut sum = 0u128;
    for g in gaps {
        sum += g as u128;
        // Strictly inside the window: the last message lands before `end`.
        let t = start + (sum * span / (total + 1)) as u64;
        let mut i = zipf.sample(rng);
        while halted.contains(&i) {
            i = (i + 1) % f.stocks.len();
        }
        out.push(Timed {
            timestamp: t,
            bytes: f.event(i, t),
        });
    }
}

fn push_all(out: &mut Vec<Timed>, timestamp: u64, messages: impl Iterator<Item = Vec<u8>>) {
    out.extend(messages.map(|bytes| Timed { timestamp, bytes }));
}

/// The opening of a session at `start`: start of messages, the directory
/// and a trading action `T` per stock, start of system hours 0.5 s later.
fn opening(out: &mut Vec<Timed>, f: &Flow, start: u64) {
    out.push(Timed {
        timestamp: start,
        bytes: encode::system_event(start, b'O'),
    });
    push_all(out, start + 1_000, f.directory(start + 1_000));
    push_all(out, start + 2_000, f.trading_actions(start + 2_000, b'T'));
    let s = start + SECOND / 2;
    out.push(Timed {
        timestamp: s,
        bytes: encode::system_event(s, b'S'),
    });
}

/// A realistic session compressed into 10.2 s: start of
/// messages at 09:29:59, market hours 09:30:00–09:30:09 for the eight
/// [`SESSION_STOCKS`] with `flow` order-flow messages in two stretches
/// (09:30:00–04 and 06.5–09; idle between, so a MoldUDP64 server
/// would send heartbeats), TSLA halted (`H` `H`) 09:30:02–03 then trading
/// again (`H` `T`), an operational halt of NVDA on Nasdaq (`h` `Q`)
/// 09:30:07.0–07.5 and of AMZN on BX (`h` `B`) 07.2–07.3, and the end
/// (`M`, `E`, `C`) at 09:30:09.0, .1, .2.
pub fn session(seed: u64, flow: usize) -> Vec<Timed> {
    let names: Vec<Symbol> = SESSION_STOCKS.iter().map(|s| symbol(s)).collect();
    let mut f = Flow::new(seed, &names, 200);
    let mut rng = Rng(seed ^ 0x5e55_1011);
    let mut out = Vec::new();
    opening(&mut out, &f, MARKET_OPEN - SECOND);
    out.push(Timed {
        timestamp: MARKET_OPEN,
        bytes: encode::system_event(MARKET_OPEN, b'Q'),
    });
    let at = |s: f64| MARKET_OPEN + (s * SECOND as f64) as u64;
    let (tsla, nvda, amzn) = (6, 2, 3);
    let first = flow * 6 / 10;
    // Flow until 09:30:02, the halt, flow without TSLA, trading again at 03.
    let n = first / 3;
    burst(&mut out, &mut f, &mut rng, (MARKET_OPEN, at(2.0)), n, &[]);
    let halt = |f: &Flow, state| {
        encode::trading_action(f.stocks[tsla].locate, at(2.0), f.stocks[tsla].symbol, state)
    };
    out.push(Timed {
        timestamp: at(2.0),
        bytes: halt(&f, b'H'),
    });
    burst(&mut out, &mut f, &mut rng, (at(2.0), at(3.0)), n, &[tsla]);
    let resume =
        encode::trading_action(f.stocks[tsla].locate, at(3.0), f.stocks[tsla].symbol, b'T');
    out.push(Timed {
        timestamp: at(3.0),
        bytes: resume,
    });
    burst(
        &mut out,
        &mut f,
        &mut rng,
        (at(3.0), at(4.0)),
        first - 2 * n,
        &[],
    );
    // Idle until 06.5, then the second stretch with the operational halts
    // (no NVDA flow 07.0–07.5; the sort below merges the halts in).
    let second = flow - first;
    let m = second / 3;
    burst(&mut out, &mut f, &mut rng, (at(6.5), at(7.0)), m, &[]);
    burst(&mut out, &mut f, &mut rng, (at(7.0), at(7.5)), m, &[nvda]);
    let op = |f: &Flow, i: usize, t: f64, market, action| Timed {
        timestamp: at(t),
        bytes: encode::operational_halt(
            f.stocks[i].locate,
            at(t),
            f.stocks[i].symbol,
            market,
            action,
        ),
    };
    out.push(op(&f, nvda, 7.0, b'Q', b'H'));
    out.push(op(&f, amzn, 7.2, b'B', b'H'));
    out.push(op(&f, amzn, 7.3, b'B', b'T'));
    out.push(op(&f, nvda, 7.5, b'Q', b'T'));
    burst(
        &mut out,
        &mut f,
        &mut rng,
        (at(7.5), at(9.0)),
        second - 2 * m,
        &[],
    );
    for (t, code) in [(9.0, b'M'), (9.1, b'E'), (9.2, b'C')] {
        out.push(Timed {
            timestamp: at(t),
            bytes: encode::system_event(at(t), code),
        });
    }
    // Stable: the flow of each window keeps its order.
    out.sort_by_key(|m| m.timestamp);
    out
}

/// A short session after a restart of the server at `start` (ns since
/// midnight): the opening, market hours 0.6 s later, then `flow` messages
/// over one second.
pub fn restart(seed: u64, start: u64, flow: usize) -> Vec<Timed> {
    let names: Vec<Symbol> = SESSION_STOCKS.iter().map(|s| symbol(s)).collect();
    let mut f = Flow::new(seed, &names, 200);
    let mut rng = Rng(seed ^ 0x2e57_a127);
    let mut out = Vec::new();
    opening(&mut out, &f, start);
    let q = start + 6 * SECOND / 10;
    out.push(Timed {
        timestamp: q,
        bytes: encode::system_event(q, b'Q'),
    });
    burst(&mut out, &mut f, &mut rng, (q, q + SECOND), flow, &[]);
    out
}

/// A four-letter symbol for stock `i` (`AAAA`, `AAAB`, …).
fn day_symbol(i: usize) -> Symbol {
    let mut name = [b'A'; 4];
    let mut k = i;
    for c in name.iter_mut().rev() {
        *c = b'A' + (k % 26) as u8;
        k /= 26;
    }
    Symbol::parse(std::str::from_utf8(&name).expect("ASCII")).expect("valid symbol")
}

/// Writes a synthetic trading day as a BinaryFILE to `out`: start of
/// messages at 03:00, the directory of `stocks` (1 to 65,535) four-letter
/// stocks, system hours at 04:00, market hours 09:30–16:00 holding the
/// order flow (stocks drawn by Zipf rank, so a few are very busy), end of
/// market, system hours and messages at 16:00, 20:00 and 20:05. Writes
/// `max(messages, stocks + 6)` records; returns that count.
pub fn synthetic_day<W: Write>(out: W, messages: u64, stocks: usize, seed: u64) -> io::Result<u64> {
    if stocks == 0 || stocks > usize::from(u16::MAX) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "stocks must be 1 to 65,535",
        ));
    }
    let mut out = io::BufWriter::with_capacity(1 << 20, out);
    let names: Vec<Symbol> = (0..stocks).map(day_symbol).collect();
    let mut f = Flow::new(seed, &names, 100);
    let mut rng = Rng(seed ^ 0xda7);
    let zipf = Zipf::new(stocks);
    let hour = 3600 * SECOND;
    let mut n = 0u64;
    let mut put = |out: &mut io::BufWriter<W>, m: &[u8]| {
        n += 1;
        write_record(out, m)
    };
    put(&mut out, &encode::system_event(3 * hour, b'O'))?;
    for m in f.directory(3 * hour + 1_000) {
        put(&mut out, &m)?;
    }
    put(&mut out, &encode::system_event(4 * hour, b'S'))?;
    put(&mut out, &encode::system_event(MARKET_OPEN, b'Q'))?;
    let flow = messages.saturating_sub(stocks as u64 + 6);
    let step = (6 * hour + hour / 2) / flow.max(1);
    for k in 0..flow {
        let t = MARKET_OPEN + k * step + rng.below(step.max(1));
        let i = zipf.sample(&mut rng);
        put(&mut out, &f.event(i, t))?;
    }
    for (t, code) in [
        (16 * hour, b'M'),
        (20 * hour, b'E'),
        (20 * hour + 300 * SECOND, b'C'),
    ] {
        put(&mut out, &encode::system_event(t, code))?;
    }
    out.flush()?;
    Ok(n)
}

/// Fewest and most messages per packet of [`two_line_capture`].
pub const CAPTURE_PER_PACKET: (usize, usize) = (10, 30);

/// Line B's copy of a packet in [`two_line_capture`] arrives this long
/// after line A's, ns.
pub const CAPTURE_LINE_B_LAG_NS: u64 = 20_000;

/// Writes a pcap (ns, Ethernet) of BinaryFILE `day` as two lines carry it
/// to `out`: its records packed into MoldUDP64 packets of
/// [`CAPTURE_PER_PACKET`] messages (sizes drawn with `seed`, session
/// `20260105BN`), each sent from 10.0.0.1:4000 to `lines[0]` at `midnight`
/// (ns since the Unix epoch) plus its last message's time (kept from going
/// back), and to `lines[1]` [`CAPTURE_LINE_B_LAG_NS`] later. Returns the
/// messages and the packets a line.
pub fn two_line_capture<R: io::Read, W: io::Write>(
    day: R,
    out: W,
    midnight: u64,
    lines: [std::net::SocketAddrV4; 2],
    seed: u64,
) -> io::Result<(u64, u64)> {
    use crate::capture::link::Link;
    use crate::capture::write::{CaptureWriter, Format};
    let src = std::net::SocketAddrV4::new(std::net::Ipv4Addr::new(10, 0, 0, 1), 4000);
    let mut w = CaptureWriter::new(out, Format::PcapNanos, Link::Ethernet)?;
    let (mut packets, mut last) = (0u64, 0u64);
    let session = super::Session(*b"20260105BN");
    let messages = mold_packets(day, session, CAPTURE_PER_PACKET, seed, |ts, p| {
        // The synthetic day's times jitter within a step.
        last = last.max(midnight + ts);
        w.write_udp(last, src, lines[0], p)?;
        w.write_udp(last + CAPTURE_LINE_B_LAG_NS, src, lines[1], p)?;
        packets += 1;
        Ok(())
    })?;
    w.finish()?;
    Ok((messages, packets))
}

/// Packs the records of BinaryFILE `day` into MoldUDP64 data packets of
/// `min..=max` messages each (sizes drawn with `seed`; 1 ≤ `min` ≤ `max`),
/// sequences from 1 in `session`, and hands each to `f` with the timestamp
/// of its last message (ns since midnight). Returns the messages packed.
pub fn mold_packets<R: io::Read>(
    day: R,
    session: super::Session,
    (min, max): (usize, usize),
    seed: u64,
    mut f: impl FnMut(u64, &[u8]) -> io::Result<()>,
) -> io::Result<u64> {
    let mut file = super::binfile::BinFile::new(day);
    let mut rng = Rng(seed);
    let min = min.max(1);
    let span = (max.max(min) - min + 1) as u64;
    let mut size = || min + rng.below(span) as usize;
    let mut packet = super::PacketBuilder::new(session, 1);
    let (mut n, mut target, mut last) = (0u64, size(), 0u64);
    while let Some((_, record)) = file.next_record().map_err(io::Error::other)? {
        last = super::Message::new(record).timestamp().unwrap_or(last);
        packet.message(record);
        n += 1;
        if usize::from(packet.count()) == target {
            let full = std::mem::replace(&mut packet, super::PacketBuilder::new(session, n + 1));
            f(last, &full.finish())?;
            target = size();
        }
    }
    if !packet.is_empty() {
        f(last, &packet.finish())?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::super::binfile::BinFile;
    use super::super::message::check;
    use super::super::{Body, Message};
    use super::*;
    use std::collections::HashMap;
    use std::io::Cursor;

    /// Reads a BinaryFILE and checks that the flow is consistent: every
    /// record valid, every order reference live, no book crossed. Returns
    /// the count of messages by type letter.
    fn replay_book(bytes: Vec<u8>) -> HashMap<u8, u64> {
        let mut r = BinFile::new(Cursor::new(bytes));
        let mut live: HashMap<u64, (u16, u8, u32, u32)> = HashMap::new();
        let mut types = HashMap::new();
        while let Some((_, rec)) = r.next_record().unwrap() {
            assert_eq!(check(rec), Ok(()));
            let m = Message::new(rec);
            *types.entry(m.code()).or_insert(0) += 1;
            let loc = m.locate();
            match m.body() {
                Body::AddOrder {
                    order,
                    side,
                    shares,
                    price,
                    ..
                } => {
                    assert!(live.insert(order, (loc, side, shares, price)).is_none());
                    let crossed = live.values().any(|&(l, s, _, p)| {
                        l == loc && s != side && if side == b'B' { p <= price } else { p >= price }
                    });
                    assert!(!crossed, "add crosses the book");
                }
                Body::Delete { order } => assert!(live.remove(&order).is_some()),
                Body::Replace {
                    original,
                    new,
                    shares,
                    price,
                } => {
                    let (l, s, _, _) = live.remove(&original).expect("live original");
                    assert!(live.insert(new, (l, s, shares, price)).is_none());
                }
                Body::Executed { order, shares, .. } | Body::Cancel { order, shares } => {
                    let o = live.get_mut(&order).expect("live order");
                    assert!(shares <= o.2);
                    o.2 -= shares;
                    if o.2 == 0 {
                        live.remove(&order);
                    }
                }
                _ => {}
            }
        }
        types
    }

    #[test]
    fn synthetic_day_is_seeded_consistent_and_has_the_mix() {
        let day = |seed| {
            let mut out = Vec::new();
            assert_eq!(synthetic_day(&mut out, 20_000, 50, seed).unwrap(), 20_000);
            out
        };
        let a = day(7);
        assert_eq!(a, day(7));
        assert_ne!(a, day(8));
        let types = replay_book(a);
        let share = |codes: &[u8]| {
            codes
                .iter()
                .map(|c| types.get(c).copied().unwrap_or(0))
                .sum::<u64>()
                * 1000
                / 20_000
        };
        assert!((430..=490).contains(&share(b"AF")), "adds {types:?}");
        assert!((360..=420).contains(&share(b"D")), "deletes {types:?}");
        assert!((60..=100).contains(&share(b"U")), "replaces {types:?}");
        assert!((20..=40).contains(&share(b"E")), "executions {types:?}");
        assert_eq!(types[&b'R'], 50);
    }

    #[test]
    fn synthetic_day_rejects_a_stock_count_out_of_range() {
        assert!(synthetic_day(Vec::new(), 10, 0, 1).is_err());
        assert!(synthetic_day(Vec::new(), 10, 65_536, 1).is_err());
    }

    #[test]
    fn session_is_in_time_order_and_consistent() {
        let s = session(3, 2_000);
        assert!(s.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
        let mut file = Vec::new();
        for m in &s {
            assert_eq!(Message::new(&m.bytes).timestamp(), Some(m.timestamp));
            write_record(&mut file, &m.bytes).unwrap();
        }
        let types = replay_book(file);
        assert_eq!(types[&b'S'], 6);
        assert_eq!(types[&b'h'], 4);
    }

    #[test]
    fn top_is_the_best_price_and_its_shares() {
        let names = [symbol("AAPL")];
        let mut f = Flow::new(5, &names, 50);
        for k in 0..500 {
            f.event(0, k);
        }
        let o = &f.stocks[0].orders;
        let (bid, ask, n) = f.top(0);
        assert_eq!(n, o.len() as u64);
        let best_bid = o
            .iter()
            .filter(|o| o.side == Side::Buy)
            .map(|o| o.price)
            .max();
        let size = |p: u32, side| {
            o.iter()
                .filter(|o| o.side == side && o.price == p)
                .map(|o| u64::from(o.shares))
                .sum()
        };
        assert_eq!(bid, best_bid.map(|p| (p, size(p, Side::Buy))));
        let best_ask = o
            .iter()
            .filter(|o| o.side == Side::Sell)
            .map(|o| o.price)
            .min();
        assert_eq!(ask, best_ask.map(|p| (p, size(p, Side::Sell))));
        assert!(bid.is_some() && ask.is_some() && bid.unwrap().0 < ask.unwrap().0);
    }

    #[test]
    fn zipf_favours_low_ranks() {
        let z = Zipf::new(100);
        let mut rng = Rng(1);
        let low = (0..10_000).filter(|_| z.sample(&mut rng) < 10).count();
        // H(10)/H(100) ≈ 0.56.
        assert!((5_000..6_200).contains(&low), "{low}");
    }

    #[test]
    fn mold_packets_carry_the_day_in_order() {
        let mut day = Vec::new();
        let n = synthetic_day(&mut day, 3_000, 50, 9).unwrap();
        let session = super::super::Session(*b"BENCH00001");
        let mut next = 1u64;
        let (mut blocks, mut sizes) = (Vec::new(), Vec::new());
        let packed = mold_packets(Cursor::new(&day), session, (10, 30), 4, |_, p| {
            let p = super::super::Packet::new_checked(p).unwrap();
            assert_eq!(p.sequence(), next);
            next += u64::from(p.count());
            sizes.push(p.count());
            blocks.extend(p.messages().map(|(_, m)| m.bytes().to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!((packed, next - 1), (n, n));
        let last = sizes.pop().unwrap();
        assert!((1..=30).contains(&last));
        assert!(sizes.iter().all(|c| (10..=30).contains(c)));
        assert!(sizes.iter().any(|&c| c != sizes[0]), "sizes vary");
        let mut r = BinFile::new(Cursor::new(day));
        for b in &blocks {
            assert_eq!(r.next_record().unwrap().unwrap().1, b.as_slice());
        }
    }
}
