//! Venue simulators: a provider or an exchange publishing on one or two
//! lines, with the losses, duplicates, reordering and pauses a receiver
//! must survive. [`sqf`]: an SQF provider; [`itch50`]: an ITCH 5.0 venue
//! with a re-request server; [`mdp3`]: a CME MDP 3.0 channel with its
//! snapshot and definition loops. They share the pacing, the line effects
//! and the sockets below.
//!
//! # Safety of destinations
//!
//! A simulator sends only to 127.0.0.0/8, or to a multicast group with TTL 0
//! from a socket bound to 127.0.0.1: Linux then routes the datagram out of
//! the loopback interface and, with multicast loop on, delivers it to local
//! members that joined the group on 127.0.0.1; TTL 0 keeps it off every
//! other interface. Any other destination is refused before a socket opens.

pub mod itch50;
pub mod mdp3;
pub mod sqf;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

const NS_PER_MS: u64 = 1_000_000;

const NS_PER_S: u64 = 1_000_000_000;

/// Most quotes in one datagram (16 + 100 × 48 bytes).
const MAX_BATCH: usize = 100;

/// The highest `--rate` a simulator takes by default, per second (one
/// may take a lower bound of its own).
pub const MAX_RATE: f64 = 10_000_000.0;

/// Longest `--halt-every-s` of a venue, s (a day).
pub const MAX_HALT_EVERY_S: u64 = 86_400;
/// Longest `--heartbeat-ms` of every simulator, ms (a minute).
pub const MAX_HEARTBEAT_MS: u64 = 60_000;
/// Longest `--pause-every-s`, s (a day).
pub const MAX_PAUSE_EVERY_S: u64 = 86_400;
/// Longest `--pause-ms`, ms (a day; shorter than `--pause-every-s` too).
pub const MAX_PAUSE_MS: u64 = 86_400_000;
/// Longest `--duration-s`, s (a year).
pub const MAX_DURATION_S: f64 = 31_536_000.0;
/// How long a run given no `--duration-s` (0) lasts at most, s (a week,
/// past every flag's day): one that neither a count it reaches nor a
/// signal ends still stops, as every load loop must.
pub const UNTIL_INTERRUPTED_S: u64 = 7 * 86_400;
/// The most quotes, messages or events one poll makes.
const MAX_PER_POLL: u64 = 65_536;
/// Pacing sleep between polls.
pub(crate) const POLL_SLEEP: Duration = Duration::from_micros(200);

/// One datagram to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// 0 = line A, 1 = line B.
    pub line: usize,
    /// The SQF packet.
    pub payload: Vec<u8>,
}

/// What one line carried.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LineReport {
    /// `"A"` or `"B"`.
    pub line: String,
    /// Destination `ip:port`.
    pub destination: String,
    /// Datagrams put on this line, every copy counted (duplicates and
    /// held-back datagrams once emitted included).
    pub datagrams_sent: u64,
    /// Datagrams this line dropped (session messages on a line at 100 % loss included).
    pub dropped: u64,
    /// Datagrams sent twice.
    pub duplicated: u64,
    /// Datagrams held back and sent after the next one.
    pub reordered: u64,
}

/// splitmix64: small, fast, and good enough for simulated choices.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    /// An independent stream `stream` of the generator seeded with `seed`.
    pub(crate) fn new(seed: u64, stream: u64) -> SplitMix64 {
        let mut g = SplitMix64(seed ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03));
        g.next_u64();
        g
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `percent` / 100 (always for 100, never for 0).
    pub(crate) fn percent(&mut self, percent: f64) -> bool {
        self.unit() * 100.0 < percent
    }
}

/// One line's effects: its loss, its own PRNG and the datagram it holds back.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    loss: f64,
    rng: SplitMix64,
    /// A datagram held back, and how many copies to send of it.
    held: Option<(Vec<u8>, u32)>,
}

impl Line {
    /// Line `i` (0 = A) dropping `loss` percent, its draws from stream `2 + i` of `seed`.
    pub(crate) fn new(i: usize, loss: f64, seed: u64) -> Line {
        Line {
            loss,
            rng: SplitMix64::new(seed, 2 + i as u64),
            held: None,
        }
    }
}

