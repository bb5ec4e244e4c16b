//! The snapshot connection's own thread (glimpse G3.3): plain blocking
//! TCP, so that nothing of it ever blocks the receive thread. The receive
//! thread asks for a connection ([`Connection::start`]); the thread
//! connects, logs in, reads the spin into a staging state while sending a
//! heartbeat every second, and hands the end with the staging back
//! through a bounded channel ([`Connection::poll`]), which the receive
//! thread applies at the time it takes it. Staging states go back to the
//! thread to be reused or dropped there ([`Connection::recycle`]): a
//! million-order book is neither built nor freed on the receive thread.
//!
//! Nothing the receive thread sends can pile up, however often a sender
//! of forged sessions makes it abort and start again, and nothing it sends
//! ever blocks it: an abort is a number (the attempt wanted, which the
//! thread compares with its own at every turn), a start waits in a
//! one-slot mailbox where a later start replaces one not taken yet (only
//! the latest attempt matters), and staging states go back through
//! [`RECYCLED`] slots (a full channel would drop one on the receive
//! thread; it does not fill: one comes back per attempt ended, at most one
//! attempt starts per poll, and the thread takes them all before each
//! attempt and at every turn of its reads).
//!
//! The password lives in the thread only: it goes into the Login Request
//! and nowhere else. When the run is recorded, the thread also reports
//! what went over the wire ([`Wire`]): the connection's opening, the
//! server's bytes as read, and how it ended; never a byte we sent.

use super::config::Password;
use super::feed::{Settings, Staging};
use super::glimpse::{self, End};
use super::snapshot::Spin;
use super::soup;
use crossbeam_channel::{bounded, select, Receiver, Sender, TryRecvError, TrySendError};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The client sends a heartbeat when it sent nothing for this long.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// Longest a read waits before the thread looks for an abort.
const POLL: Duration = Duration::from_millis(50);
/// Bytes read at once.
const READ: usize = 64 * 1024;
/// Staging states on their way back to the thread, at most.
pub const RECYCLED: usize = 4;

/// Where and how the thread connects.
#[derive(Debug, Clone)]
pub struct Target {
    /// The snapshot server.
    pub server: SocketAddrV4,
    /// Login user name.
    pub user: String,
    /// A connection with no byte for this long ends, ns.
    pub idle_ns: u64,
    /// A connection without End of Snapshot for this long ends, ns.
    pub timeout_ns: u64,
}

/// What went over the wire, as the thread saw it (for `run --record`).
#[derive(Debug)]
pub enum Wire {
    /// We connected (or tried to) from `local`.
    Open(SocketAddrV4),
    /// Bytes the server sent, as one read.
    Bytes(Vec<u8>),
    /// The server closed (EOF).
    Fin,
    /// The server reset, or refused, the connection.
    Rst,
    /// We closed.
    Close,
    /// We aborted.
    Abort,
}

/// What the thread reports, in the order it happened. An end comes with
/// the wire event that decided it (the read holding the deciding bytes,
/// the server's FIN or RST, our close at a timer), so that a recorded run
/// writes that event in the same receive cycle as the end takes effect.
#[derive(Debug)]
enum Report {
    /// What went over the wire in attempt `.0`.
    Wire(u64, Wire),
    /// Attempt `.0` ended: its end, its staging state, the wire event
    /// that decided it and whether our close (FIN) followed, so that the
    /// receive thread logs both before it starts another attempt.
    End(u64, End, Box<Staging>, Option<Wire>, bool),
}

/// Connect, attempt `.0`, checked by the settings.
type Start = (u64, glimpse::Settings);

/// What the receive thread tells the connection thread, as the thread
/// holds it.
struct Commands {
    /// The next attempt (a one-slot mailbox).
    starts: Receiver<Start>,
    /// Staging states to reuse.
    recycled: Receiver<Box<Staging>>,
    /// The attempt the receive thread wants: any other running ends.
    wanted: Arc<AtomicU64>,
}

impl Commands {
    /// Attempt `id` is still the one wanted (not aborted nor replaced).
    fn wants(&self, id: u64) -> bool {
        // Pairs with the Release stores of `Connection::start` and `abort`.
        self.wanted.load(Ordering::Acquire) == id
    }

