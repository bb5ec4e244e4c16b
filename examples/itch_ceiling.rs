//! What any order book can reach on a BinaryFILE day on this machine: the
//! least work that still builds every book, with none of a feed handler's
//! duties (no validation, sequencing, counters, time, halts or symbols).
//!
//!     itch_ceiling DAY          # a day written by `itch_profile gen DAY N STOCKS`
//!     itch_ceiling DAY --json   # the passes only, as one JSON object (M/s)
//!
//! The whole file is read into memory first; then, each timed on its own:
//! - `walk`: every record's type byte (the floor of any replay);
//! - `orders`: the order store alone, a flat array indexed by the
//!   reference on huge pages (no window, no overflow: only possible here,
//!   where references stay below the file's record count);
//! - `orders+`: the same with each record's order slot prefetched 16
//!   records ahead: what any book that keeps its orders by reference can
//!   reach here at best, before a single price level;
//! - `books`: the order store plus price levels per book and side, a vector
//!   sorted best-last (as `itch50::book`) whose best 8 levels are compared
//!   without a branch on the outcome, then binary-searched, with the
//!   same two-stage prefetch 16 and 8 records ahead (the order's slot and
//!   the book's entry, then each side's best level);
//! - `split`: `books` in two threads, as a replay runs them
//!   (`itch50::levels`): this one keeps the order store and queues each
//!   record's level changes in batches; a second applies them, prefetching
//!   ahead in its batch. It checks that its books equal `books`'.
//!
//! Comparing `books` with `tickguard-bench itch-binfile` in the same run
//! bounds what the feed handler's own work costs: the full replay also
//! reads and frames the file and sets its feed up, which this leaves out,
//! so the ratio flatters the ceiling, not the replay. `orders` runs without
//! the prefetch, so `books − orders` is not the levels' own cost.
//!
//! Then the machine's memory on its own, over 1 to 64 MiB advised onto
//! huge pages (the order window is 16 MiB): `chase`, loads that each wait
//! for the one before (the latency of one miss), and `lines`, independent
//! read-modify-writes of random lines, each prefetched 16 ahead (how many
//! misses the core keeps in flight, written back as a book's are). Where
//! `chase` jumps is the cache this process really gets, which on a shared
//! or virtual machine can be far less than the L3 it reports. A day's
//! message misses on one to a few lines; `lines` over that bounds any book
//! here.
//!
//! For synthetic days: a record shorter than its type, or one that names a
//! reference outside the array, or names an order no longer live is
//! skipped (a real day's references need the feed's order store).

use std::time::Instant;
use tickguard::protocol::itch50::message::known_len;
use tickguard::sys::memory::{huge_vec, prefetch};

#[derive(Clone, Copy, Default)]
struct Order {
    book: u16,
    sell: bool,
    price: u32,
    shares: u32,
}

#[derive(Clone, Copy)]
struct Level {
    price: u32,
    orders: u32,
    shares: u64,
}

/// Bids and asks, each sorted with the best level last; one cache line.
#[derive(Clone, Default)]
#[repr(align(64))]
struct Book([Vec<Level>; 2]);

fn be(m: &[u8], at: usize, n: usize) -> u64 {
    m[at..at + n].iter().fold(0, |v, &b| v << 8 | u64::from(b))
}

/// Record offsets of `data` (a BinaryFILE), in order.
fn records(data: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 2 <= data.len() {
        let len = usize::from(u16::from_be_bytes([data[pos], data[pos + 1]]));
        if pos + 2 + len > data.len() {
            break;
        }
        out.push((pos + 2, len));
        pos += 2 + len;
    }
    out
}

/// Where `price` goes in a side sorted best-last: the index above every
/// level not better than it. The best 8 are compared all together, with no
/// branch on the outcome (a walk that stops at the price mispredicts its
/// exit: 8-10% slower here); deeper, a binary search.
#[inline]
fn position(levels: &[Level], sell: bool, price: u32) -> usize {
    const TOP: usize = 8;
    let n = levels.len();
    let Some(last) = n.checked_sub(1) else {
        return 0;
    };
    // Flipping every bit reverses the order: one comparison for both sides.
    let flip = if sell { u32::MAX } else { 0 };
    let key = price ^ flip;
    let mut better = 0;
    for k in 0..TOP {
        let i = n.wrapping_sub(TOP - k);
        better += usize::from((i < n) & (levels[i.min(last)].price ^ flip > key));
    }
    if better < TOP {
        n - better
    } else {
        levels[..n - TOP].partition_point(|l| l.price ^ flip <= key)
    }
}

