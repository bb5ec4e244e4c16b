//! Replaying a capture (SQF section 6): capture timestamps are arrival
//! times, datagrams are routed by destination `ip:port`, and checks are
//! answered at their own times between packets.
//!
//! Ordering: a check at `time_ns` is answered after every datagram of its
//! feed whose arrival is `<= time_ns` and before the first later one of
//! its feed, reading the capture in file order (feeds share nothing, so
//! in a capture in time order that is between the datagrams around it).
//! (A datagram stamped earlier than one its feed took, or than a check of
//! its feed already answered, is applied at its stamp, counted and warned
//! of: a check is answered before the first datagram of its feed later
//! than it, and datagrams after that are not reconsidered.)

use crate::capture::{CaptureError, CaptureReader, CaptureStats, Datagram};
use crate::config::keys::echo;
use crate::config::services::{line_index, listen_takes, Receive};
use crate::config::Config;
use crate::engine::{CheckDetail, Segment};
use crate::handler::Handler;
use crate::protocol::Rejected;
use crate::symbol::Symbol;
use crate::sys::udp::STEP_BACK_NS;
use crate::verdict::Reasons;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::path::Path;

pub mod itch50;

/// One check from a checks file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// When to evaluate: ns since the Unix epoch, capture clock.
    pub time_ns: u64,
    /// Feed name as written.
    pub feed: String,
    /// Symbol as written.
    pub symbol: String,
}

/// A checks file that cannot be used: one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ChecksError(String);

/// Reads a checks CSV: header `time_ns,feed,symbol`, rows in any order.
/// The file is read whole, at most [`CHECKS_MAX_BYTES`], and only once its
/// first [`CHECKS_HEAD_BYTES`] hold the header: a capture or `/dev/zero`
/// named by mistake is refused at once, not read into memory.
pub fn load_checks(path: &Path) -> Result<Vec<Check>, ChecksError> {
    use std::io::Read;
    let name = path.display().to_string();
    let fail = |e: String| ChecksError(format!("checks {name}: {e}"));
    let file = crate::sys::open_input(path).map_err(|e| fail(e.to_string()))?;
    let too_large = || {
        fail(format!(
            "larger than {} MiB (the checks are held in memory)",
            CHECKS_MAX_BYTES >> 20
        ))
    };
    // A file says its size; a pipe or a device is cut off at the limit.
    if file
        .metadata()
        .is_ok_and(|m| m.is_file() && m.len() > CHECKS_MAX_BYTES)
    {
        return Err(too_large());
    }
    let mut input = file.take(CHECKS_MAX_BYTES + 1);
    let mut bytes = Vec::new();
    (&mut input)
        .take(CHECKS_HEAD_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(e.to_string()))?;
    if bytes.len() as u64 == CHECKS_HEAD_BYTES {
        // More may follow: the header must be whole already.
        let head = String::from_utf8_lossy(&bytes);
        let head = head.strip_prefix('\u{feff}').unwrap_or(&head);
        let first = head
            .split_inclusive('\n')
            .enumerate()
            .find(|(_, l)| !l.trim().is_empty());
        match first {
            Some((at, line)) if line.ends_with('\n') => header(at + 1, line).map_err(fail)?,
            _ => {
                return Err(fail(format!(
                    "line 1: no header time_ns,feed,symbol in the first {} KiB",
                    CHECKS_HEAD_BYTES >> 10
                )))
            }
        }
        input
            .read_to_end(&mut bytes)
            .map_err(|e| fail(e.to_string()))?;
        if bytes.len() as u64 > CHECKS_MAX_BYTES {
            return Err(too_large());
        }
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        // Where: the line (as the other errors say) and the byte.
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        fail(format!(
            "line {line}: not UTF-8 text (invalid byte at offset {at})"
        ))
    })?;
    parse_checks(&text).map_err(fail)
}

/// Largest checks file: 256 MiB, about eight million checks, held in
/// memory (with their answers) while a replay answers them.
pub const CHECKS_MAX_BYTES: u64 = 256 << 20;

/// Most checks a file may hold (2^23): rows of a few bytes each would
/// otherwise fit tens of millions in the bytes allowed, each held with
/// its answer (about 200 bytes a check).
pub const CHECKS_MAX_ROWS: usize = 1 << 23;

/// Bytes of a checks file read before its header is checked.
pub const CHECKS_HEAD_BYTES: u64 = 64 << 10;

/// Line `n` of a checks file, its first not blank: the header.
fn header(n: usize, line: &str) -> Result<(), String> {
    let header = split_csv(line.trim_end_matches('\n')).map_err(|e| format!("line {n}: {e}"))?;
    if header != ["time_ns", "feed", "symbol"] {
        return Err(format!(
            "line {n}: header must be time_ns,feed,symbol, got {}",
            echo(&header.join(","))
        ));
    }
    Ok(())
}

/// Parses checks CSV text. Fields may be double-quoted (`""` inside quotes
/// is a quote); blank lines are skipped; surrounding spaces are trimmed.
pub fn parse_checks(text: &str) -> Result<Vec<Check>, String> {
    parse_checks_up_to(text, CHECKS_MAX_ROWS)
}

/// [`parse_checks`] of at most `max_rows` checks.
fn parse_checks_up_to(text: &str, max_rows: usize) -> Result<Vec<Check>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((at, first)) = lines.next() else {
        return Err("empty file: expected the header time_ns,feed,symbol".into());
    };
    header(at + 1, first)?;
    let mut checks = Vec::new();
    for (i, line) in lines {
        let n = i + 1;
        if checks.len() == max_rows {
            return Err(format!("line {n}: more than {max_rows} checks"));
        }
        let fields = split_csv(line).map_err(|e| format!("line {n}: {e}"))?;
        let [time, feed, symbol] = <[String; 3]>::try_from(fields).map_err(|f| {
            format!(
                "line {n}: expected 3 fields (time_ns,feed,symbol), got {}",
                f.len()
            )
        })?;
        let time_ns = time.parse::<u64>().map_err(|e| match e.kind() {
            std::num::IntErrorKind::PosOverflow => format!(
                "line {n}: time_ns {} is past the largest time, {} ns",
                echo(&time),
                u64::MAX
            ),
            _ => format!(
                "line {n}: time_ns {} is not an integer of nanoseconds",
                echo(&time)
            ),
        })?;
        checks.push(Check {
            time_ns,
            feed,
            symbol,
        });
    }
    Ok(checks)
}

/// The fields of one row of the checks file, at most 3 kept: a row of
/// more is refused, its fields counted but not kept (a row of a million
/// commas costs no more memory than its own bytes).
fn split_csv(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::with_capacity(3);
    let mut more = 0usize;
    let mut chars = line.trim_end_matches('\r').chars().peekable();
    loop {
        // Surrounding whitespace (a tab too: `trim`'s) is no part of a
        // field, quoted or not.
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err("unterminated quoted field".into()),
                }
            }
            while chars.peek().is_some_and(|c| c.is_whitespace()) {
                chars.next();
            }
            match chars.peek() {
                None | Some(',') => {}
                Some(_) => return Err("text after a closing quote".into()),
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                field.push(c);
                chars.next();
            }
            field = field.trim().to_string();
        }
        if fields.len() < 3 {
            fields.push(field);
        } else {
            more += 1;
        }
        match chars.next() {
            Some(',') => continue,
            _ if more > 0 => {
                return Err(format!(
                    "expected 3 fields (time_ns,feed,symbol), got {}",
                    3 + more
                ))
            }
            _ => return Ok(fields),
        }
    }
}

/// The answer to one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// Reasons; empty means ok.
    pub reasons: Reasons,
    /// What the check's line adds, for a protocol that adds anything.
    pub detail: Option<CheckDetail>,
    /// The input broke before the check's time: answered from the state
    /// at the break, what came after it unread (its line says so).
    pub past_break: bool,
}

/// What a replay produced.
pub struct Outcome {
    /// One answer per check, in input order.
    pub answers: Vec<Answer>,
    /// The summary object.
    pub summary: Summary,
    /// Set when the input broke part way; everything before it was replayed.
    pub input_error: Option<InputError>,
}

