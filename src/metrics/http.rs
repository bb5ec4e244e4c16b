//! The `/metrics` endpoint: a small HTTP/1.x server on one thread that
//! answers each request with the exporter's text and closes.
//!
//! It holds at most [`MAX_OPEN`] connections, each for at most
//! [`DEADLINE`]: a neighbour holding idle connections, or trickling bytes,
//! costs scrapes at most that wait, never a file descriptor per
//! connection, a spinning thread or a log line per connection. When full,
//! a new connection takes the place of the oldest still reading its
//! request (a scrape sends its request as soon as it connects, so it is
//! read before it is the oldest); while every one held is answering, no
//! new one is accepted. Answers are written as the sockets take them.
//! Errors accepting (out of file descriptors) are logged at most once a
//! minute, with how many there were.

use metrics_exporter_prometheus::PrometheusHandle;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Connections held at once, at most.
pub const MAX_OPEN: usize = 32;

/// How long a connection may take to send its request and take the
/// answer.
pub const DEADLINE: Duration = Duration::from_secs(1);

/// The longest request head read (the request line and headers).
const HEAD_MAX: usize = 8 * 1024;

/// How long the loop waits for something to do, and after an accept
/// error.
const TICK: Duration = Duration::from_millis(100);

/// Accept errors are logged at most this often.
const ERROR_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// A connection: its request head being read, then its answer being
/// written (never waited for: what the socket takes now, the rest when
/// `poll` says it has room).
struct Open {
    stream: TcpStream,
    head: Vec<u8>,
    /// The answer, once the head is whole; `sent` of its bytes written.
    out: Vec<u8>,
    sent: usize,
    since: Instant,
}

impl Open {
    fn new(stream: TcpStream) -> Open {
        Open {
            stream,
            head: Vec::new(),
            out: Vec::new(),
            sent: 0,
            since: Instant::now(),
        }
    }

    /// What `poll` waits for on it: room to write once answering.
    fn events(&self) -> libc::c_short {
        if self.out.is_empty() {
            libc::POLLIN
        } else {
            libc::POLLOUT
        }
    }
}

/// Moves `o` on without waiting: reads its request (answering once it is
/// whole), writes what the socket takes of its answer. Whether to keep it
/// (false: answered, closed or failed).
fn step(o: &mut Open, handle: &PrometheusHandle) -> bool {
    if o.out.is_empty() && !read_head(o, handle) {
        return false;
    }
    o.out.is_empty() || flush(o)
}

/// Serves `listener` with `handle`'s text until the process ends.
pub fn serve(listener: TcpListener, handle: PrometheusHandle) {
    // Nonblocking accepts: the loop waits in `poll` only.
    if let Err(e) = listener.set_nonblocking(true) {
        tracing::error!(error = %e, "metrics listener: cannot serve");
        return;
    }
    let mut open: Vec<Open> = Vec::with_capacity(MAX_OPEN);
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(MAX_OPEN + 1);
    let mut ready: Vec<bool> = Vec::with_capacity(MAX_OPEN);
    let mut errors = AcceptErrors::default();
    loop {
        // Every connection answering: none is accepted until one is done
        // (they wait in the kernel's backlog), so that a flood of
        // requests nobody reads cannot push out a scrape being answered.
        fds.clear();
        fds.push(pollfd(
            listener.as_raw_fd(),
            if accepting(&open) { libc::POLLIN } else { 0 },
        ));
        fds.extend(
            open.iter()
                .map(|o| pollfd(o.stream.as_raw_fd(), o.events())),
        );
        if crate::sys::poll(&mut fds, TICK).is_err() {
            std::thread::sleep(TICK);
            continue;
        }
        // Ready connections first: a request already in is answered
        // before a new connection may take its place.
        ready.clear();
        ready.extend(fds[1..].iter().map(|f| f.revents != 0));
        let mut k = 0;
        open.retain_mut(|o| {
            let keep = !ready[k] || step(o, &handle);
            k += 1;
            keep && o.since.elapsed() < DEADLINE
        });
        if fds[0].revents != 0 {
            accept_some(&listener, &mut open, &handle, &mut errors);
        }
    }
}

/// Whether a new connection may be taken: room among those held, or one
/// of them still reading (it can make room). With every one held
/// answering, new ones wait in the kernel's backlog.
fn accepting(open: &[Open]) -> bool {
    open.len() < MAX_OPEN || open.iter().any(|o| o.out.is_empty())
}

