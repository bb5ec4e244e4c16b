//! The GLIMPSE 5.0 snapshot client's protocol logic for one connection:
//! bytes in, the snapshot's messages and one outcome out. Pure: the caller
//! owns the socket and the timers and reports what they saw.
//!
//! GLIMPSE runs over SoupBinTCP ([`super::soup`]). After the client's
//! Login Request the server answers `A` (or `J`), then sends one ITCH 5.0
//! message per `S` packet and ends with End of Snapshot, an `S` carrying:
//!
//! ```text
//! G       | 0 type `G` | 1..21 sequence (Numeric ASCII) |
//! ```
//!
//! (no locate, no timestamp). Its sequence N is the first TotalView
//! message the snapshot does not reflect: the live feed is applied from N.
//!
//! How a connection ends ([`End`]); the first rule that applies wins and
//! the outcome is decided by the packet (or event) that decides it:
//!
//! - nothing at all came from the server before the connection ended or a
//!   timer fired: [`Failure::Refused`];
//! - `J`: [`Failure::Rejected`], with its reason byte;
//! - framing or protocol broken: [`Failure::Malformed`]. Before `A` only
//!   `+` may come; `A` must carry a Numeric sequence of 1; after `A` only
//!   `+`, `H`, `U`, `S` and `Z` may come; a packet of length 0, a type
//!   servers do not send, an empty `S`, an `S` whose message is of a known
//!   ITCH type and invalid ([`message::check`]), and a `G` shorter than 21
//!   bytes or whose sequence is not Numeric or is 0 are malformed;
//! - `A` for another session than the feed's: [`Failure::Session`];
//! - more `S` messages before `G` than allowed: [`Failure::TooLarge`];
//! - `Z`, the connection ending or a timer firing after some bytes but
//!   before `G`: [`Failure::Closed`].
//!
//! Decisions beyond the spec: `A` and `G` longer than their layout are
//! accepted and the extra bytes ignored (as SoupBinTCP 4.10 lengthens
//! `L`); a `J` without a reason byte is still a rejection (reason `None`);
//! `max_messages` is a plain bound (0 allows none); `G` is not counted in
//! [`Client::messages`]; `S` messages of unknown types are counted but not
//! applied. Everything after the outcome is ignored.

use super::message::{self, Message};
use super::soup::{self, kind, Frame, Reader, SESSION_LEN};
use super::Reject;

/// Type of the End of Snapshot message.
pub const END_OF_SNAPSHOT: u8 = b'G';
/// Bytes of End of Snapshot: the type and a 20-byte sequence.
pub const END_OF_SNAPSHOT_LEN: usize = 21;

/// Why a snapshot connection failed (counter arrays are indexed by it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Failure {
    /// The connection ended, or a timer fired, before any byte came.
    Refused,
    /// The server sent Login Rejected.
    Rejected,
    /// Login Accepted named another session than the feed's.
    Session,
    /// The server broke the framing or the protocol.
    Malformed,
    /// More messages than `max_messages` before End of Snapshot.
    TooLarge,
    /// End of session, the connection ending or a timer firing after some
    /// bytes and before End of Snapshot.
    Closed,
    /// The caller gave up the wait (a new session began). Never produced
    /// by [`Client`].
    Abandoned,
}

impl Failure {
    /// Every class, in a fixed order.
    pub const ALL: [Failure; 7] = [
        Failure::Refused,
        Failure::Rejected,
        Failure::Session,
        Failure::Malformed,
        Failure::TooLarge,
        Failure::Closed,
        Failure::Abandoned,
    ];

    /// Position in [`Failure::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Stable snake_case name used in counters, logs and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Refused => "refused",
            Failure::Rejected => "rejected",
            Failure::Session => "session",
            Failure::Malformed => "malformed",
            Failure::TooLarge => "too_large",
            Failure::Closed => "closed",
            Failure::Abandoned => "abandoned",
        }
    }
}

/// What one snapshot connection checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The feed's MoldUDP64 session that `A` must name (compared after
    /// [`soup::trim`]); `None`: any session.
    pub session: Option<[u8; SESSION_LEN]>,
    /// Most `S` messages before End of Snapshot (unknown types included).
    pub max_messages: u64,
}

