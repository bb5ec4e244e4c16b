//! Statuses sent for a group of instruments (a SecurityStatus naming a
//! SecurityGroup, an Asset or both, and no SecurityID), and the
//! instruments each group holds.
//!
//! An instrument's definition names its SecurityGroup and Asset, so a
//! status for (group, ""), ("", asset) or (group, asset) applies to it.
//! Each key lists the instruments whose definition names it, so that a
//! live channel republishes only the instruments a group status may
//! change, not every instrument of the channel: a flood of group
//! statuses costs what their members cost.

use super::status::{self, Stamp, Status};
use std::collections::HashMap;

/// A status group: SecurityGroup and Asset as sent (`char[6]`, trimmed,
/// NUL-padded), copied, so that a lookup allocates nothing.
pub type Key = ([u8; 6], [u8; 6]);

/// Neither group nor asset: no status is kept under it.
const NONE: Key = ([0; 6], [0; 6]);

/// `b` (a trimmed `char[6]`) as a key half.
pub fn key_half(b: &[u8]) -> [u8; 6] {
    let mut k = [0; 6];
    let n = b.len().min(6);
    k[..n].copy_from_slice(&b[..n]);
    k
}

/// `group` and `asset` (trimmed SecurityGroup and Asset, as sent) as a
/// key.
pub fn key(group: &[u8], asset: &[u8]) -> Key {
    (key_half(group), key_half(asset))
}

/// The keys whose statuses apply to an instrument whose definition names
/// the SecurityGroup and Asset of `k`: its group's, its asset's, both's;
/// each once, none empty.
fn keys_of((g, a): Key) -> [Option<Key>; 3] {
    let mut keys = [Some((g, [0; 6])), Some(([0; 6], a)), Some((g, a))];
    for k in 0..3 {
        if keys[k] == Some(NONE) || keys[..k].contains(&keys[k]) {
            keys[k] = None;
        }
    }
    keys
}

/// What [`Groups::record`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Recorded {
    /// The status in force for the key changed.
    pub changed: bool,
    /// Anomalies: an unknown code, a new key refused for room, or the
    /// status of a key without members dropped to make room.
    pub anomalies: u64,
}

/// The instruments whose definition names a key.
#[derive(Debug, Default)]
struct Members {
    list: Vec<u32>,
    /// Listed in [`Groups::changed`].
    changed: bool,
}

/// The channel's group statuses and group memberships.
///
/// Statuses are kept for at most the number of keys the caller allows
/// ([`record`](Self::record)); memberships follow definitions, at most
/// three keys an instrument, each updated in O(1) when a definition
/// changes an instrument's group or asset, and a key is forgotten when
/// its last member leaves: there are never more keys with members than
/// three an instrument, however many names definitions go through.
#[derive(Debug, Default)]
pub struct Groups {
    statuses: HashMap<Key, Status>,
    members: HashMap<Key, Members>,
    /// By instrument: the keys it is a member of, and its index in each
    /// key's list.
    of: Vec<[Option<(Key, u32)>; 3]>,
    /// Keys whose status changed since [`drain_changed`](Self::drain_changed)
    /// and that had members then: each once while it keeps any (a key
    /// forgotten and named again may be listed twice, which lists its
    /// members twice, harmlessly).
    changed: Vec<Key>,
    /// Keys that had a status kept and no member when listed: those whose
    /// room a key with members may take. Checked again when taken (a key
    /// may have gained members since, or been listed twice), so taking
    /// one costs O(1) amortised; tidied when it outgrows the statuses.
    spare: Vec<Key>,
    /// The member lists of keys forgotten, emptied, for the next key
    /// named (a definition moving an instrument between groups allocates
    /// nothing once these are there; no more than the most keys that had
    /// members at once).
    lists: Vec<Vec<u32>>,
}