/// A replay's input that broke part way: one line naming the file, the
/// byte offset and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A packet capture.
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// A venue's file (offsets in its uncompressed stream).
    #[error("{format} {name}: {error}")]
    File {
        /// The file's format (`BinaryFILE`).
        format: &'static str,
        /// The file's path.
        name: String,
        /// What is wrong, and where.
        error: Box<dyn std::error::Error + Send + Sync>,
        /// The file is not of its format at all (its first records do not
        /// read as the venue's messages): the error is all there is to say.
        foreign: bool,
    },
    /// A file a feed reads before any datagram (MDP3's `definitions`):
    /// nothing was replayed.
    #[error("{0}")]
    Preload(String),
}

impl InputError {
    /// The input is not of its format at all: its error is the one line
    /// to say, with no summary of what was read.
    pub fn foreign(&self) -> bool {
        matches!(self, InputError::File { foreign: true, .. })
    }
}

/// The summary file (SQF section 6, plus diagnostics): `{"capture": …,
/// "feeds": {name: …}}`, each feed as its protocol reports it.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// Capture-level counters: what was read and what was not a routable datagram.
    pub capture: CaptureSummary,
    /// Per feed, by name.
    pub feeds: BTreeMap<String, FeedSummary>,
}

pub use crate::protocol::Summary as FeedSummary;

/// Capture-level counters.
#[derive(Debug, Serialize)]
pub struct CaptureSummary {
    /// Arrival times of the first and the last datagram read, ns (told on
    /// the replay's last line, not written to the file).
    #[serde(skip)]
    pub span_ns: Option<(u64, u64)>,
    /// Frames the reader could not turn into UDP/IPv4 datagrams, by cause.
    #[serde(flatten)]
    pub reader: CaptureStats,
    /// Datagrams whose destination matched no feed's line.
    pub unrouted: u64,
    /// Datagrams larger than the live receive buffer
    /// ([`crate::sys::udp::MAX_DATAGRAM`] bytes): skipped, as the live
    /// receiver drops them before any feed sees them (the key is written
    /// only when some were).
    #[serde(skip_serializing_if = "crate::capture::is_zero")]
    pub oversized: u64,
    /// Of them, a recording's (from `0.0.0.0:0`) to a unicast address, or
    /// one from a feed's channel server (its `recovery`): told when a
    /// feed's channel listens on a port the kernel chose, which the
    /// recording or capture names and the configuration cannot.
    #[serde(skip)]
    pub unrouted_recorded: u64,
    /// Datagrams to a line of a feed with `source` from another sender:
    /// dropped, as the live source-specific join has the kernel drop them
    /// (the key is written only when some were).
    #[serde(skip_serializing_if = "crate::capture::is_zero")]
    pub wrong_source: u64,
    /// Records stamped earlier than one their feed took before them, or
    /// than a check of it already answered, each applied at its stamp
    /// ([`crate::handler::Arrivals`]; the key is written only when some
    /// were).
    #[serde(skip_serializing_if = "crate::capture::is_zero")]
    pub time_steps_back: u64,
    /// The largest of those steps back, ns (told in the warning).
    #[serde(skip)]
    pub largest_step_back_ns: u64,
}

/// Routes datagrams to feeds by destination.
pub struct Router {
    /// (destination as one integer, feed, line), sorted by destination: a
    /// feed has one or two lines, so this is a handful of entries searched
    /// without hashing.
    routes: Vec<(u64, u16, u8)>,
    /// Each feed's `source` (a source-specific join), by feed.
    sources: Vec<Option<std::net::Ipv4Addr>>,
    /// The feeds' channels: (listening address, server, feed, line); an
    /// unspecified address matches any address with the port, port 0
    /// matches nothing ([`listen_takes`]); with a server, only its
    /// datagrams are the channel's, as live.
    channels: Vec<(SocketAddrV4, Option<SocketAddrV4>, u16, u8)>,
    /// The feeds' streams: (server, feed).
    streams: Vec<(SocketAddrV4, u16)>,
    /// When set, every datagram goes to this feed's line A.
    pub all_to: Option<u16>,
}

impl Router {
    /// Routes every line and channel of every feed's services.
    pub fn new(config: &Config) -> Router {
        let mut routes: Vec<(u64, u16, u8)> = Vec::new();
        let mut channels = Vec::new();
        let mut streams = Vec::new();
        for (id, f) in config.feeds.iter().enumerate() {
            for (s, service) in f.services().iter().enumerate() {
                match &service.receive {
                    Receive::Lines(addrs) => routes.extend(
                        addrs
                            .iter()
                            .enumerate()
                            .map(|(copy, l)| (route_key(*l), id as u16, line_index(s, copy) as u8)),
                    ),
                    // (One on port 0 routes nothing, [`listen_takes`],
                    // but its server is known: [`is_server`](Self::is_server).)
                    Receive::Channel(c) => {
                        channels.push((c.listen, c.server, id as u16, line_index(s, 0) as u8))
                    }
                    Receive::Stream(server) => streams.push((*server, id as u16)),
                }
            }
        }
        routes.sort_unstable();
        Router {
            routes,
            sources: config.feeds.iter().map(|f| f.source).collect(),
            channels,
            streams,
            all_to: None,
        }
    }

    /// The feed a TCP segment between `src` and `dst` belongs to, with
    /// the local end and whether the server sent it: the feed whose stream
    /// server is one of the two ends.
    pub fn route_segment(
        &self,
        src: SocketAddrV4,
        dst: SocketAddrV4,
    ) -> Option<(u16, SocketAddrV4, bool)> {
        self.streams.iter().find_map(|&(server, feed)| {
            if src == server {
                Some((feed, dst, true))
            } else if dst == server {
                Some((feed, src, false))
            } else {
                None
            }
        })
    }

    /// The feed a datagram to `dst` belongs to.
    #[inline]
    pub fn route(&self, dst: SocketAddrV4) -> Option<u16> {
        self.route_line(dst).map(|(feed, _)| feed)
    }

    /// The feed and the line (0 = A, 1 = B of its `lines`; its other
    /// services' as [`line_index`] numbers them) a datagram to `dst`
    /// belongs to. A line address wins over a channel.
    #[inline]
    pub fn route_line(&self, dst: SocketAddrV4) -> Option<(u16, usize)> {
        let anyone = SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0);
        self.route_from(anyone, dst).ok().flatten()
    }

    /// [`route_line`](Self::route_line) for a datagram from `src`, as the
    /// feed's socket would receive it live: a line of a feed with `source`
    /// takes only that sender's ([`WrongSource`] otherwise: the kernel
    /// drops the others' at a source-specific join), except from an
    /// unspecified sender `0.0.0.0:0` (a recording names none); a channel with a
    /// server takes only the server's (live, the others' are dropped: a
    /// forged answer would fill a gap with whatever its sender chose),
    /// again except from `0.0.0.0:0`, one without takes any;
    /// and every line takes any with [`all_to`](Self::all_to) (a capture
    /// recorded elsewhere names other senders).
    #[inline]
    pub fn route_from(
        &self,
        src: SocketAddrV4,
        dst: SocketAddrV4,
    ) -> Result<Option<(u16, usize)>, WrongSource> {
        if let Some(feed) = self.all_to {
            return Ok(Some((feed, 0)));
        }
        match self
            .routes
            .binary_search_by_key(&route_key(dst), |&(k, ..)| k)
        {
            Ok(i) => {
                let (_, feed, line) = self.routes[i];
                let source = self.sources[usize::from(feed)];
                match source.is_none_or(|s| unnamed(src) || s == *src.ip()) {
                    true => Ok(Some((feed, usize::from(line)))),
                    false => Err(WrongSource),
                }
            }
            Err(_) if self.channels.is_empty() => Ok(None),
            Err(_) => self.channel(src, dst),
        }
    }

    /// Whether `src` is a feed's channel server (its answers' sender).
    pub fn is_server(&self, src: SocketAddrV4) -> bool {
        self.channels.iter().any(|&(_, s, ..)| s == Some(src))
    }

    #[cold]
    fn channel(
        &self,
        src: SocketAddrV4,
        dst: SocketAddrV4,
    ) -> Result<Option<(u16, usize)>, WrongSource> {
        let Some(&(_, server, feed, line)) =
            self.channels.iter().find(|&&(l, ..)| listen_takes(l, dst))
        else {
            return Ok(None);
        };
        // A request of ours to a feed's server, captured on the host (its
        // port the one answers come to): not an answer.
        if self.channels.iter().any(|&(_, s, ..)| s == Some(dst)) {
            return Ok(None);
        }
        match server.is_none_or(|s| unnamed(src) || s == src) {
            true => Ok(Some((feed, line as usize))),
            false => Err(WrongSource),
        }
    }
}

