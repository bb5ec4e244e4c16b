//! Capture writers, for tests and the seeded fixture generator.
//!
//! Deliberately independent from the reading side ([`super::link`] parsing,
//! [`super::CaptureReader`]): frames and file structures are built here from
//! the format specifications, so a write-then-read round trip checks both.
//! Files are written little-endian.

use std::io::{self, Write};
use std::net::SocketAddrV4;

use super::link::Link;

const NANOS_PER_SEC: u64 = 1_000_000_000;
/// Snapshot length announced in file headers (bytes): the usual tcpdump default.
const SNAPLEN: u32 = 262_144;
/// Ethernet frames shorter than this (without FCS) are padded by the NIC.
const ETHERNET_MIN_FRAME: usize = 60;
const SRC_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
const DST_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];

/// File format and timestamp resolution of a written capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Legacy pcap, microsecond timestamps (magic 0xa1b2c3d4).
    PcapMicros,
    /// Legacy pcap, nanosecond timestamps (magic 0xa1b23c4d).
    PcapNanos,
    /// pcapng with one interface; `tsresol` is the raw `if_tsresol` byte:
    /// 6 = µs (the default, then not written), 9 = ns, `0x80 | k` = 2^-k s.
    PcapNg { tsresol: u8 },
}

/// The largest frame a datagram or segment makes, bytes: an IPv4 packet
/// of 65,535 under the largest link header written (SLL2's 20) and a VLAN
/// tag. Its buffers are this large from the start, so that recording a
/// jumbo datagram or a snapshot's segment allocates nothing on the receive
/// thread.
const FRAME_MAX: usize = 65_535 + 20 + 4;

/// What a record adds to its frame at most, bytes: a pcapng Enhanced
/// Packet Block's 32 and 3 of padding (a pcap record's header is 16).
const RECORD_OVERHEAD: usize = 32 + 3;

/// Writes a capture of one link type, record by record.
pub struct CaptureWriter<W: Write> {
    out: W,
    format: Format,
    link: Link,
    vlan: Option<u16>,
    /// IPv4 identification of the next datagram.
    ip_id: u16,
    /// Scratch space for the frame being built.
    frame: Vec<u8>,
    /// Scratch space for the record being written (header, frame, trailer).
    record: Vec<u8>,
}

impl<W: Write> CaptureWriter<W> {
    /// Writes the file header (and for pcapng the SHB and one IDB) for `link`.
    pub fn new(mut out: W, format: Format, link: Link) -> io::Result<Self> {
        let linktype = linktype(link);
        match format {
            Format::PcapMicros | Format::PcapNanos => {
                let magic: u32 = if format == Format::PcapNanos {
                    0xa1b2_3c4d
                } else {
                    0xa1b2_c3d4
                };
                let mut h = Vec::with_capacity(24);
                h.extend_from_slice(&magic.to_le_bytes());
                h.extend_from_slice(&2u16.to_le_bytes()); // version 2.4
                h.extend_from_slice(&4u16.to_le_bytes());
                h.extend_from_slice(&0i32.to_le_bytes()); // thiszone
                h.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
                h.extend_from_slice(&SNAPLEN.to_le_bytes());
                h.extend_from_slice(&u32::from(linktype).to_le_bytes());
                out.write_all(&h)?;
            }
            Format::PcapNg { tsresol } => {
                // Section Header Block: no options, section length unknown (-1).
                let mut shb = Vec::with_capacity(28);
                shb.extend_from_slice(&0x0a0d_0d0au32.to_le_bytes());
                shb.extend_from_slice(&28u32.to_le_bytes());
                shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
                shb.extend_from_slice(&1u16.to_le_bytes());
                shb.extend_from_slice(&0u16.to_le_bytes());
                shb.extend_from_slice(&(-1i64).to_le_bytes());
                shb.extend_from_slice(&28u32.to_le_bytes());
                out.write_all(&shb)?;
                // Interface Description Block, with if_tsresol unless it is the default.
                let mut options = Vec::new();
                if tsresol != 6 {
                    options.extend_from_slice(&9u16.to_le_bytes());
                    options.extend_from_slice(&1u16.to_le_bytes());
                    options.extend_from_slice(&[tsresol, 0, 0, 0]);
                    options.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
                }
                let len = 20 + options.len() as u32;
                let mut idb = Vec::with_capacity(len as usize);
                idb.extend_from_slice(&1u32.to_le_bytes());
                idb.extend_from_slice(&len.to_le_bytes());
                idb.extend_from_slice(&linktype.to_le_bytes());
                idb.extend_from_slice(&0u16.to_le_bytes());
                idb.extend_from_slice(&SNAPLEN.to_le_bytes());
                idb.extend_from_slice(&options);
                idb.extend_from_slice(&len.to_le_bytes());
                out.write_all(&idb)?;
            }
        }
        Ok(CaptureWriter::after_header(out, format, link))
    }

