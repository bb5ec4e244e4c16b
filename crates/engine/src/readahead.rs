//! A file's bytes, read a few chunks ahead on another thread and handed out
//! in place.
//!
//! [`ReadAhead`] reads fixed-size chunks on its own thread, so that the
//! kernel's copying of the page cache (and, for a gzip BinaryFILE, the
//! decompression) runs beside the replay instead of inside it. The chunks
//! circle in a small ring: the consumer holds one while it reads it and
//! hands it back for the next (no allocation after the first few, memory
//! bounded by the ring). At the end of the source, or on a read error, the
//! thread hands the source itself back and ends: later reads go to it
//! directly, so a capture that grows after its end, or an error that
//! clears, reads on as it would without the thread.
//!
//! [`Stream`] is what a file format reads: the bytes available from where
//! it stands ([`Stream::data`]), at least as many as it asked for
//! ([`Stream::fill`]). They are the chunk's own bytes, not a copy; only a
//! record that straddles two chunks is gathered into a small buffer of its
//! own (its length, at most, whatever the record claims).

use crossbeam_channel::{bounded, Receiver, Sender};
use std::io::{self, Read};
use std::sync::{Arc, Mutex};

/// Bytes per chunk read ahead.
const CHUNK: usize = 1 << 20;
/// Chunks in flight.
const RING: usize = 4;
/// Bytes per read of a source read in place (no thread).
const DIRECT: usize = 256 * 1024;

/// A source read by [`ReadAhead`]: anything that can cross to its thread.
pub(crate) type Boxed = Box<dyn Read + Send>;

/// What the reading thread sends.
enum Msg {
    /// The next bytes of the source.
    Data(Vec<u8>),
    /// The end of the source (with the error that ended it, if any); the
    /// source comes back to the consumer.
    End(Boxed, Option<io::Error>),
}

/// A source read ahead on a background thread; see the module
/// documentation.
pub(crate) struct ReadAhead {
    chunks: Receiver<Msg>,
    spare: Sender<Vec<u8>>,
    /// The source, once the thread has handed it back.
    file: Option<Boxed>,
    /// The thread, joined if it ends without handing the source back (it
    /// panicked: the panic goes on here, as if read in place).
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ReadAhead {
    /// Starts reading `source` on a new thread named `name`; `Err(source)`
    /// (the caller reads it itself) when the machine has a single CPU or no
    /// thread can be started.
    pub(crate) fn start(source: Boxed, name: &str) -> Result<ReadAhead, Boxed> {
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            return Err(source);
        }
        let (chunk_tx, chunks) = bounded(RING);
        let (spare, spare_rx) = bounded(RING + 1);
        for _ in 0..RING {
            let _ = spare.send(Vec::with_capacity(CHUNK));
        }
        // The source goes to the thread through a slot it empties: if the
        // thread cannot start, the source is still there to give back.
        let slot = Arc::new(Mutex::new(Some(source)));
        let theirs = Arc::clone(&slot);
        let started = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let taken = theirs.lock().map(|mut s| s.take());
                if let Ok(Some(source)) = taken {
                    read_chunks(source, chunk_tx, spare_rx);
                }
            });
        match started {
            Ok(thread) => Ok(ReadAhead {
                chunks,
                spare,
                file: None,
                thread: Some(thread),
            }),
            Err(_) => match slot.lock().map(|mut s| s.take()) {
                Ok(Some(source)) => Err(source),
                // The closure never ran, so the source is in the slot; a
                // poisoned lock cannot happen (nothing panics holding it).
                _ => unreachable!("the source is in its slot when the thread did not start"),
            },
        }
    }

    /// Hands `chunk` back to the thread and puts the next bytes of the
    /// source in its place; their count (0 at the end of the source).
    fn next(&mut self, chunk: &mut Vec<u8>) -> io::Result<usize> {
        loop {
            if let Some(f) = &mut self.file {
                return read_into(f, chunk);
            }
            if chunk.capacity() > 0 {
                // Back to the thread for the next chunk (it may be gone).
                let _ = self.spare.send(std::mem::take(chunk));
            }
            match self.chunks.recv() {
                Ok(Msg::Data(next)) => {
                    *chunk = next;
                    return Ok(chunk.len());
                }
                Ok(Msg::End(file, error)) => {
                    self.file = Some(file);
                    if let Some(e) = error {
                        return Err(e);
                    }
                }
                // The thread ended without handing the source back: the
                // source panicked (a decoder's bug, say). Go on with that
                // panic here, where reading in place would have raised it,
                // rather than take it for the end of the data.
                Err(_) => {
                    if let Some(Err(panic)) = self.thread.take().map(|t| t.join()) {
                        std::panic::resume_unwind(panic);
                    }
                    return Err(io::Error::other("the read-ahead thread ended early"));
                }
            }
        }
    }
}

