//! Packet captures: streams the UDP/IPv4 datagrams out of pcap and pcapng files.
//!
//! [`CaptureReader`] reads legacy pcap (µs or ns timestamps, either byte order)
//! and pcapng (any section byte order, per-interface `if_tsresol` and
//! `if_tsoffset`), record by record with a bounded buffer, and hands each
//! UDP/IPv4 datagram to a callback with its capture time in ns since the Unix
//! epoch. Frames that are not whole UDP/IPv4 datagrams are counted in
//! [`CaptureStats`], never fatal; a file that is cut or corrupt part way ends the
//! stream with a [`CaptureError`] naming the byte offset.

mod file;
pub use file::is_capture_magic;
pub mod link;
pub mod write;

use std::fmt;
use std::io::{self, Read};
use std::net::SocketAddrV4;
use std::path::Path;

use crate::readahead::Stream;
use file::{CaptureFile, Fault, Record};
use link::Parsed;

/// One UDP datagram found in a capture.
#[derive(Debug, Clone, Copy)]
pub struct Datagram<'a> {
    /// Capture timestamp: nanoseconds since the Unix epoch (capture host clock).
    pub time_ns: u64,
    /// Byte offset of the record in the capture file (for progress and error messages).
    pub offset: u64,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    /// UDP payload, trimmed to the UDP length field (Ethernet padding
    /// removed); a TCP segment's payload.
    pub payload: &'a [u8],
    /// A TCP segment's sequence and flags; `None` for a UDP datagram.
    pub tcp: Option<link::Tcp>,
}

/// Why frames were not turned into datagrams; all counted, none fatal.
///
/// Every packet record lands in exactly one of the counters after `records`,
/// so `records` is their sum.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CaptureStats {
    /// Packet records read (EPB, SPB, obsolete PB, legacy records).
    pub records: u64,
    /// UDP/IPv4 datagrams handed to the caller.
    pub datagrams: u64,
    /// TCP/IPv4 segments handed to the caller.
    #[serde(skip_serializing_if = "is_zero")]
    pub segments: u64,
    /// caplen < origlen and the bytes kept end before the IPv4 packet
    /// does (by its total length): the capture cut the datagram. (A cut
    /// frame that still holds its packet whole, only its trailer gone,
    /// gives its datagram; one whose bytes show it another ethertype or
    /// IP protocol counts there.)
    pub truncated: u64,
    /// Other ethertypes / IP versions (ARP, IPv6, ...).
    pub not_ipv4: u64,
    /// IPv4 but neither UDP nor TCP.
    pub not_udp: u64,
    /// UDP or TCP over IPv4 fragments (MF set or offset != 0): not reassembled.
    pub ip_fragments: u64,
    /// Bad IHL, total length, UDP length < 8 or past the IP payload, or a
    /// frame captured whole (caplen = origlen) yet shorter than its own
    /// headers or IPv4 total length say.
    pub malformed: u64,
    /// Records on an interface whose link type we do not read.
    pub unsupported_link: u64,
    /// pcapng Simple Packet Blocks (they carry no timestamp).
    pub no_timestamp: u64,
    /// Of `truncated`, `ip_fragments` and `malformed`: the records whose
    /// IPv4 header names TCP (a connection's segments, no datagram's).
    #[serde(skip)]
    pub unread_tcp: UnreadTcp,
    /// Of `malformed`, the frames captured whole by their record
    /// (caplen = origlen) yet shorter than their own headers or IPv4 total
    /// length say, not naming TCP: a tool that cut them and wrote the cut
    /// length as the frame's writes such records, and a feed's datagrams
    /// in them are lost to the replay where live had them.
    #[serde(skip)]
    pub short_frames: u64,
}

/// The TCP records among those not read whole ([`CaptureStats::unread_tcp`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct UnreadTcp {
    pub truncated: u64,
    pub ip_fragments: u64,
    pub malformed: u64,
}