impl Groups {
    /// Records status `code` sent at `at` for SecurityGroup `group` and
    /// Asset `asset` (trimmed; not both empty). A key not kept yet when
    /// `max` keys are takes the room of a key without members if it has
    /// members (so that made-up groups cannot crowd out a real one), and
    /// is refused otherwise. With `track`, members of a key whose status
    /// changed are listed for [`drain_changed`](Self::drain_changed).
    pub fn record(
        &mut self,
        group: &[u8],
        asset: &[u8],
        code: u8,
        at: Stamp,
        max: usize,
        track: bool,
    ) -> Recorded {
        let key = key(group, asset);
        debug_assert_ne!(key, NONE);
        let old = self.statuses.get(&key).copied();
        let mut slot = old;
        let mut r = Recorded::default();
        if status::record(&mut slot, code, at) {
            r.anomalies += 1;
        }
        let Some(s) = slot.filter(|&s| Some(s) != old) else {
            return r;
        };
        if old.is_none() && self.statuses.len() >= max {
            // A flood of made-up groups: refused, counted; a group with
            // members takes the room of one without.
            r.anomalies += 1;
            if !self.members.contains_key(&key) || !self.take_spare() {
                return r;
            }
        }
        if old.is_none() && !self.members.contains_key(&key) {
            self.note_spare(key);
        }
        self.statuses.insert(key, s);
        r.changed = true;
        if track {
            if let Some(m) = self.members.get_mut(&key).filter(|m| !m.changed) {
                m.changed = true;
                self.changed.push(key);
            }
        }
        r
    }

    /// Drops the status of a key without members, if one is kept: whether
    /// one was.
    fn take_spare(&mut self) -> bool {
        while let Some(k) = self.spare.pop() {
            if !self.members.contains_key(&k) && self.statuses.remove(&k).is_some() {
                return true;
            }
        }
        false
    }

    /// Lists `k` (a key with a status and no member) as spare; the list
    /// is tidied when it grows past twice the statuses kept, so that keys
    /// gaining and losing members cannot grow it without bound.
    fn note_spare(&mut self, k: Key) {
        if self.spare.len() >= 2 * self.statuses.len() + 16 {
            let (members, statuses) = (&self.members, &self.statuses);
            self.spare
                .retain(|k| !members.contains_key(k) && statuses.contains_key(k));
            self.spare.sort_unstable();
            self.spare.dedup();
        }
        self.spare.push(k);
    }

