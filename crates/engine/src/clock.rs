//! Clock offset between the local clock and a provider's clock (SQF section 4).
//!
//! `offset` estimates local − provider, in nanoseconds. Either it is fixed by
//! configuration, or `auto`: the minimum of `arrival − send_time` over the
//! feed's accepted packets that arrived in the last `window` (exclusive at the
//! old end, inclusive at the new). Network delay only ever adds to
//! `arrival − send_time`, so the minimum is the least-delayed packet's view of
//! the offset.
//!
//! The sliding minimum is a monotone queue: entries with increasing arrival
//! and strictly increasing value; the front is the minimum. Values are kept in
//! 128 bits, so no `send_time` however wild can wrap or saturate the estimate.
//!
//! Its length is the number of packets in the window that could still become
//! the minimum: small on a jittery link, but every packet in the window when
//! `arrival − send_time` keeps rising (a provider clock that runs slow, a
//! delay that builds up). Each of those packets is needed: once the older
//! ones leave the window, each becomes the minimum in turn, and an exact
//! estimate cannot forget any of them. What is bounded is their cost and
//! their number: both columns only ever rise along the queue, so an entry is
//! stored as the two differences from the one before it, as LEB128 varints
//! (3 bytes for packets a microsecond apart whose delay rises by a few ns;
//! 20 at most, against 32 for the entry itself), and the window is at most
//! an hour (`offset_window_ms`) of arrivals in order. An arrival more than
//! [`STEP_BACK_NS`] (100 ms) before the latest is the clock stepped back
//! (live, or a capture's), and the window is anchored at it again
//! ([`OffsetEstimator::on_packet`]). The newest few entries stay whole, so a
//! short queue — the usual one — never pays for the coding; a bounded
//! (live) queue keeps every entry whole, 32 bytes each, preallocated.
//!
//! The queue grows (it starts at [`INITIAL_QUEUE`] entries) up to a cap chosen
//! by the caller: replay passes no cap and is exact; the live receiver
//! preallocates its cap so it never allocates. If a stream ever fills the
//! cap, the two oldest entries are merged keeping the *lower* value for the
//! later time: the estimate can then only be lower than exact, which makes
//! source ages larger — never a falsely fresh quote — and
//! [`OffsetEstimator::merges`] counts it. (After a clock step back the
//! samples from before it are kept as one, their least, until a window
//! after the step: see [`OffsetEstimator::on_packet`].)

use std::collections::VecDeque;

/// How far before the latest arrival one must come for the offset's
/// window to take it for the clock stepped back, ns: the bound a reader
/// takes a writer's time ahead of its own for one
/// ([`MAX_AHEAD_NS`](crate::verdict::MAX_AHEAD_NS)). Less is a datagram
/// late (queued behind a busy receive thread, or a capture's interfaces
/// interleaved), which keeps the window where it was: re-anchored at it,
/// the samples a few ms newer would leave the window early, and source
/// ages read younger.
pub const STEP_BACK_NS: u64 = crate::verdict::MAX_AHEAD_NS;

/// How a feed's offset is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetMode {
    /// A configured constant, ns (local − provider).
    Fixed(i64),
    /// Sliding-window minimum over this window, ns (> 0).
    Auto {
        /// Window length, ns.
        window_ns: u64,
    },
}

/// How an operator reads it: `fixed 250 ms`, `auto over 2000 ms`,
/// `fixed 500 ns`.
impl std::fmt::Display for OffsetMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Exact, in the largest unit that holds it whole.
        let ms = |ns: i128| {
            if ns % 1_000_000 == 0 {
                format!("{} ms", ns / 1_000_000)
            } else if ns % 1_000 == 0 {
                format!("{} µs", ns / 1_000)
            } else {
                format!("{ns} ns")
            }
        };
        match *self {
            OffsetMode::Fixed(ns) => write!(f, "fixed {}", ms(ns.into())),
            OffsetMode::Auto { window_ns } => write!(f, "auto over {}", ms(window_ns.into())),
        }
    }
}

/// Entries the queue holds before it first grows.
pub const INITIAL_QUEUE: usize = 4096;
/// No cap: the queue holds whatever the window needs (replay).
pub const UNBOUNDED: usize = usize::MAX;

/// Most bytes one queued entry takes: two varints of at most 70 bits.
pub const ENTRY_MAX_BYTES: usize = 20;

/// Entries kept whole at the back of the queue, where a packet's pops and
/// push happen: a short queue (a jittery link) never pays for the coding.
const TAIL: usize = 32;

/// The monotone queue of (arrival ns, arrival − send_time ns), oldest
/// first. Unbounded (replay): the newest [`TAIL`] entries whole, the older
/// ones [`Packed`]. Bounded (live): every entry whole in a preallocated
/// tail, so the receive path never codes and its merges stay cheap.
#[derive(Debug, Clone)]
struct Queue {
    packed: Packed,
    tail: VecDeque<(u64, i128)>,
    /// Entries the tail holds before its oldest moves to `packed`.
    tail_max: usize,
    len: usize,
}