    /// Writes records of `format` and `link` into `out`, whose file header
    /// another writer wrote (a recording formatted on one thread and
    /// written on another).
    pub fn after_header(out: W, format: Format, link: Link) -> Self {
        CaptureWriter {
            out,
            format,
            link,
            vlan: None,
            ip_id: 1,
            frame: Vec::with_capacity(FRAME_MAX),
            record: Vec::with_capacity(FRAME_MAX + RECORD_OVERHEAD),
        }
    }

    /// Tags the following Ethernet frames with one 802.1Q tag of VLAN `vlan` (12 bits),
    /// or stops tagging with `None`. On SLL and SLL2 the tag follows a protocol of
    /// 0x8100, as some kernels leave it; raw IP ignores it.
    pub fn set_vlan(&mut self, vlan: Option<u16>) {
        self.vlan = vlan;
    }

    /// Writes one UDP/IPv4 datagram framed for the link, captured at `time_ns`
    /// (ns since the Unix epoch, truncated to the format's resolution).
    ///
    /// Ethernet uses fixed MACs and is padded to 60 bytes; SLL/SLL2 get a plausible
    /// cooked header; raw IP is the IPv4 header only. The IPv4 header checksum is
    /// valid; the UDP checksum is 0 (none). Errors with `InvalidInput` when the
    /// payload does not fit one datagram or the time does not fit the format.
    pub fn write_udp(
        &mut self,
        time_ns: u64,
        src: SocketAddrV4,
        dst: SocketAddrV4,
        payload: &[u8],
    ) -> io::Result<()> {
        let udp_len = u16::try_from(8 + payload.len())
            .ok()
            .filter(|_| 28 + payload.len() <= usize::from(u16::MAX))
            .ok_or_else(|| invalid("UDP payload too large for one IPv4 datagram"))?;
        // No checksum.
        let mut header = [0u8; 8];
        header[..2].copy_from_slice(&src.port().to_be_bytes());
        header[2..4].copy_from_slice(&dst.port().to_be_bytes());
        header[4..6].copy_from_slice(&udp_len.to_be_bytes());
        self.write_ipv4(time_ns, 17, src, dst, &header, payload)
    }

    /// Writes one TCP/IPv4 segment from `src` to `dst`: sequence `seq`,
    /// `flags` (ACK, acknowledgement and checksum 0, a fixed window), no
    /// options. At most 65,495 payload bytes.
    pub fn write_tcp(
        &mut self,
        time_ns: u64,
        src: SocketAddrV4,
        dst: SocketAddrV4,
        seq: u32,
        flags: u8,
        payload: &[u8],
    ) -> io::Result<()> {
        if 40 + payload.len() > usize::from(u16::MAX) {
            return Err(invalid("TCP payload too large for one IPv4 packet"));
        }
        let mut header = [0u8; 20];
        header[..2].copy_from_slice(&src.port().to_be_bytes());
        header[2..4].copy_from_slice(&dst.port().to_be_bytes());
        header[4..8].copy_from_slice(&seq.to_be_bytes());
        header[12] = 5 << 4; // 20-byte header
        header[13] = flags;
        header[14..16].copy_from_slice(&65_535u16.to_be_bytes());
        self.write_ipv4(time_ns, 6, src, dst, &header, payload)
    }