    /// Takes every staging state handed back into `spare` (the older
    /// dropped here); false once the receive thread is gone.
    fn take_recycled(&self, spare: &mut Option<Box<Staging>>) -> bool {
        loop {
            match self.recycled.try_recv() {
                Ok(s) => *spare = Some(s),
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Disconnected) => return false,
            }
        }
    }
}

/// The receive thread's end of the connection thread. Dropped, it closes
/// the channels: the thread ends at its next look at them (within a poll
/// of a read, or when a connect gives up), with no join, so that a
/// shutdown never waits for a server.
#[derive(Debug)]
pub struct Connection {
    /// The thread reports what goes over the wire.
    record: Arc<AtomicBool>,
    /// The next attempt, for the thread: one slot.
    starts: Sender<Start>,
    /// The same slot's other end, to take back a start the thread has not
    /// taken when a later one replaces it.
    stale: Receiver<Start>,
    /// Staging states back to the thread: [`RECYCLED`] slots.
    recycled: Sender<Box<Staging>>,
    /// The attempt wanted (`attempt`, for the thread).
    wanted: Arc<AtomicU64>,
    reports: Receiver<Report>,
    /// The running attempt's id: ends of an aborted one are dropped.
    attempt: u64,
    /// The local end of the socket the thread keeps bound for the next
    /// attempt (`ip << 16 | port`; 0: none ready).
    next_local: Arc<AtomicU64>,
}

impl Connection {
    /// Starts the thread of feed `name`, its staging states sized by
    /// `settings`.
    pub fn spawn(
        name: &str,
        target: Target,
        password: Password,
        settings: Settings,
    ) -> std::io::Result<Connection> {
        let (connection, commands, out) = Connection::ends();
        let ready = connection.next_local.clone();
        // Detached: dropping the connection closes its channels, which
        // ends the thread (see `Drop`).
        std::thread::Builder::new()
            .name(format!("tg-glimpse-{name}"))
            .spawn(move || run(target, password, settings, commands, out, ready))?;
        Ok(connection)
    }

    /// The receive thread's end and the connection thread's.
    fn ends() -> (Connection, Commands, Out) {
        // Bounded, whatever the receive thread is made to send: the
        // latest start, a few staging states, and an abort as a number.
        let (starts, rx) = bounded(1);
        let (recycled, recycled_rx) = bounded(RECYCLED);
        let (tx, reports) = bounded(64);
        let record = Arc::new(AtomicBool::new(false));
        let wanted = Arc::new(AtomicU64::new(0));
        let commands = Commands {
            starts: rx.clone(),
            recycled: recycled_rx,
            wanted: wanted.clone(),
        };
        let out = Out {
            tx,
            record: record.clone(),
        };
        let connection = Connection {
            record,
            starts,
            stale: rx,
            recycled,
            wanted,
            reports,
            attempt: 0,
            next_local: Arc::new(AtomicU64::new(0)),
        };
        (connection, commands, out)
    }

    /// Has the thread report what goes over the wire from the next
    /// connection on (`run --record`), or stop.
    pub fn record(&self, on: bool) {
        self.record.store(on, Ordering::Relaxed);
    }

