//! Link layer -> IPv4 -> UDP (or TCP) parsing of one captured frame.
//!
//! Pure, zero-copy and allocation-free: [`parse`] borrows the UDP payload
//! (or a TCP segment's) from the frame and never panics, whatever the bytes.
//! TCP segments are handed out as they are, unreassembled: a recorded
//! snapshot connection is put together by the feed that owns it.

use std::net::{Ipv4Addr, SocketAddrV4};

/// Ethertype of IPv4.
const ETHERTYPE_IPV4: u16 = 0x0800;
/// Ethertypes (TPIDs) of a VLAN tag: 802.1Q, 802.1ad, and the pre-standard QinQ tag.
const ETHERTYPE_VLANS: [u16; 3] = [0x8100, 0x88a8, 0x9100];
/// IPv4 protocol number of UDP.
const IPPROTO_UDP: u8 = 17;
/// IPv4 protocol number of TCP.
const IPPROTO_TCP: u8 = 6;
const TCP_MIN_HEADER_LEN: usize = 20;
const ETHERNET_HEADER_LEN: usize = 14;
const VLAN_TAG_LEN: usize = 4;
const SLL_HEADER_LEN: usize = 16;
const SLL2_HEADER_LEN: usize = 20;
const IPV4_MIN_HEADER_LEN: usize = 20;
const UDP_HEADER_LEN: usize = 8;

/// The link layers we read, i.e. how an IPv4 packet is framed in a capture record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Link {
    /// Ethernet II, with any number of stacked VLAN tags.
    Ethernet,
    /// No link header: the record starts with the IP header.
    RawIp,
    /// Linux "cooked" capture v1 (16-byte header), e.g. `tcpdump -i any`.
    LinuxSll,
    /// Linux "cooked" capture v2 (20-byte header).
    LinuxSll2,
}

impl Link {
    /// Maps a pcap / pcapng link type to the framing we read, `None` for the others.
    ///
    /// LINKTYPE_ETHERNET (1); LINKTYPE_RAW (101), DLT_RAW (12 and 14) and
    /// LINKTYPE_IPV4 (228) as raw IP; LINKTYPE_LINUX_SLL (113); LINKTYPE_LINUX_SLL2 (276).
    pub fn from_linktype(linktype: u32) -> Option<Link> {
        match linktype {
            1 => Some(Link::Ethernet),
            12 | 14 | 101 | 228 => Some(Link::RawIp),
            113 => Some(Link::LinuxSll),
            276 => Some(Link::LinuxSll2),
            _ => None,
        }
    }
}

/// What one frame holds, as far as a UDP/IPv4 reader cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A complete UDP/IPv4 datagram.
    Udp {
        src: SocketAddrV4,
        dst: SocketAddrV4,
        /// UDP payload, exactly as long as the UDP length field says.
        payload: &'a [u8],
    },
    /// The frame ends before its headers or its IPv4 total length (snaplen cut).
    Truncated,
    /// Another ethertype (ARP, IPv6, ...) or an IP version other than 4.
    NotIpv4,
    /// A complete TCP/IPv4 segment.
    Tcp {
        src: SocketAddrV4,
        dst: SocketAddrV4,
        /// Its sequence number and flags.
        tcp: Tcp,
        /// The segment's payload (after its options).
        payload: &'a [u8],
    },
    /// IPv4 carrying another protocol than UDP or TCP.
    NotUdp,
    /// A UDP or TCP over IPv4 fragment (MF set or fragment offset != 0); fragments are not reassembled.
    Fragment,
    /// Inconsistent headers: IHL < 5, total length < header length, bad UDP length, ...
    Malformed,
}

/// Parses one frame of `link` down to its UDP payload. Checksums are not verified.
pub fn parse(link: Link, frame: &[u8]) -> Parsed<'_> {
    match ip_packet(link, frame) {
        Ok(packet) => ipv4(packet),
        Err(not) => not,
    }
}

/// Whether `frame`'s IPv4 header, as far as it was captured, names TCP:
/// a frame [`parse`] could not read whole (cut, a fragment, malformed) is
/// then no datagram's.
pub fn names_tcp(link: Link, frame: &[u8]) -> bool {
    ip_packet(link, frame).is_ok_and(|p| p.len() >= IPV4_MIN_HEADER_LEN && p[9] == IPPROTO_TCP)
}