    /// Writes one IPv4 packet of `protocol`: its header, then `header`
    /// and `payload` (which fit: the callers check).
    fn write_ipv4(
        &mut self,
        time_ns: u64,
        protocol: u8,
        src: SocketAddrV4,
        dst: SocketAddrV4,
        header: &[u8],
        payload: &[u8],
    ) -> io::Result<()> {
        let total_len = (20 + header.len() + payload.len()) as u16;
        let mut frame = std::mem::take(&mut self.frame);
        frame.clear();
        self.link_header(&mut frame, dst);
        // IPv4 header.
        let ip_start = frame.len();
        frame.extend_from_slice(&[0x45, 0x00]);
        frame.extend_from_slice(&total_len.to_be_bytes());
        frame.extend_from_slice(&self.ip_id.to_be_bytes());
        frame.extend_from_slice(&[0x40, 0x00, 64, protocol, 0, 0]); // DF, TTL 64, checksum 0
        frame.extend_from_slice(&src.ip().octets());
        frame.extend_from_slice(&dst.ip().octets());
        let checksum = ipv4_checksum(&frame[ip_start..]);
        frame[ip_start + 10..ip_start + 12].copy_from_slice(&checksum.to_be_bytes());
        frame.extend_from_slice(header);
        frame.extend_from_slice(payload);
        if self.link == Link::Ethernet && frame.len() < ETHERNET_MIN_FRAME {
            frame.resize(ETHERNET_MIN_FRAME, 0);
        }
        self.ip_id = self.ip_id.wrapping_add(1);
        let result = self.write_record(time_ns, &frame, frame.len() as u32);
        self.frame = frame;
        result
    }

    /// Writes an arbitrary frame as-is (for malformed-frame tests); caplen = origlen = frame.len().
    pub fn write_frame(&mut self, time_ns: u64, frame: &[u8]) -> io::Result<()> {
        let len = u32::try_from(frame.len()).map_err(|_| invalid("frame too large"))?;
        self.write_record(time_ns, frame, len)
    }

    /// Writes one record holding `frame` (caplen = frame.len()) of a packet that was
    /// `origlen` bytes on the wire: `origlen > frame.len()` makes a snaplen-cut record.
    ///
    /// The record reaches the output in one `write_all`, so a buffered output
    /// larger than any record (a `BufWriter` of 128 KiB, say) holds whole
    /// records only: when a write fails (ENOSPC), the bytes that reached the
    /// file are a prefix of the record stream, never a record header followed
    /// by another record. An `InvalidInput` error (the frame or the time does
    /// not fit the format) writes nothing.
    pub fn write_record(&mut self, time_ns: u64, frame: &[u8], origlen: u32) -> io::Result<()> {
        let caplen = u32::try_from(frame.len()).map_err(|_| invalid("frame too large"))?;
        let secs = time_ns / NANOS_PER_SEC;
        let sub_ns = time_ns % NANOS_PER_SEC;
        let record = &mut self.record;
        record.clear();
        match self.format {
            Format::PcapMicros | Format::PcapNanos => {
                let secs = u32::try_from(secs)
                    .map_err(|_| invalid("time past 2106 does not fit legacy pcap"))?;
                let frac = (if self.format == Format::PcapNanos {
                    sub_ns
                } else {
                    sub_ns / 1_000
                }) as u32;
                record.extend_from_slice(&secs.to_le_bytes());
                record.extend_from_slice(&frac.to_le_bytes());
                record.extend_from_slice(&caplen.to_le_bytes());
                record.extend_from_slice(&origlen.to_le_bytes());
                record.extend_from_slice(frame);
            }
            Format::PcapNg { tsresol } => {
                let ticks = ticks(time_ns, tsresol)
                    .ok_or_else(|| invalid("time does not fit the pcapng resolution"))?;
                let padding = (4 - frame.len() % 4) % 4;
                let block_len = u32::try_from(32 + frame.len() + padding)
                    .map_err(|_| invalid("frame too large"))?;
                record.extend_from_slice(&6u32.to_le_bytes());
                record.extend_from_slice(&block_len.to_le_bytes());
                record.extend_from_slice(&0u32.to_le_bytes()); // interface 0
                record.extend_from_slice(&((ticks >> 32) as u32).to_le_bytes());
                record.extend_from_slice(&(ticks as u32).to_le_bytes());
                record.extend_from_slice(&caplen.to_le_bytes());
                record.extend_from_slice(&origlen.to_le_bytes());
                record.extend_from_slice(frame);
                record.extend_from_slice(&[0u8; 3][..padding]);
                record.extend_from_slice(&block_len.to_le_bytes());
            }
        }
        self.out.write_all(&self.record)
    }

