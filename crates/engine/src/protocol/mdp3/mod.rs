//! CME MDP 3.0: the market data of CME Globex, SBE-encoded messages in
//! packets of one UDP datagram each. This version reads no MDP3 feed yet;
//! what is here is the packet framing, enough for `tickguard inspect` to
//! tell an MDP3 capture from the protocols it does read.
//!
//! A packet: `MsgSeqNum` (u32, +1 per packet per channel and service),
//! `SendingTime` (u64, ns since the Unix epoch), then messages back to back
//! to the end of the datagram, each `MsgSize` (u16, including itself) and an
//! SBE header: `blockLength`, `templateId`, `schemaId` (1 for CME's schema),
//! `version` (9 or later). All integers little-endian.

pub mod book;
pub mod config;
pub mod rptseq;
pub mod sequence;
pub mod status;

/// Bytes before the first message.
const PACKET_HEADER: usize = 12;
/// `MsgSize` and the SBE message header.
const MESSAGE_HEADER: usize = 10;
/// CME's SBE schema id.
const SCHEMA_ID: u16 = 1;
/// The oldest schema version with today's layouts.
const MIN_VERSION: u16 = 9;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2)?.try_into().ok().map(u16::from_le_bytes)
}

/// The datagram as an MDP3 packet, if its framing holds: at least one
/// message, each at least its headers, with CME's schema id, a version of
/// 9 or later, and a root block inside the message, the last one ending
/// exactly at the end of the datagram.
pub fn sniff(payload: &[u8]) -> Option<super::Sniff> {
    let seq = u32::from_le_bytes(payload.get(..4)?.try_into().ok()?);
    let mut at = PACKET_HEADER;
    if payload.len() < at + MESSAGE_HEADER {
        return None;
    }
    while at < payload.len() {
        let size = usize::from(u16_at(payload, at)?);
        let block = usize::from(u16_at(payload, at + 2)?);
        let fits =
            size >= MESSAGE_HEADER && at + size <= payload.len() && MESSAGE_HEADER + block <= size;
        if !fits || u16_at(payload, at + 6)? != SCHEMA_ID || u16_at(payload, at + 8)? < MIN_VERSION
        {
            return None;
        }
        at += size;
    }
    Some(super::Sniff {
        looks_like: "CME MDP3 (SBE)",
        protocol: None,
        session: None,
        sequences: Some((u64::from(seq), u64::from(seq))),
        draft_keys: "",
        draft_rank: 0,
        recovery_keys: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet of `messages`, each (blockLength, templateId, schemaId,
    /// version) with a zeroed root block.
    fn packet(seq: u32, messages: &[(u16, u16, u16, u16)]) -> Vec<u8> {
        let mut p = seq.to_le_bytes().to_vec();
        p.extend_from_slice(&1_767_603_600_000_000_000u64.to_le_bytes());
        for &(block, template, schema, version) in messages {
            let size = MESSAGE_HEADER as u16 + block;
            for v in [size, block, template, schema, version] {
                p.extend_from_slice(&v.to_le_bytes());
            }
            p.resize(p.len() + usize::from(block), 0);
        }
        p
    }

    #[test]
    fn framing_is_recognised_and_its_sequence_read() {
        let p = packet(41, &[(11, 46, 1, 13), (32, 46, 1, 9)]);
        let s = sniff(&p).unwrap();
        assert_eq!(
            (s.looks_like, s.sequences),
            ("CME MDP3 (SBE)", Some((41, 41)))
        );
    }

    #[test]
    fn anything_else_is_not_mdp3() {
        let good = packet(1, &[(11, 46, 1, 13)]);
        assert!(sniff(&good[..good.len() - 1]).is_none(), "cut short");
        let mut extra = good.clone();
        extra.push(0);
        assert!(sniff(&extra).is_none(), "a byte left over");
        assert!(
            sniff(&packet(1, &[(11, 46, 2, 13)])).is_none(),
            "another schema"
        );
        assert!(sniff(&packet(1, &[(11, 46, 1, 8)])).is_none(), "too old");
        assert!(sniff(&packet(1, &[])).is_none(), "no message");
        assert!(sniff(&[]).is_none());
        let mut small = good.clone();
        small[12..14].copy_from_slice(&4u16.to_le_bytes());
        assert!(sniff(&small).is_none(), "MsgSize below its header");
    }
}