/// Sends every held-back datagram.
pub(crate) fn flush_held(lines: &mut [Line], stats: &mut [LineReport], out: &mut Vec<Outgoing>) {
    for (i, line) in lines.iter_mut().enumerate() {
        if let Some((payload, copies)) = line.held.take() {
            push_copies(i, payload, copies, &mut stats[i], out);
        }
    }
}

/// Offers a datagram to every line, applying the line effects
/// (`duplicate`, `reorder` percent) unless it is a session message. True
/// when at least one line sends it (now or once held back).
pub(crate) fn offer(
    lines: &mut [Line],
    stats: &mut [LineReport],
    (duplicate, reorder): (f64, f64),
    payload: Vec<u8>,
    session: bool,
    out: &mut Vec<Outgoing>,
) -> bool {
    let mut delivered = false;
    for (i, line) in lines.iter_mut().enumerate() {
        let stats = &mut stats[i];
        let copies = if session {
            if line.loss >= 100.0 {
                stats.dropped += 1;
                continue;
            }
            1
        } else {
            let drop = line.rng.percent(line.loss);
            let dup = line.rng.percent(duplicate);
            let hold = line.rng.percent(reorder);
            if drop {
                stats.dropped += 1;
                continue;
            }
            let copies = if dup {
                stats.duplicated += 1;
                2
            } else {
                1
            };
            if hold && line.held.is_none() {
                stats.reordered += 1;
                line.held = Some((payload.clone(), copies));
                delivered = true;
                continue;
            }
            copies
        };
        delivered = true;
        push_copies(i, payload.clone(), copies, stats, out);
        if let Some((held, copies)) = line.held.take() {
            push_copies(i, held, copies, stats, out);
        }
    }
    delivered
}

/// A venue as the tests drive it: polled with the local time, done at its
/// count or duration, finished once.
#[cfg(test)]
pub(crate) trait Polled {
    /// Appends the datagrams due at `now_ns`.
    fn poll(&mut self, now_ns: u64, out: &mut Vec<Outgoing>);
    /// True once nothing more is owed.
    fn done(&self, now_ns: u64) -> bool;
    /// Appends the end, after which nothing more is sent.
    fn finish(&mut self, now_ns: u64, out: &mut Vec<Outgoing>);
}

/// Polls `v` every `step` from `t0` until done, then finishes it; every
/// datagram with the time of the poll that sent it.
#[cfg(test)]
pub(crate) fn drive(v: &mut impl Polled, t0: u64, step: u64) -> Vec<(u64, Outgoing)> {
    let (mut sent, mut out, mut t) = (Vec::new(), Vec::new(), t0);
    loop {
        v.poll(t, &mut out);
        sent.extend(out.drain(..).map(|o| (t, o)));
        if v.done(t) {
            break;
        }
        t += step;
    }
    v.finish(t, &mut out);
    sent.extend(out.drain(..).map(|o| (t, o)));
    sent
}

/// Rate, pauses and stop conditions, as both simulators pace themselves.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pacing {
    rate: f64,
    pause_every_ns: u64,
    pause_ns: u64,
    duration_ns: u64,
    count: u64,
}

impl Pacing {
    /// `(rate, what, max)`: `what` per second, above 0 and at most `max`; `duration_s`
    /// 0 (no limit) to [`MAX_DURATION_S`]; `(pause_every_s, pause_ms)`, at most
    /// [`MAX_PAUSE_EVERY_S`] and [`MAX_PAUSE_MS`], the pause shorter than its
    /// period; `count` (0: no limit). Errors name the flag.
    pub(crate) fn new(
        (rate, what, max): (f64, &str, f64),
        duration_s: f64,
        (pause_every_s, pause_ms): (u64, u64),
        count: u64,
    ) -> Result<Pacing> {
        if !(rate.is_finite() && rate > 0.0 && rate <= max) {
            bail!(
                "simulate: --rate must be above 0 and at most {max} {what} per second, got {rate}"
            );
        }
        if !(0.0..=MAX_DURATION_S).contains(&duration_s) {
            bail!("simulate: --duration-s must be from 0 to {MAX_DURATION_S} seconds, got {duration_s}");
        }
        check_at_most(&[
            ("--pause-every-s", pause_every_s, MAX_PAUSE_EVERY_S),
            ("--pause-ms", pause_ms, MAX_PAUSE_MS),
        ])?;
        let pause_every_ns = pause_every_s.saturating_mul(NS_PER_S);
        let pause_ns = pause_ms.saturating_mul(NS_PER_MS);
        if pause_every_ns > 0 && pause_ns >= pause_every_ns {
            bail!(
                "simulate: --pause-ms {pause_ms} must be shorter than --pause-every-s {pause_every_s} (in ms: {})",
                pause_every_s.saturating_mul(1000)
            );
        }
        Ok(Pacing {
            rate,
            pause_every_ns,
            pause_ns,
            duration_ns: match duration_s {
                0.0 => UNTIL_INTERRUPTED_S * NS_PER_S,
                s => (s * NS_PER_S as f64) as u64,
            },
            count,
        })
    }

