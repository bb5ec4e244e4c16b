//! The recording of `run --record`: every datagram the receiver applies,
//! and every stream segment its feeds exchange, in the order applied, with
//! its arrival time, in a pcap (ns, raw IPv4) that `tickguard replay` turns
//! into the same state.
//!
//! It has two halves, so that the receive thread makes no system call for
//! it and never waits on a disk. On the receive thread, a [`Tap`] formats
//! each record into a chunk of memory taken from a fixed pool
//! ([`CHUNKS`] of [`CHUNK_BYTES`], allocated and written when the
//! recording starts: 32 MiB resident, no page fault on the receive thread
//! after), and hands each chunk over when it is full, or after
//! [`HANDOFF_NS`] if the recording's thread took the last one. On the
//! recording's own thread, a [`Recorder`] writes the chunks' records into
//! the file and gives the chunks back. Neither side ever waits on the
//! other: the recording's thread looks for chunks every [`POLL`] rather
//! than sleeping in the channel (where each hand-over would have to wake
//! it, a system call on the receive thread).
//!
//! A disk slower than the feed until the pool is spent leaves no chunk
//! free: the recording then stops ([`RECORD_FELL_BEHIND`]), as at a failed
//! write, rather than keep going with a hole in it. Since a chunk handed
//! over on time waits alone and the rest go full (a chunk goes when the
//! next record does not fit it: at least three quarters full with records
//! of 64 KiB, the largest, nearly full with a feed's datagrams), that is
//! once the writes are from about 23.5 MiB (the largest records) to
//! 31.5 MiB (small ones) behind, however sparse the feed.

use super::RunStats;
use crate::capture::link::Link;
use crate::capture::write::{CaptureWriter, Format};
use crossbeam_channel::{Receiver, Sender, TryRecvError};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The recording's format and link: pcap of ns, raw IPv4.
const FORMAT: Format = Format::PcapNanos;
const LINK: Link = Link::RawIp;

/// Chunks in the pool between the two halves.
pub const CHUNKS: usize = 128;

/// Bytes a chunk holds: records of 64 KiB (the largest) fit several.
pub const CHUNK_BYTES: usize = 256 * 1024;

/// A chunk holding records is handed over at least this often (local
/// clock, ns), full or not: a sidecar killed (SIGKILL, the OOM killer, a
/// crash that does not unwind) leaves a file lacking this and the
/// recording thread's [`RECORD_FLUSH_NS`] at most.
pub const HANDOFF_NS: u64 = 100_000_000;

/// Bytes the pool holds: the most the disk may fall behind by (less by
/// what chunks handed over leave unfilled: see the module's doc).
pub const RECORD_QUEUE_BYTES: usize = CHUNKS * CHUNK_BYTES;

/// How long the recording's thread sleeps when no chunk waits.
const POLL: std::time::Duration = std::time::Duration::from_millis(1);

/// [`RunStats::record_errno`] of a recording stopped because the pool
/// had no chunk free: the disk fell behind the feed.
pub const RECORD_FELL_BEHIND: i32 = -2;

/// The receive thread's half of a recording: formats each record into a
/// chunk and hands the chunks to the recording's thread; never waits.
pub struct Tap {
    /// Formats records into the chunk being filled; kept once stopped
    /// (dropped with the last reference to the pool only at the end: not
    /// on the receive thread while it runs); `None` once ended.
    writer: Option<CaptureWriter<Chunks>>,
    /// The recording stopped on this side: nothing more is taken.
    stopped: bool,
    /// The recording's thread, until it ended (with the error that made
    /// the recording incomplete, if one did).
    thread: Option<std::thread::JoinHandle<Option<std::io::Error>>>,
    /// What the recording's thread counted so far.
    shared: Arc<Shared>,
    /// Records left out on this side: after the recording stopped, those
    /// no chunk was free for, and those its chunk held when it stopped.
    unrecorded: u64,
    /// The pool ran out of chunks: the recording stopped here.
    fell_behind: bool,
    /// The file's descriptor, kept until the tap ends: the recording's
    /// lock (`flock`, taken at its creation) lasts while the sidecar runs,
    /// whatever became of the recording's thread and its file, so that a
    /// second instance named the same file is still refused.
    _lock: Option<std::fs::File>,
}

/// What the recording's thread counted, for the receive thread to read.
#[derive(Default)]
struct Shared {
    /// [`RunStats::unrecorded`] there.
    unrecorded: AtomicU64,
    /// Records it took out of the chunks handed over and settled: in the
    /// file, or counted there (not those in its buffer). Those handed
    /// over and not settled are lost with a panic.
    settled: AtomicU64,
    /// [`RunStats::record_errno`] (as `u32`), bit 32 set once it stopped.
    stopped: AtomicU64,
}

impl Shared {
    fn store(&self, st: &RunStats) {
        self.unrecorded.store(st.unrecorded, Ordering::Relaxed);
        let stopped = u64::from(st.record_stopped) << 32 | u64::from(st.record_errno as u32);
        self.stopped.store(stopped, Ordering::Relaxed);
    }

    /// Whether it stopped, and its error number.
    fn stopped(&self) -> (bool, i32) {
        let s = self.stopped.load(Ordering::Relaxed);
        (s >> 32 != 0, s as u32 as i32)
    }
}

/// The chunks of records on the receive thread: each record, as the
/// capture writer hands it over in one write, stored as its length (`u32`,
/// little-endian) and its bytes.
pub struct Chunks {
    /// The chunk being filled (no capacity when none was free).
    chunk: Vec<u8>,
    /// Records in it.
    records: u64,
    /// Records handed over in chunks, in all; and those of chunks that
    /// could not be (the recording's thread gone: a panic).
    handed: u64,
    lost: u64,
    /// When a cycle first saw it hold a record, local clock, ns.
    since: Option<u64>,
    /// To the recording's thread (room for every chunk: never full).
    full: Sender<Vec<u8>>,
    /// Back from it.
    free: Receiver<Vec<u8>>,
}

impl Chunks {
    /// Hands the chunk over if it holds records.
    fn hand_off(&mut self) {
        if !self.chunk.is_empty() {
            let chunk = std::mem::take(&mut self.chunk);
            // Never full: it has room for every chunk of the pool. Gone
            // (the thread ended on a panic), the chunk's records are lost.
            match self.full.try_send(chunk) {
                Ok(()) => self.handed += self.records,
                Err(_) => self.lost += self.records,
            }
            self.records = 0;
            self.since = None;
        }
    }
}