/// A recording's sender: `run --record` writes `0.0.0.0:0`, as its
/// sockets were filtered already. (No datagram on the wire comes from
/// there: the kernel drops such a source.)
pub fn unnamed(src: SocketAddrV4) -> bool {
    src == SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0)
}

/// A datagram to a line of a feed with `source` from another sender
/// ([`Router::route_from`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrongSource;

/// A destination as one integer: address in the high bits, port in the low 16.
#[inline]
fn route_key(a: SocketAddrV4) -> u64 {
    (u32::from(*a.ip()) as u64) << 16 | a.port() as u64
}

/// Watches a replay datagram by datagram, e.g. to explain why a verdict
/// changed ([`crate::explain`]). Both hooks default to doing nothing, and
/// [`replay`] uses `()`, so a plain replay pays nothing for them.
///
/// For each datagram read, in capture order: checks earlier than it are
/// answered, then [`before`](Observer::before) is called, then a routed
/// datagram is applied and [`after`](Observer::after) is called; a snapshot
/// connection's segment goes the same way, between
/// [`before_segment`](Observer::before_segment) and
/// [`after_segment`](Observer::after_segment). A
/// BinaryFILE replay calls [`before_record`](Observer::before_record) and
/// [`after_record`](Observer::after_record) the same way, and every check
/// calls [`before_check`](Observer::before_check) first. The handler is
/// lent mutably so that an observer can watch a feed (an ITCH feed's
/// `watch`) and bring it up to a time as a check
/// would ([`Handler::before_check`]); it must change nothing else.
pub trait Observer {
    /// A datagram was read; `feed` is where it is routed (`None`: nowhere).
    /// The handler has not seen it yet.
    #[inline]
    fn before(&mut self, handler: &mut Handler, feed: Option<u16>, datagram: &Datagram<'_>) {
        let _ = (handler, feed, datagram);
    }

    /// A datagram routed to `feed` was applied, with this result.
    #[inline]
    fn after(
        &mut self,
        handler: &mut Handler,
        feed: u16,
        datagram: &Datagram<'_>,
        result: Result<(), Rejected>,
    ) {
        let _ = (handler, feed, datagram, result);
    }

    /// A segment of `feed`'s snapshot connection (TCP), arrived at `time`
    /// (ns), is about to be taken; the handler has not seen it yet.
    #[inline]
    fn before_segment(&mut self, handler: &mut Handler, feed: u16, time: u64) {
        let _ = (handler, feed, time);
    }

    /// That segment was taken (a snapshot it completed merged).
    #[inline]
    fn after_segment(&mut self, handler: &mut Handler, feed: u16, time: u64) {
        let _ = (handler, feed, time);
    }

    /// A check of `feed` at `at` (ns) is about to be answered.
    #[inline]
    fn before_check(&mut self, handler: &mut Handler, feed: u16, at: u64) {
        let _ = (handler, feed, at);
    }

    /// True when [`before_record`](Self::before_record) and
    /// [`after_record`](Self::after_record) are wanted, with each record's
    /// time, for every record (which then go one by one). False: replay
    /// applies the records in batches, up to the next check's time, and
    /// calls them only for the record at which a batch stopped for a check.
    #[inline]
    fn wants_record_times(&self) -> bool {
        false
    }

    /// BinaryFILE record `index` for `feed` is about to be applied at
    /// `time` (its source time; `None`: it fails validation). Without
    /// [`wants_record_times`](Self::wants_record_times), called only for a
    /// record later than a waiting check (answered just before it).
    #[inline]
    fn before_record(&mut self, handler: &mut Handler, feed: u16, index: u64, time: Option<u64>) {
        let _ = (handler, feed, index, time);
    }

    /// BinaryFILE record `index` for `feed` was applied (or stepped over).
    #[inline]
    fn after_record(&mut self, handler: &mut Handler, feed: u16, index: u64, time: Option<u64>) {
        let _ = (handler, feed, index, time);
    }

    /// The input ended and every check was answered.
    #[inline]
    fn end(&mut self, handler: &mut Handler) {
        let _ = handler;
    }

    /// True to keep every ITCH feed's book levels on the replay's own
    /// thread; false (the default) lets the replay apply them on a second
    /// thread ([`Handler::pipeline_books`]), which changes no result. An
    /// observer that reads books in any of its hooks (between datagrams or
    /// records, or in [`before_check`](Self::before_check), which comes
    /// before the handler settles them) wants them here; so does a
    /// measurement of what the second thread gains.
    #[inline]
    fn books_on_one_thread(&self) -> bool {
        false
    }

    /// The line (index in its feed's `lines`) the datagram about to be
    /// applied was routed to: told right before its feed takes it, so that
    /// an observer telling lines apart does as the feed does (under
    /// `--feed` every datagram is line A's, whatever its destination).
    #[inline]
    fn routed(&mut self, _line: usize) {}
}

/// No observer.
impl Observer for () {}

/// How far a replay has come, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of the input file read (of a gzip file, compressed bytes).
    pub bytes: u64,
    /// Messages read so far, all feeds (a BinaryFILE's records).
    pub messages: u64,
}

/// A reader that counts the bytes read through it (shared with the caller).
struct CountingReader<R> {
    inner: R,
    read: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<R: std::io::Read> std::io::Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

/// Replays `capture` through a fresh handler for `config`, answering `checks`.
/// `progress` is called now and then with how far it has come.
pub fn replay(
    config: &Config,
    capture: &mut CaptureReader,
    checks: &[Check],
    progress: impl FnMut(Progress),
) -> Outcome {
    replay_with(config, capture, checks, progress, &mut ())
}

/// What a check's name is, resolved once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    /// A symbol.
    Symbol(Symbol),
    /// A name its feed's protocol takes that is not a symbol (an MDP3
    /// Symbol past 8 characters, a long `#SecurityID`).
    Name,
    /// Neither (or no such feed): answered `no_quote`.
    Invalid,
}

/// Checks waiting for their time: resolved once, each feed's answered in
/// time order (ties in input order), each after everything of its feed
/// that arrived at or before it and before anything of its feed later.
/// Feeds share nothing, so in a capture in time order that is after
/// everything that arrived at or before it; in a `run --record`
/// recording, whose feeds each merged up to their own horizon (one behind
/// a backlog recorded after another's later datagrams), it is what the
/// sidecar had applied of the feed.
struct Pending<'a> {
    checks: &'a [Check],
    resolved: Vec<(Option<u16>, Key)>,
    /// Per feed, its check indices by time (a check of no feed is never
    /// answered: `no_quote`).
    orders: Vec<Vec<usize>>,
    /// Per feed, how many of its `orders` are answered.
    nexts: Vec<usize>,
    answers: Vec<Answer>,
}