    /// Starts a connection checked by `settings`; returns its attempt's
    /// number and the local end it connects from (the socket the thread
    /// holds bound for it), so that a recorded run writes our SYN now,
    /// when the attempt starts. The thread binds that socket when an
    /// attempt ends (the address is `0.0.0.0`, bound before connecting):
    /// a start while the last attempt still runs, or before the thread's
    /// first turn, gets `0.0.0.0:0`, or the port the last attempt left, and
    /// connects from another. A recording is read by these labels alone,
    /// so its replay is the same; only lining it up with a host's own
    /// capture by port is lost.
    pub fn start(&mut self, settings: glimpse::Settings) -> (u64, SocketAddrV4) {
        self.attempt += 1;
        // Pairs with the Acquire load of `Commands::wants`.
        self.wanted.store(self.attempt, Ordering::Release);
        let local = unpack(self.next_local.swap(0, Ordering::AcqRel));
        let mut start = (self.attempt, settings);
        // A start still in the slot is stale: taken back, and this one
        // takes its place. Only the thread takes from the slot besides,
        // so the second try succeeds; neither waits.
        loop {
            match self.starts.try_send(start) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => break,
                Err(TrySendError::Full(s)) => {
                    let _ = self.stale.try_recv();
                    start = s;
                }
            }
        }
        (self.attempt, local)
    }

    /// The attempt whose end [`poll`](Self::poll) returns.
    #[cfg(test)]
    pub fn attempt(&self) -> u64 {
        self.attempt
    }

    /// Drops the running connection (its end will not be reported): the
    /// thread sees another attempt wanted at its next turn, and a start
    /// it has not taken yet is taken back.
    pub fn abort(&mut self) {
        self.attempt += 1;
        // Pairs with the Acquire load of `Commands::wants`.
        self.wanted.store(self.attempt, Ordering::Release);
        let _ = self.stale.try_recv();
    }

    /// The end of the running connection, if the thread reported it, with
    /// its staging state; what went over the wire before it (recorded
    /// runs) is handed to `wire` first, in order, with its attempt's
    /// number (an attempt aborted or replaced may still report some).
    pub fn poll(&mut self, wire: &mut impl FnMut(u64, Wire)) -> Option<(End, Box<Staging>)> {
        loop {
            match self.reports.try_recv().ok()? {
                Report::Wire(id, w) => wire(id, w),
                Report::End(id, end, staging, decided, close_after) => {
                    if let Some(w) = decided {
                        wire(id, w);
                    }
                    if close_after {
                        wire(id, Wire::Close);
                    }
                    if id == self.attempt {
                        return Some((end, staging));
                    }
                    self.recycle(staging);
                }
            }
        }
    }

    /// Hands a staging state back to the thread, to reuse or drop there
    /// (here, should its [`RECYCLED`] slots be full; never waits).
    pub fn recycle(&mut self, staging: Box<Staging>) {
        let _ = self.recycled.try_send(staging);
    }
}

/// The thread's side of the reports.
struct Out {
    tx: Sender<Report>,
    record: Arc<AtomicBool>,
}

impl Out {
    /// Reports `w` of attempt `id` if the run is recorded. Blocks while
    /// the receive thread is behind: the connection waits, never the
    /// receive thread.
    fn wire(&self, id: u64, w: impl FnOnce() -> Wire) {
        if let Some(w) = self.event(w) {
            let _ = self.tx.send(Report::Wire(id, w));
        }
    }

    /// `w` if the run is recorded.
    fn event(&self, w: impl FnOnce() -> Wire) -> Option<Wire> {
        self.record.load(Ordering::Relaxed).then(w)
    }
}

/// `ip:port` as one integer (0: none).
fn pack(a: SocketAddrV4) -> u64 {
    u64::from(u32::from(*a.ip())) << 16 | u64::from(a.port())
}

fn unpack(v: u64) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::from((v >> 16) as u32), v as u16)
}

/// The thread: one connection per start, until the receive thread goes.
fn run(
    target: Target,
    password: Password,
    settings: Settings,
    commands: Commands,
    out: Out,
    ready: Arc<AtomicU64>,
) {
    let mut spare: Option<Box<Staging>> = None;
    let mut login = soup::login(target.user.as_bytes(), password.as_bytes());
    drop(password);
    let mut buf = vec![0u8; READ];
    // The socket of the next attempt, bound ahead: its local end is what
    // the receive thread records as our SYN when it starts the attempt.
    let mut prepared = prepare(&ready);
    loop {
        let (id, check) = select! {
            recv(commands.starts) -> start => match start {
                Ok(start) => start,
                Err(_) => break,
            },
            recv(commands.recycled) -> staging => match staging {
                Ok(s) => {
                    spare = Some(s);
                    continue;
                }
                Err(_) => break,
            },
        };
        // Aborted or replaced before it began.
        if !commands.wants(id) {
            continue;
        }
        // A staging state handed back with this start is reused.
        if !commands.take_recycled(&mut spare) {
            break;
        }
        let staging = spare
            .take()
            .unwrap_or_else(|| Box::new(Staging::new(&settings)));
        let mut spin = Spin::new(check, staging);
        let socket = match prepared.take() {
            Some(s) => Ok(s),
            None => socket(),
        };
        let ended = attempt(
            id, socket, &target, &login, &mut spin, &commands, &mut spare, &mut buf, &out,
        );
        prepared = prepare(&ready);
        match ended {
            Some((end, decided, close_after)) => {
                let report = Report::End(id, end, spin.into_staging(), decided, close_after);
                if out.tx.send(report).is_err() {
                    break;
                }
            }
            None => spare = Some(spin.into_staging()),
        }
    }
    login.fill(0);
    std::hint::black_box(&login);
}

