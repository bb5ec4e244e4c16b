//! Capture file formats: a bounded read buffer, record framing for legacy pcap
//! and pcapng, and timestamp conversion to ns since the Unix epoch.
//!
//! Framing (record and block lengths, pcapng length trailers) is checked here
//! before a whole record is decoded, so decoding only ever sees complete input:
//! a cut file is reported as truncated at the record that is cut, and corrupt
//! lengths can neither loop nor allocate without bound.
//!
//! Legacy pcap headers and records are decoded by `pcap_parser`. pcapng blocks
//! are decoded here, in place: `pcap_parser`'s block parsers collect every
//! option of a block into a `Vec`, 32 bytes per option of as few as 4 bytes,
//! so one block of [`MAX_BLOCK`] bytes of empty options would cost 256 MiB
//! (384 MiB while the `Vec` grows). Here options are walked one at a time
//! ([`Options`]), and only an interface's `if_tsresol` and `if_tsoffset` are
//! kept: reading holds the block being read and nothing per option.

use std::fmt;
use std::io::{self, Read};

use pcap_parser::nom;
use pcap_parser::PcapError;

use super::link::Link;
use crate::readahead::Stream;

/// Largest record or block accepted (bytes); larger lengths are taken as corruption.
pub(super) const MAX_BLOCK: usize = 32 * 1024 * 1024;
/// Most interfaces accepted in one pcapng section (memory bound on hostile files).
const MAX_INTERFACES: usize = 4096;
const NANOS_PER_SEC: u64 = 1_000_000_000;

const LEGACY_HEADER_LEN: usize = 24;
const LEGACY_RECORD_HEADER_LEN: usize = 16;
const SHB_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// Legacy pcap's magic as its first four bytes: (bytes, big-endian,
/// nanosecond timestamps).
const PCAP_MAGICS: [([u8; 4], bool, bool); 4] = [
    ([0xd4, 0xc3, 0xb2, 0xa1], false, false),
    ([0xa1, 0xb2, 0xc3, 0xd4], true, false),
    ([0x4d, 0x3c, 0xb2, 0xa1], false, true),
    ([0xa1, 0xb2, 0x3c, 0x4d], true, true),
];

/// The modified (Kuznetzov) pcap format's magic, in either byte order:
/// recognised, not read.
const MODIFIED_PCAP_MAGICS: [[u8; 4]; 2] = [[0x34, 0xcd, 0xb2, 0xa1], [0xa1, 0xb2, 0xcd, 0x34]];

/// True when a file starting with `magic` is a packet capture (pcapng, or
/// legacy pcap of either byte order and resolution, modified pcap
/// included): what a BinaryFILE replay refuses.
pub fn is_capture_magic(magic: [u8; 4]) -> bool {
    magic == SHB_MAGIC
        || MODIFIED_PCAP_MAGICS.contains(&magic)
        || PCAP_MAGICS.iter().any(|&(m, ..)| m == magic)
}
const BOM_LE: [u8; 4] = [0x4d, 0x3c, 0x2b, 0x1a];
const BOM_BE: [u8; 4] = [0x1a, 0x2b, 0x3c, 0x4d];
const IDB_TYPE: u32 = 1;
const PB_TYPE: u32 = 2;
const SPB_TYPE: u32 = 3;
const EPB_TYPE: u32 = 6;

/// Bytes of each block kind outside its options (and, for packet blocks, its
/// packet data), the block type, both lengths and the byte-order magic
/// included: the least a block of that kind can be.
const SHB_FIXED: usize = 28;
const IDB_FIXED: usize = 20;
/// Also the obsolete Packet Block's.
const EPB_FIXED: usize = 32;
/// Where an EPB's (or obsolete PB's) packet data starts.
const PACKET_DATA_AT: usize = 28;
/// Where an IDB's options start.
const IDB_OPTIONS_AT: usize = 16;

const OPT_ENDOFOPT: u16 = 0;
const OPT_IF_TSRESOL: u16 = 9;
const OPT_IF_TSOFFSET: u16 = 14;