/// The reading thread: fills spare buffers until the end of the source or
/// an error, then hands the source back. Stops early when the consumer is
/// gone.
fn read_chunks(mut file: Boxed, chunks: Sender<Msg>, spare: Receiver<Vec<u8>>) {
    loop {
        let Ok(mut buf) = spare.recv() else {
            return;
        };
        buf.resize(CHUNK, 0);
        let mut filled = 0;
        let mut end = None;
        while filled < CHUNK {
            match file.read(&mut buf[filled..]) {
                Ok(0) => {
                    end = Some(None);
                    break;
                }
                Ok(k) => filled += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    end = Some(Some(e));
                    break;
                }
            }
        }
        buf.truncate(filled);
        if filled > 0 && chunks.send(Msg::Data(buf)).is_err() {
            return;
        }
        if let Some(error) = end {
            let _ = chunks.send(Msg::End(file, error));
            return;
        }
    }
}

/// One read of `source` into `chunk` (made [`DIRECT`] bytes long the first
/// time, so later reads write over it instead of clearing it); the bytes
/// read, at the front of `chunk`.
fn read_into<R: Read + ?Sized>(source: &mut R, chunk: &mut Vec<u8>) -> io::Result<usize> {
    if chunk.len() < DIRECT {
        chunk.resize(DIRECT, 0);
    }
    loop {
        match source.read(chunk) {
            Ok(k) => return Ok(k.min(chunk.len())),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Where a [`Stream`]'s chunks come from.
enum Source<R> {
    /// A thread reading ahead.
    Ahead(ReadAhead),
    /// The source itself, read in place.
    Direct(R),
}

/// A byte stream handed out in place; see the module documentation.
pub(crate) struct Stream<R> {
    source: Source<R>,
    /// The chunk being read: `chunk[at..end]` is not yet handed out.
    chunk: Vec<u8>,
    at: usize,
    end: usize,
    /// A straddling record gathered: while `from < spill.len()`,
    /// `spill[from..]` comes before `chunk[at..end]` and is what
    /// [`data`](Self::data) shows.
    spill: Vec<u8>,
    from: usize,
    /// Offset in the stream of the first byte [`data`](Self::data) shows.
    offset: u64,
}

impl<R: Read> Stream<R> {
    /// `source`, read ahead on a thread named `name`; `Err(source)` where
    /// no thread can help (one CPU) or start, to be read in place.
    pub(crate) fn ahead(source: Boxed, name: &str) -> Result<Stream<R>, Boxed> {
        ReadAhead::start(source, name).map(|ahead| Stream::with(Source::Ahead(ahead)))
    }

    /// `source`, read in place.
    pub(crate) fn direct(source: R) -> Stream<R> {
        Stream::with(Source::Direct(source))
    }

    fn with(source: Source<R>) -> Stream<R> {
        Stream {
            source,
            chunk: Vec::new(),
            at: 0,
            end: 0,
            spill: Vec::new(),
            from: 0,
            offset: 0,
        }
    }

    /// The bytes available, from [`offset`](Self::offset) on.
    #[inline]
    pub(crate) fn data(&self) -> &[u8] {
        if self.from < self.spill.len() {
            &self.spill[self.from..]
        } else {
            &self.chunk[self.at..self.end]
        }
    }

    /// Offset in the stream of the first byte of [`data`](Self::data).
    #[inline]
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Makes at least `n` bytes available; `Ok(false)` when the source ends
    /// first ([`data`](Self::data) then holds all there is, and a later
    /// call reads on if the source has grown). Bytes already available stay
    /// so after an error.
    #[inline]
    pub(crate) fn fill(&mut self, n: usize) -> io::Result<bool> {
        if self.data().len() >= n {
            return Ok(true);
        }
        self.gather(n)
    }

    /// Passes over `n` bytes: at most those [`data`](Self::data) shows,
    /// which while a straddling record is gathered are the gathered bytes
    /// alone (so pass over no more than a [`fill`](Self::fill) made
    /// available).
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        self.take(n);
    }

    /// [`consume`](Self::consume), returning the bytes passed over.
    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> &[u8] {
        debug_assert!(n <= self.data().len(), "passing over bytes not shown");
        let n = n.min(self.data().len());
        self.offset += n as u64;
        if self.from < self.spill.len() {
            self.from += n;
            &self.spill[self.from - n..self.from]
        } else {
            self.at += n;
            &self.chunk[self.at - n..self.at]
        }
    }

    /// [`fill`](Self::fill) past the bytes available: the next chunk when
    /// the current one is spent, else the bytes available and then just
    /// enough of the next chunks gathered into the spill.
    #[cold]
    fn gather(&mut self, n: usize) -> io::Result<bool> {
        if self.from >= self.spill.len() {
            // Not spilling: the next chunk may do by itself.
            if self.at == self.end {
                self.next_chunk()?;
                if self.end >= n || self.end == 0 {
                    return Ok(self.end >= n);
                }
            }
            self.spill.clear();
            self.from = 0;
            self.spill.extend_from_slice(&self.chunk[self.at..self.end]);
            self.at = self.end;
        } else if self.from > 0 {
            self.spill.drain(..self.from);
            self.from = 0;
        }
        while self.spill.len() < n {
            if self.at == self.end {
                self.next_chunk()?;
                if self.end == 0 {
                    return Ok(false);
                }
            }
            let k = (n - self.spill.len()).min(self.end - self.at);
            self.spill
                .extend_from_slice(&self.chunk[self.at..self.at + k]);
            self.at += k;
        }
        Ok(true)
    }

    /// Replaces the spent chunk with the source's next bytes (none at its
    /// end, or after an error).
    fn next_chunk(&mut self) -> io::Result<()> {
        self.at = 0;
        self.end = 0;
        self.end = match &mut self.source {
            Source::Ahead(ahead) => ahead.next(&mut self.chunk)?,
            Source::Direct(source) => read_into(source, &mut self.chunk)?,
        };
        Ok(())
    }

    /// Bytes this stream holds in buffers (its chunk and its spill).
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.chunk.capacity() + self.spill.capacity()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::fs::File;
    use std::io::{Cursor, Seek, Write};

    /// Hands out at most `step` bytes per read, cycling 1..=step.
    pub(crate) struct Trickle {
        pub(crate) bytes: Cursor<Vec<u8>>,
        pub(crate) step: usize,
        pub(crate) n: usize,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.n = self.n % self.step + 1;
            let k = buf.len().min(self.n);
            self.bytes.read(&mut buf[..k])
        }
    }

    /// Everything `s` holds, asked for in sizes cycling through
    /// 1..=`most` and consumed a few bytes short of each, then to the end.
    fn drain<R: Read>(s: &mut Stream<R>, most: usize) -> Vec<u8> {
        let mut got = Vec::new();
        let mut size = 1;
        loop {
            let whole = s.fill(size).unwrap();
            let d = s.data();
            assert_eq!(s.offset(), got.len() as u64);
            if !whole {
                got.extend_from_slice(d);
                let n = d.len();
                s.consume(n);
                assert!(!s.fill(1).unwrap(), "the end stays the end");
                return got;
            }
            assert!(d.len() >= size);
            let n = size - size / 3;
            got.extend_from_slice(s.take(n));
            size = size * 7 % most + 1;
        }
    }

    #[test]
    fn reads_the_file_exactly_in_any_sizes_and_past_a_later_append() {
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        let data: Vec<u8> = (0..(CHUNK * 5 + 12_345))
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        tmp.write_all(&data).unwrap();
        let file = File::open(tmp.path()).unwrap();
        let mut s = Stream::ahead(Box::new(file), "test").unwrap_or_else(Stream::direct);
        let got = drain(&mut s, 100_003);
        assert!(got == data, "same bytes, same order");
        // The capture grows after its end: reading on returns the new bytes.
        tmp.write_all(b"more").unwrap();
        tmp.flush().unwrap();
        assert!(s.fill(4).unwrap());
        assert_eq!(s.data(), b"more");
        s.consume(4);
        assert!(!s.fill(1).unwrap());
        assert_eq!(s.offset(), data.len() as u64 + 4);
    }

    #[test]
    fn trickled_bytes_are_gathered_and_the_spill_stays_as_big_as_asked() {
        let data: Vec<u8> = (0..DIRECT * 3).map(|i| (i * 13 + i / 97) as u8).collect();
        for step in [1, 7, 4_099, usize::MAX] {
            let mut s = Stream::direct(Trickle {
                bytes: Cursor::new(data.clone()),
                step,
                n: 0,
            });
            assert!(s.fill(10).unwrap());
            s.consume(7);
            assert!(s.fill(DIRECT + 5).unwrap());
            assert_eq!(s.data()[0], data[7]);
            assert_eq!(s.offset(), 7);
            assert!(s.buffered() <= 3 * DIRECT, "{}", s.buffered());
            s.consume(DIRECT + 5);
            assert!(!s.fill(DIRECT * 3).unwrap());
            assert_eq!(s.data().len(), DIRECT * 3 - DIRECT - 12);
            assert_eq!(s.data()[0], data[DIRECT + 12]);
            let mut s = Stream::direct(Trickle {
                bytes: Cursor::new(data.clone()),
                step,
                n: 0,
            });
            assert!(drain(&mut s, 70_001) == data, "step {step}");
        }
    }

    #[test]
    fn a_lying_length_costs_only_the_bytes_present() {
        // A forged record length of 32 MiB near the end of a short file:
        // the spill holds what there is, not what was claimed.
        let data = vec![5u8; 1_000];
        let mut s = Stream::direct(Trickle {
            bytes: Cursor::new(data),
            step: 300,
            n: 0,
        });
        assert!(!s.fill(32 << 20).unwrap());
        assert_eq!(s.data().len(), 1_000);
        assert!(s.buffered() < DIRECT + 4_096, "{}", s.buffered());
    }

    #[test]
    fn an_error_keeps_the_bytes_before_it() {
        /// Three bytes, then an error, then three more.
        struct Flaky(u8);
        impl Read for Flaky {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                self.0 += 1;
                match self.0 {
                    1 | 3 => {
                        out[..3].copy_from_slice(&[self.0; 3]);
                        Ok(3)
                    }
                    2 => Err(io::Error::other("flaky")),
                    _ => Ok(0),
                }
            }
        }
        let mut s = Stream::direct(Flaky(0));
        assert!(s.fill(5).is_err());
        assert_eq!(s.data(), [1, 1, 1]);
        assert!(s.fill(6).unwrap());
        assert_eq!(s.take(6), [1, 1, 1, 3, 3, 3]);
        assert!(!s.fill(1).unwrap());
    }

    #[test]
    fn a_panic_of_the_source_goes_on_in_the_reader() {
        /// Reads one byte, then panics.
        struct Bad(bool);
        impl Read for Bad {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                assert!(!self.0, "the source's own panic");
                self.0 = true;
                out[0] = 7;
                Ok(1)
            }
        }
        let Ok(mut r) = ReadAhead::start(Box::new(Bad(false)), "test") else {
            // One CPU: the caller reads the source itself, nothing to
            // test; never so under CI.
            assert!(std::env::var_os("CI").is_none(), "one CPU under CI");
            return;
        };
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut chunk = Vec::new();
            while r.next(&mut chunk).unwrap() > 0 {}
        }));
        let panic = caught.expect_err("a panic, not an end of file");
        let message = panic
            .downcast_ref::<&str>()
            .copied()
            .or(panic.downcast_ref::<String>().map(String::as_str));
        assert_eq!(message, Some("the source's own panic"));
    }

    #[test]
    fn dropping_the_reader_early_ends_the_thread() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![1u8; CHUNK * (RING + 3)]).unwrap();
        f.rewind().unwrap();
        let mut s = Stream::ahead(Box::new(f), "test").unwrap_or_else(Stream::direct);
        assert!(s.fill(10).unwrap());
        drop(s);
        // Nothing to assert beyond not hanging: the thread's next send fails.
    }
}
