//! UDP line sockets, `recvmmsg` batch receive with kernel timestamps and
//! the kernel's drop counter, and `sendmmsg` batch send (a channel's
//! requests).

use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;

/// Largest datagram received whole, bytes (a jumbo frame's payload).
pub const MAX_DATAGRAM: usize = 9216;

/// How a line socket was set up, as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineInfo {
    /// The line's destination.
    pub addr: SocketAddrV4,
    /// Joined as multicast (any-source or source-specific), or bound unicast.
    pub membership: String,
    /// SO_RCVBUF in effect, bytes (the kernel doubles the request and caps it).
    pub rcvbuf: usize,
    /// SO_RCVBUF requested, bytes.
    pub rcvbuf_requested: usize,
    /// Why the kernel refused to set SO_RCVBUF at all, if it did.
    pub rcvbuf_error: Option<String>,
    /// Kernel receive timestamps (SO_TIMESTAMPNS) enabled.
    pub timestamps: bool,
    /// Kernel drop counter (SO_RXQ_OVFL) enabled.
    pub drop_counter: bool,
}

/// A non-blocking socket receiving one line.
pub struct LineSocket {
    socket: Socket,
    /// What the kernel granted.
    pub info: LineInfo,
    /// A multicast line's membership: (group, source, interface).
    group: Option<(Ipv4Addr, Option<Ipv4Addr>, Ipv4Addr)>,
    /// Whether the group is joined (a unicast line: always true).
    joined: bool,
}

fn setsockopt_int(fd: i32, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: passes a pointer to a live i32 and its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl LineInfo {
    /// One line saying that the receive buffer is smaller than requested
    /// (refused, or capped by `net.core.rmem_max`: Linux reports twice the
    /// size it accepted) or of unknown size, with what was granted; `None`
    /// when it was granted.
    pub fn rcvbuf_shortfall(&self) -> Option<String> {
        if !self.rcvbuf_capped() {
            return None;
        }
        let (asked, got) = (self.rcvbuf_requested, self.rcvbuf);
        if let Some(e) = &self.rcvbuf_error {
            // Nothing accepted: what SO_RCVBUF reads is the default as it
            // stands (net.core.rmem_default), not doubled.
            let keeps = match got {
                0 => "a receive buffer of unknown size".to_string(),
                _ => format!("the default receive buffer, {got} bytes"),
            };
            return Some(format!(
                "line {}: SO_RCVBUF of {asked} bytes refused ({e}); the socket keeps {keeps}",
                self.addr
            ));
        }
        if got == 0 {
            return Some(format!(
                "line {}: SO_RCVBUF of {asked} bytes set, but its size could not be read back",
                self.addr
            ));
        }
        Some(format!(
            "line {}: receive buffer capped at {} of the {asked} bytes asked \
                 (SO_RCVBUF reads {got}: Linux doubles what it accepts); \
                 raise net.core.rmem_max to at least {asked}",
            self.addr,
            got / 2
        ))
    }

    /// Whether the kernel holds less receive buffer than was asked:
    /// refused, capped, or of unknown size.
    pub fn rcvbuf_capped(&self) -> bool {
        let (asked, got) = (self.rcvbuf_requested, self.rcvbuf);
        self.rcvbuf_error.is_some() || got == 0 || got < asked.saturating_mul(2)
    }
}

impl LineSocket {
    /// Whether the line's group is joined (a unicast line's socket is
    /// always bound).
    pub fn joined(&self) -> bool {
        self.joined
    }

    /// Whether the line is a multicast group (joined and left), not a
    /// bound unicast address.
    pub fn is_group(&self) -> bool {
        self.group.is_some()
    }

    /// Joins (`on`) or leaves a multicast line's group, as it was joined at
    /// open (from its source, on its interface): one `setsockopt`, no
    /// wait. Datagrams the kernel queued before a leave are still
    /// received. A unicast line has nothing to leave: false, and the caller
    /// drops what arrives while it does not want it. True when the
    /// membership changed.
    pub fn set_joined(&mut self, on: bool) -> io::Result<bool> {
        let Some((group, source, interface)) = self.group else {
            return Ok(false);
        };
        if on == self.joined {
            return Ok(false);
        }
        match (on, source) {
            (true, Some(src)) => self.socket.join_ssm_v4(&src, &group, &interface)?,
            (true, None) => self.socket.join_multicast_v4(&group, &interface)?,
            (false, Some(src)) => self.socket.leave_ssm_v4(&src, &group, &interface)?,
            (false, None) => self.socket.leave_multicast_v4(&group, &interface)?,
        }
        self.joined = on;
        Ok(true)
    }

    /// Opens a line: a multicast address is joined on `interface` (from
    /// `source` only, when given), a unicast one is bound. A multicast line
    /// sets SO_REUSEADDR, so several feeds (and sidecars) share a group's
    /// port: each member gets its own copy of every datagram. A unicast
    /// socket (a unicast line, a recovery channel) sets neither
    /// SO_REUSEADDR nor SO_REUSEPORT: the kernel hands a unicast datagram
    /// to one socket of a shared port, so sharing would let another local
    /// user bind the port too and take the answers; unshared, that bind
    /// fails with EADDRINUSE. `IP_MULTICAST_ALL` is turned off so the
    /// socket gets only its own group. Options the kernel refuses are
    /// reported in [`LineInfo`], not fatal, except the bind and the join.
    pub fn open(
        addr: SocketAddrV4,
        source: Option<Ipv4Addr>,
        interface: Ipv4Addr,
        rcvbuf: usize,
    ) -> io::Result<LineSocket> {
        let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_reuse_address(addr.ip().is_multicast())?;
        socket.set_nonblocking(true)?;
        let rcvbuf_requested = rcvbuf;
        let rcvbuf_error = socket
            .set_recv_buffer_size(rcvbuf)
            .err()
            .map(|e| e.to_string());
        let rcvbuf = socket.recv_buffer_size().unwrap_or(0);
        let fd = socket.as_raw_fd();
        let timestamps = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1).is_ok();
        let drop_counter = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1).is_ok();
        let membership = if addr.ip().is_multicast() {
            // Binding to the group address makes the kernel filter on it.
            socket.bind(&addr.into())?;
            socket.set_multicast_all_v4(false)?;
            // The error names the interface: an address not of this host
            // (a typo, an interface not up yet) fails here, ENODEV.
            let joined = |r: io::Result<()>| {
                r.map_err(|e| {
                    let what = format!("joining the group on interface {interface}: {e}");
                    io::Error::new(e.kind(), what)
                })
            };
            match source {
                Some(src) => {
                    joined(socket.join_ssm_v4(&src, addr.ip(), &interface))?;
                    format!("joined {} from {src} on {interface}", addr.ip())
                }
                None => {
                    joined(socket.join_multicast_v4(addr.ip(), &interface))?;
                    format!("joined {} on {interface}", addr.ip())
                }
            }
        } else {
            socket.bind(&addr.into())?;
            format!("bound {addr}")
        };
        // Port 0 asked for an ephemeral port: the line is where it landed.
        let addr = match socket.local_addr().ok().and_then(|a| a.as_socket_ipv4()) {
            Some(bound) if addr.port() == 0 => bound,
            _ => addr,
        };
        let group = addr
            .ip()
            .is_multicast()
            .then_some((*addr.ip(), source, interface));
        Ok(LineSocket {
            socket,
            group,
            joined: true,
            info: LineInfo {
                addr,
                membership,
                rcvbuf,
                rcvbuf_requested,
                rcvbuf_error,
                timestamps,
                drop_counter,
            },
        })
    }
}