impl Queue {
    /// A queue with room for `entries` now; `pack` for the unbounded one.
    fn with_capacity(entries: usize, pack: bool) -> Queue {
        let tail_max = if pack { TAIL } else { usize::MAX };
        Queue {
            packed: Packed::with_capacity(if pack { entries } else { 0 }),
            tail: VecDeque::with_capacity(entries.min(tail_max.saturating_add(1))),
            tail_max,
            len: 0,
        }
    }

    #[inline]
    fn front(&self) -> Option<(u64, i128)> {
        self.packed.front().or_else(|| self.tail.front().copied())
    }

    #[inline]
    fn back(&self) -> Option<(u64, i128)> {
        self.tail.back().copied().or_else(|| self.packed.back())
    }

    #[inline]
    fn push_back(&mut self, e: (u64, i128)) {
        self.tail.push_back(e);
        if self.tail.len() > self.tail_max {
            if let Some(old) = self.tail.pop_front() {
                self.packed.push_back(old);
            }
        }
        self.len += 1;
    }

    #[inline]
    fn pop_back(&mut self) {
        if self.tail.pop_back().is_none() {
            self.packed.pop_back();
        }
        self.len = self.len.saturating_sub(1);
    }

    #[inline]
    fn pop_front(&mut self) {
        if self.packed.len > 0 {
            self.packed.pop_front();
        } else {
            self.tail.pop_front();
        }
        self.len = self.len.saturating_sub(1);
    }

    /// Empties the queue, keeping its room.
    fn clear(&mut self) {
        self.packed.deltas.clear();
        self.packed.len = 0;
        self.tail.clear();
        self.len = 0;
    }

    /// Merges the two oldest entries (at least two) into one at the time of
    /// the second with the value of the first. Only a bounded queue merges,
    /// and it keeps every entry in the tail.
    fn merge_front(&mut self) {
        debug_assert_eq!(self.packed.len, 0);
        if let (Some((_, v0)), Some(second)) = (self.tail.pop_front(), self.tail.front_mut()) {
            second.1 = v0;
            self.len -= 1;
        }
    }

    /// Bytes the packed entries take beyond their first.
    fn bytes(&self) -> usize {
        self.packed.bytes()
    }
}

/// The older part of the queue: arrivals non-decreasing and values
/// strictly increasing from front to back, so each entry after the front is
/// stored as its two differences from the entry before it, LEB128-coded (an
/// arrival difference fits 64 bits, a value difference 65: both within
/// [`ENTRY_MAX_BYTES`]).
#[derive(Debug, Clone)]
struct Packed {
    front: (u64, i128),
    back: (u64, i128),
    len: usize,
    /// For each entry after the front: varint(arrival − previous arrival),
    /// then varint(value − previous value).
    deltas: VecDeque<u8>,
}

impl Packed {
    fn with_capacity(entries: usize) -> Packed {
        Packed {
            front: (0, 0),
            back: (0, 0),
            len: 0,
            deltas: VecDeque::with_capacity(entries.saturating_mul(ENTRY_MAX_BYTES)),
        }
    }

    #[inline]
    fn front(&self) -> Option<(u64, i128)> {
        (self.len > 0).then_some(self.front)
    }

    #[inline]
    fn back(&self) -> Option<(u64, i128)> {
        (self.len > 0).then_some(self.back)
    }

    /// Appends an entry with an arrival not below and a value above the back's.
    #[inline]
    fn push_back(&mut self, e: (u64, i128)) {
        if self.len == 0 {
            self.front = e;
        } else {
            put(&mut self.deltas, u128::from(e.0 - self.back.0));
            put(&mut self.deltas, (e.1 - self.back.1) as u128);
        }
        self.back = e;
        self.len += 1;
    }

    #[inline]
    fn pop_back(&mut self) {
        if self.len > 1 {
            let dv = take_back(&mut self.deltas);
            let da = take_back(&mut self.deltas);
            self.back = (self.back.0 - da as u64, self.back.1 - dv as i128);
        }
        self.len = self.len.saturating_sub(1);
    }

    /// Removes the front; the next entry becomes the front.
    #[inline]
    fn pop_front(&mut self) -> (u64, u128) {
        let mut d = (0, 0);
        if self.len > 1 {
            d = (
                take_front(&mut self.deltas) as u64,
                take_front(&mut self.deltas),
            );
            self.front = (self.front.0 + d.0, self.front.1 + d.1 as i128);
        }
        self.len = self.len.saturating_sub(1);
        d
    }

    /// Bytes the entries after the front take.
    fn bytes(&self) -> usize {
        self.deltas.len()
    }
}