impl<'a> Pending<'a> {
    fn new(config: &Config, checks: &'a [Check]) -> Pending<'a> {
        let mut pending = Pending::resolve(config, checks);
        let mut order: Vec<usize> = (0..checks.len()).collect();
        order.sort_by_key(|&i| checks[i].time_ns);
        for i in order {
            if let (Some(feed), _) = pending.resolved[i] {
                pending.orders[usize::from(feed)].push(i);
            }
        }
        pending
    }

    /// The checks resolved, none ordered yet.
    fn resolve(config: &Config, checks: &'a [Check]) -> Pending<'a> {
        Pending {
            checks,
            resolved: checks
                .iter()
                .map(|c| {
                    let feed = config.feed_id(&c.feed);
                    let key = match (Symbol::parse(&c.symbol), feed) {
                        (Some(s), _) => Key::Symbol(s),
                        (None, Some(f)) => {
                            let protocol = config.feeds[usize::from(f)].protocol;
                            match protocol.name_problem(&c.symbol) {
                                None => Key::Name,
                                Some(_) => Key::Invalid,
                            }
                        }
                        (None, None) => Key::Invalid,
                    };
                    (feed, key)
                })
                .collect(),
            orders: vec![Vec::new(); config.feeds.len()],
            nexts: vec![0; config.feeds.len()],
            answers: vec![
                Answer {
                    reasons: Reasons::NO_QUOTE,
                    detail: None,
                    past_break: false,
                };
                checks.len()
            ],
        }
    }

    /// True while a check is still to be answered.
    #[inline]
    fn waiting(&self) -> bool {
        self.orders
            .iter()
            .zip(&self.nexts)
            .any(|(o, &n)| n < o.len())
    }

    /// The time of the next check to answer (ns, the input's clock).
    #[inline]
    fn next_time(&self) -> Option<u64> {
        let next = self.orders.iter().zip(&self.nexts);
        next.filter_map(|(o, &n)| o.get(n).map(|&i| self.checks[i].time_ns))
            .min()
    }

    /// Answers every check earlier than `t` (ns, the input's clock), of
    /// every feed.
    #[inline]
    fn answer_before(&mut self, handler: &mut Handler, t: u64, observer: &mut impl Observer) {
        for feed in 0..self.orders.len() {
            self.answer_feed_before(handler, feed as u16, t, observer);
        }
    }

    /// Answers every check of `feed` earlier than `t` (ns, the input's
    /// clock).
    #[inline]
    fn answer_feed_before(
        &mut self,
        handler: &mut Handler,
        feed: u16,
        t: u64,
        observer: &mut impl Observer,
    ) {
        let f = usize::from(feed);
        while let Some(&i) = self.orders.get(f).and_then(|o| o.get(self.nexts[f])) {
            if self.checks[i].time_ns >= t {
                break;
            }
            self.answer(handler, i, observer);
            self.nexts[f] += 1;
        }
    }

    fn answer(&mut self, handler: &mut Handler, i: usize, observer: &mut impl Observer) {
        let at = self.checks[i].time_ns;
        let (Some(feed), key) = self.resolved[i] else {
            return;
        };
        // A check on the feed, whatever it names: its deadlines come first.
        observer.before_check(handler, feed, at);
        handler.before_check(feed, at);
        handler.answered(feed, at);
        if key == Key::Invalid {
            // No instrument can have that name, but its feed's detail
            // keys all the same, null (every line of a feed has the same
            // keys): nothing looked up by it.
            self.answers[i].detail = handler.detail(feed, "").map(|d| CheckDetail {
                id: None,
                bid: None,
                ask: None,
                ..d
            });
            return;
        }
        let name = &self.checks[i].symbol;
        let reasons = match key {
            Key::Symbol(symbol) => handler.verdict(feed, symbol, at),
            _ => handler.verdict_named(feed, name, at),
        };
        let detail = handler.detail(feed, name);
        self.answers[i] = Answer {
            reasons,
            detail,
            past_break: false,
        };
    }

    /// Answers the rest (after the input's end) and returns every answer,
    /// in input order. After a break (`broke`), the rest are the checks at
    /// or after their feed's latest arrival read (a BinaryFILE's: the
    /// file's, whatever feed they name; a datagram of that very stamp may
    /// be among those unread): each marked [`past_break`](Answer::past_break).
    fn finish(
        mut self,
        handler: &mut Handler,
        observer: &mut impl Observer,
        broke: bool,
    ) -> Vec<Answer> {
        for f in 0..self.orders.len() {
            while let Some(&i) = self.orders[f].get(self.nexts[f]) {
                self.answer(handler, i, observer);
                self.answers[i].past_break = broke;
                self.nexts[f] += 1;
            }
        }
        self.answers
    }
}

/// [`replay`], telling `observer` about every datagram.
pub fn replay_with(
    config: &Config,
    capture: &mut CaptureReader,
    checks: &[Check],
    progress: impl FnMut(Progress),
    observer: &mut impl Observer,
) -> Outcome {
    replay_until(
        config,
        capture,
        checks,
        Options::default(),
        progress,
        observer,
    )
}

/// How a capture is replayed, beyond the configuration.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// After the input's end, run every feed's deadlines up to this time
    /// (ns since the Unix epoch): gaps still open expire as they would have
    /// live, before the summary is taken.
    pub until: Option<u64>,
    /// Route every UDP datagram to this feed's line A, whatever its
    /// destination (a sanitised capture, or one recorded elsewhere).
    pub feed: Option<u16>,
}

/// [`replay_with`] with `options`.
pub fn replay_until(
    config: &Config,
    capture: &mut CaptureReader,
    checks: &[Check],
    options: Options,
    mut progress: impl FnMut(Progress),
    observer: &mut impl Observer,
) -> Outcome {
    let until = options.until;
    let mut handler = Handler::new(config);
    if let Err(e) = handler.preload() {
        let answers = Pending::new(config, checks).answers;
        let summary = summarize(&mut handler, capture.stats().clone(), 0);
        return Outcome {
            answers,
            summary,
            input_error: Some(InputError::Preload(e)),
        };
    }
    handler.limit_reject_logs(REJECT_LOG_LINES);
    handler.pipeline_books(!observer.books_on_one_thread());
    handler.count_steps_back();
    let mut router = Router::new(config);
    router.all_to = options.feed;
    let mut pending = Pending::new(config, checks);
    let (mut unrouted, mut wrong_source, mut unrouted_recorded) = (0u64, 0u64, 0u64);
    let mut oversized = 0u64;
    let mut seen = 0u64;
    let mut span_ns: Option<(u64, u64)> = None;
    // Each feed's last arrival, for its clock's steps back.
    let mut last_ns: Vec<Option<u64>> = vec![None; config.feeds.len()];
    let mut stepped = |handler: &mut Handler, feed: u16, t: u64| {
        let Some(last) = last_ns.get_mut(usize::from(feed)) else {
            return;
        };
        // The capture's clock stepped back for this feed (a recording of
        // a live run whose clock did, a tap's clock): as live does at such
        // a step, its open gaps are given up a timeout after the step's
        // time, not held for as long as the step.
        if last.is_some_and(|l| t.saturating_add(STEP_BACK_NS) < l) {
            handler.on_feed_clock_stepped_back(feed, t);
        }
        *last = Some(t);
    };

    let result = capture.for_each(|d: &Datagram<'_>| {
        span_ns = Some(span_ns.map_or((d.time_ns, d.time_ns), |(first, last)| {
            (first.min(d.time_ns), last.max(d.time_ns))
        }));
        // Each check of the feed a datagram is for is answered before it.
        if let Some(tcp) = d.tcp {
            // A snapshot connection's segment: its feed puts it together.
            if let Some((feed, local, from_server)) = router.route_segment(d.src, d.dst) {
                pending.answer_feed_before(&mut handler, feed, d.time_ns, observer);
                let segment = Segment {
                    local,
                    from_server,
                    seq: tcp.seq,
                    flags: tcp.flags,
                    payload: d.payload,
                };
                stepped(&mut handler, feed, d.time_ns);
                observer.before_segment(&mut handler, feed, d.time_ns);
                handler.on_segment(feed, &segment, d.time_ns);
                observer.after_segment(&mut handler, feed, d.time_ns);
            }
            return;
        }
        let route = router.route_from(d.src, d.dst);
        // Past the live receive buffer: live drops it unread. Routed
        // first, as live sees the sender first: a datagram to no line, or
        // from another sender, counts as that, oversized or not.
        if route.as_ref().is_ok_and(Option::is_some)
            && d.payload.len() > crate::sys::udp::MAX_DATAGRAM
        {
            oversized += 1;
            return;
        }
        let feed = route.ok().flatten().map(|(feed, _)| feed);
        if let Some(feed) = feed {
            pending.answer_feed_before(&mut handler, feed, d.time_ns, observer);
        }
        observer.before(&mut handler, feed, d);
        match route {
            Ok(Some((feed, line))) => {
                stepped(&mut handler, feed, d.time_ns);
                observer.routed(line);
                let result: Result<(), Rejected> =
                    handler.on_datagram_line(feed, line, d.payload, d.time_ns);
                observer.after(&mut handler, feed, d, result);
            }
            Ok(None) => {
                unrouted += 1;
                // A recording's (its line datagrams go to groups), or a
                // capture's answer from a feed's server.
                let recorded = unnamed(d.src) && !d.dst.ip().is_multicast();
                unrouted_recorded += u64::from(recorded || router.is_server(d.src));
            }
            Err(WrongSource) => wrong_source += 1,
        }
        seen += 1;
        if seen.is_multiple_of(8192) {
            let messages = handler.feeds().iter().map(|f| f.counters.messages).sum();
            progress(Progress {
                bytes: d.offset,
                messages,
            });
        }
    });
    let answers = pending.finish(&mut handler, observer, result.is_err());
    let mut summary = wind_up(
        &mut handler,
        until,
        observer,
        capture.stats().clone(),
        unrouted,
    );
    summary.capture.span_ns = span_ns;
    summary.capture.wrong_source = wrong_source;
    summary.capture.unrouted_recorded = unrouted_recorded;
    summary.capture.oversized = oversized;
    for f in 0..handler.feeds().len() {
        let a = handler.arrivals(f as u16);
        summary.capture.time_steps_back += a.stepped_back;
        let largest = &mut summary.capture.largest_step_back_ns;
        *largest = (*largest).max(a.largest_step_back_ns);
    }
    Outcome {
        answers,
        summary,
        input_error: result.err().map(InputError::Capture),
    }
}