/// Binds the next attempt's socket and makes its local end known.
fn prepare(ready: &AtomicU64) -> Option<(Socket, SocketAddrV4)> {
    let s = socket().ok()?;
    ready.store(pack(s.1), Ordering::Release);
    Some(s)
}

/// A TCP socket bound to an ephemeral port, and that local end (the
/// address is the unspecified one until it connects).
fn socket() -> std::io::Result<(Socket, SocketAddrV4)> {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    socket.bind(&SockAddr::from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)))?;
    let local = socket
        .local_addr()?
        .as_socket_ipv4()
        .unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
    Ok((socket, local))
}

/// Attempt `id`, one connection from `socket`: its end, with the wire
/// event that decided it and whether our close is still to be recorded
/// after it; or `None` when aborted.
#[allow(clippy::too_many_arguments)]
fn attempt(
    id: u64,
    socket: std::io::Result<(Socket, SocketAddrV4)>,
    target: &Target,
    login: &[u8],
    spin: &mut Spin,
    commands: &Commands,
    spare: &mut Option<Box<Staging>>,
    buf: &mut [u8],
    out: &Out,
) -> Option<(End, Option<Wire>, bool)> {
    // No byte yet: the idle timer runs from the start of the attempt.
    let started = Instant::now();
    let idle = Duration::from_nanos(target.idle_ns);
    let timeout = Duration::from_nanos(target.timeout_ns);
    let server = SockAddr::from(SocketAddr::V4(target.server));
    let socket = match socket {
        Ok((socket, _)) => socket,
        Err(e) => {
            return Some((
                caused(spin.client().on_reset(), &e),
                out.event(|| Wire::Rst),
                false,
            ))
        }
    };
    match socket.connect_timeout(&server, idle.min(timeout)) {
        Ok(()) => {}
        // The idle bound (never above the whole attempt's): named as the
        // connect's, which nothing answered (a server that answers and
        // then says nothing is idle with no cause).
        Err(e) if is_timeout(e.kind()) => {
            let end = match spin.client().on_idle() {
                End::Failed { class, detail, .. } => End::Failed {
                    class,
                    detail,
                    cause: glimpse::Cause::Os(libc::ETIMEDOUT),
                },
                end => end,
            };
            return Some((end, out.event(|| Wire::Close), false));
        }
        Err(e) => {
            return Some((
                caused(spin.client().on_reset(), &e),
                out.event(|| Wire::Rst),
                false,
            ))
        }
    }
    // `snapshot_timeout_ms` runs from the connection.
    let begun = Instant::now();
    let mut stream: TcpStream = socket.into();
    // Aborted while connecting (up to `snapshot_idle_ms`): no login goes
    // out for an attempt nobody wants.
    if !commands.wants(id) {
        let _ = stream.shutdown(Shutdown::Both);
        out.wire(id, || Wire::Abort);
        return None;
    }
    let _ = stream.set_nodelay(true);
    // A server that stops reading (its window shut) cannot hold a write,
    // and with it the attempt's timers and an abort, for good: a write
    // that waits past the idle bound fails the attempt as a reset.
    let _ = stream.set_write_timeout(Some(idle.min(timeout)));
    if let Err(e) = stream.write_all(login) {
        return Some((
            caused(spin.client().on_reset(), &e),
            out.event(|| Wire::Rst),
            false,
        ));
    }
    let mut last_sent = Instant::now();
    let mut last_byte = started;
    // The end, the wire event that decided it, and whether our close is
    // still to come after it.
    let (end, decided, close_after) = loop {
        // Aborted (or replaced by a later start, which waits in its
        // slot), or the receive thread gone.
        if !commands.wants(id) || !commands.take_recycled(spare) {
            let _ = stream.shutdown(Shutdown::Both);
            out.wire(id, || Wire::Abort);
            return None;
        }
        let now = Instant::now();
        if now.duration_since(begun) >= timeout {
            break (spin.client().on_timeout(), out.event(|| Wire::Close), false);
        }
        if now.duration_since(last_byte) >= idle {
            break (spin.client().on_idle(), out.event(|| Wire::Close), false);
        }
        if now.duration_since(last_sent) >= HEARTBEAT {
            if let Err(e) = stream.write_all(&soup::CLIENT_HEARTBEAT) {
                break (
                    caused(spin.client().on_reset(), &e),
                    out.event(|| Wire::Rst),
                    true,
                );
            }
            last_sent = now;
        }
        let wait = [
            timeout.saturating_sub(now.duration_since(begun)),
            idle.saturating_sub(now.duration_since(last_byte)),
            HEARTBEAT.saturating_sub(now.duration_since(last_sent)),
            POLL,
        ]
        .into_iter()
        .min()
        .unwrap_or(POLL)
        .max(Duration::from_millis(1));
        let _ = stream.set_read_timeout(Some(wait));
        match stream.read(buf) {
            Ok(0) => break (spin.client().on_eof(), out.event(|| Wire::Fin), true),
            Ok(n) => {
                last_byte = Instant::now();
                if let Some(end) = spin.on_bytes(&buf[..n]) {
                    break (end, out.event(|| Wire::Bytes(buf[..n].to_vec())), true);
                }
                out.wire(id, || Wire::Bytes(buf[..n].to_vec()));
            }
            Err(e) if is_timeout(e.kind()) || e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                break (
                    caused(spin.client().on_reset(), &e),
                    out.event(|| Wire::Rst),
                    true,
                )
            }
        }
    };
    if matches!(end, End::Snapshot { .. }) {
        let _ = stream.write_all(&soup::LOGOUT);
    }
    let _ = stream.shutdown(Shutdown::Both);
    Some((end, decided, close_after))
}