/// What the kernel said about one received datagram.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meta {
    /// Bytes received.
    pub len: usize,
    /// Kernel receive time, ns since the Unix epoch (CLOCK_REALTIME); `None`
    /// if the kernel attached none.
    pub time_ns: Option<u64>,
    /// The socket's cumulative drop count (SO_RXQ_OVFL), if attached.
    pub drops: Option<u32>,
    /// The datagram was larger than the buffer and was cut (MSG_TRUNC).
    pub truncated: bool,
    /// Its sender's address, as the kernel reported it.
    pub from: Option<SocketAddrV4>,
}

/// Control-message space per datagram: a timespec and a u32, with headers.
const CMSG_SPACE: usize = 64;

/// Preallocated `sendmmsg` state: up to `n` datagrams of at most `size`
/// bytes each, queued with [`push`](Self::push) and sent to one
/// destination in one call ([`send`](Self::send)). Built once; each send
/// reuses it.
pub struct SendBatch {
    bufs: Box<[u8]>,
    /// One iovec per buffer; only reached through `hdrs`' pointers.
    iovecs: Box<[libc::iovec]>,
    /// The destination, read by the kernel through `hdrs`' pointers.
    name: Box<libc::sockaddr_in>,
    hdrs: Box<[libc::mmsghdr]>,
    /// Bytes a datagram holds at most.
    size: usize,
    /// Datagrams queued.
    len: usize,
}

