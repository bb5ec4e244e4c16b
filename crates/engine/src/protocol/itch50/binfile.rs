//! Nasdaq's historical BinaryFILE format (spec §5): ITCH messages, each
//! preceded by a u16 big-endian length, plain or gzip (recognised by the
//! magic bytes `1f 8b`; one member or several, zero padding after the last).
//!
//! [`BinFile`] streams the file and hands out each record as a slice of
//! the bytes read (`crate::readahead::Stream`): a multi-GB file is never
//! held in memory, no record allocates, and only a record that straddles
//! two chunks of the read is copied. Validating a record is the caller's
//! business (a zero-length record is a record, not a reader error). Byte
//! offsets in errors count the uncompressed stream, so they mean the same
//! in a plain file and its `.gz`.
//!
//! [`BinFile::detect`] (and so [`BinFile::open`]) also reads the file, and
//! decompresses a gzip one, a few megabytes ahead on another thread where
//! the machine has a second CPU (`crate::readahead`): a gzip day replays
//! 1.7× as fast when its inflating runs beside the books (BENCHMARKS.md).

use crate::readahead::{Boxed, Stream};
use flate2::bufread::GzDecoder;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::ops::ControlFlow::{self, Break, Continue};
use std::path::Path;

/// The two bytes that start a gzip member.
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// Read buffer of a gzip file's compressed bytes.
const BUFFER: usize = 256 * 1024;

/// Why a BinaryFILE could not be read to its end.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be opened or read, or its gzip stream is corrupt.
    #[error("read error at byte {offset} of the uncompressed stream: {io}")]
    Io { offset: u64, io: io::Error },
    /// The file is a packet capture (`gzip`: compressed), named with
    /// `--feed` by mistake.
    #[error(
        "a {}packet capture (pcap or pcapng), not a BinaryFILE: {}replay it without --feed and \
         --date",
        if *gzip { "gzip-compressed " } else { "" },
        if *gzip { "decompress it, then " } else { "" }
    )]
    Capture { gzip: bool },
    /// The file ends one byte into a record's 2-byte length.
    #[error("truncated record at byte {offset} of the uncompressed stream: 1 of 2 length bytes")]
    TruncatedLength { offset: u64 },
    /// Bytes follow the gzip stream's last member that are neither another
    /// member nor zero padding to the end (a member after padding is such
    /// bytes too): every record before them was read.
    #[error(
        "the gzip stream ends at byte {at} of the file and the bytes after it are not gzip \
         (reading the record at byte {offset} of the uncompressed stream)"
    )]
    NotGzip { offset: u64, at: u64 },
    /// The file ends inside the header of a gzip member after the first
    /// (a copy cut short): every record before it was read.
    #[error(
        "the file ends inside the header of the gzip member starting at byte {at} of the file \
         (a truncated file; reading the record at byte {offset} of the uncompressed stream)"
    )]
    CutGzip { offset: u64, at: u64 },
    /// Fewer than half of the file's first [`NOT_ITCH_AFTER`] records are
    /// valid ITCH 5.0 messages of a known type: it is some other file
    /// (`/dev/zero` reads as zero-length records without end); nothing
    /// more is read.
    #[error(
        "only {known} of the first {records} records are ITCH 5.0 messages of a known type: \
         not a BinaryFILE (read to byte {offset} of the uncompressed stream)"
    )]
    NotItch {
        records: u64,
        known: u64,
        offset: u64,
    },
    /// The file ends inside a record's body.
    #[error(
        "truncated record at byte {offset} of the uncompressed stream: \
         {available} of {len} bytes after the length"
    )]
    TruncatedBody {
        offset: u64,
        len: u16,
        available: u16,
    },
}

/// Records read after which a replay gives up on a file as not a
/// BinaryFILE when fewer than half were ITCH messages ([`Error::NotItch`]).
pub const NOT_ITCH_AFTER: u64 = 4096;

/// A streaming BinaryFILE reader over any byte source.
pub struct BinFile<R: Read> {
    input: Stream<R>,
    /// Index of the next record (0-based).
    index: u64,
    /// Set after an error or the end: nothing more is read.
    done: bool,
}

/// The reader [`BinFile::open`] returns: plain or gzip behind one type.
pub type FileReader = BinFile<Boxed>;

impl FileReader {
    /// Opens `path`, plain or gzip (told by its first two bytes).
    pub fn open(path: &Path) -> Result<FileReader, Error> {
        let file = crate::sys::open_input(path).map_err(|io| Error::Io { offset: 0, io })?;
        BinFile::detect(file)
    }
}