fn rest(books: &mut [Book], o: &Order) {
    let levels = &mut books[usize::from(o.book)].0[usize::from(o.sell)];
    let i = position(levels, o.sell, o.price);
    match levels.get_mut(i.wrapping_sub(1)) {
        Some(l) if l.price == o.price => {
            l.orders += 1;
            l.shares += u64::from(o.shares);
        }
        _ => levels.insert(
            i,
            Level {
                price: o.price,
                orders: 1,
                shares: u64::from(o.shares),
            },
        ),
    }
}

fn unrest(books: &mut [Book], o: &Order, shares: u32, gone: bool) {
    let levels = &mut books[usize::from(o.book)].0[usize::from(o.sell)];
    let i = position(levels, o.sell, o.price).wrapping_sub(1);
    if levels.get(i).is_some_and(|l| l.price == o.price) {
        levels[i].shares -= u64::from(shares);
        if gone {
            levels[i].orders -= 1;
            if levels[i].orders == 0 {
                levels.remove(i);
            }
        }
    }
}

/// Where [`replay`] sends each record's change to the levels.
trait Sink {
    /// Starts loading what record `m`, `ahead` records from its turn, will
    /// touch in the levels (16: the first stage, 8: the second).
    fn prefetch(&self, _m: &[u8], _ahead: usize) {}
    /// `shares` leave order `o` (`gone`: with its last), then `add` rests.
    fn change(&mut self, o: Order, shares: u32, gone: bool, add: Option<Order>);
}

/// No levels: the order store alone.
struct NoLevels;

impl Sink for NoLevels {
    fn change(&mut self, o: Order, _: u32, _: bool, add: Option<Order>) {
        std::hint::black_box((o, add));
    }
}

fn locate(m: &[u8]) -> usize {
    if m.len() >= 3 {
        be(m, 1, 2) as usize
    } else {
        0
    }
}

/// Levels applied in place, each book's entry and best levels prefetched.
impl Sink for &mut [Book] {
    fn prefetch(&self, m: &[u8], ahead: usize) {
        let book = &self[locate(m)];
        if ahead > 8 {
            prefetch(book);
        } else {
            for side in &book.0 {
                if let Some(top) = side.last() {
                    prefetch(top);
                }
            }
        }
    }

    fn change(&mut self, o: Order, shares: u32, gone: bool, add: Option<Order>) {
        if shares > 0 || gone {
            unrest(self, &o, shares, gone);
        }
        if let Some(n) = add {
            rest(self, &n);
        }
    }
}

/// One change of a book's levels, as the order store resolves a record
/// (`split`): the order, and the shares that leave it (`gone`: with its
/// last) or, `rest`, that it brings.
#[derive(Clone, Copy)]
struct Delta {
    o: Order,
    shares: u32,
    gone: bool,
    rest: bool,
}

/// Changes a batch of `split` holds.
const BATCH: usize = 2048;

/// Changes queued in batches for a second thread that keeps the levels.
struct Queue {
    batch: Vec<Delta>,
    to: crossbeam_channel::Sender<Vec<Delta>>,
    spare: crossbeam_channel::Receiver<Vec<Delta>>,
}

impl Sink for Queue {
    fn change(&mut self, o: Order, shares: u32, gone: bool, add: Option<Order>) {
        if shares > 0 || gone {
            let rest = false;
            self.batch.push(Delta {
                o,
                shares,
                gone,
                rest,
            });
        }
        if let Some(o) = add {
            let (shares, gone, rest) = (o.shares, false, true);
            self.batch.push(Delta {
                o,
                shares,
                gone,
                rest,
            });
        }
        if self.batch.len() >= BATCH {
            let next = self.spare.recv().expect("level thread");
            let full = std::mem::replace(&mut self.batch, next);
            self.to.send(full).expect("level thread");
        }
    }
}

