//! Log lines on their way to stderr. `run` hands each line to a bounded
//! queue that a thread of its own writes out, so that a stderr that blocks
//! (a pipe nobody reads, a stalled log shipper) stalls that thread alone:
//! the receive thread, which logs now and then (rate-limited), never waits
//! for stderr. A line that finds the queue full is dropped and counted;
//! the count is written where the lines went missing (before the next line
//! queued, or at the last flush), in the log's format. The other commands
//! write their lines to stderr directly, in order with everything else
//! they print.

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
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
}

impl Queue {
    /// The lines dropped since the last item queued, to go with the next.
    fn take_dropped(&self) -> u64 {
        self.dropped.swap(0, Ordering::Relaxed)
    }
}

static QUEUE: OnceLock<Queue> = OnceLock::new();

/// From now on, log lines go through the queue and its writer thread
/// (`json`: the log's format is JSON lines, which the writer's own notice
/// of dropped lines then follows). Without the thread (it could not be
/// started) they go to stderr directly, as before.
pub fn start(json: bool) {
    let (tx, rx) = bounded(QUEUED);
    let writer = std::thread::Builder::new()
        .name("tickguard-log".into())
        .spawn(move || write_out(rx, json));
    if writer.is_ok() {
        let _ = QUEUE.set(Queue {
            tx,
            dropped: AtomicU64::new(0),
        });
    }
}

/// Waits at most `wait` in all for the lines queued so far to be written
/// (before the process ends, or prints its last line). No-op without a
/// queue.
pub fn flush(wait: Duration) {
    let Some(q) = QUEUE.get() else {
        return;
    };
    let deadline = Instant::now() + wait;
    let (done, written) = bounded(1);
    let item = Item::Flush {
        dropped: q.take_dropped(),
        done,
    };
    if q.tx.send_deadline(item, deadline).is_ok() {
        let _ = written.recv_deadline(deadline);
    }
}

/// `line` (with its newline) on stderr, after every log line queued
/// before it: through the queue when there is one, waiting at most a
/// second, so that a stderr that blocks cannot keep the process from
/// ending; directly otherwise. A stderr that cannot take it loses it.
pub fn line(line: &str) {
    match QUEUE.get() {
        Some(q) => {
            let item = Item::Line {
                dropped: q.take_dropped(),
                bytes: format!("{line}\n").into_bytes(),
            };
            let wait = Duration::from_secs(1);
            if q.tx.send_timeout(item, wait).is_ok() {
                flush(wait);
            }
        }
        None => {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }
}

/// The writer thread: each line to stderr, failures ignored (a closed or
/// full stderr loses lines, never the program).
fn write_out(rx: Receiver<Item>, json: bool) {
    let mut err = std::io::stderr();
    let say_dropped = |err: &mut std::io::Stderr, n: u64| {
        if n == 0 {
            return;
        }
        let what = "log lines dropped: stderr did not take them in time";
        let _ = if json {
            writeln!(
                err,
                r#"{{"timestamp":"{}","level":"WARN","fields":{{"message":"{what}","dropped":{n}}},"target":"tickguard"}}"#,
                jiff::Timestamp::now()
            )
        } else {
            writeln!(err, "tickguard: {n} {what}")
        };
    };
    for item in rx {
        match item {
            Item::Line { dropped, bytes } => {
                say_dropped(&mut err, dropped);
                let _ = err.write_all(&bytes);
            }
            Item::Flush { dropped, done } => {
                say_dropped(&mut err, dropped);
                let _ = err.flush();
                let _ = done.send(());
            }
        }
    }
}

/// Stderr for log lines: through the queue when [`start`]ed, else
/// directly. Either way a line that cannot be written is dropped and the
/// write reports success, so that logging never stops the program.
pub struct Stderr;

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match QUEUE.get() {
            // Full: dropped without copying it.
            Some(q) if q.tx.is_full() => {
                q.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Some(q) => {
                let item = Item::Line {
                    dropped: q.take_dropped(),
                    bytes: buf.to_vec(),
                };
                if let Err(TrySendError::Full(Item::Line { dropped, .. })) = q.tx.try_send(item) {
                    q.dropped.fetch_add(dropped + 1, Ordering::Relaxed);
                }
            }
            None => {
                let _ = std::io::stderr().write_all(buf);
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

/// Flushes the queue when dropped: at the end of `main`, and when a panic
/// unwinds through it, so that the lines logged before are not lost.
pub struct FlushOnDrop;

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        flush(Duration::from_secs(1));
    }
}