impl Write for Chunks {
    /// Takes one record whole, or fails (a chunk lacking): the recording
    /// then stops.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let need = 4 + buf.len();
        if self.chunk.capacity() - self.chunk.len() < need {
            self.hand_off();
            match self.free.try_recv() {
                Ok(chunk) if chunk.capacity() >= need => self.chunk = chunk,
                _ => return Err(std::io::Error::other("no chunk free")),
            }
        }
        self.chunk
            .extend_from_slice(&(buf.len() as u32).to_le_bytes());
        self.chunk.extend_from_slice(buf);
        self.records += 1;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An empty chunk of `bytes`, its pages written once: the receive thread
/// takes no page fault filling it.
fn chunk(bytes: usize) -> Vec<u8> {
    let mut c = vec![1u8; bytes];
    c.clear();
    c
}

/// Whether `e` is the capture writer's own refusal of one record (a time
/// the file cannot hold; never an OS error): nothing written, the next
/// goes on.
fn refused(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::InvalidInput && e.raw_os_error().is_none()
}

/// The records a chunk holds, in order.
fn records(chunk: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = chunk;
    std::iter::from_fn(move || {
        let (len, after) = rest.split_first_chunk::<4>()?;
        let (record, after) = after.split_at_checked(u32::from_le_bytes(*len) as usize)?;
        rest = after;
        Some(record)
    })
}

impl Tap {
    /// A recording into `file` of at most `max_bytes`, its thread started.
    pub fn start(file: std::fs::File, max_bytes: Option<u64>) -> std::io::Result<Tap> {
        let lock = file.try_clone()?;
        let mut tap = Tap::start_with(file, max_bytes, CHUNKS, CHUNK_BYTES)?;
        tap._lock = Some(lock);
        Ok(tap)
    }

    /// A recording into `out` through a pool of `chunks` of `chunk_bytes`
    /// (at least two, each holding the largest record).
    fn start_with<F>(
        out: F,
        max_bytes: Option<u64>,
        chunks: usize,
        chunk_bytes: usize,
    ) -> std::io::Result<Tap>
    where
        F: Write + RecordingEnd + Send + 'static,
    {
        let recorder = Recorder::new(out, max_bytes)?;
        let (full, from_tap) = crossbeam_channel::bounded(chunks);
        let (to_tap, free) = crossbeam_channel::bounded(chunks);
        for _ in 1..chunks {
            to_tap
                .try_send(chunk(chunk_bytes))
                .expect("room for every chunk");
        }
        let shared = Arc::new(Shared::default());
        let thread = std::thread::Builder::new()
            .name("tickguard-record".into())
            .spawn({
                let shared = Arc::clone(&shared);
                move || write_chunks(recorder, from_tap, to_tap, &shared)
            })?;
        let chunks = Chunks {
            chunk: chunk(chunk_bytes),
            records: 0,
            handed: 0,
            lost: 0,
            since: None,
            full,
            free,
        };
        Ok(Tap {
            writer: Some(CaptureWriter::after_header(chunks, FORMAT, LINK)),
            stopped: false,
            thread: Some(thread),
            shared,
            unrecorded: 0,
            fell_behind: false,
            _lock: None,
        })
    }

    /// Records one datagram or segment with `write`; after the recording
    /// stopped, counts it out.
    pub fn write(&mut self, write: impl FnOnce(&mut CaptureWriter<Chunks>) -> std::io::Result<()>) {
        let Some(w) = self.writer.as_mut().filter(|_| !self.stopped) else {
            self.unrecorded += 1;
            return;
        };
        match write(w) {
            Ok(()) => {}
            Err(e) if refused(&e) => self.unrecorded += 1,
            // No chunk free: the disk fell behind.
            Err(_) => {
                self.fell_behind = true;
                self.stop(1);
            }
        }
    }

    /// Once a cycle at `now` (local clock, ns): hands the chunk over when
    /// [`HANDOFF_NS`] passed since it was first seen holding a record (or
    /// the clock stepped back past that) and the recording's thread took
    /// the last chunk handed over; stops when the recording's thread did.
    pub fn tick(&mut self, now: u64) {
        let Some(w) = self.writer.as_mut().filter(|_| !self.stopped) else {
            return;
        };
        if self.shared.stopped().0 {
            self.stop(0);
            return;
        }
        let c = w.get_mut();
        if c.records == 0 {
            return;
        }
        let since = *c.since.get_or_insert(now);
        // Only when the recording's thread took the last one: a thread
        // held up by its disk is handed full chunks, so that the pool
        // holds its bytes of records however sparse the feed.
        let due = crate::time::retry_due(now, since.saturating_add(HANDOFF_NS), HANDOFF_NS);
        if due && c.full.is_empty() {
            c.hand_off();
        }
    }

    /// Stops on this side: `records` refused now, and those the chunk
    /// being filled holds, counted out (and never handed over). Chunks
    /// handed over before are the recording's thread's to write or count.
    fn stop(&mut self, records: u64) {
        self.stopped = true;
        self.unrecorded += records;
        if let Some(c) = self.writer.as_mut().map(|w| w.get_mut()) {
            self.unrecorded += std::mem::take(&mut c.records);
            c.chunk.clear();
        }
    }

    /// The recording's counts into `stats`, both halves'. Stopped, the
    /// cause told is the recording thread's (a failed write, the bound:
    /// a disk that failed after it fell behind too), else the disk fallen
    /// behind.
    pub fn count(&self, stats: &mut RunStats) {
        let lost = self.writer.as_ref().map_or(0, |w| w.get_ref().lost);
        stats.unrecorded = self.unrecorded + lost + self.shared.unrecorded.load(Ordering::Relaxed);
        (stats.record_stopped, stats.record_errno) = match self.shared.stopped() {
            (false, _) if self.fell_behind => (true, RECORD_FELL_BEHIND),
            thread => thread,
        };
    }

    /// Ends the recording: the chunk being filled handed over, every chunk
    /// written, the file cut back to its last whole record and synced (see
    /// [`Recorder::finish`]); waits for the recording's thread. Its counts
    /// into `stats`; the error that made it incomplete, if one did.
    pub fn finish(mut self, stats: &mut RunStats) -> Option<std::io::Error> {
        let error = self.end();
        self.count(stats);
        error
    }

