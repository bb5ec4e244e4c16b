//! Log lines on their way to stderr. `run` hands each line to a bounded
//! queue that a thread of its own writes out, so that a stderr that blocks
//! (a pipe nobody reads, a stalled log shipper) stalls that thread alone:
//! the receive thread, which logs now and then (rate-limited), never waits
//! for stderr. A line that finds the queue full is dropped and counted;
//! the count is written where the lines went missing (before the next line
//! queued, or at the last flush), in the log's format. The other commands
//! write their lines to stderr directly, in order with everything else
//! they print.

use crossbeam_channel::{bounded, Receiver, SendTimeoutError, Sender, TrySendError};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Lines waiting to be written, at most.
const QUEUED: usize = 4096;

enum Item {
    /// A line, after `dropped` lines that found the queue full.
    Line { dropped: u64, bytes: Vec<u8> },
    /// Answered once every line before it was written (and `dropped`
    /// said).
    Flush { dropped: u64, done: Sender<()> },
}

struct Queue {
    tx: Sender<Item>,
    /// Lines dropped since the last item queued.
    dropped: AtomicU64,
    /// The log's format is JSON lines: the lines of [`line`] are written
    /// as JSON objects too.
    json: bool,
}

/// How bad what a [`line`] says is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Why the command failed, or a panic.
    Error,
    /// A warning.
    Warn,
}

/// `message` as one line in the log's format: plain text as it is, or
/// a JSON object shaped as the log's own lines (`timestamp`, `level`,
/// `fields`, `target`), `fields` holding the message and `extra`'s fields.
fn formatted(json: bool, level: Level, message: &str, extra: &[(&str, u64)]) -> String {
    if !json {
        return message.to_string();
    }
    let mut fields = serde_json::Map::new();
    fields.insert("message".into(), message.into());
    for (k, v) in extra {
        fields.insert((*k).into(), (*v).into());
    }
    serde_json::json!({
        "timestamp": jiff::Timestamp::now().to_string(),
        "level": match level {
            Level::Error => "ERROR",
            Level::Warn => "WARN",
        },
        "fields": fields,
        "target": "tickguard",
    })
    .to_string()
}

impl Queue {
    /// The lines dropped since the last item queued, to go with the next.
    fn take_dropped(&self) -> u64 {
        self.dropped.swap(0, Ordering::Relaxed)
    }
}

static QUEUE: OnceLock<Queue> = OnceLock::new();

/// The writer thread's name.
const WRITER: &str = "tickguard-log";

/// From now on, log lines go through the queue and its writer thread
/// (`json`: the log's format is JSON lines, which the writer's own notice
/// of dropped lines then follows). Without the thread (it could not be
/// started) they go to stderr directly, as before.
pub fn start(json: bool) {
    if let Some(q) = Queue::new(QUEUED, json, std::io::stderr()) {
        let _ = QUEUE.set(q);
    }
    // With the queue or without it (its thread not started: lines then go
    // to stderr directly), a helper thread's panic stops the sidecar.
    std::panic::set_hook(Box::new(on_panic));
}

/// A panic's message (and its backtrace, when `RUST_BACKTRACE` asks for
/// one), as the default hook words it, through the queue: the default
/// hook writes to stderr directly, and a stderr that blocks would hold
/// the panicking thread there for good, the process never ending (its
/// lock held, its restart never coming). At most about two seconds are
/// spent on it ([`line`]). On the receive thread (`main`) the panic then
/// goes on as it would, ending the process. On any other thread the
/// sidecar is stopped ([`stop_on_failure`]: the receive loop ends as on
/// SIGTERM, its publication closed, and `run` fails), or the process
/// ends here (exit 101) before that is set up: the receiver would
/// otherwise go on without it (a feed's snapshot connection never tried
/// again, the metrics it samples frozen so that no alert could fire),
/// and a process that ends is one its service manager restarts.
fn on_panic(info: &std::panic::PanicHookInfo<'_>) {
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("<unnamed>");
    let mut text = format!("thread '{name}' {info}");
    let trace = std::backtrace::Backtrace::capture();
    if trace.status() == std::backtrace::BacktraceStatus::Captured {
        text.push_str(&format!("\nstack backtrace:\n{trace}"));
    }
    if name == WRITER {
        // The writer itself: its queue would be dropped with it, unwritten,
        // so the message goes to stderr directly, after the stop (a stderr
        // that blocks must not keep the sidecar from stopping).
        FAILED.store(true, Ordering::Relaxed);
        if let Some(stop) = STOP.get() {
            stop.store(true, Ordering::Release);
        }
        let _ = writeln!(std::io::stderr(), "{text}");
        if STOP.get().is_none() {
            std::process::exit(101);
        }
        return;
    }
    line(Level::Error, &text);
    if name == "main" {
        return;
    }
    FAILED.store(true, Ordering::Relaxed);
    match STOP.get() {
        // Release: a loop that sees the stop (an Acquire load) sees the
        // failure too, and `run` fails instead of ending clean.
        Some(stop) => stop.store(true, Ordering::Release),
        None => std::process::exit(101),
    }
}

