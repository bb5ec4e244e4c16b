//! Instrument symbols as fixed 8-byte keys.
//!
//! An SQF symbol is 8 bytes of printable ASCII, right-padded with spaces. Read
//! as a little-endian `u64` it is a key that compares and hashes as one integer,
//! so the hot path never touches a string.

use std::fmt;

/// Length of a symbol on the wire, in bytes.
pub const SYMBOL_LEN: usize = 8;

/// An SQF symbol: the 8 wire bytes as a little-endian `u64`.
///
/// Only valid symbols are constructed (see [`Symbol::from_wire`]), so the
/// value is never zero: zero can mark an empty slot.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Symbol(u64);

impl Symbol {
    /// Validates 8 wire bytes: printable ASCII (`0x21..=0x7E`) right-padded
    /// with spaces, at least one non-space byte, no space before a non-space.
    #[inline]
    pub fn from_wire(bytes: [u8; SYMBOL_LEN]) -> Option<Symbol> {
        let mut seen_space = false;
        for &b in &bytes {
            match b {
                b' ' => seen_space = true,
                0x21..=0x7e if !seen_space => {}
                _ => return None,
            }
        }
        if bytes[0] == b' ' {
            return None;
        }
        Some(Symbol(u64::from_le_bytes(bytes)))
    }

    /// Builds a symbol from wire bytes the caller has already validated with
    /// [`Symbol::from_wire`] (the decoder checks whole packets first).
    #[inline]
    pub(crate) fn from_checked(bytes: [u8; SYMBOL_LEN]) -> Symbol {
        debug_assert!(Symbol::from_wire(bytes).is_some());
        Symbol(u64::from_le_bytes(bytes))
    }

    /// Parses a symbol as people write it (`"EURUSD"`): 1 to 8 printable
    /// ASCII characters without spaces.
    pub fn parse(name: &str) -> Option<Symbol> {
        let raw = name.as_bytes();
        if raw.is_empty() || raw.len() > SYMBOL_LEN || raw.contains(&b' ') {
            return None;
        }
        let mut bytes = [b' '; SYMBOL_LEN];
        bytes[..raw.len()].copy_from_slice(raw);
        Symbol::from_wire(bytes)
    }

    /// Rebuilds a symbol from its key, checking it is a valid symbol.
    pub fn from_key(key: u64) -> Option<Symbol> {
        Symbol::from_wire(key.to_le_bytes())
    }

    /// The key: the wire bytes as a little-endian `u64`. Never zero.
    #[inline]
    pub fn key(self) -> u64 {
        self.0
    }

    /// The wire bytes, space padded.
    pub fn to_wire(self) -> [u8; SYMBOL_LEN] {
        self.0.to_le_bytes()
    }

    /// Length of the name without its padding, in bytes (1 to 8).
    fn name_len(self) -> usize {
        let bytes = self.to_wire();
        bytes.iter().position(|&b| b == b' ').unwrap_or(SYMBOL_LEN)
    }
}

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.to_wire();
        // Valid symbols are printable ASCII, hence UTF-8.
        f.write_str(std::str::from_utf8(&bytes[..self.name_len()]).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Symbol({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_symbols() {
        assert!(Symbol::from_wire(*b"EURUSD  ").is_some());
        assert!(Symbol::from_wire(*b"ABCDEFGH").is_some());
        assert!(Symbol::from_wire(*b"!       ").is_some());
        assert!(Symbol::from_wire(*b"~~~~~~~~").is_some());
    }

    #[test]
    fn invalid_symbols() {
        assert!(Symbol::from_wire(*b"        ").is_none(), "all spaces");
        assert!(Symbol::from_wire(*b" EURUSD ").is_none(), "leading space");
        assert!(
            Symbol::from_wire(*b"EUR USD ").is_none(),
            "space before non-space"
        );
        assert!(Symbol::from_wire(*b"EURUSD\0\0").is_none(), "NUL padding");
        assert!(Symbol::from_wire(*b"EURUSD\x7f ").is_none(), "DEL");
        assert!(Symbol::from_wire(*b"EUR\x80SD  ").is_none(), "non-ASCII");
        assert!(Symbol::from_wire(*b"EURUSD \t").is_none(), "tab");
    }

    #[test]
    fn parse_and_display_round_trip() {
        let s = Symbol::parse("XAUUSD").unwrap();
        assert_eq!(s.to_wire(), *b"XAUUSD  ");
        assert_eq!(s.to_string(), "XAUUSD");
        assert_eq!(Symbol::from_key(s.key()), Some(s));
        assert_ne!(s.key(), 0);
        assert!(Symbol::parse("").is_none());
        assert!(Symbol::parse("ABCDEFGHI").is_none());
        assert!(Symbol::parse("EUR USD").is_none());
        assert!(Symbol::parse("EURUSD ").is_none());
    }
}