/// Appends `x` as a LEB128 varint: 7 bits a byte, low bits first, the high
/// bit set on every byte but the last.
#[inline]
fn put(q: &mut VecDeque<u8>, mut x: u128) {
    while x >= 0x80 {
        q.push_back(x as u8 | 0x80);
        x >>= 7;
    }
    q.push_back(x as u8);
}

/// Removes and decodes the first varint.
#[inline]
fn take_front(q: &mut VecDeque<u8>) -> u128 {
    let (mut x, mut shift) = (0u128, 0);
    while let Some(b) = q.pop_front() {
        x |= u128::from(b & 0x7f) << shift;
        shift += 7;
        if b < 0x80 {
            break;
        }
    }
    x
}

/// Removes and decodes the last varint: its last byte has the high bit
/// clear, the bytes before it in the same varint have it set, and the byte
/// before those ends the previous varint.
#[inline]
fn take_back(q: &mut VecDeque<u8>) -> u128 {
    let mut x = u128::from(q.pop_back().unwrap_or(0));
    while let Some(&b) = q.back().filter(|&&b| b >= 0x80) {
        q.pop_back();
        x = x << 7 | u128::from(b & 0x7f);
    }
    x
}

/// A feed's source watermark, epoch ns: the latest source time its
/// applied messages proved complete (`applied`), or the latest heartbeat's
/// arrival `heartbeat_at` (local ns) taken at `offset` (local − provider),
/// the offset in force now, whichever is later. Under one offset this is
/// the specs' `max(watermark, t − offset)` at each heartbeat; taken at the
/// offset of the moment, not of the heartbeat's, a heartbeat can make the
/// source no fresher than its own arrival once the offset has moved (an
/// offset pulled down by a packet stamped hours ahead, a duplicate or a
/// forgery, would otherwise leave the watermark hours ahead for good, and
/// `stale_at_source` silent, after that packet left the window).
#[inline]
pub fn heartbeat_watermark(
    applied: Option<i128>,
    heartbeat_at: Option<u64>,
    offset: i128,
) -> Option<i128> {
    let beat = heartbeat_at.map(|t| t as i128 - offset);
    let w = match (applied, beat) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    // Within the published word's range (ns since the epoch, a u64): a
    // check in process (a replay's) reads what a reader of the publication
    // reads, an offset pulled down past 2^64 ns by a forged SendingTime
    // included.
    w.map(|w| w.clamp(0, u64::MAX as i128))
}

/// Forgets the last heartbeat's arrival `heartbeat_at` (local ns) when a
/// packet taken at `t` (local ns) arrived more than
/// [`MAX_AHEAD_NS`](crate::verdict::MAX_AHEAD_NS) before it: the clock
/// stepped back (or a capture's time did). Kept, the heartbeat would hold
/// the source watermark ahead of the clock, its part of the source age
/// negative, for as long as the step, hiding a source delay that the
/// messages since show; the next heartbeat raises the watermark again.
#[inline]
pub fn forget_beat_ahead(heartbeat_at: &mut Option<u64>, t: u64) {
    if heartbeat_at.is_some_and(|h| h > t.saturating_add(crate::verdict::MAX_AHEAD_NS)) {
        *heartbeat_at = None;
    }
}

/// One feed's clock-offset estimate.
#[derive(Debug, Clone)]
pub struct OffsetEstimator {
    mode: OffsetMode,
    /// Monotone queue: (arrival ns, arrival − send_time ns).
    queue: Queue,
    /// Most entries the queue may hold.
    cap: usize,
    /// Latest arrival fed in, ns; arrivals are made monotone against it.
    latest: u64,
    offset: i128,
    /// Times the queue was full and two entries were merged.
    merges: u64,
    /// The last [`EXPIRED_KEPT`] samples the window let go, in the order
    /// it let them go, each at the time the queue held it (its arrival,
    /// or the latest before it for a datagram up to [`STEP_BACK_NS`] late;
    /// a merged entry's, the later one's): a step back lands where the
    /// contract's window may hold them again ([`anchor_again`](Self::anchor_again)).
    expired: VecDeque<(u64, i128)>,
}

/// Samples a window let go that an estimator keeps for a step back
/// (32 bytes each). A window lets one go when it was the least of the
/// samples since: a handful a window on a link whose delay jitters, one a
/// packet only while the delay rises packet after packet.
const EXPIRED_KEPT: usize = 64;