impl CaptureStats {
    /// The records that are not UDP datagrams, by cause (the summary's
    /// key, the count): with `datagrams`, they sum to `records`.
    pub fn not_datagrams(&self) -> [(&'static str, u64); 8] {
        [
            ("segments", self.segments),
            ("truncated", self.truncated),
            ("not_ipv4", self.not_ipv4),
            ("not_udp", self.not_udp),
            ("ip_fragments", self.ip_fragments),
            ("malformed", self.malformed),
            ("unsupported_link", self.unsupported_link),
            ("no_timestamp", self.no_timestamp),
        ]
    }
}

/// For `#[serde(skip_serializing_if)]`: a count written only when not 0
/// (the summaries' optional keys).
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A capture that cannot be opened or that breaks part way.
///
/// Displays as one line naming the capture and, when it broke part way, the
/// byte offset (from the start of the file) of the record or block that broke.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The file could not be opened.
    #[error("capture {name}: {io}")]
    Open { name: String, io: io::Error },
    /// Empty, or does not start with a pcap or pcapng magic number.
    #[error("capture {name}: not a pcap or pcapng file{hint}")]
    NotCapture { name: String, hint: &'static str },
    /// Reading failed; `offset` is where the failed read started.
    #[error("capture {name}: read error at byte {offset}: {io}")]
    Read {
        name: String,
        offset: u64,
        io: io::Error,
    },
    /// The file ends inside the record or block starting at `offset`.
    #[error("capture {name}: truncated at byte {offset}: {detail}")]
    Truncated {
        name: String,
        offset: u64,
        detail: String,
    },
    /// The record or block starting at `offset` is inconsistent.
    #[error("capture {name}: corrupt block at byte {offset}: {detail}")]
    Corrupt {
        name: String,
        offset: u64,
        detail: String,
    },
    /// A format variant this reader does not read starts at `offset`.
    #[error("capture {name}: unsupported {detail} at byte {offset}")]
    Unsupported {
        name: String,
        offset: u64,
        detail: String,
    },
}

impl CaptureError {
    /// Byte offset where the capture broke, when it broke part way.
    pub fn offset(&self) -> Option<u64> {
        match self {
            CaptureError::Open { .. } | CaptureError::NotCapture { .. } => None,
            CaptureError::Read { offset, .. }
            | CaptureError::Truncated { offset, .. }
            | CaptureError::Corrupt { offset, .. }
            | CaptureError::Unsupported { offset, .. } => Some(*offset),
        }
    }

    fn from_fault(name: &str, fault: Fault) -> CaptureError {
        let name = name.to_owned();
        match fault {
            Fault::NotCapture { hint } => CaptureError::NotCapture { name, hint },
            Fault::Io { offset, error } => CaptureError::Read {
                name,
                offset,
                io: error,
            },
            Fault::Truncated { offset, detail } => CaptureError::Truncated {
                name,
                offset,
                detail,
            },
            Fault::Corrupt { offset, detail } => CaptureError::Corrupt {
                name,
                offset,
                detail,
            },
            Fault::Unsupported { offset, detail } => CaptureError::Unsupported {
                name,
                offset,
                detail,
            },
        }
    }
}

/// Streams the UDP/IPv4 datagrams of one capture, in file order.
pub struct CaptureReader {
    name: String,
    len: Option<u64>,
    file: CaptureFile,
    stats: CaptureStats,
}

impl fmt::Debug for CaptureReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureReader")
            .field("name", &self.name)
            .field("len", &self.len)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl CaptureReader {
    /// Opens a pcap (µs or ns, either byte order) or pcapng file; detects the format by magic.
    pub fn open(path: &Path) -> Result<CaptureReader, CaptureError> {
        let name = path.display().to_string();
        // A named FIFO without a writer reads as empty, not a wait.
        let file = crate::sys::open_input(path).map_err(|io| CaptureError::Open {
            name: name.clone(),
            io,
        })?;
        CaptureReader::from_file(&name, file)
    }

    /// Same, from a file already open (`name` for messages).
    pub fn from_file(name: &str, f: std::fs::File) -> Result<CaptureReader, CaptureError> {
        let name = name.to_string();
        let len = f.metadata().map_err(|io| CaptureError::Open {
            name: name.clone(),
            io,
        })?;
        let len = len.len();
        // Read a few chunks ahead on another core where there is one.
        let input = Stream::ahead(Box::new(f), "capture-read")
            .unwrap_or_else(|f| Stream::direct(f as Box<dyn Read>));
        let mut reader = CaptureReader::with_input(&name, input)?;
        reader.len = Some(len);
        Ok(reader)
    }

    /// Same, from any reader (tests use in-memory bytes); `name` is used in error messages.
    pub fn from_reader(name: &str, r: Box<dyn Read>) -> Result<CaptureReader, CaptureError> {
        CaptureReader::with_input(name, Stream::direct(r))
    }

    fn with_input(name: &str, input: Stream<Box<dyn Read>>) -> Result<CaptureReader, CaptureError> {
        let file =
            CaptureFile::open(input).map_err(|fault| CaptureError::from_fault(name, fault))?;
        Ok(CaptureReader {
            name: name.to_owned(),
            len: None,
            file,
            stats: CaptureStats::default(),
        })
    }

    /// Total file size in bytes when known (for a progress bar), else None.
    // The size of the file, not a count of items: an `is_empty` would mean nothing.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> Option<u64> {
        self.len
    }

