//! The A/B content check: the copy of a data packet that arrives second
//! (same session, sequence and count, on the other line) must carry the
//! same messages as the first. Lines that disagree mean the venue or the
//! network corrupted one of them; the sequencer cannot see it (it keeps
//! whichever copy came first), so it is checked here.
//!
//! A window of packets' fingerprints indexed by their first sequence
//! number modulo [`WINDOW`]: fixed memory, one hash of the blocks per data
//! packet, no allocation after construction. A packet is forgotten once
//! another with the same first number modulo [`WINDOW`] is kept (one
//! [`WINDOW`] sequence numbers on: with 16 messages a packet, about 256
//! packets later; or an old late copy, or another session's); a copy
//! arriving after that is not compared (counted as nothing).
//! Entries carry their session, so a new session needs no clearing: an
//! old entry never matches a new session's packet.

use super::mold::{Kind, Packet, Session};
use crate::sys::memory::prefetch;

/// Slots of the window, by first sequence number modulo it (a power of
/// two).
pub const WINDOW: usize = 4096;

/// One remembered packet.
#[derive(Clone, Copy, Default)]
struct Entry {
    /// Sequence of the first message; 0 = empty.
    sequence: u64,
    session: Session,
    count: u16,
    /// The line it came on (0 = A, 1 = B); 2 once compared.
    line: u8,
    /// Fingerprint of the message blocks.
    hash: u64,
}

/// The check's window and its findings.
pub struct LineCheck {
    entries: Box<[Entry]>,
    /// Second copies compared.
    compared: u64,
    /// Messages those second copies carried: every one a duplicate the
    /// sequencer counted (the other line's copy), not a repeat on one line.
    copied: u64,
    /// Second copies whose messages differ from the first's.
    mismatches: u64,
}

impl Default for LineCheck {
    fn default() -> LineCheck {
        LineCheck {
            entries: vec![Entry::default(); WINDOW].into_boxed_slice(),
            compared: 0,
            copied: 0,
            mismatches: 0,
        }
    }
}

impl std::fmt::Debug for LineCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineCheck")
            .field("compared", &self.compared)
            .field("copied", &self.copied)
            .field("mismatches", &self.mismatches)
            .finish()
    }
}

impl Clone for LineCheck {
    fn clone(&self) -> LineCheck {
        LineCheck {
            entries: self.entries.clone(),
            compared: self.compared,
            copied: self.copied,
            mismatches: self.mismatches,
        }
    }
}

impl LineCheck {
    /// Starts loading the entry a data packet that came on `line` will be
    /// checked against, so that the check, after the packet is applied,
    /// does not wait on memory (nothing for packets never checked).
    #[inline]
    pub fn prefetch(&self, line: usize, p: &Packet<&[u8]>) {
        if line <= 1 && matches!(p.kind(), Kind::Data(_)) {
            prefetch(&self.entries[p.sequence() as usize & (WINDOW - 1)]);
        }
    }

    /// A valid packet that came on `line` (0 = A, 1 = B; others, such as
    /// the recovery channel, are not checked). True when it is the second
    /// copy of a packet and its messages differ from the first copy's.
    #[inline]
    pub fn on_packet(&mut self, line: usize, p: &Packet<&[u8]>) -> bool {
        let Kind::Data(count) = p.kind() else {
            return false;
        };
        if line > 1 {
            return false;
        }
        let sequence = p.sequence();
        let session = p.session();
        let hash = fingerprint(p.as_bytes().get(super::mold::HEADER_LEN..).unwrap_or(&[]));
        let e = &mut self.entries[sequence as usize & (WINDOW - 1)];
        if e.sequence == sequence && e.session == session && e.count == count {
            if e.line == line as u8 || e.line == 2 {
                // The same line twice, or a third copy: a duplicate, not a
                // second copy (and the entry stays compared).
                return false;
            }
            e.line = 2;
            self.compared += 1;
            // Its messages that have a sequence: none follows 2^64 − 1
            // (blocks past it are not read, so they are no duplicates).
            let numbered = (u64::MAX - sequence).saturating_add(1);
            self.copied += u64::from(count).min(numbered);
            if e.hash != hash {
                self.mismatches += 1;
                return true;
            }
            return false;
        }
        *e = Entry {
            sequence,
            session,
            count,
            line: line as u8,
            hash,
        };
        false
    }

    /// Second copies compared so far.
    pub fn compared(&self) -> u64 {
        self.compared
    }

    /// Messages in the second copies compared so far: the other line's
    /// copies (a copy arriving after its first's slot was taken by a
    /// packet [`WINDOW`] sequence numbers on is not counted).
    pub fn copied_messages(&self) -> u64 {
        self.copied
    }

    /// Second copies that differed from the first so far.
    pub fn mismatches(&self) -> u64 {
        self.mismatches
    }
}