/// The IPv4 packet `frame` carries (from its header on, padding
/// included), or what else it is.
fn ip_packet(link: Link, frame: &[u8]) -> Result<&[u8], Parsed<'_>> {
    let (protocol, at) = match link {
        Link::Ethernet => (be16(frame, 12), ETHERNET_HEADER_LEN),
        Link::LinuxSll => (be16(frame, 14), SLL_HEADER_LEN),
        Link::LinuxSll2 => (be16(frame, 0), SLL2_HEADER_LEN),
        Link::RawIp => {
            return match frame.first() {
                None => Err(Parsed::Truncated),
                Some(b) if b >> 4 == 4 => Ok(frame),
                Some(_) => Err(Parsed::NotIpv4),
            }
        }
    };
    if frame.len() < at {
        return Err(Parsed::Truncated);
    }
    let Some(protocol) = protocol else {
        return Err(Parsed::Truncated);
    };
    after_ethertype(protocol, frame, at)
}

/// Skips any VLAN tags starting at `at` (announced by `ethertype`), then
/// the IPv4 packet.
fn after_ethertype(mut ethertype: u16, frame: &[u8], mut at: usize) -> Result<&[u8], Parsed<'_>> {
    while ETHERTYPE_VLANS.contains(&ethertype) {
        // A tag is TCI (2 bytes) then the next ethertype (2 bytes).
        let Some(next) = at.checked_add(2).and_then(|i| be16(frame, i)) else {
            return Err(Parsed::Truncated);
        };
        ethertype = next;
        at += VLAN_TAG_LEN;
    }
    if ethertype != ETHERTYPE_IPV4 {
        return Err(Parsed::NotIpv4);
    }
    frame.get(at..).ok_or(Parsed::Truncated)
}

/// Parses an IPv4 packet (possibly followed by link padding) down to UDP.
fn ipv4(packet: &[u8]) -> Parsed<'_> {
    let Some(&version_ihl) = packet.first() else {
        return Parsed::Truncated;
    };
    if version_ihl >> 4 != 4 {
        return Parsed::NotIpv4;
    }
    if packet.len() < IPV4_MIN_HEADER_LEN {
        return Parsed::Truncated;
    }
    // Told before the lengths are: a packet of another protocol is none
    // of the lines', whole, cut short or malformed.
    let protocol = packet[9];
    if protocol != IPPROTO_UDP && protocol != IPPROTO_TCP {
        return Parsed::NotUdp;
    }
    let header_len = usize::from(version_ihl & 0x0f) * 4;
    if header_len < IPV4_MIN_HEADER_LEN {
        return Parsed::Malformed;
    }
    let total_len = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
    if total_len < header_len {
        return Parsed::Malformed;
    }
    // Drops link padding (Ethernet minimum frame size, trailing FCS).
    let Some(packet) = packet.get(..total_len) else {
        return Parsed::Truncated;
    };
    let flags_fragment = u16::from_be_bytes([packet[6], packet[7]]);
    // MF flag or a nonzero fragment offset.
    if flags_fragment & 0x3fff != 0 {
        return Parsed::Fragment;
    }
    let src = Ipv4Addr::new(packet[12], packet[13], packet[14], packet[15]);
    let dst = Ipv4Addr::new(packet[16], packet[17], packet[18], packet[19]);
    let Some(udp) = packet.get(header_len..) else {
        return Parsed::Malformed;
    };
    if protocol == IPPROTO_TCP {
        return tcp(src, dst, udp);
    }
    if udp.len() < UDP_HEADER_LEN {
        return Parsed::Malformed;
    }
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < UDP_HEADER_LEN || udp_len > udp.len() {
        return Parsed::Malformed;
    }
    Parsed::Udp {
        src: SocketAddrV4::new(src, u16::from_be_bytes([udp[0], udp[1]])),
        dst: SocketAddrV4::new(dst, u16::from_be_bytes([udp[2], udp[3]])),
        payload: &udp[UDP_HEADER_LEN..udp_len],
    }
}

