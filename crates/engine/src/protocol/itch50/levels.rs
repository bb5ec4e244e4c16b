//! A second thread that applies the books' price levels while the feed's
//! own thread keeps the orders (a pipelined replay, [`Books::pipeline`]).
//!
//! The feed's thread fills a batch of [`Change`]s and sends it whole; the
//! level thread applies it ([`Levels::apply_all`], prefetching ahead) and
//! sends the emptied batch back for reuse, so at most [`BATCHES`] are in
//! flight and a feed thread that runs ahead waits for a free one. The
//! [`Levels`] themselves move by value — to the thread before the first
//! change, back on [`LevelThread::take_back`] — so one thread at a time
//! owns them.
//!
//! The two threads meet in [`Mailbox`]es: a queue with room for all that
//! can ever be in it, made once, behind a mutex taken once a batch (2,048
//! messages' changes), so that the handoff allocates nothing, ever — a
//! channel that allocates the first time a thread waits on it would
//! allocate in the middle of a replay.
//!
//! [`Books::pipeline`]: super::book::Books::pipeline

use super::ladder::{Change, Levels};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Changes a batch holds (16 bytes each: 32 KiB).
const BATCH: usize = 2048;
/// Batches in flight between the two threads, the one being filled
/// included.
const BATCHES: usize = 8;
/// Batches queued before a waiting level thread is woken (fewer than
/// `BATCHES`, so that the feed's thread never runs out of free batches
/// with the level thread asleep).
const WAKE_AT: usize = BATCHES / 2;

/// What the feed's thread sends the level thread.
#[derive(Debug)]
enum ToLevels {
    /// The levels, to apply changes to from now on.
    Take(Levels),
    /// Changes to apply, in order; the batch comes back emptied.
    Changes(Vec<Change>),
    /// Send the levels back, every change before applied.
    Return,
    /// End the thread.
    Stop,
    /// Panic, as a bug on the level thread would (tests only: a bug shows
    /// as a panic only in a debug build, or not at all).
    #[cfg(test)]
    Crash,
}

/// A queue between two threads with room for everything that can ever be
/// in it (so [`put`](Mailbox::put) never grows it), and a flag for a side
/// that is gone.
#[derive(Debug)]
struct Mailbox<T> {
    queue: Mutex<Queue<T>>,
    ready: Condvar,
}

#[derive(Debug)]
struct Queue<T> {
    items: VecDeque<T>,
    /// The other side is gone.
    closed: bool,
    /// A taker waits for an item.
    waiting: bool,
}

impl<T> Mailbox<T> {
    fn new(room: usize) -> Arc<Mailbox<T>> {
        Arc::new(Mailbox {
            queue: Mutex::new(Queue {
                items: VecDeque::with_capacity(room),
                closed: false,
                waiting: false,
            }),
            ready: Condvar::new(),
        })
    }

    /// The queue; a side that panicked holding the lock left it whole
    /// (each change is a single push, pop or flag).
    fn lock(&self) -> MutexGuard<'_, Queue<T>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `item`, waking a waiting taker.
    fn put(&self, item: T) {
        self.put_waking_at(item, 1);
    }

    /// Queues `item`, waking a waiting taker only once `wake_at` items are
    /// queued: a taker faster than its giver then wakes once for that
    /// many, not for each (waking a thread costs the giver a system call
    /// and the taker a trip through the scheduler).
    fn put_waking_at(&self, item: T, wake_at: usize) {
        let mut q = self.lock();
        debug_assert!(
            q.items.len() < q.items.capacity(),
            "a mailbox outgrew its room"
        );
        q.items.push_back(item);
        let wake = q.waiting && q.items.len() >= wake_at;
        drop(q);
        if wake {
            self.ready.notify_one();
        }
    }

    /// The next item, waiting for one; `None` once the other side is gone
    /// and the queue empty.
    fn take(&self) -> Option<T> {
        let mut q = self.lock();
        loop {
            if let Some(item) = q.items.pop_front() {
                return Some(item);
            }
            if q.closed {
                return None;
            }
            q.waiting = true;
            q = self.ready.wait(q).unwrap_or_else(|e| e.into_inner());
            q.waiting = false;
        }
    }