    /// The statuses kept for an instrument whose definition names the
    /// SecurityGroup and Asset of `k`.
    pub fn statuses(&self, k: Key) -> impl Iterator<Item = Status> + '_ {
        keys_of(k)
            .into_iter()
            .flatten()
            .filter_map(|k| self.statuses.get(&k).copied())
    }

    /// Statuses kept (keys).
    pub fn len(&self) -> usize {
        self.statuses.len()
    }

    /// No status kept.
    pub fn is_empty(&self) -> bool {
        self.statuses.is_empty()
    }

    /// Forgets every status (a channel reset); memberships stay, as the
    /// definitions do. With `track`, members of a key that had one are
    /// listed for [`drain_changed`](Self::drain_changed) (without, the list
    /// nobody drains would grow with every reset).
    ///
    /// Going over the statuses and clearing them costs the table's
    /// capacity, not its length: a table grown past the keys with members
    /// (a flood of made-up groups, which have none) is given that memory
    /// back here, so that resets that each follow a status or two cost
    /// what those cost, not what the flood left (which costs it once, O(1)
    /// a status it sent). A table within what the definitions name keeps
    /// its capacity, and a reset allocates nothing.
    pub fn clear_statuses(&mut self, track: bool) {
        let named = self.members.len();
        let oversized = self.statuses.capacity() > 4 * self.statuses.len().max(named) + 64;
        // The status in force changes for every key that had one: its
        // members are listed as for any change (O(1) a status kept).
        for k in self.statuses.keys().filter(|_| track) {
            if let Some(m) = self.members.get_mut(k).filter(|m| !m.changed) {
                m.changed = true;
                self.changed.push(*k);
            }
        }
        self.statuses.clear();
        self.spare.clear();
        if oversized {
            self.statuses.shrink_to(named);
            self.spare.shrink_to(named);
        }
    }

    /// Forgets the statuses sent before `at` (a ChannelReset that came
    /// late: those of the packets after it, processed first, stay), as
    /// [`clear_statuses`](Self::clear_statuses) does when none is later.
    pub fn clear_statuses_before(&mut self, at: Stamp, track: bool) {
        if self.statuses.values().all(|s| s.at < at) {
            return self.clear_statuses(track);
        }
        let (members, changed) = (&mut self.members, &mut self.changed);
        self.statuses.retain(|k, s| {
            if s.at >= at {
                return true;
            }
            if let Some(m) = members.get_mut(k).filter(|m| track && !m.changed) {
                m.changed = true;
                changed.push(*k);
            }
            false
        });
        // As `clear_statuses`: a table a flood grew gives its room back
        // once, so later late resets cost what they keep.
        let kept = self.statuses.len().max(self.members.len());
        if self.statuses.capacity() > 4 * kept + 64 {
            let statuses = &self.statuses;
            self.spare.retain(|k| statuses.contains_key(k));
            self.statuses.shrink_to(kept);
            self.spare.shrink_to(kept);
        }
    }

    /// Makes instrument `i` a member of the keys its definition's
    /// SecurityGroup and Asset (`k`) name, and of no other: it stays where
    /// it is in a key it keeps (each kind of key has its own slot: the
    /// group's, the asset's, both's). Allocates only for an instrument new
    /// here, or a key when no forgotten key left its list.
    pub fn set_member(&mut self, i: u32, k: Key) {
        let keys = keys_of(k);
        let at = i as usize;
        if at >= self.of.len() {
            self.of.resize(at + 1, [None; 3]);
        }
        for (slot, new) in keys.into_iter().enumerate() {
            let old = self.of[at][slot];
            if old.map(|(k, _)| k) == new {
                continue;
            }
            if let Some((k, p)) = old {
                self.leave(i, k, p);
            }
            let lists = &mut self.lists;
            self.of[at][slot] = new.map(|k| {
                let m = self.members.entry(k).or_insert_with(|| Members {
                    list: lists.pop().unwrap_or_default(),
                    changed: false,
                });
                m.list.push(i);
                (k, m.list.len() as u32 - 1)
            });
        }
    }

    /// Takes `i` out of key `k`'s list, where it stands at `p`: the last
    /// member takes its place; a key left without members is forgotten.
    fn leave(&mut self, i: u32, k: Key, p: u32) {
        let Some(m) = self.members.get_mut(&k) else {
            return;
        };
        debug_assert_eq!(m.list.get(p as usize), Some(&i));
        let last = m.list.len() as u32 - 1;
        m.list.swap_remove(p as usize);
        if last == 0 {
            if let Some(Members { mut list, .. }) = self.members.remove(&k) {
                list.clear();
                self.lists.push(list);
            }
            if self.statuses.contains_key(&k) {
                self.note_spare(k);
            }
            return;
        }
        if p == last {
            return;
        }
        let moved = m.list[p as usize];
        for s in self.of[moved as usize].iter_mut().flatten() {
            if *s == (k, last) {
                s.1 = p;
            }
        }
    }

    /// Hands `f` each member of every key whose status changed since the
    /// last call (an instrument in several such keys more than once), then
    /// forgets them. Allocates nothing.
    pub fn drain_changed(&mut self, mut f: impl FnMut(u32)) {
        for k in self.changed.drain(..) {
            if let Some(m) = self.members.get_mut(&k) {
                m.changed = false;
                m.list.iter().for_each(|&i| f(i));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: Stamp = (0, (1, 0));

    fn drained(g: &mut Groups) -> Vec<u32> {
        let mut v = Vec::new();
        g.drain_changed(|i| v.push(i));
        v.sort();
        v.dedup();
        v
    }

    /// A reset after a flood of made-up groups gives the flood's memory
    /// back, so that the resets after it each cost what the statuses since
    /// cost; a table of the usual size keeps its capacity.
    /// Untracked (a replay, which reads statuses when it judges), a reset
    /// lists nobody: the list nobody drains stays empty however many
    /// resets follow a status, members leaving and coming back between.
    #[test]
    fn resets_list_nobody_untracked() {
        let mut g = Groups::default();
        let (g1, g2) = (key(b"G1", b""), key(b"G2", b""));
        for _ in 0..100 {
            g.set_member(1, g1);
            g.record(b"G1", b"", 17, AT, usize::MAX, false);
            g.clear_statuses(false);
            g.set_member(1, g2);
        }
        assert!(g.changed.is_empty(), "{}", g.changed.len());
    }

    #[test]
    fn a_reset_after_a_flood_of_groups_gives_its_room_back() {
        let mut g = Groups::default();
        for n in 0..10_000u32 {
            let name = format!("G{n}");
            g.record(name.as_bytes(), b"", 17, AT, usize::MAX, false);
        }
        // The reset right after the flood costs the flood's statuses.
        g.clear_statuses(false);
        assert!(g.statuses.capacity() >= 10_000);
        // The next, after one status, gives the room back.
        g.record(b"ES", b"", 17, AT, usize::MAX, false);
        g.clear_statuses(false);
        assert!(g.is_empty());
        assert!(g.statuses.capacity() < 100, "{}", g.statuses.capacity());
        // A channel's own groups: 300 named by definitions, each with a
        // status; a reset after only one came back keeps their room.
        for i in 0..300u32 {
            let name = format!("R{i}");
            g.set_member(i, key(name.as_bytes(), b""));
            g.record(name.as_bytes(), b"", 17, AT, usize::MAX, false);
        }
        g.clear_statuses(false);
        let usual = g.statuses.capacity();
        assert!(usual >= 300);
        g.record(b"R1", b"", 17, AT, usize::MAX, false);
        g.clear_statuses(false);
        assert_eq!(g.statuses.capacity(), usual);
    }

    /// A late ChannelReset (statuses after it kept) gives a flood's room
    /// back too: the resets after it cost what the table keeps.
    #[test]
    fn a_late_reset_after_a_flood_of_groups_gives_its_room_back() {
        let mut g = Groups::default();
        for n in 0..10_000u32 {
            let name = format!("G{n}");
            g.record(name.as_bytes(), b"", 17, AT, usize::MAX, false);
        }
        let later = (AT.0, (AT.1 .0 + 10, 0));
        let mid = (AT.0, (AT.1 .0 + 5, 0));
        g.record(b"ES", b"", 2, later, usize::MAX, false);
        g.clear_statuses_before(mid, false);
        assert_eq!(g.statuses.len(), 1, "the later status stays");
        assert!(g.statuses.capacity() < 100, "{}", g.statuses.capacity());
    }

    /// An empty half names no key of its own, and a key is named once.
    #[test]
    fn an_instruments_keys_are_distinct_and_never_empty() {
        let es = key_half(b"ES");
        assert_eq!(
            keys_of(key(b"ES", b"ES")),
            [Some((es, [0; 6])), Some(([0; 6], es)), Some((es, es))]
        );
        assert_eq!(keys_of(key(b"ES", b"")), [Some((es, [0; 6])), None, None]);
        assert_eq!(keys_of(key(b"", b"ES")), [None, Some(([0; 6], es)), None]);
        assert_eq!(keys_of(key(b"", b"")), [None, None, None]);
    }

    /// Members follow their definition's group through every change; the
    /// lists stay what naming each instrument's keys anew would give.
    #[test]
    fn members_follow_their_definitions() {
        let names: [&[u8]; 3] = [b"ES", b"NQ", b""];
        let mut g = Groups::default();
        let mut now = vec![(2usize, 2usize); 40];
        let mut x: u64 = 20261205;
        for step in 0..4000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = (x >> 33) as usize % now.len();
            let (gi, ai) = ((x >> 20) as usize % 3, (x >> 10) as usize % 3);
            g.set_member(i as u32, key(names[gi], names[ai]));
            now[i] = (gi, ai);
            if step % 97 != 0 {
                continue;
            }
            for (k, m) in &g.members {
                let mut got = m.list.clone();
                got.sort();
                let want: Vec<u32> = (0..now.len())
                    .filter(|&j| {
                        let (gj, aj) = now[j];
                        keys_of(key(names[gj], names[aj])).contains(&Some(*k))
                    })
                    .map(|j| j as u32)
                    .collect();
                assert_eq!(got, want, "step {step}, key {k:?}");
                assert!(!got.is_empty(), "a key without members is forgotten");
            }
            let mut named: Vec<Key> = now
                .iter()
                .flat_map(|&(gj, aj)| keys_of(key(names[gj], names[aj])))
                .flatten()
                .collect();
            named.sort();
            named.dedup();
            assert_eq!(g.members.len(), named.len(), "step {step}");
        }
    }

    /// A key whose last member left (its definition moved) is one whose
    /// room a named group may take; one that gained members since is not.
    #[test]
    fn a_key_left_without_members_makes_room() {
        let mut g = Groups::default();
        g.set_member(0, key(b"AA", b""));
        g.set_member(1, key(b"BB", b""));
        g.set_member(2, key(b"CC", b""));
        for (k, name) in [b"AA", b"BB"].iter().enumerate() {
            g.record(*name, b"", 2, (0, (k as u32 + 1, 0)), 2, true);
        }
        let full = g.record(b"CC", b"", 2, (0, (3, 0)), 2, true);
        assert_eq!(
            full,
            Recorded {
                changed: false,
                anomalies: 1
            }
        );
        // AA loses its member, then gains one again; BB loses its own.
        g.set_member(0, key(b"DD", b""));
        g.set_member(3, key(b"AA", b""));
        g.set_member(1, key(b"DD", b""));
        let r = g.record(b"CC", b"", 2, (0, (4, 0)), 2, true);
        assert_eq!(
            r,
            Recorded {
                changed: true,
                anomalies: 1
            }
        );
        assert_eq!(g.statuses(key(b"AA", b"")).count(), 1, "AA has a member");
        assert_eq!(g.statuses(key(b"BB", b"")).count(), 0, "BB made room");
        // A member moving between keys it keeps stays where it is.
        g.set_member(2, key(b"CC", b"EQ"));
        assert_eq!(g.members[&key(b"CC", b"")].list, [2]);
    }

    /// Full of made-up groups, a group some definition names takes the
    /// room of one none names (counted); a made-up one is still refused,
    /// and so is any once every key kept has members.
    #[test]
    fn a_group_with_members_takes_the_room_of_one_without() {
        let mut g = Groups::default();
        g.set_member(0, key(b"ES", b""));
        for (k, name) in [b"ZZ", b"ZY"].iter().enumerate() {
            let r = g.record(*name, b"", 2, (0, (k as u32 + 1, 0)), 2, true);
            assert_eq!(r.anomalies, 0);
        }
        let r = g.record(b"ZX", b"", 2, (0, (3, 0)), 2, true);
        assert_eq!(
            r,
            Recorded {
                changed: false,
                anomalies: 1
            }
        );
        let r = g.record(b"ES", b"", 2, (0, (4, 0)), 2, true);
        assert_eq!(
            r,
            Recorded {
                changed: true,
                anomalies: 1
            }
        );
        assert_eq!(g.len(), 2);
        assert_eq!(g.statuses(key(b"ES", b"")).count(), 1);
        assert_eq!(drained(&mut g), [0]);
        g.set_member(1, key(b"ZZ", b""));
        g.set_member(2, key(b"ZY", b""));
        let kept = g.statuses(key(b"ZZ", b"")).count() + g.statuses(key(b"ZY", b"")).count();
        assert_eq!(kept, 1, "one of the made-up groups made room");
        g.set_member(3, key(b"NQ", b""));
        g.set_member(4, key(b"ZX", b""));
        for (k, name) in [b"NQ", b"ZX"].iter().enumerate() {
            let r = g.record(*name, b"", 2, (0, (k as u32 + 5, 0)), 2, true);
            assert_eq!(
                r,
                Recorded {
                    changed: false,
                    anomalies: 1
                },
                "every key kept has members"
            );
        }
    }

    /// A status that changes a key lists its members once until drained;
    /// one that changes nothing (no change, a repeat, an older one)
    /// lists nobody; a new key past the most kept is refused, counted.
    #[test]
    fn a_changed_status_lists_only_its_members() {
        let mut g = Groups::default();
        g.set_member(0, key(b"ES", b"ES"));
        g.set_member(1, key(b"ES", b"EQ"));
        g.set_member(2, key(b"NQ", b"EQ"));
        let r = g.record(b"ES", b"", 2, AT, 10, true);
        assert_eq!(
            r,
            Recorded {
                changed: true,
                anomalies: 0
            }
        );
        g.record(b"ES", b"", 17, (0, (2, 0)), 10, true);
        assert_eq!(drained(&mut g), [0, 1]);
        assert_eq!(drained(&mut g), [] as [u32; 0]);
        let r = g.record(b"ES", b"", 103, (0, (3, 0)), 10, true);
        assert_eq!(r, Recorded::default());
        let r = g.record(b"ES", b"", 2, AT, 10, true);
        assert_eq!(r, Recorded::default(), "older than the one kept");
        assert_eq!(drained(&mut g), [] as [u32; 0]);
        g.record(b"", b"EQ", 4, (0, (4, 0)), 10, true);
        assert_eq!(drained(&mut g), [1, 2]);
        let r = g.record(b"ZZ", b"", 4, (0, (5, 0)), 2, true);
        assert_eq!(
            r,
            Recorded {
                changed: false,
                anomalies: 1
            }
        );
        assert_eq!(g.len(), 2);
        let r = g.record(b"ES", b"", 99, (0, (6, 0)), 2, true);
        assert_eq!(
            r,
            Recorded {
                changed: false,
                anomalies: 1
            },
            "unknown code"
        );
        // Not tracking: kept, nobody listed.
        g.record(b"NQ", b"EQ", 2, (0, (7, 0)), 10, false);
        assert_eq!(drained(&mut g), [] as [u32; 0]);
        let codes: Vec<u8> = g.statuses(key(b"NQ", b"EQ")).map(|s| s.code).collect();
        assert_eq!(codes, [4, 2]);
    }
}
