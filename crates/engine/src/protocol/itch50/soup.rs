//! SoupBinTCP 4.00: the TCP framing GLIMPSE (and other Nasdaq TCP
//! services) run over. Pure: bytes in, packets out, no I/O and no clock.
//!
//! ```text
//! packet         | 0..2 length u16 | 2 type | 3.. payload |
//! L login        | 3..9 username | 9..19 password | 19..29 session | 29..49 sequence |
//! A accepted     | 3..13 session | 13..33 sequence |
//! J rejected     | 3 reason (`A` not authorized, `S` session not available) |
//! ```
//!
//! `length` is big-endian and counts the bytes after itself (the type and
//! the payload), so a well-formed packet has length ≥ 1; TCP splits and
//! merges packets freely, which [`Reader`] undoes with at most one partial
//! packet buffered. Server packets: `+` debug, `A`, `J`, `S` sequenced
//! data (one higher-level message), `U` unsequenced data, `H` heartbeat,
//! `Z` end of session; client packets: `+`, `L`, `U`, `R` heartbeat, `O`
//! logout.
//!
//! Fields are ASCII. The spec lets a server pad `A`'s session and sequence
//! on the left with spaces, or leave them left-justified, and some servers
//! pad with NULs, so one rule reads every such field here: a Numeric field
//! is valid when, trimmed of spaces and NULs at both ends ([`trim`]), 1 to
//! 20 ASCII digits remain whose value fits a `u64` ([`numeric`]); sessions
//! compare after the same trim. The encoders write what this project's
//! client and simulated server send: username and password left-justified,
//! requested session all spaces (the current one), numbers right-justified
//! with spaces.

/// Bytes of the length field.
pub const LENGTH_LEN: usize = 2;
/// Most bytes one packet occupies on the wire: the length field and the
/// largest length (type and payload).
pub const MAX_PACKET: usize = LENGTH_LEN + u16::MAX as usize;
/// Most payload bytes one packet carries (its type takes one).
pub const MAX_PAYLOAD: usize = u16::MAX as usize - 1;
/// Bytes of a session field.
pub const SESSION_LEN: usize = 10;
/// Bytes of a sequence number field.
pub const SEQUENCE_LEN: usize = 20;
/// Bytes of the Login Request's username field.
pub const USERNAME_LEN: usize = 6;
/// Bytes of the Login Request's password field.
pub const PASSWORD_LEN: usize = 10;
/// Payload bytes of a 4.00 Login Request (4.10 appends 5 more).
pub const LOGIN_PAYLOAD_LEN: usize = USERNAME_LEN + PASSWORD_LEN + SESSION_LEN + SEQUENCE_LEN;
/// Payload bytes of a Login Accepted.
pub const ACCEPTED_PAYLOAD_LEN: usize = SESSION_LEN + SEQUENCE_LEN;

/// Packet type bytes.
pub mod kind {
    /// `+`: free text, either direction; ignored.
    pub const DEBUG: u8 = b'+';
    /// `A`, server: the session and the next sequenced message's number.
    pub const LOGIN_ACCEPTED: u8 = b'A';
    /// `J`, server: one reason byte.
    pub const LOGIN_REJECTED: u8 = b'J';
    /// `S`, server: one message of the session's sequence.
    pub const SEQUENCED: u8 = b'S';
    /// `U`, either direction: one message outside the sequence.
    pub const UNSEQUENCED: u8 = b'U';
    /// `H`, server: liveness.
    pub const SERVER_HEARTBEAT: u8 = b'H';
    /// `Z`, server: the session has ended; no more `S`.
    pub const END_OF_SESSION: u8 = b'Z';
    /// `L`, client: username, password, session and sequence asked for.
    pub const LOGIN_REQUEST: u8 = b'L';
    /// `R`, client: liveness.
    pub const CLIENT_HEARTBEAT: u8 = b'R';
    /// `O`, client: goodbye.
    pub const LOGOUT: u8 = b'O';
}