/// Why a capture could not be opened or read on; `offset` is the byte offset
/// (from the start of the file) of the record or block that broke.
#[derive(Debug)]
pub(super) enum Fault {
    /// With a hint for the reader (`" (empty)"`, or none).
    NotCapture {
        hint: &'static str,
    },
    Io {
        offset: u64,
        error: io::Error,
    },
    Truncated {
        offset: u64,
        detail: String,
    },
    Corrupt {
        offset: u64,
        detail: String,
    },
    Unsupported {
        offset: u64,
        detail: String,
    },
}

/// The bytes of a capture, handed out in place.
type Input = Stream<Box<dyn Read>>;

/// `input.fill(n)`, a read error named at the offset where reading stopped.
fn fill(input: &mut Input, n: usize) -> Result<bool, Fault> {
    input.fill(n).map_err(|error| Fault::Io {
        offset: input.offset() + input.data().len() as u64,
        error,
    })
}

/// Timestamp unit of a pcapng interface, from `if_tsresol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TsUnit {
    /// 10^-e seconds.
    Pow10(u32),
    /// 2^-k seconds.
    Pow2(u32),
}

impl TsUnit {
    fn from_tsresol(tsresol: u8) -> TsUnit {
        if tsresol & 0x80 == 0 {
            TsUnit::Pow10(u32::from(tsresol))
        } else {
            TsUnit::Pow2(u32::from(tsresol & 0x7f))
        }
    }

    /// `ticks` of this unit in ns, rounded down.
    fn to_ns(self, ticks: u64) -> u128 {
        let ticks = u128::from(ticks);
        match self {
            TsUnit::Pow10(e) if e <= 9 => ticks * 10u128.pow(9 - e),
            // 10^(e-9) past u128 means less than one ns for any u64 tick count.
            TsUnit::Pow10(e) => 10u128.checked_pow(e - 9).map_or(0, |d| ticks / d),
            // ticks < 2^64 and 1e9 < 2^30: the product fits, and k <= 127.
            TsUnit::Pow2(k) => (ticks * u128::from(NANOS_PER_SEC)) >> k,
        }
    }
}

/// A pcapng interface, as described by its IDB.
#[derive(Debug, Clone, Copy)]
struct Interface {
    /// `None` when we do not read the interface's link type.
    link: Option<Link>,
    unit: TsUnit,
    /// `if_tsoffset`: seconds added to every timestamp.
    offset_secs: i64,
}

impl Interface {
    /// Timestamp (ticks since `if_tsoffset`) in ns since the Unix epoch; `None` when
    /// it falls outside u64.
    fn time_ns(&self, ticks: u64) -> Option<u64> {
        // ns < 2^94 and |offset| * 1e9 < 2^93: no overflow in i128.
        let ns = i128::try_from(self.unit.to_ns(ticks)).ok()?;
        let offset = i128::from(self.offset_secs) * i128::from(NANOS_PER_SEC);
        u64::try_from(ns + offset).ok()
    }
}

enum Format {
    Legacy {
        big_endian: bool,
        nanos: bool,
        link: Option<Link>,
    },
    PcapNg {
        /// Byte order of the current section.
        big_endian: bool,
        /// Interfaces of the current section, by interface id.
        interfaces: Vec<Interface>,
    },
}

/// One record or block, as far as the reader cares.
#[derive(Debug)]
pub(super) enum Record<'a> {
    /// A packet record: legacy record, EPB or obsolete Packet Block.
    Packet {
        /// Capture time, ns since the Unix epoch.
        time_ns: u64,
        /// `None` when we do not read the record's link type.
        link: Option<Link>,
        /// Length of the packet on the wire (bytes); more than `frame.len()` when cut by snaplen.
        origlen: u32,
        /// The captured bytes.
        frame: &'a [u8],
    },
    /// A pcapng Simple Packet Block: no timestamp, so not used.
    NoTimestamp,
    /// Any other block (section and interface headers, statistics, name resolution, ...).
    Other,
}

/// A capture file being read record by record.
pub(super) struct CaptureFile {
    input: Input,
    format: Format,
    /// Length of the record last returned, consumed on the next call.
    pending: usize,
}