/// `end` naming the OS error `e` that decided it, when it failed with
/// nothing else to name (a write that timed out names none: the error
/// would read "temporarily unavailable").
fn caused(end: End, e: &std::io::Error) -> End {
    match (end, e.raw_os_error()) {
        (
            End::Failed {
                class,
                detail,
                cause: glimpse::Cause::None,
            },
            Some(errno),
        ) if !is_timeout(e.kind()) => End::Failed {
            class,
            detail,
            cause: glimpse::Cause::Os(errno),
        },
        (end, _) => end,
    }
}

fn is_timeout(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Connection {
        /// A connection whose thread takes no command (one stuck in a
        /// connect, or behind on its reports): its channels as `spawn`
        /// makes them, the thread's ends returned to be held.
        fn detached() -> (Connection, Commands, Out) {
            Connection::ends()
        }

        /// Commands waiting for the thread.
        fn queued(&self) -> usize {
            self.starts.len() + self.recycled.len()
        }
    }

    /// Each forged new session that abandons a wait aborts the attempt,
    /// and a start may follow each: while the thread takes none (blocked
    /// in a connect for up to `snapshot_idle_ms`), what waits for it stays
    /// within a slot, not one command a datagram.
    #[test]
    fn a_flood_of_aborts_and_starts_queues_at_most_one_command() {
        let (mut c, thread, _out) = Connection::detached();
        let settings = glimpse::Settings {
            session: None,
            max_messages: 10,
        };
        for _ in 0..100_000 {
            c.abort();
            c.start(settings);
            assert!(c.queued() <= 1, "{} commands queued", c.queued());
        }
        // The one waiting is the latest, the attempt wanted.
        let (id, _) = thread.starts.try_recv().unwrap();
        assert!(id == 200_000 && thread.wants(id));
        // An abort takes back a start not taken.
        c.start(settings);
        c.abort();
        assert_eq!(c.queued(), 0);
        assert!(!thread.wants(200_001));
        // Staging states handed back fill at most their slots; the thread
        // takes them all at once.
        for _ in 0..10 {
            c.recycle(Box::new(Staging::new(&feed())));
        }
        assert_eq!(c.queued(), RECYCLED);
        let mut spare = None;
        assert!(thread.take_recycled(&mut spare) && spare.is_some());
        assert_eq!(c.queued(), 0);
        drop(c);
        assert!(!thread.take_recycled(&mut spare), "the receive thread gone");
    }

    fn feed() -> Settings {
        Settings::smallest()
    }

    /// A listener on loopback and a target at it, idle and overall
    /// timeouts `timeout_ns`.
    fn server(timeout_ns: u64) -> (std::net::TcpListener, Target) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let Ok(SocketAddr::V4(server)) = listener.local_addr() else {
            panic!("an IPv4 listener");
        };
        let target = Target {
            server,
            user: "u".into(),
            idle_ns: timeout_ns,
            timeout_ns,
        };
        (listener, target)
    }

    /// Attempt `id` at `target` from a fresh socket, user `u`, password
    /// `pw`, any session, at most 10 messages: its end, as [`attempt`]
    /// returns it.
    fn attempt_once(
        id: u64,
        target: &Target,
        commands: &Commands,
        out: &Out,
    ) -> Option<(End, Option<Wire>, bool)> {
        let check = glimpse::Settings {
            session: None,
            max_messages: 10,
        };
        let mut spin = Spin::new(check, Box::new(Staging::new(&feed())));
        let login = soup::login(b"u", b"pw");
        let mut buf = vec![0u8; READ];
        attempt(
            id,
            socket(),
            target,
            &login,
            &mut spin,
            commands,
            &mut None,
            &mut buf,
            out,
        )
    }

    /// An attempt aborted while it connects (a connect can take up to
    /// `snapshot_idle_ms`) sends no login: the server sees the connection
    /// close without a byte.
    #[test]
    fn an_attempt_aborted_while_connecting_sends_no_login() {
        let (listener, target) = server(10_000_000_000);
        let (_c, commands, out) = Connection::ends();
        // Attempt 7 is not the one wanted (0): aborted once connected.
        let ended = attempt_once(7, &target, &commands, &out);
        assert!(ended.is_none(), "an aborted attempt reports no end");
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).expect("closed, not timed out");
        assert!(got.is_empty(), "{} bytes sent", got.len());
    }

    /// What a recorded run writes for the event that ended an attempt
    /// (spec glimpse G5: FIN at EOF, RST at reset or refusal): a refused
    /// connect is a RST and `Refused`; a server that answers and closes is
    /// its bytes, then a FIN and `Closed`; one that resets (linger 0) is a
    /// RST.
    #[test]
    fn the_deciding_wire_event_is_fin_at_eof_and_rst_at_reset_or_refusal() {
        let run = |target: &Target| {
            let (c, commands, out) = Connection::ends();
            c.record(true);
            let ended = attempt_once(0, target, &commands, &out);
            let (end, decided, close_after) = ended.expect("attempt 0 is wanted");
            let mut before = Vec::new();
            while let Ok(Report::Wire(_, w)) = c.reports.try_recv() {
                before.push(w);
            }
            (end, decided, close_after, before)
        };
        // Refused: nothing listens at the address any more; the OS error
        // is named for the log.
        let (listener, target) = server(10_000_000_000);
        drop(listener);
        let (end, decided, _, before) = run(&target);
        assert_eq!(
            end,
            End::Failed {
                class: glimpse::Failure::Refused,
                detail: "refused or reset before any byte",
                cause: glimpse::Cause::Os(libc::ECONNREFUSED),
            }
        );
        let End::Failed { detail, cause, .. } = end else {
            unreachable!()
        };
        assert_eq!(
            glimpse::logged_detail(detail, cause),
            format!(
                "refused or reset before any byte: {}",
                std::io::Error::from_raw_os_error(libc::ECONNREFUSED)
            )
        );
        assert!(matches!(decided, Some(Wire::Rst)), "{decided:?}");
        assert!(before.is_empty(), "{before:?}");
        // A server that accepts the login, then closes (FIN) or resets.
        for reset in [false, true] {
            let (listener, target) = server(10_000_000_000);
            let server = std::thread::spawn(move || {
                let (mut s, _) = listener.accept().unwrap();
                let mut got = [0u8; 49];
                s.read_exact(&mut got).unwrap();
                s.write_all(&soup::login_accepted(b"SESSION001", 1))
                    .unwrap();
                if reset {
                    // Let the answer be read first, then close with a RST.
                    std::thread::sleep(Duration::from_millis(100));
                    socket2::SockRef::from(&s)
                        .set_linger(Some(Duration::ZERO))
                        .unwrap();
                }
            });
            let (end, decided, close_after, before) = run(&target);
            let failure = end.failure();
            server.join().unwrap();
            assert!(close_after, "our close comes after the server's");
            if reset {
                assert!(matches!(decided, Some(Wire::Rst)), "{decided:?}");
            } else {
                assert!(matches!(decided, Some(Wire::Fin)), "{decided:?}");
                assert_eq!(failure, Some(glimpse::Failure::Closed));
                assert!(
                    matches!(before.as_slice(), [Wire::Bytes(b)] if b.len() == 33),
                    "{before:?}"
                );
            }
        }
    }

    /// A connect nothing answers (its SYN dropped: here a listener whose
    /// queue is full) ends at the idle bound naming the connect's timeout,
    /// so that it reads apart from a server that answered and then said
    /// nothing; refused, as any attempt that got no byte.
    #[test]
    fn a_connect_never_answered_is_named() {
        use socket2::{Domain, Socket, Type};
        let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        listener
            .bind(&SockAddr::from(SocketAddr::from(([127, 0, 0, 1], 0))))
            .unwrap();
        listener.listen(0).unwrap();
        let at = listener.local_addr().unwrap();
        let Some(SocketAddr::V4(server)) = at.as_socket() else {
            panic!("an IPv4 listener");
        };
        // Its queue filled by connections never accepted: the kernel drops
        // the SYNs after them.
        let fillers: Vec<Socket> = (0..4)
            .map(|_| {
                let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
                s.set_nonblocking(true).unwrap();
                let _ = s.connect(&at);
                s
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        let target = Target {
            server,
            user: "u".into(),
            idle_ns: 300_000_000,
            timeout_ns: 300_000_000,
        };
        let (c, commands, out) = Connection::ends();
        c.record(true);
        let (end, decided, _) = attempt_once(0, &target, &commands, &out).expect("wanted");
        assert_eq!(
            end,
            End::Failed {
                class: glimpse::Failure::Refused,
                detail: "idle before any byte",
                cause: glimpse::Cause::Os(libc::ETIMEDOUT),
            }
        );
        assert!(matches!(decided, Some(Wire::Close)), "{decided:?}");
        drop((fillers, listener));
    }

    /// An abort, a number the thread looks at every turn of its reads,
    /// closes the running connection at once (here a server silent for
    /// longer than the test), and a later start connects again.
    #[test]
    fn an_abort_closes_the_running_connection() {
        let (listener, target) = server(60_000_000_000);
        let password = super::super::config::Password::for_tests(b"pw");
        let mut c = Connection::spawn("t", target, password, feed()).unwrap();
        let settings = glimpse::Settings {
            session: None,
            max_messages: 10,
        };
        c.start(settings);
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut login = [0u8; 3];
        s.read_exact(&mut login).unwrap();
        let began = Instant::now();
        c.abort();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest)
            .expect("closed by the abort, not timed out");
        assert!(began.elapsed() < Duration::from_secs(5));
        c.start(settings);
        let (_s, _) = listener.accept().unwrap();
        assert!(
            c.poll(&mut |_, _| {}).is_none(),
            "an aborted attempt reports no end"
        );
    }
}