    /// Hands the last chunk over, closes the way to the recording's thread
    /// and waits for it to end; the error that made the recording
    /// incomplete, if one did.
    fn end(&mut self) -> Option<std::io::Error> {
        let (mut handed, mut lost) = (0, 0);
        if let Some(mut w) = self.writer.take() {
            let c = w.get_mut();
            if !self.stopped {
                c.hand_off();
            }
            (handed, lost) = (c.handed, c.lost);
        }
        self.stopped = true;
        self.unrecorded += lost;
        match self.thread.take()?.join() {
            Ok(error) => error,
            Err(_) => {
                // What it had not settled is in no file nor count.
                let settled = self.shared.settled.load(Ordering::Relaxed);
                self.unrecorded += handed.saturating_sub(settled);
                Some(std::io::Error::other("the recording's thread panicked"))
            }
        }
    }
}

impl Drop for Tap {
    /// A tap dropped unfinished (the sidecar dropped, not run to its
    /// end) still writes out what it took.
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// The recording's thread: writes the records of each chunk handed over
/// and gives it back, writes out its buffer when due, and ends the file
/// once the tap is gone and every chunk written.
fn write_chunks<F: Write + RecordingEnd>(
    mut recorder: Recorder<Bounded<std::io::BufWriter<F>>>,
    full: Receiver<Vec<u8>>,
    free: Sender<Vec<u8>>,
    shared: &Shared,
) -> Option<std::io::Error> {
    let mut stats = RunStats::default();
    let mut taken = 0u64;
    loop {
        match full.try_recv() {
            Ok(mut chunk) => {
                for record in records(&chunk) {
                    recorder.write(&mut stats, |w| w.get_mut().write_all(record));
                    taken += 1;
                }
                chunk.clear();
                // Never full; the tap gone, nobody wants it back.
                let _ = free.try_send(chunk);
            }
            Err(TryRecvError::Empty) => {
                recorder.flush_due(&mut stats, crate::time::now_ns());
                std::thread::sleep(POLL);
            }
            Err(TryRecvError::Disconnected) => break,
        }
        shared.store(&stats);
        shared
            .settled
            .store(taken - recorder.buffered(), Ordering::Relaxed);
    }
    let error = recorder.finish(&mut stats);
    shared.store(&stats);
    error
}
/// The file half of a recording, on the recording's thread: the records
/// handed over, written in order, stopped at its first failed write.
struct Recorder<W: std::io::Write> {
    /// `None` once a write failed: the file then holds the records of what
    /// was applied up to the failure (the writer hands each record to its
    /// buffer in one piece; a disk filling part-way through a buffer's
    /// write can cut the last one, which the stop cuts off), never a
    /// stream with a hole in it.
    writer: Option<CaptureWriter<W>>,
    /// The writer whose write failed, kept to end the file at the stop
    /// (cut back to its last whole record and synced; what its buffer
    /// held and did not write whole, counted lost).
    stopped: Option<CaptureWriter<W>>,
    /// When its buffer was last written out, local clock, ns.
    flushed_at: u64,
}

/// What a recording's output lost with its failed write: the records its
/// buffer held that did not reach the file whole (none for an output
/// without a buffer).
trait Lost {
    fn lost(&self) -> u64 {
        0
    }

    /// Whether what it holds is whole and may still be written out (a
    /// write refused by the bound, not failed below).
    fn intact(&self) -> bool {
        false
    }
}

/// [`RunStats::record_errno`] of a recording stopped by its bound
/// (`--record-max-mb`), not by a failed write.
pub const RECORD_BOUND_REACHED: i32 = -1;

/// The recording's output, refusing to grow past a bound in bytes
/// (`--record-max-mb`): a write that would pass it fails whole with
/// EFBIG, which stops the recording as a full disk would. It sits above
/// the buffer, so it sees each record as one write: the record that would
/// pass the bound is the first refused (and counted unrecorded), every
/// one before it reaches the file.
pub struct Bounded<W> {
    /// The recording's buffer ([`RECORD_BUFFER`] bytes) over the file.
    inner: W,
    /// Bytes it may still take.
    left: u64,
    /// Bytes at the buffer's start that are no record (the file's header,
    /// until written out).
    lead: usize,
    /// The length of each record in the buffer, in order, as a
    /// `BufWriter` keeps them (it writes them out when the next record
    /// does not fit beside them). Room for a full buffer of the smallest
    /// records, allocated once.
    held: Vec<u32>,
    /// Bytes in the buffer: `lead` and every record of `held`.
    held_bytes: usize,
    /// Bytes the file holds whole: the header and the records written out
    /// before a failure (a failed write-out may leave a record cut).
    whole: u64,
    /// Records the buffer held when writing them out failed, and that
    /// did not reach the file whole.
    lost: u64,
    /// A write below failed: what the buffer holds is never written.
    failed: bool,
}

/// A buffer that can tell how many of the bytes it took are not written
/// out yet.
pub trait Unwritten {
    /// Bytes taken and not yet handed to what it writes into.
    fn unwritten(&self) -> usize;
}

impl<W: std::io::Write> Unwritten for std::io::BufWriter<W> {
    fn unwritten(&self) -> usize {
        self.buffer().len()
    }
}

impl<W> Bounded<W> {
    fn new(inner: W, max_bytes: Option<u64>) -> Bounded<W> {
        Bounded {
            inner,
            left: max_bytes.unwrap_or(u64::MAX),
            lead: 0,
            // A record is 16 bytes at least (its header).
            held: Vec::with_capacity(RECORD_BUFFER / 16 + 1),
            held_bytes: 0,
            whole: 0,
            lost: 0,
            failed: false,
        }
    }

    /// What it took so far was the file's header, not a record.
    fn header_taken(&mut self) {
        self.lead = self.held_bytes;
        self.held.clear();
    }

    /// The buffer was written out whole.
    fn written_out(&mut self) {
        self.whole += self.held_bytes as u64;
        (self.lead, self.held_bytes) = (0, 0);
        self.held.clear();
    }
}

impl<W: Unwritten> Bounded<W> {
    /// Writing the buffer out failed: a write before the failure may have
    /// taken part of it (a disk filling takes what fits). The records it
    /// took whole are in the file; the rest are lost.
    fn write_out_failed(&mut self) {
        self.failed = true;
        let written = self.held_bytes.saturating_sub(self.inner.unwritten());
        let Some(mut rest) = written.checked_sub(self.lead) else {
            self.lost = self.held.len() as u64;
            return;
        };
        self.whole += self.lead as u64;
        let mut taken = 0;
        for &len in &self.held {
            let Some(r) = rest.checked_sub(len as usize) else {
                break;
            };
            (rest, taken) = (r, taken + 1);
            self.whole += u64::from(len);
        }
        self.lost = (self.held.len() - taken) as u64;
    }
}

impl<W> Lost for Bounded<W> {
    fn lost(&self) -> u64 {
        self.lost
    }