/// Set by a panic on a thread other than the receive thread.
static FAILED: AtomicBool = AtomicBool::new(false);

/// What stops the receive loop (its shutdown flag).
static STOP: OnceLock<&'static AtomicBool> = OnceLock::new();

/// From now on a panic on another thread than the receive thread sets
/// `stop`, the receive loop's shutdown flag ([`on_panic`]).
pub fn stop_on_failure(stop: &'static AtomicBool) {
    let _ = STOP.set(stop);
}

/// Whether a thread other than the receive thread panicked.
pub fn thread_failed() -> bool {
    // Acquire: after the receive loop's Acquire load saw the stop, this
    // reads what the panicking thread stored before it.
    FAILED.load(Ordering::Acquire)
}

/// Waits at most `wait` in all for the lines queued so far to be written
/// (before the process ends, or prints its last line). No-op without a
/// queue.
pub fn flush(wait: Duration) {
    if let Some(q) = QUEUE.get() {
        q.flush(wait);
    }
}

/// `line` (with its newline) on stderr, after every log line queued
/// before it: through the queue when there is one, waiting at most a
/// second, so that a stderr that blocks cannot keep the process from
/// ending, and in the log's format (with JSON lines, one JSON object at
/// `level`, however many lines `line` holds); directly otherwise, as it
/// is. A stderr that cannot take it loses it.
pub fn line(level: Level, line: &str) {
    match QUEUE.get() {
        Some(q) => q.line(&formatted(q.json, level, line, &[])),
        None => {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }
}

impl Queue {
    /// A queue of `capacity` lines and the thread writing them to `out`;
    /// `None` if the thread cannot be started.
    fn new(capacity: usize, json: bool, out: impl Write + Send + 'static) -> Option<Queue> {
        let (tx, rx) = bounded(capacity);
        std::thread::Builder::new()
            .name(WRITER.into())
            .spawn(move || write_out(rx, json, out))
            .ok()?;
        Some(Queue {
            tx,
            dropped: AtomicU64::new(0),
            json,
        })
    }

    /// A log line: queued, or dropped and counted if the queue is full.
    /// Never waits.
    fn push(&self, buf: &[u8]) {
        let item = Item::Line {
            dropped: self.take_dropped(),
            bytes: buf.to_vec(),
        };
        match self.tx.try_send(item) {
            Err(TrySendError::Full(Item::Line { dropped, .. })) => {
                self.dropped.fetch_add(dropped + 1, Ordering::Relaxed);
            }
            // The writer thread is gone (it panicked): written directly, as
            // without a queue.
            Err(TrySendError::Disconnected(Item::Line { bytes, .. })) => {
                let _ = std::io::stderr().write_all(&bytes);
            }
            _ => {}
        }
    }

    /// See [`line`].
    fn line(&self, line: &str) {
        let item = Item::Line {
            dropped: self.take_dropped(),
            bytes: format!("{line}\n").into_bytes(),
        };
        let wait = Duration::from_secs(1);
        match self.tx.send_timeout(item, wait) {
            Ok(()) => self.flush(wait),
            // The writer thread is gone (it panicked): written directly,
            // so that the last lines (why the sidecar stopped) still say
            // it; a stderr that blocks may then hold this thread.
            Err(SendTimeoutError::Disconnected(Item::Line { bytes, .. })) => {
                let _ = std::io::stderr().write_all(&bytes);
            }
            // Not written: the count it carried is kept for the next one.
            Err(e) => self.keep_dropped(e.into_inner()),
        }
    }

    /// See [`flush`].
    fn flush(&self, wait: Duration) {
        let deadline = Instant::now() + wait;
        let (done, written) = bounded(1);
        let item = Item::Flush {
            dropped: self.take_dropped(),
            done,
        };
        match self.tx.send_deadline(item, deadline) {
            Ok(()) => {
                let _ = written.recv_deadline(deadline);
            }
            Err(e) => self.keep_dropped(e.into_inner()),
        }
    }

    /// An item that was not queued: the dropped lines it was to report
    /// are counted again, and a line itself with them.
    fn keep_dropped(&self, item: Item) {
        let n = match item {
            Item::Line { dropped, .. } => dropped + 1,
            Item::Flush { dropped, .. } => dropped,
        };
        self.dropped.fetch_add(n, Ordering::Relaxed);
    }
}

/// How often the writer thread looks for lines when it found none, ms.
/// It polls rather than waits in the channel: a thread waiting there is
/// woken by the sender (a lock and a futex call), and the sender is the
/// receive thread; polled, its `try_send` is a few atomic operations.
const POLL_MS: u64 = 5;

/// The writer thread: each line to `out`, failures ignored (a closed or
/// full stderr loses lines, never the program).
fn write_out(rx: Receiver<Item>, json: bool, mut out: impl Write) {
    let say_dropped = |out: &mut dyn Write, n: u64| {
        if n == 0 {
            return;
        }
        let what = "log lines dropped: stderr did not take them in time";
        let text = if json {
            formatted(true, Level::Warn, what, &[("dropped", n)])
        } else {
            format!("tickguard: {n} {what}")
        };
        let _ = writeln!(out, "{text}");
    };
    loop {
        let item = match rx.try_recv() {
            Ok(item) => item,
            Err(crossbeam_channel::TryRecvError::Empty) => {
                std::thread::sleep(Duration::from_millis(POLL_MS));
                continue;
            }
            Err(crossbeam_channel::TryRecvError::Disconnected) => return,
        };
        match item {
            Item::Line { dropped, bytes } => {
                say_dropped(&mut out, dropped);
                let _ = out.write_all(&bytes);
            }
            Item::Flush { dropped, done } => {
                say_dropped(&mut out, dropped);
                let _ = out.flush();
                let _ = done.send(());
            }
        }
    }
}

/// Stderr for log lines: through the queue when [`start`]ed, else
/// directly. Either way a line that cannot be written is dropped and the
/// write reports success, so that logging never stops the program. Each
/// write is one event, kept on one line ([`one_event_one_line`]).
pub struct Stderr;

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = one_event_one_line(buf);
        match QUEUE.get() {
            Some(q) => q.push(&line),
            None => {
                let _ = std::io::stderr().write_all(&line);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if QUEUE.get().is_none() {
            let _ = std::io::stderr().flush();
        }
        Ok(())
    }
}

/// Whether the log's lines carry the terminal's colours (ANSI escape
/// sequences the formatter writes itself): [`set_colours`].
static COLOURS: AtomicBool = AtomicBool::new(false);

/// Says whether the formatter writes colours: without, an ESC in a line
/// is a value's, escaped like the other control characters.
pub fn set_colours(on: bool) {
    COLOURS.store(on, Ordering::Relaxed);
}

/// One formatted event (the formatter writes each whole, ending in its
/// newline) with the line breaks and other control characters inside it
/// escaped (`\n`, `\r`, `\x0b`, `\x1b`): a value that holds them (a
/// path given on the command line or in the configuration) must not
/// start a line of its own that reads as another event, nor move the
/// terminal's cursor over the lines before. A tab stays, and ESC when the
/// formatter writes colours (the message's own are escaped by the
/// formatter then; a field's are not). The line as it is, without a
/// copy, when it holds none.
fn one_event_one_line(buf: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    escaped(buf, COLOURS.load(Ordering::Relaxed))
}

/// [`one_event_one_line`], ESC kept when `colours`.
fn escaped(buf: &[u8], colours: bool) -> std::borrow::Cow<'_, [u8]> {
    let (body, end): (&[u8], &[u8]) = match buf.split_last() {
        Some((b'\n', body)) => (body, b"\n"),
        _ => (buf, b""),
    };
    let breaks = |b: u8| b < 0x20 && b != b'\t' && !(colours && b == 0x1b);
    if !body.iter().any(|&b| breaks(b)) {
        return std::borrow::Cow::Borrowed(buf);
    }
    let mut out = Vec::with_capacity(buf.len() + 8);
    for &b in body {
        match b {
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b if breaks(b) => {
                let _ = write!(out, "\\x{b:02x}");
            }
            b => out.push(b),
        }
    }
    out.extend_from_slice(end);
    std::borrow::Cow::Owned(out)
}