/// A TCP segment's header fields a reader of one connection needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tcp {
    /// Sequence number of the payload's first byte (of the SYN itself
    /// for a SYN).
    pub seq: u32,
    /// The flags byte (`FIN`, `SYN`, `RST`, …).
    pub flags: u8,
}

impl Tcp {
    /// No more data from the sender.
    pub const FIN: u8 = 0x01;
    /// Opens a connection.
    pub const SYN: u8 = 0x02;
    /// Aborts a connection.
    pub const RST: u8 = 0x04;
    /// Acknowledgement field significant.
    pub const ACK: u8 = 0x10;
    /// Push.
    pub const PSH: u8 = 0x08;
}

/// A TCP segment after its IPv4 header: ports, sequence, flags, payload.
fn tcp(src: Ipv4Addr, dst: Ipv4Addr, segment: &[u8]) -> Parsed<'_> {
    if segment.len() < TCP_MIN_HEADER_LEN {
        return Parsed::Malformed;
    }
    let header_len = usize::from(segment[12] >> 4) * 4;
    if header_len < TCP_MIN_HEADER_LEN || header_len > segment.len() {
        return Parsed::Malformed;
    }
    Parsed::Tcp {
        src: SocketAddrV4::new(src, u16::from_be_bytes([segment[0], segment[1]])),
        dst: SocketAddrV4::new(dst, u16::from_be_bytes([segment[2], segment[3]])),
        tcp: Tcp {
            seq: u32::from_be_bytes([segment[4], segment[5], segment[6], segment[7]]),
            flags: segment[13],
        },
        payload: &segment[header_len..],
    }
}

