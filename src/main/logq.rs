//! Log lines on their way to stderr. `run` hands each line to a bounded
//! queue that a thread of its own writes out, so that a stderr that blocks
//! (a pipe nobody reads, a stalled log shipper) stalls that thread alone:
//! the receive thread, which logs now and then (rate-limited), never waits
//! for stderr. A line that finds the queue full is dropped and counted;
//! the next line written out says how many were. The other commands write
//! their lines to stderr directly, in order with everything else they
//! print.

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Lines waiting to be written, at most.
const QUEUED: usize = 4096;

enum Item {
    Line(Vec<u8>),
    /// Answered once every line before it was written.
    Flush(Sender<()>),
}

struct Queue {
    tx: Sender<Item>,
    /// Lines dropped since the last line written.
    dropped: AtomicU64,
}

static QUEUE: OnceLock<Queue> = OnceLock::new();

/// From now on, log lines go through the queue and its writer thread.
/// Without the thread (it could not be started) they go to stderr
/// directly, as before.
pub fn start() {
    let (tx, rx) = bounded(QUEUED);
    let writer = std::thread::Builder::new()
        .name("tickguard-log".into())
        .spawn(move || write_out(rx));
    if writer.is_ok() {
        let _ = QUEUE.set(Queue {
            tx,
            dropped: AtomicU64::new(0),
        });
    }
}

/// Waits at most `wait` for the lines queued so far to be written (before
/// the process ends, or prints its last line itself). No-op without a
/// queue.
pub fn flush(wait: Duration) {
    let Some(q) = QUEUE.get() else {
        return;
    };
    let (done, written) = bounded(1);
    if q.tx.send_timeout(Item::Flush(done), wait).is_ok() {
        let _ = written.recv_timeout(wait);
    }
}

/// The writer thread: each line to stderr, failures ignored (a closed or
/// full stderr loses lines, never the program).
fn write_out(rx: Receiver<Item>) {
    let mut err = std::io::stderr();
    for item in rx {
        match item {
            Item::Line(line) => {
                let dropped = QUEUE
                    .get()
                    .map_or(0, |q| q.dropped.swap(0, Ordering::Relaxed));
                if dropped > 0 {
                    let _ = writeln!(
                        err,
                        "tickguard: {dropped} log lines dropped: stderr did not take them in time"
                    );
                }
                let _ = err.write_all(&line);
            }
            Item::Flush(done) => {
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
            Some(q) => {
                if let Err(TrySendError::Full(_)) = q.tx.try_send(Item::Line(buf.to_vec())) {
                    q.dropped.fetch_add(1, Ordering::Relaxed);
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