/// Flushes the queue when dropped: at the end of `main`, and when a panic
/// unwinds through it, so that the lines logged before are not lost.
pub struct FlushOnDrop;

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        flush(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_stays_on_its_line() {
        let one = |b: &[u8]| escaped(b, true).into_owned();
        assert_eq!(one(b"a\tb \x1b[1mc\n"), b"a\tb \x1b[1mc\n");
        assert_eq!(
            escaped(b"a\tb \x1b[1mc\n", false).into_owned(),
            b"a\tb \\x1b[1mc\n"
        );
        assert!(matches!(
            escaped(b"plain\n", false),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(one(b"a\nb\rc\x0bd\x00\n"), b"a\\nb\\rc\\x0bd\\x00\n");
        // Without its newline (never so from the formatter): all escaped.
        assert_eq!(one(b"a\nb"), b"a\\nb");
    }
    use std::sync::{Arc, Mutex};

    /// An output whose first write waits until `gate` opens (a stderr
    /// nobody reads), then keeps what it is given.
    struct Gated {
        gate: Option<Receiver<()>>,
        out: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Gated {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if let Some(gate) = self.gate.take() {
                let _ = gate.recv();
            }
            self.out.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// An output whose first write panics (a writer with a bug).
    struct Panicking;

    impl Write for Panicking {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            panic!("the log writer's output failed")
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A writer thread gone (panicked): lines, final ones and logged ones,
    /// are written to stderr directly, not counted as dropped for a report
    /// that would never come.
    #[test]
    fn a_line_after_the_writer_died_goes_to_stderr_directly() {
        let q = Queue::new(4, false, Panicking).unwrap();
        q.push(b"kills the writer\n");
        let deadline = Instant::now() + Duration::from_secs(5);
        while q
            .tx
            .send(Item::Line {
                dropped: 0,
                bytes: vec![],
            })
            .is_ok()
        {
            assert!(Instant::now() < deadline, "the writer did not end");
            std::thread::sleep(Duration::from_millis(1));
        }
        q.line("tickguard: the last line");
        q.push(b"a log line\n");
        assert_eq!(q.dropped.load(Ordering::Relaxed), 0);
    }

    /// Waits (5 s at most) until the writer has taken every line queued.
    fn drained(q: &Queue) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !q.tx.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(q.tx.is_empty(), "the writer took nothing");
    }

    /// With the output blocked, lines past the queue are dropped, never
    /// waited for; once it takes lines again, the count is written where
    /// they went missing (before the next line queued, or at a flush), in
    /// the log's format.
    #[test]
    fn lines_past_the_queue_are_dropped_and_said_where_they_went_missing() {
        for json in [false, true] {
            let (open, gate) = bounded(0);
            let out = Arc::new(Mutex::new(Vec::new()));
            let gated = Gated {
                gate: Some(gate),
                out: out.clone(),
            };
            let q = Queue::new(2, json, gated).unwrap();
            q.push(b"a\n");
            // The writer holds `a`, waiting on the output.
            drained(&q);
            let started = Instant::now();
            for line in [&b"b\n"[..], b"c\n", b"x\n", b"x\n", b"x\n"] {
                q.push(line);
            }
            assert!(started.elapsed() < Duration::from_secs(1), "push waited");
            open.send(()).unwrap();
            drained(&q);
            q.push(b"d\n");
            q.push(b"e\n");
            q.flush(Duration::from_secs(5));
            let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 6, "{text}");
            assert_eq!(lines[..3], ["a", "b", "c"], "{text}");
            assert_eq!(lines[4..], ["d", "e"], "{text}");
            if json {
                let v: serde_json::Value = serde_json::from_str(lines[3]).unwrap();
                assert_eq!(v["fields"]["dropped"], 3, "{text}");
                assert_eq!(v["level"], "WARN", "{text}");
            } else {
                assert_eq!(
                    lines[3],
                    "tickguard: 3 log lines dropped: stderr did not take them in time"
                );
            }
            // A count with no line after it is said at the flush.
            q.tx.send(Item::Line {
                dropped: 0,
                bytes: b"f\n".to_vec(),
            })
            .unwrap();
            q.dropped.fetch_add(2, Ordering::Relaxed);
            q.flush(Duration::from_secs(5));
            let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
            let last = text.lines().last().unwrap();
            assert!(
                last.contains('2') && last.contains("log lines dropped"),
                "{text}"
            );
        }
    }
}
