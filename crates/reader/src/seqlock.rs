//! The seqlock behind every slot and every feed's clock offset: one writer,
//! any number of readers in this or other processes, no lock, no
//! read-modify-write atomic.
//!
//! The protected data are `AtomicU64` words next to the stamp, stored and
//! loaded `Relaxed` inside [`SeqLock::write`] and [`SeqLock::try_read`]; the
//! stamp and fences order them (all of a reader's loads Relaxed: readers
//! map the file read-only). The stamp is odd while a write is in
//! progress and grows by 2 per write, so it also counts changes. The layout
//! is one `u64` (`include/tickguard.h` repeats the protocol for C).
//!
//! Built with `--cfg tickguard_loom`, the stamp and fences are loom's and a
//! model checks writer against reader (`tools/test` runs it on this crate
//! alone). The cfg is not the usual `loom`, which other crates of the
//! workspace's dependency tree (tokio) read too.

#[cfg(tickguard_loom)]
use loom::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(not(tickguard_loom))]
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// A seqlock stamp: odd while a write is in progress, +2 per write.
#[repr(transparent)]
pub struct SeqLock {
    stamp: AtomicU64,
}

impl Default for SeqLock {
    fn default() -> Self {
        Self {
            stamp: AtomicU64::new(0),
        }
    }
}

impl SeqLock {
    /// The stamp as the writer last left it (even outside `write`). Writer
    /// thread only.
    #[inline(always)]
    pub fn writer_stamp(&self) -> u64 {
        // Relaxed: only the writer stores the stamp; it reads back its own store.
        self.stamp.load(Ordering::Relaxed)
    }

    /// Runs `store` (which stores the protected words, `Relaxed`) as one
    /// write: readers see all of it or none of it. Writer thread only.
    #[inline(always)]
    pub fn write<R>(&self, store: impl FnOnce() -> R) -> R {
        // Even, whatever the shared word holds (a file written over in
        // place may have left it odd): the stamp is odd exactly while a
        // write is under way.
        let s = self.writer_stamp() & !1;
        // Relaxed: the odd stamp is ordered before the word stores by the
        // Release fence below.
        self.stamp.store(s.wrapping_add(1), Ordering::Relaxed);
        // Release fence: pairs with the Acquire fence in `try_read`; a reader
        // whose word loads see any store below then re-loads this odd stamp
        // (or a later one), so it discards its copy.
        fence(Ordering::Release);
        let r = store();
        // Release: pairs with the load of the stamp and the Acquire fence
        // after it in `try_read`; a reader that loads this even stamp sees
        // every word stored above.
        self.stamp.store(s.wrapping_add(2), Ordering::Release);
        r
    }

    /// One attempt at a consistent copy: `load` (which loads the protected
    /// words, `Relaxed`) and the stamp it belongs to (even), or `None` if a
    /// write was in progress or overlapped.
    #[inline(always)]
    pub fn try_read<T>(&self, load: impl FnOnce() -> T) -> Option<(T, u64)> {
        // Relaxed, then an Acquire fence: pairs with the Release store of
        // the even stamp in `write`, so the words stored before it are
        // visible to `load`. (Not an Acquire load: readers map the file
        // read-only, where only Relaxed atomic loads are defined.)
        let s1 = self.stamp.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if s1 & 1 == 1 {
            return None;
        }
        let v = load();
        // Acquire fence: keeps the word loads in `load` before the stamp
        // re-load; pairs with the Release fence after the odd stamp in
        // `write`, so if any word came from a newer write, s2 sees its stamp.
        fence(Ordering::Acquire);
        // Relaxed: ordered after the word loads by the fence above.
        let s2 = self.stamp.load(Ordering::Relaxed);
        (s1 == s2).then_some((v, s1))
    }

    /// True if no write began since a [`try_read`](Self::try_read) that
    /// gave `stamp`, as seen after everything loaded before this call (an
    /// Acquire fence keeps those loads before the stamp's): what was read
    /// of other words meanwhile was read while this copy was current.
    #[inline]
    pub fn unchanged_since(&self, stamp: u64) -> bool {
        fence(Ordering::Acquire);
        // Relaxed: ordered after the earlier loads by the fence above.
        self.stamp.load(Ordering::Relaxed) == stamp
    }

    /// A consistent copy, spinning while writes overlap: the copy, its
    /// stamp and the number of retries. Only for memory this process's
    /// own writer keeps (a stamp a killed writer or a copied file left odd
    /// would keep it spinning): readers of the mapped file use
    /// [`try_read`](Self::try_read) with a bound.
    #[inline]
    pub fn read<T>(&self, mut load: impl FnMut() -> T) -> (T, u64, u32) {
        let mut retries = 0u32;
        loop {
            if let Some((v, stamp)) = self.try_read(&mut load) {
                return (v, stamp, retries);
            }
            retries = retries.saturating_add(1);
            std::hint::spin_loop();
        }
    }
}

