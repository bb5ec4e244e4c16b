//! Replaying a Nasdaq BinaryFILE (plain or gzip) into an itch50 feed: the
//! venue's own file of a day's messages rather than a capture of them.

use super::{Check, CountingReader, FeedSummary, InputError, Observer, Outcome, Pending, Progress};
use crate::capture::CaptureStats;
use crate::config::{Config, Protocol};
use crate::handler::Handler;
use crate::protocol::itch50;
use crate::protocol::itch50::binfile::{Error as BinFileError, NOT_ITCH_AFTER};
use std::path::Path;

/// The ITCH engine of feed `id`, with the feed's counters.
fn itch_engine(
    handler: &mut Handler,
    id: u16,
) -> Option<(
    &mut itch50::engine::Engine,
    &mut crate::handler::FeedCounters,
)> {
    let (e, counters) = handler.engine_mut(id)?;
    Some((e.itch_engine_mut()?, counters))
}

/// Replays a Nasdaq BinaryFILE (plain or gzip) into the itch50 feed
/// `feed` for the session on `date` (spec itch50 §5): record `i` is
/// sequence `i + 1`, a valid record arrives at its own source time, the
/// offset is 0, and checks are answered between records as between
/// datagrams. A file that ends inside a record is replayed up to it, and
/// the outcome's `input_error` names the byte offset.
pub fn replay_file(
    config: &Config,
    feed: &str,
    date: jiff::civil::Date,
    path: &Path,
    checks: &[Check],
    progress: impl FnMut(Progress),
) -> Result<Outcome, String> {
    replay_file_with(config, feed, date, path, checks, progress, &mut ())
}

/// A BinaryFILE batch fed record by record, prefetching ahead, with
/// `progress` told the records applied every 65,536; it stops before the
/// first valid record later than `until` (the next check's time), if any.
struct Batch<'b, 'f, P> {
    batch: &'b mut crate::protocol::itch50::feed::FileBatch<'f>,
    until: Option<u64>,
    progress: P,
    sniff: &'b mut Sniff,
    /// Whether the file is still on trial (a copy kept here: once it has
    /// passed, a record costs one test of this flag).
    sniffing: bool,
}

/// Whether the file is ITCH at all: a file fewer than half of whose first
/// [`NOT_ITCH_AFTER`] records are valid messages of a known type is given
/// up (`/dev/zero` reads as empty records, `/dev/urandom` as records of
/// unknown types, both without end; a day's file is all known types).
#[derive(Default)]
struct Sniff {
    /// Records seen, up to the limit.
    seen: u64,
    /// Of those, valid messages of a known type.
    known: u64,
}

impl Sniff {
    /// Notes record `index` (0-based) of `bytes`, `valid` or not; false
    /// once the file is given up.
    #[inline(always)]
    fn note(&mut self, index: u64, bytes: &[u8], valid: bool) -> bool {
        use crate::protocol::itch50::message::layout::BY_TYPE;
        if !self.decided() {
            let t = bytes.first().map(|&t| BY_TYPE[usize::from(t)].0);
            self.seen = index + 1;
            self.known += u64::from(valid && t.is_some_and(|len| len != 0));
        }
        !self.failed()
    }

    /// Whether the trial is over (passed or given up).
    fn decided(&self) -> bool {
        self.seen >= NOT_ITCH_AFTER
    }

    /// Whether the trial is over and the file failed it.
    fn failed(&self) -> bool {
        self.decided() && self.known * 2 < self.seen
    }

    /// The error once the file is given up.
    fn given_up(&self, offset: u64) -> Option<BinFileError> {
        self.failed().then_some(BinFileError::NotItch {
            records: NOT_ITCH_AFTER,
            known: self.known,
            offset,
        })
    }
}

impl<P: FnMut(u64)> crate::protocol::itch50::binfile::Lookahead for Batch<'_, '_, P> {
    #[inline(always)]
    fn far(&mut self, record: &[u8]) {
        self.batch.prefetch(record, true)
    }

    #[inline(always)]
    fn near(&mut self, record: &[u8]) {
        self.batch.prefetch(record, false)
    }

    fn wants_near(&self) -> bool {
        self.batch.two_stage()
    }

    #[inline(always)]
    fn record(&mut self, index: u64, record: &[u8]) -> bool {
        let valid = match self.until {
            None => self.batch.record(index, record),
            Some(until) => match self.batch.record_until(index, record, until) {
                Some(valid) => valid,
                None => return false,
            },
        };
        if self.sniffing {
            if !self.sniff.note(index, record, valid) {
                return false;
            }
            self.sniffing = !self.sniff.decided();
        }
        if (index + 1).is_multiple_of(65_536) {
            (self.progress)(index + 1);
        }
        true
    }
}

/// [`replay_file`], telling `observer` about every record if it [wants
/// record times](Observer::wants_record_times), else about those at which
/// a check is answered. `progress` is called now and then with the bytes of
/// the file read so far (of a gzip file, compressed bytes).
pub fn replay_file_with(
    config: &Config,
    feed: &str,
    date: jiff::civil::Date,
    path: &Path,
    checks: &[Check],
    progress: impl FnMut(Progress),
    observer: &mut impl Observer,
) -> Result<Outcome, String> {
    replay_file_until(config, feed, date, path, checks, None, progress, observer)
}