    /// The other side is gone: a waiting [`take`](Self::take) returns.
    fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

/// Closes the level thread's outgoing mailboxes when it ends, however it
/// ends (a panic included), so that the feed's thread never waits forever.
struct Closer {
    spare: Arc<Mailbox<Vec<Change>>>,
    back: Arc<Mailbox<Levels>>,
}

impl Drop for Closer {
    fn drop(&mut self) {
        self.spare.close();
        self.back.close();
    }
}

/// The feed's end of a level thread.
#[derive(Debug)]
pub struct LevelThread {
    /// Changes not sent yet.
    batch: Vec<Change>,
    to: Arc<Mailbox<ToLevels>>,
    /// Emptied batches.
    spare: Arc<Mailbox<Vec<Change>>>,
    back: Arc<Mailbox<Levels>>,
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
        LevelThread::spawn()
    }

    /// Starts the thread whatever the cores (tests run it on one core
    /// too); `None` when no thread can be made.
    pub(super) fn spawn() -> Option<LevelThread> {
        // Every batch, the levels, a return and a stop at most.
        let to = Mailbox::new(BATCHES + 3);
        let spare = Mailbox::new(BATCHES);
        let back = Mailbox::new(1);
        for _ in 1..BATCHES {
            spare.put(Vec::with_capacity(BATCH));
        }
        let closer = Closer {
            spare: spare.clone(),
            back: back.clone(),
        };
        let rx = to.clone();
        let handle = std::thread::Builder::new()
            .name("book-levels".into())
            .spawn(move || run(&rx, closer))
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
        self.to.put(ToLevels::Take(levels));
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
        self.to.put_waking_at(ToLevels::Changes(full), WAKE_AT);
        self.batch = self.spare.take().expect(ENDED);
    }

    /// The levels back, every change pushed so far applied.
    pub fn take_back(&mut self) -> Levels {
        if !self.batch.is_empty() {
            self.flush();
        }
        self.to.put(ToLevels::Return);
        let levels = self.back.take().expect(ENDED);
        self.away = false;
        levels
    }

    /// Makes the thread panic (see [`ToLevels::Crash`]).
    #[cfg(test)]
    fn crash(&mut self) {
        self.to.put(ToLevels::Crash);
    }
}

/// The level thread ends only when told to (or by panicking, a bug, which
/// the feed's thread carries over with this).
const ENDED: &str = "the book levels' thread ended early";

impl Drop for LevelThread {
    fn drop(&mut self) {
        self.to.put(ToLevels::Stop);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The level thread: applies what it is sent, in order, until `Stop`.
fn run(rx: &Mailbox<ToLevels>, out: Closer) {
    let mut levels = Levels::default();
    while let Some(m) = rx.take() {
        match m {
            ToLevels::Take(l) => levels = l,
            ToLevels::Changes(mut batch) => {
                levels.apply_all(&batch);
                batch.clear();
                out.spare.put(batch);
            }
            ToLevels::Return => out.back.put(std::mem::take(&mut levels)),
            ToLevels::Stop => return,
            #[cfg(test)]
            ToLevels::Crash => panic!("the level thread crashes, as a test asks"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mailbox_keeps_order_and_a_closed_one_wakes_its_taker() {
        let m = Mailbox::new(4);
        m.put(1);
        m.put(2);
        assert_eq!((m.take(), m.take()), (Some(1), Some(2)));
        // A taker waiting on an empty mailbox returns once the other side
        // is gone, instead of waiting forever.
        let waiting = {
            let m = m.clone();
            std::thread::spawn(move || m.take())
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        m.close();
        assert_eq!(waiting.join().unwrap(), None);
        // What was put before the close is still taken.
        m.put(3);
        assert_eq!((m.take(), m.take()), (Some(3), None));
    }

    /// Runs on any machine (one core too) and in any build: the thread
    /// is started whatever the cores, and made to panic on purpose.
    #[test]
    fn a_level_thread_that_panics_fails_the_feed_thread_instead_of_hanging() {
        let mut t = LevelThread::spawn().expect("a thread");
        t.give(Levels::default());
        t.push(Change {
            book: 0,
            price: 1,
            shares: 5,
            side: super::super::Side::Buy,
            kind: super::super::ladder::Kind::Rest,
        });
        t.crash();
        let back = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.take_back()));
        assert!(back.is_err(), "the feed's thread is told, not left waiting");
    }
}