    /// The output, as the writer holds it (nothing flushed).
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// The output, mutably (nothing flushed).
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// The output as it is, nothing flushed: for a writer given up on.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }

    /// Appends the link-layer header of a frame to `dst_ip`.
    fn link_header(&self, frame: &mut Vec<u8>, dst: SocketAddrV4) {
        let multicast = dst.ip().is_multicast();
        match self.link {
            Link::Ethernet => {
                if multicast {
                    // 01:00:5e + low 23 bits of the group address.
                    let o = dst.ip().octets();
                    frame.extend_from_slice(&[0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]);
                } else {
                    frame.extend_from_slice(&DST_MAC);
                }
                frame.extend_from_slice(&SRC_MAC);
                self.vlan_tag(frame);
                frame.extend_from_slice(&0x0800u16.to_be_bytes());
            }
            Link::LinuxSll => {
                let packet_type: u16 = if multicast { 2 } else { 0 };
                frame.extend_from_slice(&packet_type.to_be_bytes());
                frame.extend_from_slice(&1u16.to_be_bytes()); // ARPHRD_ETHER
                frame.extend_from_slice(&6u16.to_be_bytes()); // address length
                frame.extend_from_slice(&SRC_MAC);
                frame.extend_from_slice(&[0, 0]);
                self.vlan_tag(frame);
                frame.extend_from_slice(&0x0800u16.to_be_bytes());
            }
            Link::LinuxSll2 => {
                let protocol: u16 = if self.vlan.is_some() { 0x8100 } else { 0x0800 };
                frame.extend_from_slice(&protocol.to_be_bytes());
                frame.extend_from_slice(&[0, 0]); // reserved
                frame.extend_from_slice(&2u32.to_be_bytes()); // interface index
                frame.extend_from_slice(&1u16.to_be_bytes()); // ARPHRD_ETHER
                frame.push(if multicast { 2 } else { 0 }); // packet type
                frame.push(6); // address length
                frame.extend_from_slice(&SRC_MAC);
                frame.extend_from_slice(&[0, 0]);
                if let Some(vlan) = self.vlan {
                    // The tag proper: TCI, then the encapsulated ethertype.
                    frame.extend_from_slice(&(vlan & 0x0fff).to_be_bytes());
                    frame.extend_from_slice(&0x0800u16.to_be_bytes());
                }
            }
            Link::RawIp => {}
        }
    }

    /// Appends an 802.1Q tag (TPID and TCI) when a VLAN is set.
    fn vlan_tag(&self, frame: &mut Vec<u8>) {
        if let Some(vlan) = self.vlan {
            frame.extend_from_slice(&0x8100u16.to_be_bytes());
            frame.extend_from_slice(&(vlan & 0x0fff).to_be_bytes());
        }
    }
}

/// The pcap / pcapng link type number written for `link`.
fn linktype(link: Link) -> u16 {
    match link {
        Link::Ethernet => 1,
        Link::RawIp => 101,
        Link::LinuxSll => 113,
        Link::LinuxSll2 => 276,
    }
}