    fn intact(&self) -> bool {
        !self.failed
    }
}

impl<W: std::io::Write + Unwritten> std::io::Write for Bounded<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() as u64 > self.left {
            return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
        }
        // The buffer writes out what it holds first.
        let flushes = self.held_bytes + buf.len() > RECORD_BUFFER;
        match self.inner.write(buf) {
            Ok(n) => {
                self.left -= n as u64;
                if flushes {
                    self.written_out();
                }
                self.held.push(n as u32);
                self.held_bytes += n;
                Ok(n)
            }
            Err(e) => {
                if flushes {
                    self.write_out_failed();
                } else {
                    self.failed = true;
                }
                Err(e)
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.inner.flush() {
            Ok(()) => {
                self.written_out();
                Ok(())
            }
            Err(e) => {
                self.write_out_failed();
                Err(e)
            }
        }
    }
}

/// Where a recording ends: a file that can be cut back to its last whole
/// record and synced.
pub trait RecordingEnd {
    /// Cuts what follows `len` bytes off (a record cut short by a failed
    /// write-out), when `cut`, and waits until the disk holds the rest.
    fn end(&mut self, cut: Option<u64>) -> std::io::Result<()>;
}

impl RecordingEnd for std::fs::File {
    /// A device (`/dev/null`) has nothing to cut or sync.
    fn end(&mut self, cut: Option<u64>) -> std::io::Result<()> {
        if self.metadata()?.file_type().is_file() {
            if let Some(len) = cut {
                // Shrinking needs no room.
                self.set_len(len)?;
            }
            self.sync_data()?;
        }
        Ok(())
    }
}

impl<F: std::io::Write + RecordingEnd> Bounded<std::io::BufWriter<F>> {
    /// Writes out what is buffered and, into a regular file, waits until
    /// the disk holds it (`fdatasync`): a write error the kernel reports
    /// only then (a failing disk, a full one under delayed allocation)
    /// makes the recording incomplete instead of letting it pass for
    /// whole. A write-out cut short (a disk filling takes what fits) may
    /// have left part of a record, counted lost: the file is cut back to
    /// its last whole record, so that it replays to its end.
    fn finish(self) -> std::io::Result<()> {
        let (failed, whole) = (self.failed, self.whole);
        let mut file = match failed {
            // Its failed write counted what the buffer held as lost: not
            // written now (a disk with room again would add them after a
            // count that says they are missing).
            true => self.inner.into_parts().0,
            // Stopped by the bound: the buffer holds whole records.
            false => self.inner.into_inner().map_err(|e| e.into_error())?,
        };
        file.end(failed.then_some(whole))
    }
}

impl<F: std::io::Write + RecordingEnd> Recorder<Bounded<std::io::BufWriter<F>>> {
    /// Ends the recording at the sidecar's stop: what its buffer holds
    /// written out (a write-out cut short counting what it did not take
    /// whole, as a failed write does), the file cut back to its last whole
    /// record and synced. The error that made it incomplete, if one did.
    fn finish(self, stats: &mut RunStats) -> Option<std::io::Error> {
        // Stopped (by a failed write, its count already taken, or by the
        // bound, its buffer written out then): cut back and synced, a
        // failure of which makes it incomplete as a running one's does.
        let stopped = self.stopped.and_then(|w| w.into_inner().finish().err());
        let Some(mut w) = self.writer else {
            return stopped;
        };
        let flushed = std::io::Write::flush(w.get_mut());
        if flushed.is_err() {
            stats.unrecorded += w.get_ref().lost();
        }
        flushed.and(w.into_inner().finish()).err()
    }
}

/// Buffer of the recording: larger than any record (a 65,535-byte IPv4
/// packet and its header), so every record reaches the buffer whole.
const RECORD_BUFFER: usize = 128 * 1024;

/// The recording's buffer is written out at least this often, ns: a
/// sidecar killed (SIGKILL, the OOM killer, a crash that does not unwind)
/// leaves a file lacking at most the last second, not a buffer's worth,
/// which a quiet feed takes hours to fill. Written to the page cache, not
/// synced: it outlives the process, not the machine.
const RECORD_FLUSH_NS: u64 = 1_000_000_000;

impl<F: std::io::Write> Recorder<Bounded<std::io::BufWriter<F>>> {
    /// A recording into `file` of at most `max_bytes`, its header buffered.
    fn new(file: F, max_bytes: Option<u64>) -> std::io::Result<Self> {
        let buffer = std::io::BufWriter::with_capacity(RECORD_BUFFER, file);
        Recorder::bounded(buffer, max_bytes)
    }
}

impl<W: std::io::Write + Unwritten> Recorder<Bounded<W>> {
    /// A recording into `out` of at most `max_bytes`, its header written.
    fn bounded(out: W, max_bytes: Option<u64>) -> std::io::Result<Recorder<Bounded<W>>> {
        let mut writer = CaptureWriter::new(Bounded::new(out, max_bytes), FORMAT, LINK)?;
        writer.get_mut().header_taken();
        Ok(Recorder {
            stopped: None,
            writer: Some(writer),
            flushed_at: 0,
        })
    }

    /// Records taken and still in its buffer, not yet in the file.
    fn buffered(&self) -> u64 {
        self.writer
            .as_ref()
            .map_or(0, |w| w.get_ref().held.len() as u64)
    }
}

impl<W: std::io::Write + Lost> Recorder<W> {
    /// Writes one record with `write`; a failed write stops the recording,
    /// counted in `stats` (the metrics thread logs it).
    fn write(
        &mut self,
        stats: &mut RunStats,
        write: impl FnOnce(&mut CaptureWriter<W>) -> std::io::Result<()>,
    ) {
        let Some(w) = &mut self.writer else {
            stats.unrecorded += 1;
            return;
        };
        match write(w) {
            Ok(()) => {}
            Err(e) if refused(&e) => stats.unrecorded += 1,
            // This record, and those its buffer held and lost.
            Err(e) => self.stop(stats, &e, 1),
        }
    }

