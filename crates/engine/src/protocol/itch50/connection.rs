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
//! The password lives in the thread only: it goes into the Login Request
//! and nowhere else.

use super::config::Password;
use super::feed::{Settings, Staging};
use super::glimpse::{self, End};
use super::snapshot::Spin;
use super::soup;
use crossbeam_channel::{bounded, Receiver, Sender, TryRecvError};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4, TcpStream};
use std::time::{Duration, Instant};

/// The client sends a heartbeat when it sent nothing for this long.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// Longest a read waits before the thread looks for an abort.
const POLL: Duration = Duration::from_millis(50);
/// Bytes read at once.
const READ: usize = 64 * 1024;

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

enum Command {
    /// Connect, attempt `id`, checked by the settings.
    Start(u64, glimpse::Settings),
    /// Drop the running attempt.
    Abort,
    /// A staging state to reuse.
    Recycle(Box<Staging>),
}

/// The receive thread's end of the connection thread.
#[derive(Debug)]
pub struct Connection {
    commands: Sender<Command>,
    ends: Receiver<(u64, End, Box<Staging>)>,
    /// The running attempt's id: ends of an aborted one are dropped.
    attempt: u64,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Command::Start(..) => "Start",
            Command::Abort => "Abort",
            Command::Recycle(_) => "Recycle",
        })
    }
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
        let (commands, rx) = bounded(8);
        let (tx, ends) = bounded(2);
        let thread = std::thread::Builder::new()
            .name(format!("tg-glimpse-{name}"))
            .spawn(move || run(target, password, settings, rx, tx))?;
        Ok(Connection {
            commands,
            ends,
            attempt: 0,
            thread: Some(thread),
        })
    }

    /// Starts a connection checked by `settings`.
    pub fn start(&mut self, settings: glimpse::Settings) {
        self.attempt += 1;
        let _ = self
            .commands
            .try_send(Command::Start(self.attempt, settings));
    }

    /// Drops the running connection (its end will not be reported).
    pub fn abort(&mut self) {
        self.attempt += 1;
        let _ = self.commands.try_send(Command::Abort);
    }

    /// The end of the running connection, if the thread reported it, with
    /// its staging state.
    pub fn poll(&mut self) -> Option<(End, Box<Staging>)> {
        loop {
            let (id, end, staging) = self.ends.try_recv().ok()?;
            if id == self.attempt {
                return Some((end, staging));
            }
            self.recycle(staging);
        }
    }

    /// Hands a staging state back to the thread, to reuse or drop there.
    pub fn recycle(&mut self, staging: Box<Staging>) {
        let _ = self.commands.try_send(Command::Recycle(staging));
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Closing the command channel ends the thread within a poll.
        let (dead, _) = bounded(0);
        self.commands = dead;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: one connection per start, until the receive thread goes.
fn run(
    target: Target,
    password: Password,
    settings: Settings,
    commands: Receiver<Command>,
    ends: Sender<(u64, End, Box<Staging>)>,
) {
    let mut spare: Option<Box<Staging>> = None;
    let login = soup::login(target.user.as_bytes(), password.as_bytes());
    drop(password);
    let mut buf = vec![0u8; READ];
    while let Ok(command) = commands.recv() {
        let (id, check) = match command {
            Command::Start(id, check) => (id, check),
            Command::Abort => continue,
            Command::Recycle(s) => {
                spare = Some(s);
                continue;
            }
        };
        let staging = spare
            .take()
            .unwrap_or_else(|| Box::new(Staging::new(&settings)));
        let mut spin = Spin::new(check, staging);
        match attempt(&target, &login, &mut spin, &commands, &mut spare, &mut buf) {
            Some(end) => {
                if ends.send((id, end, spin.into_staging())).is_err() {
                    return;
                }
            }
            None => spare = Some(spin.into_staging()),
        }
    }
}

/// One connection: its end, or `None` when aborted.
fn attempt(
    target: &Target,
    login: &[u8],
    spin: &mut Spin,
    commands: &Receiver<Command>,
    spare: &mut Option<Box<Staging>>,
    buf: &mut [u8],
) -> Option<End> {
    let begun = Instant::now();
    let idle = Duration::from_nanos(target.idle_ns);
    let timeout = Duration::from_nanos(target.timeout_ns);
    let server = SocketAddr::V4(target.server);
    let mut stream = match TcpStream::connect_timeout(&server, idle.min(timeout)) {
        Ok(s) => s,
        Err(e) if is_timeout(e.kind()) => return Some(spin.client().on_idle()),
        Err(_) => return Some(spin.client().on_reset()),
    };
    let _ = stream.set_nodelay(true);
    if stream.write_all(login).is_err() {
        return Some(spin.client().on_reset());
    }
    let mut last_sent = Instant::now();
    let mut last_byte = Instant::now();
    let end = loop {
        match commands.try_recv() {
            Ok(Command::Abort) | Err(TryRecvError::Disconnected) => {
                let _ = stream.shutdown(Shutdown::Both);
                return None;
            }
            Ok(Command::Recycle(s)) => *spare = Some(s),
            // The receive thread starts one connection at a time.
            Ok(Command::Start(..)) | Err(TryRecvError::Empty) => {}
        }
        let now = Instant::now();
        if now.duration_since(begun) >= timeout {
            break spin.client().on_timeout();
        }
        if now.duration_since(last_byte) >= idle {
            break spin.client().on_idle();
        }
        if now.duration_since(last_sent) >= HEARTBEAT {
            if stream.write_all(&soup::CLIENT_HEARTBEAT).is_err() {
                break spin.client().on_reset();
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
            Ok(0) => break spin.client().on_eof(),
            Ok(n) => {
                last_byte = Instant::now();
                if let Some(end) = spin.on_bytes(&buf[..n]) {
                    break end;
                }
            }
            Err(e) if is_timeout(e.kind()) || e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break spin.client().on_reset(),
        }
    };
    if matches!(end, End::Snapshot { .. }) {
        let _ = stream.write_all(&soup::LOGOUT);
    }
    let _ = stream.shutdown(Shutdown::Both);
    Some(end)
}

fn is_timeout(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::WouldBlock | ErrorKind::TimedOut)
}