fn pollfd(fd: std::os::fd::RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Accept errors since the last one logged.
#[derive(Default)]
struct AcceptErrors {
    logged_at: Option<Instant>,
    unlogged: u64,
}

/// Takes up to [`MAX_OPEN`] pending connections (then `poll` again, so
/// that every one held is read before many more arrive). Each is read at
/// once, and answered if its request is in; else it is held, the newest
/// replacing the oldest still reading when [`MAX_OPEN`] are
/// ([`make_room`]): a scrape among a flood of connections is answered
/// before it can be dropped. While every one held is answering, none is
/// accepted: the rest wait in the kernel's backlog.
fn accept_some(
    listener: &TcpListener,
    open: &mut Vec<Open>,
    handle: &PrometheusHandle,
    errors: &mut AcceptErrors,
) {
    for _ in 0..MAX_OPEN {
        if !accepting(open) {
            return;
        }
        match listener.accept() {
            Ok((stream, _)) => {
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                let mut new = Open::new(stream);
                if !step(&mut new, handle) {
                    continue;
                }
                if open.len() >= MAX_OPEN && !make_room(open, handle) && new.out.is_empty() {
                    // Every one held turned to answering as it was moved
                    // on: the new one, idle, goes. One answering already
                    // is held past the bound (by one at most: nothing more
                    // is accepted while every one held answers), its
                    // answer never cut.
                    continue;
                }
                open.push(new);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                // Out of file descriptors, most likely: what is held is
                // served, and accepting is tried again after a pause.
                errors.unlogged += 1;
                if errors
                    .logged_at
                    .is_none_or(|at| at.elapsed() >= ERROR_LOG_INTERVAL)
                {
                    tracing::warn!(error = %e, errors = errors.unlogged, "metrics listener: cannot accept connections");
                    errors.logged_at = Some(Instant::now());
                    errors.unlogged = 0;
                }
                std::thread::sleep(TICK);
                return;
            }
        }
    }
}

/// Drops the oldest connection still reading (`open` is in arrival
/// order), moved on one last time first; one whose request came in since
/// is kept, answering, and the next oldest reading goes. False when every
/// one held is answering.
fn make_room(open: &mut Vec<Open>, handle: &PrometheusHandle) -> bool {
    while let Some(v) = open.iter().position(|o| o.out.is_empty()) {
        let mut oldest = open.remove(v);
        if step(&mut oldest, handle) && !oldest.out.is_empty() {
            open.insert(v, oldest);
            continue;
        }
        return true;
    }
    false
}

/// Where a request head ends in `head` (the blank line; a bare LF is
/// taken for CRLF), if it does.
fn head_end(head: &[u8]) -> Option<usize> {
    find(head, b"\r\n\r\n").or_else(|| find(head, b"\n\n"))
}

/// Reads what `o` sent; once its request head is whole (or longer than
/// [`HEAD_MAX`]), its answer is made, to be written. False when it
/// closed or failed before that.
fn read_head(o: &mut Open, handle: &PrometheusHandle) -> bool {
    let mut buf = [0u8; 2048];
    loop {
        match o.stream.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => {
                o.head.extend_from_slice(&buf[..n]);
                if let Some(end) = head_end(&o.head) {
                    o.out = answer(&o.head[..end], handle);
                    return true;
                }
                if o.head.len() > HEAD_MAX {
                    o.out = status(431, "Request Header Fields Too Large");
                    return true;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The whole response to request head `head`: `GET` or `HEAD` of
/// `/health` is `OK`, of any other path the metrics; another method 405,
/// a head that is not HTTP/1.x 400.
fn answer(head: &[u8], handle: &PrometheusHandle) -> Vec<u8> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut words = line.split(|&b| b == b' ');
    let (Some(method), Some(path), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return status(400, "Bad Request");
    };
    if !version.starts_with(b"HTTP/1.") {
        return status(400, "Bad Request");
    }
    let body_too = match method {
        b"GET" => true,
        b"HEAD" => false,
        _ => return status(405, "Method Not Allowed"),
    };
    let (body, kind) = if path == b"/health" {
        ("OK".to_string(), "text/plain")
    } else {
        handle.run_upkeep();
        (handle.render(), "text/plain; version=0.0.4")
    };
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if body_too {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// A response of status `code` without a body.
fn status(code: u16, reason: &str) -> Vec<u8> {
    format!("HTTP/1.1 {code} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .into_bytes()
}

/// Writes what the socket takes now of `o`'s answer. Whether to keep
/// it: false once all is written (closed then), or the write failed.
fn flush(o: &mut Open) -> bool {
    while o.sent < o.out.len() {
        match o.stream.write(&o.out[o.sent..]) {
            Ok(0) => return false,
            Ok(n) => o.sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle() -> PrometheusHandle {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .build_recorder()
            .handle()
    }

    /// A scrape whose request is in, then a flood of idle connections
    /// queued behind it: it is answered, not pushed out unread to make
    /// room, and no more than [`MAX_OPEN`] are held.
    #[test]
    fn a_request_in_is_answered_before_a_flood_can_push_it_out() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let at = listener.local_addr().unwrap();
        let mut scrape = TcpStream::connect(at).unwrap();
        scrape.write_all(b"GET /health HTTP/1.0\r\n\r\n").unwrap();
        let _flood: Vec<TcpStream> = (0..3 * MAX_OPEN)
            .map(|_| TcpStream::connect(at).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        let (h, mut open, mut errors) = (handle(), Vec::new(), AcceptErrors::default());
        for _ in 0..3 {
            accept_some(&listener, &mut open, &h, &mut errors);
            assert!(open.len() <= MAX_OPEN);
        }
        assert_answered_ok(scrape);
    }

    /// Reads `scrape`'s whole answer (5 s at most): `/health`'s `OK`.
    fn assert_answered_ok(mut scrape: TcpStream) {
        scrape
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut got = String::new();
        scrape.read_to_string(&mut got).unwrap();
        assert!(got.ends_with("\r\n\r\nOK"), "{got:?}");
    }

    /// While every one held is answering, a new connection is not
    /// accepted (its answer could not be held, and would be cut): it
    /// waits in the backlog, and is answered once one held is done.
    #[test]
    fn while_every_one_held_answers_a_scrape_waits_in_the_backlog() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let at = listener.local_addr().unwrap();
        let mut clients = Vec::new();
        let mut open = Vec::new();
        while open.len() < MAX_OPEN {
            clients.push(TcpStream::connect(at).unwrap());
            let Ok((stream, _)) = listener.accept() else {
                continue;
            };
            stream.set_nonblocking(true).unwrap();
            let mut o = Open::new(stream);
            // Answering: an answer not yet taken by its reader.
            o.out = vec![b'x'; 1 << 20];
            open.push(o);
        }
        let mut scrape = TcpStream::connect(at).unwrap();
        scrape.write_all(b"GET /health HTTP/1.0\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let (h, mut errors) = (handle(), AcceptErrors::default());
        accept_some(&listener, &mut open, &h, &mut errors);
        assert_eq!(open.len(), MAX_OPEN);
        scrape.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 1];
        let waiting = scrape.read(&mut byte);
        assert!(
            waiting
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
            "the scrape was taken and answered or closed: {waiting:?}"
        );
        // One held is done: the scrape is taken and answered whole.
        open.pop();
        accept_some(&listener, &mut open, &h, &mut errors);
        scrape.set_nonblocking(false).unwrap();
        assert_answered_ok(scrape);
    }

    /// A client that does not read its answer costs the server no wait:
    /// what its socket takes is written, the rest kept for when `poll`
    /// says there is room, and the connection is kept meanwhile.
    #[test]
    fn an_answer_is_written_without_waiting_for_its_reader() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, _) = listener.accept().unwrap();
        stream.set_nonblocking(true).unwrap();
        let mut o = Open::new(stream);
        o.out = vec![b'x'; 64 << 20];
        assert!(flush(&mut o), "kept, to be written when there is room");
        assert!(o.sent > 0 && o.sent < o.out.len(), "{} written", o.sent);
        assert_eq!(o.events(), libc::POLLOUT);
    }

    /// A client streaming a request head without end is answered 431
    /// once it passes [`HEAD_MAX`]: what is held of it stays bounded.
    #[test]
    fn a_head_without_end_is_answered_431_at_its_bound() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, _) = listener.accept().unwrap();
        stream.set_nonblocking(true).unwrap();
        let mut o = Open::new(stream);
        let h = handle();
        // 64 KiB of header lines and never the blank line: read as it
        // comes, until the bound answers it.
        let line = b"X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
        let mut sent = 0;
        client.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
        while o.out.is_empty() && sent < 64 << 10 {
            client.write_all(line).unwrap();
            sent += line.len();
            assert!(read_head(&mut o, &h), "kept");
        }
        assert!(
            o.out.starts_with(b"HTTP/1.1 431 "),
            "{:?}",
            String::from_utf8_lossy(&o.out)
        );
        assert!(
            o.head.len() <= HEAD_MAX + 2048,
            "{} bytes held",
            o.head.len()
        );
    }

    #[test]
    fn requests_are_answered_by_method_and_path() {
        let h = handle();
        let text = |head: &str| String::from_utf8(answer(head.as_bytes(), &h)).unwrap();
        let get = text("GET /metrics HTTP/1.1\r\nHost: x");
        assert!(
            get.starts_with("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"),
            "{get}"
        );
        let health = text("GET /health HTTP/1.0");
        let lf = text("GET /health HTTP/1.0\nHost: x");
        assert_eq!(lf, health, "a bare LF ends a line too");
        assert_eq!(head_end(b"GET / HTTP/1.0\n\n"), Some(14));
        assert_eq!(head_end(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n"), Some(23));
        assert_eq!(head_end(b"GET / HTTP/1.0\r\n"), None);
        assert!(health.ends_with("\r\n\r\nOK"), "{health}");
        let head = text("HEAD /health HTTP/1.1");
        assert!(
            head.contains("Content-Length: 2\r\n") && head.ends_with("\r\n\r\n"),
            "{head}"
        );
        assert!(text("POST /metrics HTTP/1.1").starts_with("HTTP/1.1 405 "));
        for bad in [
            "GET /metrics",
            "GET /metrics SPDY/3",
            "",
            "GET  /metrics HTTP/1.1",
        ] {
            assert!(text(bad).starts_with("HTTP/1.1 400 "), "{bad:?}");
        }
    }
}