impl OffsetEstimator {
    /// An estimator whose queue holds at most `cap` entries (at least 2), all
    /// allocated now so that it never allocates later; or, with
    /// [`UNBOUNDED`], exact whatever the stream, growing from
    /// [`INITIAL_QUEUE`] entries as the window needs.
    pub fn new(mode: OffsetMode, cap: usize) -> Self {
        let cap = cap.max(2);
        let initial = match mode {
            OffsetMode::Fixed(_) => 0,
            OffsetMode::Auto { .. } if cap == UNBOUNDED => INITIAL_QUEUE,
            OffsetMode::Auto { .. } => cap,
        };
        OffsetEstimator {
            mode,
            queue: Queue::with_capacity(initial, cap == UNBOUNDED),
            cap,
            latest: 0,
            offset: match mode {
                OffsetMode::Fixed(v) => v as i128,
                OffsetMode::Auto { .. } => 0,
            },
            merges: 0,
            expired: VecDeque::with_capacity(match mode {
                OffsetMode::Fixed(_) => 0,
                OffsetMode::Auto { .. } => EXPIRED_KEPT,
            }),
        }
    }

    /// The current estimate, ns (local − provider). 0 in `auto` before the
    /// first packet. 128 bits: `arrival − send_time` of a corrupt send time
    /// does not fit 64.
    #[inline]
    pub fn offset(&self) -> i128 {
        self.offset
    }

    /// Times the bounded queue overflowed (the estimate was kept conservative).
    pub fn merges(&self) -> u64 {
        self.merges
    }

    /// Entries in the window's queue, and the bytes they take beyond the first.
    pub fn queued(&self) -> (usize, usize) {
        (self.queue.len, self.queue.bytes())
    }

    /// The clock stepped back to `now` (ns): the window is anchored at
    /// `now` again. The samples taken before the step stay in it until
    /// `now` + W, as if taken at `now` (their own times lie ahead of the
    /// clock): the least of them, the queue's front, is all they can still
    /// give, so it is kept alone. (Left at their times, nothing left the
    /// window for as long as the step, and the estimate stayed at their
    /// least whatever the provider's clock did meanwhile.) The samples the
    /// window let go at or before `now` and within W of it count too: the
    /// contract's window at `now` holds them again (a time source stepped
    /// forward, then corrected; a step back of a few seconds: without them
    /// the estimate rose to the samples since, source ages reading
    /// younger). Of those the last [`EXPIRED_KEPT`] let go are kept: a step
    /// back landing among older ones finds them gone (the offset then
    /// higher than the formula's, by as much as they were lower than
    /// those kept). What they give counts, as the queue's least does, until
    /// `now` + W, not a window after their own arrivals: lower than the
    /// formula's meanwhile (source ages older). Allocates nothing.
    #[cold]
    fn anchor_again(&mut self, now: u64, window_ns: u64) {
        self.latest = now;
        // The contract's window at `now`: `now − W < t ≤ now` (one let go
        // ahead of `now` is not in it, and one forged far ahead would hold
        // the offset down for a window). Kept through the step: a second
        // step back may land where they count again.
        let least = self
            .expired
            .iter()
            .filter(|&&(t, _)| t <= now && t.saturating_add(window_ns) > now)
            .map(|&(_, v)| v)
            .chain(self.queue.front().map(|(_, v)| v))
            .min();
        if let Some(least) = least {
            self.queue.clear();
            self.queue.push_back((now, least));
        }
    }