// SAFETY: the raw pointers inside `iovecs` and `hdrs` point only into this
// struct's own boxed buffers and address, which move with it.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// Room for `n` datagrams (at least 1) of at most `size` bytes.
    pub fn new(n: usize, size: usize) -> SendBatch {
        let n = n.max(1);
        let mut bufs = vec![0u8; n * size].into_boxed_slice();
        let mut iovecs: Box<[libc::iovec]> = (0..n)
            .map(|i| libc::iovec {
                iov_base: bufs[i * size..].as_mut_ptr().cast(),
                iov_len: 0,
            })
            .collect();
        // SAFETY: sockaddr_in is plain data; zeroed is a valid address.
        let mut name: Box<libc::sockaddr_in> = Box::new(unsafe { std::mem::zeroed() });
        let hdrs: Box<[libc::mmsghdr]> = (0..n)
            .map(|i| {
                // SAFETY: msghdr is plain data; zeroed is a valid empty header.
                let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
                h.msg_name = (&mut *name as *mut libc::sockaddr_in).cast();
                h.msg_namelen = NAME_LEN;
                h.msg_iov = &mut iovecs[i];
                h.msg_iovlen = 1;
                libc::mmsghdr {
                    msg_hdr: h,
                    msg_len: 0,
                }
            })
            .collect();
        SendBatch {
            bufs,
            iovecs,
            name,
            hdrs,
            size,
            len: 0,
        }
    }

    /// Queues `payload`; false (nothing queued) when the batch is full or
    /// `payload` longer than its datagrams.
    pub fn push(&mut self, payload: &[u8]) -> bool {
        if self.len == self.hdrs.len() || payload.len() > self.size {
            return false;
        }
        let at = self.len * self.size;
        self.bufs[at..at + payload.len()].copy_from_slice(payload);
        self.iovecs[self.len].iov_len = payload.len();
        self.len += 1;
        true
    }

    /// Datagrams queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sends the queued datagrams to `to` from `socket`, in order, without
    /// blocking, and empties the batch: one `sendmmsg` for them all (one
    /// more after a partial send, to learn its error). How many went, and
    /// the error that stopped the rest (`WouldBlock`: the send buffer
    /// full).
    pub fn send(&mut self, socket: &LineSocket, to: SocketAddrV4) -> (usize, Option<io::Error>) {
        *self.name = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: to.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*to.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        let (len, mut sent, mut error) = (self.len, 0, None);
        while sent < len {
            // SAFETY: headers `sent..len` point at this batch's own
            // address and iovecs, each over its own buffer with the length
            // queued; the kernel only reads them (and writes `msg_len`).
            let n = unsafe {
                libc::sendmmsg(
                    socket.socket.as_raw_fd(),
                    self.hdrs[sent..].as_mut_ptr(),
                    (len - sent) as u32,
                    libc::MSG_DONTWAIT,
                )
            };
            match n {
                n if n > 0 => sent += n as usize,
                0 => break,
                _ => {
                    let e = io::Error::last_os_error();
                    if e.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    error = Some(e);
                    break;
                }
            }
        }
        self.len = 0;
        (sent, error)
    }
}

/// Preallocated `recvmmsg` state: buffers, iovecs, headers and control
/// space for `n` datagrams. Built once; each receive reuses it.
pub struct Batch {
    bufs: Box<[u8]>,
    /// Control space; only reached through `hdrs`' pointers.
    #[allow(dead_code)]
    cmsgs: Box<[u64]>,
    /// One iovec per buffer; only reached through `hdrs`' pointers.
    #[allow(dead_code)]
    iovecs: Box<[libc::iovec]>,
    /// One sender address per buffer, written by the kernel through
    /// `hdrs`' pointers.
    names: Box<[libc::sockaddr_in]>,
    hdrs: Box<[libc::mmsghdr]>,
    metas: Box<[Meta]>,
    len: usize,
    /// Arrival of each datagram of the last receive, made non-decreasing
    /// in queue order across receives (see [`arrival_ns`](Self::arrival_ns)).
    arrivals: Box<[u64]>,
    /// The arrival of the last datagram handed out so far (what the next
    /// one's is raised to), ns since the Unix epoch.
    last_arrival_ns: u64,
    /// The latest arrival among the datagrams of the last receive that
    /// took any: the last one's, unless a clock step back came within it.
    max_arrival_ns: u64,
    /// The socket's cumulative drop count as the last receive reported it.
    drops: Option<u32>,
    /// Bytes of sender address asked of the kernel per datagram: 0 unless
    /// [`with_senders`](Self::with_senders) (a line needs none; a channel
    /// checks its answers' sender).
    name_len: libc::socklen_t,
    /// Headers from the first the kernel may have written into since they
    /// were last reset: those the last receive filled, and the one after
    /// (a receive that failed there). The rest are as reset: an idle
    /// receive of a batch of 1,024 resets one header, not 1,024.
    touched: usize,
}

// SAFETY: the raw pointers inside `iovecs` and `hdrs` (to buffers, control
// space and sender addresses) point only into this
// struct's own boxed buffers, which move with it.
unsafe impl Send for Batch {}