impl CaptureFile {
    /// Detects the format by magic and reads the file header (legacy) or the first
    /// Section Header Block (pcapng).
    pub(super) fn open(mut input: Input) -> Result<CaptureFile, Fault> {
        if !fill(&mut input, 4)? {
            let hint = if input.data().is_empty() {
                " (empty)"
            } else {
                ""
            };
            return Err(Fault::NotCapture { hint });
        }
        let d = input.data();
        let magic = [d[0], d[1], d[2], d[3]];
        let legacy = PCAP_MAGICS.iter().find(|&&(m, ..)| m == magic);
        let (big_endian, nanos) = match (magic, legacy) {
            (_, Some(&(_, big_endian, nanos))) => (big_endian, nanos),
            (SHB_MAGIC, _) => {
                let mut file = CaptureFile {
                    input,
                    format: Format::PcapNg {
                        big_endian: false,
                        interfaces: Vec::new(),
                    },
                    pending: 0,
                };
                // Reads (and checks) the Section Header Block, consumed by the next call.
                file.next_record()?;
                return Ok(file);
            }
            (m, _) if MODIFIED_PCAP_MAGICS.contains(&m) => {
                return Err(Fault::Unsupported {
                    offset: 0,
                    detail: "modified (Kuznetzov) pcap format".into(),
                })
            }
            ([0x1f, 0x8b, ..], _) => {
                return Err(Fault::NotCapture {
                    hint: " (gzip-compressed: decompress it first; only a Nasdaq \
                           BinaryFILE is read compressed, by `replay --feed --date`)",
                })
            }
            _ => return Err(Fault::NotCapture { hint: "" }),
        };
        if !fill(&mut input, LEGACY_HEADER_LEN)? {
            return Err(Fault::Truncated {
                offset: 0,
                detail: format!(
                    "file header cut short: {} of {LEGACY_HEADER_LEN} bytes",
                    input.data().len()
                ),
            });
        }
        let header = match pcap_parser::parse_pcap_header(&input.data()[..LEGACY_HEADER_LEN]) {
            Ok((_, header)) => header,
            Err(e) => {
                return Err(Fault::Corrupt {
                    offset: 0,
                    detail: format!("file header: {}", Problem(&e)),
                })
            }
        };
        // 2.4 since 1998, 2.3 before it: the record layout read here.
        // Older ones swap a record's two lengths, and nothing else is pcap.
        if header.version_major != 2 || !(3..=4).contains(&header.version_minor) {
            return Err(Fault::Unsupported {
                offset: 0,
                detail: format!(
                    "pcap version {}.{}",
                    header.version_major, header.version_minor
                ),
            });
        }
        // The low 16 bits are the link type; the upper bits may carry FCS information.
        let linktype = (header.network.0 as u32) & 0xffff;
        input.consume(LEGACY_HEADER_LEN);
        Ok(CaptureFile {
            input,
            format: Format::Legacy {
                big_endian,
                nanos,
                link: Link::from_linktype(linktype),
            },
            pending: 0,
        })
    }

    /// The next record and its byte offset, `Ok(None)` at a clean end of file.
    ///
    /// After an error, the reader stays before the broken record: calling again
    /// reports the same problem (or goes on, if more bytes have arrived).
    pub(super) fn next_record(&mut self) -> Result<Option<(u64, Record<'_>)>, Fault> {
        self.input.consume(self.pending);
        self.pending = 0;
        let len = match self.format {
            Format::Legacy { big_endian, .. } => self.frame_legacy(big_endian)?,
            Format::PcapNg { big_endian, .. } => self.frame_pcapng(big_endian)?,
        };
        let Some(len) = len else {
            return Ok(None);
        };
        let offset = self.input.offset();
        let block = &self.input.data()[..len];
        let record = match &mut self.format {
            Format::Legacy {
                big_endian,
                nanos,
                link,
            } => decode_legacy(block, offset, *big_endian, *nanos, *link)?,
            Format::PcapNg {
                big_endian,
                interfaces,
            } => decode_pcapng(block, offset, big_endian, interfaces)?,
        };
        self.pending = len;
        Ok(Some((offset, record)))
    }

    /// Current size of the read buffer (bytes).
    #[cfg(test)]
    pub(super) fn buffer_len(&self) -> usize {
        self.input.buffered()
    }