    /// Streams every record in file order, calling `f` for each UDP/IPv4 datagram.
    ///
    /// Memory stays bounded whatever the capture size (fixed read buffer, grows only
    /// to hold one record). On a truncated or corrupt file: every readable record
    /// before the break has been delivered, then Err with the byte offset of the break;
    /// calling again resumes at the break (and reports it again unless the input grew).
    /// A clean end of file is Ok(()).
    pub fn for_each(&mut self, mut f: impl FnMut(&Datagram<'_>)) -> Result<(), CaptureError> {
        loop {
            let (offset, record) = match self.file.next_record() {
                Ok(Some(next)) => next,
                Ok(None) => return Ok(()),
                Err(fault) => return Err(CaptureError::from_fault(&self.name, fault)),
            };
            let stats = &mut self.stats;
            let (time_ns, link, origlen, frame) = match record {
                Record::Other => continue,
                Record::NoTimestamp => {
                    stats.records += 1;
                    stats.no_timestamp += 1;
                    continue;
                }
                Record::Packet {
                    time_ns,
                    link,
                    origlen,
                    frame,
                } => (time_ns, link, origlen, frame),
            };
            stats.records += 1;
            let Some(link) = link else {
                stats.unsupported_link += 1;
                continue;
            };
            // A frame the capture cut (caplen < origlen) still gives its
            // datagram when the bytes kept hold the IPv4 packet whole, by
            // its total length: only the trailer (an FCS, padding) went,
            // and live had the same datagram. One whose packet runs past
            // them is `truncated`; the same in a frame captured whole is
            // `malformed` (its headers claim bytes that never were).
            let cut = (frame.len() as u64) < u64::from(origlen);
            let tcp = || link::names_tcp(link, frame);
            match link::parse(link, frame) {
                Parsed::NotIpv4 => stats.not_ipv4 += 1,
                Parsed::NotUdp => stats.not_udp += 1,
                Parsed::Udp { src, dst, payload } => {
                    stats.datagrams += 1;
                    f(&Datagram {
                        time_ns,
                        offset,
                        src,
                        dst,
                        payload,
                        tcp: None,
                    });
                }
                Parsed::Tcp {
                    src,
                    dst,
                    tcp,
                    payload,
                } => {
                    stats.segments += 1;
                    f(&Datagram {
                        time_ns,
                        offset,
                        src,
                        dst,
                        payload,
                        tcp: Some(tcp),
                    });
                }
                Parsed::Truncated if cut => {
                    stats.truncated += 1;
                    stats.unread_tcp.truncated += u64::from(tcp());
                }
                Parsed::Fragment => {
                    stats.ip_fragments += 1;
                    stats.unread_tcp.ip_fragments += u64::from(tcp());
                }
                parsed @ (Parsed::Malformed | Parsed::Truncated) => {
                    let tcp = tcp();
                    stats.malformed += 1;
                    stats.unread_tcp.malformed += u64::from(tcp);
                    stats.short_frames += u64::from(parsed == Parsed::Truncated && !tcp);
                }
            }
        }
    }

    /// Counts so far, over every `for_each` call.
    pub fn stats(&self) -> &CaptureStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests;