/// After the input and its checks: every feed's deadlines run up to
/// `until`, when given (`--until`), told to the observer as a check at
/// that time would be; the books settled; the summary taken; then the
/// observer's [`end`](Observer::end), which may run the handler further
/// (an explanation's crossings still to come) without reaching the
/// summary: nothing expires at the end.
pub(crate) fn wind_up(
    handler: &mut Handler,
    until: Option<u64>,
    observer: &mut impl Observer,
    reader: CaptureStats,
    unrouted: u64,
) -> Summary {
    if let Some(t) = until {
        for feed in 0..handler.feeds().len() {
            observer.before_check(handler, feed as u16, t);
            handler.before_check(feed as u16, t);
        }
    }
    handler.settle();
    let summary = summarize(handler, reader, unrouted);
    observer.end(handler);
    summary
}

fn summarize(handler: &mut Handler, reader: CaptureStats, unrouted: u64) -> Summary {
    Summary {
        capture: CaptureSummary {
            span_ns: None,
            reader,
            unrouted,
            unrouted_recorded: 0,
            oversized: 0,
            wrong_source: 0,
            time_steps_back: 0,
            largest_step_back_ns: 0,
        },
        feeds: handler.summaries(),
    }
}

/// Rejected-packet lines a replay logs per feed; the rest are counted
/// ([`input_warnings`] says how many, by reason).
pub const REJECT_LOG_LINES: u64 = 3;

/// A feed counts as "all rejected" in a replay when at least this share of
/// its packets, in percent, were rejected (a few stray datagrams of the
/// right shape do not hide a capture of another protocol).
pub const MOSTLY_REJECTED_PERCENT: u64 = 99;

/// One warning line per feed with more packets rejected than the log
/// shows ([`REJECT_LOG_LINES`]): for a feed with at least
/// [`MOSTLY_REJECTED_PERCENT`] of them rejected, its top reason (e.g. a
/// MoldUDP64 capture replayed as SQF: `bad_magic`, "not SQF?"); for
/// another, the count by reason.
pub fn rejected_feed_warnings(config: &Config, summary: &Summary) -> Vec<String> {
    let counts = |name: &str| -> Option<(u64, u64, &BTreeMap<&'static str, u64>)> {
        let f = summary.feeds.get(name)?;
        let (packets, rejected) = f.packets();
        Some((packets, rejected, f.rejected_by_reason()))
    };
    config
        .feeds
        .iter()
        .filter_map(|feed| {
            let (packets, rejected, by_name) = counts(&feed.name)?;
            if packets == 0 || rejected <= REJECT_LOG_LINES {
                return None;
            }
            if rejected * 100 < packets * MOSTLY_REJECTED_PERCENT {
                // More than the log showed: the count, by reason.
                let reasons: Vec<String> = by_name
                    .iter()
                    .filter(|(_, &n)| n > 0)
                    .map(|(r, n)| format!("{r} {n}"))
                    .collect();
                return Some(format!(
                    "feed '{}': {rejected} of {packets} packets rejected ({}); the log shows at most {REJECT_LOG_LINES}",
                    feed.name,
                    reasons.join(", ")
                ));
            }
            let by_index: Vec<u64> = crate::protocol::reasons(feed.protocol)
                .map(|r| by_name.get(r.as_str()).copied().unwrap_or(0))
                .collect();
            let top = crate::handler::top_reason(feed.protocol, &by_index);
            Some(format!(
                "feed '{}': {rejected} of {packets} packets rejected, mostly {}{}",
                feed.name,
                top.map_or("?", |r| r.as_str()),
                top.map_or("", |r| r.hint())
            ))
        })
        .collect()
}