    /// Buffers the next legacy record whole; returns its length (bytes).
    fn frame_legacy(&mut self, big_endian: bool) -> Result<Option<usize>, Fault> {
        let offset = self.input.offset();
        if !fill(&mut self.input, LEGACY_RECORD_HEADER_LEN)? {
            return match self.input.data().len() {
                0 => Ok(None),
                n => Err(Fault::Truncated {
                    offset,
                    detail: format!(
                        "record header cut short: {n} of {LEGACY_RECORD_HEADER_LEN} bytes"
                    ),
                }),
            };
        }
        let caplen = u32_at(self.input.data(), 8, big_endian) as usize;
        if caplen > MAX_BLOCK {
            return Err(Fault::Corrupt {
                offset,
                detail: format!("record length {caplen} exceeds the {MAX_BLOCK} byte limit"),
            });
        }
        // No frame is 0 bytes: a record of none kept of none on the wire
        // is what a file whose tail was zero-filled (a crash mid-write)
        // holds where its records should be, and reading such records
        // would count each as malformed and end cleanly.
        if caplen == 0 && u32_at(self.input.data(), 12, big_endian) == 0 {
            return Err(Fault::Corrupt {
                offset,
                detail: "record of a frame 0 bytes long, none kept (zeros where records \
                         should be: a file written to no further?)"
                    .into(),
            });
        }
        let len = LEGACY_RECORD_HEADER_LEN + caplen;
        if !fill(&mut self.input, len)? {
            return Err(cut_short(offset, "record", len, self.input.data().len()));
        }
        Ok(Some(len))
    }

    /// Buffers the next pcapng block whole and checks its length trailer; returns
    /// its length (bytes).
    fn frame_pcapng(&mut self, section_big_endian: bool) -> Result<Option<usize>, Fault> {
        let offset = self.input.offset();
        if !fill(&mut self.input, 8)? {
            return match self.input.data().len() {
                0 => Ok(None),
                n => Err(Fault::Truncated {
                    offset,
                    detail: format!("block header cut short: {n} of 8 bytes"),
                }),
            };
        }
        // A Section Header Block carries its own byte order, after its length.
        let big_endian = if self.input.data()[..4] == SHB_MAGIC {
            if !fill(&mut self.input, 12)? {
                return Err(cut_short(
                    offset,
                    "section header",
                    12,
                    self.input.data().len(),
                ));
            }
            let d = self.input.data();
            match [d[8], d[9], d[10], d[11]] {
                BOM_LE => false,
                BOM_BE => true,
                _ => {
                    return Err(Fault::Corrupt {
                        offset,
                        detail: "section header with a bad byte-order magic".into(),
                    })
                }
            }
        } else {
            section_big_endian
        };
        let len = u32_at(self.input.data(), 4, big_endian) as usize;
        if len < 12 || !len.is_multiple_of(4) || len > MAX_BLOCK {
            return Err(Fault::Corrupt {
                offset,
                detail: format!("invalid block length {len}"),
            });
        }
        if !fill(&mut self.input, len)? {
            return Err(cut_short(offset, "block", len, self.input.data().len()));
        }
        let trailer = u32_at(self.input.data(), len - 4, big_endian) as usize;
        if trailer != len {
            return Err(Fault::Corrupt {
                offset,
                detail: format!("block length {len} but trailing length {trailer}"),
            });
        }
        Ok(Some(len))
    }
}

fn decode_legacy(
    block: &[u8],
    offset: u64,
    big_endian: bool,
    nanos: bool,
    link: Option<Link>,
) -> Result<Record<'_>, Fault> {
    let parsed = if big_endian {
        pcap_parser::parse_pcap_frame_be(block)
    } else {
        pcap_parser::parse_pcap_frame(block)
    };
    let rec = parsed.map_err(|e| corrupt(offset, "record", &e))?.1;
    // Cannot overflow: < 2^32 * 1e9 + 2^32 * 1e3 < 2^64.
    let frac_ns = if nanos {
        u64::from(rec.ts_usec)
    } else {
        u64::from(rec.ts_usec) * 1_000
    };
    Ok(Record::Packet {
        time_ns: u64::from(rec.ts_sec) * NANOS_PER_SEC + frac_ns,
        link,
        origlen: rec.origlen,
        frame: rec.data,
    })
}