impl BinFile<Boxed> {
    /// Reads the first bytes of `source` to tell gzip from plain (and a
    /// packet capture, plain or gzip'd, refused), then streams the rest (decompressing when
    /// it is gzip).
    pub fn detect<S: Read + Send + 'static>(mut source: S) -> Result<FileReader, Error> {
        let mut magic = [0u8; 4];
        let got = read_full(&mut source, &mut magic).map_err(|io| Error::Io { offset: 0, io })?;
        if got == magic.len() && crate::capture::is_capture_magic(magic) {
            return Err(Error::Capture { gzip: false });
        }
        let raw = Cursor::new(magic[..got].to_vec()).chain(source);
        let input: Boxed = if magic[..got].starts_with(&GZIP_MAGIC) {
            // A gzip'd capture too (`.pcap.gz`): its first bytes, inflated.
            // A stream that fails this early fails where it is read, as
            // any later failure does.
            let mut members = Members::new(raw);
            let mut inner = [0u8; 4];
            let mut got = 0;
            let mut failed = None;
            while got < inner.len() {
                match members.read(&mut inner[got..]) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            if got == inner.len() && crate::capture::is_capture_magic(inner) {
                return Err(Error::Capture { gzip: true });
            }
            let head = Cursor::new(inner[..got].to_vec());
            match failed {
                Some(e) => Box::new(head.chain(Failed(Some(e)))),
                None => Box::new(head.chain(members)),
            }
        } else {
            Box::new(raw)
        };
        // Read (and decompress) a few chunks ahead on another core where
        // there is one.
        Ok(BinFile::over(
            Stream::ahead(input, "binfile-read").unwrap_or_else(Stream::direct),
        ))
    }
}

/// How far ahead, in records, [`BinFile::for_each_record_ahead`] shows a
/// record first: far enough that a prefetch issued then has arrived when
/// the record is applied, near enough that it is still in cache.
pub const LEAD: usize = 16;

/// What [`BinFile::for_each_record_ahead`] shows each record to: once
/// [`LEAD`] records ahead of its turn, once half as far, then at its turn.
/// Three methods rather than one closure told which step it is, so that
/// each is inlined where it is called: one closure for all three stays a
/// call, with its prologue, three times a record.
pub trait Lookahead {
    /// A record [`LEAD`] records ahead of its turn.
    fn far(&mut self, record: &[u8]);
    /// A record [`LEAD`]` / 2` records ahead of its turn.
    fn near(&mut self, record: &[u8]);
    /// True when [`near`](Self::near) is wanted at all (checked once a
    /// buffer's run of records; false saves walking the records twice).
    fn wants_near(&self) -> bool {
        true
    }
    /// A record's turn: its index (0-based) and bytes. True when it was
    /// taken; false stops the walk before it (it stays the next record).
    fn record(&mut self, index: u64, record: &[u8]) -> bool;
}

/// The first whole record of `bytes` (length-prefixed) and what follows it.
#[inline]
fn split_record(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, tail) = bytes.split_first_chunk::<2>()?;
    tail.split_at_checked(usize::from(u16::from_be_bytes(*len)))
}

