//! The least work any handler of an MDP3 channel does per book entry, the
//! reference `benches/mdp3_apply.rs` and `examples/mdp3_profile.rs` time
//! beside the channel's `on_incremental`: each packet's validity walk and,
//! for each entry of a 46, its instrument found, its RptSeq compared and
//! its level written. Shared by both through `#[path]`.

use tickguard::protocol::mdp3::feed::Feed;
use tickguard::protocol::mdp3::index::IdIndex;
use tickguard::protocol::mdp3::{Body, Packet};

/// The least any handler of the channel does: each packet's validity walk,
/// and for each entry of a 46 its instrument found (the same index),
/// its RptSeq compared and moved, and its level written into a fixed
/// array of (price, size) per side; no events, no statuses, no counters,
/// no visibility. The reference for what the rest of `on_incremental`
/// costs.
#[inline(never)]
pub fn floor(packets: &[(u64, Vec<u8>)], index: &IdIndex, books: &mut [FloorBook]) -> u64 {
    let mut odd = 0u64;
    for (_, p) in packets {
        let visit = |_, body: Body<'_>| {
            let Body::Incremental(inc) = body else {
                return;
            };
            if inc.template().id != 46 {
                return;
            }
            for e in inc.entries() {
                let Some(b) = e.book_46() else { continue };
                let Some(i) = index.get(b.security_id) else {
                    continue;
                };
                let book = &mut books[i as usize];
                if b.rpt_seq != book.rpt_seq.wrapping_add(1) {
                    odd += 1;
                }
                book.rpt_seq = b.rpt_seq;
                let side = usize::from(b.entry_type & 1);
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
    sides: [[(i64, u64); 10]; 2],
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
