//! Reading a file a few chunks ahead on another thread, so that the
//! kernel's copying of the page cache (and, for a gzip BinaryFILE, the
//! decompression) runs beside the replay instead of inside it.
//!
//! The thread reads fixed-size chunks into a small ring of buffers that the
//! consumer hands back once copied out (no allocation after the first few
//! chunks, memory bounded by the ring). At the end of the source, or on a
//! read error, the thread hands the source itself back and ends: later reads
//! go to it directly, so a capture that grows after its end, or an error
//! that clears, reads on as it would without the thread.

use crossbeam_channel::{bounded, Receiver, Sender};
use std::io::{self, Read};
use std::sync::{Arc, Mutex};

/// Bytes per chunk.
const CHUNK: usize = 1 << 20;
/// Chunks in flight.
const RING: usize = 4;

/// What the reading thread sends.
enum Msg<R> {
    /// The next bytes of the source.
    Data(Vec<u8>),
    /// The end of the source (with the error that ended it, if any); the
    /// source comes back to the consumer.
    End(R, Option<io::Error>),
}

/// A source read ahead on a background thread; see the module
/// documentation.
pub(crate) struct ReadAhead<R> {
    chunks: Receiver<Msg<R>>,
    spare: Sender<Vec<u8>>,
    current: Vec<u8>,
    at: usize,
    /// The source, once the thread has handed it back.
    file: Option<R>,
    /// The thread, joined if it ends without handing the source back (it
    /// panicked: the panic goes on here, as if read in place).
    thread: Option<std::thread::JoinHandle<()>>,
}

impl<R: Read + Send + 'static> ReadAhead<R> {
    /// Starts reading `source` on a new thread named `name`; `Err(source)`
    /// (the caller reads it itself) when the machine has a single CPU or no
    /// thread can be started.
    pub(crate) fn start(source: R, name: &str) -> Result<ReadAhead<R>, R> {
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
                current: Vec::new(),
                at: 0,
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
}

/// The reading thread: fills spare buffers until the end of the source or
/// an error, then hands the source back. Stops early when the consumer is
/// gone.
fn read_chunks<R: Read>(mut file: R, chunks: Sender<Msg<R>>, spare: Receiver<Vec<u8>>) {
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

impl<R: Read> Read for ReadAhead<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.at < self.current.len() {
                let n = out.len().min(self.current.len() - self.at);
                out[..n].copy_from_slice(&self.current[self.at..self.at + n]);
                self.at += n;
                return Ok(n);
            }
            if let Some(f) = &mut self.file {
                return f.read(out);
            }
            if self.current.capacity() > 0 {
                // Back to the thread for the next chunk (it may be gone).
                let _ = self.spare.send(std::mem::take(&mut self.current));
            }
            self.at = 0;
            match self.chunks.recv() {
                Ok(Msg::Data(chunk)) => self.current = chunk,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::{Seek, Write};

    #[test]
    fn reads_the_file_exactly_in_any_read_sizes_and_past_a_later_append() {
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        let data: Vec<u8> = (0..(CHUNK * 5 + 12_345))
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        tmp.write_all(&data).unwrap();
        let Ok(mut r) = ReadAhead::start(File::open(tmp.path()).unwrap(), "test") else {
            return; // one CPU: the caller reads the file itself
        };
        let mut got = Vec::new();
        let mut buf = vec![0u8; 100_003];
        let mut size = 1;
        loop {
            let n = r.read(&mut buf[..size]).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            size = size * 3 % 100_003 + 1;
        }
        assert!(got == data, "same bytes, same order");
        // The capture grows after its end: reading on returns the new bytes.
        tmp.write_all(b"more").unwrap();
        tmp.flush().unwrap();
        let n = r.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"more");
        assert_eq!(r.read(&mut buf).unwrap(), 0);
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
        let Ok(mut r) = ReadAhead::start(Bad(false), "test") else {
            return; // one CPU: the caller reads the source itself
        };
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut b = [0u8; 4];
            while r.read(&mut b).unwrap() > 0 {}
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
        if let Ok(mut r) = ReadAhead::start(f, "test") {
            let mut b = [0u8; 10];
            assert_eq!(r.read(&mut b).unwrap(), 10);
            drop(r);
        }
        // Nothing to assert beyond not hanging: the thread's next send fails.
    }
}