/// [`replay_file_with`], then, with `until` (ns since the Unix epoch), the
/// feed's deadlines run up to that time before the summary is taken.
#[allow(clippy::too_many_arguments)]
pub fn replay_file_until(
    config: &Config,
    feed: &str,
    date: jiff::civil::Date,
    path: &Path,
    checks: &[Check],
    until: Option<u64>,
    mut progress: impl FnMut(Progress),
    observer: &mut impl Observer,
) -> Result<Outcome, String> {
    use crate::protocol::itch50::binfile::{BinFile, Error};
    let Some(id) = config.feed_id(feed) else {
        return Err(format!("--feed: no feed '{feed}' in the configuration"));
    };
    if config.feeds[id as usize].protocol != Protocol::Itch50 {
        return Err(format!("--feed: feed '{feed}' is not an itch50 feed"));
    }
    // The file's times are the exchange's own: no offset, whatever the
    // configuration says.
    let mut config = config.clone();
    config.feeds[id as usize].offset = crate::clock::OffsetMode::Fixed(0);
    let name = path.display().to_string();
    // Progress counts the file's own bytes (compressed ones for gzip).
    let read = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut file = crate::sys::open_input(path)
        .map_err(|io| Error::Io { offset: 0, io })
        .and_then(|f| {
            BinFile::detect(CountingReader {
                inner: f,
                read: read.clone(),
            })
        })
        .map_err(|e| format!("BinaryFILE {name}: {e}"))?;
    let mut handler = Handler::new(&config);
    handler.pipeline_books(!observer.books_on_one_thread());
    if let Some((e, _)) = itch_engine(&mut handler, id) {
        e.feed_mut().start_file(date);
    }
    let mut pending = Pending::new(&config, checks);
    let mut sniff = Sniff::default();
    let error = loop {
        if !observer.wants_record_times() {
            // Nothing reads the feed between checks: the records up to the
            // next check's time (the rest of the file when none waits) in
            // one batch, which stops before the first record later than
            // the check; that one comes below, after the check.
            let until = pending.next_time();
            let rest = itch_engine(&mut handler, id).map(|(e, counters)| {
                e.file_batch(counters, |batch| {
                    file.for_each_record_ahead(Batch {
                        batch,
                        until,
                        sniffing: !sniff.decided(),
                        sniff: &mut sniff,
                        progress: |messages| {
                            progress(Progress {
                                bytes: read.load(std::sync::atomic::Ordering::Relaxed),
                                messages,
                            })
                        },
                    })
                })
            });
            match rest {
                Some(Ok(true)) => break None,
                Some(Err(e)) => break Some(e),
                Some(Ok(false)) | None => {}
            }
        }
        if let Some(e) = sniff.given_up(file.offset()) {
            break Some(e);
        }
        // The index the file counts: batches move it too.
        let (index, record) = match file.next_record() {
            Ok(Some(next)) => next,
            Ok(None) => break None,
            Err(e) => break Some(e),
        };
        // Checks before this record's time come first; a record that fails
        // validation changes no time. With no check waiting, the record's
        // time is needed here only by an observer of records.
        let time = if pending.waiting() || observer.wants_record_times() {
            handler.feeds()[id as usize]
                .engine()
                .itch()
                .and_then(|it| it.record_time(record))
        } else {
            None
        };
        if let Some(t) = time {
            pending.answer_before(&mut handler, t, observer);
        }
        observer.before_record(&mut handler, id, index, time);
        if let Some((e, counters)) = itch_engine(&mut handler, id) {
            let valid = e.on_file_record(counters, index, record).is_some();
            sniff.note(index, record, valid);
        }
        observer.after_record(&mut handler, id, index, time);
        // The trial may end at this record (a batch stopped just before
        // it for a check): given up here, as the batch would have.
        if let Some(e) = sniff.given_up(file.offset()) {
            break Some(e);
        }
        let done = index + 1;
        if done.is_multiple_of(65_536) {
            progress(Progress {
                bytes: read.load(std::sync::atomic::Ordering::Relaxed),
                messages: done,
            });
        }
    };
    let answers = pending.finish(&mut handler, observer, error.is_some());
    let mut summary = super::wind_up(&mut handler, until, observer, CaptureStats::default(), 0);
    if let (Some(FeedSummary::Itch50(s)), Some(it)) = (
        summary.feeds.get_mut(feed),
        handler.feeds()[id as usize].engine().itch(),
    ) {
        s.invalid_records = Some(it.counters().invalid_records);
        // The time the file's records span, as a capture's datagrams do.
        summary.capture.span_ns = it.file_span();
        // The file's records are the input's: the capture object counts
        // them as a capture's (a file has no datagrams).
        summary.capture.reader.records = s.messages;
        // And those out of time order, as a capture's (warned about).
        let (steps, largest) = it.file_steps_back();
        summary.capture.time_steps_back = steps;
        summary.capture.largest_step_back_ns = largest;
    }
    let input_error = error.map(|error| InputError::File {
        format: "BinaryFILE",
        name,
        foreign: matches!(error, Error::NotItch { .. }),
        error: Box::new(error),
    });
    Ok(Outcome {
        answers,
        summary,
        input_error,
    })
}
