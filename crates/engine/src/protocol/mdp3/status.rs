//! Trading statuses: what a SecurityTradingStatus code means for the
//! verdict, and which of an instrument's statuses is in force.
//!
//! A status arrives for one instrument (SecurityStatus with a SecurityID,
//! or an applied snapshot's), for a group of instruments (SecurityStatus
//! by SecurityGroup and Asset), or with the instrument's definition. Each
//! is kept with its position in the feed (MsgSeqNum, message index), and
//! the one with the highest position is in force; a definition's only
//! while no other is known. A sequence restart starts a new sequence of
//! positions, all after the old one's: a status's [`Stamp`] is the
//! position behind the number of restarts before it, so statuses kept
//! across a restart keep their order among themselves. Codes map to the safe side: a pause or an
//! unknown state halts, pre-open and opening read closed.

/// Where a message stands in the incremental feed: (MsgSeqNum, index of
/// the message in its packet).
pub type Position = (u32, u16);

/// Where a status stands among every status of the feed: (sequence
/// restarts before it, its position in its sequence).
pub type Stamp = (u32, Position);

/// What a status means for the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Trading (or a cross or workup window).
    Trading,
    /// Halted, paused, or in an unknown state.
    Halted,
    /// Closed, pre-open or opening.
    Closed,
}

impl State {
    /// Its name in summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Trading => "trading",
            State::Halted => "halted",
            State::Closed => "closed",
        }
    }
}

/// What a SecurityTradingStatus code does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// A new state.
    Is(State),
    /// No change (103 NoChange, or null).
    Unchanged,
    /// A code not listed: no change, counted as an anomaly.
    Unknown,
}

/// The meaning of code `c` (255: null).
pub fn meaning(c: u8) -> Meaning {
    match c {
        2 | 18 | 20 => Meaning::Is(State::Halted),
        4 | 26 | 21 | 15 => Meaning::Is(State::Closed),
        17 | 24 | 25 | 201 | 202 => Meaning::Is(State::Trading),
        103 | 255 => Meaning::Unchanged,
        _ => Meaning::Unknown,
    }
}

/// A status as sent: its code and position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// SecurityTradingStatus.
    pub code: u8,
    /// Where it was sent.
    pub at: Stamp,
}

/// The status in force among an instrument's own (`instrument`), its
/// groups' (`groups`) and its definition's (`definition`, only while no
/// other is known): the one of highest position.
pub fn effective(
    instrument: Option<Status>,
    groups: impl IntoIterator<Item = Status>,
    definition: Option<u8>,
) -> Option<u8> {
    let known = instrument
        .into_iter()
        .chain(groups)
        .max_by_key(|s| s.at)
        .map(|s| s.code);
    known.or(definition)
}

/// Keeps `slot`'s status unless `code` changes something: a code of no
/// change (or unknown) leaves the status in force as it was. Returns
/// whether the code was unknown (an anomaly).
pub fn record(slot: &mut Option<Status>, code: u8, at: Stamp) -> bool {
    match meaning(code) {
        Meaning::Is(_) => {
            if slot.is_none_or(|s| s.at <= at) {
                *slot = Some(Status { code, at });
            }
            false
        }
        Meaning::Unchanged => false,
        Meaning::Unknown => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_the_safe_side() {
        for (c, m) in [
            (2, Meaning::Is(State::Halted)),
            (18, Meaning::Is(State::Halted)),
            (20, Meaning::Is(State::Halted)),
            (4, Meaning::Is(State::Closed)),
            (26, Meaning::Is(State::Closed)),
            (21, Meaning::Is(State::Closed)),
            (15, Meaning::Is(State::Closed)),
            (17, Meaning::Is(State::Trading)),
            (24, Meaning::Is(State::Trading)),
            (25, Meaning::Is(State::Trading)),
            (201, Meaning::Is(State::Trading)),
            (202, Meaning::Is(State::Trading)),
            (103, Meaning::Unchanged),
            (255, Meaning::Unchanged),
            (3, Meaning::Unknown),
            (0, Meaning::Unknown),
        ] {
            assert_eq!(meaning(c), m, "{c}");
        }
    }

    #[test]
    fn the_highest_position_is_in_force_and_a_definition_only_alone() {
        let s = |code, seq| Status {
            code,
            at: (0, (seq, 0)),
        };
        assert_eq!(effective(None, [], Some(17)), Some(17));
        assert_eq!(effective(None, [], None), None);
        assert_eq!(effective(Some(s(2, 5)), [s(17, 9)], Some(4)), Some(17));
        assert_eq!(
            effective(Some(s(2, 10)), [s(17, 9), s(4, 3)], Some(17)),
            Some(2)
        );
        // Within a packet, the later message wins.
        let a = Status {
            code: 2,
            at: (0, (7, 1)),
        };
        let b = Status {
            code: 17,
            at: (0, (7, 3)),
        };
        assert_eq!(effective(Some(a), [b], None), Some(17));
        // Before a restart, whatever its position in its sequence.
        let c = Status {
            code: 4,
            at: (1, (1, 0)),
        };
        assert_eq!(effective(Some(a), [b, c], None), Some(4));
        assert_eq!(effective(Some(c), [a, b], None), Some(4));
    }

    #[test]
    fn no_change_and_unknown_codes_keep_the_status() {
        let mut slot = None;
        assert!(!record(&mut slot, 17, (0, (1, 0))));
        assert!(!record(&mut slot, 103, (0, (2, 0))));
        assert!(record(&mut slot, 99, (0, (3, 0))));
        assert_eq!(
            slot,
            Some(Status {
                code: 17,
                at: (0, (1, 0))
            })
        );
        assert!(!record(&mut slot, 2, (0, (4, 0))));
        // An older position does not override a newer one.
        assert!(!record(&mut slot, 17, (0, (3, 5))));
        assert_eq!(slot.map(|s| s.code), Some(2));
    }
}