/// Big-endian u16 at `at`, `None` past the end.
fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    let end = at.checked_add(2)?;
    let b = bytes.get(at..end)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// IPv4 (20-byte header, total length 32) + UDP 10.0.0.1:12345 -> 239.1.2.3:8080,
    /// payload de ad be ef.
    const IP_UDP: [u8; 32] = [
        0x45, 0x00, 0x00, 0x20, 0x00, 0x01, 0x40, 0x00, 0x40, 0x11, 0x00,
        0x00, // ver/ihl .. checksum
        10, 0, 0, 1, // src
        239, 1, 2, 3, // dst
        0x30, 0x39, 0x1f, 0x90, 0x00, 0x0c, 0x00, 0x00, // udp header
        0xde, 0xad, 0xbe, 0xef, // payload
    ];

    const PAYLOAD: &[u8] = &[0xde, 0xad, 0xbe, 0xef];

    /// Ethernet frame around IP_UDP, padded to 60 bytes like a NIC does.
    const ETH: [u8; 60] = [
        0x01, 0x00, 0x5e, 0x01, 0x02, 0x03, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, //
        0x45, 0x00, 0x00, 0x20, 0x00, 0x01, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, //
        10, 0, 0, 1, 239, 1, 2, 3, //
        0x30, 0x39, 0x1f, 0x90, 0x00, 0x0c, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef, //
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // padding
    ];

    /// Ethernet with an 802.1ad outer tag (VLAN 100) and an 802.1Q inner tag (VLAN 200).
    const ETH_QINQ: [u8; 54] = [
        0x01, 0x00, 0x5e, 0x01, 0x02, 0x03, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, //
        0x88, 0xa8, 0x00, 0x64, 0x81, 0x00, 0x00, 0xc8, 0x08, 0x00, //
        0x45, 0x00, 0x00, 0x20, 0x00, 0x01, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, //
        10, 0, 0, 1, 239, 1, 2, 3, //
        0x30, 0x39, 0x1f, 0x90, 0x00, 0x0c, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef,
    ];

    /// Raw IPv4 with one 4-byte option (router alert): IHL 6, total length 36.
    const RAW_OPTIONS: [u8; 36] = [
        0x46, 0x00, 0x00, 0x24, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00, //
        10, 0, 0, 1, 239, 1, 2, 3, //
        0x94, 0x04, 0x00, 0x00, // option
        0x30, 0x39, 0x1f, 0x90, 0x00, 0x0c, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef,
    ];

    /// Linux cooked v1: packet type 2 (multicast), ARPHRD_ETHER, 6-byte address, protocol IPv4.
    const SLL: [u8; 48] = [
        0x00, 0x02, 0x00, 0x01, 0x00, 0x06, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x08,
        0x00, //
        0x45, 0x00, 0x00, 0x20, 0x00, 0x01, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, //
        10, 0, 0, 1, 239, 1, 2, 3, //
        0x30, 0x39, 0x1f, 0x90, 0x00, 0x0c, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef,
    ];

    /// Linux cooked v1 where the kernel left an 802.1Q tag in: protocol 0x8100, tag, IPv4.
    const SLL_VLAN: [u8; 52] = [
        0x00, 0x00, 0x00, 0x01, 0x00, 0x06, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x81,
        0x00, //
        0x00, 0x07, 0x08, 0x00, // TCI (VLAN 7), ethertype
        0x45, 0x00, 0x00, 0x20, 0x00, 0x01, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, //
        10, 0, 0, 1, 239, 1, 2, 3, //
        0x30, 0x39, 0x1f, 0x90, 0x00, 0x0c, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef,
    ];

    /// Linux cooked v2: protocol IPv4, reserved, ifindex 3, ARPHRD_ETHER, type 0, addr len 6.
    const SLL2: [u8; 52] = [
        0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x01, 0x00, 0x06, 0x02, 0x00, 0x00,
        0x00, 0x00, 0x01, 0x00, 0x00, //
        0x45, 0x00, 0x00, 0x20, 0x00, 0x01, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, //
        10, 0, 0, 1, 239, 1, 2, 3, //
        0x30, 0x39, 0x1f, 0x90, 0x00, 0x0c, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef,
    ];

    /// Ethernet ARP request (ethertype 0x0806).
    const ETH_ARP: [u8; 42] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, //
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 10, 0,
        0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
    ];

    /// Start of a raw IPv6 packet.
    const RAW_IPV6: [u8; 8] = [0x60, 0, 0, 0, 0, 8, 17, 64];

    fn expected_udp() -> Parsed<'static> {
        Parsed::Udp {
            src: "10.0.0.1:12345".parse().expect("literal"),
            dst: "239.1.2.3:8080".parse().expect("literal"),
            payload: PAYLOAD,
        }
    }

    /// IP_UDP with bytes changed: `(index, value)` pairs.
    fn ip_udp_with(changes: &[(usize, u8)]) -> [u8; 32] {
        let mut p = IP_UDP;
        for &(i, v) in changes {
            p[i] = v;
        }
        p
    }

    #[test]
    fn linktypes() {
        assert_eq!(Link::from_linktype(1), Some(Link::Ethernet));
        for raw in [12, 14, 101, 228] {
            assert_eq!(Link::from_linktype(raw), Some(Link::RawIp));
        }
        assert_eq!(Link::from_linktype(113), Some(Link::LinuxSll));
        assert_eq!(Link::from_linktype(276), Some(Link::LinuxSll2));
        assert_eq!(Link::from_linktype(0), None);
        assert_eq!(Link::from_linktype(229), None);
    }

    #[test]
    fn every_link_reaches_udp() {
        assert_eq!(parse(Link::RawIp, &IP_UDP), expected_udp());
        assert_eq!(parse(Link::Ethernet, &ETH), expected_udp());
        assert_eq!(parse(Link::Ethernet, &ETH_QINQ), expected_udp());
        assert_eq!(parse(Link::LinuxSll, &SLL), expected_udp());
        assert_eq!(parse(Link::LinuxSll, &SLL_VLAN), expected_udp());
        assert_eq!(parse(Link::LinuxSll2, &SLL2), expected_udp());
    }

    #[test]
    fn ip_options_are_skipped() {
        assert_eq!(parse(Link::RawIp, &RAW_OPTIONS), expected_udp());
    }

    #[test]
    fn ethernet_padding_is_trimmed() {
        // ETH carries 14 padding bytes after the IP packet; the payload must stop at 4 bytes.
        match parse(Link::Ethernet, &ETH) {
            Parsed::Udp { payload, .. } => assert_eq!(payload, PAYLOAD),
            other => panic!("{other:?}"),
        }
        // A frame check sequence after raw IP is dropped the same way.
        let mut with_fcs = IP_UDP.to_vec();
        with_fcs.extend_from_slice(&[1, 2, 3, 4]);
        assert_eq!(parse(Link::RawIp, &with_fcs), expected_udp());
    }

    #[test]
    fn udp_length_trims_payload() {
        // UDP length 10: only two payload bytes count, the rest of the IP payload is ignored.
        let p = ip_udp_with(&[(25, 10)]);
        match parse(Link::RawIp, &p) {
            Parsed::Udp { payload, .. } => assert_eq!(payload, &PAYLOAD[..2]),
            other => panic!("{other:?}"),
        }
        // UDP length 8: empty payload.
        let p = ip_udp_with(&[(25, 8)]);
        match parse(Link::RawIp, &p) {
            Parsed::Udp { payload, .. } => assert!(payload.is_empty()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn truncated() {
        assert_eq!(parse(Link::Ethernet, &ETH[..13]), Parsed::Truncated);
        assert_eq!(parse(Link::Ethernet, &ETH[..14]), Parsed::Truncated);
        // Cut inside the IP header.
        assert_eq!(parse(Link::Ethernet, &ETH[..30]), Parsed::Truncated);
        // Cut after the IP header but before total length.
        assert_eq!(parse(Link::Ethernet, &ETH[..45]), Parsed::Truncated);
        assert_eq!(parse(Link::RawIp, &IP_UDP[..31]), Parsed::Truncated);
        assert_eq!(parse(Link::RawIp, &[]), Parsed::Truncated);
        // Cut inside a VLAN tag.
        assert_eq!(parse(Link::Ethernet, &ETH_QINQ[..17]), Parsed::Truncated);
        assert_eq!(parse(Link::LinuxSll, &SLL[..15]), Parsed::Truncated);
        assert_eq!(parse(Link::LinuxSll, &SLL_VLAN[..18]), Parsed::Truncated);
        assert_eq!(parse(Link::LinuxSll2, &SLL2[..19]), Parsed::Truncated);
        // IHL says 24 bytes of header; only 22 captured.
        assert_eq!(parse(Link::RawIp, &RAW_OPTIONS[..22]), Parsed::Truncated);
    }

    #[test]
    fn not_ipv4() {
        assert_eq!(parse(Link::Ethernet, &ETH_ARP), Parsed::NotIpv4);
        assert_eq!(parse(Link::RawIp, &RAW_IPV6), Parsed::NotIpv4);
        // Ethertype 0x0800 but version 6 in the header.
        let mut eth = ETH;
        eth[14] = 0x65;
        assert_eq!(parse(Link::Ethernet, &eth), Parsed::NotIpv4);
        // IPv6 ethertype.
        let mut eth = ETH;
        eth[12] = 0x86;
        eth[13] = 0xdd;
        assert_eq!(parse(Link::Ethernet, &eth), Parsed::NotIpv4);
        // SLL2 carrying ARP.
        let mut sll2 = SLL2;
        sll2[1] = 0x06;
        assert_eq!(parse(Link::LinuxSll2, &sll2), Parsed::NotIpv4);
    }

    #[test]
    fn not_udp() {
        let icmp = ip_udp_with(&[(9, 1)]);
        assert_eq!(parse(Link::RawIp, &icmp), Parsed::NotUdp);
    }

    /// A TCP segment: ports, sequence, flags and the payload after its
    /// header (options included); a header offset below 20 bytes or past
    /// the packet is malformed.
    #[test]
    fn tcp_segments() {
        let mut p = vec![
            0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let mut tcp = vec![0u8; 24];
        tcp[..2].copy_from_slice(&18100u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&40000u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&7u32.to_be_bytes());
        tcp[12] = 6 << 4; // 24 bytes: 4 of options
        tcp[13] = Tcp::FIN | Tcp::ACK;
        p.extend_from_slice(&tcp);
        p.extend_from_slice(b"xyz");
        let len = p.len() as u16;
        p[2..4].copy_from_slice(&len.to_be_bytes());
        assert_eq!(
            parse(Link::RawIp, &p),
            Parsed::Tcp {
                src: "10.0.0.1:18100".parse().unwrap(),
                dst: "10.0.0.2:40000".parse().unwrap(),
                tcp: Tcp {
                    seq: 7,
                    flags: Tcp::FIN | Tcp::ACK
                },
                payload: b"xyz",
            }
        );
        for offset in [4u8, 15] {
            let mut bad = p.clone();
            bad[20 + 12] = offset << 4;
            assert_eq!(
                parse(Link::RawIp, &bad),
                Parsed::Malformed,
                "offset {offset}"
            );
        }
    }

    #[test]
    fn fragments() {
        // More-fragments flag.
        let first = ip_udp_with(&[(6, 0x20)]);
        assert_eq!(parse(Link::RawIp, &first), Parsed::Fragment);
        // Nonzero fragment offset (DF set too, which does not matter).
        let later = ip_udp_with(&[(6, 0x40), (7, 0x01)]);
        assert_eq!(parse(Link::RawIp, &later), Parsed::Fragment);
    }

    #[test]
    fn malformed() {
        // IHL 4.
        assert_eq!(
            parse(Link::RawIp, &ip_udp_with(&[(0, 0x44)])),
            Parsed::Malformed
        );
        // Total length 16 < header length 20.
        assert_eq!(
            parse(Link::RawIp, &ip_udp_with(&[(3, 16)])),
            Parsed::Malformed
        );
        // IHL 15 (60 bytes) with total length 32.
        assert_eq!(
            parse(Link::RawIp, &ip_udp_with(&[(0, 0x4f)])),
            Parsed::Malformed
        );
        // Total length 24: only 4 bytes of IP payload, no room for a UDP header.
        assert_eq!(
            parse(Link::RawIp, &ip_udp_with(&[(3, 24)])[..]),
            Parsed::Malformed
        );
        // UDP length 7.
        assert_eq!(
            parse(Link::RawIp, &ip_udp_with(&[(25, 7)])),
            Parsed::Malformed
        );
        // UDP length 13: one byte past the IP payload.
        assert_eq!(
            parse(Link::RawIp, &ip_udp_with(&[(25, 13)])),
            Parsed::Malformed
        );
        // UDP length past the IP payload while Ethernet padding follows: still malformed.
        let mut eth = ETH;
        eth[14 + 25] = 20;
        assert_eq!(parse(Link::Ethernet, &eth), Parsed::Malformed);
    }

    proptest! {
        #[test]
        fn parse_never_panics(frame in proptest::collection::vec(any::<u8>(), 0..128)) {
            for link in [Link::Ethernet, Link::RawIp, Link::LinuxSll, Link::LinuxSll2] {
                if let Parsed::Udp { payload, .. } = parse(link, &frame) {
                    prop_assert!(payload.len() <= frame.len());
                }
            }
        }

        #[test]
        fn parse_never_panics_near_valid(
            base in 0usize..6,
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            cut in any::<usize>(),
        ) {
            let frames: [(Link, &[u8]); 6] = [
                (Link::Ethernet, &ETH),
                (Link::Ethernet, &ETH_QINQ),
                (Link::RawIp, &RAW_OPTIONS),
                (Link::LinuxSll, &SLL),
                (Link::LinuxSll, &SLL_VLAN),
                (Link::LinuxSll2, &SLL2),
            ];
            let (link, bytes) = frames[base];
            let mut frame = bytes.to_vec();
            for (i, v) in edits {
                let i = i % frame.len();
                frame[i] = v;
            }
            frame.truncate(cut % (frame.len() + 1));
            // Near a valid frame, most parse to a datagram: within the frame.
            if let Parsed::Udp { payload, .. } = parse(link, &frame) {
                let inside = frame.as_ptr_range();
                let p = payload.as_ptr_range();
                prop_assert!(inside.start <= p.start && p.end <= inside.end);
            }
        }
    }

    /// The near-valid frames parse to a datagram untouched (so the bound
    /// checked above is reached).
    #[test]
    fn the_near_valid_frames_parse_untouched() {
        for (link, bytes) in [
            (Link::Ethernet, &ETH[..]),
            (Link::Ethernet, &ETH_QINQ[..]),
            (Link::RawIp, &RAW_OPTIONS[..]),
            (Link::LinuxSll, &SLL[..]),
            (Link::LinuxSll, &SLL_VLAN[..]),
            (Link::LinuxSll2, &SLL2[..]),
        ] {
            assert!(matches!(parse(link, bytes), Parsed::Udp { .. }), "{link:?}");
        }
    }
}