/// `books` in two threads: this one keeps the order store and queues each
/// record's changes; a second applies them to the levels, prefetching
/// each change's book 16 changes ahead and its best levels 8 ahead.
fn split(data: &[u8], recs: &[(usize, usize)], orders: &mut [Order], mut books: &mut [Book]) {
    const BATCHES: usize = 8;
    let (to, rx) = crossbeam_channel::bounded::<Vec<Delta>>(BATCHES);
    let (back, spare) = crossbeam_channel::bounded::<Vec<Delta>>(BATCHES);
    for _ in 1..BATCHES {
        back.send(Vec::with_capacity(BATCH)).expect("room");
    }
    std::thread::scope(|s| {
        s.spawn(move || {
            for mut batch in rx.iter() {
                for (k, d) in batch.iter().enumerate() {
                    if let Some(a) = batch.get(k + 16) {
                        prefetch(&books[usize::from(a.o.book)]);
                    }
                    if let Some(a) = batch.get(k + 8) {
                        if let Some(top) =
                            books[usize::from(a.o.book)].0[usize::from(a.o.sell)].last()
                        {
                            prefetch(top);
                        }
                    }
                    match d.rest {
                        true => books.change(d.o, 0, false, Some(d.o)),
                        false => books.change(d.o, d.shares, d.gone, None),
                    }
                }
                batch.clear();
                let _ = back.send(batch);
            }
        });
        let mut queue = Queue {
            batch: Vec::with_capacity(BATCH),
            to,
            spare,
        };
        replay(data, recs, orders, true, &mut queue);
        let Queue { batch, to, .. } = queue;
        to.send(batch).expect("level thread");
    });
}

/// Applies every record to `orders`, and their changes to `levels`; with
/// `ahead`, each record's order slot is prefetched 16 records ahead.
fn replay(
    data: &[u8],
    recs: &[(usize, usize)],
    orders: &mut [Order],
    ahead: bool,
    levels: &mut impl Sink,
) {
    let msg = |k: usize| &data[recs[k].0..recs[k].0 + recs[k].1];
    let orders_len = orders.len();
    let reference = |m: &[u8]| match m.first() {
        Some(&c @ (b'A' | b'F' | b'E' | b'C' | b'X' | b'D' | b'U'))
            if known_len(c).is_some_and(|n| m.len() >= n) =>
        {
            Some(be(m, 11, 8) as usize).filter(|&r| r < orders_len)
        }
        _ => None,
    };
    for k in 0..recs.len() {
        if ahead {
            if let Some(m) = recs.get(k + 16).map(|_| msg(k + 16)) {
                if let Some(r) = reference(m) {
                    prefetch(&orders[r]);
                }
                levels.prefetch(m, 16);
            }
            if let Some(m) = recs.get(k + 8).map(|_| msg(k + 8)) {
                levels.prefetch(m, 8);
            }
        }
        let m = msg(k);
        let Some(r) = reference(m) else { continue };
        // An order fully executed or deleted is gone: nothing more to take.
        let live = orders[r].shares > 0;
        match m[0] {
            b'A' | b'F' => {
                let o = Order {
                    book: be(m, 1, 2) as u16,
                    sell: m[19] == b'S',
                    shares: be(m, 20, 4) as u32,
                    price: be(m, 32, 4) as u32,
                };
                orders[r] = o;
                levels.change(o, 0, false, Some(o));
            }
            b'D' if live => {
                levels.change(orders[r], orders[r].shares, true, None);
                orders[r].shares = 0;
            }
            b'E' | b'C' | b'X' if live => {
                let o = orders[r];
                let shares = be(m, 19, 4) as u32;
                if shares >= o.shares {
                    levels.change(o, o.shares, true, None);
                    orders[r].shares = 0;
                } else {
                    orders[r].shares -= shares;
                    levels.change(o, shares, false, None);
                }
            }
            b'U' if live && (be(m, 19, 8) as usize) < orders.len() => {
                let o = orders[r];
                orders[r].shares = 0;
                let new = Order {
                    shares: be(m, 27, 4) as u32,
                    price: be(m, 31, 4) as u32,
                    ..o
                };
                orders[be(m, 19, 8) as usize] = new;
                levels.change(o, o.shares, true, Some(new));
            }
            _ => {}
        }
    }
}