    /// An accepted packet: arrival `arrival` (local ns), `send_time` (provider ns).
    ///
    /// Arrival times are expected in order (they are, live, to within the
    /// microseconds a receive batch spans). One more than [`STEP_BACK_NS`]
    /// before the latest is the clock stepped back (live, or a capture's
    /// clock: the same arrivals either way, so a replay of a recording
    /// anchors where live did), and the window is anchored at it again
    /// ([`anchor_again`](Self::anchor_again)). A capture whose timestamps
    /// step back by less keeps the window anchored at the latest arrival
    /// seen (it never moves backwards), while the packet's sample is its
    /// own arrival − `send_time`. The offset after it can then differ from the
    /// contract's formula evaluated at its own stamp either way: lower (its
    /// sample is), or higher, by a sample the formula still counts at the
    /// earlier stamp that the window anchored later has already dropped
    /// (quotes then look younger than the formula says: a sample that left
    /// the window anchored later, within the window of the earlier stamp).
    /// A capture's steps back are counted and warned about
    /// (docs/replay.md).
    #[inline]
    pub fn on_packet(&mut self, arrival: u64, send_time: u64) {
        let OffsetMode::Auto { window_ns } = self.mode else {
            return;
        };
        if arrival.saturating_add(STEP_BACK_NS) < self.latest {
            self.anchor_again(arrival, window_ns);
        }
        let a = arrival.max(self.latest);
        self.latest = a;
        let v = arrival as i128 - send_time as i128;
        // Drop from the back every entry not lower than the new one: it can
        // never be the minimum again while the new one is in the window.
        while self.queue.back().is_some_and(|(_, b)| b >= v) {
            self.queue.pop_back();
        }
        if self.queue.len >= self.cap {
            // Full: merge the two oldest into (time of the second, value of the first).
            self.queue.merge_front();
            self.merges += 1;
        }
        self.queue.push_back((a, v));
        // Expire from the front: keep a_q > a_p − W. The newest entry has
        // a_q = a_p and W > 0, so the queue never empties here.
        while let Some(gone) = self.queue.front().filter(|(t, _)| a - t >= window_ns) {
            self.queue.pop_front();
            if self.expired.len() == EXPIRED_KEPT {
                self.expired.pop_front();
            }
            self.expired.push_back(gone);
        }
        self.offset = self.queue.front().map_or(v, |(_, m)| m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// A mode is shown exactly: a configured offset below a millisecond
    /// or between two microseconds is not truncated.
    #[test]
    fn a_mode_is_shown_exactly() {
        let shown = |m: OffsetMode| m.to_string();
        assert_eq!(shown(OffsetMode::Fixed(250_000_000)), "fixed 250 ms");
        assert_eq!(shown(OffsetMode::Fixed(-1_500_000)), "fixed -1500 µs");
        assert_eq!(shown(OffsetMode::Fixed(500)), "fixed 500 ns");
        assert_eq!(shown(OffsetMode::Fixed(-1_500)), "fixed -1500 ns");
        assert_eq!(shown(OffsetMode::Fixed(0)), "fixed 0 ms");
        let auto = OffsetMode::Auto {
            window_ns: 2_000_000_000,
        };
        assert_eq!(shown(auto), "auto over 2000 ms");
    }

    /// Straight from the spec: min over packets with a_p − W < a_q <= a_p.
    fn brute(packets: &[(u64, u64)], upto: usize, window: u64) -> i128 {
        let ap = packets[upto].0;
        packets[..=upto]
            .iter()
            .filter(|(a, _)| ap - a < window)
            .map(|&(a, s)| a as i128 - s as i128)
            .min()
            .unwrap()
    }

    /// The clock stepped forward an hour and back (a bad time source,
    /// corrected): the first arrival after the step, an hour behind the
    /// latest, anchors the window again, the samples from before it gone
    /// a window after it, and the estimate is the contract's over the
    /// packets since (here a provider clock 100 µs a second slow: it
    /// rises). Anchored an hour ahead, the window kept the estimate at the
    /// first packet's 1 ms.
    #[test]
    fn a_clock_stepped_back_anchors_the_window_again() {
        let w = 60 * S;
        let ms = S / 1000;
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: w }, UNBOUNDED);
        e.on_packet(1000 * S, 1000 * S - ms);
        e.on_packet(4600 * S, 1001 * S);
        let sent = |i: u64| (1002 + i) * S - ms - i * 100_000;
        let mut since = Vec::new();
        for i in 0..=120u64 {
            let a = (1002 + i) * S;
            e.on_packet(a, sent(i));
            since.push((a, sent(i)));
            let want = match i {
                // The first after the step (1 ms) is the least until a
                // window after it: the one sample from before the step
                // left (an hour's delay) lies above it.
                0..60 => ms as i128,
                _ => brute(&since, since.len() - 1, w),
            };
            assert_eq!(e.offset(), want, "{i}");
        }
        assert_eq!(e.offset(), (ms + 61 * 100_000) as i128);
    }

    /// The contract's offset after the packets `received` (arrival,
    /// send time), in the order received, at the last one's arrival `ap`:
    /// the least delay over those with `ap − W < a ≤ ap`, whatever order
    /// their arrivals came in.
    fn formula(received: &[(u64, u64)], window: u64) -> i128 {
        let ap = i128::from(received.last().unwrap().0);
        received
            .iter()
            .filter(|&&(a, _)| i128::from(a) > ap - i128::from(window) && i128::from(a) <= ap)
            .map(|&(a, s)| i128::from(a) - i128::from(s))
            .min()
            .unwrap()
    }