    /// Writes out what the buffer holds if [`RECORD_FLUSH_NS`] passed
    /// since it last did at `now` (local clock, ns), or the clock stepped
    /// back past it. A failed write stops the recording, as a failed
    /// record's does.
    fn flush_due(&mut self, stats: &mut RunStats, now: u64) {
        let at = self.flushed_at.saturating_add(RECORD_FLUSH_NS);
        if !crate::time::retry_due(now, at, RECORD_FLUSH_NS) {
            return;
        }
        self.flushed_at = now;
        let Some(w) = &mut self.writer else { return };
        if let Err(e) = w.get_mut().flush() {
            self.stop(stats, &e, 0);
        }
    }

    /// A write failed with `e`: `records` not written, and those the
    /// buffer held lost with it, are counted; the recording stops.
    fn stop(&mut self, stats: &mut RunStats, e: &std::io::Error, records: u64) {
        let mut writer = self.writer.take();
        let mut errno = e.raw_os_error().unwrap_or(0);
        if let Some(w) = writer.as_mut().filter(|w| w.get_ref().intact()) {
            // Stopped by the bound: the records its buffer holds are whole
            // and counted recorded, so written out now, not at the end of
            // the run (which a kill would leave them short of). Failing,
            // they are lost (counted below), and that failure is the one
            // told.
            errno = RECORD_BOUND_REACHED;
            if let Err(f) = w.get_mut().flush() {
                errno = f.raw_os_error().unwrap_or(0);
            }
        }
        let lost = writer.as_ref().map_or(0, |w| w.get_ref().lost());
        stats.unrecorded += records + lost;
        stats.record_errno = errno;
        stats.record_stopped = true;
        self.stopped = writer;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A file whose next `failing` writes fail with ENOSPC; it shares what
    /// it took.
    struct Disk {
        bytes: Rc<RefCell<Vec<u8>>>,
        failing: Rc<RefCell<usize>>,
    }

    impl Lost for Disk {}

    impl Disk {
        /// A disk with room, and its bytes and failing count, shared.
        #[allow(clippy::type_complexity)]
        fn new() -> (Disk, Rc<RefCell<Vec<u8>>>, Rc<RefCell<usize>>) {
            let (bytes, failing) = (Rc::default(), Rc::default());
            let disk = Disk {
                bytes: Rc::clone(&bytes),
                failing: Rc::clone(&failing),
            };
            (disk, bytes, failing)
        }
    }

    /// The source and destination of the records the tests write.
    fn ends() -> (std::net::SocketAddrV4, std::net::SocketAddrV4) {
        (
            "10.0.0.1:1".parse().unwrap(),
            "239.1.1.1:2".parse().unwrap(),
        )
    }

    impl std::io::Write for Disk {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut failing = self.failing.borrow_mut();
            if *failing > 0 {
                *failing -= 1;
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.bytes.borrow_mut().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_write_stops_the_recording_and_a_time_out_of_range_skips_one() {
        let (disk, bytes, failing) = Disk::new();
        let writer = CaptureWriter::new(disk, Format::PcapNanos, Link::RawIp).unwrap();
        let mut r = Recorder {
            writer: Some(writer),
            stopped: None,
            flushed_at: 0,
        };
        let mut st = RunStats::default();
        let (src, dst) = ends();
        let t = 1_700_000_000_000_000_000;
        r.write(&mut st, |w| w.write_udp(t, src, dst, b"one"));
        // Past 2106: nothing written, the recording goes on.
        r.write(&mut st, |w| w.write_udp(u64::MAX, src, dst, b"late"));
        r.write(&mut st, |w| w.write_udp(t + 1, src, dst, b"two"));
        assert_eq!((st.unrecorded, st.record_stopped), (1, false));
        let before = bytes.borrow().len();
        // The disk is full for one write, then has room again: the
        // recording has stopped for good, so the file has no hole.
        *failing.borrow_mut() = 1;
        for i in 0..3 {
            r.write(&mut st, |w| w.write_udp(t + 2 + i, src, dst, b"more"));
        }
        assert!(st.record_stopped);
        assert_eq!((st.unrecorded, st.record_errno), (4, libc::ENOSPC));
        assert_eq!(bytes.borrow().len(), before);
        assert_eq!(before, 24 + 2 * (16 + 20 + 8 + 3));
    }

    /// The buffer is written out a second after it last was (or at once
    /// after the clock stepped back), so a sidecar killed without a
    /// chance to finish leaves its recording at most a second short; a
    /// write-out that fails stops the recording, counting what the buffer
    /// held.
    #[test]
    fn a_recording_is_written_out_every_second() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.pcap");
        let mut r = Recorder::new(std::fs::File::create(&path).unwrap(), None).unwrap();
        let mut st = RunStats::default();
        let len = || std::fs::metadata(&path).unwrap().len();
        let (src, dst) = ends();
        let t = 1_700_000_000_000_000_000;
        let record = 16 + 20 + 8 + 3;
        r.flush_due(&mut st, t);
        assert_eq!(len(), 24, "the header, at the first cycle");
        r.write(&mut st, |w| w.write_udp(t, src, dst, b"one"));
        r.flush_due(&mut st, t + RECORD_FLUSH_NS - 1);
        assert_eq!(len(), 24, "held in the buffer");
        r.flush_due(&mut st, t + RECORD_FLUSH_NS);
        assert_eq!(len(), 24 + record);
        r.write(&mut st, |w| w.write_udp(t, src, dst, b"two"));
        r.flush_due(&mut st, t - RECORD_FLUSH_NS);
        assert_eq!(len(), 24 + 2 * record, "the clock stepped back");
        assert_eq!((st.unrecorded, st.record_stopped), (0, false));

        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let mut r = Recorder::new(full, None).unwrap();
        r.write(&mut st, |w| w.write_udp(t, src, dst, b"one"));
        r.write(&mut st, |w| w.write_udp(t, src, dst, b"two"));
        r.flush_due(&mut st, t);
        assert!(st.record_stopped);
        assert_eq!((st.unrecorded, st.record_errno), (2, libc::ENOSPC));
        r.write(&mut st, |w| w.write_udp(t, src, dst, b"three"));
        assert_eq!(st.unrecorded, 3, "stopped for good");
    }

    /// A recording stopped by its bound writes out at once the whole
    /// records its buffer holds (counted recorded): a sidecar killed later
    /// leaves them in the file, not in a buffer that dies with it.
    #[test]
    fn a_recording_stopped_by_its_bound_writes_out_its_buffer_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.pcap");
        let record = 16 + 20 + 8 + 3;
        let bound = 24 + 2 * record as u64;
        let mut r = Recorder::new(std::fs::File::create(&path).unwrap(), Some(bound)).unwrap();
        let mut st = RunStats::default();
        let (src, dst) = ends();
        let t = 1_700_000_000_000_000_000;
        for b in [b"one", b"two", b"333"] {
            r.write(&mut st, |w| w.write_udp(t, src, dst, b));
        }
        assert_eq!((st.unrecorded, st.record_errno), (1, RECORD_BOUND_REACHED));
        let len = std::fs::metadata(&path).unwrap().len();
        assert_eq!(
            len, bound,
            "the header and both records, not at the run's end"
        );
        // Nothing more, not even at the time a write-out was due.
        r.flush_due(&mut st, t + 2 * RECORD_FLUSH_NS);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), bound);
    }