/// How a snapshot connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// End of Snapshot came.
    Snapshot {
        /// N: the first TotalView sequence the snapshot does not reflect.
        next: u64,
        /// `S` messages before `G`, unknown types included.
        messages: u64,
        /// The session as `A` sent it (padding kept).
        session: [u8; SESSION_LEN],
    },
    /// No snapshot.
    Failed {
        /// Why, for counters.
        class: Failure,
        /// Short human detail, e.g. "login rejected: not authorized".
        detail: &'static str,
        /// What the detail names besides its text.
        cause: Cause,
    },
}

/// What a failure's detail names besides its text: logged after it
/// ([`logged_detail`]), for the operator's question to the venue or to
/// the network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cause {
    /// Nothing more.
    #[default]
    None,
    /// `J`'s reason byte.
    Rejected(u8),
    /// The session `A` named (padding kept).
    Session([u8; SESSION_LEN]),
    /// The sequence `A` (or End of Snapshot) named.
    Sequence(u64),
    /// The OS error of a failed connect, write or read (live only: a
    /// recording holds the reset, not its cause).
    Os(i32),
}

impl Cause {
    /// `J`'s reason byte, if a Login Rejected ended it.
    pub fn rejected(self) -> Option<u8> {
        match self {
            Cause::Rejected(r) => Some(r),
            _ => None,
        }
    }
}

impl End {
    /// The failure class; `None` for a snapshot.
    pub fn failure(&self) -> Option<Failure> {
        match self {
            End::Snapshot { .. } => None,
            End::Failed { class, .. } => Some(*class),
        }
    }
}