fn decode_pcapng<'a>(
    block: &'a [u8],
    offset: u64,
    big_endian: &mut bool,
    interfaces: &mut Vec<Interface>,
) -> Result<Record<'a>, Fault> {
    if block[..4] == SHB_MAGIC {
        too_short(block, offset, "section header", SHB_FIXED)?;
        // Framing has checked the byte-order magic is one of the two.
        let be = block[8..12] == BOM_BE;
        let (major, minor) = (u16_at(block, 12, be), u16_at(block, 14, be));
        if major != 1 {
            return Err(Fault::Unsupported {
                offset,
                detail: format!("pcapng version {major}.{minor}"),
            });
        }
        // A new section: new byte order, interfaces numbered from 0 again.
        *big_endian = be;
        interfaces.clear();
        return Ok(Record::Other);
    }
    let be = *big_endian;
    match u32_at(block, 0, be) {
        IDB_TYPE => {
            too_short(block, offset, "interface description", IDB_FIXED)?;
            if interfaces.len() >= MAX_INTERFACES {
                return Err(Fault::Unsupported {
                    offset,
                    detail: format!("section with more than {MAX_INTERFACES} interfaces"),
                });
            }
            // The first of each with the length the specification gives it.
            let mut tsresol = None;
            let mut tsoffset = None;
            let options = Options {
                rest: &block[IDB_OPTIONS_AT..block.len() - 4],
                big_endian: be,
            };
            for (code, value) in options {
                match (code, value) {
                    (OPT_IF_TSRESOL, &[r]) => {
                        tsresol.get_or_insert(r);
                    }
                    (OPT_IF_TSOFFSET, value) => {
                        if let Ok(b) = <[u8; 8]>::try_from(value) {
                            let secs = if be {
                                i64::from_be_bytes(b)
                            } else {
                                i64::from_le_bytes(b)
                            };
                            tsoffset.get_or_insert(secs);
                        }
                    }
                    _ => {}
                }
            }
            interfaces.push(Interface {
                link: Link::from_linktype(u32::from(u16_at(block, 8, be))),
                unit: TsUnit::from_tsresol(tsresol.unwrap_or(6)),
                offset_secs: tsoffset.unwrap_or(0),
            });
            Ok(Record::Other)
        }
        EPB_TYPE => {
            let kind = "enhanced packet";
            too_short(block, offset, kind, EPB_FIXED)?;
            let if_id = u32_at(block, 8, be);
            let ticks = (u64::from(u32_at(block, 12, be)) << 32) | u64::from(u32_at(block, 16, be));
            let origlen = u32_at(block, 24, be);
            let frame = packet_data(block, offset, kind, u32_at(block, 20, be))?;
            packet(offset, interfaces, if_id, ticks, origlen, frame)
        }
        PB_TYPE => {
            // Obsolete Packet Block: 16-bit interface id, 16-bit drop count, then as an EPB.
            let kind = "packet block";
            too_short(block, offset, kind, EPB_FIXED)?;
            let if_id = u32::from(u16_at(block, 8, be));
            let ticks = (u64::from(u32_at(block, 12, be)) << 32) | u64::from(u32_at(block, 16, be));
            let origlen = u32_at(block, 24, be);
            let frame = packet_data(block, offset, kind, u32_at(block, 20, be))?;
            packet(offset, interfaces, if_id, ticks, origlen, frame)
        }
        SPB_TYPE => Ok(Record::NoTimestamp),
        _ => Ok(Record::Other),
    }
}

/// `Err` naming `kind` when `block` is shorter than `fixed`, its fixed part.
fn too_short(block: &[u8], offset: u64, kind: &str, fixed: usize) -> Result<(), Fault> {
    if block.len() < fixed {
        return Err(Fault::Corrupt {
            offset,
            detail: format!("{kind} of {} bytes, less than {fixed}", block.len()),
        });
    }
    Ok(())
}

/// The `caplen` captured bytes of an EPB or obsolete PB (checked to be at least
/// [`EPB_FIXED`] long), which with their padding to 32 bits must fit before the
/// trailing length; the options after them are not read.
fn packet_data<'a>(
    block: &'a [u8],
    offset: u64,
    kind: &str,
    caplen: u32,
) -> Result<&'a [u8], Fault> {
    let area = &block[PACKET_DATA_AT..block.len() - 4];
    // The area is a whole number of 32-bit words, so the data fits with its
    // padding whenever it fits without.
    match area.get(..caplen as usize) {
        Some(frame) => Ok(frame),
        None => Err(Fault::Corrupt {
            offset,
            detail: format!("{kind}: captured length {caplen} past the block"),
        }),
    }
}