impl Batch {
    /// State for batches of up to `n` datagrams (at least 1).
    pub fn new(n: usize) -> Batch {
        let n = n.max(1);
        let mut bufs = vec![0u8; n * MAX_DATAGRAM].into_boxed_slice();
        // Words, not bytes: the kernel's control headers (`cmsghdr`) are
        // read in place and need their alignment.
        const WORDS: usize = CMSG_SPACE / 8;
        let mut cmsgs = vec![0u64; n * WORDS].into_boxed_slice();
        let mut iovecs: Box<[libc::iovec]> = (0..n)
            .map(|i| libc::iovec {
                iov_base: bufs[i * MAX_DATAGRAM..].as_mut_ptr().cast(),
                iov_len: MAX_DATAGRAM,
            })
            .collect();
        // SAFETY: sockaddr_in is plain data; zeroed is a valid address.
        let mut names: Box<[libc::sockaddr_in]> = vec![unsafe { std::mem::zeroed() }; n].into();
        let hdrs: Box<[libc::mmsghdr]> = (0..n)
            .map(|i| {
                // SAFETY: msghdr is plain data; zeroed is a valid empty header.
                let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
                h.msg_name = (&mut names[i] as *mut libc::sockaddr_in).cast();
                h.msg_namelen = NAME_LEN;
                h.msg_iov = &mut iovecs[i];
                h.msg_iovlen = 1;
                h.msg_control = cmsgs[i * WORDS..].as_mut_ptr().cast();
                h.msg_controllen = CMSG_SPACE;
                libc::mmsghdr {
                    msg_hdr: h,
                    msg_len: 0,
                }
            })
            .collect();
        Batch {
            bufs,
            cmsgs,
            iovecs,
            names,
            hdrs,
            metas: vec![Meta::default(); n].into_boxed_slice(),
            len: 0,
            arrivals: vec![0; n].into_boxed_slice(),
            last_arrival_ns: 0,
            max_arrival_ns: 0,
            drops: None,
            name_len: 0,
            touched: n,
        }
    }

    /// The batch also reads each datagram's sender
    /// ([`Meta::from`]); without it the kernel copies no address.
    pub fn with_senders(mut self) -> Batch {
        self.name_len = NAME_LEN;
        self.touched = self.hdrs.len();
        self
    }