/// The rest of `bytes` after its first whole record, which goes to `f`
/// (`bytes` itself when there is none).
#[inline(always)]
fn ahead<'a>(bytes: &'a [u8], f: impl FnOnce(&'a [u8])) -> &'a [u8] {
    match split_record(bytes) {
        Some((record, tail)) => {
            f(record);
            tail
        }
        None => bytes,
    }
}

impl<R: Read> BinFile<R> {
    /// A reader of an uncompressed BinaryFILE stream, read in place.
    pub fn new(input: R) -> BinFile<R> {
        BinFile::over(Stream::direct(input))
    }

    fn over(input: Stream<R>) -> BinFile<R> {
        BinFile {
            input,
            index: 0,
            done: false,
        }
    }

    /// The next record: its index (0-based) and bytes, `None` at a clean
    /// end of file. After an error (or the end) it returns `None`.
    #[inline]
    pub fn next_record(&mut self) -> Result<Option<(u64, &[u8])>, Error> {
        // A record whole in the bytes at hand needs no more.
        let need = match split_record(self.input.data()) {
            Some((record, _)) if !self.done => 2 + record.len(),
            _ => match self.ready()? {
                Some(need) => need,
                None => return Ok(None),
            },
        };
        let index = self.index;
        self.index += 1;
        Ok(Some((index, &self.input.take(need)[2..])))
    }

    /// Hands `f` every record left (index, bytes), as
    /// [`next_record`](Self::next_record) would one by one, up to the end
    /// of the file or the first error: the records already in the buffer
    /// are walked with no refill check.
    pub fn for_each_record(&mut self, mut f: impl FnMut(u64, &[u8])) -> Result<(), Error> {
        /// Only the records' turns.
        struct Turns<F>(F);
        impl<F: FnMut(u64, &[u8])> Lookahead for Turns<F> {
            #[inline]
            fn far(&mut self, _: &[u8]) {}
            #[inline]
            fn near(&mut self, _: &[u8]) {}
            #[inline(always)]
            fn record(&mut self, index: u64, record: &[u8]) -> bool {
                (self.0)(index, record);
                true
            }
        }
        self.for_each_record_ahead(Turns(&mut f)).map(|_| ())
    }

    /// [`for_each_record`](Self::for_each_record), also showing `l` each
    /// record before its turn: [`Lookahead::far`] [`LEAD`] records ahead,
    /// then [`Lookahead::near`] half as far ahead, so that it can prefetch
    /// what the record will touch (a record near the start of the buffered
    /// bytes is shown less far ahead; every record comes to each method
    /// once, in order). True at the end of the file; false when `l` did not
    /// take a record ([`Lookahead::record`]): the walk stopped before it,
    /// and it is the next record read (a later walk shows it ahead again).
    pub fn for_each_record_ahead(&mut self, mut l: impl Lookahead) -> Result<bool, Error> {
        while self.ready()?.is_some() {
            let mut rest = self.input.data();
            let held = rest.len();
            let (mut far, mut near) = (rest, rest);
            for _ in 0..LEAD {
                far = ahead(far, |r| l.far(r));
            }
            let two = l.wants_near();
            if two {
                for _ in 0..LEAD / 2 {
                    near = ahead(near, |r| l.near(r));
                }
            }
            let mut index = self.index;
            let mut stopped = false;
            while let Some((record, tail)) = split_record(rest) {
                if !l.record(index, record) {
                    stopped = true;
                    break;
                }
                index += 1;
                rest = tail;
                far = ahead(far, |r| l.far(r));
                if two {
                    near = ahead(near, |r| l.near(r));
                }
            }
            let walked = held - rest.len();
            self.input.consume(walked);
            self.index = index;
            if stopped {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Makes the next record whole in the input: its length with the
    /// 2-byte prefix, `None` at a clean end of file (or after an error or
    /// the end).
    #[inline]
    fn ready(&mut self) -> Result<Option<usize>, Error> {
        if self.done {
            return Ok(None);
        }
        let start = self.input.offset();
        let len = match self.fill(2, start)? {
            [a, b, ..] => u16::from_be_bytes([*a, *b]),
            [] => {
                self.done = true;
                return Ok(None);
            }
            [_] => {
                self.done = true;
                return Err(Error::TruncatedLength { offset: start });
            }
        };
        let need = 2 + usize::from(len);
        let available = self.fill(need, start)?.len();
        if available < need {
            self.done = true;
            return Err(Error::TruncatedBody {
                offset: start,
                len,
                available: (available - 2) as u16,
            });
        }
        Ok(Some(need))
    }

    /// The bytes available once `want` are, or all there are where the
    /// input ends first. Errors name the offset of the record being read
    /// (`start`).
    #[inline]
    fn fill(&mut self, want: usize, start: u64) -> Result<&[u8], Error> {
        if let Err(io) = self.input.fill(want) {
            self.done = true;
            return Err(
                match io.get_ref().and_then(|e| e.downcast_ref::<NotGzip>()) {
                    Some(&NotGzip { at, cut: false }) => Error::NotGzip { offset: start, at },
                    Some(&NotGzip { at, cut: true }) => Error::CutGzip { offset: start, at },
                    None => Error::Io { offset: start, io },
                },
            );
        }
        Ok(self.input.data())
    }

    /// Bytes of the uncompressed stream read so far.
    pub fn offset(&self) -> u64 {
        self.input.offset()
    }
}

/// A gzip file's members one after another (RFC 1952 §2.2: a gzip file
/// is a series of members), decompressed as one stream. After a member,
/// the input ends, or another member starts, or zero padding runs to the
/// end (read as the end, as `gzip -d` does); anything else, a member after
/// zero padding included, is a [`NotGzip`] error naming the byte where the
/// last member ended (a member's header cut short by the end of the file,
/// a truncated file, is told apart).
enum Members<R: Read> {
    /// Inflating a member (boxed: the other states are a few words).
    Member(Box<GzDecoder<Input<R>>>),
    /// After the member that ended at file offset `at`; `padding` the
    /// zeros skipped since.
    Between {
        input: Box<Input<R>>,
        at: u64,
        padding: u64,
    },
    /// The input has ended.
    End,
    /// Bytes that are not gzip follow the member that ended at this offset,
    /// or (`true`) a member's header starts there and the file ends in it.
    NotGzip(u64, bool),
    /// An error other than [`Interrupted`](io::ErrorKind::Interrupted)
    /// was returned: reading on is an error too, never a clean end.
    Failed,
}

/// The compressed bytes, counted.
type Input<R> = BufReader<Counted<R>>;

/// What [`Members::step`] leads to.
type Step<R> = ControlFlow<(Members<R>, io::Result<usize>), Members<R>>;

/// Bytes after a gzip file's last member that are not gzip, or (`cut`) a
/// next member's header the file ends in; `at` is the file offset where
/// the last whole member ended.
#[derive(Debug, thiserror::Error)]
#[error("bytes after the gzip member ending at byte {at} of the file are not gzip")]
struct NotGzip {
    at: u64,
    cut: bool,
}

/// The most zero padding read after a gzip file's last member, bytes
/// (1 MiB, where padding to a block or tape record is at most tens of KiB):
/// more zeros are bytes that are not gzip ([`NotGzip`]).
const MAX_PADDING: u64 = 1 << 20;

/// The first bytes of every gzip member's header: the magic and the
/// method (8, deflate, the only one defined).
const HEADER_START: [u8; 3] = [GZIP_MAGIC[0], GZIP_MAGIC[1], 8];

/// A reader that counts the bytes it has handed out, and keeps the first
/// [`HEADER_START`]`.len()` of them at or after a marked file offset (where
/// the last member ended) as they pass.
struct Counted<R> {
    inner: R,
    read: u64,
    /// The marked file offset.
    mark: u64,
    /// The bytes from `mark` (the first `head_len` of them).
    head: [u8; HEADER_START.len()],
    head_len: usize,
}

impl<R> Counted<R> {
    /// Marks file offset `at`, `buffered` the bytes from it already read.
    fn mark(&mut self, at: u64, buffered: &[u8]) {
        self.mark = at;
        self.head_len = 0;
        self.note(at, buffered);
    }

    /// Keeps what of `bytes`, read from file offset `from`, lies in the
    /// marked head.
    fn note(&mut self, from: u64, bytes: &[u8]) {
        let start = from.max(self.mark);
        let end = (from + bytes.len() as u64).min(self.mark.saturating_add(self.head.len() as u64));
        for off in start..end {
            let k = (off - self.mark) as usize;
            self.head[k] = bytes[(off - from) as usize];
            self.head_len = self.head_len.max(k + 1);
        }
    }

    /// Whether the bytes from the mark start a gzip member's header as far
    /// as they go.
    fn starts_header(&self) -> bool {
        HEADER_START.starts_with(&self.head[..self.head_len])
    }
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.note(self.read, &buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

impl<R: Read> Members<R> {
    fn new(raw: R) -> Members<R> {
        let input = BufReader::with_capacity(
            BUFFER,
            Counted {
                inner: raw,
                read: 0,
                mark: u64::MAX,
                head: [0; HEADER_START.len()],
                head_len: 0,
            },
        );
        Members::Member(Box::new(GzDecoder::new(input)))
    }

    /// One step of reading into `buf` from `self` (taken): `Continue` with
    /// the next state, or `Break` with the state to keep and what `read`
    /// returns now.
    fn step(self, buf: &mut [u8]) -> Step<R> {
        match self {
            Members::Member(mut member) => match member.read(buf) {
                Ok(0) if !buf.is_empty() => {
                    let mut input = member.into_inner();
                    let at = input.get_ref().read - input.buffer().len() as u64;
                    let mut buffered = [0; HEADER_START.len()];
                    let k = input.buffer().len().min(buffered.len());
                    buffered[..k].copy_from_slice(&input.buffer()[..k]);
                    input.get_mut().mark(at, &buffered[..k]);
                    Continue(Members::Between {
                        input: Box::new(input),
                        at,
                        padding: 0,
                    })
                }
                Err(e) if e.kind() != io::ErrorKind::Interrupted => {
                    Break((Members::Failed, Err(e)))
                }
                read => Break((Members::Member(member), read)),
            },
            Members::Between {
                mut input,
                at,
                padding,
            } => {
                let (first, zeros) = match input.fill_buf() {
                    Ok(rest) => (rest.first().copied(), rest.iter().all(|&b| b == 0)),
                    Err(e) => return Break((Members::Between { input, at, padding }, Err(e))),
                };
                Continue(match first {
                    None => Members::End,
                    Some(b) if b == GZIP_MAGIC[0] && padding == 0 => {
                        let mut member = Box::new(GzDecoder::new(*input));
                        if member.header().is_none() {
                            // The header's error, which reading returns.
                            match member.read(&mut []) {
                                // Not a header: not a member.
                                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                                    return Continue(Members::NotGzip(at, false));
                                }
                                // The file ends before the header is read
                                // whole: cut short if what there is of it
                                // starts a header.
                                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                                    let cut = member.get_ref().get_ref().starts_header();
                                    return Continue(Members::NotGzip(at, cut));
                                }
                                Err(e) => return Break((Members::Failed, Err(e))),
                                Ok(_) => {}
                            }
                        }
                        Members::Member(member)
                    }
                    // Zeros past `MAX_PADDING` are not padding: an input
                    // of zeros without end (a gzip file followed by
                    // `/dev/zero`) would otherwise be read for good, in
                    // one `read`, nothing shown.
                    Some(_) if !zeros || padding >= MAX_PADDING => Members::NotGzip(at, false),
                    Some(_) => {
                        let n = input.buffer().len();
                        input.consume(n);
                        Members::Between {
                            input,
                            at,
                            padding: padding + n as u64,
                        }
                    }
                })
            }
            Members::End => Break((Members::End, Ok(0))),
            Members::NotGzip(at, cut) => Break((
                Members::NotGzip(at, cut),
                Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    NotGzip { at, cut },
                )),
            )),
            Members::Failed => Break((
                Members::Failed,
                Err(io::Error::other("the gzip stream failed before")),
            )),
        }
    }
}

impl<R: Read> Read for Members<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match std::mem::replace(self, Members::Failed).step(buf) {
                Continue(next) => *self = next,
                Break((keep, read)) => {
                    *self = keep;
                    return read;
                }
            }
        }
    }
}