/// Warning lines about a replay whose input gave its feeds nothing to use
/// (the replay still succeeds and writes its results; a tired operator
/// must not take its `no_quote` answers for the market's):
/// [`rejected_feed_warnings`]; a capture none of whose records is a
/// UDP/IPv4 datagram, or none of whose datagrams is addressed to a feed's
/// line; a BinaryFILE with no record, or no valid one; and inputs that
/// differ from what live received (UDP records cut short or fragmented,
/// records not read at all, time stepping back, other senders, datagrams
/// past the receive buffer).
pub fn input_warnings(config: &Config, summary: &Summary) -> Vec<String> {
    let mut lines = rejected_feed_warnings(config, summary);
    let c = &summary.capture;
    let r = &c.reader;
    // A venue's file has records but never datagrams.
    let file = summary.feeds.values().any(|f| f.file_records().is_some());
    // The commonest reason a record was no datagram, when none was.
    let mut none_because = None;
    if !file && r.records > 0 && r.datagrams == 0 {
        let causes = r.not_datagrams();
        let (cause, n) = causes
            .iter()
            .max_by_key(|c| c.1)
            .copied()
            .unwrap_or(("", 0));
        none_because = Some(cause);
        lines.push(format!(
            "none of the capture's {} records is a UDP/IPv4 datagram (mostly {cause}: {n})",
            r.records
        ));
    } else if !file && r.datagrams > 0 && c.unrouted == r.datagrams {
        let all: Vec<String> = config
            .feeds
            .iter()
            .flat_map(|f| f.lines.iter().map(|l| l.to_string()))
            .collect();
        let more = match all.len().saturating_sub(CHECK_WARNINGS_CAP) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        lines.push(format!(
            "none of the capture's {} datagrams is addressed to a feed's line ({}{more})",
            r.datagrams,
            all[..all.len().min(CHECK_WARNINGS_CAP)].join(", ")
        ));
    } else if r.records == 0 && summary.feeds.values().all(|f| f.file_records().is_none()) {
        lines.push("the capture holds no packets".into());
    }
    // Frames a feed may have needed that the replay cannot read whole,
    // where live received them (the kernel reassembles fragments, and the
    // capture's snap length cut only the copy): gaps live did not have.
    // And records it cannot read at all (an interface of a link type it
    // does not read, a block without a timestamp): one line of a pcapng so
    // written is lost whole, silently but for the summary's counts.
    let tcp = r.unread_tcp;
    let unread = [
        (
            &["truncated", "ip_fragments", "malformed"][..],
            &[
                (
                    r.truncated - tcp.truncated,
                    "cut short by the capture (its snap length)",
                ),
                (
                    r.ip_fragments - tcp.ip_fragments,
                    "IP fragments, not reassembled",
                ),
                (
                    r.short_frames,
                    "shorter than their headers say though recorded whole (cut by a tool that \
                     wrote the cut length as the frame's?)",
                ),
            ][..],
            "not read as whole UDP datagrams",
            "live received them whole, so a feed whose datagrams they were has gaps here live \
             did not; capture whole frames (no snap length)",
        ),
        (
            &["unsupported_link", "no_timestamp"][..],
            &[
                (
                    r.unsupported_link,
                    "on an interface whose link type is not read",
                ),
                (
                    r.no_timestamp,
                    "without a timestamp (pcapng Simple Packet Blocks)",
                ),
            ][..],
            "not read at all",
            "a feed whose datagrams they held has gaps here live did not; capture with \
             Enhanced Packet Blocks on an Ethernet, Linux cooked or raw IP interface",
        ),
    ];
    for (causes, counts, how, remedy) in unread {
        // (Said already when no record was a datagram, mostly for these.)
        let told = none_because.is_some_and(|c| causes.contains(&c));
        let n: u64 = counts.iter().map(|c| c.0).sum();
        if file || told || n == 0 {
            continue;
        }
        let what: Vec<String> = counts
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
        lines.push(format!(
            "{n} of the capture's records were {how} ({}): {remedy}",
            what.join(", ")
        ));
    }
    if c.time_steps_back > 0 {
        let step = c.largest_step_back_ns as f64;
        let step = match step < 1e9 {
            true => format!("{:.3} ms", step / 1e6),
            false => format!("{:.3} s", step / 1e9),
        };
        lines.push(match file {
            // Its order is its sequence: nothing to sort.
            true => format!(
                "the file's record stamps step back at {} of its records (by up to {step}): each \
                 was applied in the file's order, its sequence, and checks between are answered \
                 from the state at the first record stamped later than them",
                c.time_steps_back
            ),
            false => format!(
                "the capture's time steps back at {} of the records its feeds took (by up to {step}): \
                 each was applied at its own stamp, after what the file put before it, and checks are \
                 answered in the file's order of their feed's records; if that is not the order they \
                 arrived in (a feed's lines captured on several interfaces, `mergecap -a`), sort it \
                 first (`reordercap`); a `run --record` recording is in the order live applied it: \
                 never sort one",
                c.time_steps_back
            ),
        });
    }
    if c.wrong_source > 0 {
        lines.push(format!(
            "{} datagrams to a feed's line came from another sender than its `source`, or to its \
             recovery channel from another than its `recovery` server: dropped, as live drops them",
            c.wrong_source
        ));
    }
    if c.oversized > 0 {
        lines.push(format!(
            "{} datagrams larger than {} bytes (the live receive buffer) skipped, as live drops them \
             unread (a jumbo frame's payload)",
            c.oversized,
            crate::sys::udp::MAX_DATAGRAM
        ));
    }
    // A recording of a channel on a port the kernel chose names that port,
    // which "port 0 matches nothing" leaves unrouted.
    let kernel_chosen: Vec<String> = config
        .feeds
        .iter()
        .flat_map(|f| {
            f.services().into_iter().filter_map(|s| match s.receive {
                // (Without a server live opens none.)
                Receive::Channel(c) if c.listen.port() == 0 && c.server.is_some() => {
                    Some(format!("feed {}'s {} {}", f.name, s.key, c.listen))
                }
                _ => None,
            })
        })
        .collect();
    if c.unrouted_recorded > 0 && !kernel_chosen.is_empty() {
        lines.push(format!(
            "{} datagrams of a recording, or from a feed's server, went to no line or channel: a \
             channel listens on a port the kernel chose ({}), which a recording or capture names \
             and port 0 matches not; to replay them, set it to the port they went to (a \
             recording's `channel open` log line gives it)",
            c.unrouted_recorded,
            kernel_chosen.join(", ")
        ));
    }
    for (name, f) in &summary.feeds {
        if let Some(n) = f.table_full().filter(|&n| n > 0) {
            lines.push(format!(
                "feed '{name}': the state table had no slot for some of its symbols (full, or its free slots held for other feeds): {n} of their messages dropped, those symbols answered no_quote (raise [state] capacity)"
            ));
        }
        // Answered from the books whatever the table's room: live, the
        // names past it had no slot and answered no_quote.
        let feed = config.feeds.iter().find(|c| c.name == *name);
        if let (Some(held), Some(feed)) = (f.names_held(), feed) {
            // Its own bound, and what the other feeds leave: their
            // reservations, or the slots they took, if more.
            let others: u64 = config
                .feeds
                .iter()
                .filter(|c| c.name != *name)
                .map(|c| {
                    let took = summary.feeds.get(&c.name).map_or(0, |s| s.symbols_held());
                    took.max(c.reservation() as u64)
                })
                .sum();
            let others = usize::try_from(others).unwrap_or(usize::MAX);
            let left = config.capacity.saturating_sub(others);
            let room = feed
                .settings
                .reserved_slots()
                .map_or(left, |(n, _)| n.min(left));
            if held > room as u64 {
                lines.push(format!(
                    "feed '{name}': {held} symbols held, more than the {room} slots live has for them ([state] capacity, or the feed's own limit): live, the ones past them answer no_quote, while this replay answered them from the books"
                ));
            }
        }
        for (n, what) in f.refused_past_bounds() {
            if n > 0 {
                lines.push(format!("feed '{name}': {n} {what}"));
            }
        }
        match f.file_records() {
            Some(r) if r.records == 0 => {
                lines.push(format!("feed '{name}': the {} holds no records", r.format))
            }
            Some(r) if r.invalid == r.records => lines.push(format!(
                "feed '{name}': all {} records of the {} are invalid{}",
                r.invalid, r.format, r.hint
            )),
            // A garbage tail (a file cut and padded, say) is not silent.
            Some(r) if r.invalid > 0 => lines.push(format!(
                "feed '{name}': {} of the {} records of the {} are invalid, skipped",
                r.invalid, r.records, r.format
            )),
            _ => {}
        }
    }
    lines
}

/// The replay's last line, for a person: what was read, the input time it
/// spans, how long it took (`wall_s`, seconds) and how fast, and the gaps
/// still open with the messages held behind them; then, per feed with a gap
/// still open, one more line on how to let it expire.
pub fn end_lines(summary: &Summary, wall_s: f64) -> Vec<String> {
    let r = &summary.capture.reader;
    let mut line = format!("replayed {} records", r.records);
    if r.datagrams > 0 {
        line.push_str(&format!(" ({} datagrams)", r.datagrams));
    }
    if let Some((first, last)) = summary.capture.span_ns {
        line.push_str(&format!(
            " spanning {:.3} s",
            last.saturating_sub(first) as f64 / 1e9
        ));
    }
    line.push_str(&format!(" in {wall_s:.3} s"));
    if wall_s > 0.0 && r.records > 0 {
        let per_s = r.records as f64 / wall_s;
        let rate = match per_s {
            x if x >= 1e6 => format!("{:.2} M", x / 1e6),
            x if x >= 1e3 => format!("{:.1} k", x / 1e3),
            x => format!("{x:.0}"),
        };
        line.push_str(&format!(" ({rate} records/s)"));
    }
    let open: Vec<(&String, u64, u64)> = summary
        .feeds
        .iter()
        .filter_map(|(name, f)| f.backlog().map(|(gaps, held)| (name, gaps, held)))
        .collect();
    let (gaps, held) = open
        .iter()
        .fold((0, 0), |(g, h), (_, gaps, held)| (g + gaps, h + held));
    if !open.is_empty() {
        line.push_str(&format!(
            "; {gaps} gaps open, {held} messages held behind them"
        ));
    }
    let mut lines = vec![line];
    for (name, gaps, held) in open.iter().filter(|o| o.1 > 0) {
        lines.push(format!(
            "feed '{name}': {gaps} gaps still open at the end of the input, {held} messages held \
             behind them: their deadlines fall after the last packet; --until TIME runs them up to \
             TIME (the summary then shows them expired or filled)"
        ));
    }
    lines
}

/// Most warnings printed about checks; the rest are counted in one more line.
pub const CHECK_WARNINGS_CAP: usize = 10;

/// Warning lines about checks that can only be answered `no_quote`
/// because they name a feed `config` lacks or a string that is not a valid
/// symbol: one per check (rows numbered from 1 after the header) up to
/// [`CHECK_WARNINGS_CAP`], then one line counting the rest.
pub fn check_warnings(config: &Config, config_name: &str, checks: &[Check]) -> Vec<String> {
    let feeds: Vec<&str> = config.feeds.iter().map(|f| f.name.as_str()).collect();
    let mut lines = Vec::new();
    let mut more = 0usize;
    for (i, c) in checks.iter().enumerate() {
        let problem = if config.feed_id(&c.feed).is_none() {
            // The check's own words, escaped and cut: a checks file is input.
            format!(
                "no feed {} in {config_name} (feeds: {})",
                echo(&c.feed),
                feeds.join(", ")
            )
        } else if let Some(problem) = config.feed_id(&c.feed).and_then(|f| {
            config.feeds[usize::from(f)]
                .protocol
                .name_problem(&c.symbol)
        }) {
            format!("{} is {problem}", echo(&c.symbol))
        } else {
            continue;
        };
        if lines.len() < CHECK_WARNINGS_CAP {
            lines.push(format!(
                "check {} (time_ns {}): {problem}: answered no_quote",
                i + 1,
                c.time_ns
            ));
        } else {
            more += 1;
        }
    }
    if more > 0 {
        lines.push(format!(
            "{more} more checks naming an unknown feed or an invalid symbol"
        ));
    }
    lines
}

