//! The least work any handler of an MDP3 channel does per book entry, the
//! reference `benches/mdp3_apply.rs` and `examples/mdp3_profile.rs` time
//! beside the channel's `on_incremental`: each packet's validity walk,
//! each entry's instrument found and RptSeq moved, and each book entry's
//! level written. Shared by both through `#[path]`.

use tickguard::protocol::mdp3::feed::Feed;
use tickguard::protocol::mdp3::index::IdIndex;
use tickguard::protocol::mdp3::{Body, Packet};

/// The least any handler of the channel does: each packet's validity walk;
/// for every entry of an incremental message (books, trades, volume,
/// statistics: each takes a place in its instrument's RptSeq), its
/// instrument found through the same index and its RptSeq compared and
/// moved; for each entry of a 46, its level written into a fixed array of
/// (price, size) for its side (bid, offer, implied bid, implied offer).
/// No events, no visibility, no statuses, no counters. The reference for
/// what the rest of `on_incremental` costs. Returns the entries out of
/// RptSeq order (each instrument's first, here).
#[inline(never)]
pub fn floor(packets: &[(u64, Vec<u8>)], index: &IdIndex, books: &mut [FloorBook]) -> u64 {
    let mut odd = 0u64;
    for (_, p) in packets {
        let visit = |_, body: Body<'_>| {
            let Body::Incremental(inc) = body else {
                return;
            };
            let is_46 = inc.template().id == 46;
            for e in inc.entries() {
                let (id, rpt_seq, level) = match is_46.then(|| e.book_46()).flatten() {
                    Some(b) => (b.security_id, b.rpt_seq, Some(b)),
                    None => (e.security_id(), e.rpt_seq(), None),
                };
                let Some(i) = index.get(id) else {
                    continue;
                };
                let book = &mut books[i as usize];
                if rpt_seq != book.rpt_seq.wrapping_add(1) {
                    odd += 1;
                }
                book.rpt_seq = rpt_seq;
                let Some(b) = level else { continue };
                let side = match b.entry_type {
                    b'0' => 0,
                    b'1' => 1,
                    b'E' => 2,
                    _ => 3,
                };
                let level = usize::from(b.level.clamp(1, 10)) - 1;
                let slots = &mut book.sides[side];
                match b.action {
                    0 => {
                        slots.copy_within(level..9, level + 1);
                        slots[level] = (b.price.unwrap_or(0), b.size.unwrap_or(0));
                    }
                    2 => {
                        slots.copy_within(level + 1.., level);
                        slots[9] = (0, 0);
                    }
                    _ => slots[level] = (b.price.unwrap_or(0), b.size.unwrap_or(0)),
                }
            }
        };
        let _ = Packet::new_checked_with(std::hint::black_box(p), visit);
    }
    odd
}

/// An instrument's state in [`floor`].
#[derive(Clone, Default)]
pub struct FloorBook {
    rpt_seq: u32,
    sides: [[(i64, u64); 10]; 4],
}

/// The index of `feed`'s instruments (its definitions read), as the
/// channel's own.
pub fn index(feed: &Feed) -> IdIndex {
    let mut index = IdIndex::new();
    for (k, inst) in feed.instruments().iter().enumerate() {
        index.insert(inst.security_id, k as u32);
    }
    index
}

/// Empty books for `instruments`.
pub fn books(instruments: usize) -> Vec<FloorBook> {
    vec![FloorBook::default(); instruments]
}