/// Reads until `buf` is full or the input ends; the bytes read.
/// A source whose next read fails with the error it holds, then ends.
struct Failed(Option<io::Error>);

impl Read for Failed {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        self.0.take().map_or(Ok(0), Err)
    }
}

fn read_full<R: Read>(input: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Writes one record (length, then bytes): for generators and tests.
pub fn write_record<W: io::Write>(out: &mut W, record: &[u8]) -> io::Result<()> {
    let len = u16::try_from(record.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "record over 65,535 bytes"))?;
    out.write_all(&len.to_be_bytes())?;
    out.write_all(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::itch50::message::{check, encode};
    use crate::readahead::tests::Trickle;
    use flate2::write::GzEncoder;
    use flate2::Compression;
    use std::io::Write;

    fn file_of(records: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in records {
            write_record(&mut out, r).unwrap();
        }
        out
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut z = GzEncoder::new(Vec::new(), Compression::default());
        z.write_all(bytes).unwrap();
        z.finish().unwrap()
    }

    /// Every record (index, bytes) and the final error, if any.
    fn read_all(bytes: Vec<u8>) -> (Vec<(u64, Vec<u8>)>, Option<Error>) {
        read_all_from(Cursor::new(bytes))
    }

    /// Every record of `bytes` read as a plain (not gzip) file, record by
    /// record, and the error that ended the read, if any.
    fn read_plain(bytes: Vec<u8>) -> (Records, Option<Error>) {
        let mut r = BinFile::new(Cursor::new(bytes));
        let mut out = Vec::new();
        loop {
            match r.next_record() {
                Ok(Some((i, rec))) => out.push((i, rec.to_vec())),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    /// [`read_all`] of what `source` reads.
    fn read_all_from<S: Read + Send + 'static>(source: S) -> (Records, Option<Error>) {
        let mut r = BinFile::detect(source).unwrap();
        let mut out = Vec::new();
        loop {
            match r.next_record() {
                Ok(Some((i, rec))) => out.push((i, rec.to_vec())),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    fn sample() -> Vec<Vec<u8>> {
        vec![
            encode::system_event(1_000, b'O'),
            encode::delete(7, 2_000, 42),
            vec![b'Z'; 300],
        ]
    }

    #[test]
    fn plain_and_gzip_yield_the_same_records() {
        let recs = sample();
        let refs: Vec<&[u8]> = recs.iter().map(|r| r.as_slice()).collect();
        let plain = file_of(&refs);
        let expected: Vec<(u64, Vec<u8>)> = recs
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, r)| (i as u64, r))
            .collect();
        let (got, err) = read_all(plain.clone());
        assert!(err.is_none());
        assert_eq!(got, expected);
        let (got, err) = read_all(gzip(&plain));
        assert!(err.is_none());
        assert_eq!(got, expected);
    }

    #[test]
    fn records_straddling_the_read_ahead_come_out_whole() {
        // Lengths 0 to the largest, over several buffers' worth.
        let recs: Vec<Vec<u8>> = (0..40usize)
            .map(|i| {
                let len = if i % 7 == 3 { 65_535 } else { i * 997 % 40_000 };
                (0..len).map(|k| (k + i) as u8).collect()
            })
            .collect();
        let refs: Vec<&[u8]> = recs.iter().map(|r| r.as_slice()).collect();
        let bytes = file_of(&refs);
        assert!(bytes.len() > 3 * BUFFER);
        for step in [usize::MAX, 4_099, 1] {
            let mut r = BinFile::new(Trickle {
                bytes: Cursor::new(bytes.clone()),
                step,
                n: 0,
            });
            for (i, want) in recs.iter().enumerate() {
                let (index, got) = r.next_record().unwrap().unwrap();
                assert_eq!((index, got), (i as u64, want.as_slice()), "step {step}");
            }
            assert!(r.next_record().unwrap().is_none());
            assert_eq!(r.offset(), bytes.len() as u64);
        }
    }

    #[test]
    fn read_ahead_on_another_thread_hands_out_every_record_and_the_truncation() {
        // Several of the read-ahead's chunks, plain and gzip, cut inside
        // the last record: `detect` (which reads ahead on another core
        // where there is one) agrees with reading in place, record for
        // record, and names the same offset.
        let recs: Vec<Vec<u8>> = (0..200usize)
            .map(|i| {
                (0..(i * 7_919 % 30_000))
                    .map(|k| (k * 3 + i) as u8)
                    .collect()
            })
            .collect();
        let refs: Vec<&[u8]> = recs.iter().map(|r| r.as_slice()).collect();
        let mut plain = file_of(&refs);
        assert!(plain.len() > 2_500_000);
        plain.truncate(plain.len() - 5);
        let in_place = {
            let mut r = BinFile::new(Cursor::new(plain.clone()));
            let mut out = Vec::new();
            let err = loop {
                match r.next_record() {
                    Ok(Some((i, rec))) => out.push((i, rec.to_vec())),
                    Ok(None) => break None,
                    Err(e) => break Some(e.to_string()),
                }
            };
            (out, err)
        };
        assert_eq!(in_place.0.len(), recs.len() - 1);
        assert!(in_place.1.as_deref().unwrap().contains("truncated record"));
        for bytes in [plain.clone(), gzip(&plain)] {
            let (got, err) = read_all(bytes);
            assert!(got == in_place.0, "same records");
            assert_eq!(err.map(|e| e.to_string()), in_place.1);
        }
    }

    #[test]
    fn concatenated_gzip_members_read_as_one_stream() {
        let recs = sample();
        let mut two = gzip(&file_of(&[&recs[0]]));
        two.extend(gzip(&file_of(&[&recs[1]])));
        let (got, err) = read_all(two);
        assert!(err.is_none());
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].1, recs[1]);
    }

    /// [`read_all`] of `bytes` handed out in reads of 1 to `step` bytes.
    fn read_trickled(bytes: Vec<u8>, step: usize) -> (Records, Option<Error>) {
        read_all_from(Trickle {
            bytes: Cursor::new(bytes),
            step,
            n: 0,
        })
    }

    /// Zero padding after the last member is read up to `MAX_PADDING`;
    /// past it the zeros are bytes that are not gzip (an input of zeros
    /// without end, a gzip file followed by `/dev/zero`, would otherwise be
    /// read for good).
    #[test]
    fn zero_padding_past_its_bound_is_not_gzip() {
        let recs = sample();
        let refs: Vec<&[u8]> = recs.iter().map(|r| r.as_slice()).collect();
        let plain = file_of(&refs);
        let member = gzip(&plain);
        let padded = |zeros: u64| Cursor::new(member.clone()).chain(std::io::repeat(0).take(zeros));
        let (got, err) = read_all_from(padded(MAX_PADDING));
        assert!(err.is_none(), "{err:?}");
        assert_eq!(got.len(), recs.len());
        let (got, err) = read_all_from(padded(64 * MAX_PADDING));
        assert_eq!(got.len(), recs.len());
        let Some(Error::NotGzip { offset, at }) = err else {
            panic!("{err:?}");
        };
        assert_eq!((offset, at), (plain.len() as u64, member.len() as u64));
    }

    #[test]
    fn bytes_after_the_last_gzip_member_are_named_where_the_member_ends() {
        let recs = sample();
        let refs: Vec<&[u8]> = recs.iter().map(|r| r.as_slice()).collect();
        let plain = file_of(&refs);
        let member = gzip(&plain);
        let zeros = vec![0u8; 3000];
        let mut two = member.clone();
        two.extend(gzip(&plain));
        for step in [1, 7, 1 << 20] {
            // Zero padding after the last member is the end (as `gzip -d`).
            let (got, err) = read_trickled([&member[..], &zeros].concat(), step);
            assert!(err.is_none(), "step {step}: {err:?}");
            assert_eq!(got.len(), recs.len(), "step {step}");
            // Anything else names the member's end, after every record.
            for tail in [&b"junk"[..], &[0, 0, 0, 9], &[0x1f], &[0; 3000], &member] {
                let bytes = [&member[..], &zeros[..2], tail].concat();
                let (got, err) = read_trickled(bytes, step);
                assert_eq!(got.len(), recs.len(), "step {step}");
                if tail.iter().all(|&b| b == 0) {
                    assert!(err.is_none(), "step {step}: {err:?}");
                    continue;
                }
                // A member after padding is not read: a file with a hole in it.
                let Some(Error::NotGzip { offset, at }) = err else {
                    panic!("step {step}, tail {tail:?}: {err:?}");
                };
                assert_eq!(
                    (offset, at),
                    (plain.len() as u64, member.len() as u64),
                    "step {step}"
                );
            }
            // Right after a member: junk, a header (whole or cut) of a
            // method not deflate's, a bad magic.
            let want = (plain.len() as u64, member.len() as u64);
            let bad = [
                &b"junk"[..],
                &[0x1f, 0x8b, 9, 0, 0, 0, 0, 0, 0, 3],
                &[0x1f, 0x8b, 9],
                &[0x1f, 0],
            ];
            for tail in bad {
                let (got, err) = read_trickled([&member[..], tail].concat(), step);
                assert_eq!(got.len(), recs.len(), "step {step}");
                let Some(Error::NotGzip { offset, at }) = err else {
                    panic!("step {step}, tail {tail:?}: {err:?}");
                };
                assert_eq!((offset, at), want, "step {step}");
            }
            // A next member's header the file ends in: a truncated file.
            for cut in [1, 2, 3, 9] {
                let bytes = [&member[..], &member[..cut]].concat();
                let (got, err) = read_trickled(bytes, step);
                assert_eq!(got.len(), recs.len(), "step {step}");
                let Some(Error::CutGzip { offset, at }) = err else {
                    panic!("step {step}, cut {cut}: {err:?}");
                };
                assert_eq!((offset, at), want, "step {step}");
            }
            let (got, err) = read_trickled(two.clone(), step);
            assert!(err.is_none(), "step {step}: {err:?}");
            assert_eq!(got.len(), 2 * recs.len(), "step {step}");
        }
        let bytes = [&member[..], b"junk"].concat();
        let (_, err) = read_all(bytes);
        assert_eq!(
            err.unwrap().to_string(),
            format!(
                "the gzip stream ends at byte {} of the file and the bytes after it are not \
                 gzip (reading the record at byte {} of the uncompressed stream)",
                member.len(),
                plain.len()
            )
        );
        let (_, err) = read_all([&member[..], &member[..4]].concat());
        assert_eq!(
            err.unwrap().to_string(),
            format!(
                "the file ends inside the header of the gzip member starting at byte {} of the \
                 file (a truncated file; reading the record at byte {} of the uncompressed \
                 stream)",
                member.len(),
                plain.len()
            )
        );
    }

    /// A source that is interrupted before every other read.
    struct Interrupting<R> {
        inner: R,
        calls: u64,
    }

    impl<R: Read> Read for Interrupting<R> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.calls += 1;
            if self.calls % 2 == 1 {
                return Err(io::ErrorKind::Interrupted.into());
            }
            self.inner.read(buf)
        }
    }

    #[test]
    fn interrupted_reads_lose_nothing_at_member_boundaries() {
        let recs = sample();
        let refs: Vec<&[u8]> = recs.iter().map(|r| r.as_slice()).collect();
        let member = gzip(&file_of(&refs));
        let bytes = [&member[..], &member, &[0; 100], b"x"].concat();
        for step in [1, 3, 1 << 20] {
            let (got, err) = read_all_from(Interrupting {
                inner: Trickle {
                    bytes: Cursor::new(bytes.clone()),
                    step,
                    n: 0,
                },
                calls: 0,
            });
            assert_eq!(got.len(), 2 * recs.len(), "step {step}");
            let Some(Error::NotGzip { at, .. }) = err else {
                panic!("step {step}: {err:?}");
            };
            assert_eq!(at, 2 * member.len() as u64, "step {step}");
        }
    }

    #[test]
    fn a_capture_is_refused_by_its_magic() {
        for magic in [[0xd4, 0xc3, 0xb2, 0xa1], [0x0a, 0x0d, 0x0d, 0x0a]] {
            let mut bytes = magic.to_vec();
            bytes.extend_from_slice(&[0; 40]);
            assert!(matches!(
                BinFile::detect(Cursor::new(bytes)),
                Err(Error::Capture { gzip: false })
            ));
        }
        // The same bytes further in are records like any other.
        let mut r = BinFile::detect(Cursor::new(vec![0, 4, 0xd4, 0xc3, 0xb2, 0xa1])).unwrap();
        assert_eq!(
            r.next_record().unwrap().map(|(_, b)| b.to_vec()),
            Some(vec![0xd4, 0xc3, 0xb2, 0xa1])
        );
    }

    #[test]
    fn empty_file_has_no_records() {
        let (got, err) = read_all(Vec::new());
        assert!(got.is_empty() && err.is_none());
        let (got, err) = read_all(gzip(&[]));
        assert!(got.is_empty() && err.is_none());
    }

    #[test]
    fn truncated_length_names_its_offset_after_the_records_before_it() {
        let recs = sample();
        let mut bytes = file_of(&[&recs[0], &recs[1]]);
        let offset = bytes.len() as u64;
        bytes.push(0);
        for b in [bytes.clone(), gzip(&bytes)] {
            let (got, err) = read_all(b);
            assert_eq!(got.len(), 2);
            match err {
                Some(e @ Error::TruncatedLength { .. }) => {
                    assert!(e.to_string().contains(&format!("byte {offset} ")), "{e}")
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn truncated_body_names_its_offset() {
        let recs = sample();
        let mut bytes = file_of(&[&recs[0], &recs[2]]);
        bytes.truncate(bytes.len() - 1);
        let (got, err) = read_all(bytes);
        assert_eq!(got.len(), 1);
        match err {
            Some(Error::TruncatedBody {
                offset,
                len,
                available,
            }) => {
                assert_eq!((offset, len, available), (14, 300, 299))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn zero_length_record_is_a_record_that_fails_validation() {
        let recs = sample();
        let (got, err) = read_all(file_of(&[&[], &recs[1]]));
        assert!(err.is_none());
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], (0, Vec::new()));
        assert!(check(&got[0].1).is_err());
        assert_eq!(check(&got[1].1), Ok(()));
    }

    #[test]
    fn corrupt_gzip_is_an_error_not_a_panic() {
        let mut bytes = gzip(&file_of(&[&sample()[2]]));
        let n = bytes.len();
        bytes[n / 2] ^= 0xff;
        bytes.truncate(n - 4);
        let (_, err) = read_all(bytes);
        assert!(err.is_some());
    }

    /// A gzip file cut short (a download interrupted) inside its deflate
    /// stream or its trailer is an error, never a clean end: the records
    /// before the cut are delivered, then the read fails. (A cut that
    /// read as the end would exit 0, later checks answered as if the file
    /// were whole.)
    #[test]
    fn a_gzip_cut_short_is_an_error_not_an_end() {
        let recs: Vec<Vec<u8>> = (0..2_000u32)
            .map(|i| encode::delete(7, 1_000 + u64::from(i), u64::from(i)))
            .collect();
        let whole = gzip(&file_of(
            &recs.iter().map(Vec::as_slice).collect::<Vec<_>>(),
        ));
        let n = whole.len();
        let (all, none) = read_all(whole.clone());
        assert!(none.is_none() && all.len() == recs.len());
        // Mid-stream, inside the 8-byte trailer (CRC, size), its last byte.
        for cut in [n / 2, n - 8, n - 1] {
            let (got, err) = read_all(whole[..cut].to_vec());
            assert!(err.is_some(), "cut at {cut} of {n} read as the end");
            assert!(got.len() <= recs.len(), "cut at {cut}");
            for (k, (i, rec)) in got.iter().enumerate() {
                assert_eq!((*i, rec), (k as u64, &recs[k]), "cut at {cut}");
            }
        }
    }

    /// Records read: (index, bytes).
    type Records = Vec<(u64, Vec<u8>)>;

    /// Every record, the final error (as text) and the offset reached, read
    /// by `for_each_record` from `bytes` handed out by `step`s.
    fn walk_all(bytes: Vec<u8>, step: usize) -> (Records, Option<String>, u64) {
        let mut r = BinFile::new(Trickle {
            bytes: Cursor::new(bytes),
            step,
            n: 0,
        });
        let mut out = Vec::new();
        let result = r.for_each_record(|i, rec| out.push((i, rec.to_vec())));
        (out, result.err().map(|e| e.to_string()), r.offset())
    }

    #[test]
    fn walking_the_buffer_agrees_with_next_record() {
        // Lengths 0 to the largest, over several buffers' worth, then a
        // truncated body and a truncated length.
        let recs: Vec<Vec<u8>> = (0..40usize)
            .map(|i| {
                let len = if i % 7 == 3 { 65_535 } else { i * 997 % 40_000 };
                (0..len).map(|k| (k * 3 + i) as u8).collect()
            })
            .collect();
        let refs: Vec<&[u8]> = recs.iter().map(|r| r.as_slice()).collect();
        let whole = file_of(&refs);
        let mut short_body = whole.clone();
        short_body.truncate(whole.len() - 1);
        let mut short_length = whole.clone();
        short_length.push(7);
        for bytes in [whole, short_body, short_length] {
            let (want, err) = read_all(bytes.clone());
            let want_err = err.map(|e| e.to_string());
            for step in [usize::MAX, 4_099, 1] {
                let (got, got_err, offset) = walk_all(bytes.clone(), step);
                assert_eq!(got.len(), want.len(), "step {step}");
                assert!(got == want, "step {step}");
                assert_eq!(got_err, want_err, "step {step}");
                let consumed: usize = want.iter().map(|(_, r)| 2 + r.len()).sum();
                assert_eq!(offset, consumed as u64, "step {step}");
            }
        }
    }

    #[test]
    fn looking_ahead_shows_each_record_in_order_before_its_turn() {
        // Distinct records (each starts with its own index), over several
        // buffers, read in tiny reads (look-ahead stops at the bytes in
        // hand) and in whole ones.
        let recs: Vec<Vec<u8>> = (0..3_000u32)
            .map(|i| {
                let mut r = i.to_be_bytes().to_vec();
                r.resize(4 + (i as usize * 13) % 300, 0xaa);
                r
            })
            .collect();
        let refs: Vec<&[u8]> = recs.iter().map(|r| r.as_slice()).collect();
        /// Each record seen ahead with the turns taken by then, and the
        /// turns.
        #[derive(Default)]
        struct Seen {
            far: Vec<(usize, usize)>,
            near: Vec<(usize, usize)>,
            turns: Vec<usize>,
        }
        fn id(r: &[u8]) -> usize {
            u32::from_be_bytes(r[..4].try_into().unwrap()) as usize
        }
        impl Lookahead for &mut Seen {
            fn far(&mut self, r: &[u8]) {
                self.far.push((id(r), self.turns.len()));
            }
            fn near(&mut self, r: &[u8]) {
                self.near.push((id(r), self.turns.len()));
            }
            fn record(&mut self, i: u64, r: &[u8]) -> bool {
                assert_eq!(i as usize, id(r));
                self.turns.push(id(r));
                true
            }
        }
        let trickle = Trickle {
            bytes: Cursor::new(file_of(&refs)),
            step: 100_003,
            n: 0,
        };
        let inputs: [Box<dyn Read>; 2] = [Box::new(trickle), Box::new(Cursor::new(file_of(&refs)))];
        for (whole, input) in [false, true].into_iter().zip(inputs) {
            let mut seen = Seen::default();
            BinFile::new(input)
                .for_each_record_ahead(&mut seen)
                .unwrap();
            let Seen { far, near, turns } = seen;
            assert_eq!(turns, (0..recs.len()).collect::<Vec<_>>());
            for (shown, lead) in [(&far, LEAD - 1), (&near, LEAD / 2 - 1)] {
                // Each once, in order, never after its turn, never further
                // ahead than the lead (shown after the turn `lead` records
                // before its own).
                assert_eq!(shown.len(), recs.len());
                assert!(shown.windows(2).all(|w| w[0].0 < w[1].0));
                assert!(shown.iter().all(|&(r, at)| r >= at && r - at <= lead));
                if whole {
                    // Whole reads: all but the records at a buffer's start
                    // are shown exactly the lead ahead.
                    let exact = shown.iter().filter(|&&(r, at)| r - at == lead).count();
                    assert!(exact * 100 > recs.len() * 98, "{exact} {lead}");
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn walking_arbitrary_bytes_agrees_with_next_record(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..4096),
            step in 1usize..64,
        ) {
            // Both read the bytes as a plain file: `detect` would take bytes
            // that start with gzip's magic for a gzip stream.
            let (want, err) = read_plain(bytes.clone());
            let (got, got_err, _) = walk_all(bytes, step);
            proptest::prop_assert_eq!(got, want);
            proptest::prop_assert_eq!(got_err, err.map(|e| e.to_string()));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..2048), gz in proptest::bool::ANY) {
            let mut input = bytes;
            if gz {
                input.splice(0..0, GZIP_MAGIC);
            }
            let mut r = match BinFile::detect(Cursor::new(input.clone())) {
                Ok(r) => r,
                Err(e) => {
                    // Only a capture's magic (plain or inflated) is
                    // refused up front.
                    proptest::prop_assert!(matches!(e, Error::Capture { gzip: _ }), "{e}");
                    proptest::prop_assert!(
                        crate::capture::is_capture_magic(input[..4].try_into().unwrap())
                            || input.starts_with(&GZIP_MAGIC)
                    );
                    return Ok(());
                }
            };
            let mut n = 0;
            while let Ok(Some(_)) = r.next_record() {
                n += 1;
                proptest::prop_assert!(n <= 2048);
            }
            proptest::prop_assert!(matches!(r.next_record(), Ok(None)));
        }
    }
}
