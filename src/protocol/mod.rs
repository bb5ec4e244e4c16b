//! Protocols, one folder each: the bytes of a venue's feed and what they
//! mean. Everything a protocol does not own (capture, sockets, the state
//! table, the verdict, the publication) is shared and names no protocol.
//!
//! - [`sqf`]: SQF v1, the Simple Quote Feed.
//! - [`itch50`]: Nasdaq TotalView-ITCH 5.0 over MoldUDP64.

pub mod itch50;
pub mod sqf;

pub use crate::config::Protocol;

/// Most reject reasons any protocol has (counter arrays are this long).
pub const MAX_REJECT_REASONS: usize = 9;

const _: () = assert!(
    sqf::Reject::ALL.len() <= MAX_REJECT_REASONS && itch50::Reject::ALL.len() <= MAX_REJECT_REASONS
);

/// Why a datagram was rejected whole, in the protocol of its feed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rejected {
    /// An SQF packet.
    Sqf(sqf::Reject),
    /// A MoldUDP64 / ITCH 5.0 packet.
    Itch50(itch50::Reject),
}

impl Rejected {
    /// Position in its protocol's list of reasons ([`reasons`]).
    pub fn index(self) -> usize {
        match self {
            Rejected::Sqf(r) => r.index(),
            Rejected::Itch50(r) => r.index(),
        }
    }

    /// Stable snake_case name, as counted and logged.
    pub fn as_str(self) -> &'static str {
        match self {
            Rejected::Sqf(r) => r.as_str(),
            Rejected::Itch50(r) => r.as_str(),
        }
    }

    /// The reason at `index` of `protocol`'s list.
    pub fn from_index(protocol: Protocol, index: usize) -> Option<Rejected> {
        match protocol {
            Protocol::Sqf => sqf::Reject::ALL.get(index).map(|r| Rejected::Sqf(*r)),
            Protocol::Itch50 => itch50::Reject::ALL.get(index).map(|r| Rejected::Itch50(*r)),
        }
    }

    /// A hint after a reason that means the packets are not of the feed's
    /// protocol at all (another protocol on the group): " (not SQF?)".
    pub fn hint(self) -> &'static str {
        match self {
            Rejected::Sqf(sqf::Reject::Short | sqf::Reject::Magic | sqf::Reject::Version) => {
                " (not SQF?)"
            }
            Rejected::Itch50(itch50::Reject::Short) => " (not MoldUDP64?)",
            _ => "",
        }
    }
}

impl From<sqf::Reject> for Rejected {
    fn from(r: sqf::Reject) -> Rejected {
        Rejected::Sqf(r)
    }
}

impl From<itch50::Reject> for Rejected {
    fn from(r: itch50::Reject) -> Rejected {
        Rejected::Itch50(r)
    }
}

/// The reject reasons of `protocol`, in counter order.
pub fn reasons(protocol: Protocol) -> impl Iterator<Item = Rejected> {
    (0..MAX_REJECT_REASONS).filter_map(move |i| Rejected::from_index(protocol, i))
}
