//! A second thread that applies the books' price levels while the feed's
//! own thread keeps the orders (a pipelined replay, [`Books::pipeline`]).
//!
//! The feed's thread fills a batch of [`Change`]s and sends it whole; the
//! level thread applies it ([`Levels::apply_all`], prefetching ahead) and
//! sends the emptied batch back for reuse, so nothing is allocated per
//! batch and at most [`BATCHES`] are in flight: a feed thread that runs
//! ahead waits for a free one. The [`Levels`] themselves move by value —
//! to the thread before the first change, back on [`LevelThread::take_back`]
//! — so one thread at a time owns them, without a lock.
//!
//! [`Books::pipeline`]: super::book::Books::pipeline

use super::book::{Change, Levels};
use crossbeam_channel::{bounded, Receiver, Sender};
use std::thread::JoinHandle;

/// Changes a batch holds (16 bytes each: 32 KiB).
const BATCH: usize = 2048;
/// Batches in flight between the two threads, the one being filled
/// included.
const BATCHES: usize = 8;

/// What the feed's thread sends the level thread.
enum ToLevels {
    /// The levels, to apply changes to from now on.
    Take(Levels),
    /// Changes to apply, in order; the batch comes back emptied.
    Changes(Vec<Change>),
    /// Send the levels back, every change before applied.
    Return,
    /// End the thread.
    Stop,
}

/// The feed's end of a level thread.
#[derive(Debug)]
pub struct LevelThread {
    /// Changes not sent yet.
    batch: Vec<Change>,
    to: Sender<ToLevels>,
    /// Emptied batches.
    spare: Receiver<Vec<Change>>,
    back: Receiver<Levels>,
    /// The thread holds the levels.
    away: bool,
    handle: Option<JoinHandle<()>>,
}

impl LevelThread {
    /// Starts the thread; `None` on a machine with a single core (where it
    /// could only slow the feed down) or when no thread can be made.
    pub fn start() -> Option<LevelThread> {
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            return None;
        }
        let (to, rx) = bounded(BATCHES + 2);
        let (spare_tx, spare) = bounded(BATCHES);
        let (back_tx, back) = bounded(1);
        for _ in 1..BATCHES {
            spare_tx.send(Vec::with_capacity(BATCH)).ok()?;
        }
        let handle = std::thread::Builder::new()
            .name("tickguard-levels".into())
            .spawn(move || run(rx, spare_tx, back_tx))
            .ok()?;
        Some(LevelThread {
            batch: Vec::with_capacity(BATCH),
            to,
            spare,
            back,
            away: false,
            handle: Some(handle),
        })
    }

    /// True while the thread holds the levels.
    #[inline(always)]
    pub fn away(&self) -> bool {
        self.away
    }

    /// Hands the levels to the thread.
    pub fn give(&mut self, levels: Levels) {
        self.send(ToLevels::Take(levels));
        self.away = true;
    }

    /// Queues a change for the thread (which holds the levels).
    #[inline(always)]
    pub fn push(&mut self, c: Change) {
        self.batch.push(c);
        if self.batch.len() >= BATCH {
            self.flush();
        }
    }

    /// Sends the batch being filled and takes a free one (waiting for the
    /// thread to empty one if all are in flight).
    #[cold]
    fn flush(&mut self) {
        let full = std::mem::take(&mut self.batch);
        self.send(ToLevels::Changes(full));
        self.batch = self
            .spare
            .recv()
            .expect("the book levels' thread ended early");
    }

    /// The levels back, every change pushed so far applied.
    pub fn take_back(&mut self) -> Levels {
        if !self.batch.is_empty() {
            self.flush();
        }
        self.send(ToLevels::Return);
        self.away = false;
        self.back
            .recv()
            .expect("the book levels' thread ended early")
    }

    fn send(&self, m: ToLevels) {
        // The thread ends only on `Stop` (or by panicking, a bug, which
        // this carries over).
        self.to
            .send(m)
            .expect("the book levels' thread ended early");
    }
}

impl Drop for LevelThread {
    fn drop(&mut self) {
        let _ = self.to.send(ToLevels::Stop);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The level thread: applies what it is sent, in order, until `Stop` or
/// until the feed's end is gone.
fn run(rx: Receiver<ToLevels>, spare: Sender<Vec<Change>>, back: Sender<Levels>) {
    let mut levels = Levels::default();
    for m in rx.iter() {
        match m {
            ToLevels::Take(l) => levels = l,
            ToLevels::Changes(mut batch) => {
                levels.apply_all(&batch);
                batch.clear();
                if spare.send(batch).is_err() {
                    return;
                }
            }
            ToLevels::Return => {
                if back.send(std::mem::take(&mut levels)).is_err() {
                    return;
                }
            }
            ToLevels::Stop => return,
        }
    }
}