/// The options of a pcapng block, read one at a time in place: `(code, value)`,
/// the value without its padding. Ends at `opt_endofopt` or at the end of the
/// options area, and at an option whose value runs past that end (the rest is
/// not taken as options).
///
/// Holds nothing per option: a block of any number of options costs two
/// slices, whatever its options area claims.
struct Options<'a> {
    /// The options not yet read, up to the block's trailing length.
    rest: &'a [u8],
    big_endian: bool,
}

impl<'a> Iterator for Options<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<(u16, &'a [u8])> {
        let rest = std::mem::take(&mut self.rest);
        if rest.len() < 4 {
            return None;
        }
        let code = u16_at(rest, 0, self.big_endian);
        let len = usize::from(u16_at(rest, 2, self.big_endian));
        if code == OPT_ENDOFOPT {
            return None;
        }
        // Values are padded to 32 bits.
        let padded = rest.get(4..4 + len.next_multiple_of(4))?;
        self.rest = &rest[4 + padded.len()..];
        Some((code, &padded[..len]))
    }
}

/// A packet record on interface `if_id` of the current section.
fn packet<'a>(
    offset: u64,
    interfaces: &[Interface],
    if_id: u32,
    ticks: u64,
    origlen: u32,
    frame: &'a [u8],
) -> Result<Record<'a>, Fault> {
    let Some(interface) = interfaces.get(if_id as usize) else {
        return Err(Fault::Corrupt {
            offset,
            detail: format!("packet on undeclared interface {if_id}"),
        });
    };
    let Some(time_ns) = interface.time_ns(ticks) else {
        return Err(Fault::Corrupt {
            offset,
            detail: "timestamp outside 1970..2554".into(),
        });
    };
    Ok(Record::Packet {
        time_ns,
        link: interface.link,
        origlen,
        frame,
    })
}

fn cut_short(offset: u64, what: &str, needed: usize, present: usize) -> Fault {
    Fault::Truncated {
        offset,
        detail: format!("{what} of {needed} bytes cut short, {present} present"),
    }
}

fn corrupt(offset: u64, what: &str, e: &nom::Err<PcapError<&[u8]>>) -> Fault {
    Fault::Corrupt {
        offset,
        detail: format!("{what}: {}", Problem(e)),
    }
}

/// Short description of a pcap-parser error, without the input bytes it carries.
struct Problem<'e, 'a>(&'e nom::Err<PcapError<&'a [u8]>>);

impl fmt::Display for Problem<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            nom::Err::Incomplete(_) => f.write_str("fields run past the end of the block"),
            nom::Err::Error(e) | nom::Err::Failure(e) => match e {
                PcapError::NomError(_, kind) | PcapError::OwnedNomError(_, kind) => {
                    write!(f, "invalid content ({kind:?})")
                }
                other => write!(f, "{other}"),
            },
        }
    }
}

/// u32 at `at` in the given byte order; callers have checked `at + 4 <= bytes.len()`.
fn u32_at(bytes: &[u8], at: usize, big_endian: bool) -> u32 {
    let b = [bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]];
    if big_endian {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    }
}