    /// A disk with `room` bytes left: a write takes what fits of it, and
    /// fails with ENOSPC once nothing does (as a filling disk, or a
    /// file-size limit, answers). Its end cuts the bytes as a file's does.
    struct Filling {
        bytes: Rc<RefCell<Vec<u8>>>,
        room: usize,
    }

    impl RecordingEnd for Filling {
        fn end(&mut self, cut: Option<u64>) -> std::io::Result<()> {
            if let Some(len) = cut {
                self.bytes.borrow_mut().truncate(len as usize);
            }
            Ok(())
        }
    }

    impl std::io::Write for Filling {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            self.bytes.borrow_mut().extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A disk that fills while the buffer is written out takes part of
    /// it: the records it took whole are recorded, and only the rest are
    /// counted out; the file is known whole up to the last of them (where
    /// the end of the run cuts it, dropping the part of a record after).
    #[test]
    fn a_disk_filling_during_a_write_out_counts_out_only_what_it_did_not_take() {
        let record = 16 + 20 + 8 + 3;
        let bytes = Rc::default();
        let disk = Filling {
            bytes: Rc::clone(&bytes),
            // The header, ten records and part of an eleventh.
            room: 24 + 10 * record + 20,
        };
        let buffer = std::io::BufWriter::with_capacity(RECORD_BUFFER, disk);
        let mut r = Recorder::bounded(buffer, None).unwrap();
        let mut st = RunStats::default();
        let (src, dst) = ends();
        let t = 1_700_000_000_000_000_000;
        // Past the buffer's 128 KiB: its write-out fails.
        let sent = 3_000;
        for i in 0..sent {
            r.write(&mut st, |w| w.write_udp(t + i, src, dst, b"abc"));
        }
        assert!(st.record_stopped);
        assert_eq!(st.record_errno, libc::ENOSPC);
        assert_eq!(bytes.borrow().len(), 24 + 10 * record + 20);
        assert_eq!(10 + st.unrecorded, sent, "in the file or counted out");
        let stopped = r.stopped.as_ref().unwrap().get_ref();
        assert_eq!(stopped.whole, (24 + 10 * record) as u64);
    }

    /// The disk filling in the write-out at the sidecar's stop: the
    /// record it cut is counted out with those it did not take, and the
    /// file is cut back to the last whole record, as after a failed write
    /// while running.
    #[test]
    fn a_disk_filling_at_the_stop_cuts_back_to_the_last_whole_record() {
        let record = 16 + 20 + 8 + 3;
        let bytes = Rc::default();
        let disk = Filling {
            bytes: Rc::clone(&bytes),
            // The header, one record and half of the second.
            room: 24 + record + record / 2,
        };
        let buffer = std::io::BufWriter::with_capacity(RECORD_BUFFER, disk);
        let mut r = Recorder::bounded(buffer, None).unwrap();
        let mut st = RunStats::default();
        let (src, dst) = ends();
        let t = 1_700_000_000_000_000_000;
        for i in 0..3 {
            r.write(&mut st, |w| w.write_udp(t + i, src, dst, b"abc"));
        }
        assert_eq!(st.unrecorded, 0, "all in the buffer");
        let e = r.finish(&mut st).expect("the write-out failed");
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(st.unrecorded, 2, "the cut record and the one not taken");
        assert_eq!(bytes.borrow().len(), 24 + record, "cut back");
    }

    /// A recording stopped by its bound whose buffer then fails to be
    /// written out counts the records the buffer held as unrecorded, and
    /// tells the write's error, not the bound's.
    #[test]
    fn a_failed_write_out_at_the_bound_is_counted_and_told() {
        let (disk, bytes, failing) = Disk::new();
        let record = 16 + 20 + 8 + 3;
        let buffer = std::io::BufWriter::with_capacity(RECORD_BUFFER, disk);
        let mut r = Recorder::bounded(buffer, Some(24 + 2 * record)).unwrap();
        let mut st = RunStats::default();
        let (src, dst) = ends();
        let t = 1_700_000_000_000_000_000;
        r.write(&mut st, |w| w.write_udp(t, src, dst, b"one"));
        r.write(&mut st, |w| w.write_udp(t, src, dst, b"two"));
        *failing.borrow_mut() = 1;
        r.write(&mut st, |w| w.write_udp(t, src, dst, b"333"));
        assert!(st.record_stopped);
        assert_eq!((st.unrecorded, st.record_errno), (3, libc::ENOSPC));
        assert!(bytes.borrow().is_empty(), "nothing reached the disk");
    }

    /// A disk that takes every write and fails the sync at the end (a
    /// write error the kernel reports only at `fdatasync`).
    struct Unsynced(Rc<RefCell<Vec<u8>>>);

    impl std::io::Write for Unsynced {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl RecordingEnd for Unsynced {
        fn end(&mut self, _: Option<u64>) -> std::io::Result<()> {
            Err(std::io::Error::from_raw_os_error(libc::EIO))
        }
    }