    /// True inside a pause, at elapsed time `e`.
    pub(crate) fn in_pause(&self, e: u64) -> bool {
        self.pause_every_ns > 0
            && self.pause_ns > 0
            && e >= self.pause_every_ns
            && e % self.pause_every_ns < self.pause_ns
    }

    /// Active time (not paused) in `[0, e)`.
    pub(crate) fn active(&self, e: u64) -> u64 {
        e - self.paused_before(e)
    }

    /// Time spent paused in `[0, e)`.
    fn paused_before(&self, e: u64) -> u64 {
        if self.pause_every_ns == 0 || self.pause_ns == 0 {
            return 0;
        }
        let k = e / self.pause_every_ns;
        if k == 0 {
            return 0;
        }
        // pause_ns < pause_every_ns, so this stays below e.
        (k - 1) * self.pause_ns + (e - k * self.pause_every_ns).min(self.pause_ns)
    }

    /// Items owed by elapsed time `e`: active time × rate, capped by `count`.
    ///
    /// At most [`MAX_PER_POLL`] past `sent`: a rate faster than the
    /// machine sends is caught up over later polls, so one poll's output
    /// stays bounded and the stop conditions, checked between polls, hold.
    pub(crate) fn due(&self, e: u64, sent: u64) -> u64 {
        self.due_by(e).min(sent.saturating_add(MAX_PER_POLL))
    }

    fn due_by(&self, e: u64) -> u64 {
        let active = self.active(e);
        // `as` saturates and floors.
        let due = (active as f64 * self.rate / NS_PER_S as f64) as u64;
        if self.count > 0 {
            due.min(self.count)
        } else {
            due
        }
    }

    /// True once `sent` reached `count`, or the duration (a week when
    /// none was given) has elapsed at `now` since `start`.
    pub(crate) fn done(&self, sent: u64, start: Option<u64>, now: u64) -> bool {
        (self.count > 0 && sent >= self.count)
            || start.is_some_and(|s| now.saturating_sub(s) >= self.duration_ns)
    }
}

/// Each `(flag, value, max)` must be from 0 to `max`.
pub(crate) fn check_at_most(flags: &[(&str, u64, u64)]) -> Result<()> {
    for &(flag, v, max) in flags {
        if v > max {
            bail!("simulate: {flag} must be from 0 to {max}, got {v}");
        }
    }
    Ok(())
}

/// Each `(flag, value)` must be a percentage from 0 to 100.
pub(crate) fn check_percents(flags: &[(&str, f64)]) -> Result<()> {
    for &(flag, v) in flags {
        if !(0.0..=100.0).contains(&v) {
            bail!("simulate: {flag} must be a percentage from 0 to 100, got {v}");
        }
    }
    Ok(())
}

/// Line A and, optionally, line B (destination, loss percent): their
/// effects, with draws from `seed`, and their empty reports. A loss for a
/// line B not given is refused (it would be ignored).
pub(crate) fn lines(
    a: (SocketAddrV4, f64),
    (b, loss_b): (Option<SocketAddrV4>, f64),
    seed: u64,
) -> Result<(Vec<Line>, Vec<LineReport>)> {
    match b {
        Some(b) if b == a.0 => bail!("simulate: line B {b} is the same destination as line A"),
        None if loss_b != 0.0 => bail!(
            "simulate: --loss-b {loss_b} without a line B (--line-b for sqf, and for itch50 without --config; else a second incremental line in the configuration)"
        ),
        _ => {}
    }
    let b = b.map(|b| (b, loss_b));
    Ok(std::iter::once(a)
        .chain(b)
        .enumerate()
        .map(|(i, (dest, loss))| {
            let report = LineReport {
                line: ["A", "B"][i].to_string(),
                destination: dest.to_string(),
                ..LineReport::default()
            };
            (Line::new(i, loss, seed), report)
        })
        .unzip())
}