/// `time_ns` in units of the raw `if_tsresol` byte, truncated; `None` when it overflows u64.
fn ticks(time_ns: u64, tsresol: u8) -> Option<u64> {
    let t = u128::from(time_ns);
    let ticks = if tsresol & 0x80 == 0 {
        let units_per_sec = 10u128.checked_pow(u32::from(tsresol))?;
        t.checked_mul(units_per_sec)? / u128::from(NANOS_PER_SEC)
    } else {
        let shift = u32::from(tsresol & 0x7f);
        let units_per_sec = 1u128.checked_shl(shift)?;
        t.checked_mul(units_per_sec)? / u128::from(NANOS_PER_SEC)
    };
    u64::try_from(ticks).ok()
}

/// RFC 791 header checksum: one's complement of the one's complement sum of 16-bit words.
fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs() -> (SocketAddrV4, SocketAddrV4) {
        (
            "10.1.2.3:40000".parse().expect("literal"),
            "239.10.20.30:30001".parse().expect("literal"),
        )
    }

    #[test]
    fn legacy_ethernet_bytes() {
        let (src, dst) = addrs();
        let mut w =
            CaptureWriter::new(Vec::new(), Format::PcapMicros, Link::Ethernet).expect("header");
        w.write_udp(1_700_000_000_123_456_789, src, dst, b"hi")
            .expect("record");
        let out = w.finish().expect("finish");
        assert_eq!(&out[0..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(out.len(), 24 + 16 + 60);
        let rec = &out[24..];
        assert_eq!(
            u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]),
            1_700_000_000
        );
        assert_eq!(
            u32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]),
            123_456
        );
        let frame = &rec[16..];
        assert_eq!(&frame[0..6], &[0x01, 0x00, 0x5e, 0x0a, 20, 30]);
        assert_eq!(&frame[12..14], &[0x08, 0x00]);
        let ip = &frame[14..34];
        // A valid header sums (with its checksum) to 0xffff, i.e. checksums to 0.
        assert_eq!(ipv4_checksum(ip), 0);
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 20 + 8 + 2);
        assert_eq!(&frame[42..44], b"hi");
        assert!(frame[44..].iter().all(|&b| b == 0));
    }

    #[test]
    fn pcapng_structure() {
        let (src, dst) = addrs();
        let mut w = CaptureWriter::new(Vec::new(), Format::PcapNg { tsresol: 9 }, Link::RawIp)
            .expect("header");
        w.write_udp(5_000_000_007, src, dst, b"abc")
            .expect("record");
        let out = w.finish().expect("finish");
        // SHB 28 + IDB 32 + EPB 32 + 31 bytes padded to 32.
        assert_eq!(out.len(), 28 + 32 + 64);
        let epb = &out[60..];
        assert_eq!(&epb[0..4], &6u32.to_le_bytes());
        assert_eq!(&epb[4..8], &64u32.to_le_bytes());
        assert_eq!(&epb[60..64], &64u32.to_le_bytes());
        // Timestamp high and low words.
        assert_eq!(&epb[12..16], &1u32.to_le_bytes());
        assert_eq!(
            &epb[16..20],
            &((5_000_000_007u64 - (1 << 32)) as u32).to_le_bytes()
        );
    }

    #[test]
    fn ticks_per_resolution() {
        assert_eq!(ticks(1_500_000_000, 6), Some(1_500_000));
        assert_eq!(ticks(1_500_000_001, 9), Some(1_500_000_001));
        assert_eq!(ticks(1_000_000_000, 0x80 | 30), Some(1 << 30));
        assert_eq!(ticks(u64::MAX, 0x80 | 30), None);
        assert_eq!(ticks(1, 60), None);
    }

    #[test]
    fn rejects_oversized_payload() {
        let (src, dst) = addrs();
        let mut w = CaptureWriter::new(Vec::new(), Format::PcapNanos, Link::RawIp).expect("header");
        assert!(w.write_udp(0, src, dst, &[0; 65_507]).is_ok());
        assert!(w.write_udp(0, src, dst, &[0; 65_508]).is_err());
    }
}