    /// A recording stopped by its bound whose sync fails at the stop is
    /// incomplete, as a running one whose sync fails is: the error is
    /// told, not only logged.
    #[test]
    fn a_stopped_recording_whose_sync_fails_is_incomplete() {
        let record = 16 + 20 + 8 + 3;
        let bytes = Rc::default();
        let disk = Unsynced(Rc::clone(&bytes));
        let buffer = std::io::BufWriter::with_capacity(RECORD_BUFFER, disk);
        let mut r = Recorder::bounded(buffer, Some(24 + 2 * record)).unwrap();
        let mut st = RunStats::default();
        let (src, dst) = ends();
        let t = 1_700_000_000_000_000_000;
        for i in 0..3 {
            r.write(&mut st, |w| w.write_udp(t + i, src, dst, b"abc"));
        }
        assert!(st.record_stopped);
        assert_eq!(bytes.borrow().len() as u64, 24 + 2 * record, "written out");
        let e = r.finish(&mut st).expect("the sync failed");
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
    }

    /// The end of a recording writes out its buffer and syncs a regular
    /// file; into `/dev/null` (a device: no sync to ask for) it ends
    /// without an error, which would call the recording incomplete.
    #[test]
    fn finishing_a_recording_syncs_a_file_and_not_a_device() {
        let bounded =
            |file| Bounded::new(std::io::BufWriter::with_capacity(RECORD_BUFFER, file), None);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.pcap");
        let mut file = bounded(std::fs::File::create(&path).unwrap());
        std::io::Write::write_all(&mut file, b"records").unwrap();
        file.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"records");
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .unwrap();
        let mut null = bounded(null);
        std::io::Write::write_all(&mut null, b"records").unwrap();
        null.finish().unwrap();
    }

    /// A disk whose writes wait until the test opens the gate (or a
    /// minute passed, told by `timed_out`); it keeps what it took.
    struct Gate {
        open: crossbeam_channel::Receiver<()>,
        waited: bool,
        /// Set when its first write began waiting.
        entered: Arc<std::sync::atomic::AtomicBool>,
        timed_out: Arc<std::sync::atomic::AtomicBool>,
        bytes: Arc<std::sync::Mutex<Vec<u8>>>,
    }

    impl Write for Gate {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if !self.waited {
                self.waited = true;
                self.entered.store(true, Ordering::Relaxed);
                if self
                    .open
                    .recv_timeout(std::time::Duration::from_secs(60))
                    .is_err()
                {
                    self.timed_out.store(true, Ordering::Relaxed);
                }
            }
            self.bytes.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl RecordingEnd for Gate {
        fn end(&mut self, _: Option<u64>) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A disk that stops taking writes stops the recording once the pool
    /// of chunks is spent, not the receive thread: every record is taken
    /// or refused at once, the recording is told stopped for the disk
    /// falling behind, and the file holds the records taken before, in
    /// order and whole, with no hole; each record is in it or counted out.
    #[test]
    fn a_disk_that_stops_stops_the_recording_not_the_receive_thread() {
        let (gate, open) = crossbeam_channel::bounded(1);
        let timed_out = Arc::default();
        let bytes = Arc::default();
        let disk = Gate {
            open,
            waited: false,
            entered: Arc::default(),
            timed_out: Arc::clone(&timed_out),
            bytes: Arc::clone(&bytes),
        };
        let mut tap = Tap::start_with(disk, None, 3, 4096).unwrap();
        let (src, dst) = ends();
        let t = 1_700_000_000_000_000_000;
        let record = 16 + 20 + 8 + 3;
        // Past the recording thread's 128 KiB buffer and the pool's 12 KiB:
        // whenever the disk is first written, the rest waits on it.
        let sent = 2 * RECORD_BUFFER as u64 / record;
        for i in 0..sent {
            tap.write(|w| w.write_udp(t + i, src, dst, b"abc"));
        }
        let mut st = RunStats::default();
        tap.count(&mut st);
        assert!(st.record_stopped, "{st:?}");
        assert_eq!(st.record_errno, RECORD_FELL_BEHIND);
        // Nothing more is taken, though the disk comes back.
        gate.send(()).unwrap();
        tap.write(|w| w.write_udp(t + sent, src, dst, b"abc"));
        assert!(tap.finish(&mut st).is_none());
        assert!(!timed_out.load(Ordering::Relaxed), "the tap waited");
        let bytes = bytes.lock().unwrap();
        let taken = (bytes.len() as u64 - 24) / record;
        assert_eq!(bytes.len() as u64, 24 + taken * record, "whole records");
        assert_eq!(taken + st.unrecorded, sent + 1, "{st:?}");
        // At least the pool's three chunks of 80 (4,096 bytes, 51 each).
        assert!(taken >= 3 * 80, "{taken}");
        // In order, the first ones: each record's seconds, then its ns.
        for (i, r) in bytes[24..].chunks(record as usize).enumerate() {
            let ns = u32::from_le_bytes(r[4..8].try_into().unwrap());
            assert_eq!(u64::from(ns), (t + i as u64) % 1_000_000_000, "record {i}");
        }
        assert_eq!(st.record_errno, RECORD_FELL_BEHIND, "still told at the end");
    }

    /// The chunk being filled is handed over once a cycle has seen it
    /// hold a record for [`HANDOFF_NS`], or the clock stepped back: a
    /// quiet feed's records reach the file, not wait for a full chunk.
    #[test]
    fn a_chunk_is_handed_over_within_its_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.pcap");
        let mut tap = Tap::start(std::fs::File::create(&path).unwrap(), None).unwrap();
        let (src, dst) = ends();
        let t = 1_700_000_000_000_000_000;
        let held = |tap: &Tap| tap.writer.as_ref().unwrap().get_ref().records;
        tap.tick(t);
        tap.write(|w| w.write_udp(t, src, dst, b"one"));
        tap.tick(t + 1);
        tap.tick(t + HANDOFF_NS);
        assert_eq!(held(&tap), 1, "seen first at t + 1");
        tap.tick(t + 1 + HANDOFF_NS);
        assert_eq!(held(&tap), 0, "handed over");
        // Once the recording's thread took it (none is handed over while
        // the last waits).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !tap.writer.as_ref().unwrap().get_ref().full.is_empty() {
            assert!(std::time::Instant::now() < deadline, "never taken");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        tap.write(|w| w.write_udp(t, src, dst, b"two"));
        tap.tick(t + 2 * HANDOFF_NS);
        tap.tick(t);
        assert_eq!(held(&tap), 0, "the clock stepped back");
        let mut st = RunStats::default();
        assert!(tap.finish(&mut st).is_none());
        assert_eq!((st.unrecorded, st.record_stopped), (0, false));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 24 + 2 * 47);
    }