/// A 64-bit fingerprint of `bytes`: four lanes of eight bytes a step,
/// multiply and rotate, folded together (not cryptographic: it catches corruption, not an adversary who
/// controls both lines).
#[inline]
fn fingerprint(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    // Four independent lanes, one word each per 32 bytes, so that the
    // multiplies of a packet overlap instead of forming one chain.
    let mut h = [
        bytes.len() as u64 ^ K,
        K,
        K.rotate_left(17),
        K.rotate_left(43),
    ];
    let mut blocks = bytes.chunks_exact(32);
    for b in &mut blocks {
        for (lane, w) in h.iter_mut().zip(b.chunks_exact(8)) {
            let w = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
            *lane = (*lane ^ w).wrapping_mul(K).rotate_left(29);
        }
    }
    let mut tail = [0u8; 32];
    tail[..blocks.remainder().len()].copy_from_slice(blocks.remainder());
    for (lane, w) in h.iter_mut().zip(tail.chunks_exact(8)) {
        let w = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
        *lane = (*lane ^ w).wrapping_mul(K).rotate_left(29);
    }
    let h = h.iter().fold(0u64, |acc, &lane| {
        (acc ^ lane).wrapping_mul(K).rotate_left(31)
    });
    h ^ (h >> 29)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::itch50::mold::PacketBuilder;

    fn packet(seq: u64, messages: &[&[u8]]) -> Vec<u8> {
        let mut b = PacketBuilder::new(Session(*b"SESSION001"), seq);
        for m in messages {
            b.message(m);
        }
        b.finish()
    }

    fn check(c: &mut LineCheck, line: usize, bytes: &[u8]) -> bool {
        c.on_packet(line, &Packet::new_checked(bytes).unwrap())
    }

    /// The window is one of sequence numbers: a packet whose first number
    /// is [`WINDOW`] past another's takes its slot, and the other line's
    /// copy of the first, arriving after, is not compared.
    #[test]
    fn the_window_is_of_sequence_numbers() {
        let mut c = LineCheck::default();
        let first = packet(1, &[b"Sabcdefghijk"]);
        check(&mut c, 0, &first);
        check(&mut c, 0, &packet(1 + WINDOW as u64, &[b"Sabcdefghijk"]));
        check(&mut c, 1, &first);
        assert_eq!((c.compared(), c.copied_messages()), (0, 0));
        // Within the window the copy is compared.
        let second = packet(2, &[b"Sabcdefghijk"]);
        check(&mut c, 0, &second);
        check(
            &mut c,
            0,
            &packet(1 + WINDOW as u64 / 2, &[b"Sabcdefghijk"]),
        );
        check(&mut c, 1, &second);
        assert_eq!((c.compared(), c.copied_messages()), (1, 1));
    }

    #[test]
    fn identical_copies_agree_and_a_changed_byte_is_a_mismatch() {
        let mut c = LineCheck::default();
        let a = packet(5, &[b"Sabcdefghijk", b"Sxyz0123456789"]);
        assert!(!check(&mut c, 0, &a));
        assert!(!check(&mut c, 1, &a));
        assert_eq!((c.compared(), c.mismatches()), (1, 0));
        assert_eq!(c.copied_messages(), 2, "the second copy's two messages");
        // A third and a fourth copy (each line again) are not compared again.
        assert!(!check(&mut c, 1, &a));
        assert!(!check(&mut c, 0, &a));
        assert_eq!((c.compared(), c.copied_messages()), (1, 2));

        let b = packet(7, &[b"Sabcdefghijk", b"Sxyz0123456789"]);
        let mut b2 = b.clone();
        let last = b2.len() - 1;
        b2[last] ^= 1;
        assert!(!check(&mut c, 1, &b));
        assert!(check(&mut c, 0, &b2));
        assert_eq!((c.compared(), c.mismatches()), (2, 1));
        assert_eq!(c.copied_messages(), 4, "a differing copy is a copy too");
    }

    #[test]
    fn same_line_repeats_recovery_and_control_packets_are_not_compared() {
        let mut c = LineCheck::default();
        let a = packet(9, &[b"Sabcdefghijk"]);
        let mut other = a.clone();
        let last = other.len() - 1;
        other[last] ^= 0x20;
        assert!(!check(&mut c, 0, &a));
        assert!(!check(&mut c, 0, &other), "same line: a duplicate");
        assert!(
            !check(&mut c, 2, &other),
            "recovery channel: not a line copy"
        );
        let hb = PacketBuilder::new(Session(*b"SESSION001"), 10).finish();
        assert!(!check(&mut c, 0, &hb));
        assert!(!check(&mut c, 1, &hb));
        assert_eq!((c.compared(), c.copied_messages()), (0, 0));
    }

    #[test]
    fn a_different_count_or_session_is_another_packet() {
        let mut c = LineCheck::default();
        let a = packet(3, &[b"Sabcdefghijk"]);
        let two = packet(3, &[b"Sabcdefghijk", b"Sabcdefghijk"]);
        assert!(!check(&mut c, 0, &a));
        assert!(!check(&mut c, 1, &two));
        let mut b = PacketBuilder::new(Session(*b"SESSION002"), 3);
        b.message(b"Sabcdefghijq");
        assert!(!check(&mut c, 0, &b.finish()));
        assert_eq!(c.mismatches(), 0);
    }

    #[test]
    fn fingerprints_differ_for_every_single_bit_flip() {
        let base: Vec<u8> = (0..37u8).collect();
        let h = fingerprint(&base);
        for i in 0..base.len() {
            for bit in 0..8 {
                let mut b = base.clone();
                b[i] ^= 1 << bit;
                assert_ne!(fingerprint(&b), h, "byte {i} bit {bit}");
            }
        }
        assert_ne!(fingerprint(&base[..36]), h);
    }
}
