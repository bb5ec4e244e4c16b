//! The simulated venue's GLIMPSE 5.0 snapshot server over SoupBinTCP 4.00
//! (`simulate --protocol itch50 --glimpse ADDR`), with faults on demand.
//!
//! # Threads
//!
//! An acceptor thread owns the listener (loopback only) and starts one
//! thread per connection; connections are served independently, several
//! at once (at most [`MAX_CONNECTIONS`]: one more is closed on accept). The venue stays on the pacing loop's thread: a connection that
//! needs the state sends a reply channel through a bounded channel and
//! waits; the pacing loop, between two polls, takes one copy of the state
//! ([`super::Venue::glimpse`]: system events, stocks, trading actions and
//! live orders as plain data, cheap to copy) for every request waiting and
//! hands it over with a `try_send` that cannot block ([`Server::serve`]).
//! The connection's thread turns the copy into messages and writes them,
//! so a slow or stalled client never holds up the venue.
//!
//! # A connection
//!
//! 1. The client's Login Request `L` (within 10 s of connecting, else the
//!    connection is closed). The username must be `--glimpse-user` (after
//!    [`soup::trim`], ASCII case ignored) and the password the value of
//!    the environment variable `--glimpse-password-env` names (read once,
//!    at start: the simulator refuses to start without it); otherwise, or
//!    for a malformed `L`, Login Rejected `J` `A`, and the connection
//!    closes. A requested session that is not blank and not the venue's
//!    gets `J` `S`. Both count as `rejected`.
//! 2. The venue's state at that moment, as [`State::messages`]: System
//!    Events `S` sent so far, in order; a Stock Directory `R` per stock;
//!    its last Trading Action `H`; an `A` (or `F`, with its MPID) per live
//!    order, stock by stock in locate order and by order reference, with
//!    the order's shares left and the time of the add or replace that made
//!    it. The venue sends no Reg SHO `Y`, RPII `N` or operational halt `h`,
//!    so neither does its snapshot. Then End of Snapshot `G`: `G` and the
//!    venue's next multicast sequence as 20 ASCII digits, right-justified
//!    and space-padded (the first message the snapshot does not reflect).
//! 3. Login Accepted `A` (the MoldUDP64 session, sequence 1), one
//!    Sequenced Data `S` per message, `G` in an `S`; then a Server
//!    Heartbeat `H` whenever nothing was sent for 1 s. Client heartbeats
//!    `R` (and anything else) are ignored; a Logout `O` or the client
//!    closing ends the connection, as does the simulator stopping.
//!
//! # Faults (`--glimpse-fault`)
//!
//! Applied to the first `--glimpse-fault-logins` logins with correct
//! credentials (0, the default: every one); later ones are served
//! healthy. The `N` of `stall`, `drop-fin` and `drop-rst` counts snapshot
//! messages (`G` not included); when the snapshot holds `N` or fewer, the
//! fault acts just before `G`.
//!
//! | fault | the server |
//! |---|---|
//! | `reject-a` | Login Rejected `J` `A` (not authorized), then closes |
//! | `reject-s` | Login Rejected `J` `S` (session not available), then closes |
//! | `absent` | does not listen: connections are refused (no `--glimpse-fault-logins`) |
//! | `slow:RATE` | sends at most RATE `S` packets a second (1 to 1,000,000) |
//! | `delay:MS` | waits MS ms (0 to 600,000) before `A`, sending nothing |
//! | `stall:N` | stops after N messages: no `G`, no heartbeat, the connection open |
//! | `drop-fin:N` | closes after N messages (FIN) |
//! | `drop-rst:N` | aborts after N messages (RST: `SO_LINGER` 0, then close) |
//! | `z-before-g` | sends End of Session `Z` instead of `G`, then closes |
//! | `other-session` | Login Accepted names another session, then a healthy snapshot |
//! | `interleave` | a debug `+` and an Unsequenced Data `U` after `A` and after every message |
//! | `byte-writes` | writes the whole stream one byte per write (no Nagle) |
//!
//! The state is taken at login for every fault but the rejections.
//!
//! # Report
//!
//! [`Report`]: where it listened, the fault, connections, logins (correct
//! credentials), rejected, faults applied, snapshots sent (complete with
//! `G`) and the snapshot messages sent. Neither the password nor the
//! login's fields are ever printed or reported.

use super::Venue;
use crate::protocol::itch50::config::{self, read_password, Password, PasswordSource};
use crate::protocol::itch50::glimpse::{END_OF_SNAPSHOT, END_OF_SNAPSHOT_LEN};
use crate::protocol::itch50::message::encode;
use crate::protocol::itch50::soup::{self, kind, Login};
use crate::protocol::itch50::synth::Live;
use crate::protocol::itch50::Session;
use crate::symbol::Symbol;
use anyhow::{bail, Context, Result};
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use serde::Serialize;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `--glimpse-user`'s default.
pub const DEFAULT_USER: &str = "tgsim";
/// `--glimpse-password-env`'s default.
pub const DEFAULT_PASSWORD_ENV: &str = "TG_GLIMPSE_PW";
/// Fastest `slow:RATE`, messages a second.
pub const MAX_SLOW_RATE: u32 = 1_000_000;
/// Longest `delay:MS`, ms.
pub const MAX_DELAY_MS: u64 = 600_000;
/// A Server Heartbeat after this long without sending.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// A connection without a Login Request this long after connecting is closed.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for the pacing loop's copy of the state.
const STATE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for the client's FIN after the server's, on closing.
const CLOSE_WAIT: Duration = Duration::from_millis(500);
/// Sleep between two looks at a socket with nothing to do.
const TICK: Duration = Duration::from_millis(2);
/// Bytes written at once, at most (when no fault paces the writes).
const WRITE_CHUNK: usize = 64 * 1024;
/// State requests waiting for the pacing loop, at most.
const MAX_WAITING: usize = 256;
/// Connections served at once, at most: one more is closed as soon as it
/// is accepted (counted in [`Report::refused`]), so that a neighbour
/// opening connections in a loop cannot start a thread for each.
pub const MAX_CONNECTIONS: usize = 16;

/// A fault the server plays (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `reject-a`: Login Rejected, not authorized.
    RejectA,
    /// `reject-s`: Login Rejected, session not available.
    RejectS,
    /// `absent`: no listener.
    Absent,
    /// `slow:RATE`: at most RATE `S` packets a second.
    Slow(u32),
    /// `delay:MS`: a wait before Login Accepted, ms.
    Delay(u64),
    /// `stall:N`: nothing more after N messages.
    Stall(u64),
    /// `drop-fin:N`: close after N messages.
    DropFin(u64),
    /// `drop-rst:N`: abort (RST) after N messages.
    DropRst(u64),
    /// `z-before-g`: End of Session instead of End of Snapshot.
    ZBeforeG,
    /// `other-session`: Login Accepted for another session.
    OtherSession,
    /// `interleave`: `+` and `U` packets between the `S` packets.
    Interleave,
    /// `byte-writes`: one byte per write.
    ByteWrites,
}

/// The faults as `--glimpse-fault` takes them.
const FAULTS: &str = "reject-a, reject-s, absent, slow:RATE, delay:MS, stall:N, drop-fin:N, \
                      drop-rst:N, z-before-g, other-session, interleave, byte-writes";