fn push_copies(
    line: usize,
    payload: Vec<u8>,
    copies: u32,
    stats: &mut LineReport,
    out: &mut Vec<Outgoing>,
) {
    for _ in 1..copies {
        out.push(Outgoing {
            line,
            payload: payload.clone(),
        });
    }
    out.push(Outgoing { line, payload });
    stats.datagrams_sent += u64::from(copies);
}

/// The next round after one due at `prev`, at elapsed time `e`: on the grid,
/// unless the grid fell behind (a pause, a late poll), then one interval from now.
pub(crate) fn next_due(prev: u64, interval: u64, e: u64) -> u64 {
    let next = prev.saturating_add(interval);
    if next <= e {
        e.saturating_add(interval)
    } else {
        next
    }
}

/// Refuses any destination but loopback unicast and multicast (sent with TTL 0).
pub(crate) fn check_destination(which: &str, dest: SocketAddrV4) -> Result<()> {
    let ip = *dest.ip();
    if dest.port() == 0 {
        bail!("simulate: line {which} destination {dest} has port 0");
    }
    if !(ip.is_loopback() || ip.is_multicast()) {
        bail!(
            "simulate: line {which} destination {dest} is neither loopback (127.0.0.0/8) nor multicast: the simulator sends nowhere else"
        );
    }
    Ok(())
}

pub(crate) fn open_line(which: &str, dest: SocketAddrV4, source: Ipv4Addr) -> Result<UdpSocket> {
    if !source.is_loopback() {
        bail!("simulate: --source {source} is not a loopback address (127.0.0.0/8)");
    }
    let socket = UdpSocket::bind(SocketAddrV4::new(source, 0))
        .with_context(|| format!("simulate: opening a UDP socket on {source} for line {which}"))?;
    if dest.ip().is_multicast() {
        // Bound to a loopback address, the datagram leaves by the loopback interface;
        // TTL 0 keeps it on this host, the loop delivers it to local members.
        socket
            .set_multicast_loop_v4(true)
            .and_then(|()| socket.set_multicast_ttl_v4(0))
            .with_context(|| format!("simulate: setting multicast TTL 0 on line {which}"))?;
    }
    Ok(socket)
}

/// Prints `report` as one JSON line on stdout.
pub(crate) fn print_report(report: &impl Serialize, stop: &AtomicBool) -> Result<()> {
    let json = serde_json::to_string(report).context("simulate: encoding the report")?;
    // A reader that stopped reading does not hold a signal off: the write
    // gives up once a stop came and no room did for 100 ms; after a stop
    // that ended the run (Ctrl-C), for 5 s in a row, so that a reader
    // that reads slowly still gets the report whole (and a second signal,
    // which a flag cannot tell from the first, is never lost).
    let stopped = stop.load(std::sync::atomic::Ordering::Relaxed);
    let waits = if stopped { 50 } else { 1 };
    let whole = crate::sys::write_stdout_patiently(format!("{json}\n").as_bytes(), stop, waits)
        .context("simulate: writing the report")?;
    anyhow::ensure!(
        whole,
        "simulate: the report was not written whole: stdout is not read, and a signal asked to stop"
    );
    Ok(())
}