    /// Receives what is queued on `socket`, up to the batch size, without
    /// blocking. Returns how many datagrams arrived (0 when none). `now_ns`
    /// (ns since the Unix epoch, CLOCK_REALTIME, read before the call) is
    /// the arrival time of datagrams the kernel did not timestamp.
    #[inline]
    pub fn recv(&mut self, socket: &LineSocket, now_ns: u64) -> io::Result<usize> {
        for h in self.hdrs[..self.touched].iter_mut() {
            // The kernel overwrites these on every call: reset them.
            h.msg_hdr.msg_controllen = CMSG_SPACE;
            h.msg_hdr.msg_namelen = self.name_len;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: every header points at this batch's own iovec, buffer and
        // control space, sized as declared; the kernel writes within them.
        let n = unsafe {
            libc::recvmmsg(
                socket.socket.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        self.touched = (n.max(0) as usize + 1).min(self.hdrs.len());
        if n < 0 {
            let e = io::Error::last_os_error();
            self.len = 0;
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        let n = n as usize;
        for i in 0..n {
            let mut m = parse_meta(&self.hdrs[i]);
            m.from = sender(&self.names[i], self.hdrs[i].msg_hdr.msg_namelen);
            // The count is cumulative and the same or higher on later
            // datagrams (modulo 2^32): the last one reported is the latest.
            if m.drops.is_some() {
                self.drops = m.drops;
            }
            self.metas[i] = m;
        }
        let metas = &self.metas;
        self.len = n;
        let at = (&mut self.last_arrival_ns, &mut self.max_arrival_ns);
        arrive(&mut self.arrivals[..n], at, |i| {
            metas[i].time_ns.unwrap_or(now_ns)
        });
        Ok(n)
    }

    /// Arrival time of datagram `i` of the last receive, ns since the Unix
    /// epoch: the kernel's timestamp (or, without one, the clock passed to
    /// [`recv`](Self::recv)), raised to the latest arrival before it on
    /// this socket. Kernel timestamps of one socket are not always in queue
    /// order (each is taken on the CPU that received the packet); raised,
    /// they are, so the last datagram in hand is the latest and everything
    /// still queued in the kernel arrives at or after it. One more than
    /// [`STEP_BACK_NS`] below the latest is a clock stepped back, and
    /// arrivals start again from it ([`raised`]).
    #[inline]
    pub fn arrival_ns(&self, i: usize) -> Option<u64> {
        (i < self.len).then(|| self.arrivals[i])
    }

    /// The latest [`arrival_ns`](Self::arrival_ns) of the last receive
    /// that took any: every datagram it holds arrived at or before it.
    /// (The last datagram's, unless a clock stepped back within the batch:
    /// then one before the step is the latest, and taking the last one's
    /// would hold the lines' merge below the datagrams still held for
    /// good.)
    pub fn max_arrival_ns(&self) -> u64 {
        self.max_arrival_ns
    }

    /// The socket's cumulative drop count (SO_RXQ_OVFL, wrapping at 2^32)
    /// as last reported by any receive; `None` until the kernel reports one
    /// (it attaches the count only once the socket has dropped).
    pub fn drops(&self) -> Option<u32> {
        self.drops
    }

    /// Most datagrams one receive takes.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Datagram `i` of the last receive and what the kernel said of it.
    #[inline]
    pub fn get(&self, i: usize) -> Option<(&[u8], Meta)> {
        if i >= self.len {
            return None;
        }
        let m = self.metas[i];
        let start = i * MAX_DATAGRAM;
        Some((&self.bufs[start..start + m.len.min(MAX_DATAGRAM)], m))
    }
}

/// Bytes of a sender address the kernel may write.
const NAME_LEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;

/// The IPv4 sender the kernel wrote into `name` (`len` bytes of it).
#[inline]
fn sender(name: &libc::sockaddr_in, len: libc::socklen_t) -> Option<SocketAddrV4> {
    (len >= NAME_LEN && name.sin_family == libc::AF_INET as libc::sa_family_t).then(|| {
        SocketAddrV4::new(
            Ipv4Addr::from(u32::from_be(name.sin_addr.s_addr)),
            u16::from_be(name.sin_port),
        )
    })
}

fn parse_meta(h: &libc::mmsghdr) -> Meta {
    let mut meta = Meta {
        len: h.msg_len as usize,
        truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        ..Meta::default()
    };
    // Whether a message's length holds a payload of `size` bytes (a
    // truncated control buffer, MSG_CTRUNC, may end one short).
    // SAFETY: CMSG_LEN only computes.
    let holds = |len: usize, size: usize| len >= unsafe { libc::CMSG_LEN(size as u32) } as usize;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled,
    // bounded by msg_controllen; a payload is read (unaligned) only when
    // its message's own length holds it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&h.msg_hdr);
        while !c.is_null() {
            let (level, ty, len) = ((*c).cmsg_level, (*c).cmsg_type, (*c).cmsg_len as usize);
            let data = libc::CMSG_DATA(c);
            if level == libc::SOL_SOCKET
                && ty == libc::SCM_TIMESTAMPNS
                && holds(len, std::mem::size_of::<libc::timespec>())
            {
                let ts: libc::timespec = std::ptr::read_unaligned(data.cast());
                meta.time_ns = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            } else if level == libc::SOL_SOCKET
                && ty == libc::SO_RXQ_OVFL
                && holds(len, std::mem::size_of::<u32>())
            {
                meta.drops = Some(std::ptr::read_unaligned(data.cast::<u32>()));
            }
            c = libc::CMSG_NXTHDR(&h.msg_hdr, c);
        }
    }
    meta
}

/// The arrivals of datagrams just received, datagram `i` stamped
/// `stamp(i)`, into `arrivals`: raised in queue order from `last` (the
/// last datagram's before them, updated; see [`raised`]), and the latest
/// of them into `max` (left as it was when there are none).
fn arrive(arrivals: &mut [u64], (last, max): (&mut u64, &mut u64), stamp: impl Fn(usize) -> u64) {
    let mut latest = 0;
    for (i, a) in arrivals.iter_mut().enumerate() {
        *last = raised(*last, stamp(i));
        latest = latest.max(*last);
        *a = *last;
    }
    if !arrivals.is_empty() {
        *max = latest;
    }
}

/// How far below the latest arrival on a socket a kernel timestamp may
/// fall and still be one taken out of queue order (those differ by
/// microseconds), ns; further, it is a clock stepped back.
pub const STEP_BACK_NS: u64 = 1_000_000;

/// The arrival of a datagram stamped `stamp` after one that arrived at
/// `latest` on the same socket: `stamp` raised to `latest` (queue order
/// kept), unless it is more than [`STEP_BACK_NS`] below it, a clock
/// stepped back: then `stamp` itself. Held at the time before the step,
/// every later arrival of the socket would be that time until the clock
/// caught up, and the lines' merge would apply them in line order, not in
/// the order they came.
#[inline]
fn raised(latest: u64, stamp: u64) -> u64 {
    if stamp.saturating_add(STEP_BACK_NS) < latest {
        stamp
    } else {
        latest.max(stamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{SocketAddr, UdpSocket};

    #[test]
    fn batch_receives_with_kernel_timestamps_on_loopback() {
        // Port 0: bind picks one; read it back.
        let line = loopback_line();
        let local = line.socket.local_addr().unwrap().as_socket_ipv4().unwrap();
        assert!(
            line.info.timestamps && line.info.drop_counter,
            "{:?}",
            line.info
        );
        assert!(line.info.rcvbuf >= 1 << 20, "{:?}", line.info);
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        // A batch that asks for nothing gets no sender.
        tx.send_to(&[9; 40], local).unwrap();
        let mut plain = Batch::new(4);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while plain.recv(&line, 0).unwrap() == 0 {
            assert!(std::time::Instant::now() < deadline, "nothing arrived");
        }
        assert_eq!(plain.get(0).unwrap().1.from, None);
        for i in 0..5u8 {
            tx.send_to(&[i; 40], local).unwrap();
        }
        let mut batch = Batch::new(4).with_senders();
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < 5 && std::time::Instant::now() < deadline {
            let n = batch.recv(&line, 0).unwrap();
            for i in 0..n {
                let (bytes, meta) = batch.get(i).unwrap();
                assert_eq!(bytes.len(), 40);
                assert!(meta.time_ns.is_some_and(|t| t > 1_600_000_000_000_000_000));
                assert_eq!(meta.from.map(SocketAddr::V4), tx.local_addr().ok());
                got.push(bytes[0]);
            }
        }
        assert_eq!(got, [0, 1, 2, 3, 4]);
        assert_eq!(
            batch.recv(&line, 0).unwrap(),
            0,
            "nothing queued: no blocking"
        );
    }

    /// A line socket on a loopback port the kernel picks.
    fn loopback_line() -> LineSocket {
        LineSocket::open(
            "127.0.0.1:0".parse().unwrap(),
            None,
            Ipv4Addr::LOCALHOST,
            1 << 20,
        )
        .unwrap()
    }

    /// A plain socket on a loopback port, reads waiting 5 s at most, and
    /// its address.
    fn receiver() -> (UdpSocket, SocketAddrV4) {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let SocketAddr::V4(at) = rx.local_addr().unwrap() else {
            panic!("an IPv4 socket");
        };
        (rx, at)
    }

    /// A batch sends its datagrams in order, each whole, to the address
    /// given, in one call; it refuses one past its room or its size, and
    /// is empty after a send.
    #[test]
    fn a_send_batch_sends_its_datagrams_in_order() {
        let line = loopback_line();
        let (rx, to) = receiver();
        let mut batch = SendBatch::new(3, 20);
        assert!(batch.is_empty());
        assert!(!batch.push(&[0; 21]), "longer than its datagrams");
        for i in 0..3u8 {
            assert!(batch.push(&vec![i; 5 + usize::from(i)]));
        }
        assert!(!batch.push(&[9]), "full");
        assert_eq!(batch.len(), 3);
        let (sent, error) = batch.send(&line, to);
        assert_eq!((sent, error.is_none()), (3, true));
        assert!(batch.is_empty());
        let from = line.socket.local_addr().unwrap().as_socket().unwrap();
        let mut buf = [0u8; 64];
        for i in 0..3u8 {
            let (n, sender) = rx.recv_from(&mut buf).unwrap();
            assert_eq!(
                (&buf[..n], sender),
                (&vec![i; 5 + usize::from(i)][..], from)
            );
        }
        // Used again, to another address.
        let (rx2, to2) = receiver();
        assert!(batch.push(b"again"));
        assert_eq!(batch.send(&line, to2).0, 1);
        let (n, _) = rx2.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"again");
        // Refused by the kernel (broadcast without SO_BROADCAST): none
        // sent, the error told, the batch emptied all the same.
        assert!(batch.push(b"one") && batch.push(b"two"));
        let (sent, error) = batch.send(&line, "255.255.255.255:9".parse().unwrap());
        assert_eq!(sent, 0);
        assert_eq!(error.and_then(|e| e.raw_os_error()), Some(libc::EACCES));
        assert!(batch.is_empty());
    }

    /// A datagram longer than [`MAX_DATAGRAM`] is cut to it and marked
    /// truncated (the sidecar drops it whole, counted as oversized); one
    /// exactly as long is not.
    #[test]
    fn a_datagram_past_the_largest_is_cut_and_marked() {
        let line = loopback_line();
        let local = line.socket.local_addr().unwrap().as_socket_ipv4().unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(&[7; 10_000], local).unwrap();
        tx.send_to(&[8; MAX_DATAGRAM], local).unwrap();
        let mut batch = Batch::new(4);
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < 2 && std::time::Instant::now() < deadline {
            let n = batch.recv(&line, 0).unwrap();
            for i in 0..n {
                let (bytes, meta) = batch.get(i).unwrap();
                got.push((bytes[0], bytes.len(), meta.truncated));
            }
        }
        assert_eq!(got, [(7, MAX_DATAGRAM, true), (8, MAX_DATAGRAM, false)]);
    }

    /// The kernel shortens a header's control space to what it wrote (a
    /// timestamp); a later receive must give it back whole, or a datagram
    /// that brings the drop count as well has it cut off. Three datagrams
    /// fill three headers, the socket then overflows and is drained, and
    /// three datagrams received after each carry the count.
    #[test]
    fn headers_a_receive_filled_get_their_whole_control_space_back() {
        let line = loopback_line();
        let local = line.socket.local_addr().unwrap().as_socket_ipv4().unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut batch = Batch::new(4);
        let take = |batch: &mut Batch, want: usize| {
            let mut got = Vec::new();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while got.len() < want && std::time::Instant::now() < deadline {
                let n = batch.recv(&line, 0).unwrap();
                got.extend((0..n).map(|i| batch.get(i).unwrap().1));
            }
            got
        };
        for i in 0..3u8 {
            tx.send_to(&[i; 40], local).unwrap();
        }
        let first = take(&mut batch, 3);
        assert_eq!(first.len(), 3);
        assert!(first
            .iter()
            .all(|m| m.time_ns.is_some() && m.drops.is_none()));
        // Overflow the receive buffer (a few MiB at most; loopback only),
        // then drain what it kept: all of it was queued before any drop.
        let sent = (0..4_000)
            .filter(|_| tx.send_to(&[0; 1_400], local).is_ok())
            .count();
        assert!(sent > 0);
        while batch.recv(&line, 0).unwrap() > 0 {}
        for i in 0..3u8 {
            tx.send_to(&[i; 40], local).unwrap();
        }
        let after = take(&mut batch, 3);
        assert_eq!(after.len(), 3);
        for (i, m) in after.iter().enumerate() {
            assert!(m.time_ns.is_some(), "datagram {i}: {m:?}");
            assert!(m.drops.is_some_and(|d| d > 0), "datagram {i}: {m:?}");
        }
    }

    /// A request above `net.core.rmem_max` is capped by the kernel (root
    /// too: only SO_RCVBUFFORCE passes the cap), and says so in one line
    /// with what was granted; a granted request says nothing. It asks 1 GiB,
    /// or more than `rmem_max` where that admits 1 GiB; only a limit no
    /// `int` exceeds skips it (and fails it under CI).
    #[test]
    fn a_capped_receive_buffer_is_reported_with_what_was_granted() {
        let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let asked = (1 << 30).max(rmem_max.saturating_add(1));
        if asked > i32::MAX as usize {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run with net.core.rmem_max below {}",
                i32::MAX
            );
            let what = format!("net.core.rmem_max {rmem_max} admits any SO_RCVBUF");
            eprintln!("skipped: {what}");
            // In the list `tools/test` prints (as tests/it's `note_skip`).
            if let Some(log) = std::env::var_os("TICKGUARD_SKIP_LOG") {
                use std::io::Write;
                let line = format!(
                    "sys::udp::a_capped_receive_buffer_is_reported_with_what_was_granted: {what}\n"
                );
                if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(log) {
                    let _ = f.write_all(line.as_bytes());
                }
            }
            return;
        }
        let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
        let line = LineSocket::open(addr, None, Ipv4Addr::LOCALHOST, asked).unwrap();
        let msg = line
            .info
            .rcvbuf_shortfall()
            .expect("a capped buffer is reported");
        assert_eq!(
            msg,
            format!(
                "line {}: receive buffer capped at {} of the {asked} bytes asked \
                 (SO_RCVBUF reads {}: Linux doubles what it accepts); \
                 raise net.core.rmem_max to at least {asked}",
                line.info.addr,
                line.info.rcvbuf / 2,
                line.info.rcvbuf
            )
        );
        // Port 0 asked for an ephemeral port: the line names the one bound.
        assert_ne!(line.info.addr.port(), 0);
        let small = LineSocket::open(addr, None, Ipv4Addr::LOCALHOST, 4096).unwrap();
        assert_eq!(small.info.rcvbuf_shortfall(), None, "{:?}", small.info);
        let refused = LineInfo {
            rcvbuf_error: Some("Operation not permitted (os error 1)".into()),
            ..small.info
        };
        let unknown = LineInfo {
            rcvbuf: 0,
            ..refused.clone()
        };
        assert!(unknown
            .rcvbuf_shortfall()
            .unwrap()
            .ends_with("the socket keeps a receive buffer of unknown size"));
        let unread = LineInfo {
            rcvbuf: 0,
            rcvbuf_error: None,
            ..refused.clone()
        };
        assert!(unread
            .rcvbuf_shortfall()
            .unwrap()
            .ends_with("SO_RCVBUF of 4096 bytes set, but its size could not be read back"));
        assert!(refused
            .rcvbuf_shortfall()
            .unwrap()
            .contains("SO_RCVBUF of 4096 bytes refused (Operation not permitted (os error 1)); the socket keeps the default receive buffer, "));
    }

    /// A clock stepped back within a batch: every datagram held arrived at
    /// or before the batch's latest arrival, the one before the step, not
    /// the last one's (the lines' merge, taking the last one's, held every
    /// datagram before the step back for good).
    #[test]
    fn a_batch_stepping_back_keeps_its_latest_arrival() {
        let t = 1_800_000_000_000_000_000;
        let mut b = Batch::new(4);
        let stamps = [t, t + 10, t - 10_000_000_000, t - 9_999_999_990];
        b.len = 4;
        let at = (&mut b.last_arrival_ns, &mut b.max_arrival_ns);
        arrive(&mut b.arrivals[..4], at, |i| stamps[i]);
        let arrivals: Vec<u64> = (0..4).filter_map(|i| b.arrival_ns(i)).collect();
        assert_eq!(arrivals, [t, t + 10, t - 10_000_000_000, t - 9_999_999_990]);
        assert_eq!(b.max_arrival_ns(), t + 10);
        // The next batch is raised from the last arrival, not the latest.
        b.len = 1;
        let at = (&mut b.last_arrival_ns, &mut b.max_arrival_ns);
        arrive(&mut b.arrivals[..1], at, |_| t - 9_999_999_995);
        assert_eq!(
            (b.arrival_ns(0), b.max_arrival_ns()),
            (Some(t - 9_999_999_990), t - 9_999_999_990)
        );
    }

    /// A header whose control space holds `msgs` (level, type, length
    /// claimed, payload) laid out as the kernel lays them, `controllen`
    /// bytes of it filled, and the flags the kernel would set.
    fn control(
        buf: &mut [u64; 16],
        msgs: &[(i32, i32, usize, &[u8])],
        controllen: usize,
        flags: i32,
    ) -> libc::mmsghdr {
        // SAFETY: msghdr is plain data; zeroed is a valid empty header.
        let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
        h.msg_control = buf.as_mut_ptr().cast();
        h.msg_controllen = controllen;
        h.msg_flags = flags;
        let bytes = buf.as_mut_ptr().cast::<u8>();
        let mut at = 0;
        for &(level, ty, len, payload) in msgs {
            // SAFETY: every write stays inside `buf` (128 bytes, the
            // messages below take at most 64), at 8-byte aligned headers.
            unsafe {
                let c = bytes.add(at).cast::<libc::cmsghdr>();
                (*c).cmsg_level = level;
                (*c).cmsg_type = ty;
                (*c).cmsg_len = len as _;
                let data = libc::CMSG_DATA(c);
                std::ptr::copy_nonoverlapping(payload.as_ptr(), data, payload.len());
                at += libc::CMSG_SPACE(payload.len() as u32) as usize;
            }
        }
        libc::mmsghdr {
            msg_hdr: h,
            msg_len: 40,
        }
    }

    /// The control messages are read only as far as the kernel filled
    /// them: a payload whose message was cut short (MSG_CTRUNC: the kernel
    /// writes the length that fitted) or lies past the space filled is not
    /// read, and what came before it still is.
    #[test]
    fn control_messages_cut_short_are_not_read() {
        let ts = libc::timespec {
            tv_sec: 1_800_000_000,
            tv_nsec: 123,
        };
        // SAFETY: timespec is plain data; its bytes are its value.
        let ts_bytes: [u8; 16] = unsafe { std::mem::transmute(ts) };
        let drops = 7u32.to_ne_bytes();
        let len = |n: usize| unsafe { libc::CMSG_LEN(n as u32) } as usize;
        let space = |n: usize| unsafe { libc::CMSG_SPACE(n as u32) } as usize;
        let stamp = (
            libc::SOL_SOCKET,
            libc::SCM_TIMESTAMPNS,
            len(16),
            &ts_bytes[..],
        );
        let count = (libc::SOL_SOCKET, libc::SO_RXQ_OVFL, len(4), &drops[..]);
        let time = Some(1_800_000_000_000_000_123);
        let mut buf = [0u64; 16];

        // Both whole.
        let h = control(&mut buf, &[stamp, count], space(16) + space(4), 0);
        let m = parse_meta(&h);
        assert_eq!((m.len, m.time_ns, m.drops), (40, time, Some(7)));

        // The count cut short: its header says 2 of its 4 bytes came.
        let cut = (libc::SOL_SOCKET, libc::SO_RXQ_OVFL, len(2), &drops[..2]);
        let h = control(
            &mut buf,
            &[stamp, cut],
            space(16) + len(2),
            libc::MSG_CTRUNC,
        );
        let m = parse_meta(&h);
        assert_eq!((m.time_ns, m.drops), (time, None));

        // The stamp cut short, its header claiming 8 of 16 bytes, and the
        // count after it never written.
        buf = [0; 16];
        let cut = (
            libc::SOL_SOCKET,
            libc::SCM_TIMESTAMPNS,
            len(8),
            &ts_bytes[..8],
        );
        let h = control(&mut buf, &[cut], len(8), libc::MSG_CTRUNC);
        assert_eq!((parse_meta(&h).time_ns, parse_meta(&h).drops), (None, None));

        // A whole count whose header lies past the space filled: not read.
        let h = control(&mut buf, &[stamp, count], space(16) + 8, libc::MSG_CTRUNC);
        assert_eq!((parse_meta(&h).time_ns, parse_meta(&h).drops), (time, None));

        // No control space filled at all.
        let h = control(&mut buf, &[stamp], 0, libc::MSG_CTRUNC);
        assert_eq!(
            parse_meta(&h),
            Meta {
                len: 40,
                ..Meta::default()
            }
        );
    }

    #[test]
    fn arrivals_keep_queue_order_and_follow_a_clock_stepped_back() {
        let t = 1_800_000_000_000_000_000;
        // Out of queue order by microseconds: raised to the latest.
        assert_eq!(raised(t, t - 5_000), t);
        assert_eq!(raised(t, t + 5), t + 5);
        assert_eq!(raised(t, t - STEP_BACK_NS), t);
        // A clock stepped back by more: from the stamp on.
        assert_eq!(raised(t, t - STEP_BACK_NS - 1), t - STEP_BACK_NS - 1);
        assert_eq!(raised(t, t - 10_000_000_000), t - 10_000_000_000);
        assert_eq!(raised(0, t), t);
    }
}