impl std::str::FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Fault, String> {
        let (name, arg) = match s.split_once(':') {
            Some((name, arg)) => (name, Some(arg)),
            None => (s, None),
        };
        // A number after the colon, within `(min, max)` when given.
        let number = |what: &str, range: Option<(u64, u64)>| -> Result<u64, String> {
            let Some(arg) = arg else {
                return Err(format!("{name} needs a value: {name}:{what}"));
            };
            match (arg.parse::<u64>(), range) {
                (Ok(n), None) => Ok(n),
                (Ok(n), Some((min, max))) if (min..=max).contains(&n) => Ok(n),
                (_, Some((min, max))) => Err(format!(
                    "{name}:{arg}: {what} must be a whole number from {min} to {max}"
                )),
                (_, None) => Err(format!(
                    "{name}:{arg}: {what} must be a whole number from 0 to {}",
                    u64::MAX
                )),
            }
        };
        let plain = |f: Fault| match arg {
            None => Ok(f),
            Some(_) => Err(format!("{name} takes no value, got {s:?}")),
        };
        match name {
            "reject-a" => plain(Fault::RejectA),
            "reject-s" => plain(Fault::RejectS),
            "absent" => plain(Fault::Absent),
            "z-before-g" => plain(Fault::ZBeforeG),
            "other-session" => plain(Fault::OtherSession),
            "interleave" => plain(Fault::Interleave),
            "byte-writes" => plain(Fault::ByteWrites),
            // At most MAX_SLOW_RATE: fits.
            "slow" => {
                number("RATE", Some((1, u64::from(MAX_SLOW_RATE)))).map(|n| Fault::Slow(n as u32))
            }
            "delay" => number("MS", Some((0, MAX_DELAY_MS))).map(Fault::Delay),
            "stall" => number("N", None).map(Fault::Stall),
            "drop-fin" => number("N", None).map(Fault::DropFin),
            "drop-rst" => number("N", None).map(Fault::DropRst),
            _ => Err(format!("unknown GLIMPSE fault {s:?}: one of {FAULTS}")),
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::RejectA => f.write_str("reject-a"),
            Fault::RejectS => f.write_str("reject-s"),
            Fault::Absent => f.write_str("absent"),
            Fault::Slow(n) => write!(f, "slow:{n}"),
            Fault::Delay(n) => write!(f, "delay:{n}"),
            Fault::Stall(n) => write!(f, "stall:{n}"),
            Fault::DropFin(n) => write!(f, "drop-fin:{n}"),
            Fault::DropRst(n) => write!(f, "drop-rst:{n}"),
            Fault::ZBeforeG => f.write_str("z-before-g"),
            Fault::OtherSession => f.write_str("other-session"),
            Fault::Interleave => f.write_str("interleave"),
            Fault::ByteWrites => f.write_str("byte-writes"),
        }
    }
}

/// The server's flags. The password is not here: only the name of the
/// variable holding it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Where it listens (127.0.0.0/8).
    pub listen: SocketAddrV4,
    /// The username a login must give (1 to 6 printable ASCII characters).
    pub user: String,
    /// The environment variable holding the password.
    pub password_env: String,
    /// The fault played, if any.
    pub fault: Option<Fault>,
    /// The fault applies to this many logins with correct credentials, the
    /// first ones (0: every one).
    pub fault_logins: u64,
}

impl Params {
    /// A healthy server on `listen` with the default user and variable.
    pub fn new(listen: SocketAddrV4) -> Params {
        Params {
            listen,
            user: DEFAULT_USER.into(),
            password_env: DEFAULT_PASSWORD_ENV.into(),
            fault: None,
            fault_logins: 0,
        }
    }
}

/// Checks the flags (errors name the flag); the password is read by
/// [`Server::open`].
pub(super) fn check(p: &Params) -> Result<()> {
    if !p.listen.ip().is_loopback() {
        bail!(
            "simulate: --glimpse {} must be a loopback address (127.0.0.0/8): the GLIMPSE server listens on loopback only",
            p.listen
        );
    }
    let user = p.user.as_bytes();
    if user.is_empty() || user.len() > soup::USERNAME_LEN || !user.iter().all(u8::is_ascii_graphic)
    {
        bail!(
            "simulate: --glimpse-user {:?} must be 1 to {} printable ASCII characters (no spaces)",
            p.user,
            soup::USERNAME_LEN
        );
    }
    let mut name = p.password_env.bytes();
    let valid = name
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !valid {
        // Not echoed: it may be the password, given by mistake.
        bail!("simulate: --glimpse-password-env must name an environment variable (letters, digits and _, not starting with a digit), not hold the password");
    }
    if p.fault == Some(Fault::Absent) && p.fault_logins > 0 {
        bail!("simulate: --glimpse-fault absent takes no --glimpse-fault-logins: without a listener there is no login to count");
    }
    Ok(())
}

/// The GLIMPSE server's counts, in the simulator's report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Where it listened (the configured address when `absent`).
    pub listen: String,
    /// The fault, as given (`None`: healthy).
    pub fault: Option<String>,
    /// `--glimpse-fault-logins`.
    pub fault_logins: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Of `connections`, those closed at once: [`MAX_CONNECTIONS`] were
    /// being served.
    pub refused: u64,
    /// Login Requests with correct credentials.
    pub logins: u64,
    /// Logins refused for their credentials, their session or their form.
    pub rejected: u64,
    /// Logins the fault was played on.
    pub faults_applied: u64,
    /// Snapshots sent to the end, `G` included.
    pub snapshots_sent: u64,
    /// Snapshot messages sent in `S` packets (`G` not counted).
    pub messages_sent: u64,
}

/// The venue's state at one moment, as a GLIMPSE snapshot sends it: a
/// plain copy, taken between polls by [`super::Venue::glimpse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// N: the next multicast sequence when the copy was taken.
    pub next: u64,
    /// System Events sent so far, in order: (timestamp, code).
    pub events: Vec<(u64, u8)>,
    /// Every stock, in locate order (none before the opening).
    pub stocks: Vec<Stock>,
}

/// One stock of a [`State`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stock {
    /// Its symbol.
    pub symbol: Symbol,
    /// Its locate.
    pub locate: u16,
    /// Timestamp of its Stock Directory.
    pub listed: u64,
    /// Its last Trading Action: (timestamp, state).
    pub action: Option<(u64, u8)>,
    /// Its live orders, by order reference.
    pub orders: Vec<Live>,
}

impl State {
    /// The snapshot's messages in the order sent, `G` not included.
    pub fn messages(&self) -> Vec<Vec<u8>> {
        let orders: usize = self.stocks.iter().map(|s| s.orders.len()).sum();
        let mut out = Vec::with_capacity(self.events.len() + 2 * self.stocks.len() + orders);
        out.extend(
            self.events
                .iter()
                .map(|&(ts, code)| encode::system_event(ts, code)),
        );
        out.extend(
            self.stocks
                .iter()
                .map(|s| encode::stock_directory(s.locate, s.listed, s.symbol)),
        );
        out.extend(self.stocks.iter().filter_map(|s| {
            let (ts, state) = s.action?;
            Some(encode::trading_action(s.locate, ts, s.symbol, state))
        }));
        for s in &self.stocks {
            out.extend(s.orders.iter().map(|o| {
                encode::add_order(
                    s.locate,
                    o.entered,
                    o.order,
                    o.side,
                    o.shares,
                    s.symbol,
                    o.price,
                    o.attribution,
                )
            }));
        }
        out
    }

    /// End of Snapshot: `G` and [`State::next`] as 20 ASCII digits,
    /// right-justified and space-padded.
    pub fn end_of_snapshot(&self) -> [u8; END_OF_SNAPSHOT_LEN] {
        let mut g = [b' '; END_OF_SNAPSHOT_LEN];
        g[0] = END_OF_SNAPSHOT;
        let digits = self.next.to_string();
        g[END_OF_SNAPSHOT_LEN - digits.len()..].copy_from_slice(digits.as_bytes());
        g
    }
}

/// What every connection thread shares.
struct Shared {
    stop: AtomicBool,
    user: String,
    password: Password,
    session: Session,
    fault: Option<Fault>,
    fault_logins: u64,
    /// Logins with correct credentials so far (numbers them).
    logins: AtomicU64,
    report: Mutex<Report>,
    /// Where a connection asks the pacing loop for the state.
    requests: Sender<Sender<Arc<State>>>,
}