    /// A clock stepped forward then back: the samples the window let go
    /// meanwhile that the contract's window at the arrival after the step
    /// back holds again count (the estimate read the later samples' 1 ms
    /// for 0.5: source ages younger than the formula's). An hour's step,
    /// a two seconds' step amid packets every 100 ms, two steps forward
    /// with packets between, and a provider clock drifting (the delay
    /// rising every second, a window of one) stepped back 200 ms: each
    /// the formula's offset exactly at the step.
    #[test]
    fn samples_the_window_let_go_count_after_a_step_back() {
        let ms = S / 1000;
        let run = |w: u64, packets: &[(u64, u64)]| {
            let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: w }, UNBOUNDED);
            for &(a, s) in packets {
                e.on_packet(a, s);
            }
            (e.offset(), formula(packets, w))
        };
        let delay = |a: u64, d: u64| (a, a - d);
        // An hour forward, then back.
        let hour = [
            delay(1000 * S, ms / 2),
            delay(4600 * S, ms),
            delay(1002 * S, ms),
        ];
        assert_eq!(run(60 * S, &hour), ((ms / 2) as i128, (ms / 2) as i128));
        // Two seconds forward amid packets every 100 ms, five packets,
        // then back: the 0.5 ms sample of 1011.1 s is still in the
        // window at 1070.5 s.
        let mut short: Vec<(u64, u64)> = (0..700u64)
            .map(|k| 1000 * S + k * 100 * ms)
            .map(|a| delay(a, if a == 1011 * S + 100 * ms { ms / 2 } else { ms }))
            .collect();
        short.extend((0..5).map(|k| delay(1072 * S + k * 100 * ms, ms)));
        short.push(delay(1070 * S + 500 * ms, ms));
        assert_eq!(run(60 * S, &short), ((ms / 2) as i128, (ms / 2) as i128));
        // Forward twice, packets between, then back between the two: the
        // samples before the first step are out of that window.
        let twice = [
            delay(1000 * S, ms / 2),
            delay(4600 * S, ms),
            delay(4601 * S, ms),
            delay(9000 * S, 2 * ms),
            delay(4620 * S, 3 * ms),
        ];
        assert_eq!(run(60 * S, &twice), (ms as i128, ms as i128));
        // A window of a second, a packet a second for an hour, the delay
        // rising 1 ms a second; then the clock 200 ms back.
        let mut drift: Vec<(u64, u64)> = (0..3600u64)
            .map(|k| delay((1000 + k) * S, (k + 1) * ms))
            .collect();
        drift.push(delay(4598 * S + 800 * ms, 3600 * ms));
        assert_eq!(run(S, &drift), ((3599 * ms) as i128, (3599 * ms) as i128));
    }

    /// Of the samples the window let go, the last [`EXPIRED_KEPT`] are
    /// kept: a step back landing among older ones finds them gone, and the
    /// offset is the least of those kept in its window (higher than the
    /// formula's, the older ones lower); one it lands among counts exactly.
    #[test]
    fn a_step_back_finds_the_last_samples_let_go() {
        let ms = S / 1000;
        let w = 60 * S;
        // A packet a second, the delay rising 1 ms a packet: each let go a
        // window after it came, 140 of them by the last.
        let mut packets: Vec<(u64, u64)> = (0..200u64)
            .map(|k| ((1000 + k) * S, (1000 + k) * S - (k + 1) * ms))
            .collect();
        let run = |packets: &[(u64, u64)]| {
            let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: w }, UNBOUNDED);
            for &(a, s) in packets {
                e.on_packet(a, s);
            }
            assert_eq!(e.expired.len(), EXPIRED_KEPT);
            e.offset()
        };
        // Back to 1160 s: its window (1100, 1160] among the kept (let go
        // from 1076 s on): the formula's 102 ms.
        packets.push((1160 * S, 1160 * S - 500 * ms));
        assert_eq!(
            (run(&packets), formula(&packets, w)),
            ((102 * ms) as i128, (102 * ms) as i128)
        );
        // Back to 1120 s: (1060, 1120] holds 1061..1075 s too, gone: the
        // least kept there, 77 ms, where the formula says 62.
        packets.pop();
        packets.push((1120 * S, 1120 * S - 500 * ms));
        assert_eq!(
            (run(&packets), formula(&packets, w)),
            ((77 * ms) as i128, (62 * ms) as i128)
        );
    }

    /// A sample let go ahead of where a step back lands is not in the
    /// contract's window there, and does not count: one stamped an hour
    /// ahead (a forged send time) would hold every source age an hour
    /// old for a window. Two steps back in a row: the samples the first
    /// kept count at the second.
    #[test]
    fn a_step_back_counts_the_samples_of_its_own_window_only() {
        let ms = S / 1000;
        let w = 60 * S;
        let run = |packets: &[(u64, u64)]| {
            let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: w }, UNBOUNDED);
            for &(a, s) in packets {
                e.on_packet(a, s);
            }
            (e.offset(), formula(packets, w))
        };
        let delay = |a: u64, d: u64| (a, a - d);
        let mut forged = vec![(1000 * S, 4600 * S)];
        forged.extend((1001..=1100).map(|k| delay(k * S, ms)));
        forged.push(delay(950 * S, ms));
        assert_eq!(run(&forged), (ms as i128, ms as i128));
        let mut twice = vec![delay(1000 * S, ms / 2)];
        twice.extend((1001..=1100).map(|k| delay(k * S, ms)));
        twice.push(delay(1090 * S, ms));
        twice.push(delay(1030 * S, ms));
        assert_eq!(run(&twice), ((ms / 2) as i128, (ms / 2) as i128));
    }

    /// Arrivals behind the latest by at most [`STEP_BACK_NS`] are out of
    /// order, not a step: the window stays anchored at the latest. A
    /// datagram 3 ms late (queued behind a busy receive thread) leaves the
    /// 6 ms sample its window (re-anchored at it, the window dropped that
    /// sample 3 ms early, and the offset read 8 ms: source ages younger).
    #[test]
    fn arrivals_behind_by_less_than_a_step_keep_the_anchor() {
        let ms = S / 1000;
        let w = 2 * S;
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: w }, UNBOUNDED);
        e.on_packet(100 * S, 100 * S - 5 * ms);
        e.on_packet(101_500 * ms, 101_500 * ms - 6 * ms);
        e.on_packet(101_497 * ms, 101_497 * ms - 7 * ms);
        e.on_packet(102 * S, 102 * S - 8 * ms);
        e.on_packet(103_498 * ms, 103_498 * ms - 9 * ms);
        assert_eq!(e.offset(), (6 * ms) as i128);
        e.on_packet(103_500 * ms, 103_500 * ms - 9 * ms);
        assert_eq!(e.offset(), (8 * ms) as i128);
    }

    /// At the bound itself: behind by [`STEP_BACK_NS`] exactly is no step.
    #[test]
    fn an_arrival_behind_by_the_bound_keeps_the_anchor() {
        let w = 10 * S;
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: w }, UNBOUNDED);
        e.on_packet(100 * S, 100 * S - 1_000);
        e.on_packet(105 * S, 105 * S - 5_000);
        // Behind by the bound: raised to 105 s, the 100 s sample kept (it
        // leaves at 110 s of the anchor, not of the stamp).
        e.on_packet(105 * S - STEP_BACK_NS, 105 * S - STEP_BACK_NS - 7_000);
        assert_eq!((e.offset(), e.latest), (1_000, 105 * S));
        e.on_packet(110 * S, 110 * S - 9_000);
        assert_eq!(e.offset(), 5_000);
    }

    #[test]
    fn fixed_is_constant() {
        let mut e = OffsetEstimator::new(OffsetMode::Fixed(-250), UNBOUNDED);
        assert_eq!(e.offset(), -250);
        e.on_packet(10 * S, 1);
        assert_eq!(e.offset(), -250);
    }

    #[test]
    fn auto_starts_at_zero_and_takes_first_packet() {
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: 60 * S }, UNBOUNDED);
        assert_eq!(e.offset(), 0);
        e.on_packet(100 * S, 100 * S - 300);
        assert_eq!(e.offset(), 300);
    }

    #[test]
    fn window_bounds_are_exclusive_old_inclusive_new() {
        let w = 10 * S;
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: w }, UNBOUNDED);
        e.on_packet(100 * S, 100 * S - 5); // offset 5
        e.on_packet(101 * S, 101 * S - 50); // offset 50
        assert_eq!(e.offset(), 5);
        // Exactly W after the first: a_p − W = a_1, which is excluded.
        e.on_packet(110 * S, 110 * S - 70);
        assert_eq!(e.offset(), 50);
        // One ns before the second packet leaves the window it is still in.
        e.on_packet(111 * S - 1, 111 * S - 1 - 90);
        assert_eq!(e.offset(), 50);
        e.on_packet(111 * S, 111 * S - 95);
        assert_eq!(e.offset(), 70);
    }

    #[test]
    fn negative_and_huge_offsets_are_exact() {
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: S }, UNBOUNDED);
        e.on_packet(100, 400);
        assert_eq!(e.offset(), -300);
        e.on_packet(101, u64::MAX);
        assert_eq!(e.offset(), 101 - u64::MAX as i128);
    }

    /// A provider clock that runs slow on a quiet link: every packet's
    /// `arrival − send_time` is higher than the one before, so every packet
    /// in the window stays in the queue — more than the initial allocation.
    #[test]
    fn rising_offsets_past_the_initial_queue_stay_exact() {
        let w = 5 * S;
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: w }, UNBOUNDED);
        let n = 3 * INITIAL_QUEUE as u64;
        let ms = 1_000_000;
        for i in 0..n {
            let a = 1_000 * S + i * w / n;
            e.on_packet(a, a - ms - i);
        }
        assert_eq!(e.offset(), ms as i128);
        e.on_packet(1_000 * S + w, 1_000 * S + w - 10 * ms);
        assert_eq!(
            e.offset(),
            ms as i128 + 1,
            "the first packet left the window"
        );
        assert_eq!(e.merges(), 0);
    }

    /// The queue of a rising delay keeps every packet (all are needed), at
    /// three bytes each for packets a microsecond apart.
    #[test]
    fn rising_offsets_cost_a_few_bytes_per_packet() {
        let mut e = OffsetEstimator::new(
            OffsetMode::Auto {
                window_ns: 3600 * S,
            },
            UNBOUNDED,
        );
        let n = 100_000u64;
        for i in 0..n {
            let a = 1_000 * S + i * 1_000;
            e.on_packet(a, a - 1_000_000 - i);
        }
        let (entries, bytes) = e.queued();
        assert_eq!(entries as u64, n);
        assert!(bytes <= 3 * entries, "{bytes} bytes for {entries} entries");
        assert_eq!(e.offset(), 1_000_000);
    }

    /// Both ends of the value range, and merges of entries whose difference
    /// needs all 65 bits.
    #[test]
    fn extreme_values_survive_the_coding_and_merges() {
        for cap in [2, 3, UNBOUNDED] {
            let mut e = OffsetEstimator::new(
                OffsetMode::Auto {
                    window_ns: u64::MAX,
                },
                cap,
            );
            e.on_packet(0, u64::MAX);
            e.on_packet(1, 1 << 40);
            e.on_packet(u64::MAX - 1, 0);
            e.on_packet(u64::MAX - 1, 1);
            assert_eq!(e.offset(), -(u64::MAX as i128), "cap {cap}");
            // The first packet leaves the window; the second is the minimum
            // unless a merge gave its time the first one's value.
            e.on_packet(u64::MAX, 0);
            let second = 1 - (1i128 << 40);
            assert!(e.offset() <= second, "cap {cap}");
            assert_eq!(e.offset() == second, cap == UNBOUNDED, "cap {cap}");
        }
    }

    /// Feeds `packets` (arrival, send time) to an estimator with `cap` and
    /// compares every estimate with the brute force: equal without a cap,
    /// never above it with one.
    fn against_brute(
        packets: &[(u64, u64)],
        window: u64,
        cap: usize,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: window }, cap);
        for (i, &(a, send)) in packets.iter().enumerate() {
            e.on_packet(a, send);
            let exact = brute(packets, i, window);
            if cap == UNBOUNDED {
                proptest::prop_assert_eq!(e.offset(), exact);
            } else {
                proptest::prop_assert!(e.offset() <= exact);
                proptest::prop_assert!(e.queued().0 <= cap);
            }
        }
        Ok(())
    }

    proptest::proptest! {
        /// Any arrival gaps and send times: exact without a cap; with a
        /// cap of 2 to 5 entries, never above exact.
        #[test]
        fn wild_times_against_brute_force(
            steps in proptest::collection::vec((0u64..1 << 40, proptest::num::u64::ANY), 1..200),
            window in 1u64..1 << 42,
            cap in 1usize..6,
        ) {
            let cap = if cap == 1 { UNBOUNDED } else { cap };
            let mut a = 0u64;
            let packets: Vec<(u64, u64)> = steps
                .into_iter()
                .map(|(gap, send)| {
                    a = a.saturating_add(gap);
                    (a, send)
                })
                .collect();
            against_brute(&packets, window, cap)?;
        }

        /// Mostly rising delays with a sudden drop now and then: long queues
        /// that cross from the whole tail into the packed part and back
        /// (pops) when unbounded, and merges under caps.
        #[test]
        fn rising_delays_against_brute_force(
            steps in proptest::collection::vec((0u64..1000, 0u32..10, 0u64..2000), 1..300),
            window in 1u64..200_000,
            cap in proptest::sample::select(vec![UNBOUNDED, 2, 3, TAIL + 1, 100]),
        ) {
            let mut a = 1_000_000u64;
            let packets: Vec<(u64, u64)> = steps
                .into_iter()
                .enumerate()
                .map(|(i, (gap, coin, drop))| {
                    a += gap;
                    let delay = 10_000 + 2 * i as u64 - if coin == 0 { drop } else { 0 };
                    (a, a - delay)
                })
                .collect();
            against_brute(&packets, window, cap)?;
        }

        #[test]
        fn matches_brute_force(
            steps in proptest::collection::vec((0u64..3_000, 0u64..2_000), 1..300),
            window in 1u64..5_000,
        ) {
            let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: window }, UNBOUNDED);
            let mut packets = Vec::new();
            let mut a = 1_000_000u64;
            for (gap, delay) in steps {
                a += gap;
                let send = a - 500 - delay;
                packets.push((a, send));
                e.on_packet(a, send);
                proptest::prop_assert_eq!(e.offset(), brute(&packets, packets.len() - 1, window));
            }
        }

        #[test]
        fn tiny_queue_never_overestimates(
            steps in proptest::collection::vec((0u64..100, 0u64..2_000), 1..300),
            window in 1u64..5_000,
        ) {
            let mut e = OffsetEstimator::new(OffsetMode::Auto { window_ns: window }, 2);
            let mut packets = Vec::new();
            let mut a = 1_000_000u64;
            for (gap, delay) in steps {
                a += gap;
                let send = a - 500 - delay;
                packets.push((a, send));
                e.on_packet(a, send);
                proptest::prop_assert!(e.offset() <= brute(&packets, packets.len() - 1, window));
            }
        }
    }
}