    /// A recording whose thread stopped (a failed write) stops the tap at
    /// its next cycle: the records its chunk held are counted out with
    /// those the thread could not write, and the error told is the
    /// thread's.
    #[test]
    fn a_recording_stopped_on_its_thread_stops_the_tap() {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let mut tap = Tap::start_with(full, None, 4, 4096).unwrap();
        let (src, dst) = ends();
        let t = 1_700_000_000_000_000_000;
        let mut st = RunStats::default();
        // The thread's first write-out (the header, at once) fails.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !st.record_stopped {
            assert!(std::time::Instant::now() < deadline, "never stopped");
            tap.count(&mut st);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        tap.write(|w| w.write_udp(t, src, dst, b"one"));
        tap.tick(t);
        assert!(tap.stopped, "stopped here too");
        tap.write(|w| w.write_udp(t, src, dst, b"two"));
        assert!(tap.finish(&mut st).is_none());
        assert_eq!((st.unrecorded, st.record_errno), (2, libc::ENOSPC));
    }

    /// A disk that stalls while the feed is sparse: the chunks handed over
    /// on time (a record or two each) do not spend the pool, since only
    /// one waits for the recording's thread at a time; the rest are handed
    /// over full, so the pool holds its bytes of records.
    #[test]
    fn a_sparse_feed_spends_the_pool_by_its_bytes_while_the_disk_stalls() {
        let (gate, open) = crossbeam_channel::bounded(1);
        let entered = Arc::<std::sync::atomic::AtomicBool>::default();
        let bytes = Arc::<std::sync::Mutex<Vec<u8>>>::default();
        let disk = Gate {
            open,
            waited: false,
            entered: Arc::clone(&entered),
            timed_out: Arc::default(),
            bytes: Arc::clone(&bytes),
        };
        let mut tap = Tap::start_with(disk, None, 3, 4096).unwrap();
        // The thread waits on the disk from its first write-out (the
        // header), before any chunk.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !entered.load(Ordering::Relaxed) {
            assert!(std::time::Instant::now() < deadline, "never wrote");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let (src, dst) = ends();
        let t = 1_700_000_000_000_000_000;
        let mut st = RunStats::default();
        // A record every hand-over time, ten times.
        for i in 0..10 {
            tap.write(|w| w.write_udp(t + i, src, dst, b"abc"));
            tap.tick(t + i * HANDOFF_NS);
            tap.tick(t + (i + 1) * HANDOFF_NS);
        }
        tap.count(&mut st);
        assert!(!st.record_stopped, "{st:?}");
        // Then as fast as they come: the first chunk went with one record,
        // the next two fill (80 records of 51 bytes each) before none is
        // free.
        let mut taken = 10;
        while !st.record_stopped {
            tap.write(|w| w.write_udp(t + taken, src, dst, b"abc"));
            tap.count(&mut st);
            taken += 1;
        }
        assert_eq!(taken - 1, 1 + 80 + 80);
        gate.send(()).unwrap();
        assert!(tap.finish(&mut st).is_none());
        assert_eq!(bytes.lock().unwrap().len(), 24 + 161 * 47);
        assert_eq!(st.unrecorded, 1);
    }

    /// A recording stopped (here by its bound) keeps its file's lock until
    /// it ends: a second instance named the same file is refused
    /// meanwhile, not let empty it.
    #[test]
    fn a_stopped_recording_keeps_its_file_locked_until_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.pcap");
        let file = crate::sys::create_output(&path).unwrap();
        let mut tap = Tap::start(file, Some(24 + 10)).unwrap();
        let (src, dst) = ends();
        let t = 1_700_000_000_000_000_000;
        tap.write(|w| w.write_udp(t, src, dst, b"abc"));
        let mut st = RunStats::default();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut now = t;
        while !tap.stopped {
            assert!(std::time::Instant::now() < deadline, "never stopped");
            now += HANDOFF_NS;
            tap.tick(now);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let e = crate::sys::create_output(&path).unwrap_err();
        assert!(
            e.to_string().contains("being written by another process"),
            "{e}"
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 24);
        assert!(tap.finish(&mut st).is_none());
        assert_eq!((st.unrecorded, st.record_errno), (1, RECORD_BOUND_REACHED));
        crate::sys::create_output(&path).expect("ended: free");
    }

    /// A disk whose every write panics (a defect below the recording),
    /// once `gate` (if any) opens.
    struct Panicking(Option<crossbeam_channel::Receiver<()>>);

    impl Write for Panicking {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            if let Some(gate) = &self.0 {
                let _ = gate.recv_timeout(std::time::Duration::from_secs(60));
            }
            panic!("a write that panics, for a test");
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl RecordingEnd for Panicking {
        fn end(&mut self, _: Option<u64>) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The recording's thread ended by a panic: the records it never took
    /// (handed over, or no longer able to be) are counted out with the
    /// rest, and the recording ends incomplete, naming the panic.
    #[test]
    fn records_lost_with_a_panic_of_the_recordings_thread_are_counted() {
        let mut tap = Tap::start_with(Panicking(None), None, 3, 4096).unwrap();
        // It panics at its first write-out (the header), at once.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !tap.thread.as_ref().unwrap().is_finished() {
            assert!(std::time::Instant::now() < deadline, "never panicked");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let (src, dst) = ends();
        let t = 1_700_000_000_000_000_000;
        let sent = 500;
        for i in 0..sent {
            tap.write(|w| w.write_udp(t + i, src, dst, b"abc"));
        }
        let mut st = RunStats::default();
        let e = tap.finish(&mut st).expect("incomplete");
        assert!(e.to_string().contains("panicked"), "{e}");
        assert_eq!(st.unrecorded, sent, "{st:?}");
        // Chunks handed over while it waited on its disk, then a panic:
        // counted too.
        let (gate, open) = crossbeam_channel::bounded(1);
        let mut tap = Tap::start_with(Panicking(Some(open)), None, 3, 4096).unwrap();
        for i in 0..150 {
            tap.write(|w| w.write_udp(t + i, src, dst, b"abc"));
        }
        assert!(tap.writer.as_ref().unwrap().get_ref().handed > 0);
        gate.send(()).unwrap();
        let mut st = RunStats::default();
        assert!(tap.finish(&mut st).is_some());
        assert_eq!(st.unrecorded, 150, "{st:?}");
    }
}