/// u16 at `at` in the given byte order; callers have checked `at + 2 <= bytes.len()`.
fn u16_at(bytes: &[u8], at: usize, big_endian: bool) -> u16 {
    let b = [bytes[at], bytes[at + 1]];
    if big_endian {
        u16::from_be_bytes(b)
    } else {
        u16::from_le_bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ts_units() {
        assert_eq!(TsUnit::from_tsresol(6).to_ns(1_500_000), 1_500_000_000);
        assert_eq!(TsUnit::from_tsresol(9).to_ns(7), 7);
        assert_eq!(TsUnit::from_tsresol(0).to_ns(3), 3_000_000_000);
        assert_eq!(TsUnit::from_tsresol(12).to_ns(1_999), 1);
        assert_eq!(TsUnit::from_tsresol(127).to_ns(u64::MAX), 0);
        // 2^-30 s: 2^30 ticks are one second; one tick is 0.93 ns, floored to 0.
        assert_eq!(
            TsUnit::from_tsresol(0x80 | 30).to_ns(1 << 30),
            1_000_000_000
        );
        assert_eq!(TsUnit::from_tsresol(0x80 | 30).to_ns(1), 0);
        assert_eq!(TsUnit::from_tsresol(0x80 | 30).to_ns(2), 1);
        assert_eq!(TsUnit::from_tsresol(0x80).to_ns(2), 2_000_000_000);
        assert_eq!(TsUnit::from_tsresol(0xff).to_ns(u64::MAX), 0);
    }

    /// A legacy record's sub-second field is added as it stands, a second
    /// or more included (README, `tickguard replay`).
    #[test]
    fn a_sub_second_field_of_a_second_or_more_is_added_as_it_stands() {
        for (nanos, frac, ns) in [
            (false, 999_999, 999_999_000),
            (false, 1_000_000, 1_000_000_000),
            (false, u32::MAX, u64::from(u32::MAX) * 1_000),
            (true, 1_000_000_000, 1_000_000_000),
            (true, u32::MAX, u64::from(u32::MAX)),
        ] {
            for big_endian in [false, true] {
                let word = |v: u32| {
                    if big_endian {
                        v.to_be_bytes()
                    } else {
                        v.to_le_bytes()
                    }
                };
                let block = [word(7), word(frac), word(4), word(4), [1, 2, 3, 4]].concat();
                let Ok(Record::Packet { time_ns, frame, .. }) =
                    decode_legacy(&block, 24, big_endian, nanos, None)
                else {
                    panic!("frac {frac}: not a packet");
                };
                assert_eq!((time_ns, frame), (7_000_000_000 + ns, &[1, 2, 3, 4][..]));
            }
        }
    }

    /// The little-endian options in `bytes`, as (code, value).
    fn options(bytes: &[u8]) -> Vec<(u16, Vec<u8>)> {
        let options = Options {
            rest: bytes,
            big_endian: false,
        };
        options
            .map(|(code, value)| (code, value.to_vec()))
            .collect()
    }

    #[test]
    fn options_are_read_in_place_up_to_the_end_of_options() {
        // if_tsresol 9 (padded), an empty comment, if_name "eth0", then opt_endofopt
        // and an option after it that is not read.
        let bytes = [
            &[9, 0, 1, 0, 9, 0xa5, 0xa5, 0xa5][..],
            &[1, 0, 0, 0],
            &[2, 0, 4, 0, b'e', b't', b'h', b'0'],
            &[0, 0, 0, 0],
            &[9, 0, 1, 0, 3, 0, 0, 0],
        ]
        .concat();
        assert_eq!(
            options(&bytes),
            vec![(9, vec![9]), (1, vec![]), (2, b"eth0".to_vec())]
        );
        // Without opt_endofopt: to the end of the area.
        assert_eq!(options(&bytes[..20]).len(), 3);
        assert_eq!(options(&[]), vec![]);
        // A value (or its padding) running past the area ends the options.
        assert_eq!(options(&[1, 0, 1, 0, 7, 0, 0]), vec![]);
        assert_eq!(
            options(&[1, 0, 0, 0, 1, 0, 8, 0, 1, 2, 3, 4]),
            vec![(1, vec![])]
        );
        assert_eq!(options(&[1, 0]), vec![]);
        // Big-endian codes and lengths.
        let options = Options {
            rest: &[0, 14, 0, 2, 1, 2, 0, 0],
            big_endian: true,
        };
        assert_eq!(options.collect::<Vec<_>>(), vec![(14, &[1, 2][..])]);
    }

    #[test]
    fn interface_options_of_the_wrong_length_are_passed_over() {
        let idb = |opts: &[u8]| {
            let len = (IDB_FIXED + opts.len()) as u32;
            let mut b = [&1u32.to_le_bytes()[..], &len.to_le_bytes(), &[1, 0, 0, 0]].concat();
            b.extend_from_slice(&65535u32.to_le_bytes());
            b.extend_from_slice(opts);
            b.extend_from_slice(&len.to_le_bytes());
            b
        };
        // A two-byte if_tsresol and a four-byte if_tsoffset, then the valid ones.
        let opts = [
            &[9, 0, 2, 0, 3, 3, 0, 0][..],
            &[14, 0, 4, 0, 1, 0, 0, 0],
            &[9, 0, 1, 0, 3, 0, 0, 0],
            &[14, 0, 8, 0],
            &(-7i64).to_le_bytes(),
            &[9, 0, 1, 0, 6, 0, 0, 0],
        ]
        .concat();
        let mut interfaces = Vec::new();
        let mut be = false;
        decode_pcapng(&idb(&opts), 0, &mut be, &mut interfaces).expect("idb");
        let i = interfaces[0];
        assert_eq!(
            (i.link, i.unit, i.offset_secs),
            (Some(Link::Ethernet), TsUnit::Pow10(3), -7)
        );
        decode_pcapng(&idb(&[]), 0, &mut be, &mut interfaces).expect("idb");
        assert_eq!(
            (interfaces[1].unit, interfaces[1].offset_secs),
            (TsUnit::Pow10(6), 0)
        );
    }

    #[test]
    fn blocks_shorter_than_their_fixed_fields_are_corrupt() {
        for (block_type, kind, fixed) in [
            (IDB_TYPE, "interface description", IDB_FIXED),
            (EPB_TYPE, "enhanced packet", EPB_FIXED),
            (PB_TYPE, "packet block", EPB_FIXED),
        ] {
            let len = fixed as u32 - 4;
            let mut b = [block_type.to_le_bytes(), len.to_le_bytes()].concat();
            b.resize(len as usize - 4, 0);
            b.extend_from_slice(&len.to_le_bytes());
            let err = decode_pcapng(&b, 40, &mut false, &mut Vec::new()).expect_err("short");
            let Fault::Corrupt { offset: 40, detail } = err else {
                panic!("{err:?}");
            };
            assert_eq!(detail, format!("{kind} of {len} bytes, less than {fixed}"));
        }
        let mut shb = [&SHB_MAGIC[..], &24u32.to_le_bytes(), &BOM_LE, &[1, 0, 0, 0]].concat();
        shb.extend_from_slice(&[0, 0, 0, 0, 24, 0, 0, 0]);
        let err = decode_pcapng(&shb, 0, &mut false, &mut Vec::new()).expect_err("short");
        assert!(matches!(err, Fault::Corrupt { offset: 0, .. }), "{err:?}");
    }

    #[test]
    fn captured_length_past_the_block_is_corrupt() {
        // An EPB with room for 8 bytes of data claiming 9 (and, padded, 12).
        let mut interfaces = vec![Interface {
            link: None,
            unit: TsUnit::Pow10(6),
            offset_secs: 0,
        }];
        for (caplen, ok) in [(8u32, true), (9, false), (u32::MAX, false)] {
            let mut b = [EPB_TYPE, 40, 0, 0, 0, caplen, caplen]
                .map(u32::to_le_bytes)
                .concat();
            b.extend_from_slice(&[0xa5; 8]);
            b.extend_from_slice(&40u32.to_le_bytes());
            match decode_pcapng(&b, 0, &mut false, &mut interfaces) {
                Ok(Record::Packet { frame, .. }) if ok => assert_eq!(frame, &[0xa5; 8]),
                Err(Fault::Corrupt { detail, .. }) if !ok => assert_eq!(
                    detail,
                    format!("enhanced packet: captured length {caplen} past the block")
                ),
                other => panic!("caplen {caplen}: {other:?}"),
            }
        }
    }

    #[test]
    fn interface_offsets() {
        let i = Interface {
            link: None,
            unit: TsUnit::Pow10(9),
            offset_secs: -2,
        };
        assert_eq!(i.time_ns(3_000_000_000), Some(1_000_000_000));
        assert_eq!(i.time_ns(1_000_000_000), None);
        let i = Interface {
            link: None,
            unit: TsUnit::Pow10(0),
            offset_secs: 0,
        };
        assert_eq!(i.time_ns(18_446_744_073), Some(18_446_744_073_000_000_000));
        assert_eq!(i.time_ns(18_446_744_074), None);
    }
}