#[cfg(all(test, not(tickguard_loom)))]
mod tests {
    use super::*;
    use std::mem::{align_of, size_of};

    #[test]
    fn seqlock_is_one_u64() {
        assert_eq!(size_of::<SeqLock>(), 8);
        assert_eq!(align_of::<SeqLock>(), 8);
    }

    #[test]
    fn seqlock_stamp_counts_writes_and_is_odd_inside_one() {
        let lock = SeqLock::default();
        assert_eq!(lock.try_read(|| ()), Some(((), 0)));
        let inside = lock.write(|| {
            assert_eq!(lock.writer_stamp(), 1);
            lock.try_read(|| ())
        });
        assert_eq!(inside, None, "a read during a write fails");
        lock.write(|| ());
        assert_eq!(lock.read(|| 7), (7, 4, 0));
    }

    /// A stamp left odd at rest (a file written over in place with a copy
    /// taken mid-write) is made even by the next write: odd only inside
    /// one, so readers never take a torn copy for a whole one.
    #[test]
    fn a_stamp_left_odd_is_even_after_the_next_write() {
        let lock = SeqLock::default();
        lock.stamp.store(5, Ordering::Relaxed);
        assert_eq!(lock.try_read(|| ()), None, "odd: a write under way");
        let inside = lock.write(|| lock.try_read(|| ()));
        assert_eq!(inside, None, "odd inside the write");
        assert_eq!(lock.try_read(|| ()), Some(((), 6)));
    }
}

/// Writer against reader over two words that must always agree, every
/// interleaving and every value the memory model allows a load to see, up
/// to a preemption bound (`LOOM_MAX_PREEMPTIONS`, 3 unless set).
#[cfg(all(test, tickguard_loom))]
mod loom_model {
    use super::*;
    use loom::sync::Arc;

    /// Runs `f` under loom, every interleaving up to the preemption
    /// bound: no limit the environment sets (`LOOM_MAX_PERMUTATIONS`,
    /// `LOOM_MAX_DURATION`, a `LOOM_CHECKPOINT_FILE` to resume from) cuts
    /// the exploration short, and a run of fewer than two interleavings
    /// fails (a model that explored nothing would pass).
    fn explore(f: impl Fn() + Sync + Send + 'static) {
        let mut model = loom::model::Builder::new();
        if model.preemption_bound.is_none() {
            model.preemption_bound = Some(3);
        }
        model.max_permutations = None;
        model.max_duration = None;
        model.checkpoint_file = None;
        // This model's own count (the models run in parallel threads).
        let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&runs);
        model.check(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            f()
        });
        let runs = runs.load(Ordering::Relaxed);
        assert!(runs > 1, "{runs} interleavings explored");
    }

    #[derive(Default)]
    struct Pair {
        lock: SeqLock,
        words: [AtomicU64; 2],
    }

    #[test]
    fn seqlock_reader_never_sees_a_torn_write() {
        explore(|| {
            let pair = Arc::new(Pair::default());
            let writer = {
                let pair = pair.clone();
                loom::thread::spawn(move || {
                    for i in 1..=2u64 {
                        pair.lock.write(|| {
                            for w in &pair.words {
                                w.store(i, Ordering::Relaxed);
                            }
                        });
                    }
                })
            };
            for _ in 0..2 {
                let read = pair.lock.try_read(|| {
                    [
                        pair.words[0].load(Ordering::Relaxed),
                        pair.words[1].load(Ordering::Relaxed),
                    ]
                });
                if let Some(([a, b], stamp)) = read {
                    assert_eq!(a, b, "torn read");
                    assert_eq!(stamp, 2 * a, "words from another write than the stamp");
                }
            }
            writer.join().unwrap();
        });
    }

    /// Two seqlocks written in turn (a slot's book, then its feed's flag
    /// saying the book is complete) and read as a check reads them: the
    /// first, the second, then the first's stamp again
    /// ([`SeqLock::unchanged_since`]). A pair read that way never holds
    /// the old book with the new flag.
    #[test]
    fn a_recheck_of_the_first_stamp_never_pairs_an_old_word_with_a_newer() {
        explore(|| {
            let (book, flag) = (Arc::new(Pair::default()), Arc::new(Pair::default()));
            let writer = {
                let (book, flag) = (book.clone(), flag.clone());
                loom::thread::spawn(move || {
                    book.lock
                        .write(|| book.words[0].store(1, Ordering::Relaxed));
                    flag.lock
                        .write(|| flag.words[0].store(1, Ordering::Relaxed));
                })
            };
            let read = book
                .lock
                .try_read(|| book.words[0].load(Ordering::Relaxed))
                .and_then(|(b, stamp)| {
                    let (f, _) = flag
                        .lock
                        .try_read(|| flag.words[0].load(Ordering::Relaxed))?;
                    book.lock.unchanged_since(stamp).then_some((b, f))
                });
            if let Some((b, f)) = read {
                assert!(!(b == 0 && f == 1), "the old book with the new flag");
            }
            writer.join().unwrap();
        });
    }
}