/// `J` reason: the username or password was refused.
pub const NOT_AUTHORIZED: u8 = b'A';
/// `J` reason: the requested session is not available.
pub const SESSION_NOT_AVAILABLE: u8 = b'S';

/// Field offsets within payloads (from the byte after the type).
mod field {
    use std::ops::Range;
    pub const USERNAME: Range<usize> = 0..6;
    pub const PASSWORD: Range<usize> = 6..16;
    pub const REQUESTED_SESSION: Range<usize> = 16..26;
    pub const REQUESTED_SEQUENCE: Range<usize> = 26..46;
    pub const SESSION: Range<usize> = 0..10;
    pub const SEQUENCE: Range<usize> = 10..30;
}

/// `field` without the spaces and NULs at either end.
pub fn trim(field: &[u8]) -> &[u8] {
    let pad = |b: &u8| *b == b' ' || *b == 0;
    let start = field.iter().position(|b| !pad(b)).unwrap_or(field.len());
    let end = field.iter().rposition(|b| !pad(b)).map_or(start, |i| i + 1);
    &field[start..end]
}

/// A Numeric field's value: `None` unless, [`trim`]med, it is 1 to 20
/// ASCII digits whose value fits a `u64` (leading zeros allowed).
pub fn numeric(field: &[u8]) -> Option<u64> {
    let digits = trim(field);
    if digits.is_empty() || digits.len() > SEQUENCE_LEN {
        return None;
    }
    digits.iter().try_fold(0u64, |v, &d| {
        if !d.is_ascii_digit() {
            return None;
        }
        v.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// One packet as [`Reader`] found it: the bytes after the length field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    body: &'a [u8],
}

impl<'a> Frame<'a> {
    /// A packet whose length field was `body.len()`.
    pub fn new(body: &'a [u8]) -> Frame<'a> {
        Frame { body }
    }

    /// The type byte; `None` for a length field of 0 (malformed: a
    /// packet has at least its type).
    #[inline]
    pub fn kind(&self) -> Option<u8> {
        self.body.first().copied()
    }

    /// The bytes after the type (empty for a length field of 0 or 1).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        self.body.get(1..).unwrap_or(&[])
    }

    /// The type and the payload: what the length field counted.
    #[inline]
    pub fn body(&self) -> &'a [u8] {
        self.body
    }
}

/// Cuts a byte stream into packets. Memory is bounded and allocated once:
/// at most one partial packet ([`MAX_PACKET`] bytes) is kept between
/// reads. A packet lying wholly inside one read is handed out in place;
/// only a packet straddling reads is copied.
#[derive(Debug)]
pub struct Reader {
    /// The partial packet, from its length field: `partial[..len]`.
    partial: Box<[u8]>,
    len: usize,
    /// A callback asked to stop: later bytes are ignored.
    done: bool,
}

impl Default for Reader {
    fn default() -> Reader {
        Reader::new()
    }
}

impl Reader {
    /// An empty reader (allocates its [`MAX_PACKET`]-byte buffer).
    pub fn new() -> Reader {
        Reader {
            partial: vec![0; MAX_PACKET].into_boxed_slice(),
            len: 0,
            done: false,
        }
    }

    /// Bytes of a partial packet held for the next read (≤ [`MAX_PACKET`]).
    pub fn buffered(&self) -> usize {
        self.len
    }

    /// True once a callback returned false.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Feeds the next bytes of the stream: calls `f` with each packet they
    /// complete, in order. `f` returning false stops the reader for good
    /// (the rest of `bytes` and every later read are ignored). Returns
    /// false once stopped.
    pub fn push(&mut self, mut bytes: &[u8], mut f: impl FnMut(Frame<'_>) -> bool) -> bool {
        if self.done {
            return false;
        }
        if self.len > 0 {
            // Complete the length field, then the packet it announces.
            if self.len < LENGTH_LEN {
                let take = (LENGTH_LEN - self.len).min(bytes.len());
                self.partial[self.len..self.len + take].copy_from_slice(&bytes[..take]);
                self.len += take;
                bytes = &bytes[take..];
                if self.len < LENGTH_LEN {
                    return true;
                }
            }
            let need = packet_len(&self.partial);
            let take = (need - self.len).min(bytes.len());
            self.partial[self.len..self.len + take].copy_from_slice(&bytes[..take]);
            self.len += take;
            bytes = &bytes[take..];
            if self.len < need {
                return true;
            }
            self.len = 0;
            if !f(Frame::new(&self.partial[LENGTH_LEN..need])) {
                self.done = true;
                return false;
            }
        }
        while bytes.len() >= LENGTH_LEN {
            let need = packet_len(bytes);
            let Some((packet, rest)) = bytes.split_at_checked(need) else {
                break;
            };
            if !f(Frame::new(&packet[LENGTH_LEN..])) {
                self.done = true;
                return false;
            }
            bytes = rest;
        }
        self.partial[..bytes.len()].copy_from_slice(bytes);
        self.len = bytes.len();
        true
    }
}

/// Wire bytes of the packet whose length field starts `b` (≥ 2 bytes).
#[inline]
fn packet_len(b: &[u8]) -> usize {
    LENGTH_LEN + usize::from(u16::from_be_bytes([b[0], b[1]]))
}

/// `value` left-justified in `field`, space-padded; bytes past the field
/// are cut.
fn put_left(field: &mut [u8], value: &[u8]) {
    field.fill(b' ');
    let n = value.len().min(field.len());
    field[..n].copy_from_slice(&value[..n]);
}

/// `n` in decimal, right-justified in `field` (20 bytes hold any `u64`),
/// space-padded.
fn put_right(field: &mut [u8], mut n: u64) {
    field.fill(b' ');
    for at in (0..field.len()).rev() {
        field[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
}

/// A packet of no payload.
const fn control(kind: u8) -> [u8; 3] {
    [0, 1, kind]
}

/// `R`.
pub const CLIENT_HEARTBEAT: [u8; 3] = control(kind::CLIENT_HEARTBEAT);
/// `O`.
pub const LOGOUT: [u8; 3] = control(kind::LOGOUT);
/// `H`.
pub const SERVER_HEARTBEAT: [u8; 3] = control(kind::SERVER_HEARTBEAT);
/// `Z`.
pub const END_OF_SESSION: [u8; 3] = control(kind::END_OF_SESSION);

/// A 4.00 Login Request (length 47): `user` and `password` left-justified
/// and space-padded (cut at 6 and 10 bytes: the caller checks their
/// lengths), the current session (all spaces), sequence 1 right-justified.
pub fn login(user: &[u8], password: &[u8]) -> [u8; 49] {
    let mut p = [b' '; 49];
    p[..3].copy_from_slice(&[0, 1 + LOGIN_PAYLOAD_LEN as u8, kind::LOGIN_REQUEST]);
    let payload = &mut p[3..];
    put_left(&mut payload[field::USERNAME], user);
    put_left(&mut payload[field::PASSWORD], password);
    put_right(&mut payload[field::REQUESTED_SEQUENCE], 1);
    p
}

/// A Login Accepted (length 31): `session` as given, `sequence` (the next
/// `S` message's number) right-justified and space-padded.
pub fn login_accepted(session: &[u8; SESSION_LEN], sequence: u64) -> [u8; 33] {
    let mut p = [b' '; 33];
    p[..3].copy_from_slice(&[0, 1 + ACCEPTED_PAYLOAD_LEN as u8, kind::LOGIN_ACCEPTED]);
    let payload = &mut p[3..];
    payload[field::SESSION].copy_from_slice(session);
    put_right(&mut payload[field::SEQUENCE], sequence);
    p
}

/// A Login Rejected (length 2) with `reason` ([`NOT_AUTHORIZED`],
/// [`SESSION_NOT_AVAILABLE`]).
pub fn login_rejected(reason: u8) -> [u8; 4] {
    [0, 2, kind::LOGIN_REJECTED, reason]
}

/// Appends a packet of `kind` carrying `payload` to `out`.
///
/// # Panics
/// When `payload` is longer than [`MAX_PAYLOAD`].
pub fn packet(kind: u8, payload: &[u8], out: &mut Vec<u8>) {
    assert!(
        payload.len() <= MAX_PAYLOAD,
        "SoupBinTCP payload of {} bytes",
        payload.len()
    );
    out.extend_from_slice(&(1 + payload.len() as u16).to_be_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
}

/// Appends an `S` carrying `msg` to `out` (panics past [`MAX_PAYLOAD`]).
pub fn sequenced(msg: &[u8], out: &mut Vec<u8>) {
    packet(kind::SEQUENCED, msg, out)
}

/// Appends a `U` carrying `msg` to `out` (panics past [`MAX_PAYLOAD`]).
pub fn unsequenced(msg: &[u8], out: &mut Vec<u8>) {
    packet(kind::UNSEQUENCED, msg, out)
}

/// Appends a `+` carrying `text` to `out` (panics past [`MAX_PAYLOAD`]).
pub fn debug(text: &[u8], out: &mut Vec<u8>) {
    packet(kind::DEBUG, text, out)
}

/// A Login Request as a server reads it. Fields are as sent (padded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Login {
    /// Left-justified, space-padded.
    pub user: [u8; USERNAME_LEN],
    /// Left-justified, space-padded.
    pub password: [u8; PASSWORD_LEN],
    /// The session asked for; all spaces for the current one.
    pub session: [u8; SESSION_LEN],
    /// The first `S` message asked for (Numeric; 0 asks for new ones only).
    pub sequence: u64,
}

/// Reads an `L` payload (the bytes after the type): `None` when shorter
/// than 46 bytes or when the sequence is not Numeric. Bytes past 46 (the
/// 4.10 heartbeat timeout) are ignored.
pub fn parse_login(payload: &[u8]) -> Option<Login> {
    let p = payload.first_chunk::<LOGIN_PAYLOAD_LEN>()?;
    Some(Login {
        user: p[field::USERNAME].try_into().ok()?,
        password: p[field::PASSWORD].try_into().ok()?,
        session: p[field::REQUESTED_SESSION].try_into().ok()?,
        sequence: numeric(&p[field::REQUESTED_SEQUENCE])?,
    })
}

/// `A`'s fields read from its payload: (session as sent, sequence);
/// `None` when shorter than 30 bytes or when the sequence is not Numeric.
/// Bytes past 30 are ignored.
pub fn parse_accepted(payload: &[u8]) -> Option<([u8; SESSION_LEN], u64)> {
    let payload = payload.first_chunk::<ACCEPTED_PAYLOAD_LEN>()?;
    let session = payload[field::SESSION].try_into().ok()?;
    Some((session, numeric(&payload[field::SEQUENCE])?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every packet of `stream` when fed as one read: (type, payload).
    fn frames(stream: &[u8]) -> Vec<(Option<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        let mut r = Reader::new();
        assert!(r.push(stream, |f| {
            out.push((f.kind(), f.payload().to_vec()));
            true
        }));
        assert_eq!(r.buffered(), 0, "the stream ends on a packet boundary");
        out
    }

    #[test]
    fn numeric_trims_spaces_and_nuls_at_both_ends() {
        assert_eq!(numeric(b"                   1"), Some(1));
        assert_eq!(numeric(b"1                   "), Some(1));
        assert_eq!(
            numeric(b"\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x0042"),
            Some(42)
        );
        assert_eq!(numeric(b"42\0\0\0"), Some(42));
        assert_eq!(numeric(b" \0 7 \0"), Some(7));
        assert_eq!(numeric(b"00000000000000000001"), Some(1), "20 digits");
        assert_eq!(numeric(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(numeric(b"18446744073709551616"), None, "u64 overflow");
        assert_eq!(numeric(b"99999999999999999999"), None, "u64 overflow");
        assert_eq!(numeric(b"000000000000000000001"), None, "21 digits");
        assert_eq!(numeric(b""), None, "empty");
        assert_eq!(numeric(b"          "), None, "all spaces");
        assert_eq!(numeric(b"\0\0"), None, "all NULs");
        assert_eq!(numeric(b"1 2"), None, "a space inside");
        assert_eq!(numeric(b"1\x002"), None, "a NUL inside");
        assert_eq!(numeric(b"+1"), None);
        assert_eq!(numeric(b"-1"), None);
        assert_eq!(numeric(b"\t1"), None, "only spaces and NULs are padding");
        assert_eq!(numeric(b"0"), Some(0));
    }

    #[test]
    fn trim_strips_padding_only() {
        assert_eq!(trim(b"  AB C\0\0"), b"AB C");
        assert_eq!(trim(b"\0 X"), b"X");
        assert_eq!(trim(b"     "), b"");
        assert_eq!(trim(b""), b"");
        assert_eq!(trim(b"SESSION001"), b"SESSION001");
    }

    #[test]
    fn login_request_is_the_4_00_layout() {
        let l = login(b"user", b"pw");
        assert_eq!(&l[..3], &[0, 47, b'L']);
        assert_eq!(&l[3..9], b"user  ");
        assert_eq!(&l[9..19], b"pw        ");
        assert_eq!(&l[19..29], b"          ");
        assert_eq!(&l[29..49], b"                   1");
        let f = frames(&l);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].0, Some(b'L'));
        let parsed = parse_login(&f[0].1).unwrap();
        assert_eq!(
            parsed,
            Login {
                user: *b"user  ",
                password: *b"pw        ",
                session: *b"          ",
                sequence: 1,
            }
        );
        assert_eq!(trim(&parsed.session), b"");
        // Full-width fields fill their field; longer ones are cut.
        let l = login(b"ABCDEFGH", b"0123456789xyz");
        assert_eq!(&l[3..19], b"ABCDEF0123456789");
    }

    #[test]
    fn parse_login_accepts_4_10_and_refuses_short_or_bad_sequence() {
        let l = login(b"u", b"p");
        let mut longer = l[3..].to_vec();
        longer.extend_from_slice(b"  100");
        assert_eq!(longer.len(), 51);
        assert_eq!(parse_login(&longer).map(|l| l.sequence), Some(1));
        assert_eq!(parse_login(&l[3..48]), None, "45 bytes");
        let mut bad = l;
        bad[48] = b'x';
        assert_eq!(parse_login(&bad[3..]), None);
        let mut zero = l;
        zero[48] = b'0';
        assert_eq!(parse_login(&zero[3..]).map(|l| l.sequence), Some(0));
    }

    #[test]
    fn server_encoders_round_trip() {
        let mut s = Vec::new();
        debug(b"hello", &mut s);
        s.extend_from_slice(&login_accepted(b"SESSION001", 1));
        sequenced(b"msg", &mut s);
        unsequenced(b"u", &mut s);
        s.extend_from_slice(&SERVER_HEARTBEAT);
        s.extend_from_slice(&login_rejected(SESSION_NOT_AVAILABLE));
        s.extend_from_slice(&END_OF_SESSION);
        s.extend_from_slice(&CLIENT_HEARTBEAT);
        s.extend_from_slice(&LOGOUT);
        let f = frames(&s);
        let kinds: Vec<u8> = f.iter().map(|(k, _)| k.unwrap()).collect();
        assert_eq!(kinds, b"+ASUHJZRO");
        assert_eq!(f[0].1, b"hello");
        assert_eq!(f[1].1, b"SESSION001                   1");
        assert_eq!(parse_accepted(&f[1].1), Some((*b"SESSION001", 1)));
        assert_eq!(f[2].1, b"msg");
        assert_eq!(f[3].1, b"u");
        assert_eq!(f[5].1, b"S");
        assert!(f[4].1.is_empty() && f[6].1.is_empty());

        let a = login_accepted(b"\0\0\0\0\0\0\0\0\0\0", u64::MAX);
        assert_eq!(&a[..3], &[0, 31, b'A']);
        assert_eq!(&a[13..], b"18446744073709551615");
        assert_eq!(parse_accepted(&a[3..]), Some(([0; 10], u64::MAX)));
        assert_eq!(
            &login_accepted(b"S         ", 0)[13..],
            b"                   0"
        );
        assert_eq!(parse_accepted(&a[3..32]), None, "29 bytes");
    }

    #[test]
    fn largest_packet_and_empty_payload() {
        let mut s = Vec::new();
        let big = vec![7u8; MAX_PAYLOAD];
        sequenced(&big, &mut s);
        assert_eq!(&s[..2], &[0xff, 0xff]);
        assert_eq!(s.len(), MAX_PACKET);
        sequenced(b"", &mut s);
        let f = frames(&s);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].1, big);
        assert_eq!((f[1].0, f[1].1.len()), (Some(b'S'), 0));
    }

    #[test]
    #[should_panic(expected = "payload of 65535 bytes")]
    fn a_payload_too_long_panics() {
        sequenced(&vec![0; MAX_PAYLOAD + 1], &mut Vec::new());
    }

    #[test]
    fn a_length_of_zero_is_a_frame_without_type() {
        let f = frames(&[0, 0, 0, 1, b'H']);
        assert_eq!(f, vec![(None, vec![]), (Some(b'H'), vec![])]);
    }

    /// Packets come out the same, in order, whatever the reads; only a
    /// packet straddling reads is buffered, and only until it completes.
    #[test]
    fn any_split_gives_the_same_packets() {
        let mut s = Vec::new();
        s.extend_from_slice(&login_accepted(b"SESSION001", 1));
        for i in 0..50u8 {
            sequenced(&vec![i; usize::from(i) * 37], &mut s);
            s.extend_from_slice(&[0, 0]);
        }
        sequenced(&vec![9; MAX_PAYLOAD], &mut s);
        s.extend_from_slice(&SERVER_HEARTBEAT);
        let whole = frames(&s);
        for step in [1, 2, 3, 7, 1000, 65_537, 70_000] {
            let mut r = Reader::new();
            let mut got = Vec::new();
            for chunk in s.chunks(step) {
                r.push(chunk, |f| {
                    got.push((f.kind(), f.payload().to_vec()));
                    true
                });
                assert!(r.buffered() <= MAX_PACKET);
            }
            assert_eq!(got, whole, "reads of {step}");
            assert_eq!(r.buffered(), 0);
        }
    }

    #[test]
    fn a_packet_inside_one_read_is_not_copied() {
        let mut s = Vec::new();
        sequenced(b"abc", &mut s);
        sequenced(b"defg", &mut s);
        let mut r = Reader::new();
        let base = s.as_ptr() as usize;
        let mut at = Vec::new();
        r.push(&s, |f| {
            at.push(f.payload().as_ptr() as usize - base);
            true
        });
        assert_eq!(at, [3, 9], "payloads point into the read");
        // A straddling packet comes from the buffer, the next one in place.
        let mut r = Reader::new();
        r.push(&s[..4], |_| true);
        assert_eq!(r.buffered(), 4);
        let rest = &s[4..];
        let mut from_read = Vec::new();
        r.push(rest, |f| {
            let p = f.payload().as_ptr() as usize;
            from_read.push(p >= rest.as_ptr() as usize && p < rest.as_ptr() as usize + rest.len());
            true
        });
        assert_eq!(from_read, [false, true]);
        assert_eq!(r.buffered(), 0);
    }

    #[test]
    fn stopping_ignores_the_rest_for_good() {
        let mut s = Vec::new();
        for m in [b"1", b"2", b"3"] {
            sequenced(m, &mut s);
        }
        let mut r = Reader::new();
        let mut seen = Vec::new();
        let going = r.push(&s, |f| {
            seen.push(f.payload()[0]);
            f.payload() != b"2"
        });
        assert!(!going && r.is_done());
        assert_eq!(seen, b"12");
        assert!(!r.push(&s, |_| panic!("stopped")));
        // Stopping on a packet completed from the buffer.
        let mut r = Reader::new();
        r.push(&s[..2], |_| true);
        assert!(!r.push(&s[2..], |_| false));
        assert!(r.is_done());
    }
}