/// A failure's `detail` as logged, with its cause: a Login Rejected whose
/// reason byte SoupBinTCP does not define carries that byte, in hex; a
/// Login Accepted for another session or sequence, what it named (bytes
/// outside printable ASCII escaped); a connection's failure, the OS
/// error.
pub fn logged_detail(detail: &'static str, cause: Cause) -> std::borrow::Cow<'static, str> {
    match cause {
        Cause::Rejected(r) if r != soup::NOT_AUTHORIZED && r != soup::SESSION_NOT_AVAILABLE => {
            format!("{detail} 0x{r:02x}").into()
        }
        Cause::Session(s) => format!("{detail}: {}", soup::trim(&s).escape_ascii()).into(),
        Cause::Sequence(n) => format!("{detail}: {n}").into(),
        Cause::Os(e) => format!("{detail}: {}", std::io::Error::from_raw_os_error(e)).into(),
        Cause::Rejected(_) | Cause::None => detail.into(),
    }
}

fn failed(class: Failure, detail: &'static str, cause: Cause) -> Option<End> {
    Some(End::Failed {
        class,
        detail,
        cause,
    })
}

fn malformed(detail: &'static str) -> Option<End> {
    failed(Failure::Malformed, detail, Cause::None)
}

/// One snapshot connection's client side, from the bytes after its Login
/// Request. Allocates once (the framer's buffer); nothing per packet.
#[derive(Debug)]
pub struct Client {
    reader: Reader,
    state: State,
}

/// Everything but the framer, so a packet callback can borrow it while
/// the framer runs.
#[derive(Debug)]
struct State {
    settings: Settings,
    /// A byte came from the server.
    got_bytes: bool,
    /// `S` messages before `G`.
    messages: u64,
    /// `A`'s session, once it came.
    session: Option<[u8; SESSION_LEN]>,
    /// The outcome, once decided.
    end: Option<End>,
}

impl Client {
    /// A client for a connection just made.
    pub fn new(settings: Settings) -> Client {
        Client {
            reader: Reader::new(),
            state: State {
                settings,
                got_bytes: false,
                messages: 0,
                session: None,
                end: None,
            },
        }
    }

    /// Bytes read from the server. Each valid `S` message of a known ITCH
    /// type goes to `apply`, in order. Returns the outcome from the call
    /// whose bytes decide it; `None` before, and after (later bytes are
    /// ignored).
    pub fn on_bytes(&mut self, bytes: &[u8], apply: &mut impl FnMut(Message<'_>)) -> Option<End> {
        if self.state.end.is_some() {
            return None;
        }
        self.state.got_bytes |= !bytes.is_empty();
        let state = &mut self.state;
        self.reader.push(bytes, |frame| state.frame(frame, apply));
        self.state.end
    }

    /// The connection ended (FIN).
    pub fn on_eof(&mut self) -> End {
        self.close(
            "connection closed before any byte",
            "connection closed before the snapshot ended",
        )
    }

    /// The connection was reset or refused (a connect that failed).
    pub fn on_reset(&mut self) -> End {
        self.close(
            "refused or reset before any byte",
            "reset before the snapshot ended",
        )
    }

    /// `snapshot_idle_ms` passed without a byte.
    pub fn on_idle(&mut self) -> End {
        self.close("idle before any byte", "idle before the snapshot ended")
    }

    /// `snapshot_timeout_ms` passed since connecting without End of
    /// Snapshot.
    pub fn on_timeout(&mut self) -> End {
        self.close(
            "timed out before any byte",
            "timed out before the snapshot ended",
        )
    }

    /// The outcome, once decided (the first decision stands).
    pub fn end(&self) -> Option<&End> {
        self.state.end.as_ref()
    }

    /// A byte came from the server.
    pub fn got_bytes(&self) -> bool {
        self.state.got_bytes
    }

    /// `S` messages read before `G`: unknown types included, and after
    /// [`Failure::TooLarge`] the one too many.
    pub fn messages(&self) -> u64 {
        self.state.messages
    }

    /// A well-formed `A` came (whatever its session).
    pub fn logged_in(&self) -> bool {
        self.state.session.is_some()
    }

    /// `A`'s session as sent, once it came.
    pub fn session(&self) -> Option<[u8; SESSION_LEN]> {
        self.state.session
    }

    /// Ends the connection for an event other than bytes: `Refused` with
    /// `before` if nothing came, else `Closed` with `after`.
    fn close(&mut self, before: &'static str, after: &'static str) -> End {
        if let Some(end) = self.state.end {
            return end;
        }
        let end = match self.state.got_bytes {
            false => End::Failed {
                class: Failure::Refused,
                detail: before,
                cause: Cause::None,
            },
            true => End::Failed {
                class: Failure::Closed,
                detail: after,
                cause: Cause::None,
            },
        };
        *self.state.end.insert(end)
    }
}

impl State {
    /// One packet; false once the outcome is decided (the framer stops).
    fn frame(&mut self, frame: Frame<'_>, apply: &mut impl FnMut(Message<'_>)) -> bool {
        let end = match (frame.kind(), self.session) {
            (None, _) => malformed("packet of length 0"),
            (Some(k), None) => self.before_login(k, frame.payload()),
            (Some(k), Some(session)) => self.logged_in(k, frame.payload(), session, apply),
        };
        self.end = end;
        end.is_none()
    }

    fn before_login(&mut self, k: u8, payload: &[u8]) -> Option<End> {
        match k {
            kind::DEBUG => None,
            kind::LOGIN_REJECTED => {
                let reason = payload.first().copied();
                let detail = match reason {
                    Some(soup::NOT_AUTHORIZED) => "login rejected: not authorized",
                    Some(soup::SESSION_NOT_AVAILABLE) => "login rejected: session not available",
                    Some(_) => "login rejected: unknown reason",
                    None => "login rejected without a reason",
                };
                Some(End::Failed {
                    class: Failure::Rejected,
                    detail,
                    cause: reason.map_or(Cause::None, Cause::Rejected),
                })
            }
            kind::LOGIN_ACCEPTED => {
                let Some((session, sequence)) = soup::parse_accepted(payload) else {
                    return malformed("bad Login Accepted");
                };
                if sequence != 1 {
                    return failed(
                        Failure::Malformed,
                        "Login Accepted at a sequence other than 1",
                        Cause::Sequence(sequence),
                    );
                }
                self.session = Some(session);
                match self.settings.session {
                    Some(want) if soup::trim(&want) != soup::trim(&session) => failed(
                        Failure::Session,
                        "Login Accepted for another session",
                        Cause::Session(session),
                    ),
                    _ => None,
                }
            }
            kind::SEQUENCED | kind::UNSEQUENCED | kind::SERVER_HEARTBEAT | kind::END_OF_SESSION => {
                malformed("packet before Login Accepted")
            }
            _ => malformed("packet of a type servers do not send"),
        }
    }

    fn logged_in(
        &mut self,
        k: u8,
        payload: &[u8],
        session: [u8; SESSION_LEN],
        apply: &mut impl FnMut(Message<'_>),
    ) -> Option<End> {
        match k {
            kind::DEBUG | kind::SERVER_HEARTBEAT | kind::UNSEQUENCED => None,
            kind::SEQUENCED => self.sequenced(payload, session, apply),
            kind::END_OF_SESSION => failed(
                Failure::Closed,
                "end of session before the snapshot ended",
                Cause::None,
            ),
            kind::LOGIN_ACCEPTED => malformed("second Login Accepted"),
            kind::LOGIN_REJECTED => malformed("Login Rejected after Login Accepted"),
            _ => malformed("packet of a type servers do not send"),
        }
    }

    fn sequenced(
        &mut self,
        msg: &[u8],
        session: [u8; SESSION_LEN],
        apply: &mut impl FnMut(Message<'_>),
    ) -> Option<End> {
        match msg.first() {
            None => return malformed("empty Sequenced Data"),
            Some(&END_OF_SNAPSHOT) => {
                return match msg.get(1..END_OF_SNAPSHOT_LEN).and_then(soup::numeric) {
                    Some(next) if next > 0 => Some(End::Snapshot {
                        next,
                        messages: self.messages,
                        session,
                    }),
                    _ => malformed("bad End of Snapshot"),
                };
            }
            Some(_) => {}
        }
        match message::check(msg) {
            Ok(()) => {}
            Err(Reject::TooShortForType) => return malformed("message too short for its type"),
            Err(Reject::BadStock) => return malformed("message with a bad stock"),
            Err(_) => return malformed("invalid message"),
        }
        self.messages += 1;
        if self.messages > self.settings.max_messages {
            return failed(
                Failure::TooLarge,
                "more messages than max_messages",
                Cause::None,
            );
        }
        let m = Message::new(msg);
        if m.is_known() {
            apply(m);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::message::{encode, Side};
    use super::*;
    use crate::symbol::Symbol;

    const SESSION: [u8; 10] = *b"SESSION001";

    fn settings() -> Settings {
        Settings {
            session: Some(SESSION),
            max_messages: 1_000_000,
        }
    }

    fn packet(k: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        soup::packet(k, payload, &mut out);
        out
    }

    /// An `S` carrying End of Snapshot with `field` as its sequence.
    fn g_raw(field: &[u8]) -> Vec<u8> {
        let mut m = vec![END_OF_SNAPSHOT];
        m.extend_from_slice(field);
        packet(kind::SEQUENCED, &m)
    }

    fn g(next: u64) -> Vec<u8> {
        g_raw(format!("{next:>20}").as_bytes())
    }

    fn accepted() -> Vec<u8> {
        soup::login_accepted(&SESSION, 1).to_vec()
    }

    fn add_order(order: u64) -> Vec<u8> {
        let aapl = Symbol::parse("AAPL").unwrap();
        encode::add_order(1, 5, order, Side::Buy, 100, aapl, 1_905_000, None)
    }

    /// The three messages [`stream`] carries: a System Event, an Add
    /// Order and an unknown type.
    fn messages() -> [Vec<u8>; 3] {
        [encode::system_event(1, b'O'), add_order(7), b"z12".to_vec()]
    }

    /// `+`, `A`, the three [`messages`], `G` 42.
    fn stream() -> Vec<u8> {
        let mut s = packet(kind::DEBUG, b"hi");
        s.extend(accepted());
        for m in messages() {
            soup::sequenced(&m, &mut s);
        }
        s.extend(g(42));
        s
    }

    /// The outcome of `stream` read whole then, if undecided, closed; and
    /// the messages applied.
    fn run(settings: Settings, stream: &[u8]) -> (End, Vec<Vec<u8>>) {
        let mut c = Client::new(settings);
        let mut applied = Vec::new();
        let end = c.on_bytes(stream, &mut |m| applied.push(m.bytes().to_vec()));
        let end = end.unwrap_or_else(|| c.on_eof());
        assert_eq!(c.end(), Some(&end));
        (end, applied)
    }

    fn class(settings: Settings, stream: &[u8]) -> Option<Failure> {
        run(settings, stream).0.failure()
    }

    fn detail(end: End) -> &'static str {
        match end {
            End::Failed { detail, .. } => detail,
            End::Snapshot { .. } => "snapshot",
        }
    }

    #[test]
    fn failure_names_and_order() {
        let names: Vec<_> = Failure::ALL.iter().map(|f| f.as_str()).collect();
        assert_eq!(
            names,
            [
                "refused",
                "rejected",
                "session",
                "malformed",
                "too_large",
                "closed",
                "abandoned"
            ]
        );
        for (i, f) in Failure::ALL.into_iter().enumerate() {
            assert_eq!(f.index(), i);
        }
    }

    #[test]
    fn a_snapshot_applies_known_messages_and_ends_at_g() {
        let (end, applied) = run(settings(), &stream());
        assert_eq!(
            end,
            End::Snapshot {
                next: 42,
                messages: 3,
                session: SESSION
            }
        );
        let [system, add, _unknown] = messages();
        assert_eq!(applied, [system, add], "the unknown type is skipped");
    }

    #[test]
    fn nothing_from_the_server_is_refused_whatever_ended_it() {
        type Event = fn(&mut Client) -> End;
        let events: [Event; 4] = [
            Client::on_eof,
            Client::on_reset,
            Client::on_idle,
            Client::on_timeout,
        ];
        for event in events {
            let mut c = Client::new(settings());
            assert_eq!(c.on_bytes(&[], &mut |_| panic!()), None);
            assert!(!c.got_bytes());
            let end = event(&mut c);
            assert_eq!(end.failure(), Some(Failure::Refused), "{end:?}");
            // The first decision stands.
            assert_eq!(c.on_bytes(&stream(), &mut |_| panic!()), None);
            assert_eq!(c.on_eof(), end);
        }
    }

    #[test]
    fn some_bytes_then_no_g_is_closed_whatever_ended_it() {
        type Event = fn(&mut Client) -> End;
        let events: [Event; 4] = [
            Client::on_eof,
            Client::on_reset,
            Client::on_idle,
            Client::on_timeout,
        ];
        let full = stream();
        let cuts = [1, 5, full.len() - 1];
        for event in events {
            for cut in cuts {
                let mut c = Client::new(settings());
                assert_eq!(c.on_bytes(&full[..cut], &mut |_| {}), None);
                assert!(c.got_bytes());
                let end = event(&mut c);
                assert_eq!(end.failure(), Some(Failure::Closed), "{cut}: {end:?}");
            }
        }
        assert_eq!(
            detail(Client::new(settings()).on_reset()),
            "refused or reset before any byte"
        );
    }

    #[test]
    fn end_of_session_before_g_is_closed() {
        let mut s = accepted();
        soup::sequenced(&add_order(1), &mut s);
        s.extend(soup::END_OF_SESSION);
        let mut c = Client::new(settings());
        let end = c.on_bytes(&s, &mut |_| {}).unwrap();
        assert_eq!(end.failure(), Some(Failure::Closed));
        assert_eq!(detail(end), "end of session before the snapshot ended");
    }

    #[test]
    fn login_rejected_keeps_its_reason() {
        for (reason, said) in [
            (Some(b'A'), "login rejected: not authorized"),
            (Some(b'S'), "login rejected: session not available"),
            (Some(b'?'), "login rejected: unknown reason"),
            (None, "login rejected without a reason"),
        ] {
            let mut s = packet(kind::DEBUG, b"");
            s.extend(packet(kind::LOGIN_REJECTED, reason.as_slice()));
            let (end, _) = run(settings(), &s);
            assert_eq!(
                end,
                End::Failed {
                    class: Failure::Rejected,
                    detail: said,
                    cause: reason.map_or(Cause::None, Cause::Rejected),
                }
            );
        }
        let (end, _) = run(settings(), &soup::login_rejected(b'A'));
        assert_eq!(end.failure(), Some(Failure::Rejected));
    }

    #[test]
    fn only_debug_may_come_before_login_accepted() {
        let mut bodies: Vec<Vec<u8>> = [b'S', b'U', b'H', b'Z', b'L', b'R', b'O', b'x', b'G']
            .iter()
            .map(|&k| packet(k, b""))
            .collect();
        bodies.push(g(42));
        bodies.push(vec![0, 0]);
        for p in bodies {
            let mut s = packet(kind::DEBUG, b"note");
            s.extend(&p);
            s.extend(stream());
            assert_eq!(class(settings(), &s), Some(Failure::Malformed), "{p:?}");
        }
    }

    #[test]
    fn login_accepted_needs_a_numeric_sequence_of_one() {
        let a = |seq: &[u8; 20]| {
            let mut payload = SESSION.to_vec();
            payload.extend_from_slice(seq);
            packet(kind::LOGIN_ACCEPTED, &payload)
        };
        for seq in [
            b"                   0",
            b"                   2",
            b"                    ",
            b"               one  ",
            b"1 1                 ",
            b"18446744073709551617",
        ] {
            let mut s = a(seq);
            s.extend(g(42));
            assert_eq!(class(settings(), &s), Some(Failure::Malformed), "{seq:?}");
        }
        // Short: 29 payload bytes.
        let mut s = packet(kind::LOGIN_ACCEPTED, &a(b"                   1")[3..32]);
        s.extend(g(42));
        assert_eq!(class(settings(), &s), Some(Failure::Malformed));
        // Every padding the rule allows, and a longer packet.
        for seq in [
            b"                   1",
            b"1                   ",
            b"\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x001",
            b"1\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
            b"00000000000000000001",
        ] {
            let mut s = a(seq);
            s.extend(g(42));
            assert_eq!(class(settings(), &s), None, "{seq:?}");
        }
        let mut longer = SESSION.to_vec();
        longer.extend_from_slice(b"                   1extra");
        let mut s = packet(kind::LOGIN_ACCEPTED, &longer);
        s.extend(g(42));
        assert_eq!(class(settings(), &s), None);
    }

    #[test]
    fn the_session_must_be_the_feeds_after_trimming() {
        let with = |session: &[u8; 10]| {
            let mut s = soup::login_accepted(session, 1).to_vec();
            s.extend(g(42));
            s
        };
        let mut c = Client::new(settings());
        let end = c.on_bytes(&with(b"SESSION002"), &mut |_| {}).unwrap();
        assert_eq!(end.failure(), Some(Failure::Session));
        assert!(c.logged_in());
        assert_eq!(c.session(), Some(*b"SESSION002"));
        // Padding on either side, spaces or NULs, compares equal.
        let short = Settings {
            session: Some(*b"ABC       "),
            ..settings()
        };
        for session in [
            b"ABC       ",
            b"       ABC",
            b"ABC\0\0\0\0\0\0\0",
            b"\0\0 ABC    ",
        ] {
            let (end, _) = run(short, &with(session));
            assert!(matches!(end, End::Snapshot { session: s, .. } if s == *session));
        }
        assert_eq!(class(short, &with(b"ABCD      ")), Some(Failure::Session));
        assert_eq!(class(short, &with(b"A BC      ")), Some(Failure::Session));
        // No session to check: any.
        let any = Settings {
            session: None,
            ..settings()
        };
        assert_eq!(class(any, &with(b"SESSION002")), None);
        // A malformed A is malformed before its session is looked at.
        let mut s = soup::login_accepted(b"SESSION002", 2).to_vec();
        s.extend(g(42));
        assert_eq!(class(settings(), &s), Some(Failure::Malformed));
    }

    #[test]
    fn after_login_accepted_only_server_data_may_come() {
        let mut bodies: Vec<Vec<u8>> = [b'L', b'R', b'O', b'x', b'+' + 1]
            .iter()
            .map(|&k| packet(k, b""))
            .collect();
        bodies.push(accepted());
        bodies.push(soup::login_rejected(b'A').to_vec());
        bodies.push(vec![0, 0]);
        for p in bodies {
            let mut s = accepted();
            soup::sequenced(&add_order(1), &mut s);
            s.extend(&p);
            s.extend(g(42));
            let (end, applied) = run(settings(), &s);
            assert_eq!(end.failure(), Some(Failure::Malformed), "{p:?}");
            assert_eq!(applied.len(), 1);
        }
    }

    #[test]
    fn debug_heartbeats_and_unsequenced_data_are_ignored() {
        let mut s = packet(kind::DEBUG, b"hello");
        s.extend(accepted());
        for m in messages() {
            s.extend(soup::SERVER_HEARTBEAT);
            soup::unsequenced(&add_order(99), &mut s);
            soup::debug(b"", &mut s);
            soup::sequenced(&m, &mut s);
        }
        s.extend(soup::SERVER_HEARTBEAT);
        s.extend(g(42));
        assert_eq!(run(settings(), &s), run(settings(), &stream()));
    }

    #[test]
    fn sequenced_data_must_be_a_valid_message() {
        let mut add = add_order(1);
        let short = add[..35].to_vec();
        add[24] = b' ';
        let bad_stock = add;
        for m in [vec![], short, bad_stock] {
            let mut s = accepted();
            soup::sequenced(&m, &mut s);
            s.extend(g(42));
            assert_eq!(class(settings(), &s), Some(Failure::Malformed), "{m:?}");
        }
        // Unknown types of any length are counted and skipped; a known
        // type with extra bytes is valid.
        let mut long = add_order(2);
        long.extend_from_slice(b"extra");
        let mut s = accepted();
        for m in [&b"z"[..], b"\xff\x00", &long] {
            soup::sequenced(m, &mut s);
        }
        s.extend(g(42));
        let (end, applied) = run(settings(), &s);
        assert!(matches!(end, End::Snapshot { messages: 3, .. }), "{end:?}");
        assert_eq!(applied, [long]);
    }

    #[test]
    fn end_of_snapshot_needs_a_positive_numeric_sequence() {
        let run_g = |g: Vec<u8>| {
            let mut s = accepted();
            s.extend(g);
            run(settings(), &s).0
        };
        for bad in [
            g_raw(b""),
            g_raw(b"                  1"),
            g_raw(b"                    "),
            g_raw(b"                  x1"),
            g_raw(b"99999999999999999999"),
            g(0),
        ] {
            let end = run_g(bad.clone());
            assert_eq!(end.failure(), Some(Failure::Malformed), "{bad:?}");
            assert_eq!(detail(end), "bad End of Snapshot");
        }
        let next = |end| match end {
            End::Snapshot { next, .. } => Some(next),
            _ => None,
        };
        assert_eq!(next(run_g(g(u64::MAX))), Some(u64::MAX));
        assert_eq!(
            next(run_g(g_raw(b"7\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"))),
            Some(7)
        );
        assert_eq!(next(run_g(g_raw(b"7                   trailing"))), Some(7));
    }

    #[test]
    fn more_messages_than_allowed_is_too_large_at_the_one_too_many() {
        let max = |n| Settings {
            max_messages: n,
            ..settings()
        };
        let (end, applied) = run(max(3), &stream());
        assert!(matches!(end, End::Snapshot { messages: 3, .. }));
        assert_eq!(applied.len(), 2);
        // Unknown types count: the third message is one too many.
        let mut c = Client::new(max(2));
        let mut applied = 0;
        let s = stream();
        let g_at = s.len() - g(42).len();
        let end = c.on_bytes(&s[..g_at], &mut |_| applied += 1);
        assert_eq!(end.and_then(|e| e.failure()), Some(Failure::TooLarge));
        assert_eq!(applied, 2);
        assert_eq!(c.messages(), 3);
        // 0 allows none; an empty snapshot is fine.
        let mut empty = accepted();
        empty.extend(g(1));
        assert!(matches!(
            run(max(0), &empty).0,
            End::Snapshot {
                messages: 0,
                next: 1,
                ..
            }
        ));
        assert_eq!(run(max(0), &stream()).0.failure(), Some(Failure::TooLarge));
    }

    #[test]
    fn the_outcome_comes_with_its_bytes_and_later_bytes_are_ignored() {
        let mut s = stream();
        s.extend(packet(b'x', b"after"));
        s.extend([0xff, 0xff, 1, 2]);
        let g_end = stream().len();
        let mut c = Client::new(settings());
        let mut applied = 0;
        assert_eq!(c.on_bytes(&s[..g_end - 1], &mut |_| applied += 1), None);
        assert!(c.logged_in() && c.end().is_none());
        let end = c.on_bytes(&s[g_end - 1..], &mut |_| applied += 1);
        assert!(matches!(end, Some(End::Snapshot { next: 42, .. })));
        assert_eq!(applied, 2);
        assert_eq!(c.on_bytes(&stream(), &mut |_| panic!("ended")), None);
        assert_eq!(c.on_eof(), end.unwrap());
        assert_eq!(c.on_timeout(), end.unwrap());
        assert_eq!(c.reader.buffered(), 0, "nothing buffered past the outcome");
    }

    /// SplitMix64.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
    }

    /// A plausible server stream: login, a spin of messages and control
    /// packets, End of Snapshot, sometimes a packet of the largest length.
    fn valid_stream(rng: &mut Rng) -> Vec<u8> {
        let mut s = Vec::new();
        if rng.below(4) == 0 {
            soup::debug(b"welcome", &mut s);
        }
        let session = [SESSION, SESSION, *b"SESSION002"][rng.below(3)];
        let sequence = [1, 1, 1, 2][rng.below(4)];
        match rng.below(10) {
            0 => s.extend(soup::login_rejected(b"AS?"[rng.below(3)])),
            _ => s.extend(soup::login_accepted(&session, sequence)),
        }
        for i in 0..rng.below(40) {
            match rng.below(10) {
                0 => s.extend(soup::SERVER_HEARTBEAT),
                1 => soup::unsequenced(b"u", &mut s),
                2 => soup::sequenced(&encode::system_event(i as u64, b'Q'), &mut s),
                3 => soup::sequenced(b"zz", &mut s),
                4 => soup::sequenced(&encode::delete(1, 2, i as u64), &mut s),
                _ => soup::sequenced(&add_order(i as u64), &mut s),
            }
        }
        if rng.below(200) == 0 {
            let big = vec![b'~'; soup::MAX_PAYLOAD];
            soup::sequenced(&big, &mut s);
        }
        s.extend(g(rng.below(3) as u64 * 1000));
        if rng.below(3) == 0 {
            s.extend(rng.bytes(20));
        }
        s
    }

    fn mutate(rng: &mut Rng, s: &mut Vec<u8>) {
        for _ in 0..rng.below(4) {
            let at = rng.below(s.len() + 1);
            match rng.below(6) {
                0 if at < s.len() => s[at] ^= 1 << rng.below(8),
                1 if at < s.len() => s[at] = rng.next() as u8,
                2 => s.truncate(at),
                3 => {
                    let n = rng.below(8);
                    let junk = rng.bytes(n);
                    s.splice(at..at, junk);
                }
                4 => {
                    let header = [[0, 0], [0xff, 0xff]][rng.below(2)];
                    s.splice(at..at, header);
                }
                _ => {
                    let end = (at + rng.below(10)).min(s.len());
                    s.drain(at..end);
                }
            }
        }
    }

    /// What a client makes of `stream` read in `chunks`: its outcome, the
    /// messages it applied, its count and session.
    type Seen = (End, Vec<Vec<u8>>, u64, Option<[u8; 10]>);

    fn feed(settings: Settings, stream: &[u8], chunks: &[usize]) -> Seen {
        let mut c = Client::new(settings);
        let mut applied = Vec::new();
        let mut decided = None;
        let mut rest = stream;
        for &n in chunks {
            let (read, next) = rest.split_at(n.min(rest.len()));
            rest = next;
            if let Some(end) = c.on_bytes(read, &mut |m| applied.push(m.bytes().to_vec())) {
                assert!(decided.is_none(), "decided twice");
                decided = Some(end);
            }
            assert!(c.reader.buffered() <= soup::MAX_PACKET);
        }
        assert!(rest.is_empty());
        let end = c.on_eof();
        if let Some(d) = decided {
            assert_eq!(d, end);
        }
        (end, applied, c.messages(), c.session())
    }

    fn split(rng: &mut Rng, len: usize, most: usize) -> Vec<usize> {
        let mut chunks = Vec::new();
        let mut left = len;
        while left > 0 {
            let n = (1 + rng.below(most)).min(left);
            chunks.push(n);
            left -= n;
        }
        chunks
    }

    /// Seeded streams, random and mutated valid ones, read under several
    /// splits: no panic, bounded buffering, and one outcome and one
    /// sequence of applied messages whatever the reads.
    #[test]
    fn fuzzed_streams_give_one_outcome_whatever_the_reads() {
        let mut rng = Rng(0x5eed_0f91_1a95_e001);
        let mut outcomes = [0usize; 8];
        for _ in 0..10_000 {
            let mut s = match rng.below(4) {
                0 => {
                    let n = rng.below(300);
                    let mut s = if rng.below(2) == 0 {
                        accepted()
                    } else {
                        vec![]
                    };
                    s.extend(rng.bytes(n));
                    s
                }
                _ => valid_stream(&mut rng),
            };
            mutate(&mut rng, &mut s);
            let settings = Settings {
                session: [Some(SESSION), None][rng.below(2)],
                max_messages: [0, 5, 1000, u64::MAX][rng.below(4)],
            };
            let whole = feed(settings, &s, &[s.len()]);
            outcomes[whole.0.failure().map_or(7, Failure::index)] += 1;
            let ones = vec![1; s.len()];
            assert_eq!(feed(settings, &s, &ones), whole, "1-byte reads of {s:?}");
            for most in [3, 64, 5000] {
                let chunks = split(&mut rng, s.len(), most);
                assert_eq!(feed(settings, &s, &chunks), whole, "{chunks:?} of {s:?}");
            }
        }
        // Every outcome the streams can reach was reached.
        for (i, n) in outcomes.iter().enumerate() {
            assert!(
                *n > 0 || i == Failure::Abandoned.index() || i == Failure::Refused.index(),
                "{outcomes:?}"
            );
        }
    }
}