/// One socket per line, each sending to its destination; a line is its
/// slot (`Outgoing::line`), a slot may be empty.
pub(crate) struct LineSockets(Vec<Option<(&'static str, SocketAddrV4, UdpSocket)>>);

impl LineSockets {
    /// Checks the destinations (loopback or multicast) and opens a socket
    /// per line on the loopback `source`.
    pub(crate) fn open(
        line_a: SocketAddrV4,
        line_b: Option<SocketAddrV4>,
        source: Ipv4Addr,
    ) -> Result<LineSockets> {
        LineSockets::open_slots(&[Some(("A", line_a)), line_b.map(|b| ("B", b))], source)
    }

    /// As [`LineSockets::open`], a socket for each slot that names a line
    /// (its name in errors, its destination); every destination is
    /// checked before any socket opens.
    pub(crate) fn open_slots(
        slots: &[Option<(&'static str, SocketAddrV4)>],
        source: Ipv4Addr,
    ) -> Result<LineSockets> {
        for &(which, dest) in slots.iter().flatten() {
            check_destination(which, dest)?;
        }
        slots
            .iter()
            .map(|slot| {
                slot.map(|(which, dest)| Ok((which, dest, open_line(which, dest, source)?)))
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()
            .map(LineSockets)
    }

    /// Sends (and empties) `out`; a datagram for an empty slot is dropped.
    pub(crate) fn send(&self, out: &mut Vec<Outgoing>) -> Result<()> {
        for o in out.drain(..) {
            let Some((which, dest, socket)) = self.0.get(o.line).and_then(Option::as_ref) else {
                continue;
            };
            match socket.send_to(&o.payload, dest) {
                Ok(_) => {}
                // Nobody listening on a unicast port: that is the receiver's business.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("simulate: sending on line {which} to {dest}"))
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What keeps the simulator's multicast on this host: the line's
    /// socket bound to a loopback source, with TTL 0 and the loop on; a
    /// source elsewhere is refused.
    #[test]
    fn multicast_lines_stay_on_this_host() {
        let group: SocketAddrV4 = "239.255.0.1:5000".parse().unwrap();
        let socket = open_line("A", group, Ipv4Addr::LOCALHOST).unwrap();
        assert_eq!(socket.multicast_ttl_v4().unwrap(), 0);
        assert!(socket.multicast_loop_v4().unwrap());
        assert!(socket.local_addr().unwrap().ip().is_loopback());
        let e = open_line("A", group, Ipv4Addr::new(10, 0, 0, 1)).unwrap_err();
        assert!(e.to_string().contains("not a loopback address"), "{e}");
        let e = check_destination("A", "10.0.0.1:5000".parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("neither loopback"), "{e}");
    }

    #[test]
    fn destinations_are_loopback_or_multicast_only() {
        let ok = |s: &str| check_destination("A", s.parse().unwrap());
        assert!(ok("127.0.0.1:5000").is_ok());
        assert!(ok("127.3.2.1:5000").is_ok());
        assert!(ok("239.1.1.1:30001").is_ok());
        for bad in [
            "10.0.0.1:5000",
            "192.0.2.2:5000",
            "0.0.0.0:5000",
            "255.255.255.255:5000",
        ] {
            let e = ok(bad).unwrap_err().to_string();
            assert!(e.contains("neither loopback"), "{bad}: {e}");
        }
        assert!(ok("127.0.0.1:0")
            .unwrap_err()
            .to_string()
            .contains("port 0"));
    }

    /// A run given no duration stops after a week however it was paced:
    /// a count the rate never reaches does not keep it going.
    #[test]
    fn a_run_without_a_duration_stops_after_a_week() {
        let day = UNTIL_INTERRUPTED_S * NS_PER_S;
        let p = Pacing::new((1e-300, "quotes", MAX_RATE), 0.0, (0, 0), 1).unwrap();
        assert_eq!(p.due(day, 0), 0, "the count is never reached");
        assert!(!p.done(0, Some(5), 5 + day - 1));
        assert!(p.done(0, Some(5), 5 + day));
        let given = Pacing::new((1.0, "quotes", MAX_RATE), 8.0 * 86_400.0, (0, 0), 0).unwrap();
        assert!(!given.done(0, Some(0), day), "a duration given is kept");
    }

    #[test]
    fn the_rate_is_bounded_and_one_poll_makes_a_bounded_batch() {
        let pacing = |rate: f64| Pacing::new((rate, "quotes", MAX_RATE), 0.0, (0, 0), 0);
        for bad in [
            0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            MAX_RATE * 1.000_001,
            1.8e19,
        ] {
            let e = pacing(bad).unwrap_err().to_string();
            assert!(
                e.contains("at most 10000000 quotes per second"),
                "{bad}: {e}"
            );
        }
        let p = pacing(MAX_RATE).unwrap();
        // One second owes ten million; a poll makes at most MAX_PER_POLL
        // more than were sent, the rest caught up later.
        assert_eq!(p.due(NS_PER_S, 0), MAX_PER_POLL);
        assert_eq!(p.due(NS_PER_S, 9_990_000), 10_000_000);
        let slow = pacing(1_000.0).unwrap();
        assert_eq!(slow.due(NS_PER_S, 0), 1_000);
    }
}
