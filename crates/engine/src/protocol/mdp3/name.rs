//! A Symbol held inline, as the key of the maps that follow names from
//! instrument to instrument ([`SymbolKey`]): a definition that moves,
//! drops or takes a Symbol allocates nothing for its key.

use super::template::text_len;
use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// A Symbol (at most [`text_len::SYMBOL`] bytes, as the wire holds it),
/// hashed and compared as its text, so a map keyed by it is looked up by
/// `&str`.
#[derive(Clone, Copy)]
pub struct SymbolKey {
    len: u8,
    bytes: [u8; text_len::SYMBOL],
}

impl SymbolKey {
    /// `symbol`'s key; a longer text (no definition's Symbol is) is cut
    /// to the longest prefix that fits whole characters.
    pub fn new(symbol: &str) -> SymbolKey {
        // (A definition's Symbol, trimmed and printable, never is longer:
        // a cut would let two Symbols share a key.)
        debug_assert!(symbol.len() <= text_len::SYMBOL, "{symbol:?}");
        let mut n = symbol.len().min(text_len::SYMBOL);
        while !symbol.is_char_boundary(n) {
            n -= 1;
        }
        let mut bytes = [0u8; text_len::SYMBOL];
        bytes[..n].copy_from_slice(&symbol.as_bytes()[..n]);
        SymbolKey {
            len: n as u8,
            bytes,
        }
    }

    /// The Symbol.
    pub fn as_str(&self) -> &str {
        // Whole characters of a `&str`, as `new` copied them.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl PartialEq for SymbolKey {
    fn eq(&self, other: &SymbolKey) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SymbolKey {}

impl Hash for SymbolKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        // As `str` hashes, which `Borrow<str>` requires.
        self.as_str().hash(h)
    }
}

impl Borrow<str> for SymbolKey {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for SymbolKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A map keyed by it is found by its text, and by no other.
    #[test]
    fn a_key_is_its_text() {
        let mut m = HashMap::new();
        m.insert(SymbolKey::new("ESZ6-ESH7"), 3u32);
        assert_eq!(m.get("ESZ6-ESH7"), Some(&3));
        assert_eq!(m.get("ESZ6"), None);
        assert_eq!(SymbolKey::new(""), SymbolKey::new(""));
    }
}