impl Shared {
    fn count(&self, f: impl FnOnce(&mut Report)) {
        if let Ok(mut r) = self.report.lock() {
            f(&mut r);
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// The running server: the pacing loop's end of it.
pub struct Server {
    shared: Arc<Shared>,
    requests: Receiver<Sender<Arc<State>>>,
    addr: Option<SocketAddrV4>,
    acceptor: Option<JoinHandle<Vec<JoinHandle<()>>>>,
}

impl Server {
    /// Checks `p`, reads the password from its variable (refusing to
    /// start without it, before any socket opens), and listens (unless the
    /// fault is `absent`) for logins to `session`.
    pub fn open(p: &Params, session: Session) -> Result<Server> {
        check(p)?;
        let password = read_password(&PasswordSource::Env(p.password_env.clone())).map_err(|e| {
            // read_password's errors begin with its key and the name; the
            // rest says what is wrong, never the value.
            // Named as `run` names it: not when it may be the password.
            let named = config::password_env_named(&p.password_env);
            let why = e
                .strip_prefix(&named)
                .and_then(|why| why.strip_prefix(": "))
                .unwrap_or("not read");
            let name = named.trim_start_matches("glimpse_password_env ");
            anyhow::anyhow!(
                "simulate: --glimpse reads the password from the environment variable {name} (--glimpse-password-env): {why}"
            )
        })?;
        let (tx, requests) = bounded(MAX_WAITING);
        let listener = match p.fault {
            Some(Fault::Absent) => None,
            _ => {
                let l = TcpListener::bind(p.listen)
                    .with_context(|| format!("simulate: GLIMPSE server on {}", p.listen))?;
                l.set_nonblocking(true)
                    .context("simulate: GLIMPSE server socket")?;
                Some(l)
            }
        };
        let addr = match &listener {
            None => None,
            Some(l) => match l.local_addr().context("simulate: GLIMPSE server address")? {
                std::net::SocketAddr::V4(a) => Some(a),
                std::net::SocketAddr::V6(_) => bail!("simulate: GLIMPSE server bound to IPv6"),
            },
        };
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            user: p.user.clone(),
            password,
            session,
            fault: p.fault,
            fault_logins: p.fault_logins,
            logins: AtomicU64::new(0),
            report: Mutex::new(Report {
                listen: addr.unwrap_or(p.listen).to_string(),
                fault: p.fault.map(|f| f.to_string()),
                fault_logins: p.fault_logins,
                ..Report::default()
            }),
            requests: tx,
        });
        let acceptor = match listener {
            None => None,
            Some(l) => {
                let shared = Arc::clone(&shared);
                Some(
                    std::thread::Builder::new()
                        .name("tg-sim-glimpse".into())
                        .spawn(move || accept(l, shared))
                        .context("simulate: starting the GLIMPSE server")?,
                )
            }
        };
        Ok(Server {
            shared,
            requests,
            addr,
            acceptor,
        })
    }

    /// Where it listens; `None` when `absent`.
    pub fn local_addr(&self) -> Option<SocketAddrV4> {
        self.addr
    }

    /// Gives every connection waiting for the state one copy of `venue`'s,
    /// as it is now. Never blocks.
    pub fn serve(&self, venue: &Venue) {
        if self.requests.is_empty() {
            return;
        }
        let state = Arc::new(venue.glimpse());
        while let Ok(reply) = self.requests.try_recv() {
            // Each reply channel holds one: the send cannot block, and a
            // connection gone meanwhile just drops it.
            let _ = reply.try_send(Arc::clone(&state));
        }
    }

    /// Stops the server: no more connections, every open one closed (its
    /// thread ended); the counts.
    pub fn finish(mut self) -> Report {
        self.shutdown();
        self.shared
            .report
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(acceptor) = self.acceptor.take() {
            for t in acceptor.join().unwrap_or_default() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The acceptor thread: a thread per connection (at most
/// [`MAX_CONNECTIONS`] at once) until stopped; hands back the threads
/// still running.
fn accept(listener: TcpListener, shared: Arc<Shared>) -> Vec<JoinHandle<()>> {
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    let mut n = 0u64;
    while !shared.stopped() {
        match listener.accept() {
            Ok((stream, _)) => {
                n += 1;
                shared.count(|r| r.connections += 1);
                threads.retain(|t| !t.is_finished());
                if threads.len() >= MAX_CONNECTIONS {
                    // Closed as it is dropped.
                    shared.count(|r| r.refused += 1);
                    continue;
                }
                let shared = Arc::clone(&shared);
                let t = std::thread::Builder::new()
                    .name(format!("tg-sim-glimpse-{n}"))
                    .spawn(move || connection(stream, &shared));
                // Out of threads: the connection is dropped, as a full
                // server would.
                if let Ok(t) = t {
                    threads.push(t);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(TICK),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // A connection that failed before it was accepted (reset):
            // the next one.
            Err(_) => std::thread::sleep(TICK),
        }
    }
    threads
}

/// Why a connection ended before its time.
#[derive(Debug)]
enum Gone {
    /// The client logged out or closed.
    Client,
    /// The simulator is stopping, or the state never came.
    Stop,
    /// A socket error (reset, …).
    Error,
}

/// One connection's socket (non-blocking) and what the client sent.
struct Conn<'a> {
    stream: TcpStream,
    shared: &'a Shared,
    reader: soup::Reader,
    buf: Vec<u8>,
    /// The Login Request, once one came (`None` inside: malformed).
    login: Option<Option<Login>>,
    last_sent: Instant,
    byte_writes: bool,
}

impl Conn<'_> {
    /// Reads what the client sent, without waiting: `Err` once it logged
    /// out or closed, on an error, or when the simulator stops.
    fn poll_client(&mut self) -> Result<(), Gone> {
        if self.shared.stopped() {
            return Err(Gone::Stop);
        }
        loop {
            match self.stream.read(&mut self.buf) {
                Ok(0) => return Err(Gone::Client),
                Ok(n) => {
                    let (login, mut logout) = (&mut self.login, false);
                    self.reader.push(&self.buf[..n], |f| match f.kind() {
                        Some(kind::LOGIN_REQUEST) if login.is_none() => {
                            *login = Some(soup::parse_login(f.payload()));
                            true
                        }
                        Some(kind::LOGOUT) => {
                            logout = true;
                            false
                        }
                        // Heartbeats and everything else: ignored.
                        _ => true,
                    });
                    if logout {
                        return Err(Gone::Client);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Err(Gone::Error),
            }
        }
    }

    /// Writes all of `bytes` (one byte per write under `byte-writes`),
    /// watching the client while the socket is full.
    fn write(&mut self, bytes: &[u8]) -> Result<(), Gone> {
        let mut at = 0;
        while at < bytes.len() {
            let end = if self.byte_writes {
                at + 1
            } else {
                bytes.len()
            };
            match self.stream.write(&bytes[at..end]) {
                Ok(0) => return Err(Gone::Error),
                Ok(n) => at += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.poll_client()?;
                    std::thread::sleep(TICK);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Err(Gone::Error),
            }
        }
        self.last_sent = Instant::now();
        Ok(())
    }

    /// Waits until `until` (`None`: until the client goes), sending a
    /// heartbeat after 1 s without sending when `heartbeats`.
    fn wait(&mut self, until: Option<Instant>, heartbeats: bool) -> Result<(), Gone> {
        loop {
            self.poll_client()?;
            let now = Instant::now();
            if heartbeats && now.duration_since(self.last_sent) >= HEARTBEAT {
                self.write(&soup::SERVER_HEARTBEAT)?;
            }
            let left = match until {
                Some(u) if now >= u => return Ok(()),
                Some(u) => u - now,
                None => TICK,
            };
            std::thread::sleep(left.min(TICK));
        }
    }

    /// Closes with a FIN, then waits a little for the client's (so that
    /// what it sent meanwhile does not turn the close into a reset).
    fn close(mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
        let until = Instant::now() + CLOSE_WAIT;
        while Instant::now() < until && self.poll_client().is_ok() {
            std::thread::sleep(TICK);
        }
    }

    /// Aborts with a reset: `SO_LINGER` 0, then close.
    fn abort(self) {
        let _ = socket2::SockRef::from(&self.stream).set_linger(Some(Duration::ZERO));
    }
}

/// One connection, on its own thread.
fn connection(stream: TcpStream, shared: &Shared) {
    let ready = stream
        .set_nonblocking(true)
        .and_then(|()| stream.set_nodelay(true));
    if ready.is_err() {
        return;
    }
    let mut conn = Conn {
        stream,
        shared,
        reader: soup::Reader::new(),
        buf: vec![0; 4096],
        login: None,
        last_sent: Instant::now(),
        byte_writes: false,
    };
    // Gone: the client went, an error, or the simulator stops; the
    // socket is dropped as it is.
    match serve(&mut conn) {
        Ok(End::Close) => conn.close(),
        Ok(End::Abort) => conn.abort(),
        Err(_) => {}
    }
}

/// How [`serve`] leaves the connection.
enum End {
    /// Close it (FIN).
    Close,
    /// Abort it (RST).
    Abort,
}

/// Serves a connection from its login: how to end it.
fn serve(conn: &mut Conn<'_>) -> Result<End, Gone> {
    let shared = conn.shared;
    let begun = Instant::now();
    let login = loop {
        conn.poll_client()?;
        if let Some(login) = conn.login.take() {
            break login;
        }
        if begun.elapsed() >= LOGIN_TIMEOUT {
            return Ok(End::Close);
        }
        std::thread::sleep(TICK);
    };
    let session = shared.session.0;
    let reject = match login {
        None => Some(soup::NOT_AUTHORIZED),
        Some(l) => {
            let user_ok = soup::trim(&l.user).eq_ignore_ascii_case(shared.user.as_bytes());
            // SoupBinTCP: both case-insensitive, left-justified,
            // space-padded.
            let password_ok =
                soup::trim(&l.password).eq_ignore_ascii_case(shared.password.as_bytes());
            let wanted = soup::trim(&l.session);
            if !(user_ok && password_ok) {
                Some(soup::NOT_AUTHORIZED)
            } else if !wanted.is_empty() && wanted != soup::trim(&session) {
                Some(soup::SESSION_NOT_AVAILABLE)
            } else {
                None
            }
        }
    };
    if let Some(reason) = reject {
        shared.count(|r| r.rejected += 1);
        conn.write(&soup::login_rejected(reason))?;
        return Ok(End::Close);
    }
    let k = shared.logins.fetch_add(1, Ordering::Relaxed) + 1;
    let fault = shared
        .fault
        .filter(|_| shared.fault_logins == 0 || k <= shared.fault_logins);
    shared.count(|r| {
        r.logins += 1;
        r.faults_applied += u64::from(fault.is_some());
    });
    match fault {
        Some(Fault::RejectA) => {
            conn.write(&soup::login_rejected(soup::NOT_AUTHORIZED))?;
            return Ok(End::Close);
        }
        Some(Fault::RejectS) => {
            conn.write(&soup::login_rejected(soup::SESSION_NOT_AVAILABLE))?;
            return Ok(End::Close);
        }
        _ => {}
    }
    // The state as it is now, from the pacing loop.
    let (reply, state) = bounded(1);
    if shared.requests.try_send(reply).is_err() {
        return Ok(End::Close);
    }
    let asked = Instant::now();
    let state = loop {
        match state.recv_timeout(TICK) {
            Ok(s) => break s,
            Err(RecvTimeoutError::Timeout) if asked.elapsed() < STATE_TIMEOUT => {
                conn.poll_client()?
            }
            Err(_) => return Err(Gone::Stop),
        }
    };
    let messages = state.messages();
    conn.byte_writes = fault == Some(Fault::ByteWrites);
    if let Some(Fault::Delay(ms)) = fault {
        // Nothing before Login Accepted, not even a heartbeat.
        conn.wait(Some(Instant::now() + Duration::from_millis(ms)), false)?;
    }
    let interleave = fault == Some(Fault::Interleave);
    let accepted_for = match fault {
        Some(Fault::OtherSession) => other_session(&session),
        _ => session,
    };
    let mut out = soup::login_accepted(&accepted_for, 1).to_vec();
    let between = |out: &mut Vec<u8>, i: usize| {
        if interleave {
            soup::debug(format!("tgsim spin {i}").as_bytes(), out);
            soup::unsequenced(b"tgsim", out);
        }
    };
    between(&mut out, 0);
    let stop_at = match fault {
        Some(Fault::Stall(n) | Fault::DropFin(n) | Fault::DropRst(n)) => {
            Some(usize::try_from(n).unwrap_or(usize::MAX).min(messages.len()))
        }
        _ => None,
    };
    let slow = match fault {
        Some(Fault::Slow(rate)) => Some(f64::from(rate)),
        _ => None,
    };
    let paced = slow.is_some() || conn.byte_writes;
    let start = Instant::now();
    let mut in_out = 0u64;
    for (i, m) in messages.iter().enumerate() {
        if stop_at == Some(i) {
            break;
        }
        if let Some(rate) = slow {
            // Packet i (A not counted) no earlier than i / RATE s after A.
            flush(conn, &mut out, &mut in_out)?;
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            conn.wait(Some(due), true)?;
        }
        soup::sequenced(m, &mut out);
        in_out += 1;
        between(&mut out, i + 1);
        if paced || out.len() >= WRITE_CHUNK {
            flush(conn, &mut out, &mut in_out)?;
            conn.poll_client()?;
        }
    }
    flush(conn, &mut out, &mut in_out)?;
    match fault {
        Some(Fault::Stall(_)) => {
            // Open and silent until the client goes.
            conn.wait(None, false)?;
            return Ok(End::Close);
        }
        Some(Fault::DropFin(_)) => return Ok(End::Close),
        Some(Fault::DropRst(_)) => return Ok(End::Abort),
        Some(Fault::ZBeforeG) => {
            conn.write(&soup::END_OF_SESSION)?;
            return Ok(End::Close);
        }
        _ => {}
    }
    if let Some(rate) = slow {
        let due = start + Duration::from_secs_f64(messages.len() as f64 / rate);
        conn.wait(Some(due), true)?;
    }
    soup::sequenced(&state.end_of_snapshot(), &mut out);
    flush(conn, &mut out, &mut in_out)?;
    shared.count(|r| r.snapshots_sent += 1);
    drop(state);
    // Heartbeats until the client logs out or closes.
    match conn.wait(None, true) {
        Err(Gone::Client) => Ok(End::Close),
        Err(gone) => Err(gone),
        Ok(()) => Ok(End::Close),
    }
}

/// Writes `out` and counts the `in_out` messages it held as sent.
fn flush(conn: &mut Conn<'_>, out: &mut Vec<u8>, in_out: &mut u64) -> Result<(), Gone> {
    if out.is_empty() {
        return Ok(());
    }
    conn.write(out)?;
    out.clear();
    let n = std::mem::take(in_out);
    if n > 0 {
        conn.shared.count(|r| r.messages_sent += n);
    }
    Ok(())
}

/// A session other than `session`, for `other-session`.
fn other_session(session: &[u8; soup::SESSION_LEN]) -> [u8; soup::SESSION_LEN] {
    let other = *b"OTHER00001";
    if soup::trim(session) == soup::trim(&other) {
        *b"OTHER00002"
    } else {
        other
    }
}

#[cfg(test)]
mod tests {
    use super::super::{publish_with, Params as VenueParams, VenueReport};
    use super::*;
    use crate::protocol::itch50::glimpse::{Client, End, Failure, Settings};
    use crate::protocol::itch50::message::{msg_type, Body, Message};
    use crate::protocol::itch50::mold::Kind;
    use crate::protocol::itch50::Packet;
    use std::collections::{BTreeMap, HashMap};
    use std::net::{Ipv4Addr, UdpSocket};

    /// The password's variable, named by these tests only.
    const PW_VAR: &str = "TG_TEST_SIM_GLIMPSE_PW";
    const PW: &str = "Zq7#Kp2x!w";
    const SESSION: [u8; 10] = *b"TGSIM00001";
    const LOCAL: Ipv4Addr = Ipv4Addr::LOCALHOST;
    /// 2026-01-05 09:30:00 in New York.
    const T0: u64 = 1_767_623_400_000_000_000;
    const MS: u64 = 1_000_000;

    fn set_password() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| std::env::set_var(PW_VAR, PW));
    }

    /// A book as the report shows it: locate, bid, bid size, ask, ask
    /// size, orders, trading state.
    type Book = (
        u16,
        Option<u32>,
        Option<u64>,
        Option<u32>,
        Option<u64>,
        u64,
        Option<u8>,
    );

    fn report_books(r: &VenueReport) -> BTreeMap<String, Book> {
        r.books
            .iter()
            .map(|(name, b)| {
                let state = b.trading_state.as_ref().map(|s| s.as_bytes()[0]);
                let book = (
                    b.locate, b.bid, b.bid_size, b.ask, b.ask_size, b.orders, state,
                );
                (name.clone(), book)
            })
            .collect()
    }

    /// A receiver's view built from messages: a snapshot's, then the feed's.
    #[derive(Debug, Default, Clone)]
    struct Model {
        events: Vec<u8>,
        stocks: BTreeMap<u16, String>,
        states: BTreeMap<u16, u8>,
        /// Order: locate, side, shares, price.
        orders: HashMap<u64, (u16, u8, u32, u32)>,
        mpids: usize,
    }

    impl Model {
        fn apply(&mut self, bytes: &[u8]) {
            let m = Message::new(bytes);
            let locate = m.locate();
            let mut reduce = |order: u64, n: u32| {
                let o = self.orders.get_mut(&order).expect("a live order");
                o.2 -= n;
                if o.2 == 0 {
                    self.orders.remove(&order);
                }
            };
            match m.body() {
                Body::SystemEvent { code } => self.events.push(code),
                Body::StockDirectory { stock, .. } => {
                    self.stocks.insert(locate, stock.to_string());
                }
                Body::TradingAction { state, .. } => {
                    self.states.insert(locate, state);
                }
                Body::AddOrder {
                    order,
                    side,
                    shares,
                    price,
                    attribution,
                    ..
                } => {
                    self.mpids += usize::from(attribution.is_some());
                    assert!(self
                        .orders
                        .insert(order, (locate, side, shares, price))
                        .is_none());
                }
                Body::Executed { order, shares, .. }
                | Body::ExecutedWithPrice { order, shares, .. }
                | Body::Cancel { order, shares } => reduce(order, shares),
                Body::Delete { order } => {
                    self.orders.remove(&order).expect("a live order");
                }
                Body::Replace {
                    original,
                    new,
                    shares,
                    price,
                } => {
                    let (locate, side, ..) = self.orders.remove(&original).expect("a live order");
                    self.orders.insert(new, (locate, side, shares, price));
                }
                _ => {}
            }
        }

        fn books(&self) -> BTreeMap<String, Book> {
            self.stocks
                .iter()
                .map(|(&locate, name)| {
                    let side = |s: u8, better: fn(u32, u32) -> bool| {
                        let mut top: Option<(u32, u64)> = None;
                        for &(_, _, shares, price) in
                            self.orders.values().filter(|o| o.0 == locate && o.1 == s)
                        {
                            top = match top {
                                Some((p, n)) if p == price => Some((p, n + u64::from(shares))),
                                Some((p, _)) if !better(price, p) => top,
                                _ => Some((price, u64::from(shares))),
                            };
                        }
                        top
                    };
                    let bid = side(b'B', |a, b| a > b);
                    let ask = side(b'S', |a, b| a < b);
                    let orders = self.orders.values().filter(|o| o.0 == locate).count();
                    let book = (
                        locate,
                        bid.map(|b| b.0),
                        bid.map(|b| b.1),
                        ask.map(|a| a.0),
                        ask.map(|a| a.1),
                        orders as u64,
                        self.states.get(&locate).copied(),
                    );
                    (name.clone(), book)
                })
                .collect()
        }
    }

    /// Every message of MoldUDP64 `datagrams` by sequence; true when the
    /// end of session is among them.
    fn sequenced(datagrams: &[Vec<u8>]) -> (BTreeMap<u64, Vec<u8>>, bool) {
        let (mut msgs, mut ended) = (BTreeMap::new(), false);
        for d in datagrams {
            let p = Packet::new_checked(&d[..]).expect("MoldUDP64");
            ended |= p.kind() == Kind::EndOfSession;
            for (q, m) in p.messages() {
                msgs.insert(q, m.bytes().to_vec());
            }
        }
        (msgs, ended)
    }

    /// Snapshot messages and the feed's from N on give the venue's books.
    fn check_books(snapshot: &[Vec<u8>], next: u64, line: &[Vec<u8>], r: &VenueReport) {
        let mut model = Model::default();
        snapshot.iter().for_each(|m| model.apply(m));
        let (msgs, ended) = sequenced(line);
        assert!(ended);
        let last = *msgs.keys().last().unwrap();
        assert_eq!(msgs.len() as u64, last, "no loss on a loopback line");
        msgs.range(next..).for_each(|(_, m)| model.apply(m));
        assert_eq!(model.books(), report_books(r));
        assert!(model.books().values().any(|b| b.5 > 0));
    }

    #[test]
    fn the_state_is_the_venue_between_polls() {
        let p = VenueParams {
            line_a: "127.0.0.1:39301".parse().unwrap(),
            recovery: None,
            rate: 2000.0,
            count: 3000,
            heartbeat_ms: 5,
            halt_every_s: 1,
            ..VenueParams::default()
        };
        let mut v = Venue::new(&p).unwrap();
        assert_eq!(v.glimpse().messages(), Vec::<Vec<u8>>::new());
        let (mut out, mut t) = (Vec::new(), T0);
        // 1.2 s in: the first stock halted since 1.0 s.
        while t < T0 + 1200 * MS {
            v.poll(t, &mut out);
            t += MS;
        }
        let state = v.glimpse();
        assert_eq!(state.next, v.next_sequence());
        let g = state.end_of_snapshot();
        assert_eq!(&g[..], format!("G{:>20}", state.next).as_bytes());
        let messages = state.messages();
        let codes: Vec<u8> = messages.iter().map(|m| m[0]).collect();
        let stocks = 8;
        assert_eq!(&codes[..3], b"SSS");
        assert!(codes[3..3 + stocks]
            .iter()
            .all(|&c| c == msg_type::STOCK_DIRECTORY));
        let actions = &codes[3 + stocks..3 + 2 * stocks];
        assert!(actions.iter().all(|&c| c == msg_type::TRADING_ACTION));
        assert!(codes[3 + 2 * stocks..]
            .iter()
            .all(|&c| c == msg_type::ADD_ORDER || c == msg_type::ADD_ORDER_MPID));
        let mut snap = Model::default();
        messages.iter().for_each(|m| snap.apply(m));
        assert_eq!(snap.events, b"OSQ");
        assert!(snap.mpids > 0, "F adds keep their MPID");
        assert_eq!(snap.states.values().filter(|&&s| s == b'H').count(), 1);
        assert_eq!(snap.books(), report_books(&v.report()), "the live orders");
        // The feed from N on takes the snapshot to the venue's end.
        let mut sent: Vec<Vec<u8>> = out.drain(..).map(|o| o.payload).collect();
        loop {
            v.poll(t, &mut out);
            if v.done(t) {
                break;
            }
            t += MS;
        }
        v.finish(t, &mut out);
        sent.extend(out.drain(..).map(|o| o.payload));
        check_books(&messages, state.next, &sent, &v.report());
        // After the end: every system event, N the end of session's.
        let end = v.glimpse();
        assert_eq!(end.next, v.next_sequence());
        assert_eq!(
            end.events.iter().map(|e| e.1).collect::<Vec<_>>(),
            b"OSQMEC"
        );
    }

    #[test]
    fn faults_parse_and_print_back() {
        for s in [
            "reject-a",
            "reject-s",
            "absent",
            "slow:1",
            "slow:1000000",
            "delay:0",
            "delay:600000",
            "stall:0",
            "drop-fin:7",
            "drop-rst:18446744073709551615",
            "z-before-g",
            "other-session",
            "interleave",
            "byte-writes",
        ] {
            let f: Fault = s.parse().unwrap();
            assert_eq!(f.to_string(), s);
        }
        assert_eq!("slow:25".parse(), Ok(Fault::Slow(25)));
        for (bad, needle) in [
            ("", "unknown GLIMPSE fault"),
            (
                "reject",
                "unknown GLIMPSE fault \"reject\": one of reject-a",
            ),
            ("Reject-A", "unknown"),
            ("slow", "slow needs a value: slow:RATE"),
            ("slow:0", "RATE must be a whole number from 1 to 1000000"),
            (
                "slow:1000001",
                "RATE must be a whole number from 1 to 1000000",
            ),
            (
                "stall:18446744073709551616",
                "N must be a whole number from 0 to 18446744073709551615",
            ),
            ("delay:600001", "MS must be a whole number from 0 to 600000"),
            ("delay:-1", "MS must be"),
            ("stall:x", "stall:x: N must be a whole number"),
            ("drop-fin:", "N must be a whole number"),
            ("absent:1", "absent takes no value"),
            ("interleave:", "takes no value"),
        ] {
            let e = bad.parse::<Fault>().unwrap_err();
            assert!(e.contains(needle) && !e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_server_parameters_are_one_clear_error() {
        set_password();
        let ok = Params {
            password_env: PW_VAR.into(),
            ..Params::new(SocketAddrV4::new(LOCAL, 0))
        };
        let cases: Vec<(Params, &str)> = vec![
            (
                Params {
                    listen: "10.1.2.3:18100".parse().unwrap(),
                    ..ok.clone()
                },
                "--glimpse 10.1.2.3:18100 must be a loopback address",
            ),
            (
                Params {
                    listen: "0.0.0.0:18100".parse().unwrap(),
                    ..ok.clone()
                },
                "loopback only",
            ),
            (
                Params {
                    user: String::new(),
                    ..ok.clone()
                },
                "--glimpse-user",
            ),
            (
                Params {
                    user: "sevenXX".into(),
                    ..ok.clone()
                },
                "--glimpse-user",
            ),
            (
                Params {
                    user: "a b".into(),
                    ..ok.clone()
                },
                "--glimpse-user",
            ),
            (
                Params {
                    password_env: PW.into(),
                    ..ok.clone()
                },
                "--glimpse-password-env must name",
            ),
            (
                Params {
                    password_env: "TG_TEST_SIM_GLIMPSE_UNSET".into(),
                    ..ok.clone()
                },
                "the environment variable TG_TEST_SIM_GLIMPSE_UNSET (--glimpse-password-env): not set",
            ),
            (
                Params {
                    password_env: "hunter2x".into(),
                    ..ok.clone()
                },
                "the environment variable (its value not shown: not an upper-case variable's name, it may be the password) (--glimpse-password-env): not set",
            ),
            (
                Params {
                    fault: Some(Fault::Absent),
                    fault_logins: 1,
                    ..ok.clone()
                },
                "absent takes no --glimpse-fault-logins",
            ),
        ];
        for (p, needle) in cases {
            let e = Server::open(&p, Session(SESSION))
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains(needle) && !e.contains('\n'), "{needle}: {e}");
            assert!(!e.contains(PW) && !e.contains("hunter2x"), "{e}");
        }
        // The venue checks them too, and publish refuses port 0.
        let venue = |g: Params| VenueParams {
            line_a: "127.0.0.1:39302".parse().unwrap(),
            glimpse: Some(g),
            ..VenueParams::default()
        };
        let bad = venue(Params {
            listen: "192.0.2.1:18100".parse().unwrap(),
            ..ok.clone()
        });
        assert!(Venue::new(&bad).is_err());
        let stop = AtomicBool::new(false);
        let e = super::super::publish(&venue(ok.clone()), &stop).unwrap_err();
        assert!(e.to_string().contains("port 0"), "{e}");
        assert!(Server::open(&ok, Session(SESSION)).is_ok());
    }

    /// A venue publishing on a loopback line the test reads, with a GLIMPSE
    /// server on an ephemeral port.
    struct Sim {
        addr: Option<SocketAddrV4>,
        stop: Arc<AtomicBool>,
        venue: JoinHandle<Result<VenueReport>>,
        line: Arc<Mutex<Vec<Vec<u8>>>>,
        reader_stop: Arc<AtomicBool>,
        reader: JoinHandle<()>,
    }

    impl Sim {
        fn start(venue: impl FnOnce(&mut VenueParams), glimpse: impl FnOnce(&mut Params)) -> Sim {
            set_password();
            let socket = UdpSocket::bind((LOCAL, 0)).unwrap();
            socket
                .set_read_timeout(Some(Duration::from_millis(5)))
                .unwrap();
            let std::net::SocketAddr::V4(line_a) = socket.local_addr().unwrap() else {
                unreachable!()
            };
            let mut p = VenueParams {
                line_a,
                recovery: None,
                symbols: 4,
                rate: 20_000.0,
                count: 400,
                linger_ms: 600_000,
                ..VenueParams::default()
            };
            venue(&mut p);
            let mut g = Params {
                password_env: PW_VAR.into(),
                ..Params::new(SocketAddrV4::new(LOCAL, 0))
            };
            glimpse(&mut g);
            p.glimpse = Some(g.clone());
            let v = Venue::new(&p).unwrap();
            let server = Server::open(&g, v.session()).unwrap();
            let addr = server.local_addr();
            let line = Arc::new(Mutex::new(Vec::new()));
            let reader_stop = Arc::new(AtomicBool::new(false));
            let reader = {
                let (line, stop) = (Arc::clone(&line), Arc::clone(&reader_stop));
                std::thread::spawn(move || {
                    let mut buf = [0u8; 2048];
                    while !stop.load(Ordering::Relaxed) {
                        if let Ok(n) = socket.recv(&mut buf) {
                            line.lock().unwrap().push(buf[..n].to_vec());
                        }
                    }
                })
            };
            let stop = Arc::new(AtomicBool::new(false));
            let venue = {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || publish_with(&p, v, Some(server), &stop))
            };
            Sim {
                addr,
                stop,
                venue,
                line,
                reader_stop,
                reader,
            }
        }

        /// Waits (5 s at most) until the line's messages satisfy `f`.
        fn wait_line(&self, f: impl Fn(&BTreeMap<u64, Vec<u8>>, bool) -> bool) {
            let until = Instant::now() + Duration::from_secs(5);
            loop {
                let (msgs, ended) = sequenced(&self.line.lock().unwrap());
                if f(&msgs, ended) {
                    return;
                }
                assert!(Instant::now() < until, "the line never got there");
                std::thread::sleep(Duration::from_millis(2));
            }
        }

        /// A venue that has ended: its state no longer changes.
        fn ended(glimpse: impl FnOnce(&mut Params)) -> Sim {
            let sim = Sim::start(|_| {}, glimpse);
            sim.wait_line(|_, ended| ended);
            sim
        }

        fn finish(self) -> (VenueReport, Vec<Vec<u8>>) {
            self.stop.store(true, Ordering::Relaxed);
            let report = self.venue.join().unwrap().unwrap();
            self.reader_stop.store(true, Ordering::Relaxed);
            self.reader.join().unwrap();
            let line = std::mem::take(&mut *self.line.lock().unwrap());
            (report, line)
        }

        fn addr(&self) -> SocketAddrV4 {
            self.addr.expect("listening")
        }
    }

    /// How the client's connection ended.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum How {
        /// The client's logic decided.
        Decided,
        Eof,
        Reset,
        Idle,
    }

    #[derive(Debug)]
    struct Fetched {
        end: End,
        how: How,
        /// The messages the client applied.
        messages: Vec<Vec<u8>>,
        /// Every server packet's type, in order, `G`'s `S` included.
        kinds: Vec<u8>,
        /// From connecting to the first byte and to the outcome.
        first_byte: Option<Duration>,
        elapsed: Duration,
    }

    fn settings() -> Settings {
        Settings {
            session: Some(SESSION),
            max_messages: 1_000_000,
        }
    }

    /// Logs in with `login` and reads as the client's logic would, a read
    /// waiting `idle` at most; after a snapshot, keeps reading for `after`
    /// (the packets' types go to `kinds`), then logs out.
    fn fetch_with(
        addr: SocketAddrV4,
        login: &[u8],
        settings: Settings,
        idle: Duration,
        after: Duration,
    ) -> std::io::Result<Fetched> {
        let begun = Instant::now();
        let mut s = TcpStream::connect_timeout(&addr.into(), Duration::from_secs(2))?;
        s.write_all(login)?;
        s.set_read_timeout(Some(idle))?;
        let mut client = Client::new(settings);
        let mut framer = soup::Reader::new();
        let (mut messages, mut kinds, mut first_byte) = (Vec::new(), Vec::new(), None);
        let mut buf = vec![0u8; 65_536];
        let (end, how) = loop {
            assert!(
                begun.elapsed() < Duration::from_secs(10),
                "a fetch too long"
            );
            match s.read(&mut buf) {
                Ok(0) => break (client.on_eof(), How::Eof),
                Ok(n) => {
                    first_byte.get_or_insert(begun.elapsed());
                    framer.push(&buf[..n], |f| {
                        kinds.push(f.kind().unwrap());
                        true
                    });
                    let sink = &mut |m: Message<'_>| messages.push(m.bytes().to_vec());
                    if let Some(end) = client.on_bytes(&buf[..n], sink) {
                        break (end, How::Decided);
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    break (client.on_idle(), How::Idle)
                }
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                    break (client.on_reset(), How::Reset)
                }
                Err(e) => return Err(e),
            }
        };
        let elapsed = begun.elapsed();
        if matches!(end, End::Snapshot { .. }) && !after.is_zero() {
            let until = Instant::now() + after;
            s.set_read_timeout(Some(Duration::from_millis(20)))?;
            while Instant::now() < until {
                if let Ok(n) = s.read(&mut buf) {
                    framer.push(&buf[..n], |f| {
                        kinds.push(f.kind().unwrap());
                        true
                    });
                }
            }
        }
        let _ = s.write_all(&soup::LOGOUT);
        Ok(Fetched {
            end,
            how,
            messages,
            kinds,
            first_byte,
            elapsed,
        })
    }

    fn login() -> [u8; 49] {
        soup::login(DEFAULT_USER.as_bytes(), PW.as_bytes())
    }

    fn fetch(addr: SocketAddrV4) -> Fetched {
        let idle = Duration::from_secs(3);
        fetch_with(addr, &login(), settings(), idle, Duration::ZERO).unwrap()
    }

    fn snapshot(f: &Fetched) -> (u64, u64) {
        match f.end {
            End::Snapshot { next, messages, .. } => (next, messages),
            _ => panic!("no snapshot: {f:?}"),
        }
    }

    fn failure(f: &Fetched) -> (Failure, Option<u8>) {
        match f.end {
            End::Failed { class, cause, .. } => (class, cause.rejected()),
            _ => panic!("a snapshot: {f:?}"),
        }
    }

    #[test]
    fn a_login_mid_stream_gets_the_venue_at_n_then_heartbeats() {
        let sim = Sim::start(
            |p| {
                p.symbols = 8;
                p.rate = 5_000.0;
                p.count = 6_000;
            },
            |_| {},
        );
        sim.wait_line(|msgs, _| msgs.len() > 1_000);
        let f = fetch_with(
            sim.addr(),
            &login(),
            settings(),
            Duration::from_secs(3),
            Duration::from_millis(1_300),
        )
        .unwrap();
        let (next, n) = snapshot(&f);
        assert_eq!(n, f.messages.len() as u64);
        assert_eq!(f.kinds[0], kind::LOGIN_ACCEPTED);
        let spin = &f.kinds[1..];
        let g = spin
            .iter()
            .position(|&k| k != kind::SEQUENCED)
            .unwrap_or(spin.len())
            - 1;
        assert_eq!(g as u64, n, "A, the messages and G, each in an S");
        assert!(
            spin[g + 1..].contains(&kind::SERVER_HEARTBEAT),
            "a heartbeat within 1.3 s of G: {:?}",
            &spin[g + 1..]
        );
        sim.wait_line(|_, ended| ended);
        let (report, line) = sim.finish();
        assert!(
            next > 1_000 && next <= report.messages,
            "taken mid-stream: {next}"
        );
        check_books(&f.messages, next, &line, &report);
        let g = report.glimpse.unwrap();
        assert_eq!(
            (g.connections, g.logins, g.rejected, g.faults_applied),
            (1, 1, 0, 0)
        );
        assert_eq!((g.snapshots_sent, g.messages_sent), (1, n));
    }

    #[test]
    fn after_the_end_the_snapshot_is_the_final_books_and_bad_logins_are_rejected() {
        let sim = Sim::ended(|_| {});
        let f = fetch(sim.addr());
        let (next, _) = snapshot(&f);
        // Several connections at once, each served on its own.
        let many: Vec<Fetched> = std::thread::scope(|s| {
            let ts: Vec<_> = (0..4).map(|_| s.spawn(|| fetch(sim.addr()))).collect();
            ts.into_iter().map(|t| t.join().unwrap()).collect()
        });
        for m in &many {
            assert_eq!(m.messages, f.messages);
            assert_eq!(snapshot(m).0, next);
        }
        // The username and the password ignore ASCII case and padding.
        let idle = Duration::from_secs(3);
        for (user, pw) in [("TGSIM", PW.to_string()), (DEFAULT_USER, PW.to_lowercase())] {
            let other_case = soup::login(user.as_bytes(), pw.as_bytes());
            let ok = fetch_with(sim.addr(), &other_case, settings(), idle, Duration::ZERO).unwrap();
            assert_eq!(ok.messages, f.messages, "{user}");
        }
        for (user, pw) in [
            (DEFAULT_USER, "wrong"),
            (DEFAULT_USER, &PW[1..]),
            ("other", PW),
            (DEFAULT_USER, ""),
        ] {
            let bad = soup::login(user.as_bytes(), pw.as_bytes());
            let r = fetch_with(sim.addr(), &bad, settings(), idle, Duration::ZERO).unwrap();
            assert_eq!(failure(&r), (Failure::Rejected, Some(b'A')), "{user}");
        }
        // Another session asked for: not available; this one, padded: fine.
        let mut other = login();
        other[19..29].copy_from_slice(b"TGSIM00002");
        let r = fetch_with(sim.addr(), &other, settings(), idle, Duration::ZERO).unwrap();
        assert_eq!(failure(&r), (Failure::Rejected, Some(b'S')));
        let mut same = login();
        same[19..29].copy_from_slice(b"TGSIM00001");
        let r = fetch_with(sim.addr(), &same, settings(), idle, Duration::ZERO).unwrap();
        assert_eq!(snapshot(&r).0, next);
        // A malformed login (a bad sequence field).
        let mut malformed = login();
        malformed[48] = b'x';
        let r = fetch_with(sim.addr(), &malformed, settings(), idle, Duration::ZERO).unwrap();
        assert_eq!(failure(&r), (Failure::Rejected, Some(b'A')));
        let (report, line) = sim.finish();
        assert_eq!(next, report.messages + 1, "N: after the end of session");
        check_books(&f.messages, next, &line, &report);
        let json = serde_json::to_string(&report).unwrap();
        assert!(!json.contains(PW) && !json.contains(PW_VAR), "{json}");
        let g = report.glimpse.unwrap();
        assert_eq!(
            (g.connections, g.logins, g.rejected, g.faults_applied),
            (14, 8, 6, 0)
        );
        assert_eq!(g.snapshots_sent, 8);
        assert_eq!(g.messages_sent, 8 * f.messages.len() as u64);
        assert_eq!(g.fault, None);
    }

    /// A free loopback port: nothing listens on it afterwards.
    fn unused_port() -> u16 {
        TcpListener::bind((LOCAL, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// A neighbour opening connections that never log in gets at most
    /// `MAX_CONNECTIONS` served; each one past them is closed at once
    /// (not a thread more), and a login still works once they go.
    #[test]
    fn connections_past_the_bound_are_closed_at_once() {
        let sim = Sim::ended(|_| {});
        let extra = 4;
        let idle: Vec<TcpStream> = (0..MAX_CONNECTIONS + extra)
            .map(|_| {
                let s =
                    TcpStream::connect_timeout(&sim.addr().into(), Duration::from_secs(2)).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
                s
            })
            .collect();
        // Accepted in order: the first ones are served (silent until
        // their login), the last ones closed.
        for (k, mut s) in idle.iter().enumerate().rev().take(extra) {
            let mut b = [0u8; 8];
            assert_eq!(s.read(&mut b).ok(), Some(0), "connection {k} closed");
        }
        drop(idle);
        // Their threads end as the clients go (each seeing its client's
        // end at its next look): a login is served again, those before
        // closed at once as the extra ones were.
        let (begun, mut closed) = (Instant::now(), 0);
        let f = loop {
            let f = fetch(sim.addr());
            if matches!(f.end, End::Snapshot { .. }) || begun.elapsed() > Duration::from_secs(10) {
                break f;
            }
            closed += 1;
            std::thread::sleep(Duration::from_millis(50));
        };
        snapshot(&f);
        let g = sim.finish().0.glimpse.unwrap();
        assert_eq!(g.refused, extra as u64 + closed);
        assert!(g.connections > (MAX_CONNECTIONS + extra) as u64);
    }

    #[test]
    fn rejections_and_no_listener() {
        for (fault, reason) in [("reject-a", b'A'), ("reject-s", b'S')] {
            let sim = Sim::ended(|g| g.fault = Some(fault.parse().unwrap()));
            let f = fetch(sim.addr());
            assert_eq!(failure(&f), (Failure::Rejected, Some(reason)), "{fault}");
            assert_eq!(f.kinds, [kind::LOGIN_REJECTED]);
            let g = sim.finish().0.glimpse.unwrap();
            assert_eq!((g.logins, g.rejected, g.faults_applied), (1, 0, 1));
            assert_eq!(g.fault.as_deref(), Some(fault));
            // The server closes after its `J`: that packet, then the end.
            let sim = Sim::ended(|g| g.fault = Some(fault.parse().unwrap()));
            let mut s =
                TcpStream::connect_timeout(&sim.addr().into(), Duration::from_secs(2)).unwrap();
            s.write_all(&login()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut all = Vec::new();
            s.read_to_end(&mut all).expect("closed, not silent");
            assert_eq!(all, [0, 2, kind::LOGIN_REJECTED, reason], "{fault}");
            sim.finish();
        }
        let listen = SocketAddrV4::new(LOCAL, unused_port());
        let sim = Sim::ended(|g| {
            g.listen = listen;
            g.fault = Some(Fault::Absent);
        });
        assert_eq!(sim.addr, None);
        let idle = Duration::from_secs(1);
        let e = fetch_with(listen, &login(), settings(), idle, Duration::ZERO).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
        let g = sim.finish().0.glimpse.unwrap();
        assert_eq!((g.connections, g.listen), (0, listen.to_string()));
    }

    #[test]
    fn drops_and_end_of_session_close_before_the_end() {
        for (fault, how) in [("drop-fin:5", How::Eof), ("drop-rst:5", How::Reset)] {
            let sim = Sim::ended(|g| g.fault = Some(fault.parse().unwrap()));
            let f = fetch(sim.addr());
            assert_eq!(failure(&f).0, Failure::Closed, "{fault}");
            assert_eq!(f.how, how, "{fault}");
            assert_eq!(f.messages.len(), 5, "{fault}");
            let g = sim.finish().0.glimpse.unwrap();
            assert_eq!(
                (g.faults_applied, g.snapshots_sent, g.messages_sent),
                (1, 0, 5)
            );
        }
        let sim = Sim::ended(|g| {
            g.fault = Some(Fault::ZBeforeG);
            g.fault_logins = 1;
        });
        let z = fetch(sim.addr());
        assert_eq!(failure(&z).0, Failure::Closed);
        assert_eq!(
            (z.how, *z.kinds.last().unwrap()),
            (How::Decided, kind::END_OF_SESSION)
        );
        let healthy = fetch(sim.addr());
        snapshot(&healthy);
        assert_eq!(z.messages, healthy.messages, "every message, then Z");
    }

    #[test]
    fn another_session_fails_a_checking_client_only() {
        let sim = Sim::ended(|g| g.fault = Some(Fault::OtherSession));
        let f = fetch(sim.addr());
        assert_eq!(failure(&f).0, Failure::Session);
        let any = Settings {
            session: None,
            ..settings()
        };
        let idle = Duration::from_secs(3);
        let f = fetch_with(sim.addr(), &login(), any, idle, Duration::ZERO).unwrap();
        assert!(matches!(f.end, End::Snapshot { session, .. } if session == *b"OTHER00001"));
        let g = sim.finish().0.glimpse.unwrap();
        assert_eq!((g.logins, g.faults_applied, g.snapshots_sent), (2, 2, 2));
    }

    #[test]
    fn interleaved_packets_and_byte_writes_give_the_same_snapshot() {
        for fault in [Fault::Interleave, Fault::ByteWrites] {
            // The first login faulty, the second healthy.
            let sim = Sim::ended(|g| {
                g.fault = Some(fault);
                g.fault_logins = 1;
            });
            let faulty = fetch(sim.addr());
            let healthy = fetch(sim.addr());
            assert_eq!(snapshot(&faulty), snapshot(&healthy), "{fault}");
            assert_eq!(faulty.messages, healthy.messages, "{fault}");
            let extra = |f: &Fetched| {
                f.kinds
                    .iter()
                    .filter(|&&k| k == kind::DEBUG || k == kind::UNSEQUENCED)
                    .count()
            };
            assert_eq!(extra(&healthy), 0);
            if fault == Fault::Interleave {
                assert_eq!(extra(&faulty), 2 * (faulty.messages.len() + 1));
            } else {
                assert_eq!(faulty.kinds, healthy.kinds);
            }
            let g = sim.finish().0.glimpse.unwrap();
            assert_eq!((g.logins, g.faults_applied, g.snapshots_sent), (2, 1, 2));
        }
    }

    #[test]
    fn a_stall_keeps_the_connection_silent_while_others_are_served() {
        let sim = Sim::ended(|g| {
            g.fault = Some(Fault::Stall(3));
            g.fault_logins = 1;
        });
        let idle = Duration::from_millis(1_200);
        let stalled = std::thread::scope(|s| {
            let stalled = s.spawn(|| {
                fetch_with(sim.addr(), &login(), settings(), idle, Duration::ZERO).unwrap()
            });
            // Served meanwhile.
            std::thread::sleep(Duration::from_millis(100));
            snapshot(&fetch(sim.addr()));
            stalled.join().unwrap()
        });
        assert_eq!(
            (failure(&stalled).0, stalled.how),
            (Failure::Closed, How::Idle)
        );
        assert_eq!(stalled.messages.len(), 3);
        assert_eq!(stalled.kinds, b"ASSS", "no heartbeat either");
        assert!(stalled.elapsed >= idle);
    }

    #[test]
    fn slow_and_delayed_servers_take_their_time() {
        let sim = Sim::ended(|g| g.fault = Some(Fault::Slow(100)));
        let f = fetch(sim.addr());
        let (_, n) = snapshot(&f);
        // G, packet n, no earlier than n / 100 s after A.
        let least = Duration::from_millis(n * 10);
        assert!(n >= 20 && f.elapsed >= least, "{n} in {:?}", f.elapsed);
        drop(sim);
        let sim = Sim::ended(|g| g.fault = Some(Fault::Delay(300)));
        let f = fetch(sim.addr());
        snapshot(&f);
        assert!(f.first_byte.unwrap() >= Duration::from_millis(300), "{f:?}");
    }
}