/// One warning for the checks of the configuration's feeds other than
/// `--feed`'s (`only`): every datagram goes to that feed, so theirs answer
/// `no_quote`, which would read as the market's. (Checks of no feed of the
/// configuration, or of a name their feed cannot publish, are warned of by
/// [`check_warnings`].)
pub fn checks_of_other_feeds(config: &Config, only: &str, checks: &[Check]) -> Option<String> {
    const SHOWN: usize = 4;
    let mut named = vec![false; config.feeds.len()];
    let mut others: Vec<&str> = Vec::new();
    let mut n = 0usize;
    for c in checks.iter().filter(|c| c.feed != only) {
        let Some(id) = config.feed_id(&c.feed).map(usize::from) else {
            continue;
        };
        if config.feeds[id].protocol.name_problem(&c.symbol).is_some() {
            continue;
        }
        n += 1;
        if !std::mem::replace(&mut named[id], true) {
            others.push(&config.feeds[id].name);
        }
    }
    let shown: Vec<String> = others.iter().take(SHOWN).map(|f| echo(f)).collect();
    let more = match others.len().saturating_sub(SHOWN) {
        0 => String::new(),
        k => format!(" and {k} more"),
    };
    let (checks, feeds) = match (n, others.len()) {
        (1, _) => ("check", "feed"),
        (_, 1) => ("checks", "feed"),
        _ => ("checks", "feeds"),
    };
    (n > 0).then(|| {
        format!(
            "{n} {checks} of {feeds} {}{more} answered no_quote whatever the capture holds: \
             --feed {} takes every datagram (replay without --feed, or check that feed only)",
            shown.join(", "),
            echo(only)
        )
    })
}