/// Random lines over `mib` MiB: (ns a dependent load, M independent
/// prefetched read-modify-writes a second).
fn memory(mib: usize) -> (f64, f64) {
    const LINE: usize = 8; // u64s a 64-byte line
    let lines = (mib << 20) / 64;
    let mut mem = huge_vec(lines * LINE, 0u64);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as usize % lines
    };
    // A random cycle through every line: each load names the next.
    let mut order: Vec<usize> = (0..lines).collect();
    for i in (1..lines).rev() {
        order.swap(i, next() % (i + 1));
    }
    for w in 0..lines {
        mem[order[w] * LINE] = order[(w + 1) % lines] as u64;
    }
    let n = 4 * lines.min(1 << 20);
    let start = Instant::now();
    let mut at = order[0];
    for _ in 0..n {
        at = mem[at * LINE] as usize;
    }
    std::hint::black_box(at);
    let chase = start.elapsed().as_secs_f64() / n as f64 * 1e9;
    let picks: Vec<usize> = (0..n).map(|_| next()).collect();
    let start = Instant::now();
    for k in 0..n {
        if let Some(&ahead) = picks.get(k + 16) {
            prefetch(&mem[ahead * LINE]);
        }
        mem[picks[k] * LINE + 1] += 1;
    }
    std::hint::black_box(&mem);
    let loads = n as f64 / start.elapsed().as_secs_f64() / 1e6;
    (chase, loads)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (path, json) = match args.as_slice() {
        [path] => (path, false),
        [path, flag] if flag == "--json" => (path, true),
        _ => {
            eprintln!("usage: itch_ceiling DAY [--json]");
            std::process::exit(2);
        }
    };
    let data = std::fs::read(path).expect("read the day");
    let recs = records(&data);
    let n = recs.len() as f64;
    let rate = |s: f64| n / s / 1e6;

    let start = Instant::now();
    let sum: u64 = recs.iter().map(|&(at, _)| u64::from(data[at])).sum();
    std::hint::black_box(sum);
    let walk = start.elapsed().as_secs_f64();

    // References in a synthetic day stay below its record count.
    let fresh = || huge_vec(recs.len() + 1, Order::default());
    let timed = |run: &mut dyn FnMut()| {
        let start = Instant::now();
        run();
        start.elapsed().as_secs_f64()
    };
    let mut orders = fresh();
    let alone = timed(&mut || replay(&data, &recs, &mut orders, false, &mut NoLevels));
    let mut orders = fresh();
    let ahead = timed(&mut || replay(&data, &recs, &mut orders, true, &mut NoLevels));
    let mut orders = fresh();
    let mut books: Vec<Book> = vec![Book::default(); 1 << 16];
    let full = timed(&mut || replay(&data, &recs, &mut orders, true, &mut books.as_mut_slice()));
    let mut orders = fresh();
    let mut split_books: Vec<Book> = vec![Book::default(); 1 << 16];
    let two = timed(&mut || split(&data, &recs, &mut orders, &mut split_books));
    let same = books.iter().zip(&split_books).all(|(a, b)| {
        (0..2).all(|s| {
            a.0[s].len() == b.0[s].len()
                && a.0[s]
                    .iter()
                    .zip(&b.0[s])
                    .all(|(x, y)| (x.price, x.shares, x.orders) == (y.price, y.shares, y.orders))
        })
    });
    std::hint::black_box((&orders, &books));

    if json {
        // For `tickguard-bench itch-binfile`, which runs this beside the
        // replay in each of its rounds.
        println!(
            "{}",
            serde_json::json!({
                "records": recs.len(),
                "walk": rate(walk),
                "orders": rate(alone),
                "orders_ahead": rate(ahead),
                "books": rate(full),
                "split": rate(two),
                "same_books": same,
            })
        );
        return;
    }
    println!("{} records", recs.len());
    println!("walk    {walk:.3} s  {:.1} M/s", rate(walk));
    println!("orders  {alone:.3} s  {:.1} M/s", rate(alone));
    println!(
        "orders+ {ahead:.3} s  {:.1} M/s  (each order's slot prefetched 16 ahead)",
        rate(ahead)
    );
    println!("books   {full:.3} s  {:.1} M/s", rate(full));
    println!(
        "split   {two:.3} s  {:.1} M/s  (levels on a second thread; same books: {same})",
        rate(two)
    );
    println!("memory  ns a dependent load (chase), M random lines/s prefetched (lines)");
    for mib in [1, 2, 4, 8, 16, 32, 64] {
        let (chase, lines) = memory(mib);
        println!("{mib:>4} MiB  chase {chase:6.1} ns  lines {lines:6.1} M/s");
    }
}
