//! What a feed receives on, as its protocol declares it
//! ([`super::keys::FeedProtocol::services`]): one or more services, each
//! either lines (line A and an optional line B carrying the same packets:
//! SQF's and ITCH's `lines`; MDP3's incremental, snapshot and definition
//! lines) or a unicast channel with a server (ITCH's re-requests). The
//! sidecar opens a socket for each, replay routes each captured datagram
//! to its feed and line, and the configuration refuses an address two
//! services would share, all without naming a protocol.
//!
//! A datagram is handed to the feed's engine with its line number:
//! [`line_index`] of the service's position and the copy (A, B), so a
//! protocol knows which service and copy it came from.

use std::net::SocketAddrV4;

/// Copies a service has at most: line A and line B.
pub const COPIES: usize = 2;

/// The line number of copy `copy` (0 = A, 1 = B) of the feed's service at
/// position `service`: what the engine's `on_datagram` is given. The
/// feed's `lines` are 0 and 1.
pub const fn line_index(service: usize, copy: usize) -> usize {
    service * COPIES + copy
}

/// One service of a feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// The configuration key that sets where its datagrams arrive
    /// (`lines`, `recovery_listen`): errors and logs name it.
    pub key: &'static str,
    /// How its datagrams arrive.
    pub receive: Receive,
}

/// How a service's datagrams arrive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Receive {
    /// Sent to these destinations (line A, then line B if any; multicast
    /// groups or unicast `ip:port`), each joined or bound at start on a
    /// socket of its own (with the feed's `source`, if set). An address is
    /// one line of one service of one feed.
    Lines(Vec<SocketAddrV4>),
    /// Exchanged with a server on one unicast socket; its answers are the
    /// service's line A.
    Channel(Channel),
    /// A TCP connection to this server that the feed's engine opens itself
    /// when it needs one (ITCH's snapshots); a replay hands the feed the
    /// captured segments whose source or destination is the server.
    Stream(SocketAddrV4),
}

impl Service {
    /// Lines at `addrs`, set by `key`.
    pub fn lines(key: &'static str, addrs: &[SocketAddrV4]) -> Service {
        Service {
            key,
            receive: Receive::Lines(addrs.to_vec()),
        }
    }

    /// A stream to `server`, set by `key`.
    pub fn stream(key: &'static str, server: SocketAddrV4) -> Service {
        Service {
            key,
            receive: Receive::Stream(server),
        }
    }

    /// A channel, its listening address set by `key`.
    pub fn channel(key: &'static str, channel: Channel) -> Service {
        Service {
            key,
            receive: Receive::Channel(channel),
        }
    }
}

/// A unicast exchange with a server that a protocol keeps besides its
/// lines (ITCH: re-requests for gaps). With a server, the sidecar opens a
/// socket bound to `listen` and takes only the datagrams whose sender is
/// `server` (the others are counted and dropped); a replay applies what a
/// capture holds for `listen` ([`listen_takes`]) from `server` too, or from
/// a recording's `0.0.0.0:0` (without a server, from any sender). A line's
/// address wins over a channel's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Channel {
    /// Where requests go (none: answers are only replayed).
    pub server: Option<SocketAddrV4>,
    /// The configuration key that sets `server`: errors name it.
    pub server_key: &'static str,
    /// Where answers arrive (`0.0.0.0:P`: any address, port P; port 0: an
    /// ephemeral port live, none in replay).
    pub listen: SocketAddrV4,
}

/// True when a channel bound to `listen` takes datagrams addressed to `dst`
/// (spec itch50 §3.2): `0.0.0.0:P` any address with port `P`, port 0 none.
pub fn listen_takes(listen: SocketAddrV4, dst: SocketAddrV4) -> bool {
    listen.port() != 0
        && listen.port() == dst.port()
        && (listen.ip().is_unspecified() || listen.ip() == dst.ip())
}