/// One check result as a JSON line (no trailing newline).
pub fn answer_json(check: &Check, answer: Answer) -> String {
    #[derive(Serialize)]
    struct Line<'a> {
        time_ns: u64,
        feed: &'a str,
        symbol: &'a str,
        ok: bool,
        reasons: Vec<&'static str>,
    }
    let line = Line {
        time_ns: check.time_ns,
        feed: &check.feed,
        symbol: &check.symbol,
        ok: answer.reasons.is_ok(),
        reasons: answer.reasons.names().collect(),
    };
    let mut json = serde_json::to_string(&line).unwrap_or_default();
    if let Some(d) = answer.detail {
        // The protocol's keys after the shared ones: its id (null when
        // nothing resolves the name), then each side's price, left out
        // when the side is empty.
        json.pop();
        let id = d.id.map_or("null".to_string(), |v| v.to_string());
        json.push_str(&format!(",\"{}\":{id}", d.id_key));
        for (key, v) in [("bid", d.bid), ("ask", d.ask)] {
            if let Some(v) = v {
                json.push_str(&format!(",\"{key}\":{v}"));
            }
        }
        json.push('}');
    }
    if answer.past_break {
        json.pop();
        json.push_str(",\"past_break\":true}");
    }
    json
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_csv() {
        let c = parse_checks("time_ns,feed,symbol\r\n5,lp1,EURUSD\r\n\r\n3, lp1 ,\"X,\"\"Y\"\n")
            .unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(
            c[0],
            Check {
                time_ns: 5,
                feed: "lp1".into(),
                symbol: "EURUSD".into()
            }
        );
        assert_eq!(c[1].feed, "lp1");
        assert_eq!(c[1].symbol, "X,\"Y");
        assert!(parse_checks("\u{feff}time_ns,feed,symbol\n")
            .unwrap()
            .is_empty());
        // A tab around a quoted field is trimmed as around a bare one: the
        // quotes are not kept in the symbol.
        let tabbed = parse_checks("time_ns,feed,symbol\n5,\tlp1,\t\"EURUSD\"\t\n").unwrap();
        assert_eq!(
            tabbed,
            parse_checks("time_ns,feed,symbol\n5,lp1,EURUSD\n").unwrap()
        );
    }

    proptest::proptest! {
        /// Any text, a checks file's or not: read or refused in one line,
        /// never a panic.
        #[test]
        fn any_checks_text_is_read_or_refused_in_one_line(text in "(?s).{0,300}") {
            if let Err(e) = parse_checks(&text) {
                proptest::prop_assert!(!e.contains('\n') && !e.contains('\r'), "{e:?}");
            }
        }

        /// Rows written as CSV (symbols quoted, commas and quotes in them
        /// included) are read back as written, in order.
        #[test]
        fn checks_written_are_read_back(
            rows in proptest::collection::vec(
                (proptest::num::u64::ANY, "[a-z0-9_]{1,8}", "[A-Za-z0-9.#,\"-]{1,12}"),
                0..20,
            ),
        ) {
            let mut text = String::from("time_ns,feed,symbol\r\n");
            for (t, feed, symbol) in &rows {
                text.push_str(&format!("{t},{feed},\"{}\"\n", symbol.replace('"', "\"\"")));
            }
            let read = parse_checks(&text).unwrap();
            let want: Vec<Check> = rows
                .iter()
                .map(|(t, feed, symbol)| Check {
                    time_ns: *t,
                    feed: feed.clone(),
                    symbol: symbol.clone(),
                })
                .collect();
            proptest::prop_assert_eq!(read, want);
        }
    }

    /// Rows past the most allowed are refused at the first one, naming
    /// its line; the bound itself is 2^23.
    /// A checks file that is not UTF-8 is refused in one line naming the
    /// line and the byte, as its other errors name the line.
    #[test]
    fn a_checks_file_not_utf8_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checks.csv");
        let mut bytes = b"time_ns,feed,symbol\n1,lp1,EURUSD\n2,lp1,EUR".to_vec();
        bytes.push(0xE9);
        bytes.extend_from_slice(b"\n");
        std::fs::write(&path, &bytes).unwrap();
        let e = load_checks(&path).unwrap_err().0;
        assert!(
            e.ends_with(": line 3: not UTF-8 text (invalid byte at offset 42)"),
            "{e}"
        );
    }

    #[test]
    fn checks_past_the_most_rows_are_refused() {
        let text = "time_ns,feed,symbol\n1,a,b\n2,a,b\n\n3,a,b\n";
        assert_eq!(parse_checks_up_to(text, 3).map(|c| c.len()), Ok(3));
        assert_eq!(
            parse_checks_up_to(text, 2).unwrap_err(),
            "line 5: more than 2 checks"
        );
        assert_eq!(CHECKS_MAX_ROWS, 8_388_608);
    }

    #[test]
    fn a_row_of_many_fields_is_refused_without_keeping_them() {
        let text = format!("time_ns,feed,symbol\n{}\n", ",".repeat(1 << 20));
        let (peak, e) = crate::test_alloc::peak_during(|| parse_checks(&text).unwrap_err());
        assert_eq!(
            e,
            format!(
                "line 2: expected 3 fields (time_ns,feed,symbol), got {}",
                (1 << 20) + 1
            )
        );
        // Its own bytes at most (each field was a Vec entry of 24 bytes).
        assert!(peak < 1 << 20, "{peak} bytes");
        assert_eq!(
            parse_checks("time_ns,feed,symbol\n1,a,b,c\n").unwrap_err(),
            "line 2: expected 3 fields (time_ns,feed,symbol), got 4"
        );
    }

    #[test]
    fn checks_csv_errors_name_the_line() {
        assert_eq!(
            parse_checks("time_ns,feed,symbol\n99999999999999999999,a,b\n").unwrap_err(),
            "line 2: time_ns '99999999999999999999' is past the largest time, \
             18446744073709551615 ns"
        );
        assert_eq!(
            parse_checks("time_ns,feed,symbol\n-1,a,b\n").unwrap_err(),
            "line 2: time_ns '-1' is not an integer of nanoseconds"
        );
        assert!(parse_checks("").unwrap_err().contains("header"));
        // A field quoted in an error is escaped and cut: the reason stays
        // on the line, however long the field.
        let long = format!("time_ns,feed,symbol\n{}\x1b,a,b\n", "x".repeat(2_000));
        let e = parse_checks(&long).unwrap_err();
        assert!(e.ends_with("is not an integer of nanoseconds"), "{e}");
        assert!(e.len() < 200 && !e.contains('\x1b'), "{e}");
        let e = parse_checks(&format!("{}\n", "x".repeat(2_000))).unwrap_err();
        assert!(e.len() < 200, "{e}");
        // The header is the first line not blank, and named by its number.
        assert!(parse_checks("\n \ntime_ns,feed,symbl\n")
            .unwrap_err()
            .starts_with("line 3: header must be"));
        assert!(parse_checks("time,feed,symbol\n")
            .unwrap_err()
            .contains("line 1"));
        assert!(parse_checks("time_ns,feed,symbol\n1,a\n")
            .unwrap_err()
            .contains("line 2"));
        assert!(parse_checks("time_ns,feed,symbol\n1,a,b\n-1,a,b\n")
            .unwrap_err()
            .contains("line 3"));
        assert!(parse_checks("time_ns,feed,symbol\nx,a,b\n")
            .unwrap_err()
            .contains("time_ns"));
        assert!(parse_checks("time_ns,feed,symbol\n1,\"a,b\n")
            .unwrap_err()
            .contains("quoted"));
        assert!(parse_checks("time_ns,feed,symbol\n1,a,b,c\n")
            .unwrap_err()
            .contains("3 fields"));
    }

    /// The line under which the feed's second service (its recovery
    /// channel, after its lines) is applied.
    const RECOVERY_LINE: usize = line_index(1, 0);

    /// A router for one itch50 feed on line 239.2.1.1:26477 with this
    /// `recovery_listen`.
    fn itch_router(listen: &str) -> Router {
        itch_router_with(listen, "")
    }

    /// [`itch_router`] with `more` of the feed's keys.
    fn itch_router_with(listen: &str, more: &str) -> Router {
        let text = format!(
            r#"
[[feed]]
name = "nasdaq"
protocol = "itch50"
lines = ["239.2.1.1:26477"]
stale_threshold_ms = 1500
source_threshold_ms = 2000
recovery_listen = "{listen}"
{more}
"#
        );
        Router::new(&Config::parse(&text, "itch.toml").unwrap())
    }

    fn at(a: &str) -> SocketAddrV4 {
        a.parse().unwrap()
    }

    /// "port 0 matches nothing" (spec itch50 §3.2).
    #[test]
    fn a_recovery_listen_on_port_0_matches_nothing() {
        let r = itch_router("0.0.0.0:0");
        assert_eq!(r.route_line(at("10.0.0.9:0")), None);
        assert_eq!(r.route_line(at("0.0.0.0:0")), None);
    }

    /// "`0.0.0.0:P` matches any address with port `P` [...] and a datagram
    /// that matches a line address goes to that line" (spec itch50 §3.2).
    #[test]
    fn an_unspecified_recovery_listen_matches_any_address_but_a_line_wins() {
        let r = itch_router("0.0.0.0:26477");
        assert_eq!(r.route_line(at("239.2.1.1:26477")), Some((0, 0)));
        assert_eq!(r.route_line(at("10.0.0.9:26477")), Some((0, RECOVERY_LINE)));
        assert_eq!(r.route_line(at("10.0.0.9:26478")), None);
    }

    /// "datagrams addressed to `recovery_listen` are that channel" (spec
    /// itch50 §3.2): a specific address matches only itself.
    #[test]
    fn a_specific_recovery_listen_matches_only_its_own_address() {
        let r = itch_router("127.0.0.1:18001");
        assert_eq!(r.route_line(at("10.0.0.1:18001")), None);
        assert_eq!(
            r.route_line(at("127.0.0.1:18001")),
            Some((0, RECOVERY_LINE))
        );
    }

    /// A channel with a `recovery` server takes only that server's
    /// answers, as live (or a recording's, which names no sender); one
    /// without takes any.
    #[test]
    fn a_recovery_channel_takes_its_servers_answers_only() {
        let r = itch_router_with("0.0.0.0:18001", "recovery = \"10.0.0.5:18000\"");
        let to = at("10.0.0.9:18001");
        let ok = Ok(Some((0, RECOVERY_LINE)));
        assert_eq!(r.route_from(at("10.0.0.5:18000"), to), ok);
        assert_eq!(r.route_from(at("0.0.0.0:0"), to), ok, "a recording");
        assert_eq!(r.route_from(at("10.0.0.6:18000"), to), Err(WrongSource));
        assert_eq!(r.route_from(at("10.0.0.5:18002"), to), Err(WrongSource));
        assert_eq!(r.route_from(at("0.0.0.0:18000"), to), Err(WrongSource));
        let any = itch_router("0.0.0.0:18001");
        assert_eq!(any.route_from(at("10.0.0.6:18000"), to), ok);
        // Our own request, captured on the host whose port the answers
        // come to is the server's too: not an answer, not a wrong source.
        let same = itch_router_with("0.0.0.0:18000", "recovery = \"10.0.0.5:18000\"");
        assert_eq!(
            same.route_from(at("10.0.0.9:18000"), at("10.0.0.5:18000")),
            Ok(None)
        );
        // Another feed's request to its own server, on a port this
        // feed's channel takes: not an answer of either.
        let two = itch_router_with(
            "0.0.0.0:18000",
            "recovery = \"10.0.0.5:18000\"\n[state]\ncapacity = 200000\n[[feed]]\nname = \"b\"\nprotocol = \"itch50\"\nlines = [\"239.2.1.9:26477\"]\nstale_threshold_ms = 1500\nsource_threshold_ms = 2000\nrecovery_listen = \"0.0.0.0:18001\"\nrecovery = \"10.0.0.7:18000\"",
        );
        assert_eq!(
            two.route_from(at("10.0.0.9:18001"), at("10.0.0.7:18000")),
            Ok(None)
        );
    }

    #[test]
    fn json_line_shape() {
        let c = Check {
            time_ns: 7,
            feed: "lp\"1".into(),
            symbol: "EURUSD".into(),
        };
        let line = |reasons, past_break| {
            let detail = None;
            answer_json(
                &c,
                Answer {
                    reasons,
                    detail,
                    past_break,
                },
            )
        };
        assert_eq!(
            line(Reasons::STALE | Reasons::SUSPECT, false),
            r#"{"time_ns":7,"feed":"lp\"1","symbol":"EURUSD","ok":false,"reasons":["stale","suspect"]}"#
        );
        assert_eq!(
            line(Reasons::empty(), false),
            r#"{"time_ns":7,"feed":"lp\"1","symbol":"EURUSD","ok":true,"reasons":[]}"#
        );
        assert_eq!(
            line(Reasons::empty(), true),
            r#"{"time_ns":7,"feed":"lp\"1","symbol":"EURUSD","ok":true,"reasons":[],"past_break":true}"#
        );
    }

    /// "Each JSON line adds `security_id` (null if unresolved) and `bid`,
    /// `ask` [...] JSON integers [...] absent when the side is empty"
    /// (spec mdp3 §4): past 2^53 exactly.
    #[test]
    fn json_line_with_a_protocol_detail() {
        let c = Check {
            time_ns: 7,
            feed: "cme".into(),
            symbol: "ESZ6-ESH7".into(),
        };
        let detail = |id, bid, ask| Answer {
            reasons: Reasons::empty(),
            detail: Some(CheckDetail {
                id_key: "security_id",
                id,
                bid,
                ask,
            }),
            past_break: false,
        };
        assert_eq!(
            answer_json(&c, detail(Some(42), Some(9_007_199_254_740_993), None)),
            r#"{"time_ns":7,"feed":"cme","symbol":"ESZ6-ESH7","ok":true,"reasons":[],"security_id":42,"bid":9007199254740993}"#
        );
        assert_eq!(
            answer_json(&c, detail(None, None, Some(-5))),
            r#"{"time_ns":7,"feed":"cme","symbol":"ESZ6-ESH7","ok":true,"reasons":[],"security_id":null,"ask":-5}"#
        );
    }
}
